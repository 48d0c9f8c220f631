//! The tensor shard format in code (`SPEC.md`, part "Tensor records"): a version 2 shard,
//! the image shard's header, trailer and layout rules with an index entry of named arrays.
//! The index is parsed and validated here before anything it describes is read.
//!
//! ```text
//! shard   = header (version 2, L = 1) | payloads (record order, arrays in index order)
//!         | index | trailer
//! entry   = key_len u16 | key | class u32 | meta_len u32 | meta | array_count u8 | reserved u8
//!         | array x array_count
//! array   = name_len u8 | name | dtype u8 | ndim u8 | mode u8 | flags u8 | shape u32 x ndim
//!         | bound f64 | fill u64 | offset u64 | len u64 | crc32 u32
//! ```

use std::collections::HashSet;

use super::format::{
    invalid_in, Cursor, Trailer, HEADER_LEN, NO_CLASS, SHARD_MAGIC, TENSOR_SHARD_VERSION,
    TRAILER_LEN,
};
use super::ShardError;
use crate::tensor::{check_name, check_shape, ArraySpec, DType, StorageMode, MAX_ARRAYS, MAX_NDIM};

/// Flag of an array entry: a fill value is declared.
pub const ARRAY_FLAG_FILL: u8 = 1;
/// Bytes of an array entry without its name and shape.
pub const ARRAY_FIXED_LEN: usize = 1 + 1 + 1 + 1 + 1 + 8 + 8 + 8 + 8 + 4;
/// Fewest bytes of an index entry: a one-byte key, no metadata, one array of a one-byte name
/// and one axis.
pub const MIN_TENSOR_ENTRY_LEN: usize = 2 + 1 + 4 + 4 + 1 + 1 + ARRAY_FIXED_LEN + 1 + 4;

pub use super::format::{record_kind, RecordKind};

/// The header of a tensor shard.
pub fn tensor_header() -> [u8; HEADER_LEN as usize] {
    let mut b = [0u8; HEADER_LEN as usize];
    b[..8].copy_from_slice(&SHARD_MAGIC);
    b[8] = TENSOR_SHARD_VERSION;
    b[9] = 1;
    b
}

/// Checks the header of a tensor shard: signature, version 2, `L = 1`, zero flags and
/// reserved bytes ([`super::format::check_header`]).
pub fn parse_tensor_header(b: &[u8]) -> Result<(), ShardError> {
    super::format::check_header(b, RecordKind::Tensors).map(|_| ())
}

/// Where one array's payload lies, and its checksum.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PayloadEntry {
    /// Byte offset in the shard.
    pub offset: u64,
    /// Bytes.
    pub len: u64,
    /// CRC-32 of the bytes.
    pub crc32: u32,
}

/// One array of a record's index entry.
#[derive(Debug, Clone, PartialEq)]
pub struct ArrayEntry {
    /// What it is.
    pub spec: ArraySpec,
    /// Where its payload is.
    pub payload: PayloadEntry,
}

/// One record's index entry in a tensor shard.
#[derive(Debug, Clone, PartialEq)]
pub struct TensorEntry {
    /// Key, UTF-8.
    pub key: String,
    /// Class id, or `None`.
    pub class: Option<u32>,
    /// Metadata, possibly empty.
    pub meta: Vec<u8>,
    /// The arrays, in payload order.
    pub arrays: Vec<ArrayEntry>,
}

impl TensorEntry {
    /// Appends the entry's bytes to `out`.
    pub fn write(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&(self.key.len() as u16).to_le_bytes());
        out.extend_from_slice(self.key.as_bytes());
        out.extend_from_slice(&self.class.unwrap_or(NO_CLASS).to_le_bytes());
        out.extend_from_slice(&(self.meta.len() as u32).to_le_bytes());
        out.extend_from_slice(&self.meta);
        out.push(self.arrays.len() as u8);
        out.push(0);
        for a in &self.arrays {
            let s = &a.spec;
            out.push(s.name.len() as u8);
            out.extend_from_slice(s.name.as_bytes());
            out.push(s.dtype as u8);
            out.push(s.shape.len() as u8);
            out.push(s.mode as u8);
            out.push(if s.fill.is_some() { ARRAY_FLAG_FILL } else { 0 });
            for d in &s.shape {
                out.extend_from_slice(&d.to_le_bytes());
            }
            out.extend_from_slice(&s.bound.to_le_bytes());
            out.extend_from_slice(&s.fill.unwrap_or(0).to_le_bytes());
            out.extend_from_slice(&a.payload.offset.to_le_bytes());
            out.extend_from_slice(&a.payload.len.to_le_bytes());
            out.extend_from_slice(&a.payload.crc32.to_le_bytes());
        }
    }
}

