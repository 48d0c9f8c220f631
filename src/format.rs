//! The L3 file format, versions 1 (*fast*) and 2 (*compact*), in code: every constant of
//! `SPEC.md` is named once here, and the header, size table and stream geometry are parsed and
//! validated here, so the CPU and GPU decoders share one set of checks.
//!
//! ```text
//! file   = header (24 bytes) | size table (4 bytes x streams) | streams | crc32 (4)
//!
//! version 1 (fast): one stream per (patch, channel)
//! stream = predictor id (1 byte) | rows, bit-packed LSB first | zero padding to a byte
//! row    = nbit (NBIT_FIELD_BITS) | base (depth bits) | width x nbit-bit deltas
//!
//! version 2 (compact): one stream per patch, all channels; see [`compact`]
//! stream = transform | channel header x channels | segments | zero padding to a byte
//! ```

use crate::error::{FormatError, LimitsError, Result, StreamPos};
use crate::Limits;

/// File signature: like PNG's, it catches 7-bit transfers and CRLF/LF conversions.
pub const MAGIC: [u8; 8] = [0x89, b'L', b'3', b'I', 0x0D, 0x0A, 0x1A, 0x0A];
/// Format version of the *fast* profile: fixed-width rows, as in the L3 paper.
pub const VERSION_FAST: u8 = 1;
/// Format version of the *compact* profile: Huffman-coded residual segments.
pub const VERSION_COMPACT: u8 = 2;
/// The newest format version this crate reads and writes (it reads every version from 1).
pub const VERSION_LATEST: u8 = VERSION_COMPACT;
/// Header length in bytes.
pub const HEADER_LEN: usize = 24;

/// Byte offset of the version field.
pub const OFFSET_VERSION: usize = 8;
/// Byte offset of the flags field (no flags are defined in versions 1 and 2: it must be zero).
pub const OFFSET_FLAGS: usize = 9;
/// Byte offset of the channel count.
pub const OFFSET_CHANNELS: usize = 10;
/// Byte offset of the bit depth.
pub const OFFSET_DEPTH: usize = 11;
/// Byte offset of the width (u32 little-endian).
pub const OFFSET_WIDTH: usize = 12;
/// Byte offset of the height (u32 little-endian).
pub const OFFSET_HEIGHT: usize = 16;
/// Byte offset of log2(patch size).
pub const OFFSET_PATCH_LOG2: usize = 20;
/// Byte offset of the three reserved bytes (must be zero).
pub const OFFSET_RESERVED: usize = 21;

/// Bytes per size-table entry (u32 little-endian).
pub const SIZE_ENTRY_LEN: usize = 4;
/// Bytes of the trailing CRC-32.
pub const CHECKSUM_LEN: usize = 4;
/// Bytes of the per-stream predictor id that precedes the bit-packed rows.
pub const STREAM_PREFIX_LEN: usize = 1;

/// Smallest log2 patch size (8x8 patches).
pub const PATCH_LOG2_MIN: u8 = 3;
/// Largest log2 patch size (128x128 patches; one GPU invocation per column stays <= 128).
pub const PATCH_LOG2_MAX: u8 = 7;
/// Default log2 patch size (64x64, as in the L3 paper).
pub const PATCH_LOG2_DEFAULT: u8 = 6;

/// Largest width or height the format allows (2^24 - 1).
pub const MAX_DIMENSION: u32 = (1 << 24) - 1;

/// Width of the per-row bit-width field for a sample depth: enough to hold 0..=depth.
pub const fn nbit_field_bits(depth: u8) -> u32 {
    match depth {
        8 => 4,
        _ => 5,
    }
}

/// Channel layout: the channel count says what the channels mean.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ColorType {
    /// 1 channel: luminance.
    Gray,
    /// 2 channels: luminance, alpha.
    GrayAlpha,
    /// 3 channels: red, green, blue.
    Rgb,
    /// 4 channels: red, green, blue, alpha.
    Rgba,
}

impl ColorType {
    /// Number of channels.
    pub const fn channels(self) -> u8 {
        match self {
            ColorType::Gray => 1,
            ColorType::GrayAlpha => 2,
            ColorType::Rgb => 3,
            ColorType::Rgba => 4,
        }
    }

    /// The colour type of a channel count, if valid (1..=4).
    pub const fn from_channels(channels: u8) -> Option<Self> {
        match channels {
            1 => Some(ColorType::Gray),
            2 => Some(ColorType::GrayAlpha),
            3 => Some(ColorType::Rgb),
            4 => Some(ColorType::Rgba),
            _ => None,
        }
    }

