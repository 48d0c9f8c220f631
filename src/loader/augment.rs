//! Training augmentation on the CPU: a pipeline declared once ([`Augment`]), its random
//! parameters drawn from `(seed, epoch, sample)` alone ([`Augment::params`]), so a resumed
//! run sees the same augmentations, and one pass per image from decoded samples to normalised
//! f32 CHW ([`Augment::apply`]): crop, resize, flip and normalise fused, each output value
//! written once.
//!
//! Random resized crop follows torchvision's `RandomResizedCrop.get_params` (10 attempts at a
//! scale and log-uniform aspect ratio, else a centre crop at the clamped ratio); the resize is
//! bilinear with half-pixel centres (`align_corners = false`, no antialiasing).

use super::plan::{epoch_seed, splitmix64, SplitMix64};
use crate::codec::sample::Sample;
use crate::layout::Normalize;
use crate::progressive::LevelImage;

/// Salt of the augmentation generator (different from the permutation's).
pub const AUGMENT_SALT: u64 = 0xA06_3E47_0000_0001;

/// Random resized crop: a crop of `scale` of the area and `ratio` aspect (w/h), resized to the
/// output size.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RandomResizedCrop {
    /// Fraction of the image's area (default 0.08..1.0).
    pub scale: (f32, f32),
    /// Aspect ratio w/h (default 3/4..4/3).
    pub ratio: (f32, f32),
}

impl Default for RandomResizedCrop {
    fn default() -> Self {
        RandomResizedCrop {
            scale: (0.08, 1.0),
            ratio: (3.0 / 4.0, 4.0 / 3.0),
        }
    }
}

/// The augmentation pipeline, declared once for a run.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub struct Augment {
    /// Output width and height (default 224 x 224).
    pub size: (u32, u32),
    /// Random resized crop (default on, torchvision's defaults); `None` resizes the whole
    /// image.
    pub crop: Option<RandomResizedCrop>,
    /// Probability of a horizontal flip (default 0.5).
    pub flip_probability: f32,
    /// Output channels: 3 (default; gray is replicated, alpha dropped) or 1 (gray images
    /// only; an RGB image is an error).
    pub channels: u8,
    /// Normalisation of the output (default ImageNet mean and std).
    pub normalize: Normalize,
    /// Rotate by a random multiple of 90 degrees (default false).
    pub rotate90: bool,
    /// Rotate by a random angle in `-max..max` degrees about the crop's centre (default 0:
    /// none); samples that fall outside the image take `fill`.
    pub max_angle_degrees: f32,
    /// Pad the image by this many pixels of `fill` on every side before cropping (default 0),
    /// as torchvision's `RandomCrop(padding=...)`.
    pub padding: u32,
    /// Value of padded and rotated-in pixels, as a fraction of full scale (default 0.0:
    /// black), normalised like the samples.
    pub fill: f32,
    /// Gaussian noise added to every value, standard deviation in units of full scale
    /// (default 0: none); after normalisation it is `noise_std / std[c]`.
    pub noise_std: f32,
    /// Element type of the loader's batch tensors (default f32). `apply` always writes f32;
    /// the loader converts (CPU) or `augment.wgsl` packs (GPU).
    pub output: super::tensor::TensorType,
}

impl Default for Augment {
    fn default() -> Self {
        Augment {
            size: (224, 224),
            crop: Some(RandomResizedCrop::default()),
            flip_probability: 0.5,
            channels: 3,
            normalize: Normalize::IMAGENET,
            rotate90: false,
            max_angle_degrees: 0.0,
            padding: 0,
            fill: 0.0,
            noise_std: 0.0,
            output: super::tensor::TensorType::F32,
        }
    }
}

/// The random choices for one sample.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AugmentParams {
    /// Crop in pixels of the padded image (the image starts at `padding`): left, top, width,
    /// height.
    pub crop: (u32, u32, u32, u32),
    /// Flip horizontally.
    pub flip: bool,
    /// Quarter turns (0..=3), applied after the flip.
    pub rot90: u8,
    /// Cosine and sine of the small rotation (1, 0: none).
    pub rotation: (f32, f32),
    /// Seed of the noise (0 when there is none).
    pub noise_seed: u32,
}

