//! Errors, grouped by cause like image-png's: the file is malformed ([`FormatError`]), it is
//! well formed but larger than the caller allows ([`LimitsError`]), the caller asked for
//! something impossible ([`ParameterError`]), or reading/writing failed (I/O, image input).
//!
//! Every message says what is wrong and where (byte offset, patch, channel, row, field), so a
//! user holding a corrupt file can tell a truncated download from a bit flip.

use std::fmt;

/// Result alias used throughout the crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Any error the codec can return.
///
/// Each variant's message already includes the wrapped error's message, so (following the
/// Rust API guidelines) `source()` does not return it again: a reporter that prints the
/// chain shows every message once. Match on the variant to reach the wrapped error.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The input is not a valid L3 file (corrupt, truncated, wrong magic, ...).
    #[error("format error: {0}")]
    Format(FormatError),
    /// The file is valid but decoding it would exceed the caller's [`crate::limits::Limits`].
    #[error("limit exceeded: {0}")]
    Limits(LimitsError),
    /// The caller passed an unusable argument (buffer size, unsupported pixel type, ...).
    #[error("invalid parameter: {0}")]
    Parameter(ParameterError),
    /// Reading or writing a file failed.
    #[error("I/O error: {0}")]
    Io(std::io::Error),
    /// Reading or writing a non-L3 image (PNG, JPEG, ...) failed: with the `image` feature,
    /// an `image::ImageError`, type-erased so that the core error does not depend on the
    /// `image` crate (downcast it to inspect it).
    #[error("image error: {0}")]
    Image(Box<dyn std::error::Error + Send + Sync>),
    /// An error of one image of a GPU batch: which image, and the error the CPU decoder
    /// would give for it.
    #[error("image {image} of the batch: {error}")]
    InBatch {
        /// Index of the image in the batch.
        image: usize,
        /// Its error.
        error: Box<Error>,
    },
    /// The loader could not use a record: which one, where, and why.
    #[error("sample {sample} ({shard}, key {key:?}): {error}")]
    Record {
        /// Dataset index of the record.
        sample: u64,
        /// Its shard file.
        shard: String,
        /// Its key.
        key: String,
        /// The error.
        error: Box<Error>,
    },
    /// A record shard is malformed (see [`ShardError`]).
    #[error("shard error: {0}")]
    Shard(ShardError),
    /// A record's encoded form did not decode to its source pixels (the write was abandoned).
    #[error("verification failed: {0}")]
    Verification(String),
    /// A dataset manifest is malformed or could not be written (file and reason).
    #[error("manifest error: {0}")]
    Manifest(String),
    /// The GPU decoder could not get an adapter or device, or a GPU operation failed.
    #[error("GPU error: {0}")]
    Gpu(String),
    /// The loader's background thread stopped abnormally (a panic, with its message): the
    /// run cannot go on; resume from the last state.
    #[error("loader failed: {0}")]
    LoaderThread(String),
}

macro_rules! wrap_errors {
    ($($variant:ident($inner:ty)),*) => {$(
        impl From<$inner> for Error {
            fn from(e: $inner) -> Self {
                Error::$variant(e)
            }
        }
    )*};
}

wrap_errors!(
    Format(FormatError),
    Limits(LimitsError),
    Parameter(ParameterError),
    Io(std::io::Error),
    Shard(ShardError)
);

#[cfg(feature = "image")]
impl From<image::ImageError> for Error {
    /// The `image` crate's limit errors are [`LimitsError::ImageReader`]; the rest
    /// [`Error::Image`].
    fn from(e: image::ImageError) -> Self {
        match e {
            image::ImageError::Limits(l) => LimitsError::ImageReader(l.to_string()).into(),
            e => Error::Image(Box::new(e)),
        }
    }
}

/// Where in the file a patch stream lives: used by errors about one stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamPos {
    /// Patch index in row-major patch order.
    pub patch: u64,
    /// Patch column and row in the patch grid.
    pub patch_x: u32,
    /// Patch row in the patch grid.
    pub patch_y: u32,
    /// Channel index (0-based).
    pub channel: u8,
    /// Byte offset of the stream in the file.
    pub offset: u64,
}

impl fmt::Display for StreamPos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "patch {} (column {}, row {}), channel {}, stream at byte {}",
            self.patch, self.patch_x, self.patch_y, self.channel, self.offset
        )
    }
}

