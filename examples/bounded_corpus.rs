//! Error-bounded float arrays (version 3) on a corpus folder: per array and relative bound
//! the predictor chosen, the ratio, and the one-thread encode and decode speeds (the fastest of
//! REPS, default 3), every decoded value checked against the bound.
//!
//! `cargo run --release --example bounded_corpus -- DIR [NAME_SUBSTRING]`
//! (DIR holds `NAME.f32` raw little-endian float32, C order, and `NAME.json` with "shape" and
//! optional "fill_value"). BOUNDS (comma-separated, default `1e-2,1e-3,1e-4`) sets the
//! relative bounds; `FORMAT=v1` encodes version 1 files instead (2 or 3 axes only: the
//! others are skipped), for the two formats side by side.

#[path = "common/sidecar.rs"]
mod sidecar;

use std::path::Path;
use std::time::Instant;

use l3::decode::DecodeOptions;
use l3::field::{
    decode_float_array, encode_bounded, encode_field, parse_bounded, Bound, BoundedOptions,
    FieldOptions, FloatVec,
};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let dir = Path::new(args.get(1).map_or("../shared/data/float32", |s| s.as_str()));
    let filter = args.get(2).cloned().unwrap_or_default();
    let reps: usize = std::env::var("REPS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(3);
    let bounds: Vec<f64> = std::env::var("BOUNDS")
        .unwrap_or_else(|_| "1e-2,1e-3,1e-4".into())
        .split(',')
        .map(|b| b.trim().parse().expect("a bound"))
        .collect();
    let v1 = std::env::var("FORMAT").is_ok_and(|f| f == "v1");
    let names = sidecar::array_names(dir, &filter);
    println!(
        "{:30} {:>7} {:>12} {:>8} {:>8} {:>8}",
        "array", "bound", "predictor", "ratio", "enc MB/s", "dec MB/s"
    );
    // Per bound: raw and encoded bytes, sum of log ratios, encode and decode seconds.
    let mut totals = vec![(0usize, 0usize, 0.0f64, 0.0f64, 0.0f64); bounds.len()];
    for name in &names {
        let bytes = std::fs::read(dir.join(format!("{name}.f32"))).unwrap();
        let meta = std::fs::read_to_string(dir.join(format!("{name}.json"))).unwrap();
        let shape = sidecar::parse_shape(&meta);
        let fill = sidecar::parse_fill(&meta);
        if v1 && !matches!(shape.len(), 2 | 3) {
            continue;
        }
        let v: Vec<f32> = bytes
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
            .collect();
        for (k, &rel) in bounds.iter().enumerate() {
            let options = BoundedOptions {
                fill_value: fill,
                parallel: false,
                ..BoundedOptions::new(Bound::Relative(rel))
            };
            let limit = Bound::Relative(rel).resolve(&v, fill);
            let (mut enc, mut te) = (Vec::new(), f64::INFINITY);
            for _ in 0..reps {
                let t = Instant::now();
                enc = if v1 {
                    let options = FieldOptions {
                        fill_value: fill,
                        ..FieldOptions::new(Bound::Relative(rel))
                    };
                    encode_field(&v, &shape, &options).unwrap()
                } else {
                    encode_bounded(&v, &shape, &options).unwrap()
                };
                te = te.min(t.elapsed().as_secs_f64());
            }
            let dopt = DecodeOptions {
                parallel: false,
                ..DecodeOptions::default()
            };
            let (mut out, mut td) = (Vec::new(), f64::INFINITY);
            for _ in 0..reps {
                let t = Instant::now();
                let FloatVec::F32(o) = decode_float_array(&enc, &dopt).unwrap().1 else {
                    panic!("{name}: float32 expected")
                };
                out = o;
                td = td.min(t.elapsed().as_secs_f64());
            }
            check(name, rel, limit, fill, &v, &out);
            let predictor = match (l3::field::field_version(&enc), parse_bounded(&enc)) {
                (_, Ok(h)) => format!("{:.1}{:?}", format!("{:?}", h.predictor), h.axes),
                (Some(1), _) => "v1".into(),
                _ => "exact".into(),
            };
            let ratio = bytes.len() as f64 / enc.len() as f64;
            let t = &mut totals[k];
            t.0 += bytes.len();
            t.1 += enc.len();
            t.2 += ratio.ln();
            t.3 += te;
            t.4 += td;
            println!(
                "{:30} {:>7.0e} {:>12} {:>8.2} {:>8.1} {:>8.0}",
                name,
                rel,
                predictor,
                ratio,
                bytes.len() as f64 / te / 1e6,
                bytes.len() as f64 / td / 1e6
            );
        }
    }
    for (k, &rel) in bounds.iter().enumerate() {
        let t = totals[k];
        println!(
            "bound {rel:.0e}: total ratio {:.2}  geomean {:.2}  encode {:.1} MB/s  decode {:.0} MB/s  ({} arrays)",
            t.0 as f64 / t.1 as f64,
            (t.2 / names.len() as f64).exp(),
            t.0 as f64 / t.3 / 1e6,
            t.0 as f64 / t.4 / 1e6,
            names.len()
        );
    }
}

/// Panics naming the array and cell when a decoded value misses the bound (NaN and the fill
/// value must come back exactly).
fn check(name: &str, rel: f64, limit: f64, fill: Option<f32>, v: &[f32], out: &[f32]) {
    assert_eq!(v.len(), out.len(), "{name}: length");
    for (i, (&a, &b)) in v.iter().zip(out).enumerate() {
        let exact = a.is_nan() || !a.is_finite() || Some(a) == fill || a.is_subnormal();
        let ok = if exact {
            a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())
        } else {
            (a as f64 - b as f64).abs() <= limit
        };
        assert!(
            ok,
            "{name} at {rel:e}: cell {i}: {a} decoded as {b} (bound {limit})"
        );
    }
}
