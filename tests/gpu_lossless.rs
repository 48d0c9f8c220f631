//! Lossless float arrays on the GPU (`l3::field::gpu::decode_lossless_fields`, lavapipe in
//! CI): bit for bit the CPU decoder's bytes for every shared float32 array
//! (`../shared/data/float32` or `$L3_TEST_DATA/float32`), 1-D to 4-D float32, float16 and
//! bfloat16 arrays with NaN payloads, -0.0, infinities, subnormals and fill runs, float-mult
//! and value-table arrays, second differences, several files in one batch; a corrupt segment or an index past
//! the value table comes back as the file's error.
#![cfg(all(feature = "gpu", feature = "dataset"))]

mod common;

#[path = "common/gpu_support.rs"]
mod gpu_support;

use l3::decode::DecodeOptions;
use l3::field::gpu::decode_lossless_fields;
use l3::field::{decode_lossless, encode_lossless, parse_lossless, FloatSlice, LosslessOptions};

/// The shared float32 arrays, losslessly encoded (their fill value declared), by name.
fn shared_files() -> Vec<(String, Vec<u8>)> {
    common::float32_arrays()
        .into_iter()
        .map(|(name, shape, values, fill)| {
            let opts = LosslessOptions {
                fill_value: fill.map(f32::to_bits),
                ..Default::default()
            };
            let file = encode_lossless(FloatSlice::F32(&values), &shape, &opts).unwrap();
            (name, file)
        })
        .collect()
}

/// Synthetic arrays: every float type in 1 to 4 axes with the special values, and a decimal
/// grid that codes as float-mult.
fn synthetic_files() -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let shapes: [&[u32]; 4] = [&[7001], &[123, 77], &[6, 35, 41], &[3, 4, 13, 29]];
    // Float-mult files: the value table (which would win on these few decimals) left out.
    let no_table = LosslessOptions {
        value_table: false,
        ..Default::default()
    };
    for shape in shapes {
        let n = shape.iter().product::<u32>() as usize;
        let v: Vec<f32> = (0..n)
            .map(|i| {
                let x = i as f32 * 0.011;
                match i % 89 {
                    3 => f32::from_bits(0x7fc0_0000 | (i as u32 % 4000)),
                    5 => -0.0,
                    7 => f32::NEG_INFINITY,
                    11 => f32::from_bits(3 + i as u32 % 100),
                    13 => -999.0,
                    _ => x.sin() * 30.0 + x * 0.01,
                }
            })
            .collect();
        let opts = LosslessOptions {
            fill_value: Some((-999.0f32).to_bits()),
            chunk_log2: 12,
            ..Default::default()
        };
        let name = format!("{shape:?}");
        out.push((
            format!("f32 {name}"),
            encode_lossless(FloatSlice::F32(&v), shape, &opts).unwrap(),
        ));
        let bf: Vec<u16> = v.iter().map(|x| (x.to_bits() >> 16) as u16).collect();
        let h: Vec<u16> = v
            .iter()
            .map(|x| (x.to_bits() >> 16) as u16 ^ (x.to_bits() as u16 & 0x3f))
            .collect();
        let o16 = LosslessOptions {
            chunk_log2: 11,
            ..Default::default()
        };
        out.push((
            format!("bf16 {name}"),
            encode_lossless(FloatSlice::BF16(&bf), shape, &o16).unwrap(),
        ));
        out.push((
            format!("f16 {name}"),
            encode_lossless(FloatSlice::F16(&h), shape, &o16).unwrap(),
        ));
        let dec: Vec<f32> = (0..n)
            .map(|i| ((i as f32 * 0.02).sin() * 1000.0).round() / 100.0)
            .collect();
        out.push((
            format!("mult {name}"),
            encode_lossless(FloatSlice::F32(&dec), shape, &no_table).unwrap(),
        ));
        // Unpacked int16 on a coarse grid, NaN and fill cells among them: a value table.
        let unpacked: Vec<f32> = (0..n)
            .map(|i| match i % 97 {
                3 => f32::from_bits(0x7fc0_0000 | (i as u32 % 3)),
                13 => -999.0,
                _ => {
                    let q = ((i as f64 * 0.004).sin() * 30.0).round() * 240.0;
                    (q * -0.001_572_704_938 + 26.968_75) as f32
                }
            })
            .collect();
        out.push((
            format!("table {name}"),
            encode_lossless(FloatSlice::F32(&unpacked), shape, &opts).unwrap(),
        ));
        // Second differences along every axis, with the special values.
        let twice = LosslessOptions {
            axes: Some((1u8 << shape.len()) - 1),
            axes2: Some((1u8 << shape.len()) - 1),
            ..opts.clone()
        };
        out.push((
            format!("f32 second differences {name}"),
            encode_lossless(FloatSlice::F32(&v), shape, &twice).unwrap(),
        ));
        let pick = [0x3f80u16, 0xc2c8, 0x4700, 0x0001, 0x7f80, 0x8000, 0x7fc3];
        let scattered: Vec<u16> = (0..n).map(|i| pick[(i * i / 7) % 7]).collect();
        out.push((
            format!("table f16 {name}"),
            encode_lossless(FloatSlice::F16(&scattered), shape, &o16).unwrap(),
        ));
    }
    // A smooth 1-D signal of integers (a seismogram's counts): the encoder chooses second
    // differences along it.
    let (mut x, mut slope, mut r) = (0i64, 0i64, 0x9e37_79b9_7f4a_7c15u64);
    let signal: Vec<f32> = (0..30_000)
        .map(|_| {
            r ^= r << 13;
            r ^= r >> 7;
            r ^= r << 17;
            slope += (r % 9) as i64 - 4 - slope / 64;
            x += slope;
            x as f32
        })
        .collect();
    let file = encode_lossless(
        FloatSlice::F32(&signal),
        &[30_000],
        &LosslessOptions::default(),
    )
    .unwrap();
    assert_eq!(
        parse_lossless(&file).unwrap().axes2,
        1,
        "second differences chosen"
    );
    out.push(("f32 seismogram".into(), file));
    out
}

