//! Record shards: what is written reads back (every record, every level, the level-major
//! prefix in one read), writes are atomic, and every malformed shard (truncated, flipped,
//! lying index, overlapping records, levels out of order, impossible counts) is a clear error,
//! never a panic.

mod common;

use l3::progressive::{encode_levels, LevelScheme, ProgressiveOptions};
use l3::shard::format::{parse_shard, HEADER_LEN, TRAILER_LEN};
use l3::shard::{RecordInput, ShardError, ShardReader, ShardWriter};
use l3::{EncodeOptions, Error, Profile};

/// The bundled sample images.
fn sample_images() -> Vec<(String, image::DynamicImage)> {
    let mut files = common::files_under(&common::samples_dir());
    files.retain(|p| p.extension().is_some_and(|e| e == "png"));
    files
        .iter()
        .map(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            (name, l3::read_image(p).unwrap())
        })
        .collect()
}

/// The bundled samples as progressive records with two levels (level 0 at 1/2 per side),
/// compact and fast profiles alternating; records 1, 4, 7, ... stored flat (whole image in
/// level 0, level 1 empty), the others interlaced.
fn sample_records() -> Vec<RecordInput> {
    let mut records = Vec::new();
    for (i, (name, img)) in sample_images().into_iter().enumerate() {
        let profile = if i % 2 == 0 {
            Profile::Compact
        } else {
            Profile::Fast
        };
        let opts = EncodeOptions::for_profile(profile);
        let raw = l3::image_support::raw_image(&img).unwrap();
        let progressive = ProgressiveOptions {
            levels: 2,
            max_overhead: if i % 3 == 1 { 0.0 } else { f64::INFINITY },
        };
        records.push(RecordInput {
            key: name,
            class: (i % 3 != 2).then_some(i as u32 % 3),
            meta: format!("{{\"i\": {i}}}").into_bytes(),
            width: img.width(),
            height: img.height(),
            levels: encode_levels(&raw, &progressive, &opts).unwrap(),
        });
    }
    assert!(records.len() >= 6);
    assert_eq!(records[1].levels.scheme, LevelScheme::Flat);
    assert_eq!(records[0].levels.scheme, LevelScheme::Interlace);
    records
}

fn shard_bytes(records: &[RecordInput]) -> Vec<u8> {
    let mut w = ShardWriter::new(2).unwrap();
    for r in records {
        w.add(r.clone()).unwrap();
    }
    w.to_bytes()
}

