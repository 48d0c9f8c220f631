//! Windowed tensor datasets (manifest version 2, `SPEC.md` "Sample windows"): a sequence of
//! steps packed once, one record per step, whose samples are windows over the records
//! (`input` = `uv` at step t, `target` = `h` at step t + 1, `next` = `uv` at step t + 1),
//! against the earlier layout that stores each sample's steps in its own record (each step
//! twice). Samples and loader batches are bit for bit the same (lossless and error-bounded
//! arrays), each step is stored once and, with a cache, read once per epoch; resume works;
//! hostile windows in the manifest are errors, not panics; the GPU path gives the CPU
//! path's batches; the locality split reads what its plan says, less than the slices.

#![cfg(feature = "dataset")]

#[cfg(feature = "gpu")]
#[path = "common/gpu_support.rs"]
mod gpu_support;

use std::path::Path;
use std::sync::Arc;

use l3::field::Bound;
use l3::loader::{
    simulate_reads, Batch, DropLast, Loader, LoaderDataset, LoaderOptions, LoaderState, Partition,
    Policy, RecordWindow, Simulation, Split, TensorAugment, WINDOW_STRATA,
};
use l3::shard::tensor_pack::{TensorPackOptions, TensorPacker, TensorSample};
use l3::shard::{TensorDataset, TENSOR_WINDOW_VERSION};
use l3::tensor::{ArrayMode, ArrayOptions, NdArray};
use l3::Error;

/// Steps of the sequence.
const STEPS: u32 = 31;
const SEED: u64 = 9;

/// Step `t`: `uv` (2 x 12 x 10, lossless) and `h` (12 x 10, error-bounded).
fn step(t: u32) -> (NdArray, NdArray) {
    let uv: Vec<f32> = (0..240)
        .map(|k| ((k as f32 * 0.37 + t as f32 * 0.2).sin() * 50.0).round() / 4.0)
        .collect();
    let h: Vec<f32> = (0..120)
        .map(|k| (k as f32 * 0.11 + t as f32 * 0.5).cos() * 3.0 + 10.0)
        .collect();
    (
        NdArray::from_f32(vec![2, 12, 10], &uv).unwrap(),
        NdArray::from_f32(vec![12, 10], &h).unwrap(),
    )
}

fn mode(mode: ArrayMode) -> ArrayOptions {
    ArrayOptions {
        mode,
        fill_value: None,
        format: Default::default(),
    }
}

fn bounded() -> ArrayOptions {
    mode(ArrayMode::Bounded(Bound::Absolute(1e-3)))
}

fn window() -> Vec<(String, String, u64)> {
    [("input", "uv", 0), ("target", "h", 1), ("next", "uv", 1)]
        .iter()
        .map(|&(n, a, o)| (n.to_owned(), a.to_owned(), o))
        .collect()
}

/// The earlier layout: record t holds `input` = uv(t), `target` = h(t + 1), `next` =
/// uv(t + 1).
fn pack_pairs(dir: &Path) -> Arc<TensorDataset> {
    let mut o = TensorPackOptions::new(7, ArrayMode::Lossless);
    o.modes.insert("target".into(), bounded());
    let mut p = TensorPacker::new(dir, o).unwrap();
    for t in 0..STEPS - 1 {
        let (uv, _) = step(t);
        let (uv1, h1) = step(t + 1);
        p.push(TensorSample {
            key: Some(format!("{t:06}")),
            class: None,
            meta: Vec::new(),
            arrays: vec![
                ("input".into(), uv),
                ("target".into(), h1),
                ("next".into(), uv1),
            ],
        })
        .unwrap();
    }
    p.finish().unwrap();
    Arc::new(TensorDataset::open(dir).unwrap())
}

