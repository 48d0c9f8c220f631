//! CPU encoder: any 8- or 16-bit gray/gray+alpha/RGB/RGBA pixels to an L3 file, patches in
//! parallel with rayon.

use rayon::prelude::*;

use crate::bits::BitWriter;
use crate::compact;
use crate::error::{ParameterError, Result};
use crate::format::{self, nbit_field_bits, ColorType, Header, Predictor, Profile};
use crate::predict::predict_row;

/// Which predictor each stream uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PredictorChoice {
    /// Rank every predictor on each (patch, channel) by the bits its odd rows would take, and
    /// use the best (default). Costs about three times the prediction work of a fixed choice;
    /// decode speed is the same.
    #[default]
    Best,
    /// Use one predictor everywhere.
    Fixed(Predictor),
}

/// Encoder options.
#[derive(Debug, Clone, Copy)]
pub struct EncodeOptions {
    /// Which coding to write: [`Profile::Fast`] (format version 1, default) or
    /// [`Profile::Compact`] (version 2: smaller files, slower decode).
    pub profile: Profile,
    /// log2 of the patch side; default [`format::PATCH_LOG2_DEFAULT`] (64x64 patches).
    pub patch_log2: u8,
    /// Predictor selection of the fast profile; default [`PredictorChoice::Best`].
    pub predictor: PredictorChoice,
    /// What the compact profile's encoder may try; default: everything.
    pub compact: CompactOptions,
    /// Encode patches on rayon's thread pool (default true).
    pub parallel: bool,
}

impl Default for EncodeOptions {
    fn default() -> Self {
        EncodeOptions {
            profile: Profile::Fast,
            patch_log2: format::PATCH_LOG2_DEFAULT,
            predictor: PredictorChoice::Best,
            compact: CompactOptions::default(),
            parallel: true,
        }
    }
}

/// A set of compact-profile predictors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PredictorSet(u8);

impl PredictorSet {
    /// Every predictor of [`format::compact::Predictor::ALL`].
    pub const fn all() -> Self {
        PredictorSet((1 << format::compact::Predictor::ALL.len()) - 1)
    }
    /// Only these predictors (an empty list means [`format::compact::Predictor::Gradient`]).
    pub fn only(predictors: &[format::compact::Predictor]) -> Self {
        let bits = predictors.iter().fold(0, |m, &p| m | 1 << p as u8);
        if bits == 0 {
            PredictorSet(1 << format::compact::Predictor::Gradient as u8)
        } else {
            PredictorSet(bits)
        }
    }
    /// Whether `p` is in the set.
    pub const fn contains(self, p: format::compact::Predictor) -> bool {
        self.0 & 1 << p as u8 != 0
    }
}

/// The compact profile's encoder search. Every choice is per patch and channel and is
/// signalled in the stream, so these trade encode time for size and never affect decoding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CompactOptions {
    /// Predictors to try (default: all six). Each costs one pass over the patch.
    pub predictors: PredictorSet,
    /// Try subtract-green on RGB(A) patches (default true). Costs two more planes' passes.
    pub subtract_green: bool,
    /// Allow pair tokens (default true): the encoder uses them per channel where they make
    /// the estimate smaller; smooth and JPEG-originated images gain most.
    pub pair_tokens: bool,
}

impl Default for CompactOptions {
    fn default() -> Self {
        CompactOptions {
            predictors: PredictorSet::all(),
            subtract_green: true,
            pair_tokens: true,
        }
    }
}

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
    fn depth(&self) -> u8 {
        match self.samples {
            Samples::U8(_) => 8,
            Samples::U16(_) => 16,
        }
    }
    fn len(&self) -> usize {
        match self.samples {
            Samples::U8(s) => s.len(),
            Samples::U16(s) => s.len(),
        }
    }
}

