// Decode stage for interleaved output (CPU twins: `gpu::cpu_twin::decode` for entry point
// `main`, `gpu::cpu_twin::decode_compact` for `main_compact`): the decode bodies of
// shared/decode_streams.wgsl (version 1) and shared/decode_compact.wgsl (version 2), with each
// sample ORed straight into its output word, the layout of the CPU decoder (HWC; 8-bit
// samples four to a u32 word, 16-bit samples two to a word, little-endian). No intermediate
// buffer and no store pass. Streams of one image share output words, hence the atomics; the
// host clears the output buffer before the batch's first chunk, so the bytes of each word
// combine correctly (and the padding between images is 0).

@group(0) @binding(0) var<storage, read> input_words: array<u32>;
@group(0) @binding(1) var<storage, read> sizes: array<u32>;
@group(0) @binding(2) var<storage, read> offsets: array<u32>;
@group(0) @binding(3) var<storage, read> images: array<ImageInfo>;
@group(0) @binding(4) var<storage, read_write> out_words: array<atomic<u32>>;
@group(0) @binding(5) var<storage, read_write> errors: array<atomic<u32>>;
@group(0) @binding(6) var<uniform> params: Params;

fn put_sample(img: ImageInfo, ch: u32, y: u32, x: u32, v: u32) {
    let s = (y * img.width + x) * img.channels + ch;
    if (img.depth == 8u) {
        // Byte s of the image: word s / 4, byte s % 4.
        atomicOr(&out_words[img.out_base + s / 4u], v << (8u * (s % 4u)));
    } else {
        // Bytes 2s, 2s + 1 of the image: word s / 2, half s % 2.
        atomicOr(&out_words[img.out_base + s / 2u], v << (16u * (s % 2u)));
    }
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
