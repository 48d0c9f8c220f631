//! The error-bounded encoder: the lattice predictor (`lattice_encode`) and the differences
//! predictor on dual-quantised bins (axis set by an estimate), each with its exception runs.
//! On a large array each predictor's settings are ranked on a sample (`sample`) and only the
//! predictor the sample finds smaller is coded in full (both when the estimates are within
//! [`CLOSE`]); an array a sample would not halve (up to about 2^15 values) has its
//! candidates estimated whole and both predictors coded (on two threads when asked). The
//! smallest file is kept.

use super::candidate::*;
use super::format::*;
use super::lattice_encode::{lattice, lattice_pending, lattice_plan, lattice_unit, round_to_i32};
use super::predict::differences_forward;
use super::predict::zig;
use super::sample;
use crate::error::invalid_option;
use crate::error::{ParameterError, Result};
use crate::field::core::container::{check_chunking, check_encode_shape};
use crate::field::core::estimate::mixed_differences;
use crate::field::core::tokens::token_of;
use crate::field::encode::encode_exactly;
use crate::field::Bound;

/// The checks of [`encode_bounded`]'s arguments, shared with the GPU encoder
/// (`field::bounded::gpu_encode`): shape, length, chunk, segments, axis set, bound.
pub(super) fn check_arguments(len: usize, shape: &[u32], options: &BoundedOptions) -> Result<()> {
    check_encode_shape(shape, BOUNDED_MAX_NDIM, len)?;
    check_chunking(options.chunk_log2, options.segments)?;
    if let Some(set) = options.axes {
        if set == 0 || set as u32 >= 1 << shape.len() {
            return Err(invalid_option(
                "axes",
                set as u64,
                "a nonzero set of the array's axes (below 2^ndim)",
            ));
        }
    }
    let (Bound::Absolute(bound) | Bound::Relative(bound)) = options.bound;
    if !(bound.is_finite() && bound > 0.0) {
        return Err(bad_bound(bound));
    }
    Ok(())
}

fn bad_bound(bound: f64) -> crate::error::Error {
    ParameterError::InvalidFloat {
        name: "max_error",
        value_bits: bound.to_bits(),
        reason: "must be finite and positive (a relative bound of a constant array is 0)",
    }
    .into()
}

/// Whether `v` is not a regular value: NaN, an infinity, a subnormal (stored exactly, so that
/// no arithmetic of the bins ever meets one: a GPU may flush subnormals to zero) or the fill
/// value.
pub(super) fn is_special(v: f32, fill: Option<f32>) -> bool {
    !v.is_finite() || v.is_subnormal() || fill.is_some_and(|f| f.to_bits() == v.to_bits())
}

/// The smallest and largest regular value in the total order of `f32::total_cmp` (-0 below
/// +0), or `None` without regular values. The order is `total_cmp`'s integer key (the bits
/// with the magnitude flipped under a sign bit), so the loop is integer min and max.
pub(super) fn regular_extent(values: &[f32], special: &[bool]) -> Option<(f32, f32)> {
    let key = |v: f32| {
        let b = v.to_bits() as i32;
        b ^ (((b >> 31) as u32) >> 1) as i32
    };
    let value = |k: i32| f32::from_bits((k ^ (((k >> 31) as u32) >> 1) as i32) as u32);
    if !special.contains(&false) {
        return None;
    }
    let (lo, hi) = values
        .iter()
        .zip(special)
        .fold((i32::MAX, i32::MIN), |(lo, hi), (&v, &s)| {
            let k = key(v);
            (
                if s { lo } else { lo.min(k) },
                if s { hi } else { hi.max(k) },
            )
        });
    Some((value(lo), value(hi)))
}

/// The offset (the smallest regular value, 0 without one) and the range (largest regular
/// value minus the offset, 0 without one) of an extent.
pub(super) fn offset_and_range(extent: Option<(f32, f32)>) -> (f32, f64) {
    match extent {
        Some((lo, hi)) => (lo, hi as f64 - lo as f64),
        None => (0.0, 0.0),
    }
}