#[test]
fn records_and_prefixes_read_back() {
    let records = sample_records();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("shard-00000.l3s");
    let mut w = ShardWriter::new(2).unwrap();
    for r in &records {
        w.add(r.clone()).unwrap();
    }
    w.write_to(&path).unwrap();
    // Atomic write: only the shard is left in the folder.
    let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().flatten().collect();
    assert_eq!(names.len(), 1);

    let shard = ShardReader::open(&path, 1 << 20).unwrap();
    assert_eq!((shard.len(), shard.level_count()), (records.len(), 2));
    for (i, r) in records.iter().enumerate() {
        let e = shard.record(i).unwrap();
        assert_eq!((&e.key, e.class, &e.meta), (&r.key, r.class, &r.meta));
        let h = l3::read_header(&r.levels.payloads[0]).unwrap();
        assert_eq!(
            (e.width, e.height, e.channels, e.depth, e.scheme),
            (r.width, r.height, h.channels(), h.depth, r.levels.scheme)
        );
        for k in 0..2u8 {
            assert_eq!(
                shard.read_level(i, k).unwrap(),
                r.levels.payloads[k as usize]
            );
        }
    }
    // Every record decodes to the original at level 1 and to its lattice at stride 2 at
    // level 0, whether interlaced or flat.
    let images = sample_images();
    let options = l3::DecodeOptions::default();
    for (i, (_, img)) in images.iter().enumerate() {
        let top = shard.decode_record(i, 1, &options).unwrap();
        assert_eq!(top.data, img.as_bytes(), "record {i} level 1");
        let low = shard.decode_record(i, 0, &options).unwrap();
        assert_eq!(
            (low.width, low.height),
            (img.width().div_ceil(2), img.height().div_ceil(2))
        );
        let bytes_per_pixel = img.color().bytes_per_pixel() as usize;
        for (y, row) in low
            .data
            .chunks(low.width as usize * bytes_per_pixel)
            .enumerate()
        {
            for (x, px) in row.chunks(bytes_per_pixel).enumerate() {
                let at = (2 * y * img.width() as usize + 2 * x) * bytes_per_pixel;
                assert_eq!(px, &img.as_bytes()[at..at + bytes_per_pixel], "record {i}");
            }
        }
    }
    // Level 0 of every record is one prefix read, and it decodes to the same images.
    let prefix = shard.read_prefix(0).unwrap();
    let level0_bytes: usize = records.iter().map(|r| r.levels.payloads[0].len()).sum();
    assert_eq!(prefix.bytes.len(), level0_bytes);
    for (i, r) in records.iter().enumerate() {
        assert_eq!(prefix.payloads(i), vec![r.levels.payloads[0].as_slice()]);
    }
    for (i, low) in shard
        .decode_prefix(&prefix, &options)
        .unwrap()
        .iter()
        .enumerate()
    {
        assert_eq!(low, &shard.decode_record(i, 0, &options).unwrap());
    }
    // The whole shard as a prefix: level 1 of every record, the originals.
    let prefix = shard.read_prefix(1).unwrap();
    for (full, (_, img)) in shard
        .decode_prefix(&prefix, &options)
        .unwrap()
        .iter()
        .zip(&images)
    {
        assert_eq!(full.data, img.as_bytes());
    }
    let full = shard.prefix_range(1).unwrap();
    assert_eq!(full.start, HEADER_LEN);
    assert!(shard.prefix_range(0).unwrap().end < full.end);
    assert!(matches!(
        shard.read_level(records.len(), 0),
        Err(Error::Shard(ShardError::NoSuchRecord { .. }))
    ));
    assert!(matches!(
        shard.read_level(0, 2),
        Err(Error::Shard(ShardError::NoSuchRecord { .. }))
    ));
}

#[test]
fn writer_refuses_bad_records() {
    let mut w = ShardWriter::new(2).unwrap();
    let good = sample_records().remove(0);
    let mut one_level = good.clone();
    one_level.levels.payloads.pop();
    assert!(matches!(w.add(one_level), Err(Error::Parameter(_))));
    let mut not_l3 = good.clone();
    not_l3.levels.payloads[0] = b"not an l3 file at all, just bytes".to_vec();
    assert!(matches!(w.add(not_l3), Err(Error::Format(_))));
    // A shape that does not match the payloads, payloads swapped, a flat record with bytes
    // above level 0.
    let mut wrong_width = good.clone();
    wrong_width.width += 2;
    assert!(matches!(
        w.add(wrong_width),
        Err(Error::Format(l3::FormatError::LevelShape { .. }))
    ));
    let mut swapped = good.clone();
    swapped.levels.payloads.swap(0, 1);
    assert!(matches!(
        w.add(swapped),
        Err(Error::Format(l3::FormatError::LevelShape { .. }))
    ));
    let flat = sample_records().remove(1);
    let mut flat_with_extra = flat.clone();
    flat_with_extra.levels.payloads[1] = good.levels.payloads[1].clone();
    assert!(w.add(flat_with_extra).is_err());
    assert!(w.add(flat).is_ok());
    assert_eq!(w.len(), 1);
    let mut w = ShardWriter::new(2).unwrap();
    let mut long_key = good.clone();
    long_key.key = "k".repeat(1025);
    assert!(w.add(long_key).is_err());
    // Keys that are not relative paths under a folder: refused by name before anything is
    // written (`l3 unpack` would write them outside its output folder, or two onto one file).
    for key in [
        "",
        "/etc/passwd",
        "../up.png",
        "a/../../b.png",
        "a//b.png",
        "./a.png",
        "a/",
        "a\\b.png",
        "nul\0.png",
        "line\nbreak.png",
        "C:\\x.png",
    ] {
        let mut bad = good.clone();
        bad.key = key.into();
        let e = w.add(bad).expect_err(key);
        assert!(matches!(e, Error::Parameter(_)), "{key:?}: {e}");
        assert!(e.to_string().contains("key"), "{key:?}: {e}");
        assert!(l3::shard::format::check_key(key).is_err(), "{key:?}");
    }
    for key in ["a.png", "cats/a b.png", "x/y/z.tiff", "12:00.png", "é.png"] {
        assert_eq!(l3::shard::format::check_key(key), Ok(()), "{key:?}");
    }
    assert!(ShardWriter::new(0).is_err() && ShardWriter::new(9).is_err());
    assert!(w.is_empty());
}

