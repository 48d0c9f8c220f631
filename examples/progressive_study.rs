//! Design study: how should a dataset format store an image as *progressive levels* (a small
//! complete image first, then refinements doubling the resolution per side, the last one exactly
//! lossless), with every level's payload coded by l3's compact profile?
//!
//! `cargo run --release --example progressive_study -- [--reps N] [DIR...]`
//! (default: every class folder under ../shared/data/images; `--reps` = decode timing repeats,
//! the minimum is kept, default 3). Results and the recommendation: docs/progressive-study.md.
//!
//! Candidates (each in two configurations: 3 levels = 1/4, 1/2, 1/1 per side, and 4 levels =
//! 1/8, 1/4, 1/2, 1/1):
//!
//! - `haar16`, `haar-split`: integer-reversible 2x2 S-transform (integer Haar). Level 0 is the LL
//!   band (nested floor averages); each refinement stores LH, HL, HH. Details need depth+1 (LH,
//!   HL) and depth+2 (HH) bits. `haar16` stores them with offset 2^(depth+1) as 16-bit planes
//!   (8-bit images only; 16-bit images fall back to the split form). `haar-split` stores
//!   `(v + 2^(depth-1)) mod 2^depth` at the image's depth plus an overflow plane
//!   `floor((v + 2^(depth-1)) / 2^depth) + 2` (values 0..=4), stacked under the low planes.
//! - `interlace`: Adam7-like lattice subsampling. Level 0 holds the pixels at multiples of the
//!   coarsest stride; each refinement adds the three new sub-lattices, predicted only from the
//!   coarser lattice (horizontal/vertical pair average, 4-neighbour diagonal average, rounded),
//!   residual stored mod 2^depth. `interlace-2pass`: the (odd, odd) pixels first, as above, then
//!   the (odd, even) and (even, odd) pixels from their four neighbours (two coarse, two from
//!   pass one): two data-parallel passes per level.
//! - `pyramid`: Laplacian-style. P0 = image, P(k+1) = rounded 2x2 mean `(a+b+c+d+2)>>2` of
//!   P(k); level 0 stores the smallest P, each refinement stores `(P(k) - up(P(k+1))) mod
//!   2^depth` with `up` the integer bilinear 2x upsample (weights 9/3/3/1, +8 >> 4, edges
//!   clamped). The decoder rebuilds every P(k) exactly, so the last level is lossless.
//!
//! Odd sizes: the image is first padded by edge replication to a multiple of the coarsest
//! stride (4 or 8), so every level is exactly 1/2^k of the padded size; the decoder crops at the
//! end. Each level is one compact file: the bands of a refinement are stacked vertically into
//! one image (width = band width, height = bands x band height, same channel count).
//!
//! Every level set is decoded and reconstructed and compared with the original (assert). Decode
//! times are per level on one thread (`DecodeOptions { parallel: false, .. }`), reconstruction
//! (inverse transform) timed separately, both the minimum of `--reps` runs. Low-level quality is
//! the PSNR of each non-final level against the exact area-averaged downsample of the (padded)
//! original. Encoding runs on rayon over images; timing runs afterwards, one image at a time.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use rayon::prelude::*;

/// Interleaved samples as i32, row-major; `depth` is the storage depth (8 or 16) when coded.
#[derive(Clone, PartialEq)]
struct Img {
    w: usize,
    h: usize,
    ch: usize,
    depth: u32,
    px: Vec<i32>,
}

impl Img {
    fn new(w: usize, h: usize, ch: usize, depth: u32) -> Self {
        Img {
            w,
            h,
            ch,
            depth,
            px: vec![0; w * h * ch],
        }
    }
    #[inline]
    fn at(&self, x: usize, y: usize, c: usize) -> i32 {
        self.px[(y * self.w + x) * self.ch + c]
    }
    #[inline]
    fn set(&mut self, x: usize, y: usize, c: usize, v: i32) {
        self.px[(y * self.w + x) * self.ch + c] = v;
    }
}

