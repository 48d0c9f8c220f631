//! `l3-bench`: measures l3 against peer lossless codecs on the same decoded pixels.
//!
//! Build and run (release, with the peer codecs of the `bench` feature):
//!
//! ```text
//! cargo run --release --features bench --bin l3-bench -- [FILES|FOLDERS] [--reps 5]
//!     [--json PATH] [--markdown PATH] [--list-adapters] [--no-gpu]
//! ```
//!
//! For every input image (default: the bundled `samples/`), each codec encodes the pixels the
//! `image` crate decoded from the file, then decodes its own output; sizes, throughput and a
//! bit-exact round-trip check are reported; l3 runs as both of its profiles, "l3 fast" (format
//! version 1) and "l3 compact" (version 2). Further sections: a CPU memcpy of the output
//! size, a data-preparation pipeline (files on disk to normalised f32 CHW tensors), a scaling
//! run over image sizes, and wgpu rows (adapter, buffer copy bandwidth, GPU decoder when the
//! crate has one). See BENCHMARKS.md.

use std::fmt::Write as _;
use std::io::Cursor;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{anyhow, bail, Context, Result};
use clap::Parser;
use rayon::prelude::*;

use l3::{ColorType, DecodeOptions, EncodeOptions, Profile, RawImage, Samples};

#[derive(Parser, Debug)]
#[command(
    name = "l3-bench",
    about = "Compare l3 with PNG, QOI and WebP lossless on sizes and speeds"
)]
struct Args {
    /// Image files or folders (searched recursively). Default: the crate's `samples/`.
    inputs: Vec<PathBuf>,
    /// Timed repetitions per measurement (after one warm-up run); median, min and max kept.
    #[arg(long, default_value_t = 5)]
    reps: usize,
    /// Cap on the timed seconds of one (codec, image) measurement: fewer reps (at least 1)
    /// are run when the warm-up shows that `reps` would take longer.
    #[arg(long, default_value_t = 4.0)]
    max_seconds: f64,
    /// Write all results as JSON to this path.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Write the report as Markdown (the format of BENCHMARKS.md) to this path.
    #[arg(long)]
    markdown: Option<PathBuf>,
    /// List the wgpu adapters (backend, device type, driver) and exit.
    #[arg(long)]
    list_adapters: bool,
    /// Skip the wgpu section.
    #[arg(long)]
    no_gpu: bool,
    /// Skip the data-preparation pipeline section.
    #[arg(long)]
    no_pipeline: bool,
    /// Skip the scaling section.
    #[arg(long)]
    no_scaling: bool,
    /// Sizes of the scaling run in megapixels.
    #[arg(long, value_delimiter = ',', default_value = "1,4,16")]
    scaling_mp: Vec<f64>,
    /// Print the per-image table on stdout too (it is always in the Markdown and JSON).
    #[arg(long)]
    per_image: bool,
}

// ---------------------------------------------------------------------------------------------
// Images

/// Decoded reference pixels: interleaved, row-major, 16-bit samples in native byte order.
struct Pixels {
    name: String,
    width: u32,
    height: u32,
    color: ColorType,
    depth: u8,
    bytes: Vec<u8>,
}

impl Pixels {
    fn channels(&self) -> usize {
        self.color.channels() as usize
    }
    fn pixels(&self) -> u64 {
        self.width as u64 * self.height as u64
    }
    fn raw(&self) -> RawImage<'_> {
        RawImage {
            width: self.width,
            height: self.height,
            color: self.color,
            samples: if self.depth == 8 {
                Samples::U8(&self.bytes)
            } else {
                Samples::U16(bytemuck::cast_slice(&self.bytes))
            },
        }
    }
    fn kind(&self) -> String {
        format!("{} {}-bit", self.color.name(), self.depth)
    }
}

fn pixels_from_dynamic(name: String, img: &image::DynamicImage) -> Option<Pixels> {
    use image::DynamicImage as D;
    let (color, depth) = match img {
        D::ImageLuma8(_) => (ColorType::Gray, 8),
        D::ImageLumaA8(_) => (ColorType::GrayAlpha, 8),
        D::ImageRgb8(_) => (ColorType::Rgb, 8),
        D::ImageRgba8(_) => (ColorType::Rgba, 8),
        D::ImageLuma16(_) => (ColorType::Gray, 16),
        D::ImageLumaA16(_) => (ColorType::GrayAlpha, 16),
        D::ImageRgb16(_) => (ColorType::Rgb, 16),
        D::ImageRgba16(_) => (ColorType::Rgba, 16),
        _ => return None,
    };
    Some(Pixels {
        name,
        width: img.width(),
        height: img.height(),
        color,
        depth,
        bytes: img.as_bytes().to_vec(),
    })
}

const IMAGE_EXTENSIONS: &[&str] = &[
    "png", "jpg", "jpeg", "tif", "tiff", "bmp", "webp", "gif", "qoi", "tga", "pnm", "ppm", "pgm",
];

fn collect_files(inputs: &[PathBuf]) -> Result<Vec<PathBuf>> {
    fn walk(p: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
        if p.is_dir() {
            let mut entries: Vec<PathBuf> = std::fs::read_dir(p)
                .with_context(|| format!("reading {}", p.display()))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .collect();
            entries.sort();
            for e in entries {
                walk(&e, out)?;
            }
        } else {
            let ext = p
                .extension()
                .and_then(|e| e.to_str())
                .unwrap_or("")
                .to_ascii_lowercase();
            if IMAGE_EXTENSIONS.contains(&ext.as_str()) {
                out.push(p.to_path_buf());
            }
        }
        Ok(())
    }
    let mut out = Vec::new();
    for p in inputs {
        if !p.exists() {
            bail!("{} does not exist", p.display());
        }
        if p.is_file() {
            out.push(p.clone());
        } else {
            walk(p, &mut out)?;
        }
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------------------
// Timing

#[derive(Clone, Copy, Debug, Default)]
struct Stats {
    median: f64,
    min: f64,
    max: f64,
    reps: usize,
}

impl Stats {
    fn add(self, o: Stats) -> Stats {
        Stats {
            median: self.median + o.median,
            min: self.min + o.min,
            max: self.max + o.max,
            reps: if self.reps == 0 {
                o.reps
            } else {
                self.reps.min(o.reps)
            },
        }
    }
}

/// One warm-up call (whose result is returned, for verification), then up to `reps` timed
/// calls; fewer when the warm-up says `reps` calls would exceed `max_seconds`.
fn measure<T>(
    reps: usize,
    max_seconds: f64,
    mut f: impl FnMut() -> Result<T>,
) -> Result<(Stats, T)> {
    let t0 = Instant::now();
    let first = f()?;
    let warm = t0.elapsed().as_secs_f64();
    let n = if warm * reps as f64 > max_seconds {
        ((max_seconds / warm.max(1e-9)) as usize).clamp(1, reps.max(1))
    } else {
        reps.max(1)
    };
    let mut times = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        let r = f()?;
        times.push(t.elapsed().as_secs_f64());
        std::hint::black_box(&r);
        drop(r);
    }
    Ok((stats_of(times), first))
}

/// Median, min and max of `times` (seconds; at least one).
fn stats_of(mut times: Vec<f64>) -> Stats {
    let n = times.len();
    times.sort_by(f64::total_cmp);
    let median = if n % 2 == 1 {
        times[n / 2]
    } else {
        (times[n / 2 - 1] + times[n / 2]) / 2.0
    };
    Stats {
        median,
        min: times[0],
        max: times[n - 1],
        reps: n,
    }
}

// ---------------------------------------------------------------------------------------------
// Codecs

/// How a codec is run; every codec encodes the reference pixels and decodes its own file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Codec {
    L3 { profile: Profile, parallel: bool },
    PngDefault,
    PngBest,
    ZunePng,
    Qoi,
    WebpLossless,
}

impl Codec {
    const ALL: [Codec; 9] = [
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
        Codec::PngDefault,
        Codec::PngBest,
        Codec::ZunePng,
        Codec::Qoi,
        Codec::WebpLossless,
    ];

