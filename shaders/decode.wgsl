// Decode entry points, shared by every output layout (CPU twins: `gpu::cpu_twin::
// decode_streams` for `main`, `gpu::cpu_twin::decode_compact_patches` for `main_compact`).
// The shader assembler (`gpu::shaders::source`) puts before this file the generated prelude,
// the shared decode bodies (shared/decode_streams.wgsl for version 1, shared/decode_compact.wgsl
// for version 2), and one output layout's file from output/ (its output binding 4 and the
// functions the bodies hand samples or packed rows to). No intermediate buffer and no store
// pass: each sample or row goes straight to its place in the output.

@group(0) @binding(0) var<storage, read> input_words: array<u32>;
@group(0) @binding(1) var<storage, read> sizes: array<u32>;
@group(0) @binding(2) var<storage, read> offsets: array<u32>;
@group(0) @binding(3) var<storage, read> images: array<ImageInfo>;
// Binding 4, the output, is declared by the layout's file in output/.
@group(0) @binding(5) var<storage, read_write> errors: array<atomic<u32>>;
@group(0) @binding(6) var<uniform> params: Params;

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
