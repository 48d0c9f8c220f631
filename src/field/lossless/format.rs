//! The lossless float array format in code (SPEC.md, "Lossless float arrays"): constants, the
//! header ([`LosslessHeader`], [`parse_lossless`]), the file layout checked before decoding
//! ([`parse_layout`]: lengths, CRC, exception runs, chunk table), one chunk's layout
//! ([`parse_chunk`]), the code-length rules, the residual tokens, the order and zigzag maps,
//! and where values sit (strides, segment ranges).

use super::FloatType;
use crate::decode::DecodeOptions;
use crate::error::{FormatError, Result};
use crate::field::core::container::{
    self, check_chunk_end, check_start, chunk_error, header_sizes, invalid, read_shape,
    take_segments, truncated, u32_at, ChunkedHeader, Sections, Stream, CHUNK_LOG2_MAX,
    CHUNK_LOG2_MIN, MAX_SEGMENTS,
};
use crate::field::core::runs::{get_varint, put_varint, Run};
use crate::field::core::tokens::{alphabet, check_lengths, mask};
use crate::field::FIELD_MAGIC;

/// Version byte of a lossless float array (version 1 is the error-bounded field).
pub const LOSSLESS_VERSION: u8 = 2;
/// Most axes of a lossless array.
pub const LOSSLESS_MAX_NDIM: usize = 4;
/// Header flag: a fill value is declared.
pub const LOSSLESS_FLAG_FILL: u8 = 1;
/// Header flag: float-mult input (float32 only): values are `f32(k) x base` moved by an
/// adjustment in ordered-bit steps.
pub const LOSSLESS_FLAG_MULT: u8 = 2;
/// Header flag: value-table input: each value's integer is an index into a table of the
/// array's distinct bit patterns (sorted by the order map), stored after the header's fields.
pub const LOSSLESS_FLAG_TABLE: u8 = 4;
/// Bytes of the header's fields before the value table and the chunk table, for `ndim` axes.
pub const fn lossless_fixed_len(ndim: usize) -> usize {
    32 + 4 * ndim
}
/// Chunk flag: the chunk carries an adjustment stream (float-mult files only).
pub const CHUNK_FLAG_ADJUST: u8 = 1;
/// Float-mult multipliers `k` satisfy `|k| < MULT_K_LIMIT`, so `f32(k)` is exact.
pub const MULT_K_LIMIT: i32 = 1 << 24;

/// The order-preserving map of float bits of `width` bits: sign set, invert all; else set
/// the sign. A bijection, so NaN payloads and -0.0 survive.
#[inline(always)]
pub fn to_ordered(bits: u32, width: u32) -> u32 {
    let sign = 1u32 << (width - 1);
    if bits & sign != 0 {
        !bits & mask(width)
    } else {
        bits | sign
    }
}

/// Inverse of [`to_ordered`] (the decoder's passes use a branch-free form of it).
pub fn from_ordered(o: u32, width: u32) -> u32 {
    let sign = 1u32 << (width - 1);
    if o & sign != 0 {
        o & !sign
    } else {
        !o & mask(width)
    }
}

/// The header of a lossless float array.
#[derive(Debug, Clone, PartialEq)]
pub struct LosslessHeader {
    /// Element type.
    pub dtype: FloatType,
    /// Shape, C order (last axis fastest), 1 to 4 axes.
    pub shape: Vec<u32>,
    /// Bit pattern of the declared fill value (in the dtype's width), if any.
    pub fill_value: Option<u32>,
    /// The float-mult base, if the file uses float-mult input.
    pub mult_base: Option<f32>,
    /// The value table (bit patterns in the dtype's width, strictly increasing by the order
    /// map), if the file uses value-table input; empty otherwise.
    pub table: Vec<u32>,
    /// Axes the values are differenced along (bit `a` = axis `a`, 0 the slowest).
    pub axes: u8,
    /// Axes of `axes` the values are differenced along a second time (second differences,
    /// for smooth signals); 0 in files written before it existed.
    pub axes2: u8,
    /// Segments per chunk.
    pub segments: u8,
    /// log2 of the values per chunk.
    pub chunk_log2: u8,
    /// Exception runs.
    pub runs: u32,
    /// Bytes of the runs section.
    pub runs_len: u32,
}

