//! Unit tests of the error-bounded arrays: pass geometry, each predictor's inverse, the
//! token stage, and small round trips.

use super::candidate::unit_for;
use super::format::*;
use super::predict::*;
use super::tokens::{decode_chunks, encode_chunk};
use super::*;
use crate::decode::DecodeOptions;
use crate::field::test_rng::Rng;
use crate::field::Bound;

const SHAPES: &[&[u32]] = &[
    &[1],
    &[2],
    &[7],
    &[64],
    &[5, 3],
    &[1, 9],
    &[17, 9],
    &[4, 4, 4],
    &[3, 1, 5, 2],
    &[2, 3, 5, 7],
];

fn orders(nd: usize) -> Vec<Vec<u8>> {
    vec![(0..nd as u8).collect(), (0..nd as u8).rev().collect()]
}

#[test]
fn passes_visit_every_value_but_the_first_once() {
    for shape in SHAPES {
        let n: usize = shape.iter().map(|&d| d as usize).product();
        let geo = Geometry::new(shape);
        for order in orders(shape.len()) {
            let mut seen = vec![0u32; n];
            seen[0] = 1;
            let ps = passes(shape.len(), levels_for(shape), &order);
            for p in &ps {
                let mut count = 0;
                geo.for_targets(p, |i, _| {
                    seen[i] += 1;
                    count += 1;
                });
                assert_eq!(count, geo.count(p), "{shape:?} {p:?}");
            }
            assert!(
                seen.iter().all(|&s| s == 1),
                "{shape:?} {order:?}: {seen:?}"
            );
        }
    }
}

