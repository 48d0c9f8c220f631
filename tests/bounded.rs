//! Error-bounded float arrays of 1 to 4 axes (`l3::field::encode_bounded`, field version 3):
//! every shared array (`../shared/data/float32`, or `$L3_TEST_DATA/float32`; required with
//! `CI=true`) at relative bounds 1e-2, 1e-3 and 1e-4, as one axis, in its own shape and
//! reshaped to 4 axes, decodes within the bound (checked in f64) with NaN and fill values
//! exact; both predictors; a property test; and hostile files (every truncation, bit flips
//! with and without the CRC check, lying headers, limits), each an error or some output,
//! never a panic.

use l3::decode::DecodeOptions;
use l3::error::{Error, LimitsError};
use l3::field::{
    decode_bounded, decode_bounded_into, decode_lossless, encode_bounded, field_version,
    parse_bounded, regular_range, Bound, BoundedOptions, FloatVec, Predictor, LOSSLESS_VERSION,
};
use l3::limits::Limits;
use proptest::prelude::*;

mod common;

fn shared_arrays() -> Vec<common::Float32Array> {
    common::float32_arrays()
}

/// `shape` split to 4 axes: an axis with a divisor splits at its smallest one, else a
/// leading axis of 1 is added.
fn four_axes(shape: &[u32]) -> Vec<u32> {
    let mut s = shape.to_vec();
    while s.len() < 4 {
        let split = s
            .iter()
            .enumerate()
            .find_map(|(a, &d)| (2..d).find(|f| d % f == 0).map(|f| (a, f)));
        match split {
            Some((a, f)) => {
                let d = s[a];
                s.splice(a..=a, [f, d / f]);
            }
            None => s.insert(0, 1),
        }
    }
    s
}

/// Values stored exactly: NaN, infinities, the fill value and (the encoder's choice, so that
/// its bins are the same on a GPU that flushes subnormals) subnormal values.
fn is_special(v: f32, fill: Option<f32>) -> bool {
    !v.is_finite() || v.is_subnormal() || fill.is_some_and(|f| f.to_bits() == v.to_bits())
}

/// Encodes, decodes (one thread and parallel, by value and into a buffer), checks the bound
/// in f64 and the specials bit for bit; returns the file.
fn round_trip(values: &[f32], shape: &[u32], options: &BoundedOptions) -> Vec<u8> {
    let file = encode_bounded(values, shape, options).expect("encode");
    assert_eq!(field_version(&file), Some(3));
    let h = parse_bounded(&file).expect("header");
    assert_eq!(h.shape, shape);
    let stated = match options.bound {
        l3::field::Bound::Absolute(e) => e,
        l3::field::Bound::Relative(r) => r * l3::field::regular_range(values, options.fill_value),
    };
    assert_eq!(h.bound, stated, "the header states the bound");
    assert_eq!(
        h.fill_value.map(f32::to_bits),
        options.fill_value.map(f32::to_bits)
    );
    let mut first: Option<Vec<f32>> = None;
    for parallel in [false, true] {
        let o = DecodeOptions {
            parallel,
            ..Default::default()
        };
        let (h2, back) = decode_bounded(&file, &o).expect("decode");
        assert_eq!(h2, h);
        let mut into = vec![0f32; values.len()];
        decode_bounded_into(&file, &o, &mut into).expect("decode into");
        assert!(into
            .iter()
            .zip(&back)
            .all(|(a, b)| a.to_bits() == b.to_bits()));
        for (i, (&v, &b)) in values.iter().zip(&back).enumerate() {
            if is_special(v, options.fill_value) {
                assert_eq!(v.to_bits(), b.to_bits(), "special value {i} not exact");
            } else {
                let err = (v as f64 - b as f64).abs();
                assert!(
                    err <= h.bound,
                    "value {i}: {v} -> {b}, error {err} > {}",
                    h.bound
                );
                assert!(!b.is_subnormal(), "value {i} decodes subnormal");
            }
        }
        match &first {
            None => first = Some(back),
            Some(f) => assert!(f.iter().zip(&back).all(|(a, b)| a.to_bits() == b.to_bits())),
        }
    }
    file
}

