//! Error-bounded float32 fields (SPEC.md, "Float fields"): 2D and 3D arrays stored within a
//! stated absolute bound, decoded on the CPU or the GPU bit for bit alike. This module is the
//! format in code.
//!
//! Dual quantisation (cuSZ): each finite value `v` becomes the integer bin
//! `q = round((v - offset) / bin_width)`, and the bins are stored as a 16-bit gray L3 image
//! (lossless, any profile), so prediction runs on integers and decoding is the image decode
//! plus one `offset + q * bin_width` per value, with no serial error feedback. The bin width
//! is the largest value at most `2 x bound` with an 8-bit significand, so `q * bin_width`
//! (16 x 8 significant bits) is exact in f32 and the reconstruction is a single correctly
//! rounded f32 addition: the same bits on every IEEE f32 unit, fused multiply-add or not.
//! The encoder computes each value's reconstruction exactly as decoders do and checks it
//! against the bound in f64; a value whose reconstruction misses the bound (or would be
//! subnormal, which GPUs may flush), NaN, infinities and the declared fill value are stored
//! exactly, as runs of equal f32 bits. So the bound holds for every value by construction.

use crate::decode::DecodeOptions;
use crate::encode::EncodeOptions;
use crate::error::{FormatError, ParameterError, Result};
use crate::format::ColorType;
use crate::raw::{RawImage, Samples};

/// Magic bytes of a field file: "\x89L3F\r\n\x1a\n".
pub const FIELD_MAGIC: [u8; 8] = [0x89, b'L', b'3', b'F', 0x0D, 0x0A, 0x1A, 0x0A];
/// Format version of field files.
pub const FIELD_VERSION: u8 = 1;
/// Bytes of the fixed header.
pub const FIELD_HEADER_LEN: usize = 56;
/// Fewest bytes one exception run takes in the runs section (three one-byte varints).
pub const MIN_RUN_LEN: usize = 3;
/// Largest number of distinct f32 bit patterns in the runs' value table.
pub const MAX_RUN_VALUES: u32 = 1 << 16;
/// Flag: a fill value is declared.
pub const FIELD_FLAG_FILL: u8 = 1;
/// Significant bits of the bin width (so that bin x width products are exact in f32).
pub const BIN_WIDTH_BITS: u32 = 8;
/// Bins a field may use (16-bit samples of the bin image).
pub const MAX_BINS: u64 = 1 << 16;

/// The error bound asked for.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Bound {
    /// Every decoded value within this of the original.
    Absolute(f64),
    /// Within this fraction of the value range (max - min over finite, non-fill values).
    Relative(f64),
}

/// Options of [`encode_field`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FieldOptions {
    /// The bound (no default: a lossy mode is always asked for explicitly).
    pub bound: Bound,
    /// A fill value (missing data) stored exactly, like NaN (default none).
    pub fill_value: Option<f32>,
    /// Encode options of the bin image (default: the compact profile, lossless, 128-px
    /// patches: on the shared fields 1.5-5 % smaller than 64-px ones, whose headers cost more
    /// where the coarse bins of a loose bound leave little else to code).
    pub image: EncodeOptions,
}

