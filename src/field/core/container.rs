//! The container of the chunked float formats (SPEC.md, "Lossless float arrays" and
//! "Error-bounded float arrays"): magic, version byte and shape at the same places; after the
//! format's own header fields, a chunk table (u32 byte length per chunk), the exception runs,
//! the chunks and a CRC-32. Each chunk holds segments that decode independently.

use super::runs::{read_runs, Run};
use crate::decode::DecodeOptions;
use crate::error::{invalid_option, FormatError, LimitsError, ParameterError, Result};
use crate::field::FIELD_MAGIC;

/// Most segments per chunk.
pub const MAX_SEGMENTS: u8 = 32;
/// Smallest and largest log2 of the values per chunk.
pub const CHUNK_LOG2_MIN: u8 = 8;
/// Largest log2 of the values per chunk.
pub const CHUNK_LOG2_MAX: u8 = 20;
/// Bytes of the CRC-32 at the end.
pub const CRC_LEN: usize = 4;

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

/// An invalid header field at byte `offset`.
pub(in crate::field) fn invalid(
    field: &'static str,
    offset: usize,
    value: u64,
    reason: &'static str,
) -> FormatError {
    FormatError::InvalidHeader {
        field,
        offset: offset as u64,
        value,
        reason,
    }
}

/// The little-endian u32 at byte `o` (the caller has checked the length).
pub(in crate::field) fn u32_at(data: &[u8], o: usize) -> u32 {
    u32::from_le_bytes(data[o..o + 4].try_into().expect("4 bytes"))
}

/// A header of `what` cut short: `end` bytes needed, `len` present.
pub(in crate::field) fn truncated(what: &'static str, end: usize, len: usize) -> FormatError {
    FormatError::Truncated {
        what,
        offset: 0,
        end: end as u64,
        len: len as u64,
    }
}

/// Checks the start every chunked float array shares: the magic, at least 12 bytes, and the
/// version byte (byte 8) equal to `version`. `what` names the header in errors.
pub(in crate::field) fn check_start(data: &[u8], what: &'static str, version: u8) -> Result<()> {
    let n = data.len().min(8);
    if data[..n] != FIELD_MAGIC[..n] {
        return Err(FormatError::BadMagic {
            found: data[..n].to_vec(),
            expected: FIELD_MAGIC,
        }
        .into());
    }
    if data.len() < 12 {
        return Err(truncated(what, 12, data.len()).into());
    }
    if data[8] != version {
        return Err(FormatError::UnsupportedVersion {
            version: data[8],
            supported: version,
        }
        .into());
    }
    Ok(())
}

/// Reads the shape, `ndim` u32 axes from byte 12, once the data holds the header's `fixed`
/// bytes: every axis at least 1, at most 2^32 - 1 values in all.
pub(in crate::field) fn read_shape(
    data: &[u8],
    ndim: usize,
    fixed: usize,
    what: &'static str,
) -> Result<Vec<u32>> {
    if data.len() < fixed {
        return Err(truncated(what, fixed, data.len()).into());
    }
    let shape: Vec<u32> = (0..ndim).map(|a| u32_at(data, 12 + 4 * a)).collect();
    if let Some(a) = shape.iter().position(|&d| d == 0) {
        return Err(invalid("shape", 12 + 4 * a, 0, "every axis must be >= 1").into());
    }
    check_count(&shape)?;
    Ok(shape)
}

/// Checks a shape (from byte 12 of a header) holds at most 2^32 - 1 values; in u128, as
/// axes can overflow u64 (found by fuzzing).
pub(in crate::field) fn check_count(shape: &[u32]) -> std::result::Result<(), FormatError> {
    let total = shape.iter().map(|&d| d as u128).product::<u128>();
    if total > u32::MAX as u128 {
        return Err(invalid(
            "shape",
            12,
            total.min(u64::MAX as u128) as u64,
            "at most 2^32 - 1 values",
        ));
    }
    Ok(())
}

/// Checks the CRC-32 in the last [`CRC_LEN`] bytes of `data` (at least that long) against
/// everything before it.
pub(in crate::field) fn check_crc(data: &[u8]) -> Result<()> {
    let body = data.len() - CRC_LEN;
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
    Ok(())
}

