//! CPU twin of the version-2 decode: entry point `main_compact` (`shaders/decode.wgsl`) with
//! the body `decode_compact_patch` of `shaders/shared/decode_compact.wgsl` and its `cp_*`
//! helpers.

use super::{read_bits, read_bits32, workgroups, OutputSink, MAX_PATCH};
use crate::format::compact::{self as cf, token_count, unzigzag};
use crate::gpu::abi::{flags, ImageInfo, Params, FAST_BITS};

/// Most channels.
const MAX_CHANNELS: usize = 4;
/// Decode-table entries per channel: one per code length 0 ..= MAX_CODE_LEN (0 unused).
const CODE_SLOTS: usize = cf::MAX_CODE_LEN as usize + 1;
/// Tokens of the largest alphabet (16-bit samples).
const MAX_TOKENS: usize = cf::alphabet_size(16) as usize;
/// Segment-start entries per channel: each segment's start and the end of the last.
const SEGMENT_SLOTS: usize = cf::SEGMENTS_MAX as usize + 1;
/// Entries per channel of the first-level lookup table ([`FAST_BITS`] stream bits).
const FAST_SIZE: usize = 1 << FAST_BITS;

/// What invocation 0 of a `decode_compact` workgroup parses into workgroup memory (the
/// shader's `cp_*` variables).
struct CompactHeader {
    transform: u32,
    /// Predictor per channel.
    predictor: [u32; MAX_CHANNELS],
    /// The token of a one-token code (zero bits long), per channel.
    single: [Option<u32>; MAX_CHANNELS],
    /// Per channel and length: (first code, count, offset into `tokens`).
    codes: [[(u32, u32, u32); CODE_SLOTS]; MAX_CHANNELS],
    /// Per channel: tokens sorted by (length, token).
    tokens: [[u32; MAX_TOKENS]; MAX_CHANNELS],
    /// Per channel: start bit of each segment, then the end of the last.
    segment_start: [[u32; SEGMENT_SLOTS]; MAX_CHANNELS],
    any_left: bool,
    /// Per channel, the first-level lookup table (`cp_fast`, filled by [`cp_fill_fast`]
    /// after the header check): for the next `FAST_BITS` stream bits (as read, LSB first),
    /// the code length (bits 0..4; 0 for a longer code) and the token (bits 4..).
    fast: [[u32; FAST_SIZE]; MAX_CHANNELS],
    /// The palette's entries (`cp_palette_count` of them; empty: no palette).
    palette: Vec<[u32; MAX_CHANNELS]>,
    /// The coded planes: the channels, or 1 (the palette's indices).
    coded: usize,
}

fn is_left_type(predictor: u32) -> bool {
    cf::CompactPredictor::from_id(predictor).is_some_and(|p| p.is_left_type())
}

/// Twin of `cp_take`: reads header bits of the stream of `stream_bits` bits at byte `start`,
/// bits past its end read as 0.
struct HeaderBits<'a> {
    input_words: &'a [u32],
    start: u32,
    stream_bits: u32,
    pos: u32,
}

impl HeaderBits<'_> {
    /// `n` (<= 16) bits at `pos`; advances `pos`.
    fn take(&mut self, n: u32) -> u32 {
        let p = self.pos;
        self.pos = p + n;
        if p >= self.stream_bits {
            return 0;
        }
        let v = read_bits(self.input_words, self.start, p, n);
        if p + n <= self.stream_bits {
            return v;
        }
        v & ((1 << (self.stream_bits - p)) - 1)
    }
}

