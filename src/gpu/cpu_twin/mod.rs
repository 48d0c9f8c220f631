//! CPU twins of the WGSL kernels: the same names, the same bindings in the same order, the
//! same arithmetic, one invocation after another. One file per kernel, named after its WGSL
//! file: [`prefix_sum`] (`shaders/prefix_sum.wgsl`), [`decode_streams`] (entry point `main`,
//! `shaders/shared/decode_streams.wgsl`), [`decode_compact`] (entry point `main_compact`,
//! `shaders/shared/decode_compact.wgsl`), [`segments`] (`shaders/shared/segments.wgsl`) and
//! [`line_sum`] (`shaders/shared/line_sum.wgsl`), the token decode and the difference
//! inverse of both float-array kernels, [`float_arrays`] (`shaders/shared/float_arrays.wgsl`,
//! the entry points both share), [`lossless`] (`shaders/lossless.wgsl`, held to the
//! CPU decoder by `field::lossless::gpu`'s tests), [`bounded`] (`shaders/bounded.wgsl`, held
//! to the CPU decoder by `field::bounded::gpu`'s tests) and `tensor_window`
//! (`shaders/tensor_window.wgsl`, held to `loader::TensorAugment::apply` by
//! `loader::tensor_gpu`'s tests) and [`encode`] (the error-bounded encoder's kernels,
//! `shaders/encode_*.wgsl`, held to the CPU encoder by `field::bounded::gpu_encode`'s tests). The decode twins are generic over the [`OutputSink`] that
//! stands for the output layout's `put_sample` (as the shader assembler pairs the shared
//! entry points with one `shaders/output/*.wgsl`). This file holds what the kernels share:
//! the twins of `shaders/shared/bits.wgsl` and `images.wgsl`, the sinks, and [`run_chunk`],
//! the whole pipeline. Test-only (`cfg(test)`): the unit tests run a twin and
//! its shader on the same inputs and compare, and hold the twins to the CPU decoder; the
//! twins also document what each kernel computes.

pub(crate) mod bounded;
mod decode_compact;
mod decode_streams;
pub(crate) mod encode;
pub(crate) mod float_arrays;
mod line_sum;
pub(crate) mod lossless;
mod prefix_sum;
mod segments;
#[cfg(feature = "gpu")]
pub(crate) mod tensor_window;

pub(crate) use decode_compact::decode_compact_patches;
pub(crate) use decode_streams::decode_streams;
pub(crate) use prefix_sum::prefix_sum;

use super::abi::{ImageInfo, Params};
use super::plan::ChunkInputs;
use crate::layout::{Normalize, OutputLayout};

/// Largest patch side (the shaders' `MAX_PATCH`).
const MAX_PATCH: u32 = 1 << crate::format::PATCH_LOG2_MAX;

/// Twin of `read_byte` in `shaders/shared/bits.wgsl`: byte `byte_index` of the uploaded
/// stream bytes. Words past the end read as 0.
fn read_byte(input_words: &[u32], byte_index: u32) -> u32 {
    (input_words
        .get((byte_index >> 2) as usize)
        .copied()
        .unwrap_or(0)
        >> ((byte_index & 3) * 8))
        & 0xff
}

/// Twin of `read_bits` in `shaders/shared/bits.wgsl`: `n` (0..=16) bits at bit `p` of the
/// payload starting at byte `base`. Words past the end read as 0.
pub(crate) fn read_bits(input_words: &[u32], base: u32, p: u32, n: u32) -> u32 {
    if n == 0 {
        return 0;
    }
    let word = |i: u32| input_words.get(i as usize).copied().unwrap_or(0);
    let abs_bit = (base & 3) * 8 + p;
    let w = (base >> 2) + (abs_bit >> 5);
    let sh = abs_bit & 31;
    let mut v = word(w) >> sh;
    if sh + n > 32 {
        v |= word(w + 1) << (32 - sh);
    }
    v & ((1 << n) - 1)
}

