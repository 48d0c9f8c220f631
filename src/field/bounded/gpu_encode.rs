//! The GPU encoder of error-bounded arrays (differences predictor): the host side of
//! `gpu::GpuEncoder`'s kernels, bit for bit [`encode_bounded`](super::encode_bounded) with the
//! same options. The host checks the arguments (the CPU encoder's checks, then what the GPU
//! encoder does not support, as errors: never a CPU fallback, except that a bound too fine for
//! the bins stores the array exactly as the CPU encoder does), plans the segments, and between
//! the four submissions computes what is small: the bin rule from the extent the GPU found
//! ([`BinRule`]), each chunk's token set and code from the GPU's per-segment histograms
//! ([`choose_code`], the CPU encoder's own function), each segment's place in the packed
//! words; then assembles the file (header, runs from the GPU's exception flags, chunk heads,
//! the GPU's packed segments, CRC).
//!
//! Supported: `predictor: Some(Predictor::Differences)`, any `axes` (without one, the GPU
//! histograms the single tokens of every axis set and the host ranks them by the CPU's
//! `quick_bits`), at most `ENCODE_SEGMENT_MAX` (2^15) values a segment, a bin width in
//! [2^-100, 2^100] (a bound from about 4e-31 to 6e29), and buffers within the device's
//! binding limits. The lattice predictor stays CPU-only.

use std::borrow::Cow;

use super::candidate::{quick_bits_of, runs_of, BoundedOptions, Candidate};
use super::encode::{
    check_arguments, choose_axes, offset_and_range, BinRule, GPU_WIDTH_MAX, GPU_WIDTH_MIN,
};
use super::format::*;
use super::tokens::{choose_code, chunk_head, Histogram, TOKEN_SETS};
use super::Predictor;
use crate::error::invalid_option;
use crate::error::{LimitsError, ParameterError, Result};
use crate::field::core::code::canonical;
use crate::field::core::container::segment_range;
use crate::field::encode::encode_exactly;
use crate::gpu::encode_abi::{
    EncodeParams, EncodeSegment, ENCODE_SEGMENT_MAX, EST_TOKENS, EST_WORDS, FILL_BLOCKS_MAX,
    FILL_BLOCK_MIN, FILL_WORDS, HIST_WORDS,
};

/// What the encoder's four submissions give: the GPU (`gpu::EncodeRun`) or the kernels'
/// CPU twins (tests).
pub(crate) trait EncodeDevice {
    /// The order keys of the smallest and largest regular value.
    fn extent(&mut self, params: &EncodeParams) -> Result<[u32; 2]>;
    /// The bins and the exception fill, and with `params.sets` the estimate's histograms
    /// (`EST_WORDS` per block of `EST_ITEM x 64` values and set).
    fn bins(&mut self, params: &EncodeParams) -> Result<Vec<u32>>;
    /// The differences, the histograms (`HIST_WORDS` per segment and token set) and the
    /// exception flags.
    fn histograms(
        &mut self,
        params: &EncodeParams,
        segments: &[EncodeSegment],
    ) -> Result<(Vec<u32>, Vec<u32>)>;
    /// The packed segments, `words` words.
    fn pack(
        &mut self,
        params: &EncodeParams,
        segments: &[EncodeSegment],
        codes: &[u32],
        words: u64,
    ) -> Result<Vec<u32>>;
}

/// The checked plan of one encode.
pub(crate) struct EncodePlan {
    /// The uniform (the bin rule's fields filled after the extent).
    pub params: EncodeParams,
    /// One entry per segment of every chunk.
    pub segments: Vec<EncodeSegment>,
    /// The differenced axes (original numbering), or `None` for the estimate's.
    axes: Option<u8>,
}

/// Blocks of the exception fill of `n` values: (values per block, blocks).
fn fill_blocks(n: u64) -> (u32, u32) {
    let block = n
        .div_ceil(FILL_BLOCKS_MAX as u64)
        .next_multiple_of(32)
        .max(FILL_BLOCK_MIN as u64);
    (block as u32, n.div_ceil(block) as u32)
}

