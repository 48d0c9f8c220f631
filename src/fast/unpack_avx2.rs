//! AVX2 bit unpacking for the CPU decoder, instead of one scalar extraction per field:
//! - widths 1..=[`MAX_WIDTH16`]: sixteen fields per step in 16-bit lanes ([`unpack_groups16`]):
//!   one byte shuffle, one multiply (a per-lane left shift) and one shift right;
//! - widths up to [`MAX_WIDTH`]: eight fields per step in 32-bit lanes ([`unpack_groups`]):
//!   one byte shuffle, one variable shift and one mask.
//!
//! Eight `n`-bit fields are exactly `n` bytes, so every group of a row starts at the same bit
//! shift `s` within its first byte; for each `(n, s)` a precomputed table says which bytes each
//! lane gathers and how far it shifts. The scalar path in `decode.rs` is the reference;
//! a unit test checks both agree for every width, shift and length.

use std::arch::x86_64::*;

/// Widths this path handles (a 16-bit field at a non-zero shift needs 17 bytes per group).
pub const MAX_WIDTH: u32 = 15;

/// Byte-shuffle and shift tables for each width and start shift.
struct Tables {
    /// `shuffle[n][s]`: 32 byte indices (two copies of a 16-byte lane layout; 0x80 = zero).
    shuffle: [[[u8; 32]; 8]; MAX_WIDTH as usize + 1],
    /// `shift[n][s][i]`: right shift of lane `i`.
    shift: [[[u32; 8]; 8]; MAX_WIDTH as usize + 1],
}

const fn build_tables() -> Tables {
    let mut t = Tables {
        shuffle: [[[0x80; 32]; 8]; MAX_WIDTH as usize + 1],
        shift: [[[0; 8]; 8]; MAX_WIDTH as usize + 1],
    };
    let mut n = 1;
    while n <= MAX_WIDTH as usize {
        let mut s = 0;
        while s < 8 {
            let mut i = 0;
            while i < 8 {
                let bit = s + i * n;
                let first = bit / 8;
                let last = (bit + n - 1) / 8; // <= 15 for n <= 15, s <= 7
                t.shift[n][s][i] = (bit % 8) as u32;
                // Lane i is bytes 4*(i%4).. of 128-bit half i/4 of the register.
                let mut j = 0;
                while j < 4 {
                    let src = first + j;
                    let dst = (i / 4) * 16 + (i % 4) * 4 + j;
                    t.shuffle[n][s][dst] = if src <= last { src as u8 } else { 0x80 };
                    j += 1;
                }
                i += 1;
            }
            s += 1;
        }
        n += 1;
    }
    t
}

static TABLES: Tables = build_tables();

/// Widths [`unpack_groups16`] handles: a field at bit shift up to 7 within its first byte
/// must fit a 16-bit lane (`7 + n <= 16`).
pub const MAX_WIDTH16: u32 = 9;

/// Tables of the 16-bit-lane path, for each width `n` and start shift `s` of a group of eight.
struct Tables16 {
    /// `shuffle[n][s]`: 16 byte indices, lane `i` (bytes `2i`, `2i + 1`) gathering the two
    /// bytes that hold field `i` (used for both 128-bit halves).
    shuffle: [[[u8; 16]; 8]; MAX_WIDTH16 as usize + 1],
    /// `multiplier[n][s][i]`: `2^(16 - n - k)` for field `i` at bit `k` of its first byte, so
    /// that a multiply puts the field's top bit at bit 15 and a shift right by `16 - n`
    /// leaves the field alone (the bits above it fall off the lane).
    multiplier: [[[u16; 8]; 8]; MAX_WIDTH16 as usize + 1],
}

const fn build_tables16() -> Tables16 {
    let mut t = Tables16 {
        shuffle: [[[0x80; 16]; 8]; MAX_WIDTH16 as usize + 1],
        multiplier: [[[0; 8]; 8]; MAX_WIDTH16 as usize + 1],
    };
    let mut n = 1;
    while n <= MAX_WIDTH16 as usize {
        let mut s = 0;
        while s < 8 {
            let mut i = 0;
            while i < 8 {
                let bit = s + i * n;
                let first = bit / 8; // first + 1 <= 9 for n <= 9, s <= 7
                t.shuffle[n][s][2 * i] = first as u8;
                t.shuffle[n][s][2 * i + 1] = first as u8 + 1;
                t.multiplier[n][s][i] = 1 << (16 - n - bit % 8);
                i += 1;
            }
            s += 1;
        }
        n += 1;
    }
    t
}

static TABLES16: Tables16 = build_tables16();

