//! The compact profile's palette transform (SPEC "Version 2 (compact) streams", transform 2):
//! a patch of at most [`PALETTE_MAX`] distinct pixels stores the list and one plane of
//! indices into it. The encoder side finds the pixels, orders them and writes the list and
//! the index plane; the decoder side reads the list and looks the indices up at output.

use crate::codec::bits::{BitReader, BitWriter};
use crate::codec::simd::Avx2;
use crate::codec::sink::PaletteLookup;
use crate::format::compact::{PALETTE_COUNT_BITS, PALETTE_MAX};
use crate::format::Header;

/// Slots of the pixel set: four per palette entry at most, so probes stay short.
const SLOTS: usize = 4 * PALETTE_MAX as usize;

/// The encoder's palette of one patch, reused from patch to patch.
pub(crate) struct PaletteBuilder {
    /// The distinct pixels (samples packed 16 bits each, channel 0 highest), sorted.
    entries: Vec<u64>,
    /// Open-addressing set of the patch's pixels: key, and sorted index + 1 (0: empty).
    slots: Box<[(u64, u16); SLOTS]>,
}

/// Pixel `i` of `channels` planes as one key.
#[inline(always)]
fn key(planes: &[Vec<u16>], channels: usize, i: usize) -> u64 {
    (0..channels).fold(0u64, |k, c| k << 16 | planes[c][i] as u64)
}

impl PaletteBuilder {
    pub(crate) fn new() -> Self {
        PaletteBuilder {
            entries: Vec::with_capacity(PALETTE_MAX as usize),
            slots: Box::new([(0, 0); SLOTS]),
        }
    }

    /// Entries of the last palette found.
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// The slot of pixel `key` in the set: where it is, or the empty slot where it goes.
    #[inline(always)]
    fn slot_of(&self, key: u64) -> usize {
        let mut i = (key.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 54) as usize % SLOTS;
        while self.slots[i].1 != 0 && self.slots[i].0 != key {
            i = (i + 1) % SLOTS;
        }
        i
    }

    /// Whether the patch (`channels` planes of `n` samples) has at most [`PALETTE_MAX`]
    /// distinct pixels; if so they become the palette, sorted by the sum of the samples (so
    /// similar colours get near indices, and a gray ramp stays a ramp). Stops at the first
    /// pixel past the limit (photos get there quickly).
    pub(crate) fn find(&mut self, planes: &[Vec<u16>], channels: usize, n: usize) -> bool {
        self.slots.fill((0, 0));
        self.entries.clear();
        for i in 0..n {
            let k = key(planes, channels, i);
            let at = self.slot_of(k);
            if self.slots[at].1 == 0 {
                if self.entries.len() == PALETTE_MAX as usize {
                    return false;
                }
                self.slots[at] = (k, 1);
                self.entries.push(k);
            }
        }
        let sum = |k: u64| (0..4).map(|c| (k >> (16 * c)) & 0xffff).sum::<u64>();
        self.entries.sort_unstable_by_key(|&k| (sum(k), k));
        for index in 0..self.entries.len() {
            let at = self.slot_of(self.entries[index]);
            self.slots[at].1 = index as u16 + 1;
        }
        true
    }

    /// Whether a one-channel palette's values are sparse in their range (at most half of it
    /// used): label maps are, photos' dense ranges are not, and every 8-bit gray patch has
    /// at most 256 values, so without this test every gray photo patch would pay for a
    /// second predictor search that the palette seldom wins.
    pub(crate) fn sparse(&self) -> bool {
        match (self.entries.iter().min(), self.entries.iter().max()) {
            (Some(&lo), Some(&hi)) => 2 * self.entries.len() as u64 <= hi - lo + 1,
            _ => false,
        }
    }

    /// The index plane of the palette last found (the same `planes`) into `index`.
    pub(crate) fn index_plane(&self, planes: &[Vec<u16>], channels: usize, index: &mut [u16]) {
        for (i, o) in index.iter_mut().enumerate() {
            *o = self.slots[self.slot_of(key(planes, channels, i))].1 - 1;
        }
    }

