//! `l3 encode`: images (files or whole directory trees) to L3 files, each verified before it is
//! kept and skipped on a rerun while up to date; float32 arrays go to `l3 encode-field`.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::{Args, ValueEnum};
use rayon::prelude::*;

use crate::cmd::field;
use crate::display::{human, progress};
use crate::flags::{parse_patch_size, ProfileArg, IMAGE_EXTENSIONS, L3_EXTENSION};
use crate::fsio;
use crate::images::{max_difference, read_source};
use crate::limits::decode_options;
use crate::resume;
use l3::{EncodeOptions, FastPredictor, PredictorChoice, ProfileOptions};

#[derive(Args)]
pub(crate) struct EncodeArgs {
    /// Image files or directories (directories are walked recursively).
    #[arg(required = true)]
    inputs: Vec<PathBuf>,
    /// Output file (one input file) or directory (the input tree is mirrored into it).
    /// Default: each output next to its input, with the extension `.l3`.
    #[arg(short, long)]
    output: Option<PathBuf>,
    /// Coding: `fast` (format version 1, fixed-width rows: the quickest decode) or `compact`
    /// (version 2, Huffman-coded: smaller than PNG on photos, decodes slower).
    #[arg(long, value_enum, default_value_t = ProfileArg::Compact)]
    profile: ProfileArg,
    /// Patch side in pixels.
    #[arg(long, default_value_t = 64, value_parser = parse_patch_size)]
    patch_size: u32,
    /// Predictor of the fast profile (with `--profile fast`; default `best`: tries all per
    /// patch and channel). The compact profile always chooses per patch and channel.
    #[arg(long, value_enum)]
    predictor: Option<PredictorArg>,
    /// Error bound: 0 (default) is lossless; with E > 0 every decoded sample is within E of
    /// the original, and the file says so. Images: an integer, at most 127 for 8-bit and 32767
    /// for 16-bit images. Float32 arrays (`.f32` with a `.json` sidecar, or `.npy`; each
    /// becomes a `.l3f` field file of version 3, see `l3 encode-field`): any positive number.
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

/// The `--predictor` flag.
#[derive(Clone, Copy, ValueEnum)]
enum PredictorArg {
    Best,
    None,
    Up,
    L3Paeth,
    UpMean,
}

/// The run's counts and byte sums, added to by every worker thread.
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

/// `l3 encode`; returns the number of files that failed.
pub(crate) fn cmd_encode(a: EncodeArgs) -> Result<u64> {
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
                // Arrays take the default format (version 3), which has no bin image.
                profile: None,
                force: a.force,
                lossless: false,
                dtype: None,
                format: field::FieldFormatArg::V3,
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
    let plan = fsio::plan_outputs(&roots, a.output.as_deref(), L3_EXTENSION)?;
    if plan.is_empty() {
        bail!("no image files found in the inputs");
    }
    if a.predictor.is_some() && a.profile == ProfileArg::Compact {
        bail!("--predictor chooses the fast profile's predictor: add --profile fast");
    }
    let predictor = match a.predictor.unwrap_or(PredictorArg::Best) {
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
            let stamp = resume::Stamp::of(&job.input);
            if let Ok(stamp) = &stamp {
                if !a.force && resume::is_up_to_date(std::slice::from_ref(stamp), out, &key) {
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
                if let Err(e) = resume::record_output(vec![stamp], out, &key) {
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

/// What encoding one file measured.
struct EncodeReport {
    input_bytes: u64,
    output_bytes: u64,
    raw_bytes: u64,
    pixels: u64,
    encode_seconds: f64,
}

/// Encodes `input` to `output` (verified first when `verify`; written atomically).
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
    resume::forget_output(output)?;
    fsio::write_atomic(output, &encoded)?;
    Ok(EncodeReport {
        input_bytes,
        output_bytes: encoded.len() as u64,
        raw_bytes: image.as_bytes().len() as u64,
        pixels: image.width() as u64 * image.height() as u64,
        encode_seconds,
    })
}

/// A pool of `jobs` worker threads (default: one per core).
fn thread_pool(jobs: Option<usize>) -> Result<rayon::ThreadPool> {
    let mut b = rayon::ThreadPoolBuilder::new();
    if let Some(n) = jobs {
        b = b.num_threads(n);
    }
    Ok(b.build()?)
}