#[test]
fn every_truncation_and_byte_flip_is_an_error_or_a_valid_shard() {
    let records = sample_records();
    let bytes = shard_bytes(&records[..3]);
    let (_, trailer, _) = parse_shard(&bytes).unwrap();
    // Truncations anywhere: the trailer moves, so each one must be refused.
    for len in (0..bytes.len())
        .step_by(97)
        .chain(bytes.len() - 40..bytes.len())
    {
        assert!(parse_shard(&bytes[..len]).is_err(), "truncated to {len}");
    }
    // Byte flips in the header, index and trailer: refused (the index has a CRC).
    let index = trailer.index_offset as usize..bytes.len();
    for pos in (0..HEADER_LEN as usize).chain(index.step_by(7)) {
        let mut b = bytes.clone();
        b[pos] ^= 0x41;
        assert!(parse_shard(&b).is_err(), "flip at {pos}");
    }
}

/// The in-place index (`Index`, what `ShardReader` keeps) and the owned parse (`parse_index`)
/// are one validation: on every byte of an index flipped (its CRC made to match, so the
/// fields' own checks decide), both refuse with the same error or both accept the same
/// entries, and the sums kept for the manifest check are the entries' sums.
#[test]
fn the_in_place_index_agrees_with_the_owned_parse_on_every_flip() {
    use l3::shard::format::{parse_index, Trailer};
    use l3::shard::Index;
    let records = sample_records();
    let bytes = shard_bytes(&records[..4]);
    let (header, trailer, _) = parse_shard(&bytes).unwrap();
    let at = trailer.index_offset as usize;
    let index = &bytes[at..at + trailer.index_len as usize];
    let (mut accepted, mut refused) = (0, 0);
    for pos in 0..index.len() {
        for flip in [0x01u8, 0x80] {
            let mut b = index.to_vec();
            b[pos] ^= flip;
            let t = Trailer {
                index_crc32: crc32fast::hash(&b),
                ..trailer
            };
            let owned = parse_index(&b, &t, header.level_count);
            let kept = Index::parse(b.clone(), &t, header.level_count);
            match (owned, kept) {
                (Ok(entries), Ok(kept)) => {
                    accepted += 1;
                    assert_eq!(kept.entries(), entries, "flip at {pos}");
                    assert_eq!(kept.len(), entries.len());
                    for (i, e) in entries.iter().enumerate() {
                        assert_eq!(kept.get(i).unwrap().to_entry(), *e);
                    }
                    assert!(kept.get(entries.len()).is_none());
                    let mut sums = vec![0u64; header.level_count as usize];
                    for e in &entries {
                        for (s, l) in sums.iter_mut().zip(&e.levels) {
                            *s += l.len;
                        }
                    }
                    assert_eq!(kept.level_bytes(), sums);
                    assert_eq!(
                        kept.max_class(),
                        entries.iter().filter_map(|e| e.class).max()
                    );
                }
                (Err(a), Err(b)) => {
                    refused += 1;
                    assert_eq!(a, b, "flip at {pos}");
                }
                (a, b) => panic!("flip at {pos}: parse_index {a:?}, Index::parse {b:?}"),
            }
        }
    }
    // Flips in keys, metadata, classes and CRCs are valid shards; the rest are not.
    assert!(
        accepted > 0 && refused > 0,
        "{accepted} accepted, {refused} refused"
    );
}

