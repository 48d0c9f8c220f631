//! AVX2 running sums along long rows for float32 words: eight values per step, each 128-bit
//! half summing its four in two shifted adds, the low half's total moved into the high half
//! and the sum before the step added to all eight (the scalar loops in `reconstruct` are the
//! reference; `decode_paths.rs` checks both agree).

use std::arch::x86_64::*;

/// For `k` below `cur.len()` rounded down to 8: `s` plus the inverse zigzags of `cur[..=k]`
/// (wrapping), plus `p[0][k]` when `TERMS` is 1, plus `p[0][k] + p[1][k] - p[2][k]` when 3
/// (`p`'s slices at least that long); stored in `cur[k]`. Returns how many values were done
/// and the running sum after them (the predictions not included).
///
/// # Safety
/// The CPU must support AVX2.
#[target_feature(enable = "avx2")]
pub(super) unsafe fn row_sums<const TERMS: usize>(
    cur: &mut [u32],
    p: [&[u32]; 3],
    s: u32,
) -> (usize, u32) {
    let mut n = cur.len() / 8 * 8;
    for t in p.iter().take(TERMS) {
        n = n.min(t.len() / 8 * 8);
    }
    #[inline(always)]
    fn load(v: &[u32], x: usize) -> __m256i {
        let v: &[u32; 8] = v[x..x + 8].try_into().expect("8 values");
        // SAFETY: 32 readable bytes; AVX2 enabled in the caller, into which this inlines.
        unsafe { _mm256_loadu_si256(v.as_ptr() as *const __m256i) }
    }
    // SAFETY (whole body): AVX2 per the contract; every load and store goes through a slice
    // whose length was checked to cover it.
    unsafe {
        let one = _mm256_set1_epi32(1);
        let zero = _mm256_setzero_si256();
        let mut carry = _mm256_set1_epi32(s as i32);
        for x in (0..n).step_by(8) {
            let v = load(cur, x);
            // Inverse zigzag: (v >> 1) ^ -(v & 1).
            let mut u = _mm256_xor_si256(
                _mm256_srli_epi32::<1>(v),
                _mm256_sub_epi32(zero, _mm256_and_si256(v, one)),
            );
            // Running sums within each half, then the low half's total into the high half
            // (0x08: low half zero, high half the low half's totals).
            u = _mm256_add_epi32(u, _mm256_slli_si256::<4>(u));
            u = _mm256_add_epi32(u, _mm256_slli_si256::<8>(u));
            let totals = _mm256_shuffle_epi32::<0xff>(u);
            u = _mm256_add_epi32(u, _mm256_permute2x128_si256::<0x08>(totals, totals));
            let sums = _mm256_add_epi32(u, carry);
            // Value 7's sum in all eight lanes: the carry into the next step.
            carry = _mm256_permutevar8x32_epi32(sums, _mm256_set1_epi32(7));
            let mut o = sums;
            if TERMS >= 1 {
                o = _mm256_add_epi32(o, load(p[0], x));
            }
            if TERMS == 3 {
                o = _mm256_sub_epi32(_mm256_add_epi32(o, load(p[1], x)), load(p[2], x));
            }
            let out: &mut [u32; 8] = (&mut cur[x..x + 8]).try_into().expect("8 values");
            _mm256_storeu_si256(out.as_mut_ptr() as *mut __m256i, o);
        }
        (n, _mm256_extract_epi32::<0>(carry) as u32)
    }
}