    /// Short name as used by `l3 info`.
    pub const fn name(self) -> &'static str {
        match self {
            ColorType::Gray => "gray",
            ColorType::GrayAlpha => "gray+alpha",
            ColorType::Rgb => "RGB",
            ColorType::Rgba => "RGBA",
        }
    }
}

/// How a row is predicted from the row above (upper-left `a`, upper `b`, upper-right `c`).
/// At the patch's left and right edges the missing neighbour is replaced by `b`. The first
/// row of every patch is stored unpredicted whatever the predictor, so patches are independent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Predictor {
    /// No prediction: every row stores the samples themselves.
    None = 0,
    /// `b`, the sample above.
    Up = 1,
    /// The L3 paper's "Paeth" variant: `p = a + c - b`, then whichever of a, b, c is closest
    /// to p (ties prefer a, then b).
    L3Paeth = 2,
    /// `(a + c) / 2`, rounded down.
    UpMean = 3,
}

impl Predictor {
    /// All predictors, in id order.
    pub const ALL: [Predictor; 4] = [
        Predictor::None,
        Predictor::Up,
        Predictor::L3Paeth,
        Predictor::UpMean,
    ];

    /// The predictor with this id, if any.
    pub const fn from_id(id: u8) -> Option<Self> {
        match id {
            0 => Some(Predictor::None),
            1 => Some(Predictor::Up),
            2 => Some(Predictor::L3Paeth),
            3 => Some(Predictor::UpMean),
            _ => None,
        }
    }

    /// Name as used by the CLI and `l3 info`.
    pub const fn name(self) -> &'static str {
        match self {
            Predictor::None => "none",
            Predictor::Up => "up",
            Predictor::L3Paeth => "l3-paeth",
            Predictor::UpMean => "up-mean",
        }
    }
}

/// Which coding a file uses; the header's version byte says which.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Profile {
    /// Version 1: fixed-width rows (the L3 paper's design). The fastest decode, larger files.
    #[default]
    Fast,
    /// Version 2: per-patch colour transform, gradient prediction and Huffman-coded residuals
    /// in independently decodable segments. Smaller than PNG on photos; slower to decode.
    Compact,
}

impl Profile {
    /// The version byte of this profile.
    pub const fn version(self) -> u8 {
        match self {
            Profile::Fast => VERSION_FAST,
            Profile::Compact => VERSION_COMPACT,
        }
    }
    /// The profile of a version byte, if known.
    pub const fn from_version(version: u8) -> Option<Self> {
        match version {
            VERSION_FAST => Some(Profile::Fast),
            VERSION_COMPACT => Some(Profile::Compact),
            _ => None,
        }
    }
    /// Name as used by the CLI.
    pub const fn name(self) -> &'static str {
        match self {
            Profile::Fast => "fast",
            Profile::Compact => "compact",
        }
    }
}

/// The fixed-size header at the start of every file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Header {
    /// Width in pixels, 1..=[`MAX_DIMENSION`].
    pub width: u32,
    /// Height in pixels, 1..=[`MAX_DIMENSION`].
    pub height: u32,
    /// Channel layout.
    pub color: ColorType,
    /// Bits per sample: 8 or 16.
    pub depth: u8,
    /// log2 of the patch side, [`PATCH_LOG2_MIN`]..=[`PATCH_LOG2_MAX`].
    pub patch_log2: u8,
    /// The coding (format version).
    pub profile: Profile,
}

impl Header {
    /// Channel count.
    pub fn channels(&self) -> u8 {
        self.color.channels()
    }
    /// Patch side in pixels.
    pub fn patch_size(&self) -> u32 {
        1 << self.patch_log2
    }
    /// Patches per row of the patch grid.
    pub fn patches_x(&self) -> u32 {
        self.width.div_ceil(self.patch_size())
    }
    /// Rows of the patch grid.
    pub fn patches_y(&self) -> u32 {
        self.height.div_ceil(self.patch_size())
    }
    /// Number of patches (fits u64 for any valid header).
    pub fn patch_count(&self) -> u64 {
        self.patches_x() as u64 * self.patches_y() as u64
    }
    /// Number of streams = number of size-table entries: patches x channels in version 1,
    /// patches in version 2.
    pub fn stream_count(&self) -> u64 {
        self.patch_count() * self.streams_per_patch() as u64
    }
    /// Streams per patch: one per channel in version 1, one in version 2.
    pub fn streams_per_patch(&self) -> u32 {
        match self.profile {
            Profile::Fast => self.channels() as u32,
            Profile::Compact => 1,
        }
    }
    /// Bytes per sample in decoded output.
    pub fn bytes_per_sample(&self) -> usize {
        (self.depth / 8) as usize
    }
    /// Samples in the decoded image.
    pub fn sample_count(&self) -> u64 {
        self.width as u64 * self.height as u64 * self.channels() as u64
    }
    /// Bytes of the decoded image (interleaved, no row padding).
    pub fn output_bytes(&self) -> u64 {
        self.sample_count() * self.bytes_per_sample() as u64
    }
    /// Bytes of the size table.
    pub fn size_table_len(&self) -> u64 {
        self.stream_count() * SIZE_ENTRY_LEN as u64
    }
    /// Byte offset of the first stream.
    pub fn data_offset(&self) -> u64 {
        HEADER_LEN as u64 + self.size_table_len()
    }