header_sizes!(LosslessHeader);

impl LosslessHeader {
    /// The header's bytes up to the chunk table.
    pub(super) fn to_bytes(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(lossless_fixed_len(self.shape.len()));
        b.extend_from_slice(&FIELD_MAGIC);
        b.push(LOSSLESS_VERSION);
        b.push(self.dtype as u8);
        b.push(self.shape.len() as u8);
        b.push(
            if self.fill_value.is_some() {
                LOSSLESS_FLAG_FILL
            } else {
                0
            } | if self.mult_base.is_some() {
                LOSSLESS_FLAG_MULT
            } else {
                0
            } | if self.table.is_empty() {
                0
            } else {
                LOSSLESS_FLAG_TABLE
            },
        );
        for d in &self.shape {
            b.extend_from_slice(&d.to_le_bytes());
        }
        b.extend_from_slice(&self.fill_value.unwrap_or(0).to_le_bytes());
        let base_or_k = match self.mult_base {
            Some(base) => base.to_bits(),
            None => self.table.len() as u32,
        };
        b.extend_from_slice(&base_or_k.to_le_bytes());
        b.extend_from_slice(&[self.axes, self.segments, self.chunk_log2, self.axes2]);
        b.extend_from_slice(&self.runs.to_le_bytes());
        b.extend_from_slice(&self.runs_len.to_le_bytes());
        let width = self.dtype.bits();
        let mut prev = 0u32;
        for (i, &t) in self.table.iter().enumerate() {
            let o = to_ordered(t, width);
            put_varint(&mut b, if i == 0 { o } else { o - prev });
            prev = o;
        }
        b
    }
}

/// Parses and validates the header of a lossless float array (not its chunk table): cheap,
/// nothing allocated beyond the shape and the value table (which the data must hold).
pub fn parse_lossless(data: &[u8]) -> Result<LosslessHeader> {
    const WHAT: &str = "lossless array header";
    check_start(data, WHAT, LOSSLESS_VERSION)?;
    let dtype = FloatType::from_id(data[9]).ok_or_else(|| {
        invalid(
            "dtype",
            9,
            data[9] as u64,
            "0 float32, 1 float16, 2 bfloat16",
        )
    })?;
    let ndim = data[10] as usize;
    if !(1..=LOSSLESS_MAX_NDIM).contains(&ndim) {
        return Err(invalid("ndim", 10, ndim as u64, "must be 1 to 4").into());
    }
    let flags = data[11];
    if flags & !(LOSSLESS_FLAG_FILL | LOSSLESS_FLAG_MULT | LOSSLESS_FLAG_TABLE) != 0
        || flags & LOSSLESS_FLAG_MULT != 0 && flags & LOSSLESS_FLAG_TABLE != 0
    {
        return Err(invalid(
            "flags",
            11,
            flags as u64,
            "only bits 0 to 2 are defined, and bits 1 and 2 exclude each other",
        )
        .into());
    }
    let shape = read_shape(data, ndim, lossless_fixed_len(ndim), WHAT)?;
    let p = 12 + 4 * ndim;
    let width = dtype.bits();
    let fill = u32_at(data, p);
    if (flags & LOSSLESS_FLAG_FILL == 0 && fill != 0) || fill & !mask(width) != 0 {
        return Err(invalid(
            "fill",
            p,
            fill as u64,
            "must fit the dtype's width, and be 0 without the fill flag",
        )
        .into());
    }
    let base_bits = u32_at(data, p + 4);
    let base = f32::from_bits(base_bits);
    let mult = flags & LOSSLESS_FLAG_MULT != 0;
    let table = flags & LOSSLESS_FLAG_TABLE != 0;
    let table = if table {
        read_table(data, p, base_bits, &shape, width)?
    } else {
        Vec::new()
    };
    if mult && !(dtype == FloatType::F32 && base.is_normal() && base > 0.0)
        || !mult && table.is_empty() && base_bits != 0
    {
        return Err(invalid(
            "mult_base",
            p + 4,
            base_bits as u64,
            "float-mult needs float32 and a positive normal base; 0 without the flag",
        )
        .into());
    }
    let (axes, segments, chunk_log2, axes2) =
        (data[p + 8], data[p + 9], data[p + 10], data[p + 11]);
    if axes >> ndim != 0 {
        return Err(invalid("axes", p + 8, axes as u64, "a bit set past the last axis").into());
    }
    if !(1..=MAX_SEGMENTS).contains(&segments) {
        return Err(invalid("segments", p + 9, segments as u64, "must be 1 to 32").into());
    }
    if !(CHUNK_LOG2_MIN..=CHUNK_LOG2_MAX).contains(&chunk_log2) {
        return Err(invalid("chunk_log2", p + 10, chunk_log2 as u64, "must be 8 to 20").into());
    }
    if axes2 & !axes != 0 {
        return Err(invalid(
            "axes2",
            p + 11,
            axes2 as u64,
            "a bit set for an axis not differenced once (not in axes)",
        )
        .into());
    }
    Ok(LosslessHeader {
        dtype,
        shape,
        fill_value: (flags & LOSSLESS_FLAG_FILL != 0).then_some(fill),
        mult_base: mult.then_some(base),
        table,
        axes,
        axes2,
        segments,
        chunk_log2,
        runs: u32_at(data, p + 12),
        runs_len: u32_at(data, p + 16),
    })
}

