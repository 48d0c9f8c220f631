//! `l3 verify-dataset`: every shard checked against the manifest and its pack sidecar, every
//! record read (CRC-checked) and decoded; each problem on its own line. A tensor dataset's
//! arrays are each read, their payload headers checked against the index and decoded. A
//! dataset in an object store is first fetched whole into a temporary folder.

use std::path::Path;

use anyhow::Result;
use clap::Args;

use crate::limits::{decode_options, limits};
use crate::shards::MAX_INDEX_BYTES;
use l3::progressive::decode_level;
use l3::shard::format::check_key;
use l3::shard::pack::PackRecord;
use l3::shard::tensor_pack::TensorPackRecord;
use l3::shard::{
    file_crc32, AnyManifest, Manifest, ShardInfo, ShardReader, TensorManifest, TensorShardInfo,
    TensorShardReader,
};
use l3::tensor::{decode_array, StorageMode};

#[derive(Args)]
pub struct DatasetArgs {
    /// Dataset folder (with manifest.json), or its URL (`s3://bucket/prefix`, ...: fetched
    /// whole into a temporary folder first).
    pub dataset: String,
}

/// Most problems reported per shard (the rest are counted).
const MAX_REPORTED: usize = 20;

/// Checks every shard against the manifest (every field: size, CRC-32, records, levels, bytes
/// per level, class ids) and against its pack sidecar if it has one (keys, class names, size,
/// CRC-32), then reads every level of every record (CRC-checked) and decodes the top level.
/// Every problem is reported on its own line naming the shard (and the record and key). No
/// read is larger than `--max-input-bytes`. Returns the number of failed shards.
pub fn cmd_verify_dataset(a: DatasetArgs) -> Result<u64> {
    if l3::store::is_remote(&a.dataset) {
        let tmp = tempfile::tempdir()?;
        fetch(&a.dataset, tmp.path())?;
        return verify_dir(tmp.path(), &a.dataset);
    }
    verify_dir(Path::new(&a.dataset), &a.dataset)
}

/// Copies the manifest and every shard it lists of the dataset at `url` into `dir`, as they are
/// (each within `--max-input-bytes`); a shard that cannot be fetched is left out, so the
/// verification reports it.
fn fetch(url: &str, dir: &Path) -> Result<()> {
    let store = crate::shards::open_store(url)?;
    let manifest = store.read(l3::shard::MANIFEST_NAME, 64 << 20)?;
    std::fs::write(dir.join(l3::shard::MANIFEST_NAME), &manifest)?;
    let parsed = AnyManifest::parse(&manifest, &store.describe(l3::shard::MANIFEST_NAME))?;
    let files: Vec<String> = parsed.shard_files().into_iter().map(String::from).collect();
    let max = limits().max_input_bytes;
    for file in files {
        match store.read(&file, max) {
            Ok(bytes) => std::fs::write(dir.join(&file), bytes)?,
            Err(e) => eprintln!("error: {}: {e}", store.describe(&file)),
        }
    }
    Ok(())
}

/// Verifies the dataset in folder `dir`, named `shown` in the summary.
fn verify_dir(dir: &Path, shown: &str) -> Result<u64> {
    let m = match AnyManifest::read_in(&l3::store::Store::local(dir))? {
        AnyManifest::Tensors(m) => return verify_tensors(dir, shown, m),
        AnyManifest::Images(m) => m,
    };
    let mut failed = 0;
    let mut records = 0u64;
    for s in &m.shards {
        let problems = verify_shard(dir, s, &m, &mut records);
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
        shown,
        m.shards.len()
    );
    Ok(failed)
}

