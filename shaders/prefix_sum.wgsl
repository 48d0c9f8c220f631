// Exclusive prefix sum of the batch's stream sizes into byte offsets (CPU twin:
// `gpu::cpu_twin::prefix_sum`). Multi-level: `scan_blocks` scans each 256-element block in
// place and writes the block's total to the next level; the totals are scanned the same way
// (recursively, on the CPU-side schedule), then `add_sums` adds each block's scanned total
// back. No decoupled look-back. Blocks are numbered over a 2D dispatch so that more than
// 65535 blocks work.

// `ScanParams` is generated from src/gpu/abi.rs (gpu::shaders).

@group(0) @binding(0) var<storage, read_write> scan: array<u32>;
@group(0) @binding(1) var<uniform> sp: ScanParams;

const SCAN_WG: u32 = 256u;

var<workgroup> tmp: array<u32, 512>;

@compute @workgroup_size(256)
fn scan_blocks(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let block = wid.y * nwg.x + wid.x;
    let blocks = (sp.n + SCAN_WG - 1u) / SCAN_WG;
    if (block >= blocks) {
        return;
    }
    let i = block * SCAN_WG + lid;
    var v = 0u;
    if (i < sp.n) {
        v = scan[sp.data_offset + i];
    }
    tmp[lid] = v;
    workgroupBarrier();
    // Hillis-Steele inclusive scan, double-buffered in `tmp`.
    var src = 0u;
    for (var off = 1u; off < SCAN_WG; off = off * 2u) {
        let dst = SCAN_WG - src;
        var t = tmp[src + lid];
        if (lid >= off) {
            t = t + tmp[src + lid - off];
        }
        tmp[dst + lid] = t;
        workgroupBarrier();
        src = dst;
    }
    let inclusive = tmp[src + lid];
    if (i < sp.n) {
        scan[sp.data_offset + i] = inclusive - v;
    }
    if (lid == SCAN_WG - 1u) {
        scan[sp.sums_offset + block] = inclusive;
    }
}

@compute @workgroup_size(256)
fn add_sums(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let block = wid.y * nwg.x + wid.x;
    let i = block * SCAN_WG + lid;
    if (i < sp.n) {
        scan[sp.data_offset + i] = scan[sp.data_offset + i] + scan[sp.sums_offset + block];
    }
}
