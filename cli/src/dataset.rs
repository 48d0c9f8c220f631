//! `l3 pack`, `l3 ls`, `l3 unpack` and `l3 verify-dataset`: image trees to record shards and
//! back.
//!
//! Packing is deterministic: the images are sorted by path, shard `i` holds images
//! `i * records_per_shard ..`, records are encoded with fixed options, so a rerun writes the
//! same bytes. Each shard is verified by decoding every record and comparing it with the source
//! pixels before it is written (atomically); a rerun after a kill keeps the shards that are
//! complete and match the plan, writes only the missing ones, and writes the manifest last.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::Args;

use crate::fsio::{self, Job};
use l3::progressive::{decode_level, LevelScheme, ProgressiveOptions};
use l3::shard::format::parse_shard;
use l3::shard::pack::{encode_record, pack_shard, PlannedRecord, ShardOutcome};
use l3::shard::{Manifest, ShardReader, MANIFEST_VERSION};
use l3::{EncodeOptions, Profile};

/// Largest index a shard may carry when opened by the tool (far above any real shard's).
const MAX_INDEX_BYTES: u64 = 1 << 30;

#[derive(Args)]
pub struct PackArgs {
    /// Folder of images; the first folder level under it names each image's class (images
    /// directly in it have none).
    pub source: PathBuf,
    /// Dataset folder to create (shards and manifest.json).
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
    #[arg(long, value_enum, default_value_t = crate::ProfileArg::Compact)]
    pub profile: crate::ProfileArg,
    /// Patch side in pixels of the stored records (every level). 128 decodes faster on CPUs
    /// and is smaller on large images; 64 suits GPU decoding and makes the loader's crop
    /// windows tighter (BENCHMARKS.md).
    #[arg(long, default_value_t = 64, value_parser = crate::parse_patch_size)]
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
    /// Rewrite every shard, also those a previous run completed (needed after changing
    /// `--profile`, `--patch-size` or `--max-error`, which a complete shard's index does not
    /// record).
    #[arg(long)]
    pub force: bool,
    /// Print only errors and the summary.
    #[arg(short, long)]
    pub quiet: bool,
}

#[derive(Args)]
pub struct DatasetArgs {
    /// Dataset folder (with manifest.json).
    pub dataset: PathBuf,
}

#[derive(Args)]
pub struct LsArgs {
    /// Dataset folder (with manifest.json).
    pub dataset: PathBuf,
    /// Also list every record: shard, index, key, class, shape, scheme and bytes per level.
    #[arg(short, long)]
    pub records: bool,
}

#[derive(Args)]
pub struct UnpackArgs {
    /// Dataset folder (with manifest.json).
    pub dataset: PathBuf,
    /// Folder for the PNG files (keys become relative paths, with a .png extension).
    #[arg(short, long)]
    pub output: PathBuf,
}

/// A label and metadata per image key, from `--labels`.
type LabelFile = std::collections::HashMap<String, (String, Vec<u8>)>;

/// Reads `--labels` (see [`PackArgs::labels`]). Every line must parse and every listed path
/// must be among `keys`; a path listed twice is an error.
fn read_labels(path: &Path, keys: &BTreeSet<String>) -> Result<LabelFile> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading labels {}", path.display()))?;
    let jsonl = path
        .extension()
        .is_some_and(|e| e == "jsonl" || e == "ndjson");
    let mut labels = LabelFile::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        let at = || format!("{}:{}", path.display(), n + 1);
        if line.is_empty() || (!jsonl && n == 0 && line == "path,label") {
            continue;
        }
        let (key, label, meta) = if jsonl {
            let v: serde_json::Value =
                serde_json::from_str(line).with_context(|| format!("{}: not JSON", at()))?;
            let key = v["path"]
                .as_str()
                .with_context(|| format!("{}: no string \"path\"", at()))?
                .to_owned();
            let label = match &v["label"] {
                serde_json::Value::String(s) => s.clone(),
                serde_json::Value::Number(x) => x.to_string(),
                _ => bail!("{}: \"label\" must be a string or a number", at()),
            };
            let meta = match v.get("meta") {
                Some(m) => serde_json::to_vec(m)?,
                None => Vec::new(),
            };
            (key, label, meta)
        } else {
            let (key, label) = line
                .rsplit_once(',')
                .with_context(|| format!("{}: expected path,label", at()))?;
            (key.trim().to_owned(), label.trim().to_owned(), Vec::new())
        };
        if !keys.contains(&key) {
            bail!("{}: {key:?} is not an image under the source folder", at());
        }
        if labels.insert(key.clone(), (label, meta)).is_some() {
            bail!("{}: {key:?} is listed twice", at());
        }
    }
    Ok(labels)
}