/// Encodes a float32 array (C order, `shape` of 1 to 4 axes) within `options.bound`: a
/// version 3 file, or, when no predictor fits a bound that fine (lattice values past 2^23, more
/// than [`BOUNDED_MAX_BINS`] bins, a unit below the smallest normal f32, or a relative bound
/// of an array without range), the array stored exactly as a lossless version 2 file
/// ([`crate::field::field_version`] tells them apart; [`crate::field::decode_float_array`]
/// decodes either). Never an error for a finite positive bound.
pub fn encode_bounded(values: &[f32], shape: &[u32], options: &BoundedOptions) -> Result<Vec<u8>> {
    check_arguments(values.len(), shape, options)?;
    let fill = options.fill_value;
    let special: Vec<bool> = values.iter().map(|&v| is_special(v, fill)).collect();
    let (offset, range) = offset_and_range(regular_extent(values, &special));
    // check_arguments took a finite positive bound: a relative one of an array without range
    // is 0, and one of a wide range may pass what the candidates can double.
    let bound = options.bound.over_range(range).min(f64::MAX / 4.0);
    if bound <= 0.0 {
        return encode_exactly(values, shape, fill);
    }
    let input = Input {
        values,
        shape,
        bound,
        special,
        offset,
        range,
        options,
    };
    let code = |p: Pending| p.code(options);
    let best = match options.predictor {
        Some(Predictor::Lattice) => match (lattice_unit(&input), sample::blocks(shape)) {
            (Some(unit), Some(blocks)) => {
                lattice_pending(&input, &lattice_plan(&input, unit, &blocks).1)?.map(code)
            }
            _ => lattice(&input)?,
        },
        // The axis set by the estimate on the whole array, as the GPU encoder chooses it.
        Some(Predictor::Differences) => match bins_plan(&input, None) {
            Some(plan) => Some(code(bins_pending(&input, plan)?)),
            None => None,
        },
        None => match sample::blocks(shape) {
            // Small arrays: every candidate estimated on the whole array, both coded.
            None => {
                let try_bins = || match bins_plan(&input, None) {
                    Some(plan) => bins_pending(&input, plan).map(|p| Some(code(p))),
                    None => Ok(None),
                };
                let (l, b) = join(options.parallel, || lattice(&input), try_bins);
                smaller(l?, b?)
            }
            Some(blocks) => {
                // Each predictor's best setting by the sample's estimate; only the predictor
                // whose estimate is smaller is coded, or, when the estimates are close, the
                // one whose whole stream's estimate is.
                let lp = lattice_unit(&input).map(|unit| lattice_plan(&input, unit, &blocks));
                let bp = bins_sampled(&input, &blocks);
                let bins_with = |axes: u8| match bins_plan(&input, Some(axes)) {
                    Some(plan) => bins_pending(&input, plan).map(Some),
                    None => Ok(None),
                };
                let pending = match (lp, bp) {
                    (Some((le, lplan)), Some((be, axes))) => {
                        if le < be * (1.0 - CLOSE) {
                            lattice_pending(&input, &lplan)?
                        } else if be < le * (1.0 - CLOSE) {
                            bins_with(axes)?
                        } else {
                            let (l, b) = join(
                                options.parallel,
                                || lattice_pending(&input, &lplan),
                                || bins_with(axes),
                            );
                            [l?, b?]
                                .into_iter()
                                .flatten()
                                .min_by(|x, y| x.estimate().total_cmp(&y.estimate()))
                        }
                    }
                    (Some((_, plan)), None) => lattice_pending(&input, &plan)?,
                    (None, Some((_, axes))) => bins_with(axes)?,
                    (None, None) => None,
                };
                pending.map(code)
            }
        },
    };
    finish(best, &input)
}

/// `a` and `b`, on two threads when `parallel`.
fn join<A: Send, B: Send>(
    parallel: bool,
    a: impl FnOnce() -> A + Send,
    b: impl FnOnce() -> B + Send,
) -> (A, B) {
    if parallel {
        rayon::join(a, b)
    } else {
        (a(), b())
    }
}

