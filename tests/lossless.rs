//! Lossless float arrays (`l3::field::encode_lossless`, field version 2): every shared array
//! (`../shared/data/float32`, or `$L3_TEST_DATA/float32`; required with `CI=true`) round-trips
//! bit for bit, as stored and flattened to one axis, and as float16/bfloat16; every float16 and
//! bfloat16 bit pattern; NaN payloads, -0.0, infinities, subnormals and fill values in 1 to 4
//! axes; a property test; and hostile files (every truncation, bit flips with and without the
//! CRC check, lying headers), each an error or some output, never a panic.

use l3::decode::DecodeOptions;
use l3::error::{Error, LimitsError};
use l3::field::{
    decode_lossless, decode_lossless_into, encode_lossless, field_version, parse_lossless,
    FloatSlice, FloatType, LosslessOptions,
};
use l3::limits::Limits;
use proptest::prelude::*;

mod common;

fn bytes_of(values: FloatSlice<'_>) -> Vec<u8> {
    match values {
        FloatSlice::F32(v) => v.iter().flat_map(|x| x.to_ne_bytes()).collect(),
        FloatSlice::F16(v) | FloatSlice::BF16(v) => {
            v.iter().flat_map(|x| x.to_ne_bytes()).collect()
        }
    }
}

/// Encodes, decodes (one thread and parallel, by value and into bytes) and compares bits.
fn round_trip(values: FloatSlice<'_>, shape: &[u32], options: &LosslessOptions) -> Vec<u8> {
    let file = encode_lossless(values, shape, options).expect("encode");
    assert_eq!(field_version(&file), Some(2));
    let h = parse_lossless(&file).expect("header");
    assert_eq!((h.dtype, &h.shape[..]), (values.dtype(), shape));
    let want = bytes_of(values);
    for parallel in [false, true] {
        let o = DecodeOptions {
            parallel,
            ..Default::default()
        };
        let (h2, back) = decode_lossless(&file, &o).expect("decode");
        assert_eq!(h2, h);
        assert!(
            back.as_bytes() == &want[..],
            "values differ (parallel {parallel})"
        );
        let mut out = vec![0u8; want.len()];
        decode_lossless_into(&file, &o, &mut out).expect("decode into");
        assert!(out == want, "decode_lossless_into differs");
    }
    file
}

fn shared_arrays() -> Vec<common::Float32Array> {
    common::float32_arrays()
}

/// float32 -> float16 bits, round to nearest even (NaN keeps a quiet payload bit).
fn f16_bits(v: f32) -> u16 {
    let b = v.to_bits();
    let sign = ((b >> 16) & 0x8000) as u16;
    let exp = ((b >> 23) & 0xff) as i32;
    let man = b & 0x7f_ffff;
    if exp == 0xff {
        return sign
            | 0x7c00
            | if man != 0 {
                0x200 | (man >> 13) as u16
            } else {
                0
            };
    }
    let e = exp - 127 + 15;
    if e >= 31 {
        return sign | 0x7c00;
    }
    if e <= 0 {
        if e < -10 {
            return sign;
        }
        let m = man | 0x80_0000;
        let shift = (14 - e) as u32;
        let half = 1 << (shift - 1);
        let r = m >> shift;
        let rest = m & ((1 << shift) - 1);
        let r = if rest > half || (rest == half && r & 1 == 1) {
            r + 1
        } else {
            r
        };
        return sign | r as u16;
    }
    let r = ((e as u32) << 10) | (man >> 13);
    let rest = man & 0x1fff;
    let r = if rest > 0x1000 || (rest == 0x1000 && r & 1 == 1) {
        r + 1
    } else {
        r
    };
    sign | r as u16
}

#[test]
fn shared_arrays_round_trip_bit_exact() {
    for (name, shape, values, fill) in shared_arrays() {
        let o = LosslessOptions {
            fill_value: fill.map(f32::to_bits),
            ..Default::default()
        };
        let file = round_trip(FloatSlice::F32(&values), &shape, &o);
        eprintln!(
            "{name}: {:.3}x",
            (values.len() * 4) as f64 / file.len() as f64
        );
        // Flattened to one axis, and (when the first axis splits) as 4 axes.
        round_trip(FloatSlice::F32(&values), &[values.len() as u32], &o);
        if shape.len() < 4 && shape[0] % 2 == 0 {
            let mut s4 = vec![2, shape[0] / 2];
            s4.extend_from_slice(&shape[1..]);
            while s4.len() < 4 {
                s4.insert(0, 1);
            }
            round_trip(FloatSlice::F32(&values), &s4, &o);
        }
        // As bfloat16 (the top halves) and float16 (rounded): smooth 16-bit data.
        let bf: Vec<u16> = values.iter().map(|v| (v.to_bits() >> 16) as u16).collect();
        round_trip(FloatSlice::BF16(&bf), &shape, &LosslessOptions::default());
        let h: Vec<u16> = values.iter().map(|&v| f16_bits(v)).collect();
        round_trip(FloatSlice::F16(&h), &shape, &LosslessOptions::default());
    }
}

