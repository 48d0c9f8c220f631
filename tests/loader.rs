//! The loader end to end on a packed dataset: three epochs with two kills, resumed with other
//! world sizes, see every sample exactly once per epoch and the same augmented tensor for each
//! (epoch, sample) as an uninterrupted run; the planned cache serves later epochs; a corrupt
//! record is skipped and reported (or fails its batch), never stalls; dropping mid-epoch
//! returns.

mod common;
#[cfg(feature = "gpu")]
#[path = "common/gpu_support.rs"]
mod gpu_support;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use l3::loader::{
    simulate_reads, Augment, DropLast, Loader, LoaderOptions, LoaderState, OnError, Partition,
    Policy, Simulation, Split,
};
use l3::shard::Dataset;

use common::pack_samples as pack;

fn options(batch: u32, world: u32, rank: u32) -> LoaderOptions {
    let mut o = LoaderOptions::new(Partition {
        batch_size: batch,
        world_size: world,
        rank,
        drop_last: DropLast::Partial,
    });
    o.seed = 11;
    o.augment = Augment::with_size(24, 16);
    o.level = Some(0);
    o.end_epoch = 3;
    o.threads = 2;
    o
}

/// (epoch, sample) -> the sample's tensor, for every batch `loader` yields, up to `steps`
/// batches (all if `None`).
type Seen = BTreeMap<(u64, u64), Vec<u32>>;

fn take(loader: &mut Loader, steps: Option<usize>, seen: &mut Vec<Seen>) {
    let mut k = 0;
    while steps.is_none_or(|s| k < s) {
        let Some(batch) = loader.next() else { break };
        let b = batch.unwrap();
        assert!(b.skipped.is_empty(), "{:?}", b.skipped);
        let per = b.shape[1] * b.shape[2] * b.shape[3];
        assert_eq!(b.data.len(), b.samples.len() * per);
        let data = b.data.as_f32().expect("f32 batches");
        while seen.len() <= b.epoch as usize {
            seen.push(Seen::new());
        }
        for (i, &s) in b.samples.iter().enumerate() {
            let bits = data[i * per..(i + 1) * per]
                .iter()
                .map(|f| f.to_bits())
                .collect();
            let dup = seen[b.epoch as usize].insert((b.epoch, s), bits);
            assert!(dup.is_none(), "sample {s} twice in epoch {}", b.epoch);
        }
        k += 1;
    }
}

/// Runs `world` ranks side by side for `steps` global steps (all if `None`) from `state`;
/// returns the state every rank agrees on.
fn run_ranks(
    ds: &Arc<Dataset>,
    world: u32,
    batch: u32,
    state: LoaderState,
    steps: Option<usize>,
    seen: &mut Vec<Seen>,
) -> LoaderState {
    run_ranks_with(ds, (world, batch), state, steps, seen, &|_| {})
}

/// [`run_ranks`] with `edit` applied to every rank's options.
fn run_ranks_with(
    ds: &Arc<Dataset>,
    (world, batch): (u32, u32),
    state: LoaderState,
    steps: Option<usize>,
    seen: &mut Vec<Seen>,
    edit: &dyn Fn(&mut LoaderOptions),
) -> LoaderState {
    let mut loaders: Vec<Loader> = (0..world)
        .map(|r| {
            let mut o = options(batch, world, r);
            edit(&mut o);
            Loader::new(ds.clone(), o, state).unwrap()
        })
        .collect();
    for l in &mut loaders {
        take(l, steps, seen);
    }
    let states: Vec<LoaderState> = loaders.iter().map(|l| l.state()).collect();
    assert!(states.iter().all(|s| *s == states[0]), "{states:?}");
    states[0]
    // Dropping the loaders here is the kill: their threads stop mid-epoch.
}

