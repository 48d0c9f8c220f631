//! The lattice predictor's side of the error-bounded encoder: the unit, the axis order and
//! QoZ's level-step settings chosen by an estimate (on the sample's blocks for large arrays,
//! where only the best setting is coded; on the whole array for small ones, where the best
//! three are), and the candidate of a forward pass.

use super::candidate::{quick_bits, run_bits, runs_of, unit_for, Candidate, Input, Pending};
use super::format::*;
use super::predict::{lattice_forward, passes, Forward, Geometry};
use super::sample;
use super::scratch;
use crate::error::Result;

/// QoZ's grid of level-step settings `(alpha, beta)`: level `l >= 1` (stride `2^(l-1)`)
/// quantises with step `round(16 / min(alpha^(l-1), beta))`. The encoder ranks them by an
/// estimate and codes the best [`SETTINGS_CODED`] in full.
const LEVEL_SETTINGS: [(f64, f64); 9] = [
    (1.0, 1.0),
    (1.25, 2.0),
    (1.25, 4.0),
    (1.5, 2.0),
    (1.5, 4.0),
    (1.75, 2.0),
    (1.75, 4.0),
    (2.0, 2.0),
    (2.0, 4.0),
];

/// Level-step settings coded in full, the best by estimate.
const SETTINGS_CODED: usize = 3;

/// Steps per level (entry `l` for stride `2^l`, entry `L` for value 0) of a setting.
fn level_steps(levels: u32, (alpha, beta): (f64, f64)) -> Vec<u8> {
    let mut steps: Vec<u8> = (0..levels)
        .map(|l| {
            let q = (LATTICE_STEP_MAX as f64 / alpha.powi(l as i32).min(beta)).round_ties_even();
            q.clamp(1.0, LATTICE_STEP_MAX as f64) as u8
        })
        .collect();
    steps.push(LATTICE_STEP_MAX as u8);
    steps
}

/// The lattice unit: 7 significant bits, fewer when the range needs more lattice values;
/// `None` when even 1 bit needs lattice values past the exact-product limit or the unit is not
/// a normal f32.
pub(super) fn lattice_unit(input: &Input<'_>) -> Option<f32> {
    let limit_for = |bits: u32| 1i64 << (PRODUCT_BITS - bits);
    let s = LATTICE_STEP_MAX as f64;
    for bits in (1..=LATTICE_UNIT_BITS).rev() {
        let mut unit = unit_for(2.0 * input.bound / (s + 1.0), bits)?;
        while unit as f64 * (s + 1.0) > 2.0 * input.bound {
            unit = f32::from_bits(unit.to_bits() - (1 << (24 - bits)));
        }
        if !unit.is_normal() {
            return None;
        }
        if (input.range / unit as f64 + 2.0 * s) * 4.0 < limit_for(bits) as f64 {
            return Some(unit);
        }
    }
    None
}

/// The lattice values of `values` for `unit` (0 at special cells).
fn lattice_values(values: &[f32], special: &[bool], offset: f32, unit: f32) -> Vec<i32> {
    let mut u = scratch::take(values.len());
    u.extend(values.iter().zip(special).map(|(&v, &sp)| {
        if sp {
            0
        } else {
            round_to_i32((v as f64 - offset as f64) / unit as f64)
        }
    }));
    u
}

/// `t.round_ties_even() as i32` without a library call or a saturating conversion (so the
/// loop vectorises): `t` clamped to the i32 range (where the cast saturates anyway) plus
/// 1.5 * 2^52 is rounded to an integer, ties to even, whose low 32 bits are the result
/// (`t` is finite here).
#[inline(always)]
pub(super) fn round_to_i32(t: f64) -> i32 {
    const MAGIC: f64 = 6_755_399_441_055_744.0;
    (t.clamp(i32::MIN as f64, i32::MAX as f64) + MAGIC).to_bits() as i32
}

/// The lattice predictor's axis orders tried: the array's, and reversed.
fn lattice_orders(nd: usize) -> Vec<Vec<u8>> {
    let mut orders: Vec<Vec<u8>> = vec![(0..nd as u8).collect()];
    if nd > 1 {
        orders.push((0..nd as u8).rev().collect());
    }
    orders
}

/// A lattice setting chosen on a sample: unit, axis order and steps per level, and for a
/// sparse stream the runner-up's steps.
#[derive(Debug, Clone)]
pub(super) struct LatticePlan {
    unit: f32,
    order: Vec<u8>,
    steps: Vec<u8>,
    runner_up: Option<Vec<u8>>,
}

