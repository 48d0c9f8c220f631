//! Tests of the GPU plan of error-bounded arrays, without a GPU: the pass tables enumerate
//! the CPU's targets, and the twin pipeline (`run_twin`) equals [`decode_bounded`] bit for
//! bit, refusing exactly the files the CPU refuses.

use super::*;
use crate::field::bounded::predict::{passes, Geometry};
use crate::field::{decode_bounded, encode_bounded, BoundedOptions};
use crate::gpu::abi;

/// The targets of a pass table entry as the shader enumerates them: (index, coordinate).
fn table_targets(p: &BoundedPass) -> Vec<(usize, usize)> {
    (0..p.count)
        .map(|t| {
            let mut r = t;
            let t3 = r % p.g3;
            r /= p.g3;
            let t2 = r % p.g2;
            r /= p.g2;
            let t1 = r % p.g1;
            let t0 = r / p.g1;
            let i = p.base + t0 * p.istep0 + t1 * p.istep1 + t2 * p.istep2 + t3 * p.istep3;
            let c = p.stride + 2 * p.stride * [t0, t1, t2, t3][p.axis as usize];
            (i as usize, c as usize)
        })
        .collect()
}

#[test]
fn pass_tables_enumerate_the_cpus_targets() {
    let shapes: [&[u32]; 9] = [
        &[1],
        &[2],
        &[7],
        &[1000],
        &[5, 3],
        &[17, 9],
        &[4, 4, 4],
        &[3, 1, 5, 2],
        &[2, 3, 5, 7],
    ];
    for shape in shapes {
        let nd = shape.len();
        let levels = crate::field::levels_for(shape) as u8;
        let orders: [Vec<u8>; 2] = [(0..nd as u8).collect(), (0..nd as u8).rev().collect()];
        for order in orders {
            let h = BoundedHeader {
                shape: shape.to_vec(),
                bound: 1.0,
                offset: 0.0,
                unit: 0.1,
                fill_value: None,
                predictor: Predictor::Lattice,
                axes: order.clone(),
                segments: 1,
                chunk_log2: 8,
                levels,
                steps: vec![4; levels as usize + 1],
                cubic: (0..levels as usize * nd).map(|j| j % 2 == 1).collect(),
                runs: 0,
                runs_len: 0,
            };
            let table = lattice_passes(&h);
            let geo = Geometry::new(shape);
            let cpu = passes(nd, levels as u32, &order);
            assert_eq!(table.len(), cpu.len() + 1, "{shape:?}");
            assert_eq!(table_targets(&table[0]), [(0, 0)]);
            let mut stream = 1;
            for (j, (t, p)) in table[1..].iter().zip(&cpu).enumerate() {
                let mut want = Vec::new();
                geo.for_targets(p, |i, c| want.push((i, c)));
                assert_eq!(table_targets(t), want, "{shape:?} {order:?} pass {j}");
                assert_eq!(t.stream as usize, stream, "{shape:?} pass {j}");
                stream += want.len();
                if !want.is_empty() {
                    let (len, sd) = geo.along(p);
                    assert_eq!((t.len as usize, t.dist as usize), (len, sd));
                    assert_eq!(t.kind == abi::PASS_CUBIC, h.cubic[j]);
                }
            }
        }
    }
}

/// A smooth field with NaN, infinities and a fill value sprinkled in.
fn values(n: usize, seed: u32) -> Vec<f32> {
    (0..n)
        .map(|i| {
            let x = i as f32 * 0.0137 + seed as f32;
            match (i * 7 + seed as usize) % 211 {
                3 => f32::from_bits(0x7fc0_0001 + i as u32 % 5),
                7 => f32::NEG_INFINITY,
                13 => -9999.0,
                _ => x.sin() * 40.0 + (x * 0.31).cos() * 3.0 + (i % 5) as f32 * 0.01,
            }
        })
        .collect()
}