/// The windowed layout: record t holds uv(t) and h(t), once.
fn pack_steps(dir: &Path) -> Arc<TensorDataset> {
    let mut o = TensorPackOptions::new(7, ArrayMode::Lossless);
    o.modes.insert("h".into(), bounded());
    o.window = window();
    let mut p = TensorPacker::new(dir, o).unwrap();
    for t in 0..STEPS {
        let (uv, h) = step(t);
        p.push(TensorSample {
            key: Some(format!("{t:06}")),
            class: None,
            meta: Vec::new(),
            arrays: vec![("uv".into(), uv), ("h".into(), h)],
        })
        .unwrap();
    }
    p.finish().unwrap();
    Arc::new(TensorDataset::open(dir).unwrap())
}

fn options(batch: u32, tensor: Option<TensorAugment>) -> LoaderOptions {
    let mut o = LoaderOptions::new(Partition {
        batch_size: batch,
        world_size: 1,
        rank: 0,
        drop_last: DropLast::Partial,
    });
    o.seed = SEED;
    o.tensor = tensor;
    o.end_epoch = 2;
    o.threads = 2;
    o
}

fn start() -> LoaderState {
    LoaderState {
        seed: SEED,
        ..LoaderState::default()
    }
}

fn run(ds: &Arc<TensorDataset>, o: LoaderOptions, state: LoaderState) -> Vec<Batch> {
    Loader::open(LoaderDataset::Tensors(ds.clone()), o, state)
        .unwrap()
        .map(|b| b.unwrap())
        .collect()
}

fn crops() -> TensorAugment {
    TensorAugment {
        crop: vec![6, 6],
        flips: true,
        rot90: true,
        ..Default::default()
    }
}

/// What a batch carries, for comparison: samples, windows, and each array's name, shape and
/// value bits.
type Carried = (Vec<u64>, usize, Vec<(String, Vec<usize>, Vec<u32>)>);

fn carried(b: &Batch) -> Carried {
    let arrays = b
        .arrays
        .iter()
        .map(|a| {
            let bits = a.tensor.to_f32().iter().map(|x| x.to_bits()).collect();
            (a.name.clone(), a.shape.clone(), bits)
        })
        .collect();
    (b.samples.clone(), b.windows.len(), arrays)
}

fn shard_bytes(ds: &TensorDataset) -> u64 {
    ds.manifest().shards.iter().map(|s| s.bytes).sum()
}

#[test]
fn windowed_samples_equal_the_earlier_layout_bit_for_bit_and_store_each_step_once() {
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let pairs = pack_pairs(a.path());
    let steps = pack_steps(b.path());
    let m = steps.manifest();
    assert_eq!(m.version, TENSOR_WINDOW_VERSION);
    assert_eq!(pairs.manifest().version, 1, "no window: the earlier format");
    assert_eq!(steps.len(), STEPS as u64, "one record per step");
    assert_eq!(
        steps.samples(),
        STEPS as u64 - 1,
        "steps less the largest offset"
    );
    assert_eq!(pairs.samples(), pairs.len());
    for i in 0..steps.samples() {
        let old = pairs.read(i).unwrap();
        let new = steps.read_sample(i).unwrap();
        assert_eq!(old.len(), new.len());
        for ((n0, a0), (n1, a1)) in old.iter().zip(&new) {
            assert_eq!(n0, n1, "sample {i}");
            assert_eq!(a0.shape(), a1.shape());
            assert_eq!(a0.bytes(), a1.bytes(), "sample {i} array {n0}");
        }
    }
    // Each step once: the windowed payloads are uv + h per step; the pairs store uv twice
    // and h once per sample.
    let payload =
        |ds: &TensorDataset| -> u64 { ds.manifest().shards.iter().map(|s| s.payload_bytes).sum() };
    assert!(
        payload(&steps) * 10 < payload(&pairs) * 7,
        "windowed {} bytes, pairs {} bytes",
        payload(&steps),
        payload(&pairs)
    );
    assert!(shard_bytes(&steps) < shard_bytes(&pairs));
    // Statistics per sample array, over the records its samples read: those of the pairs.
    for (name, s) in &pairs.manifest().stats {
        let w = &m.stats[name];
        assert_eq!(w.count, s.count, "{name}");
        assert!(
            (w.mean - s.mean).abs() <= 1e-12 * s.mean.abs().max(1.0),
            "{name}"
        );
        assert!((w.std - s.std).abs() <= 1e-12 * s.std.max(1.0), "{name}");
    }
}

