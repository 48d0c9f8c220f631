//! Unit tests of the lossless float codec: tokens, codes and round trips of small arrays.

use super::format::*;
use super::*;
use crate::decode::DecodeOptions;
use crate::field::core::code::{canonical, code_lengths, MAX_TOKENS};
use crate::field::core::tokens::*;

fn round_trip(values: FloatSlice<'_>, shape: &[u32], options: &LosslessOptions) -> Vec<u8> {
    let file = encode_lossless(values, shape, options).expect("encode");
    for parallel in [false, true] {
        let o = DecodeOptions {
            parallel,
            ..Default::default()
        };
        let (h, back) = decode_lossless(&file, &o).expect("decode");
        assert_eq!(h.shape, shape);
        assert_eq!(back.as_slice().dtype(), values.dtype());
        let want: Vec<u8> = match values {
            FloatSlice::F32(v) => bytemuck::cast_slice(v).to_vec(),
            FloatSlice::F16(v) | FloatSlice::BF16(v) => bytemuck::cast_slice(v).to_vec(),
        };
        let got = back.as_bytes();
        let first = got.iter().zip(&want).position(|(a, b)| a != b);
        assert!(
            first.is_none() && got.len() == want.len(),
            "parallel {parallel}: byte {first:?}"
        );
        let mut into = vec![0u8; want.len() + 1];
        // An odd start, so the words are misaligned.
        decode_lossless_into(&file, &o, &mut into[1..]).expect("decode into");
        assert!(into[1..] == want[..], "decode_lossless_into differs");
    }
    file
}

#[test]
fn tokens_invert() {
    for width in [16u32, 32] {
        for z in (0..70000u32).chain([u32::MAX >> (32 - width), (1 << (width - 1)) + 5]) {
            let z = z & mask(width);
            let (t, nraw, raw) = token_of(z);
            assert!(t < single_tokens(width), "token {t} of {z}");
            let (base, n2, run) = token_base(width, t);
            assert_eq!((base + raw, n2, run), (z, nraw, false));
        }
        for n in 2..=RUN_MAX {
            let (t, nraw, raw) = run_token(width, n);
            let (base, n2, run) = token_base(width, t);
            assert_eq!((base + raw, n2, run), (n, nraw, true));
            assert!(t < alphabet(width));
        }
    }
}

#[test]
fn zigzag_and_order_invert() {
    for width in [16u32, 32] {
        for e in [
            0u32,
            1,
            2,
            0xffff,
            0x8000,
            0x7fff_ffff,
            0x8000_0000,
            u32::MAX,
        ] {
            let e = e & mask(width);
            assert_eq!(unzigzag(zigzag(e, width)) & mask(width), e);
            assert_eq!(from_ordered(to_ordered(e, width), width), e);
        }
    }
    // Order: -inf < -1 < -0 < +0 < 1 < inf.
    let o: Vec<u32> = [f32::NEG_INFINITY, -1.0, -0.0, 0.0, 1.0, f32::INFINITY]
        .iter()
        .map(|v| to_ordered(v.to_bits(), 32))
        .collect();
    assert!(o.windows(2).all(|w| w[0] < w[1]), "{o:x?}");
}

#[test]
fn codes_are_complete_and_limited() {
    let mut hist = [0u64; MAX_TOKENS];
    for (t, h) in hist.iter_mut().enumerate() {
        *h = 1u64 << (t % 40); // very skewed: forces the length limit
    }
    let mut lengths = [0u8; MAX_TOKENS];
    code_lengths(&hist, &mut lengths);
    assert_eq!(check_lengths(&lengths), Ok(()));
    assert!(lengths.iter().all(|&l| (1..=11).contains(&l)));
    let codes = canonical(&lengths);
    // Prefix-free: no code is a prefix of another (bit-reversed, so compare low bits).
    for (a, &(ca, la)) in codes.iter().enumerate() {
        for (b, &(cb, lb)) in codes.iter().enumerate() {
            if a != b && la <= lb {
                assert_ne!(cb & ((1 << la) - 1), ca, "{a} prefixes {b}");
            }
        }
    }
    assert!(check_lengths(&[1, 1, 1]).is_err());
    assert!(check_lengths(&[2, 2, 2]).is_err());
    assert!(check_lengths(&[0, 2]).is_err());
    assert!(check_lengths(&[12, 1]).is_err());
}

