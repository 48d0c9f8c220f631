//! The GPU path of the loader over tensor records (`l3::loader::tensor_gpu::window_batch`,
//! lavapipe in CI): bit for bit what the CPU path gives (`decode_array`, then
//! `TensorAugment::apply`, then f16 rounding) over raw arrays of every type the kernel reads,
//! lossless float32, float16 and bfloat16 arrays and error-bounded ones, 2 and 3 spatial
//! axes, records of different extents, crops, flips, quarter turns, normalisation (with a
//! tiny mean, so every flush of the formula matters) and f32 and f16 output. On a device
//! whose storage bindings hold 1 MiB, the lossless decode splits into sub-batches and the
//! window kernel into several dispatches, with the same values. Hostile payloads come back
//! as errors naming the sample, never a panic. With `CI=true` a missing adapter fails.
//!
//! On a machine without a GPU, Mesa's lavapipe works: `WGPU_BACKEND=vulkan CI=true cargo test
//! --release --test gpu_tensor_window`.
#![cfg(feature = "gpu")]

#[path = "common/gpu_support.rs"]
mod gpu_support;

use gpu_support::{fix_crc, Rng};
use l3::decode::DecodeOptions;
use l3::field::Bound;
use l3::gpu::GpuDecoder;
use l3::loader::tensor::f32_to_f16_bits;
use l3::loader::tensor_gpu::{window_batch, GpuTensorBatch, TensorArrayInput, TensorSampleInput};
use l3::loader::{TensorAugment, TensorType};
use l3::tensor::{
    decode_array, encode_array, ArrayMode, ArrayOptions, BoundedFormat, DType, EncodedArray,
    NdArray,
};

/// One array name of a test batch: its type, mode and leading axes.
type Kind = (&'static str, DType, ArrayMode, &'static [u32]);

/// Every kind the kernel reads, for records of 2 spatial axes.
const KINDS_2D: [Kind; 15] = [
    ("f32", DType::Float32, ArrayMode::Raw, &[3]),
    ("f16", DType::Float16, ArrayMode::Raw, &[]),
    ("bf16", DType::BFloat16, ArrayMode::Raw, &[2]),
    ("u8", DType::UInt8, ArrayMode::Raw, &[3]),
    ("i8", DType::Int8, ArrayMode::Raw, &[]),
    ("u16", DType::UInt16, ArrayMode::Raw, &[]),
    ("i16", DType::Int16, ArrayMode::Raw, &[1]),
    ("u32", DType::UInt32, ArrayMode::Raw, &[]),
    ("i32", DType::Int32, ArrayMode::Raw, &[2]),
    ("lossless-f32", DType::Float32, ArrayMode::Lossless, &[2]),
    ("lossless-bf16", DType::BFloat16, ArrayMode::Lossless, &[]),
    ("lossless-f16", DType::Float16, ArrayMode::Lossless, &[1, 2]),
    (
        "bounded",
        DType::Float32,
        ArrayMode::Bounded(Bound::Absolute(1e-3)),
        &[],
    ),
    // A name ending in "-v3": `.l3f` version 3 (here 3 axes).
    (
        "bounded-v3",
        DType::Float32,
        ArrayMode::Bounded(Bound::Absolute(1e-3)),
        &[2],
    ),
    ("tiny", DType::Float32, ArrayMode::Raw, &[]),
];

/// Kinds for records of 3 spatial axes (error-bounded fields take 3 axes at most).
const KINDS_3D: [Kind; 5] = [
    ("f32", DType::Float32, ArrayMode::Raw, &[2]),
    ("i16", DType::Int16, ArrayMode::Raw, &[]),
    ("lossless-bf16", DType::BFloat16, ArrayMode::Lossless, &[]),
    (
        "bounded",
        DType::Float32,
        ArrayMode::Bounded(Bound::Absolute(1e-2)),
        &[],
    ),
    (
        "bounded-v3",
        DType::Float32,
        ArrayMode::Bounded(Bound::Absolute(1e-2)),
        &[],
    ),
];

/// `n` elements of `dtype`: smooth floats with NaN payloads, -0.0, infinities and subnormals
/// sprinkled in (`specials`), integers over their whole range; `tiny`: float32 values near
/// 2^-126, subnormals included.
fn elements(rng: &mut Rng, dtype: DType, n: usize, specials: bool, tiny: bool) -> Vec<u8> {
    let mut out = Vec::with_capacity(n * dtype.size());
    for i in 0..n {
        let r = rng.next();
        if tiny {
            let bits = (r as u32 & 0x017f_ffff) | ((r >> 32) as u32 & 0x8000_0000);
            out.extend(bits.to_le_bytes());
            continue;
        }
        let x = (i as f32 * 0.37).sin() * 50.0 + (r % 1000) as f32 * 1e-3;
        let f = match (specials && r.is_multiple_of(23), r % 5) {
            (true, 0) => f32::from_bits(0x7fa0_0000 | (r >> 40) as u32 & 0xffff),
            (true, 1) => -0.0,
            (true, 2) => f32::NEG_INFINITY,
            (true, 3) => f32::from_bits((r >> 50) as u32 + 1),
            _ => x,
        };
        match dtype {
            DType::Float32 => out.extend(f.to_le_bytes()),
            DType::Float16 => out.extend(f32_to_f16_bits(f).to_le_bytes()),
            DType::BFloat16 => out.extend(((f.to_bits() >> 16) as u16).to_le_bytes()),
            _ => out.extend(&r.to_le_bytes()[..dtype.size()]),
        }
    }
    out
}