#[test]
fn windowed_batches_equal_the_earlier_layout_and_resume_exactly() {
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let pairs = pack_pairs(a.path());
    let steps = pack_steps(b.path());
    for tensor in [None, Some(crops())] {
        let old: Vec<Carried> = run(&pairs, options(4, tensor.clone()), start())
            .iter()
            .map(carried)
            .collect();
        let mut o = options(4, tensor.clone());
        o.cache_bytes = 1 << 20;
        let all = run(&steps, o.clone(), start());
        let new: Vec<Carried> = all.iter().map(carried).collect();
        assert_eq!(old.len(), 16, "2 epochs of 30 samples, batches of 4");
        assert_eq!(new, old, "windows {tensor:?}");
        // Resume from the middle of the first epoch and at the second.
        for cut in [3, 8] {
            let resumed: Vec<Carried> = run(&steps, o.clone(), all[cut - 1].state_after)
                .iter()
                .map(carried)
                .collect();
            assert_eq!(resumed, new[cut..], "resumed after batch {cut}");
        }
    }
}

#[test]
fn a_cached_step_is_read_once_per_epoch() {
    let b = tempfile::tempdir().unwrap();
    let steps = pack_steps(b.path());
    let mut o = options(4, None);
    o.cache_bytes = 1 << 30;
    o.end_epoch = 3;
    let batches = run(&steps, o, start());
    let payload: u64 = steps
        .manifest()
        .shards
        .iter()
        .map(|s| s.payload_bytes)
        .sum();
    let read = |e: u64| -> u64 {
        batches
            .iter()
            .filter(|b| b.epoch == e)
            .map(|b| b.bytes_read)
            .sum()
    };
    // Epoch 0: every step once (samples t - 1 and t share step t), though 30 samples read
    // 60 step records; then nothing.
    assert_eq!(read(0), payload, "each step read once");
    assert_eq!(read(1), 0);
    assert_eq!(read(2), 0);
    let last = &batches.last().unwrap().cache;
    assert_eq!(
        last.miss_bytes, payload,
        "each step missed once in three epochs"
    );
    // The disk tier alone: the same, each step read from storage once.
    let disk = tempfile::tempdir().unwrap();
    let mut o = options(4, None);
    o.disk_cache = Some((disk.path().to_path_buf(), 1 << 30));
    let batches = run(&steps, o, start());
    let from_storage = |e: u64| -> u64 {
        batches
            .iter()
            .filter(|b| b.epoch == e)
            .map(|b| b.bytes_read)
            .sum()
    };
    assert_eq!((from_storage(0), from_storage(1)), (payload, 0));
    // Without a cache each sample reads its two records: every step but the ends twice.
    let batches = run(&steps, options(4, None), start());
    let uncached: u64 = batches
        .iter()
        .filter(|b| b.epoch == 0)
        .map(|b| b.bytes_read)
        .sum();
    assert!(uncached > payload * 3 / 2, "{uncached} vs {payload}");
}

