//! `l3`: convert images and whole dataset trees to L3, decode, inspect, verify.
//!
//! Exit status: 0 when every file succeeded, 1 when any file failed (each failure is reported
//! on stderr as `error: PATH: REASON`), 2 for a usage error.

mod dataset;
mod demo;
mod field;
mod fsio;
mod info;
mod inputs;
mod loader;
mod verify;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::{Args, Parser, Subcommand, ValueEnum};
use indicatif::{ProgressBar, ProgressStyle};
use rayon::prelude::*;

use fsio::Job;
use l3::{DecodeOptions, EncodeOptions, FastPredictor, PredictorChoice, ProfileOptions};

/// Extensions `l3 encode` picks up when given a directory.
const IMAGE_EXTENSIONS: &[&str] = &[
    "png", "jpg", "jpeg", "tif", "tiff", "pnm", "ppm", "pgm", "pbm", "pam", "bmp", "webp", "gif",
    "qoi", "tga", "ico",
];
/// Extension of L3 files.
const L3_EXTENSION: &str = "l3";

#[derive(Parser)]
#[command(
    name = "l3",
    version,
    about = "Lossless image codec with a GPU decoder"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Largest decoded image accepted, in bytes (also the limit for reading source images).
    #[arg(long, global = true, default_value_t = l3::Limits::default().max_output_bytes)]
    max_output_bytes: u64,
    /// Largest .l3 file accepted, in bytes.
    #[arg(long, global = true, default_value_t = l3::Limits::default().max_input_bytes)]
    max_input_bytes: u64,
}

/// The limits chosen on the command line, set once in `main`.
static LIMITS: std::sync::OnceLock<l3::Limits> = std::sync::OnceLock::new();

fn limits() -> l3::Limits {
    LIMITS.get().copied().unwrap_or_default()
}

/// Decoder options with the command line's limits.
fn decode_options() -> DecodeOptions {
    DecodeOptions {
        limits: limits(),
        ..Default::default()
    }
}

#[derive(Subcommand)]
enum Command {
    /// Convert images (files or whole directory trees) to L3.
    Encode(EncodeArgs),
    /// Decode L3 files to PNG or PNM.
    Decode(DecodeArgs),
    /// Show a file's header, patch table statistics and bits per pixel.
    Info(info::InfoArgs),
    /// Fully decode L3 files (checksum and every stream); optionally compare with originals.
    Verify(verify::VerifyArgs),
    /// Encode and decode the bundled sample images, printing sizes and speed.
    Demo(demo::DemoArgs),
    /// Pack an image tree into record shards with an index and a manifest (a dataset).
    Pack(dataset::PackArgs),
    /// List a dataset: records, shards, bytes per level, classes.
    Ls(dataset::LsArgs),
    /// Unpack a dataset back to PNG files (the original pixels).
    Unpack(dataset::UnpackArgs),
    /// Check a dataset: every shard against the manifest, every record decoded.
    VerifyDataset(dataset::DatasetArgs),
    /// Run the training loader (CPU path) over a dataset: images/s, stage split, cache.
    BenchLoader(loader::BenchLoaderArgs),
    /// Encode a float32 array (.f32 + .json sidecar, or .npy) within an error bound (.l3f).
    EncodeField(field::EncodeFieldArgs),
    /// Decode a float32 field file (.l3f) to .npy or .f32 (+ .json).
    DecodeField(field::DecodeFieldArgs),
}

