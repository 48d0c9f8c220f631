//! The codecs compared (l3 fast and compact, png, zune-png, qoi, WebP lossless via `image`):
//! what each is, and how it encodes the reference pixels and decodes its own file.

use std::io::Cursor;

use anyhow::{anyhow, Result};

use l3::{ColorType, DecodeOptions, EncodeOptions, Profile};

use crate::images::Pixels;

/// How a codec is run; every codec encodes the reference pixels and decodes its own file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Codec {
    L3 {
        profile: Profile,
        parallel: bool,
    },
    /// The compact profile with 128-px patches, one thread: what the larger patches buy on
    /// the CPU (the default stays 64 px for the GPU's sake and the loader's crops).
    L3Compact128,
    /// The fast profile with 128-px patches, one thread: half the rows of 64-px patches, so
    /// less per-row work (the default stays 64 px, as for compact).
    L3Fast128,
    PngDefault,
    PngBest,
    ZunePng,
    Qoi,
    WebpLossless,
}

impl Codec {
    pub const ALL: [Codec; 11] = [
        Codec::L3_FAST_1,
        Codec::L3 {
            profile: Profile::Fast,
            parallel: true,
        },
        Codec::L3_COMPACT_1,
        Codec::L3 {
            profile: Profile::Compact,
            parallel: true,
        },
        Codec::L3Compact128,
        Codec::L3Fast128,
        Codec::PngDefault,
        Codec::PngBest,
        Codec::ZunePng,
        Codec::Qoi,
        Codec::WebpLossless,
    ];

    /// The one-thread l3 rows: the references of the "x" speed columns.
    pub const L3_FAST_1: Codec = Codec::L3 {
        profile: Profile::Fast,
        parallel: false,
    };
    pub const L3_COMPACT_1: Codec = Codec::L3 {
        profile: Profile::Compact,
        parallel: false,
    };

