//! The loader over tensor records: a small tensor dataset packed here (raw, lossless and
//! error-bounded arrays, an integer mask), loaded with windows, flips, quarter turns and
//! normalisation. Batches equal a reference made from `TensorDataset::read` and
//! `TensorAugment::apply` with the windows drawn for the samples; input and target are cut
//! by the same window (the target is packed as `input * 2 + 1`); resume, ranks, corrupt
//! records and the cache behave as for images.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;

use l3::field::Bound;
use l3::loader::{
    tensor::f32_to_f16_bits, Batch, DropLast, Loader, LoaderDataset, LoaderOptions, LoaderState,
    OnError, Partition, TensorAugment, TensorType,
};
use l3::shard::tensor_pack::{TensorPackOptions, TensorPacker, TensorSample};
use l3::shard::TensorDataset;
use l3::tensor::{ArrayMode, ArrayOptions, DType, NdArray};
use l3::Error;

const RECORDS: u32 = 23;
const SEED: u64 = 5;

/// Record `i`: `input` (2 x 12 x 10, lossless), `target` = `input * 2 + 1` (raw), `eb`
/// (12 x 10, error-bounded) and `mask` (12 x 10 u8, raw).
fn sample(i: u32) -> TensorSample {
    let input: Vec<f32> = (0..240)
        .map(|k| ((k as f32 * 0.37 + i as f32).sin() * 50.0).round() / 4.0)
        .collect();
    let target: Vec<f32> = input.iter().map(|&x| x * 2.0 + 1.0).collect();
    let eb: Vec<f32> = (0..120)
        .map(|k| (k as f32 * 0.11 + i as f32 * 0.5).cos() * 3.0)
        .collect();
    let mask: Vec<u8> = (0..120).map(|k| ((k * 7 + i as usize) % 5) as u8).collect();
    TensorSample {
        key: Some(format!("r{i:03}")),
        class: Some(i % 3),
        meta: Vec::new(),
        arrays: vec![
            (
                "input".into(),
                NdArray::from_f32(vec![2, 12, 10], &input).unwrap(),
            ),
            (
                "target".into(),
                NdArray::from_f32(vec![2, 12, 10], &target).unwrap(),
            ),
            ("eb".into(), NdArray::from_f32(vec![12, 10], &eb).unwrap()),
            (
                "mask".into(),
                NdArray::new(DType::UInt8, vec![12, 10], mask).unwrap(),
            ),
        ],
    }
}

/// Packs the dataset into `dir` (5 records per shard) and opens it.
fn pack(dir: &Path) -> Arc<TensorDataset> {
    let mut o = TensorPackOptions::new(5, ArrayMode::Lossless);
    let mode = |mode| ArrayOptions {
        mode,
        fill_value: None,
        format: Default::default(),
    };
    o.modes.insert("target".into(), mode(ArrayMode::Raw));
    o.modes
        .insert("eb".into(), mode(ArrayMode::Bounded(Bound::Absolute(1e-3))));
    o.modes.insert("mask".into(), mode(ArrayMode::Raw));
    let mut p = TensorPacker::new(dir, o).unwrap();
    for i in 0..RECORDS {
        p.push(sample(i)).unwrap();
    }
    p.finish().unwrap();
    Arc::new(TensorDataset::open(dir).unwrap())
}

fn windows() -> TensorAugment {
    TensorAugment {
        crop: vec![6, 6],
        flips: true,
        rot90: true,
        normalise: true,
        ..Default::default()
    }
}

fn options(batch: u32, world: u32, rank: u32, tensor: Option<TensorAugment>) -> LoaderOptions {
    let mut o = LoaderOptions::new(Partition {
        batch_size: batch,
        world_size: world,
        rank,
        drop_last: DropLast::Partial,
    });
    o.seed = SEED;
    o.tensor = tensor;
    o.end_epoch = 2;
    o.threads = 2;
    o
}

fn run(ds: &Arc<TensorDataset>, o: LoaderOptions, state: LoaderState) -> Vec<Batch> {
    Loader::open(LoaderDataset::Tensors(ds.clone()), o, state)
        .unwrap()
        .map(|b| b.unwrap())
        .collect()
}

