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
use crate::layout::Normalize;
use crate::progressive::interlace::Sample;
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
}

impl Default for Augment {
    fn default() -> Self {
        Augment {
            size: (224, 224),
            crop: Some(RandomResizedCrop::default()),
            flip_probability: 0.5,
            channels: 3,
            normalize: Normalize::IMAGENET,
        }
    }
}

/// The random choices for one sample.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AugmentParams {
    /// Crop in source pixels: left, top, width, height.
    pub crop: (u32, u32, u32, u32),
    /// Flip horizontally.
    pub flip: bool,
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
        let crop = match self.crop {
            None => (0, 0, width, height),
            Some(rrc) => random_resized_crop(&mut rng, &rrc, width, height),
        };
        let flip = rng.unit_f32() < self.flip_probability;
        AugmentParams { crop, flip }
    }

    /// Writes the augmented, normalised image into `out` (`channels x height x width` f32,
    /// [`Augment::output_len`] long).
    pub fn apply(
        &self,
        image: &LevelImage,
        p: &AugmentParams,
        out: &mut [f32],
    ) -> crate::Result<()> {
        if out.len() != self.output_len() {
            return Err(crate::ParameterError::BufferSize {
                got: out.len() * 4,
                needed: self.output_len() * 4,
            }
            .into());
        }
        let sources = source_channels(image.channels, self.channels)?;
        match image.depth {
            8 => self.resize_into(&image.data, image, p, &sources, out),
            _ => match bytemuck::try_cast_slice::<u8, u16>(&image.data) {
                Ok(px) => self.resize_into(px, image, p, &sources, out),
                Err(_) => {
                    let px: Vec<u16> = bytemuck::pod_collect_to_vec(&image.data);
                    self.resize_into(&px, image, p, &sources, out)
                }
            },
        }
        Ok(())
    }
}

impl Augment {
    /// [`Augment::apply`] on typed samples.
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
        let plane = ow * oh;
        for oy in 0..oh {
            let (y0, y1, fy) = taps(oy, cy, ch, h, oh);
            let (r0, r1) = (
                &px[y0 * w * n..(y0 + 1) * w * n],
                &px[y1 * w * n..(y1 + 1) * w * n],
            );
            for (oc, &sc) in sources.iter().enumerate() {
                let (mean, std) = (self.normalize.mean[oc], self.normalize.std[oc]);
                let row = &mut out[oc * plane + oy * ow..oc * plane + (oy + 1) * ow];
                for (o, &(x0, x1, fx)) in row.iter_mut().zip(&xs) {
                    let (a0, a1) = (r0[x0 * n + sc].get() as f32, r0[x1 * n + sc].get() as f32);
                    let (b0, b1) = (r1[x0 * n + sc].get() as f32, r1[x1 * n + sc].get() as f32);
                    let top = a0 + (a1 - a0) * fx;
                    let bottom = b0 + (b1 - b0) * fx;
                    let v = top + (bottom - top) * fy;
                    *o = (v / max - mean) / std;
                }
            }
        }
    }
}

/// Which source channel feeds each output channel.
pub(crate) fn source_channels(image_channels: u8, out_channels: u8) -> crate::Result<Vec<usize>> {
    match (image_channels, out_channels) {
        (1 | 2, 3) => Ok(vec![0, 0, 0]),
        (3 | 4, 3) => Ok(vec![0, 1, 2]),
        (1 | 2, 1) => Ok(vec![0]),
        _ => Err(crate::ParameterError::InvalidOption {
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
            crop: (0, 0, 16, 8),
            flip: true,
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
