//! # l3: a lossless image codec decoded by GPU compute shaders
//!
//! Images are cut into square patches (64x64 by default) that decode independently, so a GPU
//! decodes many at once. Two profiles share the container: [`Profile::Fast`] (format version
//! 1, the L3 paper's fixed-width rows predicted from the row above: the quickest decode) and
//! [`Profile::Compact`] (version 2: per-patch colour transform, row-parallel predictors and
//! Huffman codes in independently decodable segments: smaller than PNG on photos). Every
//! decoder here, CPU and GPU, reads both. The format is specified in `SPEC.md` and in code in
//! [`mod@format`].
//!
//! Layout (see `ARCHITECTURE.md`): [`mod@format`] is the file syntax (the container, then one
//! module per version); [`fast`] and [`compact`] are the two codecs, peers that each own an
//! encoder, a CPU decoder and their options ([`FastOptions`], [`CompactOptions`], chosen with
//! [`ProfileOptions`]); [`encode`] and [`decode`] are the facades over both; [`layout`] names
//! the output layouts ([`OutputLayout`]: interleaved u8/u16, or normalised f32 CHW) that the
//! CPU decoder ([`decode_to_layout`]) and the GPU decoder (`gpu`, feature `gpu`) both write;
//! `image_support` (feature `image`) connects the `image` crate.
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