#[derive(Args)]
struct EncodeArgs {
    /// Image files or directories (directories are walked recursively).
    #[arg(required = true)]
    inputs: Vec<PathBuf>,
    /// Output file (one input file) or directory (the input tree is mirrored into it).
    /// Default: each output next to its input, with the extension `.l3`.
    #[arg(short, long)]
    output: Option<PathBuf>,
    /// Coding: `fast` (format version 1, fixed-width rows: the quickest decode) or `compact`
    /// (version 2, Huffman-coded: smaller than PNG on photos, decodes slower).
    #[arg(long, value_enum, default_value_t = ProfileArg::Fast)]
    profile: ProfileArg,
    /// Patch side in pixels.
    #[arg(long, default_value_t = 64, value_parser = parse_patch_size)]
    patch_size: u32,
    /// Predictor of the fast profile: `best` tries all per patch and channel (the compact
    /// profile always chooses per patch and channel).
    #[arg(long, value_enum, default_value_t = PredictorArg::Best)]
    predictor: PredictorArg,
    /// Error bound: 0 (default) is lossless; with E > 0 every decoded sample is within E of
    /// the original, and the file says so. Images: an integer, at most 127 for 8-bit and 32767
    /// for 16-bit images. Float32 arrays (`.f32` with a `.json` sidecar, or `.npy`; each
    /// becomes a `.l3f` field file, see `l3 encode-field`): any positive number.
    #[arg(long, default_value_t = 0.0)]
    max_error: f64,
    /// Float32 arrays only: the bound as a fraction of each array's value range, instead of
    /// `--max-error`.
    #[arg(long, conflicts_with = "max_error")]
    relative: Option<f64>,
    /// Skip decoding each output and comparing it with the input pixels before it is kept.
    #[arg(long)]
    no_verify: bool,
    /// Encode every file again, and replace existing outputs that are not L3 files. Without
    /// it a file is skipped when its output is up to date: the output's resume record (a
    /// hidden `.NAME.l3.l3-resume` beside it, written after the output) shows the same l3
    /// version, the same options that change the output's bytes (profile, patch size,
    /// predictor, --max-error) and the same input (name, length, modification time), and the
    /// output has not changed since. Any difference, or no record (outputs of older versions),
    /// encodes the file again and replaces the output; an existing output that is not an L3
    /// file is never replaced without --force.
    #[arg(long)]
    force: bool,
    /// Worker threads (default: all cores).
    #[arg(short, long)]
    jobs: Option<usize>,
    /// Print only errors and the summary.
    #[arg(short, long)]
    quiet: bool,
}

#[derive(Args)]
struct DecodeArgs {
    /// L3 files or directories.
    #[arg(required = true)]
    inputs: Vec<PathBuf>,
    /// Output file (one input) or directory. Default: next to the input.
    #[arg(short, long)]
    output: Option<PathBuf>,
    /// Output format when the output is a directory or not given.
    #[arg(long, value_enum, default_value_t = OutFormat::Png)]
    format: OutFormat,
    /// Skip the CRC-32 check (faster; a corrupt stream is still detected by its structure).
    #[arg(long)]
    no_checksum: bool,
    /// Decode on the GPU (wgpu; `WGPU_BACKEND` / `WGPU_ADAPTER_NAME` choose the adapter),
    /// in batches; fails if no adapter is found.
    #[arg(long)]
    gpu: bool,
    /// Overwrite output files that already exist (by default they are left alone and
    /// reported, so decoding next to the originals never replaces them).
    #[arg(long)]
    force: bool,
    /// Print only errors.
    #[arg(short, long)]
    quiet: bool,
}