impl AugmentParams {
    /// Whether the sample goes through the general (per-pixel) mapping rather than the
    /// separable crop + resize.
    pub fn is_general(&self, padding: u32) -> bool {
        self.rot90 != 0 || self.rotation != (1.0, 0.0) || padding > 0
    }
}

impl Augment {
    /// A pipeline producing `width x height` outputs, defaults otherwise.
    pub fn with_size(width: u32, height: u32) -> Self {
        Augment {
            size: (width, height),
            ..Augment::default()
        }
    }

    /// Without random crop and flip (evaluation): the whole image resized and normalised.
    pub fn deterministic(mut self) -> Self {
        self.crop = None;
        self.flip_probability = 0.0;
        self
    }

    /// Checks every field (a hostile option is a parameter error, never a panic or a
    /// meaningless output): size 1..=`max_dimension` each way, channels 1 or 3, the crop's
    /// scale and ratio positive and ordered, probabilities in 0..=1, angles, fill, noise and
    /// normalisation finite (std not zero), padding at most `max_dimension`.
    pub fn validate(&self, max_dimension: u32) -> crate::error::Result<()> {
        let bad = |name, value: u64, reason| {
            Err(crate::error::ParameterError::InvalidOption {
                name,
                value,
                reason,
            }
            .into())
        };
        let (w, h) = self.size;
        if w == 0 || h == 0 || w > max_dimension || h > max_dimension {
            let v = if w == 0 || w > max_dimension { w } else { h };
            return bad(
                "augment size",
                v as u64,
                "width and height must be 1..=max_dimension",
            );
        }
        if self.channels != 1 && self.channels != 3 {
            return bad("augment channels", self.channels as u64, "must be 3 or 1");
        }
        if let Some(c) = &self.crop {
            let ordered =
                |(lo, hi): (f32, f32)| lo.is_finite() && hi.is_finite() && 0.0 < lo && lo <= hi;
            if !ordered(c.scale) {
                return bad(
                    "crop scale",
                    0,
                    "must be (low, high) with 0 < low <= high, finite",
                );
            }
            if !ordered(c.ratio) {
                return bad(
                    "crop ratio",
                    0,
                    "must be (low, high) with 0 < low <= high, finite",
                );
            }
        }
        if !(0.0..=1.0).contains(&self.flip_probability) {
            return bad("flip probability", 0, "must be in 0..=1");
        }
        if !(0.0..=360.0).contains(&self.max_angle_degrees) {
            return bad("max angle", 0, "must be 0..=360 degrees");
        }
        if self.padding > max_dimension {
            return bad(
                "padding",
                self.padding as u64,
                "at most max_dimension pixels",
            );
        }
        if !self.fill.is_finite() {
            return bad("fill", 0, "must be a finite number");
        }
        if !(self.noise_std.is_finite() && self.noise_std >= 0.0) {
            return bad("noise std", 0, "must be finite and at least 0");
        }
        let n = &self.normalize;
        if n.mean.iter().any(|m| !m.is_finite()) {
            return bad("normalize mean", 0, "must be finite");
        }
        if n.std.iter().any(|s| !s.is_finite() || *s == 0.0) {
            return bad("normalize std", 0, "must be finite and not zero");
        }
        Ok(())
    }

    /// Floats per output image.
    pub fn output_len(&self) -> usize {
        self.channels as usize * self.size.0 as usize * self.size.1 as usize
    }

