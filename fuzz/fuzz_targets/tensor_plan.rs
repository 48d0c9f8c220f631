//! The tensor loader's GPU plan (`loader::tensor_gpu::plan_tensor_batch`) on hostile records
//! and windows, without a GPU: a batch of samples whose arrays are real encoded payloads
//! (raw, lossless, error-bounded version 1 and 3, of 1 to 4 axes) under index entries and
//! windows taken from the input (shapes, dtypes and modes that may disagree with the
//! payload, windows anywhere), and a few payload bytes overwritten, under device limits
//! from the input. A plan is accepted or refused with an error, never a panic; an accepted
//! plan's output and raw upload lie within the limits, every job's output inside the
//! output, and every version-1 window inside its array's last two axes.
#![no_main]
use std::sync::OnceLock;

use l3::field::Bound;
use l3::gpu::fuzzing::BindLimits;
use l3::loader::tensor_augment::{TensorAugment, TensorWindow};
use l3::loader::tensor_gpu::{plan_tensor_batch, TensorArrayInput, TensorSampleInput};
use l3::loader::TensorType;
use l3::tensor::{encode_array, ArrayMode, ArrayOptions, BoundedFormat, EncodedArray, NdArray};
use libfuzzer_sys::fuzz_target;

/// Real encoded arrays to start from: every mode, several shapes.
fn arrays() -> &'static [EncodedArray] {
    static ARRAYS: OnceLock<Vec<EncodedArray>> = OnceLock::new();
    ARRAYS.get_or_init(|| {
        let shapes: [&[u32]; 5] = [&[24, 20], &[1, 40, 36], &[2, 16, 16], &[30], &[2, 2, 6, 8]];
        let mut out = Vec::new();
        for (k, shape) in shapes.iter().enumerate() {
            let n: usize = shape.iter().map(|&d| d as usize).product();
            let v: Vec<f32> = (0..n)
                .map(|i| ((i as f32) * 0.13 + k as f32).sin() * 9.0)
                .collect();
            let a = NdArray::from_f32(shape.to_vec(), &v).unwrap();
            let modes = [
                ArrayOptions::new(ArrayMode::Raw),
                ArrayOptions::new(ArrayMode::Lossless),
                ArrayOptions::new(ArrayMode::Bounded(Bound::Absolute(1e-3))),
                ArrayOptions {
                    format: BoundedFormat::V3,
                    ..ArrayOptions::new(ArrayMode::Bounded(Bound::Absolute(1e-2)))
                },
            ];
            for o in &modes {
                if let Ok(e) = encode_array("a", &a, o) {
                    out.push(e);
                }
            }
        }
        out
    })
}

fuzz_target!(|input: &[u8]| {
    if input.len() < 8 {
        return;
    }
    let pool = arrays();
    let mut bytes = input.iter().copied().cycle();
    let mut next = move || bytes.next().unwrap_or(0);
    let limits = BindLimits {
        max_binding: 1 << (10 + next() % 20),
        max_buffer: (1u64 << (10 + next() % 20)) << (next() % 3),
        storage_align: 1 << (2 + next() % 7),
    };
    let spatial = 1 + next() % 3;
    let augment = TensorAugment {
        crop: (0..spatial).map(|_| 1 + next() as u32 % 40).collect(),
        flips: next() % 2 == 1,
        rot90: next() % 2 == 1,
        normalise: next() % 2 == 1,
        output: if next() % 2 == 1 {
            TensorType::F16
        } else {
            TensorType::F32
        },
        ..Default::default()
    };
    let samples_n = 1 + next() as usize % 4;
    let arrays_n = 1 + next() as usize % 3;
    // Per sample and array: an encoded array, its entry perhaps changed, its payload perhaps
    // with a byte overwritten.
    let mut owned: Vec<Vec<(l3::tensor::ArraySpec, Vec<u8>)>> = Vec::new();
    let mut windows = Vec::new();
    for _ in 0..samples_n {
        let mut row = Vec::new();
        for j in 0..arrays_n {
            let e = &pool[next() as usize % pool.len()];
            let mut spec = e.spec.clone();
            spec.name = format!("a{j}");
            let mut payload = e.payload.clone();
            match next() % 8 {
                0 => {
                    let a = next() as usize % spec.shape.len();
                    spec.shape[a] = next() as u32 % 64;
                }
                1 if !payload.is_empty() => {
                    let at = (next() as usize * 251 + next() as usize) % payload.len();
                    payload[at] = next();
                }
                2 => spec.shape.push(1 + next() as u32 % 3),
                _ => {}
            }
            row.push((spec, payload));
        }
        let w = TensorWindow {
            origin: (0..spatial).map(|_| next() as u32 % 48).collect(),
            size: (0..spatial).map(|_| 1 + next() as u32 % 48).collect(),
            flip: (0..spatial).map(|_| next() % 2 == 1).collect(),
            rot90: next() % 5,
        };
        windows.push(w);
        owned.push(row);
    }
    let samples: Vec<TensorSampleInput<'_>> = owned
        .iter()
        .zip(&windows)
        .map(|(row, w)| TensorSampleInput {
            arrays: row
                .iter()
                .map(|(spec, payload)| TensorArrayInput { spec, payload })
                .collect(),
            window: w.clone(),
        })
        .collect();
    let stats = |_: &str| Some((0.5, 2.0));
    let Ok(plan) = plan_tensor_batch(&augment, &samples, &stats, &limits, 1 << 24) else {
        return;
    };
    if std::env::var_os("TENSOR_PLAN_ACCEPTED").is_some() {
        eprintln!(
            "accepted: {} jobs, {} v1 windows",
            plan.samples.len(),
            plan.error_bounded_windows.iter().flatten().count()
        );
    }
    assert!(plan.output_bytes <= limits.max_buffer);
    assert!(plan.raw_bytes <= limits.max_buffer);
    for a in &plan.arrays {
        let values: u64 = a.shape.iter().map(|&d| d as u64).product();
        let size = if augment.output == TensorType::F16 {
            2
        } else {
            4
        };
        assert!(a.offset + values * size <= plan.output_bytes);
    }
    assert_eq!(plan.error_bounded_windows.len(), plan.error_bounded.len());
    for w in plan.error_bounded_windows.iter().flatten() {
        assert!(w.rows.start < w.rows.end && w.columns.start < w.columns.end);
    }
    assert_eq!(plan.samples.len(), plan.arrays.len() * samples.len());
});