/// Decodes `files` on the twin in one batch and compares each with the CPU decoder, bits
/// and accept/refuse alike; returns how many the twin (its flags) refused.
fn check(files: &[Vec<u8>]) -> usize {
    let o = DecodeOptions::default();
    let refs: Vec<&[u8]> = files.iter().map(|f| &f[..]).collect();
    let plan = plan_bounded(&refs, &o).expect("plan");
    let (output, errors) = run_twin(&plan);
    let mut refused = 0;
    for (f, file) in files.iter().enumerate() {
        match decode_bounded(file, &o) {
            Ok((_, want)) => {
                assert_eq!(errors[f], 0, "file {f}: twin flags {:#x}", errors[f]);
                let a = &plan.arrays[f];
                let got = &output[a.out_word as usize..][..want.len()];
                let first = got.iter().zip(&want).position(|(g, w)| *g != w.to_bits());
                assert!(first.is_none(), "file {f}: twin differs at {first:?}");
            }
            Err(e) => {
                assert_ne!(
                    errors[f], 0,
                    "file {f}: the CPU refuses ({e}), the twin not"
                );
                refused += 1;
            }
        }
    }
    refused
}

#[test]
fn twin_matches_the_cpu_decoder() {
    let shapes: [&[u32]; 9] = [
        &[1],
        &[5000],
        // Lines of several prefix-sum blocks.
        &[150_001],
        &[2, 9000, 2],
        &[61, 83],
        &[9, 17, 23],
        &[3, 5, 7, 11],
        &[1, 1, 300],
        &[2, 1, 3, 129],
    ];
    let mut files = Vec::new();
    for (s, shape) in shapes.iter().enumerate() {
        let n = shape.iter().product::<u32>() as usize;
        let v = values(n, s as u32);
        for predictor in [Predictor::Lattice, Predictor::Differences] {
            for (bound, chunk_log2, segments) in [(1e-2, 8, 3), (1e-1, 10, 8), (3.0, 16, 1)] {
                let opts = BoundedOptions {
                    fill_value: Some(-9999.0),
                    predictor: Some(predictor),
                    chunk_log2,
                    segments,
                    ..BoundedOptions::new(bound)
                };
                files.push(encode_bounded(&v, shape, &opts).expect("encode"));
            }
        }
    }
    let refs: Vec<&[u8]> = files.iter().map(|f| &f[..]).collect();
    let plan = plan_bounded(&refs, &DecodeOptions::default()).expect("plan");
    assert!(plan.arrays.iter().any(|a| a.run_count > 0), "some runs");
    assert!(
        plan.arrays
            .iter()
            .any(|a| a.predictor == 1 && a.shape0 > 1 && a.axes != 0),
        "4-D differences"
    );
    assert!(
        plan.own.passes.iter().any(|p| p.kind == abi::PASS_CUBIC),
        "cubic passes"
    );
    assert!(
        plan.own.passes.iter().any(|p| p.kind == abi::PASS_LINEAR),
        "linear passes"
    );
    // Every file alone, then all of them in one batch.
    for f in &files {
        assert_eq!(check(std::slice::from_ref(f)), 0);
    }
    assert_eq!(check(&files), 0);
}

/// A segment of 2^20 values (chunk 2^20, one segment) with either predictor: its state
/// words are planned and the twin's 32 rounds give the CPU decoder's values.
#[test]
fn a_segment_past_one_round_decodes_on_the_twin() {
    let v = values(1 << 20, 3);
    let files: Vec<Vec<u8>> = [Predictor::Lattice, Predictor::Differences]
        .into_iter()
        .map(|predictor| {
            let opts = BoundedOptions {
                fill_value: Some(-9999.0),
                predictor: Some(predictor),
                chunk_log2: 20,
                segments: 1,
                ..BoundedOptions::new(1e-3)
            };
            encode_bounded(&v, &[1 << 20], &opts).expect("encode")
        })
        .collect();
    let refs: Vec<&[u8]> = files.iter().map(|f| &f[..]).collect();
    let plan = plan_bounded(&refs, &DecodeOptions::default()).expect("plan");
    assert_eq!(segment_rounds(&plan.segments), 32);
    assert!(plan.segments.iter().all(|s| s.state != u32::MAX));
    assert_eq!(check(&files), 0);
}

/// The CRC-32 at the end mended after a change.
fn fix_crc(file: &mut [u8]) {
    let body = file.len() - 4;
    let crc = crc32fast::hash(&file[..body]);
    file[body..].copy_from_slice(&crc.to_le_bytes());
}

