//! The record shard format in code (`SPEC.md`, part "Record shards"): every constant is named
//! once here, and the trailer and index are parsed and validated here, before anything they
//! describe is read or allocated. A validated index is kept as its bytes ([`Index`]) and its
//! entries read in place ([`RecordRef`]), or parsed into owned entries ([`parse_index`]).
//!
//! ```text
//! shard   = header (HEADER_LEN) | level 0 of every record | level 1 of every record | ...
//!         | index | trailer (TRAILER_LEN)
//! header  = SHARD_MAGIC (8) | version u8 | level_count u8 | flags u16 = 0 | reserved u32 = 0
//! index   = entry x record_count
//! entry   = key_len u16 | key (UTF-8) | class u32 (NO_CLASS: none) | meta_len u32 | meta
//!         | width u32 | height u32 | channels u8 | depth u8 | scheme u8 | reserved u8 = 0
//!         | level_count x (offset u64 | len u64 | crc32 u32)
//! trailer = index_offset u64 | index_len u64 | record_count u64 | index_crc32 u32
//!         | TRAILER_MAGIC (4)
//! ```
//!
//! All integers little-endian. Levels are laid out level-major: a level's payloads, in record
//! order, are one contiguous byte range, so the first `k + 1` levels of every record are one
//! prefix of the shard. Each payload is a complete L3 file (its own header and CRC), or empty
//! (the levels above 0 of a record stored flat in a shard with several levels). `scheme` says
//! how a record's levels are stored ([`crate::progressive::LevelScheme`]): 0 flat (payload 0 is
//! the whole image, the others empty), 1 interlace (payload k refines level k - 1 to level k).

use super::ShardError;
use crate::progressive::{LevelScheme, StoredLevels};

/// Shard signature (like the codec's, with `S` for shard): catches 7-bit transfers and line
/// ending conversions.
pub const SHARD_MAGIC: [u8; 8] = [0x89, b'L', b'3', b'S', 0x0D, 0x0A, 0x1A, 0x0A];
/// The shard format version this code writes and reads.
pub const SHARD_VERSION: u8 = 1;
/// The shard version of tensor records (`SPEC.md`, "Tensor records"; [`super::tensor_format`]).
pub const TENSOR_SHARD_VERSION: u8 = 2;
/// Bytes of the header.
pub const HEADER_LEN: u64 = 16;
/// Bytes of the trailer.
pub const TRAILER_LEN: u64 = 32;
/// The last four bytes of every shard.
pub const TRAILER_MAGIC: [u8; 4] = *b"L3SX";
/// Most levels a record may have (the progressive model's limit, named here as the shard
/// format stores it).
pub use crate::progressive::MAX_LEVELS;
/// Longest key in bytes.
pub const MAX_KEY_LEN: usize = 1024;
/// Longest metadata in bytes.
pub const MAX_META_LEN: usize = 1 << 20;
/// The class of a record without one.
pub const NO_CLASS: u32 = u32::MAX;
/// Bytes of one level's entry: offset, length, CRC-32.
pub const LEVEL_ENTRY_LEN: usize = 8 + 8 + 4;
/// Bytes of an index entry without its key, metadata and level entries.
pub const ENTRY_FIXED_LEN: usize = 2 + 4 + 4 + 4 + 4 + 1 + 1 + 2;

/// Why `key` cannot be a record key, or `Ok`. A key is a relative path with `/` separators
/// that `l3 unpack` can write under its output folder: 1..=[`MAX_KEY_LEN`] bytes, no NUL,
/// backslash or other control character, not absolute, and no empty, `.` or `..` component.
/// Writers refuse other keys; readers that turn keys into paths check them again.
pub fn check_key(key: &str) -> Result<(), &'static str> {
    if key.is_empty() {
        return Err("a key must not be empty");
    }
    if key.len() > MAX_KEY_LEN {
        return Err("a key is at most 1024 bytes");
    }
    if key.contains('\\') {
        return Err("a key uses `/` as its separator, not a backslash");
    }
    if key.chars().any(char::is_control) {
        return Err("a key must not contain NUL or other control characters");
    }
    if key.starts_with('/') {
        return Err("a key is a relative path, not an absolute one");
    }
    if key
        .split('/')
        .any(|c| c.is_empty() || c == "." || c == "..")
    {
        return Err("a key must not have an empty, `.` or `..` component");
    }
    Ok(())
}

