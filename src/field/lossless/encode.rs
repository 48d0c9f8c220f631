//! The lossless encoder: the input stream (ordered bits or float-mult, NaN and fill inline or
//! as exception runs), the axes to difference along, both chosen by a size estimate on a
//! sample of the array, then the residual and adjustment tokens of every chunk.

use rayon::prelude::*;

use super::format::*;
use super::{FloatSlice, FloatType};
use crate::codec::bits::BitWriter;
use crate::error::invalid_option;
use crate::error::Result;
use crate::field::core::code::{canonical, code_lengths, MAX_TOKENS};
use crate::field::core::container::{
    check_chunking, check_encode_shape, segment_range, strides, CRC_LEN,
};
use crate::field::core::estimate::{
    difference_tokens, entropy_bits, sample_windows, second_difference_tokens,
};
use crate::field::core::runs::{write_runs, Run, MAX_RUN_VALUES};
use crate::field::core::tokens::*;
use crate::field::FIELD_MAGIC;

/// Options of [`encode_lossless`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LosslessOptions {
    /// Bit pattern of the fill value in the dtype's width (default none). Fill cells may go
    /// to exception runs, as NaN do.
    pub fill_value: Option<u32>,
    /// Try float-mult input for float32 arrays (default true).
    pub float_mult: bool,
    /// Try value-table input: indices into the array's distinct values (default true).
    pub value_table: bool,
    /// Difference along exactly these axes (bit `a` = axis `a`, 0 the slowest), or let the
    /// encoder choose the set that codes smallest (default `None`).
    pub axes: Option<u8>,
    /// Difference a second time along exactly these axes (a subset of `axes`, which must then
    /// be given), or (default `None`) let the encoder choose where it chooses `axes`: second
    /// differences along the last axis where they code smaller, as smooth 1-D signals do
    /// (with `axes` given and this `None`, none).
    pub axes2: Option<u8>,
    /// log2 of the values per chunk, 8 to 20 (default 16).
    pub chunk_log2: u8,
    /// Segments per chunk, 1 to 32 (default 8).
    pub segments: u8,
    /// Encode chunks on rayon's thread pool (default true).
    pub parallel: bool,
}

impl Default for LosslessOptions {
    fn default() -> Self {
        LosslessOptions {
            fill_value: None,
            float_mult: true,
            value_table: true,
            axes: None,
            axes2: None,
            chunk_log2: 16,
            segments: 8,
            parallel: true,
        }
    }
}

/// Runs of zeros shorter than this are coded as single zero tokens by the encoder.
const RUN_MIN_ENCODE: usize = 4;
/// A stream uses run tokens only where they make it at most this fraction of its size
/// without them.
const RUN_MIN_SAVING: f64 = 0.97;
/// A float-mult base is tried when this fraction of a sample fits within 63 ULPs.
const MULT_FIT: f64 = 0.9;

/// A value table is tried when the array has at most this fraction of distinct values.
const TABLE_MAX_DISTINCT: f64 = 0.25;

/// One candidate input: the integer stream, the adjustments (float-mult), the exception
/// runs, the value table (value-table input).
struct Input {
    x: Vec<u32>,
    adjust: Option<Vec<u32>>,
    runs: Vec<Run>,
    base: Option<f32>,
    table: Vec<u32>,
}

