//! Error-bounded arrays of 1 to 4 axes on the GPU (`l3::field::gpu::decode_bounded_fields`,
//! `.l3f` version 3, lavapipe in CI): bit for bit the CPU decoder's values for every shared
//! float32 array (`../shared/data/float32` or `$L3_TEST_DATA/float32`) at relative bounds
//! 1e-2, 1e-3 and 1e-4, as 1-D, in its own shape and as 4-D, with either predictor (the
//! first 2^16 values of each; the whole arrays once, the encoder's choice); corrupt files
//! (bit flips with the CRC mended, truncations) are refused exactly when the CPU refuses
//! them, naming the file; the dispatch count of a batch is its token rounds, passes and
//! prefix-sum stages and one; a batch over a 1 MiB binding splits into submissions;
//! prefix-sum lines and segments longer than llvmpipe's loop limit decode in blocks and
//! rounds.
#![cfg(all(feature = "gpu", feature = "dataset"))]

mod common;

#[path = "common/gpu_support.rs"]
mod gpu_support;

use l3::decode::DecodeOptions;
use l3::field::gpu::decode_bounded_fields;
use l3::field::{decode_bounded, encode_bounded, parse_bounded, BoundedOptions, Predictor};

type Array = common::Float32Array;

fn shared_arrays() -> Vec<Array> {
    common::float32_arrays()
}

/// The absolute bound `rel x (max - min)` of the regular values.
fn absolute(values: &[f32], fill: Option<f32>, rel: f64) -> f64 {
    let (mut lo, mut hi) = (f64::MAX, f64::MIN);
    for &v in values {
        if v.is_finite() && Some(v) != fill {
            lo = lo.min(v as f64);
            hi = hi.max(v as f64);
        }
    }
    (rel * (hi - lo)).max(1e-30)
}

/// The array's first slices along axis 0 (at most `max` values, one slice at least).
fn crop(shape: &[u32], values: &[f32], max: usize) -> (Vec<u32>, Vec<f32>) {
    let slice: usize = shape[1..].iter().map(|&d| d as usize).product();
    let rows = (max / slice).clamp(1, shape[0] as usize);
    let mut s = shape.to_vec();
    s[0] = rows as u32;
    (s, values[..rows * slice].to_vec())
}

/// `values` as 1-D, in `shape` and as 4-D (`2 x 3 x 5 x m`, the first `30 m` values).
fn shapes(shape: &[u32], values: &[f32]) -> Vec<(Vec<u32>, Vec<f32>)> {
    let n = values.len();
    let m = n / 30;
    let mut out = vec![
        (vec![n as u32], values.to_vec()),
        (shape.to_vec(), values.to_vec()),
    ];
    if m > 0 {
        out.push((vec![2, 3, 5, m as u32], values[..30 * m].to_vec()));
    }
    out
}

fn encode(
    values: &[f32],
    shape: &[u32],
    fill: Option<f32>,
    bound: f64,
    p: Option<Predictor>,
) -> Option<Vec<u8>> {
    let opts = BoundedOptions {
        fill_value: fill,
        predictor: p,
        ..BoundedOptions::new(bound)
    };
    // A bound too tight for the range (past 2^23 lattice values or 2^16 bins) is stored
    // exactly, as a lossless file: not a version 3 file to decode here.
    let file = encode_bounded(values, shape, &opts).unwrap();
    (l3::field::field_version(&file) == Some(l3::field::BOUNDED_VERSION)).then_some(file)
}

/// Decodes `files` in one GPU batch and compares every array with the CPU decoder.
fn check(files: &[(String, Vec<u8>)]) -> u32 {
    let gpu = gpu_support::gpu().expect("an adapter");
    let refs: Vec<&[u8]> = files.iter().map(|(_, f)| &f[..]).collect();
    let o = DecodeOptions::default();
    let batch = decode_bounded_fields(gpu, &refs, &o).unwrap();
    for (i, (name, file)) in files.iter().enumerate() {
        let (_, want) = decode_bounded(file, &o).unwrap();
        let got = batch.read_back_array(i).unwrap();
        assert_eq!(got.len(), want.len(), "{name}");
        let first = got
            .iter()
            .zip(&want)
            .position(|(a, b)| a.to_bits() != b.to_bits());
        assert!(
            first.is_none(),
            "{name}: GPU differs from the CPU at {first:?}"
        );
    }
    batch.dispatches
}