/// Twin of `find_image_by_workgroup` in `shaders/shared/images.wgsl`: the last image with
/// `wg_base <= wg`.
fn find_image_by_workgroup(images: &[ImageInfo], count: u32, wg: u32) -> usize {
    let (mut lo, mut hi) = (0usize, count as usize);
    while hi - lo > 1 {
        let mid = (lo + hi) / 2;
        if images[mid].wg_base <= wg {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    lo
}

/// Where a twin's decode body puts each decoded sample: the twin of `put_sample` and of the
/// output binding (4) of `shaders/output/*.wgsl`, one implementation per [`OutputLayout`].
pub(crate) trait OutputSink {
    /// The layout's `OUTPUT_PACKED`: the version-1 body hands it whole rows as output words
    /// (`put_word`) instead of samples one by one (`put_sample`).
    const PACKED: bool;
    /// Stores sample `v` of channel `ch` at pixel (`x`, `y`) of image (or band) `img`.
    fn put_sample(&mut self, img: &ImageInfo, ch: u32, y: u32, x: u32, v: u32);
    /// Output word `w` of `img`: `value` is the word when `whole`, else one row's part of
    /// it. Called only when `PACKED`.
    fn put_word(&mut self, img: &ImageInfo, w: u32, value: u32, whole: bool);
    /// The version-2 body's sample (the layout's `row_sample`): as `put_sample`, or held until
    /// the row's `end_row`.
    fn row_sample(&mut self, img: &ImageInfo, ch: u32, y: u32, x: u32, v: u32);
    /// The version-2 body's call after pixel row `y`, columns `x0 .. x0 + pw` of a patch.
    fn end_row(&mut self, img: &ImageInfo, y: u32, x0: u32, pw: u32);
}

/// Twin of `word_shift` in `shaders/shared/images.wgsl`: log2 of the samples per interleaved
/// output word.
fn word_shift(img: &ImageInfo) -> u32 {
    if img.depth == 8 {
        2
    } else {
        1
    }
}

/// Twin of `row_span` in `shaders/shared/images.wgsl`: the interleaved output samples of
/// pixel row `y`, columns `x0 .. x0 + pw`.
fn row_span(img: &ImageInfo, y: u32, x0: u32, pw: u32) -> std::ops::Range<u32> {
    let channels = img.channels.min(4);
    let first = (y * img.width + x0) * channels;
    first..first + pw * channels
}

/// Twin of `word_whole` in `shaders/shared/images.wgsl`.
fn word_whole(w: u32, shift: u32, span: &std::ops::Range<u32>) -> bool {
    w << shift >= span.start && (w + 1) << shift <= span.end
}

/// Twin of `dequantize` in `shaders/shared/images.wgsl`.
fn dequantize(img: &ImageInfo, v: u32) -> u32 {
    if img.max_error == 0 {
        v
    } else {
        crate::quantize::dequantize(v, img.max_error as u16, img.depth as u8)
    }
}

/// Twin of `shaders/output/interleaved.wgsl`: patch rows as whole words of `out_words`
/// (stored, or ORed where a row covers part of a word; HWC from the image's `out_base`; 8-bit
/// samples four to a word, 16-bit samples two to a word, little-endian; the words start
/// zeroed, as the host clears the GPU buffer). Version-1 rows come packed (`put_word`);
/// version-2 samples (`row_sample`) are ORed into `row`, the twin of the workgroup array `out_row`, until
/// `end_row` writes the row out.
pub(crate) struct InterleavedWords<'a> {
    /// Binding 4 (`out_words`).
    pub out_words: &'a mut [u32],
    /// `out_row`: the words of the version-2 row being assembled.
    pub row: [u32; OUT_ROW_WORDS],
}

/// Words of one patch row (the interleaved layout's `OUT_ROW_WORDS`).
pub(crate) const OUT_ROW_WORDS: usize = (MAX_PATCH * 4 / 2 + 1) as usize;

impl<'a> InterleavedWords<'a> {
    /// A sink writing to `out_words`, its row of words cleared.
    pub(crate) fn new(out_words: &'a mut [u32]) -> Self {
        Self {
            out_words,
            row: [0; OUT_ROW_WORDS],
        }
    }
}

impl OutputSink for InterleavedWords<'_> {
    const PACKED: bool = true;

    fn put_word(&mut self, img: &ImageInfo, w: u32, value: u32, whole: bool) {
        let word = &mut self.out_words[(img.out_base + w) as usize];
        if whole {
            *word = value;
        } else {
            *word |= value;
        }
    }

    fn put_sample(&mut self, _: &ImageInfo, _: u32, _: u32, _: u32, _: u32) {
        unreachable!("the version-1 body packs its rows for the interleaved layout")
    }

    fn row_sample(&mut self, img: &ImageInfo, ch: u32, y: u32, x: u32, stored: u32) {
        let v = dequantize(img, stored);
        let shift = word_shift(img);
        let first = row_span(img, y, x & !((1 << img.patch_log2) - 1), 0).start;
        let s = (y * img.width + x) * img.channels + ch;
        let i = s & ((1 << shift) - 1);
        self.row[((s >> shift) - (first >> shift)) as usize] |= v << (img.depth * i);
    }

    fn end_row(&mut self, img: &ImageInfo, y: u32, x0: u32, pw: u32) {
        let shift = word_shift(img);
        let span = row_span(img, y, x0, pw);
        let w0 = span.start >> shift;
        for w in w0..span.end.div_ceil(1 << shift) {
            let value = std::mem::take(&mut self.row[(w - w0) as usize]);
            self.put_word(img, w, value, word_whole(w, shift, &span));
        }
    }
}

