// What the decoders of lossless and error-bounded float arrays share (lossless.wgsl,
// bounded.wgsl): bindings 0 to 4, the grid stride, the entry points `decode_segments` and
// `undiff`, and the exception runs' lookup. CPU twin: gpu/cpu_twin/float_arrays.rs.
// `decode_round` comes from shared/segments.wgsl, `sum_lines` from shared/line_sum.wgsl.
//
// The shader that includes this file declares, after binding 4:
// - `arrays` (its array struct, with `shape0` to `shape3`, `words` and `carry`) and
//   `current` (its step uniform, with `round`, `axis` and `stage`);
// - `ARRAY_WG`: the workgroup size of its entry points;
// - `PAIR_TOKENS`: the pair tokens of its segments (`decode_round`'s `pairs`);
// - `fn differenced(a, axis: u32) -> bool`: whether array `a` is summed along padded axis
//   `axis` by `undiff`;
// - `fn run_word(j: u32) -> u32`: word `j` of the binding that holds the exception runs.

@group(0) @binding(0) var<storage, read> input_words: array<u32>;
@group(0) @binding(1) var<storage, read> segments: array<LosslessSegment>;
// The decode tables (bounded.wgsl: then the exception runs, 3 words each: start, length,
// bits).
@group(0) @binding(2) var<storage, read> tables: array<u32>;
@group(0) @binding(3) var<storage, read_write> words: array<u32>;
@group(0) @binding(4) var<storage, read_write> errors: array<atomic<u32>>;

// Invocations along x of a grid dispatch.
fn grid_width(nwg: vec3<u32>) -> u32 {
    return nwg.x * ARRAY_WG;
}

// Round `current.round` of every segment: `decode_round` (shared/segments.wgsl) with
// `PAIR_TOKENS` pair tokens.
@compute @workgroup_size(ARRAY_WG)
fn decode_segments(@builtin(global_invocation_id) gid: vec3<u32>,
                   @builtin(num_workgroups) nwg: vec3<u32>) {
    let n = arrayLength(&segments);
    for (var g = gid.x; g < n; g += grid_width(nwg)) {
        decode_round(segments[g], current.round, PAIR_TOKENS);
    }
}

// One stage (`current.stage`) of the wrapping prefix sums along padded axis `current.axis`
// (4 to 7: axis `current.axis - 4` a second time) of array `gid.y`, if it is `differenced`
// along it: `sum_lines` (shared/line_sum.wgsl) over the array's shape padded to 4 axes.
@compute @workgroup_size(ARRAY_WG)
fn undiff(@builtin(global_invocation_id) gid: vec3<u32>,
          @builtin(num_workgroups) nwg: vec3<u32>) {
    if (gid.y >= arrayLength(&arrays)) {
        return;
    }
    let a = arrays[gid.y];
    let axis = current.axis;
    if (!differenced(a, axis)) {
        return;
    }
    let shape = array<u32, 4>(a.shape0, a.shape1, a.shape2, a.shape3);
    sum_lines(shape, axis & 3u, a.words, a.carry, current.stage, gid.x, grid_width(nwg));
}

// Value `i`'s bits `v`, or those of the exception run that covers it: the last of the
// `run_count` runs from word `at` (`run_word`) starting at or before `i`, if it covers `i`.
fn run_bits(at: u32, run_count: u32, i: u32, v: u32) -> u32 {
    var lo = 0u;
    var hi = run_count;
    while (lo < hi) {
        let mid = (lo + hi) / 2u;
        if (run_word(at + 3u * mid) <= i) {
            lo = mid + 1u;
        } else {
            hi = mid;
        }
    }
    if (lo > 0u) {
        let r = at + 3u * (lo - 1u);
        if (i - run_word(r) < run_word(r + 1u)) {
            return run_word(r + 2u);
        }
    }
    return v;
}
