//! `l3 decode`: L3 files to PNG or PNM (on the CPU, or in batches on the GPU with `--gpu`);
//! field files (`.l3f`) go to `l3 decode-field`.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::{bail, Result};
use clap::{Args, ValueEnum};
use rayon::prelude::*;

use crate::cmd::field;
use crate::display::progress;
use crate::flags::L3_EXTENSION;
use crate::fsio::{self, Job};
use crate::limits::{decode_options, read_l3};
use l3::DecodeOptions;

#[derive(Args)]
pub(crate) struct DecodeArgs {
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

/// The `--format` flag.
#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum OutFormat {
    Png,
    Pnm,
}

/// `l3 decode`; returns the number of files that failed.
pub(crate) fn cmd_decode(a: DecodeArgs) -> Result<u64> {
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
    let plan = fsio::plan_outputs(&roots, a.output.as_deref(), ext)?;
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
    use anyhow::Context as _;
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
