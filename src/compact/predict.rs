//! The compact profile's prediction arithmetic, shared by its encoder and CPU decoder (and
//! mirrored by `shaders/shared/decode_compact.wgsl`).

use crate::codec::up_mean::up_mean_row;
use crate::format::compact::CompactPredictor;

/// The part of the prediction that depends on the row above only, for each column:
/// the whole prediction for up-type predictors; `g` (and `b` in column 0) for left-type
/// ones. Values mod 2^16; callers reduce to the depth.
#[inline(always)]
pub fn prediction_from_above(predictor: CompactPredictor, up: &[u16], g: &mut [u16]) {
    let n = up.len();
    debug_assert!(g.len() >= n && n > 0);
    let g = &mut g[..n];
    match predictor {
        CompactPredictor::None => g.fill(0),
        CompactPredictor::Up => g.copy_from_slice(up),
        CompactPredictor::Left => {
            g.fill(0);
            g[0] = up[0];
        }
        CompactPredictor::Gradient => {
            g[0] = up[0];
            for ((o, &b), &a) in g[1..].iter_mut().zip(&up[1..]).zip(up) {
                *o = b.wrapping_sub(a);
            }
        }
        CompactPredictor::HalfGradient => {
            g[0] = up[0];
            for ((o, &b), &a) in g[1..].iter_mut().zip(&up[1..]).zip(up) {
                *o = ((b as i32 - a as i32) >> 1) as u16;
            }
        }
        CompactPredictor::UpMean => up_mean_row(up, g),
    }
}

/// Undoes the prediction of one row: `current = residual + above`, plus the sample to the
/// left for left-type predictors (a running sum; `above` holds the rest of the prediction,
/// see [`prediction_from_above`]). All mod 2^16. The decoder's inverse of the encoder's
/// prediction, after it has decoded the row's residuals.
#[inline(always)]
pub fn undo_prediction(left_type: bool, residuals: &[u16], above: &[u16], current: &mut [u16]) {
    if left_type {
        let mut acc = 0u16;
        for ((o, &r), &g) in current.iter_mut().zip(residuals).zip(above) {
            acc = acc.wrapping_add(r.wrapping_add(g));
            *o = acc;
        }
    } else {
        for ((o, &r), &g) in current.iter_mut().zip(residuals).zip(above) {
            *o = r.wrapping_add(g);
        }
    }
}
