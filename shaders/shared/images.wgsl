// Per-image table and per-dispatch parameters shared by the decode stages
// (mirrors `ImageInfo` / `Params` in src/gpu/abi.rs). decode.wgsl declares `images` and
// `params`.

struct ImageInfo {
    width: u32,
    height: u32,
    channels: u32,
    depth: u32,
    patch_log2: u32,
    // Patches per row of the decoded grid (the image's, or its window's).
    patches_x: u32,
    // First stream of the image in the chunk (chunk-local stream index).
    stream_base: u32,
    stream_count: u32,
    // First output word (u32 or f32) of the image (or band) in the chunk's output binding,
    // and its word count.
    out_base: u32,
    out_words: u32,
    // Index of the image in its batch: its slot in the error-flag buffer.
    image_index: u32,
    // First decode workgroup of the image (version 1: a workgroup decodes 64 / patch_size
    // streams, at least one; version 2: one patch).
    wg_base: u32,
    // Format version of the file: 1 (fast: entry points `main`, `decode_streams`) or 2
    // (compact: entry points `main_compact`, `decode_compact_patch`, one workgroup per patch).
    version: u32,
    // Patch column and row of the first decoded patch (0 unless only a window is decoded):
    // patch p of the entry's streams is at column patch_col0 + p % patches_x, row
    // patch_row0 + p / patches_x.
    patch_col0: u32,
    patch_row0: u32,
    // The file's error bound (0: lossless; see `dequantize`).
    max_error: u32,
}

struct Params {
    // Work items of the dispatch: decode workgroups.
    count: u32,
    image_count: u32,
    // Bytes of stream data in `input_words`.
    input_bytes: u32,
    // Chunk-local index (numbering of `wg_base`) of the dispatch's first workgroup.
    first_workgroup: u32,
    // Per-channel normalisation for output/f32_chw.wgsl: (x / max - mean[c]) / std[c].
    mean: vec4<f32>,
    stdev: vec4<f32>,
}

// Error flag bits ERR_* come from the generated prelude (`gpu::flags` in Rust).

// What `dispatched_workgroup` returns for the spare workgroups of a 2D dispatch.
const NO_WORKGROUP: u32 = 0xffffffffu;

// The chunk-local workgroup this workgroup decodes (twin: `gpu::cpu_twin::workgroups`), or
// NO_WORKGROUP past the dispatch's count (a 2D dispatch rounds up). Uniform across the
// workgroup, so a decode body with barriers may run under a test of it.
fn dispatched_workgroup(wid: vec3<u32>, nwg: vec3<u32>) -> u32 {
    let wg = wid.y * nwg.x + wid.x;
    if (wg >= params.count) {
        return NO_WORKGROUP;
    }
    return params.first_workgroup + wg;
}

// The image decoded by chunk-local workgroup `wg`: the last image with wg_base <= wg.
fn find_image_by_workgroup(wg: u32) -> u32 {
    var lo = 0u;
    var hi = params.image_count;
    while (hi - lo > 1u) {
        let mid = (lo + hi) / 2u;
        if (images[mid].wg_base <= wg) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    return lo;
}

// The value of stored sample `v` of `img` (twin: `crate::quantize::dequantize`): itself for a
// lossless file; for an error-bounded one the centre of bin v, clamped to the sample range.
fn dequantize(img: ImageInfo, v: u32) -> u32 {
    if (img.max_error == 0u) {
        return v;
    }
    let max_value = (1u << img.depth) - 1u;
    let step = 2u * img.max_error + 1u;
    // v <= max_value and step <= max_value, so the product fits u32.
    return min(v * step, max_value);
}
