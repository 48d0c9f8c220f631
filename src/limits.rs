//! [`Limits`]: the resource limits every reader checks before it allocates, like image-png's.
//! A base type: the decoders, the data model, the loader and the front ends all take one.

use crate::format::consts::MAX_DIMENSION;

/// Resource limits a decoder checks before allocating anything, like image-png's `Limits`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Largest width and height accepted (default: the format's maximum, 16777215).
    pub max_dimension: u32,
    /// Largest decoded image in bytes (default 4 GiB).
    pub max_output_bytes: u64,
    /// Largest input file in bytes (default 4 GiB).
    pub max_input_bytes: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_dimension: MAX_DIMENSION,
            max_output_bytes: 4 << 30,
            max_input_bytes: 4 << 30,
        }
    }
}

impl Limits {
    /// No limits beyond what the format itself allows.
    pub fn none() -> Self {
        Limits {
            max_dimension: MAX_DIMENSION,
            max_output_bytes: u64::MAX,
            max_input_bytes: u64::MAX,
        }
    }
}
