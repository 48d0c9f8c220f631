//! CPU twins of the WGSL kernels: the same names, the same bindings in the same order, the
//! same arithmetic, one invocation after another. The tests run a twin and its shader on the
//! same inputs and compare; the twins also document what each kernel computes.

use super::{flags, ImageInfo, Params};
use crate::predict::predict_one;
use crate::Predictor;

/// Twin of `prefix_sum.wgsl` (`scan_blocks` + `add_sums` over all levels): the exclusive
/// prefix sum of `sizes`, wrapping on overflow like u32 arithmetic in WGSL.
pub fn prefix_sum(sizes: &[u32]) -> Vec<u32> {
    let mut acc = 0u32;
    sizes
        .iter()
        .map(|&s| {
            let o = acc;
            acc = acc.wrapping_add(s);
            o
        })
        .collect()
}

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
pub fn read_bits(input_words: &[u32], base: u32, p: u32, n: u32) -> u32 {
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

/// Twin of `decode.wgsl`: decodes the streams of workgroups `0..params.count` (each takes
/// [`super::streams_per_workgroup`] streams of one image), ORing each sample into its
/// interleaved output word of `out_words` (HWC from each image's `out_base`; 8-bit samples
/// four to a word, 16-bit samples two to a word, little-endian; the words start zeroed, as
/// the host clears the GPU buffer), and ORs flag bits ([`flags`]) into `errors[image_index]`
/// for inconsistent streams.
pub fn decode(
    input_words: &[u32],
    sizes: &[u32],
    offsets: &[u32],
    images: &[ImageInfo],
    out_words: &mut [u32],
    errors: &mut [u32],
    params: &Params,
) {
    decode_streams(
        input_words,
        sizes,
        offsets,
        images,
        errors,
        params,
        |img, ch, y, x, v| {
            let s = (y * img.width + x) * img.channels + ch;
            if img.depth == 8 {
                out_words[(img.out_base + s / 4) as usize] |= v << (8 * (s % 4));
            } else {
                out_words[(img.out_base + s / 2) as usize] |= v << (16 * (s % 2));
            }
        },
    );
}

/// Twin of `decode_f32_chw.wgsl`: the same decode as [`decode`], each sample written as
/// `(x / max - mean[c]) / std[c]` (the shader's f32 operations, in its order) to its planar
/// element `out_base + c * H * W + y * W + x` of `out_values`. Leaves the alignment padding
/// between images alone (the host clears the output buffer).
pub fn decode_f32_chw(
    input_words: &[u32],
    sizes: &[u32],
    offsets: &[u32],
    images: &[ImageInfo],
    out_values: &mut [f32],
    errors: &mut [u32],
    params: &Params,
) {
    decode_streams(
        input_words,
        sizes,
        offsets,
        images,
        errors,
        params,
        |img, ch, y, x, v| {
            let hw = img.width * img.height;
            let max_value = ((1u32 << img.depth) - 1) as f32;
            out_values[(img.out_base + ch * hw + y * img.width + x) as usize] =
                (v as f32 / max_value - params.mean[ch as usize]) / params.std[ch as usize];
        },
    );
}

/// Twin of `decode_streams` in `shaders/shared/decode_streams.wgsl`, the decode body both
/// decode stages share: every decoded sample goes to `put_sample(image, channel, y, x,
/// value)`.
fn decode_streams(
    input_words: &[u32],
    sizes: &[u32],
    offsets: &[u32],
    images: &[ImageInfo],
    errors: &mut [u32],
    params: &Params,
    mut put_sample: impl FnMut(&ImageInfo, u32, u32, u32, u32),
) {
    const MAX_PATCH: u32 = 1 << crate::format::PATCH_LOG2_MAX;
    let streams = (0..params.count).flat_map(|wg| {
        let img = images[find_image_by_workgroup(images, params.image_count, wg)];
        let per_wg = super::streams_per_workgroup(img.patch_log2 as u8);
        (0..per_wg)
            .map(move |sub| (img, (wg - img.wg_base) * per_wg + sub))
            .filter(|&(img, local)| local < img.stream_count)
    });
    for (img, local) in streams {
        let g = img.stream_base + local;
        let patch = local / img.channels;
        let ch = local % img.channels;
        let ps = 1u32 << img.patch_log2;
        let x0 = (patch % img.patches_x) * ps;
        let y0 = (patch / img.patches_x) * ps;
        let pw = ps.min(img.width - x0);
        let ph = ps.min(img.height - y0);
        let depth = img.depth;
        let nb = crate::format::nbit_field_bits(depth as u8);
        let mask = (1u32 << depth) - 1;
        let start = offsets[g as usize];
        let size = sizes[g as usize];
        let slot = img.image_index as usize;
        if size == 0
            || start >= params.input_bytes
            || size > params.input_bytes - start
            || pw > MAX_PATCH
        {
            errors[slot] |= flags::RANGE;
            continue;
        }
        let Some(pred) = Predictor::from_id(read_byte(input_words, start) as u8) else {
            errors[slot] |= flags::PREDICTOR;
            continue;
        };
        let prefix = crate::format::STREAM_PREFIX_LEN as u32;
        let bits_base = start + prefix;
        let total_bits = (size - prefix) * 8;
        let mut pos = 0u32;
        let mut rows = [[0u32; MAX_PATCH as usize]; 2];
        let mut failed = false;
        for row in 0..ph {
            if pos + nb + depth > total_bits {
                errors[slot] |= flags::OVERRUN;
                failed = true;
                break;
            }
            let nbit = read_bits(input_words, bits_base, pos, nb);
            if nbit > depth {
                errors[slot] |= flags::BIT_WIDTH;
                failed = true;
                break;
            }
            let base = read_bits(input_words, bits_base, pos + nb, depth);
            if pos + nb + depth + pw * nbit > total_bits {
                errors[slot] |= flags::OVERRUN;
                failed = true;
                break;
            }
            let dpos = pos + nb + depth;
            let cur = (row & 1) as usize;
            for x in 0..pw {
                let d = read_bits(input_words, bits_base, dpos + x * nbit, nbit);
                let mut p = 0;
                if row > 0 && pred != Predictor::None {
                    let up = &rows[1 - cur];
                    let b = up[x as usize];
                    let a = if x > 0 { up[x as usize - 1] } else { b };
                    let c = if x + 1 < pw { up[x as usize + 1] } else { b };
                    p = predict_one(pred, a, b, c);
                }
                let v = (p + base + d) & mask;
                rows[cur][x as usize] = v;
                put_sample(&img, ch, y0 + row, x0 + x, v);
            }
            pos = dpos + pw * nbit;
        }
        if failed {
            continue;
        }
        let mut bad = pos.div_ceil(8) != size - prefix;
        if !bad && pos & 7 != 0 {
            bad = read_bits(input_words, bits_base, pos, 8 - (pos & 7)) != 0;
        }
        if bad {
            errors[slot] |= flags::TRAILING;
        }
    }
}

/// The whole GPU pipeline on the CPU, twin by twin: prefix sum, then the decode (interleaved
/// output) or the f32 decode (planar f32 output), into a zeroed output binding of
/// `c.out_words` words (so the alignment padding is zero). Returns the
/// chunk's output bytes (images at their `out_base`, as in the GPU buffer) and each image's
/// error flags (indexed by `image_index - images[0].image_index`).
pub fn run_chunk(c: &super::ChunkInputs, output: super::OutputFormat) -> (Vec<u8>, Vec<u32>) {
    let offsets = prefix_sum(&c.sizes);
    let first = c.images.first().map_or(0, |i| i.image_index);
    let mut errors = vec![0u32; (first as usize) + c.images.len()];
    let words = c.out_words as usize;
    let out = match output {
        super::OutputFormat::Interleaved => {
            let mut out_words = vec![0u32; words];
            decode(
                &c.input_words,
                &c.sizes,
                &offsets,
                &c.images,
                &mut out_words,
                &mut errors,
                &c.decode_params,
            );
            bytemuck::cast_slice(&out_words).to_vec()
        }
        super::OutputFormat::F32Chw(_) => {
            let mut out_values = vec![0f32; words];
            decode_f32_chw(
                &c.input_words,
                &c.sizes,
                &offsets,
                &c.images,
                &mut out_values,
                &mut errors,
                &c.decode_params,
            );
            bytemuck::cast_slice(&out_values).to_vec()
        }
    };
    (out, errors.split_off(first as usize))
}