/// The input is not a valid L3 file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FormatError {
    /// The first 8 bytes are not the L3 signature.
    #[error("not an L3 file: bad magic {found:02x?} at byte 0 (expected {expected:02x?})")]
    BadMagic {
        /// The bytes found (fewer than 8 if the file is shorter).
        found: Vec<u8>,
        /// The signature.
        expected: [u8; 8],
    },
    /// The file ends before a structure it must contain.
    #[error("truncated file: {what} needs bytes {offset}..{end} but the file has {len} bytes")]
    Truncated {
        /// Which structure was being read.
        what: &'static str,
        /// Where that structure starts.
        offset: u64,
        /// Where it would end.
        end: u64,
        /// The file length.
        len: u64,
    },
    /// The version byte names a format this decoder does not know.
    #[error(
        "unsupported format version {version} at byte 8 (this decoder reads versions 1 to {supported})"
    )]
    UnsupportedVersion {
        /// Version found.
        version: u8,
        /// Newest version this decoder reads.
        supported: u8,
    },
    /// A header field holds a value the format does not allow.
    #[error("invalid header field `{field}` at byte {offset}: {value} ({reason})")]
    InvalidHeader {
        /// Field name as in SPEC.md.
        field: &'static str,
        /// Byte offset of the field.
        offset: u64,
        /// Value found.
        value: u64,
        /// What was expected.
        reason: &'static str,
    },
    /// A size-table entry is outside what a stream of that patch can occupy.
    #[error("size table entry for {pos} is {size} bytes; a valid stream for this patch is {min}..={max} bytes")]
    BadStreamSize {
        /// Which stream.
        pos: StreamPos,
        /// Size found in the table.
        size: u32,
        /// Smallest possible stream.
        min: u64,
        /// Largest possible stream.
        max: u64,
    },
    /// The size table does not add up to the bytes present between table and checksum.
    #[error("size table sums to {table_total} bytes of patch data but the file holds {present} bytes between size table and checksum")]
    SizeTableMismatch {
        /// Sum of all entries.
        table_total: u64,
        /// Bytes actually present.
        present: u64,
    },
    /// The stored CRC-32 does not match the file's bytes: the file was altered or damaged.
    #[error("checksum mismatch: stored CRC-32 {stored:#010x} at byte {offset}, computed {computed:#010x} (file corrupt)")]
    ChecksumMismatch {
        /// CRC stored in the file.
        stored: u32,
        /// CRC of the bytes read.
        computed: u32,
        /// Where the stored CRC is.
        offset: u64,
    },
    /// A stream names a predictor that does not exist.
    #[error("unknown predictor id {id} in {pos}")]
    UnknownPredictor {
        /// Which stream.
        pos: StreamPos,
        /// Id found.
        id: u8,
    },
    /// A row header's bit width is larger than the sample depth.
    #[error("row {row} of {pos}: bit width {nbit} exceeds the {depth}-bit sample depth")]
    BadBitWidth {
        /// Which stream.
        pos: StreamPos,
        /// Row within the patch.
        row: u32,
        /// Width found.
        nbit: u32,
        /// Sample depth.
        depth: u32,
    },
    /// A row needs more bits than its stream holds.
    #[error("row {row} of {pos} runs past the end of its {size}-byte stream")]
    StreamOverrun {
        /// Which stream.
        pos: StreamPos,
        /// Row within the patch.
        row: u32,
        /// Stream size in bytes.
        size: u32,
    },
    /// A stream is longer than its rows need, or its padding bits are not zero.
    #[error(
        "{pos}: stream is {size} bytes but its rows use {used} bytes, or padding bits are not zero"
    )]
    StreamTrailingData {
        /// Which stream.
        pos: StreamPos,
        /// Stream size in bytes.
        size: u32,
        /// Bytes the rows use.
        used: u64,
    },
    /// A field of a version-2 patch stream holds a value the format does not allow.
    #[error("{pos}: invalid stream field `{field}`: {value} ({reason})")]
    InvalidStreamField {
        /// Which stream (and channel, for channel fields).
        pos: StreamPos,
        /// Field name as in SPEC.md.
        field: &'static str,
        /// Value found.
        value: u64,
        /// What was expected.
        reason: &'static str,
    },
    /// A version-2 segment's rows use a different number of bits than its stored length.
    #[error("{pos}: segment {segment} stores {stored} bits but its rows use {used}")]
    SegmentLength {
        /// Which stream and channel.
        pos: StreamPos,
        /// Segment index within the channel.
        segment: u32,
        /// Bits the rows use (when they run past the end: at least this many).
        used: u64,
        /// Bits the segment-length table gives.
        stored: u64,
    },
    /// The GPU decoder's shaders flagged an inconsistency they found in a stream.
    #[error("GPU decode found corrupt data in image {image} (flags {flags:#x})")]
    GpuReported {
        /// Index of the image in its batch.
        image: usize,
        /// Raw flag bits the shader wrote.
        flags: u32,
    },
    /// A progressive record's level payload does not have the shape its place in the level
    /// hierarchy requires (see [`crate::progressive`]).
    #[error("progressive level {level}: payload {what} is {found}, expected {expected}")]
    LevelShape {
        /// The level whose payload is wrong.
        level: u8,
        /// Which property: "width", "height", "channels", "depth" or "bytes".
        what: &'static str,
        /// What the payload has.
        found: u64,
        /// What the hierarchy requires.
        expected: u64,
    },
}