fn load(path: &Path) -> Result<Img> {
    use image::DynamicImage as D;
    let img = l3::read_image(path)?;
    let (w, h) = (img.width() as usize, img.height() as usize);
    let (ch, depth, px): (usize, u32, Vec<i32>) = match &img {
        D::ImageLuma8(_) | D::ImageLumaA8(_) | D::ImageRgb8(_) | D::ImageRgba8(_) => {
            let ch = img.color().channel_count() as usize;
            (ch, 8, img.as_bytes().iter().map(|&v| v as i32).collect())
        }
        D::ImageLuma16(b) => (1, 16, b.as_raw().iter().map(|&v| v as i32).collect()),
        D::ImageLumaA16(b) => (2, 16, b.as_raw().iter().map(|&v| v as i32).collect()),
        D::ImageRgb16(b) => (3, 16, b.as_raw().iter().map(|&v| v as i32).collect()),
        D::ImageRgba16(b) => (4, 16, b.as_raw().iter().map(|&v| v as i32).collect()),
        other => bail!(
            "{}: unsupported pixel type {:?}",
            path.display(),
            other.color()
        ),
    };
    Ok(Img {
        w,
        h,
        ch,
        depth,
        px,
    })
}

/// Pads by edge replication to multiples of `m`.
fn pad(img: &Img, m: usize) -> Img {
    let (w, h) = (img.w.div_ceil(m) * m, img.h.div_ceil(m) * m);
    let mut out = Img::new(w, h, img.ch, img.depth);
    for y in 0..h {
        for x in 0..w {
            for c in 0..img.ch {
                out.set(x, y, c, img.at(x.min(img.w - 1), y.min(img.h - 1), c));
            }
        }
    }
    out
}

fn crop(img: &Img, w: usize, h: usize) -> Img {
    let mut out = Img::new(w, h, img.ch, img.depth);
    for y in 0..h {
        let n = w * img.ch;
        out.px[y * n..(y + 1) * n].copy_from_slice(&img.px[y * img.w * img.ch..][..n]);
    }
    out
}

fn encode(img: &Img) -> Vec<u8> {
    let color = l3::ColorType::from_channels(img.ch as u8).expect("1..=4 channels");
    let max = (1i64 << img.depth) - 1;
    assert!(img.px.iter().all(|&v| (0..=max).contains(&(v as i64))));
    let opts = l3::EncodeOptions {
        parallel: false,
        ..l3::EncodeOptions::for_profile(l3::Profile::Compact)
    };
    let (w, h) = (img.w as u32, img.h as u32);
    let r = if img.depth == 8 {
        let s: Vec<u8> = img.px.iter().map(|&v| v as u8).collect();
        l3::encode::encode(
            &l3::RawImage {
                width: w,
                height: h,
                color,
                samples: l3::Samples::U8(&s),
            },
            &opts,
        )
    } else {
        let s: Vec<u16> = img.px.iter().map(|&v| v as u16).collect();
        l3::encode::encode(
            &l3::RawImage {
                width: w,
                height: h,
                color,
                samples: l3::Samples::U16(&s),
            },
            &opts,
        )
    };
    r.expect("compact encode")
}

/// One-thread decode into an `Img` (native-endian 16-bit samples).
fn decode(bytes: &[u8]) -> Img {
    let opts = l3::DecodeOptions {
        parallel: false,
        ..Default::default()
    };
    let (hd, out) = l3::decode::decode(bytes, &opts).expect("decode");
    let px: Vec<i32> = if hd.depth == 8 {
        out.iter().map(|&v| v as i32).collect()
    } else {
        out.chunks_exact(2)
            .map(|b| u16::from_ne_bytes([b[0], b[1]]) as i32)
            .collect()
    };
    Img {
        w: hd.width as usize,
        h: hd.height as usize,
        ch: hd.color.channels() as usize,
        depth: hd.depth as u32,
        px,
    }
}

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
enum Cand {
    Haar16,
    HaarSplit,
    Interlace,
    Interlace2,
    Pyramid,
}

const CANDS: [Cand; 5] = [
    Cand::Haar16,
    Cand::HaarSplit,
    Cand::Interlace,
    Cand::Interlace2,
    Cand::Pyramid,
];

