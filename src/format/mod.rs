//! The L3 file format in code, one module per part of `SPEC.md`: every constant is named once
//! here, and the header, size table and stream geometry are parsed and validated here, so the
//! CPU and GPU decoders share one set of checks.
//!
//! ```text
//! file   = header (24 bytes) | size table (4 bytes x streams) | streams | crc32 (4)
//!
//! version 1 (fast): one stream per (patch, channel); see [`fast`]
//! stream = predictor id (1 byte) | rows, bit-packed LSB first | zero padding to a byte
//!
//! version 2 (compact): one stream per patch, all channels; see [`compact`]
//! stream = transform | channel header x channels | segments | zero padding to a byte
//! ```
//!
//! [`container`] (re-exported here, with its constants) is what every version shares;
//! [`fast`] and [`compact`] hold each version's stream syntax and constants, nothing else;
//! [`levels`] holds the band ids of progressive records' residual images; [`floats`] the
//! float array formats' token alphabet (shared with the GPU kernels' generated prelude). A new format version
//! is a
//! new module beside them, a [`Profile`] variant, and an arm in
//! [`Header::stream_size_bounds`].

pub mod blocks;
pub mod compact;
pub(crate) mod consts;
pub mod container;
pub mod fast;
pub mod floats;
pub mod levels;

pub use container::*;
