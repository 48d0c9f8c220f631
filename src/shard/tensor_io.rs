//! Writing and reading tensor shards ([`mod@super::tensor_format`]): [`TensorShardWriter`]
//! collects encoded records and writes the shard atomically; [`TensorShardReader`] opens one
//! with bounded positional reads (header, trailer, index, each validated before the next) and
//! reads each array's payload at its known offset (a record's arrays, and nearby records, in
//! one read: [`TensorShardReader::read_records_coalesced`]), checked against its CRC-32 and,
//! decoded, against its index entry.

use std::collections::HashSet;
use std::path::Path;

use super::file::{check_crc, Planned, Shard, ShardIndex};
use super::format::Trailer;
use super::tensor_format::{
    parse_tensor_header, parse_tensor_index, parse_tensor_trailer, tensor_header, ArrayEntry,
    PayloadEntry, TensorEntry,
};
use super::writer::{append_index, bad, check_record_head};
use super::ShardError;
use crate::decode::DecodeOptions;
use crate::error::Result;
use crate::store::Span;
use crate::tensor::{check_payload, decode_array, EncodedArray, NdArray, MAX_ARRAYS};

/// One tensor record to write: its arrays encoded ([`crate::tensor::encode_array`]).
#[derive(Debug, Clone, PartialEq)]
pub struct TensorRecordInput {
    /// Key: a relative path ([`check_key`]).
    pub key: String,
    /// Class id (`u32::MAX` is reserved for "none").
    pub class: Option<u32>,
    /// Metadata bytes, at most 1 MiB.
    pub meta: Vec<u8>,
    /// The arrays, 1..=16, names distinct, in payload order.
    pub arrays: Vec<EncodedArray>,
}

/// Collects tensor records and writes them as one shard.
#[derive(Debug, Default)]
pub struct TensorShardWriter {
    records: Vec<TensorRecordInput>,
    payload_bytes: u64,
}

impl TensorShardWriter {
    /// An empty writer.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records added so far.
    pub fn len(&self) -> usize {
        self.records.len()
    }

    /// Whether no record was added.
    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    /// Payload bytes added so far.
    pub fn payload_bytes(&self) -> u64 {
        self.payload_bytes
    }

    /// Adds a record, checked as a reader will check it: its key, metadata, class, array
    /// count and names, and each payload against its array's entry
    /// ([`crate::tensor::check_payload`]).
    pub fn add(&mut self, record: TensorRecordInput) -> Result<()> {
        check_record_head(&record.key, record.class, &record.meta)?;
        let n = record.arrays.len();
        if n == 0 || n > MAX_ARRAYS {
            return Err(bad("arrays", n, "a record has 1 to 16 arrays"));
        }
        let mut names = HashSet::new();
        for a in &record.arrays {
            crate::tensor::check_name(&a.spec.name)
                .map_err(|reason| bad("name", a.spec.name.len(), reason))?;
            if !names.insert(a.spec.name.as_str()) {
                return Err(bad("name", a.spec.name.len(), "array names are distinct"));
            }
            crate::tensor::check_shape(&a.spec.shape)
                .map_err(|reason| bad("shape", a.spec.shape.len(), reason))?;
            check_payload(&a.spec, &a.payload)?;
        }
        self.payload_bytes += record
            .arrays
            .iter()
            .map(|a| a.payload.len() as u64)
            .sum::<u64>();
        self.records.push(record);
        Ok(())
    }

    /// The shard's bytes: header, payloads, index, trailer.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.payload_bytes as usize + 1024);
        out.extend_from_slice(&tensor_header());
        let mut index = Vec::new();
        for r in &self.records {
            let mut arrays = Vec::with_capacity(r.arrays.len());
            for a in &r.arrays {
                arrays.push(ArrayEntry {
                    spec: a.spec.clone(),
                    payload: PayloadEntry {
                        offset: out.len() as u64,
                        len: a.payload.len() as u64,
                        crc32: crc32fast::hash(&a.payload),
                    },
                });
                out.extend_from_slice(&a.payload);
            }
            TensorEntry {
                key: r.key.clone(),
                class: r.class,
                meta: r.meta.clone(),
                arrays,
            }
            .write(&mut index);
        }
        append_index(&mut out, &index, self.records.len());
        out
    }

    /// Writes the shard to `path` atomically ([`super::write_atomic`]).
    pub fn write_to(&self, path: &Path) -> Result<()> {
        Ok(super::write_atomic(path, &self.to_bytes())?)
    }
}

/// A record's payloads, one per array in index order, or why they could not be read.
pub type RecordPayloads = Result<Vec<Vec<u8>>>;

/// The index of a tensor shard (version 2): every record's entry, and the payload bytes of
/// them all.
#[derive(Debug)]
pub struct TensorIndex {
    entries: Vec<TensorEntry>,
    payload_bytes: u64,
}

impl ShardIndex for TensorIndex {
    type Head = ();

