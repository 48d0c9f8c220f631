//! Compact-profile encoder. Per patch, [`analyse_patch`] chooses the colour transform (or
//! palette) and each channel's predictor by estimated coded size and collects the symbols;
//! [`choose_codes`] then gives each channel of a run of patches its Huffman code, and
//! [`write_patch`] writes the channel headers and segments (see [`crate::format::compact`]).
//! [`encode_patches`] runs the three over the image.

use super::huffman::{self, coded_bits, for_each_length_field, MAX_TOKENS};
use super::palette::PaletteBuilder;
use super::predict::prediction_from_above;
use super::shared_codes::choose_codes;
use super::{CompactOptions, RUN_MIN_GAIN};
use crate::codec::bits::BitWriter;
use crate::codec::planes::extract_plane;
use crate::codec::simd::{avx2_dispatch, Avx2};
use crate::format::compact::{
    alphabet_size, pair_token, run_token, run_token_first, segments, token_base, token_count,
    token_of, zigzag, CompactPredictor, Transform, PAIR_LIMIT, PAIR_TOKENS, PALETTE_COUNT_BITS,
    PREDICTOR_BITS, RUN_MAX, SEGMENTS_MAX, SEGMENT_BASE_BITS, SEGMENT_WIDTH_BITS, TOKEN_COUNT_BITS,
    TRANSFORM_BITS,
};
use crate::format::Header;
use crate::raw::{RawImage, Samples};
use rayon::prelude::*;
use std::ops::Range;

/// Per-thread buffers for one patch.
pub(crate) struct PatchScratch {
    /// Channel planes, `pw * ph` each, as stored (not transformed).
    planes: Vec<Vec<u16>>,
    /// `R - G` and `B - G` planes.
    minus_green: [Vec<u16>; 2],
    /// The palette's index plane, `pw * ph`.
    index: Vec<u16>,
    /// The patch's palette, when it has one.
    palette: PaletteBuilder,
}

/// `choice`'s name of the palette's index plane.
const PLANE_INDEX: usize = usize::MAX;

impl PatchScratch {
    pub(crate) fn new(header: &Header) -> Self {
        let n = (header.patch_size() * header.patch_size()) as usize;
        PatchScratch {
            planes: vec![vec![0; n]; header.channels() as usize],
            minus_green: [vec![0; n], vec![0; n]],
            index: vec![0; n],
            palette: PaletteBuilder::new(),
        }
    }
}

/// The zigzagged residuals of the rows of `plane` (`pw` wide) under `predictor`, passed to
/// `sink` row by row: every row, or with `step` 2 every other one (odd rows; row 0 for a
/// one-row plane). Row 0 uses 0 as the sample above.
#[inline(always)]
fn for_each_row(
    plane: &[u16],
    pw: usize,
    depth: u32,
    predictor: CompactPredictor,
    step: usize,
    mut sink: impl FnMut(&[u32]),
) {
    let mask = (1u32 << depth) - 1;
    let zero_row = [0u16; 128];
    let mut z = [0u32; 128];
    let mut g = [0u16; 128];
    let rows = plane.len() / pw;
    let first = if step > 1 && rows > 1 { 1 } else { 0 };
    for (y, row) in plane.chunks_exact(pw).enumerate().skip(first).step_by(step) {
        let up = if y == 0 {
            &zero_row[..pw]
        } else {
            &plane[(y - 1) * pw..y * pw]
        };
        prediction_from_above(predictor, up, &mut g);
        if predictor.is_left_type() {
            let mut left = 0u32;
            for ((o, &t), &g) in z.iter_mut().zip(row).zip(&g) {
                let e = (t as u32).wrapping_sub(left).wrapping_sub(g as u32) & mask;
                *o = zigzag(e, depth);
                left = t as u32;
            }
        } else {
            for ((o, &t), &g) in z.iter_mut().zip(row).zip(&g) {
                *o = zigzag((t as u32).wrapping_sub(g as u32) & mask, depth);
            }
        }
        sink(&z[..pw]);
    }
}

