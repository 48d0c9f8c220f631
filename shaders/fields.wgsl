// Error-bounded float32 fields (SPEC.md, "Float fields"): values from a decoded bin image.
// CPU twin: `field::reconstruct` and `gpu::fields::reconstruct_field` (same names, same
// arithmetic; `tests/fields.rs` compares the GPU with the CPU decoder bit for bit).
//
// One dispatch per batch (`gpu::jobs`): each workgroup finds its field's job in `jobs` by its
// number. In the dispatch's ranges, from the job's offsets: `bins` holds the field's decoded
// bin image (16-bit samples, two to a u32 word, little-endian, as output/interleaved.wgsl
// writes them); `runs` its exception runs (start, length, f32 bits; sorted, disjoint);
// `values` its output. Each invocation loops over the values with the stride of the job's
// workgroups; an exception is found by binary search over the run starts, so the work per
// value is bounded by log2(runs) steps.

// RUN_WORDS (words per run) and FIELDS_WG come from the generated prelude (gpu::shaders).

// `FieldJob` is generated from src/gpu/abi.rs (gpu::shaders).

@group(0) @binding(0) var<storage, read> jobs: array<FieldJob>;
@group(0) @binding(1) var<storage, read> bins: array<u32>;
@group(0) @binding(2) var<storage, read> runs: array<u32>;
@group(0) @binding(3) var<storage, read_write> values: array<f32>;

// The job of this workgroup, read from `jobs` on entry.
var<private> job: FieldJob;

// The decoded value of bin q: the product is exact (16 x 8 significant bits), so the one f32
// addition rounds it the same way with or without a fused multiply-add.
fn reconstruct(q: u32, offset: f32, bin_width: f32) -> f32 {
    return offset + f32(q) * bin_width;
}

// The run holding value i, or job.run_count.
fn run_of(i: u32) -> u32 {
    var lo = 0u;
    var hi = job.run_count;
    // Invariant: runs before lo start at or before i; runs from hi on start after it.
    while (lo < hi) {
        let mid = (lo + hi) / 2u;
        if (runs[job.runs_offset + RUN_WORDS * mid] <= i) {
            lo = mid + 1u;
        } else {
            hi = mid;
        }
    }
    if (lo == 0u) {
        return job.run_count;
    }
    let r = lo - 1u;
    if (i - runs[job.runs_offset + RUN_WORDS * r] < runs[job.runs_offset + RUN_WORDS * r + 1u]) {
        return r;
    }
    return job.run_count;
}

@compute @workgroup_size(FIELDS_WG)
fn reconstruct_field(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let first = job_invocation(wid, nwg, lid, FIELDS_WG);
    if (first == NO_JOB) {
        return;
    }
    let stride = job.wg_count * FIELDS_WG;
    let offset = bitcast<f32>(job.offset_bits);
    let bin_width = bitcast<f32>(job.bin_bits);
    for (var i = first; i < job.count; i = i + stride) {
        let q = (bins[job.bins_offset + i / 2u] >> (16u * (i % 2u))) & 0xffffu;
        var v = reconstruct(q, offset, bin_width);
        let r = run_of(i);
        if (r < job.run_count) {
            v = bitcast<f32>(runs[job.runs_offset + RUN_WORDS * r + 2u]);
        }
        values[job.values_offset + i] = v;
    }
}
