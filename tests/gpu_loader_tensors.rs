//! The loader's GPU path over tensor records (lavapipe in CI): over two epochs its batches
//! equal the CPU loader's bit for bit (samples, classes, windows, every array's values) for
//! raw, lossless float32 and bfloat16, raw float16, error-bounded and integer arrays, with
//! crops, flips, quarter turns, normalisation, whole arrays, and f32 and f16 output; a
//! resumed GPU loader gives the remaining batches; corrupt records (a bad CRC, and a field
//! header that disagrees with its index entry under mended CRCs) are skipped or fail by
//! `OnError` as on the CPU; the cache reads the same bytes per epoch; batches handed off
//! (staged, left on the GPU, exported) hold the read-back arrays byte for byte. Options the
//! GPU path does not take are refused with a clear error. With `CI=true` a missing adapter fails.
//!
//! On a machine without a GPU, Mesa's lavapipe works: `WGPU_BACKEND=vulkan CI=true cargo test
//! --release --test gpu_loader_tensors`.
#![cfg(feature = "gpu")]

#[path = "common/gpu_support.rs"]
mod gpu_support;

use std::path::Path;
use std::sync::Arc;

use gpu_support::fix_crc;
use l3::decode::DecodeOptions;
use l3::field::Bound;
use l3::gpu::GpuDecoder;
use l3::loader::handoff::{GpuOutput, HandOffValues};
use l3::loader::tensor::f32_to_f16_bits;
use l3::loader::{
    Batch, DropLast, Loader, LoaderDataset, LoaderOptions, LoaderState, OnError, Partition, Tensor,
    TensorAugment, TensorType,
};
use l3::shard::tensor_pack::{TensorPackOptions, TensorPacker, TensorSample};
use l3::shard::TensorDataset;
use l3::tensor::{
    check_payload, decode_array, ArrayMode, ArrayOptions, BoundedFormat, DType, NdArray,
};
use l3::Error;

const RECORDS: u32 = 19;
const SEED: u64 = 11;

/// The shared decoder for the loader (`None` without an adapter, a failure with `CI=true`).
fn decoder() -> Option<Arc<GpuDecoder>> {
    gpu_support::gpu()?;
    Some(Arc::new(GpuDecoder::new_default().unwrap()))
}

/// Record `i`: `input` (2 x 16 x 16 float32, lossless, NaN payloads and -0.0 in it),
/// `target` (the same, raw), `bf` (16 x 16 bfloat16, lossless), `half` (16 x 16 float16,
/// raw), `eb` (16 x 16 float32, error-bounded) and `mask` (16 x 16 u8, raw).
fn sample(i: u32) -> TensorSample {
    let input: Vec<f32> = (0..512)
        .map(|k| match (k * 7 + i as usize) % 97 {
            0 => f32::from_bits(0x7fc0_1234 + i),
            1 => -0.0,
            _ => ((k as f32 * 0.37 + i as f32).sin() * 50.0).round() / 8.0,
        })
        .collect();
    let plane = |f: &dyn Fn(usize) -> f32| -> Vec<f32> { (0..256).map(f).collect() };
    let bf: Vec<u8> = plane(&|k| (k as f32 * 0.05 + i as f32).cos() * 9.0)
        .iter()
        .flat_map(|x| ((x.to_bits() >> 16) as u16).to_le_bytes())
        .collect();
    let half: Vec<u8> = plane(&|k| (k as f32 * 0.13 - i as f32).sin() * 3.0)
        .iter()
        .flat_map(|&x| f32_to_f16_bits(x).to_le_bytes())
        .collect();
    let eb = plane(&|k| (k as f32 * 0.11 + i as f32 * 0.5).cos() * 3.0);
    let mask: Vec<u8> = (0..256).map(|k| ((k * 7 + i as usize) % 5) as u8).collect();
    let eb3 = plane(&|k| ((k % 16) as f32 * 0.3 + (k / 16) as f32 * 0.2 + i as f32).sin() * 4.0);
    TensorSample {
        key: Some(format!("r{i:03}")),
        class: Some(i % 4),
        meta: Vec::new(),
        arrays: vec![
            (
                "input".into(),
                NdArray::from_f32(vec![2, 16, 16], &input).unwrap(),
            ),
            (
                "target".into(),
                NdArray::from_f32(vec![2, 16, 16], &input).unwrap(),
            ),
            (
                "bf".into(),
                NdArray::new(DType::BFloat16, vec![16, 16], bf).unwrap(),
            ),
            (
                "half".into(),
                NdArray::new(DType::Float16, vec![16, 16], half).unwrap(),
            ),
            ("eb".into(), NdArray::from_f32(vec![16, 16], &eb).unwrap()),
            (
                "mask".into(),
                NdArray::new(DType::UInt8, vec![16, 16], mask).unwrap(),
            ),
            // Error-bounded, 2 axes, in the smaller format (`.l3f` version 3).
            ("eb3".into(), NdArray::from_f32(vec![16, 16], &eb3).unwrap()),
        ],
    }
}