/// The class of an image: the first folder under the source root, if any.
fn class_name(job: &Job) -> Option<String> {
    let mut parts = job.relative.components();
    let first = parts.next()?;
    parts
        .next()
        .is_some()
        .then(|| first.as_os_str().to_string_lossy().into_owned())
}

fn shard_name(i: usize) -> String {
    format!("shard-{i:05}.l3s")
}

fn key_of(job: &Job) -> String {
    job.relative.to_string_lossy().replace('\\', "/")
}

pub fn cmd_pack(a: PackArgs) -> Result<u64> {
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
    let roots = fsio::collect_jobs(std::slice::from_ref(&a.source), crate::IMAGE_EXTENSIONS)?;
    let jobs: Vec<Job> = roots.into_iter().flat_map(|(_, j)| j).collect();
    if jobs.is_empty() {
        bail!("no images under {}", a.source.display());
    }
    let labels = match &a.labels {
        Some(path) => Some(read_labels(path, &jobs.iter().map(key_of).collect())?),
        None => None,
    };
    // Label and metadata of an image: from the labels file, else its folder.
    let label_of = |job: &Job| -> (Option<String>, Vec<u8>) {
        match &labels {
            Some(l) => l
                .get(&key_of(job))
                .map_or((None, Vec::new()), |(c, m)| (Some(c.clone()), m.clone())),
            None => (class_name(job), Vec::new()),
        }
    };
    let classes: Vec<String> = jobs
        .iter()
        .filter_map(|j| label_of(j).0)
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    std::fs::create_dir_all(&a.output)
        .with_context(|| format!("creating {}", a.output.display()))?;
    fsio::remove_stale_temps(&a.output);
    let profile = match a.profile {
        crate::ProfileArg::Fast => Profile::Fast,
        crate::ProfileArg::Compact => Profile::Compact,
    };
    let options = EncodeOptions {
        max_error: a.max_error,
        patch_log2: a.patch_size.trailing_zeros() as u8,
        ..EncodeOptions::for_profile(profile)
    };
    let pb = crate::progress(jobs.len(), a.quiet);
    let mut shards = Vec::new();
    let (mut written, mut kept) = (0, 0);
    for (i, chunk) in jobs.chunks(a.records_per_shard).enumerate() {
        let path = a.output.join(shard_name(i));
        let planned: Vec<PlannedRecord> = chunk
            .iter()
            .map(|job| {
                let (label, meta) = label_of(job);
                let class = label.map(|c| classes.binary_search(&c).expect("collected") as u32);
                PlannedRecord {
                    key: key_of(job),
                    class,
                    meta,
                }
            })
            .collect();
        // Each record is read, encoded and verified through every level; a shard a previous
        // run completed with the same records is kept.
        let (info, outcome) = pack_shard(&path, &planned, a.levels, a.force, |k| {
            let image = l3::image_support::read_image_limited(
                &chunk[k].input,
                crate::limits().max_output_bytes,
            )?;
            let raw = l3::image_support::raw_image(&image)?;
            encode_record(&planned[k], &raw, &progressive, &options)
        })
        .with_context(|| format!("packing {}", shard_name(i)))?;
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
        crate::human(total)
    );
    Ok(0)
}

pub fn cmd_ls(a: LsArgs) -> Result<u64> {
    let m = Manifest::read(&a.dataset)?;
    let total: u64 = m.shards.iter().map(|s| s.bytes).sum();
    println!(
        "{}: {} records in {} shard(s), {} level(s), {}",
        a.dataset.display(),
        m.records,
        m.shards.len(),
        m.levels,
        crate::human(total)
    );
    let mut per_class = vec![0u64; m.classes.len()];
    let mut unlabelled = 0u64;
    let mut level_bytes = vec![0u64; m.levels as usize];
    let mut flat_records = 0u64;
    for s in &m.shards {
        let shard = ShardReader::open(&a.dataset.join(&s.file), MAX_INDEX_BYTES)
            .with_context(|| format!("opening {}", s.file))?;
        for (i, r) in shard.records().iter().enumerate() {
            if a.records {
                let levels: Vec<String> = r.levels.iter().map(|l| l.len.to_string()).collect();
                println!(
                    "  {} #{i} {} class {} {}x{}x{} {}-bit {:?} levels [{}] bytes",
                    s.file,
                    r.key,
                    r.class
                        .and_then(|c| m.classes.get(c as usize))
                        .map_or("-", |c| c.as_str()),
                    r.width,
                    r.height,
                    r.channels,
                    r.depth,
                    r.scheme,
                    levels.join(", ")
                );
            }
            match r.class.and_then(|c| per_class.get_mut(c as usize)) {
                Some(n) => *n += 1,
                None => unlabelled += 1,
            }
            for (b, l) in level_bytes.iter_mut().zip(&r.levels) {
                *b += l.len;
            }
            flat_records += (r.scheme == LevelScheme::Flat) as u64;
        }
    }
    if m.levels > 1 {
        println!(
            "  {} record(s) progressive (interlace), {flat_records} stored flat",
            m.records - flat_records
        );
    }
    let payload: u64 = level_bytes.iter().sum();
    let mut prefix = 0u64;
    for (k, b) in level_bytes.iter().enumerate() {
        prefix += b;
        let s = l3::progressive::level_stride(m.levels, k as u8);
        println!(
            "  level {k} (1/{s} per side): {}, prefix to here {} ({:.1}% of the payload bytes)",
            crate::human(*b),
            crate::human(prefix),
            100.0 * prefix as f64 / payload.max(1) as f64
        );
    }
    for (name, n) in m.classes.iter().zip(&per_class) {
        println!("  class {name}: {n}");
    }
    if unlabelled > 0 {
        println!("  no class: {unlabelled}");
    }
    Ok(0)
}