fn start() -> LoaderState {
    LoaderState {
        seed: SEED,
        ..LoaderState::default()
    }
}

/// The f32 values of array `a` of batch `b`, sample slot `k`.
fn slot(b: &Batch, a: usize, k: usize) -> &[f32] {
    let t = &b.arrays[a];
    let per: usize = t.shape[1..].iter().product();
    &t.tensor.as_f32().expect("f32")[k * per..(k + 1) * per]
}

#[test]
fn batches_equal_the_reference_with_the_windows_drawn() {
    let tmp = tempfile::tempdir().unwrap();
    let ds = pack(tmp.path());
    let aug = windows();
    let stats = &ds.manifest().stats;
    let batches = run(&ds, options(4, 1, 0, Some(aug.clone())), start());
    let mut seen: BTreeSet<(u64, u64)> = BTreeSet::new();
    let mut turned = BTreeSet::new();
    for b in &batches {
        assert!(b.skipped.is_empty(), "{:?}", b.skipped);
        assert_eq!(b.windows.len(), b.samples.len());
        let names: Vec<&str> = b.arrays.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["input", "target", "eb", "mask"]);
        let n = b.samples.len();
        assert_eq!(b.arrays[0].shape, [n, 2, 6, 6]);
        assert_eq!(b.arrays[2].shape, [n, 6, 6]);
        assert_eq!(b.shape[0], n);
        for (k, &s) in b.samples.iter().enumerate() {
            assert!(
                seen.insert((b.epoch, s)),
                "sample {s} twice in epoch {}",
                b.epoch
            );
            let w = &b.windows[k];
            assert_eq!(*w, aug.window(SEED, b.epoch, s, &[12, 10]).unwrap());
            turned.insert((w.rot90, w.flip.clone()));
            assert_eq!(b.classes[k], Some(s as u32 % 3));
            for (a, (name, array)) in ds.read(s).unwrap().iter().enumerate() {
                let st = stats.get(name).map(|x| (x.mean, x.std));
                assert_eq!(st.is_some(), name != "mask", "float arrays have statistics");
                let mut want = vec![0f32; slot(b, a, k).len()];
                aug.apply(array, w, st, &mut want).unwrap();
                let got = slot(b, a, k);
                assert!(
                    got.iter()
                        .zip(&want)
                        .all(|(x, y)| x.to_bits() == y.to_bits()),
                    "sample {s} array {name}"
                );
            }
        }
    }
    assert_eq!(
        seen.len(),
        2 * RECORDS as usize,
        "each sample once per epoch"
    );
    assert!(turned.len() > 4, "flips and turns vary: {turned:?}");
}

#[test]
fn input_and_target_are_cut_by_the_same_window() {
    let tmp = tempfile::tempdir().unwrap();
    let ds = pack(tmp.path());
    let aug = TensorAugment {
        normalise: false,
        ..windows()
    };
    let mut origins = BTreeSet::new();
    for b in run(&ds, options(5, 1, 0, Some(aug)), start()) {
        for k in 0..b.samples.len() {
            let (input, target) = (slot(&b, 0, k), slot(&b, 1, k));
            assert_eq!(input.len(), 72);
            for (x, t) in input.iter().zip(target) {
                assert_eq!((x * 2.0 + 1.0).to_bits(), t.to_bits());
            }
            origins.insert(b.windows[k].origin.clone());
        }
    }
    assert!(origins.len() > 5, "the windows move: {origins:?}");
}