    /// The parameters for sample `sample` of epoch `epoch` of a run seeded `seed`, for an image
    /// of `width x height`: a function of these alone.
    pub fn params(
        &self,
        seed: u64,
        epoch: u64,
        sample: u64,
        width: u32,
        height: u32,
    ) -> AugmentParams {
        let mut rng = SplitMix64::new(splitmix64(
            epoch_seed(seed, epoch) ^ splitmix64(sample ^ AUGMENT_SALT),
        ));
        let (pw, ph) = (width + 2 * self.padding, height + 2 * self.padding);
        let crop = match self.crop {
            None => (0, 0, pw, ph),
            Some(rrc) => random_resized_crop(&mut rng, &rrc, pw, ph),
        };
        let flip = rng.unit_f32() < self.flip_probability;
        // Later transforms draw after the earlier ones, so adding one does not move them.
        let rot90 = if self.rotate90 { rng.below(4) as u8 } else { 0 };
        let rotation = if self.max_angle_degrees > 0.0 {
            let a = (2.0 * rng.unit_f32() - 1.0) * self.max_angle_degrees.to_radians();
            (a.cos(), a.sin())
        } else {
            (1.0, 0.0)
        };
        let noise_seed = if self.noise_std > 0.0 {
            (rng.next_u64() >> 32) as u32 | 1
        } else {
            0
        };
        AugmentParams {
            crop,
            flip,
            rot90,
            rotation,
            noise_seed,
        }
    }

    /// Writes the augmented, normalised image into `out` (`channels x height x width` f32,
    /// [`Augment::output_len`] long).
    pub fn apply(
        &self,
        image: &LevelImage,
        p: &AugmentParams,
        out: &mut [f32],
    ) -> crate::error::Result<()> {
        if out.len() != self.output_len() {
            return Err(crate::error::ParameterError::BufferSize {
                got: out.len() * 4,
                needed: self.output_len() * 4,
            }
            .into());
        }
        let sources = source_channels(image.channels, self.channels)?;
        let (x, y, w, h) = p.crop;
        let (pw, ph) = (
            image.width + 2 * self.padding,
            image.height + 2 * self.padding,
        );
        if w == 0 || h == 0 || x + w > pw || y + h > ph {
            return Err(crate::error::ParameterError::InvalidOption {
                name: "crop",
                value: x as u64,
                reason: "the crop must lie inside the (padded) image",
            }
            .into());
        }
        let general = p.is_general(self.padding);
        match image.depth {
            8 => self.sample_into(&image.data, image, p, &sources, out, general),
            _ => match bytemuck::try_cast_slice::<u8, u16>(&image.data) {
                Ok(px) => self.sample_into(px, image, p, &sources, out, general),
                Err(_) => {
                    let px: Vec<u16> = bytemuck::pod_collect_to_vec(&image.data);
                    self.sample_into(&px, image, p, &sources, out, general)
                }
            },
        }
        if p.noise_seed != 0 {
            let plane = self.size.0 as usize * self.size.1 as usize;
            for (i, o) in out.iter_mut().enumerate() {
                let c = i / plane;
                *o += self.noise_std * gaussian(p.noise_seed, i as u32) / self.normalize.std[c];
            }
        }
        Ok(())
    }
}

impl Augment {
    fn sample_into<T: Sample>(
        &self,
        px: &[T],
        image: &LevelImage,
        p: &AugmentParams,
        sources: &[usize],
        out: &mut [f32],
        general: bool,
    ) {
        if general {
            self.map_into(px, image, p, sources, out)
        } else {
            self.resize_into(px, image, p, sources, out)
        }
    }

