//! Tensor records (`SPEC.md`, "Tensor records"): a record of 1 to 16 named arrays, each of
//! 1 to 4 axes, its own element type and storage mode: raw bytes, a lossless float field or
//! an error-bounded one (`crate::field`). The shard stores them (`crate::shard`: version 2
//! shards); this module is the model and the codec of one array.
//!
//! Files: `model` ([`DType`], [`StorageMode`], [`ArraySpec`], [`NdArray`], [`TensorRecord`]),
//! `codec` ([`encode_array`], [`decode_array`], [`check_payload`], [`verify_array`]), `stats`
//! (normalisation [`Moments`]) and `npy` ([`to_npy`]).

mod codec;
mod model;
mod npy;
mod stats;

pub use codec::{
    check_payload, decode_array, decode_array_window, encode_array, verify_array, ArrayMode,
    ArrayOptions, BoundedFormat, EncodedArray,
};
pub use model::{
    check_name, check_shape, f16_to_f32, ArraySpec, DType, NdArray, StorageMode, TensorRecord,
    DTYPES, MAX_ARRAYS, MAX_ELEMENTS, MAX_NAME_LEN, MAX_NDIM,
};
pub use npy::to_npy;
pub use stats::Moments;