/// Twin of `cp_parse_header` in `shaders/shared/decode_compact.wgsl`: the header, or the
/// error flags.
fn cp_parse_header(
    input_words: &[u32],
    start: u32,
    size: u32,
    channels: u32,
    depth: u32,
    segs: u32,
) -> Result<CompactHeader, u32> {
    let stream_bits = size * 8;
    let mut r = HeaderBits {
        input_words,
        start,
        stream_bits,
        pos: 0,
    };
    let transform = r.take(cf::TRANSFORM_BITS);
    let subtract_green = cf::Transform::SubtractGreen as u32;
    if transform > cf::Transform::Palette as u32 || (transform == subtract_green && channels < 3) {
        return Err(flags::TRANSFORM);
    }
    let mut palette = Vec::new();
    if transform == cf::Transform::Palette as u32 {
        let count = r.take(cf::PALETTE_COUNT_BITS) + 1;
        for _ in 0..count {
            let mut entry = [0u32; MAX_CHANNELS];
            for e in entry.iter_mut().take(channels as usize) {
                *e = r.take(depth);
            }
            palette.push(entry);
        }
        if r.pos > stream_bits {
            return Err(flags::PALETTE);
        }
    }
    let coded = if palette.is_empty() {
        channels as usize
    } else {
        1
    };
    let mut h = CompactHeader {
        transform,
        predictor: [0; MAX_CHANNELS],
        single: [None; MAX_CHANNELS],
        codes: [[(0, 0, 0); CODE_SLOTS]; MAX_CHANNELS],
        tokens: [[0; MAX_TOKENS]; MAX_CHANNELS],
        segment_start: [[0; SEGMENT_SLOTS]; MAX_CHANNELS],
        any_left: false,
        fast: [[0; FAST_SIZE]; MAX_CHANNELS],
        palette,
        coded,
    };
    let ntok_max = cf::alphabet_size(depth as u8);
    let max_len = cf::MAX_CODE_LEN;
    for c in 0..coded {
        let predictor = r.take(cf::PREDICTOR_BITS);
        if cf::CompactPredictor::from_id(predictor).is_none() {
            return Err(flags::PREDICTOR);
        }
        h.predictor[c] = predictor;
        h.any_left |= is_left_type(predictor);
        let ntok = r.take(cf::TOKEN_COUNT_BITS);
        if ntok == 0 || ntok > ntok_max {
            return Err(flags::CODE);
        }
        let mut lengths = [0u32; MAX_TOKENS];
        let mut count = [0u32; CODE_SLOTS];
        let mut too_long = false;
        let mut previous = 0u32;
        for l in lengths.iter_mut().take(ntok as usize) {
            if r.take(1) == 1 {
                previous = if r.take(1) == 1 {
                    r.take(cf::CODE_LENGTH_BITS)
                } else if r.take(1) == 0 {
                    previous + 1
                } else {
                    previous.wrapping_sub(1) & 0xff
                };
            }
            *l = previous.min(0xff);
            if *l > max_len {
                too_long = true;
            } else {
                count[*l as usize] += 1;
            }
        }
        let used: u32 = count[1..].iter().sum();
        let kraft: u32 = (1..=max_len)
            .map(|l| count[l as usize] << (max_len - l))
            .sum();
        if too_long
            || used == 0
            || (used == 1 && count[1] != 1)
            || (used > 1 && kraft != 1 << max_len)
        {
            return Err(flags::CODE);
        }
        if used == 1 {
            h.single[c] = lengths.iter().rposition(|&l| l != 0).map(|t| t as u32);
        } else {
            let mut next = [0u32; CODE_SLOTS];
            let (mut code, mut offset) = (0u32, 0u32);
            for l in 1..CODE_SLOTS {
                code = (code + if l == 1 { 0 } else { count[l - 1] }) << 1;
                h.codes[c][l] = (code, count[l], offset);
                next[l] = offset;
                offset += count[l];
            }
            for (t, &l) in lengths.iter().enumerate().take(ntok as usize) {
                if l != 0 {
                    h.tokens[c][next[l as usize] as usize] = t as u32;
                    next[l as usize] += 1;
                }
            }
        }
        let width = r.take(cf::SEGMENT_WIDTH_BITS);
        if width > cf::SEGMENT_WIDTH_MAX {
            return Err(flags::SEGMENT_TABLE);
        }
        let base = r.take(cf::SEGMENT_BASE_BITS);
        // Segment lengths for now; turned into start bits below.
        for s in 0..segs as usize {
            h.segment_start[c][s] = base + r.take(width);
        }
        if r.pos > stream_bits {
            return Err(flags::OVERRUN);
        }
    }
    let mut at = r.pos;
    for starts in h.segment_start.iter_mut().take(coded) {
        for s in starts.iter_mut().take(segs as usize) {
            let length = *s;
            *s = at;
            at += length;
        }
        starts[segs as usize] = at;
    }
    if at > stream_bits {
        return Err(flags::OVERRUN);
    }
    if at.div_ceil(8) != size
        || (at & 7 != 0 && read_bits(input_words, start, at, 8 - (at & 7)) != 0)
    {
        return Err(flags::TRAILING);
    }
    Ok(h)
}