/// The fixed header at the start of a shard.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShardHeader {
    /// Levels per record, 1..=[`MAX_LEVELS`].
    pub level_count: u8,
}

impl ShardHeader {
    /// The header's bytes.
    pub fn to_bytes(&self) -> [u8; HEADER_LEN as usize] {
        let mut b = [0u8; HEADER_LEN as usize];
        b[..8].copy_from_slice(&SHARD_MAGIC);
        b[8] = SHARD_VERSION;
        b[9] = self.level_count;
        b
    }

    /// Parses and checks the header of an image shard ([`check_header`]).
    pub fn parse(b: &[u8]) -> Result<Self, ShardError> {
        check_header(b, RecordKind::Images).map(|level_count| ShardHeader { level_count })
    }
}

/// What kind of records a shard holds (its header's version).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordKind {
    /// Images in levels (version 1).
    Images,
    /// Named arrays (version 2).
    Tensors,
}

/// The kind of records of a shard whose first bytes are `header` (its signature and version
/// checked; the rest of the header by the kind's own parser).
pub fn record_kind(header: &[u8]) -> Result<RecordKind, ShardError> {
    if header.len() < HEADER_LEN as usize || header[..8] != SHARD_MAGIC {
        return Err(ShardError::BadMagic {
            what: "header",
            found: header[..header.len().min(8)].to_vec(),
        });
    }
    match header[8] {
        SHARD_VERSION => Ok(RecordKind::Images),
        TENSOR_SHARD_VERSION => Ok(RecordKind::Tensors),
        version => Err(ShardError::UnsupportedVersion { version }),
    }
}

/// Checks the header of a shard of `kind` (either kind; SPEC "Record shards"): signature,
/// version (1 images, 2 tensors), level count (1..=8 for images, 1 for tensors), zero flags
/// and reserved bytes. Returns the level count.
pub fn check_header(b: &[u8], kind: RecordKind) -> Result<u8, ShardError> {
    let found = record_kind(b)?;
    if found != kind {
        let reason = match found {
            RecordKind::Tensors => "a tensor shard (version 2): open it as tensor records",
            RecordKind::Images => "an image shard (version 1), not a tensor shard (version 2)",
        };
        return Err(ShardError::Invalid {
            field: "header version",
            value: b[8] as u64,
            reason,
        });
    }
    let level_count = b[9];
    let (max, reason, flags) = match kind {
        RecordKind::Images => (MAX_LEVELS, "must be 1..=8", "must be zero in version 1"),
        RecordKind::Tensors => (
            1,
            "must be 1 in a tensor shard",
            "must be zero in version 2",
        ),
    };
    if level_count == 0 || level_count > max {
        return Err(ShardError::Invalid {
            field: "header level_count",
            value: level_count as u64,
            reason,
        });
    }
    if b[10..16].iter().any(|&x| x != 0) {
        return Err(ShardError::Invalid {
            field: "header flags/reserved",
            value: 0,
            reason: flags,
        });
    }
    Ok(level_count)
}

/// The fixed trailer at the end of a shard: where the index is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Trailer {
    /// Byte offset of the index.
    pub index_offset: u64,
    /// Bytes of the index.
    pub index_len: u64,
    /// Records in the shard.
    pub record_count: u64,
    /// CRC-32 of the index bytes.
    pub index_crc32: u32,
}

impl Trailer {
    /// The trailer's bytes.
    pub fn to_bytes(&self) -> [u8; TRAILER_LEN as usize] {
        let mut b = [0u8; TRAILER_LEN as usize];
        b[0..8].copy_from_slice(&self.index_offset.to_le_bytes());
        b[8..16].copy_from_slice(&self.index_len.to_le_bytes());
        b[16..24].copy_from_slice(&self.record_count.to_le_bytes());
        b[24..28].copy_from_slice(&self.index_crc32.to_le_bytes());
        b[28..32].copy_from_slice(&TRAILER_MAGIC);
        b
    }

