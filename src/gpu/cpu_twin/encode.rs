//! CPU twins of the error-bounded encoder's kernels: `shaders/encode_quantise.wgsl`
//! (`value_range`, `quantise`, `fill_blocks`, `fill_carry`, `fill_apply`),
//! `encode_differences.wgsl` (`differences`, `estimate`), `shared/tokenize.wgsl` (`tok_step`),
//! `encode_histogram.wgsl` (`histogram`) and `encode_pack.wgsl` (`pack`): the same steps,
//! one invocation after another, on slices standing for the bindings. Held to the CPU
//! encoder by `field::bounded::gpu_encode`'s tests (the whole pipeline on the twins gives
//! `encode_bounded`'s bytes); the GPU tests hold the kernels to them.

use crate::gpu::abi::{BOUNDED_MAX_BINS, BOUNDED_PAIR0, BOUNDED_PAIR_LIMIT, BOUNDED_RUN0};
use crate::gpu::encode_abi::{
    EncodeParams, EncodeSegment, BOUNDED_ALPHABET, BOUNDED_RUN_MAX, ENCODE_WORKGROUP_SIZE,
    EST_ITEM, EST_TOKENS, EST_WORDS, FILL_WORDS, HIST_WORDS, NO_BIN,
};

/// Twin of `is_special`.
fn is_special(b: u32, p: &EncodeParams) -> bool {
    let e = (b >> 23) & 0xff;
    let subnormal = e == 0 && (b & 0x7f_ffff) != 0;
    e == 255 || subnormal || (p.has_fill != 0 && b == p.fill_bits)
}

/// Twin of `order_key`.
fn order_key(b: u32) -> u32 {
    if b >> 31 == 1 {
        !b
    } else {
        b ^ 0x8000_0000
    }
}

/// Twin of `value_range` over every invocation: the keys in `extent` (starting at
/// `u32::MAX` and 0).
pub(crate) fn value_range(values: &[u32], extent: &mut [u32; 2], p: &EncodeParams) {
    for &b in &values[..p.count as usize] {
        if is_special(b, p) {
            continue;
        }
        let k = order_key(b);
        extent[0] = extent[0].min(k);
        extent[1] = extent[1].max(k);
    }
}

/// Twin of `bin_of`.
fn bin_of(b: u32, p: &EncodeParams) -> u32 {
    let v = f32::from_bits(b);
    let off = f32::from_bits(p.offset_bits);
    let w = f32::from_bits(p.width_bits);
    let c0 = ((v - off) * f32::from_bits(p.inv_bits)).round_ties_even() as i32;
    let bound = f32::from_bits(p.bound_bits);
    for c in [c0, c0 - 1, c0 + 1] {
        if c < 0 || c >= BOUNDED_MAX_BINS as i32 {
            continue;
        }
        let r = off + c as f32 * w;
        let rb = r.to_bits();
        let subnormal = rb & 0x7f80_0000 == 0 && rb & 0x7f_ffff != 0;
        if !subnormal && (r - v).abs() < bound {
            return c as u32;
        }
    }
    NO_BIN
}

/// Twin of `quantise`.
pub(crate) fn quantise(values: &[u32], q: &mut [u32], p: &EncodeParams) {
    for i in 0..p.count as usize {
        let b = values[i];
        q[i] = if is_special(b, p) {
            NO_BIN
        } else {
            bin_of(b, p)
        };
    }
}

/// Twin of `block_range`.
fn block_range(k: u32, p: &EncodeParams) -> std::ops::Range<usize> {
    let start = k * p.block;
    start as usize..p.count.min(start + p.block) as usize
}