/// Encodes raw pixels into an L3 file.
pub fn encode(image: &RawImage, options: &EncodeOptions) -> Result<Vec<u8>> {
    let header = validate(image, options)?;
    let per_patch = header.streams_per_patch() as usize;
    let patches: Vec<Vec<Vec<u8>>> = match (options.profile, options.parallel) {
        (Profile::Fast, true) => (0..header.patch_count())
            .into_par_iter()
            .map(|patch| encode_patch(image, &header, options.predictor, patch))
            .collect(),
        (Profile::Fast, false) => (0..header.patch_count())
            .map(|patch| encode_patch(image, &header, options.predictor, patch))
            .collect(),
        (Profile::Compact, true) => (0..header.patch_count())
            .into_par_iter()
            .map_init(
                || compact::encode::PatchScratch::new(&header),
                |scratch, patch| {
                    vec![compact::encode::encode_patch(
                        image,
                        &header,
                        &options.compact,
                        patch,
                        scratch,
                    )]
                },
            )
            .collect(),
        (Profile::Compact, false) => {
            let mut scratch = compact::encode::PatchScratch::new(&header);
            (0..header.patch_count())
                .map(|patch| {
                    vec![compact::encode::encode_patch(
                        image,
                        &header,
                        &options.compact,
                        patch,
                        &mut scratch,
                    )]
                })
                .collect()
        }
    };
    let data_len: usize = patches.iter().flatten().map(Vec::len).sum();
    let total = header.data_offset() as usize + data_len + format::CHECKSUM_LEN;
    let mut out = Vec::with_capacity(total);
    out.extend_from_slice(&header.to_bytes());
    for stream in patches.iter().flatten() {
        out.extend_from_slice(&(stream.len() as u32).to_le_bytes());
    }
    debug_assert_eq!(out.len(), header.data_offset() as usize);
    debug_assert_eq!(patches.len() * per_patch, header.stream_count() as usize);
    for stream in patches.iter().flatten() {
        out.extend_from_slice(stream);
    }
    let crc = crc32fast::hash(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    Ok(out)
}

/// Encodes an image decoded by the `image` crate. Palette images arrive expanded to RGB(A)
/// and tRNS to alpha (the `image` crate's PNG reader does this); 32-bit float pixels are
/// refused because they cannot be stored losslessly.
pub fn encode_image(image: &image::DynamicImage, options: &EncodeOptions) -> Result<Vec<u8>> {
    use image::DynamicImage as D;
    let (w, h) = (image.width(), image.height());
    let raw = |color, samples| RawImage {
        width: w,
        height: h,
        color,
        samples,
    };
    let raw = match image {
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
    };
    encode(&raw, options)
}

/// Reads any image file the `image` crate understands (format guessed from its content).
/// The reader may allocate up to [`crate::Limits`]' default output size (4 GiB), not the
/// `image` crate's 512 MiB default, so large satellite or medical images convert.
pub fn read_image(path: &std::path::Path) -> Result<image::DynamicImage> {
    read_image_limited(path, crate::Limits::default().max_output_bytes)
}

/// [`read_image`] with the `image` crate's allocation limit set to `max_bytes`.
pub fn read_image_limited(path: &std::path::Path, max_bytes: u64) -> Result<image::DynamicImage> {
    let mut reader = image::ImageReader::open(path)?.with_guessed_format()?;
    let mut limits = image::Limits::default();
    limits.max_alloc = Some(max_bytes);
    reader.limits(limits);
    Ok(reader.decode()?)
}

fn validate(image: &RawImage, options: &EncodeOptions) -> Result<Header> {
    if !(format::PATCH_LOG2_MIN..=format::PATCH_LOG2_MAX).contains(&options.patch_log2) {
        return Err(ParameterError::InvalidOption {
            name: "patch_log2",
            value: options.patch_log2 as u64,
            reason: "must be 3..=7 (patches of 8 to 128 pixels)",
        }
        .into());
    }
    for (name, v) in [("width", image.width), ("height", image.height)] {
        if v == 0 || v > format::MAX_DIMENSION {
            return Err(ParameterError::InvalidOption {
                name,
                value: v as u64,
                reason: "must be 1..=16777215",
            }
            .into());
        }
    }
    let header = Header {
        width: image.width,
        height: image.height,
        color: image.color,
        depth: image.depth(),
        patch_log2: options.patch_log2,
        profile: options.profile,
    };
    let needed = header.sample_count();
    if image.len() as u64 != needed {
        return Err(ParameterError::SampleCount {
            got: image.len(),
            needed: needed as usize,
            width: image.width,
            height: image.height,
            channels: header.channels(),
        }
        .into());
    }
    Ok(header)
}

/// Chooses `(base, nbit)` for a row of residuals so every `(r - base) mod 2^depth` fits in
/// `nbit` bits. Two candidates: the plain min..max range, and the range of residuals read as
/// signed around zero (so -1 and +1, i.e. 2^depth - 1 and 1, need 2 bits, not `depth`).
/// The decoder does not care which was chosen: it adds base and delta modulo 2^depth.
#[inline(always)]
pub(crate) fn row_params(residuals: &[u16], depth: u8) -> (u32, u32) {
    let mask = (1u32 << depth) - 1;
    let half = 1u32 << (depth - 1);
    let (mut lo, mut hi, mut lo_s, mut hi_s) = (u32::MAX, 0u32, u32::MAX, 0u32);
    for &r in residuals {
        let r = r as u32;
        let s = (r + half) & mask;
        lo = lo.min(r);
        hi = hi.max(r);
        lo_s = lo_s.min(s);
        hi_s = hi_s.max(s);
    }
    let (base, span) = if hi_s - lo_s < hi - lo {
        ((lo_s.wrapping_sub(half)) & mask, hi_s - lo_s)
    } else {
        (lo, hi - lo)
    };
    (base, 32 - span.leading_zeros())
}

/// Residuals of one row: the sample minus its prediction, modulo 2^depth.
#[inline(always)]
fn residual_row(row: &[u16], prediction: &[u16], mask: u16, out: &mut [u16]) {
    for ((o, &x), &p) in out.iter_mut().zip(row).zip(prediction) {
        *o = x.wrapping_sub(p) & mask;
    }
}

/// Row buffers reused across the streams a thread encodes.
struct RowScratch {
    prediction: Vec<u16>,
    residuals: Vec<u16>,
}

impl RowScratch {
    fn new(width: usize) -> Self {
        RowScratch {
            prediction: vec![0; width],
            residuals: vec![0; width],
        }
    }

    /// Residuals of row `y` of `plane` (`pw` wide) under `predictor`, in `self.residuals`.
    #[inline(always)]
    fn residuals(&mut self, plane: &[u16], pw: usize, y: usize, predictor: Predictor, mask: u16) {
        let row = &plane[y * pw..(y + 1) * pw];
        if y == 0 || predictor == Predictor::None {
            for (o, &x) in self.residuals.iter_mut().zip(row) {
                *o = x & mask;
            }
        } else {
            predict_row(
                predictor,
                &plane[(y - 1) * pw..y * pw],
                &mut self.prediction,
            );
            residual_row(row, &self.prediction, mask, &mut self.residuals);
        }
    }
}

/// Estimated bits of a plane's rows with `predictor`, from its odd rows (for ranking).
#[inline(always)]
fn plane_bits(
    plane: &[u16],
    pw: usize,
    header: &Header,
    predictor: Predictor,
    rows: &mut RowScratch,
) -> u64 {
    let mask = ((1u32 << header.depth) - 1) as u16;
    let mut bits = 0;
    // Row 0 is stored unpredicted whatever the predictor, and every other row is a good
    // enough sample to rank predictors: half the search work for a negligible size cost.
    for y in (1..plane.len() / pw).step_by(2) {
        rows.residuals(plane, pw, y, predictor, mask);
        let (_, nbit) = row_params(&rows.residuals, header.depth);
        bits += header.row_bits(pw as u32, nbit);
    }
    bits
}

/// Encodes one channel plane of one patch as a stream.
#[inline(always)]
fn encode_plane(
    plane: &[u16],
    pw: usize,
    header: &Header,
    predictor: Predictor,
    rows: &mut RowScratch,
) -> Vec<u8> {
    let depth = header.depth;
    let mask = ((1u32 << depth) - 1) as u16;
    let nb = nbit_field_bits(depth);
    let ph = plane.len() / pw;
    let (_, max) = header.stream_size_bounds(pw as u32, ph as u32);
    let mut w = BitWriter::with_prefix(&[predictor as u8], max as usize);
    for y in 0..ph {
        rows.residuals(plane, pw, y, predictor, mask);
        let (base, nbit) = row_params(&rows.residuals, depth);
        w.write(nbit, nb);
        w.write(base, depth as u32);
        if nbit > 0 {
            for &r in &rows.residuals {
                w.write((r.wrapping_sub(base as u16) & mask) as u32, nbit);
            }
        }
    }
    w.finish()
}

/// Copies channel `c` of a patch out of interleaved samples into a plane.
#[inline(always)]
pub(crate) fn extract_plane<T: Copy + Into<u16>>(
    samples: &[T],
    header: &Header,
    (x0, y0, pw, ph): (usize, usize, usize, usize),
    c: usize,
    plane: &mut [u16],
) {
    let channels = header.channels() as usize;
    let width = header.width as usize;
    for (y, dst) in plane.chunks_exact_mut(pw).take(ph).enumerate() {
        let start = ((y0 + y) * width + x0) * channels;
        let src = &samples[start..start + pw * channels];
        for (o, px) in dst.iter_mut().zip(src.chunks_exact(channels)) {
            *o = px[c].into();
        }
    }
}

/// Encodes one patch, all channels; with AVX2 code generation where the CPU has it.
fn encode_patch(
    image: &RawImage,
    header: &Header,
    choice: PredictorChoice,
    patch: u64,
) -> Vec<Vec<u8>> {
    #[cfg(target_arch = "x86_64")]
    if crate::decode::Avx2::detect().is_some() {
        // SAFETY: the CPU supports AVX2 (checked just above), the only requirement of the
        // function; it runs the same safe code as the portable path, compiled for AVX2.
        return unsafe { encode_patch_avx2(image, header, choice, patch) };
    }
    encode_patch_portable(image, header, choice, patch)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn encode_patch_avx2(
    image: &RawImage,
    header: &Header,
    choice: PredictorChoice,
    patch: u64,
) -> Vec<Vec<u8>> {
    encode_patch_portable(image, header, choice, patch)
}

/// The encoder's work for one patch; everything it calls is inlined so the AVX2 copy above
/// vectorises all of it.
#[inline(always)]
pub(crate) fn encode_patch_portable(
    image: &RawImage,
    header: &Header,
    choice: PredictorChoice,
    patch: u64,
) -> Vec<Vec<u8>> {
    let (x0, y0, pw, ph) = header.patch_rect(patch);
    let rect = (x0 as usize, y0 as usize, pw as usize, ph as usize);
    let pw = pw as usize;
    let mut plane = vec![0u16; pw * ph as usize];
    let mut rows = RowScratch::new(pw);
    // Loops, not iterator closures: closures would not be inlined into the AVX2 copy.
    let mut streams = Vec::with_capacity(header.channels() as usize);
    for c in 0..header.channels() as usize {
        match image.samples {
            Samples::U8(s) => extract_plane(s, header, rect, c, &mut plane),
            Samples::U16(s) => extract_plane(s, header, rect, c, &mut plane),
        }
        let predictor = match choice {
            PredictorChoice::Fixed(p) => p,
            PredictorChoice::Best => {
                // A plain loop, not min_by_key: a closure would not be inlined into the
                // AVX2 copy of this function.
                let mut best = (u64::MAX, Predictor::None);
                for p in Predictor::ALL {
                    let bits = plane_bits(&plane, pw, header, p, &mut rows);
                    if bits < best.0 {
                        best = (bits, p);
                    }
                }
                best.1
            }
        };
        streams.push(encode_plane(&plane, pw, header, predictor, &mut rows));
    }
    streams
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn row_params_handles_constant_full_range_and_wrapping_rows() {
        assert_eq!(row_params(&[7, 7, 7], 8), (7, 0));
        assert_eq!(row_params(&[0, 85, 170], 8).1, 8);
        // 0 and 255 are neighbours modulo 256: one bit.
        assert_eq!(row_params(&[0, 255], 8), (255, 1));
        assert_eq!(row_params(&[0, 65535, 1], 16), (65535, 2));
        // -1, 0, +1 mod 256: base -1 (255), span 2 -> 2 bits.
        assert_eq!(row_params(&[255, 0, 1], 8), (255, 2));
        assert_eq!(row_params(&[0, 128], 8).1, 8);
    }
}

/// A patterned test image (every sample distinct-ish, all bit widths exercised), shared by the
/// encoder's and decoder's unit tests.
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
    pub(crate) fn new(width: u32, height: u32, color: ColorType, depth: u8) -> Self {
        let n = (width * height) as usize * color.channels() as usize;
        let px16: Vec<u16> = (0..n)
            .map(|i| ((i * 7919) ^ (i / 13 * 31)) as u16)
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

#[cfg(test)]
mod portable_tests {
    use super::*;

    /// The portable path (what CPUs without AVX2 run) writes the same streams as the
    /// dispatched one, for every predictor choice, depth and channel count.
    #[test]
    fn portable_and_dispatched_encoders_agree() {
        for (color, depth) in [
            (ColorType::Gray, 8),
            (ColorType::Rgb, 8),
            (ColorType::Rgba, 16),
        ] {
            let test_image = TestImage::new(75, 70, color, depth);
            let image = test_image.raw();
            let header = validate(&image, &EncodeOptions::default()).unwrap();
            for choice in [
                PredictorChoice::Best,
                PredictorChoice::Fixed(Predictor::L3Paeth),
            ] {
                for patch in 0..header.patch_count() {
                    assert_eq!(
                        encode_patch_portable(&image, &header, choice, patch),
                        encode_patch(&image, &header, choice, patch),
                        "{color:?} {depth}-bit {choice:?} patch {patch}"
                    );
                }
            }
        }
    }
}