#[test]
fn three_epochs_with_kills_and_changed_world_sizes_see_each_sample_once() {
    let dir = tempfile::tempdir().unwrap();
    let n = pack(dir.path(), 5, 3);
    let ds = Arc::new(Dataset::open(dir.path()).unwrap());
    assert_eq!(ds.len() as usize, n);

    // Uninterrupted reference: one rank, batches of 4.
    let mut reference = Vec::new();
    let start = LoaderState {
        seed: 11,
        ..Default::default()
    };
    let end = run_ranks(&ds, 1, 4, start, None, &mut reference);
    assert_eq!(end.epoch, 3);

    // Two ranks for 2 steps; killed; three ranks until 6 more steps (into epoch 1); killed;
    // one rank to the end.
    let mut seen = Vec::new();
    let s1 = run_ranks(&ds, 2, 4, start, Some(2), &mut seen);
    assert_eq!((s1.epoch, s1.consumed), (0, 16));
    let s2 = run_ranks(&ds, 3, 2, s1, Some(6), &mut seen);
    assert_eq!(s2.epoch, 1, "{s2:?}");
    let s3 = run_ranks(&ds, 1, 5, s2, None, &mut seen);
    assert_eq!(s3.epoch, 3);

    assert_eq!(seen.len(), 3);
    for (e, epoch) in seen.iter().enumerate() {
        let samples: Vec<u64> = epoch.keys().map(|&(_, s)| s).collect();
        assert_eq!(samples, (0..n as u64).collect::<Vec<_>>(), "epoch {e}");
        // Same augmentation for each (epoch, sample) as the uninterrupted run.
        assert_eq!(
            epoch, &reference[e],
            "epoch {e} tensors differ from the reference"
        );
    }
    // Epochs are shuffled differently and augment differently.
    assert_ne!(reference[0].values().next(), reference[1].values().next());
}

/// Bytes of each record at level 0 (what the loader's cache counts for it).
fn level0_sizes(ds: &Dataset) -> Vec<u64> {
    (0..ds.len())
        .map(|i| ds.entry(i).unwrap().level(0).unwrap().len)
        .collect()
}

/// With caches (the locality split, the default where a cache is set), three epochs with
/// two kills and other world sizes still see every sample exactly once per epoch, with the
/// same tensor for each (epoch, sample) as one uninterrupted rank without a cache; each
/// rank's batch stays within `max_imbalance` of `batch_size`.
#[test]
fn locality_split_keeps_coverage_and_resumes_across_world_sizes() {
    let dir = tempfile::tempdir().unwrap();
    let n = pack(dir.path(), 10, 1);
    let ds = Arc::new(Dataset::open(dir.path()).unwrap());
    let total: u64 = level0_sizes(&ds).iter().sum();
    let start = LoaderState {
        seed: 11,
        ..Default::default()
    };
    let mut reference = Vec::new();
    run_ranks(&ds, 1, 4, start, None, &mut reference);
    let cached = |o: &mut LoaderOptions| {
        o.cache_bytes = total / 5;
        o.max_imbalance = Some(1);
        assert!(
            matches!(o.split(), Split::Locality { max_imbalance: 1 })
                || o.partition.world_size == 1
        );
    };
    let mut seen = Vec::new();
    // 3 ranks through epoch 0 and 2 steps of epoch 1 (warm caches), killed; 2 ranks of 8
    // for 2 steps (mid-epoch), killed; 4 ranks of 3 to the end.
    let s1 = run_ranks_with(&ds, (3, 4), start, Some(7), &mut seen, &cached);
    assert_eq!((s1.epoch, s1.consumed), (1, 24), "{s1:?}");
    let s2 = run_ranks_with(&ds, (2, 8), s1, Some(2), &mut seen, &cached);
    assert_eq!((s2.epoch, s2.consumed), (1, 56), "{s2:?}");
    let s3 = run_ranks_with(&ds, (4, 3), s2, None, &mut seen, &cached);
    assert_eq!(s3.epoch, 3);
    assert_eq!(seen.len(), 3);
    for (e, epoch) in seen.iter().enumerate() {
        let samples: Vec<u64> = epoch.keys().map(|&(_, s)| s).collect();
        assert_eq!(samples, (0..n as u64).collect::<Vec<_>>(), "epoch {e}");
        assert_eq!(epoch, &reference[e], "epoch {e} tensors differ");
    }
}

