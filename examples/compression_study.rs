//! Research harness for the next format version: bits per pixel of candidate designs on the
//! same pixels, next to PNG (the `png` crate's default, through `image`) and QOI.
//!
//! `cargo run --release --example compression_study -- [DIR...]`
//! (default: the photo folders of ../shared/data/images). 8-bit images only.
//!
//! Every variant keeps the GPU decode row-parallel: prediction uses the row above, or the left
//! neighbour only through a linear form whose inverse is a prefix sum along the row. Sizes of
//! entropy-coded variants are ideal code lengths (order-0 entropy per stream plus a table
//! allowance), i.e. lower bounds a real coder approaches within a few percent.

use std::path::{Path, PathBuf};

/// One stream's samples (a patch channel), row-major.
struct Plane {
    w: usize,
    h: usize,
    px: Vec<i32>,
}

#[derive(Clone, Copy, PartialEq)]
enum Pred {
    Up,
    L3Paeth,
    UpMean,
    /// left + up - upleft: decodable by a prefix sum along the row.
    Gradient,
}

const PREDS_V1: [Pred; 3] = [Pred::Up, Pred::L3Paeth, Pred::UpMean];

fn residuals(p: &Plane, pred: Pred) -> Vec<i32> {
    let (w, h) = (p.w, p.h);
    let at = |x: usize, y: usize| p.px[y * w + x];
    let mut r = vec![0; w * h];
    for y in 0..h {
        for x in 0..w {
            let v = at(x, y);
            let pr = if y == 0 {
                // First row: left neighbour for the gradient variant (a prefix sum too).
                if pred == Pred::Gradient && x > 0 {
                    at(x - 1, 0)
                } else {
                    0
                }
            } else {
                let b = at(x, y - 1);
                let a = if x > 0 { at(x - 1, y - 1) } else { b };
                let c = if x + 1 < w { at(x + 1, y - 1) } else { b };
                match pred {
                    Pred::Up => b,
                    Pred::UpMean => (a + c) >> 1,
                    Pred::L3Paeth => {
                        let pp = a + c - b;
                        let (da, db, dc) = ((pp - a).abs(), (pp - b).abs(), (pp - c).abs());
                        if da <= db && da <= dc {
                            a
                        } else if db <= dc {
                            b
                        } else {
                            c
                        }
                    }
                    Pred::Gradient => {
                        if x > 0 {
                            at(x - 1, y) + b - a
                        } else {
                            b
                        }
                    }
                }
            };
            // Residual mod 256, read as signed in -128..128.
            r[y * w + x] = ((v - pr) as i8) as i32;
        }
    }
    r
}

fn bit_len(v: u32) -> u32 {
    32 - v.leading_zeros()
}

/// Fixed-width packing cost of residual rows cut into groups of `group` samples: per group a
/// width field (4 bits) and, with `base`, an 8-bit base (min-range); else zigzag values.
fn packed_bits(r: &[i32], w: usize, group: usize, base: bool) -> u64 {
    let mut bits = 0u64;
    for row in r.chunks(w) {
        for g in row.chunks(group) {
            let width = if base {
                // Smaller of the plain and the signed range, as the v1 encoder does.
                let u: Vec<i32> = g.iter().map(|&v| v & 255).collect();
                let span_u = u.iter().max().unwrap() - u.iter().min().unwrap();
                let span_s = g.iter().max().unwrap() - g.iter().min().unwrap();
                bit_len(span_u.min(span_s) as u32)
            } else {
                g.iter()
                    .map(|&v| bit_len(((v << 1) ^ (v >> 31)) as u32))
                    .max()
                    .unwrap()
            };
            bits += 4 + if base { 8 } else { 0 } + width as u64 * g.len() as u64;
        }
    }
    bits
}

/// Ideal order-0 code length of a stream's residuals plus a table allowance of 4 bits per
/// distinct symbol (a static code per stream, as a GPU would decode with a per-stream table).
fn entropy_bits(r: &[i32]) -> u64 {
    let mut hist = [0u32; 256];
    for &v in r {
        hist[(v & 255) as usize] += 1;
    }
    let n = r.len() as f64;
    let mut bits = 0.0;
    let mut distinct = 0;
    for &c in &hist {
        if c > 0 {
            distinct += 1;
            bits -= c as f64 * (c as f64 / n).log2();
        }
    }
    bits as u64 + 4 * distinct + 16
}