/// Decoding would exceed the caller's [`crate::limits::Limits`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LimitsError {
    /// Width or height above the limit.
    #[error("image is {width}x{height}, above the dimension limit {max}x{max}")]
    Dimensions {
        /// Image width.
        width: u32,
        /// Image height.
        height: u32,
        /// Largest allowed width and height.
        max: u32,
    },
    /// Decoded size above the limit.
    #[error("decoded image needs {needed} bytes, above the limit of {max} bytes")]
    OutputBytes {
        /// Bytes the pixels need.
        needed: u64,
        /// Allowed bytes.
        max: u64,
    },
    /// The `image` crate refused to read an image file within the limits it was given
    /// (its allocation limit is the caller's output limit).
    #[error("image reader: {0}")]
    ImageReader(String),
    /// Input file above the limit.
    #[error("input is {len} bytes, above the limit of {max} bytes")]
    InputBytes {
        /// Input length.
        len: u64,
        /// Allowed bytes.
        max: u64,
    },
    /// A read from a record shard (an index, a payload, a prefix) above the input limit,
    /// refused before anything is allocated for it.
    #[error("{shard}: {what} is {len} bytes, above the input limit of {max} bytes")]
    ShardRead {
        /// The shard file.
        shard: String,
        /// What was to be read (e.g. `record 3 (key "a.png") level 0`).
        what: String,
        /// Bytes it would take.
        len: u64,
        /// Allowed bytes.
        max: u64,
    },
    /// A GPU buffer the decoder or encoder needs is larger than the device allows (e.g. a single image
    /// whose f32 output, for planar f32 output, or one of whose patch rows, for interleaved
    /// output, exceeds `max_storage_buffer_binding_size`).
    #[error(
        "the GPU needs a buffer ({what}) of {needed} bytes, above the device limit of {max} bytes"
    )]
    GpuBuffer {
        /// Which buffer.
        what: &'static str,
        /// Bytes needed.
        needed: u64,
        /// The device's limit.
        max: u64,
    },
}

/// The caller passed an unusable argument.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ParameterError {
    /// The output buffer has the wrong length.
    #[error("output buffer is {got} bytes, the image needs exactly {needed}")]
    BufferSize {
        /// Bytes given.
        got: usize,
        /// Bytes needed.
        needed: usize,
    },
    /// The pixel buffer does not match width x height x channels.
    #[error("pixel buffer holds {got} samples, {width}x{height}x{channels} needs {needed}")]
    SampleCount {
        /// Samples given.
        got: usize,
        /// Samples needed.
        needed: usize,
        /// Width.
        width: u32,
        /// Height.
        height: u32,
        /// Channels.
        channels: u8,
    },
    /// A pixel type the format cannot store losslessly (e.g. 32-bit float).
    #[error("unsupported pixel type: {0}")]
    UnsupportedPixelType(String),
    /// An option is out of range.
    #[error("invalid option `{name}`: {value} ({reason})")]
    InvalidOption {
        /// Option name.
        name: &'static str,
        /// Value given.
        value: u64,
        /// What is allowed.
        reason: &'static str,
    },
    /// A floating-point option is out of range.
    #[error("invalid option `{name}`: {:e} ({reason})", f64::from_bits(*value_bits))]
    InvalidFloat {
        /// Option name.
        name: &'static str,
        /// The value given, as `f64::to_bits` (so that the error stays `Eq`).
        value_bits: u64,
        /// What is allowed.
        reason: &'static str,
    },
    /// A dataset location (path or URL) that cannot be used: which, and why.
    #[error("dataset location {location:?}: {reason}")]
    Location {
        /// The location given.
        location: String,
        /// Why it cannot be used.
        reason: String,
    },
    /// The buffer holds 16-bit samples but was asked for 8-bit ones or the reverse.
    #[error("the image has {depth}-bit samples; use the matching decode function")]
    DepthMismatch {
        /// Image depth.
        depth: u8,
    },
}

