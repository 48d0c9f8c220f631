//! Fault tests of the dataset tools: `l3 pack` killed at several points and rerun gives the
//! dataset an uninterrupted pack gives, byte for byte; damaged shards (bit flips in data and
//! index, truncation, forged index entries, swapped shards, a level declared huge) are each
//! reported by `verify-dataset` naming the shard (and the key where there is one), and
//! `unpack` and the loader fail or skip naming them, never panic or hang. Every run of the
//! tool has a time limit.

#[path = "../../tests/common/mod.rs"]
mod common;
mod support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use support::{l3_within, s, text};

/// Most seconds one run of the tool may take here.
const LIMIT: Duration = Duration::from_secs(60);

/// Runs `l3 args`, killed (and the test failed) if it runs past [`LIMIT`] or panics.
fn l3(args: &[&str]) -> Output {
    let o = l3_within(args, LIMIT);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        o.status.code().is_some() && !err.contains("panicked"),
        "l3 {args:?} crashed: {}",
        text(&o)
    );
    o
}

/// The bundled samples, three in class folders: 6 images.
fn source_tree(dir: &Path) {
    let mut files = common::files_under(&common::samples_dir());
    files.retain(|p| p.extension().is_some_and(|e| e == "png"));
    for (i, f) in files.iter().enumerate() {
        let sub = ["cats", "dogs", ""][i % 3];
        let to = dir.join(sub).join(f.file_name().unwrap());
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(f, &to).unwrap();
    }
}

/// Every file of a folder (relative path -> bytes).
fn snapshot(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    common::files_under(dir)
        .into_iter()
        .map(|p| {
            let rel = p.strip_prefix(dir).unwrap().to_string_lossy().into_owned();
            (rel, std::fs::read(&p).unwrap())
        })
        .collect()
}

const PACK: [&str; 5] = ["--records-per-shard", "1", "--levels", "2", "-q"];

fn pack_args<'a>(src: &'a Path, ds: &'a Path) -> Vec<&'a str> {
    let mut args = vec!["pack", s(src), "-o", s(ds)];
    args.extend_from_slice(&PACK);
    args
}

/// Whether `dir` holds a temporary file of an atomic write.
fn has_temp_file(dir: &Path) -> bool {
    std::fs::read_dir(dir).is_ok_and(|entries| {
        entries.flatten().any(|e| {
            e.file_name()
                .to_string_lossy()
                .contains(l3::shard::TEMP_MARKER)
        })
    })
}

/// `l3 pack` killed after varying delays and when a shard's temporary file appears, several
/// times into one folder, then rerun: the dataset equals an uninterrupted pack's, byte for
/// byte (shards, pack records, manifest), and nothing temporary is left.
#[test]
fn a_pack_killed_anywhere_resumes_to_the_same_bytes() {
    let tmp = tempfile::tempdir().unwrap();
    let (src, reference, ds) = (
        tmp.path().join("src"),
        tmp.path().join("reference"),
        tmp.path().join("ds"),
    );
    source_tree(&src);
    let started = Instant::now();
    let o = l3(&pack_args(&src, &reference));
    assert!(o.status.success(), "{}", text(&o));
    let full = started.elapsed();
    let expected = snapshot(&reference);
    assert!(expected.len() >= 13, "{:?}", expected.keys());

    // Delays spread over an uninterrupted run, and kills at the first temporary file.
    let mut kills = 0;
    let steps = [0.0, 0.1, 0.25, 0.4, 0.55, 0.7, 0.85];
    for (trial, at) in steps.iter().map(Some).chain([None, None]).enumerate() {
        let mut child = Command::new(env!("CARGO_BIN_EXE_l3"))
            .args(pack_args(&src, &ds))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("run l3");
        let t0 = Instant::now();
        match at {
            Some(f) => std::thread::sleep(full.mul_f64(*f)),
            None => {
                while !has_temp_file(&ds) && t0.elapsed() < LIMIT {
                    if child.try_wait().unwrap().is_some() {
                        break;
                    }
                    std::thread::sleep(Duration::from_micros(200));
                }
            }
        }
        kills += child.try_wait().unwrap().is_none() as usize;
        let _ = child.kill();
        child.wait().unwrap();
        // Between kills, a later trial may start from any earlier state; every third trial
        // starts over from an empty folder.
        if trial % 3 == 2 {
            let _ = std::fs::remove_dir_all(&ds);
        }
    }
    assert!(
        kills >= 3,
        "only {kills} runs were killed before they finished"
    );
    let o = l3(&pack_args(&src, &ds));
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(snapshot(&ds), expected, "the resumed dataset differs");
    assert!(!has_temp_file(&ds));
    let o = l3(&["verify-dataset", s(&ds)]);
    assert!(o.status.success(), "{}", text(&o));
}