    /// The one-thread l3 rows: the references of the "x" speed columns.
    const L3_FAST_1: Codec = Codec::L3 {
        profile: Profile::Fast,
        parallel: false,
    };
    const L3_COMPACT_1: Codec = Codec::L3 {
        profile: Profile::Compact,
        parallel: false,
    };

    fn name(self) -> &'static str {
        match self {
            Codec::L3 {
                profile: Profile::Fast,
                ..
            } => "l3 fast",
            Codec::L3 {
                profile: Profile::Compact,
                ..
            } => "l3 compact",
            Codec::PngDefault => "png (default)",
            Codec::PngBest => "png (best)",
            Codec::ZunePng => "zune-png",
            Codec::Qoi => "qoi",
            Codec::WebpLossless => "webp lossless",
        }
    }

    fn threads(self) -> String {
        match self {
            Codec::L3 { parallel: true, .. } => format!("{}", rayon::current_num_threads()),
            _ => "1".into(),
        }
    }

    fn note(self) -> &'static str {
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
            Codec::PngDefault => "png crate, Compression::Balanced (its default)",
            Codec::PngBest => "png crate, Compression::High",
            Codec::ZunePng => "zune-png decoder on the png (default) file; encode column = none",
            Codec::Qoi => "qoi crate; 8-bit RGB/RGBA only",
            Codec::WebpLossless => {
                "image crate WebPEncoder::new_lossless / WebPDecoder; 8-bit only"
            }
        }
    }

    fn supports(self, p: &Pixels) -> bool {
        match self {
            Codec::Qoi => p.depth == 8 && matches!(p.color, ColorType::Rgb | ColorType::Rgba),
            Codec::WebpLossless => p.depth == 8,
            _ => true,
        }
    }

    /// Whether the encode time is this codec's own (zune-png has no encoder here).
    fn times_encode(self) -> bool {
        self != Codec::ZunePng
    }

    fn encode(self, p: &Pixels) -> Result<Vec<u8>> {
        match self {
            Codec::L3 { profile, parallel } => Ok(l3::encode::encode(
                &p.raw(),
                &EncodeOptions {
                    profile,
                    parallel,
                    ..EncodeOptions::default()
                },
            )?),
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

    /// Decodes into `out` (resized as needed) in the decoder's natural layout.
    fn decode(self, data: &[u8], out: &mut Vec<u8>) -> Result<()> {
        match self {
            // The file's header says which profile it is.
            Codec::L3 { parallel, .. } => {
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
                *out = dec.decode_raw().map_err(|e| anyhow!("zune-png: {e:?}"))?;
            }
            Codec::Qoi => {
                *out = qoi::decode_to_vec(data)?.1;
            }
            Codec::WebpLossless => {
                let dec = image::codecs::webp::WebPDecoder::new(Cursor::new(data))?;
                *out = image::DynamicImage::from_decoder(dec)?.into_bytes();
            }
        }
        Ok(())
    }

    /// The decoded output rearranged to the reference layout (untimed; for verification).
    fn canonical(self, decoded: &[u8], p: &Pixels) -> Vec<u8> {
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

fn png_encode(p: &Pixels, compression: png::Compression) -> Result<Vec<u8>> {
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
struct Cell {
    size: u64,
    enc: Option<Stats>,
    dec: Stats,
    lossless: bool,
}

struct CodecResult {
    codec: Codec,
    cells: Vec<Option<Cell>>, // one per image; None = unsupported
}

fn bench_codec(codec: Codec, images: &[Pixels], args: &Args) -> Result<CodecResult> {
    let mut cells = Vec::new();
    for p in images {
        if !codec.supports(p) {
            cells.push(None);
            continue;
        }
        let (enc, file) = if codec.times_encode() {
            let (s, f) = measure(args.reps, args.max_seconds, || codec.encode(p))
                .with_context(|| format!("{} encoding {}", codec.name(), p.name))?;
            (Some(s), f)
        } else {
            (None, codec.encode(p)?)
        };
        let mut out = Vec::new();
        let (dec, ()) = measure(args.reps, args.max_seconds, || {
            codec.decode(&file, &mut out)
        })
        .with_context(|| format!("{} decoding {}", codec.name(), p.name))?;
        let lossless = codec.canonical(&out, p) == p.bytes;
        if !lossless {
            eprintln!("  NOT LOSSLESS: {} on {}", codec.name(), p.name);
        }
        cells.push(Some(Cell {
            size: file.len() as u64,
            enc,
            dec,
            lossless,
        }));
    }
    Ok(CodecResult { codec, cells })
}

/// Single-thread and all-thread memcpy of each image's raw size.
fn bench_memcpy(images: &[Pixels], args: &Args, parallel: bool) -> Result<Stats> {
    let mut total = Stats::default();
    for p in images {
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
        total = total.add(s);
    }
    Ok(total)
}

// ---------------------------------------------------------------------------------------------
// Data-preparation pipeline: files -> normalised f32 CHW tensors

fn to_chw(bytes: &[u8], channels: usize, depth: u8, w: usize, h: usize) -> Vec<f32> {
    let plane = w * h;
    let mut out = vec![0f32; plane * channels];
    if depth == 8 {
        let scale = 1.0 / 255.0;
        for (i, px) in bytes.chunks_exact(channels).enumerate() {
            for (c, &v) in px.iter().enumerate() {
                out[c * plane + i] = v as f32 * scale;
            }
        }
    } else {
        let scale = 1.0 / 65535.0;
        let s: &[u16] = bytemuck::cast_slice(bytes);
        for (i, px) in s.chunks_exact(channels).enumerate() {
            for (c, &v) in px.iter().enumerate() {
                out[c * plane + i] = v as f32 * scale;
            }
        }
    }
    out
}

struct PipelineRow {
    name: String,
    /// Err: the row could not be measured (e.g. the GPU decoder does not take this profile).
    stats: std::result::Result<Stats, String>,
    images: usize,
    pixels: u64,
    disk_bytes: u64,
}

fn bench_pipeline(
    files: &[PathBuf],
    images: &[Pixels],
    args: &Args,
    gpu: Option<&l3::gpu::GpuDecoder>,
) -> Result<Vec<PipelineRow>> {
    let pixels: u64 = images.iter().map(Pixels::pixels).sum();
    let size_of = |fs: &[PathBuf]| -> u64 {
        fs.iter()
            .map(|f| std::fs::metadata(f).map(|m| m.len()).unwrap_or(0))
            .sum()
    };
    let budget = args.max_seconds * 4.0;

    let image_path = |f: &PathBuf| -> Result<Vec<f32>> {
        let data = std::fs::read(f)?;
        let img = image::load_from_memory(&data)?;
        let p = pixels_from_dynamic(String::new(), &img).ok_or_else(|| anyhow!("pixel type"))?;
        Ok(to_chw(
            &p.bytes,
            p.channels(),
            p.depth,
            p.width as usize,
            p.height as usize,
        ))
    };

    let mut rows = Vec::new();
    let (s, batch) = measure(args.reps, budget, || {
        files.par_iter().map(image_path).collect::<Result<Vec<_>>>()
    })?;
    let png_floats: usize = batch.iter().map(Vec::len).sum();
    drop(batch);
    rows.push(PipelineRow {
        name: format!(
            "source files + image crate, rayon over files ({} threads)",
            rayon::current_num_threads()
        ),
        stats: Ok(s),
        images: files.len(),
        pixels,
        disk_bytes: size_of(files),
    });
    let dir = std::env::temp_dir().join(format!("l3-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let l3_rows = [Profile::Fast, Profile::Compact]
        .into_iter()
        .map(|profile| bench_pipeline_l3(&dir, profile, images, args, gpu, png_floats))
        .collect::<Result<Vec<_>>>();
    let _ = std::fs::remove_dir_all(&dir);
    rows.extend(l3_rows?.into_iter().flatten());
    Ok(rows)
}

/// The pipeline's rows of one l3 profile: CPU decoder over files in parallel, one file at a
/// time with the parallel decoder, and the GPU decoder (where there is one).
fn bench_pipeline_l3(
    dir: &Path,
    profile: Profile,
    images: &[Pixels],
    args: &Args,
    gpu: Option<&l3::gpu::GpuDecoder>,
    png_floats: usize,
) -> Result<Vec<PipelineRow>> {
    let label = format!("l3 {}", profile.name());
    // l3 copies of the inputs, written once (untimed) to a scratch folder.
    let mut l3_files = Vec::new();
    for (i, p) in images.iter().enumerate() {
        let path = dir.join(format!("{i}.{}.l3", profile.name()));
        let options = EncodeOptions {
            profile,
            ..EncodeOptions::default()
        };
        std::fs::write(&path, l3::encode::encode(&p.raw(), &options)?)?;
        l3_files.push(path);
    }
    let pixels: u64 = images.iter().map(Pixels::pixels).sum();
    let disk_bytes: u64 = l3_files
        .iter()
        .map(|f| std::fs::metadata(f).map(|m| m.len()).unwrap_or(0))
        .sum();
    let budget = args.max_seconds * 4.0;
    let row = |name: String, stats| PipelineRow {
        name,
        stats,
        images: images.len(),
        pixels,
        disk_bytes,
    };
    let l3_path = |f: &PathBuf, parallel: bool| -> Result<Vec<f32>> {
        let data = std::fs::read(f)?;
        let h = l3::read_header(&data)?;
        let mut px = vec![0u8; h.output_bytes() as usize];
        l3::decode_into(
            &data,
            &mut px,
            &DecodeOptions {
                parallel,
                ..DecodeOptions::default()
            },
        )?;
        Ok(to_chw(
            &px,
            h.channels() as usize,
            h.depth,
            h.width as usize,
            h.height as usize,
        ))
    };

    let mut rows = Vec::new();
    let (s, batch) = measure(args.reps, budget, || {
        l3_files
            .par_iter()
            .map(|f| l3_path(f, false))
            .collect::<Result<Vec<_>>>()
    })?;
    let l3_floats: usize = batch.iter().map(Vec::len).sum();
    drop(batch);
    if l3_floats != png_floats {
        eprintln!("  pipeline: {label} tensor sizes differ ({l3_floats} vs {png_floats} floats)");
    }
    rows.push(row(
        format!(
            "{label} files + l3 CPU decoder, rayon over files ({} threads)",
            rayon::current_num_threads()
        ),
        Ok(s),
    ));
    let (s, _) = measure(args.reps, budget, || {
        l3_files
            .iter()
            .map(|f| l3_path(f, true))
            .collect::<Result<Vec<_>>>()
    })?;
    rows.push(row(
        format!(
            "{label} files, one at a time, parallel decoder ({} threads)",
            rayon::current_num_threads()
        ),
        Ok(s),
    ));
    if let Some(dec) = gpu {
        // Files read from disk, decoded and normalised by the GPU decoder in one batch.
        let format = l3::gpu::OutputLayout::F32Chw(l3::gpu::Normalize::UNIT);
        let read_all = || -> Result<Vec<Vec<u8>>> {
            l3_files
                .iter()
                .map(|f| Ok(std::fs::read(f)?))
                .collect::<Result<Vec<_>>>()
        };
        let run = |read_back: bool| -> Result<Option<Vec<Vec<u8>>>> {
            let data = read_all()?;
            let refs: Vec<&[u8]> = data.iter().map(Vec::as_slice).collect();
            let batch = dec.decode_batch(&refs, format)?;
            Ok(if read_back {
                Some(batch.read_back()?)
            } else {
                gpu_wait(dec.device())?;
                None
            })
        };
        // A failure is a row, not the end of the report: the GPU decoder may not take every
        // profile yet.
        let unavailable = |e: anyhow::Error| {
            eprintln!("  pipeline: GPU decoder failed on {label} files: {e:#}");
            Err(format!("unavailable: {}", one_line(&format!("{e:#}"))))
        };
        let name = format!("{label} files + GPU decoder, one batch, tensors left on device");
        match guard(|| measure(args.reps, budget, || run(false))) {
            Ok((s, _)) => rows.push(row(name, Ok(s))),
            Err(e) => rows.push(row(name, unavailable(e))),
        }
        match guard(|| measure(args.reps, budget, || run(true))) {
            Ok((s, host)) => {
                // Compare with the CPU path's tensors.
                let mut worst = 0f32;
                for (h, p) in host.iter().flatten().zip(images) {
                    let g: &[f32] = bytemuck::cast_slice(h);
                    let c = to_chw(
                        &p.bytes,
                        p.channels(),
                        p.depth,
                        p.width as usize,
                        p.height as usize,
                    );
                    if g.len() != c.len() {
                        worst = f32::INFINITY;
                        continue;
                    }
                    for (a, b) in g.iter().zip(&c) {
                        worst = worst.max((a - b).abs());
                    }
                }
                if worst > 1e-6 {
                    eprintln!(
                        "  pipeline: GPU tensors of {label} files differ from the CPU's by up \
                         to {worst}"
                    );
                }
                rows.push(row(
                    format!(
                        "{label} files + GPU decoder, one batch, tensors read back (max |GPU - CPU| = {worst:.1e})"
                    ),
                    Ok(s),
                ));
            }
            Err(e) => rows.push(row(
                format!("{label} files + GPU decoder, one batch, tensors read back"),
                unavailable(e),
            )),
        }
    }
    Ok(rows)
}

// ---------------------------------------------------------------------------------------------
// Scaling: one sample tiled to several sizes

/// One l3 profile at one size (the png figures are shared by the size's rows).
struct ScalingRow {
    profile: Profile,
    width: u32,
    height: u32,
    raw_bytes: u64,
    l3_size: u64,
    l3_enc: Stats,
    l3_dec_1: Stats,
    l3_dec_n: Stats,
    png_dec: Stats,
}

fn tile(src: &Pixels, width: u32, height: u32) -> Pixels {
    let bpp = src.channels() * src.depth as usize / 8;
    let row = src.width as usize * bpp;
    let mut bytes = Vec::with_capacity(width as usize * height as usize * bpp);
    for y in 0..height as usize {
        // Mirror alternate tiles so that there are no seams.
        let ty = y / src.height as usize;
        let sy = y % src.height as usize;
        let sy = if ty % 2 == 1 {
            src.height as usize - 1 - sy
        } else {
            sy
        };
        let srow = &src.bytes[sy * row..(sy + 1) * row];
        let mut x = 0usize;
        while x < width as usize {
            let n = (width as usize - x).min(src.width as usize);
            bytes.extend_from_slice(&srow[..n * bpp]);
            x += n;
        }
    }
    Pixels {
        name: format!("{}x{}", width, height),
        width,
        height,
        color: src.color,
        depth: src.depth,
        bytes,
    }
}

fn bench_scaling(images: &[Pixels], args: &Args) -> Result<(String, Vec<ScalingRow>)> {
    let src = images
        .iter()
        .filter(|p| p.depth == 8 && p.color == ColorType::Rgb)
        .max_by_key(|p| p.pixels())
        .or_else(|| images.iter().max_by_key(|p| p.pixels()))
        .ok_or_else(|| anyhow!("no image"))?;
    let mut rows = Vec::new();
    for &mp in &args.scaling_mp {
        let side = (mp * 1e6).sqrt();
        let (w, h) = (
            (side * 4.0 / 3.0).round() as u32,
            (side * 3.0 / 4.0).round() as u32,
        );
        let p = tile(src, w.max(1), h.max(1));
        let mut out = Vec::new();
        let png_file = Codec::PngDefault.encode(&p)?;
        let (png_dec, ()) = measure(args.reps, args.max_seconds, || {
            Codec::PngDefault.decode(&png_file, &mut out)
        })?;
        for profile in [Profile::Fast, Profile::Compact] {
            let l3_1 = Codec::L3 {
                profile,
                parallel: false,
            };
            let l3_mt = Codec::L3 {
                profile,
                parallel: true,
            };
            let (l3_enc, file) = measure(args.reps, args.max_seconds, || l3_mt.encode(&p))?;
            let (l3_dec_1, ()) =
                measure(args.reps, args.max_seconds, || l3_1.decode(&file, &mut out))?;
            let (l3_dec_n, ()) = measure(args.reps, args.max_seconds, || {
                l3_mt.decode(&file, &mut out)
            })?;
            if out != p.bytes {
                eprintln!(
                    "  scaling: {} round trip NOT LOSSLESS at {}x{}",
                    l3_mt.name(),
                    w,
                    h
                );
            }
            rows.push(ScalingRow {
                profile,
                width: w,
                height: h,
                raw_bytes: p.bytes.len() as u64,
                l3_size: file.len() as u64,
                l3_enc,
                l3_dec_1,
                l3_dec_n,
                png_dec,
            });
        }
    }
    Ok((
        format!(
            "{} ({}, {}x{})",
            src.name,
            src.kind(),
            src.width,
            src.height
        ),
        rows,
    ))
}

// ---------------------------------------------------------------------------------------------
// GPU (wgpu)

fn wgpu_instance() -> wgpu::Instance {
    wgpu::Instance::new(wgpu::InstanceDescriptor::new_without_display_handle_from_env())
}

fn adapter_line(info: &wgpu::AdapterInfo) -> String {
    format!(
        "{} ({:?}, {:?}, driver: {} {})",
        info.name, info.backend, info.device_type, info.driver, info.driver_info
    )
}

fn list_adapters() -> Vec<String> {
    let instance = wgpu_instance();
    pollster::block_on(instance.enumerate_adapters(wgpu::Backends::all()))
        .iter()
        .map(|a| adapter_line(&a.get_info()))
        .collect()
}

struct GpuRow {
    name: String,
    /// Bytes the GB/s figure refers to.
    bytes: u64,
    /// Pixels the MP/s figure refers to (0: none).
    pixels: u64,
    stats: Option<Stats>,
    note: String,
}

struct GpuReport {
    adapter: String,
    rows: Vec<GpuRow>,
    /// Whether the GPU decoder's output was bit-exact, per profile; None where it did not run.
    lossless: Vec<(Profile, Option<bool>)>,
}

impl GpuReport {
    /// "fast yes, compact -" for the report's headline.
    fn lossless_summary(&self) -> String {
        self.lossless
            .iter()
            .map(|(p, l)| {
                let l = match l {
                    Some(true) => "yes",
                    Some(false) => "NO",
                    None => "-",
                };
                format!("{} {l}", p.name())
            })
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// Runs `f`, turning a panic into an error: a GPU decoder that does not handle some input
/// yet must cost its rows, not the whole report. The panic hook is silenced meanwhile (the
/// error carries the message and location) so the report stays readable.
fn guard<T>(f: impl FnOnce() -> Result<T>) -> Result<T> {
    let location = std::sync::Arc::new(std::sync::Mutex::new(None));
    let previous = std::panic::take_hook();
    let loc = location.clone();
    std::panic::set_hook(Box::new(move |info| {
        if let Ok(mut l) = loc.lock() {
            *l = info.location().map(|l| l.to_string());
        }
    }));
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    std::panic::set_hook(previous);
    result.unwrap_or_else(|panic| {
        let msg = panic
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| panic.downcast_ref::<&str>().copied())
            .unwrap_or("(no message)");
        let at = location.lock().ok().and_then(|l| l.clone());
        Err(anyhow!(
            "panicked at {}: {msg}",
            at.as_deref().unwrap_or("?")
        ))
    })
}

/// Waits until the queue's work is done.
fn gpu_wait(device: &wgpu::Device) -> Result<()> {
    device
        .poll(wgpu::PollType::wait_indefinitely())
        .map_err(|e| anyhow!("wgpu poll: {e}"))?;
    Ok(())
}

/// A device of our own, for the wgpu-only rows when the GPU decoder cannot be created.
fn own_device() -> Result<(wgpu::Device, wgpu::Queue, String)> {
    let adapter = l3::gpu::select_adapter()?;
    let info = adapter.get_info();
    let (device, queue) = pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
        label: Some("l3-bench"),
        required_limits: adapter.limits(),
        ..Default::default()
    }))?;
    Ok((device, queue, adapter_line(&info)))
}

/// The wgpu section: copy bandwidth and upload on the decoder's device (or, when the decoder
/// could not be created, on a device of our own), then the GPU decoder's rows.
fn bench_gpu(
    decoder: std::result::Result<&l3::gpu::GpuDecoder, &str>,
    images: &[Pixels],
    args: &Args,
) -> Result<GpuReport> {
    let own;
    let (device, queue, adapter) = match decoder {
        Ok(d) => (d.device(), d.queue(), d.adapter_name()),
        Err(_) => {
            own = own_device()?;
            (&own.0, &own.1, own.2.clone())
        }
    };
    let max_buf = device.limits().max_buffer_size;
    let n = images.len();
    let mut rows = Vec::new();

    // Device buffer-to-buffer copy of each image's output size (the bandwidth ceiling of a
    // kernel that reads and writes the output once).
    let mut total = Stats::default();
    let mut bytes = 0u64;
    for p in images {
        let size = (p.bytes.len() as u64).div_ceil(4) * 4;
        if size > max_buf {
            continue;
        }
        let mk = |usage| {
            device.create_buffer(&wgpu::BufferDescriptor {
                label: None,
                size,
                usage,
                mapped_at_creation: false,
            })
        };
        let src = mk(wgpu::BufferUsages::COPY_SRC | wgpu::BufferUsages::COPY_DST);
        let dst = mk(wgpu::BufferUsages::COPY_DST);
        let (s, ()) = measure(args.reps, args.max_seconds, || {
            let mut enc = device.create_command_encoder(&Default::default());
            enc.copy_buffer_to_buffer(&src, 0, &dst, 0, size);
            queue.submit([enc.finish()]);
            gpu_wait(device)
        })?;
        total = total.add(s);
        bytes += p.bytes.len() as u64;
    }
    rows.push(GpuRow {
        name: "device buffer-to-buffer copy, output size".into(),
        bytes,
        pixels: 0,
        stats: Some(total),
        note: "per image, submit + wait each".into(),
    });

    // The l3 files of the batch, per profile (encoded with the default options, untimed),
    // and their upload: the file bytes written to one device buffer (what decode_batch
    // uploads).
    let mut batches = Vec::new();
    for profile in [Profile::Fast, Profile::Compact] {
        let options = EncodeOptions {
            profile,
            ..EncodeOptions::default()
        };
        let files: Vec<Vec<u8>> = images
            .iter()
            .map(|p| l3::encode::encode(&p.raw(), &options))
            .collect::<std::result::Result<_, _>>()?;
        let in_bytes: u64 = files.iter().map(|f| f.len() as u64).sum();
        let mut joined = Vec::with_capacity(in_bytes as usize + 4);
        for f in &files {
            joined.extend_from_slice(f);
        }
        joined.resize(joined.len().next_multiple_of(4), 0);
        let mut upload = None;
        if (joined.len() as u64) <= max_buf {
            let buf = device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("l3-bench upload"),
                size: joined.len() as u64,
                usage: wgpu::BufferUsages::COPY_DST | wgpu::BufferUsages::STORAGE,
                mapped_at_creation: false,
            });
            let (s, ()) = measure(args.reps, args.max_seconds, || {
                queue.write_buffer(&buf, 0, &joined);
                queue.submit([]);
                gpu_wait(device)
            })?;
            rows.push(GpuRow {
                name: format!("upload of {n} l3 {} files (host to device)", profile.name()),
                bytes: in_bytes,
                pixels: 0,
                stats: Some(s),
                note: "queue.write_buffer + wait".into(),
            });
            upload = Some(s);
        }
        batches.push((profile, files, upload));
    }

    let decoder = match decoder {
        Ok(d) => d,
        Err(e) => {
            rows.push(GpuRow {
                name: "l3 GPU decoder".into(),
                bytes: 0,
                pixels: 0,
                stats: None,
                note: format!("unavailable: {e}"),
            });
            return Ok(GpuReport {
                adapter,
                rows,
                lossless: batches.iter().map(|b| (b.0, None)).collect(),
            });
        }
    };

    let mut lossless = Vec::new();
    for (profile, files, upload) in &batches {
        let label = format!("l3 {}", profile.name());
        let refs: Vec<&[u8]> = files.iter().map(Vec::as_slice).collect();
        let mut profile_rows = Vec::new();
        let result = guard(|| {
            gpu_decoder_rows(
                decoder,
                &label,
                &refs,
                *upload,
                images,
                args,
                &mut profile_rows,
            )
        });
        rows.append(&mut profile_rows);
        match (result, profile) {
            (Ok(l), _) => lossless.push((*profile, Some(l))),
            // The compact profile's GPU support is newer than the fast one's: its failure is
            // a row of the report (the fast profile's still fails the section, as before).
            (Err(e), Profile::Compact) => {
                eprintln!("  gpu: {label} files: {e:#}");
                rows.push(GpuRow {
                    name: format!("{label}: decode_batch of {n} files"),
                    bytes: 0,
                    pixels: 0,
                    stats: None,
                    note: format!("unavailable: {}", one_line(&format!("{e:#}"))),
                });
                lossless.push((*profile, None));
            }
            (Err(e), Profile::Fast) => return Err(e),
        }
    }
    Ok(GpuReport {
        adapter,
        rows,
        lossless,
    })
}

/// The GPU decoder's rows for one batch of files (one profile), appended to `rows` as they
/// are measured; returns whether the decoded pixels were bit-exact.
fn gpu_decoder_rows(
    decoder: &l3::gpu::GpuDecoder,
    label: &str,
    refs: &[&[u8]],
    upload: Option<Stats>,
    images: &[Pixels],
    args: &Args,
    rows: &mut Vec<GpuRow>,
) -> Result<bool> {
    let n = refs.len();
    let total_px: u64 = images.iter().map(Pixels::pixels).sum();
    let total_raw: u64 = images.iter().map(|p| p.bytes.len() as u64).sum();
    // Decode to a device buffer: CPU parse + CRC, upload, kernels, wait.
    let out = l3::gpu::OutputLayout::Interleaved;
    let (dec, batch) = measure(args.reps, args.max_seconds, || {
        Ok(decoder.decode_batch(refs, out)?)
    })?;
    rows.push(GpuRow {
        name: format!("{label}: decode_batch of {n} files to a device buffer"),
        bytes: total_raw,
        pixels: total_px,
        stats: Some(dec),
        note: "parse + CRC on CPU, upload, kernels, wait; output stays on device".into(),
    });
    // Kernels: GPU timestamps around each stage where the device supports them (the same
    // batch, decoded again with timing; per-stage sums over the batch's chunks).
    let mut timings: Vec<l3::gpu::StageTimings> = Vec::new();
    if decoder.timing_supported() {
        measure(args.reps, args.max_seconds, || {
            let (b, t) = decoder.decode_batch_timed(refs, out)?;
            timings.extend(t);
            drop(b);
            Ok(())
        })?;
        // The first call is measure's warm-up.
        if timings.len() > 1 {
            timings.remove(0);
        }
    }
    if !timings.is_empty() {
        let chunks = timings[0].chunks;
        let stage = |f: fn(&l3::gpu::StageTimings) -> u64| {
            stats_of(timings.iter().map(|t| f(t) as f64 * 1e-9).collect())
        };
        let stages = [
            (
                format!("{label}: kernels (GPU timestamps: prefix sum + decode)"),
                stage(|t| t.kernels_ns()),
            ),
            (
                "  prefix sum (GPU timestamps)".into(),
                stage(|t| t.prefix_sum_ns),
            ),
            ("  decode (GPU timestamps)".into(), stage(|t| t.decode_ns)),
        ];
        for (name, stats) in stages {
            rows.push(GpuRow {
                name,
                bytes: total_raw,
                pixels: total_px,
                stats: Some(stats),
                note: format!(
                    "compute passes only, summed over {chunks} chunk(s); timestamp queries"
                ),
            });
        }
    } else if let Some(up) = upload {
        let k = (dec.median - up.median).max(1e-9);
        rows.push(GpuRow {
            name: format!("{label}: kernels (estimate: decode_batch - upload)"),
            bytes: total_raw,
            pixels: total_px,
            stats: Some(Stats {
                median: k,
                min: k,
                max: k,
                reps: dec.reps,
            }),
            note: "no TIMESTAMP_QUERY on this device: includes CPU parse + CRC; medians \
                   subtracted"
                .into(),
        });
    }
    let (rb, host) = measure(args.reps, args.max_seconds, || Ok(batch.read_back()?))?;
    rows.push(GpuRow {
        name: format!("{label}: read-back of the decoded batch (device to host)"),
        bytes: total_raw,
        pixels: 0,
        stats: Some(rb),
        note: "GpuBatch::read_back".into(),
    });
    drop(batch);
    let lossless =
        host.len() == images.len() && host.iter().zip(images).all(|(h, p)| *h == p.bytes);
    if !lossless {
        eprintln!("  GPU decoder output on {label} files differs from the reference pixels");
    }
    let (e2e, ()) = measure(args.reps, args.max_seconds, || {
        let b = decoder.decode_batch(refs, out)?;
        std::hint::black_box(b.read_back()?);
        Ok(())
    })?;
    rows.push(GpuRow {
        name: format!("{label}: end to end: decode_batch + read-back"),
        bytes: total_raw,
        pixels: total_px,
        stats: Some(e2e),
        note: "files in host memory to pixels in host memory".into(),
    });
    Ok(lossless)
}

// ---------------------------------------------------------------------------------------------
// Report

fn gbs(bytes: u64, secs: f64) -> f64 {
    bytes as f64 / secs / 1e9
}
fn mps(pixels: u64, secs: f64) -> f64 {
    pixels as f64 / secs / 1e6
}

/// `median [slowest..fastest]` throughput.
fn tput(units: u64, s: Stats, f: fn(u64, f64) -> f64, prec: usize) -> String {
    format!(
        "{:.p$} [{:.p$}-{:.p$}]",
        f(units, s.median),
        f(units, s.max),
        f(units, s.min),
        p = prec
    )
}

struct Table {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    fn new(header: &[&str]) -> Table {
        Table {
            header: header.iter().map(|s| s.to_string()).collect(),
            rows: Vec::new(),
        }
    }
    fn push(&mut self, row: Vec<String>) {
        self.rows.push(row);
    }
    fn text(&self) -> String {
        let n = self.header.len();
        let mut w = vec![0; n];
        for r in std::iter::once(&self.header).chain(&self.rows) {
            for (i, c) in r.iter().enumerate() {
                w[i] = w[i].max(c.chars().count());
            }
        }
        let line = |r: &Vec<String>| {
            let mut s = String::new();
            for (i, c) in r.iter().enumerate() {
                let pad = w[i] - c.chars().count();
                if i == 0 {
                    s += c;
                    s += &" ".repeat(pad);
                } else {
                    s += "  ";
                    s += &" ".repeat(pad);
                    s += c;
                }
            }
            s.trim_end().to_string() + "\n"
        };
        let mut s = line(&self.header);
        s += &"-".repeat(w.iter().sum::<usize>() + 2 * (n - 1));
        s += "\n";
        for r in &self.rows {
            s += &line(r);
        }
        s
    }
    fn markdown(&self) -> String {
        let mut s = format!("| {} |\n", self.header.join(" | "));
        s += &format!(
            "|{}\n",
            (0..self.header.len())
                .map(|i| if i == 0 { " --- |" } else { " ---: |" })
                .collect::<String>()
        );
        for r in &self.rows {
            let cells: Vec<String> = r.iter().map(|c| c.replace('|', "\\|")).collect();
            s += &format!("| {} |\n", cells.join(" | "));
        }
        s
    }
}

/// Error messages (wgpu's span several lines) on one line, for tables.
fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn json_str(s: &str) -> String {
    let mut o = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => o += "\\\"",
            '\\' => o += "\\\\",
            '\n' => o += "\\n",
            c if (c as u32) < 0x20 => o += &format!("\\u{:04x}", c as u32),
            c => o.push(c),
        }
    }
    o + "\""
}