    /// The general mapping (quarter turns, rotation, padding), per output pixel: the output
    /// pixel's centre in crop-relative coordinates `(u, v)`, flipped, turned, then rotated
    /// about the crop's centre into source coordinates; outside the image it is `fill`.
    fn map_into<T: Sample>(
        &self,
        px: &[T],
        image: &LevelImage,
        p: &AugmentParams,
        sources: &[usize],
        out: &mut [f32],
    ) {
        let (ow, oh) = (self.size.0 as usize, self.size.1 as usize);
        let (w, h, n) = (
            image.width as usize,
            image.height as usize,
            image.channels as usize,
        );
        let (wf, hf) = (image.width as f32, image.height as f32);
        let pad = self.padding as f32;
        let (cx, cy, cw, ch) = (
            p.crop.0 as f32,
            p.crop.1 as f32,
            p.crop.2 as f32,
            p.crop.3 as f32,
        );
        let (cos, sin) = p.rotation;
        let max = crate::layout::max_value(image.depth);
        let plane = ow * oh;
        for oy in 0..oh {
            for ox in 0..ow {
                let x = if p.flip { ow - 1 - ox } else { ox };
                let u = (x as f32 + 0.5) / ow as f32;
                let v = (oy as f32 + 0.5) / oh as f32;
                let (u, v) = match p.rot90 {
                    0 => (u, v),
                    1 => (v, 1.0 - u),
                    2 => (1.0 - u, 1.0 - v),
                    _ => (1.0 - v, u),
                };
                let dx = (u - 0.5) * cw;
                let dy = (v - 0.5) * ch;
                let sx = (cx - pad) + 0.5 * cw + (cos * dx - sin * dy) - 0.5;
                let sy = (cy - pad) + 0.5 * ch + (sin * dx + cos * dy) - 0.5;
                let inside = sx >= -0.5 && sx <= wf - 0.5 && sy >= -0.5 && sy <= hf - 0.5;
                for (oc, &sc) in sources.iter().enumerate() {
                    let (mean, std) = (self.normalize.mean[oc], self.normalize.std[oc]);
                    let o = &mut out[oc * plane + oy * ow + ox];
                    if !inside {
                        *o = (self.fill - mean) / std;
                        continue;
                    }
                    let sxc = sx.clamp(0.0, wf - 1.0);
                    let syc = sy.clamp(0.0, hf - 1.0);
                    let (x0, y0) = (sxc.floor() as usize, syc.floor() as usize);
                    let (x1, y1) = ((x0 + 1).min(w - 1), (y0 + 1).min(h - 1));
                    let (fx, fy) = (sxc - x0 as f32, syc - y0 as f32);
                    let at = |x: usize, y: usize| px[(y * w + x) * n + sc].get() as f32;
                    let v = bilinear(at(x0, y0), at(x1, y0), at(x0, y1), at(x1, y1), fx, fy);
                    *o = (v / max - mean) / std;
                }
            }
        }
    }