#[test]
fn shared_arrays_within_the_bound() {
    for (name, shape, values, fill) in shared_arrays() {
        let (lo, hi) = values
            .iter()
            .filter(|&&v| !is_special(v, fill))
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &v| {
                (a.min(v as f64), b.max(v as f64))
            });
        let n = values.len() as u32;
        for rel in [1e-2, 1e-3, 1e-4] {
            let e = rel * (hi - lo);
            let options = BoundedOptions {
                fill_value: fill,
                ..BoundedOptions::new(e)
            };
            for s in [vec![n], shape.clone(), four_axes(&shape)] {
                let file = round_trip(&values, &s, &options);
                let h = parse_bounded(&file).unwrap();
                eprintln!(
                    "{name} {rel:e} {s:?}: ratio {:.2}, {:?}, {} runs",
                    values.len() as f64 * 4.0 / file.len() as f64,
                    h.predictor,
                    h.runs
                );
            }
        }
    }
}

#[test]
fn both_predictors_on_a_shared_array() {
    let Some((_, shape, values, fill)) = shared_arrays().into_iter().next() else {
        return;
    };
    let (lo, hi) = values
        .iter()
        .filter(|&&v| !is_special(v, fill))
        .fold((f32::INFINITY, f32::NEG_INFINITY), |(a, b), &v| {
            (a.min(v), b.max(v))
        });
    for predictor in [Predictor::Lattice, Predictor::Differences] {
        let options = BoundedOptions {
            fill_value: fill,
            predictor: Some(predictor),
            ..BoundedOptions::new(1e-3 * (hi as f64 - lo as f64))
        };
        let file = round_trip(&values, &shape, &options);
        assert_eq!(parse_bounded(&file).unwrap().predictor, predictor);
    }
}

/// Values with NaN, infinities, a fill value, subnormals and signed zeros among smooth ones.
fn specials(n: usize) -> Vec<f32> {
    (0..n)
        .map(|i| match i % 97 {
            3 => f32::NAN,
            5 => f32::INFINITY,
            7 => -9999.0,
            11 => 1e-42,
            13 => -0.0,
            _ => (i as f32 * 0.05).sin() * 40.0 + (i % 7) as f32 * 0.3,
        })
        .collect()
}

