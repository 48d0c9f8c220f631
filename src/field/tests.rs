//! Unit tests of the field format, encoder and CPU decoder: bin widths, the bound on smooth
//! and extreme fields, refused ranges and bounds, limits, corrupt files.

use super::encode::bin_width_for;
use super::format::bin_width_significand_bits;
use super::*;
use crate::decode::DecodeOptions;

#[test]
fn bin_widths_have_eight_significant_bits_and_stay_below_the_limit() {
    for limit in [2e-4, 0.3, 1.0, 7.77, 123456.0, 3e30] {
        let w = bin_width_for(limit).unwrap();
        assert!(
            w as f64 <= limit && w as f64 > limit * (1.0 - 1.0 / 128.0),
            "{limit}: {w}"
        );
        assert!(bin_width_significand_bits(w) <= BIN_WIDTH_BITS);
        // q x w is exact for every 16-bit q.
        for q in [1u16, 255, 4097, 65535] {
            assert_eq!(q as f64 * w as f64, (q as f32 * w) as f64);
        }
    }
    assert_eq!(bin_width_for(0.0), None);
    assert_eq!(bin_width_for(f64::NAN), None);
}

#[test]
fn smooth_fields_with_nan_fill_and_extremes_decode_within_the_bound() {
    let (ny, nx) = (70usize, 90usize);
    let mut v: Vec<f32> = (0..ny * nx)
        .map(|i| ((i / nx) as f32 * 0.07).sin() * 40.0 + (i % nx) as f32 * 0.013)
        .collect();
    v[5] = f32::NAN;
    v[6] = f32::INFINITY;
    v[100..180].fill(-1e10);
    v[300] = 1e-42; // subnormal: its bin's value may be subnormal too; kept within bound
    for bound in [
        Bound::Absolute(0.5),
        Bound::Relative(1e-3),
        Bound::Relative(1e-5),
    ] {
        let mut o = FieldOptions::new(bound);
        o.fill_value = Some(-1e10);
        let file = encode_field(&v, &[ny as u32, nx as u32], &o).unwrap();
        let (h, out) = decode_field(&file, &DecodeOptions::default()).unwrap();
        assert!(h.runs >= 3, "NaN, inf and the fill are runs");
        for (i, (&a, &b)) in v.iter().zip(&out).enumerate() {
            if !a.is_finite() || a == -1e10 {
                assert_eq!(a.to_bits(), b.to_bits(), "value {i} not kept exactly");
            } else {
                assert!(
                    (a as f64 - b as f64).abs() <= h.bound,
                    "value {i}: {a} -> {b}"
                );
            }
        }
    }
}

/// Encodes `v` within `bound` and checks the file is stored exactly (a lossless version 2
/// file, bit for bit, with the fill value kept).
fn assert_stored_exactly(v: &[f32], shape: &[u32], bound: Bound, fill: Option<f32>) {
    let options = FieldOptions {
        fill_value: fill,
        ..FieldOptions::new(bound)
    };
    let file = encode_field(v, shape, &options).unwrap();
    assert_eq!(field_version(&file), Some(LOSSLESS_VERSION), "{bound:?}");
    assert!(decode_field(&file, &DecodeOptions::default()).is_err());
    let (h, back) = decode_lossless(&file, &DecodeOptions::default()).unwrap();
    assert_eq!(h.shape, shape);
    assert_eq!(h.fill_value, fill.map(f32::to_bits));
    let FloatVec::F32(back) = back else {
        panic!("float32 expected")
    };
    assert!(v.iter().zip(&back).all(|(a, b)| a.to_bits() == b.to_bits()));
}

/// A bound finer than 65536 bins allow over the range, below the smallest normal bin width,
/// or relative over a field without range: the field is stored exactly (never an error).
#[test]
fn a_bound_too_fine_for_16_bit_bins_stores_the_field_exactly() {
    let mut v: Vec<f32> = (0..400).map(|i| (i as f32 * 0.37).sin() * 1e6).collect();
    v[3] = f32::NAN;
    v[7] = -9999.0;
    for bound in [
        Bound::Absolute(1e-3),
        Bound::Absolute(1e-300),
        Bound::Relative(1e-6),
    ] {
        assert_stored_exactly(&v, &[20, 20], bound, Some(-9999.0));
        assert_stored_exactly(&v, &[4, 10, 10], bound, None);
    }
    let constant = [1.5f32; 6];
    assert_stored_exactly(&constant, &[2, 3], Bound::Relative(1e-3), None);
    // Just inside 65536 bins is still a version 1 file within the bound.
    let edge = [0.0f32, 65535.0, 2.0, 3.0];
    let file = encode_field(&edge, &[2, 2], &FieldOptions::new(Bound::Absolute(0.5))).unwrap();
    assert_eq!(field_version(&file), Some(FIELD_VERSION));
    let (h, back) = decode_field(&file, &DecodeOptions::default()).unwrap();
    assert!(edge
        .iter()
        .zip(&back)
        .all(|(a, b)| (*a as f64 - *b as f64).abs() <= h.bound));
    // A huge relative bound is clamped to a finite one the header states.
    let file = encode_field(&v, &[20, 20], &FieldOptions::new(Bound::Relative(f64::MAX))).unwrap();
    let (h, back) = decode_field(&file, &DecodeOptions::default()).unwrap();
    assert!(h.bound.is_finite());
    assert!(v
        .iter()
        .zip(&back)
        .all(|(a, b)| !a.is_finite() || (*a as f64 - *b as f64).abs() <= h.bound));
    let file = encode_field(
        &constant,
        &[2, 3],
        &FieldOptions::new(Bound::Absolute(1e-3)),
    )
    .unwrap();
    assert_eq!(
        decode_field(&file, &DecodeOptions::default()).unwrap().1,
        constant
    );
}