/// Twin of `cp_fast_entry`: the lookup-table entry of channel `c` for the next `FAST_BITS`
/// stream bits `j`, by the canonical compares for lengths 1 ..= `FAST_BITS`.
fn cp_fast_entry(h: &CompactHeader, c: usize, j: u32) -> u32 {
    let bits = j.reverse_bits() >> (32 - FAST_BITS);
    for l in 1..=FAST_BITS {
        let (first, count, offset) = h.codes[c][l as usize];
        let index = (bits >> (FAST_BITS - l)).wrapping_sub(first);
        if index < count {
            return l | h.tokens[c][(offset + index) as usize] << 4;
        }
    }
    0
}

/// Twin of `cp_fill_fast` (all invocations' entries): the lookup tables of the channels with
/// a multi-token code.
fn cp_fill_fast(h: &mut CompactHeader, channels: usize) {
    for c in 0..channels {
        if h.single[c].is_none() {
            for j in 0..FAST_SIZE as u32 {
                h.fast[c][j as usize] = cp_fast_entry(h, c, j);
            }
        }
    }
}

/// Twin of `cp_run_first`.
fn cp_run_first(singles: u32) -> u32 {
    singles + cf::PAIR_TOKENS
}

/// Twin of `cp_read_symbol`: (token, bits of code and raw bits, zigzag value of a single).
fn cp_read_symbol(
    input_words: &[u32],
    h: &CompactHeader,
    start: u32,
    p: u32,
    c: usize,
    singles: u32,
) -> (u32, u32, u32) {
    let window = read_bits32(input_words, start, p);
    let max_len = cf::MAX_CODE_LEN;
    let (mut token, mut len) = (h.single[c].unwrap_or(0), 0);
    if h.single[c].is_none() {
        // A code of at most FAST_BITS bits from the lookup table.
        let fast = h.fast[c][(window & (FAST_SIZE as u32 - 1)) as usize];
        (token, len) = (fast >> 4, fast & 0xf);
        if len == 0 {
            let bits = window.reverse_bits() >> (32 - max_len);
            for l in FAST_BITS + 1..=max_len {
                let (first, count, offset) = h.codes[c][l as usize];
                let index = (bits >> (max_len - l)).wrapping_sub(first);
                if index < count {
                    token = h.tokens[c][(offset + index) as usize];
                    len = l;
                    break;
                }
            }
        }
    }
    let run_first = cp_run_first(singles);
    if token >= run_first {
        // A run of 2^j + j raw bits positions; j = 0: the end of the row (value 0).
        let j = token - run_first;
        if j == 0 {
            return (token, len, 0);
        }
        return (
            token,
            len + j,
            (1 << j) + ((window >> len) & ((1 << j) - 1)),
        );
    }
    if token >= singles {
        return (token, len, 0);
    }
    let (base, nraw) = cf::token_base(token);
    let raw = (window >> len) & ((1 << nraw) - 1);
    (token, len + nraw, base + raw)
}