/// Rewrites a shard's index with `edit` applied to the parsed entries (and a fresh CRC), as
/// a lying writer would.
fn forge(bytes: &[u8], edit: impl FnOnce(&mut Vec<l3::shard::RecordEntry>)) -> Vec<u8> {
    let (_, trailer, mut records) = parse_shard(bytes).unwrap();
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

#[test]
fn lying_indexes_are_named_errors() {
    let records = sample_records();
    let bytes = shard_bytes(&records[..3]);
    let out_of_place = |b: &[u8]| matches!(parse_shard(b), Err(ShardError::LevelOutOfPlace { .. }));
    // Overlapping records: record 1 starts inside record 0.
    assert!(out_of_place(&forge(&bytes, |r| r[1].levels[0].offset -= 1)));
    // A level table out of order: level 1 before level 0.
    assert!(out_of_place(&forge(&bytes, |r| r[0].levels.swap(0, 1))));
    // Records swapped in the index (their offsets no longer ascend).
    assert!(out_of_place(&forge(&bytes, |r| r.swap(0, 1))));
    // A level past the data area, and a length that overflows.
    assert!(out_of_place(
        &forge(&bytes, |r| r[2].levels[1].len += 1 << 20)
    ));
    assert!(out_of_place(
        &forge(&bytes, |r| r[2].levels[1].len = u64::MAX)
    ));
    // Impossible shapes.
    assert!(matches!(
        parse_shard(&forge(&bytes, |r| r[0].channels = 5)),
        Err(ShardError::InvalidRecord {
            field: "channels",
            ..
        })
    ));
    assert!(matches!(
        parse_shard(&forge(&bytes, |r| r[0].depth = 12)),
        Err(ShardError::InvalidRecord { field: "depth", .. })
    ));
    // Record 1 is flat, 0 interlaced: a flat record with bytes above level 0, an interlaced
    // one with an empty level, an unknown scheme.
    let invalid = |b: &[u8], f: &str| matches!(parse_shard(b), Err(ShardError::InvalidRecord { field, .. }) if field == f);
    let grow = |r: &mut Vec<l3::shard::RecordEntry>| {
        // Give record 1 level 1 the first byte of record 2's level 1 (layout stays valid).
        r[1].levels[1].len = 1;
        r[2].levels[1].offset += 1;
        r[2].levels[1].len -= 1;
    };
    assert!(invalid(&forge(&bytes, grow), "level len"));
    assert!(invalid(
        &forge(&bytes, |r| r[0].scheme = LevelScheme::Flat),
        "level len"
    ));
    let mut unknown = forge(&bytes, |_| {});
    let (_, t, _) = parse_shard(&unknown).unwrap();
    // The scheme byte of record 0: after key_len, key, class, meta_len, meta, w, h, ch, depth.
    let r0 = &records[0];
    let at = t.index_offset as usize + 2 + r0.key.len() + 4 + 4 + r0.meta.len() + 4 + 4 + 1 + 1;
    assert_eq!(unknown[at], 1);
    unknown[at] = 7;
    let end = unknown.len() - TRAILER_LEN as usize;
    let crc = crc32fast::hash(&unknown[t.index_offset as usize..end]);
    unknown[end + 24..end + 28].copy_from_slice(&crc.to_le_bytes());
    assert!(invalid(&unknown, "scheme"));
    // Untouched, the forgery round-trips (the test itself is sound).
    assert!(parse_shard(&forge(&bytes, |_| {})).is_ok());
}

#[test]
fn lying_trailers_are_named_errors() {
    let bytes = shard_bytes(&sample_records()[..2]);
    let (_, t, _) = parse_shard(&bytes).unwrap();
    let with = |edit: &dyn Fn(&mut l3::shard::format::Trailer)| {
        let mut t = t;
        edit(&mut t);
        let mut b = bytes[..bytes.len() - TRAILER_LEN as usize].to_vec();
        b.extend_from_slice(&t.to_bytes());
        parse_shard(&b)
    };
    // A record count no index could hold (it would otherwise size an allocation).
    assert!(matches!(
        with(&|t| t.record_count = u64::MAX / 2),
        Err(ShardError::Invalid {
            field: "trailer record_count",
            ..
        })
    ));
    // An index inside the header, or overlapping the trailer.
    assert!(matches!(
        with(&|t| t.index_offset = 3),
        Err(ShardError::Invalid { .. })
    ));
    assert!(matches!(
        with(&|t| t.index_len += 1),
        Err(ShardError::Invalid { .. })
    ));
    assert!(matches!(
        with(&|t| t.index_crc32 ^= 1),
        Err(ShardError::IndexChecksum { .. })
    ));
    // Fewer records than the index holds: bytes left over.
    assert!(with(&|t| t.record_count -= 1).is_err());
}

#[test]
fn a_corrupt_level_is_caught_by_its_checksum_on_read() {
    let records = sample_records();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.l3s");
    let mut bytes = shard_bytes(&records[..2]);
    bytes[HEADER_LEN as usize + 30] ^= 0xff;
    std::fs::write(&path, &bytes).unwrap();
    let shard = ShardReader::open(&path, 1 << 20).unwrap();
    assert!(matches!(
        shard.read_level(0, 0),
        Err(Error::Shard(ShardError::LevelChecksum {
            record: 0,
            level: 0,
            ..
        }))
    ));
    assert!(shard.read_prefix(0).is_err());
    assert!(shard.read_level(1, 1).is_ok());
    // An index larger than the caller allows is refused before it is read.
    assert!(matches!(ShardReader::open(&path, 8), Err(Error::Limits(_))));
}

#[test]
fn a_dataset_numbers_records_across_its_shards() {
    use l3::shard::{Dataset, Manifest, ShardInfo};
    let records = sample_records();
    let dir = tempfile::tempdir().unwrap();
    let mut infos = Vec::new();
    for (i, chunk) in records.chunks(4).enumerate() {
        let mut w = ShardWriter::new(2).unwrap();
        for r in chunk {
            w.add(r.clone()).unwrap();
        }
        let file = format!("shard-{i:05}.l3s");
        w.write_to(&dir.path().join(&file)).unwrap();
        let bytes = std::fs::read(dir.path().join(&file)).unwrap();
        infos.push(ShardInfo::of_shard(file, &bytes).unwrap());
    }
    let manifest = Manifest {
        version: l3::shard::MANIFEST_VERSION,
        levels: 2,
        classes: vec!["a".into(), "b".into(), "c".into()],
        records: records.len() as u64,
        shards: infos,
    };
    manifest.write(dir.path()).unwrap();
    let ds = Dataset::open(dir.path()).unwrap();
    assert_eq!(ds.len(), records.len() as u64);
    // Opened as a dataset of either kind: images, the same manifest; an unknown kind is a
    // manifest error naming it.
    match l3::shard::AnyDataset::open(dir.path()).unwrap() {
        l3::shard::AnyDataset::Images(any) => assert_eq!(any.manifest(), ds.manifest()),
        l3::shard::AnyDataset::Tensors(_) => panic!("an image dataset opened as tensors"),
    }
    let good = std::fs::read(dir.path().join("manifest.json")).unwrap();
    let mut odd: serde_json::Value = serde_json::from_slice(&good).unwrap();
    odd["kind"] = "volumes".into();
    std::fs::write(dir.path().join("manifest.json"), odd.to_string()).unwrap();
    let e = l3::shard::AnyDataset::open(dir.path()).unwrap_err();
    assert!(
        e.to_string().contains("unknown dataset kind \"volumes\""),
        "{e}"
    );
    std::fs::write(dir.path().join("manifest.json"), &good).unwrap();
    for (i, r) in records.iter().enumerate() {
        assert_eq!(ds.record(i as u64).unwrap().key, r.key);
        assert_eq!(ds.read(i as u64, 1).unwrap(), r.levels.payloads[1]);
    }
    assert_eq!(ds.locate(4).unwrap(), (1, 0));
    assert!(matches!(
        ds.read(records.len() as u64, 0),
        Err(Error::Shard(ShardError::NoSuchRecord { .. }))
    ));
    assert_eq!(ds.class_name(1), Some("b"));
    // A manifest that disagrees with a shard, or names a path outside the folder, is refused
    // by the writer (the good manifest stays, byte for byte) and by every reader.
    let good = std::fs::read(dir.path().join("manifest.json")).unwrap();
    let lie = |edit: &dyn Fn(&mut Manifest)| {
        let mut m = manifest.clone();
        edit(&mut m);
        let e = m
            .write(dir.path())
            .expect_err("a lying manifest was written");
        assert!(matches!(e, Error::Manifest(_)), "{e}");
        assert_eq!(
            std::fs::read(dir.path().join("manifest.json")).unwrap(),
            good
        );
        std::fs::write(
            dir.path().join("manifest.json"),
            serde_json::to_vec(&m).unwrap(),
        )
        .unwrap();
        let e = Dataset::open(dir.path()).expect_err("a lying manifest was opened");
        std::fs::write(dir.path().join("manifest.json"), &good).unwrap();
        assert!(matches!(e, Error::Manifest(_)), "{e}");
        e.to_string()
    };
    let text = lie(&|m| {
        m.shards[0].records += 1;
        m.records += 1;
    });
    assert!(text.contains("shard-00000.l3s: records"), "{text}");
    lie(&|m| m.shards[1].file = "../shard-00001.l3s".into());
    // Bytes per level, the file size, an emptied class list, a shard listed twice.
    let text = lie(&|m| m.shards[1].level_bytes[0] += 1);
    assert!(text.contains("shard-00001.l3s: level_bytes"), "{text}");
    let text = lie(&|m| m.shards[0].bytes -= 1);
    assert!(text.contains("shard-00000.l3s: bytes"), "{text}");
    let text = lie(&|m| m.classes.clear());
    assert!(text.contains("classes") && text.contains("key"), "{text}");
    lie(&|m| {
        m.shards[1] = m.shards[0].clone();
        m.records = 2 * m.shards[0].records;
    });
    assert_eq!(
        Dataset::open(dir.path()).unwrap().len(),
        records.len() as u64
    );
}

/// Shards are opened in parallel, but the error is the first bad shard's in manifest order
/// (as if opened one by one), and each record's entry read in place is its owned entry.
#[test]
fn a_dataset_reports_its_first_bad_shard() {
    use l3::shard::{Dataset, Manifest, ShardInfo};
    let records = sample_records();
    let dir = tempfile::tempdir().unwrap();
    let mut infos = Vec::new();
    for (i, chunk) in records.chunks(2).enumerate() {
        let mut w = ShardWriter::new(2).unwrap();
        for r in chunk {
            w.add(r.clone()).unwrap();
        }
        let file = format!("shard-{i:05}.l3s");
        w.write_to(&dir.path().join(&file)).unwrap();
        let bytes = std::fs::read(dir.path().join(&file)).unwrap();
        infos.push(ShardInfo::of_shard(file, &bytes).unwrap());
    }
    assert!(infos.len() >= 3);
    let manifest = Manifest {
        version: l3::shard::MANIFEST_VERSION,
        levels: 2,
        classes: vec!["a".into(), "b".into(), "c".into()],
        records: records.len() as u64,
        shards: infos,
    };
    manifest.write(dir.path()).unwrap();
    let ds = Dataset::open(dir.path()).unwrap();
    for i in 0..ds.len() {
        assert_eq!(ds.entry(i).unwrap().to_entry(), *ds.record(i).unwrap());
    }
    assert!(ds.entry(ds.len()).is_err());
    let opened = |m: &Manifest| {
        std::fs::write(
            dir.path().join("manifest.json"),
            serde_json::to_vec(m).unwrap(),
        )
        .unwrap();
        Dataset::open(dir.path())
            .expect_err("a bad shard was opened")
            .to_string()
    };
    // Shards 1 and 2 disagree with the manifest: shard 1 is named, not shard 2.
    let mut m = manifest.clone();
    m.shards[1].bytes += 1;
    m.shards[2].bytes += 1;
    let text = opened(&m);
    assert!(text.contains("shard-00001.l3s: bytes"), "{text}");
    assert!(!text.contains("shard-00002"), "{text}");
    // Shard 2 is missing and shard 1 lies: still shard 1.
    std::fs::rename(
        dir.path().join("shard-00002.l3s"),
        dir.path().join("moved.l3s"),
    )
    .unwrap();
    let text = opened(&m);
    assert!(text.contains("shard-00001.l3s: bytes"), "{text}");
    // Only shard 2 is bad (missing): its error.
    let text = opened(&manifest);
    assert!(text.contains("shard-00002.l3s"), "{text}");
}

mod mutations {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]
        /// Random edits of a valid shard, with the index CRC recomputed so the edits reach the
        /// field checks: the parser returns entries or an error, never panics, and what it
        /// accepts lies inside the data area.
        #[test]
        fn mutated_shards_never_panic(
            edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6),
            fix_crc in any::<bool>(),
        ) {
            static BYTES: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
            let base = BYTES.get_or_init(|| shard_bytes(&sample_records()[..3]));
            let (_, trailer, _) = parse_shard(base).unwrap();
            let mut b = base.clone();
            // Edits land in the header, the index and the trailer (the payloads have their
            // own per-level CRCs, checked on read).
            let index = trailer.index_offset as usize;
            let editable: Vec<usize> = (0..HEADER_LEN as usize).chain(index..b.len()).collect();
            for (at, value) in edits {
                b[*at.get(&editable)] = value;
            }
            if fix_crc {
                let end = b.len() - TRAILER_LEN as usize;
                let crc = crc32fast::hash(&b[index..end]);
                b[end + 24..end + 28].copy_from_slice(&crc.to_le_bytes());
            }
            if let Ok((_, t, records)) = parse_shard(&b) {
                for r in &records {
                    for l in &r.levels {
                        prop_assert!(l.offset >= HEADER_LEN && l.offset + l.len <= t.index_offset);
                    }
                }
            }
        }
    }
}