/// The loaders of 3 ranks read, epoch by epoch and rank by rank, exactly the bytes the plan
/// says ([`simulate_reads`]: every rank's cache is a function of the plan), for the locality
/// split and the slices; the locality split reads less after the first epoch and keeps every
/// batch within its bound.
#[test]
fn ranks_read_what_the_plan_says() {
    let dir = tempfile::tempdir().unwrap();
    pack(dir.path(), 10, 1);
    let ds = Arc::new(Dataset::open(dir.path()).unwrap());
    let sizes = level0_sizes(&ds);
    let total: u64 = sizes.iter().sum();
    let (world, batch, budget) = (3u32, 4u32, total / 5);
    let run = |locality: bool| -> Vec<Vec<u64>> {
        let mut read = vec![vec![0u64; world as usize]; 3];
        for rank in 0..world {
            let mut o = options(batch, world, rank);
            o.cache_bytes = budget;
            o.locality = locality;
            o.max_imbalance = Some(1);
            for b in Loader::new(
                ds.clone(),
                o,
                LoaderState {
                    seed: 11,
                    ..Default::default()
                },
            )
            .unwrap()
            {
                let b = b.unwrap();
                read[b.epoch as usize][rank as usize] += b.bytes_read;
                assert!(b.samples.len().abs_diff(batch as usize) <= locality as usize);
            }
        }
        read
    };
    let p = Partition {
        batch_size: batch,
        world_size: world,
        rank: 0,
        drop_last: DropLast::Partial,
    };
    let plan = |split| {
        simulate_reads(
            &sizes,
            11,
            3,
            &p,
            budget,
            &Simulation::new(Policy::Planned, split),
        )
        .0
    };
    let local = run(true);
    assert_eq!(local, plan(Split::Locality { max_imbalance: 1 }));
    let slices = run(false);
    assert_eq!(slices, plan(Split::Slices));
    let after_first = |r: &[Vec<u64>]| r[1..].iter().flatten().sum::<u64>();
    assert_eq!(local[0].iter().sum::<u64>(), total);
    assert!(
        after_first(&local) < after_first(&slices),
        "locality {local:?} slices {slices:?}"
    );
}

/// With a cache as large as the dataset, the planned cache reads every record once: epochs
/// after the first read nothing; LRU does too (everything fits); with a quarter of the bytes,
/// planned beats LRU.
#[test]
fn planned_cache_serves_later_epochs() {
    let dir = tempfile::tempdir().unwrap();
    let n = pack(dir.path(), 4, 1);
    let ds = Arc::new(Dataset::open(dir.path()).unwrap());
    let total: u64 = ds
        .manifest()
        .shards
        .iter()
        .flat_map(|s| &s.level_bytes)
        .sum();
    let bytes_per_epoch = |budget: u64, policy: Policy| -> Vec<u64> {
        let mut o = options(4, 1, 0);
        o.level = None;
        o.cache_bytes = budget;
        o.cache_policy = policy;
        let mut read = vec![0u64; 3];
        for b in Loader::new(ds.clone(), o, LoaderState::default()).unwrap() {
            let b = b.unwrap();
            read[b.epoch as usize] += b.bytes_read;
        }
        read
    };
    let full = bytes_per_epoch(total, Policy::Planned);
    assert_eq!(full, vec![total, 0, 0]);
    let none = bytes_per_epoch(0, Policy::Planned);
    assert_eq!(none, vec![total; 3]);
    let planned: u64 = bytes_per_epoch(total / 4, Policy::Planned)[1..]
        .iter()
        .sum();
    let lru: u64 = bytes_per_epoch(total / 4, Policy::Lru)[1..].iter().sum();
    assert!(planned < lru, "planned {planned} lru {lru} (n {n})");
}

