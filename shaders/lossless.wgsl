// Lossless float arrays (SPEC.md, "Lossless float arrays"): decode on the GPU, bit for bit
// the CPU decoder's output. CPU twin: gpu/cpu_twin/lossless.rs (same names, same steps);
// field/lossless/gpu.rs checks every file on the CPU and builds the tables read here.
//
// Three stages, in one submission (`current`, bound at a dynamic offset per dispatch, says
// which round, axis and stage):
// 1. `decode_segments`, one dispatch per round: one invocation per segment (table
//    `segments`) decodes up to SEGMENT_ROUND of its values a round through its 2^11-entry
//    table in `tables` into `words` as residuals (shared/segments.wgsl: singles and zero
//    runs); a stream error ORs a flag into the file's slot.
// 2. `undiff`, one dispatch per (padded) axis some array is differenced along and stage of
//    shared/line_sum.wgsl's blocked prefix sums (stages 1 and 2 only where a line has more
//    than one block). Workgroup y is the array.
// 3. `finish`: one invocation per output word (one float32, or two 16-bit values with the
//    first in the low half): ordered bits or float-mult to float bits, then the runs.
// Every loop has an explicit bound (a round's values, a block's values, a line's blocks,
// the grid stride over a table's length); WGSL clamps indices on top. llvmpipe (lavapipe)
// ends an invocation's loops after 65535 iterations in all: no invocation of a round, a
// prefix-sum stage or the finish (two values a word, a binary search of the runs) comes
// near that while a dispatch has an invocation per segment, item or word (up to 2^22).

// `LosslessSegment` and `LosslessArray` are generated from src/gpu/abi.rs (gpu::shaders);
// `LosslessStep` too; `read_bits32` and `read_byte` come from shared/bits.wgsl,
// `decode_round` from shared/segments.wgsl, `sum_lines` from shared/line_sum.wgsl.

@group(0) @binding(0) var<storage, read> input_words: array<u32>;
@group(0) @binding(1) var<storage, read> segments: array<LosslessSegment>;
@group(0) @binding(2) var<storage, read> tables: array<u32>;
@group(0) @binding(3) var<storage, read_write> words: array<u32>;
@group(0) @binding(4) var<storage, read_write> errors: array<atomic<u32>>;
@group(0) @binding(5) var<storage, read> arrays: array<LosslessArray>;
@group(0) @binding(6) var<storage, read> runs: array<u32>;
@group(0) @binding(7) var<storage, read_write> output: array<u32>;
@group(0) @binding(8) var<uniform> current: LosslessStep;

// Invocations along x of a grid dispatch.
fn grid_width(nwg: vec3<u32>) -> u32 {
    return nwg.x * LOSSLESS_WG;
}

// Round `current.round` of every segment: `decode_round` (shared/segments.wgsl).
@compute @workgroup_size(LOSSLESS_WG)
fn decode_segments(@builtin(global_invocation_id) gid: vec3<u32>,
                   @builtin(num_workgroups) nwg: vec3<u32>) {
    let n = arrayLength(&segments);
    for (var g = gid.x; g < n; g += grid_width(nwg)) {
        decode_round(segments[g], current.round, 0u);
    }
}

// The array's shape padded to 4 axes.
fn padded_shape(a: LosslessArray) -> array<u32, 4> {
    return array<u32, 4>(a.shape0, a.shape1, a.shape2, a.shape3);
}

// One stage (`current.stage`) of the wrapping prefix sums along padded axis `current.axis`
// of array `gid.y`: `sum_lines` (shared/line_sum.wgsl).
@compute @workgroup_size(LOSSLESS_WG)
fn undiff(@builtin(global_invocation_id) gid: vec3<u32>,
          @builtin(num_workgroups) nwg: vec3<u32>) {
    if (gid.y >= arrayLength(&arrays)) {
        return;
    }
    let a = arrays[gid.y];
    let axis = current.axis;
    if (((a.axes >> axis) & 1u) == 0u) {
        return;
    }
    sum_lines(padded_shape(a), axis, a.words, a.carry, current.stage, gid.x, grid_width(nwg));
}

// Value `i` of array `a` as float bits of its width (x), and whether float-mult found it
// invalid (y: 1).
fn value_bits(a: LosslessArray, i: u32) -> vec2<u32> {
    let x = words[a.words + i];
    var v = 0u;
    var bad = 0u;
    if (a.mult_base == 0u) {
        let w = a.width;
        var m = 0xffffffffu;
        if (w != 32u) {
            m = (1u << w) - 1u;
        }
        let xm = x & m;
        let sign = 1u << (w - 1u);
        let top = (xm >> (w - 1u)) & 1u;
        v = (xm ^ ((top - 1u) | sign)) & m;
    } else {
        let k = bitcast<i32>(x ^ 0x80000000u);
        let bad_k = bitcast<u32>(k + ((1i << 24u) - 1i)) >= (1u << 25u) - 1u;
        let p = bitcast<u32>(f32(k) * bitcast<f32>(a.mult_base));
        let sub = (p & 0x7f800000u) == 0u && (p & 0x007fffffu) != 0u;
        var adj = 0u;
        if (a.adjust != 0xffffffffu) {
            adj = words[a.adjust + i];
        }
        let o = (p ^ ((((p >> 31u) ^ 1u) - 1u) | 0x80000000u)) + adj;
        v = o ^ (((o >> 31u) - 1u) | 0x80000000u);
        bad = select(0u, 1u, bad_k || sub);
    }
    // The last run starting at or before `i`, if it covers `i`, overrides the value (the
    // check above still counts, as on the CPU).
    var lo = 0u;
    var hi = a.run_count;
    while (lo < hi) {
        let mid = (lo + hi) / 2u;
        if (runs[a.runs + 3u * mid] <= i) {
            lo = mid + 1u;
        } else {
            hi = mid;
        }
    }
    if (lo > 0u) {
        let r = a.runs + 3u * (lo - 1u);
        if (i - runs[r] < runs[r + 1u]) {
            v = runs[r + 2u];
        }
    }
    return vec2<u32>(v, bad);
}

@compute @workgroup_size(LOSSLESS_WG)
fn finish(@builtin(global_invocation_id) gid: vec3<u32>,
          @builtin(num_workgroups) nwg: vec3<u32>) {
    if (gid.y >= arrayLength(&arrays)) {
        return;
    }
    let a = arrays[gid.y];
    let per = 32u / a.width;
    let out_words = a.count / per + select(0u, 1u, a.count % per != 0u);
    var bad = 0u;
    for (var j = gid.x; j < out_words; j += grid_width(nwg)) {
        var w = 0u;
        for (var h = 0u; h < per; h++) {
            let i = j * per + h;
            if (i < a.count) {
                let vb = value_bits(a, i);
                w |= vb.x << (h * a.width);
                bad |= vb.y;
            }
        }
        output[a.out_word + j] = w;
    }
    if (bad != 0u) {
        atomicOr(&errors[a.file], ERR_MULT);
    }
}
