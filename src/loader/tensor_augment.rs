//! Windows of tensor records for the loader: [`TensorAugment`] (crop size per spatial axis,
//! flips and quarter turns where allowed, normalisation, output type), its per-sample
//! [`TensorWindow`] drawn from (seed, epoch, sample) alone, and [`TensorAugment::apply`],
//! which cuts the same window out of every array of a record.
//!
//! The rule, for a record whose arrays share their last `spatial` axes `S`: the window's
//! origin on axis `i` is uniform in `0..=S[i] - crop[i]`; each spatial axis is then reversed
//! with probability 1/2 where flips are allowed; then the last two axes are turned by `k`
//! quarter turns, `k` uniform in `0..4`, where turns are allowed, as `numpy.rot90(x, k,
//! axes=(-2, -1))`. Leading axes (channels, variables) are kept whole. Values become f32
//! (exactly for float32, float16 and bfloat16, rounded to nearest even otherwise), then, where
//! normalising, [`TensorNorm::apply`] (`(x - mean) * (1 / std)` in f32, the form the GPU
//! kernel `shaders/tensor_window.wgsl` computes bit for bit), then the output type.

use super::plan::{epoch_seed, splitmix64, SplitMix64};
use crate::error::invalid_option;
use crate::error::Result;
use crate::tensor::{DType, NdArray};

/// Salt of the tensor windows' random stream (apart from the image augmentations').
pub const TENSOR_AUGMENT_SALT: u64 = 0x7E45_0A06_0000_0001;

/// How the loader cuts windows out of tensor records.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct TensorAugment {
    /// Window size per spatial axis (2 or 3 entries: the last axes of every array, which
    /// must agree across a record's arrays). Empty: the whole spatial extent, no crop.
    pub crop: Vec<u32>,
    /// Number of spatial axes when `crop` is empty (2 or 3); ignored otherwise.
    pub spatial: u8,
    /// Reverse each spatial axis with probability 1/2.
    pub flips: bool,
    /// Turn the last two axes by a uniform number of quarter turns (their window must be
    /// square).
    pub rot90: bool,
    /// Normalise each array by its manifest statistics: `(x - mean) / std`.
    pub normalise: bool,
    /// Element type of the batch tensors.
    pub output: super::TensorType,
}

/// One sample's window: its origin on each spatial axis, which axes are reversed, and the
/// quarter turns of the last two.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorWindow {
    /// Origin per spatial axis.
    pub origin: Vec<u32>,
    /// Size per spatial axis.
    pub size: Vec<u32>,
    /// Reversed spatial axes.
    pub flip: Vec<bool>,
    /// Quarter turns of the last two axes (0 to 3).
    pub rot90: u8,
}

impl TensorAugment {
    /// Number of spatial axes.
    pub fn spatial_axes(&self) -> usize {
        if self.crop.is_empty() {
            self.spatial as usize
        } else {
            self.crop.len()
        }
    }

    /// Checks the options: 2 or 3 spatial axes, non-zero crop sizes, a square last-two-axes
    /// window where quarter turns are allowed.
    pub fn validate(&self) -> Result<()> {
        let n = self.spatial_axes();
        if !(2..=3).contains(&n) {
            return Err(invalid_option("tensor spatial axes", n as u64, "2 or 3"));
        }
        if let Some(&z) = self.crop.iter().find(|&&c| c == 0) {
            return Err(invalid_option("tensor crop", z as u64, "non-zero sizes"));
        }
        if self.rot90 && !self.crop.is_empty() && self.crop[n - 2] != self.crop[n - 1] {
            return Err(invalid_option(
                "tensor crop",
                self.crop[n - 1] as u64,
                "square over the last two axes with quarter turns",
            ));
        }
        Ok(())
    }

