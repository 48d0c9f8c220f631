//! `l3 pack`, `ls`, `verify-dataset` and `unpack`, as a script would use them: a class tree
//! packed into shards and unpacked to the same pixels; a rerun after a kill rewrites only the
//! missing shards, byte-identical; a damaged shard is reported.

#[path = "../../tests/common/mod.rs"]
mod common;
mod support;

use std::collections::BTreeMap;
use std::path::Path;

use support::{l3, s, text};

/// The bundled samples in two class folders and one unlabelled at the root: 6 images.
fn class_tree(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut files = common::files_under(&common::samples_dir());
    files.retain(|p| p.extension().is_some_and(|e| e == "png"));
    let mut placed = Vec::new();
    for (i, f) in files.iter().enumerate() {
        let sub = match i % 3 {
            0 => "cats",
            1 => "dogs",
            _ => "",
        };
        let to = dir.join(sub).join(f.file_name().unwrap());
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(f, &to).unwrap();
        placed.push(to);
    }
    placed
}

/// Every file of a folder (relative path -> bytes).
fn snapshot(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    common::files_under(dir)
        .into_iter()
        .map(|p| {
            let rel = p.strip_prefix(dir).unwrap().to_string_lossy().into_owned();
            let bytes = std::fs::read(&p).unwrap();
            (rel, bytes)
        })
        .collect()
}

#[test]
fn pack_ls_verify_unpack_round_trip() {
    round_trip("1", &[]);
}

#[test]
fn progressive_pack_ls_verify_unpack_round_trip() {
    let (listing, _) = round_trip("3", &[]);
    assert!(listing.contains("level 0 (1/4 per side)"), "{listing}");
    assert!(listing.contains("level 2 (1/1 per side)"), "{listing}");
    assert!(listing.contains("progressive (interlace)"), "{listing}");
}

/// `--patch-size 128`: the records are written with it (other shards than with 64-px
/// patches) and still list, verify and unpack to the source pixels.
#[test]
fn pack_with_128_px_patches_round_trips() {
    let (_, shards_128) = round_trip("3", &["--patch-size", "128"]);
    let (_, shards_64) = round_trip("3", &["--patch-size", "64"]);
    assert_eq!(
        shards_128.keys().collect::<Vec<_>>(),
        shards_64.keys().collect::<Vec<_>>()
    );
    assert!(shards_128
        .iter()
        .filter(|(name, _)| name.ends_with(".l3s"))
        .all(|(name, bytes)| *bytes != shards_64[name]));
}

/// Packs the class tree with `levels` levels (and `extra` arguments), lists, verifies and
/// unpacks it, and checks the unpacked pixels; returns the listing and the dataset's files.
fn round_trip(levels: &str, extra: &[&str]) -> (String, BTreeMap<String, Vec<u8>>) {
    let tmp = tempfile::tempdir().unwrap();
    let (src, ds, out) = (
        tmp.path().join("src"),
        tmp.path().join("ds"),
        tmp.path().join("out"),
    );
    let sources = class_tree(&src);
    let o = l3(&[
        "pack",
        s(&src),
        "-o",
        s(&ds),
        "--records-per-shard",
        "4",
        "--levels",
        levels,
        "-q",
    ]
    .iter()
    .chain(extra)
    .copied()
    .collect::<Vec<_>>());
    assert!(o.status.success(), "{}", text(&o));
    assert!(ds.join("shard-00000.l3s").is_file() && ds.join("shard-00001.l3s").is_file());
    assert!(!ds.join("shard-00002.l3s").exists());

    let o = l3(&["ls", s(&ds)]);
    let listing = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(o.status.success(), "{}", text(&o));
    assert!(listing.contains("6 records in 2 shard(s)"), "{listing}");
    assert!(
        listing.contains("class cats: 2") && listing.contains("class dogs: 2"),
        "{listing}"
    );
    assert!(listing.contains("no class: 2"), "{listing}");

    let o = l3(&["verify-dataset", s(&ds)]);
    assert!(o.status.success(), "{}", text(&o));

    let o = l3(&["unpack", s(&ds), "-o", s(&out)]);
    assert!(o.status.success(), "{}", text(&o));
    for source in &sources {
        let rel = source.strip_prefix(&src).unwrap();
        let back = image::open(out.join(rel).with_extension("png")).unwrap();
        let original = image::open(source).unwrap();
        assert_eq!(back.color(), original.color(), "{}", rel.display());
        assert_eq!(back.as_bytes(), original.as_bytes(), "{}", rel.display());
    }
    (listing, snapshot(&ds))
}

