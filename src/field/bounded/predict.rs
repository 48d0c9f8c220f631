//! The predictors on integers, forward (encoder) and inverse (decoder): the lattice
//! predictor's passes (level by level, axis by axis, each target predicted linearly or
//! cubically from values decoded in earlier passes, stored as `k` quantisation steps of the
//! closed loop) and the differences predictor's axis sets on bins (the lossless coder's
//! wrapping differences and their inverse).

use crate::field::core::container::strides;
use crate::field::lossless::decode::reconstruct as undo_differences;
use crate::field::lossless::encode::differences;

/// Zigzag of a signed residual: 0, -1, 1, -2 ... -> 0, 1, 2, 3 ...
#[inline(always)]
pub(super) fn zig(k: i32) -> u32 {
    ((k << 1) ^ (k >> 31)) as u32
}

/// Inverse of [`zig`].
#[inline(always)]
pub(super) fn unzig(z: u32) -> i32 {
    ((z >> 1) ^ 0u32.wrapping_sub(z & 1)) as i32
}

/// One pass of the lattice predictor: the targets are the points whose coordinate along
/// `axis` is an odd multiple of `stride`, along the axes before it in the order a multiple of
/// `stride`, along those after it a multiple of `2 stride`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Pass {
    /// Distance between a target and its nearest known neighbours along `axis`.
    pub stride: usize,
    /// The axis predicted along (0 the slowest).
    pub axis: usize,
    /// The level: `stride = 2^level`.
    pub level: u32,
    /// Per axis, the step between targets along it.
    steps: [usize; 4],
}

/// The passes in decode order: levels `L-1` down to 0, and in each the axes in `order`.
pub(super) fn passes(ndim: usize, levels: u32, order: &[u8]) -> Vec<Pass> {
    let mut out = Vec::with_capacity(levels as usize * ndim);
    for level in (0..levels).rev() {
        let s = 1usize << level;
        for (k, &d) in order.iter().enumerate() {
            let mut steps = [1usize; 4];
            for (kk, &a) in order.iter().enumerate() {
                steps[a as usize] = if kk <= k { s } else { 2 * s };
            }
            steps[d as usize] = 2 * s;
            out.push(Pass {
                stride: s,
                axis: d as usize,
                level,
                steps,
            });
        }
    }
    out
}

/// An array's shape and strides, padded to 4 axes at the front.
#[derive(Debug, Clone, Copy)]
pub(super) struct Geometry {
    dims: [usize; 4],
    strides: [usize; 4],
    ndim: usize,
}

impl Geometry {
    /// The geometry of `shape` (1 to 4 axes).
    pub fn new(shape: &[u32]) -> Self {
        let ndim = shape.len();
        let mut dims = [1usize; 4];
        for (a, &d) in shape.iter().enumerate() {
            dims[4 - ndim + a] = d as usize;
        }
        let mut strides = [1usize; 4];
        for a in (0..3).rev() {
            strides[a] = strides[a + 1] * dims[a + 1];
        }
        Geometry {
            dims,
            strides,
            ndim,
        }
    }

    /// Targets of `pass`.
    pub fn count(&self, pass: &Pass) -> usize {
        (0..self.ndim).map(|a| self.count_along(pass, a)).product()
    }

    /// Targets of `pass` along axis `a` of the array.
    fn count_along(&self, pass: &Pass, a: usize) -> usize {
        let n = self.dims[4 - self.ndim + a];
        if a == pass.axis {
            (n + pass.stride - 1) / (2 * pass.stride)
        } else {
            n.div_ceil(pass.steps[a])
        }
    }

    /// Calls `f(index, coordinate along the pass's axis)` for each target of `pass`, in C
    /// order (the tests' reference walk; the passes run row by row).
    #[cfg(test)]
    pub fn for_targets(&self, pass: &Pass, f: impl FnMut(usize, usize)) {
        self.walk(pass, 1, 1, f)
    }