/// Coalesced reads return exactly what per-payload reads return, in the order asked, with
/// fewer reads; a missing record is its own error, a corrupt payload only fails itself.
#[test]
fn coalesced_reads_match_single_reads() {
    let records = sample_records();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.l3s");
    let mut bytes = shard_bytes(&records);
    std::fs::write(&path, &bytes).unwrap();
    let shard = ShardReader::open(&path, 1 << 20).unwrap();
    let wanted: Vec<(usize, u8)> = vec![(3, 0), (0, 0), (1, 0), (2, 1), (0, 1), (99, 0), (2, 0)];
    let (got, reads) = shard.read_levels_coalesced(&wanted, 1 << 20, 64 << 20);
    assert!(reads < wanted.len() - 1, "{reads} reads");
    for (&(i, l), r) in wanted.iter().zip(&got) {
        match shard.read_level(i, l) {
            Ok(b) => assert_eq!(r.as_ref().unwrap(), &b),
            Err(_) => assert!(r.is_err()),
        }
    }
    // One read per payload when nothing may be merged (a zero read size limit).
    let (_, single) = shard.read_levels_coalesced(&wanted[..3], 0, 0);
    assert_eq!(single, 3);
    // Corrupt record 0's level 0: only that payload fails.
    bytes[HEADER_LEN as usize + 40] ^= 0x55;
    std::fs::write(&path, &bytes).unwrap();
    let shard = ShardReader::open(&path, 1 << 20).unwrap();
    let (got, _) = shard.read_levels_coalesced(&wanted, 1 << 20, 64 << 20);
    assert!(matches!(
        got[1],
        Err(Error::Shard(ShardError::LevelChecksum {
            record: 0,
            level: 0,
            ..
        }))
    ));
    assert!(got[0].is_ok() && got[2].is_ok() && got[4].is_ok());
}