/// The lattice setting (axis order, then level steps) whose estimate ([`run_bits`]) summed
/// over the sample's blocks is smallest, with that estimate scaled to the whole array.
pub(super) fn lattice_plan(
    input: &Input<'_>,
    unit: f32,
    blocks: &[sample::Block],
) -> (f64, LatticePlan) {
    let nd = input.shape.len();
    let levels = levels_for(input.shape);
    // Per block: geometry, levels, lattice values and special cells.
    let prepared: Vec<(Geometry, u32, Vec<i32>, Vec<bool>)> = blocks
        .iter()
        .map(|b| {
            let v: Vec<f32> = b.cells.iter().map(|&i| input.values[i]).collect();
            let sp: Vec<bool> = b.cells.iter().map(|&i| input.special[i]).collect();
            let u = lattice_values(&v, &sp, input.offset, unit);
            (Geometry::new(&b.shape), levels_for(&b.shape), u, sp)
        })
        .collect();
    let sampled: usize = blocks.iter().map(|b| b.cells.len()).sum();
    // At the first setting each block's passes choose their kinds (linear or cubic); the
    // other settings reuse them (the kind follows the data's smoothness more than the steps).
    let estimate = |order: &[u8], setting: (f64, f64), kinds: Option<&[Vec<bool>]>| {
        let mut chosen = Vec::with_capacity(prepared.len());
        let mut bits = 0.0;
        for (k, (geo, lv, u, sp)) in prepared.iter().enumerate() {
            let ps = passes(nd, *lv, order);
            let steps = level_steps(*lv, setting);
            let cubic = kinds.map(|c| &c[k][..]);
            let (z, _, kind) = lattice_forward(geo, &ps, u.clone(), sp, &steps, cubic);
            bits += run_bits(&z);
            chosen.push(kind);
        }
        (bits, chosen)
    };
    let mut best: Option<(f64, Vec<u8>, Vec<Vec<bool>>)> = None;
    for order in lattice_orders(nd) {
        let (b, kinds) = estimate(&order, LEVEL_SETTINGS[0], None);
        if best.as_ref().is_none_or(|x| b < x.0) {
            best = Some((b, order, kinds));
        }
    }
    let (est0, order, kinds) = best.expect("one order at least");
    // Every distinct setting's estimate, smallest first.
    let mut ranked = vec![(est0, LEVEL_SETTINGS[0])];
    let mut seen = vec![level_steps(levels, LEVEL_SETTINGS[0])];
    for &candidate in &LEVEL_SETTINGS[1..] {
        let steps = level_steps(levels, candidate);
        if seen.contains(&steps) {
            continue;
        }
        seen.push(steps);
        ranked.push((estimate(&order, candidate, Some(&kinds)).0, candidate));
    }
    ranked.sort_by(|a, b| a.0.total_cmp(&b.0));
    let est = ranked[0].0;
    // A sparse stream's estimate rests on few non-zero residuals in the sample, and a small
    // array's second setting costs little: the runner-up is tried on the whole array too.
    let runner_up = ((est < SPARSE_BITS * sampled as f64 || input.values.len() <= RUNNER_UP_UP_TO)
        && ranked.len() > 1)
        .then(|| level_steps(levels, ranked[1].1));
    let plan = LatticePlan {
        unit,
        order,
        steps: level_steps(levels, ranked[0].1),
        runner_up,
    };
    (est * input.values.len() as f64 / sampled as f64, plan)
}

/// Below this many estimated bits a value on the sample, the runner-up setting is tried on
/// the whole array too ([`lattice_pending`]).
const SPARSE_BITS: f64 = 1.0;

/// Arrays of at most this many values try the runner-up setting on the whole array too:
/// their sample is a quarter or more of them, and the second forward pass costs little
/// against the sample's estimates. (256 x 256 planes, against the first setting alone:
/// ratios +0.8 / +1.9 / +1.3 % at 1e-2 / 1e-3 / 1e-4 of the range.)
const RUNNER_UP_UP_TO: usize = 1 << 16;

