//! Encoding, whatever the profile: [`EncodeOptions`] (whose [`ProfileOptions`] says which
//! profile and carries that profile's own options), the input pixels ([`RawImage`]) and the
//! container every version shares (header, size table, CRC). The per-patch work is each
//! codec's: [`crate::fast`] and [`crate::compact`], chosen by one `match`.

use rayon::prelude::*;

use crate::compact::{self, CompactOptions};
use crate::error::{ParameterError, Result};
use crate::fast::{self, FastOptions};
use crate::format::{self, Header, Profile};
use crate::raw::RawImage;

/// Which profile to write, with that profile's encoder options.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProfileOptions {
    /// Format version 1 ([`Profile::Fast`]): the fastest decode.
    Fast(FastOptions),
    /// Format version 2 ([`Profile::Compact`]): smaller files, slower decode.
    Compact(CompactOptions),
}

impl ProfileOptions {
    /// The profile these options write.
    pub const fn profile(&self) -> Profile {
        match self {
            ProfileOptions::Fast(_) => Profile::Fast,
            ProfileOptions::Compact(_) => Profile::Compact,
        }
    }

    /// `profile` with its default options.
    pub fn default_for(profile: Profile) -> Self {
        match profile {
            Profile::Fast => ProfileOptions::Fast(FastOptions::default()),
            Profile::Compact => ProfileOptions::Compact(CompactOptions::default()),
        }
    }
}

impl Default for ProfileOptions {
    /// The compact profile with [`CompactOptions::default`]: l3's one default everywhere (the
    /// CLI, Python, packing), the smaller files; choose [`ProfileOptions::Fast`] when training
    /// is decode-bound.
    fn default() -> Self {
        ProfileOptions::Compact(CompactOptions::default())
    }
}

/// Encoder options.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EncodeOptions {
    /// Which coding to write, and its options: [`ProfileOptions::Compact`] (format version 2,
    /// default: smaller files) or [`ProfileOptions::Fast`] (version 1: the quickest decode).
    pub profile: ProfileOptions,
    /// log2 of the patch side; default [`format::PATCH_LOG2_DEFAULT`] (64x64 patches).
    pub patch_log2: u8,
    /// Encode patches on rayon's thread pool (default true).
    pub parallel: bool,
    /// Error bound (default 0: lossless). With `e > 0` every decoded sample is within `e` of
    /// the original (the samples are stored as bins of `2e + 1` values: `crate::quantize`),
    /// and the file says so in its header; at most `2^(depth-1) - 1`.
    pub max_error: u16,
}

impl Default for EncodeOptions {
    fn default() -> Self {
        EncodeOptions {
            profile: ProfileOptions::default(),
            patch_log2: format::PATCH_LOG2_DEFAULT,
            parallel: true,
            max_error: 0,
        }
    }
}

impl EncodeOptions {
    /// The default options of `profile`.
    pub fn for_profile(profile: Profile) -> Self {
        EncodeOptions {
            profile: ProfileOptions::default_for(profile),
            ..Default::default()
        }
    }
}

/// Encodes raw pixels into an L3 file.
pub fn encode(image: &RawImage, options: &EncodeOptions) -> Result<Vec<u8>> {
    let header = validate(image, options)?;
    // An error-bounded file stores the samples' bins, losslessly.
    let quantized;
    let image = if header.max_error > 0 {
        quantized = crate::quantize::QuantizedSamples::of(image, header.max_error);
        &quantized.raw(image)
    } else {
        image
    };
    let patches = 0..header.patch_count();
    // One Vec of streams per patch: a patch's channels in version 1, the patch in version 2.
    let streams: Vec<Vec<Vec<u8>>> = match options.profile {
        ProfileOptions::Fast(fast) => {
            let encode = |patch| fast::encode::encode_patch(image, &header, &fast, patch);
            if options.parallel {
                patches.into_par_iter().map(encode).collect()
            } else {
                patches.map(encode).collect()
            }
        }
        ProfileOptions::Compact(compact) => {
            compact::encode::encode_patches(image, &header, &compact, options.parallel)
                .into_iter()
                .map(|stream| vec![stream])
                .collect()
        }
    };
    debug_assert_eq!(
        streams.len() * header.streams_per_patch() as usize,
        header.stream_count() as usize
    );
    Ok(assemble(&header, streams.iter().flatten()))
}

/// The container around the streams: header, size table, the streams, CRC-32.
pub(crate) fn assemble<'a>(
    header: &Header,
    streams: impl Iterator<Item = &'a Vec<u8>> + Clone,
) -> Vec<u8> {
    let data_len: usize = streams.clone().map(Vec::len).sum();
    let total = header.data_offset() as usize + data_len + format::CHECKSUM_LEN;
    let mut out = Vec::with_capacity(total);
    out.extend_from_slice(&header.to_bytes());
    for stream in streams.clone() {
        out.extend_from_slice(&(stream.len() as u32).to_le_bytes());
    }
    debug_assert_eq!(out.len(), header.data_offset() as usize);
    for stream in streams {
        out.extend_from_slice(stream);
    }
    let crc = crc32fast::hash(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

pub(crate) fn validate(image: &RawImage, options: &EncodeOptions) -> Result<Header> {
    if !(format::PATCH_LOG2_MIN..=format::PATCH_LOG2_MAX).contains(&options.patch_log2) {
        return Err(ParameterError::InvalidOption {
            name: "patch_log2",
            value: options.patch_log2 as u64,
            reason: "must be 3..=7 (patches of 8 to 128 pixels)",
        }
        .into());
    }
    for (name, v) in [("width", image.width), ("height", image.height)] {
        if v == 0 || v > format::MAX_DIMENSION {
            return Err(ParameterError::InvalidOption {
                name,
                value: v as u64,
                reason: "must be 1..=16777215",
            }
            .into());
        }
    }
    let header = Header {
        width: image.width,
        height: image.height,
        color: image.color,
        depth: image.depth(),
        patch_log2: options.patch_log2,
        profile: options.profile.profile(),
        max_error: options.max_error,
    };
    let limit = crate::quantize::max_error_limit(header.depth);
    if header.max_error > limit {
        return Err(ParameterError::InvalidOption {
            name: "max_error",
            value: header.max_error as u64,
            reason: "at most 2^(depth-1) - 1 (127 for 8-bit, 32767 for 16-bit samples)",
        }
        .into());
    }
    let needed = header.sample_count();
    if image.len() as u64 != needed {
        return Err(ParameterError::SampleCount {
            got: image.len(),
            needed: needed as usize,
            width: image.width,
            height: image.height,
            channels: header.channels(),
        }
        .into());
    }
    Ok(header)
}