#[test]
fn specials_in_every_axis_count() {
    let v = specials(2 * 3 * 5 * 7 * 4);
    for shape in [vec![840], vec![24, 35], vec![6, 35, 4], vec![2, 3, 5, 28]] {
        for predictor in [None, Some(Predictor::Lattice), Some(Predictor::Differences)] {
            for e in [1.0, 1e-3] {
                let options = BoundedOptions {
                    fill_value: Some(-9999.0),
                    predictor,
                    ..BoundedOptions::new(e)
                };
                round_trip(&v, &shape, &options);
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn random_arrays_round_trip(
        dims in proptest::collection::vec(1u32..12, 1..=4),
        seed in any::<u64>(),
        scale in 1e-3f32..1e4,
        bound in 1e-3f64..10.0,
        chunk_log2 in 8u8..=10,
        segments in 1u8..=9,
        lattice in any::<bool>(),
    ) {
        let n: usize = dims.iter().map(|&d| d as usize).product();
        let mut s = seed | 1;
        let values: Vec<f32> = (0..n)
            .map(|i| {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                match s % 41 {
                    0 => f32::NAN,
                    1 => -1.0,
                    _ => ((i as f32 * 0.1).cos() + (s % 1000) as f32 * 1e-3) * scale,
                }
            })
            .collect();
        let options = BoundedOptions {
            fill_value: Some(-1.0),
            predictor: Some(if lattice { Predictor::Lattice } else { Predictor::Differences }),
            chunk_log2,
            segments,
            ..BoundedOptions::new(bound * scale as f64)
        };
        // The differences predictor does not fit ranges of more than 65536 bins: the array is
        // stored exactly then (a lossless version 2 file, bit for bit).
        let file = encode_bounded(&values, &dims, &options).expect("every bound is honoured");
        if field_version(&file) == Some(LOSSLESS_VERSION) {
            prop_assert!(!lattice, "lattice fell back to lossless");
            let (_, back) = decode_lossless(&file, &DecodeOptions::default()).unwrap();
            let FloatVec::F32(back) = back else { panic!("float32") };
            prop_assert!(values.iter().zip(&back).all(|(a, b)| a.to_bits() == b.to_bits()));
        } else {
            round_trip(&values, &dims, &options);
        }
    }
}

/// A small file with runs (NaN, fill, misses), several chunks and segments, zero runs and
/// pairs; the lattice predictor or differences.
fn small_file(predictor: Predictor) -> Vec<u8> {
    let mut v = specials(1500);
    for x in v.iter_mut().skip(600).take(300) {
        *x = 2.0;
    }
    let o = BoundedOptions {
        fill_value: Some(-9999.0),
        predictor: Some(predictor),
        chunk_log2: 8,
        segments: 3,
        ..BoundedOptions::new(0.05)
    };
    encode_bounded(&v, &[30, 50], &o).unwrap()
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
    for p in [Predictor::Lattice, Predictor::Differences] {
        let file = small_file(p);
        for len in 0..file.len() {
            assert!(
                decode_bounded(&file[..len], &DecodeOptions::default()).is_err(),
                "len {len}"
            );
            let _ = decode_bounded(&file[..len], &no_crc());
            let _ = parse_bounded(&file[..len]);
        }
    }
}

#[test]
fn bit_flips_are_caught_or_harmless() {
    for p in [Predictor::Lattice, Predictor::Differences] {
        let file = small_file(p);
        let mut caught = 0;
        for bit in 0..file.len() * 8 {
            let mut f = file.clone();
            f[bit / 8] ^= 1 << (bit % 8);
            assert!(
                decode_bounded(&f, &DecodeOptions::default()).is_err(),
                "bit {bit}"
            );
            // Without the CRC every structural check must still hold: an error or values.
            if decode_bounded(&f, &no_crc()).is_err() {
                caught += 1;
            }
        }
        assert!(
            caught > file.len(),
            "{p:?}: only {caught} flips caught without the CRC"
        );
    }
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
    let file = small_file(Predictor::Lattice);
    let p = 12 + 4 * 2;
    let h = parse_bounded(&file).unwrap();
    assert_eq!(h.levels, 6);
    let tables = p + 32;
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("version 4", with_field(&file, 8, &[4])),
        ("ndim 0", with_field(&file, 9, &[0])),
        ("ndim 5", with_field(&file, 9, &[5])),
        ("flags", with_field(&file, 10, &[0x80])),
        ("predictor 2", with_field(&file, 11, &[2])),
        ("predictor 1", with_field(&file, 11, &[1])),
        ("shape 0", with_field(&file, 12, &0u32.to_le_bytes())),
        ("shape huge", with_field(&file, 12, &u32::MAX.to_le_bytes())),
        ("shape bigger", with_field(&file, 16, &51u32.to_le_bytes())),
        ("shape levels", with_field(&file, 16, &65u32.to_le_bytes())),
        ("bound 0", with_field(&file, p, &0f64.to_le_bytes())),
        ("bound nan", with_field(&file, p, &f64::NAN.to_le_bytes())),
        (
            "bound smaller",
            with_field(&file, p, &(h.bound / 3.0).to_le_bytes()),
        ),
        (
            "offset inf",
            with_field(&file, p + 8, &f32::INFINITY.to_bits().to_le_bytes()),
        ),
        (
            "offset subnormal",
            with_field(&file, p + 8, &1u32.to_le_bytes()),
        ),
        ("unit 0", with_field(&file, p + 12, &0u32.to_le_bytes())),
        (
            "unit bits",
            with_field(&file, p + 12, &(h.unit.to_bits() | 1).to_le_bytes()),
        ),
        (
            "unit negative",
            with_field(&file, p + 12, &(-h.unit).to_bits().to_le_bytes()),
        ),
        (
            "fill without flag",
            with_field(&with_field(&file, 10, &[0]), p + 16, &1u32.to_le_bytes()),
        ),
        ("axes repeated", with_field(&file, p + 20, &[0b0000])),
        ("axes past", with_field(&file, p + 20, &[0b1001])),
        ("segments 0", with_field(&file, p + 21, &[0])),
        ("segments 33", with_field(&file, p + 21, &[33])),
        ("segments 4", with_field(&file, p + 21, &[4])),
        ("chunk 7", with_field(&file, p + 22, &[7])),
        ("chunk 21", with_field(&file, p + 22, &[21])),
        ("chunk 9", with_field(&file, p + 22, &[9])),
        ("levels", with_field(&file, p + 23, &[7])),
        ("runs", with_field(&file, p + 24, &u32::MAX.to_le_bytes())),
        (
            "runs_len",
            with_field(&file, p + 28, &u32::MAX.to_le_bytes()),
        ),
        ("step 0", with_field(&file, tables, &[0])),
        ("step 17", with_field(&file, tables, &[17])),
        ("kind padding", with_field(&file, tables + 7 + 1, &[0x10])),
    ];
    for (what, f) in cases {
        assert!(
            decode_bounded(&f, &DecodeOptions::default()).is_err(),
            "{what}"
        );
        assert!(
            decode_bounded(&f, &no_crc()).is_err(),
            "{what} (no CRC check)"
        );
    }
    // Other versions' decoders refuse version 3, and the reverse.
    assert!(l3::field::decode_field(&file, &DecodeOptions::default()).is_err());
    assert!(l3::field::decode_lossless(&file, &DecodeOptions::default()).is_err());
    let v: Vec<f32> = (0..64).map(|i| i as f32).collect();
    let v1 = l3::field::encode_field(
        &v,
        &[8, 8],
        &l3::field::FieldOptions::new(l3::field::Bound::Absolute(0.1)),
    )
    .unwrap();
    assert!(decode_bounded(&v1, &DecodeOptions::default()).is_err());
}

#[test]
fn differences_headers_are_checked() {
    let file = small_file(Predictor::Differences);
    let p = 12 + 4 * 2;
    let h = parse_bounded(&file).unwrap();
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("predictor 0", with_field(&file, 11, &[0])),
        ("axes past", with_field(&file, p + 20, &[4])),
        ("levels", with_field(&file, p + 23, &[1])),
        (
            "unit wide",
            with_field(&file, p + 12, &(h.unit * 1.5).to_bits().to_le_bytes()),
        ),
        (
            "unit bits",
            with_field(&file, p + 12, &(h.unit.to_bits() | 1).to_le_bytes()),
        ),
    ];
    for (what, f) in cases {
        assert!(decode_bounded(&f, &no_crc()).is_err(), "{what}");
    }
}

#[test]
fn limits_are_checked_before_allocating() {
    let file = small_file(Predictor::Lattice);
    let tight = |max_output_bytes, max_input_bytes| DecodeOptions {
        limits: Limits {
            max_output_bytes,
            max_input_bytes,
            ..Limits::default()
        },
        ..Default::default()
    };
    assert!(matches!(
        decode_bounded(&file, &tight(1500 * 4 - 1, u64::MAX)),
        Err(Error::Limits(LimitsError::OutputBytes { .. }))
    ));
    assert!(matches!(
        decode_bounded(&file, &tight(u64::MAX, file.len() as u64 - 1)),
        Err(Error::Limits(LimitsError::InputBytes { .. }))
    ));
    assert!(decode_bounded(&file, &tight(1500 * 4, file.len() as u64)).is_ok());
    // A 2^32 - 1 value header in a tiny file: refused by the limit or the length.
    let mut huge = with_field(&file, 12, &65535u32.to_le_bytes());
    huge = with_field(&huge, 16, &65537u32.to_le_bytes());
    assert!(decode_bounded(&huge, &DecodeOptions::default()).is_err());
    assert!(decode_bounded(&huge, &tight(u64::MAX, u64::MAX)).is_err());
    let mut out = vec![0f32; 1500 + 1];
    assert!(decode_bounded_into(&file, &DecodeOptions::default(), &mut out).is_err());
}

/// A relative bound is the fraction of the regular values' range: the same file as the
/// absolute bound it resolves to, for both predictors; an array without a range is refused.
#[test]
fn a_relative_bound_is_the_fraction_of_the_range() {
    let mut values: Vec<f32> = (0..5000)
        .map(|i| (i as f32 * 0.013).sin() * 40.0 + (i % 7) as f32)
        .collect();
    values[17] = f32::NAN;
    values[99] = -9999.0;
    let fill = Some(-9999.0f32);
    let range = regular_range(&values, fill);
    assert!(range > 40.0, "{range}");
    for predictor in [Predictor::Lattice, Predictor::Differences] {
        let with = |bound: Bound| BoundedOptions {
            fill_value: fill,
            predictor: Some(predictor),
            ..BoundedOptions::new(bound)
        };
        let relative = round_trip(&values, &[50, 100], &with(Bound::Relative(1e-3)));
        let absolute = encode_bounded(&values, &[50, 100], &with(Bound::Absolute(1e-3 * range)));
        assert_eq!(relative, absolute.unwrap(), "{predictor:?}");
        assert_eq!(parse_bounded(&relative).unwrap().bound, 1e-3 * range);
    }
    // A relative bound of a constant array is 0: the array is stored exactly (a lossless file).
    let constant = [2.5f32; 300];
    let file = encode_bounded(
        &constant,
        &[300],
        &BoundedOptions::new(Bound::Relative(1e-2)),
    )
    .unwrap();
    assert_eq!(field_version(&file), Some(LOSSLESS_VERSION));
    let (_, back) = decode_lossless(&file, &DecodeOptions::default()).unwrap();
    assert_eq!(back, FloatVec::F32(constant.to_vec()));
}