/// Twin of `fill_blocks`.
pub(crate) fn fill_blocks(q: &[u32], blocks: &mut [u32], p: &EncodeParams) {
    for k in 0..p.blocks {
        let (mut last, mut first) = (NO_BIN, NO_BIN);
        for &c in &q[block_range(k, p)] {
            if c != NO_BIN {
                last = c;
                if first == NO_BIN {
                    first = c;
                }
            }
        }
        blocks[(FILL_WORDS * k) as usize] = last;
        blocks[(FILL_WORDS * k + 1) as usize] = first;
    }
}

/// Twin of `fill_carry`.
pub(crate) fn fill_carry(blocks: &mut [u32], p: &EncodeParams) {
    let (mut prev, mut first) = (NO_BIN, NO_BIN);
    for k in 0..p.blocks as usize {
        let w = FILL_WORDS as usize * k;
        blocks[w + 2] = prev;
        if blocks[w] != NO_BIN {
            prev = blocks[w];
        }
        if first == NO_BIN {
            first = blocks[w + 1];
        }
    }
    blocks[(FILL_WORDS * p.blocks) as usize] = first;
}

/// Twin of `fill_apply`.
pub(crate) fn fill_apply(q: &mut [u32], blocks: &[u32], flags: &mut [u32], p: &EncodeParams) {
    for k in 0..p.blocks {
        let r = block_range(k, p);
        let mut cur = blocks[(FILL_WORDS * k + 2) as usize];
        if cur == NO_BIN {
            cur = blocks[(FILL_WORDS * p.blocks) as usize];
        }
        if cur == NO_BIN {
            cur = 0;
        }
        let mut word = 0u32;
        let end = r.end;
        for i in r {
            if q[i] == NO_BIN {
                q[i] = cur;
                word |= 1 << (i % 32);
            } else {
                cur = q[i];
            }
            if i % 32 == 31 || i + 1 == end {
                flags[i / 32] = word;
                word = 0;
            }
        }
    }
}

/// Twin of `residual`.
fn residual(q: &[u32], i: u32, axes: u32, p: &EncodeParams) -> u32 {
    let (s1, s2, s3) = (p.shape1, p.shape2, p.shape3);
    let mut r = i;
    let c3 = r % s3;
    r /= s3;
    let c2 = r % s2;
    r /= s2;
    let c1 = r % s1;
    let c0 = r / s1;
    let valid =
        (c0 > 0) as u32 | ((c1 > 0) as u32) << 1 | ((c2 > 0) as u32) << 2 | ((c3 > 0) as u32) << 3;
    let mut acc = 0u32;
    let mut t = axes;
    for _ in 0..16 {
        if t & !valid == 0 {
            let pick = |bit: u32, s: u32| if t & bit != 0 { s } else { 0 };
            let j = i
                .wrapping_sub(pick(1, s1 * s2 * s3))
                .wrapping_sub(pick(2, s2 * s3))
                .wrapping_sub(pick(4, s3))
                .wrapping_sub(pick(8, 1));
            let v = q[j as usize];
            acc = if t.count_ones() & 1 == 0 {
                acc.wrapping_add(v)
            } else {
                acc.wrapping_sub(v)
            };
        }
        if t == 0 {
            break;
        }
        t = (t - 1) & axes;
    }
    (acc << 1) ^ 0u32.wrapping_sub(acc >> 31)
}

/// Twin of `differences`.
pub(crate) fn differences(q: &[u32], z: &mut [u32], p: &EncodeParams) {
    for i in 0..p.count {
        z[i as usize] = residual(q, i, p.axes, p);
    }
}

