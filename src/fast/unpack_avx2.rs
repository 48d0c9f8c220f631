//! AVX2 bit unpacking for the CPU decoder: eight `n`-bit fields (n = 1..=15) per step with one
//! byte shuffle, one variable shift and one mask, instead of eight scalar extractions.
//!
//! Eight `n`-bit fields are exactly `n` bytes, so every group of a row starts at the same bit
//! shift `s` within its first byte; for each `(n, s)` a precomputed table says which bytes each
//! 32-bit lane gathers and how far it shifts. The scalar path in `decode.rs` is the reference;
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
