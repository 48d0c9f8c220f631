//! `l3-bench`: measures l3 against peer lossless codecs on the same decoded pixels.
//!
//! Build and run (release; the peer codecs are this crate's dependencies):
//!
//! ```text
//! cargo run --release -p l3-bench -- [FILES|FOLDERS] [--reps 5]
//!     [--json PATH] [--markdown PATH] [--list-adapters] [--no-gpu] [--no-pipeline]
//!     [--no-dataset] [--no-scaling]
//! ```
//!
//! For every input image (default: the bundled `samples/`), each codec encodes the pixels the
//! `image` crate decoded from the file, then decodes its own output; sizes, throughput and a
//! bit-exact round-trip check are reported; l3 runs as both of its profiles, "l3 fast" (format
//! version 1) and "l3 compact" (version 2). Further sections: a CPU memcpy of the output
//! size, a data-preparation pipeline (files on disk to normalised f32 CHW tensors), a dataset
//! section (packing into l3 shards versus PNG files, and reading them back), a scaling
//! run over image sizes, and wgpu rows (adapter, buffer copy bandwidth, GPU decoder when the
//! crate has one). See BENCHMARKS.md (current figures) and docs/bench-history.md (every
//! run).
//!
//! Modules, from the bottom up: `args` (options), `images` (inputs), `synthetic` (generated
//! inputs: the flat classes), `measure` (timing), `guard` (a section's failure stays the
//! section's), `codecs` (the codecs compared); `rows` (what the sections produce and the report
//! reads); one module per section (`comparison`, `pipeline`, `dataset` with `loader`,
//! `scaling`, `gpu` with `steady`, its steady-state batch), each producing its rows; and
//! `report` (tables; text, Markdown, JSON), which reads the rows and never a section.

mod args;
mod codecs;
mod comparison;
mod dataset;
mod gpu;
mod guard;
mod images;
mod loader;
mod measure;
mod pipeline;
mod report;
mod rows;
mod scaling;
mod steady;
mod synthetic;

use std::path::PathBuf;

use anyhow::Result;
use clap::Parser;

use args::Args;
use guard::one_line;
use images::Pixels;
use report::meta::Meta;
use report::Report;
use rows::{DatasetReport, GpuReport, PipelineRow, ScalingRow};

/// The GPU decoder, created once for the pipeline and GPU sections: None with `--no-gpu`;
/// Err (on one line) when it cannot be created.
type Decoder = Option<std::result::Result<l3::gpu::GpuDecoder, String>>;

fn main() -> Result<()> {
    let mut args = Args::parse();
    if args.list_adapters {
        print_adapters();
        return Ok(());
    }
    if let Some(dir) = &args.write_generated {
        return synthetic::write_png(dir);
    }
    if args.inputs.is_empty() {
        args.inputs = vec![PathBuf::from(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../samples"
        ))];
    }
    let (mut images, used_files) = images::load_images(&args.inputs)?;
    // The generated images come last: the pipeline section reads files, so it takes the
    // first `used_files.len()` images only.
    if !args.no_synthetic {
        images.extend(synthetic::images());
    }
    let meta = Meta::collect();
    announce(&images, &args, &meta);

    let codecs = comparison::bench_codecs(&images, &args)?;
    let decoder = gpu_decoder(&args);
    let gpu_decoder = decoder.as_ref().and_then(|d| d.as_ref().ok());
    let from_files = &images[..used_files.len()];
    let pipeline = pipeline_section(&used_files, from_files, &args, gpu_decoder)?;
    let dataset = dataset_section(&images, &args);
    let scaling = scaling_section(&images, &args)?;
    let gpu = gpu_section(&decoder, &images, &args);

    report::write(&Report::new(
        args, meta, images, codecs, pipeline, dataset, scaling, gpu,
    ))
}

/// `--list-adapters`: one line per wgpu adapter.
fn print_adapters() {
    let list = gpu::list_adapters();
    if list.is_empty() {
        println!("no wgpu adapters found");
    }
    for a in list {
        println!("{a}");
    }
}

/// The run's first line on stderr: what is measured, where.
fn announce(images: &[Pixels], args: &Args, meta: &Meta) {
    let total_px: u64 = images.iter().map(Pixels::pixels).sum();
    let total_raw: u64 = images.iter().map(|p| p.bytes.len() as u64).sum();
    eprintln!(
        "l3-bench: {} images, {:.1} MP, {:.1} MB raw; reps {}; {}",
        images.len(),
        total_px as f64 / 1e6,
        total_raw as f64 / 1e6,
        args.reps,
        meta.machine
    );
}

fn gpu_decoder(args: &Args) -> Decoder {
    if args.no_gpu {
        None
    } else {
        Some(l3::gpu::GpuDecoder::new_default().map_err(|e| one_line(&e.to_string())))
    }
}

/// The data-preparation pipeline's rows (empty with `--no-pipeline`).
fn pipeline_section(
    files: &[PathBuf],
    images: &[Pixels],
    args: &Args,
    gpu: Option<&l3::gpu::GpuDecoder>,
) -> Result<Vec<PipelineRow>> {
    if args.no_pipeline {
        return Ok(Vec::new());
    }
    eprintln!("  pipeline...");
    pipeline::bench_pipeline(files, images, args, gpu)
}

/// The dataset section (None with `--no-dataset`); its failure is the section's, not the
/// run's.
fn dataset_section(
    images: &[Pixels],
    args: &Args,
) -> Option<std::result::Result<DatasetReport, String>> {
    if args.no_dataset {
        return None;
    }
    eprintln!("  dataset...");
    Some(dataset::bench_dataset(images, args).map_err(|e| {
        let e = one_line(&format!("{e:#}"));
        eprintln!("  dataset: failed: {e}");
        e
    }))
}

/// The scaling section (None with `--no-scaling`).
fn scaling_section(images: &[Pixels], args: &Args) -> Result<Option<(String, Vec<ScalingRow>)>> {
    if args.no_scaling {
        return Ok(None);
    }
    eprintln!("  scaling...");
    Ok(Some(scaling::bench_scaling(images, args)?))
}

/// The wgpu section (None with `--no-gpu`); its failure is the section's, not the run's.
fn gpu_section(
    decoder: &Decoder,
    images: &[Pixels],
    args: &Args,
) -> Option<std::result::Result<GpuReport, String>> {
    let d = decoder.as_ref()?;
    eprintln!("  gpu...");
    let d = d.as_ref().map_err(String::as_str);
    Some(gpu::bench_gpu(d, images, args).map_err(|e| one_line(&format!("{e:#}"))))
}