/// The lattice predictor's candidate at one setting before its entropy stage, or `None` when
/// a lattice value reaches the exact-product limit.
pub(super) fn lattice_pending(input: &Input<'_>, plan: &LatticePlan) -> Result<Option<Pending>> {
    let u = lattice_values(input.values, &input.special, input.offset, plan.unit);
    let geo = Geometry::new(input.shape);
    let levels = levels_for(input.shape);
    let ps = passes(input.shape.len(), levels, &plan.order);
    let u2 = plan.runner_up.as_ref().map(|_| scratch::copy(&u));
    let mut r = lattice_forward(&geo, &ps, u, &input.special, &plan.steps, None);
    let mut steps = plan.steps.clone();
    if let (Some(other), Some(u2)) = (&plan.runner_up, u2) {
        // The two settings' whole streams compared by the estimate; the runner-up passes
        // take the kinds the best setting's passes chose (as the plan's settings share the
        // first one's: the kind follows the data's smoothness more than the steps).
        let r2 = lattice_forward(&geo, &ps, u2, &input.special, other, Some(&r.2));
        let lose = if run_bits(&r2.0) < run_bits(&r.0) {
            steps = other.clone();
            std::mem::replace(&mut r, r2)
        } else {
            r2
        };
        scratch::give(lose.0);
        scratch::give(lose.1);
    }
    lattice_candidate(input, plan.unit, &plan.order, levels, steps, r)
}

/// The lattice predictor's best candidate with every setting estimated on the whole array
/// (small arrays), or `None` when the range needs lattice values past the exact-product limit.
pub(super) fn lattice(input: &Input<'_>) -> Result<Option<Candidate>> {
    let Some(unit) = lattice_unit(input) else {
        return Ok(None);
    };
    let (values, special) = (input.values, &input.special);
    let u = lattice_values(values, special, input.offset, unit);
    let geo = Geometry::new(input.shape);
    let nd = input.shape.len();
    let levels = levels_for(input.shape);
    // The axis order by the estimate at the first setting.
    let steps0 = level_steps(levels, LEVEL_SETTINGS[0]);
    let mut first: Option<(f64, Vec<u8>, Forward)> = None;
    for order in lattice_orders(nd) {
        let ps = passes(nd, levels, &order);
        let r = lattice_forward(&geo, &ps, u.clone(), special, &steps0, None);
        let b = quick_bits(&r.0);
        if first.as_ref().is_none_or(|f| b < f.0) {
            first = Some((b, order, r));
        }
    }
    let (_, order, r0) = first.expect("one order at least");
    let ps = passes(nd, levels, &order);
    // Every distinct setting's residuals, ranked by the estimate; the best few are kept (and
    // coded in full below), so memory stays at a few streams.
    let mut seen = vec![steps0.clone()];
    let mut ranked: Vec<(f64, Vec<u8>, Forward)> = vec![(run_bits(&r0.0), steps0, r0)];
    for &setting in &LEVEL_SETTINGS[1..] {
        let steps = level_steps(levels, setting);
        if seen.contains(&steps) {
            continue;
        }
        seen.push(steps.clone());
        let r = lattice_forward(&geo, &ps, u.clone(), special, &steps, None);
        ranked.push((run_bits(&r.0), steps, r));
        ranked.sort_by(|a, b| a.0.total_cmp(&b.0));
        ranked.truncate(SETTINGS_CODED);
    }
    let mut best: Option<Candidate> = None;
    for (_, steps, r) in ranked {
        if let Some(p) = lattice_candidate(input, unit, &order, levels, steps, r)? {
            let c = p.code(input.options);
            if best.as_ref().is_none_or(|b| c.len() < b.len()) {
                best = Some(c);
            }
        }
    }
    Ok(best)
}

/// The lattice candidate of one forward pass before its entropy stage (with its exception
/// runs), or `None` when a lattice value reaches the exact-product limit.
fn lattice_candidate(
    input: &Input<'_>,
    unit: f32,
    order: &[u8],
    levels: u32,
    steps: Vec<u8>,
    (z, x, cubic): Forward,
) -> Result<Option<Pending>> {
    let limit = lattice_limit(unit);
    if x.iter().fold(0, |m, &v| m.max(v.unsigned_abs())) as i64 >= limit {
        scratch::give(x);
        scratch::give(z);
        return Ok(None);
    }
    let runs = runs_of(input.values, input.misses(&x, unit));
    scratch::give(x);
    let (nruns, runs) = runs?;
    let mut header = input.header(Predictor::Lattice, unit);
    header.axes = order.to_vec();
    header.levels = levels as u8;
    header.steps = steps;
    header.cubic = cubic;
    header.runs = nruns;
    header.runs_len = runs.len() as u32;
    Ok(Some(Pending { header, runs, z }))
}
