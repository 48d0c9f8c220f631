//! The record model: element types ([`DType`]), storage modes ([`StorageMode`]), what the
//! index says of one array ([`ArraySpec`]), an owned n-d array ([`NdArray`]) and a record of
//! named arrays ([`TensorRecord`]).

use crate::error::{ParameterError, Result};

/// Most arrays in one record.
pub const MAX_ARRAYS: usize = 16;
/// Longest array name in bytes.
pub const MAX_NAME_LEN: usize = 64;
/// Most axes of an array.
pub const MAX_NDIM: usize = 4;
/// Most elements of one array the format allows (the caller's [`crate::Limits`] bound the
/// bytes further, before anything is allocated).
pub const MAX_ELEMENTS: u64 = 1 << 40;

/// The element type of an array (its id is the index byte, `SPEC.md` "Tensor records").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum DType {
    /// IEEE binary32.
    Float32 = 1,
    /// IEEE binary16.
    Float16 = 2,
    /// bfloat16 (the top 16 bits of a binary32).
    BFloat16 = 3,
    /// IEEE binary64.
    Float64 = 4,
    /// Unsigned 8-bit.
    UInt8 = 5,
    /// Signed 8-bit.
    Int8 = 6,
    /// Unsigned 16-bit.
    UInt16 = 7,
    /// Signed 16-bit.
    Int16 = 8,
    /// Unsigned 32-bit.
    UInt32 = 9,
    /// Signed 32-bit.
    Int32 = 10,
    /// Signed 64-bit.
    Int64 = 11,
    /// Unsigned 64-bit.
    UInt64 = 12,
}

/// Every element type, by id.
pub const DTYPES: [DType; 12] = [
    DType::Float32,
    DType::Float16,
    DType::BFloat16,
    DType::Float64,
    DType::UInt8,
    DType::Int8,
    DType::UInt16,
    DType::Int16,
    DType::UInt32,
    DType::Int32,
    DType::Int64,
    DType::UInt64,
];

impl DType {
    /// The type of index byte `id`, if any.
    pub fn from_id(id: u8) -> Option<Self> {
        DTYPES.iter().copied().find(|d| *d as u8 == id)
    }

    /// The type named `name` (as [`DType::name`] writes it), if any.
    pub fn from_name(name: &str) -> Option<Self> {
        DTYPES.iter().copied().find(|d| d.name() == name)
    }

    /// Bytes of one element.
    pub fn size(self) -> usize {
        match self {
            DType::UInt8 | DType::Int8 => 1,
            DType::Float16 | DType::BFloat16 | DType::UInt16 | DType::Int16 => 2,
            DType::Float32 | DType::UInt32 | DType::Int32 => 4,
            DType::Float64 | DType::Int64 | DType::UInt64 => 8,
        }
    }

    /// Whether the type is a floating-point one.
    pub fn is_float(self) -> bool {
        matches!(
            self,
            DType::Float32 | DType::Float16 | DType::BFloat16 | DType::Float64
        )
    }