    /// Parses the trailer of a shard of `file_len` bytes and checks that the index it points
    /// to lies between the header and the trailer and can hold `record_count` entries of a
    /// shard with `level_count` levels (so the count bounds every allocation that follows).
    pub fn parse(b: &[u8], file_len: u64, level_count: u8) -> Result<Self, ShardError> {
        if b.len() != TRAILER_LEN as usize || b[28..32] != TRAILER_MAGIC {
            return Err(ShardError::BadMagic {
                what: "trailer",
                found: b[b.len().saturating_sub(4)..].to_vec(),
            });
        }
        let u64_at = |o: usize| u64::from_le_bytes(b[o..o + 8].try_into().expect("8 bytes"));
        let t = Trailer {
            index_offset: u64_at(0),
            index_len: u64_at(8),
            record_count: u64_at(16),
            index_crc32: u32::from_le_bytes(b[24..28].try_into().expect("4 bytes")),
        };
        let index_end = t.index_offset.checked_add(t.index_len);
        if t.index_offset < HEADER_LEN
            || index_end.and_then(|e| e.checked_add(TRAILER_LEN)) != Some(file_len)
        {
            return Err(ShardError::Invalid {
                field: "trailer index_offset/index_len",
                value: t.index_offset,
                reason: "the index must end where the trailer starts, after the header",
            });
        }
        let min_entry = (ENTRY_FIXED_LEN + level_count as usize * LEVEL_ENTRY_LEN) as u64;
        if t.record_count > t.index_len / min_entry {
            return Err(ShardError::Invalid {
                field: "trailer record_count",
                value: t.record_count,
                reason: "more records than the index has room for",
            });
        }
        Ok(t)
    }
}

/// Where one level of one record lies, and its checksum.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LevelEntry {
    /// Byte offset in the shard.
    pub offset: u64,
    /// Bytes.
    pub len: u64,
    /// CRC-32 of the bytes.
    pub crc32: u32,
}

/// One record's index entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordEntry {
    /// The record's key (e.g. its source path relative to the dataset root), UTF-8.
    pub key: String,
    /// Class id, or `None`.
    pub class: Option<u32>,
    /// Arbitrary metadata (e.g. JSON), possibly empty.
    pub meta: Vec<u8>,
    /// Width in pixels of the full-resolution image.
    pub width: u32,
    /// Height in pixels of the full-resolution image.
    pub height: u32,
    /// Channels (1..=4).
    pub channels: u8,
    /// Bits per sample (8 or 16).
    pub depth: u8,
    /// How the levels are stored.
    pub scheme: LevelScheme,
    /// One entry per level, lowest fidelity first.
    pub levels: Vec<LevelEntry>,
}

impl RecordEntry {
    /// The record's stored levels over `payloads` (its payloads `0..=k`), in a shard of
    /// `level_count` levels: what [`crate::progressive::decode_level`] decodes.
    pub fn stored<'a>(&self, level_count: u8, payloads: &'a [&'a [u8]]) -> StoredLevels<'a> {
        StoredLevels {
            scheme: self.scheme,
            level_count,
            width: self.width,
            height: self.height,
            channels: self.channels,
            depth: self.depth,
            payloads,
        }
    }

    /// Appends the entry's bytes to `out`.
    pub fn write(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&(self.key.len() as u16).to_le_bytes());
        out.extend_from_slice(self.key.as_bytes());
        out.extend_from_slice(&self.class.unwrap_or(NO_CLASS).to_le_bytes());
        out.extend_from_slice(&(self.meta.len() as u32).to_le_bytes());
        out.extend_from_slice(&self.meta);
        out.extend_from_slice(&self.width.to_le_bytes());
        out.extend_from_slice(&self.height.to_le_bytes());
        out.push(self.channels);
        out.push(self.depth);
        out.push(self.scheme as u8);
        out.push(0);
        for l in &self.levels {
            out.extend_from_slice(&l.offset.to_le_bytes());
            out.extend_from_slice(&l.len.to_le_bytes());
            out.extend_from_slice(&l.crc32.to_le_bytes());
        }
    }
}