/// The smaller of two candidates.
fn smaller(a: Option<Candidate>, b: Option<Candidate>) -> Option<Candidate> {
    [a, b].into_iter().flatten().min_by_key(Candidate::len)
}

/// Predictors whose sampled estimates are within this fraction of each other are both coded
/// in full.
const CLOSE: f64 = 0.04;

/// The candidate's file, or, when no candidate fits (the range needs lattice values past 2^23
/// or more than 65536 bins, or the bound is below the smallest normal unit), the array stored
/// exactly instead.
fn finish(best: Option<Candidate>, input: &Input<'_>) -> Result<Vec<u8>> {
    match best {
        Some(best) => Ok(best.into_bytes()),
        None => encode_exactly(input.values, input.shape, input.options.fill_value),
    }
}

/// The bin rule of the differences predictor, the same on the CPU and on the GPU
/// (`shaders/encode_quantise.wgsl`): every step is an IEEE f32 operation on normal numbers
/// (or zero) whose result does not depend on how a device treats subnormals.
///
/// A regular value `v` (finite, not subnormal, not the fill value) with offset `off` (the
/// smallest regular value) takes the first of the bins `c0`, `c0 - 1`, `c0 + 1` in
/// `0..BOUNDED_MAX_BINS` whose reconstruction `r = off + f32(c) * width` (the product is exact:
/// `c` below 2^16, `width` of 8 significant bits, so a fused multiply-add gives the same `r`)
/// is not subnormal and has `fl32(|r - v|) < bound32`, where
/// `c0 = round_ties_even(fl32(fl32(v - off) * inv))`, `inv = fl32(1 / width)` (computed once,
/// on the host) and `bound32` is the largest f32 at most the bound. A value with no such bin
/// is an exception (stored exactly).
///
/// Why the bound holds: if the exact `|r - v|` exceeded the bound, it would exceed `bound32`
/// (`bound32 <= bound`), and rounding is monotone, so `fl32(|r - v|) >= fl32(bound32) =
/// bound32`: the strict test fails. (`r - v` itself is computed exactly when `r` and `v` are
/// within a factor 2, Sterbenz; otherwise rounding only matters through that monotonicity.)
/// The decoder computes the same `r` (`offset + f32(x) * unit`, one rounding), so every
/// accepted value decodes within the bound.
///
/// Why a GPU that flushes subnormals computes the same bins, for widths in
/// [`GPU_WIDTH_MIN`, `GPU_WIDTH_MAX`] (the GPU encoder refuses others): `v` and `off` are normal
/// or zero; `v - off` is subnormal only when below 2^-126, and then `fl32(d * inv)` is below
/// 2^-26 (`inv <= 2^100`) either way, so `c0 = 0` whether or not it was flushed; `r` is never
/// subnormal (`f32(c) * width` is 0 or at least 2^-100, and a sum of multiples of 2^-124 is 0
/// or at least 2^-124); a subnormal `r - v` (flushed or not) is below `bound32` (at least
/// `width / 2`) either way. WGSL's `round` is ties-to-even, and `+`, `-`, `*` on f32 are
/// correctly rounded; the division is not, hence `inv` from the host.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct BinRule {
    /// The bin width (8 significant bits).
    pub width: f32,
    /// `fl32(1 / width)`.
    pub inv: f32,
    /// The largest f32 at most the bound.
    pub bound32: f32,
    /// The value of bin 0.
    pub offset: f32,
}

/// Smallest bin width the GPU encoder supports (2^-100; see [`BinRule`]).
#[cfg(any(test, feature = "gpu"))]
pub(super) const GPU_WIDTH_MIN: f32 = f32::from_bits((127 - 100) << 23);
/// Largest bin width the GPU encoder supports (2^100).
#[cfg(any(test, feature = "gpu"))]
pub(super) const GPU_WIDTH_MAX: f32 = f32::from_bits((127 + 100) << 23);