fn check(files: &[(String, Vec<u8>)]) {
    let gpu = gpu_support::gpu().expect("an adapter");
    let refs: Vec<&[u8]> = files.iter().map(|(_, f)| &f[..]).collect();
    let batch = decode_lossless_fields(gpu, &refs).unwrap();
    for (i, (name, file)) in files.iter().enumerate() {
        let (_, want) = decode_lossless(file, &DecodeOptions::default()).unwrap();
        let got = batch.read_back_array(i).unwrap();
        let first = got.iter().zip(want.as_bytes()).position(|(a, b)| a != b);
        assert!(
            got.len() == want.as_bytes().len() && first.is_none(),
            "{name}: GPU differs from the CPU at byte {first:?}"
        );
    }
}

#[test]
fn shared_arrays_decode_bit_for_bit() {
    if gpu_support::gpu().is_none() {
        return;
    }
    let files = shared_files();
    eprintln!("{} shared arrays", files.len());
    let gpu = gpu_support::gpu().unwrap();
    for (name, file) in &files {
        let b = decode_lossless_fields(gpu, &[&file[..]]).unwrap();
        let h = &b.headers[0];
        eprintln!(
            "{name}: shape {:?}, axes {:#b}: {} dispatches",
            h.shape, h.axes, b.dispatches
        );
    }
    // One batch per array, then all of them in one.
    for f in &files {
        check(std::slice::from_ref(f));
    }
    check(&files);
}

#[test]
fn synthetic_arrays_decode_bit_for_bit_in_one_batch() {
    if gpu_support::gpu().is_none() {
        return;
    }
    let files = synthetic_files();
    let mult = files
        .iter()
        .filter(|(_, f)| l3::field::parse_lossless(f).unwrap().mult_base.is_some())
        .count();
    assert!(mult >= 4, "the decimal grids code as float-mult ({mult})");
    let tables = files
        .iter()
        .filter(|(_, f)| !l3::field::parse_lossless(f).unwrap().table.is_empty())
        .count();
    assert!(
        tables >= 8,
        "the unpacked and scattered arrays take value tables ({tables})"
    );
    check(&files);
    let empty = decode_lossless_fields(gpu_support::gpu().unwrap(), &[]).unwrap();
    assert!(empty.offsets.is_empty());
}

