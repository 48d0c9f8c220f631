//! The container shared by every format version: signature, header, size table, checksum,
//! and the checks that run before anything is allocated.
//!
//! ```text
//! file = header (HEADER_LEN) | size table (SIZE_ENTRY_LEN x streams) | streams | crc32 (CHECKSUM_LEN)
//! ```

use crate::error::{FormatError, LimitsError, Result, StreamPos};
use crate::limits::Limits;

pub use super::consts::*;

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
    /// Error bound: 0 for a lossless file; else every decoded sample is within this many
    /// values of the original (the samples are stored as bins: `crate::quantize`).
    pub max_error: u16,
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

    /// Smallest and largest valid stream size in bytes for a patch of this size: each
    /// version's syntax says ([`super::fast::stream_size_bounds`],
    /// [`super::compact::stream_size_bounds`]).
    pub fn stream_size_bounds(&self, patch_w: u32, patch_h: u32) -> (u64, u64) {
        match self.profile {
            Profile::Fast => super::fast::stream_size_bounds(self, patch_w, patch_h),
            Profile::Compact => super::compact::stream_size_bounds(self, patch_w, patch_h),
        }
    }

    /// The header's 24 bytes.
    pub fn to_bytes(&self) -> [u8; HEADER_LEN] {
        let mut b = [0u8; HEADER_LEN];
        b[..8].copy_from_slice(&MAGIC);
        b[OFFSET_VERSION] = self.profile.version();
        b[OFFSET_FLAGS] = if self.max_error > 0 {
            FLAG_ERROR_BOUNDED
        } else {
            0
        };
        b[OFFSET_CHANNELS] = self.channels();
        b[OFFSET_DEPTH] = self.depth;
        b[OFFSET_WIDTH..OFFSET_WIDTH + 4].copy_from_slice(&self.width.to_le_bytes());
        b[OFFSET_HEIGHT..OFFSET_HEIGHT + 4].copy_from_slice(&self.height.to_le_bytes());
        b[OFFSET_PATCH_LOG2] = self.patch_log2;
        b[OFFSET_MAX_ERROR..OFFSET_MAX_ERROR + 2].copy_from_slice(&self.max_error.to_le_bytes());
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
        let flags = data[OFFSET_FLAGS];
        if flags & !FLAG_ERROR_BOUNDED != 0 {
            return Err(invalid(
                "flags",
                OFFSET_FLAGS,
                flags as u64,
                "only flag bit 0 (error-bounded) is defined",
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
        if data[OFFSET_RESERVED] != 0 {
            return Err(invalid(
                "reserved",
                OFFSET_RESERVED,
                data[OFFSET_RESERVED] as u64,
                "the reserved byte must be zero",
            ));
        }
        let max_error = u16::from_le_bytes([data[OFFSET_MAX_ERROR], data[OFFSET_MAX_ERROR + 1]]);
        if (flags & FLAG_ERROR_BOUNDED != 0) != (max_error > 0) {
            return Err(invalid(
                "max_error",
                OFFSET_MAX_ERROR,
                max_error as u64,
                "must be non-zero exactly when the error-bounded flag is set",
            ));
        }
        if max_error > max_error_limit(depth) {
            return Err(invalid(
                "max_error",
                OFFSET_MAX_ERROR,
                max_error as u64,
                "at most 2^(depth-1) - 1",
            ));
        }
        Ok(Header {
            width,
            height,
            color,
            depth,
            patch_log2,
            profile,
            max_error,
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
            max_error: 0,
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
        let cases: [(usize, u8, &str); 8] = [
            (OFFSET_FLAGS, 2, "flags"),
            (OFFSET_FLAGS, 1, "max_error"),
            (OFFSET_MAX_ERROR, 1, "max_error"),
            (OFFSET_CHANNELS, 5, "channels"),
            (OFFSET_DEPTH, 12, "depth"),
            (OFFSET_PATCH_LOG2, 8, "patch_log2"),
            (OFFSET_RESERVED, 1, "reserved"),
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
