//! A large generated dataset for the loader's start-up figures (`l3 bench-loader`'s time to
//! first batch): `N` tiny RGB images (default 1,000,000 of 32x32), each a different smooth
//! pattern with noise, in 10 classes, packed as `l3 pack` packs (compact profile, one level,
//! 1024 records per shard, every record verified by decoding it back) into `DIR`.
//!
//! ```text
//! cargo run --release --example make_records -- /tmp/ds-1m [--records 1000000] [--side 32]
//!     [--records-per-shard 1024] [--levels 1] [--fast]
//! l3 bench-loader /tmp/ds-1m --epochs 1 --steps 1 --threads 2
//! ```
//!
//! Deterministic: a rerun writes the same bytes, and keeps the shards already complete.

use std::path::PathBuf;

use l3::progressive::ProgressiveOptions;
use l3::shard::pack::{encode_record, pack_shard, PlannedRecord};
use l3::shard::{Manifest, MANIFEST_VERSION};
use l3::{ColorType, EncodeOptions, Profile, RawImage, Samples};

struct Args {
    dir: PathBuf,
    records: u64,
    side: u32,
    per_shard: u64,
    levels: u8,
    profile: Profile,
}

fn args() -> Args {
    let mut it = std::env::args().skip(1);
    let mut a = Args {
        dir: PathBuf::new(),
        records: 1_000_000,
        side: 32,
        per_shard: 1024,
        levels: 1,
        profile: Profile::Compact,
    };
    while let Some(k) = it.next() {
        let mut value = || it.next().unwrap_or_else(|| panic!("{k} needs a value"));
        match k.as_str() {
            "--records" => a.records = value().parse().expect("--records"),
            "--side" => a.side = value().parse().expect("--side"),
            "--records-per-shard" => a.per_shard = value().parse().expect("--records-per-shard"),
            "--levels" => a.levels = value().parse().expect("--levels"),
            "--fast" => a.profile = Profile::Fast,
            _ if a.dir.as_os_str().is_empty() && !k.starts_with("--") => a.dir = k.into(),
            _ => panic!("unknown option {k}"),
        }
    }
    assert!(
        !a.dir.as_os_str().is_empty(),
        "usage: make_records DIR [options]"
    );
    assert!(
        a.per_shard > 0 && a.side > 0,
        "--records-per-shard and --side must be positive"
    );
    a
}

const CLASSES: u64 = 10;

/// The pixels of record `i`: a gradient whose direction and colour depend on `i`, plus a
/// little hashed noise (so records differ and compress like small photos, not like flat
/// colour).
fn pixels(i: u64, side: u32) -> Vec<u8> {
    let mut out = Vec::with_capacity((side * side * 3) as usize);
    let h = l3::loader::SplitMix64::new(i).next_u64();
    let (dx, dy) = ((h & 7) as u32 + 1, ((h >> 3) & 7) as u32 + 1);
    for y in 0..side {
        for x in 0..side {
            for c in 0..3u32 {
                let base = (x * dx + y * dy) * 4 + c * ((h >> (8 + 8 * c)) & 63) as u32;
                let noise =
                    l3::loader::SplitMix64::new(h ^ ((y * side + x) * 3 + c) as u64).next_u64() & 7;
                out.push((base as u64 + noise) as u8);
            }
        }
    }
    out
}

fn main() -> l3::Result<()> {
    let a = args();
    std::fs::create_dir_all(&a.dir)?;
    let progressive = ProgressiveOptions {
        levels: a.levels,
        ..ProgressiveOptions::default()
    };
    let mut encode = EncodeOptions::for_profile(a.profile);
    // Records are encoded in parallel, one per task.
    encode.parallel = false;
    let shards = a.records.div_ceil(a.per_shard);
    let started = std::time::Instant::now();
    let mut infos = Vec::with_capacity(shards as usize);
    for s in 0..shards {
        let first = s * a.per_shard;
        let end = (first + a.per_shard).min(a.records);
        let planned: Vec<PlannedRecord> = (first..end)
            .map(|i| PlannedRecord {
                key: format!("c{}/{i:08}.png", i % CLASSES),
                class: Some((i % CLASSES) as u32),
                meta: Vec::new(),
            })
            .collect();
        let path = a.dir.join(format!("shard-{s:05}.l3s"));
        let (info, _) = pack_shard(&path, &planned, a.levels, false, |k| {
            let i = first + k as u64;
            let px = pixels(i, a.side);
            let image = RawImage {
                width: a.side,
                height: a.side,
                color: ColorType::Rgb,
                samples: Samples::U8(&px),
            };
            encode_record(&planned[k], &image, &progressive, &encode)
        })?;
        infos.push(info);
        if s % 64 == 63 || s + 1 == shards {
            eprintln!(
                "{} / {shards} shards, {:.0} s",
                s + 1,
                started.elapsed().as_secs_f64()
            );
        }
    }
    let manifest = Manifest {
        version: MANIFEST_VERSION,
        levels: a.levels,
        classes: (0..CLASSES).map(|c| format!("c{c}")).collect(),
        shards: infos,
        records: a.records,
    };
    manifest.write(&a.dir)?;
    println!(
        "{}: {} records of {}x{} in {shards} shards, {:.0} s",
        a.dir.display(),
        a.records,
        a.side,
        a.side,
        started.elapsed().as_secs_f64()
    );
    Ok(())
}