/// Packs the dataset into `dir` (4 records per shard) and opens it.
fn pack(dir: &Path) -> Arc<TensorDataset> {
    let mut o = TensorPackOptions::new(4, ArrayMode::Lossless);
    let mode = |mode| ArrayOptions {
        mode,
        fill_value: None,
        format: Default::default(),
    };
    for raw in ["target", "half", "mask"] {
        o.modes.insert(raw.into(), mode(ArrayMode::Raw));
    }
    o.modes
        .insert("eb".into(), mode(ArrayMode::Bounded(Bound::Absolute(1e-3))));
    o.modes.insert(
        "eb3".into(),
        ArrayOptions {
            format: BoundedFormat::V3,
            ..mode(ArrayMode::Bounded(Bound::Absolute(1e-3)))
        },
    );
    let mut p = TensorPacker::new(dir, o).unwrap();
    for i in 0..RECORDS {
        p.push(sample(i)).unwrap();
    }
    p.finish().unwrap();
    let ds = TensorDataset::open(dir).unwrap();
    let modes: Vec<_> = ds.arrays_of(0).unwrap().iter().map(|a| a.0.mode).collect();
    assert_eq!(modes.len(), 7);
    Arc::new(ds)
}

fn windows() -> TensorAugment {
    TensorAugment {
        crop: vec![8, 8],
        flips: true,
        rot90: true,
        normalise: true,
        ..Default::default()
    }
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

fn run(ds: &Arc<TensorDataset>, o: LoaderOptions, state: LoaderState) -> Vec<Result<Batch, Error>> {
    Loader::open(LoaderDataset::Tensors(ds.clone()), o, state)
        .unwrap()
        .collect()
}

fn ok(batches: Vec<Result<Batch, Error>>) -> Vec<Batch> {
    batches.into_iter().map(|b| b.unwrap()).collect()
}

/// A tensor's values as bits.
fn bits(t: &Tensor) -> Vec<u32> {
    match t {
        Tensor::F32(v) => v.iter().map(|x| x.to_bits()).collect(),
        Tensor::F16(v) => v.iter().map(|&x| x as u32).collect(),
    }
}

/// `gpu` equals `cpu`: the same batches, samples, classes, windows, skipped records, read
/// counts and every array's name, shape and bits.
fn assert_same(cpu: &[Batch], gpu: &[Batch], what: &str) {
    assert_eq!(cpu.len(), gpu.len(), "{what}: batches");
    for (i, (c, g)) in cpu.iter().zip(gpu).enumerate() {
        let at = format!("{what}: batch {i}");
        assert_eq!((c.epoch, &c.samples), (g.epoch, &g.samples), "{at}");
        assert_eq!(c.classes, g.classes, "{at}");
        assert_eq!(c.windows, g.windows, "{at}");
        assert_eq!(c.skipped, g.skipped, "{at}");
        assert_eq!(c.shape, g.shape, "{at}");
        assert_eq!(c.state_after, g.state_after, "{at}");
        assert_eq!(
            (c.bytes_read, c.read_calls),
            (g.bytes_read, g.read_calls),
            "{at}"
        );
        assert_eq!(c.arrays.len(), g.arrays.len(), "{at}");
        for (x, y) in c.arrays.iter().zip(&g.arrays) {
            assert_eq!((&x.name, &x.shape), (&y.name, &y.shape), "{at}");
            assert_eq!(x.tensor.len(), y.tensor.len(), "{at} {}", x.name);
            assert!(
                bits(&x.tensor) == bits(&y.tensor),
                "{at}: {} differs",
                x.name
            );
        }
    }
}

#[test]
fn gpu_batches_equal_the_cpu_batches_bit_for_bit() {
    let Some(gpu) = decoder() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let ds = pack(tmp.path());
    let configs: Vec<(&str, Option<TensorAugment>)> = vec![
        ("crop, flips, rot90, normalise, f32", Some(windows())),
        (
            "the same, f16",
            Some(TensorAugment {
                output: TensorType::F16,
                ..windows()
            }),
        ),
        (
            "flips, not square, not normalised",
            Some(TensorAugment {
                crop: vec![5, 11],
                rot90: false,
                normalise: false,
                ..windows()
            }),
        ),
        (
            "whole extent, turns, normalised, f16",
            Some(TensorAugment {
                spatial: 2,
                crop: Vec::new(),
                output: TensorType::F16,
                ..windows()
            }),
        ),
        ("whole arrays (no windows)", None),
    ];
    for (what, aug) in configs {
        let o = options(5, aug);
        let cpu = ok(run(&ds, o.clone(), start()));
        let mut g = o;
        g.gpu = Some(gpu.clone());
        let on_gpu = ok(run(&ds, g, start()));
        let samples: usize = on_gpu.iter().map(|b| b.samples.len()).sum();
        assert_eq!(samples, 2 * RECORDS as usize, "{what}");
        assert!(on_gpu.iter().all(|b| b.arrays.len() == 7), "{what}");
        assert_same(&cpu, &on_gpu, what);
    }
}

/// Batches handed off (`GpuOutput::Staged`, and `Device` copied out, and where the device
/// can export memory, copied into an exported buffer re-imported from its fd, as the CUDA
/// hand-off does) hold the read-back batches' arrays byte for byte, one view per array name
/// at its offset, in f32 and f16; their `arrays` are empty.
#[test]
fn handed_off_tensor_batches_hold_the_read_back_arrays() {
    let Some(gpu) = decoder() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let ds = pack(tmp.path());
    for element in [TensorType::F32, TensorType::F16] {
        let aug = TensorAugment {
            output: element,
            ..windows()
        };
        let mut o = options(5, Some(aug));
        o.gpu = Some(gpu.clone());
        let want = ok(run(&ds, o.clone(), start()));
        for mode in [GpuOutput::Staged, GpuOutput::Device] {
            o.gpu_output = mode;
            let got = ok(run(&ds, o.clone(), start()));
            assert_eq!(want.len(), got.len());
            for (i, (w, g)) in want.iter().zip(&got).enumerate() {
                let at = format!("{mode:?} {element:?} batch {i}");
                assert_eq!(
                    (w.epoch, &w.samples, &w.windows),
                    (g.epoch, &g.samples, &g.windows),
                    "{at}"
                );
                assert!(g.arrays.is_empty() && w.gpu.is_none(), "{at}");
                let h = g.gpu.as_deref().expect("a hand-off");
                assert_eq!(h.element, element, "{at}");
                let staged = matches!(h.values, HandOffValues::Staged(_));
                assert_eq!(staged, mode == GpuOutput::Staged, "{at}");
                assert_eq!(h.image_shape(), None, "{at}");
                let mut bytes = vec![0u8; h.bytes() as usize];
                h.copy_to(&mut bytes).unwrap();
                assert!(h.copy_to(&mut vec![0u8; h.bytes() as usize - 1]).is_err());
                assert_eq!(h.views.len(), w.arrays.len(), "{at}");
                for (v, a) in h.views.iter().zip(&w.arrays) {
                    assert_eq!((&v.name, &v.shape), (&a.name, &a.shape), "{at}");
                    assert_eq!(v.offset % 256, 0, "{at}");
                    let want = a.tensor.as_bytes();
                    let got = &bytes[v.offset as usize..v.offset as usize + want.len()];
                    assert!(got == want, "{at}: {} differs", v.name);
                }
                #[cfg(all(feature = "interop", unix))]
                if let HandOffValues::Device {
                    buffer,
                    device,
                    queue,
                } = &h.values
                {
                    exported_equal(&gpu, (buffer, device, queue), &bytes, &at);
                }
            }
        }
    }
}

/// `buffer`'s first `want.len()` bytes, copied into an exported buffer and read through its
/// fd imported again as Vulkan memory, are `want` (where the device can export memory; with
/// `CI=true` it must).
#[cfg(all(feature = "interop", unix))]
fn exported_equal(
    gpu: &GpuDecoder,
    (buffer, device, queue): (&wgpu::Buffer, &wgpu::Device, &wgpu::Queue),
    want: &[u8],
    at: &str,
) {
    use l3::gpu::interop::{export_supported, exportable_buffer};
    if !export_supported(gpu.device()) {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "CI=true and the adapter cannot export memory as fds"
        );
        return;
    }
    let size = (want.len() as u64).next_multiple_of(4);
    let exported = exportable_buffer(device, size).unwrap();
    let imported = gpu_support::reimport(gpu, &exported, size);
    exported.copy_from(device, queue, buffer, size).unwrap();
    let got = gpu_support::read_buffer(gpu, &imported, size);
    assert!(got[..want.len()] == *want, "{at}: exported bytes differ");
}

