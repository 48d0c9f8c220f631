//! `l3 pack`, `l3 ls`, `l3 unpack` and `l3 verify-dataset`: image trees to record shards and
//! back.
//!
//! Packing is deterministic: the images are sorted by path, shard `i` holds images
//! `i * records_per_shard ..`, records are encoded with fixed options, so a rerun writes the
//! same bytes. Each shard is verified by decoding every record and comparing it with the source
//! pixels before it is written (atomically), then its sidecar `<shard>.pack.json` (the options
//! and each source's size, time and CRC-32); a rerun keeps a shard only when its sidecar
//! matches the new run's options and sources, rebuilds the others, and writes the manifest
//! last. Every read of a shard is bounded by `--max-input-bytes`; `unpack` writes nothing
//! until every output path is known to be safe, distinct and (without `--force`) new.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::Args;

use crate::fsio::{self, Job};
use crate::inputs::{self, LabelFile};
use l3::progressive::{decode_level, LevelScheme, ProgressiveOptions};
use l3::shard::format::check_key;
use l3::shard::pack::{
    encode_record, pack_shard_recorded, PackInputs, PackRecord, PlannedRecord, ShardOutcome,
};
use l3::shard::{file_crc32, Manifest, ShardInfo, ShardReader, MANIFEST_VERSION};
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
    /// Rewrite every shard, also those a previous run completed from the same sources with
    /// the same options (without it, such shards are kept and the others rebuilt).
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
    /// Overwrite files that already exist (without it, nothing is written if any exists).
    #[arg(long)]
    pub force: bool,
}

/// Reads `--labels` within the input limit ([`inputs::parse_labels`]).
fn read_labels(path: &Path, keys: &BTreeSet<String>) -> Result<LabelFile> {
    let text = read_text_limited(path, crate::limits().max_input_bytes)
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
    // Every key is checked before any shard is written.
    for job in &jobs {
        if let Err(reason) = check_key(&key_of(job)) {
            bail!("{}: cannot be a record key: {reason}", job.input.display());
        }
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
    // Everything that changes a shard's bytes besides its sources, for the sidecars.
    let recorded_options = format!("levels {}; {progressive:?}; {options:?}", a.levels);
    let pb = crate::progress(jobs.len(), a.quiet);
    let mut shards = Vec::new();
    let (mut written, mut kept) = (0, 0);
    for (i, chunk) in jobs.chunks(a.records_per_shard).enumerate() {
        let path = a.output.join(shard_name(i));
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
                key: key_of(job),
                class,
                meta,
            });
            class_names.push(label);
        }
        let sources: Vec<PathBuf> = chunk.iter().map(|j| j.input.clone()).collect();
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
        let shard = open_checked(&a.dataset, s, &m)?;
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

/// Opens shard `s` of the dataset in `dir` (index only, reads bounded by `--max-input-bytes`)
/// and checks it against the manifest `m` ([`ShardInfo::mismatches`]).
fn open_checked(dir: &Path, s: &ShardInfo, m: &Manifest) -> Result<ShardReader> {
    let limits = crate::limits();
    let shard = ShardReader::open_with_limits(&dir.join(&s.file), MAX_INDEX_BYTES, &limits)
        .with_context(|| format!("opening {}", s.file))?;
    let problems = s.mismatches(&shard, m.levels, m.classes.len());
    if !problems.is_empty() {
        bail!("{}", problems.join("; "));
    }
    Ok(shard)
}

/// Most problems reported per shard (the rest are counted).
const MAX_REPORTED: usize = 20;

/// Checks every shard against the manifest (every field: size, CRC-32, records, levels, bytes
/// per level, class ids) and against its pack sidecar if it has one (keys, class names, size,
/// CRC-32), then reads every level of every record (CRC-checked) and decodes the top level.
/// Every problem is reported on its own line naming the shard (and the record and key). No
/// read is larger than `--max-input-bytes`. Returns the number of failed shards.
pub fn cmd_verify_dataset(a: DatasetArgs) -> Result<u64> {
    let m = Manifest::read(&a.dataset)?;
    let mut failed = 0;
    let mut records = 0u64;
    for s in &m.shards {
        let problems = verify_shard(&a.dataset, s, &m, &mut records);
        if !problems.is_empty() {
            failed += 1;
            for p in problems.iter().take(MAX_REPORTED) {
                eprintln!("error: {p}");
            }
            if problems.len() > MAX_REPORTED {
                let more = problems.len() - MAX_REPORTED;
                eprintln!("error: {}: {more} more problem(s)", s.file);
            }
        }
    }
    println!(
        "{}: {records} records in {} shard(s) decoded, {failed} shard(s) failed",
        a.dataset.display(),
        m.shards.len()
    );
    Ok(failed)
}

