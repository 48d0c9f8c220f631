//! The lossless float array format in code (SPEC.md, "Lossless float arrays"): constants, the
//! header ([`LosslessHeader`], [`parse_lossless`]), the file layout checked before decoding
//! ([`parse_layout`]: lengths, CRC, exception runs, chunk table), one chunk's layout
//! ([`parse_chunk`]), the code-length rules, the residual tokens, the order and zigzag maps,
//! and where values sit (strides, segment ranges).

use super::FloatType;
use crate::decode::DecodeOptions;
use crate::error::{FormatError, LimitsError, Result};
use crate::field::format::{read_runs, Run};
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
/// Bytes of the header before the chunk table, for `ndim` axes.
pub const fn lossless_fixed_len(ndim: usize) -> usize {
    32 + 4 * ndim
}
/// Most segments per chunk.
pub const MAX_SEGMENTS: u8 = 32;
/// Smallest and largest log2 of the values per chunk.
pub const CHUNK_LOG2_MIN: u8 = 8;
/// Largest log2 of the values per chunk.
pub const CHUNK_LOG2_MAX: u8 = 20;
/// Chunk flag: the chunk carries an adjustment stream (float-mult files only).
pub const CHUNK_FLAG_ADJUST: u8 = 1;
/// Longest code, in bits.
pub const MAX_CODE_LEN: u32 = 11;
/// Zigzag values below this are their own token.
pub const TOKEN_DIRECT: u32 = 16;
/// Run tokens: token `T + j - 1` (j = 1..=RUN_TOKENS) is a run of `2^j + raw(j bits)` zeros.
pub const RUN_TOKENS: u32 = 10;
/// Longest run one token codes.
pub const RUN_MAX: u32 = (2 << RUN_TOKENS) - 1;
/// Float-mult multipliers `k` satisfy `|k| < MULT_K_LIMIT`, so `f32(k)` is exact.
pub const MULT_K_LIMIT: i32 = 1 << 24;
/// Bytes of the CRC-32 at the end.
pub const CRC_LEN: usize = 4;

/// Single (non-run) tokens for values of `width` bits.
pub const fn single_tokens(width: u32) -> u32 {
    TOKEN_DIRECT + 2 * (width - 4)
}

/// Size of the token alphabet for `width`-bit values: singles then run tokens.
pub const fn alphabet(width: u32) -> u32 {
    single_tokens(width) + RUN_TOKENS
}

/// Token of a zigzag value: `(token, raw bit count, raw bits)`. Below 16 the value is its
/// own token; else `n = floor(log2 z)`, the token is `16 + 2 (n - 4) + bit n-1 of z` and the
/// `n - 1` low bits follow raw.
#[inline(always)]
pub fn token_of(z: u32) -> (u32, u32, u32) {
    if z < TOKEN_DIRECT {
        return (z, 0, 0);
    }
    let n = 31 - z.leading_zeros();
    let nraw = n - 1;
    let m = (z >> nraw) & 1;
    (TOKEN_DIRECT + 2 * (n - 4) + m, nraw, z & ((1 << nraw) - 1))
}

/// Token of a run of `n` zeros (2 ..= RUN_MAX) for `width`-bit values:
/// `(token, raw bit count, raw bits)`.
#[inline(always)]
pub fn run_token(width: u32, n: u32) -> (u32, u32, u32) {
    let j = 31 - n.leading_zeros();
    (single_tokens(width) + j - 1, j, n & ((1 << j) - 1))
}

/// What a token decodes to: `(base, raw bit count, is a run)`; the value (or run length) is
/// `base + raw`.
#[inline(always)]
pub fn token_base(width: u32, token: u32) -> (u32, u32, bool) {
    let t = single_tokens(width);
    if token < TOKEN_DIRECT {
        (token, 0, false)
    } else if token < t {
        let n = 4 + (token - TOKEN_DIRECT) / 2;
        let m = (token - TOKEN_DIRECT) & 1;
        ((1 << n) | (m << (n - 1)), n - 1, false)
    } else {
        let j = token - t + 1;
        (1 << j, j, true)
    }
}

