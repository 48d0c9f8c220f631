use super::*;
use crate::field::test_rng::Rng;

/// Values like activations: ReLU zeros, Gaussian-ish magnitudes, a few outliers.
pub(crate) fn activations(n: usize, seed: u64) -> Vec<f32> {
    let mut rng = Rng(seed);
    (0..n)
        .map(|i| {
            let u = rng.unit() + rng.unit() + rng.unit() - 1.5;
            match rng.below(10) {
                0..=3 => 0.0,
                4 if i % 7 == 0 => -u * 3.0,
                _ => u * 2.0 + (i % 97) as f32 * 1e-3,
            }
        })
        .collect()
}

fn check_bound(values: &[f32], decoded: &[f32], e: f32) {
    assert_eq!(values.len(), decoded.len());
    for (i, (&x, &y)) in values.iter().zip(decoded).enumerate() {
        if x.is_nan() {
            assert!(y.is_nan(), "value {i}: NaN decoded as {y}");
            continue;
        }
        if x.is_infinite() {
            assert_eq!(x, y, "value {i}");
            continue;
        }
        assert!(
            ((x as f64) - (y as f64)).abs() <= e as f64 || x == y,
            "value {i}: {x} -> {y} (bound {e})"
        );
        assert_eq!(x > 0.0, y > 0.0, "value {i}: sign of {x} -> {y}");
        assert_eq!(x < 0.0, y < 0.0, "value {i}: sign of {x} -> {y}");
    }
}

#[test]
fn round_trips_within_the_stored_bound_keeping_signs_and_zeros() {
    for (n, bound) in [
        (0usize, 0.1),
        (1, 0.1),
        (31, 1e-3),
        (32, 1e-2),
        (33, 0.5),
        (1000, 1e-3),
        (5000, 3e-2),
        (70_001, 1e-4),
    ] {
        let v = activations(n, 7 + n as u64);
        let data = encode_blocks(&v, bound, 0).unwrap();
        let header = parse_blocks(&data, u64::MAX).unwrap();
        assert_eq!(header.values as usize, n);
        assert!(header.bound as f64 <= bound && header.bound as f64 > bound * (1.0 - 1.0 / 128.0));
        let d = decode_blocks(&data, u64::MAX).unwrap();
        check_bound(&v, &d, header.bound);
    }
}

#[test]
fn special_values_are_escaped_and_come_back_bit_for_bit() {
    let mut v = activations(200, 3);
    v[5] = f32::NAN;
    v[40] = f32::INFINITY;
    v[70] = f32::NEG_INFINITY;
    v[100] = 1e30; // beyond 2^15 steps of the bound
    v[130] = f32::from_bits(1); // subnormal: kept positive
    v[131] = -f32::from_bits(77);
    v[150] = f32::from_bits(0x7fc0_1234); // a NaN payload
    let data = encode_blocks(&v, 1e-3, 0).unwrap();
    let d = decode_blocks(&data, u64::MAX).unwrap();
    check_bound(&v, &d, 1e-3);
    for i in [5, 40, 70, 100, 150] {
        assert_eq!(v[i].to_bits(), d[i].to_bits(), "value {i}");
    }
    assert!(d[130] > 0.0 && d[131] < 0.0);
    assert_ne!(
        parse_blocks(&data, u64::MAX).unwrap().lengths[ESCAPE as usize],
        0
    );
}

