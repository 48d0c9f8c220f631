// Training augmentation of one decoded image (CPU twin: `loader::Augment::apply`, the same
// f32 operations in the same order): random resized crop + bilinear resize (half-pixel
// centres, clamped taps) + horizontal flip, or the general mapping with quarter turns, a small
// rotation and padding, + normalisation + Gaussian noise, written as f32 CHW into the batch
// tensor. One dispatch per batch (`gpu::jobs`): each workgroup finds its image's job in
// `jobs` by its number, and its invocations compute the image's output elements with the
// stride of the job's workgroups. `src` is the dispatch's range of the decoded batch
// (interleaved, 8-bit samples four to a u32 word, 16-bit two, little-endian; the image from
// word `job.src_offset`); `dst` the dispatch's range of the batch tensor.
//
// WGSL may contract a * b + c into a fused multiply-add and allows its division 2.5 ulp, so
// values agree with the CPU within a small tolerance (see the GPU tests), not bit for bit.

// `AugmentJob` is generated from src/gpu/abi.rs (gpu::shaders).

@group(0) @binding(0) var<storage, read> jobs: array<AugmentJob>;
@group(0) @binding(1) var<storage, read> src: array<u32>;
@group(0) @binding(2) var<storage, read_write> dst: array<u32>;

// The job of this workgroup, read from `jobs` on entry.
var<private> job: AugmentJob;

// AUGMENT_WG comes from the generated prelude (gpu::shaders).

