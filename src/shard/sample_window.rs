//! Windowed tensor datasets (manifest version 2, `SPEC.md` "Tensor datasets", "Sample
//! windows"): the records are the steps of a sequence, each step's arrays stored once, and
//! a *sample* is a window over the records: each of its arrays is a stored array read
//! `offset` records after the sample's index ([`SampleWindow`]). Sample `i` of a window whose
//! largest offset is `m` reads records `i + offset`, so the dataset has `records - m`
//! samples, and a step that two samples use (`t` as the input of sample `t`, the target of
//! sample `t - 1`) is one record, read (and cached by the loader) once.
//!
//! Every field is untrusted: [`SampleWindow::check`] refuses unknown arrays, offsets that
//! leave no sample, a sample count that is not `records - max offset`, and overflow, with a
//! message; nothing here panics on a manifest.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// The manifest version of a windowed tensor dataset (one with a [`SampleWindow`]).
pub const TENSOR_WINDOW_VERSION: u32 = 2;

/// One array of a sample of a windowed dataset.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WindowArray {
    /// Its name in the sample.
    pub name: String,
    /// The stored array (a name in the manifest's `arrays`) it is read from.
    pub array: String,
    /// How many records after the sample's index it is read.
    pub offset: u64,
}

/// A sample as a window over the records (module documentation).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SampleWindow {
    /// Samples in the dataset: the records less the largest offset.
    pub samples: u64,
    /// The arrays of a sample, in order.
    pub arrays: Vec<WindowArray>,
}

/// Where one array of a sample lies: the record and the array's index in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SamplePart {
    /// The record (numbered across shards).
    pub record: u64,
    /// The stored array's index in the record (the manifest's order).
    pub array: usize,
}

impl SampleWindow {
    /// The window of `pairs` (sample array name, stored array name, offset) over `records`
    /// records; an error where it leaves no sample.
    pub fn new(pairs: &[(String, String, u64)], records: u64) -> std::result::Result<Self, String> {
        let max = pairs.iter().map(|p| p.2).max().unwrap_or(0);
        let samples = records
            .checked_sub(max)
            .filter(|&s| s > 0)
            .ok_or_else(|| format!("window: offset {max} leaves no sample of {records} records"))?;
        Ok(SampleWindow {
            samples,
            arrays: pairs
                .iter()
                .map(|(name, array, offset)| WindowArray {
                    name: name.clone(),
                    array: array.clone(),
                    offset: *offset,
                })
                .collect(),
        })
    }

    /// The largest offset.
    pub fn max_offset(&self) -> u64 {
        self.arrays.iter().map(|a| a.offset).max().unwrap_or(0)
    }

    /// Checks the window against the stored arrays' names `arrays` and the dataset's `records`: 1 to 16
    /// sample arrays with valid, distinct names, each naming a stored array, offsets that
    /// leave at least one sample, and `samples` equal to `records` less the largest offset.
    /// Returns what is wrong.
    pub fn check(&self, arrays: &[&str], records: u64) -> std::result::Result<(), String> {
        if self.arrays.is_empty() || self.arrays.len() > crate::tensor::MAX_ARRAYS {
            return Err(format!(
                "window: {} arrays (must be 1..=16)",
                self.arrays.len()
            ));
        }
        let mut names = std::collections::HashSet::new();
        for w in &self.arrays {
            crate::tensor::check_name(&w.name)
                .map_err(|r| format!("window array name {:?}: {r}", w.name))?;
            if !names.insert(w.name.as_str()) {
                return Err(format!("window array {:?} is listed twice", w.name));
            }
            if !arrays.contains(&w.array.as_str()) {
                return Err(format!(
                    "window array {:?} reads {:?}, which is not a stored array",
                    w.name, w.array
                ));
            }
            if w.offset >= records {
                return Err(format!(
                    "window array {:?}: offset {} is past the end of {records} records",
                    w.name, w.offset
                ));
            }
        }
        let expected = records - self.max_offset();
        if self.samples != expected {
            return Err(format!(
                "window: samples {} is not records {records} less the largest offset {} ({expected})",
                self.samples,
                self.max_offset()
            ));
        }
        Ok(())
    }

    /// Where each array of sample `i` lies, in the window's order, the stored arrays being
    /// named `arrays` (an error, not a panic, for a sample past the end or an unknown array).
    pub fn parts(&self, arrays: &[&str], i: u64) -> Result<Vec<SamplePart>> {
        if i >= self.samples {
            return Err(Error::Manifest(format!(
                "sample {i} is past the end of {} samples",
                self.samples
            )));
        }
        self.arrays
            .iter()
            .map(|w| {
                let array = arrays
                    .iter()
                    .position(|a| *a == w.array)
                    .ok_or_else(|| Error::Manifest(format!("no stored array {:?}", w.array)))?;
                let record = i.checked_add(w.offset).ok_or_else(|| {
                    Error::Manifest(format!("sample {i} + offset {} overflows", w.offset))
                })?;
                Ok(SamplePart { record, array })
            })
            .collect()
    }

    /// The records sample `i` reads, ascending and distinct (`i + offset` per distinct
    /// offset).
    pub fn records_of(&self, i: u64) -> Vec<u64> {
        let mut offsets: Vec<u64> = self.arrays.iter().map(|a| a.offset).collect();
        offsets.sort_unstable();
        offsets.dedup();
        offsets
            .into_iter()
            .filter_map(|o| i.checked_add(o))
            .collect()
    }
}
