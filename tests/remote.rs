//! Datasets in an object store, against a real S3 server (SeaweedFS, started by
//! `scripts/test.sh`, which sets `L3_TEST_S3=s3://BUCKET` and the `AWS_*` variables): a packed
//! dataset copied into the bucket reads back record for record, level prefix for level prefix
//! and batch for batch as the local folder does; a destination with a manifest is refused
//! without force; a truncated shard, a missing object and an object replaced after it was
//! opened are refused with errors naming the object; a 70 MiB object goes up in parts and
//! reads back by range; a lying HTTP server (a terabyte manifest,
//! another range, a cut body) is refused before anything it claims is allocated. With
//! `CI=true` and no S3 server configured the tests fail instead of skipping.

mod common;

use std::sync::Arc;

use l3::loader::{Augment, DropLast, Loader, LoaderOptions, LoaderState, Partition};
use l3::shard::{copy_dataset, Dataset, DatasetManifest, Manifest};
use l3::store::Store;
use l3::Limits;

/// The bundled samples packed locally (3 levels), and the same dataset copied to `url`.
fn local_and_remote(url: &str) -> (tempfile::TempDir, Store, Store) {
    let dir = tempfile::tempdir().unwrap();
    common::pack_samples(dir.path(), 2, 3);
    let local = Store::local(dir.path());
    let remote = Store::open(url).unwrap();
    assert!(remote.is_remote());
    let mut calls = 0;
    let report = copy_dataset(&local, &remote, false, |_, _| calls += 1).unwrap();
    assert_eq!(calls, report.shards + 1);
    (dir, local, remote)
}

#[test]
fn a_dataset_in_a_bucket_reads_as_the_local_folder_does() {
    let Some(url) = common::s3_prefix("same") else {
        return;
    };
    let (_dir, local, remote) = local_and_remote(&url);
    let limits = Limits::default();
    let a = Dataset::open_in(&local, &limits).unwrap();
    let b = Dataset::open_in(&remote, &limits).unwrap();
    assert_eq!(a.manifest(), b.manifest());
    assert_eq!(b.dir().to_str(), Some(url.as_str()));
    for i in 0..a.len() {
        for level in 0..3 {
            assert_eq!(
                a.read(i, level).unwrap(),
                b.read(i, level).unwrap(),
                "{i} {level}"
            );
        }
    }
    for (sa, sb) in a.shards().iter().zip(b.shards()) {
        for level in 0..3 {
            let (pa, pb) = (
                sa.read_prefix(level).unwrap(),
                sb.read_prefix(level).unwrap(),
            );
            assert_eq!(
                sa.prefix_range(level).unwrap(),
                sb.prefix_range(level).unwrap()
            );
            for r in 0..sa.len() {
                assert_eq!(pa.payloads(r), pb.payloads(r));
            }
        }
        let wanted: Vec<(usize, u8)> = (0..sa.len()).map(|r| (r, (r % 3) as u8)).collect();
        let (ra, _) = sa.read_levels_coalesced(&wanted, 1 << 16, 8 << 20);
        let (rb, calls) = sb.read_levels_coalesced(&wanted, 1 << 16, 8 << 20);
        assert!(calls >= 1);
        for (x, y) in ra.into_iter().zip(rb) {
            assert_eq!(x.unwrap(), y.unwrap());
        }
    }
    // The loader over both: the same batches, bit for bit.
    let epoch = |ds: Dataset| -> Vec<(Vec<u64>, Vec<u32>)> {
        let mut o = LoaderOptions::new(Partition {
            batch_size: 5,
            world_size: 1,
            rank: 0,
            drop_last: DropLast::Partial,
        });
        o.seed = 3;
        o.augment = Augment::with_size(24, 16);
        o.end_epoch = 2;
        o.threads = 2;
        Loader::new(Arc::new(ds), o, LoaderState::default())
            .unwrap()
            .map(|b| {
                let b = b.unwrap();
                assert!(b.skipped.is_empty(), "{:?}", b.skipped);
                let bits = b
                    .data
                    .as_f32()
                    .unwrap()
                    .iter()
                    .map(|f| f.to_bits())
                    .collect();
                (b.samples.clone(), bits)
            })
            .collect()
    };
    let (ea, eb) = (epoch(a), epoch(b));
    assert!(!ea.is_empty());
    assert_eq!(ea, eb);
}