/// Checks the arguments (the CPU encoder's checks, then the GPU encoder's limits) and plans
/// the segments; `len` is the number of values given.
pub(crate) fn plan_encode(
    len: usize,
    shape: &[u32],
    options: &BoundedOptions,
    max_binding: u64,
) -> Result<EncodePlan> {
    check_arguments(len, shape, options)?;
    if options.predictor != Some(Predictor::Differences) {
        let value = match options.predictor {
            None => 2,
            Some(Predictor::Lattice) => 0,
            Some(Predictor::Differences) => 1,
        };
        return Err(invalid_option(
            "predictor",
            value,
            "the GPU encoder codes the differences predictor only: Some(Predictor::Differences) (1)",
        ));
    }
    let n = len as u64;
    let chunk = 1u64 << options.chunk_log2;
    let per_segment = n.min(chunk).div_ceil(options.segments as u64);
    if per_segment > ENCODE_SEGMENT_MAX as u64 {
        return Err(invalid_option(
            "segments",
            options.segments as u64,
            "the GPU encoder takes at most 2^15 values a segment: more segments or a smaller chunk_log2",
        ));
    }
    // The largest bindings, against the device's limit, before any table exists.
    let max_values = FILL_BLOCKS_MAX as u64 * 65_504;
    let chunks = n.div_ceil(chunk);
    let nseg = chunks * options.segments as u64;
    for (what, needed, max) in [
        (
            "error-bounded encoder input",
            n * 4,
            (max_values * 4).min(max_binding),
        ),
        (
            "error-bounded encoder histograms",
            nseg * 3 * HIST_WORDS as u64 * 4,
            max_binding,
        ),
        (
            "error-bounded encoder segments",
            nseg * size_of::<EncodeSegment>() as u64,
            max_binding,
        ),
    ] {
        if needed > max {
            return Err(LimitsError::GpuBuffer { what, needed, max }.into());
        }
    }
    let mut segments = Vec::with_capacity(nseg as usize);
    let segs = options.segments as usize;
    let mut start = 0u64;
    while start < n {
        let m = (n - start).min(chunk) as usize;
        for s in 0..segs {
            let r = segment_range(m, segs, s);
            segments.push(EncodeSegment {
                start: (start + r.start as u64) as u32,
                count: r.len() as u32,
                ..Default::default()
            });
        }
        start += chunk;
    }
    let nd = shape.len();
    let mut padded = [1u32; 4];
    padded[4 - nd..].copy_from_slice(shape);
    let (block, blocks) = fill_blocks(n);
    let params = EncodeParams {
        count: n as u32,
        shape0: padded[0],
        shape1: padded[1],
        shape2: padded[2],
        shape3: padded[3],
        axes: options.axes.map_or(0, |a| (a as u32) << (4 - nd)),
        sets: if options.axes.is_some() {
            0
        } else {
            (1 << nd) - 1
        },
        pad_axes: (4 - nd) as u32,
        fill_bits: options.fill_value.map_or(0, f32::to_bits),
        has_fill: options.fill_value.is_some() as u32,
        block,
        blocks,
        segments: segments.len() as u32,
        flags_at: FILL_WORDS * blocks + 1,
        ..Default::default()
    };
    Ok(EncodePlan {
        params,
        segments,
        axes: options.axes,
    })
}

/// The f32 of an order key (`order_key` in `encode_quantise.wgsl`).
fn from_key(k: u32) -> f32 {
    f32::from_bits(if k >> 31 == 1 { k ^ 0x8000_0000 } else { !k })
}

