//! `l3 unpack`: a dataset back to PNG files (the original pixels), or a tensor dataset to
//! `.npy` files (`<key>/<array>.npy`). Every output path is planned and checked (safe,
//! distinct and, without `--force`, new) before anything is written.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::Args;

use crate::fsio;
use crate::limits::decode_options;
use crate::shards::{open_checked, open_store};
use l3::shard::format::check_key;
use l3::shard::{AnyManifest, ShardReader, TensorDataset, TensorManifest};
use l3::store::Store;

#[derive(Args)]
pub struct UnpackArgs {
    /// Dataset folder (with manifest.json), or its URL (`s3://bucket/prefix`, ...).
    pub dataset: String,
    /// Folder for the PNG files (keys become relative paths, with a .png extension).
    #[arg(short, long)]
    pub output: PathBuf,
    /// Overwrite files that already exist (without it, nothing is written if any exists).
    #[arg(long)]
    pub force: bool,
}

/// Where record `r` of shard `file` goes under `out`: its key as a relative path (with a `.png`
/// extension for an image). A key that is not a plain relative path is refused (a hostile
/// shard).
fn key_path(out: &Path, file: &str, i: usize, key: &str) -> Result<PathBuf> {
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
    Ok(out.join(rel))
}

/// Checks the planned outputs (who writes it, where): two on one path, one whose path is
/// another's folder, or (without `force`) a file that exists stops the command before
/// anything is written.
fn check_plan(output: &Path, planned: &[(String, PathBuf)], force: bool) -> Result<()> {
    let mut owner: HashMap<&Path, &str> = HashMap::new();
    for (who, out) in planned {
        if let Some(first) = owner.insert(out, who) {
            bail!(
                "{first} and {who} would both be written to {}; nothing was written",
                out.display()
            );
        }
    }
    for (_, out) in planned {
        for folder in out.ancestors().skip(1) {
            if folder == output {
                break;
            }
            if let Some(who) = owner.get(folder) {
                bail!(
                    "{who} would be written to {}, which another record needs as a folder \
                     ({}); nothing was written",
                    folder.display(),
                    out.display()
                );
            }
        }
    }
    if !force {
        let existing: Vec<&PathBuf> = planned
            .iter()
            .map(|(_, out)| out)
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
    Ok(())
}

/// Decodes every record at its top level to a PNG file under `--output`. Every output path is
/// planned first: an unsafe key, two records on one path (keys that differ only by their
/// extension), a record whose path is another's folder, or (without `--force`) a file that
/// exists stops the command before anything is written.
pub fn cmd_unpack(a: UnpackArgs) -> Result<u64> {
    let store = open_store(&a.dataset)?;
    let m = match AnyManifest::read_in(&store)? {
        AnyManifest::Tensors(m) => return unpack_tensors(&a, &store, m),
        AnyManifest::Images(m) => m,
    };
    let shards: Vec<ShardReader> = m
        .shards
        .iter()
        .map(|s| open_checked(&store, s, &m))
        .collect::<Result<_>>()?;
    let mut planned: Vec<(usize, usize, PathBuf)> = Vec::new();
    let mut owners = Vec::new();
    for (si, (s, shard)) in m.shards.iter().zip(&shards).enumerate() {
        for (i, r) in shard.records().iter().enumerate() {
            let out = key_path(&a.output, &s.file, i, &r.key)?.with_extension("png");
            owners.push((
                format!("{}: record {i} (key {:?})", s.file, r.key),
                out.clone(),
            ));
            planned.push((si, i, out));
        }
    }
    check_plan(&a.output, &owners, a.force)?;
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

/// Writes each array of every record of a tensor dataset as `<key>/<name>.npy` under
/// `--output` (bfloat16 as its bit patterns, `<u2`), every path planned and checked first.
fn unpack_tensors(a: &UnpackArgs, store: &Store, m: TensorManifest) -> Result<u64> {
    let d = TensorDataset::open_with_manifest(
        store,
        m,
        &crate::limits::limits(),
        std::time::Instant::now(),
    )?;
    let mut planned = Vec::new();
    for i in 0..d.len() {
        let (s, r) = d.locate(i)?;
        let file = d.shards()[s].name();
        let e = d.entry(i)?;
        let dir = key_path(&a.output, file, r, &e.key)?;
        for x in &e.arrays {
            let who = format!(
                "{file}: record {r} (key {:?}) array {:?}",
                e.key, x.spec.name
            );
            planned.push((who, dir.join(format!("{}.npy", x.spec.name))));
        }
    }
    check_plan(&a.output, &planned, a.force)?;
    let mut files = planned.iter();
    for i in 0..d.len() {
        let arrays = d.read(i)?;
        for (_, array) in arrays {
            let (_, out) = files.next().context("one planned path per array")?;
            fsio::write_atomic(out, &l3::tensor::to_npy(&array))?;
        }
    }
    println!(
        "unpacked {} arrays of {} records to {}",
        planned.len(),
        d.len(),
        a.output.display()
    );
    Ok(0)
}