#[test]
fn round_trips_every_axis_count_and_set() {
    let shapes: [&[u32]; 4] = [&[1000], &[31, 47], &[5, 13, 17], &[3, 4, 5, 6]];
    for shape in shapes {
        let n: u32 = shape.iter().product();
        let v: Vec<f32> = (0..n)
            .map(|i| ((i as f32) * 0.37).sin() * 100.0 + i as f32 * 0.01)
            .collect();
        for axes in 0..1u8 << shape.len() {
            let o = LosslessOptions {
                axes: Some(axes),
                chunk_log2: 8,
                segments: 3,
                ..Default::default()
            };
            let file = round_trip(FloatSlice::F32(&v), shape, &o);
            assert_eq!(parse_lossless(&file).unwrap().axes, axes);
        }
        round_trip(FloatSlice::F32(&v), shape, &LosslessOptions::default());
    }
}

#[test]
fn specials_and_float_mult() {
    let mut v: Vec<f32> = (0..5000)
        .map(|i| ((i % 700) as f32 * 0.001) + 12.0)
        .collect();
    for (i, bits) in [
        0x7fc0_0001u32,
        0xffc0_1234,
        0x7f80_0001,
        0x8000_0000,
        0x0000_0001,
        0x7f80_0000,
        0xff80_0000,
    ]
    .iter()
    .enumerate()
    {
        v[100 * i + 7] = f32::from_bits(*bits);
    }
    v[3000..3400].fill(-9999.0);
    let o = LosslessOptions {
        fill_value: Some((-9999.0f32).to_bits()),
        chunk_log2: 10,
        ..Default::default()
    };
    let file = round_trip(FloatSlice::F32(&v), &[50, 100], &o);
    let h = parse_lossless(&file).unwrap();
    assert!(
        h.mult_base.is_some(),
        "a 0.001 grid should take float-mult: {h:?}"
    );
    assert!(h.runs > 0, "the fill block should be runs: {h:?}");
}

#[test]
fn constant_and_zero_arrays() {
    let z = vec![0f32; 100_000];
    let file = round_trip(FloatSlice::F32(&z), &[100_000], &LosslessOptions::default());
    assert!(file.len() < 2000, "{} bytes", file.len());
    let c = vec![0x3c00u16; 777];
    round_trip(FloatSlice::F16(&c), &[777], &LosslessOptions::default());
    round_trip(
        FloatSlice::BF16(&[0x7fc1]),
        &[1],
        &LosslessOptions::default(),
    );
}

#[test]
fn bad_options_are_errors() {
    let v = [1.0f32; 8];
    let e = |shape: &[u32], o: &LosslessOptions| encode_lossless(FloatSlice::F32(&v), shape, o);
    let d = LosslessOptions::default();
    assert!(e(&[], &d).is_err());
    assert!(e(&[1, 1, 1, 2, 4], &d).is_err());
    assert!(e(&[9], &d).is_err());
    assert!(e(
        &[8],
        &LosslessOptions {
            segments: 0,
            ..d.clone()
        }
    )
    .is_err());
    assert!(e(
        &[8],
        &LosslessOptions {
            chunk_log2: 21,
            ..d.clone()
        }
    )
    .is_err());
    assert!(e(
        &[8],
        &LosslessOptions {
            axes: Some(2),
            ..d.clone()
        }
    )
    .is_err());
    let h = encode_lossless(
        FloatSlice::F16(&[1; 8]),
        &[8],
        &LosslessOptions {
            fill_value: Some(0x10000),
            ..d
        },
    );
    assert!(h.is_err());
}

/// A sparse field (90 % exact zeros) whose other values are tenths: the float-mult base is
/// the values' grid, 0.1, not a coarser base that only the zeros fit (the fit counts
/// distinct values).
#[test]
fn sparse_tenths_take_their_own_grid() {
    let mut state = 12345u32;
    let mut next = || {
        state = state.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
        state >> 8
    };
    let v: Vec<f32> = (0..60_000)
        .map(|_| {
            if next() % 10 == 0 {
                ((1 + next() % 500) as f64 / 10.0) as f32
            } else {
                0.0
            }
        })
        .collect();
    // Without the value table, which would code these 501 values best.
    let o = LosslessOptions {
        value_table: false,
        ..Default::default()
    };
    let file = round_trip(FloatSlice::F32(&v), &[200, 300], &o);
    let h = parse_lossless(&file).unwrap();
    assert_eq!(h.mult_base, Some(0.1), "{h:?}");
}

