//! Datasets written by an earlier version keep opening and decoding the same: an image
//! dataset (compact, 2 levels, two shards, classes and an unlabelled image, 8- and 16-bit) and
//! a tensor dataset (lossless float32 with a fill value, error-bounded float32, raw int16; two
//! shards), packed by l3 at 4b02e1e (its wheel) with `scripts/make-dataset-fixtures.py`.
//! `expected.json` holds what that version decoded: the CRC-32 of every image record's pixels
//! at every level, of every tensor array's bytes, and each record's key and label. Both kinds
//! open through `AnyDataset` (one manifest read) and through their own types.
#![cfg(feature = "dataset")]

#[cfg(feature = "gpu")]
#[path = "common/gpu_support.rs"]
mod gpu_support;

use std::path::Path;

use l3::decode::DecodeOptions;
use l3::shard::{AnyDataset, Dataset, TensorDataset};

const DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/datasets");

fn expected() -> serde_json::Value {
    let text = std::fs::read_to_string(Path::new(DIR).join("expected.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

#[test]
fn an_earlier_image_dataset_decodes_the_same_at_every_level() {
    let want = expected()["images"].as_array().unwrap().clone();
    let d = Dataset::open(&Path::new(DIR).join("images")).unwrap();
    assert_eq!(d.len(), want.len() as u64);
    assert_eq!(d.manifest().classes, ["cats", "dogs"]);
    for (i, w) in want.iter().enumerate() {
        let record = d.record(i as u64).unwrap();
        assert_eq!(record.key, w["key"].as_str().unwrap());
        let label = record.class.map_or(-1, i64::from);
        assert_eq!(label, w["label"].as_i64().unwrap(), "record {i}");
        let (s, r) = d.locate(i as u64).unwrap();
        for (level, crc) in w["crc32"].as_array().unwrap().iter().enumerate() {
            let image = d.shards()[s]
                .decode_record(r, level as u8, &DecodeOptions::default())
                .unwrap();
            assert_eq!(
                crc32fast::hash(&image.data) as u64,
                crc.as_u64().unwrap(),
                "record {i} ({}) level {level}",
                record.key
            );
        }
    }
}

/// The same image records, every shard's prefix decoded as one GPU batch at every level
/// (levels.wgsl on lavapipe in CI): the pixels the earlier version's CPU decoder gave.
#[cfg(feature = "gpu")]
#[test]
fn an_earlier_image_dataset_decodes_the_same_on_the_gpu() {
    let Some(gpu) = gpu_support::gpu() else {
        return;
    };
    let want = expected()["images"].as_array().unwrap().clone();
    let d = Dataset::open(&Path::new(DIR).join("images")).unwrap();
    let mut first = 0;
    for shard in d.shards() {
        for level in 0..d.manifest().levels {
            let images = shard
                .decode_prefix_on_gpu(gpu, level)
                .unwrap()
                .read_back()
                .unwrap();
            assert_eq!(images.len(), shard.len());
            for (i, pixels) in images.iter().enumerate() {
                // The GPU writes 16-bit samples little-endian, as the CRCs were taken.
                let crc = want[first + i]["crc32"][level as usize].as_u64().unwrap();
                assert_eq!(
                    crc32fast::hash(pixels) as u64,
                    crc,
                    "record {} level {level}",
                    first + i
                );
            }
        }
        first += shard.len();
    }
    assert_eq!(first, want.len());
}

#[test]
fn an_earlier_tensor_dataset_decodes_the_same() {
    let want = expected()["tensors"].as_array().unwrap().clone();
    let d = TensorDataset::open(&Path::new(DIR).join("tensors")).unwrap();
    assert_eq!(d.len(), want.len() as u64);
    assert_eq!(d.shards().len(), 2);
    for (i, w) in want.iter().enumerate() {
        assert_eq!(d.entry(i as u64).unwrap().key, w["key"].as_str().unwrap());
        let arrays = d.read(i as u64).unwrap();
        let crcs = w["arrays"].as_object().unwrap();
        assert_eq!(arrays.len(), crcs.len());
        for (name, array) in &arrays {
            assert_eq!(
                crc32fast::hash(array.bytes()) as u64,
                crcs[name].as_u64().unwrap(),
                "record {i} array {name}"
            );
        }
    }
}

#[test]
fn both_earlier_datasets_open_as_either_kind_from_one_manifest_read() {
    for (dir, tensors) in [("images", false), ("tensors", true)] {
        let d = AnyDataset::open(&Path::new(DIR).join(dir)).unwrap();
        assert_eq!(matches!(d, AnyDataset::Tensors(_)), tensors, "{dir}");
        assert!(!d.is_empty());
    }
    // Opened as the other kind, each is refused with an error naming what it is.
    let e = Dataset::open(&Path::new(DIR).join("tensors")).unwrap_err();
    assert!(e.to_string().contains("tensor"), "{e}");
    assert!(TensorDataset::open(&Path::new(DIR).join("images")).is_err());
}