/// The zigzag map in `width` bits: 0, -1, 1, -2 ... -> 0, 1, 2, 3 ...
#[inline(always)]
pub fn zigzag(e: u32, width: u32) -> u32 {
    let s = (e << (32 - width)) as i32 >> (32 - width);
    ((s << 1) ^ (s >> 31)) as u32 & mask(width)
}

/// Inverse of [`zigzag`], mod 2^32 (callers keep the low `width` bits).
#[inline(always)]
#[cfg(test)]
pub fn unzigzag(z: u32) -> u32 {
    (z >> 1) ^ 0u32.wrapping_sub(z & 1)
}

/// The low `width` bits.
#[inline(always)]
pub const fn mask(width: u32) -> u32 {
    if width >= 32 {
        u32::MAX
    } else {
        (1 << width) - 1
    }
}

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
#[cfg(test)]
pub fn from_ordered(o: u32, width: u32) -> u32 {
    let sign = 1u32 << (width - 1);
    if o & sign != 0 {
        o & !sign
    } else {
        !o & mask(width)
    }
}

/// Why a code-length table is invalid: a length above 11, no used token, a lone used token
/// of length other than 1, or (two or more used) a Kraft sum other than exactly 1.
pub(in crate::field) fn check_lengths(lengths: &[u8]) -> Result<(), &'static str> {
    if lengths.iter().any(|&l| l as u32 > MAX_CODE_LEN) {
        return Err("a code length exceeds 11");
    }
    let used = lengths.iter().filter(|&&l| l > 0).count();
    match used {
        0 => return Err("no token has a code"),
        1 if lengths.iter().any(|&l| l > 1) => {
            return Err("a single used token must have length 1")
        }
        1 => return Ok(()),
        _ => {}
    }
    let kraft: u32 = lengths
        .iter()
        .filter(|&&l| l > 0)
        .map(|&l| 1u32 << (MAX_CODE_LEN - l as u32))
        .sum();
    match kraft.cmp(&(1 << MAX_CODE_LEN)) {
        std::cmp::Ordering::Less => Err("the code is incomplete"),
        std::cmp::Ordering::Greater => Err("the code is over-subscribed"),
        std::cmp::Ordering::Equal => Ok(()),
    }
}

/// C-order strides of `shape`.
pub(in crate::field) fn strides(shape: &[u32]) -> Vec<usize> {
    let mut s = vec![1usize; shape.len()];
    for a in (0..shape.len().saturating_sub(1)).rev() {
        s[a] = s[a + 1] * shape[a + 1] as usize;
    }
    s
}

/// The value range of segment `s` of `segments` in a chunk of `m` values.
pub(in crate::field) fn segment_range(
    m: usize,
    segments: usize,
    s: usize,
) -> std::ops::Range<usize> {
    let q = m.div_ceil(segments);
    (s * q).min(m)..((s + 1) * q).min(m)
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
    /// Axes the values are differenced along (bit `a` = axis `a`, 0 the slowest).
    pub axes: u8,
    /// Segments per chunk.
    pub segments: u8,
    /// log2 of the values per chunk.
    pub chunk_log2: u8,
    /// Exception runs.
    pub runs: u32,
    /// Bytes of the runs section.
    pub runs_len: u32,
}

impl LosslessHeader {
    /// Values in the array.
    pub fn len(&self) -> u64 {
        self.shape.iter().map(|&d| d as u64).product()
    }

    /// Whether the array has no values (never, for a valid header).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Chunks of the array.
    pub fn chunks(&self) -> u64 {
        self.len().div_ceil(1 << self.chunk_log2)
    }

    /// Bytes of the header with its chunk table.
    pub fn header_len(&self) -> u64 {
        lossless_fixed_len(self.shape.len()) as u64 + 4 * self.chunks()
    }