#[test]
fn a_corrupt_segment_is_the_files_error() {
    let Some(gpu) = gpu_support::gpu() else {
        return;
    };
    let files = synthetic_files();
    let (_, good) = &files[0];
    // Flip bits in the middle of the chunk data, keep the CRC right: the CPU's head checks
    // may still pass, so either the CPU planner or the GPU must refuse it, as the CPU
    // decoder does.
    let (mut refused, mut on_gpu) = (0, 0);
    for k in 0..40 {
        let mut bad = good.clone();
        let at = bad.len() / 2 + k * 37;
        bad[at] ^= 0x5a;
        gpu_support::fix_crc(&mut bad);
        let cpu = decode_lossless(&bad, &DecodeOptions::default());
        let r = decode_lossless_fields(gpu, &[&files[1].1, &bad]);
        match (&cpu, &r) {
            (Err(_), Err(e)) => {
                refused += 1;
                on_gpu += e.to_string().contains("GPU") as usize;
                assert!(e.to_string().contains("image 1"), "names the file: {e}");
            }
            (Ok((_, want)), Ok(batch)) => {
                assert_eq!(batch.read_back_array(1).unwrap(), want.as_bytes());
            }
            _ => panic!(
                "CPU {:?} but GPU {:?}",
                cpu.as_ref().err(),
                r.as_ref().err()
            ),
        }
    }
    eprintln!("{refused} of 40 corruptions refused, {on_gpu} by the GPU's flags");
    assert!(
        on_gpu > 0,
        "some corruptions are refused by the GPU's flags"
    );
}

/// Values with NaN payloads, -0.0, infinities and subnormals among a smooth signal.
fn long_values(n: usize) -> Vec<f32> {
    (0..n)
        .map(|i| {
            let x = i as f32 * 0.0007;
            match i % 1009 {
                3 => f32::from_bits(0x7f80_0001 + i as u32 % 1000),
                5 => -0.0,
                7 => f32::INFINITY,
                11 => f32::from_bits(1 + i as u32 % 500),
                _ => x.sin() * 25.0 + (x * 3.1).cos(),
            }
        })
        .collect()
}

/// Arrays whose lines pass llvmpipe's 65535 loop iterations an invocation: 1-D float32 of
/// 65,600 and 1,000,003 values, a 2-D array of 70,000-value rows (differenced along both
/// axes), their float16 and bfloat16 forms, and a segment of 2^20 values (chunk 2^20, one
/// segment): bit for bit the CPU decoder's output. Before the line sums went in blocks and
/// segments in rounds, lavapipe summed only the first 65,536 values of a line (the rest
/// wrong, no flag) and refused the long segment as corrupt (flag TRAILING).
#[test]
fn long_lines_and_segments_decode_bit_for_bit() {
    let Some(gpu) = gpu_support::gpu() else {
        return;
    };
    let mut files = Vec::new();
    let shapes: [&[u32]; 3] = [&[65_600], &[1_000_003], &[3, 70_000]];
    for shape in shapes {
        let n = shape.iter().product::<u32>() as usize;
        let v = long_values(n);
        let opts = LosslessOptions {
            axes: Some((1u8 << shape.len()) - 1),
            ..Default::default()
        };
        let name = format!("{shape:?}");
        files.push((
            format!("f32 {name}"),
            encode_lossless(FloatSlice::F32(&v), shape, &opts).unwrap(),
        ));
        let bf: Vec<u16> = v.iter().map(|x| (x.to_bits() >> 16) as u16).collect();
        let h: Vec<u16> = v
            .iter()
            .map(|x| (x.to_bits() >> 16) as u16 ^ (x.to_bits() as u16 & 0x3f))
            .collect();
        files.push((
            format!("bf16 {name}"),
            encode_lossless(FloatSlice::BF16(&bf), shape, &opts).unwrap(),
        ));
        files.push((
            format!("f16 {name}"),
            encode_lossless(FloatSlice::F16(&h), shape, &opts).unwrap(),
        ));
    }
    let v = long_values(1 << 20);
    let one_segment = LosslessOptions {
        chunk_log2: 20,
        segments: 1,
        axes: Some(1),
        axes2: Some(0),
        ..Default::default()
    };
    files.push((
        "f32 [1048576], one segment".into(),
        encode_lossless(FloatSlice::F32(&v), &[1 << 20], &one_segment).unwrap(),
    ));
    // Second differences along both axes of 70,000-value rows (several blocks a line).
    let v = long_values(3 * 70_000);
    let twice = LosslessOptions {
        axes: Some(0b11),
        axes2: Some(0b11),
        ..Default::default()
    };
    files.push((
        "f32 [3, 70000], second differences".into(),
        encode_lossless(FloatSlice::F32(&v), &[3, 70_000], &twice).unwrap(),
    ));
    // Dispatches: the token rounds (2^20 / 2^15 for the long segment), one prefix-sum
    // stage per axis of one-block lines, three where a line has several blocks, the finish.
    let dispatches = |k: usize| {
        let b = decode_lossless_fields(gpu, &[&files[k].1[..]]).unwrap();
        b.dispatches
    };
    assert_eq!(dispatches(0), 1 + 3 + 1, "1-D of 65,600");
    assert_eq!(dispatches(6), 1 + 1 + 3 + 1, "[3, 70000]");
    assert_eq!(dispatches(9), 32 + 3 + 1, "one segment of 2^20");
    assert_eq!(
        dispatches(10),
        1 + 2 * (1 + 3) + 1,
        "second differences, twice the sums"
    );
    for f in &files {
        check(std::slice::from_ref(f));
    }
    check(&files);
}