#[test]
fn a_resumed_gpu_loader_gives_the_remaining_batches() {
    let Some(gpu) = decoder() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let ds = pack(tmp.path());
    let cpu = ok(run(&ds, options(4, Some(windows())), start()));
    let mut o = options(4, Some(windows()));
    o.gpu = Some(gpu);
    let mut first = Loader::open(LoaderDataset::Tensors(ds.clone()), o.clone(), start()).unwrap();
    let mut resumed: Vec<Batch> = (0..3).map(|_| first.next().unwrap().unwrap()).collect();
    let state = first.state();
    drop(first);
    assert_eq!((state.epoch, state.consumed), (0, 12));
    resumed.extend(ok(run(&ds, o, state)));
    assert_same(&cpu, &resumed, "resumed");
}

/// Replaces record `sample`'s array `k` payload in its shard by `make(payload)` (same
/// length), and mends the shard's CRCs (the payload's entry and the index's) so only the
/// payload's own checks can catch it.
fn rewrite_payload(dir: &Path, ds: &TensorDataset, sample: u64, k: usize, new: &[u8]) {
    let (_, entry) = ds.arrays_of(sample).unwrap()[k];
    let (shard, _) = ds.name_of(sample);
    let path = dir.join(&shard);
    let mut bytes = std::fs::read(&path).unwrap();
    let (at, len) = (entry.offset as usize, entry.len as usize);
    assert_eq!(new.len(), len);
    bytes[at..at + len].copy_from_slice(new);
    let n = bytes.len();
    let trailer = n - 32;
    let index_offset = u64::from_le_bytes(bytes[trailer..trailer + 8].try_into().unwrap()) as usize;
    let index_len =
        u64::from_le_bytes(bytes[trailer + 8..trailer + 16].try_into().unwrap()) as usize;
    let index = &mut bytes[index_offset..index_offset + index_len];
    // The entry's offset, len and crc32 lie together in the index.
    let mut key = entry.offset.to_le_bytes().to_vec();
    key.extend(entry.len.to_le_bytes());
    key.extend(entry.crc32.to_le_bytes());
    let pos = index
        .windows(key.len())
        .position(|w| w == key)
        .expect("the entry in the index");
    let crc = crc32fast::hash(new);
    index[pos + 16..pos + 20].copy_from_slice(&crc.to_le_bytes());
    let index_crc = crc32fast::hash(index);
    bytes[trailer + 24..trailer + 28].copy_from_slice(&index_crc.to_le_bytes());
    std::fs::write(&path, bytes).unwrap();
}