/// The symbols of one row of zigzag values, `(token, raw bit count, raw bits)` in order:
/// with `runs`, the end-of-row token where only zero positions are left and a run token
/// for two or more zero positions; with `pairs`, a pair token where both values of a
/// position are below [`PAIR_LIMIT`]; otherwise (and for every other position) single
/// tokens. Pair and run tokens are the encoder's choice per channel: they pay off in smooth
/// and flat areas and cost a little in textured ones.
#[inline(always)]
fn row_symbols(z: &[u32], depth: u8, coding: Coding, mut sink: impl FnMut(u32, u32, u32)) {
    if coding == Coding::Runs {
        let positions = z.len().div_ceil(2);
        let zero = |p: usize| z[2 * p..(2 * p + 2).min(z.len())].iter().all(|&v| v == 0);
        let mut p = 0;
        while p < positions {
            let mut n = 0;
            while p + n < positions && zero(p + n) {
                n += 1;
            }
            if n > 0 && p + n == positions {
                sink(run_token_first(depth), 0, 0);
                return;
            }
            // Zero positions not reaching the row's end: as runs of at most RUN_MAX; a lone
            // one (or a remainder of one) as a position of its own below.
            while n >= 2 {
                let k = n.min(RUN_MAX as usize);
                let (t, nraw, raw) = run_token(depth, k as u32);
                sink(t, nraw, raw);
                p += k;
                n -= k;
            }
            if p < positions {
                position_symbols(&z[2 * p..(2 * p + 2).min(z.len())], depth, true, &mut sink);
                p += 1;
            }
        }
        return;
    }
    for pos in z.chunks(2) {
        position_symbols(pos, depth, coding == Coding::Pairs, &mut sink);
    }
}

/// The symbols of one position (two samples, one at the end of an odd row).
#[inline(always)]
fn position_symbols(pos: &[u32], depth: u8, pairs: bool, sink: &mut impl FnMut(u32, u32, u32)) {
    if let [a, b] = *pos {
        if pairs && a < PAIR_LIMIT && b < PAIR_LIMIT {
            sink(pair_token(depth, a, b), 0, 0);
            return;
        }
    }
    for &v in pos {
        let (t, nraw, raw) = token_of(v);
        sink(t, nraw, raw);
    }
}

/// Which tokens a channel's rows use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Coding {
    /// Single tokens only.
    Singles,
    /// Single and pair tokens.
    Pairs,
    /// Single, pair and run tokens.
    Runs,
}

/// How one channel of a patch is coded.
#[derive(Debug, Clone, Copy)]
struct ChannelChoice {
    predictor: CompactPredictor,
    coding: Coding,
    /// Estimated bits.
    bits: f64,
}

/// A plane's symbols under one predictor, without run tokens: the exact histograms with
/// single tokens and with pair tokens, and the raw bits (the same for both).
struct Histograms {
    singles: [u32; MAX_TOKENS],
    with_pairs: [u32; MAX_TOKENS],
    raw_bits: u64,
}

