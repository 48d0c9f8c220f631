//! The field file format in code (SPEC.md, "Float fields"): the fixed header
//! ([`FieldHeader`]), the runs section (a table of exact f32 bit patterns, then LEB128 runs)
//! and [`parse_field`], which checks a whole file before anything is decoded.

use super::core::container::{check_count, check_crc};
use super::core::runs::{read_runs, Run, MIN_RUN_LEN};
use crate::error::{FormatError, Result};

/// Magic bytes of a field file: "\x89L3F\r\n\x1a\n".
pub const FIELD_MAGIC: [u8; 8] = [0x89, b'L', b'3', b'F', 0x0D, 0x0A, 0x1A, 0x0A];
/// Format version of field files.
pub const FIELD_VERSION: u8 = 1;
/// Bytes of the fixed header.
pub const FIELD_HEADER_LEN: usize = 56;
/// Flag: a fill value is declared.
pub const FIELD_FLAG_FILL: u8 = 1;
/// Significant bits of the bin width (so that bin x width products are exact in f32).
pub const BIN_WIDTH_BITS: u32 = 8;
/// Bins a field may use (16-bit samples of the bin image).
pub const MAX_BINS: u64 = 1 << 16;

/// The fixed header of a field file.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FieldHeader {
    /// Shape, C order (last axis fastest): `[nz, ny, nx]`, `nz = 1` for a 2D field.
    pub shape: [u32; 3],
    /// 2 or 3.
    pub ndim: u8,
    /// The absolute bound every value is within.
    pub bound: f64,
    /// Value of bin 0.
    pub offset: f32,
    /// Bin width (8 significant bits, at most `2 x bound`).
    pub bin_width: f32,
    /// The declared fill value, if any.
    pub fill_value: Option<f32>,
    /// Exception runs.
    pub runs: u32,
    /// Bytes of the embedded bin image.
    pub image_len: u64,
}

impl FieldHeader {
    /// Values in the field.
    pub fn len(&self) -> u64 {
        let n = self.shape.iter().map(|&d| d as u128).product::<u128>();
        n.min(u64::MAX as u128) as u64
    }

    /// The shape as the array has it: `[ny, nx]` for a 2D field, `[nz, ny, nx]` for 3D.
    pub fn dims(&self) -> &[u32] {
        &self.shape[3 - self.ndim as usize..]
    }

    /// Whether the field has no values (never, for a valid header).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The header's 56 bytes, as [`FieldHeader::parse`] reads them.
    pub(super) fn to_bytes(self) -> [u8; FIELD_HEADER_LEN] {
        let mut b = [0u8; FIELD_HEADER_LEN];
        b[..8].copy_from_slice(&FIELD_MAGIC);
        b[8] = FIELD_VERSION;
        b[9] = self.ndim;
        b[10] = if self.fill_value.is_some() {
            FIELD_FLAG_FILL
        } else {
            0
        };
        for (k, d) in self.shape.iter().enumerate() {
            b[12 + 4 * k..16 + 4 * k].copy_from_slice(&d.to_le_bytes());
        }
        b[24..32].copy_from_slice(&self.bound.to_le_bytes());
        b[32..36].copy_from_slice(&self.offset.to_bits().to_le_bytes());
        b[36..40].copy_from_slice(&self.bin_width.to_bits().to_le_bytes());
        b[40..44].copy_from_slice(&self.fill_value.map_or(0, f32::to_bits).to_le_bytes());
        b[44..48].copy_from_slice(&self.runs.to_le_bytes());
        b[48..56].copy_from_slice(&self.image_len.to_le_bytes());
        b
    }