/// Twin of `cp_decode_row`: one row of channel `c`'s segment from `*pos` (advanced) to `end`
/// into `residuals` (16-bit values at `c * SEGMENT_ROW_SAMPLES_MAX + slot_base + x`). Returns
/// the error flags.
#[allow(clippy::too_many_arguments)]
fn cp_decode_row(
    input_words: &[u32],
    h: &CompactHeader,
    start: u32,
    pos: &mut u32,
    end: u32,
    c: usize,
    slot_base: u32,
    pw: u32,
    singles: u32,
    residuals: &mut [u32],
) -> u32 {
    let row0 = (c as u32 * cf::SEGMENT_ROW_SAMPLES_MAX + slot_base) as usize;
    let positions = pw.div_ceil(2);
    let run_first = cp_run_first(singles);
    let mut p = *pos;
    let mut flags = 0;
    let mut i = 0;
    while i < positions {
        let one_sample = 2 * i + 1 == pw;
        let (token, bits, value) = cp_read_symbol(input_words, h, start, p, c, singles);
        p += bits;
        if p > end {
            flags = flags::SEGMENT;
            break;
        }
        if token >= run_first {
            let n = if value == 0 { positions - i } else { value };
            if n > positions - i {
                flags = flags::SYMBOL;
                break;
            }
            let at = row0 + 2 * i as usize;
            residuals[at..at + 2 * n as usize].fill(0);
            i += n;
            continue;
        }
        let (z0, z1) = if token >= singles {
            if one_sample {
                flags = flags::SYMBOL;
                break;
            }
            let q = token - singles;
            (q / cf::PAIR_LIMIT, q % cf::PAIR_LIMIT)
        } else if !one_sample {
            let (token1, bits1, value1) = cp_read_symbol(input_words, h, start, p, c, singles);
            p += bits1;
            if p > end {
                flags = flags::SEGMENT;
                break;
            }
            if token1 >= singles {
                flags = flags::SYMBOL;
                break;
            }
            (value, value1)
        } else {
            (value, 0)
        };
        residuals[row0 + 2 * i as usize] = unzigzag(z0) & 0xffff;
        residuals[row0 + 2 * i as usize + 1] = unzigzag(z1) & 0xffff;
        i += 1;
    }
    *pos = p;
    flags
}

/// Twin of `cp_from_above`.
fn cp_from_above(predictor: u32, up: &[u32], x: usize, pw: usize) -> u32 {
    let b = up[x];
    let a = up[x.max(1) - 1];
    match cf::CompactPredictor::from_id(predictor) {
        Some(cf::CompactPredictor::Up) => b,
        Some(cf::CompactPredictor::Gradient) if x > 0 => b.wrapping_sub(a),
        Some(cf::CompactPredictor::HalfGradient) if x > 0 => ((b as i32 - a as i32) >> 1) as u32,
        Some(cf::CompactPredictor::Left) if x > 0 => 0,
        Some(
            cf::CompactPredictor::Gradient
            | cf::CompactPredictor::HalfGradient
            | cf::CompactPredictor::Left,
        ) => b,
        Some(cf::CompactPredictor::UpMean) => (a + up[(x + 1).min(pw - 1)]) >> 1,
        _ => 0,
    }
}