/// The locality split over a windowed dataset: 3 ranks, each caching a fifth of the
/// records, 4 epochs. Every sample once per epoch across the ranks, batches within the
/// imbalance bound, each rank's bytes from storage exactly what the plan
/// (`simulate_reads`) says, and after the first epoch fewer than the slices read.
#[test]
fn the_locality_split_over_a_windowed_dataset() {
    let b = tempfile::tempdir().unwrap();
    let steps = pack_steps(b.path());
    let records = steps.len() as usize;
    let sizes: Vec<u64> = (0..records as u64)
        .map(|i| {
            let e = steps.entry(i).unwrap();
            e.arrays.iter().map(|a| a.payload.len).sum()
        })
        .collect();
    let budget = sizes.iter().sum::<u64>() / 5;
    let (world, batch, epochs) = (3u32, 3u32, 4u64);
    // The default order (64 strata: with 29 samples the plain permutation) and 3 strata.
    for strata in [None, Some(3u32)] {
        let run_ranks = |locality: bool| {
            let mut read = vec![vec![0u64; world as usize]; epochs as usize];
            let mut seen = vec![Vec::new(); epochs as usize];
            for rank in 0..world {
                let mut o = options(batch, Some(crops()));
                o.partition.world_size = world;
                o.partition.rank = rank;
                o.cache_bytes = budget;
                o.locality = locality;
                o.max_imbalance = Some(1);
                o.end_epoch = epochs;
                o.strata = strata;
                for b in run(&steps, o, start()) {
                    assert!(b.skipped.is_empty());
                    // Within 1 of the batch size (each epoch's last, short step aside).
                    let last = b.state_after.epoch != b.epoch;
                    assert!(last || b.samples.len().abs_diff(batch as usize) <= 1);
                    read[b.epoch as usize][rank as usize] += b.bytes_read;
                    seen[b.epoch as usize].extend(b.samples.iter().copied());
                }
            }
            for (e, s) in seen.iter_mut().enumerate() {
                s.sort_unstable();
                let all: Vec<u64> = (0..(STEPS - 1) as u64).collect();
                assert_eq!(*s, all, "epoch {e}: every sample once across the ranks");
            }
            read
        };
        let window = RecordWindow {
            offsets: vec![0, 1],
            records: records as u32,
        };
        let p = Partition {
            batch_size: batch,
            world_size: world,
            rank: 0,
            drop_last: DropLast::Partial,
        };
        let plan = |split, strata| {
            simulate_reads(
                &sizes,
                SEED,
                epochs,
                &p,
                budget,
                &Simulation {
                    window: Some(&window),
                    strata,
                    ..Simulation::new(Policy::Planned, split)
                },
            )
            .0
        };
        let local_split = Split::Locality { max_imbalance: 1 };
        let s = strata.unwrap_or(WINDOW_STRATA);
        let local = run_ranks(true);
        assert_eq!(local, plan(local_split, s), "strata {s}");
        let slices = run_ranks(false);
        assert_eq!(slices, plan(Split::Slices, s), "strata {s}");
        let after_first = |r: &[Vec<u64>]| r[1..].iter().flatten().sum::<u64>();
        assert!(
            after_first(&local) < after_first(&slices),
            "locality {local:?} slices {slices:?}"
        );
        if s == 3 {
            // The strata change the order, so the plan's reads: the loader followed them.
            assert_ne!(local, plan(local_split, 0));
        }
    }
}

/// The GPU path assembles a windowed dataset's samples from their records too: its batches
/// equal the CPU path's bit for bit, with crops, flips, quarter turns, normalisation and the
/// cache (lavapipe in CI; without an adapter the test has nothing to check).
#[cfg(feature = "gpu")]
#[test]
fn the_gpu_path_equals_the_cpu_path_on_a_windowed_dataset() {
    if gpu_support::gpu().is_none() {
        return;
    }
    let gpu = Arc::new(l3::gpu::GpuDecoder::new_default().unwrap());
    let b = tempfile::tempdir().unwrap();
    let steps = pack_steps(b.path());
    for tensor in [
        Some(TensorAugment {
            normalise: true,
            ..crops()
        }),
        None,
    ] {
        let mut o = options(4, tensor.clone());
        o.cache_bytes = 1 << 20;
        let cpu = run(&steps, o.clone(), start());
        o.gpu = Some(gpu.clone());
        let on_gpu = run(&steps, o, start());
        assert_eq!(cpu.len(), on_gpu.len());
        for (c, g) in cpu.iter().zip(&on_gpu) {
            assert_eq!(carried(c), carried(g), "windows {tensor:?}");
            assert_eq!(c.windows, g.windows);
            assert_eq!(c.bytes_read, g.bytes_read);
        }
    }
}