/// A bounds-checked little-endian reader over the index bytes (image and tensor shards).
pub(super) struct Cursor<'a> {
    pub(super) bytes: &'a [u8],
    pub(super) pos: usize,
    pub(super) record: u64,
}

/// The error of a field of record `record` that breaks a rule: `invalid(field, value, reason)`.
pub(super) fn invalid_in(record: u64) -> impl Fn(&'static str, u64, &'static str) -> ShardError {
    move |field, value, reason| ShardError::InvalidRecord {
        record,
        field,
        value,
        reason,
    }
}

impl<'a> Cursor<'a> {
    /// A cursor at byte `pos` of the index `bytes`, reading entry `record`.
    pub(super) fn at(bytes: &'a [u8], pos: usize, record: u64) -> Self {
        Cursor { bytes, pos, record }
    }

    /// The head every record entry starts with, image or tensor (SPEC.md, "Record shards"):
    /// the key (UTF-8, at most [`MAX_KEY_LEN`] bytes), the class and the metadata (at most
    /// [`MAX_META_LEN`] bytes).
    pub(super) fn record_head(&mut self) -> Result<(&'a str, u32, &'a [u8]), ShardError> {
        let invalid = invalid_in(self.record);
        let key_len = self.u16("key_len")? as usize;
        if key_len > MAX_KEY_LEN {
            return Err(invalid("key_len", key_len as u64, "at most 1024 bytes"));
        }
        let key = std::str::from_utf8(self.take(key_len, "key")?)
            .map_err(|_| invalid("key", 0, "not UTF-8"))?;
        let class = self.u32("class")?;
        let meta_len = self.u32("meta_len")? as usize;
        if meta_len > MAX_META_LEN {
            return Err(invalid("meta_len", meta_len as u64, "at most 1 MiB"));
        }
        Ok((key, class, self.take(meta_len, "meta")?))
    }

    pub(super) fn take(&mut self, n: usize, field: &'static str) -> Result<&'a [u8], ShardError> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.bytes.len());
        let Some(end) = end else {
            return Err(ShardError::IndexTruncated {
                record: self.record,
                field,
            });
        };
        let s = &self.bytes[self.pos..end];
        self.pos = end;
        Ok(s)
    }
    pub(super) fn u8(&mut self, field: &'static str) -> Result<u8, ShardError> {
        Ok(self.take(1, field)?[0])
    }
    pub(super) fn u16(&mut self, field: &'static str) -> Result<u16, ShardError> {
        Ok(u16::from_le_bytes(
            self.take(2, field)?.try_into().expect("2"),
        ))
    }
    pub(super) fn u32(&mut self, field: &'static str) -> Result<u32, ShardError> {
        Ok(u32::from_le_bytes(
            self.take(4, field)?.try_into().expect("4"),
        ))
    }
    pub(super) fn u64(&mut self, field: &'static str) -> Result<u64, ShardError> {
        Ok(u64::from_le_bytes(
            self.take(8, field)?.try_into().expect("8"),
        ))
    }
}

/// Parses and validates the index: every entry's fields, and the level-major layout (level
/// `k` of record `i` starts where level `k` of record `i - 1` ends, level `k + 1` where level
/// `k` of the last record ends; the first starts after the header and the last ends at the
/// index), so no two records overlap and nothing lies outside the data area. The owned form
/// of [`Index::parse`] (the same checks).
pub fn parse_index(
    bytes: &[u8],
    trailer: &Trailer,
    level_count: u8,
) -> Result<Vec<RecordEntry>, ShardError> {
    let valid = validate_index(bytes, trailer, level_count)?;
    valid
        .starts
        .iter()
        .enumerate()
        .map(|(i, &start)| {
            Ok(read_entry(bytes, start, i as u64, level_count, None)?
                .0
                .to_entry())
        })
        .collect()
}