/// Unpacks `out.len() / 16 * 16` fields of `n` bits (1..=[`MAX_WIDTH16`]) starting at bit
/// `shift` (0..8) of `bytes[first..]`, two groups of eight per step (one per 128-bit half);
/// returns how many it wrote. Loads as [`unpack_groups`] does (group `g` at byte
/// `first + g * n`, 16 bytes); it writes nothing (returns 0) if the last load would pass the
/// end of `bytes`.
///
/// # Safety
/// The CPU must support AVX2.
#[target_feature(enable = "avx2")]
pub unsafe fn unpack_groups16(
    bytes: &[u8],
    first: usize,
    shift: u32,
    n: u32,
    out: &mut [u16],
) -> usize {
    debug_assert!((1..=MAX_WIDTH16).contains(&n) && shift < 8);
    let (ni, si) = (n as usize, shift as usize);
    // SAFETY (whole function): AVX2 is enabled by the caller's contract; the loads are inside
    // `bytes` by the check of `end` (group g's 16 bytes start at `first + g * n`, and the
    // last group is 2 * steps - 1); the stores go through 16-field chunks of `out`.
    unsafe {
        let half = _mm_loadu_si128(TABLES16.shuffle[ni][si].as_ptr() as *const __m128i);
        let shuffle = _mm256_broadcastsi128_si256(half);
        let half = _mm_loadu_si128(TABLES16.multiplier[ni][si].as_ptr() as *const __m128i);
        let multiplier = _mm256_broadcastsi128_si256(half);
        let down = _mm_cvtsi32_si128(16 - n as i32);
        let steps = out.len() / 16;
        // One bounds check for every load of the loop (the last step's second group ends
        // here), instead of two per step.
        let end = first + (2 * steps).saturating_sub(1) * ni + 16;
        if steps == 0 || end > bytes.len() {
            return 0;
        }
        let src = bytes.as_ptr().add(first);
        let mut written = 0;
        for (g, pair) in out.chunks_exact_mut(16).enumerate() {
            let at = src.add(2 * g * ni);
            let both = _mm256_inserti128_si256::<1>(
                _mm256_castsi128_si256(_mm_loadu_si128(at as *const __m128i)),
                _mm_loadu_si128(at.add(ni) as *const __m128i),
            );
            let lanes = _mm256_shuffle_epi8(both, shuffle);
            let values = _mm256_srl_epi16(_mm256_mullo_epi16(lanes, multiplier), down);
            let dst: &mut [u16; 16] = pair.try_into().expect("16 fields");
            _mm256_storeu_si256(dst.as_mut_ptr() as *mut __m256i, values);
            written += 16;
        }
        written
    }
}

/// Unpacks `out.len() / 8 * 8` fields of `n` bits (1..=[`MAX_WIDTH`]) starting at bit `shift`
/// (0..8) of `bytes[first..]`; returns how many it wrote. Every group's 16-byte load is a
/// bounds-checked slice, so a short `bytes` panics rather than reads out of bounds (callers
/// keep `UNPACK_SLACK` bytes after the row).
///
/// # Safety
/// The CPU must support AVX2.
#[target_feature(enable = "avx2")]
pub unsafe fn unpack_groups(
    bytes: &[u8],
    first: usize,
    shift: u32,
    n: u32,
    out: &mut [u16],
) -> usize {
    debug_assert!((1..=MAX_WIDTH).contains(&n) && shift < 8);
    let (ni, si) = (n as usize, shift as usize);
    // SAFETY (whole function): AVX2 is enabled by the caller's contract; every load and store
    // goes through a pointer to a slice whose length was checked to cover it.
    unsafe {
        let shuffle = _mm256_loadu_si256(TABLES.shuffle[ni][si].as_ptr() as *const __m256i);
        let shifts = _mm256_loadu_si256(TABLES.shift[ni][si].as_ptr() as *const __m256i);
        let mask = _mm256_set1_epi32((1 << n) - 1);
        let mut written = 0;
        for (g, group) in out.chunks_exact_mut(8).enumerate() {
            let src: &[u8; 16] = bytes[first + g * ni..first + g * ni + 16]
                .try_into()
                .expect("16 bytes");
            let half = _mm_loadu_si128(src.as_ptr() as *const __m128i);
            let both = _mm256_broadcastsi128_si256(half);
            let lanes = _mm256_shuffle_epi8(both, shuffle);
            let values = _mm256_and_si256(_mm256_srlv_epi32(lanes, shifts), mask);
            // u32 -> u16 within each half ([v0..v3 v0..v3 | v4..v7 v4..v7]), then quads 0 and 2.
            let packed = _mm256_packus_epi32(values, values);
            let ordered = _mm256_permute4x64_epi64::<0b00_00_10_00>(packed);
            let dst: &mut [u16; 8] = group.try_into().expect("8 fields");
            _mm_storeu_si128(
                dst.as_mut_ptr() as *mut __m128i,
                _mm256_castsi256_si128(ordered),
            );
            written += 8;
        }
        written
    }
}