    /// As [`Geometry::for_targets`] on about one target in `every` (all of them for 1): every
    /// `every + 1`-th row (run of targets along the last axis) where the pass has at least
    /// [`SAMPLE_ROWS_MIN`] rows per row taken, else every `every + 1`-th target (an odd step
    /// where `every` is a power of two, so what is taken moves through axes of power-of-two
    /// sizes instead of always landing on the same coordinate).
    /// A row sample reads about `1 / every` of the array's cache lines; every `every`-th target
    /// of contiguous rows reads all of them.
    #[inline(always)]
    pub fn for_sample(&self, pass: &Pass, every: usize, f: impl FnMut(usize, usize)) {
        let row = self.count_along(pass, self.ndim - 1);
        let rows = self.count(pass) / row.max(1);
        // One call of `walk` (the closure inlined once).
        let (row_every, target_every) = if every > 1 && rows >= SAMPLE_ROWS_MIN * (every + 1) {
            (every + 1, 1)
        } else if every > 1 {
            (1, every + 1)
        } else {
            (1, 1)
        };
        self.walk(pass, row_every, target_every, f)
    }

    /// The targets of `pass` in C order, on every `row_every`-th row (from the first) and of
    /// those every `target_every`-th target (counted from 1, over the rows taken).
    #[inline(always)]
    fn walk(
        &self,
        pass: &Pass,
        row_every: usize,
        target_every: usize,
        mut f: impl FnMut(usize, usize),
    ) {
        let (start, step, len, along) = self.row_targets(pass);
        // Countdowns to the next row and target taken (no division per target).
        let (mut r, mut t) = (1usize, target_every);
        self.for_rows(pass, |base, c| {
            r -= 1;
            if r != 0 {
                return;
            }
            r = row_every;
            for i3 in (start..len).step_by(step) {
                t -= 1;
                if t != 0 {
                    continue;
                }
                t = target_every;
                f(base + i3, if along { i3 } else { c });
            }
        });
    }

    /// Calls `f(base, c)` for each row of `pass`'s targets along the last axis, in C order:
    /// the row's targets are `base + i` for `i` in `(start..len).step_by(step)` of
    /// [`Geometry::row_targets`]; `c` is their coordinate along the pass's axis where that is
    /// not the last (else 0).
    #[inline(always)]
    fn for_rows(&self, pass: &Pass, mut f: impl FnMut(usize, usize)) {
        let pad = 4 - self.ndim;
        let mut start = [0usize; 4];
        let mut step = [1usize; 4];
        step[pad..].copy_from_slice(&pass.steps[..self.ndim]);
        let d = pad + pass.axis;
        start[d] = pass.stride;
        let [n0, n1, n2, _] = self.dims;
        let [s0, s1, s2, _] = self.strides;
        for i0 in (start[0]..n0).step_by(step[0]) {
            for i1 in (start[1]..n1).step_by(step[1]) {
                for i2 in (start[2]..n2).step_by(step[2]) {
                    f(i0 * s0 + i1 * s1 + i2 * s2, [i0, i1, i2, 0][d]);
                }
            }
        }
    }

    /// The targets of a row of `pass` along the last axis (see [`Geometry::for_rows`]):
    /// `(start, step, len, along)`, `len` the last axis's length, `along` whether the pass
    /// is along it.
    fn row_targets(&self, pass: &Pass) -> (usize, usize, usize, bool) {
        let along = pass.axis == self.ndim - 1;
        let start = if along { pass.stride } else { 0 };
        (start, pass.steps[self.ndim - 1], self.dims[3], along)
    }

    /// Along the pass's axis: its length, and the index distance of a neighbour at `stride`.
    #[inline(always)]
    pub fn along(&self, pass: &Pass) -> (usize, usize) {
        let d = 4 - self.ndim + pass.axis;
        (self.dims[d], self.strides[d] * pass.stride)
    }
}