/// A shard's index, validated ([`Index::parse`]: every check of [`parse_index`]) and kept as
/// its bytes with where each entry starts: opening a shard allocates nothing per record, and
/// [`Index::get`] reads an entry in place.
#[derive(Debug, Clone)]
pub struct Index {
    bytes: Vec<u8>,
    /// Byte offset of each entry in `bytes`.
    starts: Vec<usize>,
    level_count: u8,
    /// Payload bytes per level, summed over the records.
    level_bytes: Vec<u64>,
    /// The largest class id of a record, if any has one.
    max_class: Option<u32>,
}

impl Index {
    /// Validates `bytes` as the index of a shard with `trailer` and `level_count` levels, as
    /// [`parse_index`] does, and keeps them.
    pub fn parse(bytes: Vec<u8>, trailer: &Trailer, level_count: u8) -> Result<Self, ShardError> {
        let valid = validate_index(&bytes, trailer, level_count)?;
        Ok(Index {
            bytes,
            starts: valid.starts,
            level_count,
            level_bytes: valid.level_bytes,
            max_class: valid.max_class,
        })
    }

    /// Payload bytes per level (level 0 first), summed over the records.
    pub fn level_bytes(&self) -> &[u64] {
        &self.level_bytes
    }

    /// The largest class id of a record (`None` if no record has a class).
    pub fn max_class(&self) -> Option<u32> {
        self.max_class
    }

    /// Records in the index.
    pub fn len(&self) -> usize {
        self.starts.len()
    }

    /// Whether the index has no records.
    pub fn is_empty(&self) -> bool {
        self.starts.is_empty()
    }

    /// Levels per record.
    pub fn level_count(&self) -> u8 {
        self.level_count
    }

    /// Record `i`'s entry, read in place (`None` past the last record). The bytes were
    /// validated by [`Index::parse`] and never change, so every `i < len()` has its entry; it
    /// is read with the same checks all the same.
    pub fn get(&self, i: usize) -> Option<RecordRef<'_>> {
        let start = *self.starts.get(i)?;
        read_entry(&self.bytes, start, i as u64, self.level_count, None)
            .ok()
            .map(|(entry, _)| entry)
    }

    /// Every entry, in order.
    pub fn iter(&self) -> impl Iterator<Item = RecordRef<'_>> + '_ {
        (0..self.len()).map_while(|i| self.get(i))
    }

    /// Every entry as a [`RecordEntry`], in order.
    pub fn entries(&self) -> Vec<RecordEntry> {
        self.iter().map(|r| r.to_entry()).collect()
    }
}

/// One record's index entry read in place ([`Index::get`]): the fields of a [`RecordEntry`],
/// borrowed from the index bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordRef<'a> {
    /// The record's key, UTF-8.
    pub key: &'a str,
    /// Class id, or `None`.
    pub class: Option<u32>,
    /// Metadata, possibly empty.
    pub meta: &'a [u8],
    /// Width in pixels of the full-resolution image.
    pub width: u32,
    /// Height in pixels of the full-resolution image.
    pub height: u32,
    /// Channels (1..=4).
    pub channels: u8,
    /// Bits per sample (8 or 16).
    pub depth: u8,
    /// How the levels are stored.
    pub scheme: LevelScheme,
    /// The level entries' bytes: `LEVEL_ENTRY_LEN` per level.
    levels: &'a [u8],
}

impl<'a> RecordRef<'a> {
    /// Levels of the record (the shard's level count).
    pub fn level_count(&self) -> u8 {
        (self.levels.len() / LEVEL_ENTRY_LEN) as u8
    }

    /// Level `k`'s entry, or `None` above the last level.
    pub fn level(&self, k: u8) -> Option<LevelEntry> {
        self.levels().nth(k as usize)
    }

