//! Generated inputs for the image classes a photo folder lacks: a class-label map, a
//! screenshot-like image and a star field (deterministic, so every run and machine measures
//! the same pixels). Their class in the report is `generated`.

use l3::ColorType;

use crate::images::Pixels;

/// Class name of the generated images.
pub const CLASS: &str = "generated";

/// A tiny deterministic generator (SplitMix64).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

fn pixels(name: &str, width: u32, height: u32, color: ColorType, bytes: Vec<u8>) -> Pixels {
    Pixels {
        name: name.into(),
        class: CLASS.into(),
        width,
        height,
        color,
        depth: 8,
        bytes,
    }
}

/// A semantic-segmentation label map in the PASCAL VOC colour map: 40 Voronoi regions of 21
/// classes, RGB.
fn labels(width: u32, height: u32) -> Pixels {
    let mut rng = Rng(1);
    // The VOC colour map: class c's bits spread over the three channels' high bits.
    let colour = |c: u32| -> [u8; 3] {
        let (mut r, mut g, mut b) = (0u8, 0u8, 0u8);
        let mut c = c;
        for shift in (0..8).rev() {
            r |= ((c & 1) as u8) << shift;
            g |= (((c >> 1) & 1) as u8) << shift;
            b |= (((c >> 2) & 1) as u8) << shift;
            c >>= 3;
        }
        [r, g, b]
    };
    let seeds: Vec<(i64, i64, u32)> = (0..40)
        .map(|_| {
            (
                rng.below(width as u64) as i64,
                rng.below(height as u64) as i64,
                rng.below(21) as u32,
            )
        })
        .collect();
    let mut bytes = Vec::with_capacity((width * height * 3) as usize);
    for y in 0..height as i64 {
        for x in 0..width as i64 {
            let nearest = seeds
                .iter()
                .min_by_key(|(sx, sy, _)| (sx - x).pow(2) + (sy - y).pow(2))
                .map_or(0, |s| s.2);
            bytes.extend_from_slice(&colour(nearest));
        }
    }
    pixels("generated_voc_labels", width, height, ColorType::Rgb, bytes)
}

/// A desktop screenshot: a gradient wallpaper, windows with title bars and borders, and
/// lines of "text" drawn from a set of 60 random 6x9 glyphs, RGB.
fn screenshot(width: u32, height: u32) -> Pixels {
    let mut rng = Rng(2);
    let (w, h) = (width as usize, height as usize);
    let mut img = vec![0u8; w * h * 3];
    for y in 0..h {
        for x in 0..w {
            let i = (y * w + x) * 3;
            img[i] = (40 + y * 60 / h) as u8;
            img[i + 1] = (70 + x * 40 / w) as u8;
            img[i + 2] = 120;
        }
    }
    let glyphs: Vec<[u8; 9]> = (0..60)
        .map(|_| std::array::from_fn(|_| rng.below(64) as u8))
        .collect();
    let fill = |img: &mut [u8], x0: usize, y0: usize, x1: usize, y1: usize, c: [u8; 3]| {
        for y in y0..y1.min(h) {
            for x in x0..x1.min(w) {
                img[(y * w + x) * 3..][..3].copy_from_slice(&c);
            }
        }
    };
    for _ in 0..6 {
        let (x0, y0) = (
            rng.below(w as u64 / 2) as usize,
            rng.below(h as u64 / 2) as usize,
        );
        let (x1, y1) = (x0 + w / 3 + rng.below(w as u64 / 4) as usize, y0 + h / 3);
        fill(&mut img, x0, y0, x1, y1, [90, 90, 96]);
        fill(&mut img, x0 + 1, y0 + 1, x1 - 1, y1 - 1, [250, 250, 250]);
        fill(&mut img, x0 + 1, y0 + 1, x1 - 1, y0 + 24, [220, 224, 232]);
        // Text lines: glyph rows 9 px high, 16 px apart, words separated by spaces.
        let mut y = y0 + 34;
        while y + 9 < y1.min(h) {
            let mut x = x0 + 8;
            let line_end = x1 - 8 - rng.below(((x1 - x0) / 3) as u64) as usize;
            while x + 6 < line_end.min(w) {
                if rng.below(6) == 0 {
                    x += 6;
                    continue;
                }
                let g = &glyphs[rng.below(glyphs.len() as u64) as usize];
                for (gy, bits) in g.iter().enumerate() {
                    for gx in 0..6 {
                        if bits >> gx & 1 == 1 {
                            img[((y + gy) * w + x + gx) * 3..][..3].copy_from_slice(&[20, 20, 24]);
                        }
                    }
                }
                x += 7;
            }
            y += 16;
        }
    }
    pixels("generated_screenshot", width, height, ColorType::Rgb, img)
}

/// A star field: a dark sky with faint sensor noise and 3000 stars of random brightness
/// and width, gray.
fn stars(width: u32, height: u32) -> Pixels {
    let mut rng = Rng(3);
    let (w, h) = (width as usize, height as usize);
    let mut sky: Vec<u8> = (0..w * h)
        .map(|_| if rng.below(8) == 0 { 1 } else { 0 })
        .collect();
    for _ in 0..3000 {
        let (cx, cy) = (rng.below(w as u64) as i64, rng.below(h as u64) as i64);
        let peak = 40.0 + rng.below(215) as f64;
        let sigma = 0.6 + rng.below(20) as f64 / 10.0;
        let r = (sigma * 3.0).ceil() as i64;
        for y in (cy - r).max(0)..(cy + r + 1).min(h as i64) {
            for x in (cx - r).max(0)..(cx + r + 1).min(w as i64) {
                let d2 = ((x - cx).pow(2) + (y - cy).pow(2)) as f64;
                let v = peak * (-d2 / (2.0 * sigma * sigma)).exp();
                let p = &mut sky[y as usize * w + x as usize];
                *p = (*p as f64 + v).min(255.0) as u8;
            }
        }
    }
    pixels("generated_star_field", width, height, ColorType::Gray, sky)
}

/// The generated images.
pub fn images() -> Vec<Pixels> {
    vec![
        labels(2048, 1024),
        screenshot(1920, 1080),
        stars(2048, 2048),
    ]
}

/// Writes the generated images as PNG files (`NAME.png`, the bench's png encoder at its
/// default compression) into `dir`, each atomically.
pub fn write_png(dir: &std::path::Path) -> anyhow::Result<()> {
    use anyhow::Context;
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    for image in images() {
        let png = crate::codecs::png_encode(&image, png::Compression::Balanced)?;
        let path = dir.join(format!("{}.png", image.name));
        l3::shard::write_atomic(&path, &png)
            .with_context(|| format!("writing {}", path.display()))?;
        println!("{}", path.display());
    }
    Ok(())
}