#[test]
fn a_corrupt_record_is_skipped_and_named_or_fails_its_batch() {
    let dir = tempfile::tempdir().unwrap();
    let n = pack(dir.path(), 1, 1);
    // Each sample's tensor from the intact dataset, in one batch of every record.
    let tensors = |ds: &Arc<Dataset>| {
        let mut o = options(n as u32, 1, 0);
        o.end_epoch = 1;
        o.level = None;
        let mut by_sample = BTreeMap::new();
        for b in Loader::new(ds.clone(), o, LoaderState::default()).unwrap() {
            let b = b.unwrap();
            let values = b.data.to_f32();
            let per = values.len() / b.samples.len().max(1);
            for (k, s) in b.samples.iter().enumerate() {
                by_sample.insert(*s, values[k * per..(k + 1) * per].to_vec());
            }
        }
        by_sample
    };
    let intact = tensors(&Arc::new(Dataset::open(dir.path()).unwrap()));
    // Flip a byte inside the first record's payload (after the 16-byte shard header).
    let shard = dir.path().join("shard-00000.l3s");
    let mut bytes = std::fs::read(&shard).unwrap();
    bytes[100] ^= 0xff;
    std::fs::write(&shard, &bytes).unwrap();
    let ds = Arc::new(Dataset::open(dir.path()).unwrap());
    let mut o = options(2, 1, 0);
    o.end_epoch = 1;
    o.level = None;
    let mut seen = HashMap::new();
    let mut skipped = Vec::new();
    for b in Loader::new(ds.clone(), o.clone(), LoaderState::default()).unwrap() {
        let b = b.unwrap();
        skipped.extend(b.skipped);
        for s in b.samples {
            *seen.entry(s).or_insert(0) += 1;
        }
    }
    assert_eq!(skipped.len(), 1, "{skipped:?}");
    assert_eq!(skipped[0].sample, 0);
    assert_eq!(skipped[0].shard, "shard-00000.l3s");
    assert!(skipped[0].key.starts_with("copy0/"), "{:?}", skipped[0]);
    assert!(skipped[0].error.contains("checksum"), "{:?}", skipped[0]);
    assert_eq!(seen.len(), n - 1);
    // With the record left out of its batch, the others' tensors close up over its slot and
    // are unchanged.
    let survivors = tensors(&ds);
    assert_eq!(survivors.len(), n - 1);
    for (s, values) in &survivors {
        assert_eq!(values, &intact[s], "sample {s}");
    }
    o.on_error = OnError::Fail;
    let results: Vec<_> = Loader::new(ds, o, LoaderState::default())
        .unwrap()
        .collect();
    let failed: Vec<_> = results.iter().filter_map(|r| r.as_ref().err()).collect();
    assert_eq!(failed.len(), 1);
    assert!(
        matches!(failed[0], l3::Error::Record { sample: 0, .. }),
        "{}",
        failed[0]
    );
}

/// Reading nearby payloads together changes no tensor and makes fewer reads than records.
#[test]
fn coalesced_reads_change_nothing_and_read_less_often() {
    let dir = tempfile::tempdir().unwrap();
    let n = pack(dir.path(), 3, 3);
    let ds = Arc::new(Dataset::open(dir.path()).unwrap());
    let run = |gap: u64, level: u8| {
        let mut o = options(8, 1, 0);
        o.end_epoch = 1;
        o.level = Some(level);
        o.coalesce_gap = gap;
        let (mut data, mut calls) = (Vec::new(), 0);
        for b in Loader::new(ds.clone(), o, LoaderState::default()).unwrap() {
            let b = b.unwrap();
            data.extend(b.data.to_f32().iter().map(|f| f.to_bits()));
            calls += b.read_calls;
        }
        (data, calls)
    };
    for level in [0u8, 2] {
        let (merged, merged_calls) = run(u64::MAX / 4, level);
        let (_, gap0_calls) = run(0, level);
        assert!(
            merged_calls < n,
            "{merged_calls} reads for {n} records at level {level}"
        );
        assert!(merged_calls <= gap0_calls);
        let (separate, _) = run(0, level);
        assert_eq!(merged, separate);
    }
}

#[test]
fn dropping_a_loader_mid_epoch_returns() {
    let dir = tempfile::tempdir().unwrap();
    pack(dir.path(), 3, 1);
    let ds = Arc::new(Dataset::open(dir.path()).unwrap());
    let mut o = options(1, 1, 0);
    o.prefetch_batches = 1;
    o.end_epoch = u64::MAX;
    let mut loader = Loader::new(ds, o, LoaderState::default()).unwrap();
    assert!(loader.next().unwrap().is_ok());
    let state = loader.state();
    assert_eq!((state.epoch, state.consumed), (0, 1));
    drop(loader); // must not hang: the producer is blocked on a full channel here
}