    /// Every level's entry, lowest fidelity first.
    pub fn levels(&self) -> impl ExactSizeIterator<Item = LevelEntry> + 'a {
        self.levels.chunks_exact(LEVEL_ENTRY_LEN).map(|b| {
            let u64_at = |o: usize| u64::from_le_bytes(b[o..o + 8].try_into().expect("8 bytes"));
            LevelEntry {
                offset: u64_at(0),
                len: u64_at(8),
                crc32: u32::from_le_bytes(b[16..20].try_into().expect("4 bytes")),
            }
        })
    }

    /// The record's stored levels over `payloads` (its payloads `0..=k`), in a shard of
    /// `level_count` levels (as [`RecordEntry::stored`]).
    pub fn stored<'p>(&self, level_count: u8, payloads: &'p [&'p [u8]]) -> StoredLevels<'p> {
        StoredLevels {
            scheme: self.scheme,
            level_count,
            width: self.width,
            height: self.height,
            channels: self.channels,
            depth: self.depth,
            payloads,
        }
    }

    /// The entry, owned.
    pub fn to_entry(&self) -> RecordEntry {
        RecordEntry {
            key: self.key.to_owned(),
            class: self.class,
            meta: self.meta.to_vec(),
            width: self.width,
            height: self.height,
            channels: self.channels,
            depth: self.depth,
            scheme: self.scheme,
            levels: self.levels().collect(),
        }
    }
}

/// What [`validate_index`] learnt of a valid index.
struct ValidIndex {
    /// Where each entry starts.
    starts: Vec<usize>,
    /// Payload bytes per level.
    level_bytes: Vec<u64>,
    /// The largest class id.
    max_class: Option<u32>,
}

/// What every index (image or tensor) is checked for around its entries: its CRC-32 first,
/// then `read(pos, i)` reads entry `i` starting at byte `pos` and returns where it ends, for
/// the trailer's record count; no bytes may follow the last entry.
pub(super) fn read_entries(
    bytes: &[u8],
    trailer: &Trailer,
    mut read: impl FnMut(usize, u64) -> Result<usize, ShardError>,
) -> Result<(), ShardError> {
    let computed = crc32fast::hash(bytes);
    if computed != trailer.index_crc32 {
        return Err(ShardError::IndexChecksum {
            stored: trailer.index_crc32,
            computed,
        });
    }
    let mut pos = 0;
    for i in 0..trailer.record_count {
        pos = read(pos, i)?;
    }
    if pos != bytes.len() {
        return Err(ShardError::Invalid {
            field: "index",
            value: (bytes.len() - pos) as u64,
            reason: "bytes left after the last entry",
        });
    }
    Ok(())
}

/// The checks of [`parse_index`]: the CRC-32, every entry's fields, no bytes after the last
/// entry, the level-major layout.
fn validate_index(
    bytes: &[u8],
    trailer: &Trailer,
    level_count: u8,
) -> Result<ValidIndex, ShardError> {
    // Bounded by Trailer::parse: record_count <= index_len / smallest entry.
    let count = trailer.record_count as usize;
    let mut starts = Vec::with_capacity(count);
    // Every record's levels, record-major, for the layout check.
    let mut levels = Vec::with_capacity(count * level_count as usize);
    let mut max_class = None;
    read_entries(bytes, trailer, |pos, i| {
        let (entry, end) = read_entry(bytes, pos, i, level_count, Some(&mut levels))?;
        starts.push(pos);
        max_class = max_class.max(entry.class);
        Ok(end)
    })?;
    check_layout(&levels, count, level_count, trailer.index_offset)?;
    let mut level_bytes = vec![0u64; level_count as usize];
    for (k, l) in levels.iter().enumerate() {
        // The levels lie in the data area (check_layout), so the sums fit.
        level_bytes[k % level_count as usize] += l.len;
    }
    Ok(ValidIndex {
        starts,
        level_bytes,
        max_class,
    })
}