/// Encodes a float array (C order, `shape` of 1 to 4 axes) losslessly.
pub fn encode_lossless(
    values: FloatSlice<'_>,
    shape: &[u32],
    options: &LosslessOptions,
) -> Result<Vec<u8>> {
    let dtype = values.dtype();
    let width = dtype.bits();
    check_encode_shape(shape, LOSSLESS_MAX_NDIM, values.len())?;
    if let Some(f) = options.fill_value {
        if f & !mask(width) != 0 {
            return Err(invalid_option(
                "fill_value",
                f as u64,
                "wider than the dtype",
            ));
        }
    }
    check_chunking(options.chunk_log2, options.segments)?;
    if let Some(a) = options.axes {
        if a >> shape.len() != 0 {
            return Err(invalid_option(
                "axes",
                a as u64,
                "a bit set past the last axis",
            ));
        }
    }
    if let Some(a2) = options.axes2 {
        if options.axes.is_none_or(|a| a2 & !a != 0) {
            return Err(invalid_option(
                "axes2",
                a2 as u64,
                "second differences need the axes given and must be a subset of them",
            ));
        }
    }
    let bits: Vec<u32> = match values {
        FloatSlice::F32(v) => v.iter().map(|f| f.to_bits()).collect(),
        FloatSlice::F16(v) | FloatSlice::BF16(v) => v.iter().map(|&b| b as u32).collect(),
    };
    let special: Vec<bool> = bits
        .iter()
        .map(|&b| dtype.is_nan(b) || options.fill_value == Some(b))
        .collect();
    let any_special = special.iter().any(|&s| s);

    // Candidate inputs, each with its best axes by the estimate; the smallest is kept.
    let sample = sample_windows(bits.len());
    let mut best: Option<(f64, (u8, u8), Input)> = None;
    let mut consider = |input: Input| {
        let runs_bytes = runs_section(&input.runs).map_or(f64::INFINITY, |s| s.len() as f64);
        let forced = options.axes.map(|a| (a, options.axes2.unwrap_or(0)));
        let (axes, est) = choose_axes(&input, shape, width, forced, &sample);
        let total = est + runs_bytes + table_bytes(&input.table, width) as f64;
        if best.as_ref().is_none_or(|b| total < b.0) {
            best = Some((total, axes, input));
        }
    };
    consider(ordered(&bits, width, None));
    if any_special {
        consider(ordered(&bits, width, Some(&special)));
    }
    for sp in [None, Some(&special[..])] {
        if options.value_table && (sp.is_none() || any_special) {
            if let Some(input) = value_table(&bits, width, sp) {
                consider(input);
            }
        }
    }
    if dtype == FloatType::F32 && options.float_mult {
        for base in mult_bases(&bits, &special) {
            let sp = any_special.then_some(&special[..]);
            consider(float_mult(&bits, base, sp));
        }
    }
    let (_, (axes, axes2), input) = best.expect("the ordered input is always a candidate");
    let runs = runs_section(&input.runs)
        .ok_or_else(|| invalid_option("exceptions", 0, "more than 65536 distinct NaN/fill"))?;

    // Residuals and adjustments as zigzag values.
    let mut x = input.x;
    difference_along(&mut x, shape, axes2);
    let residuals = differences(x, shape, axes, width);
    let adjust: Option<Vec<u32>> = input
        .adjust
        .map(|a| a.into_iter().map(|v| zigzag(v, 32)).collect());
    let chunk = 1usize << options.chunk_log2;
    let nchunks = residuals.len().div_ceil(chunk);
    let encode_one = |c: usize| {
        let range = c * chunk..((c + 1) * chunk).min(residuals.len());
        let adj = adjust
            .as_ref()
            .map(|a| &a[range.clone()])
            .filter(|a| a.iter().any(|&v| v != 0));
        encode_chunk(&residuals[range], adj, options.segments as usize, width)
    };
    let chunks: Vec<Vec<u8>> = if options.parallel {
        (0..nchunks).into_par_iter().map(encode_one).collect()
    } else {
        (0..nchunks).map(encode_one).collect()
    };

    let header = LosslessHeader {
        dtype,
        shape: shape.to_vec(),
        fill_value: options.fill_value,
        mult_base: input.base,
        table: input.table,
        axes,
        axes2,
        segments: options.segments,
        chunk_log2: options.chunk_log2,
        runs: input.runs.len() as u32,
        runs_len: runs.len() as u32,
    };
    let body: usize = chunks.iter().map(Vec::len).sum();
    let mut out = header.to_bytes();
    debug_assert_eq!(out[..8], FIELD_MAGIC);
    out.reserve(4 * nchunks + runs.len() + body + CRC_LEN);
    for c in &chunks {
        out.extend_from_slice(&(c.len() as u32).to_le_bytes());
    }
    out.extend_from_slice(&runs);
    for c in &chunks {
        out.extend_from_slice(c);
    }
    let crc = crc32fast::hash(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    Ok(out)
}

/// The runs section's bytes (empty without runs), or `None` past the table's limit.
fn runs_section(runs: &[Run]) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    if !runs.is_empty() {
        write_runs(runs, &mut out).ok()?;
    }
    Some(out)
}

