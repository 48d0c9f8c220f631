// Error-bounded float arrays of 1 to 4 axes (SPEC.md, "Error-bounded float arrays", `.l3f`
// version 3): decode on the GPU, bit for bit the CPU decoder's output. CPU twin:
// gpu/cpu_twin/bounded.rs (same names, same steps); field/bounded/gpu.rs checks every file on
// the CPU and builds the tables read here.
//
// Stages, in one submission (`current`, bound at a dynamic offset per dispatch, says which
// round, axis and stage, or pass):
// 1. `decode_segments`, one dispatch per round: one invocation per segment (table
//    `segments`) decodes up to SEGMENT_ROUND of its values a round through its 2^11-entry
//    table in `tables` into `words` as residuals `k` (shared/segments.wgsl: singles, pairs,
//    zero runs; i32 bits); a stream error ORs a flag into the file's slot.
// 2. Differences: `undiff`, one dispatch per (padded) axis some array is differenced
//    along and stage of shared/line_sum.wgsl's blocked prefix sums (the bins; stages 1 and
//    2 only where a line has more than one block). Workgroup y is the array.
//    Lattice: `lattice_pass`, one dispatch per pass (`current.pass_index`: value 0, then
//    levels coarse to fine, axes in the array's order): one invocation per target predicts
//    it from lattice values of earlier passes and writes `P + S k` into `output` (C order).
// 3. `finish`: one invocation per value: `offset + f32(x) * unit`, then the runs.
// Every loop has an explicit bound (a round's values, a block's values, a line's blocks,
// the grid stride over a count); WGSL clamps indices on top. llvmpipe (lavapipe) ends an
// invocation's loops after 65535 iterations in all: segments go in rounds and prefix-sum
// lines in blocks (up to 2^28 values a line), so no invocation comes near that while a
// dispatch has an invocation per segment or item (up to 2^22).

// `LosslessSegment`, `BoundedArray`, `BoundedPass` and `BoundedStep` are generated from
// src/gpu/abi.rs (gpu::shaders); `read_bits32` and `read_byte` come from shared/bits.wgsl,
// `decode_round` from shared/segments.wgsl, `sum_lines` from shared/line_sum.wgsl, bindings
// 0 to 4 (`tables`: the decode tables, then the exception runs), `decode_segments`, `undiff`
// and `run_bits` from shared/float_arrays.wgsl.

@group(0) @binding(5) var<storage, read> arrays: array<BoundedArray>;
@group(0) @binding(6) var<storage, read> passes: array<BoundedPass>;
@group(0) @binding(7) var<storage, read_write> output: array<u32>;
@group(0) @binding(8) var<uniform> current: BoundedStep;

const ARRAY_WG: u32 = BOUNDED_WG;
// The pair tokens.
const PAIR_TOKENS: u32 = BOUNDED_RUN0 - BOUNDED_PAIR0;

// `undiff` sums the differences arrays along the padded axes they are differenced along.
fn differenced(a: BoundedArray, axis: u32) -> bool {
    return a.predictor == 1u && ((a.axes >> axis) & 1u) != 0u;
}

// The exception runs follow the decode tables.
fn run_word(j: u32) -> u32 {
    return tables[j];
}

// Lattice value `i` of the array whose values start at word `at` of `output`.
fn lattice(at: u32, i: u32) -> i32 {
    return bitcast<i32>(output[at + i]);
}

// The prediction of the target at index `i`, coordinate `c` along the pass's axis: cubic
// `(-a + 9b + 9c - d + 8) >> 4` where both outer neighbours exist in a cubic pass, else
// linear `(b + c + 1) >> 1`, else (no right neighbour) the left one. Lattice values are
// below 2^23, so no i32 overflows.
fn predict(at: u32, p: BoundedPass, i: u32, c: u32) -> i32 {
    let b = lattice(at, i - p.dist);
    if (p.len - c <= p.stride) {
        return b;
    }
    let cc = lattice(at, i + p.dist);
    let s = p.stride;
    if (p.kind == PASS_CUBIC && s <= p.len / 3u && c >= 3u * s && p.len - c > 3u * s) {
        let a = lattice(at, i - 3u * p.dist);
        let d = lattice(at, i + 3u * p.dist);
        return (-a + 9i * b + 9i * cc - d + 8i) >> 4u;
    }
    return (b + cc + 1i) >> 1u;
}

@compute @workgroup_size(ARRAY_WG)
fn lattice_pass(@builtin(global_invocation_id) gid: vec3<u32>,
                @builtin(num_workgroups) nwg: vec3<u32>) {
    if (gid.y >= arrayLength(&arrays)) {
        return;
    }
    let a = arrays[gid.y];
    if (a.predictor != 0u || current.pass_index >= a.pass_count) {
        return;
    }
    let p = passes[a.passes + current.pass_index];
    var bad = false;
    for (var t = gid.x; t < p.count; t += grid_width(nwg)) {
        var r = t;
        let t3 = r % p.g3;
        r /= p.g3;
        let t2 = r % p.g2;
        r /= p.g2;
        let t1 = r % p.g1;
        let t0 = r / p.g1;
        let i = p.base + t0 * p.istep0 + t1 * p.istep1 + t2 * p.istep2 + t3 * p.istep3;
        var tc = array<u32, 4>(t0, t1, t2, t3);
        let c = p.stride + 2u * p.stride * tc[p.axis];
        let k = bitcast<i32>(words[a.words + p.stream + t]);
        var pred = 0i;
        if (p.kind != PASS_ORIGIN) {
            pred = predict(a.out_word, p, i, c);
        }
        // |k| >= 2^26 would put `x` past the limit anyway; refusing it first keeps the
        // product below in i32.
        let big = k >= (1i << 26u) || k <= -(1i << 26u);
        let x = pred + i32(p.step) * select(k, 0i, big);
        if (big || abs(x) >= i32(a.limit)) {
            bad = true;
        }
        output[a.out_word + i] = bitcast<u32>(x);
    }
    if (bad) {
        atomicOr(&errors[a.file], ERR_VALUE);
    }
}

// Value `i` of array `a` as f32 bits, and whether its bin is past the limit (y: 1).
fn value_bits(a: BoundedArray, i: u32) -> vec2<u32> {
    var x = 0i;
    var bad = 0u;
    if (a.predictor == 0u) {
        x = bitcast<i32>(output[a.out_word + i]);
    } else {
        let q = words[a.words + i];
        bad = select(0u, 1u, q >= BOUNDED_MAX_BINS);
        x = bitcast<i32>(q);
    }
    var v = bitcast<u32>(bitcast<f32>(a.offset_bits) + f32(x) * bitcast<f32>(a.unit_bits));
    // The exception run that covers `i`, if any, overrides the value (the check above still
    // counts, as on the CPU).
    v = run_bits(a.runs, a.run_count, i, v);
    return vec2<u32>(v, bad);
}

@compute @workgroup_size(ARRAY_WG)
fn finish(@builtin(global_invocation_id) gid: vec3<u32>,
          @builtin(num_workgroups) nwg: vec3<u32>) {
    if (gid.y >= arrayLength(&arrays)) {
        return;
    }
    let a = arrays[gid.y];
    var bad = 0u;
    for (var i = gid.x; i < a.count; i += grid_width(nwg)) {
        let vb = value_bits(a, i);
        output[a.out_word + i] = vb.x;
        bad |= vb.y;
    }
    if (bad != 0u) {
        atomicOr(&errors[a.file], ERR_VALUE);
    }
}
