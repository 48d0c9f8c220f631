//! AVX2 interleaving of three or four 8-bit channels (held as byte planes, or as `u16` planes
//! with every value below 256) into pixels. The compiler's own vectorisation of the scalar
//! loops in `planes.rs` masks every sample to a byte and assembles the three-channel pixels
//! with a chain of byte rotations; here `u16` rows go sixteen pixels per step, narrowed by a
//! saturating pack (they fit a byte, so it is exact) and placed by byte shuffles, and byte
//! rows thirty-two per step, by unpacking (four channels) or shuffles (three). `planes.rs` is
//! the reference: a unit test checks both agree for every width and both row types.

use super::sample::Sample;
use std::arch::x86_64::*;

/// A byte-shuffle mask that gathers pixel bytes from one of the two packed sources of a
/// 128-bit half (source 0: channels 0 and 1, 8 samples each; source 1: channel 2, and 3 for
/// four channels). In half `h`, mask bytes `at..at + len` take the bytes `start..start + len`
/// of that half's eight interleaved pixels (`lanes[h] = (at, start, len)`); the bytes that
/// come from the other source, and the rest, are 0x80 (zero), so two shuffles ORed together
/// give the pixels.
const fn shuffle_mask<const C: usize>(
    lanes: [(usize, usize, usize); 2],
    source: usize,
) -> [u8; 32] {
    let mut mask = [0x80u8; 32];
    let mut h = 0;
    while h < 2 {
        let (at, start, len) = lanes[h];
        let mut j = 0;
        while j < len {
            let (pixel, c) = ((start + j) / C, (start + j) % C);
            if c / 2 == source {
                mask[16 * h + at + j] = ((c % 2) * 8 + pixel) as u8;
            }
            j += 1;
        }
        h += 1;
    }
    mask
}

/// Three channels, 48 bytes per 16 pixels: `P` holds output bytes 0-15 (low half) and 32-47
/// (high half); `Q` bytes 16-23 (low half, first 8 bytes) and 24-31 (high half, last 8).
const P3: [(usize, usize, usize); 2] = [(0, 0, 16), (0, 8, 16)];
const Q3: [(usize, usize, usize); 2] = [(0, 16, 8), (8, 0, 8)];
static MASKS3: [[[u8; 32]; 2]; 2] = [
    [shuffle_mask::<3>(P3, 0), shuffle_mask::<3>(P3, 1)],
    [shuffle_mask::<3>(Q3, 0), shuffle_mask::<3>(Q3, 1)],
];
/// Four channels, 64 bytes per 16 pixels: each half's pixels 0-3, then 4-7.
const A4: [(usize, usize, usize); 2] = [(0, 0, 16), (0, 0, 16)];
const B4: [(usize, usize, usize); 2] = [(0, 16, 16), (0, 16, 16)];
static MASKS4: [[[u8; 32]; 2]; 2] = [
    [shuffle_mask::<4>(A4, 0), shuffle_mask::<4>(A4, 1)],
    [shuffle_mask::<4>(B4, 0), shuffle_mask::<4>(B4, 1)],
];

/// Three channels from byte rows, per 128-bit half (16 pixels, 48 output bytes): output
/// register `k` (bytes `16k..16k + 16` of the half's pixels) is the OR of one shuffle of each
/// channel; `MASKS3_BYTES[k][c]` takes channel `c`'s bytes (both halves alike).
static MASKS3_BYTES: [[[u8; 32]; 3]; 3] = {
    let mut m = [[[0x80u8; 32]; 3]; 3];
    let mut k = 0;
    while k < 3 {
        let mut i = 0;
        while i < 32 {
            let byte = 16 * k + i % 16;
            m[k][byte % 3][i] = (byte / 3) as u8;
            i += 1;
        }
        k += 1;
    }
    m
};

/// The OR of channel `c`'s bytes shuffled by `masks[c]`, for the three channels.
#[inline(always)]
unsafe fn shuffle3(ch: [__m256i; 3], masks: [__m256i; 3]) -> __m256i {
    // SAFETY: AVX2 per the callers' contract; register operations only.
    unsafe {
        _mm256_or_si256(
            _mm256_or_si256(
                _mm256_shuffle_epi8(ch[0], masks[0]),
                _mm256_shuffle_epi8(ch[1], masks[1]),
            ),
            _mm256_shuffle_epi8(ch[2], masks[2]),
        )
    }
}

#[inline(always)]
unsafe fn load32_bytes(row: &[u8], x: usize) -> __m256i {
    let samples: &[u8; 32] = row[x..x + 32].try_into().expect("32 samples");
    // SAFETY: 32 readable bytes; AVX2 per the callers' contract.
    unsafe { _mm256_loadu_si256(samples.as_ptr() as *const __m256i) }
}

