//! Progressive records: an image stored as levels of increasing resolution, so a reader that
//! reads only the first `k + 1` levels gets the whole image at lower resolution (the shard
//! lays levels out level-major, so that is a prefix of the shard; `SPEC.md`, "Progressive
//! records").
//!
//! **What a level is.** With `L` levels, level `k` of a `W x H` image is its *lattice* at
//! stride `s = 2^(L-1-k)`: pixel (x, y) of level k is pixel (x*s, y*s) of the image, so
//! level k is `ceil(W/s) x ceil(H/s)` ([`level_dims`]) and level `L-1` is the image itself,
//! exactly. The levels are point samples, not averages (the study in
//! `docs/progressive-study.md` measured the alternatives: integer Haar and a Laplacian
//! pyramid give smoother low levels but cost 20-27% more bytes in total, against 1% here).
//!
//! **How a record stores them** ([`LevelScheme`]):
//! - [`LevelScheme::Interlace`]: payload 0 is level 0 as an L3 file; payload k >= 1 is an L3
//!   file of the residuals that refine level k-1 to level k ([`interlace`]).
//! - [`LevelScheme::Flat`]: payload 0 is the whole image, the other payloads are empty; level
//!   k is read by subsampling. The writer falls back to this when the interlaced levels would
//!   cost more than [`ProgressiveOptions::max_overhead`] times the flat file (flat images with
//!   hard edges: labels, palettes). A prefix read then carries the full image for that record.
//!
//! Both schemes give the same pixels at every level, so a reader never needs to care which one
//! a record uses. Reconstruction is integer-only and bit-exact on the CPU ([`decode_level`])
//! and on the GPU (`gpu::decode_levels`, feature `gpu`: `shaders/levels.wgsl`).
//!
//! Modules: [`interlace`] (the scheme: lattices, residual bands, predictions and the CPU
//! twins of `levels.wgsl`) and, with the `gpu` feature, `gpu` (the levels stage on the GPU).

#[cfg(feature = "gpu")]
pub mod gpu;
pub mod interlace;

use crate::codec::sample::Sample;

use crate::decode::{self, DecodeOptions};
use crate::encode::{self, EncodeOptions};
use crate::error::{FormatError, ParameterError, Result};
use crate::format::Header;
use crate::raw::{RawImage, Samples};

/// How a record's levels are stored (the index's `scheme` byte).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum LevelScheme {
    /// Payload 0 is the whole image; the other payloads are empty.
    Flat = 0,
    /// Payload 0 is the coarsest level, each further payload the residuals of one refinement.
    Interlace = 1,
}

impl LevelScheme {
    /// The scheme with this id, if any.
    pub const fn from_id(id: u8) -> Option<Self> {
        match id {
            0 => Some(LevelScheme::Flat),
            1 => Some(LevelScheme::Interlace),
            _ => None,
        }
    }
}

/// Options of the progressive writer.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ProgressiveOptions {
    /// Levels per record, 1..=8 (default 3: level 0 at 1/4 per side, 1/16 of the pixels). One
    /// level stores every record flat.
    pub levels: u8,
    /// Store a record flat when its interlaced levels would be larger than this times the flat
    /// file (default 1.25). `f64::INFINITY` never falls back.
    ///
    /// Why 1.25: on the shared images, interlacing costs 0.87-1.05x the flat file on photos,
    /// artwork and 16-bit images, but 1.38-2.14x on label maps and a digit sheet (flat images
    /// with hard edges, where the compact coder's own prediction wins). A low threshold
    /// (1.03) also sends ordinary photos flat, and each flat record puts its whole image in
    /// level 0: the 1/4 level's share of the bytes rose from 8.7% to 40%. At 1.25 only the
    /// four label-like images go flat: 0.994x the flat files in total, 11.0% up to the 1/4
    /// level (BENCHMARKS.md, "Progressive shards").
    pub max_overhead: f64,
}

impl Default for ProgressiveOptions {
    fn default() -> Self {
        ProgressiveOptions {
            levels: 3,
            max_overhead: 1.25,
        }
    }
}

/// Stride of level `level` of `level_count`: `2^(level_count - 1 - level)`.
pub const fn level_stride(level_count: u8, level: u8) -> u32 {
    1 << (level_count - 1 - level)
}

