//! `l3 unpack`: a dataset back to PNG files (the original pixels). Every output path is
//! planned and checked (safe, distinct and, without `--force`, new) before anything is
//! written.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::Args;

use crate::fsio;
use crate::limits::decode_options;
use crate::shards::open_checked;
use l3::shard::format::check_key;
use l3::shard::{Manifest, ShardReader};

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
            .decode_record(*i, shard.level_count() - 1, &decode_options())
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