impl Cand {
    fn name(self) -> &'static str {
        match self {
            Cand::Haar16 => "(a) haar16",
            Cand::HaarSplit => "(a) haar-split",
            Cand::Interlace => "(b) interlace",
            Cand::Interlace2 => "(b) interlace-2pass",
            Cand::Pyramid => "(c) pyramid",
        }
    }
}

// ---------------------------------------------------------------- (a) integer Haar

/// Stores signed detail bands (each w2 x h2 x ch, concatenated) at `depth`.
fn pack_details(vals: &[i32], w2: usize, ch: usize, depth: u32, wide: bool) -> Img {
    let rows = vals.len() / (w2 * ch);
    if wide && depth == 8 {
        let px = vals.iter().map(|&v| v + (1 << (depth + 1))).collect();
        return Img {
            w: w2,
            h: rows,
            ch,
            depth: 16,
            px,
        };
    }
    let m = 1i32 << depth;
    let half = 1i32 << (depth - 1);
    let mut px: Vec<i32> = vals.iter().map(|&v| (v + half).rem_euclid(m)).collect();
    px.extend(vals.iter().map(|&v| (v + half).div_euclid(m) + 2));
    Img {
        w: w2,
        h: 2 * rows,
        ch,
        depth,
        px,
    }
}

fn unpack_details(p: &Img, img_depth: u32) -> Vec<i32> {
    if p.depth != img_depth {
        // Wide form (8-bit image, 16-bit planes).
        return p.px.iter().map(|&v| v - (1 << (img_depth + 1))).collect();
    }
    let n = p.px.len() / 2;
    let m = 1i32 << img_depth;
    let half = 1i32 << (img_depth - 1);
    (0..n)
        .map(|i| p.px[i] + p.px[n + i] * m - 2 * m - half)
        .collect()
}

/// One forward S-transform step: (LL, [LH; HL; HH]) of an even-sized image.
fn haar_fwd(x: &Img) -> (Img, Vec<i32>) {
    let (w2, h2, ch) = (x.w / 2, x.h / 2, x.ch);
    let mut ll = Img::new(w2, h2, ch, x.depth);
    let n = w2 * h2 * ch;
    let mut det = vec![0; 3 * n];
    for j in 0..h2 {
        for i in 0..w2 {
            for c in 0..ch {
                let (a, b) = (x.at(2 * i, 2 * j, c), x.at(2 * i + 1, 2 * j, c));
                let (cc, d) = (x.at(2 * i, 2 * j + 1, c), x.at(2 * i + 1, 2 * j + 1, c));
                let (l1, h1) = ((a + b) >> 1, a - b);
                let (l2, hh2) = ((cc + d) >> 1, cc - d);
                let k = (j * w2 + i) * ch + c;
                ll.px[k] = (l1 + l2) >> 1;
                det[k] = l1 - l2;
                det[n + k] = (h1 + hh2) >> 1;
                det[2 * n + k] = h1 - hh2;
            }
        }
    }
    (ll, det)
}

fn haar_inv(ll: &Img, det: &[i32]) -> Img {
    let (w2, h2, ch) = (ll.w, ll.h, ll.ch);
    let n = w2 * h2 * ch;
    let mut x = Img::new(2 * w2, 2 * h2, ch, ll.depth);
    for j in 0..h2 {
        for i in 0..w2 {
            for c in 0..ch {
                let k = (j * w2 + i) * ch + c;
                let (lh, hl, hh) = (det[k], det[n + k], det[2 * n + k]);
                let l2 = ll.px[k] - (lh >> 1);
                let l1 = l2 + lh;
                let h2v = hl - (hh >> 1);
                let h1 = h2v + hh;
                let b = l1 - (h1 >> 1);
                let d = l2 - (h2v >> 1);
                x.set(2 * i, 2 * j, c, b + h1);
                x.set(2 * i + 1, 2 * j, c, b);
                x.set(2 * i, 2 * j + 1, c, d + h2v);
                x.set(2 * i + 1, 2 * j + 1, c, d);
            }
        }
    }
    x
}

