//! CPU twin of the version-1 decode: entry point `main` (`shaders/decode.wgsl`) with the body
//! `decode_streams` of `shaders/shared/decode_streams.wgsl`.

use super::{read_bits, read_byte, workgroups, OutputSink, MAX_PATCH};
use crate::fast::predict::predict_one;
use crate::format::fast::FastPredictor;
use crate::gpu::abi::{flags, streams_per_workgroup, ImageInfo, Params};

/// Twin of the decode shader's entry point `main` (`shaders/decode.wgsl`) with the body
/// `decode_streams` of `shaders/shared/decode_streams.wgsl`: decodes the streams of version-1
/// images in workgroups `params.first_workgroup ..` (`params.count` of them; each takes
/// [`streams_per_workgroup`] streams of one image), every decoded sample going to
/// `output.put_sample` (binding 4, whatever the layout), and ORs flag bits ([`flags`]) into
/// `errors[image_index]` for inconsistent streams. Arguments in binding order.
pub(crate) fn decode_streams<S: OutputSink>(
    input_words: &[u32],
    sizes: &[u32],
    offsets: &[u32],
    images: &[ImageInfo],
    output: &mut S,
    errors: &mut [u32],
    params: &Params,
) {
    let streams = workgroups(images, params).flat_map(|(wg, img)| {
        let per_wg = streams_per_workgroup(img.patch_log2 as u8);
        (0..per_wg)
            .map(move |sub| (img, (wg - img.wg_base) * per_wg + sub))
            .filter(|&(img, local)| local < img.stream_count)
    });
    for (img, local) in streams {
        let g = img.stream_base + local;
        let patch = local / img.channels;
        let ch = local % img.channels;
        let ps = 1u32 << img.patch_log2;
        let x0 = (img.patch_col0 + patch % img.patches_x) * ps;
        let y0 = (img.patch_row0 + patch / img.patches_x) * ps;
        let pw = ps.min(img.width - x0);
        let ph = ps.min(img.height - y0);
        let depth = img.depth;
        let nb = crate::format::fast::nbit_field_bits(depth as u8);
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
        let Some(pred) = FastPredictor::from_id(read_byte(input_words, start) as u8) else {
            errors[slot] |= flags::PREDICTOR;
            continue;
        };
        let prefix = crate::format::fast::STREAM_PREFIX_LEN as u32;
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
                if row > 0 && pred != FastPredictor::None {
                    let up = &rows[1 - cur];
                    let b = up[x as usize];
                    let a = if x > 0 { up[x as usize - 1] } else { b };
                    let c = if x + 1 < pw { up[x as usize + 1] } else { b };
                    p = predict_one(pred, a, b, c);
                }
                let v = (p + base + d) & mask;
                rows[cur][x as usize] = v;
                output.put_sample(&img, ch, y0 + row, x0 + x, v);
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