#[test]
fn whole_arrays_without_windows_and_f16_rounding() {
    let tmp = tempfile::tempdir().unwrap();
    let ds = pack(tmp.path());
    let batches = run(&ds, options(6, 1, 0, None), start());
    let mut count = 0;
    for b in &batches {
        assert!(b.windows.is_empty());
        assert_eq!(b.arrays[0].shape[1..], [2, 12, 10]);
        for (k, &s) in b.samples.iter().enumerate() {
            for (a, (_, array)) in ds.read(s).unwrap().iter().enumerate() {
                let want: Vec<f32> = match array.to_f32() {
                    Some(v) => v,
                    None => array.bytes().iter().map(|&x| x as f32).collect(),
                };
                assert_eq!(slot(b, a, k), &want[..]);
            }
            count += 1;
        }
    }
    assert_eq!(count, 2 * RECORDS);
    // f16 output: the f32 batch rounded to nearest even.
    let aug = windows();
    let half = TensorAugment {
        output: TensorType::F16,
        ..aug.clone()
    };
    let f32s = run(&ds, options(4, 1, 0, Some(aug)), start());
    let f16s = run(&ds, options(4, 1, 0, Some(half)), start());
    assert_eq!(f32s.len(), f16s.len());
    for (x, y) in f32s.iter().zip(&f16s) {
        assert_eq!(x.samples, y.samples);
        for (tx, ty) in x.arrays.iter().zip(&y.arrays) {
            let want: Vec<u16> = tx
                .tensor
                .as_f32()
                .unwrap()
                .iter()
                .map(|&v| f32_to_f16_bits(v))
                .collect();
            assert_eq!(ty.tensor.as_f16_bits().unwrap(), &want[..]);
        }
    }
}

/// (epoch, sample) -> the bits of every array's slot.
fn values(batches: &[Batch]) -> BTreeMap<(u64, u64), Vec<u32>> {
    let mut out = BTreeMap::new();
    for b in batches {
        for (k, &s) in b.samples.iter().enumerate() {
            let bits = (0..b.arrays.len())
                .flat_map(|a| slot(b, a, k).iter().map(|v| v.to_bits()))
                .collect();
            assert!(out.insert((b.epoch, s), bits).is_none());
        }
    }
    out
}

#[test]
fn resume_mid_epoch_gives_exactly_the_remaining_batches() {
    let tmp = tempfile::tempdir().unwrap();
    let ds = pack(tmp.path());
    let o = options(4, 1, 0, Some(windows()));
    let all = run(&ds, o.clone(), start());
    let mut first = Loader::open(LoaderDataset::Tensors(ds.clone()), o.clone(), start()).unwrap();
    let head: Vec<Batch> = (0..3).map(|_| first.next().unwrap().unwrap()).collect();
    let state = first.state();
    drop(first);
    assert_eq!(state.epoch, 0);
    assert_eq!(state.consumed, 12);
    let rest = run(&ds, o, state);
    assert_eq!(head.len() + rest.len(), all.len());
    for (x, y) in head.iter().chain(&rest).zip(&all) {
        assert_eq!((x.epoch, &x.samples), (y.epoch, &y.samples));
        assert_eq!(x.windows, y.windows);
    }
    let mut resumed = values(&head);
    resumed.extend(values(&rest));
    assert_eq!(resumed, values(&all));
}

#[test]
fn ranks_partition_an_epoch() {
    let tmp = tempfile::tempdir().unwrap();
    let ds = pack(tmp.path());
    let single = values(&run(&ds, options(2, 1, 0, Some(windows())), start()));
    let mut union = BTreeMap::new();
    for rank in 0..3 {
        for (key, bits) in values(&run(&ds, options(2, 3, rank, Some(windows())), start())) {
            assert!(union.insert(key, bits).is_none(), "{key:?} on two ranks");
        }
    }
    // Every sample once per epoch across the ranks, with the same values as one rank alone
    // (a window depends on the sample, not on who loads it).
    assert_eq!(union, single);
}