#[inline(always)]
unsafe fn store32(dst: &mut [u8], at: usize, v: __m256i) {
    let out: &mut [u8; 32] = (&mut dst[at..at + 32]).try_into().expect("32 bytes");
    // SAFETY: 32 writable bytes; AVX2 per the callers' contract.
    unsafe { _mm256_storeu_si256(out.as_mut_ptr() as *mut __m256i, v) }
}

/// Interleaves the first `pixels` (a multiple of 32) pixels of `C` (3 or 4) byte rows into
/// `dst`, 32 per step.
///
/// # Safety
/// The CPU must support AVX2.
#[inline(always)]
unsafe fn interleave_bytes32<const C: usize>(rows: [&[u8]; C], dst: &mut [u8], pixels: usize) {
    // SAFETY (whole function): AVX2 per the contract; every load and store goes through a
    // slice whose length was checked to cover it.
    unsafe {
        if C == 4 {
            for x in (0..pixels).step_by(32) {
                let (r, g) = (load32_bytes(rows[0], x), load32_bytes(rows[1], x));
                let (b, a) = (load32_bytes(rows[2], x), load32_bytes(rows[3], x));
                // In each half: pixels 0-7 and 8-15 as (r, g) and (b, a) pairs, then as
                // whole pixels in four groups of four.
                let (rg_lo, rg_hi) = (_mm256_unpacklo_epi8(r, g), _mm256_unpackhi_epi8(r, g));
                let (ba_lo, ba_hi) = (_mm256_unpacklo_epi8(b, a), _mm256_unpackhi_epi8(b, a));
                let p0 = _mm256_unpacklo_epi16(rg_lo, ba_lo); // pixels 0-3 | 16-19
                let p1 = _mm256_unpackhi_epi16(rg_lo, ba_lo); // 4-7 | 20-23
                let p2 = _mm256_unpacklo_epi16(rg_hi, ba_hi); // 8-11 | 24-27
                let p3 = _mm256_unpackhi_epi16(rg_hi, ba_hi); // 12-15 | 28-31
                let at = x * 4;
                store32(dst, at, _mm256_permute2x128_si256::<0x20>(p0, p1));
                store32(dst, at + 32, _mm256_permute2x128_si256::<0x20>(p2, p3));
                store32(dst, at + 64, _mm256_permute2x128_si256::<0x31>(p0, p1));
                store32(dst, at + 96, _mm256_permute2x128_si256::<0x31>(p2, p3));
            }
        } else {
            let mut masks = [[_mm256_setzero_si256(); 3]; 3];
            for (k, row) in masks.iter_mut().enumerate() {
                for (c, mask) in row.iter_mut().enumerate() {
                    *mask = load_mask(&MASKS3_BYTES[k][c]);
                }
            }
            for x in (0..pixels).step_by(32) {
                let ch = [
                    load32_bytes(rows[0], x),
                    load32_bytes(rows[1], x),
                    load32_bytes(rows[2], x),
                ];
                // out[k]: bytes 16k..16k + 16 of each half's 48 (low half: pixels 0-15,
                // high half: 16-31).
                let out = [
                    shuffle3(ch, masks[0]),
                    shuffle3(ch, masks[1]),
                    shuffle3(ch, masks[2]),
                ];
                let at = x * 3;
                store32(dst, at, _mm256_permute2x128_si256::<0x20>(out[0], out[1]));
                store32(
                    dst,
                    at + 32,
                    _mm256_permute2x128_si256::<0x30>(out[2], out[0]),
                );
                store32(
                    dst,
                    at + 64,
                    _mm256_permute2x128_si256::<0x31>(out[1], out[2]),
                );
            }
        }
    }
}

#[inline(always)]
unsafe fn load_mask(mask: &[u8; 32]) -> __m256i {
    // SAFETY: 32 readable bytes; AVX2 per the callers' contract.
    unsafe { _mm256_loadu_si256(mask.as_ptr() as *const __m256i) }
}

#[inline(always)]
unsafe fn load16(row: &[u16], x: usize) -> __m256i {
    let samples: &[u16; 16] = row[x..x + 16].try_into().expect("16 samples");
    // SAFETY: 32 readable bytes; AVX2 per the callers' contract.
    unsafe { _mm256_loadu_si256(samples.as_ptr() as *const __m256i) }
}

#[inline(always)]
unsafe fn load16_bytes(row: &[u8], x: usize) -> __m128i {
    let samples: &[u8; 16] = row[x..x + 16].try_into().expect("16 samples");
    // SAFETY: 16 readable bytes; AVX2 per the callers' contract.
    unsafe { _mm_loadu_si128(samples.as_ptr() as *const __m128i) }
}