/// Estimated bits to code `plane` with `predictor` with single tokens and with pair tokens
/// (the order-0 entropy of its tokens plus their raw bits plus the code table), how many
/// zero positions it has, and the histograms. Ranks choices; the real code is a few %
/// larger.
#[inline(always)]
fn estimate_bits(
    plane: &[u16],
    pw: usize,
    depth: u8,
    predictor: CompactPredictor,
) -> ([f64; 2], u32, Histograms) {
    // Four interleaved histograms: runs of one token (e.g. zeros) would otherwise make each
    // increment wait for the previous one's store.
    let mut split = [[0u32; MAX_TOKENS]; 4];
    let mut pairs = [0u32; PAIR_TOKENS as usize];
    for_each_row(plane, pw, depth as u32, predictor, 1, |z| {
        for quad in z.chunks(4) {
            for (h, &v) in split.iter_mut().zip(quad) {
                h[token_fast(v, depth) as usize] += 1;
            }
        }
        for pos in z.chunks_exact(2) {
            if (pos[0] | pos[1]) < PAIR_LIMIT {
                pairs[(pos[0] * PAIR_LIMIT + pos[1]) as usize] += 1;
            }
        }
    });
    let mut singles = [0u32; MAX_TOKENS];
    for h in &split {
        for (s, &n) in singles.iter_mut().zip(h) {
            *s += n;
        }
    }
    let raw_bits: u64 = singles
        .iter()
        .enumerate()
        .take(token_count(depth) as usize)
        .map(|(t, &n)| n as u64 * token_base(t as u32).1 as u64)
        .sum();
    // With pair tokens: the same singles minus the ones the pairs replace, plus the pairs.
    let mut with_pairs = singles;
    let first_pair = token_count(depth) as usize;
    for (p, &n) in pairs.iter().enumerate() {
        with_pairs[p / PAIR_LIMIT as usize] -= n;
        with_pairs[p % PAIR_LIMIT as usize] -= n;
        with_pairs[first_pair + p] = n;
    }
    // Raw bits are the same either way: pairs only replace tokens that have none.
    (
        [
            entropy_bits(&singles) + raw_bits as f64,
            entropy_bits(&with_pairs) + raw_bits as f64,
        ],
        pairs[0],
        Histograms {
            singles,
            with_pairs,
            raw_bits,
        },
    )
}

/// The exact symbol histogram of `plane` coded with `predictor` and `coding`, and its raw
/// bits: a pass over the symbols the encoder would write.
#[inline(always)]
fn symbol_histogram(
    plane: &[u16],
    pw: usize,
    depth: u8,
    predictor: CompactPredictor,
    coding: Coding,
) -> ([u32; MAX_TOKENS], u64) {
    let mut hist = [0u32; MAX_TOKENS];
    let mut raw_bits = 0u64;
    for_each_row(plane, pw, depth as u32, predictor, 1, |z| {
        row_symbols(z, depth, coding, |t, nraw, _| {
            hist[t as usize] += 1;
            raw_bits += nraw as u64;
        })
    });
    (hist, raw_bits)
}

/// Single tokens of every 8-bit zigzag value, computed at compile time.
const TOKENS_8: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut z = 0;
    while z < 256 {
        t[z] = token_of(z as u32).0 as u8;
        z += 1;
    }
    t
};

/// [`token_of`]'s token, by table at 8 bits.
#[inline(always)]
fn token_fast(z: u32, depth: u8) -> u32 {
    if depth == 8 {
        TOKENS_8[z as usize & 255] as u32
    } else {
        token_of(z).0
    }
}

/// Approximate Huffman-coded bits of a histogram: each token's ideal length, but at least
/// one bit (a prefix code cannot do better, which is what makes pair tokens pay off) unless
/// only one token is used, plus about 3 bits per used token for the code-length table.
fn entropy_bits(hist: &[u32]) -> f64 {
    if hist.iter().filter(|&&c| c > 0).count() == 1 {
        // One token: its code is zero bits long.
        return 3.0;
    }
    let n: u32 = hist.iter().sum();
    let log_n = (n as f64).log2();
    hist.iter()
        .filter(|&&c| c > 0)
        .map(|&c| c as f64 * (log_n - (c as f64).log2()).max(1.0) + 3.0)
        .sum()
}