impl BinRule {
    /// The rule for `bound` and the values' offset and range, or `None` when the bin width
    /// is not a normal f32 or the range needs more than [`BOUNDED_MAX_BINS`] bins.
    pub fn new(bound: f64, offset: f32, range: f64) -> Option<BinRule> {
        let width = unit_for(2.0 * bound, crate::field::BIN_WIDTH_BITS)?;
        if (range / width as f64).floor() + 1.0 > BOUNDED_MAX_BINS as f64 {
            return None;
        }
        let b = bound as f32;
        let bound32 = if b as f64 > bound {
            f32::from_bits(b.to_bits() - 1)
        } else {
            b
        };
        Some(BinRule {
            width,
            inv: 1.0 / width,
            bound32,
            offset,
        })
    }

    /// The bin of the regular value `v`, or `None` (an exception).
    #[inline(always)]
    pub fn bin(&self, v: f32) -> Option<u32> {
        let off = self.offset;
        // round_ties_even without a library call (x86-64's baseline has no f32 rounding
        // instruction); out of the i32 range the bin is out of range either way.
        let c0 = round_to_i32(((v - off) * self.inv) as f64) as i64;
        for c in [c0, c0 - 1, c0 + 1] {
            if !(0..BOUNDED_MAX_BINS as i64).contains(&c) {
                continue;
            }
            let r = off + c as f32 * self.width;
            if !r.is_subnormal() && (r - v).abs() < self.bound32 {
                return Some(c as u32);
            }
        }
        None
    }
}

/// The bins of `values` under `rule` (exceptions, `special` or without a bin, hold the last
/// regular bin before them, those before the first regular value its bin, all 0 without
/// one) and the exception cells in order.
pub(super) fn bins_of(values: &[f32], special: &[bool], rule: &BinRule) -> (Vec<u32>, Vec<usize>) {
    let mut q = vec![0u32; values.len()];
    let mut exc = Vec::new();
    let mut last = None;
    for (i, &v) in values.iter().enumerate() {
        let chosen = if special[i] { None } else { rule.bin(v) };
        match chosen {
            Some(b) => {
                q[i] = b;
                last = Some(b);
            }
            None => {
                exc.push(i);
                q[i] = last.unwrap_or(0);
            }
        }
    }
    // Exceptions before the first regular value hold its bin.
    if let Some(first) = (0..q.len()).find(|i| exc.binary_search(i).is_err()) {
        let b = q[first];
        q[..first].fill(b);
    }
    (q, exc)
}

/// The axis set (of `ndim` axes) whose estimate `bits(set)` is smallest, the first on ties.
pub(super) fn choose_axes(ndim: usize, mut bits: impl FnMut(u8) -> f64) -> u8 {
    let mut best: Option<(f64, u8)> = None;
    for set in 1..1u8 << ndim {
        let b = bits(set);
        if best.is_none_or(|x| b < x.0) {
            best = Some((b, set));
        }
    }
    best.expect("one axis set at least").1
}

/// The differences predictor's bins, exception cells and axis set.
struct BinsPlan {
    width: f32,
    q: Vec<u32>,
    exc: Vec<usize>,
    axes: u8,
}

/// The differences predictor's bins ([`BinRule`]) and axis set (the options', else `axes`,
/// else the one whose estimate ([`quick_bits`]) on the whole array is smallest, as the GPU
/// encoder chooses it), or `None` when the range needs more than [`BOUNDED_MAX_BINS`] bins.
fn bins_plan(input: &Input<'_>, axes: Option<u8>) -> Option<BinsPlan> {
    let rule = BinRule::new(input.bound, input.offset, input.range)?;
    let (q, exc) = bins_of(input.values, &input.special, &rule);
    let (shape, nd) = (input.shape, input.shape.len());
    let axes = match input.options.axes.or(axes) {
        Some(set) => set,
        None => choose_axes(nd, |set| {
            quick_bits(&differences_forward(q.clone(), shape, set))
        }),
    };
    Some(BinsPlan {
        width: rule.width,
        q,
        exc,
        axes,
    })
}