/// Checks every shard against the manifest (size, CRC-32, record count) and decodes every
/// level of every record. Returns the number of failed shards.
pub fn cmd_verify_dataset(a: DatasetArgs) -> Result<u64> {
    let m = Manifest::read(&a.dataset)?;
    let mut failed = 0;
    let mut records = 0u64;
    for s in &m.shards {
        let r = (|| -> Result<()> {
            let path = a.dataset.join(&s.file);
            let bytes = std::fs::read(&path)?;
            if bytes.len() as u64 != s.bytes || crc32fast::hash(&bytes) != s.crc32 {
                bail!("size or CRC-32 differs from the manifest");
            }
            // The bytes read once: parsed, then each level checked by its CRC and decoded.
            let (header, _, entries) = parse_shard(&bytes)?;
            if entries.len() as u64 != s.records || header.level_count != m.levels {
                bail!("record or level count differs from the manifest");
            }
            for (i, r) in entries.iter().enumerate() {
                let mut payloads = Vec::with_capacity(r.levels.len());
                for (k, l) in r.levels.iter().enumerate() {
                    let file = &bytes[l.offset as usize..(l.offset + l.len) as usize];
                    if crc32fast::hash(file) != l.crc32 {
                        bail!("record {i} ({}) level {k}: CRC-32 mismatch", r.key);
                    }
                    payloads.push(file);
                }
                // The top level goes through every payload the record has.
                let stored = r.stored(header.level_count, &payloads);
                decode_level(&stored, header.level_count - 1, &crate::decode_options())
                    .with_context(|| format!("record {i} ({})", r.key))?;
            }
            records += entries.len() as u64;
            Ok(())
        })();
        if let Err(e) = r {
            failed += 1;
            eprintln!("error: {}: {e:#}", s.file);
        }
    }
    println!(
        "{}: {records} records in {} shard(s) decoded, {failed} shard(s) failed",
        a.dataset.display(),
        m.shards.len()
    );
    Ok(failed)
}

pub fn cmd_unpack(a: UnpackArgs) -> Result<u64> {
    let m = Manifest::read(&a.dataset)?;
    let mut written = 0u64;
    for s in &m.shards {
        let shard = ShardReader::open(&a.dataset.join(&s.file), MAX_INDEX_BYTES)
            .with_context(|| format!("opening {}", s.file))?;
        let last = shard.level_count() - 1;
        for (i, r) in shard.records().iter().enumerate() {
            // Keys are relative paths written by `l3 pack`; anything else is refused rather
            // than written outside the output folder.
            let rel = Path::new(&r.key);
            if rel.is_absolute()
                || rel
                    .components()
                    .any(|c| !matches!(c, std::path::Component::Normal(_)))
            {
                bail!("{}: record {i} has an unsafe key {:?}", s.file, r.key);
            }
            let level = shard
                .decode_record(i, last, &crate::decode_options())
                .with_context(|| format!("{}: record {i} ({})", s.file, r.key))?;
            let image = l3::image_support::image_from_level(level)?;
            let out = a.output.join(rel).with_extension("png");
            let mut png = Vec::new();
            image
                .write_to(&mut std::io::Cursor::new(&mut png), image::ImageFormat::Png)
                .with_context(|| format!("encoding {}", out.display()))?;
            fsio::write_atomic(&out, &png)?;
            written += 1;
        }
    }
    println!("unpacked {written} images to {}", a.output.display());
    Ok(0)
}
