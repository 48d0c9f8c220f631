// Progressive levels (SPEC.md, "Progressive records"): rebuilding level k of a record from
// decoded payloads. CPU twins: `progressive::interlace::{refine, subsample}` (same names,
// same arithmetic; `gpu::tests` compares them bit for bit).
//
// One dispatch per step for the whole batch (`gpu::jobs`): each workgroup finds its record's
// job in `jobs` by its number. The bindings are ranges of the batch buffers; each record's
// images lie in them from the job's word offsets, interleaved like `output/interleaved.wgsl`
// writes them (8-bit samples four to a u32 word, 16-bit two, little-endian). Each invocation
// owns whole output words and loops over the image's words with the stride of the job's
// workgroups, so no two invocations write the same word and no atomics are needed.
//
// `refine`: `src` = the coarse level (ceil(w/2) x ceil(h/2)), `residual` = the refinement's
// residual image (ceil(w/2) x 3 ceil(h/2): bands H, V, D), `dst` = the fine level (w x h).
// Every fine pixel is computed from `src` and `residual` alone (a D neighbour of an H or V
// pixel is recomputed, not read back), so one pass is enough.
// `subsample`: `src` = a full image of `src_width` columns, `dst` its lattice at `stride`.

// `LevelJob` is generated from src/gpu/abi.rs (gpu::shaders).

@group(0) @binding(0) var<storage, read> jobs: array<LevelJob>;
@group(0) @binding(1) var<storage, read> src: array<u32>;
@group(0) @binding(2) var<storage, read> residual: array<u32>;
@group(0) @binding(3) var<storage, read_write> dst: array<u32>;

// The job of this workgroup, read from `jobs` on entry.
var<private> job: LevelJob;

// BAND_H, BAND_V, BAND_D and LEVELS_WG come from the generated prelude (gpu::shaders).

fn src_sample(s: u32) -> u32 {
    if (job.depth == 8u) {
        return (src[job.src_offset + s / 4u] >> (8u * (s % 4u))) & 0xffu;
    }
    return (src[job.src_offset + s / 2u] >> (16u * (s % 2u))) & 0xffffu;
}

fn residual_sample(s: u32) -> u32 {
    if (job.depth == 8u) {
        return (residual[job.residual_offset + s / 4u] >> (8u * (s % 4u))) & 0xffu;
    }
    return (residual[job.residual_offset + s / 2u] >> (16u * (s % 2u))) & 0xffffu;
}

fn depth_mask() -> u32 {
    return (1u << job.depth) - 1u;
}

// The coarse pixel at fine (even x, even y).
fn coarse_at(x: u32, y: u32, c: u32) -> u32 {
    let cw = (job.width + 1u) / 2u;
    return src_sample(((y / 2u) * cw + x / 2u) * job.channels + c);
}

// The residual of fine pixel (x, y) in `band`.
fn residual_at(band: u32, x: u32, y: u32, c: u32) -> u32 {
    let cw = (job.width + 1u) / 2u;
    let chh = (job.height + 1u) / 2u;
    return residual_sample(((band * chh + y / 2u) * cw + x / 2u) * job.channels + c);
}

// The D pixel at (odd x, odd y): mean of its four diagonal coarse neighbours (past the right or
// bottom edge, the one on the other side) plus its residual (pred_d on the CPU).
fn d_value(x: u32, y: u32, c: u32) -> u32 {
    let xr = select(x - 1u, x + 1u, x + 1u < job.width);
    let yd = select(y - 1u, y + 1u, y + 1u < job.height);
    let p = (coarse_at(x - 1u, y - 1u, c) + coarse_at(xr, y - 1u, c)
        + coarse_at(x - 1u, yd, c) + coarse_at(xr, yd, c) + 2u) >> 2u;
    return (p + residual_at(BAND_D, x, y, c)) & depth_mask();
}