    /// Pixel rectangle `(x0, y0, width, height)` of a patch; edge patches are smaller.
    pub fn patch_rect(&self, patch: u64) -> (u32, u32, u32, u32) {
        let ps = self.patch_size();
        let px = (patch % self.patches_x() as u64) as u32;
        let py = (patch / self.patches_x() as u64) as u32;
        let x0 = px * ps;
        let y0 = py * ps;
        (x0, y0, ps.min(self.width - x0), ps.min(self.height - y0))
    }

    /// Bits of one row of `width` samples with bit width `nbit`.
    pub fn row_bits(&self, width: u32, nbit: u32) -> u64 {
        nbit_field_bits(self.depth) as u64 + self.depth as u64 + width as u64 * nbit as u64
    }

    /// Smallest and largest valid stream size in bytes for a patch of this size.
    pub fn stream_size_bounds(&self, patch_w: u32, patch_h: u32) -> (u64, u64) {
        if self.profile == Profile::Compact {
            return compact::stream_size_bounds(self, patch_w, patch_h);
        }
        let min_bits = patch_h as u64 * self.row_bits(patch_w, 0);
        let max_bits = patch_h as u64 * self.row_bits(patch_w, self.depth as u32);
        (
            STREAM_PREFIX_LEN as u64 + min_bits.div_ceil(8),
            STREAM_PREFIX_LEN as u64 + max_bits.div_ceil(8),
        )
    }

    /// The header's 24 bytes.
    pub fn to_bytes(&self) -> [u8; HEADER_LEN] {
        let mut b = [0u8; HEADER_LEN];
        b[..8].copy_from_slice(&MAGIC);
        b[OFFSET_VERSION] = self.profile.version();
        b[OFFSET_FLAGS] = 0;
        b[OFFSET_CHANNELS] = self.channels();
        b[OFFSET_DEPTH] = self.depth;
        b[OFFSET_WIDTH..OFFSET_WIDTH + 4].copy_from_slice(&self.width.to_le_bytes());
        b[OFFSET_HEIGHT..OFFSET_HEIGHT + 4].copy_from_slice(&self.height.to_le_bytes());
        b[OFFSET_PATCH_LOG2] = self.patch_log2;
        b
    }

    /// Parses and validates the header (not the rest of the file).
    pub fn parse(data: &[u8]) -> Result<Header, FormatError> {
        let sig_len = data.len().min(MAGIC.len());
        if data[..sig_len] != MAGIC[..sig_len] {
            return Err(FormatError::BadMagic {
                found: data[..sig_len].to_vec(),
                expected: MAGIC,
            });
        }
        if data.len() < HEADER_LEN {
            return Err(FormatError::Truncated {
                what: "header",
                offset: 0,
                end: HEADER_LEN as u64,
                len: data.len() as u64,
            });
        }
        let version = data[OFFSET_VERSION];
        let profile = Profile::from_version(version).ok_or(FormatError::UnsupportedVersion {
            version,
            supported: VERSION_LATEST,
        })?;
        let invalid = |field, offset: usize, value: u64, reason| FormatError::InvalidHeader {
            field,
            offset: offset as u64,
            value,
            reason,
        };
        if data[OFFSET_FLAGS] != 0 {
            return Err(invalid(
                "flags",
                OFFSET_FLAGS,
                data[OFFSET_FLAGS] as u64,
                "no flags are defined in versions 1 and 2",
            ));
        }
        let channels = data[OFFSET_CHANNELS];
        let color = ColorType::from_channels(channels).ok_or_else(|| {
            invalid(
                "channels",
                OFFSET_CHANNELS,
                channels as u64,
                "must be 1, 2, 3 or 4",
            )
        })?;
        let depth = data[OFFSET_DEPTH];
        if depth != 8 && depth != 16 {
            return Err(invalid(
                "depth",
                OFFSET_DEPTH,
                depth as u64,
                "must be 8 or 16",
            ));
        }
        let read_u32 =
            |o: usize| u32::from_le_bytes([data[o], data[o + 1], data[o + 2], data[o + 3]]);
        let width = read_u32(OFFSET_WIDTH);
        let height = read_u32(OFFSET_HEIGHT);
        for (field, offset, v) in [
            ("width", OFFSET_WIDTH, width),
            ("height", OFFSET_HEIGHT, height),
        ] {
            if v == 0 || v > MAX_DIMENSION {
                return Err(invalid(field, offset, v as u64, "must be 1..=16777215"));
            }
        }
        let patch_log2 = data[OFFSET_PATCH_LOG2];
        if !(PATCH_LOG2_MIN..=PATCH_LOG2_MAX).contains(&patch_log2) {
            return Err(invalid(
                "patch_log2",
                OFFSET_PATCH_LOG2,
                patch_log2 as u64,
                "must be 3..=7 (patches of 8 to 128 pixels)",
            ));
        }
        if let Some(i) = data[OFFSET_RESERVED..HEADER_LEN]
            .iter()
            .position(|&b| b != 0)
        {
            return Err(invalid(
                "reserved",
                OFFSET_RESERVED + i,
                data[OFFSET_RESERVED + i] as u64,
                "reserved bytes must be zero",
            ));
        }
        Ok(Header {
            width,
            height,
            color,
            depth,
            patch_log2,
            profile,
        })
    }