/// Width and height of level `level` of a `width x height` image stored with `level_count`
/// levels.
pub const fn level_dims(width: u32, height: u32, level_count: u8, level: u8) -> (u32, u32) {
    let s = level_stride(level_count, level);
    (width.div_ceil(s), height.div_ceil(s))
}

/// One level of an image, decoded: interleaved samples, row-major; 16-bit samples in native
/// byte order (as `bytemuck::cast_slice` of a `&[u16]`), like [`crate::decode::decode`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LevelImage {
    /// Width in pixels.
    pub width: u32,
    /// Height in pixels.
    pub height: u32,
    /// Channels (1..=4).
    pub channels: u8,
    /// Bits per sample (8 or 16).
    pub depth: u8,
    /// The samples.
    pub data: Vec<u8>,
}

/// A record's levels as encoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EncodedLevels {
    /// How they are stored.
    pub scheme: LevelScheme,
    /// One payload per level (empty ones for [`LevelScheme::Flat`] above level 0).
    pub payloads: Vec<Vec<u8>>,
}

impl EncodedLevels {
    /// Bytes of all payloads.
    pub fn total_bytes(&self) -> u64 {
        self.payloads.iter().map(|p| p.len() as u64).sum()
    }

    /// Decodes the top level (through every payload) and compares it with `image`: whether
    /// the levels give back exactly its samples, or for an error-bounded record (its level-0
    /// payload's header says so) every sample within the bound (the packer's verification).
    pub fn matches(&self, image: &RawImage, options: &DecodeOptions) -> Result<bool> {
        let payloads: Vec<&[u8]> = self.payloads.iter().map(|p| p.as_slice()).collect();
        let stored = StoredLevels {
            scheme: self.scheme,
            level_count: self.payloads.len() as u8,
            width: image.width,
            height: image.height,
            channels: image.color.channels(),
            depth: image.depth(),
            payloads: &payloads,
        };
        let decoded = decode_level(&stored, stored.level_count - 1, options)?;
        let bound = crate::decode::read_header(&self.payloads[0])?.max_error as u32;
        Ok(match image.samples {
            Samples::U8(s) if bound == 0 => decoded.data == s,
            Samples::U16(s) if bound == 0 => decoded.data == bytemuck::cast_slice::<u16, u8>(s),
            Samples::U8(s) => {
                decoded.data.len() == s.len()
                    && decoded
                        .data
                        .iter()
                        .zip(s)
                        .all(|(&a, &b)| a.abs_diff(b) as u32 <= bound)
            }
            Samples::U16(s) => {
                let d: Vec<u16> = bytemuck::pod_collect_to_vec(&decoded.data);
                d.len() == s.len()
                    && d.iter()
                        .zip(s)
                        .all(|(&a, &b)| a.abs_diff(b) as u32 <= bound)
            }
        })
    }
}

/// Most levels an image may be stored as (level 0 the full image, each next level half the
/// resolution of the one before).
pub const MAX_LEVELS: u8 = 8;

/// Encodes `image` as `progressive.levels` levels with `encode`'s profile and options:
/// interlaced, or flat if that is smaller than `progressive.max_overhead` of it (see the module
/// documentation). With one level the record is flat.
pub fn encode_levels(
    image: &RawImage,
    progressive: &ProgressiveOptions,
    encode: &EncodeOptions,
) -> Result<EncodedLevels> {
    let levels = progressive.levels;
    if levels == 0 || levels > MAX_LEVELS {
        return Err(ParameterError::InvalidOption {
            name: "levels",
            value: levels as u64,
            reason: "must be 1..=8",
        }
        .into());
    }
    let flat = encode::encode(image, encode)?;
    let flat_levels = |flat: Vec<u8>| {
        let mut payloads = vec![Vec::new(); levels as usize];
        payloads[0] = flat;
        EncodedLevels {
            scheme: LevelScheme::Flat,
            payloads,
        }
    };
    // Error-bounded records are flat: the interlace bands are residuals against the exact
    // coarser levels, which a bounded payload does not give back (each level read is the
    // flat payload's decoded samples, subsampled, so within the bound too).
    if levels == 1 || encode.max_error > 0 {
        return Ok(flat_levels(flat));
    }
    let payloads = match image.samples {
        Samples::U8(s) => interlace_payloads(s, image, levels, encode, |p| Samples::U8(p))?,
        Samples::U16(s) => interlace_payloads(s, image, levels, encode, |p| Samples::U16(p))?,
    };
    let total: u64 = payloads.iter().map(|p| p.len() as u64).sum();
    if total as f64 > flat.len() as f64 * progressive.max_overhead {
        return Ok(flat_levels(flat));
    }
    Ok(EncodedLevels {
        scheme: LevelScheme::Interlace,
        payloads,
    })
}

