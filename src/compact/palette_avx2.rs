//! AVX2 lookup of palette indices into 3- and 4-byte interleaved pixels, eight per step: one
//! gather of the packed pixels' low 32 bits, then one 32-byte store (4 bytes per pixel), or
//! a byte shuffle that drops each pixel's fourth byte and two 16-byte stores (3 bytes per
//! pixel); and into 1-byte pixels from a palette of at most 32 entries, 32 per step, by two
//! byte shuffles of the palette itself. The scalar loop in `palette.rs` is the reference (a
//! unit test checks both agree). The compiler's loop copied an odd-sized pixel with two or
//! three stores each.

use std::arch::x86_64::*;

/// Per 128-bit half: the 12 bytes of four 3-byte pixels from four 4-byte ones, then 4
/// zeros (overwritten by the next store).
const DROP_FOURTH: [u8; 32] = {
    let mut m = [0x80u8; 32];
    let mut h = 0;
    while h < 2 {
        let mut i = 0;
        while i < 12 {
            m[16 * h + i] = ((i / 3) * 4 + i % 3) as u8;
            i += 1;
        }
        h += 1;
    }
    m
};

/// Writes pixels for a prefix of `indices` (each below 256, as `check_row` guarantees; they
/// are masked anyway) into `dst`, `N` (3 or 4) bytes each from the low bytes of `packed`;
/// returns how many it wrote (a multiple of 8, leaving room for the 3-byte path's 4 bytes
/// of overrun inside `dst`). The caller writes the rest.
///
/// Inlined into its caller for the same reason as `codec::interleave_avx2::interleave`.
///
/// # Safety
/// The CPU must support AVX2.
#[inline(always)]
pub(crate) unsafe fn write_pixels<const N: usize>(
    packed: &[u64; 256],
    indices: &[u16],
    dst: &mut [u8],
) -> usize {
    debug_assert!(N == 3 || N == 4);
    let fit = dst.len().saturating_sub(if N == 3 { 4 } else { 0 }) / N;
    let pixels = fit.min(indices.len()) / 8 * 8;
    // SAFETY (whole function): AVX2 per the contract; the gathers read entries below 256 of
    // `packed` (indices masked to 8 bits); every load and store goes through a slice whose
    // length was checked to cover it.
    unsafe {
        let low_byte = _mm256_set1_epi32(0xff);
        let drop_fourth = _mm256_loadu_si256(DROP_FOURTH.as_ptr() as *const __m256i);
        for k in (0..pixels).step_by(8) {
            let idx: &[u16; 8] = indices[k..k + 8].try_into().expect("8 indices");
            let idx = _mm256_and_si256(
                _mm256_cvtepu16_epi32(_mm_loadu_si128(idx.as_ptr() as *const __m128i)),
                low_byte,
            );
            // The low 32 bits of each u64 entry (scale 8: entry i is at byte 8 i).
            let px = _mm256_i32gather_epi32::<8>(packed.as_ptr() as *const i32, idx);
            if N == 4 {
                let out: &mut [u8; 32] = (&mut dst[k * 4..k * 4 + 32]).try_into().expect("32");
                _mm256_storeu_si256(out.as_mut_ptr() as *mut __m256i, px);
            } else {
                let px = _mm256_shuffle_epi8(px, drop_fourth);
                let lo: &mut [u8; 16] = (&mut dst[k * 3..k * 3 + 16]).try_into().expect("16");
                _mm_storeu_si128(lo.as_mut_ptr() as *mut __m128i, _mm256_castsi256_si128(px));
                let hi: &mut [u8; 16] = (&mut dst[k * 3 + 12..k * 3 + 28]).try_into().expect("16");
                _mm_storeu_si128(
                    hi.as_mut_ptr() as *mut __m128i,
                    _mm256_extracti128_si256::<1>(px),
                );
            }
        }
    }
    pixels
}

/// Writes 1-byte pixels for a prefix of `indices` (each below 32: checked against a palette
/// of at most 32 entries; a larger index would read its low five bits, within `table`) into
/// `dst` from `table`; returns how many it wrote (a multiple of 32). The caller writes the
/// rest.
///
/// # Safety
/// The CPU must support AVX2.
#[inline(always)]
pub(crate) unsafe fn write_bytes(table: &[u8; 32], indices: &[u16], dst: &mut [u8]) -> usize {
    let pixels = dst.len().min(indices.len()) / 32 * 32;
    // SAFETY (whole function): AVX2 per the contract; a byte shuffle reads only its register;
    // every load and store goes through a slice whose length was checked to cover it.
    unsafe {
        let low = _mm256_broadcastsi128_si256(_mm_loadu_si128(table.as_ptr() as *const __m128i));
        let high =
            _mm256_broadcastsi128_si256(_mm_loadu_si128(table[16..].as_ptr() as *const __m128i));
        let (five_bits, fifteen) = (_mm256_set1_epi8(0x1f), _mm256_set1_epi8(15));
        for k in (0..pixels).step_by(32) {
            let a: &[u16; 16] = indices[k..k + 16].try_into().expect("16 indices");
            let b: &[u16; 16] = indices[k + 16..k + 32].try_into().expect("16 indices");
            let a = _mm256_loadu_si256(a.as_ptr() as *const __m256i);
            let b = _mm256_loadu_si256(b.as_ptr() as *const __m256i);
            // Per 128-bit half: a's 8 indices then b's; the permute puts them in order.
            let idx = _mm256_permute4x64_epi64::<0b11_01_10_00>(_mm256_packus_epi16(a, b));
            let idx = _mm256_and_si256(idx, five_bits);
            // A shuffle uses an index's low four bits: entries 0-15 from `low`, 16-31 from
            // `high`, chosen by bit 4.
            let px = _mm256_blendv_epi8(
                _mm256_shuffle_epi8(low, idx),
                _mm256_shuffle_epi8(high, idx),
                _mm256_cmpgt_epi8(idx, fifteen),
            );
            let out: &mut [u8; 32] = (&mut dst[k..k + 32]).try_into().expect("32 bytes");
            _mm256_storeu_si256(out.as_mut_ptr() as *mut __m256i, px);
        }
    }
    pixels
}