/// Azure Blob Storage (no suffix ranges in its API: blobs open with bounded ranges from the
/// manifest's sizes, or the size first): the same records and batches as the local folder.
#[test]
fn azure_blob_storage_reads_as_the_local_folder_does() {
    let Some(url) = common::az_prefix("same") else {
        eprintln!("skipped: L3_TEST_AZ is not set (an Azure Blob container, e.g. Azurite's)");
        return;
    };
    let (_dir, local, remote) = local_and_remote(&url);
    let limits = Limits::default();
    let a = Dataset::open_in(&local, &limits).unwrap();
    let b = Dataset::open_in(&remote, &limits).unwrap();
    assert_eq!(a.manifest(), b.manifest());
    for i in 0..a.len() {
        for level in [0, 2] {
            assert_eq!(
                a.read(i, level).unwrap(),
                b.read(i, level).unwrap(),
                "{i} {level}"
            );
        }
    }
    // A shard opened without the manifest (its size asked first).
    let name = &a.manifest().shards[0].file;
    let plain = l3::shard::ShardReader::open_in(&remote, name, 1 << 30, &limits).unwrap();
    assert_eq!(plain.len(), a.shards()[0].len());
}

#[test]
fn an_index_cache_makes_reopening_cost_only_the_manifest() {
    let Some(url) = common::s3_prefix("indexcache") else {
        return;
    };
    let (_dir, local, _remote) = local_and_remote(&url);
    let cache = tempfile::tempdir().unwrap();
    let shards = Manifest::read_in(&local).unwrap().shards.len() as u64;
    // Four "processes" (each its own store, as each DataLoader worker has) open the dataset at
    // once, sharing the cache: each shard is fetched once, by whichever took its lock first.
    let opened: Vec<(Store, Dataset)> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..4)
            .map(|_| {
                scope.spawn(|| {
                    let store = Store::open_with_index_cache(&url, Some(cache.path())).unwrap();
                    let ds = Dataset::open_in(&store, &Limits::default()).unwrap();
                    (store, ds)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let requests: u64 = opened.iter().map(|(s, _)| s.traffic().0).sum();
    let hits: u64 = opened.iter().map(|(s, _)| s.index_cache_hits()).sum();
    assert_eq!(hits, 3 * shards, "every shard fetched once");
    assert_eq!(
        requests,
        4 + 2 * shards,
        "4 manifests, one opening per shard"
    );
    // A later opening asks only for the manifest, and reads what the local folder holds.
    let store = Store::open_with_index_cache(&url, Some(cache.path())).unwrap();
    let ds = Dataset::open_in(&store, &Limits::default()).unwrap();
    assert_eq!((store.traffic().0, store.index_cache_hits()), (1, shards));
    let a = Dataset::open_in(&local, &Limits::default()).unwrap();
    for i in (0..a.len()).step_by(3) {
        assert_eq!(a.read(i, 2).unwrap(), ds.read(i, 2).unwrap(), "{i}");
    }
    // A damaged entry is a miss (refetched and replaced), never an error or wrong data.
    for entry in std::fs::read_dir(cache.path()).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "l3ix") {
            let mut b = std::fs::read(&path).unwrap();
            let mid = b.len() / 2;
            b[mid] ^= 0xff;
            std::fs::write(&path, b).unwrap();
        }
    }
    let store = Store::open_with_index_cache(&url, Some(cache.path())).unwrap();
    let ds = Dataset::open_in(&store, &Limits::default()).unwrap();
    assert_eq!(store.index_cache_hits(), 0);
    assert_eq!(store.traffic().0, 1 + 2 * shards);
    assert_eq!(a.read(1, 2).unwrap(), ds.read(1, 2).unwrap());
    // A repacked dataset (another manifest) misses the old entries.
    let (_dir2, local2) = {
        let dir = tempfile::tempdir().unwrap();
        common::pack_samples(dir.path(), 3, 3);
        let local = Store::local(dir.path());
        (dir, local)
    };
    copy_dataset(&local2, &Store::open(&url).unwrap(), true, |_, _| ()).unwrap();
    let store = Store::open_with_index_cache(&url, Some(cache.path())).unwrap();
    let ds = Dataset::open_in(&store, &Limits::default()).unwrap();
    // Only a shard with the same name, size and CRC-32 as a cached one is a hit.
    let old = &a.manifest().shards;
    let same = ds
        .manifest()
        .shards
        .iter()
        .filter(|s| {
            old.iter()
                .any(|o| (&o.file, o.bytes, o.crc32) == (&s.file, s.bytes, s.crc32))
        })
        .count() as u64;
    assert!(same < ds.manifest().shards.len() as u64);
    assert_eq!(store.index_cache_hits(), same);
    let b = Dataset::open_in(&local2, &Limits::default()).unwrap();
    for i in 0..b.len() {
        assert_eq!(b.read(i, 2).unwrap(), ds.read(i, 2).unwrap(), "{i}");
    }
}

#[test]
fn a_level_prefix_fetches_only_its_levels() {
    let Some(url) = common::s3_prefix("prefix") else {
        return;
    };
    let (_dir, _local, remote) = local_and_remote(&url);
    let ds = Dataset::open_in(&remote, &Limits::default()).unwrap();
    let total: u64 = ds.manifest().shards.iter().map(|s| s.bytes).sum();
    let mut last = 0;
    for level in 0..3u8 {
        let store = Store::open(&url).unwrap();
        let ds = Dataset::open_in(&store, &Limits::default()).unwrap();
        let (opened_requests, opened) = store.traffic();
        // The manifest, then per shard two concurrent ranged reads: exactly its header, and
        // exactly its index and trailer (the manifest tells their sizes).
        assert_eq!(opened_requests, 1 + 2 * ds.shards().len() as u64);
        let manifest_len = store.read("manifest.json", 1 << 20).unwrap().len() as u64;
        let heads_and_indexes: u64 = ds
            .manifest()
            .shards
            .iter()
            .map(|s| s.hint().head + s.hint().tail)
            .sum();
        assert_eq!(opened, manifest_len + heads_and_indexes);
        let before = store.traffic().1;
        let mut prefix = 0;
        for shard in ds.shards() {
            shard.read_prefix(level).unwrap();
            let r = shard.prefix_range(level).unwrap();
            prefix += r.end - r.start;
        }
        let fetched = store.traffic().1 - before;
        // Exactly the prefix: none of it was read when opening.
        assert_eq!(fetched, prefix, "level {level}");
        assert!(prefix > last && (level < 2 || prefix * 10 > total * 9));
        last = prefix;
    }
    // Level 0 of a 3-level dataset is a small part of it.
    let ds0: u64 = ds
        .shards()
        .iter()
        .map(|s| {
            let r = s.prefix_range(0).unwrap();
            r.end - r.start
        })
        .sum();
    assert!(ds0 * 4 < total, "{ds0} of {total}");
}

#[test]
fn a_copy_over_a_dataset_needs_force() {
    let Some(url) = common::s3_prefix("force") else {
        return;
    };
    let (_dir, local, remote) = local_and_remote(&url);
    let e = copy_dataset(&local, &remote, false, |_, _| {})
        .unwrap_err()
        .to_string();
    assert!(e.contains("exists") && e.contains(&url), "{e}");
    let report = copy_dataset(&local, &remote, true, |_, _| {}).unwrap();
    assert_eq!(report.records, Manifest::read_in(&remote).unwrap().records);
    // And back: the bucket's copy to a local folder is the same manifest and shards.
    let back = tempfile::tempdir().unwrap();
    copy_dataset(&remote, &Store::local(back.path()), false, |_, _| {}).unwrap();
    let m = Manifest::read(back.path()).unwrap();
    for s in &m.shards {
        let (got, want) = (
            std::fs::read(back.path().join(&s.file)).unwrap(),
            local.read(&s.file, u64::MAX).unwrap(),
        );
        assert!(got == want && !got.is_empty(), "{}", s.file);
    }
}

#[test]
fn broken_and_missing_objects_are_refused_naming_them() {
    let Some(url) = common::s3_prefix("broken") else {
        return;
    };
    let (_dir, local, remote) = local_and_remote(&url);
    let m = Manifest::read_in(&local).unwrap();
    let shard = &m.shards[1].file;
    let bytes = local.read(shard, u64::MAX).unwrap();
    // Truncated: the trailer is gone.
    remote.put(shard, &bytes[..bytes.len() - 100]).unwrap();
    let e = Dataset::open_in(&remote, &Limits::default())
        .unwrap_err()
        .to_string();
    assert!(e.contains(shard), "{e}");
    // Missing.
    let missing = Store::open(&format!("{url}-nothing-here")).unwrap();
    let e = Dataset::open_in(&missing, &Limits::default())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("manifest.json") && e.contains("-nothing-here"),
        "{e}"
    );
}