#[test]
fn every_16_bit_pattern_round_trips() {
    let all: Vec<u16> = (0..=u16::MAX).collect();
    for shape in [&[65536u32][..], &[256, 256], &[16, 64, 64], &[4, 4, 64, 64]] {
        round_trip(FloatSlice::F16(&all), shape, &LosslessOptions::default());
        round_trip(FloatSlice::BF16(&all), shape, &LosslessOptions::default());
    }
    // Scrambled, so neighbours are far apart.
    let mixed: Vec<u16> = (0..=u16::MAX as u32)
        .map(|i| (i.wrapping_mul(40503) >> 3) as u16)
        .collect();
    round_trip(
        FloatSlice::F16(&mixed),
        &[65536],
        &LosslessOptions::default(),
    );
    round_trip(
        FloatSlice::BF16(&mixed),
        &[128, 512],
        &LosslessOptions::default(),
    );
}

/// A smooth field on a 0.01 grid with every kind of special value sprinkled in.
fn specials(n: usize) -> Vec<f32> {
    let mut v: Vec<f32> = (0..n)
        .map(|i| ((i as f64 * 0.013).sin() * 50.0 * 100.0).round() as f32 / 100.0)
        .collect();
    let specials = [
        0x7fc0_0000u32, // quiet NaN
        0x7fa0_beef,    // signalling NaN with a payload
        0xffc0_0001,    // negative NaN with a payload
        0x8000_0000,    // -0.0
        0x7f80_0000,    // +inf
        0xff80_0000,    // -inf
        0x0000_0001,    // smallest subnormal
        0x807f_ffff,    // largest negative subnormal
        0x0080_0000,    // smallest normal
        0x7f7f_ffff,    // largest finite
    ];
    for (k, &s) in specials.iter().enumerate() {
        for j in (k * 37..n).step_by(97) {
            v[j] = f32::from_bits(s);
        }
    }
    v
}

#[test]
fn specials_and_fill_values_in_every_axis_count() {
    let fill = -999.25f32;
    for shape in [&[20000u32][..], &[100, 200], &[10, 40, 50], &[2, 5, 40, 50]] {
        let n = shape.iter().product::<u32>() as usize;
        let mut v = specials(n);
        for x in v.iter_mut().skip(n / 3).take(n / 5) {
            *x = fill;
        }
        for fill_value in [None, Some(fill.to_bits())] {
            for float_mult in [false, true] {
                let o = LosslessOptions {
                    fill_value,
                    float_mult,
                    chunk_log2: 12,
                    segments: 5,
                    ..Default::default()
                };
                round_trip(FloatSlice::F32(&v), shape, &o);
            }
        }
        let h: Vec<u16> = v.iter().map(|&x| f16_bits(x)).collect();
        let o16 = LosslessOptions {
            fill_value: Some(f16_bits(fill) as u32),
            ..Default::default()
        };
        round_trip(FloatSlice::F16(&h), shape, &o16);
        let b: Vec<u16> = v.iter().map(|x| (x.to_bits() >> 16) as u16).collect();
        round_trip(FloatSlice::BF16(&b), shape, &LosslessOptions::default());
    }
}