#[test]
fn shared_arrays_decode_bit_for_bit() {
    if gpu_support::gpu().is_none() {
        return;
    }
    let arrays = shared_arrays();
    eprintln!("{} shared arrays", arrays.len());
    let mut files = Vec::new();
    for (name, shape, values, fill) in &arrays {
        let (shape, values) = crop(shape, values, 1 << 16);
        for (s, v) in shapes(&shape, &values) {
            for rel in [1e-2, 1e-3, 1e-4] {
                let bound = absolute(&v, *fill, rel);
                for p in [Predictor::Lattice, Predictor::Differences] {
                    if let Some(f) = encode(&v, &s, *fill, bound, Some(p)) {
                        files.push((format!("{name} {s:?} {rel} {p:?}"), f));
                    }
                }
            }
        }
    }
    let headers: Vec<_> = files
        .iter()
        .map(|(_, f)| parse_bounded(f).unwrap())
        .collect();
    for nd in 1..=4 {
        for p in [Predictor::Lattice, Predictor::Differences] {
            let n = headers
                .iter()
                .filter(|h| h.shape.len() == nd && h.predictor == p)
                .count();
            assert!(arrays.is_empty() || n > 0, "{nd} axes, {p:?}: no case");
        }
    }
    // Both pass kinds and the runs are covered.
    let cubic = headers.iter().flat_map(|h| &h.cubic);
    let (cub, lin) = cubic.fold((0, 0), |(c, l), &k| (c + k as usize, l + !k as usize));
    assert!(
        arrays.is_empty() || (cub > 0 && lin > 0),
        "{cub} cubic, {lin} linear"
    );
    eprintln!("{} files in one batch", files.len());
    let dispatches = check(&files);
    eprintln!("{dispatches} dispatches");
    // Whole arrays, the encoder's choice, one batch each.
    let mut whole = 0;
    for (name, shape, values, fill) in &arrays {
        let f = encode(values, shape, *fill, absolute(values, *fill, 1e-3), None).unwrap();
        let d = check(&[(format!("{name} whole 1e-3"), f)]);
        eprintln!("{name} {shape:?}: {d} dispatches");
        whole += 1;
    }
    assert_eq!(whole, arrays.len());
}

/// The CRC-32 at the end mended after a change.
fn fix_crc(file: &mut [u8]) {
    let body = file.len() - 4;
    let crc = crc32fast::hash(&file[..body]);
    file[body..].copy_from_slice(&crc.to_le_bytes());
}

/// A smooth field with NaN, infinities and a fill value sprinkled in.
fn synthetic(n: usize) -> Vec<f32> {
    (0..n)
        .map(|i| {
            let x = i as f32 * 0.0137;
            match i % 211 {
                3 => f32::NAN,
                7 => f32::INFINITY,
                13 => -9999.0,
                _ => x.sin() * 40.0 + (x * 0.31).cos() * 3.0,
            }
        })
        .collect()
}