    /// The separable crop + resize (no turn, rotation or padding), row by row.
    fn resize_into<T: Sample>(
        &self,
        px: &[T],
        image: &LevelImage,
        p: &AugmentParams,
        sources: &[usize],
        out: &mut [f32],
    ) {
        let (ow, oh) = (self.size.0 as usize, self.size.1 as usize);
        let (w, h, n) = (
            image.width as usize,
            image.height as usize,
            image.channels as usize,
        );
        let (cx, cy, cw, ch) = p.crop;
        let max = crate::layout::max_value(image.depth);
        // Source coordinate of each output column / row (half-pixel centres), clamped, as the
        // two neighbours and the weight of the second.
        let taps = |o: usize, start: u32, len: u32, src: usize, out_len: usize| {
            let scale = len as f32 / out_len as f32;
            let s = (start as f32 + (o as f32 + 0.5) * scale - 0.5).clamp(0.0, (src - 1) as f32);
            let lo = s.floor() as usize;
            let hi = (lo + 1).min(src - 1);
            (lo, hi, s - lo as f32)
        };
        let xs: Vec<(usize, usize, f32)> = (0..ow)
            .map(|ox| {
                let x = if p.flip { ow - 1 - ox } else { ox };
                taps(x, cx, cw, w, ow)
            })
            .collect();
        // Separable: each source row the crop reads is interpolated horizontally once (all
        // output channels), kept while the next output row may use it, then each output row
        // is the vertical blend of two such rows. Per value the operations and their order are
        // `bilinear`'s (`augment.wgsl`'s), so the result is the same to the bit.
        let nc = sources.len();
        let rgb = sources == [0, 1, 2];
        let horizontal = |y: usize, dst: &mut [f32]| {
            let r = &px[y * w * n..(y + 1) * w * n];
            if rgb {
                // The common case, three channels from the first three: one pass over the
                // columns, each tap's pixel read as one slice.
                let (d0, rest) = dst.split_at_mut(ow);
                let (d1, d2) = rest.split_at_mut(ow);
                for (ox, &(x0, x1, fx)) in xs.iter().enumerate() {
                    let (a, b) = (&r[x0 * n..x0 * n + 3], &r[x1 * n..x1 * n + 3]);
                    let lerp = |c: usize| {
                        let (a0, a1) = (a[c].get() as f32, b[c].get() as f32);
                        a0 + (a1 - a0) * fx
                    };
                    d0[ox] = lerp(0);
                    d1[ox] = lerp(1);
                    d2[ox] = lerp(2);
                }
                return;
            }
            for (oc, &sc) in sources.iter().enumerate() {
                let dst = &mut dst[oc * ow..(oc + 1) * ow];
                for (d, &(x0, x1, fx)) in dst.iter_mut().zip(&xs) {
                    let (a0, a1) = (r[x0 * n + sc].get() as f32, r[x1 * n + sc].get() as f32);
                    *d = a0 + (a1 - a0) * fx;
                }
            }
        };
        // Two interpolated rows and the source row each holds.
        let mut held: [Option<usize>; 2] = [None, None];
        let mut rows = vec![0f32; 2 * nc * ow];
        let plane = ow * oh;
        for oy in 0..oh {
            let (y0, y1, fy) = taps(oy, cy, ch, h, oh);
            // The slot holding row `y`, interpolated into the slot not holding `keep` if no
            // slot holds it.
            let mut slot_of = |y: usize, keep: usize, rows: &mut [f32]| -> usize {
                if let Some(i) = held.iter().position(|&r| r == Some(y)) {
                    return i;
                }
                let i = usize::from(held[0] == Some(keep));
                horizontal(y, &mut rows[i * nc * ow..(i + 1) * nc * ow]);
                held[i] = Some(y);
                i
            };
            let i0 = slot_of(y0, y1, &mut rows);
            let i1 = slot_of(y1, y0, &mut rows);
            for oc in 0..nc {
                let (mean, std) = (self.normalize.mean[oc], self.normalize.std[oc]);
                let top = &rows[(i0 * nc + oc) * ow..(i0 * nc + oc + 1) * ow];
                let bottom = &rows[(i1 * nc + oc) * ow..(i1 * nc + oc + 1) * ow];
                let row = &mut out[oc * plane + oy * ow..oc * plane + (oy + 1) * ow];
                for ((o, &t), &b) in row.iter_mut().zip(top).zip(bottom) {
                    let v = t + (b - t) * fy;
                    *o = (v / max - mean) / std;
                }
            }
        }
    }
}

/// Bilinear interpolation of the four taps `a0 a1` (top row) and `b0 b1` (bottom row) at
/// weights `fx`, `fy`, in the order of operations `augment.wgsl` uses.
#[inline(always)]
fn bilinear(a0: f32, a1: f32, b0: f32, b1: f32, fx: f32, fy: f32) -> f32 {
    let top = a0 + (a1 - a0) * fx;
    let bottom = b0 + (b1 - b0) * fx;
    top + (bottom - top) * fy
}

/// A 32-bit integer hash (Wellons' "lowbias32"): the same on the CPU and in WGSL.
pub(crate) const fn hash32(mut x: u32) -> u32 {
    x ^= x >> 16;
    x = x.wrapping_mul(0x7feb_352d);
    x ^= x >> 15;
    x = x.wrapping_mul(0x846c_a68b);
    x ^= x >> 16;
    x
}

/// A standard normal value for element `i` of a sample whose noise seed is `seed`
/// (Box-Muller from two hashed uniforms; `augment.wgsl`'s `gaussian`).
pub(crate) fn gaussian(seed: u32, i: u32) -> f32 {
    let h1 = hash32(seed ^ hash32(i));
    let h2 = hash32(h1 ^ 0x9e37_79b9);
    let u1 = ((h1 >> 8) + 1) as f32 * (1.0 / 16_777_216.0);
    let u2 = (h2 >> 8) as f32 * (1.0 / 16_777_216.0);
    (-2.0 * u1.ln()).sqrt() * (std::f32::consts::TAU * u2).cos()
}