/// Rewrites the windowed dataset's manifest with `edit` and opens it.
fn open_edited(dir: &Path, edit: impl FnOnce(&mut serde_json::Value)) -> l3::Result<TensorDataset> {
    let path = dir.join("manifest.json");
    let mut m: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    edit(&mut m);
    std::fs::write(&path, serde_json::to_vec_pretty(&m).unwrap()).unwrap();
    TensorDataset::open(dir)
}

#[test]
fn hostile_windows_are_errors() {
    type Edit = fn(&mut serde_json::Value);
    let cases: [(&str, Edit, &str); 10] = [
        (
            "offset past the end",
            |m| m["window"]["arrays"][1]["offset"] = 31.into(),
            "past the end",
        ),
        (
            "offset at u64::MAX",
            |m| m["window"]["arrays"][1]["offset"] = u64::MAX.into(),
            "past the end",
        ),
        (
            "samples too many",
            |m| m["window"]["samples"] = 31.into(),
            "is not records",
        ),
        (
            "samples at u64::MAX",
            |m| m["window"]["samples"] = u64::MAX.into(),
            "is not records",
        ),
        (
            "an unknown stored array",
            |m| m["window"]["arrays"][0]["array"] = "p".into(),
            "not a stored array",
        ),
        (
            "a name twice",
            |m| m["window"]["arrays"][2]["name"] = "input".into(),
            "listed twice",
        ),
        (
            "no arrays",
            |m| m["window"]["arrays"] = serde_json::json!([]),
            "0 arrays",
        ),
        (
            "a window in version 1",
            |m| m["version"] = 1.into(),
            "needs manifest version 2",
        ),
        (
            "version 2 without a window",
            |m| {
                m.as_object_mut().unwrap().remove("window");
            },
            "without a window",
        ),
        (
            "a negative offset",
            |m| m["window"]["arrays"][1]["offset"] = (-1).into(),
            "integer `-1`",
        ),
    ];
    for (what, edit, says) in cases {
        let b = tempfile::tempdir().unwrap();
        pack_steps(b.path());
        match open_edited(b.path(), edit) {
            Err(Error::Manifest(m)) => assert!(m.contains(says), "{what}: {m}"),
            Err(e) => panic!("{what}: {e:?}"),
            Ok(_) => panic!("{what}: opened"),
        }
    }
    // A sample past the end is an error, not a panic.
    let b = tempfile::tempdir().unwrap();
    let steps = pack_steps(b.path());
    assert!(steps.read_sample(STEPS as u64 - 1).is_err());
    assert!(steps.manifest().sample_parts(u64::MAX).is_err());
}

#[test]
fn the_packer_refuses_windows_it_cannot_write() {
    let b = tempfile::tempdir().unwrap();
    let push = |p: &mut TensorPacker, t: u32| {
        let (uv, h) = step(t);
        p.push(TensorSample {
            key: None,
            class: None,
            meta: Vec::new(),
            arrays: vec![("uv".into(), uv), ("h".into(), h)],
        })
    };
    // A stored array the records do not have.
    let mut o = TensorPackOptions::new(4, ArrayMode::Lossless);
    o.window = vec![("x".into(), "p".into(), 0)];
    let mut p = TensorPacker::new(b.path(), o).unwrap();
    assert!(push(&mut p, 0).is_err());
    // An offset that leaves no sample.
    let mut o = TensorPackOptions::new(4, ArrayMode::Lossless);
    o.window = vec![("x".into(), "uv".into(), 0), ("y".into(), "h".into(), 3)];
    let mut p = TensorPacker::new(b.path(), o).unwrap();
    for t in 0..3 {
        push(&mut p, t).unwrap();
    }
    let e = p.finish().expect_err("no sample");
    assert!(e.to_string().contains("window"), "{e}");
}