// ---------------------------------------------------------------- (b) interlace

/// Predictions of the three new sub-lattices (odd x, odd y, both) from the coarse lattice `g`.
#[inline]
fn interlace_pred(g: &Img, i: usize, j: usize, c: usize) -> [i32; 3] {
    let (i1, j1) = ((i + 1).min(g.w - 1), (j + 1).min(g.h - 1));
    let (p, r, d, rd) = (
        g.at(i, j, c),
        g.at(i1, j, c),
        g.at(i, j1, c),
        g.at(i1, j1, c),
    );
    [
        (p + r + 1) >> 1,
        (p + d + 1) >> 1,
        (p + r + d + rd + 2) >> 2,
    ]
}

/// Two-pass variant: the (odd x, even y) and (even x, odd y) pixels are predicted from their
/// four neighbours, two coarse and two from the (odd, odd) sub-lattice decoded in pass one.
/// Reads `g1` only at (odd, odd) positions, so encoder and decoder see the same values.
#[inline]
fn interlace_pred2(g2: &Img, g1: &Img, i: usize, j: usize, c: usize) -> [i32; 2] {
    let (i1, j1) = ((i + 1).min(g2.w - 1), (j + 1).min(g2.h - 1));
    let dd = g1.at(2 * i + 1, 2 * j + 1, c);
    let up = if j > 0 {
        g1.at(2 * i + 1, 2 * j - 1, c)
    } else {
        dd
    };
    let left = if i > 0 {
        g1.at(2 * i - 1, 2 * j + 1, c)
    } else {
        dd
    };
    let (p, r, d) = (g2.at(i, j, c), g2.at(i1, j, c), g2.at(i, j1, c));
    [(p + r + up + dd + 2) >> 2, (p + d + left + dd + 2) >> 2]
}

/// Residual bands taking lattice `g2` (stride 2t) to `g1` (stride t), mod 2^depth.
fn interlace_fwd(g1: &Img, g2: &Img, two_pass: bool) -> Img {
    let (w2, h2, ch) = (g2.w, g2.h, g2.ch);
    let n = w2 * h2 * ch;
    let m = 1i32 << g1.depth;
    let mut px = vec![0; 3 * n];
    for j in 0..h2 {
        for i in 0..w2 {
            for c in 0..ch {
                let mut p = interlace_pred(g2, i, j, c);
                if two_pass {
                    let q = interlace_pred2(g2, g1, i, j, c);
                    (p[0], p[1]) = (q[0], q[1]);
                }
                let k = (j * w2 + i) * ch + c;
                px[k] = (g1.at(2 * i + 1, 2 * j, c) - p[0]).rem_euclid(m);
                px[n + k] = (g1.at(2 * i, 2 * j + 1, c) - p[1]).rem_euclid(m);
                px[2 * n + k] = (g1.at(2 * i + 1, 2 * j + 1, c) - p[2]).rem_euclid(m);
            }
        }
    }
    Img {
        w: w2,
        h: 3 * h2,
        ch,
        depth: g1.depth,
        px,
    }
}

fn interlace_inv(g2: &Img, res: &Img, two_pass: bool) -> Img {
    let (w2, h2, ch) = (g2.w, g2.h, g2.ch);
    let n = w2 * h2 * ch;
    let m = 1i32 << g2.depth;
    let mut g1 = Img::new(2 * w2, 2 * h2, ch, g2.depth);
    for j in 0..h2 {
        for i in 0..w2 {
            for c in 0..ch {
                let p = interlace_pred(g2, i, j, c);
                let k = (j * w2 + i) * ch + c;
                g1.set(2 * i, 2 * j, c, g2.px[k]);
                g1.set(2 * i + 1, 2 * j, c, (res.px[k] + p[0]) & (m - 1));
                g1.set(2 * i, 2 * j + 1, c, (res.px[n + k] + p[1]) & (m - 1));
                g1.set(
                    2 * i + 1,
                    2 * j + 1,
                    c,
                    (res.px[2 * n + k] + p[2]) & (m - 1),
                );
            }
        }
    }
    if two_pass {
        for j in 0..h2 {
            for i in 0..w2 {
                for c in 0..ch {
                    let p = interlace_pred2(g2, &g1, i, j, c);
                    let k = (j * w2 + i) * ch + c;
                    g1.set(2 * i + 1, 2 * j, c, (res.px[k] + p[0]) & (m - 1));
                    g1.set(2 * i, 2 * j + 1, c, (res.px[n + k] + p[1]) & (m - 1));
                }
            }
        }
    }
    g1
}

