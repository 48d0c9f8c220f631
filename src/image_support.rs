//! Interop with the `image` crate (feature `image`, on by default): encode a `DynamicImage`,
//! decode into one, read any image file it reads, and let `image::open("x.l3")` read L3 files
//! through the crate's decoding hooks ([`register_image_hooks`]).
//!
//! ```
//! l3::image_support::register_image_hooks();
//! # let dir = tempfile::tempdir().unwrap();
//! # let path = dir.path().join("x.l3");
//! # let pixels: Vec<u8> = (0..16 * 8 * 3).map(|i| i as u8).collect();
//! # let raw = l3::RawImage { width: 16, height: 8, color: l3::ColorType::Rgb, samples: l3::Samples::U8(&pixels) };
//! # std::fs::write(&path, l3::encode::encode(&raw, &Default::default())?)?;
//! let image = image::open(&path)?; // any `image` user now reads .l3 like .png
//! assert_eq!((image.width(), image.height()), (16, 8));
//! # assert_eq!(image.to_rgb8().into_raw(), pixels);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::io::Read;

use crate::decode::{self, DecodeOptions};
use crate::encode::{encode, EncodeOptions};
use crate::error::{ParameterError, Result};
use crate::format::{ColorType, Header, MAGIC};
use crate::progressive::LevelImage;
use crate::raw::{RawImage, Samples};

/// The pixels of an image decoded by the `image` crate, as the encoder's input (borrowed).
/// Palette images arrive expanded to RGB(A) and tRNS to alpha (the `image` crate's PNG reader
/// does this); 32-bit float pixels are refused because they cannot be stored losslessly.
pub fn raw_image(image: &image::DynamicImage) -> Result<RawImage<'_>> {
    use image::DynamicImage as D;
    let (w, h) = (image.width(), image.height());
    let raw = |color, samples| RawImage {
        width: w,
        height: h,
        color,
        samples,
    };
    Ok(match image {
        D::ImageLuma8(b) => raw(ColorType::Gray, Samples::U8(b.as_raw())),
        D::ImageLumaA8(b) => raw(ColorType::GrayAlpha, Samples::U8(b.as_raw())),
        D::ImageRgb8(b) => raw(ColorType::Rgb, Samples::U8(b.as_raw())),
        D::ImageRgba8(b) => raw(ColorType::Rgba, Samples::U8(b.as_raw())),
        D::ImageLuma16(b) => raw(ColorType::Gray, Samples::U16(b.as_raw())),
        D::ImageLumaA16(b) => raw(ColorType::GrayAlpha, Samples::U16(b.as_raw())),
        D::ImageRgb16(b) => raw(ColorType::Rgb, Samples::U16(b.as_raw())),
        D::ImageRgba16(b) => raw(ColorType::Rgba, Samples::U16(b.as_raw())),
        other => {
            return Err(ParameterError::UnsupportedPixelType(format!(
                "{:?} (only 8- and 16-bit integer samples are stored losslessly)",
                other.color()
            ))
            .into())
        }
    })
}

/// Encodes an image decoded by the `image` crate (see [`raw_image`] for what it accepts).
pub fn encode_image(image: &image::DynamicImage, options: &EncodeOptions) -> Result<Vec<u8>> {
    encode(&raw_image(image)?, options)
}

/// A decoded progressive level ([`crate::progressive::LevelImage`]) as a `DynamicImage`.
pub fn image_from_level(level: LevelImage) -> Result<image::DynamicImage> {
    let color = ColorType::from_channels(level.channels).ok_or(ParameterError::InvalidOption {
        name: "channels",
        value: level.channels as u64,
        reason: "must be 1..=4",
    })?;
    let expected =
        level.width as u64 * level.height as u64 * level.channels as u64 * (level.depth / 8) as u64;
    if level.data.len() as u64 != expected || !(level.depth == 8 || level.depth == 16) {
        return Err(ParameterError::BufferSize {
            got: level.data.len(),
            needed: expected as usize,
        }
        .into());
    }
    Ok(if level.depth == 8 {
        image_from_parts(level.width, level.height, color, level.data)
    } else {
        image_from_u16_parts(
            level.width,
            level.height,
            color,
            bytemuck::pod_collect_to_vec(&level.data),
        )
    })
}

