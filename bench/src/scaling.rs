//! Scaling: one sample tiled to several sizes.

use anyhow::{anyhow, Result};

use l3::{ColorType, Profile};

use crate::args::Args;
use crate::codecs::Codec;
use crate::images::Pixels;
use crate::measure::{eviction_bytes, measure, measure_cold};
use crate::rows::ScalingRow;

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

/// Width and height of an image of `mp` megapixels at 4:3.
fn size_of(mp: f64) -> (u32, u32) {
    let side = (mp * 1e6).sqrt();
    (
        ((side * 4.0 / 3.0).round() as u32).max(1),
        ((side * 3.0 / 4.0).round() as u32).max(1),
    )
}

/// The centre `width` x `height` of `src` (all of it along a side it is shorter on).
///
/// Every size of the scaling run is tiled from this one block, so every size holds the same
/// pixels in the same proportions and a change in cost per pixel is the size's, not the
/// content's. (Cropping the source to the small sizes and tiling it whole for the large ones,
/// as this section did before, gave the 1 MP point a blurred corner of the photo: 0.9 bits
/// per pixel against 1.9 for the whole, and 15 % fewer compact decode instructions per pixel.)
fn centre_block(src: &Pixels, width: u32, height: u32) -> Pixels {
    let (w, h) = (
        width.min(src.width) as usize,
        height.min(src.height) as usize,
    );
    let (x0, y0) = ((src.width as usize - w) / 2, (src.height as usize - h) / 2);
    let bpp = src.channels() * src.depth as usize / 8;
    let row = src.width as usize * bpp;
    let mut bytes = Vec::with_capacity(w * h * bpp);
    for y in y0..y0 + h {
        bytes.extend_from_slice(&src.bytes[y * row + x0 * bpp..y * row + (x0 + w) * bpp]);
    }
    Pixels {
        name: format!("{} centre {}x{}", src.name, w, h),
        class: src.class.clone(),
        width: w as u32,
        height: h as u32,
        color: src.color,
        depth: src.depth,
        bytes,
    }
}

/// `block` repeated to `width` x `height`, alternate tiles mirrored (left-right and
/// top-bottom) so that there are no seams.
fn tile(block: &Pixels, width: u32, height: u32) -> Pixels {
    let bpp = block.channels() * block.depth as usize / 8;
    let (bw, bh) = (block.width as usize, block.height as usize);
    let row = bw * bpp;
    // The block mirrored left-right, built once: the odd tile columns' rows.
    let mirrored: Vec<u8> = block
        .bytes
        .chunks_exact(row)
        .flat_map(|r| r.chunks_exact(bpp).rev().flatten().copied())
        .collect();
    let mut bytes = Vec::with_capacity(width as usize * height as usize * bpp);
    for y in 0..height as usize {
        let sy = y % bh;
        let sy = if (y / bh) % 2 == 1 { bh - 1 - sy } else { sy };
        let rows = sy * row..(sy + 1) * row;
        let (forward, backward) = (&block.bytes[rows.clone()], &mirrored[rows]);
        let mut x = 0usize;
        while x < width as usize {
            let n = (width as usize - x).min(bw);
            let tile_row = if (x / bw) % 2 == 1 { backward } else { forward };
            bytes.extend_from_slice(&tile_row[..n * bpp]);
            x += n;
        }
    }
    Pixels {
        name: format!("{}x{}", width, height),
        class: block.class.clone(),
        width,
        height,
        color: block.color,
        depth: block.depth,
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
    let smallest = args
        .scaling_mp
        .iter()
        .copied()
        .fold(f64::INFINITY, f64::min);
    let (bw, bh) = size_of(if smallest.is_finite() { smallest } else { 1.0 });
    let block = centre_block(src, bw, bh);
    let mut rows = Vec::new();
    let mut evict = vec![0u8; eviction_bytes()];
    for &mp in &args.scaling_mp {
        let (w, h) = size_of(mp);
        let p = tile(&block, w, h);
        let mut out = Vec::new();
        let png_file = Codec::PngDefault.encode(&p)?;
        let (png_dec, ()) = measure(args.reps, args.max_seconds, || {
            Codec::PngDefault.decode(&png_file, &mut out)
        })?;
        let (png_dec_cold, ()) = measure_cold(args.reps, args.max_seconds, &mut evict, || {
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
            let (l3_dec_1_cold, ()) =
                measure_cold(args.reps, args.max_seconds, &mut evict, || {
                    l3_1.decode(&file, &mut out)
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
                l3_dec_1_cold,
                png_dec_cold,
                decode_peak_added_bytes,
            });
        }
    }
    Ok((
        format!(
            "{} ({}, {}x{}), its centre {}x{}",
            src.name,
            src.kind(),
            src.width,
            src.height,
            block.width,
            block.height
        ),
        rows,
    ))
}
