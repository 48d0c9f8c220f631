// Job tables (`gpu::jobs`), shared by the kernels that take a batch's jobs in one dispatch
// (`augment.wgsl`, `fields.wgsl`, `levels.wgsl`, `tensor_window.wgsl`). Each declares its
// table `jobs` (entries with `wg_base` and `wg_count`) and the private `job` it works on.

// The value `job_invocation` gives a spare workgroup of the grid.
const NO_JOB: u32 = 0xffffffffu;

// The job of workgroup `wg` of the dispatch: the last with wg_base <= wg (jobs without
// workgroups share their successor's wg_base and are never chosen).
fn find_job(wg: u32) -> u32 {
    var lo = 0u;
    var hi = arrayLength(&jobs);
    while (hi - lo > 1u) {
        let mid = (lo + hi) / 2u;
        if (jobs[mid].wg_base <= wg) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    return lo;
}

// Reads the job of workgroup `wid` of the dispatch's 2-D grid (`nwg` workgroups a row) into
// `job` and returns the invocation's index `lid` among the job's invocations (workgroups of
// `size`), from which it loops over the job's items with the stride `job.wg_count * size`;
// NO_JOB past the job's workgroups (the 2-D grid's spare workgroups).
fn job_invocation(wid: vec3<u32>, nwg: vec3<u32>, lid: u32, size: u32) -> u32 {
    let wg = wid.y * nwg.x + wid.x;
    job = jobs[find_job(wg)];
    if (wg - job.wg_base >= job.wg_count) {
        return NO_JOB;
    }
    return (wg - job.wg_base) * size + lid;
}