fn interlace_payloads<T: Sample>(
    samples: &[T],
    image: &RawImage,
    levels: u8,
    encode: &EncodeOptions,
    wrap: for<'a> fn(&'a [T]) -> Samples<'a>,
) -> Result<Vec<Vec<u8>>> {
    let ch = image.color.channels();
    let as_raw = |w: u32, h: u32, px: &[T]| -> Result<Vec<u8>> {
        let raw = RawImage {
            width: w,
            height: h,
            color: image.color,
            samples: wrap(px),
        };
        encode::encode(&raw, encode)
    };
    let mut payloads = Vec::with_capacity(levels as usize);
    let (w0, h0) = level_dims(image.width, image.height, levels, 0);
    let stride0 = level_stride(levels, 0);
    let level0 = interlace::subsample(samples, image.width, image.height, ch, stride0);
    payloads.push(as_raw(w0, h0, &level0)?);
    for k in 1..levels {
        let (fw, fh) = level_dims(image.width, image.height, levels, k);
        let stride = level_stride(levels, k);
        let fine;
        let fine_px: &[T] = if stride == 1 {
            samples
        } else {
            fine = interlace::subsample(samples, image.width, image.height, ch, stride);
            &fine
        };
        let res = interlace::residuals(fine_px, fw, fh, ch);
        let (rw, rh) = interlace::residual_dims(fw, fh);
        payloads.push(as_raw(rw, rh, &res)?);
    }
    Ok(payloads)
}

/// A record's stored levels, as a reader has them: the shape from the index, and the
/// payloads of levels `0..=k` for the level `k` wanted (or all of them).
#[derive(Debug, Clone, Copy)]
pub struct StoredLevels<'a> {
    /// How the levels are stored.
    pub scheme: LevelScheme,
    /// Levels the record has (the shard's level count).
    pub level_count: u8,
    /// Width of the full image.
    pub width: u32,
    /// Height of the full image.
    pub height: u32,
    /// Channels of the image.
    pub channels: u8,
    /// Bits per sample.
    pub depth: u8,
    /// Payloads of levels `0..=k` at least.
    pub payloads: &'a [&'a [u8]],
}

/// What reading level `level` of a record involves: which payloads are decoded, and what
/// each must contain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PayloadShape {
    /// Index of the payload (= its level).
    pub level: u8,
    /// Width its L3 file must have.
    pub width: u32,
    /// Height its L3 file must have.
    pub height: u32,
}

impl StoredLevels<'_> {
    /// The payloads that reading level `level` decodes, with the shape each must have:
    /// payload 0 (flat: the full image; interlace: level 0), then (interlace) the residual
    /// images of refinements `1..=level`.
    pub fn plan(&self, level: u8) -> Result<Vec<PayloadShape>> {
        if level >= self.level_count {
            return Err(ParameterError::InvalidOption {
                name: "level",
                value: level as u64,
                reason: "the record has fewer levels",
            }
            .into());
        }
        let needed = match self.scheme {
            LevelScheme::Flat => 1,
            LevelScheme::Interlace => level as usize + 1,
        };
        if self.payloads.len() < needed {
            return Err(ParameterError::InvalidOption {
                name: "payloads",
                value: self.payloads.len() as u64,
                reason: "fewer payloads than the level needs",
            }
            .into());
        }
        let mut plan = Vec::with_capacity(needed);
        match self.scheme {
            LevelScheme::Flat => plan.push(PayloadShape {
                level: 0,
                width: self.width,
                height: self.height,
            }),
            LevelScheme::Interlace => {
                let (w0, h0) = level_dims(self.width, self.height, self.level_count, 0);
                plan.push(PayloadShape {
                    level: 0,
                    width: w0,
                    height: h0,
                });
                for k in 1..=level {
                    let (fw, fh) = level_dims(self.width, self.height, self.level_count, k);
                    let (rw, rh) = interlace::residual_dims(fw, fh);
                    plan.push(PayloadShape {
                        level: k,
                        width: rw,
                        height: rh,
                    });
                }
            }
        }
        Ok(plan)
    }

    /// Checks a payload's header against the shape it must have and the record's channels
    /// and depth (a lying index or a swapped payload is an error, never a wrong image).
    pub fn check_header(&self, shape: &PayloadShape, header: &Header) -> Result<()> {
        let checks = [
            ("width", header.width as u64, shape.width as u64),
            ("height", header.height as u64, shape.height as u64),
            ("channels", header.channels() as u64, self.channels as u64),
            ("depth", header.depth as u64, self.depth as u64),
        ];
        for (what, found, expected) in checks {
            if found != expected {
                return Err(FormatError::LevelShape {
                    level: shape.level,
                    what,
                    found,
                    expected,
                }
                .into());
            }
        }
        Ok(())
    }
}

