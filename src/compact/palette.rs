//! The compact profile's palette transform (SPEC "Version 2 (compact) streams", transform 2):
//! a patch of at most [`PALETTE_MAX`] distinct pixels stores the list and one plane of
//! indices into it. The encoder side finds the pixels, orders them and writes the list and
//! the index plane; the decoder side reads the list and looks the indices up at output.

use crate::codec::bits::{BitReader, BitWriter};
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

/// Reads `count` palette entries starting at bit `start` of `stream` into `palette`,
/// planar: channel `c` of entry `i` at `c * PALETTE_MAX + i`.
pub(crate) fn read(h: &Header, stream: &[u8], start: u64, count: u32, palette: &mut [u16]) {
    let mut r = BitReader::new(stream);
    r.skip(start);
    for i in 0..count as usize {
        for c in 0..h.channels() as usize {
            palette[c * PALETTE_MAX as usize + i] = r.read(h.depth as u32) as u16;
        }
    }
}

/// Looks one row of `pw` indices up in a planar `palette` of `count` entries, into `OUT`
/// channel rows of `out` (`stride` apart). An index past the palette is an error: the
/// largest index is returned and nothing is written.
#[inline(always)]
pub(crate) fn expand_row<const OUT: usize>(
    indices: &[u16],
    palette: &[u16],
    count: u32,
    out: &mut [u16],
    stride: usize,
) -> Result<(), u16> {
    let largest = indices.iter().copied().max().unwrap_or(0);
    if largest as u32 >= count {
        return Err(largest);
    }
    for c in 0..OUT {
        let table = &palette[c * PALETTE_MAX as usize..][..PALETTE_MAX as usize];
        for (o, &i) in out[c * stride..][..indices.len()].iter_mut().zip(indices) {
            *o = table[i as usize];
        }
    }
    Ok(())
}