#[test]
fn a_pass_sample_is_a_spread_subset_of_its_targets() {
    // Shapes with many rows (row samples) and few (target samples), with power-of-two axes
    // that a row step of 16 would alias with.
    for shape in [
        &[64u32, 64][..],
        &[9, 16, 32, 8],
        &[200],
        &[3, 1000],
        &[32, 32, 32],
    ] {
        let geo = Geometry::new(shape);
        let order: Vec<u8> = (0..shape.len() as u8).collect();
        for p in &passes(shape.len(), levels_for(shape), &order) {
            let mut all = Vec::new();
            geo.for_targets(p, |i, c| all.push((i, c)));
            let mut every1 = Vec::new();
            geo.for_sample(p, 1, |i, c| every1.push((i, c)));
            assert_eq!(every1, all, "{shape:?} {p:?}: every 1 is every target");
            let mut sample = Vec::new();
            geo.for_sample(p, 16, |i, c| sample.push((i, c)));
            // In C order, a subset, and about a sixteenth (a row sample takes whole rows).
            let mut it = all.iter();
            assert!(sample.iter().all(|s| it.any(|a| a == s)), "{shape:?} {p:?}");
            let (n, m) = (all.len(), sample.len());
            assert!(m <= n / 16 + n / 64 + 64, "{shape:?} {p:?}: {m} of {n}");
            if n >= 1 << 12 {
                assert!(m >= n / 24, "{shape:?} {p:?}: {m} of {n}");
                // Spread: along every axis where the pass has targets in both halves of the
                // array, so has the sample.
                let strides: Vec<usize> = (0..shape.len())
                    .map(|a| shape[a + 1..].iter().map(|&d| d as usize).product())
                    .collect();
                for (a, &d) in shape.iter().enumerate() {
                    let half = |i: usize| (i / strides[a]) % d as usize >= d as usize / 2;
                    for upper in [false, true] {
                        if all.iter().any(|&(i, _)| half(i) == upper) {
                            assert!(
                                sample.iter().any(|&(i, _)| half(i) == upper),
                                "{shape:?} {p:?} axis {a}"
                            );
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn lattice_inverse_undoes_forward() {
    let mut rng = Rng(7);
    for shape in SHAPES {
        let n: usize = shape.iter().map(|&d| d as usize).product();
        let geo = Geometry::new(shape);
        for order in orders(shape.len()) {
            let levels = levels_for(shape);
            let ps = passes(shape.len(), levels, &order);
            let u: Vec<i32> = (0..n)
                .map(|i| (i as i32 * 37) % 500 + rng.below(40) as i32)
                .collect();
            let exc: Vec<bool> = (0..n).map(|_| rng.below(10) == 0).collect();
            let steps: Vec<u8> = (0..=levels).map(|l| (16 >> (l.min(3))) as u8).collect();
            let (z, x, cubic) = lattice_forward(&geo, &ps, u.clone(), &exc, &steps, None);
            assert_eq!(z.len(), n);
            // Every regular target within half a step of its lattice value.
            for i in 0..n {
                if !exc[i] {
                    assert!(
                        (x[i] - u[i]).abs() <= 8,
                        "{shape:?} {i}: {} vs {}",
                        x[i],
                        u[i]
                    );
                }
            }
            let mut back = vec![0i32; n];
            lattice_inverse(&geo, &ps, &z, &steps, &cubic, 1 << 17, &mut back).unwrap();
            assert_eq!(back, x, "{shape:?} {order:?}");
            // A limit below the values is an error, not a panic.
            if x.iter().any(|&v| v.abs() >= 4) {
                assert!(lattice_inverse(&geo, &ps, &z, &steps, &cubic, 4, &mut back).is_err());
            }
        }
    }
}

#[test]
fn cubic_and_linear_predictions() {
    // x = 0, 10, 20, 30, ... along one axis: both kinds predict the middle exactly.
    let x: Vec<i32> = (0..9).map(|i| 10 * i).collect();
    assert_eq!(predict(&x, 4, 4, 9, 1, 1, false), 40);
    assert_eq!(predict(&x, 4, 4, 9, 1, 1, true), 40);
    // Cubic (-a + 9b + 9c - d + 8) >> 4 of a = 0, b = 16, c = 16, d = 0: 18.
    let y = [0, 0, 16, 0, 16, 0, 0];
    assert_eq!(predict(&y, 3, 3, 7, 1, 1, true), 18);
    assert_eq!(predict(&y, 3, 3, 7, 1, 1, false), 16);
    // No right neighbour: the left one.
    assert_eq!(predict(&y, 6, 6, 7, 1, 1, true), 0);
    // Negative values floor as arithmetic shifts do.
    let w = [-3, 0, -4];
    assert_eq!(predict(&w, 1, 1, 3, 1, 1, false), -3);
}

#[test]
fn differences_inverse_undoes_forward() {
    let mut rng = Rng(3);
    for shape in SHAPES {
        let n: usize = shape.iter().map(|&d| d as usize).product();
        let q: Vec<u32> = (0..n).map(|_| rng.below(65536) as u32).collect();
        for axes in 0..1u8 << shape.len() {
            let mut z = differences_forward(q.clone(), shape, axes);
            differences_inverse(&mut z, shape, axes);
            assert_eq!(z, q, "{shape:?} axes {axes}");
        }
    }
}

#[test]
fn tokens_round_trip() {
    let mut rng = Rng(11);
    for n in [1usize, 2, 3, 7, 300, 5001, 70000] {
        let mut z: Vec<u32> = (0..n)
            .map(|_| match rng.below(12) {
                0..=5 => 0,
                6..=8 => rng.below(4) as u32,
                9 => rng.below(1000) as u32,
                10 => u32::MAX - rng.below(3) as u32,
                _ => rng.next() as u32,
            })
            .collect();
        if n > 400 {
            z[10..400].fill(0);
        }
        if n > 69000 {
            z[20000..60000].fill(0);
        }
        for segments in [1usize, 3, 8] {
            let c = encode_chunk(&z, segments);
            let mut back = vec![7u32; n];
            decode_chunks(&c, &[&c], 20, segments, false, &mut back).unwrap();
            assert_eq!(back, z, "n {n} segments {segments}");
        }
    }
}

#[test]
fn units_have_the_asked_bits() {
    for limit in [1e-3, 0.7, 3.0, 1e6] {
        for bits in 1..=8 {
            let u = unit_for(limit, bits).unwrap();
            assert!(u as f64 <= limit && u as f64 > limit / 2.0);
            assert!(crate::field::format::bin_width_significand_bits(u) <= bits);
        }
    }
    assert!(unit_for(1e-300, 7).is_none());
    assert_eq!(lattice_limit(0.5), 1 << 23);
    assert_eq!(lattice_limit(f32::from_bits(0x3f82_0000)), 1 << 17);
}

fn check_round_trip(values: &[f32], shape: &[u32], opts: &BoundedOptions) -> Vec<u8> {
    let file = encode_bounded(values, shape, opts).unwrap();
    let (h, back) = decode_bounded(&file, &DecodeOptions::default()).unwrap();
    assert_eq!(h.shape, shape);
    assert_eq!(
        Bound::Absolute(h.bound),
        opts.bound,
        "the tests ask absolute bounds"
    );
    for (i, (&v, &b)) in values.iter().zip(&back).enumerate() {
        let special = !v.is_finite() || opts.fill_value.is_some_and(|f| f.to_bits() == v.to_bits());
        if special {
            assert_eq!(v.to_bits(), b.to_bits(), "value {i}");
        } else {
            assert!(
                (v as f64 - b as f64).abs() <= h.bound,
                "value {i}: {v} -> {b}"
            );
        }
    }
    file
}

#[test]
fn small_round_trips_both_predictors() {
    let mut rng = Rng(5);
    for shape in SHAPES {
        let n: usize = shape.iter().map(|&d| d as usize).product();
        let mut values: Vec<f32> = (0..n)
            .map(|i| (i as f32 * 0.37).sin() * 100.0 + rng.below(100) as f32 * 0.01)
            .collect();
        if n > 4 {
            values[1] = f32::NAN;
            values[n - 1] = -9999.0;
            values[n / 2] = f32::INFINITY;
        }
        for predictor in [Some(Predictor::Lattice), Some(Predictor::Differences), None] {
            for e in [1.0, 0.01] {
                let opts = BoundedOptions {
                    fill_value: Some(-9999.0),
                    predictor,
                    ..BoundedOptions::new(e)
                };
                let file = check_round_trip(&values, shape, &opts);
                if let Some(p) = predictor {
                    assert_eq!(parse_bounded(&file).unwrap().predictor, p);
                }
            }
        }
    }
}

#[test]
fn constant_and_all_nan_arrays() {
    check_round_trip(&[3.5; 100], &[10, 10], &BoundedOptions::new(0.1));
    check_round_trip(&[f32::NAN; 9], &[9], &BoundedOptions::new(0.1));
    check_round_trip(&[1e-40, 0.0, -1e-40], &[3], &BoundedOptions::new(1e-3));
}

/// A bound no predictor fits (more than 65536 bins and lattice values past 2^23, a unit
/// below the smallest normal f32, a relative bound of a constant array): the array is stored
/// exactly, as a lossless version 2 file with the fill value, for either predictor or both.
#[test]
fn a_bound_too_fine_for_any_predictor_stores_the_array_exactly() {
    use crate::field::{decode_lossless, field_version, FloatVec, LOSSLESS_VERSION};
    let mut v: Vec<f32> = (0..1000).map(|i| i as f32 * 1000.0).collect();
    v[5] = f32::NAN;
    v[9] = -1.0;
    let constant = [2.5f32; 12];
    let cases: [(&[f32], &[u32], Bound); 5] = [
        (&v, &[1000], Bound::Absolute(1e-6)),
        (&v, &[10, 100], Bound::Absolute(1e-300)),
        (&v, &[10, 10, 10], Bound::Relative(1e-12)),
        (&v, &[2, 5, 10, 10], Bound::Absolute(1e-4)),
        (&constant, &[3, 4], Bound::Relative(0.01)),
    ];
    for (values, shape, bound) in cases {
        for predictor in [None, Some(Predictor::Lattice), Some(Predictor::Differences)] {
            let o = BoundedOptions {
                fill_value: Some(-1.0),
                predictor,
                ..BoundedOptions::new(bound)
            };
            let file = encode_bounded(values, shape, &o).unwrap();
            assert_eq!(field_version(&file), Some(LOSSLESS_VERSION), "{bound:?}");
            assert!(decode_bounded(&file, &DecodeOptions::default()).is_err());
            let (h, back) = decode_lossless(&file, &DecodeOptions::default()).unwrap();
            assert_eq!(h.shape, shape);
            assert_eq!(h.fill_value, Some((-1.0f32).to_bits()));
            let FloatVec::F32(back) = back else {
                panic!("float32 expected")
            };
            assert!(values
                .iter()
                .zip(&back)
                .all(|(a, b)| a.to_bits() == b.to_bits()));
        }
    }
}

#[test]
fn unusable_bounds_and_shapes_are_refused() {
    let v: Vec<f32> = (0..1000).map(|i| i as f32 * 1000.0).collect();
    assert!(encode_bounded(&v, &[1000], &BoundedOptions::new(0.0)).is_err());
    assert!(encode_bounded(&v, &[1000], &BoundedOptions::new(f64::NAN)).is_err());
    assert!(encode_bounded(&v, &[10, 10], &BoundedOptions::new(1.0)).is_err());
    assert!(encode_bounded(&v, &[1000, 1, 1, 1, 1], &BoundedOptions::new(1.0)).is_err());
}

#[test]
fn decoding_into_a_wrong_buffer_is_an_error() {
    let v: Vec<f32> = (0..50).map(|i| i as f32).collect();
    let file = encode_bounded(&v, &[50], &BoundedOptions::new(0.5)).unwrap();
    let mut out = vec![0f32; 49];
    assert!(decode_bounded_into(&file, &DecodeOptions::default(), &mut out).is_err());
    let mut out = vec![0f32; 50];
    decode_bounded_into(&file, &DecodeOptions::default(), &mut out).unwrap();
    assert!(out.iter().zip(&v).all(|(a, b)| (a - b).abs() <= 0.5));
    let _ = (PAIR_LIMIT, BOUNDED_ALPHABET);
}

/// The bin rule (`BinRule`) at ties and near the bound: values exactly half a bin from a
/// bin centre, one ulp either side, values whose nearest bin misses the bound by an ulp, and
/// bounds that are not f32 values. Every accepted value reconstructs within the bound (in
/// exact arithmetic: f64 holds an f32 difference exactly), a rejected one has no bin among
/// the three candidates within the strict f32 test, and the CPU encoder's output decodes
/// within the bound with the exceptions exact.
#[test]
fn the_bin_rule_holds_the_bound_at_ties_and_edges() {
    use super::encode::BinRule;
    let mut rng = Rng(11);
    let mut accepted = 0;
    let mut rejected = 0;
    for bound in [0.5f64, 0.1, 1e-3, 0.3 + 1e-12, 7.25e-5, 1e-5 / 3.0] {
        for offset in [0.0f32, -0.0, -3.25, 1e3, -7.5e-3] {
            let rule = BinRule::new(bound, offset, 1e4 * bound).unwrap();
            assert!(rule.bound32 as f64 <= bound);
            assert!(f32::from_bits(rule.bound32.to_bits() + 1) as f64 > bound);
            let w = rule.width;
            let mut values = Vec::new();
            for k in 0..200u32 {
                let c = (k * 37 % 9000) as f32;
                let centre = offset + c * w;
                for x in [
                    centre + 0.5 * w,
                    centre - 0.5 * w,
                    centre + rule.bound32,
                    centre - rule.bound32,
                    centre + bound as f32,
                ] {
                    for d in -2i32..=2 {
                        let b = x.to_bits() as i64 + d as i64;
                        values.push(f32::from_bits(b as u32));
                    }
                }
                values.push(centre + (rng.below(1000) as f32 / 1000.0 - 0.5) * 2.0 * w);
            }
            for &v in &values {
                if !v.is_finite() || v.is_subnormal() || v < offset {
                    continue;
                }
                match rule.bin(v) {
                    Some(c) => {
                        accepted += 1;
                        let r = offset + c as f32 * w;
                        assert!(
                            (r as f64 - v as f64).abs() <= bound,
                            "bound {bound} offset {offset}: {v} -> bin {c} = {r}"
                        );
                    }
                    None => rejected += 1,
                }
            }
            let opts = BoundedOptions {
                predictor: Some(Predictor::Differences),
                axes: Some(1),
                ..BoundedOptions::new(bound)
            };
            let finite: Vec<f32> = values.iter().copied().filter(|v| *v >= offset).collect();
            check_round_trip(&finite, &[finite.len() as u32], &opts);
        }
    }
    // Most values have a bin; the ones exactly at or past the bound do not.
    assert!(
        accepted > 10 * rejected,
        "{accepted} accepted, {rejected} rejected"
    );
    assert!(rejected > 0);
}

/// Subnormal values are exceptions (stored exactly), and -0 sorts below +0 for the offset.
#[test]
fn subnormals_are_exact_and_negative_zero_is_the_smallest() {
    let v = [0.0f32, -0.0, 1e-40, -1e-41, 2.0, 1.0];
    let opts = BoundedOptions {
        predictor: Some(Predictor::Differences),
        ..BoundedOptions::new(0.1)
    };
    let file = check_round_trip(&v, &[6], &opts);
    let h = parse_bounded(&file).unwrap();
    assert_eq!(h.offset.to_bits(), (-0.0f32).to_bits());
    assert_eq!(h.runs, 2);
    let (_, back) = decode_bounded(&file, &DecodeOptions::default()).unwrap();
    assert_eq!(back[2].to_bits(), 1e-40f32.to_bits());
    assert_eq!(back[3].to_bits(), (-1e-41f32).to_bits());
}

/// A smooth field with noise, fill cells and NaN, large enough for the sampled path.
fn large_field(shape: &[u32], seed: u64, fill: f32) -> Vec<f32> {
    let n: usize = shape.iter().map(|&d| d as usize).product();
    let mut rng = Rng(seed);
    (0..n)
        .map(|i| {
            let r = rng.below(1000);
            if r < 20 {
                fill
            } else if r < 22 {
                f32::NAN
            } else {
                let (a, b) = ((i % 97) as f32, (i / 97 % 89) as f32);
                (a * 0.05).sin() * 40.0 + (b * 0.03).cos() * 25.0 + rng.below(100) as f32 * 0.01
            }
        })
        .collect()
}

/// Large arrays rank settings on a sample and code the predictor it finds smaller: every
/// value is within the bound, and the file is within a few percent of the smaller of the two
/// predictors forced (each coded in full).
#[test]
fn sampled_choice_is_within_the_bound_and_near_the_best_predictor() {
    let fill = -9999.0f32;
    for (shape, seed) in [
        (vec![300_000u32], 3u64),
        (vec![400, 330], 5),
        (vec![40, 60, 70], 7),
        (vec![6, 20, 30, 50], 11),
    ] {
        let v = large_field(&shape, seed, fill);
        for rel in [1e-2, 1e-4] {
            let with = |predictor| BoundedOptions {
                fill_value: Some(fill),
                predictor,
                ..BoundedOptions::new(Bound::Relative(rel))
            };
            let auto = encode_bounded(&v, &shape, &with(None)).unwrap();
            let (h, back) = decode_bounded(&auto, &DecodeOptions::default()).unwrap();
            for (i, (&a, &b)) in v.iter().zip(&back).enumerate() {
                if a.is_nan() {
                    assert!(b.is_nan(), "{shape:?} {rel}: cell {i}");
                } else if a == fill {
                    assert_eq!(b, fill, "{shape:?} {rel}: cell {i}");
                } else {
                    assert!(
                        (a as f64 - b as f64).abs() <= h.bound,
                        "{shape:?} {rel}: cell {i}"
                    );
                }
            }
            let best = [Predictor::Lattice, Predictor::Differences]
                .into_iter()
                .map(|p| encode_bounded(&v, &shape, &with(Some(p))).unwrap().len())
                .min()
                .unwrap();
            assert!(
                auto.len() as f64 <= best as f64 * 1.05,
                "{shape:?} {rel}: {} bytes against {best}",
                auto.len()
            );
        }
    }
}

#[test]
fn round_to_i32_is_round_ties_even_saturating() {
    use super::lattice_encode::round_to_i32;
    let mut rng = Rng(11);
    let mut ts = vec![
        0.0,
        -0.0,
        0.5,
        1.5,
        2.5,
        -0.5,
        -1.5,
        -2.5,
        0.49999999999999994,
        -0.49999999999999994,
        2147483646.5,
        2147483647.0,
        2147483647.5,
        2147483648.0,
        -2147483648.0,
        -2147483648.5,
        -2147483649.0,
        1e12,
        -1e12,
        1e300,
        -1e300,
        4503599627370495.5,
        -4503599627370495.5,
    ];
    for _ in 0..10_000 {
        let m = rng.below(1 << 24) as f64 - (1 << 23) as f64;
        ts.push(m / (1 + rng.below(64)) as f64);
        ts.push(m + 0.5);
    }
    for t in ts {
        assert_eq!(round_to_i32(t), t.round_ties_even() as i32, "{t}");
    }
}

/// The closed loop's `k` by the reciprocal (truncated, then corrected) is the exact floor of
/// `(diff + floor(step / 2)) / step` for every step and for differences at, beside and
/// between multiples of the step, up to two i32 values apart.
#[test]
fn the_quantiser_gives_the_exact_floor() {
    let mut rng = crate::field::test_rng::Rng(11);
    for step in 1..=300i64 {
        let q = Quantiser::new(step);
        let exact = |d: i64| (d + step / 2).div_euclid(step);
        let mut diffs: Vec<i64> = vec![0, 1, -1, i32::MAX as i64 * 2, i32::MIN as i64 * 2];
        for m in [1i64, 2, 7, 1000, 123_456_789, (1 << 32) / step] {
            for e in -2..=2 {
                for s in [1, -1] {
                    diffs.push(s * m * step + e - step / 2);
                }
            }
        }
        diffs.extend((0..200).map(|_| rng.next() as i64 >> 30));
        for d in diffs {
            assert_eq!(q.k(d), exact(d), "step {step}, diff {d}");
        }
    }
}