/// Samples `x..x + 16` of rows `a` and `b` (`b` absent: zeros) as bytes, in the order a
/// saturating pack of their `u16` forms gives: per 128-bit half `h`, `a`'s samples
/// `8h..8h + 8`, then `b`'s.
#[inline(always)]
unsafe fn pack_pair<T: Sample>(a: &[T], b: Option<&[T]>, x: usize) -> __m256i {
    // SAFETY (whole function): AVX2 per the callers' contract; the loads check their slices.
    // (No closures here: a closure is compiled without the caller's AVX2.)
    unsafe {
        if T::DEPTH == 8 {
            let a = load16_bytes(bytemuck::cast_slice(a), x);
            let b = match b {
                Some(b) => load16_bytes(bytemuck::cast_slice(b), x),
                None => _mm_setzero_si128(),
            };
            _mm256_set_m128i(_mm_unpackhi_epi64(a, b), _mm_unpacklo_epi64(a, b))
        } else {
            let b = match b {
                Some(b) => load16(bytemuck::cast_slice(b), x),
                None => _mm256_setzero_si256(),
            };
            _mm256_packus_epi16(load16(bytemuck::cast_slice(a), x), b)
        }
    }
}

/// Interleaves `dst.len() / (16 C) * 16` pixels of `C` (3 or 4) channels whose rows are
/// `rows[c]` (samples below 256) into `dst`; returns how many pixels it wrote.
///
/// Inlined into its caller (not a `#[target_feature]` function, which the compiler does not
/// inline into the large compact decode loop, nor with `#[inline(always)]` before Rust 1.86):
/// the intrinsics are inlined where the caller is compiled for AVX2, as the decoders' AVX2
/// copies are.
///
/// # Safety
/// The CPU must support AVX2.
#[inline(always)]
pub(crate) unsafe fn interleave<const C: usize, T: Sample>(
    rows: [&[T]; C],
    dst: &mut [u8],
) -> usize {
    debug_assert!(C == 3 || C == 4);
    let masks = if C == 3 { &MASKS3 } else { &MASKS4 };
    let pixels = (dst.len() / C).min(rows.iter().map(|r| r.len()).min().unwrap_or(0)) / 16 * 16;
    // SAFETY (whole function): AVX2 per the contract; every load and store goes through a
    // slice whose length was checked to cover it.
    unsafe {
        let m = [
            [load_mask(&masks[0][0]), load_mask(&masks[0][1])],
            [load_mask(&masks[1][0]), load_mask(&masks[1][1])],
        ];
        // Byte rows: 32 pixels per step by unpacking (four channels) or three shuffles per
        // output register (three), then the 16-pixel step below for the rest.
        let start = if T::DEPTH == 8 {
            let mut bytes: [&[u8]; C] = [&[]; C];
            for (b, row) in bytes.iter_mut().zip(rows) {
                *b = bytemuck::cast_slice(row);
            }
            let whole_steps = pixels / 32 * 32;
            interleave_bytes32::<C>(bytes, dst, whole_steps);
            whole_steps
        } else {
            0
        };
        for x in (start..pixels).step_by(16) {
            // Per 128-bit half (pixels 0-7, then 8-15): channels 0 and 1, then channel 2 (and 3).
            let first = pack_pair(rows[0], Some(rows[1]), x);
            let second = pack_pair(rows[2], if C == 4 { Some(rows[3]) } else { None }, x);
            let a = _mm256_or_si256(
                _mm256_shuffle_epi8(first, m[0][0]),
                _mm256_shuffle_epi8(second, m[0][1]),
            );
            let b = _mm256_or_si256(
                _mm256_shuffle_epi8(first, m[1][0]),
                _mm256_shuffle_epi8(second, m[1][1]),
            );
            // Whole 32-byte stores where they fit (two or three stores per 16 pixels, not
            // four).
            let out = &mut dst[x * C..x * C + 16 * C];
            let (lo, hi) = out.split_at_mut(32);
            let lo: &mut [u8; 32] = lo.try_into().expect("32 bytes");
            if C == 3 {
                let q = _mm_or_si128(_mm256_castsi256_si128(b), _mm256_extracti128_si256::<1>(b));
                let hi: &mut [u8; 16] = hi.try_into().expect("16 bytes");
                _mm_storeu_si128(
                    hi.as_mut_ptr() as *mut __m128i,
                    _mm256_extracti128_si256::<1>(a),
                );
                _mm256_storeu_si256(
                    lo.as_mut_ptr() as *mut __m256i,
                    _mm256_inserti128_si256::<1>(a, q),
                );
            } else {
                let hi: &mut [u8; 32] = hi.try_into().expect("32 bytes");
                _mm256_storeu_si256(
                    lo.as_mut_ptr() as *mut __m256i,
                    _mm256_permute2x128_si256::<0x20>(a, b),
                );
                _mm256_storeu_si256(
                    hi.as_mut_ptr() as *mut __m256i,
                    _mm256_permute2x128_si256::<0x31>(a, b),
                );
            }
        }
    }
    pixels
}