/// Exception runs over the cells marked special.
fn special_runs(bits: &[u32], special: &[bool]) -> Vec<Run> {
    let mut runs: Vec<Run> = Vec::new();
    for (i, (&b, &s)) in bits.iter().zip(special).enumerate() {
        if !s {
            continue;
        }
        match runs.last_mut() {
            Some(r) if r.start + r.len == i as u32 && r.bits == b => r.len += 1,
            _ => runs.push(Run {
                start: i as u32,
                len: 1,
                bits: b,
            }),
        }
    }
    runs
}

/// Replaces the special cells by the previous kept value (the first kept one before any).
fn fill_forward(x: &mut [u32], special: &[bool]) {
    let Some(first) = special.iter().position(|&s| !s) else {
        x.fill(0);
        return;
    };
    let mut last = x[first];
    for (v, &s) in x.iter_mut().zip(special) {
        if s {
            *v = last;
        } else {
            last = *v;
        }
    }
}

/// Ordered bits; with `special`, those cells go to exception runs.
fn ordered(bits: &[u32], width: u32, special: Option<&[bool]>) -> Input {
    let mut x: Vec<u32> = bits.iter().map(|&b| to_ordered(b, width)).collect();
    let mut runs = Vec::new();
    if let Some(sp) = special {
        runs = special_runs(bits, sp);
        if distinct_patterns(&runs) > MAX_RUN_VALUES as usize {
            runs.clear();
        } else {
            fill_forward(&mut x, sp);
        }
    }
    Input {
        x,
        adjust: None,
        runs,
        base: None,
        table: Vec::new(),
    }
}

/// Value-table input: each value's index among the array's distinct bit patterns sorted by
/// the order map; with `special`, those cells go to exception runs (and are left out of the
/// table). `None` when the distinct values are more than [`TABLE_MAX_DISTINCT`] of the array.
fn value_table(bits: &[u32], width: u32, special: Option<&[bool]>) -> Option<Input> {
    let kept = |i: usize| special.is_none_or(|s| !s[i]);
    let mut keys: Vec<u32> = (0..bits.len())
        .filter(|&i| kept(i))
        .map(|i| to_ordered(bits[i], width))
        .collect();
    keys.sort_unstable();
    keys.dedup();
    if keys.is_empty() || keys.len() as f64 > TABLE_MAX_DISTINCT * bits.len() as f64 {
        return None;
    }
    let mut runs = Vec::new();
    let mut x: Vec<u32> = bits
        .iter()
        .enumerate()
        .map(|(i, &b)| {
            if kept(i) {
                keys.binary_search(&to_ordered(b, width))
                    .expect("a kept value is in the table") as u32
            } else {
                0
            }
        })
        .collect();
    if let Some(sp) = special {
        runs = special_runs(bits, sp);
        if distinct_patterns(&runs) > MAX_RUN_VALUES as usize {
            return None;
        }
        fill_forward(&mut x, sp);
    }
    Some(Input {
        x,
        adjust: None,
        runs,
        base: None,
        table: keys.iter().map(|&o| from_ordered(o, width)).collect(),
    })
}

fn distinct_patterns(runs: &[Run]) -> usize {
    let mut p: Vec<u32> = runs.iter().map(|r| r.bits).collect();
    p.sort_unstable();
    p.dedup();
    p.len()
}

/// The float-mult multiplier of `v` for `base` and its product: `rint(v / base)` when it is
/// below [`MULT_K_LIMIT`] in magnitude and its product is not subnormal, else `fallback`
/// (0 if that product is subnormal).
fn mult_k(v: f32, base: f32, fallback: i32) -> (i32, f32) {
    let q = (v as f64 / base as f64).round_ties_even();
    let mut k = if q.abs() < MULT_K_LIMIT as f64 {
        q as i32
    } else {
        fallback
    };
    let mut p = k as f32 * base;
    if p.is_subnormal() {
        k = 0;
        p = 0.0;
    }
    (k, p)
}

