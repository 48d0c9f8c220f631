//! Dataset section: the run's images packed into l3 shards (as `l3 pack` does) versus the same
//! images as one PNG file each; pack throughput, read throughput (page cache, and cold when
//! the page cache can be dropped), bytes read against the ideal, shard overhead and the size
//! a tar of the same records would have (computed, not written).
//!
//! Everything lives in a scratch folder under the system temp dir, removed at the end.

use std::fs::File;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use rayon::prelude::*;

use l3::progressive::{encode_levels, ProgressiveOptions};
use l3::shard::{RecordInput, ShardReader, ShardWriter};
use l3::{DecodeOptions, EncodeOptions, Profile};

use crate::args::Args;
use crate::codecs::png_encode;
use crate::images::Pixels;
use crate::measure::{measure, stats_of, Stats};
use crate::rows::{DatasetReport, DatasetRow, LevelRow, ProgressiveReport};

/// Records per shard (fewer shards' worth when the run has fewer images).
pub const RECORDS_PER_SHARD: usize = 1024;
/// Levels of the progressive shards (level 0 at 1/4 per side), as `l3 pack --levels 3`.
pub const PROGRESSIVE_LEVELS: u8 = 3;
/// Cap on a shard's index when reading it back (as the `l3` tool).
const MAX_INDEX_BYTES: u64 = 1 << 30;
/// tar: one 512-byte header per member, members padded to 512 bytes, two zero blocks at the
/// end (the 10 KiB record padding GNU tar adds by default is left out).
const TAR_BLOCK: u64 = 512;
const TAR_END: u64 = 1024;

pub fn bench_dataset(images: &[Pixels], args: &Args) -> Result<DatasetReport> {
    let dir = std::env::temp_dir().join(format!("l3-bench-dataset-{}", std::process::id()));
    let result = (|| {
        std::fs::create_dir_all(dir.join("shards"))?;
        std::fs::create_dir_all(dir.join("png"))?;
        run(&dir, images, args)
    })();
    let _ = std::fs::remove_dir_all(&dir);
    result
}

