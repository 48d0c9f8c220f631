// Output layout `OutputLayout::F32Chw` (CPU twin: `gpu::cpu_twin::F32Chw`): each sample
// written straight to its own output element, out_base + c * H * W + y * W + x, normalised
// as `Normalize::apply` in src/layout.rs does (the same f32 operations in the same order):
// (x / max - mean[c]) / std[c] with max = 2^depth - 1 (mean 0, std 1 gives x / max in
// [0, 1]). The alignment padding between images is cleared by the host (the output buffer is
// zeroed before the first chunk). Assembled after the shared decode bodies and before
// decode.wgsl.

@group(0) @binding(4) var<storage, read_write> out_values: array<f32>;

// Both bodies write each sample at once (`put_sample`, `row_sample`); `put_word` is never
// called.
const OUTPUT_PACKED: bool = false;

fn put_word(img: ImageInfo, w: u32, value: u32, whole: bool) {}

// The version-2 body's samples: each to its place at once.
fn row_sample(img: ImageInfo, ch: u32, y: u32, x: u32, stored: u32) {
    put_sample(img, ch, y, x, stored);
}

// Samples are already in place: nothing to finish after a row.
fn end_row(img: ImageInfo, y: u32, x0: u32, pw: u32, lid: u32) {}

fn put_sample(img: ImageInfo, ch: u32, y: u32, x: u32, stored: u32) {
    let v = dequantize(img, stored);
    let hw = img.width * img.height;
    let max_value = f32((1u << img.depth) - 1u);
    out_values[img.out_base + ch * hw + y * img.width + x] =
        (f32(v) / max_value - params.mean[ch]) / params.stdev[ch];
}
