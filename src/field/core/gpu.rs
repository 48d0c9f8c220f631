//! What the GPU plans of both chunked float formats share: the segment table's rounds and
//! long-segment state, the decode tables as the kernels read them, and the word-position
//! rules (regions on the storage alignment, positions that fit u32).

use super::code::{canonical, LUT_SIZE};
use super::container::{segment_range, Stream};
use crate::error::{Error, FormatError, LimitsError, Result};
use crate::gpu::abi::{LosslessSegment, SEGMENT_ROUND};

/// The tables of one batch of a chunked float format's arrays, in the shader's binding
/// order, and the files' headers: what both formats' plans hold (`A`: the format's array
/// entry, `H`: its header); `own` holds the format's other tables.
#[derive(Debug)]
pub(crate) struct ArrayPlan<A, H, X> {
    /// The files' bytes as little-endian words, each file from a word boundary, plus one
    /// zero word (a bit read near the end may touch the next word).
    pub input_words: Vec<u32>,
    /// One entry per segment of every stream of every chunk.
    pub segments: Vec<LosslessSegment>,
    /// The streams' decode tables, 2^11 entries each: code length | token << 4 (the
    /// error-bounded format's: then the exception runs, 3 words each: start, length, bits).
    pub luts: Vec<u32>,
    /// Words of the scratch binding (per array: residuals, then what the format adds: the
    /// adjustments, the block carries, the long segments' places).
    pub words: u32,
    /// One entry per file.
    pub arrays: Vec<A>,
    /// Words of the output binding.
    pub output_words: u32,
    /// Each file's header.
    pub headers: Vec<H>,
    /// The format's own tables and places.
    pub own: X,
}

impl<A, H, X: Default> Default for ArrayPlan<A, H, X> {
    fn default() -> Self {
        ArrayPlan {
            input_words: Vec::new(),
            segments: Vec::new(),
            luts: Vec::new(),
            words: 0,
            arrays: Vec::new(),
            output_words: 0,
            headers: Vec::new(),
            own: X::default(),
        }
    }
}

/// The lengths of an [`ArrayPlan`]'s shared tables, to undo a file's planning.
#[derive(Debug, Clone, Copy)]
pub(in crate::field) struct PlanMark {
    lens: [usize; 5],
    words: u32,
    output_words: u32,
}

impl<A, H, X> ArrayPlan<A, H, X> {
    /// Where the shared tables end now, for [`ArrayPlan::rewind`].
    pub(in crate::field) fn mark(&self) -> PlanMark {
        PlanMark {
            lens: [
                self.input_words.len(),
                self.segments.len(),
                self.luts.len(),
                self.arrays.len(),
                self.headers.len(),
            ],
            words: self.words,
            output_words: self.output_words,
        }
    }

    /// Undoes everything the shared tables took past `m` (the format's own tables are its
    /// own to undo).
    pub(in crate::field) fn rewind(&mut self, m: PlanMark) {
        self.input_words.truncate(m.lens[0]);
        self.segments.truncate(m.lens[1]);
        self.luts.truncate(m.lens[2]);
        self.arrays.truncate(m.lens[3]);
        self.headers.truncate(m.lens[4]);
        self.words = m.words;
        self.output_words = m.output_words;
    }

    /// The twin's first stages over the plan (`decode_segments` every round, then `undiff`
    /// for every axis), `pairs` the format's pair tokens: the scratch words and the per-file
    /// error flags.
    #[cfg(test)]
    pub(in crate::field) fn twin_decode(&self, pairs: u32) -> (Vec<u32>, Vec<u32>)
    where
        A: crate::gpu::cpu_twin::float_arrays::ArrayEntry,
    {
        crate::gpu::cpu_twin::float_arrays::decode_and_undiff(
            (&self.input_words, &self.segments, &self.luts),
            self.words,
            &self.arrays,
            segment_rounds(&self.segments),
            pairs,
        )
    }

    /// The kernel's view of the stream tables (bindings 0 to 3).
    #[cfg(feature = "gpu")]
    pub(in crate::field) fn streams(&self) -> crate::gpu::chunked::StreamTables<'_> {
        crate::gpu::chunked::StreamTables {
            input_words: &self.input_words,
            segments: &self.segments,
            rounds: segment_rounds(&self.segments),
            luts: &self.luts,
            words: self.words,
        }
    }
}

/// Rounds of `decode_segments` the segments take: enough for the longest to decode
/// [`SEGMENT_ROUND`] values a round (1 at least).
pub(in crate::field) fn segment_rounds(segments: &[LosslessSegment]) -> u32 {
    segments
        .iter()
        .map(|s| s.count.div_ceil(SEGMENT_ROUND))
        .max()
        .unwrap_or(0)
        .max(1)
}

/// [`LosslessSegment::state`] of a segment of `count` values: 3 words taken at `*words`
/// (and `*words` moved past them) where it has more than one round's values, else
/// `u32::MAX`.
pub(in crate::field) fn segment_state(
    count: usize,
    words: &mut u64,
    what: &'static str,
) -> Result<u32> {
    if count as u64 <= SEGMENT_ROUND as u64 {
        return Ok(u32::MAX);
    }
    let at = u32_of(*words, what)?;
    *words += 3;
    Ok(at)
}