/// Reads any image file the `image` crate understands (format guessed from its content).
/// The reader may allocate up to [`crate::limits::Limits`]' default output size (4 GiB), not the
/// `image` crate's 512 MiB default, so large satellite or medical images convert.
pub fn read_image(path: &std::path::Path) -> Result<image::DynamicImage> {
    read_image_limited(path, crate::limits::Limits::default().max_output_bytes)
}

/// [`read_image`] with the `image` crate's allocation limit set to `max_bytes`.
pub fn read_image_limited(path: &std::path::Path, max_bytes: u64) -> Result<image::DynamicImage> {
    let mut reader = image::ImageReader::open(path)?.with_guessed_format()?;
    let mut limits = image::Limits::default();
    limits.max_alloc = Some(max_bytes);
    reader.limits(limits);
    Ok(reader.decode()?)
}

/// Decodes into the `image` crate's `DynamicImage` (Luma/LumaA/Rgb/Rgba, 8 or 16 bit).
pub fn decode_image(data: &[u8], options: &DecodeOptions) -> Result<image::DynamicImage> {
    let layout = decode::parse(data, options)?;
    let h = layout.header;
    if h.depth == 8 {
        let mut px = vec![0u8; h.output_bytes() as usize];
        decode::decode_layout(&layout, &mut px, options.parallel)?;
        Ok(image_from_samples(&h, px))
    } else {
        // Decoded straight into u16 storage: no copy, no alignment concern.
        let mut px = vec![0u16; h.sample_count() as usize];
        decode::decode_layout(&layout, bytemuck::cast_slice_mut(&mut px), options.parallel)?;
        Ok(image_from_u16(&h, px))
    }
}

/// Wraps decoded interleaved samples (as [`decode::decode_into`] or the GPU's interleaved output lay
/// them out: 16-bit samples in native byte order) in a `DynamicImage`.
///
/// # Panics
/// If `samples` is not exactly [`Header::output_bytes`] long.
pub fn image_from_samples(h: &Header, samples: Vec<u8>) -> image::DynamicImage {
    assert_eq!(samples.len() as u64, h.output_bytes(), "sample buffer size");
    if h.depth == 16 {
        return image_from_u16(h, bytemuck::pod_collect_to_vec(&samples));
    }
    image_from_parts(h.width, h.height, h.color, samples)
}

fn image_from_u16(h: &Header, samples: Vec<u16>) -> image::DynamicImage {
    image_from_u16_parts(h.width, h.height, h.color, samples)
}

fn image_from_parts(w: u32, ht: u32, color: ColorType, samples: Vec<u8>) -> image::DynamicImage {
    use crate::format::ColorType as C;
    use image::{DynamicImage as D, ImageBuffer};
    match color {
        C::Gray => ImageBuffer::from_raw(w, ht, samples).map(D::ImageLuma8),
        C::GrayAlpha => ImageBuffer::from_raw(w, ht, samples).map(D::ImageLumaA8),
        C::Rgb => ImageBuffer::from_raw(w, ht, samples).map(D::ImageRgb8),
        C::Rgba => ImageBuffer::from_raw(w, ht, samples).map(D::ImageRgba8),
    }
    .expect("length checked by the caller")
}

fn image_from_u16_parts(
    w: u32,
    ht: u32,
    color: ColorType,
    samples: Vec<u16>,
) -> image::DynamicImage {
    use crate::format::ColorType as C;
    use image::{DynamicImage as D, ImageBuffer};
    match color {
        C::Gray => ImageBuffer::from_raw(w, ht, samples).map(D::ImageLuma16),
        C::GrayAlpha => ImageBuffer::from_raw(w, ht, samples).map(D::ImageLumaA16),
        C::Rgb => ImageBuffer::from_raw(w, ht, samples).map(D::ImageRgb16),
        C::Rgba => ImageBuffer::from_raw(w, ht, samples).map(D::ImageRgba16),
    }
    .expect("buffer length equals width x height x channels by construction")
}

