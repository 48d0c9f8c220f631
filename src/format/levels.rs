//! The stored form of interlaced progressive levels (SPEC.md, "Progressive records"): a
//! refinement's residual image holds three bands of `ceil(fw/2) x ceil(fh/2)` entries, one
//! above the other, in this order. The scheme itself is `crate::progressive::interlace`.

/// Band of the residual image holding H pixels (odd x, even y).
pub const BAND_H: usize = 0;
/// Band holding V pixels (even x, odd y).
pub const BAND_V: usize = 1;
/// Band holding D pixels (odd x, odd y).
pub const BAND_D: usize = 2;