/// `--max-error 2` with three levels: the dataset lists, verifies and unpacks; every
/// unpacked sample is within 2 of its source (some differ), and the shards are smaller than
/// the lossless ones.
#[test]
fn error_bounded_pack_stays_within_its_bound() {
    let tmp = tempfile::tempdir().unwrap();
    let (src, out) = (tmp.path().join("src"), tmp.path().join("out"));
    let sources = class_tree(&src);
    let pack = |ds: &Path, bound: &str| {
        let o = l3(&[
            "pack",
            s(&src),
            "-o",
            s(ds),
            "--levels",
            "3",
            "--max-error",
            bound,
            "-q",
        ]);
        assert!(o.status.success(), "{}", text(&o));
        std::fs::read_dir(ds)
            .unwrap()
            .map(|e| e.unwrap().metadata().unwrap().len())
            .sum::<u64>()
    };
    let (lossy, exact) = (tmp.path().join("lossy"), tmp.path().join("exact"));
    let (lossy_bytes, exact_bytes) = (pack(&lossy, "2"), pack(&exact, "0"));
    assert!(lossy_bytes < exact_bytes, "{lossy_bytes} vs {exact_bytes}");
    let o = l3(&["verify-dataset", s(&lossy)]);
    assert!(o.status.success(), "{}", text(&o));
    let o = l3(&["unpack", s(&lossy), "-o", s(&out)]);
    assert!(o.status.success(), "{}", text(&o));
    let mut differ = 0;
    for source in &sources {
        let rel = source.strip_prefix(&src).unwrap();
        let back = image::open(out.join(rel).with_extension("png")).unwrap();
        let original = image::open(source).unwrap();
        assert_eq!(back.color(), original.color(), "{}", rel.display());
        // Samples as integers: 16-bit ones compared as u16, not byte by byte.
        let samples = |i: &image::DynamicImage| -> Vec<u16> {
            if i.color().bytes_per_pixel() / i.color().channel_count() == 2 {
                i.as_bytes()
                    .chunks_exact(2)
                    .map(|p| u16::from_ne_bytes([p[0], p[1]]))
                    .collect()
            } else {
                i.as_bytes().iter().map(|&b| b as u16).collect()
            }
        };
        let (a, b) = (samples(&back), samples(&original));
        assert_eq!(a.len(), b.len());
        for (&a, &b) in a.iter().zip(&b) {
            assert!(a.abs_diff(b) <= 2, "{}: {a} vs {b}", rel.display());
            differ += (a != b) as usize;
        }
    }
    assert!(differ > 0, "no sample changed: the bound was not applied");
}

#[test]
fn a_rerun_after_a_kill_writes_only_the_missing_shards_byte_identically() {
    let tmp = tempfile::tempdir().unwrap();
    let (src, ds) = (tmp.path().join("src"), tmp.path().join("ds"));
    class_tree(&src);
    let pack_with = |levels: &str| {
        l3(&[
            "pack",
            s(&src),
            "-o",
            s(&ds),
            "--records-per-shard",
            "2",
            "--levels",
            levels,
            "-q",
        ])
    };
    let pack = || pack_with("3");
    let o = pack();
    assert!(o.status.success(), "{}", text(&o));
    let complete = snapshot(&ds);
    assert_eq!(
        complete.len(),
        7,
        "3 shards, their pack records and the manifest: {:?}",
        complete.keys()
    );

    // What a kill during shard 1 leaves: shards 0 and 2 done, shard 1 only as a temp file of
    // a dead process, no manifest (it is written last). A truncated shard 2 stands for a
    // shard from another run that must not be trusted.
    std::fs::remove_file(ds.join("shard-00001.l3s")).unwrap();
    std::fs::remove_file(ds.join("manifest.json")).unwrap();
    std::fs::write(ds.join(".shard-00001.l3s.l3-tmp-999999999"), b"partial").unwrap();
    let shard2 = ds.join("shard-00002.l3s");
    let len = std::fs::metadata(&shard2).unwrap().len();
    std::fs::write(&shard2, &complete["shard-00002.l3s"][..len as usize / 2]).unwrap();
    let mtime0 = std::fs::metadata(ds.join("shard-00000.l3s"))
        .unwrap()
        .modified()
        .unwrap();

    let o = pack();
    assert!(o.status.success(), "{}", text(&o));
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        stdout.contains("(2 written, 1 already complete)"),
        "{stdout}"
    );
    assert_eq!(snapshot(&ds), complete, "the resumed dataset differs");
    // Shard 0 was kept, not rewritten.
    assert_eq!(
        std::fs::metadata(ds.join("shard-00000.l3s"))
            .unwrap()
            .modified()
            .unwrap(),
        mtime0
    );
    // Other levels: no shard of the 3-level run is kept.
    let o = pack_with("2");
    assert!(o.status.success(), "{}", text(&o));
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        stdout.contains("(3 written, 0 already complete)"),
        "{stdout}"
    );
}