fn subsample(img: &Img, s: usize) -> Img {
    let mut out = Img::new(img.w / s, img.h / s, img.ch, img.depth);
    for y in 0..out.h {
        for x in 0..out.w {
            for c in 0..img.ch {
                out.set(x, y, c, img.at(x * s, y * s, c));
            }
        }
    }
    out
}

// ---------------------------------------------------------------- (c) pyramid

fn box_down(x: &Img) -> Img {
    let mut out = Img::new(x.w / 2, x.h / 2, x.ch, x.depth);
    for j in 0..out.h {
        for i in 0..out.w {
            for c in 0..x.ch {
                let s = x.at(2 * i, 2 * j, c)
                    + x.at(2 * i + 1, 2 * j, c)
                    + x.at(2 * i, 2 * j + 1, c)
                    + x.at(2 * i + 1, 2 * j + 1, c);
                out.set(i, j, c, (s + 2) >> 2);
            }
        }
    }
    out
}

/// Integer bilinear 2x upsample prediction of fine pixel (x, y) from coarse `p`.
#[inline]
fn up_pred(p: &Img, x: usize, y: usize, c: usize) -> i32 {
    let (i, j) = (x >> 1, y >> 1);
    let i2 = if x & 1 == 1 {
        (i + 1).min(p.w - 1)
    } else {
        i.saturating_sub(1)
    };
    let j2 = if y & 1 == 1 {
        (j + 1).min(p.h - 1)
    } else {
        j.saturating_sub(1)
    };
    (9 * p.at(i, j, c) + 3 * p.at(i2, j, c) + 3 * p.at(i, j2, c) + p.at(i2, j2, c) + 8) >> 4
}

fn pyramid_fwd(fine: &Img, coarse: &Img) -> Img {
    let m = 1i32 << fine.depth;
    let mut r = Img::new(fine.w, fine.h, fine.ch, fine.depth);
    for y in 0..fine.h {
        for x in 0..fine.w {
            for c in 0..fine.ch {
                r.set(
                    x,
                    y,
                    c,
                    (fine.at(x, y, c) - up_pred(coarse, x, y, c)).rem_euclid(m),
                );
            }
        }
    }
    r
}

fn pyramid_inv(coarse: &Img, r: &Img) -> Img {
    let m = 1i32 << coarse.depth;
    let mut fine = Img::new(r.w, r.h, r.ch, coarse.depth);
    for y in 0..r.h {
        for x in 0..r.w {
            for c in 0..r.ch {
                fine.set(
                    x,
                    y,
                    c,
                    (r.at(x, y, c) + up_pred(coarse, x, y, c)) & (m - 1),
                );
            }
        }
    }
    fine
}

// ---------------------------------------------------------------- levels

/// Payload images, level 0 (smallest) first, for `levels` levels of a padded image.
fn forward(cand: Cand, x: &Img, levels: usize) -> Vec<Img> {
    let s = 1 << (levels - 1);
    match cand {
        Cand::Haar16 | Cand::HaarSplit => {
            let mut cur = x.clone();
            let mut dets = Vec::new();
            for _ in 1..levels {
                let (ll, det) = haar_fwd(&cur);
                dets.push(pack_details(
                    &det,
                    ll.w,
                    ll.ch,
                    x.depth,
                    cand == Cand::Haar16,
                ));
                cur = ll;
            }
            std::iter::once(cur).chain(dets.into_iter().rev()).collect()
        }
        Cand::Interlace | Cand::Interlace2 => {
            let mut out = vec![subsample(x, s)];
            let mut t = s / 2;
            while t >= 1 {
                let two = cand == Cand::Interlace2;
                out.push(interlace_fwd(&subsample(x, t), &subsample(x, 2 * t), two));
                t /= 2;
            }
            out
        }
        Cand::Pyramid => {
            let mut p = vec![x.clone()];
            for k in 1..levels {
                let next = box_down(&p[k - 1]);
                p.push(next);
            }
            let mut out = vec![p[levels - 1].clone()];
            for k in (0..levels - 1).rev() {
                out.push(pyramid_fwd(&p[k], &p[k + 1]));
            }
            out
        }
    }
}