fn run(dir: &Path, images: &[Pixels], args: &Args) -> Result<DatasetReport> {
    let n = images.len();
    if n == 0 {
        bail!("no images");
    }
    let raw: u64 = images.iter().map(|p| p.bytes.len() as u64).sum();
    let threads = rayon::current_num_threads();
    let budget = args.max_seconds * 4.0;
    let mut rows = Vec::new();
    let mut row = |kind, name: String, cache, file_bytes, time, png_reference| {
        rows.push(DatasetRow {
            kind,
            codec: !name.contains("no decode"),
            name,
            cache,
            images: n,
            raw_bytes: raw,
            file_bytes,
            time,
            png_reference,
        })
    };

    // 1. Pack versus PNG files.
    let shard_dir = dir.join("shards");
    let (s, shard_paths) = measure(args.reps, budget, || pack(&shard_dir, images, 1))?;
    let shard_bytes = file_sizes(&shard_paths);
    row(
        "pack",
        format!(
            "l3 shards: compact encode + verify decode, rayon over images; \
             shards of {RECORDS_PER_SHARD}, atomic + fsync"
        ),
        "-",
        shard_bytes,
        s,
        false,
    );
    let png_dir = dir.join("png");
    let (s, png_paths) = measure(args.reps, budget, || write_pngs(&png_dir, images))?;
    let png_bytes = file_sizes(&png_paths);
    row(
        "write",
        "PNG files: png default encode, rayon over images; one file each + fsync".into(),
        "-",
        png_bytes,
        s,
        true,
    );

    // Untimed: the shards read back decode to the source pixels; sizes for the ratios.
    let mut payload_bytes = 0u64;
    let mut prefix_read_bytes = 0u64;
    let mut tar_bytes = TAR_END;
    let mut records = 0usize;
    for path in &shard_paths {
        let shard = ShardReader::open(path, MAX_INDEX_BYTES)?;
        let prefix = shard.read_prefix(0)?;
        prefix_read_bytes += prefix.bytes.len() as u64;
        let decoded = shard.decode_prefix(&prefix, &DecodeOptions::default())?;
        for (i, (spans, px)) in prefix.ranges.iter().zip(decoded).enumerate() {
            let len = spans[0].len() as u64;
            payload_bytes += len;
            tar_bytes += TAR_BLOCK + len.div_ceil(TAR_BLOCK) * TAR_BLOCK;
            if px.data != images[records + i].bytes {
                bail!("record {} decodes to other pixels", records + i);
            }
        }
        records += shard.len();
    }
    if records != n {
        bail!("{records} records in the shards, {n} images");
    }

    // 2. Reads from the page cache (the files were just written and read).
    let warm = "page cache";
    let s = measure(args.reps, budget, || read_records(&shard_paths, true))?.0;
    row(
        "read",
        "l3 shards: read_level per record + CPU decode, rayon over records".into(),
        warm,
        payload_bytes,
        s,
        false,
    );
    let s = measure(args.reps, budget, || read_prefixes(&shard_paths, true, 0))?.0;
    row(
        "read",
        "l3 shards: read_prefix(0) per shard + CPU decode, rayon over records".into(),
        warm,
        prefix_read_bytes,
        s,
        false,
    );
    let s = measure(args.reps, budget, || read_records(&shard_paths, false))?.0;
    row(
        "read",
        "l3 shards: read_level per record, no decode (I/O + CRC), rayon over records".into(),
        warm,
        payload_bytes,
        s,
        false,
    );
    let s = measure(args.reps, budget, || read_prefixes(&shard_paths, false, 0))?.0;
    row(
        "read",
        "l3 shards: read_prefix(0) per shard, no decode (I/O + CRC)".into(),
        warm,
        prefix_read_bytes,
        s,
        false,
    );
    let s = measure(args.reps, budget, || read_pngs(&png_paths))?.0;
    row(
        "read",
        "PNG files: read + image crate decode, rayon over files".into(),
        warm,
        png_bytes,
        s,
        true,
    );

    // Cold reads, where the page cache can be dropped.
    let scratch = format!("{} ({})", dir.display(), fs_type(dir));
    let cold = match drop_caches() {
        Err(why) => format!("not measured: {why}"),
        Ok(()) if fs_type(dir) == "tmpfs" => {
            "not measured: the scratch folder is on tmpfs, which dropping the page cache does not evict".into()
        }
        Ok(()) => {
            let c = "cold";
            let s = cold_measure(args.reps, || read_prefixes(&shard_paths, true, 0))?;
            row(
                "read",
                "l3 shards: read_prefix(0) per shard + CPU decode, rayon over records".into(),
                c,
                prefix_read_bytes,
                s,
                false,
            );
            let s = cold_measure(args.reps, || read_prefixes(&shard_paths, false, 0))?;
            row(
                "read",
                "l3 shards: read_prefix(0) per shard, no decode (I/O + CRC)".into(),
                c,
                prefix_read_bytes,
                s,
                false,
            );
            let s = cold_measure(args.reps, || read_records(&shard_paths, false))?;
            row(
                "read",
                "l3 shards: read_level per record, no decode (I/O + CRC), rayon over records"
                    .into(),
                c,
                payload_bytes,
                s,
                false,
            );
            let s = cold_measure(args.reps, || read_pngs(&png_paths))?;
            row(
                "read",
                "PNG files: read + image crate decode, rayon over files".into(),
                c,
                png_bytes,
                s,
                true,
            );
            "measured: before each timed rep (no warm-up), `sync` then `3` written to \
             /proc/sys/vm/drop_caches (page cache, dentries and inodes dropped)"
                .into()
        }
    };

    let progressive = bench_progressive(dir, images, args, payload_bytes)?;
    let loader = crate::loader::bench_loader(dir, images, &png_paths, args.reps, budget)?;
    let ratio = |a: u64, b: u64| a as f64 / b as f64;
    Ok(DatasetReport {
        scratch,
        threads,
        records_per_shard: RECORDS_PER_SHARD.min(n),
        shards: shard_paths.len(),
        records,
        shard_bytes,
        payload_bytes,
        shard_overhead: ratio(shard_bytes - payload_bytes, payload_bytes),
        prefix_read_bytes,
        prefix_read_vs_ideal: ratio(prefix_read_bytes, payload_bytes),
        tar_bytes_computed: tar_bytes,
        tar_overhead_computed: ratio(tar_bytes - payload_bytes, payload_bytes),
        tar_vs_shard: ratio(tar_bytes, shard_bytes),
        png_bytes,
        cold,
        rows,
        progressive,
        loader,
    })
}