/// Which source channel feeds each output channel.
pub(crate) fn source_channels(
    image_channels: u8,
    out_channels: u8,
) -> crate::error::Result<Vec<usize>> {
    match (image_channels, out_channels) {
        (1 | 2, 3) => Ok(vec![0, 0, 0]),
        (3 | 4, 3) => Ok(vec![0, 1, 2]),
        (1 | 2, 1) => Ok(vec![0]),
        _ => Err(crate::error::ParameterError::InvalidOption {
            name: "augment channels",
            value: out_channels as u64,
            reason: "3 (any image) or 1 (gray images only)",
        }
        .into()),
    }
}

/// torchvision's `RandomResizedCrop.get_params`.
fn random_resized_crop(
    rng: &mut SplitMix64,
    rrc: &RandomResizedCrop,
    width: u32,
    height: u32,
) -> (u32, u32, u32, u32) {
    let area = width as f32 * height as f32;
    let (log_lo, log_hi) = (rrc.ratio.0.ln(), rrc.ratio.1.ln());
    for _ in 0..10 {
        let target = area * (rrc.scale.0 + (rrc.scale.1 - rrc.scale.0) * rng.unit_f32());
        let aspect = (log_lo + (log_hi - log_lo) * rng.unit_f32()).exp();
        let w = (target * aspect).sqrt().round() as u32;
        let h = (target / aspect).sqrt().round() as u32;
        if 0 < w && w <= width && 0 < h && h <= height {
            let y = rng.below((height - h + 1) as u64) as u32;
            let x = rng.below((width - w + 1) as u64) as u32;
            return (x, y, w, h);
        }
    }
    // Centre crop at the ratio clamped into range.
    let in_ratio = width as f32 / height as f32;
    let (w, h) = if in_ratio < rrc.ratio.0 {
        (
            width,
            ((width as f32 / rrc.ratio.0).round() as u32).clamp(1, height),
        )
    } else if in_ratio > rrc.ratio.1 {
        (
            ((height as f32 * rrc.ratio.1).round() as u32).clamp(1, width),
            height,
        )
    } else {
        (width, height)
    };
    ((width - w) / 2, (height - h) / 2, w, h)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gray(w: u32, h: u32, f: impl Fn(u32, u32) -> u8) -> LevelImage {
        LevelImage {
            width: w,
            height: h,
            channels: 1,
            depth: 8,
            data: (0..h)
                .flat_map(|y| (0..w).map(move |x| (x, y)))
                .map(|(x, y)| f(x, y))
                .collect(),
        }
    }

    /// A half turn of the whole image is the image mirrored in both axes; padding puts `fill`
    /// around it; noise has the stated spread; and turning these on does not move the
    /// crop and flip drawn before them.
    #[test]
    fn turns_padding_and_noise() {
        let img = gray(12, 10, |x, y| (x * 20 + y * 3) as u8);
        let mut a = Augment::with_size(12, 10).deterministic();
        a.channels = 1;
        a.normalize = Normalize::UNIT;
        let base = a.params(0, 0, 0, 12, 10);
        let mut plain = vec![0f32; a.output_len()];
        a.apply(&img, &base, &mut plain).unwrap();
        let half_turn = AugmentParams { rot90: 2, ..base };
        let mut turned = vec![0f32; a.output_len()];
        a.apply(&img, &half_turn, &mut turned).unwrap();
        for y in 0..10 {
            for x in 0..12 {
                let (t, p) = (turned[y * 12 + x], plain[(9 - y) * 12 + 11 - x]);
                assert!((t - p).abs() < 1e-5, "({x}, {y}): {t} vs {p}");
            }
        }
        let mut padded = a;
        padded.padding = 2;
        padded.fill = 0.25;
        padded.size = (16, 14);
        let p = padded.params(0, 0, 0, 12, 10);
        assert_eq!(p.crop, (0, 0, 16, 14));
        let mut out = vec![0f32; padded.output_len()];
        padded.apply(&img, &p, &mut out).unwrap();
        assert!(out[..16].iter().all(|&v| v == 0.25), "{:?}", &out[..16]);
        assert_eq!(out[2 * 16 + 2], img.data[0] as f32 / 255.0);

        let mut noisy = Augment::with_size(64, 64).deterministic();
        noisy.normalize = Normalize::UNIT;
        noisy.noise_std = 0.1;
        let flat = gray(64, 64, |_, _| 128);
        let p = noisy.params(3, 1, 7, 64, 64);
        let mut out = vec![0f32; noisy.output_len()];
        noisy.apply(&flat, &p, &mut out).unwrap();
        let n = out.len() as f32;
        let mean = out.iter().sum::<f32>() / n;
        let sd = (out.iter().map(|v| (v - mean) * (v - mean)).sum::<f32>() / n).sqrt();
        assert!((mean - 128.0 / 255.0).abs() < 0.005, "{mean}");
        assert!((sd - 0.1).abs() < 0.005, "{sd}");
        let mut d = Augment::default();
        let before = d.params(5, 2, 9, 300, 200);
        d.rotate90 = true;
        d.max_angle_degrees = 10.0;
        d.noise_std = 0.01;
        let after = d.params(5, 2, 9, 300, 200);
        assert_eq!((before.crop, before.flip), (after.crop, after.flip));
    }

    #[test]
    fn params_depend_only_on_seed_epoch_sample_and_stay_inside() {
        let a = Augment::default();
        for s in 0..500 {
            let p = a.params(7, 2, s, 640, 480);
            assert_eq!(p, a.params(7, 2, s, 640, 480));
            let (x, y, w, h) = p.crop;
            assert!(w >= 1 && h >= 1 && x + w <= 640 && y + h <= 480, "{p:?}");
        }
        let flips = (0..1000)
            .filter(|&s| a.params(7, 2, s, 64, 64).flip)
            .count();
        assert!((400..600).contains(&flips), "{flips}");
        assert_ne!(a.params(7, 2, 1, 640, 480), a.params(7, 3, 1, 640, 480));
    }

    /// A constant image stays constant through any crop and flip; the identity resize gives the
    /// samples back exactly; a flip mirrors.
    #[test]
    fn resize_and_flip_are_exact_where_they_must_be() {
        let img = gray(16, 8, |x, y| (x * 10 + y) as u8);
        let mut a = Augment::with_size(16, 8).deterministic();
        a.channels = 1;
        a.normalize = Normalize::UNIT;
        let mut out = vec![0f32; a.output_len()];
        a.apply(&img, &a.params(0, 0, 0, 16, 8), &mut out).unwrap();
        for (i, v) in out.iter().enumerate() {
            assert_eq!(*v, img.data[i] as f32 / 255.0);
        }
        let flipped = AugmentParams {
            flip: true,
            ..a.params(0, 0, 0, 16, 8)
        };
        let mut out2 = vec![0f32; a.output_len()];
        a.apply(&img, &flipped, &mut out2).unwrap();
        for y in 0..8 {
            for x in 0..16 {
                assert_eq!(out2[y * 16 + x], out[y * 16 + 15 - x]);
            }
        }
        let flat = gray(50, 30, |_, _| 200);
        let b = Augment::with_size(7, 5);
        let mut out3 = vec![0f32; b.output_len()];
        b.apply(&flat, &b.params(1, 1, 1, 50, 30), &mut out3)
            .unwrap();
        for (c, plane) in out3.chunks(35).enumerate() {
            let expect = (200.0 / 255.0 - Normalize::IMAGENET.mean[c]) / Normalize::IMAGENET.std[c];
            assert!(plane.iter().all(|v| (v - expect).abs() < 1e-6), "{plane:?}");
        }
    }
}