/// The prediction of the target at index `i`, coordinate `c` along an axis of length `n`,
/// neighbours `sd` apart in the array, stride `s`: cubic `(-a + 9b + 9c - d + 8) >> 4` where
/// both outer neighbours exist and `cubic` is asked, else linear `(b + c + 1) >> 1`, else
/// (no right neighbour) the left one.
#[inline(always)]
pub(super) fn predict(
    x: &[i32],
    i: usize,
    c: usize,
    n: usize,
    s: usize,
    sd: usize,
    cubic: bool,
) -> i64 {
    let b = x[i - sd] as i64;
    if c + s >= n {
        return b;
    }
    let cc = x[i + sd] as i64;
    if cubic && c >= 3 * s && c + 3 * s < n {
        return cubic_between(x[i - 3 * sd] as i64, b, cc, x[i + 3 * sd] as i64);
    }
    linear_between(b, cc)
}

/// The cubic prediction between `b` and `c` from the neighbours `a b . c d`.
#[inline(always)]
fn cubic_between(a: i64, b: i64, c: i64, d: i64) -> i64 {
    (-a + 9 * b + 9 * c - d + 8) >> 4
}

/// The linear prediction between `b` and `c`.
#[inline(always)]
fn linear_between(b: i64, c: i64) -> i64 {
    (b + c + 1) >> 1
}

/// `k` of the closed loop for one step: `floor((target - prediction + floor(step / 2)) /
/// step)`, a shift for a power of two, else a multiplication by the step's reciprocal in f64
/// corrected to the exact floor (an integer division was most of a target's time in the
/// encoder's walk).
#[derive(Clone, Copy)]
pub(super) struct Quantiser {
    step: i64,
    half: i64,
    shift: Option<u32>,
    inv: f64,
}

impl Quantiser {
    #[inline(always)]
    pub(super) fn new(step: i64) -> Self {
        Quantiser {
            step,
            half: step / 2,
            shift: (step & (step - 1) == 0).then(|| step.trailing_zeros()),
            inv: 1.0 / step as f64,
        }
    }

    /// `k` for the difference `diff` (a target less its prediction: two i32 values apart, so
    /// well inside f64's exact integers, and the product's error far below one step).
    #[inline(always)]
    pub(super) fn k(&self, diff: i64) -> i64 {
        let d = diff + self.half;
        if let Some(shift) = self.shift {
            return d >> shift;
        }
        // Truncated, not floored (`floor` is a library call without SSE4.1): below zero
        // the quotient is then one too large at most, as the product's rounding can make
        // it one off at an exact multiple; either way one correction step gives the floor.
        let q = (d as f64 * self.inv) as i64;
        let r = d - q * self.step;
        q + (r >= self.step) as i64 - (r < 0) as i64
    }
}

/// Passes with at least this many targets choose their kind on a sample of them ...
const KIND_SAMPLE_FROM: usize = 1 << 16;
/// ... about one target in this many (see [`Geometry::for_sample`]).
const KIND_SAMPLE: usize = 16;
/// A pass's kind is chosen on whole rows where it has at least this many rows per row
/// taken (see [`Geometry::for_sample`]).
const SAMPLE_ROWS_MIN: usize = 64;