    /// Checks the header against the caller's limits before anything is allocated.
    pub fn check_limits(&self, limits: &Limits) -> Result<(), LimitsError> {
        if self.width > limits.max_dimension || self.height > limits.max_dimension {
            return Err(LimitsError::Dimensions {
                width: self.width,
                height: self.height,
                max: limits.max_dimension,
            });
        }
        // Also bounded by the address space (on 32-bit targets, by 4 GiB).
        let max = limits.max_output_bytes.min(usize::MAX as u64);
        if self.output_bytes() > max {
            return Err(LimitsError::OutputBytes {
                needed: self.output_bytes(),
                max,
            });
        }
        Ok(())
    }

    /// Where a stream is, for error messages.
    pub fn stream_pos(&self, patch: u64, channel: u8, offset: u64) -> StreamPos {
        StreamPos {
            patch,
            patch_x: (patch % self.patches_x() as u64) as u32,
            patch_y: (patch / self.patches_x() as u64) as u32,
            channel,
            offset,
        }
    }
}

/// A parsed and validated file: header, size table, and the byte range of every stream.
/// Produced by [`parse_file`]; both decoders start from it.
#[derive(Debug, Clone)]
pub struct FileLayout<'a> {
    /// The header.
    pub header: Header,
    /// The whole file.
    pub data: &'a [u8],
    /// Byte offset of each stream in `data` (version 1: stream `patch * channels + channel`;
    /// version 2: stream `patch`), plus one
    /// final entry: the end of the last stream. An exclusive prefix sum of the size table.
    pub offsets: Vec<u64>,
}

impl FileLayout<'_> {
    /// The bytes of one stream.
    pub fn stream(&self, index: usize) -> &[u8] {
        &self.data[self.offsets[index] as usize..self.offsets[index + 1] as usize]
    }
    /// Size of one stream in bytes.
    pub fn stream_size(&self, index: usize) -> u32 {
        (self.offsets[index + 1] - self.offsets[index]) as u32
    }
}

/// Options for [`parse_file`].
#[derive(Debug, Clone, Copy)]
pub struct ParseOptions {
    /// Verify the trailing CRC-32 (default true). Costs one pass over the file at several GB/s.
    pub verify_checksum: bool,
}

impl Default for ParseOptions {
    fn default() -> Self {
        ParseOptions {
            verify_checksum: true,
        }
    }
}

/// The size table's bytes, after checking the file holds all of them.
fn size_table<'a>(header: &Header, data: &'a [u8]) -> Result<&'a [u8], FormatError> {
    let table_end = header.data_offset();
    if (data.len() as u64) < table_end {
        return Err(FormatError::Truncated {
            what: "size table",
            offset: HEADER_LEN as u64,
            end: table_end,
            len: data.len() as u64,
        });
    }
    Ok(&data[HEADER_LEN..table_end as usize])
}

