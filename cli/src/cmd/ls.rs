//! `l3 ls`: a dataset's records, shards, bytes per level and classes (every shard checked
//! against the manifest as it is opened); for a tensor dataset its arrays (name, type, shape,
//! mode, bound), their statistics and bytes.

use anyhow::Result;
use clap::Args;

use crate::display::human;
use crate::shards::{open_checked, open_store};
use l3::progressive::LevelScheme;
use l3::shard::{AnyManifest, TensorDataset, TensorManifest};
use l3::store::Store;
use l3::tensor::{ArraySpec, StorageMode};

#[derive(Args)]
pub struct LsArgs {
    /// Dataset folder (with manifest.json), or its URL (`s3://bucket/prefix`, `gs://`,
    /// `az://`, `https://`; credentials and endpoint from the standard environment variables).
    pub dataset: String,
    /// Also list every record: shard, index, key, class, shape, scheme and bytes per level.
    #[arg(short, long)]
    pub records: bool,
}

pub fn cmd_ls(a: LsArgs) -> Result<u64> {
    let store = open_store(&a.dataset)?;
    let m = match AnyManifest::read_in(&store)? {
        AnyManifest::Tensors(m) => return ls_tensors(&a, &store, m),
        AnyManifest::Images(m) => m,
    };
    let total: u64 = m.shards.iter().map(|s| s.bytes).sum();
    println!(
        "{}: {} records in {} shard(s), {} level(s), {}",
        a.dataset,
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
        let shard = open_checked(&store, s, &m)?;
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

/// One array's description: name, type, shape, mode and (error-bounded) bound.
fn describe(s: &ArraySpec) -> String {
    let mut out = format!(
        "{} {} {:?} {}",
        s.name,
        s.dtype.name(),
        s.shape,
        s.mode.name()
    );
    if s.mode == StorageMode::ErrorBounded {
        out.push_str(&format!(" bound {:e}", s.bound));
    }
    if let Some(f) = s.fill {
        out.push_str(&format!(" fill bits {f:#x}"));
    }
    out
}

/// `l3 ls` of a tensor dataset: totals, each declared array and its statistics, bytes per
/// array name; with `--records`, one line per record; a windowed dataset's samples and
/// window.
fn ls_tensors(a: &LsArgs, store: &Store, m: TensorManifest) -> Result<u64> {
    let d = TensorDataset::open_with_manifest(
        store,
        m,
        &crate::limits::limits(),
        std::time::Instant::now(),
    )?;
    let m: &TensorManifest = d.manifest();
    let total: u64 = m.shards.iter().map(|s| s.bytes).sum();
    println!(
        "{}: {} tensor records in {} shard(s), {} array(s) each, {}",
        a.dataset,
        m.records,
        m.shards.len(),
        m.arrays.len(),
        human(total)
    );
    let mut bytes = vec![0u64; m.arrays.len()];
    for shard in d.shards() {
        for (i, e) in shard.entries().iter().enumerate() {
            for (b, x) in bytes.iter_mut().zip(&e.arrays) {
                *b += x.payload.len;
            }
            if a.records {
                let arrays: Vec<String> = e
                    .arrays
                    .iter()
                    .map(|x| format!("{} ({} B)", describe(&x.spec), x.payload.len))
                    .collect();
                let class = e.class.map_or("-".to_owned(), |c| c.to_string());
                println!(
                    "  {} #{i} {} class {class}: {}",
                    shard.name(),
                    e.key,
                    arrays.join(", ")
                );
            }
        }
    }
    for (decl, b) in m.arrays.iter().zip(&bytes) {
        let bound = match decl.bound {
            Some(l3::field::Bound::Absolute(e)) => format!(" bound absolute {e:e}"),
            Some(l3::field::Bound::Relative(r)) => format!(" bound relative {r:e}"),
            None => String::new(),
        };
        let fill = decl
            .fill_bits
            .map_or(String::new(), |f| format!(" fill bits {f:#x}"));
        let raw = decl.dtype().map_or(0, |t| t.size() as u64)
            * decl.shape.iter().map(|&x| x as u64).product::<u64>()
            * m.records;
        println!(
            "  array {} {} {:?} {}{bound}{fill}: {} ({:.2}x of {} raw)",
            decl.name,
            decl.dtype,
            decl.shape,
            decl.mode,
            human(*b),
            raw as f64 / (*b).max(1) as f64,
            human(raw)
        );
        if m.window.is_none() {
            if let Some(s) = m.stats.get(&decl.name) {
                println!(
                    "    stats: count {} mean {:.6e} std {:.6e}",
                    s.count, s.mean, s.std
                );
            }
        }
    }
    // A windowed dataset: its samples, each array read from a record after the sample's
    // index, and the statistics per sample array.
    if let Some(w) = &m.window {
        println!(
            "  {} samples, each a window over the records (step t + offset):",
            w.samples
        );
        for x in &w.arrays {
            println!("  sample array {} = {} at +{}", x.name, x.array, x.offset);
            if let Some(s) = m.stats.get(&x.name) {
                println!(
                    "    stats: count {} mean {:.6e} std {:.6e}",
                    s.count, s.mean, s.std
                );
            }
        }
    }
    Ok(0)
}