#[test]
fn corrupt_files_are_refused_as_the_cpu_refuses_them() {
    let Some(gpu) = gpu_support::gpu() else {
        return;
    };
    let v = synthetic(20000);
    let o = DecodeOptions::default();
    let (mut refused, mut on_gpu, mut decoded) = (0, 0, 0);
    for (p, shape) in [
        (Predictor::Lattice, &[100u32, 200][..]),
        (Predictor::Differences, &[20000][..]),
        (Predictor::Lattice, &[4, 5, 10, 100][..]),
    ] {
        let opts = BoundedOptions {
            fill_value: Some(-9999.0),
            predictor: Some(p),
            chunk_log2: 12,
            segments: 4,
            ..BoundedOptions::new(1e-2)
        };
        let good = encode_bounded(&v, shape, &opts).unwrap();
        for k in 0..60usize {
            let mut bad = good.clone();
            if k % 10 == 9 {
                bad.truncate(bad.len() * k / 70);
                if bad.len() >= 4 {
                    fix_crc(&mut bad);
                }
            } else {
                let at = (k * 7919 + 13) % (bad.len() - 4);
                bad[at] ^= 1 << (k % 8);
                fix_crc(&mut bad);
            }
            let cpu = decode_bounded(&bad, &o);
            let r = decode_bounded_fields(gpu, &[&good, &bad], &o);
            match (&cpu, &r) {
                (Err(_), Err(e)) => {
                    refused += 1;
                    on_gpu += e.to_string().contains("GPU") as usize;
                    assert!(e.to_string().contains("image 1"), "names the file: {e}");
                }
                (Ok((_, want)), Ok(batch)) => {
                    decoded += 1;
                    let got = batch.read_back_array(1).unwrap();
                    assert!(got
                        .iter()
                        .zip(want)
                        .all(|(a, b)| a.to_bits() == b.to_bits()));
                    assert_eq!(got.len(), want.len());
                }
                _ => panic!(
                    "CPU {:?} but GPU {:?}",
                    cpu.as_ref().err(),
                    r.as_ref().err()
                ),
            }
        }
    }
    eprintln!(
        "180 corruptions: {refused} refused ({on_gpu} by the GPU's flags), {decoded} decoded \
         as on the CPU"
    );
    assert!(
        on_gpu > 0,
        "some corruptions are refused by the GPU's flags"
    );
}

#[test]
fn dispatches_are_the_passes_and_prefix_sums_plus_two() {
    let Some(gpu) = gpu_support::gpu() else {
        return;
    };
    let o = DecodeOptions::default();
    let v = synthetic(1 << 16);
    let lattice = |shape: &[u32]| {
        let opts = BoundedOptions {
            fill_value: Some(-9999.0),
            predictor: Some(Predictor::Lattice),
            ..BoundedOptions::new(1e-2)
        };
        encode_bounded(&v, shape, &opts).unwrap()
    };
    // 1-D of 2^16: value 0 and 16 levels of one pass; 4-D 16^4: value 0 and 4 levels of 4.
    let one = lattice(&[1 << 16]);
    let four = lattice(&[16, 16, 16, 16]);
    let diff = encode_bounded(
        &v,
        &[256, 256],
        &BoundedOptions {
            fill_value: Some(-9999.0),
            predictor: Some(Predictor::Differences),
            ..BoundedOptions::new(1e-2)
        },
    )
    .unwrap();
    // Lines of 256 values are one block: one prefix-sum dispatch per axis.
    let axes = parse_bounded(&diff).unwrap().axes[0].count_ones();
    for (files, want) in [
        (vec![&one[..]], 1 + 17 + 1),
        (vec![&four[..]], 1 + 17 + 1),
        (vec![&diff[..]], 1 + axes + 1),
        (vec![&one[..], &four[..], &diff[..]], 1 + axes + 17 + 1),
    ] {
        let batch = decode_bounded_fields(gpu, &files, &o).unwrap();
        let input: usize = files.iter().map(|f| f.len()).sum();
        let decoded = batch.headers.iter().map(|h| h.len() * 4).sum::<u64>();
        eprintln!(
            "{} files: {} dispatches, {} bytes uploaded ({input} of files) for {decoded} decoded",
            files.len(),
            batch.dispatches,
            batch.uploaded_bytes
        );
        assert_eq!(batch.dispatches, want);
        assert!(batch.uploaded_bytes >= input as u64);
    }
    let empty = decode_bounded_fields(gpu, &[], &o).unwrap();
    assert!(empty.offsets.is_empty());
}