#[test]
fn all_nan_and_single_values() {
    let nan = vec![f32::from_bits(0x7fc0_1234); 3000];
    round_trip(FloatSlice::F32(&nan), &[3000], &LosslessOptions::default());
    round_trip(
        FloatSlice::F32(&[-0.0]),
        &[1, 1, 1, 1],
        &LosslessOptions::default(),
    );
    round_trip(
        FloatSlice::F16(&[0x7c01]),
        &[1],
        &LosslessOptions::default(),
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn random_arrays_round_trip(
        dims in proptest::collection::vec(1u32..12, 1..=4),
        kind in 0u8..3,
        seed in any::<u64>(),
        dtype in 0u8..3,
        chunk_log2 in 8u8..11,
        segments in 1u8..7,
        axes in proptest::option::of(0u8..16),
        float_mult in any::<bool>(),
    ) {
        let n = dims.iter().product::<u32>() as usize;
        let mut x = seed | 1;
        let mut rnd = move || { x ^= x << 13; x ^= x >> 7; x ^= x << 17; x };
        let bits: Vec<u32> = (0..n).map(|i| match kind {
            0 => rnd() as u32,                                   // any bit pattern
            1 => ((i as f32 * 0.1).sin() * 10.0).to_bits(),       // smooth
            _ => [0x7fc0_0001, 0x8000_0000, 1, 0x3f80_0000][(rnd() % 4) as usize],
        }).collect();
        let options = LosslessOptions {
            axes: axes.map(|a| a & ((1 << dims.len()) - 1) as u8),
            chunk_log2,
            segments,
            float_mult,
            fill_value: (kind == 2).then_some(1),
            ..Default::default()
        };
        match dtype {
            0 => {
                let v: Vec<f32> = bits.iter().map(|&b| f32::from_bits(b)).collect();
                round_trip(FloatSlice::F32(&v), &dims, &options);
            }
            1 => {
                let v: Vec<u16> = bits.iter().map(|&b| b as u16).collect();
                round_trip(FloatSlice::F16(&v), &dims, &options);
            }
            _ => {
                let v: Vec<u16> = bits.iter().map(|&b| (b >> 16) as u16).collect();
                round_trip(FloatSlice::BF16(&v), &dims, &options);
            }
        }
    }
}

/// A small file with every feature: float-mult with adjustments, runs, zero-run tokens,
/// several chunks and segments.
fn small_file() -> Vec<u8> {
    let mut v = specials(1500);
    for x in v.iter_mut().skip(600).take(300) {
        *x = 0.0;
    }
    let o = LosslessOptions {
        fill_value: Some(0x7fc0_0000),
        chunk_log2: 8,
        segments: 3,
        value_table: false,
        ..Default::default()
    };
    encode_lossless(FloatSlice::F32(&v), &[30, 50], &o).unwrap()
}

/// A small value-table file (flag bit 2): unpacked int16 on a coarse grid, with runs.
fn table_file() -> Vec<u8> {
    let v: Vec<f32> = (0..1500)
        .map(|i| match i % 101 {
            7 => f32::NAN,
            _ => {
                let q = ((i as f64 * 0.01).sin() * 40.0).round() * 24.0;
                (q * -0.001_572_704_938 + 26.968_75) as f32
            }
        })
        .collect();
    let o = LosslessOptions {
        chunk_log2: 8,
        segments: 3,
        ..Default::default()
    };
    let file = encode_lossless(FloatSlice::F32(&v), &[30, 50], &o).unwrap();
    assert!(!parse_lossless(&file).unwrap().table.is_empty());
    file
}

fn no_crc() -> DecodeOptions {
    DecodeOptions {
        verify_checksum: false,
        parallel: false,
        ..Default::default()
    }
}

#[test]
fn every_truncation_is_an_error() {
    for file in [small_file(), table_file()] {
        truncations(&file);
    }
}

fn truncations(file: &[u8]) {
    for len in 0..file.len() {
        assert!(
            decode_lossless(&file[..len], &DecodeOptions::default()).is_err(),
            "len {len}"
        );
        let _ = decode_lossless(&file[..len], &no_crc());
        let _ = parse_lossless(&file[..len]);
    }
}

#[test]
fn bit_flips_are_caught_or_harmless() {
    for file in [small_file(), table_file()] {
        bit_flips(&file);
    }
}

fn bit_flips(file: &[u8]) {
    let mut caught = 0;
    for bit in 0..file.len() * 8 {
        let mut f = file.to_vec();
        f[bit / 8] ^= 1 << (bit % 8);
        assert!(
            decode_lossless(&f, &DecodeOptions::default()).is_err(),
            "bit {bit}"
        );
        // Without the CRC, every structural check must still hold: an error or some values.
        if decode_lossless(&f, &no_crc()).is_err() {
            caught += 1;
        }
    }
    assert!(
        caught > file.len(),
        "only {caught} flips caught without the CRC"
    );
}

/// Rewrites a header field and the CRC, so only the structural checks stand in the way.
fn with_field(file: &[u8], at: usize, bytes: &[u8]) -> Vec<u8> {
    let mut f = file.to_vec();
    f[at..at + bytes.len()].copy_from_slice(bytes);
    let body = f.len() - 4;
    let crc = crc32fast::hash(&f[..body]);
    f[body..].copy_from_slice(&crc.to_le_bytes());
    f
}

#[test]
fn lying_headers_are_errors() {
    let file = small_file();
    let p = 12 + 4 * 2;
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("dtype", with_field(&file, 9, &[3])),
        ("ndim 0", with_field(&file, 10, &[0])),
        ("ndim 5", with_field(&file, 10, &[5])),
        ("flags", with_field(&file, 11, &[0x80])),
        ("shape 0", with_field(&file, 12, &0u32.to_le_bytes())),
        ("shape huge", with_field(&file, 12, &u32::MAX.to_le_bytes())),
        ("shape bigger", with_field(&file, 16, &51u32.to_le_bytes())),
        (
            "fill without flag",
            with_field(&with_field(&file, 11, &[2]), p, &1u32.to_le_bytes()),
        ),
        (
            "base subnormal",
            with_field(&file, p + 4, &1u32.to_le_bytes()),
        ),
        (
            "base negative",
            with_field(&file, p + 4, &(-1.0f32).to_bits().to_le_bytes()),
        ),
        ("axes", with_field(&file, p + 8, &[4])),
        ("segments 0", with_field(&file, p + 9, &[0])),
        ("segments 33", with_field(&file, p + 9, &[33])),
        ("chunk 7", with_field(&file, p + 10, &[7])),
        ("chunk 21", with_field(&file, p + 10, &[21])),
        ("chunk 9", with_field(&file, p + 10, &[9])),
        ("axes2 past the axes", with_field(&file, p + 11, &[0x80])),
        (
            "axes2 not among the axes",
            with_field(&with_field(&file, p + 8, &[0b01]), p + 11, &[0b10]),
        ),
        ("runs", with_field(&file, p + 12, &u32::MAX.to_le_bytes())),
        (
            "runs_len",
            with_field(&file, p + 16, &u32::MAX.to_le_bytes()),
        ),
        (
            "chunk 0 len",
            with_field(&file, p + 20, &u32::MAX.to_le_bytes()),
        ),
        ("chunk 0 len - 1", {
            let l = u32::from_le_bytes(file[p + 20..p + 24].try_into().unwrap());
            with_field(&file, p + 20, &(l - 1).to_le_bytes())
        }),
        ("version 3", with_field(&file, 8, &[3])),
    ];
    for (what, f) in cases {
        assert!(
            decode_lossless(&f, &DecodeOptions::default()).is_err(),
            "{what}"
        );
        assert!(
            decode_lossless(&f, &no_crc()).is_err(),
            "{what} (no CRC check)"
        );
    }
    // The version-1 decoder refuses version 2, and the reverse.
    assert!(l3::field::decode_field(&file, &DecodeOptions::default()).is_err());
}

