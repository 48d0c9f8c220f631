//! The *fast* profile (format version 1, `format::fast`): the L3 paper's fixed-width rows
//! predicted from the row above. Its encoder, its CPU decoder and its options live here; the
//! GPU decoder's version-1 kernel is `shaders/shared/decode_streams.wgsl`.

pub(crate) mod decode;
pub(crate) mod encode;
pub(crate) mod predict;
#[cfg(target_arch = "x86_64")]
mod unpack_avx2;

use crate::format::fast::FastPredictor;

/// Which predictor each (patch, channel) stream of a fast file uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PredictorChoice {
    /// Rank every predictor on each (patch, channel) by the bits its odd rows would take, and
    /// use the best (default). Costs about three times the prediction work of a fixed choice;
    /// decode speed is the same.
    #[default]
    Best,
    /// Use one predictor everywhere.
    Fixed(FastPredictor),
}

/// The fast profile's encoder options. Every choice is signalled in the stream, so these
/// trade encode time for size and never affect decoding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FastOptions {
    /// Predictor selection (default [`PredictorChoice::Best`]).
    pub predictor: PredictorChoice,
}
