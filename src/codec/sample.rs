//! The two sample types (8- and 16-bit), for code written once for both: the progressive
//! levels, the augmentations, and the fast decoder's planes (bytes for 8-bit images, so a
//! patch's planes and the interleave move half the bytes).

/// A sample type: 8- or 16-bit.
pub trait Sample:
    Copy + Default + PartialEq + std::fmt::Debug + Send + Sync + bytemuck::Pod + 'static
{
    /// Bits per sample.
    const DEPTH: u8;
    /// The sample as a `u32`.
    fn get(self) -> u32;
    /// A sample from the low bits of `v` (the caller masks).
    fn put(v: u32) -> Self;
    /// The sample as a `u16`.
    #[inline(always)]
    fn wide(self) -> u16 {
        self.get() as u16
    }
    /// `v & mask` as a sample, where `mask` is `2^DEPTH - 1` (or smaller, for `u16`): for
    /// `u8` the truncation is the mask, which lets the compiler do the arithmetic in byte
    /// lanes.
    fn wrap(v: u16, mask: u16) -> Self;
}

impl Sample for u8 {
    const DEPTH: u8 = 8;
    #[inline(always)]
    fn get(self) -> u32 {
        self as u32
    }
    #[inline(always)]
    fn put(v: u32) -> Self {
        v as u8
    }
    #[inline(always)]
    fn wrap(v: u16, mask: u16) -> Self {
        debug_assert_eq!(mask, 0xff);
        v as u8
    }
}

impl Sample for u16 {
    const DEPTH: u8 = 16;
    #[inline(always)]
    fn get(self) -> u32 {
        self as u32
    }
    #[inline(always)]
    fn put(v: u32) -> Self {
        v as u16
    }
    #[inline(always)]
    fn wrap(v: u16, mask: u16) -> Self {
        v & mask
    }
}
