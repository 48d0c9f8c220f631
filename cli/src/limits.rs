//! The command line's limits (`--max-output-bytes`, `--max-input-bytes`), set once in `main`,
//! and the reads every command bounds by them.

use std::path::Path;

use anyhow::Result;
use l3::DecodeOptions;

use crate::fsio;

/// The limits chosen on the command line, set once in `main`.
static LIMITS: std::sync::OnceLock<l3::Limits> = std::sync::OnceLock::new();

/// Sets the limits chosen on the command line (once, in `main`).
pub(crate) fn set(limits: l3::Limits) {
    let _ = LIMITS.set(limits);
}

/// The limits chosen on the command line.
pub(crate) fn limits() -> l3::Limits {
    LIMITS.get().copied().unwrap_or_default()
}

/// Decoder options with the command line's limits.
pub(crate) fn decode_options() -> DecodeOptions {
    DecodeOptions {
        limits: limits(),
        ..Default::default()
    }
}

/// Reads an L3 file within `--max-input-bytes` ([`fsio::read_limited`]).
pub(crate) fn read_l3(path: &Path) -> Result<Vec<u8>> {
    fsio::read_limited(path, limits().max_input_bytes)
}