#[test]
fn an_object_replaced_after_opening_is_refused() {
    let Some(url) = common::s3_prefix("etag") else {
        return;
    };
    let (_dir, local, remote) = local_and_remote(&url);
    let ds = Dataset::open_in(&remote, &Limits::default()).unwrap();
    let (s, r) = ds.locate(0).unwrap();
    let shard = ds.shards()[s].name().to_owned();
    let before = ds.read(0, 0).unwrap();
    // The same bytes again are a new object version with the same content; a changed byte in
    // the first payload makes a different ETag.
    let mut bytes = local.read(&shard, u64::MAX).unwrap();
    let at = ds.shards()[s].entry(r).unwrap().level(0).unwrap().offset as usize;
    bytes[at] ^= 0xff;
    remote.put(&shard, &bytes).unwrap();
    let e = ds.read(0, 0).unwrap_err().to_string();
    assert!(e.contains("changed") && e.contains(&shard), "{e}");
    // Opened again, the dataset reads the new object (whose payload fails its CRC).
    let again = Dataset::open_in(&remote, &Limits::default()).unwrap();
    assert_ne!(again.read(0, 0).ok(), Some(before));
}

/// A one-thread HTTP server on a loopback port that answers every request with `respond(path,
/// range header)`'s raw bytes and closes the connection; returns its base URL.
fn hostile_server(respond: fn(&str, &str) -> Vec<u8>) -> String {
    use std::io::{BufRead, BufReader, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { continue };
            let mut reader = BufReader::new(conn.try_clone().unwrap());
            let (mut path, mut range) = (String::new(), String::new());
            let mut line = String::new();
            while reader.read_line(&mut line).unwrap_or(0) > 0 && line != "\r\n" {
                if let Some(p) = line.strip_prefix("GET ") {
                    path = p.split(' ').next().unwrap_or("").to_owned();
                }
                if line.to_ascii_lowercase().starts_with("range:") {
                    range = line[6..].trim().to_owned();
                }
                line.clear();
            }
            let _ = conn.write_all(&respond(&path, &range));
        }
    });
    url
}