#[test]
fn verify_dataset_reports_a_damaged_shard() {
    let tmp = tempfile::tempdir().unwrap();
    let (src, ds) = (tmp.path().join("src"), tmp.path().join("ds"));
    class_tree(&src);
    let o = l3(&[
        "pack",
        s(&src),
        "-o",
        s(&ds),
        "--records-per-shard",
        "3",
        "-q",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let shard = ds.join("shard-00001.l3s");
    let mut bytes = std::fs::read(&shard).unwrap();
    bytes[100] ^= 0x10;
    std::fs::write(&shard, &bytes).unwrap();
    let o = l3(&["verify-dataset", s(&ds)]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("shard-00001.l3s") && err.contains("CRC-32"),
        "{err}"
    );
    // A manifest that lies about its records is refused with its file named.
    let m = std::fs::read_to_string(ds.join("manifest.json")).unwrap();
    std::fs::write(
        ds.join("manifest.json"),
        m.replace("\"records\": 6", "\"records\": 7"),
    )
    .unwrap();
    let o = l3(&["ls", s(&ds)]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("manifest.json"),
        "{}",
        text(&o)
    );
}

#[test]
fn labels_and_metadata_from_csv_and_json_lines() {
    let tmp = tempfile::tempdir().unwrap();
    let (src, ds) = (tmp.path().join("src"), tmp.path().join("ds"));
    let sources = class_tree(&src);
    let keys: Vec<String> = sources
        .iter()
        .map(|p| {
            p.strip_prefix(&src)
                .unwrap()
                .to_string_lossy()
                .replace('\\', "/")
        })
        .collect();
    // CSV: two labelled images; the others have no class.
    let csv = tmp.path().join("labels.csv");
    std::fs::write(
        &csv,
        format!("path,label\n{},zebra\n{},ant\n", keys[0], keys[1]),
    )
    .unwrap();
    let o = l3(&["pack", s(&src), "-o", s(&ds), "--labels", s(&csv), "-q"]);
    assert!(o.status.success(), "{}", text(&o));
    let listing = String::from_utf8_lossy(&l3(&["ls", s(&ds)]).stdout).into_owned();
    assert!(
        listing.contains("class ant: 1") && listing.contains("class zebra: 1"),
        "{listing}"
    );
    assert!(listing.contains("no class: 4"), "{listing}");

    // JSON lines with metadata; changed labels make the rerun rewrite the shard.
    let jsonl = tmp.path().join("labels.jsonl");
    let lines: Vec<String> = keys
        .iter()
        .enumerate()
        .map(|(i, k)| {
            format!(
                "{{\"path\": \"{k}\", \"label\": {}, \"meta\": {{\"i\": {i}}}}}",
                i % 2
            )
        })
        .collect();
    std::fs::write(&jsonl, lines.join("\n")).unwrap();
    let o = l3(&["pack", s(&src), "-o", s(&ds), "--labels", s(&jsonl), "-q"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("(1 written, 0 already complete)"));
    let listing = String::from_utf8_lossy(&l3(&["ls", s(&ds)]).stdout).into_owned();
    assert!(
        listing.contains("class 0: 3") && listing.contains("class 1: 3"),
        "{listing}"
    );
    let shard = l3::shard::ShardReader::open(&ds.join("shard-00000.l3s"), 1 << 20).unwrap();
    for (i, r) in shard.records().iter().enumerate() {
        let k = keys.iter().position(|k| *k == r.key).unwrap();
        assert_eq!(r.meta, format!("{{\"i\":{k}}}").into_bytes(), "record {i}");
    }

    // A label file naming a missing image, or a line that does not parse, is refused.
    std::fs::write(&csv, "nope.png,cat\n").unwrap();
    let o = l3(&["pack", s(&src), "-o", s(&ds), "--labels", s(&csv), "-q"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("labels.csv:1"),
        "{}",
        text(&o)
    );
    std::fs::write(&jsonl, "{\"path\": 3}\n").unwrap();
    let o = l3(&["pack", s(&src), "-o", s(&ds), "--labels", s(&jsonl), "-q"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
}

#[test]
fn bench_loader_reports_throughput_stages_and_cache() {
    let tmp = tempfile::tempdir().unwrap();
    let (src, ds) = (tmp.path().join("src"), tmp.path().join("ds"));
    class_tree(&src);
    let o = l3(&["pack", s(&src), "-o", s(&ds), "--levels", "2", "-q"]);
    assert!(o.status.success(), "{}", text(&o));
    let o = l3(&[
        "bench-loader",
        s(&ds),
        "--epochs",
        "2",
        "--size",
        "32",
        "--batch-size",
        "4",
        "--cache-mb",
        "64",
    ]);
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(o.status.success(), "{}", text(&o));
    assert!(out.contains("epoch 0: 6 images"), "{out}");
    assert!(out.contains("epoch 1: 6 images"), "{out}");
    assert!(out.contains("decode") && out.contains("augment"), "{out}");
    // The whole dataset fits: the second epoch is all hits, half of all lookups.
    assert!(out.contains("12 lookups, hit rate 0.500"), "{out}");
}

/// Issue 10's end-to-end check on the shared images (`../shared/data/images` or
/// `$L3_TEST_DATA/images`; with `CI=true` a missing corpus fails): `l3 pack --levels 3`,
/// `verify-dataset` accepts it, `unpack` gives back every original pixel.
#[test]
fn shared_images_pack_verify_unpack_with_three_levels() {
    let Some(corpus) = common::corpus_dir() else {
        return;
    };
    let src = corpus.join("images");
    let tmp = tempfile::tempdir().unwrap();
    let (ds, out) = (tmp.path().join("ds"), tmp.path().join("out"));
    let o = l3(&["pack", s(&src), "-o", s(&ds), "--levels", "3", "-q"]);
    assert!(o.status.success(), "{}", text(&o));
    let o = l3(&["verify-dataset", s(&ds)]);
    assert!(o.status.success(), "{}", text(&o));
    let o = l3(&["unpack", s(&ds), "-o", s(&out)]);
    assert!(o.status.success(), "{}", text(&o));
    let mut sources = common::files_under(&src);
    sources.retain(|p| p.extension().is_some_and(|e| e == "png"));
    assert!(sources.len() >= 20, "{} images", sources.len());
    for source in &sources {
        let rel = source.strip_prefix(&src).unwrap();
        let back = image::open(out.join(rel).with_extension("png")).unwrap();
        let original = image::open(source).unwrap();
        // Palette and tRNS images come back as the RGB(A) the encoder stores.
        let original = match (original.color(), back.color()) {
            (a, b) if a == b => original,
            (_, image::ColorType::Rgba8) => image::DynamicImage::ImageRgba8(original.to_rgba8()),
            (_, image::ColorType::Rgb8) => image::DynamicImage::ImageRgb8(original.to_rgb8()),
            (a, b) => panic!("{}: {a:?} came back as {b:?}", rel.display()),
        };
        assert_eq!(back.as_bytes(), original.as_bytes(), "{}", rel.display());
    }
}

/// Packs `src` into `ds` with `args` (quiet) and returns stdout; panics on failure.
fn pack(src: &Path, ds: &Path, args: &[&str]) -> String {
    let mut all = vec!["pack", s(src), "-o", s(ds), "-q"];
    all.extend_from_slice(args);
    let o = l3(&all);
    assert!(o.status.success(), "{}", text(&o));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// The shards of a dataset folder (name -> bytes).
fn shards(ds: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut s = snapshot(ds);
    s.retain(|name, _| name.ends_with(".l3s"));
    s
}

/// A rerun keeps a complete shard only when its sources and every output-affecting option are
/// those it was built from: changed options or sources rebuild it, a touched but unchanged
/// source does not, and the result is byte-identical to a fresh pack of the new inputs.
#[test]
fn resume_rebuilds_shards_whose_sources_or_options_changed() {
    let tmp = tempfile::tempdir().unwrap();
    let (src, ds) = (tmp.path().join("src"), tmp.path().join("ds"));
    let sources = class_tree(&src);
    let base = ["--records-per-shard", "2", "--levels", "3"];
    let with = |extra: &[&str]| -> Vec<String> {
        base.iter().chain(extra).map(|s| s.to_string()).collect()
    };
    let run = |extra: &[&str]| {
        let args = with(extra);
        pack(
            &src,
            &ds,
            &args.iter().map(String::as_str).collect::<Vec<_>>(),
        )
    };
    // A fresh pack of the same inputs, elsewhere.
    let fresh = |extra: &[&str], name: &str| {
        let out = tmp.path().join(name);
        let args = with(extra);
        pack(
            &src,
            &out,
            &args.iter().map(String::as_str).collect::<Vec<_>>(),
        );
        shards(&out)
    };
    assert!(run(&[]).contains("(3 written, 0 already complete)"));
    assert!(run(&[]).contains("(0 written, 3 already complete)"));
    for (i, changed) in [
        &["--max-overhead", "0.5"][..],
        &["--max-error", "3"],
        &["--profile", "fast"],
        &["--patch-size", "128"],
    ]
    .into_iter()
    .enumerate()
    {
        let out = run(changed);
        assert!(
            out.contains("(3 written, 0 already complete)"),
            "{changed:?}: {out}"
        );
        assert_eq!(
            shards(&ds),
            fresh(changed, &format!("fresh{i}")),
            "{changed:?}"
        );
    }
    assert!(run(&[]).contains("(3 written, 0 already complete)"));
    // A source copied over with other pixels (same name): only its shard is rebuilt.
    std::fs::copy(&sources[1], &sources[0]).unwrap();
    let out = run(&[]);
    assert!(out.contains("(1 written, 2 already complete)"), "{out}");
    assert_eq!(shards(&ds), fresh(&[], "fresh-after-edit"));
    // Touched (a new time, the same bytes): kept, by its CRC-32.
    let f = std::fs::File::options()
        .append(true)
        .open(&sources[2])
        .unwrap();
    f.set_modified(std::time::SystemTime::now() + std::time::Duration::from_secs(5))
        .unwrap();
    drop(f);
    assert!(run(&[]).contains("(0 written, 3 already complete)"));
    // A shard whose bytes were altered in place (same size) is rebuilt too.
    let shard = ds.join("shard-00002.l3s");
    let mut bytes = std::fs::read(&shard).unwrap();
    bytes[40] ^= 1;
    std::fs::write(&shard, &bytes).unwrap();
    assert!(run(&[]).contains("(1 written, 2 already complete)"));
    assert_eq!(shards(&ds), fresh(&[], "fresh-after-edit2"));
}

/// `l3 unpack` refuses to overwrite without `--force`, and refuses keys that would land on one
/// file (they differ only by extension), before writing anything.
#[test]
fn unpack_refuses_overwrites_and_collisions() {
    let tmp = tempfile::tempdir().unwrap();
    let (src, ds, out) = (
        tmp.path().join("src"),
        tmp.path().join("ds"),
        tmp.path().join("out"),
    );
    class_tree(&src);
    pack(&src, &ds, &[]);
    let o = l3(&["unpack", s(&ds), "-o", s(&out)]);
    assert!(o.status.success(), "{}", text(&o));
    let first = snapshot(&out);
    // Mark one output: a second unpack must not replace it without --force.
    let (name, _) = first.iter().next().unwrap();
    std::fs::write(out.join(name), b"mine").unwrap();
    let o = l3(&["unpack", s(&ds), "-o", s(&out)]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("--force"), "{}", text(&o));
    assert_eq!(std::fs::read(out.join(name)).unwrap(), b"mine");
    let o = l3(&["unpack", s(&ds), "-o", s(&out), "--force"]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(snapshot(&out), first);

    // a.png and a.tiff both unpack to a.png: refused, nothing written.
    let (src2, ds2, out2) = (
        tmp.path().join("src2"),
        tmp.path().join("ds2"),
        tmp.path().join("out2"),
    );
    std::fs::create_dir_all(&src2).unwrap();
    let png = &common::files_under(&common::samples_dir())
        .into_iter()
        .find(|p| p.extension().is_some_and(|e| e == "png"))
        .unwrap();
    std::fs::copy(png, src2.join("a.png")).unwrap();
    std::fs::copy(png, src2.join("a.tiff")).unwrap();
    std::fs::copy(png, src2.join("b.png")).unwrap();
    pack(&src2, &ds2, &[]);
    let o = l3(&["unpack", s(&ds2), "-o", s(&out2)]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("\"a.png\"") && err.contains("\"a.tiff\""),
        "{err}"
    );
    assert!(
        !out2.exists() || snapshot(&out2).is_empty(),
        "something was written"
    );
}

/// `verify-dataset` checks every manifest field against the shards (and the pack records):
/// an emptied or renamed class list, per-level byte counts, record counts and sizes that
/// differ are each reported, naming the shard and the field.
#[test]
fn verify_dataset_cross_checks_every_manifest_field() {
    let tmp = tempfile::tempdir().unwrap();
    let (src, ds) = (tmp.path().join("src"), tmp.path().join("ds"));
    class_tree(&src);
    pack(&src, &ds, &["--records-per-shard", "3", "--levels", "2"]);
    let good = std::fs::read_to_string(ds.join("manifest.json")).unwrap();
    let check = |edit: &dyn Fn(&mut serde_json::Value), expect: &[&str]| {
        let mut m: serde_json::Value = serde_json::from_str(&good).unwrap();
        edit(&mut m);
        std::fs::write(ds.join("manifest.json"), m.to_string()).unwrap();
        let o = l3(&["verify-dataset", s(&ds)]);
        std::fs::write(ds.join("manifest.json"), &good).unwrap();
        let err = String::from_utf8_lossy(&o.stderr).into_owned();
        assert_ne!(o.status.code(), Some(0), "{}", text(&o));
        for e in expect {
            assert!(err.contains(e), "{e:?} not in {err}");
        }
    };
    check(
        &|m| m["classes"] = serde_json::json!([]),
        &["shard-00000.l3s: classes", "key"],
    );
    check(
        &|m| m["classes"][0] = serde_json::json!("renamed"),
        &["class: the manifest names it Some(\"renamed\")", "key"],
    );
    check(
        &|m| m["shards"][1]["level_bytes"][0] = serde_json::json!(1),
        &["shard-00001.l3s: level_bytes"],
    );
    check(
        &|m| {
            m["shards"][0]["records"] = serde_json::json!(2);
            m["records"] = serde_json::json!(5);
        },
        &["shard-00000.l3s: records"],
    );
    check(
        &|m| m["shards"][1]["bytes"] = serde_json::json!(5),
        &["shard-00001.l3s: bytes"],
    );
    check(
        &|m| m["shards"][0]["crc32"] = serde_json::json!(7),
        &["shard-00000.l3s: crc32"],
    );
    let o = l3(&["verify-dataset", s(&ds)]);
    assert!(o.status.success(), "{}", text(&o));
}

/// A labels file larger than `--max-input-bytes` is refused before it is read whole.
#[test]
fn a_labels_file_above_the_input_limit_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let (src, ds) = (tmp.path().join("src"), tmp.path().join("ds"));
    class_tree(&src);
    let csv = tmp.path().join("labels.csv");
    std::fs::write(&csv, "path,label\n".repeat(100)).unwrap();
    let o = l3(&[
        "--max-input-bytes",
        "1000",
        "pack",
        s(&src),
        "-o",
        s(&ds),
        "--labels",
        s(&csv),
        "-q",
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        text(&o).contains("above the limit of 1000 bytes"),
        "{}",
        text(&o)
    );
    assert!(!ds.join("manifest.json").exists());
}