/// Checks the trailer of a tensor shard of `file_len` bytes (as [`Trailer::parse`], with the
/// record count bounded by the smallest tensor entry).
pub fn parse_tensor_trailer(b: &[u8], file_len: u64) -> Result<Trailer, ShardError> {
    let t = Trailer::parse(b, file_len, 1)?;
    if t.record_count > t.index_len / MIN_TENSOR_ENTRY_LEN as u64 {
        return Err(ShardError::Invalid {
            field: "trailer record_count",
            value: t.record_count,
            reason: "more records than the index has room for",
        });
    }
    Ok(t)
}

/// Parses and validates a tensor shard's index: its CRC-32, every entry's fields, no bytes
/// after the last entry, and the payload layout (record order, arrays in index order,
/// contiguous from the end of the header to the index).
pub fn parse_tensor_index(bytes: &[u8], trailer: &Trailer) -> Result<Vec<TensorEntry>, ShardError> {
    // Bounded by parse_tensor_trailer: record_count <= index_len / smallest entry.
    let mut entries = Vec::with_capacity(trailer.record_count as usize);
    super::format::read_entries(bytes, trailer, |pos, i| {
        let (entry, end) = read_entry(bytes, pos, i)?;
        entries.push(entry);
        Ok(end)
    })?;
    let mut expected = HEADER_LEN;
    for (i, e) in entries.iter().enumerate() {
        for (k, a) in e.arrays.iter().enumerate() {
            let p = a.payload;
            let end = p.offset.checked_add(p.len);
            if p.offset != expected || end.is_none_or(|e| e > trailer.index_offset) {
                return Err(ShardError::LevelOutOfPlace {
                    record: i as u64,
                    level: k as u8,
                    offset: p.offset,
                    len: p.len,
                    expected,
                });
            }
            expected = end.expect("checked above");
        }
    }
    if expected != trailer.index_offset {
        return Err(ShardError::Invalid {
            field: "index payload table",
            value: expected,
            reason: "the payloads do not end where the index starts",
        });
    }
    Ok(entries)
}