/// The best predictor and token set for a plane. Runs are tried only where a quarter of the
/// positions or more are zero (photos seldom get there, so their encode time is unchanged),
/// with the predictor that has the most zero positions and the best one without runs. Run
/// tokens cost decode speed (a channel with them sends its patch down the decoder's
/// slower run path), so they are taken only where the exact coded sizes, runs against the
/// best choice without them, say they save [`RUN_MIN_GAIN`] of the channel's bits.
#[inline(always)]
fn best_choice(plane: &[u16], pw: usize, depth: u8, options: &CompactOptions) -> ChannelChoice {
    let mut best = ChannelChoice {
        predictor: CompactPredictor::Gradient,
        coding: Coding::Singles,
        bits: f64::INFINITY,
    };
    // The best choice's exact histogram and raw bits.
    let mut best_hist = ([0u32; MAX_TOKENS], 0u64);
    let mut most_zeros = (0u32, CompactPredictor::Gradient);
    for predictor in CompactPredictor::ALL {
        if !options.predictors.contains(predictor) {
            continue;
        }
        let (bits, zeros, hist) = estimate_bits(plane, pw, depth, predictor);
        if zeros > most_zeros.0 {
            most_zeros = (zeros, predictor);
        }
        for (coding, bits) in [(Coding::Singles, bits[0]), (Coding::Pairs, bits[1])] {
            if bits < best.bits && (options.pair_tokens || coding == Coding::Singles) {
                best = ChannelChoice {
                    predictor,
                    coding,
                    bits,
                };
                let tokens = match coding {
                    Coding::Singles => &hist.singles,
                    _ => &hist.with_pairs,
                };
                best_hist = (*tokens, hist.raw_bits);
            }
        }
    }
    let positions = (plane.len() / pw * (pw / 2)) as u32;
    if !(options.pair_tokens && options.run_tokens) || most_zeros.0 * 4 < positions {
        return best;
    }
    // The estimates rank predictors well but are off by a few % (more in small patches),
    // as much as runs save at the margin: the run decision takes exact sizes.
    let ntok = alphabet_size(depth) as usize;
    let without = coded_bits(&best_hist.0[..ntok], best_hist.1) as f64;
    let needed = without * RUN_MIN_GAIN;
    let mut choice = (best, without);
    let candidates = [most_zeros.1, best.predictor];
    let distinct = if best.predictor == most_zeros.1 { 1 } else { 2 };
    for &predictor in &candidates[..distinct] {
        let (hist, raw_bits) = symbol_histogram(plane, pw, depth, predictor, Coding::Runs);
        let with = coded_bits(&hist[..ntok], raw_bits) as f64;
        if without - with > needed && with < choice.1 {
            // Scaled to the estimates' measure, which the transform and palette decisions
            // compare.
            let bits = best.bits * with / without;
            choice = (
                ChannelChoice {
                    predictor,
                    coding: Coding::Runs,
                    bits,
                },
                with,
            );
        }
    }
    choice.0
}

/// Rough bits of a channel header beyond what [`estimate_bits`] counts: predictor, token
/// count, segment-length fields (a few bits per segment).
const fn channel_header_estimate(segments: usize) -> f64 {
    (PREDICTOR_BITS + TOKEN_COUNT_BITS + SEGMENT_WIDTH_BITS + SEGMENT_BASE_BITS) as f64
        + 4.0 * segments as f64
}

avx2_dispatch! {
    /// Analyses one patch (see [`PatchPlan`]); with AVX2 code generation where the CPU has
    /// it.
    pub(crate) fn analyse_patch(
        image: &RawImage,
        header: &Header,
        options: &CompactOptions,
        patch: u64,
        scratch: &mut PatchScratch,
    ) -> PatchPlan => analyse_patch_portable;
}

/// One patch analysed, waiting for its channels' codes: the transform (and palette) already
/// in the stream, and per coded channel its predictor and symbols. The codes are chosen for
/// a run of patches at once ([`encode_patches`]) because a patch may take its left neighbour's.
pub(crate) struct PatchPlan {
    writer: BitWriter,
    rows: usize,
    segments: usize,
    channels: Vec<ChannelPlan>,
}

impl PatchPlan {
    /// Each coded channel's token counts, over the alphabet of `depth`.
    pub(crate) fn histograms(&self, depth: u8) -> Vec<&[u32]> {
        let tokens = alphabet_size(depth) as usize;
        self.channels.iter().map(|c| &c.hist[..tokens]).collect()
    }
}

/// One coded channel of a [`PatchPlan`].
struct ChannelPlan {
    predictor: CompactPredictor,
    /// Token counts of `symbols`.
    hist: [u32; MAX_TOKENS],
    /// token | raw bit count << 8 | raw << 16, row after row.
    symbols: Vec<u32>,
    /// Symbols of row y are `symbols[row_start[y]..row_start[y + 1]]`.
    row_start: Vec<usize>,
}

