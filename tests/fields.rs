//! Error-bounded float32 fields: every shared field (`../shared/data/float32`, or
//! `$L3_TEST_DATA/float32`; required with `CI=true`) at three value-range-relative bounds
//! decodes within the bound (NaN and fill values exactly), on the CPU and on the GPU (lavapipe
//! in CI) bit for bit alike; plus synthetic 2D and 3D fields when the corpus is absent.
#![cfg(feature = "dataset")]

mod common;

#[cfg(feature = "gpu")]
#[path = "common/gpu_support.rs"]
mod gpu_support;

use l3::decode::DecodeOptions;
use l3::field::{decode_field, encode_field, Bound, FieldOptions};

struct Field {
    name: String,
    shape: Vec<u32>,
    values: Vec<f32>,
    fill: Option<f32>,
}

fn shared_fields() -> Vec<Field> {
    let Some(root) = common::corpus_dir() else {
        return Vec::new();
    };
    let dir = root.join("float32");
    assert!(dir.is_dir(), "no float32 folder under {}", root.display());
    let mut out = Vec::new();
    for p in common::files_under(&dir) {
        if p.extension().is_none_or(|e| e != "f32") {
            continue;
        }
        let meta: serde_json::Value =
            serde_json::from_slice(&std::fs::read(p.with_extension("json")).unwrap()).unwrap();
        let shape: Vec<u32> = meta["shape"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d.as_u64().unwrap() as u32)
            .collect();
        let bytes = std::fs::read(&p).unwrap();
        let values: Vec<f32> = bytes
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect();
        out.push(Field {
            name: p.file_stem().unwrap().to_string_lossy().into_owned(),
            shape,
            values,
            fill: meta["fill_value"].as_f64().map(|f| f as f32),
        });
    }
    out
}

fn synthetic_fields() -> Vec<Field> {
    let (nz, ny, nx) = (5u32, 40u32, 60u32);
    let values: Vec<f32> = (0..nz * ny * nx)
        .map(|i| {
            let (z, y, x) = (i / (ny * nx), i / nx % ny, i % nx);
            if (x + y) % 17 == 0 {
                f32::NAN
            } else {
                (z as f32 * 0.3).cos() * 10.0 + (y as f32 * 0.1).sin() * x as f32 * 0.05
            }
        })
        .collect();
    vec![
        Field {
            name: "synthetic 3D".into(),
            shape: vec![nz, ny, nx],
            values: values.clone(),
            fill: None,
        },
        Field {
            name: "synthetic 2D".into(),
            shape: vec![ny * nz, nx],
            values,
            fill: Some(-9999.0),
        },
    ]
}

#[test]
fn every_field_decodes_within_its_bound_on_cpu_and_gpu() {
    let mut fields = synthetic_fields();
    fields.extend(shared_fields());
    #[cfg(feature = "gpu")]
    let gpu = gpu_support::gpu();
    for f in &fields {
        let mut files = Vec::new();
        for rel in [1e-2, 1e-3, 1e-4] {
            let mut o = FieldOptions::new(Bound::Relative(rel));
            o.fill_value = f.fill;
            let file = encode_field(&f.values, &f.shape, &o)
                .unwrap_or_else(|e| panic!("{} at {rel}: {e}", f.name));
            let (h, out) = decode_field(&file, &DecodeOptions::default()).unwrap();
            let mut worst = 0f64;
            for (i, (&a, &b)) in f.values.iter().zip(&out).enumerate() {
                let exact = !a.is_finite() || f.fill.is_some_and(|x| x.to_bits() == a.to_bits());
                if exact {
                    assert_eq!(a.to_bits(), b.to_bits(), "{}: value {i} not kept", f.name);
                } else {
                    worst = worst.max((a as f64 - b as f64).abs());
                }
            }
            assert!(
                worst <= h.bound,
                "{} at {rel}: {worst} > {}",
                f.name,
                h.bound
            );
            println!(
                "{} rel {rel}: ratio {:.2}, max error {worst:.3e} (bound {:.3e}), {} runs",
                f.name,
                (f.values.len() * 4) as f64 / file.len() as f64,
                h.bound,
                h.runs
            );
            files.push((file, out));
        }
        #[cfg(feature = "gpu")]
        if let Some(gpu) = gpu {
            let refs: Vec<&[u8]> = files.iter().map(|(f, _)| f.as_slice()).collect();
            let batch = l3::field::gpu::decode_fields(gpu, &refs).unwrap();
            for (k, (_, cpu)) in files.iter().enumerate() {
                let got = batch.read_back_field(k).unwrap();
                assert!(
                    got.len() == cpu.len()
                        && got.iter().zip(cpu).all(|(a, b)| a.to_bits() == b.to_bits()),
                    "{}: GPU field {k} differs from the CPU's",
                    f.name
                );
            }
        }
    }
}

/// A field with exact runs (NaNs) followed in one batch by fields without any: each field's
/// runs binding must lie inside the runs buffer (the last field's used to start at its end,
/// a wgpu validation panic on lavapipe), and every field decodes as on the CPU.
#[cfg(feature = "gpu")]
#[test]
fn gpu_batch_of_fields_with_and_without_exact_runs() {
    let Some(gpu) = gpu_support::gpu() else {
        return;
    };
    let (ny, nx) = (24u32, 40u32);
    let smooth: Vec<f32> = (0..ny * nx)
        .map(|i| ((i / nx) as f32 * 0.2).sin() + (i % nx) as f32 * 0.01)
        .collect();
    let mut holes = smooth.clone();
    for i in (0..holes.len()).step_by(37) {
        holes[i] = f32::NAN;
    }
    let o = FieldOptions::new(Bound::Absolute(1e-3));
    let with_runs = encode_field(&holes, &[ny, nx], &o).unwrap();
    let without = encode_field(&smooth, &[ny, nx], &o).unwrap();
    for order in [
        vec![&with_runs, &without],
        vec![&without, &with_runs, &without],
        vec![&without, &without],
    ] {
        let refs: Vec<&[u8]> = order.iter().map(|f| f.as_slice()).collect();
        let batch = l3::field::gpu::decode_fields(gpu, &refs).unwrap();
        for (k, f) in order.iter().enumerate() {
            let (_, cpu) = decode_field(f, &DecodeOptions::default()).unwrap();
            let got = batch.read_back_field(k).unwrap();
            assert!(
                got.len() == cpu.len()
                    && got
                        .iter()
                        .zip(&cpu)
                        .all(|(a, b)| a.to_bits() == b.to_bits()),
                "GPU field {k} of {} differs from the CPU's",
                order.len()
            );
        }
    }
}