#[test]
fn a_corrupt_record_is_skipped_or_fails_by_on_error() {
    let tmp = tempfile::tempdir().unwrap();
    let ds = pack(tmp.path());
    let bad = 7u64;
    let (_, payload) = ds.arrays_of(bad).unwrap()[1];
    let (shard, key) = ds.name_of(bad);
    drop(ds);
    let path = tmp.path().join(&shard);
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[payload.offset as usize + 3] ^= 0x40;
    std::fs::write(&path, bytes).unwrap();
    let ds = Arc::new(TensorDataset::open(tmp.path()).unwrap());
    let batches = run(&ds, options(4, 1, 0, Some(windows())), start());
    let skipped: Vec<_> = batches.iter().flat_map(|b| &b.skipped).collect();
    assert_eq!(skipped.len(), 2, "once per epoch");
    for s in &skipped {
        assert_eq!((s.sample, &s.shard, &s.key), (bad, &shard, &key));
        assert!(
            s.error.contains("checksum") || s.error.contains("CRC"),
            "{}",
            s.error
        );
    }
    let kept: usize = batches.iter().map(|b| b.samples.len()).sum();
    assert_eq!(kept, 2 * (RECORDS as usize - 1));
    for b in &batches {
        assert!(!b.samples.contains(&bad));
        assert_eq!(b.arrays[0].shape[0], b.samples.len());
        assert_eq!(b.arrays[0].tensor.len(), b.samples.len() * 72);
    }
    let mut o = options(4, 1, 0, Some(windows()));
    o.on_error = OnError::Fail;
    let failed: Vec<_> = Loader::open(LoaderDataset::Tensors(ds), o, start())
        .unwrap()
        .filter_map(|b| b.err())
        .collect();
    assert_eq!(failed.len(), 2);
    match &failed[0] {
        Error::Record { sample, key: k, .. } => assert_eq!((*sample, k), (bad, &key)),
        other => panic!("{other}"),
    }
}

#[test]
fn the_cache_gives_hits_in_epoch_two() {
    let tmp = tempfile::tempdir().unwrap();
    let ds = pack(tmp.path());
    let payload: u64 = ds.shards().iter().map(|s| s.payload_bytes()).sum();
    let mut o = options(4, 1, 0, Some(windows()));
    o.cache_bytes = payload;
    let batches = run(&ds, o, start());
    let read = |e: u64| -> u64 {
        batches
            .iter()
            .filter(|b| b.epoch == e)
            .map(|b| b.bytes_read)
            .sum()
    };
    assert_eq!(read(0), payload, "epoch 1 reads every payload once");
    assert_eq!(read(1), 0, "epoch 2 is served from the cache");
    let last = batches.last().unwrap().cache;
    assert_eq!(last.hits, RECORDS as u64);
    assert_eq!(last.accesses, 2 * RECORDS as u64);
    assert_eq!(last.hit_bytes, payload);
    // Without a cache every epoch reads everything, at most one read per record.
    let plain = run(&ds, options(4, 1, 0, Some(windows())), start());
    let bytes: u64 = plain.iter().map(|b| b.bytes_read).sum();
    let calls: usize = plain.iter().map(|b| b.read_calls).sum();
    assert_eq!(bytes, 2 * payload);
    assert!(calls <= 2 * RECORDS as usize, "{calls}");
}

/// Reads of one batch's records when adjacent records of a shard are read together: one
/// per run of consecutive records per shard.
fn runs_of(ds: &TensorDataset, samples: &[u64]) -> usize {
    let mut by_shard: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    for &s in samples {
        let (shard, r) = ds.locate(s).unwrap();
        by_shard.entry(shard).or_default().push(r);
    }
    by_shard
        .values_mut()
        .map(|rs| {
            rs.sort_unstable();
            1 + rs.windows(2).filter(|w| w[1] != w[0] + 1).count()
        })
        .sum()
}