/// Most patches that share codes are chosen for together: a run of at most this many
/// consecutive patches of one patch row (a row of 64-px patches 4096 px wide is one run).
/// Sharing starts afresh at each run's first patch.
pub(crate) const RUN_PATCHES: u64 = 64;

/// Samples whose patches [`encode_patches`] analyses before it writes them (or one run, if
/// that is more): their symbols wait for their codes, 4 bytes per sample, so about 8 MiB for
/// 64-px patches; a run of 64 128-px RGBA patches is 4 M samples (about 16 MiB), and 8-px
/// patches add per-patch tables (about 20 MiB).
pub(crate) const WINDOW_SAMPLES: u64 = 1 << 21;

/// Encodes every patch of the image as a compact stream, in patch order. Each channel's
/// code is its own optimum or, with [`CompactOptions::shared_codes`], one code for a run of
/// neighbouring patches (see [`super::shared_codes`]). The patches go window by window
/// (whole runs, [`WINDOW_SAMPLES`]): analysed in parallel, each run's codes chosen, then
/// written in parallel, so there is work for every thread however few patch rows there are.
pub(crate) fn encode_patches(
    image: &RawImage,
    header: &Header,
    options: &CompactOptions,
    parallel: bool,
) -> Vec<Vec<u8>> {
    encode_windows(image, header, options, parallel, WINDOW_SAMPLES)
}

/// [`encode_patches`] with windows of `window_samples` (tests use small ones).
pub(crate) fn encode_windows(
    image: &RawImage,
    header: &Header,
    options: &CompactOptions,
    parallel: bool,
    window_samples: u64,
) -> Vec<Vec<u8>> {
    let per_row = header.patches_x() as u64;
    let runs: Vec<Range<u64>> = (0..header.patches_y() as u64)
        .flat_map(|row| {
            (0..per_row)
                .step_by(RUN_PATCHES as usize)
                .map(move |x| row * per_row + x..row * per_row + (x + RUN_PATCHES).min(per_row))
        })
        .collect();
    let patch_samples = (header.patch_size() as u64).pow(2) * header.channels() as u64;
    let depth = header.depth;
    let mut streams = Vec::with_capacity(header.patch_count() as usize);
    let mut rest = &runs[..];
    while !rest.is_empty() {
        // Whole runs, at least one, up to window_samples.
        let len = |run: &Range<u64>| run.end - run.start;
        let (mut take, mut patches) = (1, len(&rest[0]));
        while take < rest.len() && (patches + len(&rest[take])) * patch_samples <= window_samples {
            patches += len(&rest[take]);
            take += 1;
        }
        let (window, after) = rest.split_at(take);
        rest = after;
        let first = window[0].start;
        let all = first..window[take - 1].end;
        let scratch = || PatchScratch::new(header);
        let analyse = |scratch: &mut PatchScratch, patch| {
            analyse_patch(image, header, options, patch, scratch)
        };
        let choose = |run: &Range<u64>, plans: &[PatchPlan]| {
            let plans = &plans[(run.start - first) as usize..(run.end - first) as usize];
            let histograms: Vec<Vec<&[u32]>> = plans.iter().map(|p| p.histograms(depth)).collect();
            choose_codes(&histograms, options.shared_codes)
        };
        let write = |(plan, lengths): (PatchPlan, Vec<[u8; MAX_TOKENS]>)| {
            write_patch(plan, &lengths, depth)
        };
        if parallel {
            let plans: Vec<PatchPlan> = all.into_par_iter().map_init(scratch, analyse).collect();
            let codes: Vec<_> = window
                .par_iter()
                .flat_map_iter(|run| choose(run, &plans))
                .collect();
            let written: Vec<Vec<u8>> = plans.into_par_iter().zip(codes).map(write).collect();
            streams.extend(written);
        } else {
            let mut scratch = scratch();
            let plans: Vec<PatchPlan> = all.map(|patch| analyse(&mut scratch, patch)).collect();
            let codes: Vec<_> = window.iter().flat_map(|run| choose(run, &plans)).collect();
            streams.extend(plans.into_iter().zip(codes).map(write));
        }
    }
    streams
}