    /// Writes the palette as the stream holds it: count - 1, then each entry's samples.
    pub(crate) fn write(&self, w: &mut BitWriter, channels: usize, depth: u8) {
        w.write(self.entries.len() as u32 - 1, PALETTE_COUNT_BITS);
        for &k in &self.entries {
            for c in 0..channels {
                let sample = (k >> (16 * (channels - 1 - c))) & 0xffff;
                w.write(sample as u32, depth as u32);
            }
        }
    }
}

/// A patch's palette as the decoder holds it, reused from patch to patch.
pub(crate) struct PatchPalette {
    /// Entries (0: the patch has no palette).
    count: u32,
    /// Planar: channel `c` of entry `i` at `c * PALETTE_MAX + i`.
    planar: Vec<u16>,
    /// Each entry as the bytes of one interleaved output pixel (its samples from byte 0, 1
    /// or 2 bytes each in native byte order), so that an interleaved output takes a pixel
    /// with one load and one store.
    packed: Box<[u64; PALETTE_MAX as usize]>,
    /// The first [`SMALL_PALETTE`] entries' low bytes: for 1-byte pixels from a palette that
    /// small, two byte shuffles look up 32 pixels (`palette_avx2::write_bytes`).
    small: [u8; SMALL_PALETTE],
}

/// Palettes of at most this many entries are looked up by a byte shuffle (1-byte pixels).
const SMALL_PALETTE: usize = 32;

impl PatchPalette {
    pub(crate) fn new() -> Self {
        PatchPalette {
            count: 0,
            planar: vec![0; 4 * PALETTE_MAX as usize],
            packed: Box::new([0; PALETTE_MAX as usize]),
            small: [0; SMALL_PALETTE],
        }
    }

    /// Reads `count` entries starting at bit `start` of `stream`.
    pub(crate) fn read(&mut self, h: &Header, stream: &[u8], start: u64, count: u32) {
        let mut r = BitReader::new(stream);
        r.skip(start);
        let bytes_per_sample = h.bytes_per_sample();
        self.count = count;
        for i in 0..count as usize {
            let mut pixel = [0u8; 8];
            for c in 0..h.channels() as usize {
                let sample = r.read(h.depth as u32) as u16;
                self.planar[c * PALETTE_MAX as usize + i] = sample;
                let bytes = &mut pixel[c * bytes_per_sample..][..bytes_per_sample];
                bytes.copy_from_slice(&sample.to_ne_bytes()[..bytes_per_sample]);
            }
            self.packed[i] = u64::from_ne_bytes(pixel);
        }
        self.copy_small();
    }

    /// Copies the first entries' low bytes into `small` (after `packed` changed).
    fn copy_small(&mut self) {
        for (b, &p) in self.small.iter_mut().zip(self.packed.iter()) {
            *b = p as u8;
        }
    }

    /// Checks one row of indices: the largest one when it is past the palette.
    #[inline(always)]
    pub(crate) fn check_row(&self, indices: &[u16]) -> Result<(), u16> {
        let largest = indices.iter().copied().max().unwrap_or(0);
        if largest as u32 >= self.count {
            return Err(largest);
        }
        Ok(())
    }

    /// Looks one row of checked indices up into `OUT` planar channel rows of `out`
    /// (`stride` apart).
    #[inline(always)]
    pub(crate) fn expand_row<const OUT: usize>(
        &self,
        indices: &[u16],
        out: &mut [u16],
        stride: usize,
    ) {
        for c in 0..OUT {
            let table = &self.planar[c * PALETTE_MAX as usize..][..PALETTE_MAX as usize];
            for (o, &i) in out[c * stride..][..indices.len()].iter_mut().zip(indices) {
                *o = table[i as usize & (PALETTE_MAX as usize - 1)];
            }
        }
    }