    /// The window of `sample` in `epoch` for spatial extent `extent` (the last axes of the
    /// record's arrays): a function of `(seed, epoch, sample, extent)` alone, so a resumed
    /// loader draws the same. Fails where the extent is smaller than the crop, or not
    /// square over the last two axes where uncropped with quarter turns.
    pub fn window(
        &self,
        seed: u64,
        epoch: u64,
        sample: u64,
        extent: &[u32],
    ) -> Result<TensorWindow> {
        let n = self.spatial_axes();
        if extent.len() != n {
            return Err(invalid_option(
                "tensor spatial axes",
                extent.len() as u64,
                "as the options say",
            ));
        }
        let size: Vec<u32> = if self.crop.is_empty() {
            extent.to_vec()
        } else {
            self.crop.clone()
        };
        if let Some(i) = (0..n).find(|&i| size[i] > extent[i]) {
            return Err(invalid_option(
                "tensor crop",
                size[i] as u64,
                "within the arrays' extent",
            ));
        }
        if self.rot90 && size[n - 2] != size[n - 1] {
            return Err(invalid_option(
                "tensor crop",
                size[n - 1] as u64,
                "square with quarter turns",
            ));
        }
        let mut rng = SplitMix64::new(splitmix64(
            epoch_seed(seed, epoch) ^ splitmix64(sample ^ TENSOR_AUGMENT_SALT),
        ));
        let origin = (0..n)
            .map(|i| rng.below((extent[i] - size[i]) as u64 + 1) as u32)
            .collect();
        let flip = (0..n).map(|_| self.flips && rng.below(2) == 1).collect();
        let rot90 = if self.rot90 { rng.below(4) as u8 } else { 0 };
        Ok(TensorWindow {
            origin,
            size,
            flip,
            rot90,
        })
    }

    /// The output shape of an array of shape `shape` under `window`: its leading axes, then
    /// the window's size. Fails where the array's spatial axes differ from `extent`.
    pub fn output_shape(&self, shape: &[u32], extent: &[u32]) -> Result<Vec<u32>> {
        let n = self.spatial_axes();
        if shape.len() < n || shape[shape.len() - n..] != *extent {
            return Err(invalid_option(
                "tensor array shape",
                shape.len() as u64,
                "the record's spatial axes last",
            ));
        }
        let mut out = shape[..shape.len() - n].to_vec();
        if self.crop.is_empty() {
            out.extend_from_slice(extent);
        } else {
            out.extend_from_slice(&self.crop);
        }
        Ok(out)
    }