/// The differences predictor on the sample's blocks alone (the whole array's bins are made
/// only if it is coded): the axis set (the options', else the one whose [`quick_bits`] over
/// the blocks is smallest) and its estimate ([`run_bits`] summed over the blocks, scaled to
/// the whole array, comparable with the lattice plan's); `None` when the range needs more
/// than [`BOUNDED_MAX_BINS`] bins. Each block cell's residual is the one the whole array's
/// differences give it, from its grown block's bins ([`sample::Block::grown`]; a special cell
/// or one without a bin holds the bin before it in the grown block, as [`bins_of`] holds the
/// last regular bin).
fn bins_sampled(input: &Input<'_>, blocks: &[sample::Block]) -> Option<(f64, u8)> {
    let rule = BinRule::new(input.bound, input.offset, input.range)?;
    let nd = input.shape.len();
    let corners = 1usize << nd;
    // Per block, per axis set (index = set), the residuals of the block's cells in order.
    let mut residuals: Vec<Vec<Vec<u32>>> = Vec::with_capacity(blocks.len());
    let mut hists = vec![([0u64; SINGLES as usize], 0u64); corners];
    for b in blocks {
        let (lo, extent, cells) = b.grown(input.shape);
        let mut last = 0u32;
        let q: Vec<u32> = cells
            .iter()
            .map(|&i| {
                if !input.special[i] {
                    if let Some(bin) = rule.bin(input.values[i]) {
                        last = bin;
                    }
                }
                last
            })
            .collect();
        let mut st = vec![1usize; nd];
        for a in (0..nd.saturating_sub(1)).rev() {
            st[a] = st[a + 1] * extent[a + 1];
        }
        let off: Vec<usize> = (0..corners)
            .map(|t| (0..nd).filter(|a| t >> a & 1 == 1).map(|a| st[a]).sum())
            .collect();
        let mut per_set = vec![Vec::with_capacity(b.cells.len()); corners];
        let mut g = [0u32; 16];
        // The block's cells: grown coordinates `lo + k`, C order.
        let mut k = vec![0usize; nd];
        for _ in 0..b.cells.len() {
            let (mut j, mut active) = (0usize, 0usize);
            for a in 0..nd {
                let c = lo[a] + k[a];
                j += c * st[a];
                if c >= 1 {
                    active |= 1 << a;
                }
            }
            for t in 0..corners {
                g[t] = if t & !active == 0 { q[j - off[t]] } else { 0 };
            }
            mixed_differences(&mut g[..corners], nd, active);
            for set in 1..corners {
                let z = zig(g[set] as i32);
                per_set[set].push(z);
                let (t, r, _) = token_of(z);
                hists[set].0[t as usize] += 1;
                hists[set].1 += r as u64;
            }
            for a in (0..nd).rev() {
                k[a] += 1;
                if k[a] < b.shape[a] as usize {
                    break;
                }
                k[a] = 0;
            }
        }
        residuals.push(per_set);
    }
    let sampled: usize = blocks.iter().map(|b| b.cells.len()).sum();
    let axes = input.options.axes.unwrap_or_else(|| {
        choose_axes(nd, |set| {
            let (hist, raw) = &hists[set as usize];
            quick_bits_of(hist, *raw, sampled)
        })
    });
    let est: f64 = residuals
        .iter()
        .map(|per_set| run_bits(&per_set[axes as usize]))
        .sum();
    Some((est * input.values.len() as f64 / sampled as f64, axes))
}

/// The differences predictor's candidate of a plan before its entropy stage.
fn bins_pending(input: &Input<'_>, plan: BinsPlan) -> Result<Pending> {
    let (nruns, runs) = runs_of(input.values, plan.exc.into_iter())?;
    let z = differences_forward(plan.q, input.shape, plan.axes);
    let mut header = input.header(Predictor::Differences, plan.width);
    header.axes = vec![plan.axes];
    header.runs = nruns;
    header.runs_len = runs.len() as u32;
    Ok(Pending { header, runs, z })
}