/// Twin of `shaders/output/f32_chw.wgsl`: each sample normalised with [`Normalize::apply`]
/// (the shader's f32 operations, in its order) to its planar element
/// `out_base + c * H * W + y * W + x` of `out_values`. Leaves the alignment padding between
/// images alone (the host clears the output buffer).
pub(crate) struct F32Chw<'a> {
    /// Binding 4 (`out_values`).
    pub out_values: &'a mut [f32],
    /// The normalisation the dispatch's [`Params`] carry (`mean`, `std`).
    pub norm: Normalize,
}

impl OutputSink for F32Chw<'_> {
    const PACKED: bool = false;

    fn put_word(&mut self, _: &ImageInfo, _: u32, _: u32, _: bool) {
        unreachable!("the f32 layout takes samples one by one")
    }

    fn row_sample(&mut self, img: &ImageInfo, ch: u32, y: u32, x: u32, v: u32) {
        self.put_sample(img, ch, y, x, v);
    }

    fn end_row(&mut self, _: &ImageInfo, _: u32, _: u32, _: u32) {}

    fn put_sample(&mut self, img: &ImageInfo, ch: u32, y: u32, x: u32, stored: u32) {
        let v = dequantize(img, stored);
        let hw = img.width * img.height;
        self.out_values[(img.out_base + ch * hw + y * img.width + x) as usize] =
            self.norm.apply(v, img.depth as u8, ch as usize);
    }
}

/// The images of workgroups `params.first_workgroup ..` (`params.count` of them), as the
/// entry points find them.
fn workgroups<'a>(
    images: &'a [ImageInfo],
    params: &'a Params,
) -> impl Iterator<Item = (u32, ImageInfo)> + 'a {
    (params.first_workgroup..params.first_workgroup + params.count).map(|wg| {
        (
            wg,
            images[find_image_by_workgroup(images, params.image_count, wg)],
        )
    })
}

/// Twin of `read_bits32` in `shaders/shared/bits.wgsl`: the 32 bits at bit `p` of the
/// payload starting at byte `base`. Words past the end read as 0.
pub(crate) fn read_bits32(input_words: &[u32], base: u32, p: u32) -> u32 {
    let word = |i: u32| input_words.get(i as usize).copied().unwrap_or(0);
    let abs_bit = (base & 3) * 8 + p;
    let w = (base >> 2) + (abs_bit >> 5);
    let sh = abs_bit & 31;
    let mut v = word(w) >> sh;
    if sh != 0 {
        v |= word(w + 1) << (32 - sh);
    }
    v
}

/// The whole GPU pipeline on the CPU, twin by twin: prefix sum, then both decode entry
/// points into a zeroed output binding of `c.out_words` words (so the alignment padding is
/// zero) through `output`'s sink. Returns the chunk's output bytes (images at their
/// `out_base`, as in the GPU buffer) and each image's error flags (indexed by `image_index`
/// minus the chunk's smallest `image_index`).
pub(crate) fn run_chunk(c: &ChunkInputs, output: OutputLayout) -> (Vec<u8>, Vec<u32>) {
    let offsets = prefix_sum(&c.sizes);
    let indices = c.images.iter().map(|i| i.image_index as usize);
    let first = indices.clone().min().unwrap_or(0);
    let mut errors = vec![0u32; indices.max().map_or(0, |i| i + 1)];
    let words = c.out_words as usize;
    fn run<S: OutputSink>(c: &ChunkInputs, offsets: &[u32], out: &mut S, errors: &mut [u32]) {
        let (i, s, im) = (&c.input_words, &c.sizes, &c.images);
        decode_streams(i, s, offsets, im, out, errors, &c.decode_params);
        decode_compact_patches(i, s, offsets, im, out, errors, &c.compact_params);
    }
    let out = match output {
        OutputLayout::Interleaved => {
            let mut out_words = vec![0u32; words];
            let mut sink = InterleavedWords::new(&mut out_words);
            run(c, &offsets, &mut sink, &mut errors);
            bytemuck::cast_slice(&out_words).to_vec()
        }
        OutputLayout::F32Chw(norm) => {
            let mut out_values = vec![0f32; words];
            let mut sink = F32Chw {
                out_values: &mut out_values,
                norm,
            };
            run(c, &offsets, &mut sink, &mut errors);
            bytemuck::cast_slice(&out_values).to_vec()
        }
    };
    (out, errors.split_off(first))
}