/// The progressive part: pack with [`PROGRESSIVE_LEVELS`] levels, then per level the prefix
/// read with and without the CPU decode, from the page cache.
fn bench_progressive(
    dir: &Path,
    images: &[Pixels],
    args: &Args,
    flat_payload_bytes: u64,
) -> Result<ProgressiveReport> {
    let budget = args.max_seconds * 4.0;
    let levels = PROGRESSIVE_LEVELS;
    let shard_dir = dir.join("shards-progressive");
    std::fs::create_dir_all(&shard_dir)?;
    let (pack_time, paths) = measure(args.reps, budget, || pack(&shard_dir, images, levels))?;
    let readers = paths
        .iter()
        .map(|p| ShardReader::open(p, MAX_INDEX_BYTES))
        .collect::<l3::Result<Vec<_>>>()?;
    let records: Vec<&l3::shard::RecordEntry> = readers.iter().flat_map(|r| r.records()).collect();
    let flat = records
        .iter()
        .filter(|r| r.scheme == l3::progressive::LevelScheme::Flat)
        .count();
    let payload_bytes: u64 = records.iter().flat_map(|r| &r.levels).map(|l| l.len).sum();
    let mut rows = Vec::new();
    for level in 0..levels {
        let ideal_bytes: u64 = records
            .iter()
            .flat_map(|r| &r.levels[..=level as usize])
            .map(|l| l.len)
            .sum();
        let prefix_bytes: u64 = readers
            .iter()
            .map(|r| r.prefix_range(level).map(|x| x.end - x.start))
            .sum::<l3::Result<u64>>()?;
        let (read_decode, output_bytes) =
            measure(args.reps, budget, || read_prefixes(&paths, true, level))?;
        let read_only = measure(args.reps, budget, || read_prefixes(&paths, false, level))?.0;
        let read_decode_cold = if drop_caches().is_ok() && fs_type(dir) != "tmpfs" {
            Some(cold_measure(args.reps, || {
                read_prefixes(&paths, true, level)
            })?)
        } else {
            None
        };
        rows.push(LevelRow {
            level,
            stride: l3::progressive::level_stride(levels, level),
            prefix_bytes,
            ideal_bytes,
            share: prefix_bytes as f64 / payload_bytes as f64,
            output_bytes,
            read_decode,
            read_only,
            read_decode_cold,
        });
    }
    Ok(ProgressiveReport {
        levels,
        interlaced: records.len() - flat,
        flat,
        payload_bytes,
        flat_payload_bytes,
        vs_flat: payload_bytes as f64 / flat_payload_bytes as f64,
        pack: pack_time,
        rows,
    })
}

