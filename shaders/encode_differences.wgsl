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
// - `estimate` (only when the set is not given): workgroup w sums, for every axis set s of
//   the array's own axes (1 to `params.sets`), the single tokens and raw bits of the
//   residuals of EST_ITEM x ENCODE_WG values (block w) in workgroup memory, and writes
//   EST_WORDS words per set at `(w params.sets + s - 1) EST_WORDS` of `results`; the host sums
//   them per set and ranks the sets as the CPU encoder does. Each value's residuals under all
//   sets come from one sum over subsets (16 loads, 32 additions).
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

var<workgroup> est: array<atomic<u32>, EST_SETS_WORDS>;

@compute @workgroup_size(ENCODE_WG)
fn estimate(@builtin(workgroup_id) wid: vec3<u32>,
            @builtin(local_invocation_index) lid: u32,
            @builtin(num_workgroups) nwg: vec3<u32>) {
    let w = wid.y * nwg.x + wid.x;
    let per = EST_ITEM * ENCODE_WG;
    let sets = params.sets;
    let words = sets * EST_WORDS;
    if (w < (params.count + per - 1u) / per) {
        for (var k = 0u; k < EST_SETS_WORDS / ENCODE_WG + 1u; k++) {
            if (k * ENCODE_WG + lid < words) {
                atomicStore(&est[k * ENCODE_WG + lid], 0u);
            }
        }
        workgroupBarrier();
        let s3 = params.shape3;
        let s2 = params.shape2;
        let s1 = params.shape1;
        let all = sets << params.pad_axes;
        var raw: array<u32, 15>;
        for (var j = 0u; j < EST_ITEM; j++) {
            let i = (w * EST_ITEM + j) * ENCODE_WG + lid;
            if (i < params.count) {
                var r = i;
                let c3 = r % s3;
                r /= s3;
                let c2 = r % s2;
                r /= s2;
                let c1 = r % s1;
                let c0 = r / s1;
                let valid = (select(0u, 1u, c0 > 0u) | select(0u, 2u, c1 > 0u)
                    | select(0u, 4u, c2 > 0u) | select(0u, 8u, c3 > 0u)) & all;
                // a[T] = (-1)^|T| q[i - strides of T] (0 where T leaves the array), then its
                // sums over subsets: a[S] is the residual along S.
                var a: array<u32, 16>;
                for (var t = 0u; t < 16u; t++) {
                    if ((t & ~valid) == 0u) {
                        let jj = i - select(0u, s1 * s2 * s3, (t & 1u) != 0u)
                            - select(0u, s2 * s3, (t & 2u) != 0u)
                            - select(0u, s3, (t & 4u) != 0u) - select(0u, 1u, (t & 8u) != 0u);
                        let v = q[jj];
                        a[t] = select(v, 0u - v, (countOneBits(t) & 1u) != 0u);
                    }
                }
                for (var b = 0u; b < 4u; b++) {
                    for (var t = 0u; t < 16u; t++) {
                        if (((t >> b) & 1u) != 0u) {
                            a[t] += a[t ^ (1u << b)];
                        }
                    }
                }
                for (var k = 0u; k < sets; k++) {
                    let d = a[(k + 1u) << params.pad_axes];
                    let v = (d << 1u) ^ (0u - (d >> 31u));
                    var token = v;
                    var nraw = 0u;
                    if (v >= 16u) {
                        let n = firstLeadingBit(v);
                        nraw = n - 1u;
                        token = 16u + 2u * (n - 4u) + ((v >> nraw) & 1u);
                    }
                    atomicAdd(&est[k * EST_WORDS + token], 1u);
                    raw[k] += nraw;
                }
            }
        }
        for (var k = 0u; k < sets; k++) {
            atomicAdd(&est[k * EST_WORDS + EST_TOKENS], raw[k]);
        }
        workgroupBarrier();
        for (var k = 0u; k < EST_SETS_WORDS / ENCODE_WG + 1u; k++) {
            if (k * ENCODE_WG + lid < words) {
                results[w * words + k * ENCODE_WG + lid] = atomicLoad(&est[k * ENCODE_WG + lid]);
            }
        }
    }
}
