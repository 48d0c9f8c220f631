// The wrapping prefix sums of an array's lines along one axis, block by block: the
// difference inverse of lossless.wgsl and bounded.wgsl. CPU twin: gpu/cpu_twin/line_sum.rs;
// gpu/line_sum.rs plans the carries and the dispatches. The shader that includes this file
// declares `words` (array<u32>, read_write), where the values and the carries live.
//
// A line is cut into blocks of LINE_BLOCK values. Stage 0 sums within each block (one item
// per block), stage 1 sums the blocks' last values into each block's carry (one item per
// line of more than one block), stage 2 adds each block's carry to it (one item per block
// after the first). No invocation loops over more than one block's values or one line's
// blocks, so llvmpipe (lavapipe), which ends an invocation's loops after 65535 iterations
// in all, sums lines of up to 2^28 values.

// One stage of the sums along padded axis `axis` of the array whose `shape` (padded to 4
// axes) has its values from word `at` of `words` (C order) and its carries (one per block
// of each line, line-major) from word `carry`. Items `start`, `start + step`, ... go to
// this invocation.
fn sum_lines(shape_in: array<u32, 4>, axis: u32, at: u32, carry: u32, stage: u32,
             start: u32, step: u32) {
    var shape = shape_in;
    var stride = 1u;
    for (var b = axis + 1u; b < 4u; b++) {
        stride *= shape[b];
    }
    let len = shape[axis];
    let lines = shape[0] * shape[1] * shape[2] * shape[3] / len;
    let nb = (len + LINE_BLOCK - 1u) / LINE_BLOCK;
    if (stage == 1u) {
        if (nb == 1u) {
            return;
        }
        for (var line = start; line < lines; line += step) {
            let first = at + (line / stride) * len * stride + line % stride;
            var c = 0u;
            for (var blk = 1u; blk < nb; blk++) {
                c += words[first + (blk * LINE_BLOCK - 1u) * stride];
                words[carry + line * nb + blk] = c;
            }
        }
        return;
    }
    for (var item = start; item < lines * nb; item += step) {
        let line = item / nb;
        let blk = item % nb;
        let first = at + (line / stride) * len * stride + line % stride;
        let k0 = blk * LINE_BLOCK;
        let k1 = min(len, k0 + LINE_BLOCK);
        if (stage == 0u) {
            var s = words[first + k0 * stride];
            for (var k = k0 + 1u; k < k1; k++) {
                let i = first + k * stride;
                s += words[i];
                words[i] = s;
            }
        } else if (blk > 0u) {
            let c = words[carry + item];
            for (var k = k0; k < k1; k++) {
                words[first + k * stride] += c;
            }
        }
    }
}
