// Decode stage for interleaved output (CPU twin: `gpu::cpu_twin::decode`): the decode body
// of shared/decode_streams.wgsl, with samples going to the intermediate buffer `samples`
// (one u32 per sample, HWC), which store_interleaved.wgsl packs into the output layout.

@group(0) @binding(0) var<storage, read> input_words: array<u32>;
@group(0) @binding(1) var<storage, read> sizes: array<u32>;
@group(0) @binding(2) var<storage, read> offsets: array<u32>;
@group(0) @binding(3) var<storage, read> images: array<ImageInfo>;
@group(0) @binding(4) var<storage, read_write> samples: array<u32>;
@group(0) @binding(5) var<storage, read_write> errors: array<atomic<u32>>;
@group(0) @binding(6) var<uniform> params: Params;

fn put_sample(img: ImageInfo, ch: u32, y: u32, x: u32, v: u32) {
    samples[img.sample_base + (y * img.width + x) * img.channels + ch] = v;
}

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    decode_streams(wid, nwg, lid);
}