/// Twin of `estimate` over every workgroup: `results` gets `EST_WORDS` words per
/// workgroup and set.
pub(crate) fn estimate(q: &[u32], results: &mut [u32], p: &EncodeParams) {
    let per = EST_ITEM * ENCODE_WORKGROUP_SIZE;
    let sets = p.sets as usize;
    let (s1, s2, s3) = (p.shape1, p.shape2, p.shape3);
    let all = p.sets << p.pad_axes;
    for w in 0..p.count.div_ceil(per) {
        let mut est = vec![0u32; sets * EST_WORDS as usize];
        for lid in 0..ENCODE_WORKGROUP_SIZE {
            let mut raw = [0u32; 15];
            for j in 0..EST_ITEM {
                let i = (w * EST_ITEM + j) * ENCODE_WORKGROUP_SIZE + lid;
                if i >= p.count {
                    continue;
                }
                let mut r = i;
                let c3 = r % s3;
                r /= s3;
                let c2 = r % s2;
                r /= s2;
                let c1 = r % s1;
                let c0 = r / s1;
                let valid = ((c0 > 0) as u32
                    | ((c1 > 0) as u32) << 1
                    | ((c2 > 0) as u32) << 2
                    | ((c3 > 0) as u32) << 3)
                    & all;
                let mut a = [0u32; 16];
                for (t, at) in a.iter_mut().enumerate() {
                    let t = t as u32;
                    if t & !valid == 0 {
                        let pick = |bit: u32, s: u32| if t & bit != 0 { s } else { 0 };
                        let jj = i
                            .wrapping_sub(pick(1, s1 * s2 * s3))
                            .wrapping_sub(pick(2, s2 * s3))
                            .wrapping_sub(pick(4, s3))
                            .wrapping_sub(pick(8, 1));
                        let v = q[jj as usize];
                        *at = if t.count_ones() & 1 != 0 {
                            0u32.wrapping_sub(v)
                        } else {
                            v
                        };
                    }
                }
                for b in 0..4 {
                    for t in 0..16usize {
                        if (t >> b) & 1 != 0 {
                            a[t] = a[t].wrapping_add(a[t ^ (1 << b)]);
                        }
                    }
                }
                for k in 0..sets {
                    let d = a[(k + 1) << p.pad_axes];
                    let v = (d << 1) ^ 0u32.wrapping_sub(d >> 31);
                    let (mut token, mut nraw) = (v, 0);
                    if v >= 16 {
                        let n = 31 - v.leading_zeros();
                        nraw = n - 1;
                        token = 16 + 2 * (n - 4) + ((v >> nraw) & 1);
                    }
                    est[k * EST_WORDS as usize + token as usize] += 1;
                    raw[k] += nraw;
                }
            }
            for k in 0..sets {
                est[k * EST_WORDS as usize + EST_TOKENS as usize] += raw[k];
            }
        }
        let at = w as usize * sets * EST_WORDS as usize;
        results[at..at + est.len()].copy_from_slice(&est);
    }
}

/// Twin of `TokState`.
#[derive(Debug, Default)]
struct TokState {
    i: u32,
    scan: u32,
    emitting: u32,
}

/// Twin of `Symbol`: (token, raw bit count, raw bits), `None` for a counting step.
type Symbol = Option<(u32, u32, u32)>;

/// Twin of `single_symbol`.
fn single_symbol(v: u32) -> Symbol {
    if v < 16 {
        return Some((v, 0, 0));
    }
    let n = 31 - v.leading_zeros();
    let nraw = n - 1;
    let m = (v >> nraw) & 1;
    Some((16 + 2 * (n - 4) + m, nraw, v & ((1 << nraw) - 1)))
}

/// Twin of `run_symbol`.
fn run_symbol(m: u32) -> Symbol {
    let j = 31 - m.leading_zeros();
    Some((BOUNDED_RUN0 + j - 1, j, m & ((1 << j) - 1)))
}

/// Twin of `run_piece`.
fn run_piece(st: &mut TokState) -> Symbol {
    let r = st.scan - st.i;
    if r >= 2 {
        let m = r.min(BOUNDED_RUN_MAX);
        st.i += m;
        if st.i == st.scan {
            st.emitting = 0;
        }
        return run_symbol(m);
    }
    st.i += 1;
    st.emitting = 0;
    Some((0, 0, 0))
}

