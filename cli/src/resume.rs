//! Resume records: beside each output of `l3 encode` and `l3 encode-field`, a hidden
//! `.<output name>.l3-resume` that says what the output was made from (l3 version, options,
//! inputs' names, lengths and times), so a rerun skips an output that is up to date.

use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use crate::fsio::{read_limited, write_atomic};

/// Suffix of the resume record kept beside each output of `l3 encode` / `l3 encode-field`:
/// `.<output name>.l3-resume` (hidden, so never taken as an input).
const RESUME_SUFFIX: &str = ".l3-resume";

/// Version of the resume record's layout.
const RESUME_VERSION: u32 = 1;

/// The identity of a file as a resume record keeps it: its name, length and modification time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Stamp {
    /// File name (without folder: a moved tree stays up to date, a renamed input does not).
    name: String,
    /// Length in bytes.
    len: u64,
    /// Modification time, nanoseconds since the Unix epoch.
    mtime_ns: u64,
}

impl Stamp {
    /// The stamp of `path` now (following symlinks, like the read that follows).
    pub fn of(path: &Path) -> Result<Self> {
        let meta = fs::metadata(path).with_context(|| format!("cannot read {}", path.display()))?;
        let mtime = meta
            .modified()
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .with_context(|| format!("{}: no modification time", path.display()))?;
        Ok(Self {
            name: path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
            len: meta.len(),
            mtime_ns: u64::try_from(mtime.as_nanos()).unwrap_or(u64::MAX),
        })
    }
}

/// What an output was made from, stored beside it after it is written.
#[derive(Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct ResumeRecord {
    version: u32,
    /// The `l3` version that wrote the output (another encoder may write other bytes).
    encoder: String,
    /// Every option that changes the output's bytes, as the command spells them.
    options: String,
    /// The inputs' stamps, taken before they were read.
    inputs: Vec<Stamp>,
    /// The output's stamp, taken after it was renamed into place.
    output: Stamp,
}

/// `.<name>.l3-resume` beside `output`.
fn resume_path(output: &Path) -> PathBuf {
    let mut name = std::ffi::OsString::from(".");
    name.push(output.file_name().unwrap_or_default());
    name.push(RESUME_SUFFIX);
    output.with_file_name(name)
}

/// Whether `output` is an up-to-date result of `inputs` (stamped before reading them) under
/// `options`: its resume record exists, was written by this `l3` version, and names the same
/// options, the same inputs (name, length, modification time) and the output as it is now.
/// Anything else (no record, an unreadable one, any difference) means "encode again".
pub fn is_up_to_date(inputs: &[Stamp], output: &Path, options: &str) -> bool {
    let Ok(output_stamp) = Stamp::of(output) else {
        return false;
    };
    let Ok(bytes) = read_limited(&resume_path(output), 1 << 16) else {
        return false;
    };
    let Ok(record) = serde_json::from_slice::<ResumeRecord>(&bytes) else {
        return false;
    };
    record
        == ResumeRecord {
            version: RESUME_VERSION,
            encoder: env!("CARGO_PKG_VERSION").to_string(),
            options: options.to_string(),
            inputs: inputs.to_vec(),
            output: output_stamp,
        }
}

/// Removes `output`'s resume record, before the output is replaced: a crash between the new
/// output and its record then leaves no record, so the next run encodes again.
pub fn forget_output(output: &Path) -> Result<()> {
    match fs::remove_file(resume_path(output)) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            Err(e).with_context(|| format!("removing {}", resume_path(output).display()))
        }
        _ => Ok(()),
    }
}

/// Writes `output`'s resume record (atomically, after the output itself is in place): what
/// [`is_up_to_date`] compares on the next run.
pub fn record_output(inputs: Vec<Stamp>, output: &Path, options: &str) -> Result<()> {
    let record = ResumeRecord {
        version: RESUME_VERSION,
        encoder: env!("CARGO_PKG_VERSION").to_string(),
        options: options.to_string(),
        inputs,
        output: Stamp::of(output)?,
    };
    write_atomic(&resume_path(output), &serde_json::to_vec_pretty(&record)?)
}