#[test]
fn limits_are_checked_before_allocating() {
    let file = small_file();
    let tight = |max_output_bytes, max_input_bytes| DecodeOptions {
        limits: Limits {
            max_output_bytes,
            max_input_bytes,
            ..Limits::default()
        },
        ..Default::default()
    };
    assert!(matches!(
        decode_lossless(&file, &tight(1500 * 4 - 1, u64::MAX)),
        Err(Error::Limits(LimitsError::OutputBytes { .. }))
    ));
    assert!(matches!(
        decode_lossless(&file, &tight(u64::MAX, file.len() as u64 - 1)),
        Err(Error::Limits(LimitsError::InputBytes { .. }))
    ));
    assert!(decode_lossless(&file, &tight(1500 * 4, file.len() as u64)).is_ok());
    // A 2^32 - 1 value header in a tiny file: refused by the limit or the length.
    let mut huge = with_field(&file, 12, &65535u32.to_le_bytes());
    huge = with_field(&huge, 16, &65537u32.to_le_bytes());
    assert!(decode_lossless(&huge, &DecodeOptions::default()).is_err());
    assert!(decode_lossless(&huge, &tight(u64::MAX, u64::MAX)).is_err());
    let mut out = vec![0u8; 1500 * 4 + 1];
    assert!(decode_lossless_into(&file, &DecodeOptions::default(), &mut out).is_err());
    assert_eq!(parse_lossless(&file).unwrap().dtype, FloatType::F32);
}