/// Float-mult input: `x = k + 2^31`, adjustment = ordered(v) - ordered(f32(k) x base).
fn float_mult(bits: &[u32], base: f32, special: Option<&[bool]>) -> Input {
    let mut x = Vec::with_capacity(bits.len());
    let mut adjust = Vec::with_capacity(bits.len());
    let mut prev = 0i32;
    for (i, &b) in bits.iter().enumerate() {
        if special.is_some_and(|s| s[i]) {
            x.push(prev as u32 ^ 0x8000_0000);
            adjust.push(0);
            continue;
        }
        let (k, p) = mult_k(f32::from_bits(b), base, prev);
        prev = k;
        x.push(k as u32 ^ 0x8000_0000);
        adjust.push(to_ordered(b, 32).wrapping_sub(to_ordered(p.to_bits(), 32)));
    }
    let runs = special.map_or_else(Vec::new, |sp| special_runs(bits, sp));
    if distinct_patterns(&runs) > MAX_RUN_VALUES as usize {
        // Too many NaN patterns for the table: they stay inline (their adjustment).
        let mut x = x;
        let mut adjust = adjust;
        let mut prev = 0i32;
        for (i, &b) in bits.iter().enumerate() {
            if special.is_some_and(|s| s[i]) {
                let p = prev as f32 * base;
                x[i] = prev as u32 ^ 0x8000_0000;
                adjust[i] = to_ordered(b, 32).wrapping_sub(to_ordered(p.to_bits(), 32));
            } else {
                prev = (x[i] ^ 0x8000_0000) as i32;
            }
        }
        return Input {
            x,
            adjust: Some(adjust),
            runs: Vec::new(),
            base: Some(base),
            table: Vec::new(),
        };
    }
    Input {
        x,
        adjust: Some(adjust),
        runs,
        base: Some(base),
        table: Vec::new(),
    }
}

/// Float-mult bases worth a full estimate: among powers of two, 1 and {1, 2, 2.5, 4, 5} x
/// 10^e near the 10th percentile of the gaps between distinct sampled values, the two
/// coarsest that fit [`MULT_FIT`] of the sample's distinct values within 63 ULPs.
fn mult_bases(bits: &[u32], special: &[bool]) -> Vec<f32> {
    let step = (bits.len() / 65536).max(1);
    let sample: Vec<f32> = (0..bits.len())
        .step_by(step)
        .filter(|&i| !special[i])
        .map(|i| f32::from_bits(bits[i]))
        .filter(|v| v.is_finite())
        .collect();
    if sample.len() < 16 {
        return Vec::new();
    }
    let mut uq: Vec<f64> = sample.iter().map(|&v| v as f64).collect();
    uq.sort_unstable_by(f64::total_cmp);
    uq.dedup();
    let mut gaps: Vec<f64> = uq.windows(2).map(|w| w[1] - w[0]).collect();
    let d = if gaps.is_empty() {
        1.0
    } else {
        let k = gaps.len() / 10;
        *gaps.select_nth_unstable_by(k, f64::total_cmp).1
    };
    if !(d > 0.0 && d.is_finite()) {
        return Vec::new();
    }
    let e = d.log10().floor() as i32;
    let mut cands = vec![1.0f64, 2f64.powi(d.log2().round() as i32)];
    for ee in e - 1..=e + 1 {
        for m in [1.0, 2.0, 2.5, 4.0, 5.0] {
            cands.push(format!("{m}e{ee}").parse().expect("a decimal"));
        }
    }
    let mut out: Vec<f32> = cands
        .into_iter()
        .filter(|&c| c >= d / 1.01 || c == 1.0)
        .map(|c| c as f32)
        .filter(|c| c.is_normal() && *c > 0.0)
        .collect();
    out.sort_unstable_by(|a, b| b.total_cmp(a));
    out.dedup();
    // The fit counts distinct values: a value repeated over most of the array (zero in a
    // sparse field) fits every base and must not decide alone.
    let distinct: Vec<f32> = uq.iter().map(|&v| v as f32).collect();
    out.retain(|&base| {
        let fit = distinct
            .iter()
            .filter(|&&v| {
                let (_, p) = mult_k(v, base, 0);
                let adj = to_ordered(v.to_bits(), 32).wrapping_sub(to_ordered(p.to_bits(), 32));
                (adj as i32).unsigned_abs() <= 63
            })
            .count();
        fit as f64 >= MULT_FIT * distinct.len() as f64
    });
    out.truncate(2);
    out
}