/// Parses and validates everything but the streams' contents: header, limits, size table
/// (each entry within what its patch can need, the sum equal to the bytes present) and the
/// checksum. Allocates only the offset table (8 bytes per stream, at most about 1/8 of the file's
/// own length), nothing proportional to the decoded image.
pub fn parse_file<'a>(
    data: &'a [u8],
    limits: &Limits,
    options: ParseOptions,
) -> Result<FileLayout<'a>> {
    if data.len() as u64 > limits.max_input_bytes {
        return Err(LimitsError::InputBytes {
            len: data.len() as u64,
            max: limits.max_input_bytes,
        }
        .into());
    }
    let header = Header::parse(data)?;
    header.check_limits(limits)?;
    let table = size_table(&header, data)?;
    let min_len = header.data_offset() + CHECKSUM_LEN as u64;
    if (data.len() as u64) < min_len {
        return Err(FormatError::Truncated {
            what: "checksum",
            offset: header.data_offset(),
            end: min_len,
            len: data.len() as u64,
        }
        .into());
    }
    let per_patch = header.streams_per_patch() as usize;
    let mut offsets = Vec::with_capacity(table.len() / SIZE_ENTRY_LEN + 1);
    let mut offset = header.data_offset();
    for (i, entry) in table.chunks_exact(SIZE_ENTRY_LEN).enumerate() {
        let size = u32::from_le_bytes([entry[0], entry[1], entry[2], entry[3]]);
        let patch = (i / per_patch) as u64;
        let (_, _, pw, ph) = header.patch_rect(patch);
        let (min, max) = header.stream_size_bounds(pw, ph);
        if (size as u64) < min || size as u64 > max {
            return Err(FormatError::BadStreamSize {
                pos: header.stream_pos(patch, (i % per_patch) as u8, offset),
                size,
                min,
                max,
            }
            .into());
        }
        offsets.push(offset);
        offset += size as u64;
    }
    offsets.push(offset);
    let checksum_offset = data.len() as u64 - CHECKSUM_LEN as u64;
    if offset != checksum_offset {
        return Err(FormatError::SizeTableMismatch {
            table_total: offset - header.data_offset(),
            present: checksum_offset - header.data_offset(),
        }
        .into());
    }
    if options.verify_checksum {
        let c = checksum_offset as usize;
        let stored = u32::from_le_bytes([data[c], data[c + 1], data[c + 2], data[c + 3]]);
        let computed = crc32fast::hash(&data[..c]);
        if stored != computed {
            return Err(FormatError::ChecksumMismatch {
                stored,
                computed,
                offset: checksum_offset,
            }
            .into());
        }
    }
    Ok(FileLayout {
        header,
        data,
        offsets,
    })
}

/// Version 2 (*compact*) stream syntax: one stream per patch holding all its channels.
///
/// ```text
/// stream   = transform (TRANSFORM_BITS) | channel header x channels | segment data | pad
/// channel  = predictor (PREDICTOR_BITS) | ntok (TOKEN_COUNT_BITS)
///          | ntok code lengths: "0" = same as the previous token's (0 before the first),
///                               "1" + CODE_LENGTH_BITS-bit length
///          | seg_width (SEGMENT_WIDTH_BITS) | seg_base (SEGMENT_BASE_BITS)
///          | S segment lengths (seg_width bits each; length = seg_base + field, in bits)
/// segments = channel 0 segment 0 .. S-1, channel 1 segment 0 .. S-1, ...
/// segment  = rows s, s+S, s+2S, ... of the channel
/// row      = ceil(pw / 2) positions left to right, each two samples (the last one sample
///            when pw is odd): a pair token, or two single symbols (one when odd)
/// symbol   = Huffman code of the token (MSB of the code first) | raw bits (LSB first)
/// ```
///
/// Every segment starts at a bit offset known from the headers alone, so segments decode in
/// parallel (one GPU invocation each); within a segment the work is serial over at most
/// `ceil(ph / S)` rows.
pub mod compact {
    use super::Header;

    /// Bits of the per-patch colour transform id.
    pub const TRANSFORM_BITS: u32 = 2;
    /// Bits of a channel's predictor id.
    pub const PREDICTOR_BITS: u32 = 3;
    /// Bits of a channel's token count (how many code lengths follow).
    pub const TOKEN_COUNT_BITS: u32 = 6;
    /// Bits of each code length.
    pub const CODE_LENGTH_BITS: u32 = 4;
    /// Longest Huffman code; lengths above it are an error. Decoders index 2^11-entry tables.
    pub const MAX_CODE_LEN: u32 = 11;
    /// Bits of the segment-length field width.
    pub const SEGMENT_WIDTH_BITS: u32 = 5;
    /// Bits of the segment-length base.
    pub const SEGMENT_BASE_BITS: u32 = 16;
    /// Largest segment-length field width.
    pub const SEGMENT_WIDTH_MAX: u32 = 16;
    /// Most segments per channel.
    pub const SEGMENTS_MAX: u32 = 16;
    /// Segments x patch side is at most this, so a GPU workgroup holds one row of residuals
    /// per segment for four 16-bit channels in 8 KiB (128-pixel patches get 8 segments).
    pub const SEGMENT_ROW_SAMPLES_MAX: u32 = 1024;
    /// Zigzag values below this are their own token, with no raw bits.
    pub const TOKEN_DIRECT: u32 = 16;
    /// Two neighbouring zigzag values both below this are coded as one pair token, so smooth
    /// areas (mostly zeros) cost well under one bit per sample.
    pub const PAIR_LIMIT: u32 = 4;
    /// Number of pair tokens.
    pub const PAIR_TOKENS: u32 = PAIR_LIMIT * PAIR_LIMIT;
    /// log2 of [`TOKEN_DIRECT`].
    pub const TOKEN_DIRECT_LOG2: u32 = 4;
    /// Bits below the leading one that a token above [`TOKEN_DIRECT`] holds; the rest are raw.
    pub const TOKEN_MANTISSA_BITS: u32 = 1;
    const MANTISSAS: u32 = 1 << TOKEN_MANTISSA_BITS;