/// Like [`entropy_bits`] with 4 contexts chosen from the row above's local activity.
fn context_entropy_bits(p: &Plane, r: &[i32]) -> u64 {
    let (w, h) = (p.w, p.h);
    let mut ctx_of = vec![0usize; w * h];
    for y in 1..h {
        for x in 0..w {
            let b = p.px[(y - 1) * w + x];
            let a = if x > 0 { p.px[(y - 1) * w + x - 1] } else { b };
            let c = if x + 1 < w {
                p.px[(y - 1) * w + x + 1]
            } else {
                b
            };
            let act = (a - b).abs() + (c - b).abs();
            ctx_of[y * w + x] = match act {
                0..=2 => 0,
                3..=8 => 1,
                9..=24 => 2,
                _ => 3,
            };
        }
    }
    (0..4)
        .map(|k| {
            let sub: Vec<i32> = r
                .iter()
                .zip(&ctx_of)
                .filter(|(_, &c)| c == k)
                .map(|(&v, _)| v)
                .collect();
            if sub.is_empty() {
                0
            } else {
                entropy_bits(&sub)
            }
        })
        .sum()
}

/// Planes of every (patch, channel) of an 8-bit image, optionally after subtract-green.
fn planes(img: &image::DynamicImage, patch: usize, subtract_green: bool) -> Vec<Plane> {
    let c = img.color().channel_count() as usize;
    let (w, h) = (img.width() as usize, img.height() as usize);
    let data = img.as_bytes();
    let mut out = Vec::new();
    for py in (0..h).step_by(patch) {
        for px in (0..w).step_by(patch) {
            let (pw, ph) = (patch.min(w - px), patch.min(h - py));
            for ch in 0..c {
                let mut v = Vec::with_capacity(pw * ph);
                for y in py..py + ph {
                    for x in px..px + pw {
                        let i = (y * w + x) * c;
                        let mut s = data[i + ch] as i32;
                        if subtract_green && c >= 3 && ch != 1 && ch < 3 {
                            s = (s - data[i + 1] as i32) & 255;
                        }
                        v.push(s);
                    }
                }
                out.push(Plane {
                    w: pw,
                    h: ph,
                    px: v,
                });
            }
        }
    }
    out
}

struct Variant {
    name: &'static str,
    bits: Box<dyn Fn(&image::DynamicImage) -> u64>,
}

fn best_of(ps: &[Plane], preds: &[Pred], cost: &dyn Fn(&Plane, &[i32]) -> u64) -> u64 {
    ps.iter()
        .map(|p| {
            preds
                .iter()
                .map(|&pr| cost(p, &residuals(p, pr)) + 8)
                .min()
                .unwrap()
        })
        .sum()
}

