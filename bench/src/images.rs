//! Input images: the files to read and the reference pixels decoded from them.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use l3::{ColorType, RawImage, Samples};

/// Decoded reference pixels: interleaved, row-major, 16-bit samples in native byte order.
pub struct Pixels {
    pub name: String,
    /// The image's class in the per-class table: its folder's name (e.g. `labels`), or
    /// `generated` for the generated inputs.
    pub class: String,
    pub width: u32,
    pub height: u32,
    pub color: ColorType,
    pub depth: u8,
    pub bytes: Vec<u8>,
}

impl Pixels {
    pub fn channels(&self) -> usize {
        self.color.channels() as usize
    }
    pub fn pixels(&self) -> u64 {
        self.width as u64 * self.height as u64
    }
    pub fn raw(&self) -> RawImage<'_> {
        RawImage {
            width: self.width,
            height: self.height,
            color: self.color,
            samples: if self.depth == 8 {
                Samples::U8(&self.bytes)
            } else {
                Samples::U16(bytemuck::cast_slice(&self.bytes))
            },
        }
    }
    pub fn kind(&self) -> String {
        format!("{} {}-bit", self.color.name(), self.depth)
    }
}

pub fn pixels_from_dynamic(
    name: String,
    class: String,
    img: &image::DynamicImage,
) -> Option<Pixels> {
    use image::DynamicImage as D;
    let (color, depth) = match img {
        D::ImageLuma8(_) => (ColorType::Gray, 8),
        D::ImageLumaA8(_) => (ColorType::GrayAlpha, 8),
        D::ImageRgb8(_) => (ColorType::Rgb, 8),
        D::ImageRgba8(_) => (ColorType::Rgba, 8),
        D::ImageLuma16(_) => (ColorType::Gray, 16),
        D::ImageLumaA16(_) => (ColorType::GrayAlpha, 16),
        D::ImageRgb16(_) => (ColorType::Rgb, 16),
        D::ImageRgba16(_) => (ColorType::Rgba, 16),
        _ => return None,
    };
    Some(Pixels {
        name,
        class,
        width: img.width(),
        height: img.height(),
        color,
        depth,
        bytes: img.as_bytes().to_vec(),
    })
}

const IMAGE_EXTENSIONS: &[&str] = &[
    "png", "jpg", "jpeg", "tif", "tiff", "bmp", "webp", "gif", "qoi", "tga", "pnm", "ppm", "pgm",
];

fn collect_files(inputs: &[PathBuf]) -> Result<Vec<PathBuf>> {
    fn walk(p: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
        if p.is_dir() {
            let mut entries: Vec<PathBuf> = std::fs::read_dir(p)
                .with_context(|| format!("reading {}", p.display()))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .collect();
            entries.sort();
            for e in entries {
                walk(&e, out)?;
            }
        } else {
            let ext = p
                .extension()
                .and_then(|e| e.to_str())
                .unwrap_or("")
                .to_ascii_lowercase();
            if IMAGE_EXTENSIONS.contains(&ext.as_str()) {
                out.push(p.to_path_buf());
            }
        }
        Ok(())
    }
    let mut out = Vec::new();
    for p in inputs {
        if !p.exists() {
            bail!("{} does not exist", p.display());
        }
        if p.is_file() {
            out.push(p.clone());
        } else {
            walk(p, &mut out)?;
        }
    }
    Ok(out)
}

/// The inputs' images and the files they came from (files the `image` crate cannot read, or
/// whose pixel type l3 does not take, are skipped with a message).
pub fn load_images(inputs: &[PathBuf]) -> Result<(Vec<Pixels>, Vec<PathBuf>)> {
    let files = collect_files(inputs)?;
    let mut images = Vec::new();
    let mut used_files = Vec::new();
    for f in &files {
        let name = f
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let class = f
            .parent()
            .and_then(Path::file_name)
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| ".".into());
        match l3::read_image(f) {
            Ok(img) => match pixels_from_dynamic(name, class, &img) {
                Some(p) => {
                    images.push(p);
                    used_files.push(f.clone());
                }
                None => eprintln!("skipping {} (pixel type)", f.display()),
            },
            Err(e) => eprintln!("skipping {}: {e}", f.display()),
        }
    }
    if images.is_empty() {
        bail!("no images found in {:?}", inputs);
    }
    Ok((images, used_files))
}