fn json_stats(s: &Stats) -> String {
    format!(
        "{{\"median_s\":{:e},\"min_s\":{:e},\"max_s\":{:e},\"reps\":{}}}",
        s.median, s.min, s.max, s.reps
    )
}

fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|m| m.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into())
}

/// The 1-minute load average: other processes competing for the CPUs skew the figures.
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().map(str::to_string))
        .unwrap_or_else(|| "?".into())
}

/// The source the binary was built from, when run inside the git checkout: commit, and
/// whether l3's sources had uncommitted changes.
fn source_revision() -> Option<String> {
    let dir = env!("CARGO_MANIFEST_DIR");
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    let commit = git(&["rev-parse", "--short", "HEAD"])?;
    let dirty = git(&[
        "status",
        "--porcelain",
        "--",
        "src",
        "shaders",
        "Cargo.toml",
    ])
    .is_some_and(|s| !s.is_empty());
    Some(if dirty {
        format!("git {commit} + uncommitted changes")
    } else {
        format!("git {commit}")
    })
}

fn crate_versions() -> Vec<(String, String)> {
    let lock = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/../Cargo.lock"));
    let wanted = [
        "png",
        "zune-png",
        "qoi",
        "image",
        "image-webp",
        "fdeflate",
        "wgpu",
        "rayon",
    ];
    let mut out = vec![("l3".to_string(), env!("CARGO_PKG_VERSION").to_string())];
    let mut name = None;
    for line in lock.lines() {
        if let Some(n) = line.strip_prefix("name = ") {
            name = Some(n.trim_matches('"').to_string());
        } else if let Some(v) = line.strip_prefix("version = ") {
            if let Some(n) = name.take() {
                if wanted.contains(&n.as_str()) && !out.iter().any(|(a, _)| *a == n) {
                    out.push((n, v.trim_matches('"').to_string()));
                }
            }
        }
    }
    out
}

