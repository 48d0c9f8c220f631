// Training augmentation of one decoded image (CPU twin: `loader::Augment::apply`, the same
// f32 operations in the same order): random resized crop + bilinear resize (half-pixel
// centres, clamped taps) + horizontal flip + normalisation, written as f32 CHW into the batch
// tensor. One dispatch per image; each invocation computes output elements with the grid's
// stride. `src` is the image's range of the decoded batch (interleaved, 8-bit samples four to
// a u32 word, 16-bit two, little-endian); `dst` is the whole batch tensor.
//
// WGSL may contract a * b + c into a fused multiply-add and allows its division 2.5 ulp, so
// values agree with the CPU within a small tolerance (see the GPU tests), not bit for bit.

struct AugmentJob {
    width: u32,        // source image
    height: u32,
    channels: u32,
    depth: u32,
    crop_x: u32,
    crop_y: u32,
    crop_w: u32,
    crop_h: u32,
    out_w: u32,
    out_h: u32,
    out_c: u32,
    flip: u32,
    dst_offset: u32,   // in f32 elements
    source_channels: u32, // output channel c reads source channel (this >> (8c)) & 0xff
    pad0: u32,
    pad1: u32,
    mean: vec4<f32>,
    std_dev: vec4<f32>,
}

@group(0) @binding(0) var<uniform> job: AugmentJob;
@group(0) @binding(1) var<storage, read> src: array<u32>;
@group(0) @binding(2) var<storage, read_write> dst: array<f32>;

const AUGMENT_WG: u32 = 64u;

fn sample_at(x: u32, y: u32, c: u32) -> f32 {
    let s = (y * job.width + x) * job.channels + c;
    if (job.depth == 8u) {
        return f32((src[s / 4u] >> (8u * (s % 4u))) & 0xffu);
    }
    return f32((src[s / 2u] >> (16u * (s % 2u))) & 0xffffu);
}

// Source coordinate of output index o along one axis: (low tap, high tap, weight of high).
struct Tap {
    lo: u32,
    hi: u32,
    f: f32,
}

fn tap(o: u32, start: u32, len: u32, src_len: u32, out_len: u32) -> Tap {
    let scale = f32(len) / f32(out_len);
    let s = clamp(f32(start) + (f32(o) + 0.5) * scale - 0.5, 0.0, f32(src_len - 1u));
    let lo = u32(floor(s));
    return Tap(lo, min(lo + 1u, src_len - 1u), s - f32(lo));
}

@compute @workgroup_size(64)
fn augment(@builtin(global_invocation_id) gid: vec3<u32>,
           @builtin(num_workgroups) nwg: vec3<u32>) {
    let plane = job.out_w * job.out_h;
    let total = plane * job.out_c;
    let max_value = f32((1u << job.depth) - 1u);
    for (var i = gid.x; i < total; i += nwg.x * AUGMENT_WG) {
        let c = i / plane;
        let oy = (i % plane) / job.out_w;
        let ox0 = i % job.out_w;
        let ox = select(ox0, job.out_w - 1u - ox0, job.flip == 1u);
        let tx = tap(ox, job.crop_x, job.crop_w, job.width, job.out_w);
        let ty = tap(oy, job.crop_y, job.crop_h, job.height, job.out_h);
        let sc = (job.source_channels >> (8u * c)) & 0xffu;
        let a0 = sample_at(tx.lo, ty.lo, sc);
        let a1 = sample_at(tx.hi, ty.lo, sc);
        let b0 = sample_at(tx.lo, ty.hi, sc);
        let b1 = sample_at(tx.hi, ty.hi, sc);
        let top = a0 + (a1 - a0) * tx.f;
        let bottom = b0 + (b1 - b0) * tx.f;
        let v = top + (bottom - top) * ty.f;
        dst[job.dst_offset + i] = (v / max_value - job.mean[c]) / job.std_dev[c];
    }
}