/// Reads and checks entry `record` of an index of `level_count` levels starting at byte
/// `start` of `bytes`: every field in range (key length and UTF-8, metadata length, shape,
/// scheme, reserved byte, which levels are empty). Returns the entry and where it ends; its
/// level entries are appended to `levels` if given.
fn read_entry<'a>(
    bytes: &'a [u8],
    start: usize,
    record: u64,
    level_count: u8,
    mut levels: Option<&mut Vec<LevelEntry>>,
) -> Result<(RecordRef<'a>, usize), ShardError> {
    let mut c = Cursor::at(bytes, start, record);
    let invalid = invalid_in(record);
    let (key, class, meta) = c.record_head()?;
    let width = c.u32("width")?;
    let height = c.u32("height")?;
    let channels = c.u8("channels")?;
    let depth = c.u8("depth")?;
    let scheme_id = c.u8("scheme")?;
    let reserved = c.u8("reserved")?;
    for (field, v) in [("width", width), ("height", height)] {
        if v == 0 || v > crate::format::MAX_DIMENSION {
            return Err(invalid(field, v as u64, "must be 1..=16777215"));
        }
    }
    if !(1..=4).contains(&channels) {
        return Err(invalid("channels", channels as u64, "must be 1..=4"));
    }
    if depth != 8 && depth != 16 {
        return Err(invalid("depth", depth as u64, "must be 8 or 16"));
    }
    if reserved != 0 {
        return Err(invalid("reserved", reserved as u64, "must be zero"));
    }
    let scheme = LevelScheme::from_id(scheme_id).ok_or_else(|| {
        invalid(
            "scheme",
            scheme_id as u64,
            "must be 0 (flat) or 1 (interlace)",
        )
    })?;
    if scheme == LevelScheme::Interlace && level_count == 1 {
        return Err(invalid(
            "scheme",
            scheme_id as u64,
            "interlace needs 2 or more levels",
        ));
    }
    let levels_at = c.pos;
    for k in 0..level_count {
        let level = LevelEntry {
            offset: c.u64("level offset")?,
            len: c.u64("level len")?,
            crc32: c.u32("level crc32")?,
        };
        // Flat: the whole image in level 0, nothing above; interlace: every level a file.
        let must_be_empty = scheme == LevelScheme::Flat && k > 0;
        if (level.len == 0) != must_be_empty {
            let reason = if must_be_empty {
                "a flat record has no bytes above level 0"
            } else {
                "every stored level is a non-empty L3 file"
            };
            return Err(invalid("level len", level.len, reason));
        }
        if let Some(out) = levels.as_deref_mut() {
            out.push(level);
        }
    }
    let entry = RecordRef {
        key,
        class: (class != NO_CLASS).then_some(class),
        meta,
        width,
        height,
        channels,
        depth,
        scheme,
        levels: &bytes[levels_at..c.pos],
    };
    Ok((entry, c.pos))
}

/// The level-major layout rule (see [`parse_index`]) over `levels`, the level entries of
/// `count` records, record-major.
fn check_layout(
    levels: &[LevelEntry],
    count: usize,
    level_count: u8,
    data_end: u64,
) -> Result<(), ShardError> {
    let level_count = level_count as usize;
    let mut expected = HEADER_LEN;
    for k in 0..level_count {
        for i in 0..count {
            let l = levels[i * level_count + k];
            let end = l.offset.checked_add(l.len);
            if l.offset != expected || end.is_none_or(|e| e > data_end) {
                return Err(ShardError::LevelOutOfPlace {
                    record: i as u64,
                    level: k as u8,
                    offset: l.offset,
                    len: l.len,
                    expected,
                });
            }
            expected = end.expect("checked above");
        }
    }
    if expected != data_end {
        return Err(ShardError::Invalid {
            field: "index level table",
            value: expected,
            reason: "the levels do not end where the index starts",
        });
    }
    Ok(())
}

/// Parses a whole shard held in memory: header, trailer and index, with the checks
/// [`super::ShardReader::open`] makes (for tests, fuzzing and callers with the bytes at hand).
pub fn parse_shard(bytes: &[u8]) -> Result<(ShardHeader, Trailer, Vec<RecordEntry>), ShardError> {
    let len = bytes.len() as u64;
    if len < HEADER_LEN + TRAILER_LEN {
        return Err(ShardError::Truncated {
            len,
            min: HEADER_LEN + TRAILER_LEN,
        });
    }
    let header = ShardHeader::parse(&bytes[..HEADER_LEN as usize])?;
    let trailer = Trailer::parse(
        &bytes[(len - TRAILER_LEN) as usize..],
        len,
        header.level_count,
    )?;
    let start = trailer.index_offset as usize;
    let index = &bytes[start..start + trailer.index_len as usize];
    let records = parse_index(index, &trailer, header.level_count)?;
    Ok((header, trailer, records))
}
