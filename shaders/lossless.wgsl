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
//    than one block), then as many again along the axes of second differences. Workgroup y
//    is the array.
// 3. `finish`: one invocation per output word (one float32, or two 16-bit values with the
//    first in the low half): ordered bits, float-mult or the value table to float bits,
//    then the runs.
// Every loop has an explicit bound (a round's values, a block's values, a line's blocks,
// the grid stride over a table's length); WGSL clamps indices on top. llvmpipe (lavapipe)
// ends an invocation's loops after 65535 iterations in all: no invocation of a round, a
// prefix-sum stage or the finish (two values a word, a binary search of the runs) comes
// near that while a dispatch has an invocation per segment, item or word (up to 2^22).

// `LosslessSegment` and `LosslessArray` are generated from src/gpu/abi.rs (gpu::shaders);
// `LosslessStep` too; `read_bits32` and `read_byte` come from shared/bits.wgsl,
// `decode_round` from shared/segments.wgsl, `sum_lines` from shared/line_sum.wgsl, bindings
// 0 to 4, `decode_segments`, `undiff` and `run_bits` from shared/float_arrays.wgsl.

@group(0) @binding(5) var<storage, read> arrays: array<LosslessArray>;
@group(0) @binding(6) var<storage, read> runs: array<u32>;
@group(0) @binding(7) var<storage, read_write> output: array<u32>;
@group(0) @binding(8) var<uniform> current: LosslessStep;

const ARRAY_WG: u32 = LOSSLESS_WG;
// No pair tokens.
const PAIR_TOKENS: u32 = 0u;

// `undiff` sums array `a` along the padded axes it is differenced along (`axis` 4 to 7: the
// second sums of second differences along axis `axis - 4`).
fn differenced(a: LosslessArray, axis: u32) -> bool {
    return ((a.axes >> axis) & 1u) != 0u;
}

// The exception runs have a binding of their own.
fn run_word(j: u32) -> u32 {
    return runs[j];
}

// Value `i` of array `a` as float bits of its width (x), and the error flags it raises (y:
// ERR_MULT when float-mult found it invalid, ERR_VALUE for an index past the value table).
fn value_bits(a: LosslessArray, i: u32) -> vec2<u32> {
    let x = words[a.words + i];
    var v = 0u;
    var bad = 0u;
    if (a.table != 0xffffffffu) {
        // Value-table input: the table's size, then its entries, in the runs binding.
        var m = 0xffffffffu;
        if (a.width != 32u) {
            m = (1u << a.width) - 1u;
        }
        let k = runs[a.table];
        let j = x & m;
        if (j < k) {
            v = runs[a.table + 1u + j];
        } else {
            bad = ERR_VALUE;
        }
    } else if (a.mult_base == 0u) {
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
        bad = select(0u, ERR_MULT, bad_k || sub);
    }
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
        atomicOr(&errors[a.file], bad);
    }
}