    /// The type's name, as NumPy spells it (`bfloat16` has no NumPy type).
    pub fn name(self) -> &'static str {
        match self {
            DType::Float32 => "float32",
            DType::Float16 => "float16",
            DType::BFloat16 => "bfloat16",
            DType::Float64 => "float64",
            DType::UInt8 => "uint8",
            DType::Int8 => "int8",
            DType::UInt16 => "uint16",
            DType::Int16 => "int16",
            DType::UInt32 => "uint32",
            DType::Int32 => "int32",
            DType::Int64 => "int64",
            DType::UInt64 => "uint64",
        }
    }

    /// The NumPy type string of the elements as stored (little-endian); bfloat16, which NumPy
    /// lacks, is given as its bit patterns (`<u2`).
    pub fn numpy_descr(self) -> &'static str {
        match self {
            DType::Float32 => "<f4",
            DType::Float16 => "<f2",
            DType::BFloat16 => "<u2",
            DType::Float64 => "<f8",
            DType::UInt8 => "|u1",
            DType::Int8 => "|i1",
            DType::UInt16 => "<u2",
            DType::Int16 => "<i2",
            DType::UInt32 => "<u4",
            DType::Int32 => "<i4",
            DType::Int64 => "<i8",
            DType::UInt64 => "<u8",
        }
    }

    /// The bit pattern of `value` in this type (zero-extended to 64 bits), if the type holds
    /// it exactly (a fill value is compared by its bits).
    pub fn bits_of(self, value: f64) -> Option<u64> {
        let int_in = |lo: f64, hi: f64| value.fract() == 0.0 && value >= lo && value <= hi;
        match self {
            DType::Float64 => Some(value.to_bits()),
            DType::Float32 => {
                let f = value as f32;
                (f as f64 == value || value.is_nan()).then_some(f.to_bits() as u64)
            }
            DType::BFloat16 => {
                let f = value as f32;
                let exact = (f as f64 == value || value.is_nan()) && f.to_bits() & 0xFFFF == 0;
                exact.then_some((f.to_bits() >> 16) as u64)
            }
            DType::Float16 => f16_from_f64(value).map(u64::from),
            DType::UInt8 => int_in(0.0, u8::MAX as f64).then_some(value as u64),
            DType::UInt16 => int_in(0.0, u16::MAX as f64).then_some(value as u64),
            DType::UInt32 => int_in(0.0, u32::MAX as f64).then_some(value as u64),
            DType::UInt64 => int_in(0.0, u64::MAX as f64).then_some(value as u64),
            DType::Int8 => {
                int_in(i8::MIN as f64, i8::MAX as f64).then_some(value as i8 as u8 as u64)
            }
            DType::Int16 => {
                int_in(i16::MIN as f64, i16::MAX as f64).then_some(value as i16 as u16 as u64)
            }
            DType::Int32 => {
                int_in(i32::MIN as f64, i32::MAX as f64).then_some(value as i32 as u32 as u64)
            }
            DType::Int64 => int_in(i64::MIN as f64, i64::MAX as f64).then_some(value as i64 as u64),
        }
    }
}

/// The f32 of binary16 bits `h` (exact: every binary16 is a binary32).
pub fn f16_to_f32(h: u16) -> f32 {
    let sign = ((h >> 15) as u32) << 31;
    let exp = ((h >> 10) & 0x1F) as u32;
    let man = (h & 0x3FF) as u32;
    let bits = match exp {
        0 if man == 0 => sign,
        // Subnormal: man x 2^-24, exact in f32.
        0 => {
            let v = man as f32 * f32::from_bits(0x3380_0000);
            return if sign != 0 { -v } else { v };
        }
        0x1F => sign | 0x7F80_0000 | (man << 13),
        _ => sign | ((exp + 112) << 23) | (man << 13),
    };
    f32::from_bits(bits)
}

/// The binary16 bits of `v` if binary16 holds it exactly (NaN: a quiet NaN).
fn f16_from_f64(v: f64) -> Option<u16> {
    if v.is_nan() {
        return Some(0x7E00);
    }
    let sign: u16 = if v.is_sign_negative() { 0x8000 } else { 0 };
    let a = v.abs();
    if a == 0.0 {
        return Some(sign);
    }
    if a.is_infinite() {
        return Some(sign | 0x7C00);
    }
    // The candidate's bits from the exponent and significand, checked by converting back.
    let candidate = if a < 6.103_515_625e-5 {
        // Subnormal: a = man x 2^-24.
        let man = a * 16_777_216.0;
        (man.fract() == 0.0 && man < 1024.0).then_some(man as u16)?
    } else {
        let e = a.log2().floor() as i32;
        let e = if 2f64.powi(e) > a { e - 1 } else { e };
        if !(-14..=15).contains(&e) {
            return None;
        }
        let man = (a / 2f64.powi(e) - 1.0) * 1024.0;
        if man.fract() != 0.0 || !(0.0..1024.0).contains(&man) {
            return None;
        }
        (((e + 15) as u16) << 10) | man as u16
    };
    let h = sign | candidate;
    (f16_to_f32(h) as f64 == v).then_some(h)
}

/// How an array's elements are stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum StorageMode {
    /// The elements' little-endian bytes.
    Raw = 0,
    /// A lossless float field (`.l3f` version 2).
    Lossless = 1,
    /// An error-bounded float32 field (`.l3f` version 1 or 3: SPEC "Tensor records").
    ErrorBounded = 2,
}

