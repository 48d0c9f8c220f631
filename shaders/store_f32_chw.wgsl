// Writes planar (CHW) f32 output: (x / max - mean[c]) / std[c] with max = 2^depth - 1
// (mean 0, std 1 gives x / max in [0, 1]). One invocation per output element.
// CPU twin: `gpu::cpu_twin::store_f32_chw`.

@group(0) @binding(0) var<storage, read> samples: array<u32>;
@group(0) @binding(1) var<storage, read> images: array<ImageInfo>;
@group(0) @binding(2) var<storage, read_write> out_values: array<f32>;
@group(0) @binding(3) var<uniform> params: Params;

@compute @workgroup_size(256)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let w = (wid.y * nwg.x + wid.x) * 256u + lid;
    if (w >= params.count) {
        return;
    }
    let img = images[find_image_by_word(w)];
    if (w < img.out_base) {
        // Before the chunk's first band: the previous chunk's output.
        return;
    }
    let e = w - img.out_base;
    let hw = img.width * img.height;
    if (e >= hw * img.channels) {
        // Alignment padding between images.
        out_values[w] = 0.0;
        return;
    }
    let c = e / hw;
    let r = e % hw;
    let v = samples[img.sample_base + r * img.channels + c];
    let max_value = f32((1u << img.depth) - 1u);
    out_values[w] = (f32(v) / max_value - params.mean[c]) / params.stdev[c];
}
