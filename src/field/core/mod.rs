//! The core under the chunked float formats (lossless arrays, version 2, and error-bounded
//! arrays, version 3; SPEC.md, "Lossless float arrays" and "Error-bounded float arrays"):
//! what both predictors plug into, written once.
//!
//! - `container`: the header's common start (magic, version, shape), the file layout checked
//!   before decoding (limits, CRC, exception runs, chunk table) for any header that says where
//!   its sections are ([`container::ChunkedHeader`]), chunk and segment geometry, strides;
//! - `tokens`: the token alphabet (zigzag values as the image codec's version-2 tokens widened
//!   to 32 bits, zero-run tokens) and the rules a code-length table obeys;
//! - `code`: canonical Huffman codes over that alphabet and the decoder's lookup tables;
//! - `estimate`: the size estimate candidates are ranked by (sampled windows, token entropy);
//! - `runs`: exception runs (values stored exactly), shared with the version-1 fields;
//! - `gpu` (with the `gpu` feature): the segment tables and decode tables the GPU kernels of
//!   both formats read.
//!
//! A predictor (differences, lattice, float-mult) maps values to zigzag residuals and back;
//! everything from residuals to bytes is here.

pub(in crate::field) mod code;
pub(in crate::field) mod container;
pub(in crate::field) mod estimate;
#[cfg(any(test, feature = "gpu"))]
pub(in crate::field) mod gpu;
pub(in crate::field) mod runs;
pub(in crate::field) mod tokens;
