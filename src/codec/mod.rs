//! The layer under both codecs ([`crate::fast`], [`crate::compact`]): bit I/O, the one AVX2
//! dispatch, and moving samples between per-channel planes and an output layout
//! ([`sink`]). Nothing here knows a format version.

pub(crate) mod bits;
pub(crate) mod planes;
pub(crate) mod simd;
pub(crate) mod sink;