/// The encoder's analysis of one patch; inlined into the AVX2 copy above so the residual
/// loops vectorise.
#[inline(always)]
pub(crate) fn analyse_patch_portable(
    image: &RawImage,
    header: &Header,
    options: &CompactOptions,
    patch: u64,
    scratch: &mut PatchScratch,
    _avx2: Option<Avx2>,
) -> PatchPlan {
    let (x0, y0, pw, ph) = header.patch_rect(patch);
    let rect = (x0 as usize, y0 as usize, pw as usize, ph as usize);
    let (pw, ph) = (pw as usize, ph as usize);
    let n = pw * ph;
    let depth = header.depth;
    let mask = ((1u32 << depth) - 1) as u16;
    let channels = header.channels() as usize;
    for c in 0..channels {
        let plane = &mut scratch.planes[c][..n];
        match image.samples {
            Samples::U8(s) => extract_plane(s, header, rect, c, plane),
            Samples::U16(s) => extract_plane(s, header, rect, c, plane),
        }
    }
    // Per coded plane: its coding, and which plane: None = the channel as stored, Some(k)
    // = minus_green[k], Some(PLANE_INDEX) = the palette's index plane.
    let mut choice: Vec<(ChannelChoice, Option<usize>)> = Vec::with_capacity(channels);
    let mut transform = Transform::None;
    for c in 0..channels {
        choice.push((
            best_choice(&scratch.planes[c][..n], pw, depth, options),
            None,
        ));
    }
    if channels >= 3 && options.subtract_green {
        let mut sg_choice = [choice[0].0; 2];
        for (k, c) in [0usize, 2].into_iter().enumerate() {
            let (planes, mg) = (&scratch.planes, &mut scratch.minus_green);
            for ((o, &x), &g) in mg[k][..n]
                .iter_mut()
                .zip(&planes[c][..n])
                .zip(&planes[1][..n])
            {
                *o = x.wrapping_sub(g) & mask;
            }
            sg_choice[k] = best_choice(&scratch.minus_green[k][..n], pw, depth, options);
        }
        if sg_choice[0].bits + sg_choice[1].bits < choice[0].0.bits + choice[2].0.bits {
            transform = Transform::SubtractGreen;
            choice[0] = (sg_choice[0], Some(0));
            choice[2] = (sg_choice[1], Some(1));
        }
    }

    let segs = segments(header.patch_size(), ph as u32) as usize;
    // The palette, where one index plane and the palette cost less than the channels.
    if options.palette {
        let channel_bits: f64 = choice
            .iter()
            .map(|c| c.0.bits + channel_header_estimate(segs))
            .sum();
        let palette = &mut scratch.palette;
        if palette.find(&scratch.planes, channels, n) && (channels > 1 || palette.sparse()) {
            let entries = palette.len();
            let table = (PALETTE_COUNT_BITS as usize + entries * channels * depth as usize) as f64;
            if table < channel_bits {
                palette.index_plane(&scratch.planes, channels, &mut scratch.index[..n]);
                let index_choice = best_choice(&scratch.index[..n], pw, depth, options);
                if table + index_choice.bits + channel_header_estimate(segs) < channel_bits {
                    transform = Transform::Palette;
                    choice.clear();
                    choice.push((index_choice, Some(PLANE_INDEX)));
                }
            }
        }
    }
    let ntok_max = alphabet_size(depth) as usize;
    // The stream's bits so far; `write_patch` reserves the rest once it knows them.
    let mut writer = BitWriter::default();
    writer.write(transform as u32, TRANSFORM_BITS);
    if transform == Transform::Palette {
        scratch.palette.write(&mut writer, channels, depth);
    }
    let channels = choice
        .iter()
        .enumerate()
        .map(
            |(
                c,
                &(
                    ChannelChoice {
                        predictor, coding, ..
                    },
                    plane_ix,
                ),
            )| {
                let plane = match plane_ix {
                    None => &scratch.planes[c][..n],
                    Some(PLANE_INDEX) => &scratch.index[..n],
                    Some(k) => &scratch.minus_green[k][..n],
                };
                let mut hist = [0u32; MAX_TOKENS];
                let mut symbols = Vec::with_capacity(n);
                let mut row_start = Vec::with_capacity(ph + 1);
                for_each_row(plane, pw, depth as u32, predictor, 1, |z| {
                    row_start.push(symbols.len());
                    row_symbols(z, depth, coding, |t, nraw, raw| {
                        hist[t as usize] += 1;
                        symbols.push(t | nraw << 8 | raw << 16);
                    })
                });
                row_start.push(symbols.len());
                debug_assert!(hist[ntok_max..].iter().all(|&h| h == 0));
                ChannelPlan {
                    predictor,
                    hist,
                    symbols,
                    row_start,
                }
            },
        )
        .collect();
    PatchPlan {
        writer,
        rows: ph,
        segments: segs,
        channels,
    }
}