/// A small file claiming a huge field fails on the limits before allocating.
#[test]
fn limits_apply_before_allocating() {
    let v = vec![1.0f32; 64 * 64];
    let file = encode_field(&v, &[64, 64], &FieldOptions::new(Bound::Absolute(0.1))).unwrap();
    let options = DecodeOptions {
        limits: crate::limits::Limits {
            max_output_bytes: 1000,
            ..Default::default()
        },
        ..Default::default()
    };
    let e = decode_field(&file, &options).unwrap_err();
    assert!(matches!(e, crate::error::Error::Limits(_)), "{e}");
}

#[test]
fn corrupt_field_files_are_refused() {
    let v: Vec<f32> = (0..400).map(|i| i as f32 * 0.5).collect();
    let file = encode_field(&v, &[20, 20], &FieldOptions::new(Bound::Absolute(0.1))).unwrap();
    assert!(decode_field(&file, &DecodeOptions::default()).is_ok());
    for cut in [0, 7, 30, FIELD_HEADER_LEN, file.len() - 1] {
        assert!(decode_field(&file[..cut], &DecodeOptions::default()).is_err());
    }
    for pos in (0..file.len()).step_by(3) {
        let mut bad = file.clone();
        bad[pos] ^= 0x41;
        assert!(
            decode_field(&bad, &DecodeOptions::default()).is_err(),
            "flip at {pos}"
        );
    }
}

#[test]
fn unusable_bounds_are_named_by_their_value() {
    let values = [1.0f32, 2.0, 3.0, 4.0];
    for (bound, shown) in [
        (Bound::Absolute(f64::NAN), "NaN"),
        (Bound::Absolute(f64::INFINITY), "inf"),
        (Bound::Absolute(-1.0), "-1e0"),
        (Bound::Absolute(0.0), "0e0"),
    ] {
        let e = encode_field(&values, &[2, 2], &FieldOptions::new(bound)).unwrap_err();
        let text = e.to_string();
        assert!(
            text.contains(&format!("`bound`: {shown} (")),
            "{bound:?}: {text}"
        );
    }
}

/// One entry point decodes whatever an encoder gave back: a version 1 field, the exact
/// version 2 file a too-fine bound gives, a version 3 array and a float16 lossless array,
/// each to its own decoder's values and header; a file of an unknown version or a damaged
/// one is an error, as from that version's decoder.
#[test]
fn decode_float_array_takes_every_version_an_encoder_writes() {
    let o = DecodeOptions::default();
    let v: Vec<f32> = (0..600).map(|i| (i as f32 * 0.21).sin() * 1e5).collect();
    let v1 = encode_field(&v, &[20, 30], &FieldOptions::new(Bound::Absolute(100.0))).unwrap();
    let exact = encode_field(&v, &[20, 30], &FieldOptions::new(Bound::Absolute(1e-4))).unwrap();
    let v3 = encode_bounded(&v, &[600], &BoundedOptions::new(2.0)).unwrap();
    let halves: Vec<u16> = (0..64u16).map(|i| 0x3c00 + i * 17).collect();
    let f16 = encode_lossless(
        FloatSlice::F16(&halves),
        &[8, 8],
        &LosslessOptions::default(),
    )
    .unwrap();
    let cases: [(&[u8], u8, f64); 4] = [
        (&v1, FIELD_VERSION, 100.0),
        (&exact, LOSSLESS_VERSION, 0.0),
        (&v3, BOUNDED_VERSION, 2.0),
        (&f16, LOSSLESS_VERSION, 0.0),
    ];
    for (file, version, bound) in cases {
        let (h, values) = decode_float_array(file, &o).unwrap();
        assert_eq!(h.version(), version);
        assert_eq!(h, parse_float_array(file).unwrap());
        assert!(
            h.bound() <= bound && h.bound() >= bound * 0.99,
            "{}",
            h.bound()
        );
        assert_eq!(values.as_slice().len() as u64, h.len());
        let expected = match version {
            FIELD_VERSION => FloatVec::F32(decode_field(file, &o).unwrap().1),
            LOSSLESS_VERSION => decode_lossless(file, &o).unwrap().1,
            _ => FloatVec::F32(decode_bounded(file, &o).unwrap().1),
        };
        assert_eq!(values.as_bytes(), expected.as_bytes());
    }
    let (h, back) = decode_float_array(&exact, &o).unwrap();
    assert_eq!(h.shape(), [20, 30]);
    assert_eq!(back, FloatVec::F32(v.clone()));
    let (h, back) = decode_float_array(&f16, &o).unwrap();
    assert_eq!((h.dtype(), h.shape()), (FloatType::F16, vec![8, 8]));
    assert_eq!(back, FloatVec::F16(halves));
    // An unknown version, a damaged file, a file of another kind: errors, no panic.
    let mut unknown = v3.clone();
    unknown[8] = 9;
    let mut damaged = exact.clone();
    let mid = damaged.len() / 2;
    damaged[mid] ^= 0x40;
    for bad in [
        &unknown[..],
        &damaged[..],
        b"not a float array at all",
        &v1[..7],
    ] {
        assert!(decode_float_array(bad, &o).is_err());
        assert!(parse_float_array(bad).is_err() || bad == &damaged[..]);
    }
}

