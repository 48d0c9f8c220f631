//! Output layouts: how decoded samples are laid out in memory, shared by the CPU decoder
//! ([`crate::decode::decode_to_layout`]), the GPU batch planner and its CPU twins, so that
//! every decoder writes the same bytes for the same [`OutputLayout`].
//!
//! The f32 normalisation is written once, in [`Normalize::apply`]; the shaders' `put_sample`
//! in `shaders/output/` is its WGSL copy (the same f32 operations in the same order).

use crate::format::Header;

/// Per-channel normalisation of f32 output: `(x / max - mean[c]) / std[c]`, where
/// `max = 2^depth - 1`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Normalize {
    /// Mean per channel (channels beyond the image's are ignored).
    pub mean: [f32; 4],
    /// Standard deviation per channel.
    pub std: [f32; 4],
}

impl Normalize {
    /// `x / max`: values in [0, 1].
    pub const UNIT: Normalize = Normalize {
        mean: [0.0; 4],
        std: [1.0; 4],
    };
    /// ImageNet mean and std for RGB (alpha, if any, is scaled to [0, 1]).
    pub const IMAGENET: Normalize = Normalize {
        mean: [0.485, 0.456, 0.406, 0.0],
        std: [0.229, 0.224, 0.225, 1.0],
    };

    /// The normalised value of sample `value` of channel `channel` (0..4) of a `depth`-bit
    /// image: `(value / max - mean[channel]) / std[channel]`, as f32 operations in this order
    /// (the GPU does the same; WGSL allows its divisions 2.5 ulp, see the GPU tests'
    /// tolerance).
    #[inline(always)]
    pub fn apply(&self, value: u32, depth: u8, channel: usize) -> f32 {
        (value as f32 / max_value(depth) - self.mean[channel]) / self.std[channel]
    }
}

impl Default for Normalize {
    /// [`Normalize::UNIT`].
    fn default() -> Self {
        Normalize::UNIT
    }
}

/// `2^depth - 1` as f32: the divisor of [`Normalize::apply`].
#[inline(always)]
pub fn max_value(depth: u8) -> f32 {
    ((1u32 << depth) - 1) as f32
}

/// Element type of a decoded output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SampleType {
    /// u8 samples.
    U8,
    /// u16 samples (native byte order on the CPU, little-endian on the GPU).
    U16,
    /// f32 samples.
    F32,
}

impl SampleType {
    /// Bytes per sample.
    pub const fn bytes(self) -> u64 {
        match self {
            SampleType::U8 => 1,
            SampleType::U16 => 2,
            SampleType::F32 => 4,
        }
    }
}

/// How a decoder lays out one decoded image. New layouts (f16 CHW, f32 HWC, ...) are new
/// variants, each implemented by the CPU decoder's row sink and by a `put_sample` in
/// `shaders/output/`; the enum is `non_exhaustive` so adding one is not a breaking change.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub enum OutputLayout {
    /// Interleaved samples (HWC), row-major, no padding: 8-bit images as u8, 16-bit images
    /// as u16. The CPU decoder writes native byte order, the GPU little-endian, so the bytes
    /// are equal on little-endian hosts.
    Interleaved,
    /// Planar (CHW) f32, normalised per channel with [`Normalize::apply`].
    F32Chw(Normalize),
}

impl OutputLayout {
    /// The element type this layout gives an image of `depth` bits.
    pub const fn sample_type(self, depth: u8) -> SampleType {
        match self {
            OutputLayout::Interleaved if depth > 8 => SampleType::U16,
            OutputLayout::Interleaved => SampleType::U8,
            OutputLayout::F32Chw(_) => SampleType::F32,
        }
    }

    /// `true` for planar (CHW) layouts.
    pub const fn is_planar(self) -> bool {
        matches!(self, OutputLayout::F32Chw(_))
    }

    /// Bytes of one decoded image with header `h` in this layout (no padding).
    pub fn output_bytes(self, h: &Header) -> u64 {
        h.sample_count() * self.sample_type(h.depth).bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalize_maps_the_range_ends() {
        assert_eq!(Normalize::UNIT.apply(0, 8, 0), 0.0);
        assert_eq!(Normalize::UNIT.apply(255, 8, 2), 1.0);
        assert_eq!(Normalize::UNIT.apply(65535, 16, 3), 1.0);
        let n = Normalize {
            mean: [0.5; 4],
            std: [0.25; 4],
        };
        assert_eq!(n.apply(0, 8, 1), -2.0);
        assert_eq!(n.apply(255, 8, 1), 2.0);
    }

    #[test]
    fn sample_types_follow_depth_and_layout() {
        assert_eq!(OutputLayout::Interleaved.sample_type(8), SampleType::U8);
        assert_eq!(OutputLayout::Interleaved.sample_type(16), SampleType::U16);
        let f = OutputLayout::F32Chw(Normalize::UNIT);
        assert_eq!(f.sample_type(8), SampleType::F32);
        assert!(f.is_planar() && !OutputLayout::Interleaved.is_planar());
    }
}

/// A rectangle of an image's pixels, `columns x rows`: the part of an image a consumer needs
/// (a random crop, with the pixels its resampling reads around it). Decoders given a window
/// decode only the patches that hold its pixels; the rest of the output is left zero.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Window {
    /// Pixel columns `start..end`.
    pub columns: std::ops::Range<u32>,
    /// Pixel rows `start..end`.
    pub rows: std::ops::Range<u32>,
}

impl Window {
    /// The whole of a `width x height` image.
    pub fn whole(width: u32, height: u32) -> Window {
        Window {
            columns: 0..width,
            rows: 0..height,
        }
    }
}
