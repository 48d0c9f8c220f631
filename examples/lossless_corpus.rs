//! Lossless float arrays on a corpus folder: per array the encoder's choices (axes, `+` the
//! axes of second differences, float-mult
//! base or value table `T<entries>`, exception runs), the bytes of residual and adjustment streams, the ratio and the
//! one-thread decode speed, each round trip checked bit for bit.
//!
//! `cargo run --release --example lossless_corpus -- DIR [NAME_SUBSTRING]`
//! (DIR holds `NAME.f32` raw little-endian float32, C order, and `NAME.json` with "shape" and
//! optional "fill_value", the layout of scripts/peers_lossless.py). float32 arrays only.

use std::path::Path;
use std::time::Instant;

#[path = "common/sidecar.rs"]
mod sidecar;

use l3::decode::DecodeOptions;
use l3::field::{decode_lossless, encode_lossless, parse_lossless, FloatSlice, FloatVec};
use l3::field::{LosslessHeader, LosslessOptions};

/// (header, runs section, residual bytes, adjustment bytes, chunk heads) of a file.
fn breakdown(data: &[u8], h: &LosslessHeader) -> (usize, usize, usize, usize) {
    // The header's fields and the value table (the chunk table ends the header).
    let head = h.header_len() as usize - 4 * h.chunks() as usize;
    let n: u64 = h.shape.iter().map(|&s| s as u64).product();
    let nchunks = n.div_ceil(1 << h.chunk_log2) as usize;
    let table: Vec<usize> = (0..nchunks)
        .map(|c| {
            let at = head + 4 * c;
            u32::from_le_bytes(data[at..at + 4].try_into().unwrap()) as usize
        })
        .collect();
    let runs_len = h.runs_len as usize;
    let mut at = head + 4 * nchunks + runs_len;
    let s = h.segments as usize;
    let (mut res, mut adj, mut heads) = (0, 0, 0);
    for len in table {
        let c = &data[at..at + len];
        let flag = c[0];
        let mut p = 1;
        let ntok = c[p] as usize;
        p += 1 + ntok.div_ceil(2);
        if flag & 1 == 1 {
            let nt = c[p] as usize;
            p += 1 + nt.div_ceil(2);
        }
        let lens: Vec<usize> = (0..if flag & 1 == 1 { 2 * s } else { s })
            .map(|k| u32::from_le_bytes(c[p + 4 * k..p + 4 * k + 4].try_into().unwrap()) as usize)
            .collect();
        p += 4 * lens.len();
        heads += p;
        res += lens[..s].iter().sum::<usize>();
        adj += lens[s..].iter().sum::<usize>();
        at += len;
    }
    (runs_len, res, adj, heads)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let dir = Path::new(args.get(1).map_or("../shared/data/float32", |s| s.as_str()));
    let filter = args.get(2).cloned().unwrap_or_default();
    let names = sidecar::array_names(dir, &filter);
    println!(
        "{:26} {:>9} {:>7} {:>6} {:>4} {:>10} {:>7} {:>9} {:>9} {:>6} {:>8}",
        "array",
        "values",
        "ratio",
        "bits",
        "axes",
        "base",
        "runs",
        "residual",
        "adjust",
        "heads",
        "dec MB/s"
    );
    let (mut raw_total, mut enc_total, mut logs) = (0usize, 0usize, 0.0f64);
    for name in &names {
        let bytes = std::fs::read(dir.join(format!("{name}.f32"))).unwrap();
        let meta = std::fs::read_to_string(dir.join(format!("{name}.json"))).unwrap();
        let shape = sidecar::parse_shape(&meta);
        let fill = sidecar::parse_fill(&meta);
        let v: Vec<f32> = bytes
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
            .collect();
        let env = |k: &str| std::env::var(k).ok().and_then(|v| v.parse::<u8>().ok());
        let d = LosslessOptions::default();
        let options = LosslessOptions {
            fill_value: fill.map(f32::to_bits),
            // Knobs for studies: AXES (bit set), CHUNK_LOG2, SEGMENTS, NO_MULT=1, REPS.
            axes: env("AXES"),
            chunk_log2: env("CHUNK_LOG2").unwrap_or(d.chunk_log2),
            segments: env("SEGMENTS").unwrap_or(d.segments),
            float_mult: env("NO_MULT").is_none(),
            ..d
        };
        let enc = encode_lossless(FloatSlice::F32(&v), &shape, &options).unwrap();
        let h = parse_lossless(&enc).unwrap();
        let dopt = DecodeOptions {
            parallel: false,
            ..DecodeOptions::default()
        };
        let mut best = f64::INFINITY;
        // REPS (default 3) decodes, the fastest counted.
        for _ in 0..env("REPS").unwrap_or(3) {
            let t = Instant::now();
            let (_, out) = decode_lossless(&enc, &dopt).unwrap();
            best = best.min(t.elapsed().as_secs_f64());
            let FloatVec::F32(out) = out else {
                panic!("float32")
            };
            assert!(
                out.iter().zip(&v).all(|(a, b)| a.to_bits() == b.to_bits()),
                "{name}: round trip differs"
            );
        }
        let (runs, res, adj, heads) = breakdown(&enc, &h);
        let ratio = bytes.len() as f64 / enc.len() as f64;
        raw_total += bytes.len();
        enc_total += enc.len();
        logs += ratio.ln();
        println!(
            "{:26} {:>9} {:>7.3} {:>6.2} {:>4} {:>10} {:>7} {:>9} {:>9} {:>6} {:>8.0}",
            name,
            v.len(),
            ratio,
            enc.len() as f64 * 8.0 / v.len() as f64,
            match h.axes2 {
                0 => format!("{:b}", h.axes),
                a2 => format!("{:b}+{:b}", h.axes, a2),
            },
            match (h.mult_base, h.table.len()) {
                (Some(b), _) => format!("{b:e}"),
                (None, 0) => "-".into(),
                (None, k) => format!("T{k}"),
            },
            runs,
            res,
            adj,
            heads,
            bytes.len() as f64 / best / 1e6
        );
    }
    println!(
        "total ratio {:.3}  geomean {:.3}  ({} arrays)",
        raw_total as f64 / enc_total as f64,
        (logs / names.len() as f64).exp(),
        names.len()
    );
}