/// Reconstruction at the next resolution from the previous one and a decoded payload.
fn inverse_step(cand: Cand, prev: &Img, payload: &Img) -> Img {
    match cand {
        Cand::Haar16 | Cand::HaarSplit => haar_inv(prev, &unpack_details(payload, prev.depth)),
        Cand::Interlace => interlace_inv(prev, payload, false),
        Cand::Interlace2 => interlace_inv(prev, payload, true),
        Cand::Pyramid => pyramid_inv(prev, payload),
    }
}

/// PSNR (dB, peak 2^depth - 1) of `low` against the exact area average of `x` over f x f.
fn psnr_vs_area(x: &Img, low: &Img, f: usize) -> f64 {
    let mut se = 0.0f64;
    for j in 0..low.h {
        for i in 0..low.w {
            for c in 0..x.ch {
                let mut s = 0i64;
                for y in j * f..(j + 1) * f {
                    for xx in i * f..(i + 1) * f {
                        s += x.at(xx, y, c) as i64;
                    }
                }
                let d = s as f64 / (f * f) as f64 - low.at(i, j, c) as f64;
                se += d * d;
            }
        }
    }
    let mse = se / low.px.len() as f64;
    let peak = ((1u64 << x.depth) - 1) as f64;
    if mse == 0.0 {
        99.0
    } else {
        (10.0 * (peak * peak / mse).log10()).min(99.0)
    }
}

// ---------------------------------------------------------------- driver

/// (levels, candidate) and the coded level payloads, level 0 first.
type LevelSet = ((usize, Cand), Vec<Vec<u8>>);

struct Encoded {
    class: String,
    name: String,
    flat: Vec<u8>,
    /// (levels, candidate) -> level payloads.
    sets: Vec<LevelSet>,
}

#[derive(Default, Clone)]
struct Stat {
    images: usize,
    flat_bytes: u64,
    flat_dec: f64,
    bytes: Vec<u64>,
    dec: Vec<f64>,
    rec: Vec<f64>,
    psnr: Vec<f64>,
    pixels: u64,
}

impl Stat {
    fn add(&mut self, o: &Stat) {
        let n = o.bytes.len();
        if self.bytes.is_empty() {
            self.bytes = vec![0; n];
            self.dec = vec![0.0; n];
            self.rec = vec![0.0; n];
            self.psnr = vec![0.0; n];
        }
        self.images += o.images;
        self.flat_bytes += o.flat_bytes;
        self.flat_dec += o.flat_dec;
        self.pixels += o.pixels;
        for k in 0..n {
            self.bytes[k] += o.bytes[k];
            self.dec[k] += o.dec[k];
            self.rec[k] += o.rec[k];
            self.psnr[k] += o.psnr[k];
        }
    }
    fn total(&self) -> u64 {
        self.bytes.iter().sum()
    }
}

fn min_time<T>(reps: usize, mut f: impl FnMut() -> T) -> (T, f64) {
    let mut best = f64::INFINITY;
    let mut out = None;
    for _ in 0..reps.max(1) {
        let t = Instant::now();
        let r = f();
        best = best.min(t.elapsed().as_secs_f64());
        out = Some(r);
    }
    (out.expect("at least one run"), best)
}

fn level_label(levels: usize, k: usize) -> String {
    let f = 1usize << (levels - 1 - k);
    if f == 1 {
        "1/1".into()
    } else {
        format!("1/{f}")
    }
}

