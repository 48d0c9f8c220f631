//! The codecs compared (l3 fast and compact, png, zune-png, qoi, WebP lossless via `image`)
//! and their per-image measurements, plus the memcpy reference row.

use std::io::Cursor;

use anyhow::{anyhow, Context, Result};
use rayon::prelude::*;

use l3::{ColorType, DecodeOptions, EncodeOptions, Profile};

use crate::args::Args;
use crate::images::Pixels;
use crate::measure::{measure, stats_of, timed_reps, Stats};

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
    PngDefault,
    PngBest,
    ZunePng,
    Qoi,
    WebpLossless,
}

impl Codec {
    pub const ALL: [Codec; 10] = [
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
            Codec::L3 { .. } | Codec::L3Compact128 => {
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
            Codec::L3 { .. } | Codec::L3Compact128 => {
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

/// Results of one codec on one image.
#[derive(Clone, Debug)]
pub struct Cell {
    pub size: u64,
    pub enc: Option<Stats>,
    pub dec: Stats,
    pub lossless: bool,
}

pub struct CodecResult {
    pub codec: Codec,
    pub cells: Vec<Option<Cell>>, // one per image; None = unsupported
}

/// One codec's encoded file of one image, its encode timing, and whether a decode of it
/// gave back the image (the untimed warm-up decode).
struct Prepared {
    file: Vec<u8>,
    enc: Option<Stats>,
    lossless: bool,
    /// The warm-up decode's seconds (how many timed decodes fit the time cap).
    warm: f64,
}

/// Encodes `p` with `codec` (timed when the codec encodes) and decodes it once: `None` when
/// the codec does not take the image.
fn prepare(codec: Codec, p: &Pixels, args: &Args) -> Result<Option<Prepared>> {
    if !codec.supports(p) {
        return Ok(None);
    }
    let (enc, file) = if codec.times_encode() {
        let (s, f) = measure(args.reps, args.max_seconds, || codec.encode(p))
            .with_context(|| format!("{} encoding {}", codec.name(), p.name))?;
        (Some(s), f)
    } else {
        (None, codec.encode(p)?)
    };
    let mut out = Vec::new();
    let t = std::time::Instant::now();
    codec
        .decode(&file, &mut out)
        .with_context(|| format!("{} decoding {}", codec.name(), p.name))?;
    let warm = t.elapsed().as_secs_f64();
    let lossless = codec.canonical(&out, p) == p.bytes;
    if !lossless {
        eprintln!("  NOT LOSSLESS: {} on {}", codec.name(), p.name);
    }
    Ok(Some(Prepared {
        file,
        enc,
        lossless,
        warm,
    }))
}

/// Times the decoders of one image in alternation, one decode of each per round, so that a
/// change in the machine's speed (a neighbour on a shared VM) falls on all of them alike
/// instead of on whichever codec was being measured then. A codec takes part in up to
/// `reps` rounds, fewer when its warm-up says they would exceed `max_seconds`.
fn decode_in_rounds(
    codecs: &[Codec],
    prepared: &[Option<Prepared>],
    p: &Pixels,
    args: &Args,
) -> Result<Vec<Option<Cell>>> {
    let rounds: Vec<usize> = prepared
        .iter()
        .map(|c| {
            c.as_ref()
                .map_or(0, |c| timed_reps(args.reps, args.max_seconds, c.warm))
        })
        .collect();
    let mut times: Vec<Vec<f64>> = rounds.iter().map(|&n| Vec::with_capacity(n)).collect();
    let mut out = Vec::new();
    for round in 0..rounds.iter().copied().max().unwrap_or(0) {
        for (k, (codec, c)) in codecs.iter().zip(prepared).enumerate() {
            let Some(c) = c.as_ref().filter(|_| round < rounds[k]) else {
                continue;
            };
            let t = std::time::Instant::now();
            codec
                .decode(&c.file, &mut out)
                .with_context(|| format!("{} decoding {}", codec.name(), p.name))?;
            times[k].push(t.elapsed().as_secs_f64());
            std::hint::black_box(&out);
        }
    }
    Ok(prepared
        .iter()
        .zip(times)
        .map(|(c, t)| {
            c.as_ref().map(|c| Cell {
                size: c.file.len() as u64,
                enc: c.enc,
                dec: stats_of(t),
                lossless: c.lossless,
            })
        })
        .collect())
}

/// One-thread or all-thread memcpy of an image's raw size.
fn bench_memcpy(p: &Pixels, args: &Args, parallel: bool) -> Result<Stats> {
    let mut dst = vec![1u8; p.bytes.len()];
    let (s, ()) = measure(args.reps, args.max_seconds, || {
        if parallel {
            let chunk = (p.bytes.len() / (rayon::current_num_threads() * 4)).max(1 << 16);
            dst.par_chunks_mut(chunk)
                .zip(p.bytes.par_chunks(chunk))
                .for_each(|(d, s)| d.copy_from_slice(s));
        } else {
            dst.copy_from_slice(&p.bytes);
        }
        std::hint::black_box(&dst);
        Ok(())
    })?;
    Ok(s)
}

/// The codec section: every codec and the memcpy reference rows on every image.
pub struct CodecRun {
    pub results: Vec<CodecResult>,
    pub memcpy_1: Stats,
    pub memcpy_n: Stats,
    /// Each image's one-thread memcpy (the per-class table's ceiling).
    pub memcpy_1_each: Vec<Stats>,
}

pub fn bench_codecs(images: &[Pixels], args: &Args) -> Result<CodecRun> {
    let codecs: Vec<Codec> = Codec::ALL.into_iter().filter(|_| !args.no_codecs).collect();
    let mut results: Vec<CodecResult> = codecs
        .iter()
        .map(|&codec| CodecResult {
            codec,
            cells: Vec::with_capacity(images.len()),
        })
        .collect();
    let (mut memcpy_1, mut memcpy_n) = (Stats::default(), Stats::default());
    let mut memcpy_1_each = Vec::with_capacity(images.len());
    // Image by image, every codec and the memcpy rows in turn: the ratios between codecs
    // compare runs minutes apart at most, so a machine whose speed drifts (shared VMs) moves
    // all of them together.
    for (i, p) in images.iter().enumerate() {
        eprintln!("  [{}/{}] {}...", i + 1, images.len(), p.name);
        // One-thread measurements first (with the one-thread memcpy), then the parallel
        // ones, with a pause after those so that the pool's workers are asleep before the
        // next image's one-thread runs (on a 2-core machine a spinning worker takes half of
        // it).
        for parallel in [false, true] {
            let group: Vec<usize> = (0..results.len())
                .filter(|&k| results[k].codec.parallel() == parallel)
                .collect();
            let codecs: Vec<Codec> = group.iter().map(|&k| results[k].codec).collect();
            let prepared = codecs
                .iter()
                .map(|&codec| prepare(codec, p, args))
                .collect::<Result<Vec<_>>>()?;
            let cells = decode_in_rounds(&codecs, &prepared, p, args)?;
            for (&k, cell) in group.iter().zip(cells) {
                results[k].cells.push(cell);
            }
            if parallel {
                memcpy_n = memcpy_n.add(bench_memcpy(p, args, true)?);
            } else {
                let one = bench_memcpy(p, args, false)?;
                memcpy_1 = memcpy_1.add(one);
                memcpy_1_each.push(one);
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    Ok(CodecRun {
        results,
        memcpy_1,
        memcpy_n,
        memcpy_1_each,
    })
}