impl FieldOptions {
    /// `bound`, no fill value, the compact profile with 128-px patches.
    pub fn new(bound: Bound) -> Self {
        FieldOptions {
            bound,
            fill_value: None,
            image: EncodeOptions {
                patch_log2: 7,
                ..EncodeOptions::for_profile(crate::format::Profile::Compact)
            },
        }
    }
}

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

    fn to_bytes(self) -> [u8; FIELD_HEADER_LEN] {
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
        // In u128: three u32 dimensions can overflow u64 (found by fuzzing).
        let total = shape.iter().map(|&d| d as u128).product::<u128>();
        if total > u32::MAX as u128 {
            return Err(invalid(
                "shape",
                12,
                total.min(u64::MAX as u128) as u64,
                "at most 2^32 - 1 values",
            ));
        }
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
fn bin_width_significand_bits(x: f32) -> u32 {
    let mantissa = x.to_bits() & 0x7f_ffff;
    if mantissa == 0 {
        1
    } else {
        24 - mantissa.trailing_zeros()
    }
}

/// The largest positive normal f32 at most `limit` with [`BIN_WIDTH_BITS`] significant bits.
fn bin_width_for(limit: f64) -> Option<f32> {
    if !(limit.is_finite() && limit >= f32::MIN_POSITIVE as f64) {
        return None;
    }
    let x = (limit as f32).min(f32::MAX);
    // Round down to f32 first (as f32 may round up), then drop significand bits.
    let x = if x as f64 > limit {
        f32::from_bits(x.to_bits() - 1)
    } else {
        x
    };
    let drop = 24 - BIN_WIDTH_BITS;
    Some(f32::from_bits(x.to_bits() & !((1u32 << drop) - 1)))
}

/// The decoded value of bin `q`: one f32 addition of an exact product (the twin of
/// `reconstruct` in `shaders/fields.wgsl`).
#[inline(always)]
pub fn reconstruct(q: u16, offset: f32, bin_width: f32) -> f32 {
    offset + q as f32 * bin_width
}

/// One exception run: `len` values from `start` are all the f32 with bits `bits`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Run {
    /// First value index (C order).
    pub start: u32,
    /// Values.
    pub len: u32,
    /// Their f32 bits.
    pub bits: u32,
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
    let stored = u32::from_le_bytes(data[body..].try_into().expect("4 bytes"));
    let computed = crc32fast::hash(&data[..body]);
    if stored != computed {
        return Err(FormatError::ChecksumMismatch {
            stored,
            computed,
            offset: body as u64,
        }
        .into());
    }
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

/// Appends the runs section: u32 K, the K distinct f32 bit patterns (u32 each, in order of
/// first use), then per run three LEB128 varints: the gap from the previous run's end (from 0
/// for the first), the length minus 1, and the index of its value in the table.
fn write_runs(runs: &[Run], out: &mut Vec<u8>) -> Result<()> {
    let mut table: Vec<u32> = Vec::new();
    let mut index = std::collections::HashMap::new();
    for r in runs {
        index.entry(r.bits).or_insert_with(|| {
            table.push(r.bits);
            table.len() as u32 - 1
        });
    }
    if table.len() as u32 > MAX_RUN_VALUES {
        return Err(ParameterError::InvalidOption {
            name: "exceptions",
            value: table.len() as u64,
            reason: "more than 65536 distinct exactly-kept values",
        }
        .into());
    }
    out.extend_from_slice(&(table.len() as u32).to_le_bytes());
    for bits in &table {
        out.extend_from_slice(&bits.to_le_bytes());
    }
    let mut end = 0u32;
    for r in runs {
        put_varint(out, r.start - end);
        put_varint(out, r.len - 1);
        put_varint(out, index[&r.bits]);
        end = r.start + r.len;
    }
    Ok(())
}

fn put_varint(out: &mut Vec<u8>, mut v: u32) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// A LEB128 varint of at most 5 bytes whose value fits u32, or `None`.
fn get_varint(data: &[u8], at: &mut usize) -> Option<u32> {
    let mut v = 0u64;
    for k in 0..5 {
        let b = *data.get(*at)?;
        *at += 1;
        v |= ((b & 0x7f) as u64) << (7 * k);
        if b & 0x80 == 0 {
            return u32::try_from(v).ok();
        }
    }
    None
}

/// Parses the runs section (`section` starts at byte `base` of the file): exactly `count`
/// runs, each non-empty, after the previous one, inside a field of `total` values, naming a
/// value of the table; the section must end with the last run.
fn read_runs(section: &[u8], count: u32, total: u64, base: usize) -> Result<Vec<Run>> {
    let bad = |at: usize, value: u64, reason| FormatError::InvalidHeader {
        field: "exception runs",
        offset: (base + at) as u64,
        value,
        reason,
    };
    if section.len() < 4 {
        return Err(bad(0, section.len() as u64, "no value table").into());
    }
    let k = u32::from_le_bytes(section[..4].try_into().expect("4 bytes"));
    if k > MAX_RUN_VALUES || (k == 0 && count > 0) || 4 + 4 * k as usize > section.len() {
        return Err(bad(0, k as u64, "the value table does not fit the section").into());
    }
    let table: Vec<u32> = section[4..4 + 4 * k as usize]
        .chunks_exact(4)
        .map(|b| u32::from_le_bytes(b.try_into().expect("4 bytes")))
        .collect();
    let mut at = 4 + 4 * k as usize;
    // Each run takes at least MIN_RUN_LEN bytes, so the count is bounded by the section.
    if count as usize > (section.len() - at) / MIN_RUN_LEN {
        return Err(bad(at, count as u64, "more runs than the section can hold").into());
    }
    let mut runs = Vec::with_capacity(count as usize);
    let mut end = 0u64;
    for _ in 0..count {
        let here = at;
        let (Some(gap), Some(len_1), Some(i)) = (
            get_varint(section, &mut at),
            get_varint(section, &mut at),
            get_varint(section, &mut at),
        ) else {
            return Err(bad(here, 0, "a run's varints are truncated or overlong").into());
        };
        let start = end + gap as u64;
        let run_end = start + len_1 as u64 + 1;
        if run_end > total || i >= k {
            return Err(bad(
                here,
                start,
                "a run lies outside the field or names no value",
            )
            .into());
        }
        runs.push(Run {
            start: start as u32,
            len: (run_end - start) as u32,
            bits: table[i as usize],
        });
        end = run_end;
    }
    if at != section.len() {
        return Err(bad(at, (section.len() - at) as u64, "bytes after the last run").into());
    }
    Ok(runs)
}

/// Encodes a float32 field of `shape` (2 or 3 dimensions, C order) within `options.bound`.
pub fn encode_field(values: &[f32], shape: &[u32], options: &FieldOptions) -> Result<Vec<u8>> {
    let shape3: [u32; 3] = match *shape {
        [ny, nx] => [1, ny, nx],
        [nz, ny, nx] => [nz, ny, nx],
        _ => {
            return Err(ParameterError::InvalidOption {
                name: "shape",
                value: shape.len() as u64,
                reason: "a field has 2 or 3 dimensions",
            }
            .into())
        }
    };
    let total128 = shape3.iter().map(|&d| d as u128).product::<u128>();
    let total = total128.min(u64::MAX as u128) as u64;
    if total != values.len() as u64 || total == 0 || total > u32::MAX as u64 {
        return Err(ParameterError::SampleCount {
            got: values.len(),
            needed: total as usize,
            width: shape3[2],
            height: shape3[1],
            channels: 1,
        }
        .into());
    }
    let fill = options.fill_value;
    let is_regular = |v: f32| v.is_finite() && fill.is_none_or(|f| v.to_bits() != f.to_bits());
    let (lo, hi) = values
        .iter()
        .filter(|&&v| is_regular(v))
        .fold((f32::INFINITY, f32::NEG_INFINITY), |(a, b), &v| {
            (a.min(v), b.max(v))
        });
    let range = if lo <= hi { hi as f64 - lo as f64 } else { 0.0 };
    let bound = match options.bound {
        Bound::Absolute(e) => e,
        Bound::Relative(r) => r * range,
    };
    let bad_bound = |reason| ParameterError::InvalidFloat {
        name: "bound",
        value_bits: bound.to_bits(),
        reason,
    };
    if !(bound.is_finite() && bound > 0.0) {
        return Err(bad_bound(
            "must be finite and positive (a relative bound of a constant field is 0)",
        )
        .into());
    }
    let bin_width = bin_width_for(2.0 * bound)
        .ok_or_else(|| bad_bound("too small for a normal f32 bin width"))?;
    let offset = if lo <= hi && !lo.is_subnormal() {
        lo
    } else {
        0.0
    };
    let bins = ((hi as f64 - offset as f64) / bin_width as f64).floor() + 1.0;
    if lo <= hi && bins > MAX_BINS as f64 {
        return Err(bad_bound(
            "needs more than 65536 bins of width 2 x bound over the value range: loosen the bound",
        )
        .into());
    }
    // Bins, and exceptions where the reconstruction misses the bound.
    let mut bins_image = vec![0u16; values.len()];
    let mut exceptions: Vec<(u32, u32)> = Vec::new();
    let mut last = 0u16;
    for (i, &v) in values.iter().enumerate() {
        let mut chosen = None;
        if is_regular(v) {
            let q = ((v as f64 - offset as f64) / bin_width as f64).round();
            for dq in [0.0, -1.0, 1.0] {
                let c = q + dq;
                if !(0.0..MAX_BINS as f64).contains(&c) {
                    continue;
                }
                let r = reconstruct(c as u16, offset, bin_width);
                if !r.is_subnormal() && (r as f64 - v as f64).abs() <= bound {
                    chosen = Some(c as u16);
                    break;
                }
            }
        }
        match chosen {
            Some(q) => {
                bins_image[i] = q;
                last = q;
            }
            None => {
                // Stored exactly; the bin keeps its neighbour's value, for the predictor.
                bins_image[i] = last;
                exceptions.push((i as u32, v.to_bits()));
            }
        }
    }
    let mut runs: Vec<Run> = Vec::new();
    for (i, bits) in exceptions {
        match runs.last_mut() {
            Some(r) if r.bits == bits && r.start + r.len == i => r.len += 1,
            _ => runs.push(Run {
                start: i,
                len: 1,
                bits,
            }),
        }
    }
    let [nz, ny, nx] = shape3;
    let height = ny as u64 * nz as u64;
    if height > crate::format::MAX_DIMENSION as u64 || nx > crate::format::MAX_DIMENSION {
        return Err(ParameterError::InvalidOption {
            name: "shape",
            value: height,
            reason: "nx and ny x nz must each be at most 16777215",
        }
        .into());
    }
    let image = crate::encode::encode(
        &RawImage {
            width: nx,
            height: height as u32,
            color: ColorType::Gray,
            samples: Samples::U16(&bins_image),
        },
        &EncodeOptions {
            max_error: 0,
            ..options.image
        },
    )?;
    let header = FieldHeader {
        shape: shape3,
        ndim: shape.len() as u8,
        bound,
        offset,
        bin_width,
        fill_value: fill,
        runs: runs.len() as u32,
        image_len: image.len() as u64,
    };
    let mut out = Vec::with_capacity(FIELD_HEADER_LEN + image.len() + runs.len() * 4 + 8);
    out.extend_from_slice(&header.to_bytes());
    out.extend_from_slice(&image);
    write_runs(&runs, &mut out)?;
    let crc = crc32fast::hash(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    Ok(out)
}

/// Decodes a field file into its values (C order) on the CPU.
pub fn decode_field(data: &[u8], options: &DecodeOptions) -> Result<(FieldHeader, Vec<f32>)> {
    let layout = parse_field(data)?;
    let h = layout.header;
    // Limits before any allocation: the values (4 bytes each) and the bins (2 bytes each).
    let values_bytes = h.len() * 4;
    if values_bytes > options.limits.max_output_bytes {
        return Err(crate::error::LimitsError::OutputBytes {
            needed: values_bytes,
            max: options.limits.max_output_bytes,
        }
        .into());
    }
    let mut bins = vec![0u16; h.len() as usize];
    crate::decode::decode_into_u16(layout.image, &mut bins, options)?;
    let mut out = vec![0f32; bins.len()];
    reconstruct_field(&bins, &layout.runs, h.offset, h.bin_width, &mut out);
    Ok((h, out))
}

/// The field's values from its decoded bins and its exception runs (validated: inside `out`):
/// the CPU twin of `shaders/fields.wgsl`'s `reconstruct_field`.
pub fn reconstruct_field(bins: &[u16], runs: &[Run], offset: f32, bin_width: f32, out: &mut [f32]) {
    for (o, &q) in out.iter_mut().zip(bins) {
        *o = reconstruct(q, offset, bin_width);
    }
    for r in runs {
        out[r.start as usize..(r.start + r.len) as usize].fill(f32::from_bits(r.bits));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bin_widths_have_eight_significant_bits_and_stay_below_the_limit() {
        for limit in [2e-4, 0.3, 1.0, 7.77, 123456.0, 3e30] {
            let w = bin_width_for(limit).unwrap();
            assert!(
                w as f64 <= limit && w as f64 > limit * (1.0 - 1.0 / 128.0),
                "{limit}: {w}"
            );
            assert!(bin_width_significand_bits(w) <= BIN_WIDTH_BITS);
            // q x w is exact for every 16-bit q.
            for q in [1u16, 255, 4097, 65535] {
                assert_eq!(q as f64 * w as f64, (q as f32 * w) as f64);
            }
        }
        assert_eq!(bin_width_for(0.0), None);
        assert_eq!(bin_width_for(f64::NAN), None);
    }

    #[test]
    fn smooth_fields_with_nan_fill_and_extremes_decode_within_the_bound() {
        let (ny, nx) = (70usize, 90usize);
        let mut v: Vec<f32> = (0..ny * nx)
            .map(|i| ((i / nx) as f32 * 0.07).sin() * 40.0 + (i % nx) as f32 * 0.013)
            .collect();
        v[5] = f32::NAN;
        v[6] = f32::INFINITY;
        v[100..180].fill(-1e10);
        v[300] = 1e-42; // subnormal: its bin's value may be subnormal too; kept within bound
        for bound in [
            Bound::Absolute(0.5),
            Bound::Relative(1e-3),
            Bound::Relative(1e-5),
        ] {
            let mut o = FieldOptions::new(bound);
            o.fill_value = Some(-1e10);
            let file = encode_field(&v, &[ny as u32, nx as u32], &o).unwrap();
            let (h, out) = decode_field(&file, &DecodeOptions::default()).unwrap();
            assert!(h.runs >= 3, "NaN, inf and the fill are runs");
            for (i, (&a, &b)) in v.iter().zip(&out).enumerate() {
                if !a.is_finite() || a == -1e10 {
                    assert_eq!(a.to_bits(), b.to_bits(), "value {i} not kept exactly");
                } else {
                    assert!(
                        (a as f64 - b as f64).abs() <= h.bound,
                        "value {i}: {a} -> {b}"
                    );
                }
            }
        }
    }

    #[test]
    fn a_range_too_wide_for_16_bit_bins_is_refused_by_name() {
        let v = [0.0f32, 1e6, 2.0, 3.0];
        let e = encode_field(&v, &[2, 2], &FieldOptions::new(Bound::Absolute(1e-3))).unwrap_err();
        assert!(e.to_string().contains("65536 bins"), "{e}");
        let constant = [1.5f32; 6];
        assert!(encode_field(
            &constant,
            &[2, 3],
            &FieldOptions::new(Bound::Relative(1e-3))
        )
        .is_err());
        let file = encode_field(
            &constant,
            &[2, 3],
            &FieldOptions::new(Bound::Absolute(1e-3)),
        )
        .unwrap();
        assert_eq!(
            decode_field(&file, &DecodeOptions::default()).unwrap().1,
            constant
        );
    }

    /// A small file claiming a huge field fails on the limits before allocating.
    #[test]
    fn limits_apply_before_allocating() {
        let v = vec![1.0f32; 64 * 64];
        let file = encode_field(&v, &[64, 64], &FieldOptions::new(Bound::Absolute(0.1))).unwrap();
        let options = DecodeOptions {
            limits: crate::limits::Limits {
                max_output_bytes: 1000,
                ..Default::default()
            },
            ..Default::default()
        };
        let e = decode_field(&file, &options).unwrap_err();
        assert!(matches!(e, crate::error::Error::Limits(_)), "{e}");
    }

    #[test]
    fn corrupt_field_files_are_refused() {
        let v: Vec<f32> = (0..400).map(|i| i as f32 * 0.5).collect();
        let file = encode_field(&v, &[20, 20], &FieldOptions::new(Bound::Absolute(0.1))).unwrap();
        assert!(decode_field(&file, &DecodeOptions::default()).is_ok());
        for cut in [0, 7, 30, FIELD_HEADER_LEN, file.len() - 1] {
            assert!(decode_field(&file[..cut], &DecodeOptions::default()).is_err());
        }
        for pos in (0..file.len()).step_by(3) {
            let mut bad = file.clone();
            bad[pos] ^= 0x41;
            assert!(
                decode_field(&bad, &DecodeOptions::default()).is_err(),
                "flip at {pos}"
            );
        }
    }

    #[test]
    fn unusable_bounds_are_named_by_their_value() {
        let values = [1.0f32, 2.0, 3.0, 4.0];
        for (bound, shown) in [
            (Bound::Absolute(f64::NAN), "NaN"),
            (Bound::Absolute(f64::INFINITY), "inf"),
            (Bound::Absolute(-1.0), "-1e0"),
            (Bound::Absolute(0.0), "0e0"),
        ] {
            let e = encode_field(&values, &[2, 2], &FieldOptions::new(bound)).unwrap_err();
            let text = e.to_string();
            assert!(
                text.contains(&format!("`bound`: {shown} (")),
                "{bound:?}: {text}"
            );
        }
    }
}
