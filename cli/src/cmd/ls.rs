//! `l3 ls`: a dataset's records, shards, bytes per level and classes (every shard checked
//! against the manifest as it is opened).

use std::path::PathBuf;

use anyhow::Result;
use clap::Args;

use crate::display::human;
use crate::shards::open_checked;
use l3::progressive::LevelScheme;
use l3::shard::Manifest;

#[derive(Args)]
pub struct LsArgs {
    /// Dataset folder (with manifest.json).
    pub dataset: PathBuf,
    /// Also list every record: shard, index, key, class, shape, scheme and bytes per level.
    #[arg(short, long)]
    pub records: bool,
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
        human(total)
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
            human(*b),
            human(prefix),
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
