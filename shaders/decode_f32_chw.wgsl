// Decode stage for planar f32 output (CPU twins: `gpu::cpu_twin::decode_f32_chw` for entry
// point `main`, `gpu::cpu_twin::decode_f32_chw_compact` for `main_compact`): the decode
// bodies of shared/decode_streams.wgsl (version 1) and shared/decode_compact.wgsl (version 2),
// with each sample written straight to its own output element, out_base + c * H * W + y * W
// + x, normalised: (x / max - mean[c]) / std[c] with max = 2^depth - 1 (mean 0, std 1 gives
// x / max in [0, 1]). No intermediate buffer and no store pass; the alignment padding between
// images is cleared by the host (the output buffer is zeroed before the first chunk).

@group(0) @binding(0) var<storage, read> input_words: array<u32>;
@group(0) @binding(1) var<storage, read> sizes: array<u32>;
@group(0) @binding(2) var<storage, read> offsets: array<u32>;
@group(0) @binding(3) var<storage, read> images: array<ImageInfo>;
@group(0) @binding(4) var<storage, read_write> out_values: array<f32>;
@group(0) @binding(5) var<storage, read_write> errors: array<atomic<u32>>;
@group(0) @binding(6) var<uniform> params: Params;

fn put_sample(img: ImageInfo, ch: u32, y: u32, x: u32, v: u32) {
    let hw = img.width * img.height;
    let max_value = f32((1u << img.depth) - 1u);
    out_values[img.out_base + ch * hw + y * img.width + x] =
        (f32(v) / max_value - params.mean[ch]) / params.stdev[ch];
}

// Two entry points, one per format version, dispatched separately over their images'
// workgroups (the host puts version-1 images first in the image table), so that each
// pipeline reserves only its own body's workgroup memory.

// Version-1 images.
@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let wg = dispatched_workgroup(wid, nwg);
    if (wg != NO_WORKGROUP) {
        decode_streams(wg, images[find_image_by_workgroup(wg)], lid);
    }
}

// Version-2 images: one workgroup per patch.
@compute @workgroup_size(WG)
fn main_compact(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let wg = dispatched_workgroup(wid, nwg);
    if (wg != NO_WORKGROUP) {
        decode_compact_patch(wg, images[find_image_by_workgroup(wg)], lid);
    }
}