#[derive(Clone, Copy, ValueEnum)]
enum PredictorArg {
    Best,
    None,
    Up,
    L3Paeth,
    UpMean,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum ProfileArg {
    Fast,
    Compact,
}

impl ProfileArg {
    /// The name on the command line.
    fn name(self) -> &'static str {
        match self {
            ProfileArg::Fast => "fast",
            ProfileArg::Compact => "compact",
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum OutFormat {
    Png,
    Pnm,
}

pub(crate) fn parse_patch_size(s: &str) -> Result<u32, String> {
    let v: u32 = s.parse().map_err(|e| format!("{e}"))?;
    if v.is_power_of_two() && (8..=128).contains(&v) {
        Ok(v)
    } else {
        Err("patch size must be 8, 16, 32, 64 or 128".into())
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let _ = LIMITS.set(l3::Limits {
        max_output_bytes: cli.max_output_bytes,
        max_input_bytes: cli.max_input_bytes,
        ..Default::default()
    });
    let result = match cli.command {
        Command::Encode(a) => cmd_encode(a),
        Command::Decode(a) => cmd_decode(a),
        Command::Info(a) => info::cmd_info(a),
        Command::Verify(a) => verify::cmd_verify(a),
        Command::Demo(a) => demo::cmd_demo(a),
        Command::Pack(a) => dataset::cmd_pack(a),
        Command::Ls(a) => dataset::cmd_ls(a),
        Command::Unpack(a) => dataset::cmd_unpack(a),
        Command::VerifyDataset(a) => dataset::cmd_verify_dataset(a),
        Command::BenchLoader(a) => loader::cmd_bench_loader(a),
        Command::EncodeField(a) => field::cmd_encode_field(a),
        Command::DecodeField(a) => field::cmd_decode_field(a),
    };
    let result = result.map(|failed| failed + fsio::unlistable_dirs());
    match result {
        Ok(0) => ExitCode::SUCCESS,
        Ok(failed) => {
            eprintln!("{failed} failure(s)");
            ExitCode::from(1)
        }
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(1)
        }
    }
}

fn progress(len: usize, quiet: bool) -> ProgressBar {
    if quiet {
        return ProgressBar::hidden();
    }
    let pb = ProgressBar::new(len as u64);
    pb.set_style(
        ProgressStyle::with_template("{bar:40} {pos}/{len} files, {elapsed} elapsed, eta {eta}")
            .expect("valid template"),
    );
    pb
}

fn human(bytes: u64) -> String {
    let b = bytes as f64;
    if b >= 1e9 {
        format!("{:.2} GB", b / 1e9)
    } else if b >= 1e6 {
        format!("{:.2} MB", b / 1e6)
    } else if b >= 1e3 {
        format!("{:.1} kB", b / 1e3)
    } else {
        format!("{bytes} B")
    }
}

/// Output path of a job: mirrored under `out_root`, or next to the input; `ext` replaces the
/// input's extension.
fn output_path(job: &Job, out_root: Option<&Path>, ext: &str) -> PathBuf {
    match out_root {
        Some(root) => root.join(&job.relative).with_extension(ext),
        None => job.input.with_extension(ext),
    }
}

/// Resolves where each job's output goes; a single file input with `-o` writes exactly there.
fn plan_outputs(
    roots: &[(PathBuf, Vec<Job>)],
    output: Option<&Path>,
    ext: &str,
) -> Result<Vec<(Job, PathBuf)>> {
    let jobs: Vec<&Job> = roots.iter().flat_map(|(_, j)| j).collect();
    let single_file = roots.len() == 1 && roots[0].0.is_file();
    let plan: Vec<(Job, PathBuf)> = jobs
        .into_iter()
        .map(|job| {
            let out = match output {
                // One input file: `-o` names the output file, unless it is a directory or
                // ends with a path separator (a directory to create).
                Some(o)
                    if single_file
                        && !o.is_dir()
                        && !o
                            .as_os_str()
                            .to_string_lossy()
                            .ends_with(std::path::is_separator) =>
                {
                    o.to_path_buf()
                }
                o => output_path(job, o, ext),
            };
            (job.clone(), out)
        })
        .collect();
    let pairs: Vec<(PathBuf, &Path)> = plan
        .iter()
        .map(|(j, o)| (o.clone(), j.input.as_path()))
        .collect();
    fsio::check_collisions(&pairs)?;
    Ok(plan)
}

fn thread_pool(jobs: Option<usize>) -> Result<rayon::ThreadPool> {
    let mut b = rayon::ThreadPoolBuilder::new();
    if let Some(n) = jobs {
        b = b.num_threads(n);
    }
    Ok(b.build()?)
}

/// The largest difference between the source image's samples and decoded L3 pixels, or
/// `None` if their colour types or sizes differ.
fn max_difference(original: &image::DynamicImage, decoded: &image::DynamicImage) -> Option<u32> {
    if original.color() != decoded.color()
        || (original.width(), original.height()) != (decoded.width(), decoded.height())
    {
        return None;
    }
    let (a, b) = (original.as_bytes(), decoded.as_bytes());
    let wide = original.color().bytes_per_pixel() / original.color().channel_count() == 2;
    Some(if wide {
        a.chunks_exact(2)
            .zip(b.chunks_exact(2))
            .map(|(x, y)| {
                (u16::from_ne_bytes([x[0], x[1]]) as u32)
                    .abs_diff(u16::from_ne_bytes([y[0], y[1]]) as u32)
            })
            .max()
            .unwrap_or(0)
    } else {
        a.iter()
            .zip(b)
            .map(|(&x, &y)| (x as u32).abs_diff(y as u32))
            .max()
            .unwrap_or(0)
    })
}

#[derive(Default)]
struct Totals {
    files: AtomicU64,
    skipped: AtomicU64,
    failed: AtomicU64,
    input_bytes: AtomicU64,
    output_bytes: AtomicU64,
    raw_bytes: AtomicU64,
    pixels: AtomicU64,
}

/// Extensions of float32 arrays, which `l3 encode` turns into field files.
const FIELD_INPUT_EXTENSIONS: &[&str] = &["f32", "npy"];

fn cmd_encode(a: EncodeArgs) -> Result<u64> {
    // Float32 arrays by extension: error-bounded fields (one file at a time, each verified).
    let is_field = |p: &PathBuf| p.is_file() && fsio::has_extension(p, FIELD_INPUT_EXTENSIONS);
    if a.inputs.iter().any(is_field) {
        if !a.inputs.iter().all(is_field) {
            bail!("encode float32 arrays (.f32, .npy) and images in separate runs");
        }
        if a.inputs.len() > 1 && a.output.is_some() {
            bail!("-o names one output: give one array, or none to write each beside its input");
        }
        let mut failed = 0;
        for input in &a.inputs {
            let args = field::EncodeFieldArgs {
                input: input.clone(),
                output: a.output.clone(),
                max_error: (a.max_error > 0.0).then_some(a.max_error),
                relative: a.relative,
                fill_value: None,
                profile: a.profile,
                force: a.force,
            };
            if args.max_error.is_none() && args.relative.is_none() {
                bail!("float32 arrays are stored within a bound: give --max-error or --relative");
            }
            // Every error of cmd_encode_field names its input.
            if let Err(e) = field::cmd_encode_field(args) {
                failed += 1;
                eprintln!("error: {e:#}");
            }
        }
        return Ok(failed);
    }
    if a.relative.is_some() {
        bail!("--relative applies to float32 arrays (.f32, .npy); images take --max-error");
    }
    if a.max_error.fract() != 0.0 || !(0.0..=32767.0).contains(&a.max_error) {
        bail!("--max-error for images is an integer from 0 to 32767 (127 for 8-bit images)");
    }
    let roots = fsio::collect_jobs(&a.inputs, IMAGE_EXTENSIONS)?;
    let plan = plan_outputs(&roots, a.output.as_deref(), L3_EXTENSION)?;
    if plan.is_empty() {
        bail!("no image files found in the inputs");
    }
    let predictor = match a.predictor {
        PredictorArg::Best => PredictorChoice::Best,
        PredictorArg::None => PredictorChoice::Fixed(FastPredictor::None),
        PredictorArg::Up => PredictorChoice::Fixed(FastPredictor::Up),
        PredictorArg::L3Paeth => PredictorChoice::Fixed(FastPredictor::L3Paeth),
        PredictorArg::UpMean => PredictorChoice::Fixed(FastPredictor::UpMean),
    };
    let options = EncodeOptions {
        profile: match a.profile {
            ProfileArg::Fast => ProfileOptions::Fast(l3::FastOptions { predictor }),
            ProfileArg::Compact => ProfileOptions::Compact(l3::CompactOptions::default()),
        },
        patch_log2: a.patch_size.trailing_zeros() as u8,
        parallel: true,
        max_error: a.max_error as u16,
    };
    let mut dirs: Vec<&Path> = plan.iter().filter_map(|(_, o)| o.parent()).collect();
    dirs.sort();
    dirs.dedup();
    for d in dirs {
        fsio::remove_stale_temps(d);
    }
    // What the resume record compares: every option that changes the output's bytes.
    let key = format!("image {options:?}");
    let pb = progress(plan.len(), a.quiet);
    let totals = Totals::default();
    let encode_time = Mutex::new(0f64);
    let start = Instant::now();
    thread_pool(a.jobs)?.install(|| {
        plan.par_iter().for_each(|(job, out)| {
            let stamp = fsio::Stamp::of(&job.input);
            if let Ok(stamp) = &stamp {
                if !a.force && fsio::is_up_to_date(std::slice::from_ref(stamp), out, &key) {
                    totals.skipped.fetch_add(1, Ordering::Relaxed);
                    if !a.quiet {
                        pb.suspend(|| println!("{}: up to date, skipped", job.input.display()));
                    }
                    pb.inc(1);
                    return;
                }
            }
            let result = stamp.and_then(|stamp| {
                fsio::check_replace(out, &l3::format::MAGIC, a.force)?;
                let r = encode_one(&job.input, out, &options, !a.no_verify)?;
                if let Err(e) = fsio::record_output(vec![stamp], out, &key) {
                    pb.suspend(|| {
                        eprintln!(
                            "warning: {}: no resume record ({e:#}); a rerun encodes it again",
                            out.display()
                        )
                    });
                }
                Ok(r)
            });
            match result {
                Ok(r) => {
                    totals.files.fetch_add(1, Ordering::Relaxed);
                    totals
                        .input_bytes
                        .fetch_add(r.input_bytes, Ordering::Relaxed);
                    totals
                        .output_bytes
                        .fetch_add(r.output_bytes, Ordering::Relaxed);
                    totals.raw_bytes.fetch_add(r.raw_bytes, Ordering::Relaxed);
                    totals.pixels.fetch_add(r.pixels, Ordering::Relaxed);
                    *encode_time.lock().unwrap() += r.encode_seconds;
                    if !a.quiet {
                        pb.suspend(|| {
                            println!(
                                "{}: {} -> {} ({:.3}x input, {:.3}x raw, {:.2} bpp)",
                                job.input.display(),
                                human(r.input_bytes),
                                human(r.output_bytes),
                                r.output_bytes as f64 / r.input_bytes as f64,
                                r.output_bytes as f64 / r.raw_bytes as f64,
                                r.output_bytes as f64 * 8.0 / r.pixels as f64,
                            )
                        });
                    }
                }
                Err(e) => {
                    totals.failed.fetch_add(1, Ordering::Relaxed);
                    pb.suspend(|| eprintln!("error: {}: {e:#}", job.input.display()));
                }
            }
            pb.inc(1);
        })
    });
    pb.finish_and_clear();
    let t = |x: &AtomicU64| x.load(Ordering::Relaxed);
    let (inb, outb, raw) = (
        t(&totals.input_bytes),
        t(&totals.output_bytes),
        t(&totals.raw_bytes),
    );
    let encode_seconds = *encode_time.lock().unwrap();
    println!(
        "encoded {} file(s), skipped {} up to date, {} failed; {} -> {} ({:.3}x input, {:.3}x raw); {:.1} s wall, encoder {:.1} MP/s per file",
        t(&totals.files),
        t(&totals.skipped),
        t(&totals.failed),
        human(inb),
        human(outb),
        if inb > 0 { outb as f64 / inb as f64 } else { 0.0 },
        if raw > 0 { outb as f64 / raw as f64 } else { 0.0 },
        start.elapsed().as_secs_f64(),
        if encode_seconds > 0.0 { t(&totals.pixels) as f64 / 1e6 / encode_seconds } else { 0.0 },
    );
    Ok(t(&totals.failed))
}

struct EncodeReport {
    input_bytes: u64,
    output_bytes: u64,
    raw_bytes: u64,
    pixels: u64,
    encode_seconds: f64,
}

fn encode_one(
    input: &Path,
    output: &Path,
    options: &EncodeOptions,
    verify: bool,
) -> Result<EncodeReport> {
    let input_bytes = std::fs::metadata(input)?.len();
    let image = read_source(input)?;
    let t0 = Instant::now();
    let encoded = l3::encode_image(&image, options)?;
    let encode_seconds = t0.elapsed().as_secs_f64();
    if verify {
        let decoded =
            l3::decode_image(&encoded, &decode_options()).context("verification decode failed")?;
        match max_difference(&image, &decoded) {
            Some(d) if d <= options.max_error as u32 => {}
            Some(d) => bail!(
                "verification failed: a decoded sample is {d} off, the bound is {} (encoder bug; nothing written)",
                options.max_error
            ),
            None => bail!("verification failed: decoded shape differs from the input (encoder bug; nothing written)"),
        }
    }
    fsio::forget_output(output)?;
    fsio::write_atomic(output, &encoded)?;
    Ok(EncodeReport {
        input_bytes,
        output_bytes: encoded.len() as u64,
        raw_bytes: image.as_bytes().len() as u64,
        pixels: image.width() as u64 * image.height() as u64,
        encode_seconds,
    })
}

/// Reads a source image (PNG, JPEG, ...) within the command line's output-size limit.
fn read_source(path: &Path) -> Result<image::DynamicImage> {
    Ok(l3::image_support::read_image_limited(
        path,
        limits().max_output_bytes,
    )?)
}

/// Reads an L3 file within `--max-input-bytes` ([`fsio::read_limited`]).
fn read_l3(path: &Path) -> Result<Vec<u8>> {
    fsio::read_limited(path, limits().max_input_bytes)
}

fn cmd_decode(a: DecodeArgs) -> Result<u64> {
    // Field files (.l3f) decode to float32 arrays: `-o` names a .npy or .f32 (default: a .npy
    // beside the input).
    let is_field = |p: &PathBuf| p.is_file() && fsio::has_extension(p, &["l3f"]);
    if a.inputs.iter().any(is_field) {
        if !a.inputs.iter().all(is_field) || (a.inputs.len() > 1 && a.output.is_some()) {
            bail!("decode field files (.l3f) one at a time, or several without -o");
        }
        for input in &a.inputs {
            let output = a
                .output
                .clone()
                .unwrap_or_else(|| input.with_extension("npy"));
            field::cmd_decode_field(field::DecodeFieldArgs {
                input: input.clone(),
                output,
                force: a.force,
            })?;
        }
        return Ok(0);
    }
    let roots = fsio::collect_jobs(&a.inputs, &[L3_EXTENSION])?;
    let ext = match a.format {
        OutFormat::Png => "png",
        OutFormat::Pnm => "pnm",
    };
    let plan = plan_outputs(&roots, a.output.as_deref(), ext)?;
    if plan.is_empty() {
        bail!("no .l3 files found in the inputs");
    }
    let options = DecodeOptions {
        verify_checksum: !a.no_checksum,
        ..decode_options()
    };
    // Only lossless output formats: a lossless codec must not hand back a JPEG.
    let format_of = |out: &Path| -> Result<image::ImageFormat> {
        use image::ImageFormat as F;
        match F::from_path(out) {
            Ok(f @ (F::Png | F::Pnm | F::Tiff)) => Ok(f),
            Ok(f) => bail!(
                "{}: {f:?} output is not lossless for every image; use .png, .pnm/.ppm/.pgm/.pam or .tiff",
                out.display()
            ),
            Err(_) => Ok(match a.format {
                OutFormat::Png => F::Png,
                OutFormat::Pnm => F::Pnm,
            }),
        }
    };
    for (_, out) in &plan {
        format_of(out)?;
    }
    let write_image = |image: &image::DynamicImage, out: &Path| -> Result<()> {
        if !a.force && out.exists() {
            bail!(
                "{} already exists (use --force to overwrite)",
                out.display()
            );
        }
        // Encoded straight into the temporary file: no second copy of the pixels in memory.
        // Without --force the rename itself refuses a file created since the check above.
        let format = format_of(out)?;
        fsio::write_atomic_with(out, a.force, |f| {
            image
                .write_to(f, format)
                .map_err(|e| std::io::Error::other(e.to_string()))
        })
    };
    let pb = progress(plan.len(), a.quiet);
    let failed = AtomicU64::new(0);
    let report = |job: &Job, out: &Path, r: Result<()>| {
        match r {
            Ok(()) if !a.quiet => {
                pb.suspend(|| println!("{} -> {}", job.input.display(), out.display()))
            }
            Ok(()) => {}
            Err(e) => {
                failed.fetch_add(1, Ordering::Relaxed);
                pb.suspend(|| eprintln!("error: {}: {e:#}", job.input.display()));
            }
        }
        pb.inc(1);
    };
    if a.gpu {
        #[cfg(feature = "gpu")]
        decode_on_gpu(&plan, &options, a.quiet, &write_image, &report)?;
        #[cfg(not(feature = "gpu"))]
        bail!("this l3 was built without the `gpu` feature; decode without --gpu");
    } else {
        plan.par_iter().for_each(|(job, out)| {
            let r = read_l3(&job.input)
                .and_then(|data| Ok(l3::decode_image(&data, &options)?))
                .and_then(|image| write_image(&image, out));
            report(job, out, r);
        });
    }
    pb.finish_and_clear();
    Ok(failed.into_inner())
}

/// The GPU writes 16-bit samples little-endian; `image_from_samples` wants native order.
#[cfg(feature = "gpu")]
fn gpu_to_native(mut pixels: Vec<u8>, header: &l3::Header) -> Vec<u8> {
    if cfg!(target_endian = "big") && header.depth == 16 {
        for pair in pixels.chunks_exact_mut(2) {
            pair.swap(0, 1);
        }
    }
    pixels
}

#[cfg(feature = "gpu")]
/// `l3 decode --gpu`: each file is validated on the CPU as it is read (so an error names its
/// file), then decoded in byte-budgeted batches on the GPU and read back, by the library's
/// [`l3::gpu::Batcher`] (a batch-level failure falls back to decoding file by file, so only the
/// file at fault fails).
fn decode_on_gpu(
    plan: &[(Job, PathBuf)],
    options: &DecodeOptions,
    quiet: bool,
    write_image: &(dyn Fn(&image::DynamicImage, &Path) -> Result<()> + Sync),
    report: &(dyn Fn(&Job, &Path, Result<()>) + Sync),
) -> Result<()> {
    let mut decoder = l3::gpu::GpuDecoder::new_default()
        .context("no usable GPU adapter (decode without --gpu to use the CPU)")?;
    // The batcher validates each file with these options (limits, and the CRC unless
    // --no-checksum) when it is pushed.
    decoder.set_options(*options);
    let decoder = decoder;
    if !quiet {
        eprintln!("GPU: {}", decoder.adapter_name());
    }
    let mut batcher = l3::gpu::Batcher::new(&decoder, l3::gpu::OutputLayout::Interleaved)
        .with_budget(l3::gpu::DEFAULT_BUDGET);
    let finish = |results: Vec<l3::gpu::FileResult<(&Job, &Path)>>| {
        for r in results {
            let (job, out) = r.tag;
            let written = match r.result {
                Ok(d) => write_image(
                    &l3::image_support::image_from_samples(
                        &d.header,
                        gpu_to_native(d.pixels, &d.header),
                    ),
                    out,
                ),
                Err(e) => Err(e.into()),
            };
            report(job, out, written);
        }
    };
    for (job, out) in plan {
        match read_l3(&job.input) {
            Ok(data) => finish(batcher.push((job, out.as_path()), data)),
            Err(e) => report(job, out, Err(e)),
        }
    }
    finish(batcher.finish());
    Ok(())
}