fn utc_now() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    let (days, rem) = (secs.div_euclid(86400), secs.rem_euclid(86400));
    // Howard Hinnant's civil_from_days.
    let z = days + 719468;
    let era = z.div_euclid(146097);
    let doe = z - era * 146097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02} UTC",
        rem / 3600,
        rem % 3600 / 60
    )
}

fn main() -> Result<()> {
    let mut args = Args::parse();
    if args.list_adapters {
        let list = list_adapters();
        if list.is_empty() {
            println!("no wgpu adapters found");
        }
        for a in list {
            println!("{a}");
        }
        return Ok(());
    }
    if args.inputs.is_empty() {
        args.inputs = vec![PathBuf::from(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../samples"
        ))];
    }
    let files = collect_files(&args.inputs)?;
    let mut images = Vec::new();
    let mut used_files = Vec::new();
    for f in &files {
        let name = f
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        match l3::read_image(f) {
            Ok(img) => match pixels_from_dynamic(name, &img) {
                Some(p) => {
                    images.push(p);
                    used_files.push(f.clone());
                }
                None => eprintln!("skipping {} (pixel type)", f.display()),
            },
            Err(e) => eprintln!("skipping {}: {e}", f.display()),
        }
    }
    if images.is_empty() {
        bail!("no images found in {:?}", args.inputs);
    }
    let total_px: u64 = images.iter().map(Pixels::pixels).sum();
    let total_raw: u64 = images.iter().map(|p| p.bytes.len() as u64).sum();
    let threads = rayon::current_num_threads();
    let machine = format!(
        "{}, {} logical CPUs (rayon threads: {threads}), {} {}",
        cpu_model(),
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1),
        std::env::consts::OS,
        std::env::consts::ARCH
    );
    let versions = crate_versions();
    let date = utc_now();
    let load_start = load_average();
    eprintln!(
        "l3-bench: {} images, {:.1} MP, {:.1} MB raw; reps {}; {machine}",
        images.len(),
        total_px as f64 / 1e6,
        total_raw as f64 / 1e6,
        args.reps
    );

    // --- codecs
    let mut results = Vec::new();
    for codec in Codec::ALL {
        eprintln!("  {} ({} threads)...", codec.name(), codec.threads());
        results.push(bench_codec(codec, &images, &args)?);
    }
    eprintln!("  memcpy...");
    let memcpy_1 = bench_memcpy(&images, &args, false)?;
    let memcpy_n = bench_memcpy(&images, &args, true)?;

    let png_default_sizes: Vec<u64> = results
        .iter()
        .find(|r| r.codec == Codec::PngDefault)
        .map(|r| {
            r.cells
                .iter()
                .map(|c| c.as_ref().map_or(0, |c| c.size))
                .collect()
        })
        .unwrap_or_default();

    let mut main = Table::new(&[
        "codec",
        "threads",
        "images",
        "size (bytes)",
        "bits/px",
        "vs png",
        "enc MP/s [min-max]",
        "enc GB/s",
        "dec MP/s [min-max]",
        "dec GB/s",
        "lossless",
        "l3 fast size / this",
        "l3 compact size / this",
        "l3 fast 1T enc speed x",
        "l3 compact 1T enc speed x",
        "l3 fast 1T dec speed x",
        "l3 compact 1T dec speed x",
    ]);
    // The one-thread rows of both l3 profiles: the references of the ratio columns.
    let l3_refs: Vec<&CodecResult> = [Codec::L3_FAST_1, Codec::L3_COMPACT_1]
        .iter()
        .map(|c| {
            results
                .iter()
                .find(|r| r.codec == *c)
                .expect("Codec::ALL has both one-thread l3 rows")
        })
        .collect();
    for r in &results {
        // Each l3 profile (1 thread) on the same images, for a like-for-like comparison.
        let mut l3_size = [0u64; 2];
        let mut l3_enc = [Stats::default(); 2];
        let mut l3_dec = [Stats::default(); 2];
        let mut size = 0u64;
        let mut png = 0u64;
        let mut px = 0u64;
        let mut raw = 0u64;
        let mut n = 0;
        let mut enc = Stats::default();
        let mut dec = Stats::default();
        let mut lossless = true;
        for (i, c) in r.cells.iter().enumerate() {
            if let Some(c) = c {
                n += 1;
                size += c.size;
                png += png_default_sizes[i];
                px += images[i].pixels();
                raw += images[i].bytes.len() as u64;
                if let Some(e) = c.enc {
                    enc = enc.add(e);
                }
                dec = dec.add(c.dec);
                lossless &= c.lossless;
                for (k, l3) in l3_refs.iter().enumerate() {
                    if let Some(l) = &l3.cells[i] {
                        l3_size[k] += l.size;
                        l3_enc[k] = l3_enc[k].add(l.enc.unwrap_or_default());
                        l3_dec[k] = l3_dec[k].add(l.dec);
                    }
                }
            }
        }
        let timed_enc = r.codec.times_encode();
        let mut row = vec![
            r.codec.name().into(),
            r.codec.threads(),
            format!("{n}/{}", images.len()),
            size.to_string(),
            format!("{:.3}", size as f64 * 8.0 / px as f64),
            format!("{:.3}", size as f64 / png as f64),
            if timed_enc {
                tput(px, enc, mps, 1)
            } else {
                "-".into()
            },
            if timed_enc {
                format!("{:.3}", gbs(raw, enc.median))
            } else {
                "-".into()
            },
            tput(px, dec, mps, 1),
            format!("{:.3}", gbs(raw, dec.median)),
            if lossless { "yes" } else { "NO" }.into(),
        ];
        row.extend(
            l3_size
                .iter()
                .map(|&l| format!("{:.3}", l as f64 / size as f64)),
        );
        row.extend(l3_enc.iter().map(|l| {
            if timed_enc {
                format!("{:.2}", enc.median / l.median)
            } else {
                "-".into()
            }
        }));
        row.extend(
            l3_dec
                .iter()
                .map(|l| format!("{:.2}", dec.median / l.median)),
        );
        main.push(row);
    }
    for (name, threads, s) in [
        ("memcpy (output size)", "1".to_string(), memcpy_1),
        ("memcpy (output size)", threads.to_string(), memcpy_n),
    ] {
        let mut row = vec![
            name.into(),
            threads,
            format!("{}/{}", images.len(), images.len()),
        ];
        row.extend(std::iter::repeat_n(String::from("-"), 5));
        row.push(tput(total_px, s, mps, 0));
        row.push(format!("{:.3}", gbs(total_raw, s.median)));
        row.resize(main.header.len(), "-".into());
        main.push(row);
    }

    // --- per image
    let mut header = vec![
        "image".to_string(),
        "size".into(),
        "type".into(),
        "raw MB".into(),
    ];
    // One size column per codec (the all-thread l3 rows write the same files).
    let per_image_size = |c: Codec| !matches!(c, Codec::ZunePng | Codec::L3 { parallel: true, .. });
    for r in &results {
        if per_image_size(r.codec) {
            header.push(format!("{} bpp", r.codec.name()));
        }
    }
    let profiles = [Profile::Fast, Profile::Compact];
    for profile in profiles {
        header.push(format!("l3 {} dec MP/s (1T / all)", profile.name()));
    }
    header.push("png dec MP/s".into());
    let hdr: Vec<&str> = header.iter().map(String::as_str).collect();
    let mut per_image = Table::new(&hdr);
    for (i, p) in images.iter().enumerate() {
        let mut row = vec![
            p.name.clone(),
            format!("{}x{}", p.width, p.height),
            p.kind(),
            format!("{:.1}", p.bytes.len() as f64 / 1e6),
        ];
        let mut l3_dec = [Vec::new(), Vec::new()];
        let mut png_dec = String::from("-");
        for r in &results {
            let cell = r.cells[i].as_ref();
            if let (Codec::L3 { profile, .. }, Some(c)) = (r.codec, cell) {
                let k = profiles.iter().position(|&p| p == profile).unwrap_or(0);
                l3_dec[k].push(format!("{:.0}", mps(p.pixels(), c.dec.median)));
            }
            if let (Codec::PngDefault, Some(c)) = (r.codec, cell) {
                png_dec = format!("{:.0}", mps(p.pixels(), c.dec.median));
            }
            if !per_image_size(r.codec) {
                continue;
            }
            row.push(match cell {
                Some(c) => format!(
                    "{:.2}{}",
                    c.size as f64 * 8.0 / p.pixels() as f64,
                    if c.lossless { "" } else { " (LOSSY!)" }
                ),
                None => "n/a".into(),
            });
        }
        row.extend(l3_dec.iter().map(|d| d.join(" / ")));
        row.push(png_dec);
        per_image.push(row);
    }

    // --- GPU decoder (created once, used by the pipeline and GPU sections)
    let decoder = if args.no_gpu {
        None
    } else {
        Some(l3::gpu::GpuDecoder::new_default().map_err(|e| one_line(&e.to_string())))
    };
    let gpu_decoder = decoder.as_ref().and_then(|d| d.as_ref().ok());

    // --- pipeline
    let pipeline = if args.no_pipeline {
        Vec::new()
    } else {
        eprintln!("  pipeline...");
        bench_pipeline(&used_files, &images, &args, gpu_decoder)?
    };
    let mut pipe_table = Table::new(&[
        "pipeline (decode + normalise to f32 CHW)",
        "images",
        "on disk (bytes)",
        "images/s [min-max]",
        "MP/s",
    ]);
    for r in &pipeline {
        let (speed, mp) = match &r.stats {
            Ok(s) => (
                tput(r.images as u64, *s, |n, s| n as f64 / s, 1),
                format!("{:.1}", mps(r.pixels, s.median)),
            ),
            Err(e) => (e.clone(), "-".into()),
        };
        pipe_table.push(vec![
            r.name.clone(),
            r.images.to_string(),
            r.disk_bytes.to_string(),
            speed,
            mp,
        ]);
    }

    // --- scaling
    let scaling = if args.no_scaling {
        None
    } else {
        eprintln!("  scaling...");
        Some(bench_scaling(&images, &args)?)
    };
    let mut scale_table = Table::new(&[
        "size",
        "MP",
        "codec",
        "bits/px",
        "enc ms (all)",
        "dec ms (1T)",
        "dec ms (all)",
        "png dec ms (1T)",
        "dec ns/px (1T)",
        "png dec ns/px",
    ]);
    if let Some((_, rows)) = &scaling {
        for r in rows {
            let px = r.width as u64 * r.height as u64;
            scale_table.push(vec![
                format!("{}x{}", r.width, r.height),
                format!("{:.1}", px as f64 / 1e6),
                format!("l3 {}", r.profile.name()),
                format!("{:.3}", r.l3_size as f64 * 8.0 / px as f64),
                format!("{:.1}", r.l3_enc.median * 1e3),
                format!("{:.1}", r.l3_dec_1.median * 1e3),
                format!("{:.1}", r.l3_dec_n.median * 1e3),
                format!("{:.1}", r.png_dec.median * 1e3),
                format!("{:.2}", r.l3_dec_1.median * 1e9 / px as f64),
                format!("{:.2}", r.png_dec.median * 1e9 / px as f64),
            ]);
        }
    }

    // --- GPU
    let gpu = match &decoder {
        None => None,
        Some(d) => {
            eprintln!("  gpu...");
            let d = d.as_ref().map_err(String::as_str);
            Some(bench_gpu(d, &images, &args).map_err(|e| one_line(&format!("{e:#}"))))
        }
    };
    let mut gpu_table = Table::new(&["gpu", "MB", "GB/s [min-max]", "MP/s", "ms", "note"]);
    if let Some(Ok(g)) = &gpu {
        for r in &g.rows {
            match r.stats {
                Some(s) => gpu_table.push(vec![
                    r.name.clone(),
                    format!("{:.1}", r.bytes as f64 / 1e6),
                    tput(r.bytes, s, gbs, 3),
                    if r.pixels > 0 {
                        format!("{:.1}", mps(r.pixels, s.median))
                    } else {
                        "-".into()
                    },
                    format!("{:.2}", s.median * 1e3),
                    r.note.clone(),
                ]),
                None => gpu_table.push(vec![
                    r.name.clone(),
                    "-".into(),
                    "-".into(),
                    "-".into(),
                    "-".into(),
                    r.note.clone(),
                ]),
            }
        }
    }

    // --- text report
    let load = format!(
        "1-min load average {load_start} at start, {} at end",
        load_average()
    );
    let mut versions_line = versions
        .iter()
        .map(|(n, v)| format!("{n} {v}"))
        .collect::<Vec<_>>()
        .join(", ");
    if let Some(rev) = source_revision() {
        versions_line = format!("{versions_line} (l3 source: {rev})");
    }
    let codec_notes: String = Codec::ALL
        .iter()
        .filter(|c| !matches!(c, Codec::L3 { parallel: true, .. }))
        .map(|c| format!("- {}: {}\n", c.name(), c.note()))
        .collect();
    let mut out = String::new();
    let _ = writeln!(out, "l3-bench  {date}");
    let _ = writeln!(out, "machine:  {machine}; {load}");
    let _ = writeln!(out, "crates:   {versions_line}");
    let _ = writeln!(
        out,
        "inputs:   {} images, {:.1} MP, {:.1} MB raw, from {}",
        images.len(),
        total_px as f64 / 1e6,
        total_raw as f64 / 1e6,
        args.inputs
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    );
    let _ = writeln!(
        out,
        "method:   1 warm-up + up to {} timed reps per (codec, image) (capped at {} s), times summed over images; median [slowest-fastest]\n",
        args.reps, args.max_seconds
    );
    out += &main.text();
    out += "\n";
    if args.per_image {
        out += &per_image.text();
        out += "\n";
    }
    if !pipeline.is_empty() {
        out += &pipe_table.text();
        out += "\n";
    }
    if let Some((src, _)) = &scaling {
        let _ = writeln!(out, "scaling: tiles of {src}");
        out += &scale_table.text();
        out += "\n";
    }
    match &gpu {
        Some(Ok(g)) => {
            let _ = writeln!(
                out,
                "gpu adapter: {}; GPU decoder lossless: {}",
                g.adapter,
                g.lossless_summary()
            );
            out += &gpu_table.text();
        }
        Some(Err(e)) => {
            let _ = writeln!(out, "gpu: unavailable ({e})");
        }
        None => {}
    }
    print!("{out}");

    // --- markdown
    if let Some(path) = &args.markdown {
        let mut md = String::new();
        let _ = writeln!(md, "- date: {date}");
        let _ = writeln!(md, "- machine: {machine}; {load}");
        let _ = writeln!(md, "- crates: {versions_line}");
        let _ = writeln!(
            md,
            "- inputs: {} images, {:.1} MP, {:.1} MB of raw pixels",
            images.len(),
            total_px as f64 / 1e6,
            total_raw as f64 / 1e6
        );
        let _ = writeln!(
            md,
            "- method: one warm-up run, then up to {} timed runs per (codec, image), capped at {} s; per-image medians (and slowest / fastest runs) summed over the images a codec supports; throughput in megapixels and gigabytes of raw (decoded) pixels per second, shown as median [slowest-fastest]; `vs png` = size / png (default) size on the same images; lossless = bit-exact round trip on every image.\n",
            args.reps, args.max_seconds
        );
        let _ = writeln!(md, "### Codecs\n");
        md += &main.markdown();
        let _ = writeln!(md, "\n{codec_notes}");
        let _ = writeln!(md, "### Per image (bits per pixel)\n");
        md += &per_image.markdown();
        if !pipeline.is_empty() {
            let _ = writeln!(md, "\n### Data-preparation pipeline\n");
            let _ = writeln!(md, "Files on disk (page cache warm) to a batch of normalised f32 CHW tensors (one per image, samples / 255 or / 65535).\n");
            md += &pipe_table.markdown();
        }
        if let Some((src, _)) = &scaling {
            let _ = writeln!(md, "\n### Scaling\n");
            let _ = writeln!(
                md,
                "{src}, tiled (alternate tiles mirrored) to each size.\n"
            );
            md += &scale_table.markdown();
        }
        match &gpu {
            Some(Ok(g)) => {
                let _ = writeln!(md, "\n### GPU (wgpu)\n");
                let _ = writeln!(
                    md,
                    "Adapter: {}. GPU decoder round trip bit-exact on every image: {} (- = not run).\n",
                    g.adapter,
                    g.lossless_summary()
                );
                md += &gpu_table.markdown();
            }
            Some(Err(e)) => {
                let _ = writeln!(md, "\n### GPU (wgpu)\n\nunavailable: {e}");
            }
            None => {}
        }
        std::fs::write(path, md).with_context(|| format!("writing {}", path.display()))?;
    }

    // --- json
    if let Some(path) = &args.json {
        let mut j = String::from("{\n");
        let _ = writeln!(j, "  \"date\": {},", json_str(&date));
        let _ = writeln!(j, "  \"machine\": {},", json_str(&machine));
        let _ = writeln!(j, "  \"cpu\": {},", json_str(&cpu_model()));
        let _ = writeln!(j, "  \"threads\": {threads},");
        let _ = writeln!(j, "  \"load\": {},", json_str(&load));
        let _ = writeln!(
            j,
            "  \"source\": {},",
            source_revision().map_or("null".into(), |r| json_str(&r))
        );
        let _ = writeln!(
            j,
            "  \"crates\": {{{}}},",
            versions
                .iter()
                .map(|(n, v)| format!("{}: {}", json_str(n), json_str(v)))
                .collect::<Vec<_>>()
                .join(", ")
        );
        let _ = writeln!(j, "  \"reps\": {},", args.reps);
        j += "  \"images\": [\n";
        for (i, p) in images.iter().enumerate() {
            let _ = writeln!(
                j,
                "    {{\"name\": {}, \"width\": {}, \"height\": {}, \"channels\": {}, \"depth\": {}, \"raw_bytes\": {}}}{}",
                json_str(&p.name),
                p.width,
                p.height,
                p.channels(),
                p.depth,
                p.bytes.len(),
                if i + 1 < images.len() { "," } else { "" }
            );
        }
        j += "  ],\n  \"codecs\": [\n";
        for (k, r) in results.iter().enumerate() {
            let _ = writeln!(
                j,
                "    {{\"codec\": {}, \"profile\": {}, \"threads\": {}, \"results\": [",
                json_str(r.codec.name()),
                match r.codec {
                    Codec::L3 { profile, .. } => json_str(profile.name()),
                    _ => "null".into(),
                },
                json_str(&r.codec.threads())
            );
            for (i, c) in r.cells.iter().enumerate() {
                let sep = if i + 1 < r.cells.len() { "," } else { "" };
                match c {
                    None => {
                        let _ = writeln!(j, "      null{sep}");
                    }
                    Some(c) => {
                        let _ = writeln!(
                            j,
                            "      {{\"image\": {}, \"bytes\": {}, \"encode\": {}, \"decode\": {}, \"lossless\": {}}}{sep}",
                            json_str(&images[i].name),
                            c.size,
                            c.enc.as_ref().map_or("null".into(), json_stats),
                            json_stats(&c.dec),
                            c.lossless
                        );
                    }
                }
            }
            let _ = writeln!(j, "    ]}}{}", if k + 1 < results.len() { "," } else { "" });
        }
        j += "  ],\n";
        let _ = writeln!(
            j,
            "  \"memcpy\": {{\"bytes\": {total_raw}, \"one_thread\": {}, \"all_threads\": {}}},",
            json_stats(&memcpy_1),
            json_stats(&memcpy_n)
        );
        j += "  \"pipeline\": [";
        j += &pipeline
            .iter()
            .map(|r| {
                format!(
                    "\n    {{\"name\": {}, \"images\": {}, \"pixels\": {}, \"disk_bytes\": {}, \"time\": {}, \"error\": {}}}",
                    json_str(&r.name),
                    r.images,
                    r.pixels,
                    r.disk_bytes,
                    r.stats.as_ref().map_or("null".into(), json_stats),
                    r.stats.as_ref().err().map_or("null".into(), |e| json_str(e))
                )
            })
            .collect::<Vec<_>>()
            .join(",");
        j += "\n  ],\n  \"scaling\": [";
        if let Some((_, rows)) = &scaling {
            j += &rows
                .iter()
                .map(|r| {
                    format!(
                        "\n    {{\"profile\": {}, \"width\": {}, \"height\": {}, \"raw_bytes\": {}, \"l3_bytes\": {}, \"l3_encode_all\": {}, \"l3_decode_1\": {}, \"l3_decode_all\": {}, \"png_decode\": {}}}",
                        json_str(r.profile.name()),
                        r.width,
                        r.height,
                        r.raw_bytes,
                        r.l3_size,
                        json_stats(&r.l3_enc),
                        json_stats(&r.l3_dec_1),
                        json_stats(&r.l3_dec_n),
                        json_stats(&r.png_dec)
                    )
                })
                .collect::<Vec<_>>()
                .join(",");
        }
        j += "\n  ],\n  \"gpu\": ";
        match &gpu {
            Some(Ok(g)) => {
                let lossless = g
                    .lossless
                    .iter()
                    .map(|(p, l)| {
                        format!(
                            "{}: {}",
                            json_str(p.name()),
                            l.map_or("null".into(), |b| b.to_string())
                        )
                    })
                    .collect::<Vec<_>>()
                    .join(", ");
                let _ = write!(
                    j,
                    "{{\"adapter\": {}, \"lossless\": {{{lossless}}}, \"rows\": [{}]}}",
                    json_str(&g.adapter),
                    g.rows
                        .iter()
                        .map(|r| format!(
                            "{{\"name\": {}, \"bytes\": {}, \"pixels\": {}, \"time\": {}, \"note\": {}}}",
                            json_str(&r.name),
                            r.bytes,
                            r.pixels,
                            r.stats.as_ref().map_or("null".into(), json_stats),
                            json_str(&r.note)
                        ))
                        .collect::<Vec<_>>()
                        .join(", ")
                );
            }
            Some(Err(e)) => {
                let _ = write!(j, "{{\"error\": {}}}", json_str(e));
            }
            None => j += "null",
        }
        j += "\n}\n";
        std::fs::write(path, j).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}
