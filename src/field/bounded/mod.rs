//! Error-bounded float32 arrays of 1 to 4 axes (SPEC.md, "Error-bounded float arrays",
//! `.l3f` version 3): every regular value decodes within a stated absolute bound.
//!
//! The encoder picks per array the smaller of two predictors. The **lattice** predictor
//! (SZ3's closed loop, in integers) puts values on a lattice of unit `u <= 2 bound / 17` and
//! visits them level by level (strides `2^(L-1)` down to 1), axis by axis: each new point is
//! predicted linearly or cubically (a bit per pass) from points decoded in earlier passes and
//! stored as `k = round((x - prediction) / S)`, `S` lattice units per step (per level); the
//! decoder computes `prediction + S k`. The **differences** predictor differences the
//! dual-quantised bins of version 1 along an axis set. Either way the residuals are coded as
//! the lossless coder's 32-bit tokens plus pair tokens and zero runs, under one canonical
//! Huffman code per chunk; values decode as `offset + f32(x) x unit` (an exact product, one
//! rounded addition) after integer-only work, so a GPU decoder can match bit for bit. NaN,
//! infinities, the fill value and values whose reconstruction misses the bound are stored
//! exactly as runs.
//!
//! Modules: `format` (the format in code: [`BoundedHeader`], [`parse_bounded`]), `predict`
//! (both predictors, forward and inverse), `tokens` (the entropy stage), `encode`
//! ([`encode_bounded`]; `lattice_encode` its lattice side, `sample` the blocks large arrays'
//! settings are ranked on, `candidate` what the predictors share: options, input, estimates, `scratch` the buffers
//! kept between candidates and calls), `decode` ([`decode_bounded`], [`decode_bounded_into`]) and `gpu`
//! (the GPU plan: `shaders/bounded.wgsl`'s tables) and `gpu_encode` (the GPU encoder's host
//! side: `shaders/encode_*.wgsl`, bit for bit [`encode_bounded`] for the differences
//! predictor).

mod candidate;
mod decode;
mod encode;
mod format;
#[cfg(any(test, feature = "gpu"))]
pub(crate) mod gpu;
#[cfg(any(test, feature = "gpu"))]
pub(crate) mod gpu_encode;
mod lattice_encode;
mod predict;
mod sample;
mod scratch;
mod tokens;

#[cfg(test)]
mod gpu_encode_tests;
#[cfg(test)]
mod tests;

pub use candidate::BoundedOptions;
pub use decode::{decode_bounded, decode_bounded_into, reconstruct_bounded};
pub use encode::encode_bounded;
pub use format::{
    lattice_limit, levels_for, parse_bounded, BoundedHeader, Predictor, BOUNDED_ALPHABET,
    BOUNDED_FLAG_FILL, BOUNDED_MAX_BINS, BOUNDED_MAX_NDIM, BOUNDED_RUN_MAX, BOUNDED_RUN_TOKENS,
    BOUNDED_VERSION, LATTICE_STEP_MAX, LATTICE_UNIT_BITS, PAIR_LIMIT, PRODUCT_BITS,
};