impl StorageMode {
    /// The mode of index byte `id`, if any.
    pub fn from_id(id: u8) -> Option<Self> {
        match id {
            0 => Some(StorageMode::Raw),
            1 => Some(StorageMode::Lossless),
            2 => Some(StorageMode::ErrorBounded),
            _ => None,
        }
    }

    /// The mode's name: `raw`, `lossless` or `error-bounded`.
    pub fn name(self) -> &'static str {
        match self {
            StorageMode::Raw => "raw",
            StorageMode::Lossless => "lossless",
            StorageMode::ErrorBounded => "error-bounded",
        }
    }
}

/// What a record's index entry says of one array, besides where its payload lies.
#[derive(Debug, Clone, PartialEq)]
pub struct ArraySpec {
    /// Its name, unique in the record ([`check_name`]).
    pub name: String,
    /// Element type.
    pub dtype: DType,
    /// Shape, C order (last axis fastest), 1..=[`MAX_NDIM`] axes, each at least 1.
    pub shape: Vec<u32>,
    /// Storage mode.
    pub mode: StorageMode,
    /// The absolute bound of an error-bounded array (0 otherwise).
    pub bound: f64,
    /// The fill value's bits in the element type (zero-extended), if one is declared.
    pub fill: Option<u64>,
}

impl ArraySpec {
    /// Elements of the array.
    pub fn elements(&self) -> u64 {
        self.shape.iter().map(|&d| d as u64).product()
    }

    /// Bytes of the array's elements.
    pub fn byte_len(&self) -> u64 {
        self.elements() * self.dtype.size() as u64
    }
}

/// Why `name` cannot be an array name, or `Ok`: 1..=[`MAX_NAME_LEN`] bytes of
/// `[A-Za-z0-9_.-]`.
pub fn check_name(name: &str) -> std::result::Result<(), &'static str> {
    if name.is_empty() || name.len() > MAX_NAME_LEN {
        return Err("an array name is 1 to 64 bytes");
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
    {
        return Err("an array name is made of A-Z, a-z, 0-9, `_`, `.` and `-`");
    }
    Ok(())
}

/// The elements of `shape`, or why it is not an array shape: 1..=[`MAX_NDIM`] axes, each at
/// least 1, at most [`MAX_ELEMENTS`] in all.
pub fn check_shape(shape: &[u32]) -> std::result::Result<u64, &'static str> {
    if shape.is_empty() || shape.len() > MAX_NDIM {
        return Err("an array has 1 to 4 axes");
    }
    if shape.contains(&0) {
        return Err("every axis has at least 1 element");
    }
    let n = shape.iter().try_fold(1u64, |a, &d| a.checked_mul(d as u64));
    n.filter(|&n| n <= MAX_ELEMENTS)
        .ok_or("at most 2^40 elements")
}

/// An owned n-d array: its elements' little-endian bytes, their type and the shape.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NdArray {
    dtype: DType,
    shape: Vec<u32>,
    bytes: Vec<u8>,
}

impl NdArray {
    /// The array of `dtype` and `shape` over `bytes` (little-endian elements, C order); the
    /// shape must be valid ([`check_shape`]) and the bytes exactly its size.
    pub fn new(dtype: DType, shape: Vec<u32>, bytes: Vec<u8>) -> Result<Self> {
        let n = check_shape(&shape).map_err(|reason| ParameterError::InvalidOption {
            name: "shape",
            value: shape.len() as u64,
            reason,
        })?;
        if n.checked_mul(dtype.size() as u64) != Some(bytes.len() as u64) {
            return Err(ParameterError::BufferSize {
                got: bytes.len(),
                needed: (n as usize).saturating_mul(dtype.size()),
            }
            .into());
        }
        Ok(NdArray {
            dtype,
            shape,
            bytes,
        })
    }

    /// A float32 array of `shape` holding `values`.
    pub fn from_f32(shape: Vec<u32>, values: &[f32]) -> Result<Self> {
        Self::new(DType::Float32, shape, le_bytes(values))
    }

    /// Element type.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// Shape, C order.
    pub fn shape(&self) -> &[u32] {
        &self.shape
    }

    /// The elements' little-endian bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The bytes, owned.
    pub fn into_bytes(self) -> Vec<u8> {
        self.bytes
    }

