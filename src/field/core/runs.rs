//! Exception runs (SPEC.md, "Float fields", the runs section): values stored exactly, as
//! runs of equal f32 bit patterns, in every float format (NaN, infinities, the fill value,
//! values a lossy predictor cannot bring within the bound).

use crate::error::{FormatError, ParameterError, Result};

/// Fewest bytes one exception run takes in the runs section (three one-byte varints).
pub const MIN_RUN_LEN: usize = 3;
/// Largest number of distinct f32 bit patterns in the runs' value table.
pub const MAX_RUN_VALUES: u32 = 1 << 16;

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

/// Appends the runs section: u32 K, the K distinct f32 bit patterns (u32 each, in order of
/// first use), then per run three LEB128 varints: the gap from the previous run's end (from 0
/// for the first), the length minus 1, and the index of its value in the table.
pub(in crate::field) fn write_runs(runs: &[Run], out: &mut Vec<u8>) -> Result<()> {
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

/// Appends `v` as a minimal LEB128 varint.
pub(crate) fn put_varint(out: &mut Vec<u8>, mut v: u32) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// A LEB128 varint of at most 5 bytes whose value fits u32, or `None`.
pub(crate) fn get_varint(data: &[u8], at: &mut usize) -> Option<u32> {
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
pub(in crate::field) fn read_runs(
    section: &[u8],
    count: u32,
    total: u64,
    base: usize,
) -> Result<Vec<Run>> {
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
