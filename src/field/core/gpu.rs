//! What the GPU plans of both chunked float formats share: the segment table's rounds and
//! long-segment state, the decode tables as the kernels read them, and the word-position
//! rules (regions on the storage alignment, positions that fit u32).

use super::code::{canonical, LUT_SIZE};
use crate::error::{Error, LimitsError, Result};
use crate::gpu::abi::{LosslessSegment, SEGMENT_ROUND};

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
