//! The plan of `shaders/shared/line_sum.wgsl`, the blocked prefix sums of arrays' lines that
//! `lossless.wgsl` and `bounded.wgsl` run as their difference inverse: the words of block
//! carries an array needs ([`carry_words`]) and the dispatches a batch takes
//! ([`line_sum_steps`]): stage 0 for every padded axis some array is differenced along,
//! stages 1 and 2 only where one of its lines there has more than [`LINE_BLOCK`] values,
//! each with as many invocations as its items (blocks or lines), not values.

use super::abi::LINE_BLOCK;

/// Lines along padded axis `axis` of `shape` and blocks of each.
fn lines_and_blocks(shape: [u32; 4], axis: usize) -> (u64, u64) {
    let len = shape[axis] as u64;
    let n: u64 = shape.iter().map(|&d| d as u64).product();
    (n / len.max(1), len.div_ceil(LINE_BLOCK as u64))
}

/// Words of block carries an array of padded `shape` differenced along the padded axes in
/// `axes` (bit `a`: axis `a`; bit `4 + a`: axis `a` a second time) needs: one per block of
/// each line, for the axis with the most (the axes are summed one after another); 0 where no
/// line has more than one block.
pub(crate) fn carry_words(shape: [u32; 4], axes: u32) -> u64 {
    (0..8)
        .filter(|&a| axes >> a & 1 == 1)
        .map(|a| lines_and_blocks(shape, a % 4))
        .filter(|&(_, nb)| nb > 1)
        .map(|(lines, nb)| lines * nb)
        .max()
        .unwrap_or(0)
}

/// One `undiff` dispatch of a batch: the padded axis, the stage and the most items of any
/// array in it (the invocations it needs along x).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LineStep {
    /// The padded axis summed along, plus 4 for a second sum along it (second differences).
    pub axis: u32,
    /// 0 sums within blocks, 1 the carries, 2 adds them.
    pub stage: u32,
    /// Items of the array with the most: blocks (stages 0 and 2) or lines (stage 1).
    pub items: u64,
}

/// Each `undiff` dispatch of a batch of arrays given as (padded shape, differenced axes as
/// [`carry_words`] takes them), in order: the first sums along each axis, then the second.
pub(crate) fn line_sum_steps(
    arrays: impl Iterator<Item = ([u32; 4], u32)> + Clone,
) -> Vec<LineStep> {
    let mut out = Vec::new();
    for axis in 0..8u32 {
        let along = arrays
            .clone()
            .filter(|&(_, axes)| axes >> axis & 1 == 1)
            .map(|(shape, _)| lines_and_blocks(shape, axis as usize % 4));
        let Some(nb) = along.clone().map(|(_, nb)| nb).max() else {
            continue;
        };
        let blocks = along
            .clone()
            .map(|(lines, nb)| lines * nb)
            .max()
            .unwrap_or(0);
        let lines = along
            .filter(|&(_, nb)| nb > 1)
            .map(|(lines, _)| lines)
            .max();
        out.push(LineStep {
            axis,
            stage: 0,
            items: blocks,
        });
        if nb > 1 {
            let lines = lines.unwrap_or(0);
            out.push(LineStep {
                axis,
                stage: 1,
                items: lines,
            });
            out.push(LineStep {
                axis,
                stage: 2,
                items: blocks,
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn carries_and_steps_follow_the_longest_line() {
        let b = LINE_BLOCK;
        // A 2-D array of 3 rows of 2.5 blocks, differenced along both axes: rows need 3
        // carries each, columns (3 values) none.
        let wide = [1, 1, 3, 2 * b + b / 2];
        assert_eq!(carry_words(wide, 0b1100), 9);
        assert_eq!(carry_words(wide, 0b0100), 0);
        assert_eq!(carry_words([1, 1, 1, b], 0b1000), 0);
        assert_eq!(carry_words([1, 1, 1, b + 1], 0b1000), 2);
        let step = |axis, stage, items| LineStep { axis, stage, items };
        assert_eq!(
            line_sum_steps([(wide, 0b1100)].into_iter()),
            vec![
                step(2, 0, (2 * b + b / 2) as u64),
                step(3, 0, 9),
                step(3, 1, 3),
                step(3, 2, 9)
            ]
        );
        // Short lines only: one dispatch per axis, as many items as the most lines; nothing
        // differenced: none.
        let small = [([1, 1, 61, 83], 0b1100), ([1, 1, 1, 5000], 0)];
        assert_eq!(
            line_sum_steps(small.into_iter()),
            vec![step(2, 0, 83), step(3, 0, 61)]
        );
        assert!(line_sum_steps([([1, 1, 1, 9], 0)].into_iter()).is_empty());
    }
}