    /// Bytes of the decoded values.
    pub fn output_bytes(&self) -> u64 {
        self.len() * self.dtype.size() as u64
    }

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
            },
        );
        for d in &self.shape {
            b.extend_from_slice(&d.to_le_bytes());
        }
        b.extend_from_slice(&self.fill_value.unwrap_or(0).to_le_bytes());
        b.extend_from_slice(&self.mult_base.map_or(0, f32::to_bits).to_le_bytes());
        b.extend_from_slice(&[self.axes, self.segments, self.chunk_log2, 0]);
        b.extend_from_slice(&self.runs.to_le_bytes());
        b.extend_from_slice(&self.runs_len.to_le_bytes());
        b
    }
}

fn invalid(field: &'static str, offset: usize, value: u64, reason: &'static str) -> FormatError {
    FormatError::InvalidHeader {
        field,
        offset: offset as u64,
        value,
        reason,
    }
}

fn u32_at(data: &[u8], o: usize) -> u32 {
    u32::from_le_bytes(data[o..o + 4].try_into().expect("4 bytes"))
}

/// Parses and validates the header of a lossless float array (not its chunk table): cheap,
/// nothing allocated beyond the shape.
pub fn parse_lossless(data: &[u8]) -> Result<LosslessHeader> {
    let n = data.len().min(8);
    if data[..n] != FIELD_MAGIC[..n] {
        return Err(FormatError::BadMagic {
            found: data[..n].to_vec(),
            expected: FIELD_MAGIC,
        }
        .into());
    }
    let truncated = |end: usize| FormatError::Truncated {
        what: "lossless array header",
        offset: 0,
        end: end as u64,
        len: data.len() as u64,
    };
    if data.len() < 12 {
        return Err(truncated(12).into());
    }
    if data[8] != LOSSLESS_VERSION {
        return Err(FormatError::UnsupportedVersion {
            version: data[8],
            supported: LOSSLESS_VERSION,
        }
        .into());
    }
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
    if flags & !(LOSSLESS_FLAG_FILL | LOSSLESS_FLAG_MULT) != 0 {
        return Err(invalid("flags", 11, flags as u64, "only bits 0 and 1 are defined").into());
    }
    let fixed = lossless_fixed_len(ndim);
    if data.len() < fixed {
        return Err(truncated(fixed).into());
    }
    let shape: Vec<u32> = (0..ndim).map(|a| u32_at(data, 12 + 4 * a)).collect();
    if let Some(a) = shape.iter().position(|&d| d == 0) {
        return Err(invalid("shape", 12 + 4 * a, 0, "every axis must be >= 1").into());
    }
    let total = shape.iter().map(|&d| d as u128).product::<u128>();
    if total > u32::MAX as u128 {
        return Err(invalid(
            "shape",
            12,
            total.min(u64::MAX as u128) as u64,
            "at most 2^32 - 1 values",
        )
        .into());
    }
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
    if mult && !(dtype == FloatType::F32 && base.is_normal() && base > 0.0)
        || !mult && base_bits != 0
    {
        return Err(invalid(
            "mult_base",
            p + 4,
            base_bits as u64,
            "float-mult needs float32 and a positive normal base; 0 without the flag",
        )
        .into());
    }
    let (axes, segments, chunk_log2, reserved) =
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
    if reserved != 0 {
        return Err(invalid("reserved", p + 11, reserved as u64, "must be zero").into());
    }
    Ok(LosslessHeader {
        dtype,
        shape,
        fill_value: (flags & LOSSLESS_FLAG_FILL != 0).then_some(fill),
        mult_base: mult.then_some(base),
        axes,
        segments,
        chunk_log2,
        runs: u32_at(data, p + 12),
        runs_len: u32_at(data, p + 16),
    })
}

/// A checked file: its header, exception runs and chunks.
#[derive(Debug)]
pub(super) struct Layout<'a> {
    /// The header.
    pub header: LosslessHeader,
    /// Exception runs: sorted, disjoint, inside the array, values fitting the dtype.
    pub runs: Vec<Run>,
    /// Each chunk's bytes.
    pub chunks: Vec<&'a [u8]>,
}