/// Runs the plan's four submissions on `dev` and assembles the file; `values` gives the
/// input values when the exception runs need them.
pub(crate) fn encode_planned<'v, D: EncodeDevice>(
    dev: &mut D,
    mut plan: EncodePlan,
    shape: &[u32],
    options: &BoundedOptions,
    values: impl FnOnce() -> Result<Cow<'v, [f32]>>,
) -> Result<Vec<u8>> {
    let [lo, hi] = dev.extent(&plan.params)?;
    let extent = (lo <= hi).then(|| (from_key(lo), from_key(hi)));
    let (offset, range) = offset_and_range(extent);
    // As the CPU encoder with the differences predictor: a bound too fine for the bins (or
    // relative over an array without range) stores the array exactly (a lossless file).
    let bound = options.bound.over_range(range).min(f64::MAX / 4.0);
    let Some(rule) = (bound > 0.0)
        .then(|| BinRule::new(bound, offset, range))
        .flatten()
    else {
        return encode_exactly(&values()?, shape, options.fill_value);
    };
    if !(GPU_WIDTH_MIN..=GPU_WIDTH_MAX).contains(&rule.width) {
        return Err(ParameterError::InvalidFloat {
            name: "max_error",
            value_bits: bound.to_bits(),
            reason: "outside the GPU encoder's range (a bin width from 2^-100 to 2^100)",
        }
        .into());
    }
    let p = &mut plan.params;
    p.offset_bits = rule.offset.to_bits();
    p.width_bits = rule.width.to_bits();
    p.inv_bits = rule.inv.to_bits();
    p.bound_bits = rule.bound32.to_bits();
    let est = dev.bins(&plan.params)?;
    let axes = match plan.axes {
        Some(a) => a,
        None => {
            // The CPU's estimate (`quick_bits` per set) from the GPU's histograms.
            let sets = plan.params.sets as usize;
            let ew = EST_WORDS as usize;
            let mut sums = vec![([0u64; EST_TOKENS as usize], 0u64); sets];
            for (w, h) in est.chunks_exact(ew).enumerate() {
                let (hist, raw) = &mut sums[w % sets];
                for (c, &v) in hist.iter_mut().zip(h) {
                    *c += v as u64;
                }
                *raw += h[ew - 1] as u64;
            }
            let n = plan.params.count as usize;
            choose_axes(shape.len(), |set| {
                let (hist, raw) = &sums[set as usize - 1];
                quick_bits_of(hist, *raw, n)
            })
        }
    };
    plan.params.axes = (axes as u32) << plan.params.pad_axes;
    let (hist, flags) = dev.histograms(&plan.params, &plan.segments)?;
    // Per chunk: the sums of its segments' histograms, the code, the segments' bits.
    let segs = options.segments as usize;
    let alphabet = BOUNDED_ALPHABET as usize;
    let hw = HIST_WORDS as usize;
    let chunks = plan.segments.len() / segs;
    let mut codes = vec![0u32; chunks * alphabet];
    let mut lengths_of = Vec::with_capacity(chunks);
    let mut seg_bytes = vec![0usize; plan.segments.len()];
    let mut word = 0u64;
    for c in 0..chunks {
        let mut hists: [Option<Histogram>; 3] = [None, None, None];
        for (k, h) in hists.iter_mut().enumerate() {
            let mut sum = ([0u64; BOUNDED_ALPHABET as usize], 0u64);
            for s in c * segs..(c + 1) * segs {
                let at = (3 * s + k) * hw;
                for (t, v) in sum.0.iter_mut().enumerate() {
                    *v += hist[at + t] as u64;
                }
                sum.1 += hist[at + alphabet] as u64;
            }
            *h = Some(sum);
        }
        let code = choose_code(&hists, segs);
        let table = canonical(&code.lengths);
        for (t, &(bits, len)) in table.iter().enumerate() {
            codes[c * alphabet + t] = bits | len << 16;
        }
        let range = c * segs..(c + 1) * segs;
        for (s, bytes) in range.clone().zip(&mut seg_bytes[range]) {
            let at = (3 * s + code.set) * hw;
            let bits = table
                .iter()
                .enumerate()
                .map(|(t, &(_, len))| hist[at + t] as u64 * len as u64)
                .sum::<u64>()
                + hist[at + alphabet] as u64;
            let seg = &mut plan.segments[s];
            seg.token_set = code.set as u32;
            seg.codes = (c * alphabet) as u32;
            seg.out_word = u32::try_from(word).map_err(|_| LimitsError::GpuBuffer {
                what: "error-bounded encoder packed bits",
                needed: word * 4,
                max: u32::MAX as u64,
            })?;
            *bytes = bits.div_ceil(8) as usize;
            word += bits.div_ceil(32);
        }
        lengths_of.push(code.lengths);
    }
    debug_assert_eq!(TOKEN_SETS.len(), 3);
    let packed = dev.pack(&plan.params, &plan.segments, &codes, word)?;
    let packed: &[u8] = bytemuck::cast_slice(&packed);
    // The exception runs, from the flags (and the values at the flagged cells).
    let n = plan.params.count as usize;
    let mut exc = Vec::new();
    for (w, &f) in flags.iter().enumerate() {
        let mut f = f;
        while f != 0 {
            let i = w * 32 + f.trailing_zeros() as usize;
            if i < n {
                exc.push(i);
            }
            f &= f - 1;
        }
    }
    let (nruns, runs) = if exc.is_empty() {
        (0, Vec::new())
    } else {
        runs_of(&values()?, exc.into_iter())?
    };
    let mut out_chunks = Vec::with_capacity(chunks);
    for (c, lengths) in lengths_of.iter().enumerate() {
        let bytes = &seg_bytes[c * segs..(c + 1) * segs];
        let mut chunk = chunk_head(lengths, bytes.iter().copied());
        for (s, &len) in bytes.iter().enumerate() {
            let at = plan.segments[c * segs + s].out_word as usize * 4;
            chunk.extend_from_slice(&packed[at..at + len]);
        }
        out_chunks.push(chunk);
    }
    let header = BoundedHeader {
        shape: shape.to_vec(),
        bound,
        offset: rule.offset,
        unit: rule.width,
        fill_value: options.fill_value,
        predictor: Predictor::Differences,
        axes: vec![axes],
        segments: options.segments,
        chunk_log2: options.chunk_log2,
        levels: 0,
        steps: Vec::new(),
        cubic: Vec::new(),
        runs: nruns,
        runs_len: runs.len() as u32,
    };
    Ok(Candidate {
        header,
        runs,
        chunks: out_chunks,
    }
    .into_bytes())
}

