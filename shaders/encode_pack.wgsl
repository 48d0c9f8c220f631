// The error-bounded encoder, stage 4: the bit packing. Each segment's symbols
// (shared/tokenize.wgsl, under its chunk's token set) as code then raw bits, LSB first
// (codec::bits::BitWriter), into whole words of `results` from the segment's `out_word`; the
// last word is zero-padded. The host, which planned the words from the histograms, cuts
// each segment to its bytes. CPU twin: gpu/cpu_twin/encode.rs.
//
// `pack`: one invocation per segment.

var<private> acc: u32;
var<private> nacc: u32;
var<private> out_at: u32;

// Appends the low `nb` (<= 32) bits of `v` (its higher bits 0).
fn put(v: u32, nb: u32) {
    if (nb == 0u) {
        return;
    }
    acc |= v << nacc;
    let total = nacc + nb;
    if (total >= 32u) {
        results[out_at] = acc;
        out_at += 1u;
        acc = select(0u, v >> (32u - nacc), nacc > 0u);
        nacc = total - 32u;
    } else {
        nacc = total;
    }
}

@compute @workgroup_size(ENCODE_WG)
fn pack(@builtin(global_invocation_id) gid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>) {
    let g = item(gid, nwg);
    if (g >= params.segments) {
        return;
    }
    let seg = segs[g];
    acc = 0u;
    nacc = 0u;
    out_at = seg.out_word;
    var st = TokState(0u, 0u, 0u);
    for (var it = 0u; it < tok_steps(seg.count); it++) {
        if (st.i >= seg.count) {
            break;
        }
        let s = tok_step(&st, seg.start, seg.count, seg.token_set >= 1u, seg.token_set == 2u);
        if (s.some != 0u) {
            let e = codes[seg.codes + s.token];
            put(e & 0xffffu, e >> 16u);
            put(s.raw, s.nraw);
        }
    }
    if (nacc > 0u) {
        results[out_at] = acc;
    }
}