// Mean of a, b and two optional values (mean4 on the CPU): a missing one takes the other's
// value; with both missing, the mean of a and b.
fn mean4(a: u32, b: u32, p_in: u32, has_p: bool, q_in: u32, has_q: bool) -> u32 {
    var p = p_in;
    var q = q_in;
    if (has_p && !has_q) {
        q = p;
    } else if (!has_p && has_q) {
        p = q;
    } else if (!has_p && !has_q) {
        p = a;
        q = b;
    }
    return (a + b + p + q + 2u) >> 2u;
}

fn fine_sample(x: u32, y: u32, c: u32) -> u32 {
    let odd_x = (x & 1u) == 1u;
    let odd_y = (y & 1u) == 1u;
    if (!odd_x && !odd_y) {
        return coarse_at(x, y, c);
    }
    if (odd_x && odd_y) {
        return d_value(x, y, c);
    }
    if (odd_x) {
        // H: coarse left and right, D up and down (pred_h).
        let xr = select(x - 1u, x + 1u, x + 1u < job.width);
        let has_up = y >= 1u;
        let has_down = y + 1u < job.height;
        var up = 0u;
        var down = 0u;
        if (has_up) {
            up = d_value(x, y - 1u, c);
        }
        if (has_down) {
            down = d_value(x, y + 1u, c);
        }
        let p = mean4(coarse_at(x - 1u, y, c), coarse_at(xr, y, c), up, has_up, down, has_down);
        return (p + residual_at(BAND_H, x, y, c)) & depth_mask();
    }
    // V: coarse up and down, D left and right (pred_v).
    let yd = select(y - 1u, y + 1u, y + 1u < job.height);
    let has_left = x >= 1u;
    let has_right = x + 1u < job.width;
    var left = 0u;
    var right = 0u;
    if (has_left) {
        left = d_value(x - 1u, y, c);
    }
    if (has_right) {
        right = d_value(x + 1u, y, c);
    }
    let p = mean4(coarse_at(x, y - 1u, c), coarse_at(x, yd, c), left, has_left, right, has_right);
    return (p + residual_at(BAND_V, x, y, c)) & depth_mask();
}

fn subsample_sample(x: u32, y: u32, c: u32) -> u32 {
    return src_sample(((y * job.stride) * job.src_width + x * job.stride) * job.channels + c);
}

// Output word `w`: its samples (up to 32 / depth), each computed by `refine` or `subsample`.
fn output_word(w: u32, n: u32, per_word: u32, refining: bool) -> u32 {
    var word = 0u;
    for (var k = 0u; k < per_word; k += 1u) {
        let s = w * per_word + k;
        if (s < n) {
            let p = s / job.channels;
            let c = s % job.channels;
            let x = p % job.width;
            let y = p / job.width;
            var v: u32;
            if (refining) {
                v = fine_sample(x, y, c);
            } else {
                v = subsample_sample(x, y, c);
            }
            word |= v << (job.depth * k);
        }
    }
    return word;
}

fn run(wid: vec3<u32>, nwg: vec3<u32>, lid: u32, refining: bool) {
    let first = job_invocation(wid, nwg, lid, LEVELS_WG);
    if (first == NO_JOB) {
        return;
    }
    let n = job.width * job.height * job.channels;
    let per_word = 32u / job.depth;
    let words = (n + per_word - 1u) / per_word;
    let step = job.wg_count * LEVELS_WG;
    for (var w = first; w < words; w += step) {
        dst[job.dst_offset + w] = output_word(w, n, per_word, refining);
    }
}

@compute @workgroup_size(LEVELS_WG)
fn refine(@builtin(workgroup_id) wid: vec3<u32>,
          @builtin(num_workgroups) nwg: vec3<u32>,
          @builtin(local_invocation_index) lid: u32) {
    run(wid, nwg, lid, true);
}

@compute @workgroup_size(LEVELS_WG)
fn subsample(@builtin(workgroup_id) wid: vec3<u32>,
             @builtin(num_workgroups) nwg: vec3<u32>,
             @builtin(local_invocation_index) lid: u32) {
    run(wid, nwg, lid, false);
}