/// The axis sets `(axes, axes2)` (forced, or every subset of the axes differenced once,
/// and second differences along the last axis) with the smallest estimated bytes of
/// residuals (and adjustments) on the sample, scaled to the whole array.
fn choose_axes(
    input: &Input,
    shape: &[u32],
    width: u32,
    forced: Option<(u8, u8)>,
    sample: &[(usize, usize)],
) -> ((u8, u8), f64) {
    let nd = shape.len();
    let sampled: usize = sample.iter().map(|w| w.1).sum();
    let scale = input.x.len() as f64 / sampled as f64 / 8.0;
    let mut adj_bits = 0.0;
    if let Some(a) = &input.adjust {
        let mut hist = [0u64; MAX_TOKENS];
        let mut raw = 0u64;
        for &(s, l) in sample {
            for &v in &a[s..s + l] {
                let (t, r, _) = token_of(zigzag(v, 32));
                hist[t as usize] += 1;
                raw += r as u64;
            }
        }
        adj_bits = entropy_bits(&hist, raw);
    }
    let est =
        |(hist, raw): &([u64; MAX_TOKENS], u64)| (entropy_bits(hist, *raw) + adj_bits) * scale;
    if let Some((axes, axes2)) = forced.filter(|f| f.1 != 0) {
        return (
            (axes, axes2),
            est(&second_difference_tokens(
                &input.x, shape, width, axes, axes2, sample,
            )),
        );
    }
    let sets: Vec<u8> = match forced {
        Some((a, _)) => vec![a],
        None => (0..1u8 << nd).collect(),
    };
    let mut best = ((0u8, 0u8), f64::INFINITY);
    let tokens = difference_tokens(&input.x, shape, width, &sets, sample);
    for (&set, t) in sets.iter().zip(&tokens) {
        let e = est(t);
        if e < best.1 {
            best = ((set, 0), e);
        }
    }
    // Second differences along the last axis, over the best set and the last axis alone.
    let last = 1u8 << (nd - 1);
    if forced.is_none() {
        let mut bases = vec![best.0 .0 | last, last];
        bases.dedup();
        for set in bases {
            let e = est(&second_difference_tokens(
                &input.x, shape, width, set, last, sample,
            ));
            if e < best.1 {
                best = ((set, last), e);
            }
        }
    }
    best
}

/// The zigzag residuals: `x` differenced along each axis in `axes` (wrapping, the value
/// before the first along an axis being 0), in `width` bits.
pub(in crate::field) fn differences(
    mut x: Vec<u32>,
    shape: &[u32],
    axes: u8,
    width: u32,
) -> Vec<u32> {
    difference_along(&mut x, shape, axes);
    for v in &mut x {
        *v = zigzag(*v & mask(width), width);
    }
    x
}

/// `x` differenced in place along each axis in `axes` (wrapping, the value before the first
/// along an axis being 0).
fn difference_along(x: &mut [u32], shape: &[u32], axes: u8) {
    let st = strides(shape);
    for (a, &s) in st.iter().enumerate() {
        if axes >> a & 1 == 0 {
            continue;
        }
        let block = s * shape[a] as usize;
        for b in x.chunks_mut(block) {
            for i in (s..b.len()).rev() {
                b[i] = b[i].wrapping_sub(b[i - s]);
            }
        }
    }
}

/// One symbol: token, raw bit count, raw bits.
type Symbol = (u8, u8, u32);

