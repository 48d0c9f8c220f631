//! The loader's batch tensors: f32 or f16 (IEEE binary16, as bits) values, NCHW.

use crate::tensor::f16_to_f32;

/// Element type of the batch tensors.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum TensorType {
    /// 32-bit floats (default).
    #[default]
    F32,
    /// 16-bit floats (IEEE binary16), rounded to nearest even; half the memory and the host to
    /// device bandwidth. The element count per image must be even (it is for 3 x H x W with an
    /// even H x W, e.g. 224 x 224).
    F16,
}

impl TensorType {
    /// Bytes of one value.
    pub fn size(self) -> u64 {
        match self {
            TensorType::F32 => 4,
            TensorType::F16 => 2,
        }
    }
}

/// A batch tensor's values.
#[derive(Debug, Clone, PartialEq)]
pub enum Tensor {
    /// f32 values.
    F32(Vec<f32>),
    /// f16 values, as their bits.
    F16(Vec<u16>),
}

impl Default for Tensor {
    fn default() -> Self {
        Tensor::F32(Vec::new())
    }
}

impl Tensor {
    /// An empty tensor of type `t` with room for `n` values.
    pub fn with_capacity(t: TensorType, n: usize) -> Self {
        match t {
            TensorType::F32 => Tensor::F32(Vec::with_capacity(n)),
            TensorType::F16 => Tensor::F16(Vec::with_capacity(n)),
        }
    }

    /// `n` zeros of type `t` (allocated zeroed, so the pages are touched first by whoever
    /// writes them).
    pub fn zeroed(t: TensorType, n: usize) -> Self {
        match t {
            TensorType::F32 => Tensor::F32(vec![0.0; n]),
            TensorType::F16 => Tensor::F16(vec![0; n]),
        }
    }

    /// Copies slot `from` (values `from * per..`, `per` long) over slot `to`.
    #[cfg(feature = "dataset")]
    pub(crate) fn move_slot(&mut self, from: usize, to: usize, per: usize) {
        match self {
            Tensor::F32(v) => v.copy_within(from * per..(from + 1) * per, to * per),
            Tensor::F16(v) => v.copy_within(from * per..(from + 1) * per, to * per),
        }
    }

    /// Keeps the first `n` values.
    #[cfg(feature = "dataset")]
    pub(crate) fn truncate(&mut self, n: usize) {
        match self {
            Tensor::F32(v) => v.truncate(n),
            Tensor::F16(v) => v.truncate(n),
        }
    }

    /// Values held.
    pub fn len(&self) -> usize {
        match self {
            Tensor::F32(v) => v.len(),
            Tensor::F16(v) => v.len(),
        }
    }

    /// Whether there are no values.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The f32 values, if the tensor holds f32.
    pub fn as_f32(&self) -> Option<&[f32]> {
        match self {
            Tensor::F32(v) => Some(v),
            Tensor::F16(_) => None,
        }
    }

    /// The f16 bits, if the tensor holds f16.
    pub fn as_f16_bits(&self) -> Option<&[u16]> {
        match self {
            Tensor::F16(v) => Some(v),
            Tensor::F32(_) => None,
        }
    }

    /// The values as f32 (f16 values widened exactly).
    pub fn to_f32(&self) -> Vec<f32> {
        match self {
            Tensor::F32(v) => v.clone(),
            Tensor::F16(v) => v.iter().map(|&h| f16_to_f32(h)).collect(),
        }
    }

    /// The values' bytes (native byte order).
    pub fn as_bytes(&self) -> &[u8] {
        match self {
            Tensor::F32(v) => bytemuck::cast_slice(v),
            Tensor::F16(v) => bytemuck::cast_slice(v),
        }
    }

    /// Appends f32 values, converted to the tensor's type.
    pub fn extend_from_f32(&mut self, values: &[f32]) {
        match self {
            Tensor::F32(v) => v.extend_from_slice(values),
            Tensor::F16(v) => v.extend(values.iter().map(|&x| f32_to_f16_bits(x))),
        }
    }
}

/// `x` as IEEE binary16 bits, rounded to nearest, ties to even; overflow gives infinity, NaN
/// stays NaN.
pub fn f32_to_f16_bits(x: f32) -> u16 {
    let b = x.to_bits();
    let sign = ((b >> 16) & 0x8000) as u16;
    let exp = ((b >> 23) & 0xff) as i32;
    let man = b & 0x7f_ffff;
    if exp == 0xff {
        return sign | 0x7c00 | if man != 0 { 0x200 } else { 0 };
    }
    let e = exp - 127 + 15;
    if e >= 0x1f {
        return sign | 0x7c00;
    }
    let round = |value: u32, shift: u32| -> u32 {
        let r = value >> shift;
        let rem = value & ((1 << shift) - 1);
        let half = 1 << (shift - 1);
        r + (rem > half || (rem == half && r & 1 == 1)) as u32
    };
    if e <= 0 {
        // Subnormal (or zero): units of 2^-24.
        if e < -10 {
            return sign;
        }
        return sign | round(man | 0x80_0000, (14 - e) as u32) as u16;
    }
    // A carry out of the mantissa bumps the exponent, up to infinity: still correct.
    sign | round(((e as u32) << 23) | man, 13) as u16
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every f16 value survives f16 -> f32 -> f16; rounding is to nearest, ties to even.
    #[test]
    fn conversions_round_trip_and_round_to_nearest_even() {
        for h in 0..=u16::MAX {
            let f = f16_to_f32(h);
            if f.is_nan() {
                assert!(f16_to_f32(f32_to_f16_bits(f)).is_nan());
                continue;
            }
            assert_eq!(f32_to_f16_bits(f), h, "{h:#06x} -> {f}");
        }
        assert_eq!(f32_to_f16_bits(1.0), 0x3c00);
        // 1 + 2^-11 is halfway between 1 and 1 + 2^-10: ties to even (1.0).
        assert_eq!(f32_to_f16_bits(1.0 + 1.0 / 2048.0), 0x3c00);
        // 1 + 3 * 2^-11 is halfway between 1 + 2^-10 (odd) and 1 + 2^-9: up.
        assert_eq!(f32_to_f16_bits(1.0 + 3.0 / 2048.0), 0x3c02);
        assert_eq!(f32_to_f16_bits(65520.0), 0x7c00, "rounds up to infinity");
        assert_eq!(f32_to_f16_bits(-1e-9), 0x8000);
        assert_eq!(f32_to_f16_bits(2.0f32.powi(-25) * 1.5), 0x0001);
    }
}