    fn parse_ends(
        head: &[u8],
        tail: &[u8],
        file_len: u64,
    ) -> std::result::Result<((), Trailer), ShardError> {
        Ok((
            parse_tensor_header(head)?,
            parse_tensor_trailer(tail, file_len)?,
        ))
    }

    fn parse((): (), trailer: &Trailer, bytes: Vec<u8>) -> std::result::Result<Self, ShardError> {
        let entries = parse_tensor_index(&bytes, trailer)?;
        let payload_bytes = entries
            .iter()
            .flat_map(|e| &e.arrays)
            .map(|a| a.payload.len)
            .sum();
        Ok(TensorIndex {
            entries,
            payload_bytes,
        })
    }

    fn len(&self) -> usize {
        self.entries.len()
    }

    fn levels(&self) -> u8 {
        1
    }
}

/// An open tensor shard ([`Shard`] over a [`TensorIndex`]).
pub type TensorShardReader = Shard<TensorIndex>;

impl TensorShardReader {
    /// Payload bytes of every record (from the index).
    pub fn payload_bytes(&self) -> u64 {
        self.index.payload_bytes
    }

    /// Every record's index entry, in order.
    pub fn entries(&self) -> &[TensorEntry] {
        &self.index.entries
    }

    /// Record `i`'s index entry.
    pub fn entry(&self, i: usize) -> Result<&TensorEntry> {
        self.index.entries.get(i).ok_or_else(|| self.no_such(i, 0))
    }

    /// The payload of array `k` of record `i`, checked against its CRC-32.
    pub fn read_payload(&self, i: usize, k: usize) -> Result<Vec<u8>> {
        let e = self.entry(i)?;
        let a = e.arrays.get(k).ok_or(ShardError::NoSuchRecord {
            record: i as u64,
            level: k.min(255) as u8,
            records: self.len() as u64,
            levels: e.arrays.len() as u8,
        })?;
        let p = a.payload;
        // In the data area: checked by parse_tensor_index.
        self.read_checked(p.offset, p.len, p.crc32, (i, k as u8), || {
            format!("record {i} (key {:?}) array {:?}", e.key, a.spec.name)
        })
    }

    /// The payloads of the records `records`, each record's arrays in index order, each
    /// checked against its CRC-32, with few positional reads: a record's arrays are adjacent
    /// in the shard (SPEC "Tensor records"), so its payloads are one span, and spans at most
    /// `max_gap` bytes apart are read together while a read stays within `max_read` and the
    /// reader's limit. A record whose span exceeds that is read array by array
    /// ([`TensorShardReader::read_payload`], each array within the reader's limit). Reads run
    /// on rayon's pool. Returns one result per record, in order (an I/O error fails every
    /// record of its read, a checksum error only its record), and the number of reads.
    pub fn read_records_coalesced(
        &self,
        records: &[usize],
        max_gap: u64,
        max_read: u64,
    ) -> (Vec<RecordPayloads>, usize) {
        let max_read = max_read.min(self.max_read);
        // Each record's span (its arrays are adjacent), where it fits one read.
        let plans = records
            .iter()
            .map(|&i| {
                let e = match self.entry(i) {
                    Ok(e) => e,
                    Err(e) => return Planned::Done(Err(e), 0),
                };
                // A record has 1 to 16 arrays, adjacent (checked by parse_tensor_index).
                let (Some(a), Some(z)) = (e.arrays.first(), e.arrays.last()) else {
                    return Planned::Done(Ok(Vec::new()), 0);
                };
                let (start, end) = (a.payload.offset, z.payload.offset + z.payload.len);
                if end - start > max_read {
                    let read = (0..e.arrays.len()).map(|k| self.read_payload(i, k));
                    Planned::Done(read.collect(), e.arrays.len())
                } else {
                    Planned::Span(Span { start, end })
                }
            })
            .collect();
        // In the data area: every span was checked by parse_tensor_index.
        self.read_planned(
            plans,
            |w, bytes, first| {
                let i = records[w];
                self.entry(i)?
                    .arrays
                    .iter()
                    .enumerate()
                    .map(|(k, a)| {
                        let p = a.payload;
                        let at = (p.offset - first) as usize;
                        let b = &bytes[at..at + p.len as usize];
                        check_crc(b, p.crc32, i, k as u8)?;
                        Ok(b.to_vec())
                    })
                    .collect()
            },
            max_gap,
            max_read,
        )
    }

    /// Record `i`'s arrays, read and decoded on the CPU in index order, each checked against
    /// its entry ([`crate::tensor::decode_array`]); `options.limits` bound each array.
    pub fn read_record(&self, i: usize, options: &DecodeOptions) -> Result<Vec<(String, NdArray)>> {
        let e = self.entry(i)?;
        let (mut read, _) = self.read_records_coalesced(&[i], 0, u64::MAX);
        let payloads = read.pop().expect("one record asked")?;
        e.arrays
            .iter()
            .zip(payloads)
            .map(|(a, payload)| {
                Ok((
                    a.spec.name.clone(),
                    decode_array(&a.spec, &payload, options)?,
                ))
            })
            .collect()
    }
}
