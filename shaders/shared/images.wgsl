// Helpers over the per-image table and the per-dispatch parameters shared by the decode
// stages. Their structs `ImageInfo` and `Params` are generated from src/gpu/abi.rs
// (`gpu::shaders::source`); decode.wgsl declares `images` and `params`.

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

// log2 of the samples per interleaved output word (twin: `gpu::cpu_twin::word_shift`): 2 for
// 8-bit samples, 1 for 16-bit ones.
fn word_shift(img: ImageInfo) -> u32 {
    return select(1u, 2u, img.depth == 8u);
}

// Samples first .. end (x, y of the result) of pixel row `y`, columns x0 .. x0 + pw of `img`
// in its interleaved (HWC) output (twin: `gpu::cpu_twin::row_span`).
fn row_span(img: ImageInfo, y: u32, x0: u32, pw: u32) -> vec2<u32> {
    let channels = min(img.channels, MAX_CHANNELS);
    let first = (y * img.width + x0) * channels;
    return vec2<u32>(first, first + pw * channels);
}

// Whether output word `w` (of 1 << shift samples) lies wholly inside `span`.
fn word_whole(w: u32, shift: u32, span: vec2<u32>) -> bool {
    return (w << shift) >= span.x && ((w + 1u) << shift) <= span.y;
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