/// The lattice predictor's forward pass: `u` the lattice values of the input, `exc` the
/// exception cells (their `k` is 0), `steps` per level and for value 0, `cubic` the kinds
/// to use (or `None`: per pass the kind whose `k` have the smaller sum of magnitudes, on a
/// sample of a large pass's targets).
/// Returns the zigzag stream of `k` in decode order, the decoded lattice values (in `u`'s
/// buffer: each cell is a target once, and its lattice value is read only then, after the
/// cells it is predicted from were decoded) and the kinds.
pub(super) fn lattice_forward(
    geo: &Geometry,
    passes: &[Pass],
    u: Vec<i32>,
    exc: &[bool],
    steps: &[u8],
    cubic: Option<&[bool]>,
) -> Forward {
    let n = u.len();
    let mut x = u;
    // Every cell is a target once, after value 0: `n` entries, written by index (a push kept
    // the length in memory, a load and a store on every target).
    let mut stream = super::scratch::take(n);
    stream.resize(n, 0);
    let mut pos = 1;
    let s0 = steps[steps.len() - 1] as i64;
    let k0 = if exc[0] {
        0
    } else {
        Quantiser::new(s0).k(x[0] as i64)
    };
    x[0] = (k0 * s0) as i32;
    stream[0] = zig(k0 as i32);
    let mut kinds = Vec::with_capacity(passes.len());
    for (j, p) in passes.iter().enumerate() {
        let step = steps[p.level as usize] as i64;
        let q = Quantiser::new(step);
        let (len, sd) = geo.along(p);
        let s = p.stride;
        let kind = match cubic {
            Some(c) => c[j],
            None => {
                // Large passes choose their kind on a sample of about 1 / KIND_SAMPLE of their targets.
                let every = if geo.count(p) >= KIND_SAMPLE_FROM {
                    KIND_SAMPLE
                } else {
                    1
                };
                let (mut lin, mut cub) = (0u64, 0u64);
                geo.for_sample(p, every, |i, c| {
                    if exc[i] {
                        return;
                    }
                    let t = x[i] as i64;
                    let cost = |k: i64| 64 - (zig(k as i32) as u64).leading_zeros() as u64;
                    lin += cost(q.k(t - predict(&x, i, c, len, s, sd, false)));
                    cub += cost(q.k(t - predict(&x, i, c, len, s, sd, true)));
                });
                cub < lin
            }
        };
        // Row by row as the inverse decodes (one kind of prediction per row, neighbour rows
        // whole): each target's `k` from its lattice value, which it then takes decoded.
        let row = Row { s, cubic: kind };
        let (start, every, n_last, along) = geo.row_targets(p);
        geo.for_rows(p, |base, c| {
            let exc = &exc[base..base + n_last];
            let op = |o: &mut i32, pred: i64, place: usize| {
                let k = if exc[place] { 0 } else { q.k(*o as i64 - pred) };
                *o = (pred + step * k) as i32;
                stream[pos] = zig(k as i32);
                pos += 1;
            };
            if along {
                row.along(&mut x[base..base + n_last], op);
            } else {
                row.across(&mut x, base, (start, every, n_last), (c, len, sd), op);
            }
        });
        kinds.push(kind);
    }
    debug_assert_eq!(pos, n);
    (stream, x, kinds)
}

/// What the lattice predictor's forward pass gives: the zigzag stream of `k` in decode
/// order, the decoded lattice values and the kind of each pass (cubic or not).
pub(super) type Forward = (Vec<u32>, Vec<i32>, Vec<bool>);

