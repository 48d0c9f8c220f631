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

// The zigzag residual of value `i` differenced along the padded axes `axes`: the subsets T
// of `axes` are enumerated from `axes` down to the empty set (`t = (t - 1) & axes`), those
// with an axis at coordinate 0 skipped.
fn residual(i: u32, axes: u32) -> u32 {
    let s3 = params.shape3;
    let s2 = params.shape2;
    let s1 = params.shape1;
    var r = i;
    let c3 = r % s3;
    r /= s3;
    let c2 = r % s2;
    r /= s2;
    let c1 = r % s1;
    let c0 = r / s1;
    // Bit a: padded axis a has a previous value.
    let valid = select(0u, 1u, c0 > 0u) | select(0u, 2u, c1 > 0u) | select(0u, 4u, c2 > 0u)
        | select(0u, 8u, c3 > 0u);
    var acc = 0u;
    var t = axes;
    for (var k = 0u; k < 16u; k++) {
        if ((t & ~valid) == 0u) {
            let j = i - select(0u, s1 * s2 * s3, (t & 1u) != 0u) - select(0u, s2 * s3, (t & 2u) != 0u)
                - select(0u, s3, (t & 4u) != 0u) - select(0u, 1u, (t & 8u) != 0u);
            if ((countOneBits(t) & 1u) == 0u) {
                acc += q[j];
            } else {
                acc -= q[j];
            }
        }
        if (t == 0u) {
            break;
        }
        t = (t - 1u) & axes;
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
        var raw = 0u;
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
                raw += nraw;
            }
        }
        atomicAdd(&est[EST_TOKENS], raw);
        workgroupBarrier();
        if (lid < EST_WORDS) {
            results[w * EST_WORDS + lid] = atomicLoad(&est[lid]);
        }
        if (lid + ENCODE_WG < EST_WORDS) {
            results[w * EST_WORDS + lid + ENCODE_WG] = atomicLoad(&est[lid + ENCODE_WG]);
        }
    }
}