/// Every problem of shard `s` (see [`cmd_verify_dataset`]); counts the records decoded.
fn verify_shard(dir: &Path, s: &ShardInfo, m: &Manifest, decoded: &mut u64) -> Vec<String> {
    let limits = crate::limits();
    let path = dir.join(&s.file);
    let mut problems = Vec::new();
    // The size first: nothing is read from a shard larger than the limit.
    let len = match std::fs::metadata(&path) {
        Ok(md) => md.len(),
        Err(e) => return vec![format!("{}: {e}", s.file)],
    };
    if len != s.bytes {
        problems.push(format!(
            "{}: bytes: the shard has {len}, the manifest says {}",
            s.file, s.bytes
        ));
    }
    if len > limits.max_input_bytes {
        problems.push(format!(
            "{}: {len} bytes, above the input limit of {} bytes (--max-input-bytes)",
            s.file, limits.max_input_bytes
        ));
        return problems;
    }
    let shard = match ShardReader::open_with_limits(&path, MAX_INDEX_BYTES, &limits) {
        Ok(shard) => shard,
        Err(e) => {
            problems.push(format!("{}: {e}", s.file));
            return problems;
        }
    };
    // The size was reported above.
    problems.extend(
        s.mismatches(&shard, m.levels, m.classes.len())
            .into_iter()
            .filter(|p| !p.starts_with(&format!("{}: bytes:", s.file))),
    );
    let crc = file_crc32(&path);
    match &crc {
        Ok(c) if *c != s.crc32 => problems.push(format!(
            "{}: crc32: the shard has {c:#010x}, the manifest says {:#010x}",
            s.file, s.crc32
        )),
        Ok(_) => {}
        Err(e) => problems.push(format!("{}: {e}", s.file)),
    }
    match PackRecord::read(&path) {
        Ok(Some(p)) => problems.extend(check_sidecar(&p, &shard, s, m, len, crc.ok())),
        Ok(None) => {}
        Err(e) => problems.push(format!("{}: {e}", s.file)),
    }
    let top = shard.level_count() - 1;
    for (i, r) in shard.records().iter().enumerate() {
        let at = format!("{}: record {i} (key {:?})", s.file, r.key);
        if let Err(reason) = check_key(&r.key) {
            problems.push(format!("{at}: key: {reason}"));
        }
        let result = (|| -> l3::Result<()> {
            let payloads: Vec<Vec<u8>> = (0..shard.level_count())
                .map(|k| shard.read_level(i, k))
                .collect::<l3::Result<_>>()?;
            let refs: Vec<&[u8]> = payloads.iter().map(Vec::as_slice).collect();
            decode_level(
                &shard.stored_levels(i, &refs)?,
                top,
                &crate::decode_options(),
            )?;
            Ok(())
        })();
        match result {
            Ok(()) => *decoded += 1,
            Err(e) => problems.push(format!("{at}: {e}")),
        }
    }
    problems
}

/// What a shard's pack sidecar `p` says that disagrees with the shard (`len` bytes, CRC-32
/// `crc`) or with the manifest's class names.
fn check_sidecar(
    p: &PackRecord,
    shard: &ShardReader,
    s: &ShardInfo,
    m: &Manifest,
    len: u64,
    crc: Option<u32>,
) -> Vec<String> {
    let name = format!("{}.pack.json", s.file);
    let mut problems = Vec::new();
    if p.shard_bytes != len || crc.is_some_and(|c| c != p.shard_crc32) {
        problems.push(format!(
            "{name}: records a shard of {} bytes with CRC-32 {:#010x}, {} is another",
            p.shard_bytes, p.shard_crc32, s.file
        ));
    }
    if p.records.len() != shard.len() {
        problems.push(format!(
            "{name}: records: {} in the pack record, {} in the shard",
            p.records.len(),
            shard.len()
        ));
    }
    for (i, (r, packed)) in shard.records().iter().zip(&p.records).enumerate() {
        let at = format!("{}: record {i} (key {:?})", s.file, r.key);
        if packed.key != r.key {
            problems.push(format!("{at}: key: the pack record says {:?}", packed.key));
        }
        let named = r.class.and_then(|c| m.classes.get(c as usize));
        if named != packed.class_name.as_ref() {
            problems.push(format!(
                "{at}: class: the manifest names it {named:?}, the pack record {:?}",
                packed.class_name
            ));
        }
    }
    problems
}

