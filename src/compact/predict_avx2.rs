//! AVX2 undoing of left-type prediction: a row's running sum, sixteen samples per step. The
//! scalar loop in `predict.rs` (the reference; a unit test checks both agree) adds one sample
//! after another, a chain of one add per sample; here each 128-bit half sums its eight
//! samples in three shifted adds, the low half's total moves into the high half, and the
//! sum of the samples before the step is added to all sixteen.

use std::arch::x86_64::*;

#[inline(always)]
unsafe fn load16(row: &[u16], x: usize) -> __m256i {
    let samples: &[u16; 16] = row[x..x + 16].try_into().expect("16 samples");
    // SAFETY: 32 readable bytes; AVX2 per the callers' contract.
    unsafe { _mm256_loadu_si256(samples.as_ptr() as *const __m256i) }
}

/// `current[x] = (sum over i <= x of (residuals[i] + above[i])) & mask`, the sum mod 2^16,
/// for `x` below the shortest slice's length rounded down to 16; returns that many (the
/// caller finishes any rest with the scalar loop, `predict::undo_prediction`, and its
/// reduction to the sample depth). With `mask = 2^depth - 1` the stored samples are the
/// sums mod 2^depth, as the scalar loop and a separate reduction give.
///
/// Inlined into its caller for the same reason as `codec::interleave_avx2::interleave`.
///
/// # Safety
/// The CPU must support AVX2.
#[inline(always)]
pub(crate) unsafe fn undo_left_prediction(
    residuals: &[u16],
    above: &[u16],
    current: &mut [u16],
    mask: u16,
) -> usize {
    let n = current.len().min(residuals.len()).min(above.len()) / 16 * 16;
    // SAFETY (whole function): AVX2 per the contract; every load and store goes through a
    // slice whose length was checked to cover it.
    unsafe {
        // Byte shuffle that copies each half's last sample (bytes 14 and 15) to all eight.
        let last_of_half = _mm256_set1_epi16(0x0f0e);
        let mask = _mm256_set1_epi16(mask as i16);
        let mut carry = _mm256_setzero_si256();
        for x in (0..n).step_by(16) {
            let mut v = _mm256_add_epi16(load16(residuals, x), load16(above, x));
            // Running sums within each half.
            v = _mm256_add_epi16(v, _mm256_slli_si256::<2>(v));
            v = _mm256_add_epi16(v, _mm256_slli_si256::<4>(v));
            v = _mm256_add_epi16(v, _mm256_slli_si256::<8>(v));
            // The low half's total into the high half (0x08: low half zero, high half the
            // low half of the totals).
            let totals = _mm256_shuffle_epi8(v, last_of_half);
            v = _mm256_add_epi16(v, _mm256_permute2x128_si256::<0x08>(totals, totals));
            v = _mm256_add_epi16(v, carry);
            // Sample 15, the sum so far, in all sixteen lanes.
            carry = _mm256_permute4x64_epi64::<0xff>(_mm256_shuffle_epi8(v, last_of_half));
            let out: &mut [u16; 16] = (&mut current[x..x + 16]).try_into().expect("16 samples");
            _mm256_storeu_si256(out.as_mut_ptr() as *mut __m256i, _mm256_and_si256(v, mask));
        }
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Agrees with the scalar loop for every length up to 128 (a rest is left to it).
    #[test]
    fn avx2_and_scalar_running_sums_agree() {
        if crate::codec::simd::Avx2::detect().is_none() {
            eprintln!("no AVX2 on this CPU: nothing to compare");
            return;
        }
        let mut seed = 0x9e37_79b9u32;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 17;
            seed ^= seed << 5;
            seed as u16
        };
        for len in 0..=128usize {
            let residuals: Vec<u16> = (0..len).map(|_| next()).collect();
            let above: Vec<u16> = (0..len).map(|_| next()).collect();
            let mut expected = vec![0u16; len];
            crate::compact::predict::undo_prediction(true, &residuals, &above, &mut expected);
            for mask in [0xffff, 0xff, 0x3ff] {
                let mut got = vec![0u16; len];
                // SAFETY: AVX2 detected above.
                let done = unsafe { undo_left_prediction(&residuals, &above, &mut got, mask) };
                assert_eq!(done, len / 16 * 16);
                let reduced: Vec<u16> = expected[..done].iter().map(|v| v & mask).collect();
                assert_eq!(got[..done], reduced, "length {len}, mask {mask:#x}");
            }
        }
    }
}