/// Writes an analysed patch with code lengths `lengths` per coded channel (each gives every
/// token the channel uses a code): the channel headers, then the segments.
pub(crate) fn write_patch(plan: PatchPlan, lengths: &[[u8; MAX_TOKENS]], depth: u8) -> Vec<u8> {
    let PatchPlan {
        mut writer,
        rows,
        segments: segs,
        channels,
    } = plan;
    let w = &mut writer;
    let ntok_max = alphabet_size(depth) as usize;
    // Headers first (they hold the segment lengths), then the segments.
    let mut coded = Vec::with_capacity(channels.len());
    let mut segment_bits = 0u64;
    for (channel, lengths) in channels.iter().zip(lengths) {
        assert!(
            channel
                .hist
                .iter()
                .zip(lengths)
                .all(|(&n, &l)| n == 0 || l > 0),
            "every token a channel uses has a code"
        );
        let codes = huffman::Canonical::new(&lengths[..ntok_max]).codes;
        // Bits each token's code takes in the stream: none for a one-token code.
        let code_bits = if huffman::is_single(&lengths[..ntok_max]) {
            [0; MAX_TOKENS]
        } else {
            *lengths
        };
        let bits_of = |s: u32| code_bits[(s & 0xff) as usize] as u32 + ((s >> 8) & 0xff);
        let mut seg_bits = [0u32; SEGMENTS_MAX as usize];
        for y in 0..rows {
            let row = &channel.symbols[channel.row_start[y]..channel.row_start[y + 1]];
            seg_bits[y % segs] += row.iter().map(|&s| bits_of(s)).sum::<u32>();
        }
        let seg_bits = &seg_bits[..segs];
        let ntok = lengths[..ntok_max]
            .iter()
            .rposition(|&l| l > 0)
            .expect("a token")
            + 1;
        w.write(channel.predictor as u32, PREDICTOR_BITS);
        w.write(ntok as u32, TOKEN_COUNT_BITS);
        for_each_length_field(&lengths[..ntok], |value, bits| w.write(value, bits));
        let lo = *seg_bits.iter().min().expect("a segment");
        let hi = *seg_bits.iter().max().expect("a segment");
        let width = 32 - (hi - lo).leading_zeros();
        debug_assert!(hi < 1 << SEGMENT_BASE_BITS);
        w.write(width, SEGMENT_WIDTH_BITS);
        w.write(lo, SEGMENT_BASE_BITS);
        for &b in seg_bits {
            w.write(b - lo, width);
        }
        segment_bits += seg_bits.iter().map(|&b| b as u64).sum::<u64>();
        coded.push((codes, code_bits));
    }
    // The stream waits for the rest of its window: room for exactly its segments.
    w.reserve_bits(segment_bits);
    for (channel, (codes, code_bits)) in channels.iter().zip(&coded) {
        for s in 0..segs {
            for y in (s..rows).step_by(segs) {
                for &sym in &channel.symbols[channel.row_start[y]..channel.row_start[y + 1]] {
                    let t = (sym & 0xff) as usize;
                    let len = code_bits[t] as u32;
                    let nraw = (sym >> 8) & 0xff;
                    w.write(codes[t] | (sym >> 16) << len, len + nraw);
                }
            }
        }
    }
    writer.finish()
}