/// The symbols of one segment; zero runs of at least `min_run` become run tokens (never,
/// with `min_run` 0).
fn tokenize(z: &[u32], width: u32, min_run: usize, out: &mut Vec<Symbol>) {
    let mut i = 0;
    while i < z.len() {
        if min_run > 0 && z[i] == 0 {
            let run = z[i..].iter().take_while(|&&v| v == 0).count();
            if run >= min_run {
                let mut left = run;
                while left >= 2 {
                    let n = left.min(RUN_MAX as usize);
                    let (t, r, v) = run_token(width, n as u32);
                    out.push((t as u8, r as u8, v));
                    left -= n;
                }
                if left == 1 {
                    out.push((0, 0, 0));
                }
                i += run;
                continue;
            }
        }
        let (t, r, v) = token_of(z[i]);
        out.push((t as u8, r as u8, v));
        i += 1;
    }
}

/// A stream's code lengths (`ntok` of them) and its segments' bytes, with or without run
/// tokens, whichever is smaller.
pub(super) fn encode_stream(z: &[u32], segments: usize, width: u32) -> (Vec<u8>, Vec<Vec<u8>>) {
    let mut best: Option<(u64, Vec<u8>, Vec<Vec<Symbol>>)> = None;
    let has_zero_runs = z.windows(RUN_MIN_ENCODE).any(|w| w.iter().all(|&v| v == 0));
    for min_run in [0, RUN_MIN_ENCODE] {
        if min_run > 0 && !has_zero_runs {
            continue;
        }
        let segs: Vec<Vec<Symbol>> = (0..segments)
            .map(|s| {
                let mut out = Vec::new();
                tokenize(
                    &z[segment_range(z.len(), segments, s)],
                    width,
                    min_run,
                    &mut out,
                );
                out
            })
            .collect();
        let mut hist = [0u64; MAX_TOKENS];
        let mut raw = 0u64;
        for &(t, r, _) in segs.iter().flatten() {
            hist[t as usize] += 1;
            raw += r as u64;
        }
        let ntok = hist.iter().rposition(|&c| c > 0).map_or(1, |t| t + 1);
        let mut lengths = vec![0u8; ntok];
        code_lengths(&hist[..ntok], &mut lengths);
        if lengths.iter().all(|&l| l == 0) {
            lengths[0] = 1; // an empty stream: one token, zero bits
        }
        let single = lengths.iter().filter(|&&l| l > 0).count() == 1;
        let bits: u64 = raw
            + if single {
                0
            } else {
                hist.iter().zip(&lengths).map(|(&c, &l)| c * l as u64).sum()
            };
        // Run tokens cost a branch per symbol in the decoder: kept where they save 3 %.
        if best
            .as_ref()
            .is_none_or(|b| (bits as f64) < b.0 as f64 * RUN_MIN_SAVING)
        {
            best = Some((bits, lengths, segs));
        }
    }
    let (_, lengths, segs) = best.expect("the no-run variant is always tried");
    let codes = canonical(&lengths);
    let bytes = segs
        .iter()
        .map(|syms| {
            let mut w = BitWriter::with_prefix(&[], syms.len() * 2);
            for &(t, r, v) in syms {
                let (code, l) = codes[t as usize];
                w.write(code, l);
                w.write(v, r as u32);
            }
            w.finish()
        })
        .collect();
    (lengths, bytes)
}

fn put_lengths(lengths: &[u8], out: &mut Vec<u8>) {
    out.push(lengths.len() as u8);
    for pair in lengths.chunks(2) {
        out.push(pair[0] | pair.get(1).map_or(0, |&l| l << 4));
    }
}

/// One chunk: flags, code lengths, segment lengths, segments (residuals, then adjustments).
fn encode_chunk(z: &[u32], adjust: Option<&[u32]>, segments: usize, width: u32) -> Vec<u8> {
    let (res_lengths, res_segs) = encode_stream(z, segments, width);
    let adj = adjust.map(|a| encode_stream(a, segments, 32));
    let mut out = vec![if adj.is_some() { CHUNK_FLAG_ADJUST } else { 0 }];
    put_lengths(&res_lengths, &mut out);
    if let Some((l, _)) = &adj {
        put_lengths(l, &mut out);
    }
    let all: Vec<&Vec<u8>> = res_segs
        .iter()
        .chain(adj.iter().flat_map(|(_, s)| s.iter()))
        .collect();
    for s in &all {
        out.extend_from_slice(&(s.len() as u32).to_le_bytes());
    }
    for s in all {
        out.extend_from_slice(s);
    }
    out
}