fn main() {
    let args: Vec<PathBuf> = std::env::args().skip(1).map(PathBuf::from).collect();
    let dirs = if args.is_empty() {
        let base = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/data/images");
        vec![
            base.join("photo_lossless"),
            base.join("photo_png_jpeg_origin"),
        ]
    } else {
        args
    };
    let variants: Vec<Variant> = vec![
        Variant {
            name: "v1 (as shipped)",
            bits: Box::new(|img| {
                l3::encode_image(img, &l3::EncodeOptions::for_profile(l3::Profile::Fast))
                    .unwrap()
                    .len() as u64
                    * 8
            }),
        },
        Variant {
            name: "v1 + subtract green",
            bits: Box::new(|img| {
                best_of(&planes(img, 64, true), &PREDS_V1, &|p, r| {
                    packed_bits(r, p.w, 64, true)
                })
            }),
        },
        Variant {
            name: "SG + gradient, rows of 64",
            bits: Box::new(|img| {
                let ps = planes(img, 64, true);
                best_of(&ps, &[Pred::Up, Pred::Gradient], &|p, r| {
                    packed_bits(r, p.w, 64, true)
                })
            }),
        },
        Variant {
            name: "SG + gradient, zigzag groups of 16",
            bits: Box::new(|img| {
                let ps = planes(img, 64, true);
                best_of(&ps, &[Pred::Up, Pred::Gradient], &|p, r| {
                    packed_bits(r, p.w, 16, false)
                })
            }),
        },
        Variant {
            name: "SG + gradient, zigzag groups of 8",
            bits: Box::new(|img| {
                let ps = planes(img, 64, true);
                best_of(&ps, &[Pred::Up, Pred::Gradient], &|p, r| {
                    packed_bits(r, p.w, 8, false)
                })
            }),
        },
        Variant {
            name: "SG + gradient, static entropy code per stream",
            bits: Box::new(|img| {
                let ps = planes(img, 64, true);
                best_of(&ps, &[Pred::Up, Pred::Gradient], &|_, r| entropy_bits(r))
            }),
        },
        Variant {
            name: "SG + gradient, entropy, 4 contexts",
            bits: Box::new(|img| {
                let ps = planes(img, 64, true);
                best_of(&ps, &[Pred::Up, Pred::Gradient], &|p, r| {
                    context_entropy_bits(p, r)
                })
            }),
        },
        Variant {
            name: "SG + gradient, entropy, 128x128 patches",
            bits: Box::new(|img| {
                let ps = planes(img, 128, true);
                best_of(&ps, &[Pred::Up, Pred::Gradient], &|_, r| entropy_bits(r))
            }),
        },
    ];
    let mut totals = vec![0u64; variants.len()];
    let (mut png_total, mut qoi_total, mut px_total) = (0u64, 0u64, 0u64);
    println!(
        "| image | px | PNG bpp | QOI bpp | {} |",
        variants
            .iter()
            .map(|v| v.name)
            .collect::<Vec<_>>()
            .join(" | ")
    );
    println!("|---|---|---|---|{}", "---|".repeat(variants.len()));
    for dir in &dirs {
        let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .flatten()
            .map(|e| e.path())
            .collect();
        files.sort();
        for f in files {
            let Ok(img) = l3::read_image(&f) else {
                continue;
            };
            let img = match img {
                image::DynamicImage::ImageLuma8(_)
                | image::DynamicImage::ImageLumaA8(_)
                | image::DynamicImage::ImageRgb8(_)
                | image::DynamicImage::ImageRgba8(_) => img,
                _ => continue, // 16-bit: studied separately
            };
            let px = img.width() as u64 * img.height() as u64;
            let mut png = std::io::Cursor::new(Vec::new());
            img.write_to(&mut png, image::ImageFormat::Png).unwrap();
            let mut qoi = std::io::Cursor::new(Vec::new());
            // QOI stores only RGB(A): gray images are measured on their RGB expansion.
            let qoi_input = if img.color().has_color() {
                img.clone()
            } else {
                image::DynamicImage::ImageRgb8(img.to_rgb8())
            };
            qoi_input
                .write_to(&mut qoi, image::ImageFormat::Qoi)
                .unwrap();
            let qoi_bits = qoi.get_ref().len() as u64 * 8;
            let png_bits = png.get_ref().len() as u64 * 8;
            let bits: Vec<u64> = variants.iter().map(|v| (v.bits)(&img)).collect();
            println!(
                "| {} | {} | {:.2} | {:.2} | {} |",
                f.file_name().unwrap().to_string_lossy(),
                px,
                png_bits as f64 / px as f64,
                qoi_bits as f64 / px as f64,
                bits.iter()
                    .map(|&b| format!("{:.2}", b as f64 / px as f64))
                    .collect::<Vec<_>>()
                    .join(" | ")
            );
            for (t, b) in totals.iter_mut().zip(&bits) {
                *t += b;
            }
            png_total += png_bits;
            qoi_total += qoi_bits;
            px_total += px;
        }
    }
    println!(
        "| **total (bpp)** | {} | {:.2} | {:.2} | {} |",
        px_total,
        png_total as f64 / px_total as f64,
        qoi_total as f64 / px_total as f64,
        totals
            .iter()
            .map(|&b| format!("{:.2}", b as f64 / px_total as f64))
            .collect::<Vec<_>>()
            .join(" | ")
    );
    println!(
        "| **ratio to PNG** | | 1.000 | {:.3} | {} |",
        qoi_total as f64 / png_total as f64,
        totals
            .iter()
            .map(|&b| format!("{:.3}", b as f64 / png_total as f64))
            .collect::<Vec<_>>()
            .join(" | ")
    );
}
