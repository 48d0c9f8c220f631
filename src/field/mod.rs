//! Error-bounded float32 fields (SPEC.md, "Float fields"): 2D and 3D arrays stored within a
//! stated absolute bound, decoded on the CPU or the GPU bit for bit alike.
//!
//! Dual quantisation (cuSZ): each finite value `v` becomes the integer bin
//! `q = round((v - offset) / bin_width)`, and the bins are stored as a 16-bit gray L3 image
//! (lossless, any profile), so prediction runs on integers and decoding is the image decode
//! plus one `offset + q * bin_width` per value, with no serial error feedback. The bin width
//! is the largest value at most `2 x bound` with an 8-bit significand, so `q * bin_width`
//! (16 x 8 significant bits) is exact in f32 and the reconstruction is a single correctly
//! rounded f32 addition: the same bits on every IEEE f32 unit, fused multiply-add or not.
//! The encoder computes each value's reconstruction exactly as decoders do and checks it
//! against the bound in f64; a value whose reconstruction misses the bound (or would be
//! subnormal, which GPUs may flush), NaN, infinities and the declared fill value are stored
//! exactly, as runs of equal f32 bits. So the bound holds for every value by construction.
//!
//! Modules: `format` (the file format in code: [`FieldHeader`], the runs section,
//! [`parse_field`]), `encode` ([`encode_field`]), `decode` ([`decode_field`] on the CPU) and,
//! with the `gpu` feature, `gpu` (the fields stage on the GPU: `gpu::decode_fields`).
//! `lossless` holds the lossless float arrays (version 2 of the same container: float32,
//! float16, bfloat16, 1 to 4 axes), `bounded` the error-bounded arrays of 1 to 4 axes
//! (version 3: lattice interpolation or differences, [`encode_bounded`]);
//! [`field_version`] tells them apart, and [`decode_float_array`] (on the GPU
//! `gpu::decode_float_arrays`) decodes whichever version a file is: an encoder asked for a
//! bound may give back an exact version 2 file.

mod any;
pub mod blocks;
mod bounded;
mod core;
mod decode;
mod encode;
mod format;
#[cfg(feature = "gpu")]
pub mod gpu;
mod lossless;

#[cfg(all(test, feature = "gpu"))]
mod gpu_tests;
#[cfg(test)]
mod test_rng;
#[cfg(test)]
mod tests;

pub use any::{decode_float_array, parse_float_array, FloatArrayHeader};
pub use bounded::{
    decode_bounded, decode_bounded_into, encode_bounded, lattice_limit, levels_for, parse_bounded,
    reconstruct_bounded, BoundedHeader, BoundedOptions, Predictor, BOUNDED_ALPHABET,
    BOUNDED_FLAG_FILL, BOUNDED_MAX_BINS, BOUNDED_MAX_NDIM, BOUNDED_RUN_MAX, BOUNDED_RUN_TOKENS,
    BOUNDED_VERSION, LATTICE_STEP_MAX, LATTICE_UNIT_BITS, PAIR_LIMIT, PRODUCT_BITS,
};
pub use core::container::{CHUNK_LOG2_MAX, CHUNK_LOG2_MIN, MAX_SEGMENTS};
pub use core::runs::{Run, MAX_RUN_VALUES, MIN_RUN_LEN};
pub use decode::{
    decode_field, decode_field_window, decode_field_window_le, reconstruct, reconstruct_field,
};
pub use encode::{encode_field, regular_range, Bound, FieldOptions};
pub use format::{
    parse_field, FieldHeader, FieldLayout, BIN_WIDTH_BITS, FIELD_FLAG_FILL, FIELD_HEADER_LEN,
    FIELD_MAGIC, FIELD_VERSION, MAX_BINS,
};
pub use lossless::{
    decode_lossless, decode_lossless_into, decode_lossless_window, encode_lossless, parse_lossless,
    FloatSlice, FloatType, FloatVec, LosslessHeader, LosslessOptions, LOSSLESS_FLAG_FILL,
    LOSSLESS_FLAG_MULT, LOSSLESS_FLAG_TABLE, LOSSLESS_MAX_NDIM, LOSSLESS_VERSION,
};

/// The version byte of a field file (1 error-bounded, 2 lossless, 3 error-bounded of 1 to 4
/// axes), or `None` when `data` does
/// not start with [`FIELD_MAGIC`] and a version byte.
pub fn field_version(data: &[u8]) -> Option<u8> {
    (data.len() > 8 && data[..8] == FIELD_MAGIC).then(|| data[8])
}
