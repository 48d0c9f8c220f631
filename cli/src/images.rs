//! Source images (PNG, JPEG, ...): read within the command line's limit, and compared with
//! the pixels decoded from their L3 files.

use std::path::Path;

use anyhow::Result;

use crate::limits::limits;

/// Reads a source image (PNG, JPEG, ...) within the command line's output-size limit.
pub(crate) fn read_source(path: &Path) -> Result<image::DynamicImage> {
    Ok(l3::image_support::read_image_limited(
        path,
        limits().max_output_bytes,
    )?)
}

/// The largest difference between the source image's samples and decoded L3 pixels, or
/// `None` if their colour types or sizes differ.
pub(crate) fn max_difference(
    original: &image::DynamicImage,
    decoded: &image::DynamicImage,
) -> Option<u32> {
    if original.color() != decoded.color()
        || (original.width(), original.height()) != (decoded.width(), decoded.height())
    {
        return None;
    }
    let (a, b) = (original.as_bytes(), decoded.as_bytes());
    let wide = original.color().bytes_per_pixel() / original.color().channel_count() == 2;
    Some(if wide {
        a.chunks_exact(2)
            .zip(b.chunks_exact(2))
            .map(|(x, y)| {
                (u16::from_ne_bytes([x[0], x[1]]) as u32)
                    .abs_diff(u16::from_ne_bytes([y[0], y[1]]) as u32)
            })
            .max()
            .unwrap_or(0)
    } else {
        a.iter()
            .zip(b)
            .map(|(&x, &y)| (x as u32).abs_diff(y as u32))
            .max()
            .unwrap_or(0)
    })
}