/// Decodes level `level` of a record on the CPU: the payloads it needs ([`StoredLevels::plan`],
/// each checked against its expected shape before it is decoded), then the refinements or the
/// subsampling. Bit-exact with the GPU path.
pub fn decode_level(
    stored: &StoredLevels,
    level: u8,
    options: &DecodeOptions,
) -> Result<LevelImage> {
    let plan = stored.plan(level)?;
    let (width, height) = level_dims(stored.width, stored.height, stored.level_count, level);
    let data = match stored.depth {
        8 => decode_typed::<u8>(stored, &plan, level, options)?,
        _ => bytemuck::pod_collect_to_vec(&decode_typed::<u16>(stored, &plan, level, options)?),
    };
    Ok(LevelImage {
        width,
        height,
        channels: stored.channels,
        depth: stored.depth,
        data,
    })
}

/// Like [`decode_level`], for a consumer that reads only the window `columns x rows` of the
/// level (a random crop): where the level is a payload decoded as is (a flat record read at
/// full resolution), only the patches holding the window are decoded and the other pixels of
/// the result are zero; otherwise (refinements and subsampling need the whole level) it is
/// [`decode_level`]. The window's pixels are identical to [`decode_level`]'s either way.
pub fn decode_level_window(
    stored: &StoredLevels,
    level: u8,
    columns: std::ops::Range<u32>,
    rows: std::ops::Range<u32>,
    options: &DecodeOptions,
) -> Result<LevelImage> {
    let direct = stored.scheme == LevelScheme::Flat && level + 1 == stored.level_count;
    if !direct {
        return decode_level(stored, level, options);
    }
    let plan = stored.plan(level)?;
    let layout = decode::parse(stored.payloads[0], options)?;
    stored.check_header(&plan[0], &layout.header)?;
    let mut data = vec![0u8; layout.header.output_bytes() as usize];
    decode::decode_layout_window(&layout, &mut data, columns, rows, options.parallel)?;
    Ok(LevelImage {
        width: stored.width,
        height: stored.height,
        channels: stored.channels,
        depth: stored.depth,
        data,
    })
}