/// The `image` crate's decoder for L3 files, as [`register_image_hooks`] registers it. The
/// whole file is read (L3 streams are located through the size table), up to
/// [`DecodeOptions::limits`]' `max_input_bytes`; decoding checks everything the CPU decoder
/// checks.
pub struct L3ImageDecoder {
    data: Vec<u8>,
    header: Header,
    options: DecodeOptions,
}

impl L3ImageDecoder {
    /// Reads an L3 file from `reader` (at most `options.limits.max_input_bytes` bytes) and
    /// validates its header.
    pub fn new(reader: impl Read, options: DecodeOptions) -> Result<Self> {
        let max = options.limits.max_input_bytes;
        let mut data = Vec::new();
        reader.take(max.saturating_add(1)).read_to_end(&mut data)?;
        if data.len() as u64 > max {
            return Err(crate::error::LimitsError::InputBytes {
                len: data.len() as u64,
                max,
            }
            .into());
        }
        let header = decode::read_header(&data)?;
        header.check_limits(&options.limits)?;
        Ok(L3ImageDecoder {
            data,
            header,
            options,
        })
    }
}

/// An l3 error as the `image` crate's decoding error.
fn to_image_error(e: crate::error::Error) -> image::ImageError {
    image::ImageError::Decoding(image::error::DecodingError::new(
        image::error::ImageFormatHint::Name("L3".into()),
        e,
    ))
}

impl image::ImageDecoder for L3ImageDecoder {
    fn dimensions(&self) -> (u32, u32) {
        (self.header.width, self.header.height)
    }

    fn color_type(&self) -> image::ColorType {
        use image::ColorType as I;
        match (self.header.color, self.header.depth) {
            (ColorType::Gray, 8) => I::L8,
            (ColorType::GrayAlpha, 8) => I::La8,
            (ColorType::Rgb, 8) => I::Rgb8,
            (ColorType::Rgba, 8) => I::Rgba8,
            (ColorType::Gray, _) => I::L16,
            (ColorType::GrayAlpha, _) => I::La16,
            (ColorType::Rgb, _) => I::Rgb16,
            (ColorType::Rgba, _) => I::Rgba16,
        }
    }

    fn set_limits(&mut self, limits: image::Limits) -> image::ImageResult<()> {
        limits.check_support(&image::LimitSupport::default())?;
        limits.check_dimensions(self.header.width, self.header.height)?;
        if let Some(max) = limits.max_alloc {
            self.options.limits.max_output_bytes = self.options.limits.max_output_bytes.min(max);
        }
        self.header
            .check_limits(&self.options.limits)
            .map_err(|e| to_image_error(e.into()))
    }

    fn read_image(self, buf: &mut [u8]) -> image::ImageResult<()> {
        // `buf` is the decoded image in native byte order: exactly what `decode_into` writes.
        decode::decode_into(&self.data, buf, &self.options)
            .map(|_| ())
            .map_err(to_image_error)
    }

    fn read_image_boxed(self: Box<Self>, buf: &mut [u8]) -> image::ImageResult<()> {
        (*self).read_image(buf)
    }
}

/// Registers L3 with the `image` crate: a decoding hook for the `.l3` extension and a format
/// detection hook for the L3 signature, so `image::open("x.l3")` and
/// `ImageReader::with_guessed_format` read L3 files (with [`DecodeOptions::default`]).
/// Call it once at start-up; later calls do nothing. Returns whether this call registered the
/// decoder.
pub fn register_image_hooks() -> bool {
    let registered = image::hooks::register_decoding_hook(
        "l3".into(),
        Box::new(|reader| {
            let decoder =
                L3ImageDecoder::new(reader, DecodeOptions::default()).map_err(to_image_error)?;
            Ok(Box::new(decoder) as Box<dyn image::ImageDecoder>)
        }),
    );
    if registered {
        image::hooks::register_format_detection_hook("l3".into(), &MAGIC, None);
    }
    registered
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_image_above_the_reader_limit_is_a_limits_error() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("samples")
            .join("skimage_camera_gray.png");
        assert!(read_image_limited(&path, 1 << 20).is_ok());
        match read_image_limited(&path, 1000) {
            Err(crate::error::Error::Limits(e)) => assert!(e.to_string().contains("image reader")),
            other => panic!("expected a limits error, got {other:?}"),
        }
    }
}