#[test]
fn corrupt_records_are_skipped_or_fail_as_on_the_cpu() {
    let Some(gpu) = decoder() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let ds = pack(tmp.path());
    // Record 5: a bad CRC in its raw target (the read fails). Record 12: its lossless input's
    // header disagrees with the index (CRCs mended), so it fails only when checked or decoded.
    let (bad_crc, bad_header) = (5u64, 12u64);
    let (_, target) = ds.arrays_of(bad_crc).unwrap()[1];
    let (spec, input) = ds.arrays_of(bad_header).unwrap()[0];
    let spec = spec.clone();
    let payload = ds.read_payloads(bad_header).unwrap().swap_remove(0);
    let broken = (4..64)
        .find_map(|i| {
            let mut p = payload.clone();
            p[i] ^= 0x04;
            fix_crc(&mut p);
            let refused = check_payload(&spec, &p).is_err()
                && decode_array(&spec, &p, &DecodeOptions::default()).is_err();
            refused.then_some(p)
        })
        .expect("a header byte whose change is refused");
    assert_eq!(broken.len() as u64, input.len);
    let (shard, _) = ds.name_of(bad_crc);
    rewrite_payload(tmp.path(), &ds, bad_header, 0, &broken);
    drop(ds);
    let path = tmp.path().join(&shard);
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[target.offset as usize + 9] ^= 0x10;
    std::fs::write(&path, bytes).unwrap();
    let ds = Arc::new(TensorDataset::open(tmp.path()).unwrap());
    let o = options(4, Some(windows()));
    let cpu = ok(run(&ds, o.clone(), start()));
    let mut g = o;
    g.gpu = Some(gpu.clone());
    let on_gpu = ok(run(&ds, g.clone(), start()));
    let skipped: Vec<u64> = on_gpu
        .iter()
        .flat_map(|b| b.skipped.iter().map(|s| s.sample))
        .collect();
    assert_eq!(
        skipped.len(),
        4,
        "each bad record once per epoch: {skipped:?}"
    );
    assert!(skipped.contains(&bad_crc) && skipped.contains(&bad_header));
    assert_same(&cpu, &on_gpu, "skip");
    let kept: usize = on_gpu.iter().map(|b| b.samples.len()).sum();
    assert_eq!(kept, 2 * (RECORDS as usize - 2));
    // Fail: the same batches fail, each naming its record.
    let mut c = options(4, Some(windows()));
    c.on_error = OnError::Fail;
    g.on_error = OnError::Fail;
    let failed = |batches: Vec<Result<Batch, Error>>| -> Vec<(usize, u64)> {
        batches
            .iter()
            .enumerate()
            .filter_map(|(i, b)| match b {
                Err(Error::Record { sample, .. }) => Some((i, *sample)),
                Err(e) => panic!("{e}"),
                Ok(_) => None,
            })
            .collect()
    };
    let on_cpu = failed(run(&ds, c, start()));
    assert_eq!(on_cpu.len(), 4);
    assert_eq!(failed(run(&ds, g, start())), on_cpu);
}

