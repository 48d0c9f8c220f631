//! The tensor-window plan and the kernel's CPU twin against [`TensorAugment::apply`], bit for
//! bit, without a GPU: raw arrays of every type the kernel reads, lossless float32, float16
//! and bfloat16 arrays and error-bounded ones (decoded on the CPU and laid out as the GPU
//! decoders lay them out), 2 and 3 spatial axes, records of different extents, crops, flips,
//! quarter turns, normalisation, f32 and f16 output (odd sample sizes, so f16 values of two
//! jobs share words), under limits small enough to split the batch into several dispatches.
//! Then the plan's refusals of hostile records.

use super::*;
use crate::field::Bound;
use crate::gpu::cpu_twin::tensor_window::tensor_window as twin;
use crate::loader::tensor::f32_to_f16_bits;
use crate::tensor::{decode_array, encode_array, ArrayMode, ArrayOptions, EncodedArray, NdArray};

/// Small deterministic generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}

/// `n` elements of `dtype`: smooth floats with NaN payloads, -0.0, infinities and subnormals
/// sprinkled in; integers over their whole range.
fn elements(rng: &mut Rng, dtype: DType, n: usize, smooth: bool) -> Vec<u8> {
    let mut out = Vec::with_capacity(n * dtype.size());
    for i in 0..n {
        let r = rng.next();
        let x = (i as f32 * 0.37).sin() * 50.0 + (r % 1000) as f32 * 1e-3;
        let special = !smooth && r.is_multiple_of(23);
        let f = match (special, r % 5) {
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

/// `n` float32 values of magnitude near 2^-126, subnormals included, either sign: with a
/// tiny mean and a large scale, every flush of the normalisation matters.
fn tiny_values(rng: &mut Rng, n: usize) -> Vec<u8> {
    (0..n)
        .flat_map(|_| {
            let r = rng.next();
            let bits = (r as u32 & 0x017f_ffff) | ((r >> 32) as u32 & 0x8000_0000);
            bits.to_le_bytes()
        })
        .collect()
}

/// What one array name of a test batch is.
#[derive(Debug, Clone, Copy)]
struct Kind {
    name: &'static str,
    dtype: DType,
    mode: ArrayMode,
    /// Leading axes (channels) before the spatial ones.
    lead: &'static [u32],
}

const fn kind(name: &'static str, dtype: DType, mode: ArrayMode, lead: &'static [u32]) -> Kind {
    Kind {
        name,
        dtype,
        mode,
        lead,
    }
}

/// Every kind the kernel reads, for records of 2 spatial axes.
const KINDS_2D: [Kind; 14] = [
    kind("f32", DType::Float32, ArrayMode::Raw, &[3]),
    kind("f16", DType::Float16, ArrayMode::Raw, &[]),
    kind("bf16", DType::BFloat16, ArrayMode::Raw, &[2]),
    kind("u8", DType::UInt8, ArrayMode::Raw, &[3]),
    kind("i8", DType::Int8, ArrayMode::Raw, &[]),
    kind("u16", DType::UInt16, ArrayMode::Raw, &[]),
    kind("i16", DType::Int16, ArrayMode::Raw, &[1]),
    kind("u32", DType::UInt32, ArrayMode::Raw, &[]),
    kind("i32", DType::Int32, ArrayMode::Raw, &[2]),
    kind("lossless-f32", DType::Float32, ArrayMode::Lossless, &[2]),
    kind("lossless-bf16", DType::BFloat16, ArrayMode::Lossless, &[]),
    kind("lossless-f16", DType::Float16, ArrayMode::Lossless, &[1, 2]),
    kind(
        "bounded",
        DType::Float32,
        ArrayMode::Bounded(Bound::Absolute(1e-3)),
        &[],
    ),
    kind("tiny", DType::Float32, ArrayMode::Raw, &[]),
];

/// Kinds for records of 3 spatial axes (error-bounded fields take 3 axes at most).
const KINDS_3D: [Kind; 4] = [
    kind("f32", DType::Float32, ArrayMode::Raw, &[2]),
    kind("i16", DType::Int16, ArrayMode::Raw, &[]),
    kind("lossless-bf16", DType::BFloat16, ArrayMode::Lossless, &[]),
    kind(
        "bounded",
        DType::Float32,
        ArrayMode::Bounded(Bound::Absolute(1e-2)),
        &[],
    ),
];

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
                .map(|k| {
                    let shape: Vec<u32> = k.lead.iter().copied().chain(extent(s)).collect();
                    let n = shape.iter().product::<u32>() as usize;
                    // Error-bounded fields take finite values; the others get the specials.
                    let smooth = matches!(k.mode, ArrayMode::Bounded(Bound::Absolute(_)));
                    let bytes = if k.name == "tiny" {
                        tiny_values(&mut rng, n)
                    } else {
                        elements(&mut rng, k.dtype, n, smooth)
                    };
                    let array = NdArray::new(k.dtype, shape, bytes).unwrap();
                    let options = ArrayOptions {
                        mode: k.mode,
                        fill_value: None,
                        format: Default::default(),
                    };
                    encode_array(k.name, &array, &options).unwrap()
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

/// The CPU reference: `apply` on the decoded array, then f16 where asked, as bits.
fn reference(augment: &TensorAugment, e: &EncodedArray, w: &TensorWindow) -> Vec<u32> {
    let array = decode_array(&e.spec, &e.payload, &Default::default()).unwrap();
    let extent = &e.spec.shape[e.spec.shape.len() - w.size.len()..];
    let n: u32 = augment
        .output_shape(&e.spec.shape, extent)
        .unwrap()
        .iter()
        .product();
    let mut out = vec![0f32; n as usize];
    let s = augment.normalise.then(|| stats(&e.spec.name)).flatten();
    augment.apply(&array, w, s, &mut out).unwrap();
    match augment.output {
        TensorType::F32 => out.iter().map(|v| v.to_bits()).collect(),
        TensorType::F16 => out.iter().map(|&v| f32_to_f16_bits(v) as u32).collect(),
    }
}

/// The decoded arrays of one kind, laid out as the GPU decoders lay them out (each from a
/// multiple of 256 bytes): the words and each array's byte offset.
fn decoded_layout(
    plan: &TensorBatchPlan<'_>,
    recs: &[Vec<EncodedArray>],
    kind: usize,
) -> (Vec<u32>, Vec<u64>) {
    let mut bytes = Vec::new();
    let mut offsets = Vec::new();
    for &j in &plan.decoded_jobs[kind] {
        // Jobs go by name, then sample.
        let e = &recs[plan.samples[j]][j / recs.len()];
        let array = decode_array(&e.spec, &e.payload, &Default::default()).unwrap();
        offsets.push(bytes.len() as u64);
        bytes.extend_from_slice(array.bytes());
        bytes.resize(bytes.len().next_multiple_of(256), 0);
    }
    bytes.resize(bytes.len().max(4), 0);
    (bytemuck::pod_collect_to_vec(&bytes), offsets)
}

/// Plans the batch, runs the twin over every dispatch the engine would make under
/// `limits`, and compares every value with the CPU's: returns the number of dispatches.
fn check(augment: &TensorAugment, recs: &[Vec<EncodedArray>], limits: &BindLimits) -> usize {
    let n = augment.spatial_axes();
    let samples: Vec<TensorSampleInput<'_>> = recs
        .iter()
        .enumerate()
        .map(|(s, arrays)| {
            let shape = &arrays[0].spec.shape;
            let extent = &shape[shape.len() - n..];
            TensorSampleInput {
                arrays: arrays
                    .iter()
                    .map(|e| TensorArrayInput {
                        spec: &e.spec,
                        payload: &e.payload,
                    })
                    .collect(),
                window: augment.window(7, 1, s as u64, extent).unwrap(),
            }
        })
        .collect();
    let plan = plan_tensor_batch(augment, &samples, &stats, limits, u64::MAX).unwrap();
    let mut raw = vec![0u8; plan.raw_bytes.max(4) as usize];
    for &(offset, bytes) in &plan.raw {
        raw[offset as usize..offset as usize + bytes.len()].copy_from_slice(bytes);
    }
    let raw: Vec<u32> = bytemuck::pod_collect_to_vec(&raw);
    let (bounded, bounded_at) = decoded_layout(&plan, recs, 0);
    let (lossless, lossless_at) = decoded_layout(&plan, recs, 1);
    let tasks = plan.tasks(&bounded_at, &lossless_at, &[]);
    let (table, jobs) = tensor_window::plan(&tasks, limits).unwrap();
    let mut dst = vec![0u32; (plan.output_bytes / 4) as usize];
    let sources = [&raw[..], &bounded[..], &lossless[..]];
    for w in &table.windows {
        let bound = |slot: usize| {
            let (lo, len) = w.bound[slot];
            (lo / 4) as usize..((lo + len) / 4) as usize
        };
        let src = [0, 1, 2].map(|k| &sources[k][bound(k)]);
        twin(&jobs[w.jobs.clone()], src, &mut dst[bound(3)]);
    }
    for (i, a) in plan.arrays.iter().enumerate() {
        let per: usize = a.shape[1..].iter().product();
        let values: Vec<u32> = match augment.output {
            TensorType::F32 => dst[(a.offset / 4) as usize..][..per * recs.len()].to_vec(),
            TensorType::F16 => {
                let halves: &[u16] = bytemuck::cast_slice(&dst[(a.offset / 4) as usize..]);
                halves[..per * recs.len()]
                    .iter()
                    .map(|&h| h as u32)
                    .collect()
            }
        };
        for (s, rec) in recs.iter().enumerate() {
            let want = reference(augment, &rec[i], &samples[s].window);
            let got = &values[s * per..(s + 1) * per];
            let first = got.iter().zip(&want).position(|(g, w)| g != w);
            assert!(
                first.is_none(),
                "{} sample {s} {:?}: value {first:?}: twin {:#x} CPU {:#x}",
                a.name,
                samples[s].window,
                got[first.unwrap()],
                want[first.unwrap()]
            );
        }
    }
    table.windows.len()
}

const BIG: BindLimits = BindLimits {
    max_binding: 1 << 30,
    max_buffer: 1 << 32,
    storage_align: 256,
};

const SMALL: BindLimits = BindLimits {
    max_binding: 2048,
    max_buffer: 1 << 32,
    storage_align: 256,
};

#[test]
fn twin_equals_apply_over_every_type_in_2d() {
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
        assert_eq!(check(&augment, &recs, &BIG), 1, "one dispatch");
        let windows = check(&augment, &recs, &SMALL);
        assert!(windows > 1, "small bindings split the batch: {windows}");
    }
}

#[test]
fn twin_equals_apply_in_3d_and_uncropped() {
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
        check(&augment, &recs, &BIG);
        check(&augment, &recs, &SMALL);
    }
    let recs = records(3, &KINDS_2D[..4], |_| vec![5, 7], 5);
    let augment = TensorAugment {
        spatial: 2,
        flips: true,
        normalise: true,
        output: TensorType::F16,
        ..Default::default()
    };
    check(&augment, &recs, &BIG);
}

/// Hostile records: each refused by the plan with an error naming its sample, never a
/// panic.
#[test]
fn hostile_records_are_refused() {
    let recs = records(4, &KINDS_2D[..3], |_| vec![8, 8], 3);
    let augment = TensorAugment {
        crop: vec![4, 4],
        flips: true,
        normalise: true,
        ..Default::default()
    };
    let window = |s: u64| augment.window(1, 0, s, &[8, 8]).unwrap();
    fn sample(arrays: &[EncodedArray], window: TensorWindow) -> TensorSampleInput<'_> {
        TensorSampleInput {
            arrays: arrays
                .iter()
                .map(|e| TensorArrayInput {
                    spec: &e.spec,
                    payload: &e.payload,
                })
                .collect(),
            window,
        }
    }
    let sample = |arrays, s| sample(arrays, window(s));
    let plan = |samples: &[TensorSampleInput<'_>]| {
        plan_tensor_batch(&augment, samples, &stats, &BIG, 1 << 20).map(|p| p.jobs.len())
    };
    let good: Vec<_> = recs
        .iter()
        .enumerate()
        .map(|(s, r)| sample(r, s as u64))
        .collect();
    plan(&good).unwrap();
    let refused = |samples: &[TensorSampleInput<'_>], what: &str| match plan(samples) {
        Err(Error::InBatch { image: 1, .. }) => {}
        other => panic!("{what}: {other:?}"),
    };
    // A short raw payload; a payload whose header is another array's.
    let mut bad = recs[1].clone();
    bad[0].payload.pop();
    refused(&[good[0].clone(), sample(&bad, 1)], "short payload");
    let mut bad = recs[1].clone();
    bad[1].spec.shape = vec![8, 9];
    refused(&[good[0].clone(), sample(&bad, 1)], "spatial axes differ");
    let mut bad = recs[1].clone();
    bad[2].spec.name = "f16".into();
    refused(&[good[0].clone(), sample(&bad, 1)], "a name twice");
    refused(
        &[good[0].clone(), sample(&recs[1][..2], 1)],
        "a name missing",
    );
    let mut s1 = sample(&recs[1], 1);
    s1.window.origin[1] = 5;
    refused(&[good[0].clone(), s1], "window outside");
    let mut s1 = sample(&recs[1], 1);
    s1.window.rot90 = 9;
    refused(&[good[0].clone(), s1], "turns");
    let mut s1 = sample(&recs[1], 1);
    s1.window.flip.pop();
    refused(&[good[0].clone(), s1], "flip axes");
    // Leading axes that differ: another output shape for the name.
    let mut bad = recs[1].clone();
    let spec = ArraySpec {
        shape: vec![2, 8, 8],
        ..bad[0].spec.clone()
    };
    bad[0] = EncodedArray {
        payload: vec![0; spec.byte_len() as usize],
        spec,
    };
    refused(&[good[0].clone(), sample(&bad, 1)], "output shape");
    // A float64 array: the CPU path's.
    let mut bad = recs[1].clone();
    let f64s = NdArray::new(DType::Float64, vec![8, 8], vec![0; 512]).unwrap();
    bad[2] = encode_array(
        "bf16",
        &f64s,
        &ArrayOptions {
            mode: ArrayMode::Raw,
            fill_value: None,
            format: Default::default(),
        },
    )
    .unwrap();
    refused(&[good[0].clone(), sample(&bad, 1)], "float64");
    // Over the decode limit, the device's: limits errors.
    assert!(matches!(
        plan_tensor_batch(&augment, &good, &stats, &BIG, 100),
        Err(Error::InBatch { image: 0, .. })
    ));
    let tiny = BindLimits {
        max_buffer: 1024,
        ..BIG
    };
    assert!(matches!(
        plan_tensor_batch(&augment, &good, &stats, &tiny, u64::MAX),
        Err(Error::Limits(_))
    ));
    assert!(plan(&[]).is_err(), "an empty batch");
}
