//! `l3 pack`: an image tree to record shards with an index and a manifest (a dataset).
//!
//! Packing is deterministic: the images are sorted by path, shard `i` holds images
//! `i * records_per_shard ..`, records are encoded with fixed options, so a rerun writes the
//! same bytes. Each shard is verified by decoding every record and comparing it with the source
//! pixels before it is written (atomically), then its sidecar `<shard>.pack.json` (the options
//! and each source's size, time and CRC-32); a rerun keeps a shard only when its sidecar
//! matches the new run's options and sources, rebuilds the others, and writes the manifest
//! last.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::Args;

use crate::display::{human, progress};
use crate::flags::{parse_patch_size, ProfileArg};
use crate::fsio;
use crate::inputs::{self, LabelFile};
use crate::limits::limits;
use l3::progressive::ProgressiveOptions;
use l3::shard::pack::{
    encode_record, pack_shard_recorded, PackInputs, PlannedRecord, ShardOutcome,
};
use l3::shard::tree::{ImageTree, TreeImage};
use l3::shard::{Manifest, MANIFEST_VERSION};
use l3::EncodeOptions;

#[derive(Args)]
pub struct PackArgs {
    /// Folder of images; the first folder level under it names each image's class (images
    /// directly in it have none).
    pub source: PathBuf,
    /// Dataset folder to create (shards and manifest.json), or an object-store URL
    /// (`s3://bucket/prefix`, ...): then packed in a temporary folder and copied there as
    /// `l3 cp` does (shards checked, manifest last).
    #[arg(short, long)]
    pub output: PathBuf,
    /// Records per shard.
    #[arg(long, default_value_t = 1024)]
    pub records_per_shard: usize,
    /// Labels from a file instead of folder names: `.csv` lines `path,label` (an optional
    /// `path,label` header line), or `.jsonl` lines `{"path": ..., "label": ..., "meta": ...}`
    /// (label a string or number; `meta`, any JSON, is stored as the record's metadata).
    /// Paths are relative to SOURCE with `/` separators; images not listed have no class.
    #[arg(long)]
    pub labels: Option<PathBuf>,
    /// Profile of the stored records.
    #[arg(long, value_enum, default_value_t = ProfileArg::Compact)]
    pub profile: ProfileArg,
    /// Patch side in pixels of the stored records (every level). 128 decodes faster on CPUs
    /// and is smaller on large images; 64 suits GPU decoding and makes the loader's crop
    /// windows tighter (BENCHMARKS.md, "Loader and shards").
    #[arg(long, default_value_t = 64, value_parser = parse_patch_size)]
    pub patch_size: u32,
    /// Levels per record (1..=8). With more than 1, each image is stored progressively: level
    /// 0 at 1/2^(levels-1) per side, each further level doubling the resolution, the last one
    /// the exact image, laid out level-major so a prefix of each shard holds every image at a
    /// lower level (SPEC.md, "Progressive records"). 3 puts level 0 at 1/4 per side.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u8).range(1..=8))]
    pub levels: u8,
    /// With --levels > 1: store an image flat (whole image in level 0, read at lower levels by
    /// subsampling) when its progressive form would be larger than this factor times the flat
    /// file (label maps and other flat images with hard edges; see
    /// `ProgressiveOptions::max_overhead` for why 1.25).
    #[arg(long, default_value_t = 1.25)]
    pub max_overhead: f64,
    /// Error bound of the records (an integer): 0 (default) is lossless; with E > 0 every
    /// stored sample is within E of the source (at most 127 for 8-bit and 32767 for 16-bit
    /// images), each record's payload header says so, every record is verified against the
    /// bound, and records are stored flat (lower levels are read by subsampling).
    #[arg(long, default_value_t = 0)]
    pub max_error: u16,
    /// Rewrite every shard, also those a previous run completed from the same sources with
    /// the same options (without it, such shards are kept and the others rebuilt).
    #[arg(long)]
    pub force: bool,
    /// Print only errors and the summary.
    #[arg(short, long)]
    pub quiet: bool,
}

/// Reads `--labels` within the input limit ([`inputs::parse_labels`]).
fn read_labels(path: &Path, keys: &BTreeSet<String>) -> Result<LabelFile> {
    let text = read_text_limited(path, limits().max_input_bytes)
        .with_context(|| format!("reading labels {}", path.display()))?;
    let jsonl = path
        .extension()
        .is_some_and(|e| e == "jsonl" || e == "ndjson");
    inputs::parse_labels(&text, jsonl, keys, path)
}

/// The UTF-8 text of `path`, refused if it is larger than `max` bytes (checked while reading,
/// so a file that grows is caught too; nothing larger is allocated).
fn read_text_limited(path: &Path, max: u64) -> Result<String> {
    use std::io::Read;
    let mut bytes = Vec::new();
    std::fs::File::open(path)?
        .take(max.saturating_add(1))
        .read_to_end(&mut bytes)?;
    if bytes.len() as u64 > max {
        bail!(l3::Error::from(l3::LimitsError::InputBytes {
            len: std::fs::metadata(path).map_or(bytes.len() as u64, |m| m.len()),
            max
        }));
    }
    Ok(String::from_utf8(bytes)?)
}

