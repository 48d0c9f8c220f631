//! CPU twin of `shaders/prefix_sum.wgsl`: the exclusive prefix sum of the batch's stream
//! sizes.

/// Twin of `prefix_sum.wgsl` (`scan_blocks` + `add_sums` over all levels): the exclusive
/// prefix sum of `sizes`, wrapping on overflow like u32 arithmetic in WGSL.
pub(crate) fn prefix_sum(sizes: &[u32]) -> Vec<u32> {
    let mut acc = 0u32;
    sizes
        .iter()
        .map(|&s| {
            let o = acc;
            acc = acc.wrapping_add(s);
            o
        })
        .collect()
}
