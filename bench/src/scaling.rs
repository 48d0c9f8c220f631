//! Scaling: one sample tiled to several sizes.

use anyhow::{anyhow, Result};
use serde::Serialize;

use l3::{ColorType, Profile};

use crate::args::Args;
use crate::codecs::Codec;
use crate::images::Pixels;
use crate::measure::{measure, Stats};

/// One l3 profile at one size (the png figures are shared by the size's rows).
#[derive(Serialize)]
pub struct ScalingRow {
    #[serde(serialize_with = "crate::report::json::profile_name")]
    pub profile: Profile,
    pub width: u32,
    pub height: u32,
    pub raw_bytes: u64,
    #[serde(rename = "l3_bytes")]
    pub l3_size: u64,
    #[serde(rename = "l3_encode_all")]
    pub l3_enc: Stats,
    #[serde(rename = "l3_decode_1")]
    pub l3_dec_1: Stats,
    #[serde(rename = "l3_decode_all")]
    pub l3_dec_n: Stats,
    #[serde(rename = "png_decode")]
    pub png_dec: Stats,
    /// Peak resident memory a parallel `l3::decode::decode` added over what was resident
    /// before it (the encoded file included), in bytes: the output plus the decoder's own
    /// buffers. None where the kernel does not offer a peak reset (`/proc/self/clear_refs`).
    pub decode_peak_added_bytes: Option<u64>,
}

/// A field of `/proc/self/status` in bytes (`VmRSS`, `VmHWM`).
fn status_bytes(field: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with(field))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// Peak resident memory of one parallel library decode of `file` beyond the memory resident
/// before it: the peak (VmHWM) is reset through `/proc/self/clear_refs` first.
fn decode_peak_added(file: &[u8]) -> Result<Option<u64>> {
    if std::fs::write("/proc/self/clear_refs", "5").is_err() {
        return Ok(None);
    }
    let Some(before) = status_bytes("VmRSS") else {
        return Ok(None);
    };
    let (_, pixels) = l3::decode::decode(file, &l3::DecodeOptions::default())?;
    let peak = status_bytes("VmHWM");
    drop(std::hint::black_box(pixels));
    Ok(peak.map(|p| p.saturating_sub(before)))
}

fn tile(src: &Pixels, width: u32, height: u32) -> Pixels {
    let bpp = src.channels() * src.depth as usize / 8;
    let row = src.width as usize * bpp;
    let mut bytes = Vec::with_capacity(width as usize * height as usize * bpp);
    for y in 0..height as usize {
        // Mirror alternate tiles so that there are no seams.
        let ty = y / src.height as usize;
        let sy = y % src.height as usize;
        let sy = if ty % 2 == 1 {
            src.height as usize - 1 - sy
        } else {
            sy
        };
        let srow = &src.bytes[sy * row..(sy + 1) * row];
        let mut x = 0usize;
        while x < width as usize {
            let n = (width as usize - x).min(src.width as usize);
            bytes.extend_from_slice(&srow[..n * bpp]);
            x += n;
        }
    }
    Pixels {
        name: format!("{}x{}", width, height),
        class: src.class.clone(),
        width,
        height,
        color: src.color,
        depth: src.depth,
        bytes,
    }
}

pub fn bench_scaling(images: &[Pixels], args: &Args) -> Result<(String, Vec<ScalingRow>)> {
    let src = images
        .iter()
        .filter(|p| p.depth == 8 && p.color == ColorType::Rgb)
        .max_by_key(|p| p.pixels())
        .or_else(|| images.iter().max_by_key(|p| p.pixels()))
        .ok_or_else(|| anyhow!("no image"))?;
    let mut rows = Vec::new();
    for &mp in &args.scaling_mp {
        let side = (mp * 1e6).sqrt();
        let (w, h) = (
            (side * 4.0 / 3.0).round() as u32,
            (side * 3.0 / 4.0).round() as u32,
        );
        let p = tile(src, w.max(1), h.max(1));
        let mut out = Vec::new();
        let png_file = Codec::PngDefault.encode(&p)?;
        let (png_dec, ()) = measure(args.reps, args.max_seconds, || {
            Codec::PngDefault.decode(&png_file, &mut out)
        })?;
        for profile in [Profile::Fast, Profile::Compact] {
            let l3_1 = Codec::L3 {
                profile,
                parallel: false,
            };
            let l3_mt = Codec::L3 {
                profile,
                parallel: true,
            };
            let (l3_enc, file) = measure(args.reps, args.max_seconds, || l3_mt.encode(&p))?;
            let (l3_dec_1, ()) =
                measure(args.reps, args.max_seconds, || l3_1.decode(&file, &mut out))?;
            let (l3_dec_n, ()) = measure(args.reps, args.max_seconds, || {
                l3_mt.decode(&file, &mut out)
            })?;
            let decode_peak_added_bytes = decode_peak_added(&file)?;
            if out != p.bytes {
                eprintln!(
                    "  scaling: {} round trip NOT LOSSLESS at {}x{}",
                    l3_mt.name(),
                    w,
                    h
                );
            }
            rows.push(ScalingRow {
                profile,
                width: w,
                height: h,
                raw_bytes: p.bytes.len() as u64,
                l3_size: file.len() as u64,
                l3_enc,
                l3_dec_1,
                l3_dec_n,
                png_dec,
                decode_peak_added_bytes,
            });
        }
    }
    Ok((
        format!(
            "{} ({}, {}x{})",
            src.name,
            src.kind(),
            src.width,
            src.height
        ),
        rows,
    ))
}
