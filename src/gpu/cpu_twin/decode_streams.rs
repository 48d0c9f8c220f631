//! CPU twin of the version-1 decode: entry point `main` (`shaders/decode.wgsl`) with the body
//! `decode_streams` of `shaders/shared/decode_streams.wgsl`.

use super::{
    dequantize, read_bits, read_byte, row_span, word_shift, word_whole, workgroups, OutputSink,
    MAX_PATCH,
};
use crate::fast::predict::predict_one;
use crate::format::fast::FastPredictor;
use crate::gpu::abi::{flags, patches_per_workgroup, ImageInfo, Params};

/// Channels of a patch, at most (the shaders' `MAX_CHANNELS`).
const MAX_CHANNELS: usize = 4;

/// One channel's stream of a patch, as the shader keeps it in its per-channel registers.
#[derive(Clone, Copy)]
struct Stream {
    predictor: FastPredictor,
    bits_base: u32,
    total_bits: u32,
    pos: u32,
}

/// Twin of the decode shader's entry point `main` (`shaders/decode.wgsl`) with the body
/// `decode_streams` of `shaders/shared/decode_streams.wgsl`: decodes the patches of version-1
/// images in workgroups `params.first_workgroup ..` (`params.count` of them; each takes
/// [`patches_per_workgroup`] patches of one image, every channel of each), row by row with
/// every channel's row decoded in turn. A sink that packs (`S::PACKED`) gets each finished
/// row as output words ([`pack_row`]); the others get each sample from `put_sample`. ORs flag
/// bits ([`flags`]) into `errors[image_index]` for inconsistent streams. Arguments in
/// binding order.
pub(crate) fn decode_streams<S: OutputSink>(
    input_words: &[u32],
    sizes: &[u32],
    offsets: &[u32],
    images: &[ImageInfo],
    output: &mut S,
    errors: &mut [u32],
    params: &Params,
) {
    let patches = workgroups(images, params).flat_map(|(wg, img)| {
        let per_wg = patches_per_workgroup(img.patch_log2 as u8);
        let count = img.stream_count / img.channels.clamp(1, MAX_CHANNELS as u32);
        (0..per_wg)
            .map(move |sub| (img, (wg - img.wg_base) * per_wg + sub))
            .filter(move |&(_, patch)| patch < count)
    });
    for (img, patch) in patches {
        let channels = img.channels.min(MAX_CHANNELS as u32);
        let ps = 1u32 << img.patch_log2;
        let x0 = (img.patch_col0 + patch % img.patches_x) * ps;
        let y0 = (img.patch_row0 + patch / img.patches_x) * ps;
        let pw = ps.min(img.width - x0);
        let ph = ps.min(img.height - y0);
        let depth = img.depth;
        let nb = crate::format::fast::nbit_field_bits(depth as u8);
        let mask = (1u32 << depth) - 1;
        let slot = img.image_index as usize;
        let prefix = crate::format::fast::STREAM_PREFIX_LEN as u32;
        let mut streams: [Option<Stream>; MAX_CHANNELS] = [None; MAX_CHANNELS];
        for (c, stream) in streams.iter_mut().enumerate().take(channels as usize) {
            let g = (img.stream_base + patch * channels + c as u32) as usize;
            let (start, size) = (offsets[g], sizes[g]);
            if size == 0
                || start >= params.input_bytes
                || size > params.input_bytes - start
                || pw > MAX_PATCH
            {
                errors[slot] |= flags::RANGE;
                continue;
            }
            let Some(predictor) = FastPredictor::from_id(read_byte(input_words, start) as u8)
            else {
                errors[slot] |= flags::PREDICTOR;
                continue;
            };
            *stream = Some(Stream {
                predictor,
                bits_base: start + prefix,
                total_bits: (size - prefix) * 8,
                pos: 0,
            });
        }
        // rows[r % 2][c][x], as the shader's workgroup array.
        let mut rows = [[[0u32; MAX_PATCH as usize]; MAX_CHANNELS]; 2];
        for row in 0..ph {
            let cur = (row & 1) as usize;
            for (c, slot_stream) in streams.iter_mut().enumerate() {
                let Some(s) = slot_stream else { continue };
                let fail = |errors: &mut [u32], f: u32| errors[slot] |= f;
                if s.pos + nb + depth > s.total_bits {
                    fail(errors, flags::OVERRUN);
                    *slot_stream = None;
                    continue;
                }
                let nbit = read_bits(input_words, s.bits_base, s.pos, nb);
                if nbit > depth {
                    fail(errors, flags::BIT_WIDTH);
                    *slot_stream = None;
                    continue;
                }
                let base = read_bits(input_words, s.bits_base, s.pos + nb, depth);
                if s.pos + nb + depth + pw * nbit > s.total_bits {
                    fail(errors, flags::OVERRUN);
                    *slot_stream = None;
                    continue;
                }
                let dpos = s.pos + nb + depth;
                for x in 0..pw {
                    let d = read_bits(input_words, s.bits_base, dpos + x * nbit, nbit);
                    let mut p = 0;
                    if row > 0 && s.predictor != FastPredictor::None {
                        let up = &rows[1 - cur][c];
                        let b = up[x as usize];
                        let a = if x > 0 { up[x as usize - 1] } else { b };
                        let cc = if x + 1 < pw { up[x as usize + 1] } else { b };
                        p = predict_one(s.predictor, a, b, cc);
                    }
                    let v = (p + base + d) & mask;
                    rows[cur][c][x as usize] = v;
                    if !S::PACKED {
                        output.put_sample(&img, c as u32, y0 + row, x0 + x, v);
                    }
                }
                s.pos = dpos + pw * nbit;
            }
            if S::PACKED {
                pack_row(&img, y0 + row, x0, pw, &rows[cur], output);
            }
        }
        for s in streams.iter().flatten() {
            let mut bad = s.pos.div_ceil(8) != s.total_bits / 8;
            if !bad && s.pos & 7 != 0 {
                bad = read_bits(input_words, s.bits_base, s.pos, 8 - (s.pos & 7)) != 0;
            }
            if bad {
                errors[slot] |= flags::TRAILING;
            }
        }
    }
}

/// Twin of `pack_row` in `shaders/shared/decode_streams.wgsl`: pixel row `y`, columns
/// `x0 .. x0 + pw` of `img`, every channel from `rows[c][x - x0]`, to the interleaved output
/// words it covers (`whole` where it covers all of a word).
fn pack_row<S: OutputSink>(
    img: &ImageInfo,
    y: u32,
    x0: u32,
    pw: u32,
    rows: &[[u32; MAX_PATCH as usize]; MAX_CHANNELS],
    output: &mut S,
) {
    let shift = word_shift(img);
    let channels = img.channels.min(MAX_CHANNELS as u32);
    let span = row_span(img, y, x0, pw);
    for w in span.start >> shift..span.end.div_ceil(1 << shift) {
        let mut value = 0u32;
        for i in 0..1 << shift {
            let s = (w << shift) + i;
            if span.contains(&s) {
                let k = s - span.start;
                let v = dequantize(img, rows[(k % channels) as usize][(k / channels) as usize]);
                value |= v << (img.depth * i);
            }
        }
        output.put_word(img, w, value, word_whole(w, shift, &span));
    }
}
