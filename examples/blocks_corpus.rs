//! Block-coded arrays over a folder of raw float32 files named `NAME_I_BOUND_BYTES.f32`
//! (`BOUND` the absolute bound to code at, `BYTES` a peer's size to compare with, e.g. the
//! error-bounded file of the same values), with an optional `NAME_I.shape` beside it (the
//! comma-separated shape: its last axis is the stride offered to the encoder): per name
//! prefix, the raw, peer and block-coded totals and ratios, encode and decode MB/s (one
//! thread), every value checked within the stored bound.
//!
//!     cargo run --release --example blocks_corpus DIR

use std::collections::BTreeMap;
use std::time::Instant;

use l3::field::blocks::{decode_blocks, encode_blocks, parse_blocks};

fn main() {
    let dir = std::env::args()
        .nth(1)
        .expect("a folder of NAME_I_BOUND_BYTES.f32 files");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("readable")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "f32"))
        .collect();
    files.sort();
    // name -> raw, peer, blocks bytes, encode s, decode s
    let mut sums: BTreeMap<String, [f64; 5]> = BTreeMap::new();
    for f in &files {
        let stem = f.file_stem().unwrap().to_string_lossy().to_string();
        let parts: Vec<&str> = stem.rsplitn(3, '_').collect();
        let (peer, bound, rest) = (parts[0], parts[1], parts[2]);
        let name = rest.split('_').next().unwrap().to_string();
        let name = name.as_str();
        let bound: f64 = bound.parse().expect("a bound");
        let peer: f64 = peer.parse().expect("a byte count");
        let bytes = std::fs::read(f).expect("readable");
        let values: Vec<f32> = bytes
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
            .collect();
        let index = rest.split('_').nth(1).unwrap_or("");
        let shape = std::fs::read_to_string(f.with_file_name(format!("{name}_{index}.shape")))
            .unwrap_or_default();
        let dims: Vec<usize> = shape
            .split(',')
            .filter_map(|d| d.trim().parse().ok())
            .collect();
        let stride = if dims.len() >= 2 {
            dims[dims.len() - 1]
        } else {
            0
        };
        let t = Instant::now();
        let data = encode_blocks(&values, bound, stride).expect("encodes");
        let enc = t.elapsed().as_secs_f64();
        let t = Instant::now();
        let back = decode_blocks(&data, u64::MAX).expect("decodes");
        let dec = t.elapsed().as_secs_f64();
        let e = parse_blocks(&data, u64::MAX).unwrap().bound as f64;
        for (x, y) in values.iter().zip(&back) {
            assert!(
                x.to_bits() == y.to_bits() || (*x as f64 - *y as f64).abs() <= e,
                "{}: {x} -> {y}",
                f.display()
            );
        }
        let s = sums.entry(name.to_string()).or_default();
        s[0] += bytes.len() as f64;
        s[1] += peer;
        s[2] += data.len() as f64;
        s[3] += enc;
        s[4] += dec;
    }
    println!("| set | raw MB | peer ratio | blocks ratio | encode MB/s | decode MB/s |");
    println!("|---|---:|---:|---:|---:|---:|");
    for (name, s) in sums {
        println!(
            "| {name} | {:.1} | {:.2}x | {:.2}x | {:.0} | {:.0} |",
            s[0] / 1e6,
            s[0] / s[1],
            s[0] / s[2],
            s[0] / 1e6 / s[3],
            s[0] / 1e6 / s[4]
        );
    }
}