/// Every tensor equals a full CPU decode of the record followed by `Augment::apply` with the
/// sample's parameters: the loader's crop-window decode (only the patch rows a crop reads)
/// changes nothing, for flat and progressive datasets, at every level.
#[test]
fn tensors_equal_full_decode_then_augment() {
    for levels in [1u8, 3] {
        let dir = tempfile::tempdir().unwrap();
        pack(dir.path(), 1, levels);
        let ds = Arc::new(Dataset::open(dir.path()).unwrap());
        for level in 0..levels {
            let mut o = options(3, 1, 0);
            o.end_epoch = 1;
            o.level = Some(level);
            o.augment = Augment::with_size(40, 30);
            let aug = o.augment;
            for b in Loader::new(ds.clone(), o, LoaderState::default()).unwrap() {
                let b = b.unwrap();
                let per = aug.output_len();
                for (i, &s) in b.samples.iter().enumerate() {
                    let (sh, r) = ds.locate(s).unwrap();
                    let img = ds.shards()[sh]
                        .decode_record(r, level, &l3::DecodeOptions::default())
                        .unwrap();
                    let p = aug.params(0, b.epoch, s, img.width, img.height);
                    let mut expect = vec![0f32; per];
                    aug.apply(&img, &p, &mut expect).unwrap();
                    assert!(
                        b.data.as_f32().unwrap()[i * per..(i + 1) * per] == expect[..],
                        "levels {levels} level {level} sample {s}"
                    );
                }
            }
        }
    }
}

/// The GPU path (decode as one GPU batch + `augment.wgsl`) gives the CPU path's samples in the
/// same order and the same tensors within the stated tolerance (1e-4), at the full level and at
/// a progressive level; a corrupt record is skipped there too.
#[cfg(feature = "gpu")]
#[test]
fn gpu_path_matches_the_cpu_path() {
    if gpu_support::gpu().is_none() {
        return;
    }
    let gpu = Arc::new(l3::gpu::GpuDecoder::new_default().unwrap());
    let dir = tempfile::tempdir().unwrap();
    pack(dir.path(), 2, 3);
    let ds = Arc::new(Dataset::open(dir.path()).unwrap());
    let mut worst = 0f32;
    for level in [0u8, 2] {
        let mut o = options(5, 1, 0);
        o.end_epoch = 2;
        o.level = Some(level);
        o.augment = Augment::with_size(48, 40);
        let cpu: Vec<_> = Loader::new(ds.clone(), o.clone(), LoaderState::default())
            .unwrap()
            .map(|b| b.unwrap())
            .collect();
        o.gpu = Some(gpu.clone());
        let on_gpu: Vec<_> = Loader::new(ds.clone(), o, LoaderState::default())
            .unwrap()
            .map(|b| b.unwrap())
            .collect();
        assert_eq!(cpu.len(), on_gpu.len());
        for (c, g) in cpu.iter().zip(&on_gpu) {
            assert_eq!(
                (c.epoch, &c.samples, c.shape),
                (g.epoch, &g.samples, g.shape)
            );
            assert_eq!(c.data.len(), g.data.len());
            for (x, y) in c.data.to_f32().iter().zip(&g.data.to_f32()) {
                worst = worst.max((x - y).abs());
            }
        }
    }
    println!("largest |GPU - CPU| over the loader's tensors: {worst:e}");
    assert!(worst <= 1e-4, "{worst}");

    // f16 batches: the CPU's are its f32 values rounded; the GPU's agree with them within
    // one f16 rounding step of the f32 tolerance.
    let mut o = options(5, 1, 0);
    o.end_epoch = 1;
    o.augment = Augment::with_size(48, 40);
    o.augment.output = l3::loader::TensorType::F16;
    let cpu16: Vec<_> = Loader::new(ds.clone(), o.clone(), LoaderState::default())
        .unwrap()
        .map(|b| b.unwrap())
        .collect();
    o.gpu = Some(gpu);
    let gpu16: Vec<_> = Loader::new(ds, o, LoaderState::default())
        .unwrap()
        .map(|b| b.unwrap())
        .collect();
    for (c, g) in cpu16.iter().zip(&gpu16) {
        assert!(g.data.as_f16_bits().is_some());
        for (x, y) in c.data.to_f32().iter().zip(&g.data.to_f32()) {
            assert!((x - y).abs() <= 1e-4 + x.abs() / 1024.0, "{x} vs {y}");
        }
    }
}