    /// Number of single-sample tokens for a sample depth: 16 direct + 2 per exponent
    /// 4..depth-1 (24 at 8 bits, 40 at 16 bits).
    pub const fn token_count(depth: u8) -> u32 {
        TOKEN_DIRECT + MANTISSAS * (depth as u32 - TOKEN_DIRECT_LOG2)
    }

    /// Size of the alphabet: the single tokens, then [`PAIR_TOKENS`] pair tokens
    /// (40 at 8 bits, 56 at 16 bits).
    pub const fn alphabet_size(depth: u8) -> u32 {
        token_count(depth) + PAIR_TOKENS
    }

    /// The pair token of zigzag values `z0` (left) and `z1` (right), both < [`PAIR_LIMIT`].
    #[inline(always)]
    pub const fn pair_token(depth: u8, z0: u32, z1: u32) -> u32 {
        token_count(depth) + z0 * PAIR_LIMIT + z1
    }

    /// Segments of a patch `ph` rows high in a file with `patch_size`-pixel patches.
    pub const fn segments(patch_size: u32, ph: u32) -> u32 {
        let max = SEGMENT_ROW_SAMPLES_MAX / patch_size;
        let max = if max < SEGMENTS_MAX {
            max
        } else {
            SEGMENTS_MAX
        };
        if ph < max {
            ph
        } else {
            max
        }
    }

    /// Token of a zigzag value `z` (< 2^depth) and the raw bits that follow its code:
    /// `(token, raw_bit_count, raw_value)`. Values below 16 are their own token; above, the
    /// token holds the exponent `n = floor(log2 z)` and the bit below the leading one, and the
    /// `n - 1` lower bits follow raw.
    #[inline(always)]
    pub const fn token_of(z: u32) -> (u32, u32, u32) {
        if z < TOKEN_DIRECT {
            return (z, 0, 0);
        }
        let n = 31 - z.leading_zeros();
        let nraw = n - TOKEN_MANTISSA_BITS;
        let m = (z >> nraw) & (MANTISSAS - 1);
        (
            TOKEN_DIRECT + MANTISSAS * (n - TOKEN_DIRECT_LOG2) + m,
            nraw,
            z & ((1 << nraw) - 1),
        )
    }

    /// Inverse of [`token_of`]: `(base, raw_bit_count)`; the value is `base + raw`.
    #[inline(always)]
    pub const fn token_base(token: u32) -> (u32, u32) {
        if token < TOKEN_DIRECT {
            return (token, 0);
        }
        let n = TOKEN_DIRECT_LOG2 + (token - TOKEN_DIRECT) / MANTISSAS;
        let m = (token - TOKEN_DIRECT) & (MANTISSAS - 1);
        let nraw = n - TOKEN_MANTISSA_BITS;
        ((1 << n) | (m << nraw), nraw)
    }

    /// Zigzag map of a residual `e` (mod 2^depth) read as signed: 0, -1, 1, -2, ... -> 0, 1, 2, 3.
    #[inline(always)]
    pub const fn zigzag(e: u32, depth: u32) -> u32 {
        let half = 1 << (depth - 1);
        if e < half {
            2 * e
        } else {
            2 * ((1 << depth) - e) - 1
        }
    }

    /// Inverse of [`zigzag`], as a residual mod 2^32 (callers mask to the depth).
    #[inline(always)]
    pub const fn unzigzag(z: u32) -> u32 {
        (z >> 1) ^ (0u32.wrapping_sub(z & 1))
    }

    /// Per-patch colour transform.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    #[repr(u8)]
    pub enum Transform {
        /// Channels are coded as they are.
        None = 0,
        /// Channels 0 and 2 are coded as `R - G` and `B - G` (mod 2^depth); needs 3+ channels.
        SubtractGreen = 1,
    }