/// Reads and checks entry `record` starting at byte `start`; returns it and where it ends.
fn read_entry(bytes: &[u8], start: usize, record: u64) -> Result<(TensorEntry, usize), ShardError> {
    let mut c = Cursor::at(bytes, start, record);
    let invalid = invalid_in(record);
    let (key, class, meta) = c.record_head()?;
    let count = c.u8("array_count")? as usize;
    if count == 0 || count > MAX_ARRAYS {
        return Err(invalid("array_count", count as u64, "must be 1..=16"));
    }
    let reserved = c.u8("reserved")?;
    if reserved != 0 {
        return Err(invalid("reserved", reserved as u64, "must be zero"));
    }
    let mut names = HashSet::new();
    let mut arrays = Vec::with_capacity(count);
    for _ in 0..count {
        let name_len = c.u8("array name_len")? as usize;
        let name = std::str::from_utf8(c.take(name_len, "array name")?)
            .map_err(|_| invalid("array name", 0, "not UTF-8"))?;
        check_name(name).map_err(|reason| invalid("array name", name_len as u64, reason))?;
        if !names.insert(name) {
            return Err(invalid(
                "array name",
                name_len as u64,
                "listed twice in the record",
            ));
        }
        let dtype_id = c.u8("array dtype")?;
        let ndim = c.u8("array ndim")? as usize;
        let mode_id = c.u8("array mode")?;
        let flags = c.u8("array flags")?;
        let dtype = DType::from_id(dtype_id)
            .ok_or_else(|| invalid("array dtype", dtype_id as u64, "must be 1..=12"))?;
        if ndim == 0 || ndim > MAX_NDIM {
            return Err(invalid("array ndim", ndim as u64, "must be 1..=4"));
        }
        let mode = StorageMode::from_id(mode_id)
            .ok_or_else(|| invalid("array mode", mode_id as u64, "must be 0, 1 or 2"))?;
        if flags & !ARRAY_FLAG_FILL != 0 {
            return Err(invalid(
                "array flags",
                flags as u64,
                "only bit 0 (fill) is defined",
            ));
        }
        let mut shape = Vec::with_capacity(ndim);
        for _ in 0..ndim {
            shape.push(c.u32("array shape")?);
        }
        let elements = check_shape(&shape)
            .map_err(|reason| invalid("array shape", shape.len() as u64, reason))?;
        let bound = f64::from_le_bytes(c.take(8, "array bound")?.try_into().expect("8"));
        let fill_bits = c.u64("array fill")?;
        let payload = PayloadEntry {
            offset: c.u64("array offset")?,
            len: c.u64("array len")?,
            crc32: c.u32("array crc32")?,
        };
        match mode {
            StorageMode::Raw | StorageMode::Lossless => {
                if bound.to_bits() != 0 {
                    return Err(invalid(
                        "array bound",
                        bound.to_bits(),
                        "0 unless error-bounded",
                    ));
                }
            }
            StorageMode::ErrorBounded => {
                if !(bound.is_finite() && bound > 0.0) {
                    return Err(invalid(
                        "array bound",
                        bound.to_bits(),
                        "finite and positive",
                    ));
                }
            }
        }
        if mode != StorageMode::Raw && !dtype.is_float() {
            return Err(invalid(
                "array mode",
                mode_id as u64,
                "float fields hold float arrays",
            ));
        }
        if mode == StorageMode::ErrorBounded && dtype != DType::Float32 {
            return Err(invalid(
                "array dtype",
                dtype_id as u64,
                "error-bounded arrays are float32",
            ));
        }
        let width = dtype.size() * 8;
        let has_fill = flags & ARRAY_FLAG_FILL != 0;
        if (!has_fill && fill_bits != 0) || (width < 64 && fill_bits >> width != 0) {
            return Err(invalid(
                "array fill",
                fill_bits,
                "the bits of a value of the array's type",
            ));
        }
        // A raw payload is exactly the elements; a field at least its own header.
        let len_ok = match mode {
            StorageMode::Raw => elements.checked_mul(dtype.size() as u64) == Some(payload.len),
            _ => payload.len > 0,
        };
        if !len_ok {
            return Err(invalid(
                "array len",
                payload.len,
                "not the payload size of this array",
            ));
        }
        arrays.push(ArrayEntry {
            spec: ArraySpec {
                name: name.to_owned(),
                dtype,
                shape,
                mode,
                bound,
                fill: has_fill.then_some(fill_bits),
            },
            payload,
        });
    }
    let entry = TensorEntry {
        key: key.to_owned(),
        class: (class != NO_CLASS).then_some(class),
        meta: meta.to_vec(),
        arrays,
    };
    Ok((entry, c.pos))
}

/// Parses a whole tensor shard held in memory: header, trailer and index, with the checks
/// [`super::TensorShardReader::open`] makes (for tests, fuzzing and callers with the bytes).
pub fn parse_tensor_shard(bytes: &[u8]) -> Result<(Trailer, Vec<TensorEntry>), ShardError> {
    let len = bytes.len() as u64;
    if len < HEADER_LEN + TRAILER_LEN {
        return Err(ShardError::Truncated {
            len,
            min: HEADER_LEN + TRAILER_LEN,
        });
    }
    parse_tensor_header(&bytes[..HEADER_LEN as usize])?;
    let trailer = parse_tensor_trailer(&bytes[(len - TRAILER_LEN) as usize..], len)?;
    let start = trailer.index_offset as usize;
    let index = &bytes[start..start + trailer.index_len as usize];
    let entries = parse_tensor_index(index, &trailer)?;
    Ok((trailer, entries))
}