/// A batch of records: sample `s` has spatial extent `extent(s)`, one array per kind.
fn records(
    seed: u64,
    kinds: &[Kind],
    extent: impl Fn(usize) -> Vec<u32>,
    samples: usize,
) -> Vec<Vec<EncodedArray>> {
    let mut rng = Rng(seed | 1);
    (0..samples)
        .map(|s| {
            kinds
                .iter()
                .map(|&(name, dtype, mode, lead)| {
                    let shape: Vec<u32> = lead.iter().copied().chain(extent(s)).collect();
                    let n = shape.iter().product::<u32>() as usize;
                    let bounded = matches!(mode, ArrayMode::Bounded(Bound::Absolute(_)));
                    let bytes = elements(&mut rng, dtype, n, !bounded, name == "tiny");
                    let array = NdArray::new(dtype, shape, bytes).unwrap();
                    let options = ArrayOptions {
                        mode,
                        fill_value: None,
                        format: if name.ends_with("-v3") {
                            BoundedFormat::V3
                        } else {
                            BoundedFormat::V1
                        },
                    };
                    let e = encode_array(name, &array, &options).unwrap();
                    if name.ends_with("-v3") {
                        assert_eq!(l3::field::field_version(&e.payload), Some(3), "{name}");
                    }
                    e
                })
                .collect()
        })
        .collect()
}

/// Statistics for every name but `u8` (left unnormalised), some degenerate, one tiny.
fn stats(name: &str) -> Option<(f64, f64)> {
    match name {
        "u8" => None,
        "i8" => Some((3.0, 0.0)),
        "f16" => Some((-1.5, 1e-30)),
        "tiny" => Some((1.5e-38, 1e-30)),
        _ => Some((name.len() as f64 * 0.7 - 2.0, 0.3 + name.len() as f64)),
    }
}

/// The batch's samples: every record's arrays and its window (seed 7, epoch 1).
fn samples<'a>(
    augment: &TensorAugment,
    recs: &'a [Vec<EncodedArray>],
) -> Vec<TensorSampleInput<'a>> {
    let n = augment.spatial_axes();
    recs.iter()
        .enumerate()
        .map(|(s, arrays)| {
            let shape = &arrays[0].spec.shape;
            TensorSampleInput {
                arrays: arrays
                    .iter()
                    .map(|e| TensorArrayInput {
                        spec: &e.spec,
                        payload: &e.payload,
                    })
                    .collect(),
                window: augment
                    .window(7, 1, s as u64, &shape[shape.len() - n..])
                    .unwrap(),
            }
        })
        .collect()
}

/// Windows `recs` on `gpu` and compares every value with the CPU path's, as bits.
fn check(gpu: &GpuDecoder, augment: &TensorAugment, recs: &[Vec<EncodedArray>]) -> GpuTensorBatch {
    let samples = samples(augment, recs);
    let batch = window_batch(gpu, augment, &samples, &stats).unwrap();
    assert_eq!(batch.arrays.len(), recs[0].len());
    for (i, a) in batch.arrays.iter().enumerate() {
        assert_eq!(a.name, recs[0][i].spec.name);
        assert_eq!(a.shape[0], recs.len());
        let got: Vec<u32> = match batch.read_back_array(i).unwrap() {
            l3::loader::Tensor::F32(v) => v.iter().map(|x| x.to_bits()).collect(),
            l3::loader::Tensor::F16(v) => v.iter().map(|&h| h as u32).collect(),
        };
        let per: usize = a.shape[1..].iter().product();
        assert_eq!(got.len(), per * recs.len());
        for (s, rec) in recs.iter().enumerate() {
            let e = &rec[i];
            let array = decode_array(&e.spec, &e.payload, &DecodeOptions::default()).unwrap();
            let mut want = vec![0f32; per];
            let st = augment.normalise.then(|| stats(&e.spec.name)).flatten();
            augment
                .apply(&array, &samples[s].window, st, &mut want)
                .unwrap();
            let want: Vec<u32> = match augment.output {
                TensorType::F32 => want.iter().map(|x| x.to_bits()).collect(),
                TensorType::F16 => want.iter().map(|&x| f32_to_f16_bits(x) as u32).collect(),
            };
            let got = &got[s * per..(s + 1) * per];
            let first = got.iter().zip(&want).position(|(g, w)| g != w);
            if let Some(k) = first {
                panic!(
                    "{} sample {s} {:?}: value {k}: GPU {:#x}, CPU {:#x}",
                    a.name, samples[s].window, got[k], want[k]
                );
            }
        }
    }
    // The staged hand-off holds the same bytes.
    let first = batch.read_back_array(0).unwrap();
    let mut staged = vec![0u8; first.as_bytes().len()];
    batch.stage_array(0).unwrap().copy_to(&mut staged).unwrap();
    assert!(staged == first.as_bytes(), "staged bytes");
    batch
}

