//! # l3: images and float arrays for training, decoded by GPU compute shaders
//!
//! Images are cut into square patches (64x64 by default) that decode independently, so a GPU
//! decodes many at once. Two profiles share the container: [`Profile::Fast`] (format version
//! 1, the L3 paper's fixed-width rows predicted from the row above: the quickest decode) and
//! [`Profile::Compact`] (version 2: per-patch colour transform, row-parallel predictors and
//! Huffman codes in independently decodable segments: smaller than PNG on photos). Every
//! decoder here, CPU and GPU, reads both. The format is specified in `SPEC.md` and in code in
//! [`mod@format`].
//!
//! Beside the codec, a dataset side: error-bounded float fields ([`field`]), records of named arrays ([`tensor`]), images stored as
//! levels of increasing resolution ([`progressive`]), record shards with an index at the end
//! ([`shard`]) and a training loader with a planned shuffle, a planned cache and exact resume
//! ([`loader`]).
//!
//! Layers, each module importing only its own layer and those below (see `ARCHITECTURE.md`;
//! `tests/layers.rs` checks it):
//!
//! | layer | modules |
//! |---|---|
//! | base | [`error`], [`limits`] ([`Limits`]), [`mod@format`] (the file syntax, `SPEC.md` in code), [`raw`] ([`RawImage`]), [`layout`] ([`OutputLayout`]), [`quantize`] |
//! | codecs | `codec` (bit I/O, SIMD, sinks), [`fast`] and [`compact`]: peers, each an encoder, a CPU decoder and options |
//! | engines | [`encode`] and [`decode`] (the CPU facades over both codecs), `gpu` (feature `gpu`: devices, kernels, their ABI), [`inspect`] |
//! | data model | [`progressive`], [`field`], [`tensor`], `image_support` (feature `image`), then [`shard`] |
//! | loader | [`loader`] |
//!
//! A data-side module that runs on the GPU keeps that stage in its own `gpu.rs`, on top of
//! the engine's API; the engine knows no dataset.
//!
//! ```
//! use l3::{encode, decode, ColorType, EncodeOptions, DecodeOptions, RawImage, Samples};
//! let pixels: Vec<u8> = (0..32 * 16 * 3).map(|i| (i * 7 % 251) as u8).collect();
//! let image = RawImage { width: 32, height: 16, color: ColorType::Rgb, samples: Samples::U8(&pixels) };
//! let file = encode::encode(&image, &EncodeOptions::default())?;
//! let (header, decoded) = decode::decode(&file, &DecodeOptions::default())?;
//! assert_eq!((header.width, header.height), (32, 16));
//! assert_eq!(decoded, pixels);
//! # Ok::<(), l3::Error>(())
//! ```

#![deny(missing_docs)]

// The GPU tests share their file generators with tests/gpu.rs, which names the crate `l3`.
#[cfg(test)]
extern crate self as l3;

mod codec;
pub mod compact;
pub mod decode;
pub mod encode;
pub mod error;
pub mod fast;
pub mod field;
pub mod format;
pub mod gpu;
#[cfg(feature = "image")]
pub mod image_support;
pub mod inspect;
pub mod layout;
pub mod limits;
pub mod loader;
pub mod progressive;
pub mod quantize;
pub mod raw;
pub mod shard;
pub mod store;
pub mod tensor;

pub use compact::{CompactOptions, PredictorSet};
pub use decode::{
    decode_into, decode_into_f32_chw, decode_into_u16, decode_to_layout, read_header, DecodeOptions,
};
pub use encode::{EncodeOptions, ProfileOptions};
pub use error::{Error, FormatError, LimitsError, ParameterError, Result};
pub use fast::{FastOptions, PredictorChoice};
pub use format::compact::CompactPredictor;
pub use format::fast::FastPredictor;
pub use format::{ColorType, Header, Profile};
#[cfg(feature = "image")]
pub use image_support::{decode_image, encode_image, read_image, register_image_hooks};
pub use layout::{Normalize, OutputLayout, SampleType, Window};
pub use limits::Limits;
pub use raw::{RawImage, Samples};
