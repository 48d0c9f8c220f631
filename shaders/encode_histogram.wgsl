// The error-bounded encoder, stage 3: per segment and token set, the histogram of its
// symbols (shared/tokenize.wgsl) and their raw bits, read back: the host sums them per
// chunk, picks each chunk's token set and code as the CPU encoder does
// (field::bounded::tokens::choose_code) and plans the packing. CPU twin:
// gpu/cpu_twin/encode.rs.
//
// `histogram`: one invocation per (segment, set), item `3 segment + set`, writing
// HIST_WORDS words at `item * HIST_WORDS` of `results`.

@compute @workgroup_size(ENCODE_WG)
fn histogram(@builtin(global_invocation_id) gid: vec3<u32>,
             @builtin(num_workgroups) nwg: vec3<u32>) {
    let g = item(gid, nwg);
    if (g >= 3u * params.segments) {
        return;
    }
    let seg = segs[g / 3u];
    let tset = g % 3u;
    var h: array<u32, BOUNDED_ALPHABET>;
    var raw = 0u;
    var st = TokState(0u, 0u, 0u);
    for (var it = 0u; it < tok_steps(seg.count); it++) {
        if (st.i >= seg.count) {
            break;
        }
        let s = tok_step(&st, seg.start, seg.count, tset >= 1u, tset == 2u);
        if (s.some != 0u) {
            h[s.token] += 1u;
            raw += s.nraw;
        }
    }
    let at = g * HIST_WORDS;
    for (var t = 0u; t < BOUNDED_ALPHABET; t++) {
        results[at + t] = h[t];
    }
    results[at + BOUNDED_ALPHABET] = raw;
}