#[test]
fn a_record_is_one_read_and_nearby_records_share_reads() {
    let tmp = tempfile::tempdir().unwrap();
    let ds = pack(tmp.path());
    // The one-read payloads equal the per-array reads.
    for i in 0..RECORDS as u64 {
        let (s, r) = ds.locate(i).unwrap();
        let per_array: Vec<Vec<u8>> = (0..4)
            .map(|k| ds.shards()[s].read_payload(r, k).unwrap())
            .collect();
        assert_eq!(ds.read_payloads(i).unwrap(), per_array);
    }
    // Record 1 lies between 0 and 2: with no gap allowed, 0 is read alone. Records above
    // the read size are read array by array: the same payloads.
    let shard = &ds.shards()[1];
    let (whole, calls) = shard.read_records_coalesced(&[0, 2, 3], 0, 1 << 20);
    assert_eq!(calls, 2, "record 0, then records 2 and 3 together");
    let (split, calls) = shard.read_records_coalesced(&[0, 2, 3], 0, 1);
    assert_eq!(calls, 3 * 4);
    for (a, b) in whole.into_iter().zip(split) {
        assert_eq!(a.unwrap(), b.unwrap());
    }
    let (bad, _) = shard.read_records_coalesced(&[9], 0, 1 << 20);
    assert!(bad[0].is_err(), "no record 9 in a shard of 5");
    // Loader: adjacent records only (gap 0), then within 64 KiB (the default): one read per
    // run of consecutive records of a shard, then one per shard; the values are the same.
    let mut o = options(4, 1, 0, Some(windows()));
    o.coalesce_gap = 0;
    let adjacent = run(&ds, o, start());
    let near = run(&ds, options(4, 1, 0, Some(windows())), start());
    let mut shards_per_batch = 0;
    for (a, n) in adjacent.iter().zip(&near) {
        assert_eq!(a.read_calls, runs_of(&ds, &a.samples));
        let shards: BTreeSet<usize> = n.samples.iter().map(|&s| ds.locate(s).unwrap().0).collect();
        assert_eq!(n.read_calls, shards.len());
        shards_per_batch += shards.len();
    }
    let calls: usize = adjacent.iter().map(|b| b.read_calls).sum();
    assert!(
        calls < 2 * RECORDS as usize,
        "some records share a read: {calls}"
    );
    assert!(shards_per_batch < calls, "{shards_per_batch} < {calls}");
    assert_eq!(values(&adjacent), values(&near));
    assert_eq!(
        values(&near),
        values(&run(&ds, options(7, 1, 0, Some(windows())), start()))
    );
}

#[test]
fn options_are_checked_against_the_dataset() {
    let tmp = tempfile::tempdir().unwrap();
    let ds = pack(tmp.path());
    let refused = |tensor: Option<TensorAugment>, change: &dyn Fn(&mut LoaderOptions)| {
        let mut o = options(4, 1, 0, tensor);
        change(&mut o);
        match Loader::open(LoaderDataset::Tensors(ds.clone()), o, start()) {
            Err(e) => e.to_string(),
            Ok(_) => panic!("accepted"),
        }
    };
    let big = TensorAugment {
        crop: vec![13, 6],
        ..Default::default()
    };
    assert!(refused(Some(big), &|_| {}).contains("extent"));
    let three = TensorAugment {
        crop: vec![2, 6, 6],
        ..Default::default()
    };
    assert!(refused(Some(three), &|_| {}).contains("spatial"));
    let not_square = TensorAugment {
        spatial: 2,
        rot90: true,
        ..Default::default()
    };
    assert!(refused(Some(not_square), &|_| {}).contains("square"));
    assert!(refused(None, &|o| o.level = Some(0)).contains("level"));
    assert!(refused(None, &|o| o.decode.limits.max_output_bytes = 1000).contains("1000"));
    // An image dataset refuses tensor windows.
    let mut o = options(4, 1, 0, Some(windows()));
    assert!(o.validate(10).unwrap_err().to_string().contains("tensor"));
    o.tensor = None;
    o.validate(10).unwrap();
}