#[test]
fn the_cache_reads_the_same_bytes_on_the_gpu_path() {
    let Some(gpu) = decoder() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let ds = pack(tmp.path());
    let payload: u64 = ds.shards().iter().map(|s| s.payload_bytes()).sum();
    let mut o = options(4, Some(windows()));
    o.cache_bytes = payload / 2;
    let cpu = ok(run(&ds, o.clone(), start()));
    o.gpu = Some(gpu);
    let on_gpu = ok(run(&ds, o, start()));
    assert_same(&cpu, &on_gpu, "cache");
    let read = |e: u64| -> u64 {
        on_gpu
            .iter()
            .filter(|b| b.epoch == e)
            .map(|b| b.bytes_read)
            .sum()
    };
    assert_eq!(read(0), payload, "epoch 1 reads every payload once");
    assert!(read(1) < payload, "epoch 2 has hits: {}", read(1));
    let last = on_gpu.last().unwrap().cache;
    assert_eq!(last, cpu.last().unwrap().cache);
    assert!(last.hits > 0);
}

#[test]
fn options_the_gpu_path_does_not_take_are_refused() {
    let Some(gpu) = decoder() else { return };
    // 64-bit arrays.
    let wide = tempfile::tempdir().unwrap();
    let mut p = TensorPacker::new(wide.path(), TensorPackOptions::new(4, ArrayMode::Raw)).unwrap();
    for i in 0..3u8 {
        let bytes: Vec<u8> = (0..64u64)
            .flat_map(|k| (k * i as u64).to_le_bytes())
            .collect();
        p.push(TensorSample {
            key: None,
            class: None,
            meta: Vec::new(),
            arrays: vec![(
                "w".into(),
                NdArray::new(DType::Int64, vec![8, 8], bytes).unwrap(),
            )],
        })
        .unwrap();
    }
    p.finish().unwrap();
    let wide = Arc::new(TensorDataset::open(wide.path()).unwrap());
    let mut o = options(2, None);
    o.gpu = Some(gpu.clone());
    let e = Loader::open(LoaderDataset::Tensors(wide.clone()), o.clone(), start())
        .err()
        .expect("refused");
    assert!(e.to_string().contains("64-bit"), "{e}");
    o.gpu = None;
    assert!(Loader::open(LoaderDataset::Tensors(wide), o, start()).is_ok());
    // Error-bounded arrays of 4 axes (.l3f version 3) beside ones of 2 (version 1): the GPU
    // path decodes both kinds and gives the CPU path's batches bit for bit.
    let four = tempfile::tempdir().unwrap();
    let mut p = TensorPacker::new(
        four.path(),
        TensorPackOptions::new(4, ArrayMode::Bounded(Bound::Absolute(1e-3))),
    )
    .unwrap();
    let source = |i: u32, n: usize| -> Vec<f32> {
        (0..n)
            .map(|k| ((k as f32) * 0.1 + i as f32).sin())
            .collect()
    };
    for i in 0..6u32 {
        p.push(TensorSample {
            key: None,
            class: None,
            meta: Vec::new(),
            arrays: vec![
                (
                    "vol".into(),
                    NdArray::from_f32(vec![2, 3, 8, 8], &source(i, 384)).unwrap(),
                ),
                (
                    "img".into(),
                    NdArray::from_f32(vec![8, 8], &source(i + 9, 64)).unwrap(),
                ),
            ],
        })
        .unwrap();
    }
    p.finish().unwrap();
    let four = Arc::new(TensorDataset::open(four.path()).unwrap());
    let crop = TensorAugment {
        crop: vec![4, 4],
        flips: true,
        rot90: true,
        normalise: true,
        ..Default::default()
    };
    for tensor in [None, Some(crop)] {
        let cpu = ok(run(&four, options(4, tensor.clone()), start()));
        let mut o = options(4, tensor);
        o.gpu = Some(gpu.clone());
        let on_gpu = ok(run(&four, o, start()));
        assert_same(&cpu, &on_gpu, "version 1 and 3 error-bounded arrays");
        let Tensor::F32(values) = &cpu[0].arrays[0].tensor else {
            panic!("f32")
        };
        assert!(!values.is_empty());
    }
    // Whole arrays on the CPU are within the bound of the source.
    let mut o = options(6, None);
    o.end_epoch = 1;
    let b = &ok(run(&four, o, start()))[0];
    let Tensor::F32(values) = &b.arrays[0].tensor else {
        panic!("f32")
    };
    for (k, &s) in b.samples.iter().enumerate() {
        let want = source(s as u32, 384);
        for (x, y) in want.iter().zip(&values[k * 384..(k + 1) * 384]) {
            assert!((x - y).abs() as f64 <= 1e-3, "{x} {y}");
        }
    }
}