    pub fn name(self) -> &'static str {
        match self {
            Codec::L3 {
                profile: Profile::Fast,
                ..
            } => "l3 fast",
            Codec::L3 {
                profile: Profile::Compact,
                ..
            } => "l3 compact",
            Codec::L3Compact128 => "l3 compact 128px",
            Codec::L3Fast128 => "l3 fast 128px",
            Codec::PngDefault => "png (default)",
            Codec::PngBest => "png (best)",
            Codec::ZunePng => "zune-png",
            Codec::Qoi => "qoi",
            Codec::WebpLossless => "webp lossless",
        }
    }

    /// The options an l3 codec encodes with; `None` for the other codecs.
    pub fn l3_options(self) -> Option<EncodeOptions> {
        match self {
            Codec::L3 { profile, parallel } => Some(EncodeOptions {
                profile: l3::ProfileOptions::default_for(profile),
                parallel,
                ..EncodeOptions::default()
            }),
            Codec::L3Compact128 => Some(EncodeOptions {
                profile: l3::ProfileOptions::default_for(Profile::Compact),
                patch_log2: 7,
                parallel: false,
                ..EncodeOptions::default()
            }),
            Codec::L3Fast128 => Some(EncodeOptions {
                profile: l3::ProfileOptions::default_for(Profile::Fast),
                patch_log2: 7,
                parallel: false,
                ..EncodeOptions::default()
            }),
            _ => None,
        }
    }

    /// The l3 profile; `None` for the other codecs.
    pub fn profile(self) -> Option<Profile> {
        self.l3_options().map(|o| o.profile.profile())
    }

    /// The l3 patch side in pixels; `None` for the other codecs.
    pub fn patch_size(self) -> Option<u32> {
        self.l3_options().map(|o| 1 << o.patch_log2)
    }

    /// Whether this codec decodes on the whole thread pool.
    pub fn parallel(self) -> bool {
        matches!(self, Codec::L3 { parallel: true, .. })
    }

    pub fn threads(self) -> String {
        if self.parallel() {
            format!("{}", rayon::current_num_threads())
        } else {
            "1".into()
        }
    }

    pub fn note(self) -> &'static str {
        match self {
            Codec::L3 {
                profile: Profile::Fast,
                ..
            } => "format version 1, default options (64x64 patches, best predictor)",
            Codec::L3 {
                profile: Profile::Compact,
                ..
            } => {
                "format version 2, default compact options (64x64 patches, all six predictors, \
                 subtract-green and pair tokens tried per patch)"
            }
            Codec::L3Compact128 => "format version 2, default compact options, 128x128 patches",
            Codec::L3Fast128 => "format version 1, default fast options, 128x128 patches",
            Codec::PngDefault => "png crate, Compression::Balanced (its default)",
            Codec::PngBest => "png crate, Compression::High",
            Codec::ZunePng => "zune-png decoder on the png (default) file; encode column = none",
            Codec::Qoi => "qoi crate; 8-bit RGB/RGBA only",
            Codec::WebpLossless => {
                "image crate WebPEncoder::new_lossless / WebPDecoder; 8-bit only"
            }
        }
    }

    pub fn supports(self, p: &Pixels) -> bool {
        match self {
            Codec::Qoi => p.depth == 8 && matches!(p.color, ColorType::Rgb | ColorType::Rgba),
            Codec::WebpLossless => p.depth == 8,
            _ => true,
        }
    }

    /// Whether the encode time is this codec's own (zune-png has no encoder here).
    pub fn times_encode(self) -> bool {
        self != Codec::ZunePng
    }

    pub fn encode(self, p: &Pixels) -> Result<Vec<u8>> {
        match self {
            Codec::L3 { .. } | Codec::L3Compact128 | Codec::L3Fast128 => {
                let options = self.l3_options().expect("an l3 codec");
                Ok(l3::encode::encode(&p.raw(), &options)?)
            }
            Codec::PngDefault | Codec::ZunePng => png_encode(p, png::Compression::Balanced),
            Codec::PngBest => png_encode(p, png::Compression::High),
            Codec::Qoi => Ok(qoi::encode_to_vec(&p.bytes, p.width, p.height)?),
            Codec::WebpLossless => {
                use image::ExtendedColorType as E;
                let ct = match p.color {
                    ColorType::Gray => E::L8,
                    ColorType::GrayAlpha => E::La8,
                    ColorType::Rgb => E::Rgb8,
                    ColorType::Rgba => E::Rgba8,
                };
                let mut out = Vec::new();
                image::codecs::webp::WebPEncoder::new_lossless(&mut out)
                    .encode(&p.bytes, p.width, p.height, ct)?;
                Ok(out)
            }
        }
    }

    /// Decodes into `out` (resized as needed) in the decoder's natural layout. Every decoder
    /// writes into the caller's buffer through its own API for that (no decoder pays for
    /// allocating and first touching a fresh output that the others do not).
    pub fn decode(self, data: &[u8], out: &mut Vec<u8>) -> Result<()> {
        match self {
            // The file's header says which profile it is.
            Codec::L3 { .. } | Codec::L3Compact128 | Codec::L3Fast128 => {
                let parallel = self.parallel();
                let h = l3::read_header(data)?;
                out.resize(h.output_bytes() as usize, 0);
                l3::decode_into(
                    data,
                    out,
                    &DecodeOptions {
                        parallel,
                        ..DecodeOptions::default()
                    },
                )?;
            }
            Codec::PngDefault | Codec::PngBest => {
                let mut reader = png::Decoder::new(Cursor::new(data)).read_info()?;
                let n = reader
                    .output_buffer_size()
                    .ok_or_else(|| anyhow!("png output too large"))?;
                out.resize(n, 0);
                let info = reader.next_frame(out)?;
                out.truncate(info.buffer_size());
            }
            Codec::ZunePng => {
                use zune_core::bytestream::ZCursor;
                use zune_core::options::DecoderOptions;
                let opts =
                    DecoderOptions::default().set_byte_endian(zune_core::bit_depth::ByteEndian::LE);
                let mut dec = zune_png::PngDecoder::new_with_options(ZCursor::new(data), opts);
                dec.decode_headers()
                    .map_err(|e| anyhow!("zune-png: {e:?}"))?;
                let n = dec
                    .output_buffer_size()
                    .ok_or_else(|| anyhow!("zune-png output too large"))?;
                out.resize(n, 0);
                dec.decode_into(out)
                    .map_err(|e| anyhow!("zune-png: {e:?}"))?;
            }
            Codec::Qoi => {
                out.resize(qoi::decode_header(data)?.n_bytes(), 0);
                qoi::decode_to_buf(&mut out[..], data)?;
            }
            Codec::WebpLossless => {
                use image::ImageDecoder;
                let dec = image::codecs::webp::WebPDecoder::new(Cursor::new(data))?;
                out.resize(dec.total_bytes() as usize, 0);
                dec.read_image(out)?;
            }
        }
        Ok(())
    }

    /// The decoded output rearranged to the reference layout (untimed; for verification).
    pub fn canonical(self, decoded: &[u8], p: &Pixels) -> Vec<u8> {
        match self {
            Codec::PngDefault | Codec::PngBest if p.depth == 16 => decoded
                .chunks_exact(2)
                .flat_map(|c| u16::from_be_bytes([c[0], c[1]]).to_ne_bytes())
                .collect(),
            Codec::WebpLossless => {
                // The WebP decoder returns RGB(A); gray inputs come back with R = G = B.
                let n = p.pixels() as usize;
                let dc = if decoded.len() == n * 4 { 4 } else { 3 };
                match p.color {
                    ColorType::Gray => decoded.chunks_exact(dc).map(|c| c[0]).collect(),
                    ColorType::GrayAlpha if dc == 4 => {
                        decoded.chunks_exact(4).flat_map(|c| [c[0], c[3]]).collect()
                    }
                    _ => decoded.to_vec(),
                }
            }
            _ => decoded.to_vec(),
        }
    }
}

pub fn png_encode(p: &Pixels, compression: png::Compression) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    {
        let mut enc = png::Encoder::new(&mut out, p.width, p.height);
        enc.set_color(match p.color {
            ColorType::Gray => png::ColorType::Grayscale,
            ColorType::GrayAlpha => png::ColorType::GrayscaleAlpha,
            ColorType::Rgb => png::ColorType::Rgb,
            ColorType::Rgba => png::ColorType::Rgba,
        });
        enc.set_depth(if p.depth == 8 {
            png::BitDepth::Eight
        } else {
            png::BitDepth::Sixteen
        });
        enc.set_compression(compression);
        let mut w = enc.write_header()?;
        if p.depth == 8 {
            w.write_image_data(&p.bytes)?;
        } else {
            let be: Vec<u8> = p
                .bytes
                .chunks_exact(2)
                .flat_map(|c| u16::from_ne_bytes([c[0], c[1]]).to_be_bytes())
                .collect();
            w.write_image_data(&be)?;
        }
        w.finish()?;
    }
    Ok(out)
}