#[test]
fn gpu_equals_cpu_over_every_type_in_2d() {
    let gpu = gpu_support::gpu().expect("an adapter");
    let recs = records(
        1,
        &KINDS_2D,
        |s| vec![7 + (s as u32 * 3) % 5, 6 + (s as u32 * 5) % 4],
        12,
    );
    for (output, normalise, flips, rot90) in [
        (TensorType::F32, true, true, true),
        (TensorType::F16, true, true, true),
        (TensorType::F32, false, true, false),
        (TensorType::F16, false, false, true),
    ] {
        let augment = TensorAugment {
            crop: vec![5, 5],
            flips,
            rot90,
            normalise,
            output,
            ..Default::default()
        };
        let batch = check(gpu, &augment, &recs);
        let c = batch.counts;
        assert_eq!(c.window_dispatches, 1, "one dispatch for the batch");
        assert_eq!((c.raw, c.lossless, c.error_bounded), (12 * 10, 12 * 3, 12));
        eprintln!("{output:?} normalise {normalise}: {c:?}");
    }
}

#[test]
fn gpu_equals_cpu_in_3d_and_uncropped() {
    let gpu = gpu_support::gpu().expect("an adapter");
    let recs = records(2, &KINDS_3D, |s| vec![4 + s as u32 % 2, 5, 6], 9);
    for output in [TensorType::F32, TensorType::F16] {
        let augment = TensorAugment {
            crop: vec![3, 3, 3],
            flips: true,
            rot90: true,
            normalise: true,
            output,
            ..Default::default()
        };
        check(gpu, &augment, &recs);
    }
    let recs = records(3, &KINDS_2D[..4], |_| vec![5, 7], 5);
    let augment = TensorAugment {
        spatial: 2,
        flips: true,
        normalise: true,
        output: TensorType::F16,
        ..Default::default()
    };
    check(gpu, &augment, &recs);
}

/// A decoder on a new device of the shared adapter whose storage bindings hold 1 MiB.
fn small_binding_decoder() -> GpuDecoder {
    let adapter = l3::gpu::select_adapter().unwrap();
    let mut limits = l3::gpu::required_limits(&adapter);
    limits.max_storage_buffer_binding_size = 1 << 20;
    let (device, queue) = pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
        label: Some("1 MiB bindings"),
        required_limits: limits,
        ..Default::default()
    }))
    .unwrap();
    GpuDecoder::new(&device, &queue).unwrap()
}