/// Packed values unpacked: `f32(q x scale + offset)` with int16 `q` on a coarse grid of
/// `grid` steps (as in reanalysis files), whose ordered bits differ by hundreds of steps
/// between neighbours.
fn unpacked(n: usize, grid: f64) -> Vec<f32> {
    let (scale, offset) = (-0.001_572_704_938_045_535_f64, 26.968_75_f64);
    (0..n)
        .map(|i| {
            let x = i as f64 * 0.002;
            let q = ((x.sin() * 9000.0 + (x * 7.3).cos() * 500.0) / grid).round() * grid;
            (q * scale + offset) as f32
        })
        .collect()
}

/// 16-bit patterns drawn at random among a few far apart (with a NaN, -0.0 and infinity):
/// their ordered bits jump, their table indices do not.
fn scattered_16(n: usize) -> Vec<u16> {
    let pick = [
        0x3f80u16, 0xc2c8, 0x4700, 0x0001, 0x7f80, 0x8000, 0x7fc3, 0x1234,
    ];
    let mut state = 99u32;
    (0..n)
        .map(|_| {
            state = state.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            pick[(state >> 29) as usize]
        })
        .collect()
}

/// The file with its header (value table included) rewritten by `change`, the CRC fixed.
fn with_header(file: &[u8], change: impl Fn(&mut LosslessHeader)) -> Vec<u8> {
    let h = parse_lossless(file).unwrap();
    let old = h.header_len() as usize - 4 * h.chunks() as usize;
    let mut h2 = h.clone();
    change(&mut h2);
    let mut out = h2.to_bytes();
    out.extend_from_slice(&file[old..file.len() - 4]);
    let crc = crc32fast::hash(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// Rewrites bytes at `at` and the CRC.
fn with_bytes(file: &[u8], at: usize, bytes: &[u8]) -> Vec<u8> {
    let mut f = file.to_vec();
    f[at..at + bytes.len()].copy_from_slice(bytes);
    let n = f.len() - 4;
    let crc = crc32fast::hash(&f[..n]);
    f[n..].copy_from_slice(&crc.to_le_bytes());
    f
}

/// Unpacked values code as value-table indices, far smaller than their ordered bits; and
/// with the table turned off the encoder writes what it wrote before.
#[test]
fn unpacked_values_take_a_value_table() {
    let v = unpacked(40_000, 24.0);
    let shape = [200, 200];
    let file = round_trip(FloatSlice::F32(&v), &shape, &LosslessOptions::default());
    let h = parse_lossless(&file).unwrap();
    assert!(!h.table.is_empty() && h.mult_base.is_none(), "{h:?}");
    let mut distinct: Vec<u32> = v.iter().map(|x| x.to_bits()).collect();
    distinct.sort_unstable();
    distinct.dedup();
    assert_eq!(h.table.len(), distinct.len());
    let off = LosslessOptions {
        value_table: false,
        ..Default::default()
    };
    let plain = round_trip(FloatSlice::F32(&v), &shape, &off);
    assert!(parse_lossless(&plain).unwrap().table.is_empty());
    assert!(
        file.len() * 2 < plain.len(),
        "table {} bytes, without {}",
        file.len(),
        plain.len()
    );
}

/// Value tables with NaN payloads, -0.0, infinities and a fill value (inline or as runs),
/// in float16 and bfloat16 too, in every axis count.
#[test]
fn value_tables_with_specials_and_16_bit_types() {
    let shapes: [&[u32]; 4] = [&[3000], &[40, 75], &[6, 20, 25], &[2, 3, 20, 25]];
    for shape in shapes {
        let n = shape.iter().product::<u32>() as usize;
        let mut v = unpacked(n, 240.0);
        for (i, x) in v.iter_mut().enumerate() {
            match i % 53 {
                3 => *x = f32::from_bits(0x7fc0_0000 | (i as u32 % 7)),
                5 => *x = -0.0,
                7 => *x = f32::NEG_INFINITY,
                9 => *x = -999.0,
                _ => {}
            }
        }
        for fill in [None, Some((-999.0f32).to_bits())] {
            let o = LosslessOptions {
                fill_value: fill,
                chunk_log2: 9,
                segments: 3,
                ..Default::default()
            };
            let file = round_trip(FloatSlice::F32(&v), shape, &o);
            assert!(!parse_lossless(&file).unwrap().table.is_empty());
        }
        let o = LosslessOptions {
            chunk_log2: 8,
            ..Default::default()
        };
        let bf = scattered_16(n);
        let file = round_trip(FloatSlice::BF16(&bf), shape, &o);
        assert!(!parse_lossless(&file).unwrap().table.is_empty());
        let f16: Vec<u16> = bf.iter().map(|&b| b ^ 0x15).collect();
        let file = round_trip(FloatSlice::F16(&f16), shape, &o);
        assert!(!parse_lossless(&file).unwrap().table.is_empty());
    }
}

/// A lying value table is an error, never a panic: an index past a shortened table, a size
/// of 0 or past the values, a table past the file's end, entries out of order or wider
/// than the dtype, the table and float-mult flags together.
#[test]
fn bad_value_tables_are_errors() {
    let v = unpacked(5000, 24.0);
    let file = round_trip(FloatSlice::F32(&v), &[5000], &LosslessOptions::default());
    let h = parse_lossless(&file).unwrap();
    let k = h.table.len() as u32;
    assert!(k > 2);
    let o = DecodeOptions::default();
    // The file as written, rebuilt from its parsed header: the same bytes.
    assert_eq!(with_header(&file, |_| {}), file);
    for parallel in [false, true] {
        let o = DecodeOptions { parallel, ..o };
        let shorter = with_header(&file, |h| {
            h.table.pop();
        });
        let e = decode_lossless(&shorter, &o).unwrap_err();
        assert!(e.to_string().contains("value table"), "{e}");
    }
    let p = 12 + 4;
    assert!(parse_lossless(&with_bytes(&file, p + 4, &0u32.to_le_bytes())).is_err());
    assert!(parse_lossless(&with_bytes(&file, p + 4, &5001u32.to_le_bytes())).is_err());
    // More entries than the bytes left: refused before allocating.
    let many = with_bytes(&file, p + 4, &5000u32.to_le_bytes());
    assert!(parse_lossless(&many[..p + 20 + 100]).is_err());
    let mut short = file[..p + 24].to_vec();
    assert!(parse_lossless(&short).is_err());
    short.truncate(p + 20);
    assert!(parse_lossless(&short).is_err());
    // An entry repeated: no longer strictly increasing.
    let repeated = with_header(&file, |h| h.table[1] = h.table[0]);
    let e = decode_lossless(&repeated, &o).unwrap_err();
    assert!(e.to_string().contains("increase"), "{e}");
    // The mult flag as well as the table flag.
    let mut both = file.clone();
    both[11] |= LOSSLESS_FLAG_MULT;
    assert!(decode_lossless(&with_bytes(&both, 11, &[both[11]]), &o).is_err());
    // A 16-bit table with an entry past 16 bits.
    let bf = scattered_16(5000);
    let f16 = round_trip(FloatSlice::BF16(&bf), &[5000], &LosslessOptions::default());
    assert!(!parse_lossless(&f16).unwrap().table.is_empty());
    let wide = with_header(&f16, |h| *h.table.last_mut().unwrap() = 0x1_7f00);
    assert!(decode_lossless(&wide, &o).is_err());
    // A varint that is not minimal (a first entry of 5 written in two bytes).
    let h = parse_lossless(&f16).unwrap();
    let t = 12 + 4 + 20;
    let mut loose = h.to_bytes()[..t].to_vec();
    loose.extend_from_slice(&[0x85, 0x00]);
    loose.extend_from_slice(&[1; 40]);
    assert!(parse_lossless(&loose).is_err());
}

/// A smooth 1-D signal of integers stored as float (a seismogram's counts): its first
/// differences still trend, its second differences are small. `n` values.
fn seismogram(n: usize) -> Vec<f32> {
    let mut rng = crate::field::test_rng::Rng(7);
    let (mut v, mut slope) = (0i64, 0i64);
    (0..n)
        .map(|i| {
            // A slowly turning slope plus a little noise in the acceleration.
            slope += rng.below(9) as i64 - 4 - slope / 64;
            v += slope + ((i as f64 * 0.002).sin() * 40.0) as i64;
            v as f32
        })
        .collect()
}

/// Second differences: chosen for a smooth 1-D signal (and smaller than first differences
/// alone), decoded bit for bit on every path; forced on arrays of 1 to 4 axes over every
/// axis set and every subset of it, in all three types; refused where not a subset.
#[test]
fn second_differences_round_trip_and_are_chosen_where_smaller() {
    let v = seismogram(50_000);
    let o = LosslessOptions {
        chunk_log2: 12,
        ..Default::default()
    };
    let file = round_trip(FloatSlice::F32(&v), &[v.len() as u32], &o);
    let h = parse_lossless(&file).unwrap();
    assert_eq!((h.axes, h.axes2), (1, 1), "second differences chosen");
    let once = round_trip(
        FloatSlice::F32(&v),
        &[v.len() as u32],
        &LosslessOptions {
            axes: Some(1),
            axes2: Some(0),
            ..o.clone()
        },
    );
    assert!(
        file.len() * 10 < once.len() * 9,
        "{} vs {} bytes",
        file.len(),
        once.len()
    );
    // Forced, every set and subset, on arrays of 1 to 4 axes; chunks of 256 values so the
    // arrays span several.
    let shapes: [&[u32]; 4] = [&[1000], &[31, 47], &[5, 13, 17], &[3, 4, 5, 6]];
    for shape in shapes {
        let n: u32 = shape.iter().product();
        let f: Vec<f32> = (0..n)
            .map(|i| ((i as f32) * 0.37).sin() * 100.0 + (i * i) as f32 * 0.001)
            .collect();
        // Smooth 16-bit patterns: positive finite float16s growing with the value, and
        // bfloat16 as float32's top half.
        let h16: Vec<u16> = f
            .iter()
            .map(|x| ((x + 200.0) * 8.0) as u16 & 0x7bff)
            .collect();
        let b16: Vec<u16> = f.iter().map(|x| (x.to_bits() >> 16) as u16).collect();
        for axes in 0..1u8 << shape.len() {
            let mut axes2 = axes;
            loop {
                let o = LosslessOptions {
                    axes: Some(axes),
                    axes2: Some(axes2),
                    chunk_log2: 8,
                    segments: 3,
                    ..Default::default()
                };
                for values in [
                    FloatSlice::F32(&f),
                    FloatSlice::F16(&h16),
                    FloatSlice::BF16(&b16),
                ] {
                    let file = round_trip(values, shape, &o);
                    let h = parse_lossless(&file).unwrap();
                    assert_eq!((h.axes, h.axes2), (axes, axes2));
                }
                if axes2 == 0 {
                    break;
                }
                axes2 = (axes2 - 1) & axes;
            }
        }
    }
    let e = |axes, axes2| {
        encode_lossless(
            FloatSlice::F32(&v[..64]),
            &[8, 8],
            &LosslessOptions {
                axes,
                axes2,
                ..Default::default()
            },
        )
    };
    assert!(e(Some(0b01), Some(0b10)).is_err(), "not a subset");
    assert!(e(None, Some(0b01)).is_err(), "axes not given");
    assert!(e(Some(0b11), Some(0b10)).is_ok());
}

/// A header whose second-difference axes are not among its axes is refused, naming the
/// field.
#[test]
fn second_difference_axes_outside_the_axes_are_refused() {
    let v = seismogram(4096);
    let file = encode_lossless(
        FloatSlice::F32(&v),
        &[64, 64],
        &LosslessOptions {
            axes: Some(0b01),
            axes2: Some(0b01),
            ..Default::default()
        },
    )
    .unwrap();
    let bad = with_header(&file, |h| h.axes2 = 0b10);
    let err = decode_lossless(&bad, &DecodeOptions::default()).unwrap_err();
    assert!(err.to_string().contains("axes2"), "{err}");
}

/// A window decode gives the whole decode's values in the window's rows and columns, where it
/// decodes only each plane's segments down to the window's last row (one chunk a plane) and
/// where it falls back to the whole array (chunks across planes, second differences, float-mult
/// adjustments): float32 and bfloat16, differences along any axes, value tables, NaN runs.
#[test]
fn window_decodes_give_the_whole_decodes_values() {
    let smooth = |shape: &[u32], nan: bool| -> Vec<f32> {
        let (ny, nx) = (
            shape[shape.len() - 2] as usize,
            shape[shape.len() - 1] as usize,
        );
        let n: usize = shape.iter().map(|&d| d as usize).product();
        (0..n)
            .map(|i| {
                let (p, y, x) = (i / (ny * nx), i / nx % ny, i % nx);
                if nan && (i * 7919) % 97 == 0 {
                    f32::NAN
                } else {
                    (p as f32 * 0.3 + (y as f32 * 0.05).sin() * 3.0 + (x as f32 * 0.07).cos())
                        .mul_add(1.0 + (i % 5) as f32 * 1e-6, 0.0)
                }
            })
            .collect()
    };
    let default = LosslessOptions::default();
    let cases: Vec<(Vec<u32>, Vec<f32>, LosslessOptions, bool)> = vec![
        // One chunk a plane (2^16 values): the prefix path.
        (
            vec![3, 256, 256],
            smooth(&[3, 256, 256], false),
            default.clone(),
            true,
        ),
        (
            vec![256, 256],
            smooth(&[256, 256], true),
            default.clone(),
            true,
        ),
        (
            vec![2, 2, 16, 16],
            smooth(&[2, 2, 16, 16], false),
            LosslessOptions {
                chunk_log2: 8,
                segments: 5,
                ..default.clone()
            },
            true,
        ),
        (
            vec![3, 256, 256],
            smooth(&[3, 256, 256], false),
            LosslessOptions {
                axes: Some(0b011),
                ..default.clone()
            },
            true,
        ),
        (
            vec![2, 256, 256],
            unpacked(2 * 65536, 1.0),
            LosslessOptions {
                axes: Some(0b101),
                axes2: Some(0),
                ..default.clone()
            },
            true,
        ),
        // Whole-array fallbacks: chunks across planes, second differences.
        (
            vec![3, 100, 100],
            smooth(&[3, 100, 100], false),
            default.clone(),
            false,
        ),
        (
            vec![2, 256, 256],
            smooth(&[2, 256, 256], false),
            LosslessOptions {
                axes: Some(0b110),
                axes2: Some(0b100),
                ..default.clone()
            },
            false,
        ),
    ];
    let windows = [
        (0..1, 0..256),
        (10..75, 3..130),
        (128..256, 128..256),
        (200..300, 0..9),
    ];
    for (shape, values, options, prefix) in cases {
        let bf16: Vec<u16> = values.iter().map(|&v| (v.to_bits() >> 16) as u16).collect();
        for input in [FloatSlice::F32(&values), FloatSlice::BF16(&bf16)] {
            let file = encode_lossless(input, &shape, &options).expect("encode");
            let o = DecodeOptions::default();
            let (h, whole) = decode_lossless(&file, &o).expect("decode");
            let (whole, size) = (whole.as_bytes().to_vec(), input.dtype().size());
            let (ny, nx) = (shape[shape.len() - 2], shape[shape.len() - 1]);
            for (rows, columns) in windows.clone() {
                assert_eq!(
                    decode::prefix_segments(&h, rows.end).is_some(),
                    prefix && rows.end < ny * 7 / 8,
                    "{shape:?} {rows:?}: the path taken"
                );
                let (_, part) =
                    decode_lossless_window(&file, &o, Some((rows.clone(), columns.clone())))
                        .expect("window decode");
                let part = part.as_bytes();
                assert_eq!(part.len(), whole.len());
                let planes = whole.len() / size / (ny * nx) as usize;
                for p in 0..planes {
                    for y in rows.start..rows.end.min(ny) {
                        let row = (p * ny as usize + y as usize) * nx as usize;
                        let span = (row + columns.start.min(nx) as usize) * size
                            ..(row + columns.end.min(nx) as usize) * size;
                        assert!(
                            part[span.clone()] == whole[span],
                            "{shape:?} {rows:?} x {columns:?}, plane {p} row {y}"
                        );
                    }
                }
            }
        }
    }
}