#[test]
fn a_window_decodes_exactly_the_whole_decodes_values_inside_it() {
    // 3 planes of 150 x 200, 64-px patches (so a window skips some), NaN and fill runs.
    let (nz, ny, nx) = (3usize, 150usize, 200usize);
    let mut v: Vec<f32> = (0..nz * ny * nx)
        .map(|i| ((i / nx) as f32 * 0.05).sin() * 10.0 + ((i % nx) as f32 * 0.031).cos())
        .collect();
    v[7] = f32::NAN;
    v[ny * nx + 40 * nx + 10..ny * nx + 40 * nx + 90].fill(-999.0);
    let mut o = FieldOptions::new(Bound::Relative(1e-3));
    o.fill_value = Some(-999.0);
    o.image.patch_log2 = 6;
    let shape = [nz as u32, ny as u32, nx as u32];
    let file = encode_field(&v, &shape, &o).unwrap();
    // Another field of the same shape, decoded before each window: the reused bin buffer
    // then holds its bins, not this file's.
    let other: Vec<f32> = v.iter().map(|x| x * -3.0 + 1.0).collect();
    let other = encode_field(&other, &shape, &o).unwrap();
    let options = DecodeOptions::default();
    let whole = decode_field(&file, &options).unwrap().1;
    // Windows of every shape, the last ones reaching past the plane (clamped), decoded one
    // after another on this thread (the bin buffer reused) and as bytes.
    let windows = [
        (0..150, 0..200),
        (10..80, 5..133),
        (64..128, 64..128),
        (140..150, 190..200),
        (0..1, 199..200),
        (70..400, 150..900),
        (149..150, 0..200),
        (200..300, 0..10),
    ];
    for (rows, cols) in windows {
        let w = Some((rows.clone(), cols.clone()));
        decode_field(&other, &options).unwrap();
        let (_, got) = decode_field_window(&file, &options, w.clone()).unwrap();
        decode_field(&other, &options).unwrap();
        let (_, le) = decode_field_window_le(&file, &options, w).unwrap();
        assert_eq!(got.len(), whole.len());
        assert_eq!(le.len(), whole.len() * 4);
        let mut checked = 0;
        for z in 0..nz {
            for y in rows.start.min(ny as u32)..rows.end.min(ny as u32) {
                for x in cols.start.min(nx as u32)..cols.end.min(nx as u32) {
                    let i = (z * ny + y as usize) * nx + x as usize;
                    let bytes: [u8; 4] = le[i * 4..i * 4 + 4].try_into().unwrap();
                    assert_eq!(
                        got[i].to_bits(),
                        whole[i].to_bits(),
                        "{rows:?} {cols:?} at {i}"
                    );
                    assert_eq!(
                        u32::from_le_bytes(bytes),
                        whole[i].to_bits(),
                        "bytes at {i}"
                    );
                    checked += 1;
                }
            }
        }
        let inside = |r: &std::ops::Range<u32>, n: usize| {
            (r.end.min(n as u32) - r.start.min(n as u32)) as usize
        };
        assert_eq!(checked, nz * inside(&rows, ny) * inside(&cols, nx));
    }
    // A corrupt file fails windowed as it does whole.
    let mut bad = file.clone();
    let mid = bad.len() / 2;
    bad[mid] ^= 0x55;
    assert!(decode_field_window(&bad, &options, Some((0..10, 0..10))).is_err());
}
