// The token stage of error-bounded arrays, one step at a time: the symbols of one segment
// of zigzag residuals (`z`, from `base`, `n` values) under a token set, exactly as
// field/bounded/tokens.rs's `tokenize` (singles; pairs of two values below
// BOUNDED_PAIR_LIMIT; zero runs of 4 or more as run tokens of at most BOUNDED_RUN_MAX zeros,
// a last lone zero as a single). CPU twin: gpu/cpu_twin/encode.rs.
//
// `tok_step` takes one loop iteration and either emits one symbol or counts one zero of a
// run (each zero is counted once: `scan` keeps the end of the run found so far), so a
// segment of n values takes at most 1.5 n + 1 steps, below llvmpipe's 65535 iterations
// for n <= ENCODE_SEGMENT_MAX. No inner loops.

struct TokState {
    // Next value of the segment.
    i: u32,
    // End of the zero run counted so far (valid while > i).
    scan: u32,
    // 1 while the pieces of a run of 4 or more are being emitted.
    emitting: u32,
}

struct Symbol {
    token: u32,
    nraw: u32,
    raw: u32,
    // 0: a counting step, no symbol.
    some: u32,
}

// token_of (field::lossless::format): single token, raw bit count, raw bits.
fn single_symbol(v: u32) -> Symbol {
    if (v < 16u) {
        return Symbol(v, 0u, 0u, 1u);
    }
    let n = firstLeadingBit(v);
    let nraw = n - 1u;
    let m = (v >> nraw) & 1u;
    return Symbol(16u + 2u * (n - 4u) + m, nraw, v & ((1u << nraw) - 1u), 1u);
}

// run_token (field::bounded::format): a run of `m` zeros, 2 <= m <= BOUNDED_RUN_MAX.
fn run_symbol(m: u32) -> Symbol {
    let j = firstLeadingBit(m);
    return Symbol(BOUNDED_RUN0 + j - 1u, j, m & ((1u << j) - 1u), 1u);
}

// The next piece of a run being emitted (`st.scan` its end).
fn run_piece(st: ptr<function, TokState>) -> Symbol {
    let r = (*st).scan - (*st).i;
    if (r >= 2u) {
        let m = min(r, BOUNDED_RUN_MAX);
        (*st).i += m;
        if ((*st).i == (*st).scan) {
            (*st).emitting = 0u;
        }
        return run_symbol(m);
    }
    (*st).i += 1u;
    (*st).emitting = 0u;
    return Symbol(0u, 0u, 0u, 1u);
}

// One step of the segment `z[base .. base + n]` with pairs and runs as asked (`st.i < n`).
fn tok_step(st: ptr<function, TokState>, base: u32, n: u32, pairs: bool, runs: bool) -> Symbol {
    let i = (*st).i;
    if (runs) {
        if ((*st).emitting != 0u) {
            return run_piece(st);
        }
        if (z[base + i] == 0u) {
            if ((*st).scan <= i) {
                (*st).scan = i;
            }
            let s = (*st).scan;
            if (s < n && z[base + s] == 0u) {
                (*st).scan = s + 1u;
                return Symbol(0u, 0u, 0u, 0u);
            }
            if (s - i >= 4u) {
                (*st).emitting = 1u;
                return run_piece(st);
            }
        }
    }
    let v = z[base + i];
    if (pairs && i + 1u < n && v < BOUNDED_PAIR_LIMIT && z[base + i + 1u] < BOUNDED_PAIR_LIMIT) {
        (*st).i = i + 2u;
        return Symbol(BOUNDED_PAIR0 + BOUNDED_PAIR_LIMIT * v + z[base + i + 1u], 0u, 0u, 1u);
    }
    (*st).i = i + 1u;
    return single_symbol(v);
}

// Steps of a segment of `n` values at most (the loops' explicit bound).
fn tok_steps(n: u32) -> u32 {
    return n + n / 2u + 2u;
}