fn response(status: &str, headers: &[(&str, String)], body: &[u8]) -> Vec<u8> {
    let mut out = format!("HTTP/1.1 {status}\r\nConnection: close\r\n");
    for (k, v) in headers {
        out += &format!("{k}: {v}\r\n");
    }
    out += "\r\n";
    let mut out = out.into_bytes();
    out.extend_from_slice(body);
    out
}

#[test]
fn lying_servers_are_refused_before_l3_allocates_what_they_claim() {
    // No S3 needed: plain HTTP(S) datasets read through the same code.
    // A manifest that claims a terabyte.
    let url = hostile_server(|_, _| {
        response(
            "200 OK",
            &[("Content-Length", (1u64 << 40).to_string())],
            b"{\"version\": 1",
        )
    });
    let store = Store::open(&format!("{url}/ds")).unwrap();
    let e = Dataset::open_in(&store, &Limits::default())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("limit") && e.contains(&(1u64 << 40).to_string()),
        "{e}"
    );
    // A shard whose suffix read comes back as another range.
    let url = hostile_server(|_, _| {
        response(
            "206 Partial Content",
            &[
                ("Content-Range", "bytes 0-9/1000".into()),
                ("Content-Length", "10".into()),
            ],
            b"0123456789",
        )
    });
    let e = Store::open(&format!("{url}/ds"))
        .unwrap()
        .open_blob("shard-00000.l3s")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("shard-00000.l3s") && e.contains("got 0..10"),
        "{e}"
    );
    // A body cut short of its announced length.
    let url = hostile_server(|_, _| {
        response(
            "206 Partial Content",
            &[
                ("Content-Range", "bytes 990-999/1000".into()),
                ("Content-Length", "10".into()),
            ],
            b"0123",
        )
    });
    let e = Store::open(&format!("{url}/ds"))
        .unwrap()
        .open_blob("shard-00000.l3s")
        .unwrap_err()
        .to_string();
    assert!(e.contains("shard-00000.l3s"), "{e}");
}