#[test]
fn a_batch_over_a_binding_splits_into_submissions() {
    if gpu_support::gpu().is_none() {
        return;
    }
    let adapter = l3::gpu::select_adapter().unwrap();
    let mut limits = l3::gpu::required_limits(&adapter);
    limits.max_storage_buffer_binding_size = 1 << 20;
    let (device, queue) = pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
        label: Some("1 MiB bindings"),
        required_limits: limits,
        ..Default::default()
    }))
    .unwrap();
    let small = l3::gpu::GpuDecoder::new(&device, &queue).unwrap();
    // 12 arrays of 64 Ki values (256 KiB of output each): 3 MiB of output, residuals and
    // decode tables beyond a 1 MiB binding. (Lines of at most 65536 values: llvmpipe ends
    // an invocation's loops after 65535 iterations in all, so a longer prefix-sum line
    // fails on lavapipe; see the module head.)
    let v = synthetic(64 << 10);
    let mut files = Vec::new();
    for (k, shape) in [
        &[64u32 << 10][..],
        &[64, 1024],
        &[2, 32, 32, 32],
        &[4, 16, 1024],
    ]
    .iter()
    .enumerate()
    {
        for p in [
            Predictor::Lattice,
            Predictor::Differences,
            Predictor::Lattice,
        ] {
            let opts = BoundedOptions {
                fill_value: Some(-9999.0),
                predictor: Some(p),
                chunk_log2: 10 + k as u8,
                ..BoundedOptions::new(1e-2)
            };
            files.push(encode_bounded(&v, shape, &opts).unwrap());
        }
    }
    let refs: Vec<&[u8]> = files.iter().map(|f| &f[..]).collect();
    let o = DecodeOptions::default();
    let batch = decode_bounded_fields(&small, &refs, &o).unwrap();
    eprintln!(
        "{} arrays: {} submissions, {} dispatches",
        files.len(),
        batch.submissions,
        batch.dispatches
    );
    assert!(batch.submissions >= 3, "{} submissions", batch.submissions);
    for (i, f) in files.iter().enumerate() {
        let (_, want) = decode_bounded(f, &o).unwrap();
        let got = batch.read_back_array(i).unwrap();
        assert!(
            got.iter()
                .zip(&want)
                .all(|(a, b)| a.to_bits() == b.to_bits()),
            "array {i}"
        );
    }
    // A corrupt file in a later sub-batch is named by its index in the whole batch.
    let mut bad = files[10].clone();
    let at = bad.len() - 40;
    bad[at] ^= 0x10;
    gpu_support::fix_crc(&mut bad);
    let mut refs = refs.clone();
    refs[10] = &bad;
    match (
        decode_bounded(&bad, &o),
        decode_bounded_fields(&small, &refs, &o),
    ) {
        (Err(_), Err(e)) => assert!(e.to_string().contains("image 10"), "{e}"),
        (Ok(_), Ok(_)) => {}
        (c, g) => panic!("CPU {:?}, GPU {:?}", c.err(), g.err()),
    }
}

#[test]
fn long_lines_decode_in_blocks() {
    if gpu_support::gpu().is_none() {
        return;
    }
    // Prefix-sum lines of 2^17 + 3 and 70001 values: longer than one invocation may loop on
    // llvmpipe (65535 iterations), so they sum in blocks.
    let v = synthetic(1 << 18);
    let mut files = Vec::new();
    for shape in [&[(1u32 << 17) + 3][..], &[3, 70001], &[70001, 3]] {
        let n = shape.iter().product::<u32>() as usize;
        let opts = BoundedOptions {
            fill_value: Some(-9999.0),
            predictor: Some(Predictor::Differences),
            ..BoundedOptions::new(1e-2)
        };
        let f = encode_bounded(&v[..n], shape, &opts).unwrap();
        files.push((format!("{shape:?}"), f));
    }
    for f in &files {
        check(std::slice::from_ref(f));
    }
    check(&files);
}

/// A segment of 2^20 values decodes bit for bit. Before segments went in rounds, lavapipe
/// refused it as corrupt data (flag TRAILING).
#[test]
fn a_segment_past_one_round_decodes() {
    if gpu_support::gpu().is_none() {
        return;
    }
    // One segment of 2^20 values (chunk 2^20, one segment), both predictors: more symbols
    // than one invocation may loop over on llvmpipe, so the segment decodes in rounds.
    let v = synthetic(1 << 20);
    let mut files = Vec::new();
    for p in [Predictor::Differences, Predictor::Lattice] {
        let opts = BoundedOptions {
            fill_value: Some(-9999.0),
            predictor: Some(p),
            chunk_log2: 20,
            segments: 1,
            ..BoundedOptions::new(1e-3)
        };
        let f = encode_bounded(&v, &[1 << 20], &opts).unwrap();
        files.push((format!("{p:?}"), f));
    }
    // 2^20 / 2^15 rounds, three prefix-sum stages (a line of 256 blocks), the finish.
    assert_eq!(check(&files[..1]), 32 + 3 + 1);
    for f in &files {
        check(std::slice::from_ref(f));
    }
    check(&files);
}