/// Where a header's sections are, as the container needs it.
pub(in crate::field) struct Sections<'h> {
    /// Shape, C order.
    pub shape: &'h [u32],
    /// log2 of the values per chunk.
    pub chunk_log2: u8,
    /// Bytes of the header before its chunk table (which ends it).
    pub fixed: u64,
    /// Bytes of one decoded value.
    pub value_size: u64,
    /// Exception runs and the bytes of the runs section.
    pub runs: (u32, u32),
}

/// A format's header as the container needs it: where the sections are, and the sizes that
/// follow from them.
pub(in crate::field) trait ChunkedHeader: Sized {
    /// Names the whole file in a truncation error.
    const FILE: &'static str;
    /// Names a chunk in a truncation error.
    const CHUNK: &'static str;
    /// Parses and validates the header (not its chunk table).
    fn parse(data: &[u8]) -> Result<Self>;
    /// Where the header's sections are.
    fn sections(&self) -> Sections<'_>;
    /// The format's own checks of the exception runs (the section starts at byte `at`).
    fn check_runs(&self, _runs: &[Run], _at: usize) -> Result<()> {
        Ok(())
    }
    /// Values in the array.
    fn values(&self) -> u64 {
        self.sections().shape.iter().map(|&d| d as u64).product()
    }
    /// Chunks of the array.
    fn chunk_count(&self) -> u64 {
        self.values().div_ceil(1 << self.sections().chunk_log2)
    }
    /// Bytes of the header with its chunk table (which ends it).
    fn bytes_with_table(&self) -> u64 {
        self.sections().fixed + 4 * self.chunk_count()
    }
    /// Bytes of the decoded values.
    fn decoded_bytes(&self) -> u64 {
        self.values() * self.sections().value_size
    }
    /// Exception runs and the bytes of the runs section.
    fn runs_section(&self) -> (u32, u32) {
        self.sections().runs
    }
}

/// The public sizes of a [`ChunkedHeader`] type, under the names both formats publish.
macro_rules! header_sizes {
    ($header:ty) => {
        impl $header {
            /// Values in the array.
            pub fn len(&self) -> u64 {
                $crate::field::core::container::ChunkedHeader::values(self)
            }

            /// Whether the array has no values (never, for a valid header).
            pub fn is_empty(&self) -> bool {
                self.len() == 0
            }

            /// Chunks of the array.
            pub fn chunks(&self) -> u64 {
                $crate::field::core::container::ChunkedHeader::chunk_count(self)
            }

            /// Bytes of the header with its chunk table.
            pub fn header_len(&self) -> u64 {
                $crate::field::core::container::ChunkedHeader::bytes_with_table(self)
            }

            /// Bytes of the decoded values.
            pub fn output_bytes(&self) -> u64 {
                $crate::field::core::container::ChunkedHeader::decoded_bytes(self)
            }
        }
    };
}
pub(in crate::field) use header_sizes;

/// The error of a chunk head's `field` (the chunk starts at byte `base` of the file).
pub(in crate::field) fn chunk_error(
    base: usize,
) -> impl Fn(&'static str, u64, &'static str) -> FormatError {
    move |field, value, reason| FormatError::InvalidHeader {
        field,
        offset: base as u64,
        value,
        reason,
    }
}

/// Splits the segments of byte lengths `lens` off `chunk` from byte `*at` (moved past
/// them); `bad` makes the error of one past the chunk's end.
pub(in crate::field) fn take_segments<'a>(
    chunk: &'a [u8],
    at: &mut usize,
    lens: impl IntoIterator<Item = usize>,
    bad: &impl Fn(&'static str, u64, &'static str) -> FormatError,
) -> std::result::Result<Vec<&'a [u8]>, FormatError> {
    lens.into_iter()
        .map(|len| {
            let seg = chunk
                .get(*at..at.saturating_add(len))
                .ok_or_else(|| bad("segment lengths", len as u64, "past the chunk's end"))?;
            *at += len;
            Ok(seg)
        })
        .collect()
}

/// Checks the last segment ends the chunk (at byte `at`).
pub(in crate::field) fn check_chunk_end(
    chunk: &[u8],
    at: usize,
    bad: &impl Fn(&'static str, u64, &'static str) -> FormatError,
) -> std::result::Result<(), FormatError> {
    if at != chunk.len() {
        return Err(bad(
            "chunk",
            (chunk.len() - at) as u64,
            "bytes after the last segment",
        ));
    }
    Ok(())
}