/// Every problem of shard `s` (see [`cmd_verify_dataset`]); counts the records decoded.
fn verify_shard(dir: &Path, s: &ShardInfo, m: &Manifest, decoded: &mut u64) -> Vec<String> {
    let limits = limits();
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
            decode_level(&shard.stored_levels(i, &refs)?, top, &decode_options())?;
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

/// Prints up to [`MAX_REPORTED`] problems of one shard; returns whether it had any.
fn report(file: &str, problems: &[String]) -> bool {
    for p in problems.iter().take(MAX_REPORTED) {
        eprintln!("error: {p}");
    }
    if problems.len() > MAX_REPORTED {
        let more = problems.len() - MAX_REPORTED;
        eprintln!("error: {file}: {more} more problem(s)");
    }
    !problems.is_empty()
}

/// `verify-dataset` of a tensor dataset: every shard against the manifest (size, CRC-32,
/// records, payload bytes, declared arrays) and its pack sidecar, every array read
/// (CRC-checked), its payload header checked against the index and decoded. Whether
/// error-bounded values lie within their bound needs the source: not checked here.
fn verify_tensors(dir: &Path, shown: &str, m: TensorManifest) -> Result<u64> {
    let (mut failed, mut records, mut arrays, mut bounded) = (0, 0u64, 0u64, 0u64);
    for s in &m.shards {
        let problems = verify_tensor_shard(dir, s, &m, &mut records, &mut arrays, &mut bounded);
        failed += report(&s.file, &problems) as u64;
    }
    println!(
        "{}: {records} tensor records ({arrays} arrays) in {} shard(s) decoded, {failed} shard(s) failed",
        shown,
        m.shards.len()
    );
    if bounded > 0 {
        println!(
            "  {bounded} error-bounded array(s): headers agree with the index and decode; \
             whether their values lie within the bound of the source needs the source (not checked)"
        );
    }
    Ok(failed)
}

/// Every problem of tensor shard `s`; counts the records and arrays decoded.
fn verify_tensor_shard(
    dir: &Path,
    s: &TensorShardInfo,
    m: &TensorManifest,
    records: &mut u64,
    arrays: &mut u64,
    bounded: &mut u64,
) -> Vec<String> {
    let limits = limits();
    let path = dir.join(&s.file);
    let mut problems = Vec::new();
    let len = match std::fs::metadata(&path) {
        Ok(md) => md.len(),
        Err(e) => return vec![format!("{}: {e}", s.file)],
    };
    if len > limits.max_input_bytes {
        problems.push(format!(
            "{}: {len} bytes, above the input limit of {} bytes (--max-input-bytes)",
            s.file, limits.max_input_bytes
        ));
        return problems;
    }
    let shard = match TensorShardReader::open_with_limits(&path, MAX_INDEX_BYTES, &limits) {
        Ok(shard) => shard,
        Err(e) => return vec![format!("{}: {e}", s.file)],
    };
    problems.extend(m.mismatches(s, &shard));
    let crc = file_crc32(&path);
    match &crc {
        Ok(c) if *c != s.crc32 => problems.push(format!(
            "{}: crc32: the shard has {c:#010x}, the manifest says {:#010x}",
            s.file, s.crc32
        )),
        Ok(_) => {}
        Err(e) => problems.push(format!("{}: {e}", s.file)),
    }
    if let Some(p) = TensorPackRecord::read(&path) {
        if p.shard_bytes != len || crc.as_ref().is_ok_and(|c| *c != p.shard_crc32) {
            problems.push(format!(
                "{}.pack.json: records a shard of {} bytes with CRC-32 {:#010x}, {} is another",
                s.file, p.shard_bytes, p.shard_crc32, s.file
            ));
        }
        if p.samples.len() != shard.len() {
            problems.push(format!(
                "{}.pack.json: {} samples, the shard has {} records",
                s.file,
                p.samples.len(),
                shard.len()
            ));
        }
    }
    let options = decode_options();
    for (i, e) in shard.entries().iter().enumerate() {
        let at = format!("{}: record {i} (key {:?})", s.file, e.key);
        if let Err(reason) = check_key(&e.key) {
            problems.push(format!("{at}: key: {reason}"));
        }
        let mut ok = true;
        for (k, x) in e.arrays.iter().enumerate() {
            let result = shard
                .read_payload(i, k)
                .and_then(|p| decode_array(&x.spec, &p, &options));
            match result {
                Ok(_) => {
                    *arrays += 1;
                    *bounded += (x.spec.mode == StorageMode::ErrorBounded) as u64;
                }
                Err(err) => {
                    ok = false;
                    problems.push(format!("{at}: array {:?}: {err}", x.spec.name));
                }
            }
        }
        *records += ok as u64;
    }
    problems
}