#[test]
fn three_spatial_axes_equal_the_reference() {
    let tmp = tempfile::tempdir().unwrap();
    let mut o = TensorPackOptions::new(4, ArrayMode::Lossless);
    o.modes.insert(
        "seg".into(),
        ArrayOptions {
            mode: ArrayMode::Raw,
            fill_value: None,
            format: Default::default(),
        },
    );
    let mut p = TensorPacker::new(tmp.path(), o).unwrap();
    for i in 0..9u32 {
        let vol: Vec<f32> = (0..2 * 6 * 8 * 8)
            .map(|k| ((k as f32 * 0.21 + i as f32).sin() * 64.0).round() / 8.0)
            .collect();
        let seg: Vec<u8> = (0..6 * 8 * 8)
            .map(|k| ((k + i as usize) % 7) as u8)
            .collect();
        p.push(TensorSample {
            key: None,
            class: None,
            meta: Vec::new(),
            arrays: vec![
                (
                    "vol".into(),
                    NdArray::from_f32(vec![2, 6, 8, 8], &vol).unwrap(),
                ),
                (
                    "seg".into(),
                    NdArray::new(DType::UInt8, vec![6, 8, 8], seg).unwrap(),
                ),
            ],
        })
        .unwrap();
    }
    p.finish().unwrap();
    let ds = Arc::new(TensorDataset::open(tmp.path()).unwrap());
    let aug = TensorAugment {
        crop: vec![4, 5, 5],
        flips: true,
        rot90: true,
        normalise: true,
        output: TensorType::F32,
        ..Default::default()
    };
    let stats = &ds.manifest().stats;
    let mut count = 0;
    for b in run(&ds, options(4, 1, 0, Some(aug.clone())), start()) {
        assert_eq!(b.arrays[0].shape[1..], [2, 4, 5, 5]);
        assert_eq!(b.arrays[1].shape[1..], [4, 5, 5]);
        for (k, &s) in b.samples.iter().enumerate() {
            let w = &b.windows[k];
            assert_eq!(*w, aug.window(SEED, b.epoch, s, &[6, 8, 8]).unwrap());
            for (a, (name, array)) in ds.read(s).unwrap().iter().enumerate() {
                let st = stats.get(name).map(|x| (x.mean, x.std));
                let mut want = vec![0f32; slot(&b, a, k).len()];
                aug.apply(array, w, st, &mut want).unwrap();
                assert_eq!(slot(&b, a, k), &want[..], "sample {s} {name}");
            }
            count += 1;
        }
    }
    assert_eq!(count, 18);
}

/// An error-bounded plane larger than its bin image's 128-px patches: the loader decodes only
/// the patches each window reads (`crop_window_decode`, the default), and the batches equal
/// the windows cut from whole decodes, bit for bit, and the batches of a loader that decodes
/// whole arrays.
#[test]
fn windows_of_large_error_bounded_planes_equal_whole_decodes() {
    let tmp = tempfile::tempdir().unwrap();
    let (ny, nx) = (300usize, 260usize);
    let mut o = TensorPackOptions::new(3, ArrayMode::Bounded(Bound::Relative(1e-3)));
    o.modes.clear();
    let mut p = TensorPacker::new(tmp.path(), o).unwrap();
    for i in 0..7u32 {
        let v: Vec<f32> = (0..2 * ny * nx)
            .map(|k| ((k / nx) as f32 * 0.03 + i as f32).sin() * 9.0 + (k % nx) as f32 * 0.01)
            .collect();
        p.push(TensorSample {
            key: Some(format!("p{i}")),
            class: None,
            meta: Vec::new(),
            arrays: vec![(
                "field".into(),
                NdArray::from_f32(vec![2, ny as u32, nx as u32], &v).unwrap(),
            )],
        })
        .unwrap();
    }
    p.finish().unwrap();
    let ds = Arc::new(TensorDataset::open(tmp.path()).unwrap());
    let aug = TensorAugment {
        crop: vec![40, 40],
        ..windows()
    };
    let stats = ds.manifest().stats.get("field").map(|x| (x.mean, x.std));
    let runs: Vec<Vec<Batch>> = [true, false]
        .into_iter()
        .map(|window| {
            let mut o = options(3, 1, 0, Some(aug.clone()));
            o.crop_window_decode = window;
            run(&ds, o, start())
        })
        .collect();
    let mut checked = 0;
    for (b, whole) in runs[0].iter().zip(&runs[1]) {
        assert_eq!(b.samples, whole.samples);
        assert_eq!(
            b.arrays[0].tensor.as_f32().unwrap(),
            whole.arrays[0].tensor.as_f32().unwrap()
        );
        for (k, &s) in b.samples.iter().enumerate() {
            let array = &ds.read(s).unwrap()[0].1;
            let mut want = vec![0f32; slot(b, 0, k).len()];
            aug.apply(array, &b.windows[k], stats, &mut want).unwrap();
            let same = slot(b, 0, k)
                .iter()
                .zip(&want)
                .all(|(x, y)| x.to_bits() == y.to_bits());
            assert!(same, "sample {s}, window {:?}", b.windows[k]);
            checked += 1;
        }
    }
    assert_eq!(checked, 14, "two epochs of 7 samples");
}