    impl Transform {
        /// The transform with this id, if any.
        pub const fn from_id(id: u32) -> Option<Self> {
            match id {
                0 => Some(Transform::None),
                1 => Some(Transform::SubtractGreen),
                _ => None,
            }
        }
        /// Name as used by `l3 info`.
        pub const fn name(self) -> &'static str {
            match self {
                Transform::None => "none",
                Transform::SubtractGreen => "subtract-green",
            }
        }
    }

    /// A channel's predictor. With `b` the sample above, `a` above-left and `c` above-right
    /// (in the patch's first row all are 0; at its left edge `a = b`, at its right edge
    /// `c = b`), and `left` the reconstructed sample to the left. All arithmetic is on
    /// integers, reduced mod 2^depth at the end.
    ///
    /// *Up-type* predictors use the row above only. *Left-type* predictors are
    /// `left + g(a, b)`, and `b` in the first column: a row then decodes as a prefix sum of
    /// `residual + g`, which a GPU workgroup computes in log2(width) steps.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    #[repr(u8)]
    pub enum Predictor {
        /// 0 (up-type).
        None = 0,
        /// `b` (up-type).
        Up = 1,
        /// `left + b - a` (left-type).
        Gradient = 2,
        /// `left` (left-type).
        Left = 3,
        /// `left + floor((b - a) / 2)` (left-type).
        HalfGradient = 4,
        /// `floor((a + c) / 2)` (up-type).
        UpMean = 5,
    }

    impl Predictor {
        /// All predictors, in id order.
        pub const ALL: [Predictor; 6] = [
            Predictor::None,
            Predictor::Up,
            Predictor::Gradient,
            Predictor::Left,
            Predictor::HalfGradient,
            Predictor::UpMean,
        ];
        /// The predictor with this id, if any.
        pub const fn from_id(id: u32) -> Option<Self> {
            match id {
                0 => Some(Predictor::None),
                1 => Some(Predictor::Up),
                2 => Some(Predictor::Gradient),
                3 => Some(Predictor::Left),
                4 => Some(Predictor::HalfGradient),
                5 => Some(Predictor::UpMean),
                _ => None,
            }
        }
        /// Name as used by `l3 info`.
        pub const fn name(self) -> &'static str {
            match self {
                Predictor::None => "none",
                Predictor::Up => "up",
                Predictor::Gradient => "gradient",
                Predictor::Left => "left",
                Predictor::HalfGradient => "half-gradient",
                Predictor::UpMean => "up-mean",
            }
        }
        /// True for `left + g` predictors, decoded by a prefix sum along the row.
        pub const fn is_left_type(self) -> bool {
            matches!(
                self,
                Predictor::Gradient | Predictor::Left | Predictor::HalfGradient
            )
        }
    }

    /// The part of the prediction that depends on the row above only, for each column:
    /// the whole prediction for up-type predictors; `g` (and `b` in column 0) for left-type
    /// ones. Values mod 2^16; callers reduce to the depth.
    #[inline(always)]
    pub fn prediction_from_above(predictor: Predictor, up: &[u16], g: &mut [u16]) {
        let n = up.len();
        debug_assert!(g.len() >= n && n > 0);
        let g = &mut g[..n];
        match predictor {
            Predictor::None => g.fill(0),
            Predictor::Up => g.copy_from_slice(up),
            Predictor::Left => {
                g.fill(0);
                g[0] = up[0];
            }
            Predictor::Gradient => {
                g[0] = up[0];
                for ((o, &b), &a) in g[1..].iter_mut().zip(&up[1..]).zip(up) {
                    *o = b.wrapping_sub(a);
                }
            }
            Predictor::HalfGradient => {
                g[0] = up[0];
                for ((o, &b), &a) in g[1..].iter_mut().zip(&up[1..]).zip(up) {
                    *o = ((b as i32 - a as i32) >> 1) as u16;
                }
            }
            Predictor::UpMean => {
                for x in 0..n {
                    let a = up[x.saturating_sub(1)] as u32;
                    let c = up[(x + 1).min(n - 1)] as u32;
                    g[x] = ((a + c) >> 1) as u16;
                }
            }
        }
    }

    /// Bits of the smallest and largest channel header (the code-length table and the
    /// segment-length table vary).
    const fn channel_header_bits(depth: u8, segments: u32) -> (u64, u64) {
        let fixed =
            (PREDICTOR_BITS + TOKEN_COUNT_BITS + SEGMENT_WIDTH_BITS + SEGMENT_BASE_BITS) as u64;
        (
            fixed + 1,
            fixed
                + (alphabet_size(depth) * (1 + CODE_LENGTH_BITS)) as u64
                + (segments * SEGMENT_WIDTH_MAX) as u64,
        )
    }

    /// Largest bits one sample can take: the longest code plus the most raw bits.
    pub const fn max_sample_bits(depth: u8) -> u32 {
        MAX_CODE_LEN + depth as u32 - 2
    }

    /// Smallest and largest valid stream size in bytes for a `pw` x `ph` patch.
    pub fn stream_size_bounds(h: &Header, pw: u32, ph: u32) -> (u64, u64) {
        let c = h.channels() as u64;
        let (min_ch, max_ch) = channel_header_bits(h.depth, segments(h.patch_size(), ph));
        let min_bits = TRANSFORM_BITS as u64 + c * min_ch;
        let max_bits = TRANSFORM_BITS as u64
            + c * (max_ch + pw as u64 * ph as u64 * max_sample_bits(h.depth) as u64);
        (min_bits.div_ceil(8), max_bits.div_ceil(8))
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn tokens_round_trip_every_value() {
            for depth in [8u8, 16] {
                let mut last = 0;
                for z in 0..1u32 << depth {
                    let (t, nraw, raw) = token_of(z);
                    assert!(t < token_count(depth), "z={z} token {t}");
                    assert!(t >= last, "tokens are monotonic in z");
                    last = t;
                    let (base, n2) = token_base(t);
                    assert_eq!((n2, base + raw), (nraw, z));
                    assert!(raw < 1 << nraw.max(1) || nraw == 0 && raw == 0);
                }
                assert_eq!(last, token_count(depth) - 1);
            }
        }

        #[test]
        fn zigzag_round_trips() {
            for depth in [8u32, 16] {
                let m = (1u32 << depth) - 1;
                let mut seen = vec![false; 1 << depth];
                for e in 0..=m {
                    let z = zigzag(e, depth);
                    assert!(!seen[z as usize]);
                    seen[z as usize] = true;
                    assert_eq!(unzigzag(z) & m, e);
                }
            }
            assert_eq!(
                [zigzag(0, 8), zigzag(255, 8), zigzag(1, 8), zigzag(254, 8)],
                [0, 1, 2, 3]
            );
        }

        #[test]
        fn segments_fit_the_gpu_budget() {
            for log2 in super::super::PATCH_LOG2_MIN..=super::super::PATCH_LOG2_MAX {
                let p = 1u32 << log2;
                for ph in 1..=p {
                    let s = segments(p, ph);
                    assert!(s >= 1 && s <= ph && s <= SEGMENTS_MAX);
                    assert!(s * p <= SEGMENT_ROW_SAMPLES_MAX);
                }
            }
            assert_eq!(
                (segments(64, 64), segments(128, 128), segments(8, 5)),
                (16, 8, 5)
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header() -> Header {
        Header {
            width: 130,
            height: 65,
            color: ColorType::Rgb,
            depth: 8,
            patch_log2: 6,
            profile: Profile::Fast,
        }
    }

    #[test]
    fn header_round_trips_through_bytes() {
        let h = header();
        assert_eq!(Header::parse(&h.to_bytes()).unwrap(), h);
    }

    #[test]
    fn geometry_counts_edge_patches() {
        let h = header();
        assert_eq!((h.patches_x(), h.patches_y()), (3, 2));
        assert_eq!(h.patch_rect(2), (128, 0, 2, 64));
        assert_eq!(h.patch_rect(5), (128, 64, 2, 1));
        assert_eq!(h.stream_count(), 18);
    }

    #[test]
    fn every_invalid_header_field_is_named() {
        let good = header().to_bytes();
        let cases: [(usize, u8, &str); 6] = [
            (OFFSET_FLAGS, 1, "flags"),
            (OFFSET_CHANNELS, 5, "channels"),
            (OFFSET_DEPTH, 12, "depth"),
            (OFFSET_PATCH_LOG2, 8, "patch_log2"),
            (OFFSET_RESERVED + 2, 1, "reserved"),
            (OFFSET_WIDTH + 3, 0x01, "width"),
        ];
        for (offset, value, name) in cases {
            let mut b = good;
            b[offset] = value;
            match Header::parse(&b) {
                Err(FormatError::InvalidHeader { field, .. }) => assert_eq!(field, name),
                other => panic!("byte {offset}={value}: expected {name} error, got {other:?}"),
            }
        }
        let mut b = good;
        b[OFFSET_VERSION] = 3;
        assert!(matches!(
            Header::parse(&b),
            Err(FormatError::UnsupportedVersion { version: 3, .. })
        ));
        b[OFFSET_VERSION] = VERSION_COMPACT;
        assert_eq!(Header::parse(&b).unwrap().profile, Profile::Compact);
    }

    #[test]
    fn stream_bounds_cover_nbit_zero_and_full_depth() {
        let h = header();
        // 64 rows of (4 + 8) header bits, no deltas: 96 bytes + predictor byte.
        assert_eq!(
            h.stream_size_bounds(64, 64),
            (1 + 96, 1 + 64 * (12 + 512) / 8)
        );
    }
}