#[test]
fn code_lengths_are_a_prefix_code_within_the_longest_length() {
    let mut rng = Rng(8);
    for round in 0..2000 {
        let mut counts = [0u32; SYMBOLS];
        let used = 1 + rng.below(SYMBOLS as u64) as usize;
        for _ in 0..used {
            let s = rng.below(SYMBOLS as u64) as usize;
            // Skewed weights: lengths past the limit before it is applied.
            counts[s] = 1 + (rng.next() as u32 >> (rng.below(31) as u32 + round % 2));
        }
        let lengths = code_lengths(&counts);
        for s in 0..SYMBOLS {
            assert_eq!(lengths[s] > 0, counts[s] > 0, "{counts:?} -> {lengths:?}");
        }
        assert!(lengths.iter().all(|&l| l <= MAX_CODE));
        let codes = canonical_codes(&lengths).expect("a prefix code");
        // No code is a prefix of another.
        for a in 0..SYMBOLS {
            for b in 0..SYMBOLS {
                let (la, lb) = (lengths[a], lengths[b]);
                if a != b && la > 0 && lb > 0 && la <= lb {
                    assert_ne!(codes[b] & ((1 << la) - 1), codes[a], "{lengths:?}");
                }
            }
        }
        // Heavier symbols never get longer codes.
        for a in 0..SYMBOLS {
            for b in 0..SYMBOLS {
                if counts[a] > counts[b] && counts[b] > 0 {
                    assert!(lengths[a] <= lengths[b], "{counts:?} -> {lengths:?}");
                }
            }
        }
    }
    // Huffman's lengths where the limit does not bind.
    let mut counts = [0u32; SYMBOLS];
    counts[0] = 8;
    counts[1] = 4;
    counts[2] = 2;
    counts[3] = 1;
    counts[4] = 1;
    assert_eq!(&code_lengths(&counts)[..5], &[1, 2, 3, 4, 4]);
}

#[test]
fn zero_and_tiny_bounds_keep_every_value_exact() {
    let v = activations(300, 11);
    for bound in [0.0, 1e-39, 1e-45] {
        let data = encode_blocks(&v, bound, 0).unwrap();
        assert_eq!(parse_blocks(&data, u64::MAX).unwrap().bound, 0.0);
        let d = decode_blocks(&data, u64::MAX).unwrap();
        for (x, y) in v.iter().zip(&d) {
            assert!(x == y, "{x} -> {y}");
        }
    }
    assert!(encode_blocks(&v, -1.0, 0).is_err());
    assert!(encode_blocks(&v, f64::NAN, 0).is_err());
    // A huge bound: every nonzero value is one step, its sign kept.
    let data = encode_blocks(&v, f64::INFINITY, 0).unwrap();
    let d = decode_blocks(&data, u64::MAX).unwrap();
    check_bound(&v, &d, parse_blocks(&data, u64::MAX).unwrap().bound);
}

#[test]
fn the_quantiser_picks_the_one_fitting_step() {
    let e = stored_bound(0.01).unwrap();
    let inv = inverse_step(e);
    let mut rng = Rng(99);
    for _ in 0..200_000 {
        let x = f32::from_bits(rng.next() as u32 & 0xbfff_ffff); // magnitudes below 2
        let Some(q) = quantise(x.to_bits(), e, inv) else {
            continue;
        };
        let y = reconstruct(q, e);
        assert!(((x as f64) - (y as f64)).abs() <= e as f64, "{x} -> {y}");
        assert_eq!(unzigzag(zigzag(q)), q);
        // No other k fits: the code is unique, whatever the reciprocal's rounding.
        let k = q.unsigned_abs();
        for other in [k.saturating_sub(1), k + 1] {
            if other >= 1 && other != k {
                assert!(!fits(x.abs(), other, e) || x == 0.0);
            }
        }
    }
}

#[test]
fn zeros_and_small_values_take_few_bits() {
    // Mostly zeros: about a bit a value and the header.
    let v: Vec<f32> = (0..32_000)
        .map(|i| if i % 10 == 0 { 0.5 } else { 0.0 })
        .collect();
    let data = encode_blocks(&v, 1e-3, 0).unwrap();
    assert!(data.len() < 32_000 / 8 * 3, "{} bytes", data.len());
    let d = decode_blocks(&data, u64::MAX).unwrap();
    check_bound(&v, &d, 1e-3);
}