fn decode_typed<T: Sample>(
    stored: &StoredLevels,
    plan: &[PayloadShape],
    level: u8,
    options: &DecodeOptions,
) -> Result<Vec<T>> {
    let decode_payload = |shape: &PayloadShape| -> Result<Vec<T>> {
        let bytes = stored.payloads[shape.level as usize];
        let layout = decode::parse(bytes, options)?;
        stored.check_header(shape, &layout.header)?;
        let mut out = vec![T::default(); layout.header.output_bytes() as usize / size_of::<T>()];
        decode::decode_layout(
            &layout,
            bytemuck::cast_slice_mut(&mut out),
            options.parallel,
        )?;
        Ok(out)
    };
    let ch = stored.channels;
    match stored.scheme {
        LevelScheme::Flat => {
            let full = decode_payload(&plan[0])?;
            let stride = level_stride(stored.level_count, level);
            Ok(if stride == 1 {
                full
            } else {
                interlace::subsample(&full, stored.width, stored.height, ch, stride)
            })
        }
        LevelScheme::Interlace => {
            let mut img = decode_payload(&plan[0])?;
            for shape in &plan[1..] {
                let res = decode_payload(shape)?;
                let (fw, fh) =
                    level_dims(stored.width, stored.height, stored.level_count, shape.level);
                img = interlace::refine(&img, &res, fw, fh, ch);
            }
            Ok(img)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::{ColorType, Profile};

    /// `px` (8-bit, `w x h`) as a raw image.
    fn raw_u8(px: &[u8], w: u32, h: u32, color: ColorType) -> RawImage<'_> {
        RawImage {
            width: w,
            height: h,
            color,
            samples: Samples::U8(px),
        }
    }

    /// `levels` levels, always interlaced (no flat fallback).
    fn interlaced(levels: u8) -> ProgressiveOptions {
        ProgressiveOptions {
            levels,
            max_overhead: f64::INFINITY,
        }
    }

    fn image_u8(w: u32, h: u32, ch: u8) -> Vec<u8> {
        (0..h)
            .flat_map(|y| {
                (0..w).flat_map(move |x| {
                    (0..ch).map(move |c| ((x * 7 + y * 3 + c as u32 * 50) ^ (x * y)) as u8)
                })
            })
            .collect()
    }

    fn stored<'a>(
        enc: &EncodedLevels,
        w: u32,
        h: u32,
        ch: u8,
        depth: u8,
        p: &'a [&'a [u8]],
    ) -> StoredLevels<'a> {
        StoredLevels {
            scheme: enc.scheme,
            level_count: enc.payloads.len() as u8,
            width: w,
            height: h,
            channels: ch,
            depth,
            payloads: p,
        }
    }

    /// Every level of an interlaced record decodes to the lattice of the original, and the
    /// last one to the original; the flat fallback gives the same pixels.
    #[test]
    fn every_level_is_the_lattice_for_both_schemes() {
        let (w, h, ch) = (37u32, 22u32, 3u8);
        let px = image_u8(w, h, ch);
        let raw = raw_u8(&px, w, h, ColorType::Rgb);
        let enc_opts = EncodeOptions::for_profile(Profile::Compact);
        for max_overhead in [f64::INFINITY, 0.0] {
            let opts = ProgressiveOptions {
                levels: 4,
                max_overhead,
            };
            let enc = encode_levels(&raw, &opts, &enc_opts).unwrap();
            let expected_scheme = if max_overhead == 0.0 {
                LevelScheme::Flat
            } else {
                LevelScheme::Interlace
            };
            assert_eq!(enc.scheme, expected_scheme);
            let refs: Vec<&[u8]> = enc.payloads.iter().map(|p| p.as_slice()).collect();
            let s = stored(&enc, w, h, ch, 8, &refs);
            for level in 0..4 {
                let got = decode_level(&s, level, &DecodeOptions::default()).unwrap();
                let stride = level_stride(4, level);
                assert_eq!((got.width, got.height), level_dims(w, h, 4, level));
                assert_eq!(got.data, interlace::subsample(&px, w, h, ch, stride));
            }
        }
    }

    /// Error-bounded records are flat, pass the packer's check, and every level is within
    /// the bound of the original's lattice (both profiles); a payload that breaks the bound
    /// fails the check.
    #[test]
    fn error_bounded_records_are_flat_and_within_the_bound() {
        let (w, h, ch) = (37u32, 22u32, 3u8);
        let px = image_u8(w, h, ch);
        let raw = raw_u8(&px, w, h, ColorType::Rgb);
        let opts = interlaced(3);
        for profile in [Profile::Fast, Profile::Compact] {
            let enc_opts = EncodeOptions {
                max_error: 3,
                ..EncodeOptions::for_profile(profile)
            };
            let enc = encode_levels(&raw, &opts, &enc_opts).unwrap();
            assert_eq!(enc.scheme, LevelScheme::Flat);
            assert!(enc.matches(&raw, &DecodeOptions::default()).unwrap());
            let refs: Vec<&[u8]> = enc.payloads.iter().map(|p| p.as_slice()).collect();
            let s = stored(&enc, w, h, ch, 8, &refs);
            let mut changed = 0;
            for level in 0..3 {
                let got = decode_level(&s, level, &DecodeOptions::default()).unwrap();
                let want = interlace::subsample(&px, w, h, ch, level_stride(3, level));
                assert_eq!(got.data.len(), want.len());
                for (&a, &b) in got.data.iter().zip(&want) {
                    assert!(a.abs_diff(b) <= 3, "{profile:?} level {level}: {a} vs {b}");
                    changed += (a != b) as usize;
                }
            }
            assert!(changed > 0, "{profile:?}: no sample changed");
            // The same payload checked against a source 4 away from it at one sample: not a
            // match.
            let decoded = decode_level(&s, 2, &DecodeOptions::default()).unwrap();
            let mut far = px.clone();
            let d = decoded.data[5];
            far[5] = if d >= 4 { d - 4 } else { d + 4 };
            let far_raw = RawImage {
                samples: Samples::U8(&far),
                ..raw
            };
            assert!(!enc.matches(&far_raw, &DecodeOptions::default()).unwrap());
        }
    }

    #[test]
    fn sixteen_bit_records_round_trip() {
        let (w, h) = (19u32, 30u32);
        let px: Vec<u16> = (0..w * h).map(|i| (i * 2311 % 65536) as u16).collect();
        let raw = RawImage {
            width: w,
            height: h,
            color: ColorType::Gray,
            samples: Samples::U16(&px),
        };
        let opts = interlaced(3);
        let enc =
            encode_levels(&raw, &opts, &EncodeOptions::for_profile(Profile::Compact)).unwrap();
        let refs: Vec<&[u8]> = enc.payloads.iter().map(|p| p.as_slice()).collect();
        let s = stored(&enc, w, h, 1, 16, &refs);
        let top = decode_level(&s, 2, &DecodeOptions::default()).unwrap();
        assert_eq!(top.data, bytemuck::cast_slice::<u16, u8>(&px));
    }

    /// Decoding only the window a crop needs gives that window exactly (flat records), and the
    /// whole level where it cannot skip (interlaced records).
    #[test]
    fn row_window_decodes_match_the_full_decode() {
        let (w, h, ch) = (70u32, 150u32, 3u8);
        let px = image_u8(w, h, ch);
        let raw = raw_u8(&px, w, h, ColorType::Rgb);
        let mut enc_opts = EncodeOptions::for_profile(Profile::Fast);
        enc_opts.patch_log2 = 5;
        for max_overhead in [0.0, f64::INFINITY] {
            let opts = ProgressiveOptions {
                levels: 2,
                max_overhead,
            };
            let enc = encode_levels(&raw, &opts, &enc_opts).unwrap();
            let refs: Vec<&[u8]> = enc.payloads.iter().map(|p| p.as_slice()).collect();
            let s = stored(&enc, w, h, ch, 8, &refs);
            let full = decode_level(&s, 1, &DecodeOptions::default()).unwrap();
            let part =
                decode_level_window(&s, 1, 33..50, 40..90, &DecodeOptions::default()).unwrap();
            let row = (w * ch as u32) as usize;
            let px = ch as usize;
            for y in 40..90 {
                let span = y * row + 33 * px..y * row + 50 * px;
                assert_eq!(part.data[span.clone()], full.data[span]);
            }
            if enc.scheme == LevelScheme::Flat {
                // Patches of 32: rows 0..32 and 96.., columns 0..32 were skipped.
                assert!(part.data[..32 * row].iter().all(|&b| b == 0));
                assert!(part.data[96 * row..].iter().all(|&b| b == 0));
                for y in 32..96 {
                    assert!(part.data[y * row..y * row + 32 * px]
                        .iter()
                        .all(|&b| b == 0));
                }
            } else {
                assert_eq!(part, full);
            }
        }
    }

    /// A payload of the wrong shape (here: two levels swapped) is a clear error naming the
    /// level, not a wrong image or a panic.
    #[test]
    fn swapped_payloads_are_rejected() {
        let (w, h, ch) = (40u32, 40u32, 1u8);
        let px = image_u8(w, h, ch);
        let raw = raw_u8(&px, w, h, ColorType::Gray);
        let opts = interlaced(3);
        let enc = encode_levels(
            &raw,
            &opts,
            &EncodeOptions::for_profile(crate::Profile::Fast),
        )
        .unwrap();
        let refs: Vec<&[u8]> = vec![&enc.payloads[1], &enc.payloads[0], &enc.payloads[2]];
        let s = stored(&enc, w, h, ch, 8, &refs);
        let err = decode_level(&s, 2, &DecodeOptions::default()).unwrap_err();
        assert!(
            matches!(
                err,
                crate::error::Error::Format(FormatError::LevelShape { level: 0, .. })
            ),
            "{err}"
        );
        // Wrong channel count in the index.
        let refs: Vec<&[u8]> = enc.payloads.iter().map(|p| p.as_slice()).collect();
        let mut s = stored(&enc, w, h, ch, 8, &refs);
        s.channels = 3;
        let err = decode_level(&s, 0, &DecodeOptions::default()).unwrap_err();
        assert!(err.to_string().contains("channels"), "{err}");
        assert!(decode_level(&s, 3, &DecodeOptions::default()).is_err());
    }
}
