//! The pixels an encoder takes: [`RawImage`], interleaved [`Samples`] of 8 or 16 bits. A base
//! type below both codecs and every front end that hands them pixels.

use crate::format::ColorType;

/// Interleaved samples, row-major, no row padding.
#[derive(Debug, Clone, Copy)]
pub enum Samples<'a> {
    /// 8-bit samples.
    U8(&'a [u8]),
    /// 16-bit samples.
    U16(&'a [u16]),
}

/// Pixels to encode.
#[derive(Debug, Clone, Copy)]
pub struct RawImage<'a> {
    /// Width in pixels.
    pub width: u32,
    /// Height in pixels.
    pub height: u32,
    /// Channel layout.
    pub color: ColorType,
    /// Interleaved samples (width x height x channels of them).
    pub samples: Samples<'a>,
}

impl RawImage<'_> {
    pub(crate) fn depth(&self) -> u8 {
        match self.samples {
            Samples::U8(_) => 8,
            Samples::U16(_) => 16,
        }
    }
    pub(crate) fn len(&self) -> usize {
        match self.samples {
            Samples::U8(s) => s.len(),
            Samples::U16(s) => s.len(),
        }
    }
}

#[cfg(test)]
pub(crate) struct TestImage {
    width: u32,
    height: u32,
    color: ColorType,
    depth: u8,
    px16: Vec<u16>,
    px8: Vec<u8>,
}

#[cfg(test)]
impl TestImage {
    /// An image of hashed samples (sample `i` in interleaved order from `i`).
    pub(crate) fn new(width: u32, height: u32, color: ColorType, depth: u8) -> Self {
        let ch = color.channels() as u32;
        Self::from_fn(width, height, color, depth, |x, y, c| {
            let i = ((y * width + x) * ch + c) as usize;
            ((i * 7919) ^ (i / 13 * 31)) as u16
        })
    }

    /// An image whose sample `c` of pixel (`x`, `y`) is `value(x, y, c)` (its low byte at 8
    /// bits).
    pub(crate) fn from_fn(
        width: u32,
        height: u32,
        color: ColorType,
        depth: u8,
        value: impl Fn(u32, u32, u32) -> u16,
    ) -> Self {
        let ch = color.channels() as u32;
        let px16: Vec<u16> = (0..height)
            .flat_map(|y| (0..width).flat_map(move |x| (0..ch).map(move |c| (x, y, c))))
            .map(|(x, y, c)| value(x, y, c))
            .collect();
        let px8 = px16.iter().map(|&v| v as u8).collect();
        TestImage {
            width,
            height,
            color,
            depth,
            px16,
            px8,
        }
    }

    pub(crate) fn raw(&self) -> RawImage<'_> {
        RawImage {
            width: self.width,
            height: self.height,
            color: self.color,
            samples: if self.depth == 8 {
                Samples::U8(&self.px8)
            } else {
                Samples::U16(&self.px16)
            },
        }
    }

    /// The samples as the decoder's byte output lays them out.
    pub(crate) fn bytes(&self) -> Vec<u8> {
        if self.depth == 8 {
            self.px8.clone()
        } else {
            bytemuck::cast_slice(&self.px16).to_vec()
        }
    }
}