fn main() -> Result<()> {
    let mut reps = 3usize;
    let mut dirs: Vec<PathBuf> = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        if a == "--reps" {
            reps = args.next().context("--reps N")?.parse()?;
        } else {
            dirs.push(a.into());
        }
    }
    if dirs.is_empty() {
        let base = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/data/images");
        let mut d: Vec<PathBuf> = std::fs::read_dir(&base)
            .with_context(|| base.display().to_string())?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.is_dir())
            .collect();
        d.sort();
        dirs = d;
    }
    let mut files: Vec<(String, PathBuf)> = Vec::new();
    for d in &dirs {
        let class = d
            .file_name()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let mut fs: Vec<PathBuf> = std::fs::read_dir(d)?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.is_file())
            .collect();
        fs.sort();
        files.extend(fs.into_iter().map(|f| (class.clone(), f)));
    }
    let configs = [3usize, 4];

    // Phase 1: encode everything (rayon over images, one thread per encode).
    let t0 = Instant::now();
    let encoded: Vec<Encoded> = files
        .par_iter()
        .map(|(class, path)| -> Result<Encoded> {
            let img = load(path)?;
            let flat = encode(&img);
            let mut sets = Vec::new();
            for &levels in &configs {
                let x = pad(&img, 1 << (levels - 1));
                for cand in CANDS {
                    let payloads = forward(cand, &x, levels).iter().map(encode).collect();
                    sets.push(((levels, cand), payloads));
                }
            }
            Ok(Encoded {
                class: class.clone(),
                name: path
                    .file_name()
                    .unwrap_or_default()
                    .to_string_lossy()
                    .into_owned(),
                flat,
                sets,
            })
        })
        .collect::<Result<_>>()?;
    eprintln!(
        "encoded {} images in {:.1} s",
        encoded.len(),
        t0.elapsed().as_secs_f64()
    );

    // Phase 2: decode, reconstruct, verify, time (one image at a time, one thread).
    let mut per: BTreeMap<(usize, Cand), BTreeMap<String, Stat>> = BTreeMap::new();
    let mut per_image: Vec<String> = Vec::new();
    for (e, (_, path)) in encoded.iter().zip(&files) {
        let img = load(path)?;
        let (flat_img, flat_dec) = min_time(reps, || decode(&e.flat));
        assert!(flat_img == img, "{}: flat round trip", e.name);
        for ((levels, cand), payloads) in &e.sets {
            let (levels, cand) = (*levels, *cand);
            let x = pad(&img, 1 << (levels - 1));
            let mut st = Stat {
                images: 1,
                flat_bytes: e.flat.len() as u64,
                flat_dec,
                pixels: (img.w * img.h) as u64,
                ..Default::default()
            };
            let mut prev: Option<Img> = None;
            for (k, bytes) in payloads.iter().enumerate() {
                let (payload, dec) = min_time(reps, || decode(bytes));
                let (cur, rec) = match &prev {
                    None => (payload, 0.0),
                    Some(p) => min_time(reps, || inverse_step(cand, p, &payload)),
                };
                let f = 1 << (levels - 1 - k);
                st.psnr.push(if f > 1 {
                    psnr_vs_area(&x, &cur, f)
                } else {
                    0.0
                });
                st.bytes.push(bytes.len() as u64);
                st.dec.push(dec);
                st.rec.push(rec);
                prev = Some(cur);
            }
            let full = crop(&prev.expect("levels"), img.w, img.h);
            assert!(
                full == img,
                "{} {:?} {} levels: reconstruction differs from the original",
                e.name,
                cand,
                levels
            );
            per_image.push(format!(
                "| {} | {} | {} | {} | {:.3} | {:.1}% | {:.1} |",
                e.name,
                levels,
                cand.name(),
                st.flat_bytes,
                st.total() as f64 / st.flat_bytes as f64,
                100.0 * st.bytes[..=levels - 3].iter().sum::<u64>() as f64 / st.total() as f64,
                st.psnr[0],
            ));
            let m = per.entry((levels, cand)).or_default();
            m.entry(e.class.clone()).or_default().add(&st);
            m.entry("ALL".into()).or_default().add(&st);
        }
        eprintln!("verified {}", e.name);
    }

    print_report(&per, &per_image);
    Ok(())
}