#[test]
fn each_gpu_batch_is_one_decode_per_kind_and_one_window_dispatch() {
    let Some(gpu) = decoder() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let ds = pack(tmp.path());
    let cpu = ok(run(&ds, options(5, Some(windows())), start()));
    assert!(cpu.iter().all(|b| b.gpu_counts.is_none()));
    let mut o = options(5, Some(windows()));
    o.gpu = Some(gpu);
    let batches = ok(run(&ds, o, start()));
    let (mut raw, mut upload, mut compressed, mut out) = (0u64, 0u64, 0u64, 0u64);
    for b in &batches {
        let c = b.gpu_counts.expect("a GPU batch's counts");
        let n = b.samples.len();
        assert_eq!(c.window_dispatches, 1);
        assert_eq!(
            (c.lossless, c.error_bounded, c.bounded, c.raw),
            (2 * n, n, n, 3 * n)
        );
        // Raw arrays: target 2 x 16 x 16 f32, half 16 x 16 f16, mask 16 x 16 u8.
        assert_eq!(c.raw_upload_bytes, n as u64 * (2048 + 512 + 256));
        // Every array: input and target 2048, bf and half 512, eb and eb3 1024, mask 256.
        assert_eq!(
            c.array_bytes,
            n as u64 * (2 * 2048 + 2 * 512 + 2 * 1024 + 256)
        );
        assert!(c.compressed_bytes > 0);
        raw += c.array_bytes;
        upload += c.raw_upload_bytes;
        compressed += c.compressed_bytes;
        out += c.output_bytes;
    }
    eprintln!(
        "{} batches: arrays {raw} B raw, {upload} B uploaded raw + {compressed} B compressed \
         to the decoders ({:.3} of raw), {out} B output",
        batches.len(),
        (upload + compressed) as f64 / raw as f64
    );
}