    /// Writes one row of checked indices as interleaved pixels of `N` bytes each (see
    /// `packed`) into `dst` (`N x indices.len()` bytes).
    /// With `avx2`, 3- and 4-byte pixels go eight at a time, and 1-byte pixels from a palette
    /// of at most [`SMALL_PALETTE`] entries 32 at a time (`palette_avx2`).
    #[inline(always)]
    pub(crate) fn write_pixels<const N: usize>(
        &self,
        indices: &[u16],
        dst: &mut [u8],
        avx2: Option<Avx2>,
    ) {
        #[cfg_attr(not(target_arch = "x86_64"), allow(unused_mut))]
        let (mut indices, mut dst) = (indices, dst);
        #[cfg(target_arch = "x86_64")]
        if (N == 3 || N == 4) && avx2.is_some() {
            // SAFETY: an `Avx2` exists only on a CPU with AVX2 (Avx2::detect).
            let done =
                unsafe { super::palette_avx2::write_pixels::<N>(&self.packed, indices, dst) };
            indices = &indices[done..];
            dst = &mut dst[done * N..];
        }
        #[cfg(target_arch = "x86_64")]
        if N == 1 && avx2.is_some() && self.count as usize <= SMALL_PALETTE {
            // SAFETY: as above.
            let done = unsafe { super::palette_avx2::write_bytes(&self.small, indices, dst) };
            indices = &indices[done..];
            dst = &mut dst[done..];
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = avx2;
        for (o, &i) in dst.chunks_exact_mut(N).zip(indices) {
            let pixel = self.packed[i as usize & (PALETTE_MAX as usize - 1)].to_ne_bytes();
            o.copy_from_slice(&pixel[..N]);
        }
    }
}

impl PaletteLookup for PatchPalette {
    #[inline(always)]
    fn expand_row<const OUT: usize>(&self, indices: &[u16], out: &mut [u16], stride: usize) {
        PatchPalette::expand_row::<OUT>(self, indices, out, stride)
    }

    #[inline(always)]
    fn write_pixels<const N: usize>(&self, indices: &[u16], dst: &mut [u8], avx2: Option<Avx2>) {
        PatchPalette::write_pixels::<N>(self, indices, dst, avx2)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The AVX2 lookup writes the same pixels as the scalar loop, for every row length to
    /// 70, 3- and 4-byte pixels from a full palette and 1-byte pixels from palettes of 1 to
    /// 32 entries, and nothing past the row.
    #[test]
    fn avx2_and_scalar_pixel_writes_agree() {
        let Some(avx2) = Avx2::detect() else {
            eprintln!("no AVX2 on this CPU: nothing to compare");
            return;
        };
        let mut palette = PatchPalette::new();
        palette.count = PALETTE_MAX;
        for (i, p) in palette.packed.iter_mut().enumerate() {
            *p = (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
        let indices: Vec<u16> = (0..70u32).map(|i| (i * 97 % 256) as u16).collect();
        for len in 0..=70 {
            for n in [3usize, 4] {
                // A guard byte past the row must stay as it is.
                let mut expected = vec![0xa5u8; n * len + 1];
                let mut got = expected.clone();
                let row = &indices[..len];
                match n {
                    3 => {
                        palette.write_pixels::<3>(row, &mut expected[..3 * len], None);
                        palette.write_pixels::<3>(row, &mut got[..3 * len], Some(avx2));
                    }
                    _ => {
                        palette.write_pixels::<4>(row, &mut expected[..4 * len], None);
                        palette.write_pixels::<4>(row, &mut got[..4 * len], Some(avx2));
                    }
                }
                assert_eq!(got, expected, "{len} pixels of {n} bytes");
            }
        }
        for count in 1..=SMALL_PALETTE as u32 {
            let mut small = PatchPalette::new();
            small.count = count;
            for (i, p) in small.packed.iter_mut().take(count as usize).enumerate() {
                *p = (i as u64 * 37 + 200) & 0xff;
            }
            small.copy_small();
            let indices: Vec<u16> = (0..70u32)
                .map(|i| ((i * 7 + i / 5) % count) as u16)
                .collect();
            for len in 0..=70 {
                let mut expected = vec![0xa5u8; len + 1];
                let mut got = expected.clone();
                let row = &indices[..len];
                small.write_pixels::<1>(row, &mut expected[..len], None);
                small.write_pixels::<1>(row, &mut got[..len], Some(avx2));
                assert_eq!(got, expected, "{len} 1-byte pixels, {count} entries");
                for (&o, &i) in expected.iter().zip(row) {
                    assert_eq!(o as u64, small.packed[i as usize], "the scalar lookup");
                }
            }
        }
    }
}
