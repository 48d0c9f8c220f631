// The error-bounded encoder, stage 2: the bins differenced along the axis set, as zigzag
// residuals (the stream, C order), and the estimate that picks the set when the caller does
// not. CPU twin: gpu/cpu_twin/encode.rs; matches field::lossless::encode::differences
// (width 32) and field::bounded::encode's `quick_bits` histograms bit for bit.
//
// Differencing along an axis subtracts the previous value along it where there is one; the
// operators of different axes commute, so along a set S the residual of value i is the sum
// over the subsets T of S whose axes all have a previous value of
// (-1)^|T| q[i - sum of T's strides], wrapping at 32 bits.
//
// - `estimate` (only when the set is not given): workgroup w sums, for axis set
//   `w % params.sets + 1` (the array's own axes), the single tokens and raw bits of the
//   residuals of EST_ITEM x ENCODE_WG values (block `w / params.sets`) in workgroup memory,
//   and writes EST_WORDS words at `w * EST_WORDS` of `results`; the host sums them per set
//   and ranks the sets as the CPU encoder does.
// - `differences`: one invocation per value, the residual under `params.axes`.

// The zigzag residual of value `i` differenced along the padded axes `axes`.
fn residual(i: u32, axes: u32) -> u32 {
    let s3 = params.shape3;
    let s2 = params.shape2;
    let s1 = params.shape1;
    let st = array<u32, 4>(s1 * s2 * s3, s2 * s3, s3, 1u);
    var r = i;
    let c3 = r % s3;
    r /= s3;
    let c2 = r % s2;
    r /= s2;
    let c1 = r % s1;
    let c0 = r / s1;
    let c = array<u32, 4>(c0, c1, c2, c3);
    var acc = 0u;
    for (var t = 0u; t < 16u; t++) {
        if ((t & ~axes) != 0u) {
            continue;
        }
        var j = i;
        var ok = true;
        for (var a = 0u; a < 4u; a++) {
            if (((t >> a) & 1u) != 0u) {
                ok = ok && c[a] > 0u;
                j -= st[a];
            }
        }
        if (!ok) {
            continue;
        }
        if ((countOneBits(t) & 1u) == 0u) {
            acc += q[j];
        } else {
            acc -= q[j];
        }
    }
    return (acc << 1u) ^ (0u - (acc >> 31u));
}

@compute @workgroup_size(ENCODE_WG)
fn differences(@builtin(global_invocation_id) gid: vec3<u32>,
               @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = item(gid, nwg);
    if (i < params.count) {
        z[i] = residual(i, params.axes);
    }
}

var<workgroup> est: array<atomic<u32>, EST_WORDS>;

@compute @workgroup_size(ENCODE_WG)
fn estimate(@builtin(workgroup_id) wid: vec3<u32>,
            @builtin(local_invocation_index) lid: u32,
            @builtin(num_workgroups) nwg: vec3<u32>) {
    let w = wid.y * nwg.x + wid.x;
    let per = EST_ITEM * ENCODE_WG;
    let total = ((params.count + per - 1u) / per) * params.sets;
    if (w < total) {
        // EST_WORDS <= 2 ENCODE_WG: two words an invocation at most.
        if (lid < EST_WORDS) {
            atomicStore(&est[lid], 0u);
        }
        if (lid + ENCODE_WG < EST_WORDS) {
            atomicStore(&est[lid + ENCODE_WG], 0u);
        }
        workgroupBarrier();
        let axes = (w % params.sets + 1u) << params.pad_axes;
        let block = w / params.sets;
        for (var j = 0u; j < EST_ITEM; j++) {
            let i = (block * EST_ITEM + j) * ENCODE_WG + lid;
            if (i < params.count) {
                let v = residual(i, axes);
                var token = v;
                var nraw = 0u;
                if (v >= 16u) {
                    let n = firstLeadingBit(v);
                    nraw = n - 1u;
                    token = 16u + 2u * (n - 4u) + ((v >> nraw) & 1u);
                }
                atomicAdd(&est[token], 1u);
                atomicAdd(&est[EST_TOKENS], nraw);
            }
        }
        workgroupBarrier();
        if (lid < EST_WORDS) {
            results[w * EST_WORDS + lid] = atomicLoad(&est[lid]);
        }
        if (lid + ENCODE_WG < EST_WORDS) {
            results[w * EST_WORDS + lid + ENCODE_WG] = atomicLoad(&est[lid + ENCODE_WG]);
        }
    }
}