fn print_report(per: &BTreeMap<(usize, Cand), BTreeMap<String, Stat>>, per_image: &[String]) {
    for levels in [3usize, 4] {
        let q = levels - 3; // index of the 1/4-per-side level
        println!(
            "\n### {levels} levels (level 0 = 1/{} per side)\n",
            1 << (levels - 1)
        );
        println!("Headline (all images): total bytes of all levels / flat compact, bytes up to the 1/4 level as a share of the total, level-0 PSNR vs area-averaged downsample (mean over images), one-thread decode time.\n");
        println!("| candidate | images | flat bytes | levels bytes | ratio | prefix to 1/4 | level-0 PSNR dB | 1/2 PSNR dB | flat dec ms | all levels dec+rec ms | ratio |");
        println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
        for cand in CANDS {
            let s = &per[&(levels, cand)]["ALL"];
            let n = s.images as f64;
            let dec: f64 = s.dec.iter().sum::<f64>() + s.rec.iter().sum::<f64>();
            println!(
                "| {} | {} | {} | {} | {:.3} | {:.1}% | {:.2} | {:.2} | {:.1} | {:.1} | {:.2} |",
                cand.name(),
                s.images,
                s.flat_bytes,
                s.total(),
                s.total() as f64 / s.flat_bytes as f64,
                100.0 * s.bytes[..=q].iter().sum::<u64>() as f64 / s.total() as f64,
                s.psnr[0] / n,
                s.psnr[levels - 2] / n,
                1e3 * s.flat_dec,
                1e3 * dec,
                dec / s.flat_dec,
            );
        }
        println!("\nPer level (all images): share of bytes, one-thread decode of the level's file, reconstruction (inverse step), cumulative decode+reconstruction; ms summed over images.\n");
        println!("| candidate | level | res | bytes | share | cum. share | dec ms | rec ms | cum. ms | cum. / flat dec |");
        println!("|---|---:|---|---:|---:|---:|---:|---:|---:|---:|");
        for cand in CANDS {
            let s = &per[&(levels, cand)]["ALL"];
            let (mut cb, mut ct) = (0u64, 0.0f64);
            for k in 0..levels {
                cb += s.bytes[k];
                ct += s.dec[k] + s.rec[k];
                println!(
                    "| {} | {} | {} | {} | {:.1}% | {:.1}% | {:.1} | {:.1} | {:.1} | {:.2} |",
                    cand.name(),
                    k,
                    level_label(levels, k),
                    s.bytes[k],
                    100.0 * s.bytes[k] as f64 / s.total() as f64,
                    100.0 * cb as f64 / s.total() as f64,
                    1e3 * s.dec[k],
                    1e3 * s.rec[k],
                    1e3 * ct,
                    ct / s.flat_dec,
                );
            }
        }
        println!("\nPer class: ratio to flat / prefix share up to the 1/4 level / level-0 PSNR dB (mean).\n");
        let classes: Vec<&String> = per[&(levels, Cand::Pyramid)].keys().collect();
        print!("| class | images |");
        for cand in CANDS {
            print!(" {} |", cand.name());
        }
        println!();
        println!("|---|---:|{}", "---|".repeat(CANDS.len()));
        for class in classes {
            print!(
                "| {} | {} |",
                class,
                per[&(levels, Cand::Pyramid)][class].images
            );
            for cand in CANDS {
                let s = &per[&(levels, cand)][class];
                print!(
                    " {:.3} / {:.1}% / {:.1} |",
                    s.total() as f64 / s.flat_bytes as f64,
                    100.0 * s.bytes[..=q].iter().sum::<u64>() as f64 / s.total() as f64,
                    s.psnr[0] / s.images as f64
                );
            }
            println!();
        }
    }
    println!("\n### Per image\n");
    println!(
        "| image | levels | candidate | flat bytes | ratio | prefix to 1/4 | level-0 PSNR dB |"
    );
    println!("|---|---:|---|---:|---:|---:|---:|");
    for l in per_image {
        println!("{l}");
    }
}