/// A shard of one record whose level 0 the index declares `len` bytes long, written sparse
/// (header, a hole, index, trailer): what a hostile or damaged shard can claim.
fn sparse_shard(path: &std::path::Path, key: &str, len: u64) {
    use std::io::{Seek, SeekFrom, Write};
    let entry = l3::shard::RecordEntry {
        key: key.into(),
        class: None,
        meta: Vec::new(),
        width: 1,
        height: 1,
        channels: 1,
        depth: 8,
        scheme: LevelScheme::Flat,
        levels: vec![l3::shard::LevelEntry {
            offset: HEADER_LEN,
            len,
            crc32: 0,
        }],
    };
    let mut index = Vec::new();
    entry.write(&mut index);
    let trailer = l3::shard::format::Trailer {
        index_offset: HEADER_LEN + len,
        index_len: index.len() as u64,
        record_count: 1,
        index_crc32: crc32fast::hash(&index),
    };
    let mut f = std::fs::File::create(path).unwrap();
    f.write_all(&l3::shard::format::ShardHeader { level_count: 1 }.to_bytes())
        .unwrap();
    f.seek(SeekFrom::Start(HEADER_LEN + len)).unwrap();
    f.write_all(&index).unwrap();
    f.write_all(&trailer.to_bytes()).unwrap();
}

