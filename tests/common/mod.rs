//! Test data shared by the integration tests: the bundled samples (always present) and the
//! full corpus in `../shared/data` or `$L3_TEST_DATA` (present in development and CI).
#![allow(dead_code)]

use std::path::{Path, PathBuf};

/// The repository root: the library crate's folder, or the parent of a workspace member's
/// (the CLI's tests include this module too).
fn repo_root() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    if manifest.join("samples").is_dir() {
        manifest.to_path_buf()
    } else {
        manifest
            .parent()
            .expect("workspace member has a parent")
            .to_path_buf()
    }
}

/// The bundled sample images.
pub fn samples_dir() -> PathBuf {
    repo_root().join("samples")
}

/// The shared corpus (`$L3_TEST_DATA`, else `../shared/data`), if present. With `CI=true` a
/// missing corpus fails the test instead of silently testing less.
pub fn corpus_dir() -> Option<PathBuf> {
    let dir = std::env::var_os("L3_TEST_DATA")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join("../shared/data"));
    if dir.join("images").is_dir() {
        Some(dir)
    } else if std::env::var("CI").as_deref() == Ok("true") {
        panic!(
            "CI=true but the test corpus is missing at {} (set L3_TEST_DATA)",
            dir.display()
        );
    } else {
        eprintln!(
            "note: corpus not found at {}; testing the bundled samples only",
            dir.display()
        );
        None
    }
}

/// Every regular file under `dir`, recursively, sorted.
pub fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// Image files of the corpus (and samples) that the tests round-trip; `crashers/` excluded.
pub fn corpus_images() -> Vec<PathBuf> {
    let mut files = files_under(&samples_dir());
    if let Some(c) = corpus_dir() {
        for sub in ["images", "pngsuite", "testpngs"] {
            files.extend(
                files_under(&c.join(sub))
                    .into_iter()
                    .filter(|p| !p.components().any(|c| c.as_os_str() == "crashers")),
            );
        }
    }
    files.retain(|p| {
        p.extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| e.eq_ignore_ascii_case("png"))
    });
    files
}

/// A shared float32 array: name, shape, values, fill value (from its JSON sidecar).
pub type Float32Array = (String, Vec<u32>, Vec<f32>, Option<f32>);

/// The corpus's float32 arrays (`float32/*.f32` with their `.json` sidecars), sorted by
/// name; empty without the corpus (which `CI=true` refuses, see [`corpus_dir`]).
pub fn float32_arrays() -> Vec<Float32Array> {
    let Some(root) = corpus_dir() else {
        return Vec::new();
    };
    let dir = root.join("float32");
    let paths: Vec<PathBuf> = files_under(&dir)
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "f32"))
        .collect();
    assert!(!paths.is_empty(), "no .f32 arrays in {}", dir.display());
    paths
        .iter()
        .map(|p| {
            let meta: serde_json::Value =
                serde_json::from_slice(&std::fs::read(p.with_extension("json")).unwrap()).unwrap();
            let shape = meta["shape"]
                .as_array()
                .unwrap()
                .iter()
                .map(|d| d.as_u64().unwrap() as u32)
                .collect();
            let values = std::fs::read(p)
                .unwrap()
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .collect();
            let fill = meta["fill_value"].as_f64().map(|f| f as f32);
            let name = p.file_stem().unwrap().to_string_lossy().into_owned();
            (name, shape, values, fill)
        })
        .collect()
}

/// The bundled samples, `copies` times each (keys `copy{j}/{name}`, class = the sample's
/// index), packed with `levels` levels, 7 records per shard.
pub fn pack_samples(dir: &Path, copies: usize, levels: u8) -> usize {
    let mut files = files_under(&samples_dir());
    files.retain(|p| p.extension().is_some_and(|e| e == "png"));
    let images: Vec<_> = files.iter().map(|p| l3::read_image(p).unwrap()).collect();
    let opts = l3::EncodeOptions::for_profile(l3::Profile::Compact);
    let progressive = l3::progressive::ProgressiveOptions {
        levels,
        ..Default::default()
    };
    let encoded: Vec<_> = images
        .iter()
        .map(|img| {
            let raw = l3::image_support::raw_image(img).unwrap();
            l3::progressive::encode_levels(&raw, &progressive, &opts).unwrap()
        })
        .collect();
    let mut records = Vec::new();
    for j in 0..copies {
        for (i, (img, enc)) in images.iter().zip(&encoded).enumerate() {
            records.push(l3::shard::RecordInput {
                key: format!(
                    "copy{j}/{}",
                    files[i].file_name().unwrap().to_string_lossy()
                ),
                class: Some(i as u32),
                meta: Vec::new(),
                width: img.width(),
                height: img.height(),
                levels: enc.clone(),
            });
        }
    }
    let mut shards = Vec::new();
    for (s, chunk) in records.chunks(7).enumerate() {
        let mut w = l3::shard::ShardWriter::new(levels).unwrap();
        for r in chunk {
            w.add(r.clone()).unwrap();
        }
        let file = format!("shard-{s:05}.l3s");
        let bytes = w.to_bytes();
        l3::shard::write_atomic(&dir.join(&file), &bytes).unwrap();
        shards.push(l3::shard::ShardInfo::of_shard(file, &bytes).unwrap());
    }
    l3::shard::Manifest {
        version: l3::shard::MANIFEST_VERSION,
        levels,
        classes: (0..images.len()).map(|i| format!("c{i}")).collect(),
        records: records.len() as u64,
        shards,
    }
    .write(dir)
    .unwrap();
    records.len()
}

/// A fresh prefix in the test bucket, or `None` (a skip) outside CI without a server.
pub fn s3_prefix(name: &str) -> Option<String> {
    match std::env::var("L3_TEST_S3") {
        Ok(bucket) => {
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos();
            Some(format!(
                "{}/{name}-{}-{nanos}",
                bucket.trim_end_matches('/'),
                std::process::id()
            ))
        }
        Err(_) if std::env::var("CI").as_deref() == Ok("true") => {
            panic!("CI=true but L3_TEST_S3 is not set: run scripts/test.sh (it starts SeaweedFS)")
        }
        Err(_) => {
            eprintln!("skipped: L3_TEST_S3 is not set (scripts/test.sh starts an S3 server)");
            None
        }
    }
}

/// A fresh prefix in the Azure Blob container `L3_TEST_AZ` (`az://CONTAINER`, for example
/// Azurite with `AZURE_STORAGE_USE_EMULATOR=true`), or `None` when it is not set: CI runs no
/// Azure emulator, so these tests are run by hand (see BENCHMARKS.md, "Remote datasets").
#[allow(dead_code)]
pub fn az_prefix(name: &str) -> Option<String> {
    let container = std::env::var("L3_TEST_AZ").ok()?;
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    Some(format!(
        "{}/{name}-{}-{nanos}",
        container.trim_end_matches('/'),
        std::process::id()
    ))
}