#[test]
fn every_malformed_stream_is_an_error() {
    let v = activations(1000, 5);
    let good = encode_blocks(&v, 1e-2, 0).unwrap();
    assert!(decode_blocks(&good, 999).is_err(), "the value limit");
    for cut in [0, 3, 15, 16, good.len() - 4, good.len() - 1] {
        assert!(
            decode_blocks(&good[..cut], u64::MAX).is_err(),
            "cut at {cut}"
        );
    }
    let mut longer = good.clone();
    longer.extend_from_slice(&[0; 4]);
    assert!(decode_blocks(&longer, u64::MAX).is_err());
    // Every single-word change is either refused or decodes to as many values.
    let mut rng = Rng(42);
    let words = good.len() / 4;
    for i in 0..words.min(400) {
        for _ in 0..4 {
            let mut bad = good.clone();
            let flip = 1u32 << rng.below(32);
            let at = 4 * i;
            let w = u32::from_le_bytes(bad[at..at + 4].try_into().unwrap()) ^ flip;
            bad[at..at + 4].copy_from_slice(&w.to_le_bytes());
            if let Ok(d) = decode_blocks(&bad, u64::MAX) {
                assert_eq!(
                    d.len(),
                    parse_blocks(&bad, u64::MAX).unwrap().values as usize
                );
                // The magic and the payload count admit no other value; a changed count of
                // values within the same blocks, another 8-bit-significand bound or another
                // prefix code may parse (and decode, or fail in the blocks).
                assert!(i != 0 && i != 3, "head word {i} changed and still parsed");
            }
        }
    }
}

#[test]
fn strides_predict_down_columns_and_along_rows() {
    // Rows of 96 smooth values, each row like the one above: down the columns wins.
    let rows = 200;
    let cols = 96;
    let v: Vec<f32> = (0..rows * cols)
        .map(|i| ((i % cols) as f32 * 0.37).sin() * 3.0 + (i / cols) as f32 * 1e-3)
        .collect();
    let plain = encode_blocks(&v, 1e-3, 0).unwrap();
    let along = encode_blocks(&v, 1e-3, 1).unwrap();
    let down = encode_blocks(&v, 1e-3, cols).unwrap();
    assert_eq!(parse_blocks(&down, u64::MAX).unwrap().stride as usize, cols);
    assert!(
        down.len() * 2 < plain.len(),
        "{} vs {}",
        down.len(),
        plain.len()
    );
    assert!(along.len() <= plain.len());
    for data in [&plain, &along, &down] {
        let d = decode_blocks(data, u64::MAX).unwrap();
        check_bound(&v, &d, parse_blocks(data, u64::MAX).unwrap().bound);
    }
    // Rows that end mid-band (200 = 6 x 32 + 8), NaN inside a predicted run.
    let mut w = v.clone();
    w[5 * cols + 7] = f32::NAN;
    let data = encode_blocks(&w, 1e-3, cols).unwrap();
    let d = decode_blocks(&data, u64::MAX).unwrap();
    check_bound(&w, &d, 1e-3);
    // A stride that does not divide the count is refused.
    assert!(encode_blocks(&v, 1e-3, 97).is_err());
    assert!(encode_blocks(&v, 1e-3, rows * cols + 1).is_err());
}

#[test]
fn a_stride_of_short_columns_is_not_taken_for_its_blocks_cost() {
    // Two equal rows of 4000: down the columns saves most of a row's bits, but every block
    // holds 2 values and costs its length byte and padding.
    let row = activations(4000, 21);
    let v: Vec<f32> = row.iter().chain(&row).copied().collect();
    let plain = encode_blocks(&v, 1e-3, 0).unwrap();
    let offered = encode_blocks(&v, 1e-3, 4000).unwrap();
    assert_ne!(parse_blocks(&offered, u64::MAX).unwrap().stride, 4000);
    assert!(offered.len() <= plain.len());
    check_bound(&v, &decode_blocks(&offered, u64::MAX).unwrap(), 1e-3);
}