/// Checks a whole file before anything is decoded: the header, the input and output limits,
/// the length, the CRC (when asked), the runs section and the chunk table (its lengths must
/// add up to the bytes present).
pub(super) fn parse_layout<'a>(data: &'a [u8], options: &DecodeOptions) -> Result<Layout<'a>> {
    let limits = &options.limits;
    if data.len() as u64 > limits.max_input_bytes {
        return Err(LimitsError::InputBytes {
            len: data.len() as u64,
            max: limits.max_input_bytes,
        }
        .into());
    }
    let header = parse_lossless(data)?;
    if header.output_bytes() > limits.max_output_bytes {
        return Err(LimitsError::OutputBytes {
            needed: header.output_bytes(),
            max: limits.max_output_bytes,
        }
        .into());
    }
    let table_at = lossless_fixed_len(header.shape.len());
    let least = header.header_len() + header.runs_len as u64 + CRC_LEN as u64;
    if (data.len() as u64) < least {
        return Err(FormatError::Truncated {
            what: "lossless array (header, chunk table, runs and CRC)",
            offset: 0,
            end: least,
            len: data.len() as u64,
        }
        .into());
    }
    let body = data.len() - CRC_LEN;
    if options.verify_checksum {
        let stored = u32_at(data, body);
        let computed = crc32fast::hash(&data[..body]);
        if stored != computed {
            return Err(FormatError::ChecksumMismatch {
                stored,
                computed,
                offset: body as u64,
            }
            .into());
        }
    }
    let runs_at = header.header_len() as usize;
    let runs_end = runs_at + header.runs_len as usize;
    let runs = if header.runs == 0 && header.runs_len == 0 {
        Vec::new()
    } else {
        read_runs(&data[runs_at..runs_end], header.runs, header.len(), runs_at)?
    };
    let width = header.dtype.bits();
    if let Some(r) = runs.iter().find(|r| r.bits & !mask(width) != 0) {
        return Err(invalid(
            "exception runs",
            runs_at,
            r.bits as u64,
            "a value wider than the dtype",
        )
        .into());
    }
    let nchunks = header.chunks() as usize;
    let mut chunks = Vec::with_capacity(nchunks);
    let mut at = runs_end;
    for c in 0..nchunks {
        let len = u32_at(data, table_at + 4 * c) as usize;
        if len > body - at {
            return Err(FormatError::Truncated {
                what: "lossless chunk",
                offset: at as u64,
                end: (at + len) as u64,
                len: body as u64,
            }
            .into());
        }
        chunks.push(&data[at..at + len]);
        at += len;
    }
    if at != body {
        return Err(FormatError::SizeTableMismatch {
            table_total: (at - runs_end) as u64,
            present: (body - runs_end) as u64,
        }
        .into());
    }
    Ok(Layout {
        header,
        runs,
        chunks,
    })
}

/// One token stream of a chunk: its code lengths and its segments' bytes.
#[derive(Debug, Default)]
pub(super) struct Stream<'a> {
    /// Code length per token (`ntok` of them; the rest of the alphabet is unused).
    pub lengths: Vec<u8>,
    /// The segments' bytes.
    pub segments: Vec<&'a [u8]>,
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
    let bad = |field, value: u64, reason| FormatError::InvalidHeader {
        field,
        offset: base as u64,
        value,
        reason,
    };
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
    let mut take = |k: usize| -> std::result::Result<Vec<&'a [u8]>, FormatError> {
        (0..s)
            .map(|i| {
                let len = u32_at(table, 4 * (k * s + i)) as usize;
                let seg = chunk
                    .get(at..at.saturating_add(len))
                    .ok_or_else(|| bad("segment lengths", len as u64, "past the chunk's end"))?;
                at += len;
                Ok(seg)
            })
            .collect()
    };
    let residuals = Stream {
        lengths: res_lengths,
        segments: take(0)?,
    };
    let adjust = match adj_lengths {
        Some(lengths) => Some(Stream {
            lengths,
            segments: take(1)?,
        }),
        None => None,
    };
    if at != chunk.len() {
        return Err(bad(
            "chunk",
            (chunk.len() - at) as u64,
            "bytes after the last segment",
        ));
    }
    Ok(ChunkLayout { residuals, adjust })
}
