//! Prediction from the row above, shared by the encoder and the CPU decoder (and mirrored by
//! `shaders/shared/predict.wgsl`). Every sample of a row depends only on the previous row, so a
//! whole row decodes in parallel.

use crate::format::Predictor;

/// Prediction for one sample from its upper-left `a`, upper `b` and upper-right `c` neighbours.
#[inline(always)]
pub fn predict_one(predictor: Predictor, a: u32, b: u32, c: u32) -> u32 {
    match predictor {
        Predictor::None => 0,
        Predictor::Up => b,
        Predictor::L3Paeth => {
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
        Predictor::UpMean => (a + c) >> 1,
    }
}

/// Predictions for a whole row from the row above. `up` and `out` have the row's width;
/// the neighbours missing at the patch edges are replaced by the sample above.
#[inline]
pub fn predict_row(predictor: Predictor, up: &[u16], out: &mut [u16]) {
    let w = up.len();
    debug_assert_eq!(w, out.len());
    match predictor {
        Predictor::None => out.fill(0),
        Predictor::Up => out.copy_from_slice(up),
        _ => {
            if w == 1 {
                out[0] = predict_one(predictor, up[0] as u32, up[0] as u32, up[0] as u32) as u16;
                return;
            }
            out[0] = predict_one(predictor, up[0] as u32, up[0] as u32, up[1] as u32) as u16;
            // The interior loop has no branches on x, so the compiler can vectorise it.
            for x in 1..w - 1 {
                out[x] =
                    predict_one(predictor, up[x - 1] as u32, up[x] as u32, up[x + 1] as u32) as u16;
            }
            out[w - 1] = predict_one(
                predictor,
                up[w - 2] as u32,
                up[w - 1] as u32,
                up[w - 1] as u32,
            ) as u16;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn l3_paeth_picks_the_closest_neighbour() {
        // a=10, b=20, c=40: p = 30; |p-a| = 20, |p-b| = 10, |p-c| = 10 -> b wins the tie with c.
        assert_eq!(predict_one(Predictor::L3Paeth, 10, 20, 40), 20);
        // a=50, b=20, c=25: p = 55; closest is a.
        assert_eq!(predict_one(Predictor::L3Paeth, 50, 20, 25), 50);
        // a=20, b=20, c=90: p = 90; c.
        assert_eq!(predict_one(Predictor::L3Paeth, 20, 20, 90), 90);
    }

    #[test]
    fn row_edges_use_the_sample_above() {
        let up = [10u16, 20, 30];
        let mut out = [0u16; 3];
        predict_row(Predictor::UpMean, &up, &mut out);
        assert_eq!(out, [(10 + 20) / 2, (10 + 30) / 2, (20 + 30) / 2]);
        let mut one = [0u16; 1];
        predict_row(Predictor::UpMean, &up[..1], &mut one);
        assert_eq!(one, [10]);
    }
}