pub fn cmd_pack(a: PackArgs) -> Result<u64> {
    let out = a.output.to_string_lossy().into_owned();
    if l3::store::is_remote(&out) {
        let (force, quiet) = (a.force, a.quiet);
        let staging = tempfile::tempdir()?;
        let failed = cmd_pack(PackArgs {
            output: staging.path().to_path_buf(),
            ..a
        })?;
        if failed > 0 {
            bail!("{failed} failure(s) while packing: nothing copied to {out}");
        }
        super::cp::copy(&staging.path().to_string_lossy(), &out, force, quiet)?;
        return Ok(0);
    }
    if a.records_per_shard == 0 {
        bail!("--records-per-shard must be at least 1");
    }
    if a.max_overhead.is_nan() || a.max_overhead <= 0.0 {
        bail!("--max-overhead must be a positive number");
    }
    let progressive = ProgressiveOptions {
        levels: a.levels,
        max_overhead: a.max_overhead,
    };
    // The tree's plan (order, keys, classes, shards) is the library's, shared with Python.
    let tree = ImageTree::list(&a.source)?;
    for (dir, err) in &tree.unlisted {
        fsio::count_unlistable();
        eprintln!("error: {}: {err}", dir.display());
    }
    let jobs = &tree.images;
    if jobs.is_empty() {
        bail!("no images under {}", a.source.display());
    }
    let labels = match &a.labels {
        Some(path) => Some(read_labels(
            path,
            &jobs.iter().map(|j| j.key.clone()).collect(),
        )?),
        None => None,
    };
    // Label and metadata of an image: from the labels file, else its folder.
    let label_of = |job: &TreeImage| -> (Option<String>, Vec<u8>) {
        match &labels {
            Some(l) => l
                .get(&job.key)
                .map_or((None, Vec::new()), |(c, m)| (Some(c.clone()), m.clone())),
            None => (job.class.clone(), Vec::new()),
        }
    };
    let classes: Vec<String> = match &labels {
        Some(_) => jobs
            .iter()
            .filter_map(|j| label_of(j).0)
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect(),
        None => tree.classes(),
    };
    std::fs::create_dir_all(&a.output)
        .with_context(|| format!("creating {}", a.output.display()))?;
    fsio::remove_stale_temps(&a.output);
    let profile = a.profile.profile();
    let options = EncodeOptions {
        max_error: a.max_error,
        patch_log2: a.patch_size.trailing_zeros() as u8,
        ..EncodeOptions::for_profile(profile)
    };
    // Everything that changes a shard's bytes besides its sources, for the sidecars.
    let recorded_options = format!("levels {}; {progressive:?}; {options:?}", a.levels);
    let pb = progress(jobs.len(), a.quiet);
    let mut shards = Vec::new();
    let (mut written, mut kept) = (0, 0);
    for (name, chunk) in tree.shards(a.records_per_shard)? {
        let path = a.output.join(&name);
        let mut planned = Vec::with_capacity(chunk.len());
        let mut class_names = Vec::with_capacity(chunk.len());
        for job in chunk {
            let (label, meta) = label_of(job);
            let class = match &label {
                Some(c) => Some(
                    classes
                        .binary_search(c)
                        .map_err(|_| anyhow::anyhow!("label {c:?} is not among the classes"))?
                        as u32,
                ),
                None => None,
            };
            planned.push(PlannedRecord {
                key: job.key.clone(),
                class,
                meta,
            });
            class_names.push(label);
        }
        let sources: Vec<PathBuf> = chunk.iter().map(|j| j.path.clone()).collect();
        let inputs = PackInputs {
            options: recorded_options.clone(),
            sources: &sources,
            class_names: &class_names,
        };
        // Each record is read, encoded and verified through every level; a shard a previous
        // run built from the same sources with the same options is kept.
        let (info, outcome) =
            pack_shard_recorded(&path, &planned, a.levels, a.force, &inputs, |k| {
                let image = l3::image_support::read_image_limited(
                    &chunk[k].path,
                    limits().max_output_bytes,
                )?;
                let raw = l3::image_support::raw_image(&image)?;
                encode_record(&planned[k], &raw, &progressive, &options)
            })
            .with_context(|| format!("packing {name}"))?;
        match outcome {
            ShardOutcome::Written => written += 1,
            ShardOutcome::Kept => kept += 1,
        }
        pb.inc(chunk.len() as u64);
        shards.push(info);
    }
    pb.finish_and_clear();
    let manifest = Manifest {
        version: MANIFEST_VERSION,
        levels: a.levels,
        classes,
        records: shards.iter().map(|s| s.records).sum(),
        shards,
    };
    manifest.write(&a.output)?;
    let total: u64 = manifest.shards.iter().map(|s| s.bytes).sum();
    println!(
        "packed {} images into {} shard(s) ({written} written, {kept} already complete), {} classes, {}",
        manifest.records,
        manifest.shards.len(),
        manifest.classes.len(),
        human(total)
    );
    Ok(0)
}