#[cfg(feature = "gpu")]
mod device {
    use super::*;
    use crate::gpu::{EncodeInput, EncodeRun, GpuEncoder};

    impl EncodeDevice for EncodeRun<'_> {
        fn extent(&mut self, params: &EncodeParams) -> Result<[u32; 2]> {
            EncodeRun::extent(self, params)
        }
        fn bins(&mut self, params: &EncodeParams) -> Result<Vec<u32>> {
            EncodeRun::bins(self, params)
        }
        fn histograms(
            &mut self,
            params: &EncodeParams,
            segments: &[EncodeSegment],
        ) -> Result<(Vec<u32>, Vec<u32>)> {
            EncodeRun::histograms(self, params, segments)
        }
        fn pack(
            &mut self,
            params: &EncodeParams,
            segments: &[EncodeSegment],
            codes: &[u32],
            words: u64,
        ) -> Result<Vec<u32>> {
            EncodeRun::pack(self, params, segments, codes, words)
        }
    }

    /// The device's largest storage binding.
    fn max_binding(encoder: &GpuEncoder) -> u64 {
        encoder.device().limits().max_storage_buffer_binding_size
    }

    /// Encodes `values` (C order, `shape`) on the GPU: see
    /// [`encode_bounded_gpu`](crate::field::gpu::encode_bounded_gpu).
    pub(crate) fn encode_host(
        encoder: &GpuEncoder,
        values: &[f32],
        shape: &[u32],
        options: &BoundedOptions,
    ) -> Result<Vec<u8>> {
        let plan = plan_encode(values.len(), shape, options, max_binding(encoder))?;
        let buffer = crate::gpu::upload_values(encoder, bytemuck::cast_slice(values));
        let input = EncodeInput {
            buffer: &buffer,
            offset: 0,
            count: values.len() as u32,
        };
        let mut run = EncodeRun::new(
            encoder,
            input,
            plan.segments.len() as u32,
            plan.params.blocks,
        )?;
        encode_planned(&mut run, plan, shape, options, || Ok(Cow::Borrowed(values)))
    }

    /// Encodes the f32 values at byte `offset` of `buffer` on the GPU: see
    /// [`encode_bounded_buffer`](crate::field::gpu::encode_bounded_buffer).
    pub(crate) fn encode_device(
        encoder: &GpuEncoder,
        buffer: &wgpu::Buffer,
        offset: u64,
        shape: &[u32],
        options: &BoundedOptions,
    ) -> Result<Vec<u8>> {
        let n = if shape.is_empty() || shape.len() > BOUNDED_MAX_NDIM {
            0
        } else {
            shape
                .iter()
                .map(|&d| d as u64)
                .try_fold(1u64, |a, d| a.checked_mul(d))
                .unwrap_or(u64::MAX)
        };
        let n = usize::try_from(n.min(u32::MAX as u64 + 1)).unwrap_or(usize::MAX);
        // The shape and options first (so `n` is the shape's), then the buffer, then the plan.
        check_arguments(n, shape, options)?;
        let bytes = n as u64 * 4;
        if offset
            .checked_add(bytes)
            .is_none_or(|end| end > buffer.size())
        {
            return Err(ParameterError::BufferSize {
                got: buffer.size().saturating_sub(offset) as usize,
                needed: bytes as usize,
            }
            .into());
        }
        let align = encoder
            .device()
            .limits()
            .min_storage_buffer_offset_alignment as u64;
        if !offset.is_multiple_of(align.max(4)) {
            return Err(invalid_option(
                "offset",
                offset,
                "the values' byte offset must be a multiple of the device's storage alignment",
            ));
        }
        let plan = plan_encode(n, shape, options, max_binding(encoder))?;
        let input = EncodeInput {
            buffer,
            offset,
            count: n as u32,
        };
        let mut run = EncodeRun::new(
            encoder,
            input,
            plan.segments.len() as u32,
            plan.params.blocks,
        )?;
        encode_planned(&mut run, plan, shape, options, || {
            let b = crate::gpu::read_values(encoder, buffer, offset, bytes)?;
            Ok(Cow::Owned(bytemuck::pod_collect_to_vec(&b)))
        })
    }
}

#[cfg(feature = "gpu")]
pub(crate) use device::{encode_device, encode_host};