/// Twin of `tok_step` on the segment `z` (its `n` values).
fn tok_step(st: &mut TokState, z: &[u32], pairs: bool, runs: bool) -> Symbol {
    let n = z.len() as u32;
    let i = st.i;
    if runs {
        if st.emitting != 0 {
            return run_piece(st);
        }
        if z[i as usize] == 0 {
            if st.scan <= i {
                st.scan = i;
            }
            let s = st.scan;
            if s < n && z[s as usize] == 0 {
                st.scan = s + 1;
                return None;
            }
            if s - i >= 4 {
                st.emitting = 1;
                return run_piece(st);
            }
        }
    }
    let v = z[i as usize];
    if pairs && i + 1 < n && v < BOUNDED_PAIR_LIMIT && z[i as usize + 1] < BOUNDED_PAIR_LIMIT {
        st.i = i + 2;
        return Some((
            BOUNDED_PAIR0 + BOUNDED_PAIR_LIMIT * v + z[i as usize + 1],
            0,
            0,
        ));
    }
    st.i = i + 1;
    single_symbol(v)
}

/// Twin of `tok_steps`.
fn tok_steps(n: u32) -> u32 {
    n + n / 2 + 2
}

/// The symbols of a segment under a token set, as the kernels' loop visits them; panics if
/// the loop's bound would cut the segment short (the bound the kernels rely on).
fn symbols(z: &[u32], pairs: bool, runs: bool, mut f: impl FnMut(u32, u32, u32)) {
    let mut st = TokState::default();
    let n = z.len() as u32;
    for _ in 0..tok_steps(n) {
        if st.i >= n {
            return;
        }
        if let Some((t, nraw, raw)) = tok_step(&mut st, z, pairs, runs) {
            f(t, nraw, raw);
        }
    }
    assert!(
        st.i >= n,
        "the tokenizer's step bound cut a segment of {n} values short"
    );
}

/// Twin of `histogram` over every (segment, set).
pub(crate) fn histogram(z: &[u32], segs: &[EncodeSegment], hist: &mut [u32]) {
    for g in 0..3 * segs.len() {
        let seg = segs[g / 3];
        let set = g % 3;
        let mut h = [0u32; BOUNDED_ALPHABET as usize];
        let mut raw = 0u32;
        let zs = &z[seg.start as usize..(seg.start + seg.count) as usize];
        symbols(zs, set >= 1, set == 2, |t, nraw, _| {
            h[t as usize] += 1;
            raw += nraw;
        });
        let at = g * HIST_WORDS as usize;
        hist[at..at + BOUNDED_ALPHABET as usize].copy_from_slice(&h);
        hist[at + BOUNDED_ALPHABET as usize] = raw;
    }
}

/// Twin of `pack` over every segment.
pub(crate) fn pack(z: &[u32], segs: &[EncodeSegment], codes: &[u32], packed: &mut [u32]) {
    for seg in segs {
        let (mut acc, mut nacc, mut out) = (0u32, 0u32, seg.out_word as usize);
        let mut put = |v: u32, nb: u32, acc: &mut u32, nacc: &mut u32| {
            if nb == 0 {
                return;
            }
            *acc |= v << *nacc;
            let total = *nacc + nb;
            if total >= 32 {
                packed[out] = *acc;
                out += 1;
                *acc = if *nacc > 0 { v >> (32 - *nacc) } else { 0 };
                *nacc = total - 32;
            } else {
                *nacc = total;
            }
        };
        let zs = &z[seg.start as usize..(seg.start + seg.count) as usize];
        symbols(
            zs,
            seg.token_set >= 1,
            seg.token_set == 2,
            |t, nraw, raw| {
                let e = codes[(seg.codes + t) as usize];
                put(e & 0xffff, e >> 16, &mut acc, &mut nacc);
                put(raw, nraw, &mut acc, &mut nacc);
            },
        );
        if nacc > 0 {
            packed[out] = acc;
        }
    }
}