/// The value table of `k` entries (the header field at `p + 4`, `p` = 12 + 4 ndim), which
/// follows the header's fields at `p + 20`: 1 to as many entries as the array has values,
/// stored as LEB128 varints (at most 5 bytes, below 2^32) of their order-mapped values: the
/// first, then each one's increase over the one before (at least 1), all below 2^`width`.
fn read_table(data: &[u8], p: usize, k: u32, shape: &[u32], width: u32) -> Result<Vec<u32>> {
    let values: u64 = shape.iter().map(|&d| d as u64).product();
    let start = p + 20;
    if k == 0 || k as u64 > values {
        return Err(invalid(
            "table",
            p + 4,
            k as u64,
            "a value table holds 1 to as many entries as the array has values",
        )
        .into());
    }
    // Each entry takes at least one byte: checked before allocating.
    if data.len() < start + k as usize {
        return Err(truncated("lossless value table", start + k as usize, data.len()).into());
    }
    let mut table = Vec::with_capacity(k as usize);
    let mut at = start;
    let mut prev = 0u64;
    for i in 0..k {
        let here = at;
        let Some(v) = get_varint(data, &mut at) else {
            return Err(invalid(
                "table",
                here,
                0,
                "an entry's varint is truncated, overlong or past 2^32",
            )
            .into());
        };
        if at - here != varint_len(v) {
            return Err(
                invalid("table", here, v as u64, "an entry's varint is not minimal").into(),
            );
        }
        let o = if i == 0 { v as u64 } else { prev + v as u64 };
        if (i > 0 && v == 0) || o > mask(width) as u64 {
            return Err(invalid(
                "table",
                here,
                v as u64,
                "the values must increase strictly by the order map and fit the dtype",
            )
            .into());
        }
        table.push(from_ordered(o as u32, width));
        prev = o;
    }
    Ok(table)
}

/// Bytes of the value table's varints.
pub(super) fn table_bytes(table: &[u32], width: u32) -> usize {
    let mut prev = 0u32;
    table
        .iter()
        .enumerate()
        .map(|(i, &t)| {
            let o = to_ordered(t, width);
            let v = if i == 0 { o } else { o.wrapping_sub(prev) };
            prev = o;
            varint_len(v)
        })
        .sum()
}

fn varint_len(v: u32) -> usize {
    (32 - v.leading_zeros() as usize).max(1).div_ceil(7)
}

impl ChunkedHeader for LosslessHeader {
    const FILE: &'static str = "lossless array (header, chunk table, runs and CRC)";
    const CHUNK: &'static str = "lossless chunk";

    fn parse(data: &[u8]) -> Result<Self> {
        parse_lossless(data)
    }