    /// Writes `array` cut by `window` into `out` (its output shape's element count, C
    /// order), as f32 ([`value_f32`]), normalised by [`TensorNorm::from_stats`] where `stats`
    /// is `Some((mean, std))`. Integer arrays convert exactly up to 2^24.
    pub fn apply(
        &self,
        array: &NdArray,
        window: &TensorWindow,
        stats: Option<(f64, f64)>,
        out: &mut [f32],
    ) -> Result<()> {
        let n = window.size.len();
        let shape = array.shape();
        let extent: Vec<u32> = shape[shape.len().saturating_sub(n)..].to_vec();
        let out_shape = self.output_shape(shape, &extent)?;
        let fits = window.origin.len() == n
            && window.flip.len() == n
            && out_shape[out_shape.len() - n..] == window.size[..]
            && (0..n).all(|i| window.origin[i] as u64 + window.size[i] as u64 <= extent[i] as u64)
            && (window.rot90 == 0 || window.size[n - 2] == window.size[n - 1]);
        if !fits {
            return Err(invalid_option(
                "tensor window",
                n as u64,
                "inside the array, as drawn",
            ));
        }
        let total: usize = out_shape.iter().map(|&d| d as usize).product();
        if out.len() != total {
            return Err(invalid_option(
                "tensor output",
                out.len() as u64,
                "the window's size",
            ));
        }
        let norm = stats.map(|(mean, std)| TensorNorm::from_stats(mean, std));
        let plane: usize = extent.iter().map(|&d| d as usize).product();
        let win: usize = window.size.iter().map(|&d| d as usize).product();
        // Source strides of the spatial axes.
        let mut stride = vec![1usize; n];
        for i in (0..n - 1).rev() {
            stride[i] = stride[i + 1] * extent[i + 1] as usize;
        }
        let source = |i: usize, w: u32| {
            let c = if window.flip[i] {
                window.size[i] - 1 - w
            } else {
                w
            };
            (window.origin[i] + c) as usize * stride[i]
        };
        // Each row of an output plane (the last two axes: flips and quarter turns) reads the
        // source along one line: its first element's offset and a signed step (the offset is
        // affine in the column, with slope +-1 along one of the two source axes).
        let (rows, cols) = (window.size[n - 2], window.size[n - 1]);
        let mut o = vec![0u32; n];
        let mut w = vec![0u32; n];
        let mut offset = |i: u32, j: u32| {
            o[n - 2] = i;
            o[n - 1] = j;
            window_coords(window, &o, &mut w);
            source(n - 2, w[n - 2]) + source(n - 1, w[n - 1])
        };
        let lines: Vec<(usize, isize)> = (0..rows)
            .map(|i| {
                let first = offset(i, 0);
                let step = if cols > 1 {
                    offset(i, 1) as isize - first as isize
                } else {
                    1
                };
                (first, step)
            })
            .collect();
        let outer: Vec<usize> = if n == 3 {
            (0..window.size[0]).map(|k| source(0, k)).collect()
        } else {
            vec![0]
        };
        let cols = cols as usize;
        let plane_len = rows as usize * cols;
        // Float32 values read in place where the bytes allow (little-endian, aligned).
        let floats: Option<&[f32]> = match array.dtype() {
            DType::Float32 if cfg!(target_endian = "little") => {
                bytemuck::try_cast_slice(array.bytes()).ok()
            }
            _ => None,
        };
        let normed = |x: f32| norm.map_or(x, |n| n.apply(x));
        for (lead, chunk) in out.chunks_exact_mut(win).enumerate() {
            for (&first, part) in outer.iter().zip(chunk.chunks_exact_mut(plane_len)) {
                let base = lead * plane + first;
                for (row, &(start, step)) in part.chunks_exact_mut(cols).zip(&lines) {
                    let at = base + start;
                    match (floats, step) {
                        (Some(v), 1) => {
                            for (slot, &x) in row.iter_mut().zip(&v[at..at + cols]) {
                                *slot = normed(x);
                            }
                        }
                        (Some(v), -1) => {
                            let line = &v[at + 1 - cols..=at];
                            for (slot, &x) in row.iter_mut().zip(line.iter().rev()) {
                                *slot = normed(x);
                            }
                        }
                        _ => {
                            for (j, slot) in row.iter_mut().enumerate() {
                                let k = (at as isize + j as isize * step) as usize;
                                *slot = normed(value_f32(array, k));
                            }
                        }
                    }
                }
            }
        }
        Ok(())
    }
}

/// The coordinate in the (flipped) window that output coordinate `o` reads, undoing the
/// quarter turns of the last two axes (`numpy.rot90` on a square `m x m` plane).
fn window_coords(window: &TensorWindow, o: &[u32], w: &mut [u32]) {
    let n = o.len();
    w.copy_from_slice(o);
    let m = window.size[n - 1];
    let (i, j) = (o[n - 2], o[n - 1]);
    let (a, b) = match window.rot90 {
        1 => (j, m - 1 - i),
        2 => (m - 1 - i, m - 1 - j),
        3 => (m - 1 - j, i),
        _ => (i, j),
    };
    w[n - 2] = a;
    w[n - 1] = b;
}

/// Element `i` of `array` as f32: float32, float16 and bfloat16 exactly (bits kept, NaN
/// payloads included, no f64 round trip), integers and float64 rounded to nearest, ties to
/// even (exact up to 2^24).
pub fn value_f32(array: &NdArray, i: usize) -> f32 {
    let bits = array.bits_at(i);
    match array.dtype() {
        DType::Float32 => f32::from_bits(bits as u32),
        DType::Float16 => crate::tensor::f16_to_f32(bits as u16),
        DType::BFloat16 => f32::from_bits((bits as u32) << 16),
        DType::Float64 => f64::from_bits(bits) as f32,
        DType::UInt8 | DType::UInt16 | DType::UInt32 | DType::UInt64 => bits as f32,
        DType::Int8 => bits as u8 as i8 as f32,
        DType::Int16 => bits as u16 as i16 as f32,
        DType::Int32 => bits as u32 as i32 as f32,
        DType::Int64 => bits as i64 as f32,
    }
}