/// What is wrong with a shard. Every field named is the one at fault.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ShardError {
    /// The header or trailer does not carry the shard signature.
    #[error("not an l3 shard: bad {what} signature {found:02x?}")]
    BadMagic {
        /// "header" or "trailer".
        what: &'static str,
        /// The bytes found.
        found: Vec<u8>,
    },
    /// A shard format version this code does not know.
    #[error("unsupported shard version {version} (this reader knows version 1)")]
    UnsupportedVersion {
        /// The version byte.
        version: u8,
    },
    /// A header, trailer or index field has an impossible value.
    #[error("invalid shard {field} ({value}): {reason}")]
    Invalid {
        /// The field.
        field: &'static str,
        /// Its value.
        value: u64,
        /// What it must be.
        reason: &'static str,
    },
    /// A record's index entry has an impossible value.
    #[error("record {record}: invalid {field} ({value}): {reason}")]
    InvalidRecord {
        /// Index of the record.
        record: u64,
        /// The field.
        field: &'static str,
        /// Its value.
        value: u64,
        /// What it must be.
        reason: &'static str,
    },
    /// The index ends inside a record's entry.
    #[error("index truncated in record {record} at field {field}")]
    IndexTruncated {
        /// Index of the record.
        record: u64,
        /// The field that does not fit.
        field: &'static str,
    },
    /// The index bytes do not match their CRC-32.
    #[error("index checksum mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    IndexChecksum {
        /// Stored CRC.
        stored: u32,
        /// Computed CRC.
        computed: u32,
    },
    /// A level is not where the level-major layout puts it (overlapping records, a gap, a
    /// level table out of order, or bytes past the data area).
    #[error(
        "record {record} level {level}: {len} bytes at offset {offset}, expected to start at {expected} (level-major layout)"
    )]
    LevelOutOfPlace {
        /// Index of the record.
        record: u64,
        /// The level.
        level: u8,
        /// Its stored offset.
        offset: u64,
        /// Its stored length.
        len: u64,
        /// Where it should start.
        expected: u64,
    },
    /// A level's bytes do not match their CRC-32.
    #[error("record {record} level {level}: checksum mismatch (stored {stored:#010x}, computed {computed:#010x})")]
    LevelChecksum {
        /// Index of the record.
        record: u64,
        /// The level.
        level: u8,
        /// Stored CRC.
        stored: u32,
        /// Computed CRC.
        computed: u32,
    },
    /// A record or level index past the end.
    #[error("record {record} level {level} does not exist (shard has {records} records, {levels} levels)")]
    NoSuchRecord {
        /// Requested record.
        record: u64,
        /// Requested level.
        level: u8,
        /// Records in the shard.
        records: u64,
        /// Levels per record.
        levels: u8,
    },
    /// An error of the shard file `file` (what opening it found).
    #[error("{file}: {error}")]
    File {
        /// The shard's file name.
        file: String,
        /// The error.
        error: Box<ShardError>,
    },
    /// The shard is shorter than a header and a trailer.
    #[error("shard truncated: {len} bytes, at least {min} needed")]
    Truncated {
        /// Bytes present.
        len: u64,
        /// Bytes needed.
        min: u64,
    },
}

/// A [`ParameterError::InvalidOption`] as an [`Error`]: option `name` was given `value`;
/// `reason` says what is allowed.
pub(crate) fn invalid_option(name: &'static str, value: u64, reason: &'static str) -> Error {
    ParameterError::InvalidOption {
        name,
        value,
        reason,
    }
    .into()
}