    /// Elements.
    pub fn len(&self) -> usize {
        self.bytes.len() / self.dtype.size()
    }

    /// Whether the array has no elements (never, for a valid shape).
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// The elements of a float32 array (`None` for another type).
    pub fn to_f32(&self) -> Option<Vec<f32>> {
        (self.dtype == DType::Float32).then(|| {
            self.bytes
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes(b.try_into().expect("4 bytes")))
                .collect()
        })
    }

    /// Element `i`'s bits, zero-extended.
    pub fn bits_at(&self, i: usize) -> u64 {
        let s = self.dtype.size();
        let mut b = [0u8; 8];
        b[..s].copy_from_slice(&self.bytes[i * s..(i + 1) * s]);
        u64::from_le_bytes(b)
    }

    /// Element `i` of a float array as f64 (exact), `None` for an integer type.
    pub fn float_at(&self, i: usize) -> Option<f64> {
        let bits = self.bits_at(i);
        match self.dtype {
            DType::Float32 => Some(f32::from_bits(bits as u32) as f64),
            DType::Float64 => Some(f64::from_bits(bits)),
            DType::Float16 => Some(f16_to_f32(bits as u16) as f64),
            DType::BFloat16 => Some(f32::from_bits((bits as u32) << 16) as f64),
            _ => None,
        }
    }
}

/// A record of named arrays, as a shard stores it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorRecord {
    /// Key ([`crate::shard::format::check_key`] rules: a relative path).
    pub key: String,
    /// Class id, or `None`.
    pub class: Option<u32>,
    /// Metadata bytes, at most 1 MiB.
    pub meta: Vec<u8>,
    /// The arrays, 1..=[`MAX_ARRAYS`], names distinct.
    pub arrays: Vec<(String, NdArray)>,
}

/// The little-endian bytes of `values`, a slice of a primitive number type (one copy; on a
/// big-endian host each element's bytes reversed).
pub(crate) fn le_bytes<T: bytemuck::Pod>(values: &[T]) -> Vec<u8> {
    let mut out = bytemuck::cast_slice::<T, u8>(values).to_vec();
    if cfg!(target_endian = "big") {
        for element in out.chunks_exact_mut(std::mem::size_of::<T>()) {
            element.reverse();
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn f16_bits_round_trip() {
        for h in 0..=u16::MAX {
            let f = f16_to_f32(h);
            if f.is_nan() {
                continue;
            }
            assert_eq!(f16_from_f64(f as f64), Some(h), "{h:#06x} = {f}");
        }
        assert_eq!(f16_from_f64(0.1), None);
        assert_eq!(f16_from_f64(65520.0), None);
        assert_eq!(DType::Float16.bits_of(-2.0), Some(0xC000));
    }

    #[test]
    fn fill_bits_per_type() {
        assert_eq!(DType::Int16.bits_of(-1.0), Some(0xFFFF));
        assert_eq!(DType::UInt8.bits_of(256.0), None);
        assert_eq!(DType::Int32.bits_of(0.5), None);
        assert_eq!(DType::Float32.bits_of(0.1), None);
        assert_eq!(
            DType::Float32.bits_of(-9999.0),
            Some((-9999f32).to_bits() as u64)
        );
        assert_eq!(DType::BFloat16.bits_of(1.0), Some(0x3F80));
        assert_eq!(DType::BFloat16.bits_of(1.0 + 1.0 / 1024.0), None);
    }

    #[test]
    fn names_and_shapes() {
        assert!(check_name("input.t-0_A").is_ok());
        for bad in ["", "a/b", "a b", "é", &"x".repeat(65)] {
            assert!(check_name(bad).is_err(), "{bad:?}");
        }
        assert_eq!(check_shape(&[2, 3]), Ok(6));
        assert!(check_shape(&[]).is_err());
        assert!(check_shape(&[1, 1, 1, 1, 1]).is_err());
        assert!(check_shape(&[3, 0]).is_err());
        assert!(check_shape(&[u32::MAX, u32::MAX, 2]).is_err());
        assert!(NdArray::new(DType::Int16, vec![3], vec![0; 5]).is_err());
        let a = NdArray::new(DType::Int16, vec![3], vec![0; 6]).unwrap();
        assert_eq!(a.len(), 3);
    }
}