/// Where record `r` of shard `file` goes under `out`: its key as a relative path with a `.png`
/// extension. A key that is not a plain relative path is refused (a hostile shard).
fn unpack_path(out: &Path, file: &str, i: usize, key: &str) -> Result<PathBuf> {
    let rel = Path::new(key);
    let normal = rel
        .components()
        .all(|c| matches!(c, std::path::Component::Normal(_)));
    if let Err(reason) = check_key(key) {
        bail!("{file}: record {i} has an unsafe key {key:?}: {reason}");
    }
    if !normal || rel.is_absolute() {
        bail!("{file}: record {i} has an unsafe key {key:?}: not a relative path here");
    }
    Ok(out.join(rel).with_extension("png"))
}

/// Decodes every record at its top level to a PNG file under `--output`. Every output path is
/// planned first: an unsafe key, two records on one path (keys that differ only by their
/// extension), a record whose path is another's folder, or (without `--force`) a file that
/// exists stops the command before anything is written.
pub fn cmd_unpack(a: UnpackArgs) -> Result<u64> {
    let m = Manifest::read(&a.dataset)?;
    let shards: Vec<ShardReader> = m
        .shards
        .iter()
        .map(|s| open_checked(&a.dataset, s, &m))
        .collect::<Result<_>>()?;
    let mut planned: Vec<(usize, usize, PathBuf)> = Vec::new();
    let mut owner: HashMap<PathBuf, (String, usize, String)> = HashMap::new();
    for (si, (s, shard)) in m.shards.iter().zip(&shards).enumerate() {
        for (i, r) in shard.records().iter().enumerate() {
            let out = unpack_path(&a.output, &s.file, i, &r.key)?;
            if let Some((f, j, k)) = owner.insert(out.clone(), (s.file.clone(), i, r.key.clone())) {
                bail!(
                    "{f}: record {j} (key {k:?}) and {}: record {i} (key {:?}) would both be \
                     written to {}; nothing was written",
                    s.file,
                    r.key,
                    out.display()
                );
            }
            planned.push((si, i, out));
        }
    }
    for (_, _, out) in &planned {
        for folder in out.ancestors().skip(1) {
            if folder == a.output {
                break;
            }
            if let Some((f, j, k)) = owner.get(folder) {
                bail!(
                    "{f}: record {j} (key {k:?}) would be written to {}, which another record \
                     needs as a folder ({}); nothing was written",
                    folder.display(),
                    out.display()
                );
            }
        }
    }
    if !a.force {
        let existing: Vec<&PathBuf> = planned
            .iter()
            .map(|(.., out)| out)
            .filter(|out| out.symlink_metadata().is_ok())
            .collect();
        if let Some(first) = existing.first() {
            bail!(
                "{} exists ({} of the {} outputs exist); use --force to overwrite; nothing \
                 was written",
                first.display(),
                existing.len(),
                planned.len()
            );
        }
    }
    let mut written = 0u64;
    for (si, i, out) in &planned {
        let (s, shard) = (&m.shards[*si], &shards[*si]);
        let key = &shard.records()[*i].key;
        let level = shard
            .decode_record(*i, shard.level_count() - 1, &crate::decode_options())
            .with_context(|| format!("{}: record {i} (key {key:?})", s.file))?;
        let image = l3::image_support::image_from_level(level)?;
        let mut png = Vec::new();
        image
            .write_to(&mut std::io::Cursor::new(&mut png), image::ImageFormat::Png)
            .with_context(|| format!("encoding {}", out.display()))?;
        fsio::write_atomic(out, &png)?;
        written += 1;
    }
    println!("unpacked {written} images to {}", a.output.display());
    Ok(0)
}