/// Why a lattice stream is invalid: `(value index, reason)`.
pub(super) type LatticeError = (usize, &'static str);

/// The lattice predictor's inverse: from the zigzag stream `z` (decode order) to the lattice
/// values `x` (C order), each checked against `limit` (`|x| < limit`).
pub(super) fn lattice_inverse(
    geo: &Geometry,
    passes: &[Pass],
    z: &[u32],
    steps: &[u8],
    cubic: &[bool],
    limit: i64,
    x: &mut [i32],
) -> Result<(), LatticeError> {
    const PAST: &str = "a lattice value past the exact-product limit";
    let s0 = steps[steps.len() - 1] as i64;
    let v = unzig(z[0]) as i64 * s0;
    if v.abs() >= limit {
        return Err((0, PAST));
    }
    x[0] = v as i32;
    let mut pos = 1;
    for (j, p) in passes.iter().enumerate() {
        let row = Row {
            s: p.stride,
            cubic: cubic[j],
        };
        let step = steps[p.level as usize] as i64;
        let (n, sd) = geo.along(p);
        let (start, every, len, along) = geo.row_targets(p);
        let count = len.saturating_sub(start).div_ceil(every);
        let mut err = Ok(());
        geo.for_rows(p, |base, c| {
            if err.is_err() {
                return;
            }
            let Some(zs) = z.get(pos..pos + count) else {
                err = Err((base, "fewer residuals than the lattice's targets"));
                return;
            };
            pos += count;
            // A target's value from its prediction and residual, checked against the limit
            // (the first failing target's place kept).
            // (`zs` holds exactly the row's targets: the fallback 0 is never taken.)
            let mut zs = zs.iter();
            let mut bad = None;
            let op = |o: &mut i32, pred: i64, place: usize| {
                let v = pred + step * unzig(zs.next().copied().unwrap_or(0)) as i64;
                if v.abs() >= limit {
                    bad = bad.or(Some(place));
                }
                *o = v as i32;
            };
            if along {
                row.along(&mut x[base..base + len], op);
            } else {
                row.across(x, base, (start, every, len), (c, n, sd), op);
            }
            if let Some(i) = bad {
                err = Err((base + i, PAST));
            }
        });
        err?;
    }
    Ok(())
}

/// One pass's rows for [`lattice_forward`] and [`lattice_inverse`]: the stride and whether
/// cubic prediction is asked. Each row calls `op(target, prediction, place in the row)` for
/// its targets in order, the prediction [`predict`]'s, from values no target of the pass
/// changes; `op` sets the target's decoded value.
struct Row {
    s: usize,
    cubic: bool,
}

impl Row {
    /// Targets along the row itself (the pass is along the last axis): odd multiples of `s`,
    /// predicted from their own row as [`predict`] does.
    #[inline(always)]
    fn along(&self, row: &mut [i32], mut op: impl FnMut(&mut i32, i64, usize)) {
        let (s, n) = (self.s, row.len());
        for c in (s..n).step_by(2 * s) {
            let pred = predict(row, c, c, n, s, s, self.cubic);
            op(&mut row[c], pred, c);
        }
    }

    /// Targets of a row across the pass's axis (`c` its coordinate there, `n` the axis's
    /// length, `sd` the index distance of a neighbour): the whole row takes one kind of
    /// prediction, from the rows `sd` (and `3 sd`) before and after.
    #[inline(always)]
    fn across(
        &self,
        x: &mut [i32],
        base: usize,
        (start, every, len): (usize, usize, usize),
        (c, n, sd): (usize, usize, usize),
        mut op: impl FnMut(&mut i32, i64, usize),
    ) {
        let s = self.s;
        // Neighbour rows lie whole rows away (sd is at least a row's length).
        let (lo, hi) = x.split_at_mut(base);
        let (cur, rest) = hi.split_at_mut(len);
        let b = &lo[base - sd..base - sd + len];
        let places = (start..len).step_by(every);
        let targets = cur[start..].iter_mut().step_by(every).zip(places);
        if c + s >= n {
            for ((o, place), &b) in targets.zip(b[start..].iter().step_by(every)) {
                op(o, b as i64, place);
            }
        } else if self.cubic && c >= 3 * s && c + 3 * s < n {
            let a = &lo[base - 3 * sd..base - 3 * sd + len];
            let cc = &rest[sd - len..sd];
            let d = &rest[3 * sd - len..3 * sd];
            let inputs = a[start..]
                .iter()
                .step_by(every)
                .zip(b[start..].iter().step_by(every))
                .zip(cc[start..].iter().step_by(every))
                .zip(d[start..].iter().step_by(every));
            for ((o, place), (((&a, &b), &cc), &d)) in targets.zip(inputs) {
                op(
                    o,
                    cubic_between(a as i64, b as i64, cc as i64, d as i64),
                    place,
                );
            }
        } else {
            let cc = &rest[sd - len..sd];
            let inputs = b[start..]
                .iter()
                .step_by(every)
                .zip(cc[start..].iter().step_by(every));
            for ((o, place), (&b, &cc)) in targets.zip(inputs) {
                op(o, linear_between(b as i64, cc as i64), place);
            }
        }
    }
}

/// The differences predictor's forward pass: zigzag residuals of the bins `q` differenced
/// along `axes` (wrapping at 32 bits).
pub(super) fn differences_forward(q: Vec<u32>, shape: &[u32], axes: u8) -> Vec<u32> {
    differences(q, shape, axes, 32)
}

/// The differences predictor's inverse, in place: zigzag residuals to bins.
pub(super) fn differences_inverse(words: &mut [u32], shape: &[u32], axes: u8) {
    let st = strides(shape);
    let n = words.len();
    undo_differences(words, 0, n, shape, &st, axes);
}