/// Under 1 MiB bindings: 8 lossless records of 3 x 128 x 128 float32 (1.5 MiB of output
/// and of scratch in all) decode in several sub-batches and window in several
/// dispatches, bit for bit as on the CPU; `decode_lossless_fields` alone gives each array
/// the CPU decoder's bytes.
#[test]
fn small_bindings_split_the_batch() {
    if gpu_support::gpu().is_none() {
        return;
    }
    let gpu = small_binding_decoder();
    let kinds: [Kind; 2] = [
        ("lossless-f32", DType::Float32, ArrayMode::Lossless, &[3]),
        ("f32", DType::Float32, ArrayMode::Raw, &[3]),
    ];
    let recs = records(5, &kinds, |_| vec![128, 128], 8);
    let augment = TensorAugment {
        crop: vec![120, 120],
        flips: true,
        rot90: true,
        normalise: true,
        ..Default::default()
    };
    let batch = check(&gpu, &augment, &recs);
    assert!(
        batch.counts.window_dispatches > 1,
        "{} dispatches",
        batch.counts.window_dispatches
    );
    eprintln!("1 MiB bindings: {:?}", batch.counts);
    let files: Vec<&[u8]> = recs.iter().map(|r| &r[0].payload[..]).collect();
    let decoded = l3::field::gpu::decode_lossless_fields(&gpu, &files).unwrap();
    assert!(
        decoded.submissions > 1,
        "{} submissions",
        decoded.submissions
    );
    eprintln!(
        "lossless decode under 1 MiB bindings: {} submissions",
        decoded.submissions
    );
    let whole = l3::field::gpu::decode_lossless_fields(gpu_support::gpu().unwrap(), &files);
    assert_eq!(
        whole.unwrap().submissions,
        1,
        "one submission on the full device"
    );
    for (k, f) in files.iter().enumerate() {
        let (_, want) = l3::field::decode_lossless(f, &DecodeOptions::default()).unwrap();
        assert!(
            decoded.read_back_array(k).unwrap() == want.as_bytes(),
            "array {k}"
        );
    }
    // A stream error in a later sub-batch (five arrays of 192 KiB fill the first's 1 MiB
    // output binding) names its array's index in the whole batch.
    let (sub, mut on_gpu) = (decoded.submissions, 0);
    for k in 0..40 {
        let mut bad = files[6].to_vec();
        let at = bad.len() / 2 + k * 37;
        bad[at] ^= 0x5a;
        fix_crc(&mut bad);
        let mut with_bad = files.clone();
        with_bad[6] = &bad;
        let cpu = l3::field::decode_lossless(&bad, &DecodeOptions::default());
        match (l3::field::gpu::decode_lossless_fields(&gpu, &with_bad), cpu) {
            (Err(e), Err(_)) => {
                assert!(
                    matches!(e, l3::Error::InBatch { image: 6, .. }),
                    "names array 6: {e}"
                );
                on_gpu += e.to_string().contains("GPU") as usize;
            }
            (Ok(b), Ok((_, want))) => assert!(b.read_back_array(6).unwrap() == want.as_bytes()),
            (gpu, cpu) => panic!("GPU {:?}, CPU {:?}", gpu.err(), cpu.err()),
        }
    }
    eprintln!("{on_gpu} of 40 corruptions of array 6 (of {sub} sub-batches) refused by the GPU");
    assert!(on_gpu > 0, "some are refused by the GPU's flags");
    // One array whose scratch alone outgrows a binding: a limits error, not a panic.
    let big = NdArray::from_f32(vec![600, 600], &vec![1.5; 360_000]).unwrap();
    let options = ArrayOptions {
        mode: ArrayMode::Lossless,
        fill_value: None,
        format: Default::default(),
    };
    let big = encode_array("big", &big, &options).unwrap();
    let e = l3::field::gpu::decode_lossless_fields(&gpu, &[&big.payload]).unwrap_err();
    assert!(matches!(e, l3::Error::Limits(_)), "{e}");
}

/// Corrupt payloads (lossless with its CRC mended, error-bounded, raw cut short) and index
/// entries that disagree with their payloads: an error naming the sample, or, where the CPU
/// decodes the corruption too, the CPU's values; never a panic.
#[test]
fn hostile_payloads_are_errors() {
    let gpu = gpu_support::gpu().expect("an adapter");
    let kinds: [Kind; 3] = [
        ("lossless-f32", DType::Float32, ArrayMode::Lossless, &[]),
        (
            "bounded",
            DType::Float32,
            ArrayMode::Bounded(Bound::Absolute(1e-3)),
            &[],
        ),
        ("raw", DType::Int16, ArrayMode::Raw, &[]),
    ];
    let recs = records(9, &kinds, |_| vec![40, 40], 3);
    let augment = TensorAugment {
        crop: vec![16, 16],
        flips: true,
        ..Default::default()
    };
    let (mut refused, mut decoded) = (0, 0);
    for k in 0..24usize {
        let mut bad = recs.clone();
        let which = k % 3;
        let p = &mut bad[1][which].payload;
        match which {
            0 => {
                let at = p.len() / 3 + k * 53 % (p.len() / 2);
                p[at] ^= 0x5a;
                fix_crc(p);
            }
            1 => {
                let at = p.len() / 2 + k * 7;
                p[at] ^= 0x21;
            }
            _ => p.truncate(p.len() - 1 - k),
        }
        let samples = samples(&augment, &bad);
        let cpu = decode_array(
            &bad[1][which].spec,
            &bad[1][which].payload,
            &DecodeOptions::default(),
        );
        match (window_batch(gpu, &augment, &samples, &stats), cpu) {
            (Err(e), Err(_)) => {
                refused += 1;
                assert!(
                    matches!(e, l3::Error::InBatch { image: 1, .. }),
                    "corruption {k}: names sample 1: {e}"
                );
            }
            (Ok(_), Ok(_)) => {
                decoded += 1;
                check(gpu, &augment, &bad);
            }
            (Ok(_), Err(e)) => panic!("corruption {k}: the GPU took what the CPU refuses: {e}"),
            (Err(e), Ok(_)) => panic!("corruption {k}: the GPU refused what the CPU takes: {e}"),
        }
    }
    eprintln!("{refused} of 24 corruptions refused, {decoded} decoded as on the CPU");
    assert!(refused >= 8, "the truncations are refused");
}