#[test]
fn corrupt_files_are_refused_as_the_cpu_refuses_them() {
    let v = values(20000, 9);
    let mut refused_by_twin = 0;
    let (mut planned, mut decoded) = (0, 0);
    for (predictor, shape) in [
        (Predictor::Lattice, &[100u32, 200][..]),
        (Predictor::Differences, &[20000][..]),
        (Predictor::Lattice, &[4, 5, 10, 100][..]),
    ] {
        let opts = BoundedOptions {
            fill_value: Some(-9999.0),
            predictor: Some(predictor),
            chunk_log2: 12,
            segments: 4,
            ..BoundedOptions::new(1e-2)
        };
        let good = encode_bounded(&v, shape, &opts).expect("encode");
        let o = DecodeOptions::default();
        for k in 0..120usize {
            let mut bad = good.clone();
            if k % 10 == 9 {
                bad.truncate(bad.len() * k / 130);
                if bad.len() >= 4 {
                    fix_crc(&mut bad);
                }
            } else {
                // Bit flips over the whole file, the CRC mended so the checks behind it run.
                let at = (k * 7919 + 13) % (bad.len() - 4);
                bad[at] ^= 1 << (k % 8);
                fix_crc(&mut bad);
            }
            let cpu = decode_bounded(&bad, &o);
            match plan_bounded(&[&good, &bad], &o) {
                Err(e) => {
                    assert!(cpu.is_err(), "the plan refuses ({e}) what the CPU decodes");
                    assert!(e.to_string().contains("image 1"), "names the file: {e}");
                }
                Ok(_) => {
                    planned += 1;
                    refused_by_twin += check(&[good.clone(), bad]);
                    decoded += cpu.is_ok() as usize;
                }
            }
        }
    }
    eprintln!(
        "{planned} corrupt files passed the plan: {refused_by_twin} refused by the twin's \
         flags, {decoded} decoded as on the CPU"
    );
    assert!(
        refused_by_twin > 0,
        "some corruptions are refused by the flags"
    );
}

/// A shared array: name, shape, values and fill value.
#[cfg(feature = "dataset")]
pub(crate) type Shared = (String, Vec<u32>, Vec<f32>, Option<f32>);

/// The shared float32 arrays (`$L3_TEST_DATA/float32` or `../shared/data/float32`); none
/// when the corpus is absent (an error in CI).
#[cfg(feature = "dataset")]
pub(crate) fn shared_arrays() -> Vec<Shared> {
    let root = std::env::var_os("L3_TEST_DATA")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/data"))
        .join("float32");
    let Ok(dir) = std::fs::read_dir(&root) else {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "CI=true but no arrays at {}",
            root.display()
        );
        return Vec::new();
    };
    let mut paths: Vec<_> = dir
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "f32"))
        .collect();
    paths.sort();
    paths
        .into_iter()
        .map(|p| {
            let meta: serde_json::Value =
                serde_json::from_slice(&std::fs::read(p.with_extension("json")).expect("json"))
                    .expect("sidecar");
            let shape = meta["shape"]
                .as_array()
                .expect("shape")
                .iter()
                .map(|d| d.as_u64().expect("axis") as u32)
                .collect();
            let values = std::fs::read(&p)
                .expect("values")
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .collect();
            let fill = meta["fill_value"].as_f64().map(|f| f as f32);
            let name = p.file_stem().expect("name").to_string_lossy().into_owned();
            (name, shape, values, fill)
        })
        .collect()
}