/// Encodes every image (compact profile, `levels` levels as `l3 pack --levels`, rayon over
/// images), verifies it by decoding through every level, and writes shards of
/// `RECORDS_PER_SHARD` records atomically; the shards' paths.
fn pack(dir: &Path, images: &[Pixels], levels: u8) -> Result<Vec<PathBuf>> {
    let options = EncodeOptions::for_profile(Profile::Compact);
    let progressive = ProgressiveOptions {
        levels,
        ..ProgressiveOptions::default()
    };
    let mut paths = Vec::new();
    for (i, chunk) in images.chunks(RECORDS_PER_SHARD).enumerate() {
        let records = chunk
            .par_iter()
            .map(|p| -> Result<RecordInput> {
                let raw = p.raw();
                let encoded = encode_levels(&raw, &progressive, &options)?;
                if !encoded.matches(&raw, &DecodeOptions::default())? {
                    bail!("{}: decoded pixels differ from the source", p.name);
                }
                Ok(RecordInput {
                    key: p.name.clone(),
                    class: None,
                    meta: Vec::new(),
                    width: raw.width,
                    height: raw.height,
                    levels: encoded,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let mut writer = ShardWriter::new(levels)?;
        for r in records {
            writer.add(r)?;
        }
        let path = dir.join(format!("shard-{i:05}.l3shard"));
        writer.write_to(&path)?;
        paths.push(path);
    }
    Ok(paths)
}

/// Encodes every image as PNG (png crate default, rayon over images), one file each, fsynced.
fn write_pngs(dir: &Path, images: &[Pixels]) -> Result<Vec<PathBuf>> {
    images
        .par_iter()
        .enumerate()
        .map(|(i, p)| {
            let data = png_encode(p, png::Compression::Balanced)?;
            let path = dir.join(format!("{i:05}.png"));
            let mut f = File::create(&path)?;
            f.write_all(&data)?;
            f.sync_all()?;
            Ok(path)
        })
        .collect()
}

fn decode_options() -> DecodeOptions {
    DecodeOptions {
        parallel: false,
        ..DecodeOptions::default()
    }
}

/// Every record with its own positional read (`read_level`, CRC checked), rayon over records;
/// decoded to interleaved pixels when `decode`. Returns the bytes produced.
fn read_records(shards: &[PathBuf], decode: bool) -> Result<u64> {
    let readers = shards
        .iter()
        .map(|p| ShardReader::open(p, MAX_INDEX_BYTES))
        .collect::<l3::Result<Vec<_>>>()?;
    let jobs: Vec<(&ShardReader, usize)> = readers
        .iter()
        .flat_map(|r| (0..r.len()).map(move |i| (r, i)))
        .collect();
    jobs.par_iter()
        .map(|&(r, i)| {
            let bytes = r.read_level(i, 0)?;
            Ok(if decode {
                l3::decode::decode(&bytes, &decode_options())?.1.len() as u64
            } else {
                bytes.len() as u64
            })
        })
        .sum()
}

/// Each shard's prefix up to `level` in one read (`read_prefix`, CRCs checked); every record
/// decoded to that level (`decode_prefix`, rayon over records) when `decode`. Returns the
/// bytes produced.
fn read_prefixes(shards: &[PathBuf], decode: bool, level: u8) -> Result<u64> {
    let mut total = 0;
    for p in shards {
        let shard = ShardReader::open(p, MAX_INDEX_BYTES)?;
        let prefix = shard.read_prefix(level)?;
        total += if decode {
            shard
                .decode_prefix(&prefix, &decode_options())?
                .iter()
                .map(|x| x.data.len() as u64)
                .sum()
        } else {
            prefix.bytes.len() as u64
        };
    }
    Ok(total)
}

/// Every PNG file read and decoded by the `image` crate, rayon over files.
fn read_pngs(files: &[PathBuf]) -> Result<u64> {
    files
        .par_iter()
        .map(|f| {
            let data = std::fs::read(f)?;
            let img = image::load_from_memory_with_format(&data, image::ImageFormat::Png)
                .with_context(|| format!("decoding {}", f.display()))?;
            Ok(img.as_bytes().len() as u64)
        })
        .sum()
}

fn file_sizes(paths: &[PathBuf]) -> u64 {
    paths
        .iter()
        .map(|p| std::fs::metadata(p).map_or(0, |m| m.len()))
        .sum()
}

/// `sync`, then drop the page cache, dentries and inodes; Err: why it could not be done.
fn drop_caches() -> std::result::Result<(), String> {
    let _ = std::process::Command::new("sync").status();
    std::fs::OpenOptions::new()
        .write(true)
        .open("/proc/sys/vm/drop_caches")
        .and_then(|mut f| f.write_all(b"3\n"))
        .map_err(|e| format!("/proc/sys/vm/drop_caches not writable ({e})"))
}

/// `reps` timed calls, each after dropping the page cache (no warm-up: it would warm it).
fn cold_measure(reps: usize, mut f: impl FnMut() -> Result<u64>) -> Result<Stats> {
    let mut times = Vec::new();
    for _ in 0..reps.max(1) {
        drop_caches().map_err(anyhow::Error::msg)?;
        let t = Instant::now();
        std::hint::black_box(f()?);
        times.push(t.elapsed().as_secs_f64());
    }
    Ok(stats_of(times))
}

/// The file system type of the mount holding `path` (from /proc/self/mounts), or "unknown".
fn fs_type(path: &Path) -> String {
    let path = path.canonicalize().unwrap_or_else(|_| path.to_path_buf());
    let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap_or_default();
    mounts
        .lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let (_, at, ty) = (f.next()?, f.next()?, f.next()?);
            path.starts_with(at).then(|| (at.len(), ty.to_string()))
        })
        .max_by_key(|(len, _)| *len)
        .map_or_else(|| "unknown".into(), |(_, ty)| ty)
}