fn sample_at(x: u32, y: u32, c: u32) -> f32 {
    let s = (y * job.width + x) * job.channels + c;
    if (job.depth == 8u) {
        return f32((src[job.src_offset + s / 4u] >> (8u * (s % 4u))) & 0xffu);
    }
    return f32((src[job.src_offset + s / 2u] >> (16u * (s % 2u))) & 0xffffu);
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

// Wellons' lowbias32 (`hash32` on the CPU).
fn hash32(x_in: u32) -> u32 {
    var x = x_in;
    x ^= x >> 16u;
    x *= 0x7feb352du;
    x ^= x >> 15u;
    x *= 0x846ca68bu;
    x ^= x >> 16u;
    return x;
}

// Standard normal value for element i (`gaussian` on the CPU).
fn gaussian(seed: u32, i: u32) -> f32 {
    let h1 = hash32(seed ^ hash32(i));
    let h2 = hash32(h1 ^ 0x9e3779b9u);
    let u1 = f32((h1 >> 8u) + 1u) * (1.0 / 16777216.0);
    let u2 = f32(h2 >> 8u) * (1.0 / 16777216.0);
    return sqrt(-2.0 * log(u1)) * cos(6.2831855 * u2);
}

// The general mapping (`Augment::map_into` on the CPU): output pixel (ox, oy) of channel c,
// already flipped, through the quarter turns and the rotation into source coordinates.
fn mapped(ox: u32, oy: u32, sc: u32, c: u32, max_value: f32) -> f32 {
    let u0 = (f32(ox) + 0.5) / f32(job.out_w);
    let v0 = (f32(oy) + 0.5) / f32(job.out_h);
    var u = u0;
    var v = v0;
    if (job.rot90 == 1u) {
        u = v0;
        v = 1.0 - u0;
    } else if (job.rot90 == 2u) {
        u = 1.0 - u0;
        v = 1.0 - v0;
    } else if (job.rot90 == 3u) {
        u = 1.0 - v0;
        v = u0;
    }
    let cw = f32(job.crop_w);
    let ch = f32(job.crop_h);
    let pad = f32(job.padding);
    let dx = (u - 0.5) * cw;
    let dy = (v - 0.5) * ch;
    let sx = (f32(job.crop_x) - pad) + 0.5 * cw + (job.cos_a * dx - job.sin_a * dy) - 0.5;
    let sy = (f32(job.crop_y) - pad) + 0.5 * ch + (job.sin_a * dx + job.cos_a * dy) - 0.5;
    let wf = f32(job.width);
    let hf = f32(job.height);
    if (!(sx >= -0.5 && sx <= wf - 0.5 && sy >= -0.5 && sy <= hf - 0.5)) {
        return (job.fill - job.mean[c]) / job.std_dev[c];
    }
    let sxc = clamp(sx, 0.0, wf - 1.0);
    let syc = clamp(sy, 0.0, hf - 1.0);
    let x0 = u32(floor(sxc));
    let y0 = u32(floor(syc));
    let x1 = min(x0 + 1u, job.width - 1u);
    let y1 = min(y0 + 1u, job.height - 1u);
    let fx = sxc - f32(x0);
    let fy = syc - f32(y0);
    return (bilinear(x0, x1, fx, y0, y1, fy, sc) / max_value - job.mean[c]) / job.std_dev[c];
}

// Bilinear interpolation of source channel sc between columns x0, x1 (weight fx of x1) and
// rows y0, y1 (weight fy of y1) (`bilinear` on the CPU: the same operations in order).
fn bilinear(x0: u32, x1: u32, fx: f32, y0: u32, y1: u32, fy: f32, sc: u32) -> f32 {
    let a0 = sample_at(x0, y0, sc);
    let a1 = sample_at(x1, y0, sc);
    let b0 = sample_at(x0, y1, sc);
    let b1 = sample_at(x1, y1, sc);
    let top = a0 + (a1 - a0) * fx;
    let bottom = b0 + (b1 - b0) * fx;
    return top + (bottom - top) * fy;
}

@compute @workgroup_size(AUGMENT_WG)
fn augment(@builtin(workgroup_id) wid: vec3<u32>,
           @builtin(num_workgroups) nwg: vec3<u32>,
           @builtin(local_invocation_index) lid: u32) {
    let first = job_invocation(wid, nwg, lid, AUGMENT_WG);
    if (first == NO_JOB) {
        return;
    }
    let stride = job.wg_count * AUGMENT_WG;
    let total = job.out_w * job.out_h * job.out_c;
    if (job.half == 1u) {
        // f16: each invocation owns whole words (two values), so no two write one word.
        for (var w = first; w < (total + 1u) / 2u; w += stride) {
            var hi = 0.0;
            if (2u * w + 1u < total) {
                hi = value_at(2u * w + 1u);
            }
            let lo = f16_bits(bitcast<u32>(value_at(2u * w)));
            dst[job.dst_offset + w] = lo | (f16_bits(bitcast<u32>(hi)) << 16u);
        }
        return;
    }
    for (var i = first; i < total; i += stride) {
        dst[job.dst_offset + i] = bitcast<u32>(value_at(i));
    }
}

// Output element i (channel-major) of the image: sampled, normalised, noised.
fn value_at(i: u32) -> f32 {
    let plane = job.out_w * job.out_h;
    let max_value = f32((1u << job.depth) - 1u);
    {
        let c = i / plane;
        let oy = (i % plane) / job.out_w;
        let ox0 = i % job.out_w;
        let ox = select(ox0, job.out_w - 1u - ox0, job.flip == 1u);
        let sc = (job.source_channels >> (8u * c)) & 0xffu;
        var value: f32;
        if (job.general == 1u) {
            value = mapped(ox, oy, sc, c, max_value);
        } else {
            let tx = tap(ox, job.crop_x, job.crop_w, job.width, job.out_w);
            let ty = tap(oy, job.crop_y, job.crop_h, job.height, job.out_h);
            let v = bilinear(tx.lo, tx.hi, tx.f, ty.lo, ty.hi, ty.f, sc);
            value = (v / max_value - job.mean[c]) / job.std_dev[c];
        }
        if (job.noise_seed != 0u) {
            value += job.noise_std * gaussian(job.noise_seed, i) / job.std_dev[c];
        }
        return value;
    }
}
