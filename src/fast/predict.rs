//! Prediction from the row above, shared by the encoder and the CPU decoder (and mirrored by
//! `shaders/shared/predict.wgsl`). Every sample of a row depends only on the previous row, so a
//! whole row decodes in parallel.

use crate::codec::sample::Sample;
use crate::codec::up_mean::up_mean_row;
use crate::format::fast::FastPredictor;

/// Prediction for one sample from its upper-left `a`, upper `b` and upper-right `c` neighbours.
#[inline(always)]
pub fn predict_one(predictor: FastPredictor, a: u32, b: u32, c: u32) -> u32 {
    match predictor {
        FastPredictor::None => 0,
        FastPredictor::Up => b,
        FastPredictor::L3Paeth => {
            // p = a + c - b; |p - a| = |c - b|, |p - c| = |a - b|, |p - b| = |a + c - 2b|.
            let da = c.abs_diff(b);
            let dc = a.abs_diff(b);
            let db = (a + c).abs_diff(2 * b);
            if da <= db && da <= dc {
                a
            } else if db <= dc {
                b
            } else {
                c
            }
        }
        FastPredictor::UpMean => (a + c) >> 1,
    }
}

/// Predictions for a whole row from the row above. `up` and `out` have the row's width;
/// the neighbours missing at the patch edges are replaced by the sample above. `up` holds
/// either sample type (the decoder's 8-bit planes are bytes).
#[inline(always)]
pub(crate) fn predict_row<T: Sample>(predictor: FastPredictor, up: &[T], out: &mut [u16]) {
    debug_assert_eq!(up.len(), out.len());
    // One loop per predictor (the predictor a constant inside it), so each vectorises.
    match predictor {
        FastPredictor::None => out.fill(0),
        FastPredictor::Up => {
            for (o, &u) in out.iter_mut().zip(up) {
                *o = u.wide();
            }
        }
        FastPredictor::L3Paeth => predict_row_with::<{ FastPredictor::L3Paeth as u8 }, T>(up, out),
        FastPredictor::UpMean => up_mean_row(up, out),
    }
}

#[inline(always)]
fn predict_row_with<const P: u8, T: Sample>(up: &[T], out: &mut [u16]) {
    let predictor = match FastPredictor::from_id(P) {
        Some(p) => p,
        None => unreachable!("P is a predictor id"),
    };
    let w = up.len();
    let f = |a: T, b: T, c: T| predict_one(predictor, a.get(), b.get(), c.get()) as u16;
    if w == 1 {
        out[0] = f(up[0], up[0], up[0]);
        return;
    }
    out[0] = f(up[0], up[0], up[1]);
    out[w - 1] = f(up[w - 2], up[w - 1], up[w - 1]);
    // The interior: no branches on x, no bounds checks.
    for (o, n) in out[1..w - 1].iter_mut().zip(up.windows(3)) {
        *o = predict_one(predictor, n[0].get(), n[1].get(), n[2].get()) as u16;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn l3_paeth_picks_the_closest_neighbour() {
        // a=10, b=20, c=40: p = 30; |p-a| = 20, |p-b| = 10, |p-c| = 10 -> b wins the tie with c.
        assert_eq!(predict_one(FastPredictor::L3Paeth, 10, 20, 40), 20);
        // a=50, b=20, c=25: p = 55; closest is a.
        assert_eq!(predict_one(FastPredictor::L3Paeth, 50, 20, 25), 50);
        // a=20, b=20, c=90: p = 90; c.
        assert_eq!(predict_one(FastPredictor::L3Paeth, 20, 20, 90), 90);
    }

    #[test]
    fn up_mean_row_matches_the_definition_at_full_16_bit_range() {
        let up = [65535u16, 65535, 1, 65534, 0, 0, 40000];
        let mut out = [0u16; 7];
        predict_row(FastPredictor::UpMean, &up, &mut out);
        for x in 0..up.len() {
            let a = up[x.saturating_sub(1)] as u32;
            let c = up[(x + 1).min(up.len() - 1)] as u32;
            let expect = predict_one(FastPredictor::UpMean, a, up[x] as u32, c) as u16;
            assert_eq!(out[x], expect, "x = {x}");
        }
    }

    #[test]
    fn row_edges_use_the_sample_above() {
        let up = [10u16, 20, 30];
        let mut out = [0u16; 3];
        predict_row(FastPredictor::UpMean, &up, &mut out);
        assert_eq!(out, [(10 + 20) / 2, (10 + 30) / 2, (20 + 30) / 2]);
        let mut one = [0u16; 1];
        predict_row(FastPredictor::UpMean, &up[..1], &mut one);
        assert_eq!(one, [10]);
    }
}
