//! The layer under both codecs ([`crate::fast`], [`crate::compact`]): bit I/O, the one AVX2
//! dispatch, and moving samples between per-channel planes and an output layout
//! ([`sink`]). Nothing here knows a format version.

pub(crate) mod bits;
#[cfg(target_arch = "x86_64")]
mod interleave_avx2;
pub(crate) mod planes;
pub(crate) mod sample;
pub(crate) mod simd;
pub(crate) mod sink;
pub(crate) mod up_mean;