/// A one-plane error-bounded (version 1) array larger than a bin-image patch, cut by small
/// windows: the GPU decodes only the patches each window reads (fewer bytes uploaded than
/// for whole-extent windows of the same records), and the batches still equal the CPU
/// path's bit for bit (flips and quarter turns too; a stacked 3-plane array beside it is
/// decoded whole).
#[test]
fn one_plane_error_bounded_arrays_decode_only_the_window_s_patches() {
    let Some(gpu) = decoder() else { return };
    let dir = tempfile::tempdir().unwrap();
    let mut p = TensorPacker::new(
        dir.path(),
        TensorPackOptions::new(3, ArrayMode::Bounded(Bound::Absolute(1e-3))),
    )
    .unwrap();
    let field = |i: u32, n: usize, w: usize| -> Vec<f32> {
        (0..n)
            .map(|k| ((k % w) as f32 * 0.05 + i as f32).sin() * ((k / w) as f32 * 0.03).cos())
            .collect()
    };
    for i in 0..5u32 {
        p.push(TensorSample {
            key: None,
            class: None,
            meta: Vec::new(),
            arrays: vec![
                (
                    "plane".into(),
                    NdArray::from_f32(vec![1, 300, 300], &field(i, 90_000, 300)).unwrap(),
                ),
                (
                    "stack".into(),
                    NdArray::from_f32(vec![3, 300, 300], &field(i + 7, 270_000, 300)).unwrap(),
                ),
            ],
        })
        .unwrap();
    }
    p.finish().unwrap();
    let ds = Arc::new(TensorDataset::open(dir.path()).unwrap());
    let crop = |size: u32| TensorAugment {
        crop: vec![size, size],
        flips: true,
        rot90: true,
        ..Default::default()
    };
    let mut uploads = Vec::new();
    for size in [40, 300] {
        let cpu = ok(run(&ds, options(5, Some(crop(size))), start()));
        let mut o = options(5, Some(crop(size)));
        o.gpu = Some(gpu.clone());
        let before = gpu.counts();
        let on_gpu = ok(run(&ds, o, start()));
        uploads.push((gpu.counts() - before).upload_bytes);
        assert_same(&cpu, &on_gpu, &format!("{size} x {size} windows"));
        for b in &on_gpu {
            let c = b.gpu_counts.expect("counts");
            // "plane" windowed, "stack" whole.
            assert_eq!(
                (c.error_bounded, c.error_bounded_windowed),
                (2 * b.samples.len(), b.samples.len())
            );
        }
    }
    eprintln!("bytes uploaded, 40 x 40 windows / 300 x 300: {uploads:?}");
    // 40 x 40 windows read 1 to 4 of the plane's 9 patches of 128 px (300 x 300).
    assert!(uploads[0] < uploads[1], "{uploads:?}");
}