    /// Parses and validates the fixed header.
    pub fn parse(data: &[u8]) -> std::result::Result<Self, FormatError> {
        let n = data.len().min(8);
        if data[..n] != FIELD_MAGIC[..n] {
            return Err(FormatError::BadMagic {
                found: data[..n].to_vec(),
                expected: FIELD_MAGIC,
            });
        }
        if data.len() < FIELD_HEADER_LEN {
            return Err(FormatError::Truncated {
                what: "field header",
                offset: 0,
                end: FIELD_HEADER_LEN as u64,
                len: data.len() as u64,
            });
        }
        let invalid = |field, offset: usize, value: u64, reason| FormatError::InvalidHeader {
            field,
            offset: offset as u64,
            value,
            reason,
        };
        if data[8] != FIELD_VERSION {
            return Err(FormatError::UnsupportedVersion {
                version: data[8],
                supported: FIELD_VERSION,
            });
        }
        let ndim = data[9];
        if ndim != 2 && ndim != 3 {
            return Err(invalid("ndim", 9, ndim as u64, "must be 2 or 3"));
        }
        let flags = data[10];
        if flags & !FIELD_FLAG_FILL != 0 {
            return Err(invalid(
                "flags",
                10,
                flags as u64,
                "only bit 0 (fill) is defined",
            ));
        }
        if data[11] != 0 {
            return Err(invalid("reserved", 11, data[11] as u64, "must be zero"));
        }
        let u32_at = |o: usize| u32::from_le_bytes(data[o..o + 4].try_into().expect("4 bytes"));
        let shape = [u32_at(12), u32_at(16), u32_at(20)];
        for (k, &d) in shape.iter().enumerate() {
            if d == 0 {
                return Err(invalid(
                    "shape",
                    12 + 4 * k,
                    0,
                    "every dimension must be >= 1",
                ));
            }
        }
        if ndim == 2 && shape[0] != 1 {
            return Err(invalid(
                "shape",
                12,
                shape[0] as u64,
                "a 2D field has nz = 1",
            ));
        }
        check_count(&shape)?;
        let bound = f64::from_le_bytes(data[24..32].try_into().expect("8 bytes"));
        if !(bound.is_finite() && bound > 0.0) {
            return Err(invalid(
                "bound",
                24,
                bound.to_bits(),
                "must be finite and positive",
            ));
        }
        let offset = f32::from_bits(u32_at(32));
        let bin_width = f32::from_bits(u32_at(36));
        if !offset.is_finite() || offset.is_subnormal() {
            return Err(invalid(
                "offset",
                32,
                offset.to_bits() as u64,
                "must be finite and not subnormal",
            ));
        }
        if !(bin_width.is_normal() && bin_width > 0.0 && bin_width as f64 <= 2.0 * bound)
            || bin_width_significand_bits(bin_width) > BIN_WIDTH_BITS
        {
            return Err(invalid(
                "bin_width",
                36,
                bin_width.to_bits() as u64,
                "must be a positive normal f32 of at most 8 significant bits, at most 2 x bound",
            ));
        }
        let fill_value = (flags & FIELD_FLAG_FILL != 0).then(|| f32::from_bits(u32_at(40)));
        let runs = u32_at(44);
        let image_len = u64::from_le_bytes(data[48..56].try_into().expect("8 bytes"));
        Ok(FieldHeader {
            shape,
            ndim,
            bound,
            offset,
            bin_width,
            fill_value,
            runs,
            image_len,
        })
    }
}

/// Significant bits of a positive normal f32 (1 for powers of two).
pub(super) fn bin_width_significand_bits(x: f32) -> u32 {
    let mantissa = x.to_bits() & 0x7f_ffff;
    if mantissa == 0 {
        1
    } else {
        24 - mantissa.trailing_zeros()
    }
}

/// A parsed field file: its header, its bin image (an L3 file) and its exception runs.
#[derive(Debug)]
pub struct FieldLayout<'a> {
    /// The header.
    pub header: FieldHeader,
    /// The bin image: an L3 file, u16 gray, `nx` wide, `ny x nz` high, lossless.
    pub image: &'a [u8],
    /// Exception runs, sorted, disjoint, inside the field.
    pub runs: Vec<Run>,
}

/// Parses a field file: header, CRC-32 of everything before it, the bin image's header
/// against the field's shape, and every run against the field (sorted, disjoint, inside).
pub fn parse_field(data: &[u8]) -> Result<FieldLayout<'_>> {
    let header = FieldHeader::parse(data)?;
    // Saturating: a hostile image_len near 2^64 must not overflow (found by fuzzing).
    let least = (FIELD_HEADER_LEN as u64 + 4 + 4)
        .saturating_add(header.image_len)
        .saturating_add(header.runs as u64 * MIN_RUN_LEN as u64);
    if (data.len() as u64) < least {
        return Err(FormatError::Truncated {
            what: "field (header, bin image, runs and CRC)",
            offset: 0,
            end: least,
            len: data.len() as u64,
        }
        .into());
    }
    let body = data.len() - 4;
    check_crc(data)?;
    let image_end = FIELD_HEADER_LEN + header.image_len as usize;
    let image = &data[FIELD_HEADER_LEN..image_end];
    let h = crate::decode::read_header(image)?;
    let [nz, ny, nx] = header.shape;
    if (h.width, h.height as u64, h.channels(), h.depth, h.max_error)
        != (nx, ny as u64 * nz as u64, 1, 16, 0)
    {
        return Err(FormatError::InvalidHeader {
            field: "bin image",
            offset: FIELD_HEADER_LEN as u64,
            value: h.width as u64,
            reason: "the bin image must be a lossless 16-bit gray image of nx x (ny nz) pixels",
        }
        .into());
    }
    let runs = read_runs(&data[image_end..body], header.runs, header.len(), image_end)?;
    Ok(FieldLayout {
        header,
        image,
        runs,
    })
}