/// A packed dataset of two shards of three records each, two levels.
fn packed(tmp: &Path) -> PathBuf {
    let (src, ds) = (tmp.join("src"), tmp.join("ds"));
    source_tree(&src);
    let o = l3(&[
        "pack",
        s(&src),
        "-o",
        s(&ds),
        "--records-per-shard",
        "3",
        "--levels",
        "2",
        "-q",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    ds
}

/// Rewrites a shard's index with `edit` applied to its entries (and a fresh CRC), as a lying
/// writer would.
fn forge(bytes: &[u8], edit: impl FnOnce(&mut Vec<l3::shard::RecordEntry>)) -> Vec<u8> {
    let (_, trailer, mut records) = l3::shard::format::parse_shard(bytes).unwrap();
    edit(&mut records);
    let mut index = Vec::new();
    for r in &records {
        r.write(&mut index);
    }
    let mut out = bytes[..trailer.index_offset as usize].to_vec();
    out.extend_from_slice(&index);
    out.extend_from_slice(
        &l3::shard::format::Trailer {
            index_offset: trailer.index_offset,
            index_len: index.len() as u64,
            record_count: records.len() as u64,
            index_crc32: crc32fast::hash(&index),
        }
        .to_bytes(),
    );
    out
}

/// Copies `ds` to a new folder, applies `damage` there and returns it.
fn damaged(ds: &Path, name: &str, damage: impl FnOnce(&Path)) -> PathBuf {
    let to = ds.with_file_name(name);
    std::fs::create_dir_all(&to).unwrap();
    for e in std::fs::read_dir(ds).unwrap().flatten() {
        std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
    }
    damage(&to);
    to
}

/// Runs verify-dataset, unpack and the loader on a damaged dataset: verify-dataset fails and
/// names every string of `verify`; unpack fails and names every string of `unpack`; the loader
/// fails or skips naming every string of `loader` (`None`: damage the loader need not see,
/// such as an unsafe key); no run panics or hangs.
fn check(ds: &Path, verify: &[&str], unpack: &[&str], loader: Option<&[&str]>) {
    let o = l3(&["verify-dataset", s(ds)]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    for want in verify {
        assert!(
            text(&o).contains(want),
            "verify-dataset: {want:?} in {}",
            text(&o)
        );
    }
    let out = ds.with_extension("out");
    let o = l3(&["unpack", s(ds), "-o", s(&out)]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    for want in unpack {
        assert!(text(&o).contains(want), "unpack: {want:?} in {}", text(&o));
    }
    let o = l3(&[
        "bench-loader",
        s(ds),
        "--epochs",
        "1",
        "--size",
        "16",
        "--batch-size",
        "2",
    ]);
    let Some(loader) = loader else {
        return;
    };
    let skipped = text(&o).contains("skipped: sample");
    assert!(
        !o.status.success() || skipped,
        "the loader neither failed nor skipped: {}",
        text(&o)
    );
    for want in loader {
        assert!(text(&o).contains(want), "loader: {want:?} in {}", text(&o));
    }
}

/// Each kind of damage is reported by name by verify-dataset, unpack and the loader.
#[test]
fn damaged_shards_are_reported_by_shard_and_key() {
    let tmp = tempfile::tempdir().unwrap();
    let ds = packed(tmp.path());
    let shard1 = std::fs::read(ds.join("shard-00001.l3s")).unwrap();
    let (_, trailer, records) = l3::shard::format::parse_shard(&shard1).unwrap();
    let key1 = format!("{:?}", records[1].key);
    let plain1 = records[1].key.as_str();
    let write1 = |dir: &Path, bytes: &[u8]| std::fs::write(dir.join("shard-00001.l3s"), bytes);

    // A bit flip in record 1's level 0.
    let at = records[1].levels[0].offset as usize + 20;
    let d = damaged(&ds, "data-flip", |d| {
        let mut b = shard1.clone();
        b[at] ^= 0x04;
        write1(d, &b).unwrap();
    });
    let named: &[&str] = &["shard-00001.l3s", &key1];
    let by_loader: &[&str] = &["shard-00001.l3s", plain1];
    check(&d, &[named, &["checksum"]].concat(), named, Some(by_loader));

    // A bit flip in the index: the index CRC fails; no record can be trusted.
    let d = damaged(&ds, "index-flip", |d| {
        let mut b = shard1.clone();
        b[trailer.index_offset as usize + 3] ^= 0x01;
        write1(d, &b).unwrap();
    });
    let shard_only: Option<&[&str]> = Some(&["shard-00001.l3s"]);
    check(
        &d,
        &["shard-00001.l3s", "index checksum"],
        &["shard-00001.l3s"],
        shard_only,
    );

    // Truncated to half.
    let d = damaged(&ds, "truncated", |d| {
        write1(d, &shard1[..shard1.len() / 2]).unwrap()
    });
    check(
        &d,
        &["shard-00001.l3s: bytes"],
        &["shard-00001.l3s"],
        shard_only,
    );

    // A forged index entry: record 1's level CRC changed, the index CRC made to match.
    let d = damaged(&ds, "forged-crc", |d| {
        write1(d, &forge(&shard1, |r| r[1].levels[0].crc32 ^= 1)).unwrap()
    });
    check(&d, named, named, Some(by_loader));

    // Forged keys that leave the output folder or name no file (an empty key wrote
    // `<output>.png` beside the folder), the manifest made to match the shard, as a hostile
    // dataset's would; and a class outside the class list.
    for (name, key) in [("forged-key", "../../evil.png"), ("empty-key", "")] {
        let d = damaged(&ds, name, |d| {
            let b = forge(&shard1, |r| r[1].key = key.into());
            write1(d, &b).unwrap();
            let path = d.join("manifest.json");
            let mut m: serde_json::Value =
                serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
            m["shards"][1]["bytes"] = b.len().into();
            m["shards"][1]["crc32"] = crc32fast::hash(&b).into();
            std::fs::write(&path, m.to_string()).unwrap();
        });
        let quoted = format!("{key:?}");
        check(
            &d,
            &["shard-00001.l3s", &quoted, "key"],
            &["unsafe key", &quoted],
            None,
        );
        assert!(!tmp.path().join("evil.png").exists());
        assert!(!d.with_extension("out.png").exists() && !d.with_extension("png").exists());
    }
    let d = damaged(&ds, "forged-class", |d| {
        write1(d, &forge(&shard1, |r| r[1].class = Some(99))).unwrap()
    });
    check(
        &d,
        &["shard-00001.l3s: classes", &key1],
        &["shard-00001.l3s: classes"],
        shard_only,
    );

    // --max-input-bytes reaches the loader: payloads above it are refused by name.
    let o = l3(&[
        "--max-input-bytes",
        "4096",
        "bench-loader",
        s(&ds),
        "--epochs",
        "1",
        "--size",
        "16",
        "--batch-size",
        "2",
    ]);
    assert!(
        text(&o).contains("above the input limit of 4096 bytes") && text(&o).contains(plain1),
        "{}",
        text(&o)
    );

    // Two shards swapped.
    let d = damaged(&ds, "swapped", |d| {
        let a = std::fs::read(d.join("shard-00000.l3s")).unwrap();
        std::fs::write(d.join("shard-00000.l3s"), &shard1).unwrap();
        std::fs::write(d.join("shard-00001.l3s"), a).unwrap();
    });
    check(
        &d,
        &["shard-00000.l3s: crc32", "shard-00001.l3s: crc32"],
        &["shard-00000.l3s"],
        Some(&["shard-00000.l3s"]),
    );
}

/// A shard whose index declares a 1 TiB level (a sparse file): `verify-dataset`, `unpack` and
/// fail within seconds naming the shard (and the key), allocating nothing; `ls` lists it.
#[test]
fn a_huge_declared_level_fails_fast_by_name() {
    use std::io::{Seek, SeekFrom, Write};
    let tmp = tempfile::tempdir().unwrap();
    let ds = tmp.path().join("ds");
    std::fs::create_dir_all(&ds).unwrap();
    let len = 1u64 << 40;
    let header_len = l3::shard::format::HEADER_LEN;
    let entry = l3::shard::RecordEntry {
        key: "huge.png".into(),
        class: None,
        meta: Vec::new(),
        width: 1,
        height: 1,
        channels: 1,
        depth: 8,
        scheme: l3::progressive::LevelScheme::Flat,
        levels: vec![l3::shard::LevelEntry {
            offset: header_len,
            len,
            crc32: 0,
        }],
    };
    let mut index = Vec::new();
    entry.write(&mut index);
    let path = ds.join("shard-00000.l3s");
    let mut f = std::fs::File::create(&path).unwrap();
    f.write_all(&l3::shard::format::ShardHeader { level_count: 1 }.to_bytes())
        .unwrap();
    f.seek(SeekFrom::Start(header_len + len)).unwrap();
    f.write_all(&index).unwrap();
    let trailer = l3::shard::format::Trailer {
        index_offset: header_len + len,
        index_len: index.len() as u64,
        record_count: 1,
        index_crc32: crc32fast::hash(&index),
    };
    f.write_all(&trailer.to_bytes()).unwrap();
    drop(f);
    let bytes = std::fs::metadata(&path).unwrap().len();
    let manifest = serde_json::json!({
        "version": 1, "levels": 1, "classes": [], "records": 1,
        "shards": [{"file": "shard-00000.l3s", "records": 1, "bytes": bytes, "crc32": 0,
                    "level_bytes": [len]}],
    });
    std::fs::write(ds.join("manifest.json"), manifest.to_string()).unwrap();
    let started = Instant::now();
    let o = l3(&["verify-dataset", s(&ds)]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        text(&o).contains("shard-00000.l3s") && text(&o).contains("input limit"),
        "{}",
        text(&o)
    );
    let o = l3(&["unpack", s(&ds), "-o", s(&tmp.path().join("out"))]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        text(&o).contains("shard-00000.l3s") && text(&o).contains("\"huge.png\""),
        "{}",
        text(&o)
    );
    let o = l3(&["ls", "--records", s(&ds)]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "{:?}",
        started.elapsed()
    );
}