#[test]
fn a_disk_cache_spares_later_epochs_fetches_and_changes_no_batch() {
    let Some(url) = common::s3_prefix("disk") else {
        return;
    };
    let (_dir, _local, remote) = local_and_remote(&url);
    let ds = Arc::new(Dataset::open_in(&remote, &Limits::default()).unwrap());
    let run = |disk: Option<(std::path::PathBuf, u64)>| {
        let mut o = LoaderOptions::new(Partition {
            batch_size: 4,
            world_size: 1,
            rank: 0,
            drop_last: DropLast::Partial,
        });
        o.seed = 9;
        o.augment = Augment::with_size(24, 16);
        o.end_epoch = 3;
        o.threads = 2;
        o.disk_cache = disk;
        let mut fetched = [0u64; 3];
        let mut out = Vec::new();
        let mut last = Default::default();
        for b in Loader::new(ds.clone(), o, LoaderState::default()).unwrap() {
            let b = b.unwrap();
            fetched[b.epoch as usize] += b.bytes_read;
            last = b.disk_cache;
            out.push((b.samples.clone(), b.data.as_f32().unwrap().to_vec()));
        }
        (out, fetched, last)
    };
    let (plain, plain_fetched, _) = run(None);
    let epoch_bytes = plain_fetched[0];
    assert!(epoch_bytes > 0 && plain_fetched.iter().all(|&f| f == epoch_bytes));
    let root = tempfile::tempdir().unwrap();
    // Room for everything: later epochs fetch nothing.
    let (all, fetched, stats) = run(Some((root.path().to_path_buf(), 2 * epoch_bytes)));
    assert_eq!(all, plain);
    assert_eq!(fetched, [epoch_bytes, 0, 0]);
    assert_eq!((stats.hits, stats.accesses), (2 * ds.len(), 3 * ds.len()));
    // Room for half: later epochs fetch less than a whole epoch, never more than without.
    let (half, fetched, _) = run(Some((root.path().to_path_buf(), epoch_bytes / 2)));
    assert_eq!(half, plain);
    assert!(
        fetched[1] < epoch_bytes && fetched[2] < epoch_bytes,
        "{fetched:?}"
    );
    // Each loader's folder went with it.
    assert_eq!(std::fs::read_dir(root.path()).unwrap().count(), 0);
}

#[test]
fn a_large_object_goes_up_in_parts_and_reads_back_by_range() {
    let Some(url) = common::s3_prefix("parts") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("big");
    // 70 MiB: above the 64 MiB where uploads switch to parts of 16 MiB.
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let bytes: Vec<u8> = (0..70usize << 20)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state as u8
        })
        .collect();
    std::fs::write(&path, &bytes).unwrap();
    let store = Store::open(&url).unwrap();
    store.put_file("big", &path).unwrap();
    let blob = store.open_blob("big").unwrap();
    assert_eq!(blob.len(), bytes.len() as u64);
    for (offset, len) in [
        (0u64, 1000usize),
        (16 << 20, 4096),
        ((70 << 20) - 5000, 5000),
    ] {
        let got = blob.read_at(offset, len).unwrap();
        assert!(
            got == bytes[offset as usize..offset as usize + len],
            "at {offset}"
        );
    }
    let (_, fetched) = store.traffic();
    assert!(
        fetched < 1 << 20,
        "{fetched} bytes fetched for a few small ranges"
    );
}