/// Decoding only the patches each crop needs changes nothing in the tensors, on the CPU and on
/// the GPU (the separable path reads only inside the window; the general map, with turns and
/// padding, decodes whole images), and it reads fewer pixels: the CPU's decode time is not the
/// point here, the equality is.
#[test]
fn crop_window_decode_gives_the_same_tensors() {
    let dir = tempfile::tempdir().unwrap();
    pack(dir.path(), 2, 1);
    let ds = Arc::new(Dataset::open(dir.path()).unwrap());
    #[cfg(feature = "gpu")]
    type Gpu = Option<Arc<l3::gpu::GpuDecoder>>;
    #[cfg(not(feature = "gpu"))]
    type Gpu = Option<()>;
    #[cfg_attr(not(feature = "gpu"), allow(unused_mut))]
    let mut paths: Vec<(&str, Gpu)> = vec![("CPU", None)];
    #[cfg(feature = "gpu")]
    if gpu_support::gpu().is_some() {
        paths.push((
            "GPU",
            Some(Arc::new(l3::gpu::GpuDecoder::new_default().unwrap())),
        ));
    }
    for (name, gpu) in paths {
        for general in [false, true] {
            let run = |window: bool| {
                let mut o = options(5, 1, 0);
                o.end_epoch = 2;
                o.augment = Augment::with_size(48, 40);
                if general {
                    o.augment.rotate90 = true;
                    o.augment.padding = 3;
                }
                o.crop_window_decode = window;
                #[cfg(feature = "gpu")]
                {
                    o.gpu = gpu.clone();
                }
                #[cfg(not(feature = "gpu"))]
                let _ = &gpu;
                Loader::new(ds.clone(), o, LoaderState::default())
                    .unwrap()
                    .map(|b| b.unwrap())
                    .collect::<Vec<_>>()
            };
            let (windowed, whole) = (run(true), run(false));
            assert_eq!(windowed.len(), whole.len());
            for (a, b) in windowed.iter().zip(&whole) {
                assert_eq!(a.samples, b.samples);
                assert!(
                    a.data.to_f32() == b.data.to_f32(),
                    "{name}: windowed decode changed a tensor (general map: {general})"
                );
            }
        }
    }
}

/// Loaders side by side as a rank's data-loading workers (`workers = (w, 3)`), their batches
/// taken round-robin as PyTorch's DataLoader does, give exactly the single loader's batches,
/// states included, from a fresh start and from a mid-epoch resume.
#[test]
fn workers_taken_round_robin_equal_one_loader() {
    let dir = tempfile::tempdir().unwrap();
    pack(dir.path(), 3, 1);
    let ds = Arc::new(Dataset::open(dir.path()).unwrap());
    for start in [
        LoaderState {
            seed: 11,
            ..Default::default()
        },
        LoaderState {
            seed: 11,
            epoch: 1,
            consumed: 4,
        },
    ] {
        let mut o = options(2, 2, 1);
        o.end_epoch = start.epoch + 1;
        let one: Vec<_> = Loader::new(ds.clone(), o.clone(), start)
            .unwrap()
            .map(|b| b.unwrap())
            .collect();
        let mut workers: Vec<_> = (0..3)
            .map(|w| {
                let mut o = o.clone();
                o.workers = (w, 3);
                Loader::new(ds.clone(), o, start).unwrap()
            })
            .collect();
        let mut merged = Vec::new();
        'outer: loop {
            for w in &mut workers {
                match w.next() {
                    Some(b) => merged.push(b.unwrap()),
                    None => break 'outer,
                }
            }
        }
        for w in &mut workers {
            merged.extend(w.map(|b| b.unwrap()));
        }
        assert!(one.len() >= 3, "{} batches", one.len());
        assert_eq!(one.len(), merged.len());
        for (a, b) in one.iter().zip(&merged) {
            assert_eq!(
                (&a.samples, a.state_after, a.data.to_f32()),
                (&b.samples, b.state_after, b.data.to_f32())
            );
        }
    }
    let mut o = options(2, 1, 0);
    o.workers = (3, 3);
    assert!(Loader::new(ds, o, LoaderState::default()).is_err());
}