/// Words of a scratch or output region: every array starts at a multiple of 64 words
/// (256 bytes, the storage-offset alignment).
pub(in crate::field) const REGION_ALIGN: u64 = 64;

pub(in crate::field) fn align(n: u64) -> u64 {
    n.div_ceil(REGION_ALIGN) * REGION_ALIGN
}

/// A batch whose tables pass 2^32 words (positions are u32).
pub(in crate::field) fn too_big(what: &'static str, needed: u64) -> Error {
    LimitsError::GpuBuffer {
        what,
        needed,
        max: u32::MAX as u64,
    }
    .into()
}

pub(in crate::field) fn u32_of(v: u64, what: &'static str) -> Result<u32> {
    u32::try_from(v).map_err(|_| too_big(what, v))
}

pub(in crate::field) fn in_batch(f: usize, e: Error) -> Error {
    Error::InBatch {
        image: f,
        error: Box::new(e),
    }
}

/// The decode table of validated code lengths as the shader reads it: entry `i` decodes a
/// stream whose next 11 bits are `i`, as code length | token << 4 (a lone used token: length
/// 0).
pub(in crate::field) fn push_lut(lengths: &[u8], luts: &mut Vec<u32>) {
    let at = luts.len();
    luts.resize(at + LUT_SIZE, 0);
    let lut = &mut luts[at..];
    if lengths.iter().filter(|&&l| l > 0).count() == 1 {
        let t = lengths.iter().position(|&l| l > 0).expect("one used token");
        lut.fill((t as u32) << 4);
        return;
    }
    for (t, &(code, l)) in canonical(lengths).iter().enumerate() {
        if l == 0 {
            continue;
        }
        let mut i = code as usize;
        while i < LUT_SIZE {
            lut[i] = l | (t as u32) << 4;
            i += 1 << l;
        }
    }
}

/// Appends file `data`'s bytes to `input_words` as little-endian words, from a word
/// boundary; returns the byte of the input binding where the file starts.
pub(in crate::field) fn push_file(input_words: &mut Vec<u32>, data: &[u8]) -> u64 {
    let file_byte = input_words.len() as u64 * 4;
    input_words.extend(data.chunks(4).map(|c| {
        let mut w = [0u8; 4];
        w[..c.len()].copy_from_slice(c);
        u32::from_le_bytes(w)
    }));
    file_byte
}

/// `shape` padded to 4 axes (leading 1s), and the axes of padding.
pub(in crate::field) fn padded_shape(shape: &[u32]) -> ([u32; 4], usize) {
    let mut padded = [1u32; 4];
    let pad = 4 - shape.len();
    padded[pad..].copy_from_slice(shape);
    (padded, pad)
}

/// A format's names for the tables a stream goes to, in its errors.
pub(in crate::field) struct TableNames {
    /// The decode tables.
    pub luts: &'static str,
    /// The input bytes.
    pub input: &'static str,
    /// The scratch words.
    pub words: &'static str,
}

/// Where one token stream of a chunk of file `f` (`data`, from byte `file_byte` of the input
/// binding, error slot `slot`) decodes to: `m` values of `width` bits from scratch word `out`.
pub(in crate::field) struct StreamPlace<'d> {
    /// The file's index in the batch (for errors).
    pub f: usize,
    /// The file's error slot.
    pub slot: u32,
    /// The file's bytes.
    pub data: &'d [u8],
    /// Byte of the input binding where the file starts.
    pub file_byte: u64,
    /// Scratch word of the stream's first value.
    pub out: u64,
    /// Values of the stream.
    pub m: u64,
    /// Bits of a value.
    pub width: u32,
}

/// Appends stream `s`'s decode table to `luts` and one [`LosslessSegment`] per segment to
/// `segments`, a segment past one round's values with its 3 state words taken at `*words`.
pub(in crate::field) fn push_stream(
    s: &Stream<'_>,
    at: &StreamPlace<'_>,
    luts: &mut Vec<u32>,
    segments: &mut Vec<LosslessSegment>,
    words: &mut u64,
    names: &TableNames,
) -> Result<()> {
    let base = |c: &[u8]| (c.as_ptr() as usize - at.data.as_ptr() as usize) as u64;
    let lut = u32_of(luts.len() as u64, names.luts)?;
    push_lut(&s.lengths, luts);
    for (k, seg) in s.segments.iter().enumerate() {
        // No segment of at most 2^20 values needs 2^28 bytes (41 bits a symbol at most); the
        // CPU decoder refuses such a segment at its end, and the shader counts its bits in
        // u32.
        if seg.len() >= 1 << 28 {
            return Err(in_batch(
                at.f,
                FormatError::InvalidHeader {
                    field: "segment",
                    offset: base(seg),
                    value: seg.len() as u64,
                    reason: "longer than any segment's symbols",
                }
                .into(),
            ));
        }
        let r = segment_range(at.m as usize, s.segments.len(), k);
        segments.push(LosslessSegment {
            in_byte: u32_of(at.file_byte + base(seg), names.input)?,
            in_len: seg.len() as u32,
            out_start: u32_of(at.out + r.start as u64, names.words)?,
            count: r.len() as u32,
            lut,
            width: at.width,
            file: at.slot,
            state: segment_state(r.len(), words, names.words)?,
        });
    }
    Ok(())
}