/// Corruptions in a segment of 2^20 values (decoded over 32 rounds): the GPU refuses a file
/// exactly when the CPU decoder does, and gives its bytes otherwise.
#[test]
fn a_corrupt_long_segment_is_the_files_error() {
    let Some(gpu) = gpu_support::gpu() else {
        return;
    };
    let v = long_values(1 << 20);
    let opts = LosslessOptions {
        chunk_log2: 20,
        segments: 1,
        ..Default::default()
    };
    let good = encode_lossless(FloatSlice::F32(&v), &[1 << 20], &opts).unwrap();
    let mut on_gpu = 0;
    for k in 0..12 {
        let mut bad = good.clone();
        // Past the first round's bits, most of them.
        let at = bad.len() / 8 + k * (bad.len() / 14);
        bad[at] ^= 0x24;
        gpu_support::fix_crc(&mut bad);
        let cpu = decode_lossless(&bad, &DecodeOptions::default());
        let r = decode_lossless_fields(gpu, &[&bad[..]]);
        match (&cpu, &r) {
            (Err(_), Err(e)) => on_gpu += e.to_string().contains("GPU") as usize,
            (Ok((_, want)), Ok(batch)) => {
                assert!(batch.read_back_array(0).unwrap() == want.as_bytes());
            }
            _ => panic!(
                "byte {at}: CPU {:?} but GPU {:?}",
                cpu.as_ref().err(),
                r.as_ref().err()
            ),
        }
    }
    assert!(
        on_gpu > 0,
        "some corruptions are refused by the GPU's flags"
    );
}

/// An index past a shortened value table is the file's error on the GPU, as on the CPU.
#[test]
fn an_index_past_the_value_table_is_the_files_error() {
    let Some(gpu) = gpu_support::gpu() else {
        return;
    };
    let files = synthetic_files();
    let (_, good) = files
        .iter()
        .find(|(name, _)| name.starts_with("table [123"))
        .unwrap();
    let h = l3::field::parse_lossless(good).unwrap();
    let p = 12 + 4 * h.shape.len();
    // The table's varints end where the chunk table starts; the last one starts after the
    // byte before it that has no continuation bit.
    let end = h.header_len() as usize - 4 * h.chunks() as usize;
    let mut last = end - 1;
    while good[last - 1] & 0x80 != 0 {
        last -= 1;
    }
    let k = h.table.len() - 1;
    let mut bad = good[..last].to_vec();
    bad[p + 4..p + 8].copy_from_slice(&(k as u32).to_le_bytes());
    bad.extend_from_slice(&good[end..]);
    gpu_support::fix_crc(&mut bad);
    assert!(decode_lossless(&bad, &DecodeOptions::default()).is_err());
    let e = decode_lossless_fields(gpu, &[&files[1].1, &bad]).unwrap_err();
    assert!(e.to_string().contains("image 1"), "names the file: {e}");
}