    fn sections(&self) -> Sections<'_> {
        Sections {
            shape: &self.shape,
            chunk_log2: self.chunk_log2,
            fixed: (lossless_fixed_len(self.shape.len())
                + table_bytes(&self.table, self.dtype.bits())) as u64,
            value_size: self.dtype.size() as u64,
            runs: (self.runs, self.runs_len),
        }
    }

    /// Every run's value fits the dtype's width.
    fn check_runs(&self, runs: &[Run], at: usize) -> Result<()> {
        let width = self.dtype.bits();
        match runs.iter().find(|r| r.bits & !mask(width) != 0) {
            Some(r) => Err(invalid(
                "exception runs",
                at,
                r.bits as u64,
                "a value wider than the dtype",
            )
            .into()),
            None => Ok(()),
        }
    }
}

/// A checked lossless file.
pub(super) type Layout<'a> = container::Layout<'a, LosslessHeader>;

/// Checks a whole lossless file before anything is decoded (see [`container::parse_layout`]).
pub(super) fn parse_layout<'a>(data: &'a [u8], options: &DecodeOptions) -> Result<Layout<'a>> {
    container::parse_layout(data, options)
}

/// A chunk's layout: the residual stream and, if present, the adjustment stream.
#[derive(Debug)]
pub(super) struct ChunkLayout<'a> {
    /// Residual tokens.
    pub residuals: Stream<'a>,
    /// Adjustment tokens (float-mult only).
    pub adjust: Option<Stream<'a>>,
}

/// Reads a chunk's head (the chunk starts at byte `base` of the file) and splits its segments: flags, code lengths of each stream, the
/// segment lengths (u32 each), then the segment bytes, which must end with the chunk.
pub(super) fn parse_chunk<'a>(
    chunk: &'a [u8],
    base: usize,
    header: &LosslessHeader,
) -> std::result::Result<ChunkLayout<'a>, FormatError> {
    let bad = chunk_error(base);
    let width = header.dtype.bits();
    let flags = *chunk
        .first()
        .ok_or_else(|| bad("chunk", 0, "empty chunk"))?;
    if flags & !CHUNK_FLAG_ADJUST != 0
        || (flags & CHUNK_FLAG_ADJUST != 0 && header.mult_base.is_none())
    {
        return Err(bad(
            "chunk flags",
            flags as u64,
            "only bit 0, and only with float-mult",
        ));
    }
    let mut at = 1usize;
    let read_lengths = |at: &mut usize| -> std::result::Result<Vec<u8>, FormatError> {
        let ntok = *chunk
            .get(*at)
            .ok_or_else(|| bad("ntok", 0, "chunk truncated"))? as u32;
        if ntok == 0 || ntok > alphabet(width) {
            return Err(bad("ntok", ntok as u64, "must be 1 to the alphabet size"));
        }
        let nbytes = ntok.div_ceil(2) as usize;
        let bytes = chunk
            .get(*at + 1..*at + 1 + nbytes)
            .ok_or_else(|| bad("code lengths", ntok as u64, "chunk truncated"))?;
        *at += 1 + nbytes;
        let lengths: Vec<u8> = (0..ntok as usize)
            .map(|t| (bytes[t / 2] >> (4 * (t % 2))) & 15)
            .collect();
        if ntok % 2 == 1 && bytes[nbytes - 1] >> 4 != 0 {
            return Err(bad("code lengths", 0, "padding nibble must be zero"));
        }
        check_lengths(&lengths).map_err(|r| bad("code lengths", ntok as u64, r))?;
        Ok(lengths)
    };
    let res_lengths = read_lengths(&mut at)?;
    let adj_lengths = if flags & CHUNK_FLAG_ADJUST != 0 {
        Some(read_lengths(&mut at)?)
    } else {
        None
    };
    let s = header.segments as usize;
    let streams = 1 + adj_lengths.is_some() as usize;
    let table = chunk
        .get(at..at + 4 * s * streams)
        .ok_or_else(|| bad("segment lengths", 0, "chunk truncated"))?;
    at += table.len();
    let lens = |k: usize| (0..s).map(move |i| u32_at(table, 4 * (k * s + i)) as usize);
    let residuals = Stream {
        lengths: res_lengths,
        segments: take_segments(chunk, &mut at, lens(0), &bad)?,
    };
    let adjust = match adj_lengths {
        Some(lengths) => Some(Stream {
            lengths,
            segments: take_segments(chunk, &mut at, lens(1), &bad)?,
        }),
        None => None,
    };
    check_chunk_end(chunk, at, &bad)?;
    Ok(ChunkLayout { residuals, adjust })
}