/// The normalisation of tensor values, in f32 so that the CPU and the GPU kernel
/// (`shaders/tensor_window.wgsl`) agree bit for bit: `flush(flush(flush(x) - mean) *
/// scale)`, where `scale` is `1 / std` rounded once to f32 (WGSL's division is not correctly
/// rounded; a multiplication is) and `flush` turns a value of magnitude at most 2^-126
/// (subnormals and the smallest normal) into a zero of its sign (GPUs may flush subnormal
/// operands and results, and may detect a tiny product before or after rounding). Infinities
/// and NaNs (payloads included) pass unchanged. The subtraction comes before the
/// multiplication, so no fused multiply-add can form.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TensorNorm {
    /// The mean, as f32 (0 where it is not finite; flushed).
    pub mean: f32,
    /// `1 / std` as f32 (1 where std is zero or not finite, or `1 / std` is not a normal
    /// f32).
    pub scale: f32,
}

impl TensorNorm {
    /// The normalisation by a manifest's `mean` and (population) `std`.
    pub fn from_stats(mean: f64, std: f64) -> Self {
        let mean = if mean.is_finite() { mean as f32 } else { 0.0 };
        let scale = if std.is_finite() && std != 0.0 {
            (1.0 / std) as f32
        } else {
            1.0
        };
        TensorNorm {
            mean: flush(mean),
            scale: if scale.is_normal() { scale } else { 1.0 },
        }
    }

    /// `x` normalised (see [`TensorNorm`]).
    pub fn apply(&self, x: f32) -> f32 {
        if !x.is_finite() {
            return x;
        }
        flush(flush(flush(x) - self.mean) * self.scale)
    }
}