/// A checked file: its header, exception runs and chunks.
#[derive(Debug)]
pub(in crate::field) struct Layout<'a, H> {
    /// The header.
    pub header: H,
    /// Exception runs: sorted, disjoint, inside the array.
    pub runs: Vec<Run>,
    /// Each chunk's bytes.
    pub chunks: Vec<&'a [u8]>,
}

/// One token stream of a chunk: its code lengths and its segments' bytes.
#[derive(Debug, Default)]
pub(in crate::field) struct Stream<'a> {
    /// Code length per token (`ntok` of them; the rest of the alphabet is unused).
    pub lengths: Vec<u8>,
    /// The segments' bytes.
    pub segments: Vec<&'a [u8]>,
}

/// Checks a whole file before anything is decoded: the header, the input and output limits,
/// the length, the CRC (when asked), the runs section and the chunk table (its lengths must
/// add up to the bytes present).
pub(in crate::field) fn parse_layout<'a, H: ChunkedHeader>(
    data: &'a [u8],
    options: &DecodeOptions,
) -> Result<Layout<'a, H>> {
    let limits = &options.limits;
    if data.len() as u64 > limits.max_input_bytes {
        return Err(LimitsError::InputBytes {
            len: data.len() as u64,
            max: limits.max_input_bytes,
        }
        .into());
    }
    let header = H::parse(data)?;
    if header.decoded_bytes() > limits.max_output_bytes {
        return Err(LimitsError::OutputBytes {
            needed: header.decoded_bytes(),
            max: limits.max_output_bytes,
        }
        .into());
    }
    let (run_count, runs_len) = header.runs_section();
    let table_at = (header.bytes_with_table() - 4 * header.chunk_count()) as usize;
    let least = header.bytes_with_table() + runs_len as u64 + CRC_LEN as u64;
    if (data.len() as u64) < least {
        return Err(FormatError::Truncated {
            what: H::FILE,
            offset: 0,
            end: least,
            len: data.len() as u64,
        }
        .into());
    }
    let body = data.len() - CRC_LEN;
    if options.verify_checksum {
        check_crc(data)?;
    }
    let runs_at = header.bytes_with_table() as usize;
    let runs_end = runs_at + runs_len as usize;
    let runs = if run_count == 0 && runs_len == 0 {
        Vec::new()
    } else {
        read_runs(
            &data[runs_at..runs_end],
            run_count,
            header.values(),
            runs_at,
        )?
    };
    header.check_runs(&runs, runs_at)?;
    let nchunks = header.chunk_count() as usize;
    let mut chunks = Vec::with_capacity(nchunks);
    let mut at = runs_end;
    for c in 0..nchunks {
        let len = u32_at(data, table_at + 4 * c) as usize;
        if len > body - at {
            return Err(FormatError::Truncated {
                what: H::CHUNK,
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

/// The encoders' checks of an array's `shape` (1 to `max_ndim` axes, each at least 1, at most
/// 2^32 - 1 values) and of the `len` values given for it.
pub(in crate::field) fn check_encode_shape(
    shape: &[u32],
    max_ndim: usize,
    len: usize,
) -> Result<()> {
    if shape.is_empty() || shape.len() > max_ndim {
        return Err(invalid_option("shape", shape.len() as u64, "1 to 4 axes"));
    }
    if shape.contains(&0) {
        return Err(invalid_option("shape", 0, "every axis must be >= 1"));
    }
    let n = shape.iter().map(|&d| d as u128).product::<u128>();
    if n > u32::MAX as u128 {
        return Err(invalid_option(
            "shape",
            n.min(u64::MAX as u128) as u64,
            "at most 2^32 - 1 values",
        ));
    }
    if n != len as u128 {
        return Err(ParameterError::BufferSize {
            got: len,
            needed: n as usize,
        }
        .into());
    }
    Ok(())
}

/// The encoders' checks of the chunk size (log2 of the values per chunk) and the segments
/// per chunk.
pub(in crate::field) fn check_chunking(chunk_log2: u8, segments: u8) -> Result<()> {
    if !(CHUNK_LOG2_MIN..=CHUNK_LOG2_MAX).contains(&chunk_log2) {
        return Err(invalid_option("chunk_log2", chunk_log2 as u64, "8 to 20"));
    }
    if !(1..=MAX_SEGMENTS).contains(&segments) {
        return Err(invalid_option("segments", segments as u64, "1 to 32"));
    }
    Ok(())
}