/// Twin of the decode shader's entry point `main_compact` (`shaders/decode.wgsl`) with the
/// body `decode_compact_patch` of `shaders/shared/decode_compact.wgsl`: the patches of
/// version-2 images, over the dispatch's workgroups (one per patch), one after another: the
/// header check of invocation 0, then per phase the segment rows of every (channel, segment)
/// and the phase's rows in order (the shader's workgroup prefix sum done as a running sum:
/// the same u32 sums). Every decoded sample goes to `output.row_sample`, and each row's end to `output.end_row`. Arguments in binding
/// order.
pub(crate) fn decode_compact_patches<S: OutputSink>(
    input_words: &[u32],
    sizes: &[u32],
    offsets: &[u32],
    images: &[ImageInfo],
    output: &mut S,
    errors: &mut [u32],
    params: &Params,
) {
    let mut residuals = vec![0u32; MAX_CHANNELS * cf::SEGMENT_ROW_SAMPLES_MAX as usize];
    for (wg, img) in workgroups(images, params) {
        let ps = 1u32 << img.patch_log2;
        let patch = wg - img.wg_base;
        let g = (img.stream_base + patch) as usize;
        let x0 = (img.patch_col0 + patch % img.patches_x) * ps;
        let y0 = (img.patch_row0 + patch / img.patches_x) * ps;
        let pw = ps.min(img.width - x0);
        let ph = ps.min(img.height - y0);
        let segs = cf::segments(ps, ph).max(1);
        let channels = img.channels.min(MAX_CHANNELS as u32) as usize;
        let slot = img.image_index as usize;
        let (start, size) = (offsets[g], sizes[g]);
        if patch >= img.stream_count
            || ps > MAX_PATCH
            || size == 0
            || start >= params.input_bytes
            || size > params.input_bytes - start
        {
            errors[slot] |= flags::RANGE;
            continue;
        }
        let mut h =
            match cp_parse_header(input_words, start, size, channels as u32, img.depth, segs) {
                Ok(h) => h,
                Err(f) => {
                    errors[slot] |= f;
                    continue;
                }
            };
        let coded = h.coded;
        cp_fill_fast(&mut h, coded);
        let singles = token_count(img.depth as u8);
        let mask = (1u32 << img.depth) - 1;
        let mut previous = [[0u32; MAX_PATCH as usize]; MAX_CHANNELS];
        let mut pos = [[0u32; cf::SEGMENTS_MAX as usize]; MAX_CHANNELS];
        let mut decoding = [[true; cf::SEGMENTS_MAX as usize]; MAX_CHANNELS];
        for (p, starts) in pos.iter_mut().zip(&h.segment_start) {
            p.copy_from_slice(&starts[..cf::SEGMENTS_MAX as usize]);
        }
        let (pw_, stride) = (pw as usize, cf::SEGMENT_ROW_SAMPLES_MAX as usize);
        for k in 0..ph.div_ceil(segs) {
            for c in 0..coded {
                for s in 0..segs as usize {
                    if decoding[c][s] && k * segs + (s as u32) < ph {
                        let f = cp_decode_row(
                            input_words,
                            &h,
                            start,
                            &mut pos[c][s],
                            h.segment_start[c][s + 1],
                            c,
                            s as u32 * ps,
                            pw,
                            singles,
                            &mut residuals,
                        );
                        if f != 0 {
                            decoding[c][s] = false;
                            errors[slot] |= f;
                        }
                    }
                }
            }
            for s in 0..segs {
                let y = k * segs + s;
                if y >= ph {
                    break;
                }
                let mut row = [[0u32; MAX_PATCH as usize]; MAX_CHANNELS];
                for c in 0..coded {
                    let res = &residuals[c * stride + (s * ps) as usize..][..pw_];
                    let mut acc = 0u32;
                    for x in 0..pw_ {
                        let t = res[x].wrapping_add(cp_from_above(
                            h.predictor[c],
                            &previous[c],
                            x,
                            pw_,
                        ));
                        acc = acc.wrapping_add(t);
                        row[c][x] = if is_left_type(h.predictor[c]) { acc } else { t } & mask;
                    }
                }
                previous = row;
                for x in 0..pw_ {
                    let mut out = row.map(|r| r[x]);
                    if h.transform == cf::Transform::SubtractGreen as u32 {
                        out[0] = (out[0] + out[1]) & mask;
                        out[2] = (out[2] + out[1]) & mask;
                    }
                    if !h.palette.is_empty() {
                        // The entry, or entry 0 past the palette (the patch is flagged).
                        let index = out[0] as usize;
                        if index >= h.palette.len() {
                            errors[slot] |= flags::PALETTE;
                        }
                        out = h.palette[if index < h.palette.len() { index } else { 0 }];
                    }
                    for (c, &v) in out.iter().enumerate().take(channels) {
                        output.row_sample(&img, c as u32, y0 + y, x0 + x as u32, v);
                    }
                }
                output.end_row(&img, y0 + y, x0, pw);
            }
        }
        for c in 0..coded {
            for s in 0..segs as usize {
                if decoding[c][s] && pos[c][s] != h.segment_start[c][s + 1] {
                    errors[slot] |= flags::SEGMENT;
                }
            }
        }
    }
}