/// Every shared array (its first 2^16 values, whole slices along axis 0) as 1-D, in its own
/// shape and as 4-D, at relative bounds 1e-2, 1e-3 and 1e-4 with both predictors: the twin
/// equals the CPU decoder bit for bit, array by array and all in one batch.
#[cfg(feature = "dataset")]
#[test]
fn twin_matches_the_cpu_on_the_shared_arrays() {
    let arrays = shared_arrays();
    let mut files = Vec::new();
    let mut kinds = std::collections::BTreeSet::new();
    for (_, shape, values, fill) in &arrays {
        let slice: usize = shape[1..].iter().map(|&d| d as usize).product();
        let rows = ((1 << 16) / slice).clamp(1, shape[0] as usize);
        let mut own = shape.clone();
        own[0] = rows as u32;
        let v = &values[..rows * slice];
        let m = v.len() / 30;
        let cases: [(Vec<u32>, &[f32]); 3] = [
            (vec![v.len() as u32], v),
            (own, v),
            (vec![2, 3, 5, m as u32], &v[..30 * m]),
        ];
        for (s, v) in cases {
            let (lo, hi) = v
                .iter()
                .filter(|x| x.is_finite() && Some(**x) != *fill)
                .fold((f64::MAX, f64::MIN), |(lo, hi), &x| {
                    (lo.min(x as f64), hi.max(x as f64))
                });
            for rel in [1e-2, 1e-3, 1e-4] {
                for p in [Predictor::Lattice, Predictor::Differences] {
                    let opts = BoundedOptions {
                        fill_value: *fill,
                        predictor: Some(p),
                        ..BoundedOptions::new((rel * (hi - lo)).max(1e-30))
                    };
                    // A bound too tight for the range is refused by the encoder.
                    if let Ok(f) = encode_bounded(v, &s, &opts) {
                        kinds.insert((s.len(), p == Predictor::Lattice));
                        assert_eq!(check(std::slice::from_ref(&f)), 0);
                        files.push(f);
                    }
                }
            }
        }
    }
    if !arrays.is_empty() {
        assert_eq!(kinds.len(), 8, "1 to 4 axes, both predictors: {kinds:?}");
        assert!(files.len() >= 100, "{} files", files.len());
    }
    assert_eq!(check(&files), 0);
}

#[test]
fn batches_split_where_a_binding_would_outgrow_the_limit() {
    let mut files = Vec::new();
    for (s, shape) in [&[3000u32][..], &[40, 50], &[3, 4, 5, 30], &[7, 300]]
        .iter()
        .enumerate()
    {
        let n = shape.iter().product::<u32>() as usize;
        for predictor in [Predictor::Lattice, Predictor::Differences] {
            let opts = BoundedOptions {
                fill_value: Some(-9999.0),
                predictor: Some(predictor),
                chunk_log2: 9,
                ..BoundedOptions::new(1e-2)
            };
            files.push(encode_bounded(&values(n, s as u32), shape, &opts).expect("encode"));
        }
    }
    let refs: Vec<&[u8]> = files.iter().map(|f| &f[..]).collect();
    let o = DecodeOptions::default();
    let limits = SplitLimits {
        max_binding: 128 << 10,
        max_buffer: u64::MAX,
    };
    let plans = plan_bounded_batches(&refs, &o, limits).expect("plan");
    assert!(plans.len() >= 3, "{} sub-batches", plans.len());
    let total: u64 = plans.iter().map(|p| p.output_words as u64).sum();
    let mut output = vec![0u32; total as usize];
    let mut next = 0;
    for p in &plans {
        assert_eq!(p.own.first_file, next, "consecutive files");
        next += p.arrays.len();
        let (out, errors) = run_twin(p);
        assert!(errors.iter().all(|&e| e == 0));
        output[p.own.output_base as usize..][..out.len()].copy_from_slice(&out);
    }
    assert_eq!(next, files.len());
    for p in &plans {
        for (k, a) in p.arrays.iter().enumerate() {
            let (_, want) = decode_bounded(&files[p.own.first_file + k], &o).expect("cpu");
            let at = (p.own.output_base + a.out_word as u64) as usize;
            let got = &output[at..][..want.len()];
            assert!(got.iter().zip(&want).all(|(g, w)| *g == w.to_bits()));
        }
    }
    // A file whose tables alone outgrow the binding is refused, naming it.
    let tiny = SplitLimits {
        max_binding: 16 << 10,
        max_buffer: u64::MAX,
    };
    let e = plan_bounded_batches(&refs[..2], &o, tiny).expect_err("too large");
    assert!(e.to_string().contains("image 0"), "{e}");
    // The output buffer holds every sub-batch.
    let small_buffer = SplitLimits {
        max_binding: 128 << 10,
        max_buffer: 64 << 10,
    };
    assert!(plan_bounded_batches(&refs, &o, small_buffer).is_err());
}
