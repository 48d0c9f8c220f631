// The error-bounded encoder, stage 2: the bins differenced along the axis set, as zigzag
// residuals (the stream, C order). CPU twin: gpu/cpu_twin/encode.rs; matches
// field::lossless::encode::differences (width 32) bit for bit.
//
// `differences`: one invocation per value. Differencing along an axis subtracts the
// previous value along it where there is one; the operators of different axes commute, so
// along a set S the residual of value i is the sum over the subsets T of S whose axes all
// have a previous value of (-1)^|T| q[i - sum of T's strides], wrapping at 32 bits.

@compute @workgroup_size(ENCODE_WG)
fn differences(@builtin(global_invocation_id) gid: vec3<u32>,
               @builtin(num_workgroups) nwg: vec3<u32>) {
    let s3 = params.shape3;
    let s2 = params.shape2;
    let s1 = params.shape1;
    let st = array<u32, 4>(s1 * s2 * s3, s2 * s3, s3, 1u);
    let i = item(gid, nwg);
    if (i < params.count) {
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
            if ((t & ~params.axes) != 0u) {
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
        z[i] = (acc << 1u) ^ (0u - (acc >> 31u));
    }
}