/// A payload, coalesced read or prefix the index declares larger than the input limit is
/// refused before anything is allocated or read (a 1 TiB sparse level would otherwise abort
/// the process on allocation), naming the shard and the key.
#[test]
fn huge_declared_levels_are_refused_before_allocation() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sparse.l3s");
    sparse_shard(&path, "huge.png", 1 << 40);
    let started = std::time::Instant::now();
    let named = |e: Error| {
        let text = e.to_string();
        assert!(matches!(e, Error::Limits(_)), "{text}");
        assert!(text.contains("sparse.l3s"), "{text}");
        text
    };
    // The default limits (4 GiB), and a caller's smaller ones.
    for limits in [
        l3::Limits::default(),
        l3::Limits {
            max_input_bytes: 1 << 20,
            ..l3::Limits::default()
        },
    ] {
        let shard = ShardReader::open_with_limits(&path, 1 << 20, &limits).unwrap();
        let text = named(shard.read_level(0, 0).unwrap_err());
        assert!(text.contains("\"huge.png\""), "{text}");
        let (got, reads) = shard.read_levels_coalesced(&[(0, 0)], 1 << 20, u64::MAX);
        assert_eq!(reads, 0);
        let text = named(got.into_iter().next().unwrap().unwrap_err());
        assert!(text.contains("\"huge.png\""), "{text}");
        named(shard.read_prefix(0).unwrap_err());
        assert!(shard
            .decode_record(0, 0, &l3::DecodeOptions::default())
            .is_err());
    }
    // An index above the limit: refused by name too.
    let tiny = l3::Limits {
        max_input_bytes: 8,
        ..l3::Limits::default()
    };
    let text = named(ShardReader::open_with_limits(&path, 1 << 20, &tiny).unwrap_err());
    assert!(text.contains("index"), "{text}");
    assert!(started.elapsed().as_secs() < 5, "{:?}", started.elapsed());
}