/// f16 batches are the f32 batches rounded to nearest (the same samples, in the same order).
#[test]
fn f16_batches_are_the_f32_batches_rounded() {
    let dir = tempfile::tempdir().unwrap();
    pack(dir.path(), 1, 1);
    let ds = Arc::new(Dataset::open(dir.path()).unwrap());
    let mut o = options(4, 1, 0);
    o.end_epoch = 1;
    let f32s: Vec<_> = Loader::new(ds.clone(), o.clone(), LoaderState::default())
        .unwrap()
        .map(|b| b.unwrap())
        .collect();
    o.augment.output = l3::loader::TensorType::F16;
    let f16s: Vec<_> = Loader::new(ds, o, LoaderState::default())
        .unwrap()
        .map(|b| b.unwrap())
        .collect();
    for (a, b) in f32s.iter().zip(&f16s) {
        assert_eq!(a.samples, b.samples);
        let rounded: Vec<u16> = a
            .data
            .as_f32()
            .unwrap()
            .iter()
            .map(|&x| l3::loader::tensor::f32_to_f16_bits(x))
            .collect();
        assert_eq!(b.data.as_f16_bits().unwrap(), &rounded[..]);
    }
}

/// A partition that gives this rank no step in any epoch (drop_last = Drop with fewer records
/// than a global batch, which looped over epochs forever) is refused when the loader is made;
/// a worker without steps ends instead of looping, and drops promptly.
#[test]
fn loaders_without_steps_are_refused_or_end() {
    let dir = tempfile::tempdir().unwrap();
    let n = pack(dir.path(), 1, 1) as u32;
    let ds = Arc::new(Dataset::open(dir.path()).unwrap());
    let mut o = options(n + 1, 1, 0);
    o.partition.drop_last = DropLast::Drop;
    o.end_epoch = u64::MAX;
    let err = Loader::new(ds.clone(), o, LoaderState::default())
        .err()
        .expect("no step in any epoch");
    assert!(matches!(err, l3::Error::Parameter(_)), "{err}");
    assert!(err.to_string().contains("drop_last"), "{err}");
    // Batches of 1: n steps per epoch, worker n of n + 1 has none in any epoch.
    let mut o = options(1, 1, 0);
    o.end_epoch = u64::MAX;
    o.workers = (n, n + 1);
    let mut loader = Loader::new(ds.clone(), o.clone(), LoaderState::default()).unwrap();
    assert!(loader.next().is_none());
    drop(Loader::new(ds, o, LoaderState::default()).unwrap());
}

/// Hostile options and states are parameter or limits errors, before anything starts
/// (a huge output size used to abort on the batch tensor's allocation).
#[test]
fn hostile_options_and_states_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let n = pack(dir.path(), 1, 1) as u64;
    let ds = Arc::new(Dataset::open(dir.path()).unwrap());
    let try_new = |edit: &dyn Fn(&mut LoaderOptions), state: LoaderState| {
        let mut o = options(2, 1, 0);
        edit(&mut o);
        Loader::new(ds.clone(), o, state).err()
    };
    let fresh = LoaderState::default();
    let limits = |e: Option<l3::Error>| matches!(e, Some(l3::Error::Limits(_)));
    let parameter = |e: Option<l3::Error>| matches!(e, Some(l3::Error::Parameter(_)));
    assert!(limits(try_new(
        &|o| o.augment.size = (16_777_215, 16_777_215),
        fresh
    )));
    assert!(parameter(try_new(&|o| o.augment.size = (0, 8), fresh)));
    assert!(parameter(try_new(&|o| o.augment.channels = 2, fresh)));
    assert!(parameter(try_new(
        &|o| o.augment.flip_probability = f32::NAN,
        fresh
    )));
    assert!(parameter(try_new(&|o| o.augment.padding = u32::MAX, fresh)));
    assert!(parameter(try_new(
        &|o| o.augment.normalize.std[0] = 0.0,
        fresh
    )));
    assert!(parameter(try_new(&|o| o.threads = 1 << 20, fresh)));
    assert!(parameter(try_new(&|o| o.max_imbalance = Some(3), fresh)));
    assert!(try_new(&|o| o.max_imbalance = Some(2), fresh).is_none());
    assert!(parameter(try_new(
        &|o| o.prefetch_batches = usize::MAX,
        fresh
    )));
    let past = LoaderState {
        consumed: n + 1,
        ..fresh
    };
    assert!(parameter(try_new(&|_| {}, past)));
    let last = LoaderState {
        epoch: u64::MAX,
        ..fresh
    };
    assert!(parameter(try_new(&|_| {}, last)));
    assert!(try_new(
        &|_| {},
        LoaderState {
            consumed: n,
            ..fresh
        }
    )
    .is_none());
}