/// `x`, or a zero of its sign where its magnitude is at most 2^-126 (see [`TensorNorm`]).
pub fn flush(x: f32) -> f32 {
    let b = x.to_bits();
    if b & 0x7FFF_FFFF <= 0x0080_0000 {
        f32::from_bits(b & 0x8000_0000)
    } else {
        x
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ramp(shape: Vec<u32>) -> NdArray {
        let n: u32 = shape.iter().product();
        let v: Vec<f32> = (0..n).map(|i| i as f32).collect();
        NdArray::from_f32(shape, &v).unwrap()
    }

    #[test]
    fn window_depends_only_on_seed_epoch_sample_and_stays_inside() {
        let aug = TensorAugment {
            crop: vec![3, 4, 4],
            flips: true,
            rot90: true,
            ..Default::default()
        };
        aug.validate().unwrap();
        let extent = [5, 9, 7];
        let a = aug.window(1, 2, 3, &extent).unwrap();
        assert_eq!(a, aug.window(1, 2, 3, &extent).unwrap());
        let mut seen = std::collections::BTreeSet::new();
        for s in 0..200 {
            let w = aug.window(1, 2, s, &extent).unwrap();
            for (i, &e) in extent.iter().enumerate() {
                assert!(w.origin[i] + w.size[i] <= e);
            }
            seen.insert((w.origin.clone(), w.flip.clone(), w.rot90));
        }
        assert!(seen.len() > 100, "windows vary: {}", seen.len());
        assert_ne!(a, aug.window(1, 3, 3, &extent).unwrap());
        assert!(aug.window(1, 2, 3, &[2, 9, 7]).is_err());
    }

    #[test]
    fn apply_matches_the_documented_rule() {
        // 2 channels x 6 x 5, window 3 x 3.
        let arr = ramp(vec![2, 6, 5]);
        let src = arr.to_f32().unwrap();
        let aug = TensorAugment {
            crop: vec![3, 3],
            flips: true,
            rot90: true,
            normalise: true,
            ..Default::default()
        };
        for s in 0..64 {
            let w = aug.window(9, 0, s, &[6, 5]).unwrap();
            let mut out = vec![0f32; 2 * 9];
            aug.apply(&arr, &w, Some((1.0, 2.0)), &mut out).unwrap();
            for c in 0..2usize {
                // Reference: cut, flip, then rot90 as numpy does, written out directly.
                let mut f = [[0f32; 3]; 3];
                for (y, row) in f.iter_mut().enumerate() {
                    for (x, v) in row.iter_mut().enumerate() {
                        let sy = if w.flip[0] { 2 - y } else { y } + w.origin[0] as usize;
                        let sx = if w.flip[1] { 2 - x } else { x } + w.origin[1] as usize;
                        *v = src[c * 30 + sy * 5 + sx];
                    }
                }
                for _ in 0..w.rot90 {
                    // numpy.rot90 k=1: out[i][j] = in[j][m-1-i].
                    let g = f;
                    for i in 0..3 {
                        for j in 0..3 {
                            f[i][j] = g[j][2 - i];
                        }
                    }
                }
                for y in 0..3 {
                    for x in 0..3 {
                        let want = (f[y][x] - 1.0) * 0.5;
                        assert_eq!(out[c * 9 + y * 3 + x], want, "sample {s} {w:?}");
                    }
                }
            }
        }
    }

    /// The rule element by element: each output coordinate's source (quarter turns undone,
    /// then flips), its value as f64, normalised.
    fn reference_apply(
        array: &NdArray,
        w: &TensorWindow,
        stats: (f64, f64),
        out_shape: &[u32],
    ) -> Vec<f32> {
        let n = w.size.len();
        let shape = array.shape();
        let extent = &shape[shape.len() - n..];
        let plane: usize = extent.iter().map(|&d| d as usize).product();
        let win: usize = w.size.iter().map(|&d| d as usize).product();
        let total: usize = out_shape.iter().map(|&d| d as usize).product();
        let mut out = Vec::with_capacity(total);
        for lead in 0..total / win {
            for k in 0..win {
                // Output coordinate k, last axis fastest.
                let mut o = vec![0u32; n];
                let mut r = k;
                for i in (0..n).rev() {
                    o[i] = (r % w.size[i] as usize) as u32;
                    r /= w.size[i] as usize;
                }
                let mut c = vec![0u32; n];
                window_coords(w, &o, &mut c);
                let mut at = lead * plane;
                let mut step = 1;
                for i in (0..n).rev() {
                    let x = if w.flip[i] {
                        w.size[i] - 1 - c[i]
                    } else {
                        c[i]
                    };
                    at += (w.origin[i] + x) as usize * step;
                    step *= extent[i] as usize;
                }
                out.push(TensorNorm::from_stats(stats.0, stats.1).apply(value_f32(array, at)));
            }
        }
        out
    }

    #[test]
    fn apply_equals_the_rule_element_by_element_for_2_and_3_axes_and_every_type() {
        let mut rng = SplitMix64::new(3);
        for dtype in [
            DType::Float32,
            DType::Float64,
            DType::Float16,
            DType::Int16,
            DType::UInt8,
        ] {
            for (shape, crop) in [
                (vec![3, 9, 8], vec![5, 5]),
                (vec![7, 6], vec![4, 4]),
                (vec![2, 5, 9, 8], vec![3, 6, 6]),
                (vec![4, 7, 5], vec![2, 3, 3]),
            ] {
                let n: usize = shape.iter().map(|&d| d as usize).product();
                let bytes: Vec<u8> = (0..n * dtype.size())
                    .map(|_| match dtype {
                        // Finite halves: no exponent of all ones.
                        DType::Float16 => rng.below(0x7B) as u8,
                        _ => rng.below(256) as u8,
                    })
                    .collect();
                let array = NdArray::new(dtype, shape.clone(), bytes).unwrap();
                if dtype == DType::Float32 {
                    // The in-place float path is the one under test.
                    assert!(bytemuck::try_cast_slice::<u8, f32>(array.bytes()).is_ok());
                }
                let aug = TensorAugment {
                    crop: crop.clone(),
                    flips: true,
                    rot90: true,
                    normalise: true,
                    ..Default::default()
                };
                let s = crop.len();
                let extent = &shape[shape.len() - s..];
                let out_shape = aug.output_shape(&shape, extent).unwrap();
                let total: usize = out_shape.iter().map(|&d| d as usize).product();
                for sample in 0..24 {
                    let w = aug.window(7, 1, sample, extent).unwrap();
                    let mut out = vec![0f32; total];
                    aug.apply(&array, &w, Some((0.5, 3.0)), &mut out).unwrap();
                    let want = reference_apply(&array, &w, (0.5, 3.0), &out_shape);
                    let same = out
                        .iter()
                        .zip(&want)
                        .all(|(a, b)| a.to_bits() == b.to_bits());
                    assert!(same, "{dtype:?} {shape:?} {w:?}");
                }
            }
        }
    }

    #[test]
    fn shapes_and_options_are_checked() {
        let aug = TensorAugment {
            crop: vec![4, 3],
            rot90: true,
            ..Default::default()
        };
        assert!(aug.validate().is_err());
        let aug = TensorAugment {
            crop: vec![2, 2],
            ..Default::default()
        };
        assert_eq!(
            aug.output_shape(&[3, 4, 4], &[4, 4]).unwrap(),
            vec![3, 2, 2]
        );
        assert!(aug.output_shape(&[3, 4, 5], &[4, 4]).is_err());
        assert!(aug.output_shape(&[4], &[4, 4]).is_err());
        let w = aug.window(0, 0, 0, &[4, 4]).unwrap();
        let mut short = vec![0f32; 3];
        assert!(aug
            .apply(&ramp(vec![1, 4, 4]), &w, None, &mut short)
            .is_err());
        let none = TensorAugment::default();
        assert!(none.validate().is_err(), "0 spatial axes");
    }

    #[test]
    fn normalisation_is_f32_with_flushed_tiny_values() {
        let n = TensorNorm::from_stats(1.0, 4.0);
        assert_eq!((n.mean, n.scale), (1.0, 0.25));
        assert_eq!(n.apply(3.0), 0.5);
        // Subnormal input: read as a zero of its sign.
        assert_eq!(n.apply(f32::from_bits(0x8000_0001)), -0.25);
        // A tiny difference, a tiny product: zeros of their sign.
        let z = TensorNorm::from_stats(2e-38, 1.0);
        assert_eq!(z.mean, 2e-38);
        assert_eq!(z.apply(2.5e-38).to_bits(), 0);
        assert_eq!(
            TensorNorm::from_stats(1e-38, 1.0).mean,
            0.0,
            "a subnormal mean"
        );
        let t = TensorNorm::from_stats(0.0, 1e30);
        assert_eq!(t.apply(-1e-9).to_bits(), 0x8000_0000);
        // Non-finite values pass, NaN payloads included.
        let nan = f32::from_bits(0x7FA0_0001);
        assert_eq!(n.apply(nan).to_bits(), nan.to_bits());
        assert_eq!(n.apply(f32::NEG_INFINITY), f32::NEG_INFINITY);
        // Degenerate statistics divide by 1.
        for std in [0.0, f64::NAN, 1e-300, 1e300] {
            assert_eq!(TensorNorm::from_stats(2.0, std).scale, 1.0, "{std}");
        }
        assert_eq!(TensorNorm::from_stats(f64::INFINITY, 2.0).mean, 0.0);
    }

    #[test]
    fn values_convert_to_f32_as_documented() {
        let w = |dtype: DType, v: u64| {
            let b = v.to_le_bytes()[..dtype.size()].to_vec();
            value_f32(&NdArray::new(dtype, vec![1], b).unwrap(), 0)
        };
        // 2^24 + 1 and 2^24 + 3: ties to even.
        assert_eq!(w(DType::Int32, (1 << 24) + 1), 16_777_216.0);
        assert_eq!(w(DType::UInt32, (1 << 24) + 3), 16_777_220.0);
        assert_eq!(w(DType::Int32, i32::MIN as u32 as u64), -2147483648.0);
        assert_eq!(w(DType::Int8, 0x80), -128.0);
        assert_eq!(w(DType::BFloat16, 0x3F80), 1.0);
        assert_eq!(w(DType::Float16, 0x0001), 2f32.powi(-24));
        // A signalling NaN keeps its bits.
        assert_eq!(w(DType::Float32, 0x7F80_0001).to_bits(), 0x7F80_0001);
    }

    #[test]
    fn integers_convert_exactly() {
        let bytes: Vec<u8> = [-3i16, 7, -32768, 32767]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        let a = NdArray::new(DType::Int16, vec![2, 2], bytes).unwrap();
        let aug = TensorAugment {
            spatial: 2,
            ..Default::default()
        };
        let w = aug.window(0, 0, 0, &[2, 2]).unwrap();
        let mut out = vec![0f32; 4];
        aug.apply(&a, &w, None, &mut out).unwrap();
        assert_eq!(out, vec![-3.0, 7.0, -32768.0, 32767.0]);
    }
}
