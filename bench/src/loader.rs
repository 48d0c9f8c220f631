//! Loader rows of the dataset section: one epoch from storage to a batch of augmented f32
//! NCHW tensors (random resized crop to 224 x 224, flip, ImageNet normalisation: the same
//! `l3::loader::Augment` code for every row), through `l3::loader::Loader` (CPU path) on
//! compact, fast and progressive shards, and through a PNG + `image` crate + rayon loader.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Result;
use rayon::prelude::*;

use l3::loader::{Augment, Loader, LoaderOptions, LoaderState, Partition};
use l3::progressive::{encode_levels, LevelImage, ProgressiveOptions};
use l3::shard::{Dataset, Manifest, RecordInput, ShardInfo, ShardWriter, MANIFEST_VERSION};
use l3::{EncodeOptions, Profile};

use crate::images::Pixels;
use crate::measure::{measure, Stats};
use crate::rows::LoaderRow;

/// Batch size of every loader row (the report states it).
const BATCH: u32 = LoaderRow::BATCH;
const SEED: u64 = 1;

/// Packs the images for the l3 rows (untimed) in `dir`, then times one epoch per row.
pub fn bench_loader(
    dir: &Path,
    images: &[Pixels],
    png_files: &[PathBuf],
    reps: usize,
    budget: f64,
) -> Result<Vec<LoaderRow>> {
    let threads = rayon::current_num_threads();
    let mut rows = Vec::new();
    let mut row = |name: String, time: Stats, cpu: Option<f64>, png_reference| {
        rows.push(LoaderRow {
            name,
            images: images.len(),
            time,
            cpu_seconds: cpu,
            png_reference,
        })
    };
    let variants: [(&str, Profile, u8, Option<u8>, bool); 5] = [
        ("compact, full resolution", Profile::Compact, 1, None, true),
        (
            "compact, full resolution, whole image decoded",
            Profile::Compact,
            1,
            None,
            false,
        ),
        ("fast, full resolution", Profile::Fast, 1, None, true),
        (
            "fast, full resolution, whole image decoded",
            Profile::Fast,
            1,
            None,
            false,
        ),
        (
            "compact progressive (3 levels), level 1 = 1/2 per side",
            Profile::Compact,
            3,
            Some(1),
            true,
        ),
    ];
    for (label, profile, levels, level, crop_window) in variants {
        let ds_dir = dir.join(format!("loader-{profile:?}-{levels}"));
        if !ds_dir.join("manifest.json").is_file() {
            std::fs::create_dir_all(&ds_dir)?;
            pack_dataset(&ds_dir, images, profile, levels)?;
        }
        let ds = Arc::new(Dataset::open(&ds_dir)?);
        let (time, cpu) = timed(reps, budget, || {
            let mut o = LoaderOptions::new(Partition::single(BATCH));
            o.level = level;
            o.crop_window_decode = crop_window;
            o.end_epoch = 1;
            o.threads = threads;
            let mut n = 0usize;
            let start = LoaderState {
                seed: SEED,
                ..Default::default()
            };
            for b in Loader::new(ds.clone(), o, start)? {
                let b = b?;
                anyhow::ensure!(b.skipped.is_empty(), "skipped records: {:?}", b.skipped);
                n += b.samples.len();
                std::hint::black_box(&b.data);
            }
            anyhow::ensure!(n == images.len(), "{n} samples, {} images", images.len());
            Ok(n)
        })?;
        row(
            format!("l3 Loader (CPU, {threads} threads): {label}"),
            time,
            cpu,
            false,
        );
    }
    let (time, cpu) = timed(reps, budget, || png_epoch(png_files))?;
    row(
        format!("PNG files + image crate + rayon ({threads} threads), same augmentation"),
        time,
        cpu,
        true,
    );
    Ok(rows)
}

/// The PNG loader: the same plan (permutation of epoch 0, batches of [`BATCH`]), each batch's
/// files read and decoded by the `image` crate and augmented into one tensor, rayon over the
/// batch's files.
fn png_epoch(files: &[PathBuf]) -> Result<usize> {
    let aug = Augment::default();
    let perm = l3::loader::permutation(SEED, 0, files.len() as u32);
    let mut n = 0;
    for batch in perm.chunks(BATCH as usize) {
        let mut data = vec![0f32; batch.len() * aug.output_len()];
        data.par_chunks_mut(aug.output_len())
            .zip(batch)
            .try_for_each(|(out, &i)| -> Result<()> {
                let bytes = std::fs::read(&files[i as usize])?;
                let img = image::load_from_memory_with_format(&bytes, image::ImageFormat::Png)?;
                let raw = l3::image_support::raw_image(&img)?;
                let level = LevelImage {
                    width: img.width(),
                    height: img.height(),
                    channels: raw.color.channels(),
                    depth: if matches!(raw.samples, l3::Samples::U8(_)) {
                        8
                    } else {
                        16
                    },
                    data: img.as_bytes().to_vec(),
                };
                let p = aug.params(SEED, 0, i as u64, level.width, level.height);
                aug.apply(&level, &p, out)?;
                Ok(())
            })?;
        std::hint::black_box(&data);
        n += batch.len();
    }
    Ok(n)
}

/// `measure`, plus the process CPU time of the last rep.
fn timed(
    reps: usize,
    budget: f64,
    mut f: impl FnMut() -> Result<usize>,
) -> Result<(Stats, Option<f64>)> {
    let mut cpu = None;
    let (stats, _) = measure(reps, budget, || {
        let before = process_cpu_seconds();
        let r = f()?;
        cpu = before.zip(process_cpu_seconds()).map(|(a, b)| b - a);
        Ok(r)
    })?;
    Ok((stats, cpu))
}

/// User + system CPU seconds of this process, from /proc/self/stat (Linux; clock ticks at the
/// usual 100 Hz).
fn process_cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command name (which may contain spaces) start after the last ')'.
    let rest = &stat[stat.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let utime: f64 = f.get(11)?.parse().ok()?;
    let stime: f64 = f.get(12)?.parse().ok()?;
    Some((utime + stime) / 100.0)
}

/// Writes `images` as a dataset (shards of 1024, manifest) with `profile` and `levels`.
fn pack_dataset(dir: &Path, images: &[Pixels], profile: Profile, levels: u8) -> Result<()> {
    let options = EncodeOptions::for_profile(profile);
    let progressive = ProgressiveOptions {
        levels,
        ..ProgressiveOptions::default()
    };
    let records: Vec<RecordInput> = images
        .par_iter()
        .map(|p| -> Result<RecordInput> {
            Ok(RecordInput {
                key: p.name.clone(),
                class: None,
                meta: Vec::new(),
                width: p.width,
                height: p.height,
                levels: encode_levels(&p.raw(), &progressive, &options)?,
            })
        })
        .collect::<Result<_>>()?;
    let mut shards = Vec::new();
    for (i, chunk) in records.chunks(1024).enumerate() {
        let mut w = ShardWriter::new(levels)?;
        for r in chunk {
            w.add(r.clone())?;
        }
        let file = format!("shard-{i:05}.l3s");
        let bytes = w.to_bytes();
        l3::shard::write_atomic(&dir.join(&file), &bytes)?;
        shards.push(ShardInfo::of_shard(file, &bytes)?);
    }
    Manifest {
        version: MANIFEST_VERSION,
        levels,
        classes: Vec::new(),
        records: records.len() as u64,
        shards,
    }
    .write(dir)?;
    Ok(())
}
