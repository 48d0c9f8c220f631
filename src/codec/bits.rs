//! One generic bit writer and reader, LSB first (bit `i` of a stream is bit `i % 8` of byte
//! `i / 8`), so that a GPU reading the file as little-endian u32 words finds bit `i` at bit
//! `i % 32` of word `i / 32`. The L3 prototype's hand-unrolled packers per bit width had mask
//! errors and no case for widths 0 and 8; here every width 0..=16 goes through the same code.

/// Appends bit fields to a byte vector.
#[derive(Debug, Default)]
pub struct BitWriter {
    bytes: Vec<u8>,
    acc: u64,
    acc_bits: u32,
}

impl BitWriter {
    /// A writer appending after `prefix` (e.g. the stream's predictor byte).
    pub fn with_prefix(prefix: &[u8], capacity: usize) -> Self {
        let mut bytes = Vec::with_capacity(capacity);
        bytes.extend_from_slice(prefix);
        BitWriter {
            bytes,
            acc: 0,
            acc_bits: 0,
        }
    }

    /// Makes room for `bits` more bits, so that writing them does not reallocate.
    pub fn reserve_bits(&mut self, bits: u64) {
        // The accumulator's bits, and the whole words it flushes, past `bits / 8`.
        self.bytes.reserve((bits / 8) as usize + 8);
    }

    /// Writes the low `nbits` bits of `value` (`nbits` <= 32; higher bits of `value` must be 0).
    #[inline(always)]
    pub fn write(&mut self, value: u32, nbits: u32) {
        debug_assert!(nbits <= 32);
        debug_assert!(nbits == 32 || value >> nbits == 0);
        // acc_bits < 32 on entry, so the sum fits the 64-bit accumulator.
        self.acc |= (value as u64) << self.acc_bits;
        self.acc_bits += nbits;
        if self.acc_bits >= 32 {
            self.bytes
                .extend_from_slice(&(self.acc as u32).to_le_bytes());
            self.acc >>= 32;
            self.acc_bits -= 32;
        }
    }

    /// Flushes the last partial bytes, zero-padded, and returns the bytes.
    pub fn finish(mut self) -> Vec<u8> {
        let tail = self.acc_bits.div_ceil(8) as usize;
        self.bytes
            .extend_from_slice(&self.acc.to_le_bytes()[..tail]);
        self.bytes
    }
}

/// Bit fields into a slice sized beforehand, LSB first as [`BitWriter`] writes them, for a hot
/// loop: the state is locals the compiler keeps in registers ([`BitWriter`]'s growth path
/// kept its accumulator in memory, a load and a store on every field's dependency chain).
/// Writing past the slice's end panics: size it from the bits the fields take.
pub(crate) struct SliceBits<'a> {
    out: &'a mut [u8],
    pos: usize,
    acc: u64,
    acc_bits: u32,
}

impl<'a> SliceBits<'a> {
    /// A writer at the start of `out`.
    pub(crate) fn new(out: &'a mut [u8]) -> Self {
        SliceBits {
            out,
            pos: 0,
            acc: 0,
            acc_bits: 0,
        }
    }

    /// As [`BitWriter::write`].
    #[inline(always)]
    pub(crate) fn write(&mut self, value: u32, nbits: u32) {
        debug_assert!(nbits <= 32);
        debug_assert!(nbits == 32 || value >> nbits == 0);
        self.acc |= (value as u64) << self.acc_bits;
        self.acc_bits += nbits;
        if self.acc_bits >= 32 {
            self.out[self.pos..self.pos + 4].copy_from_slice(&(self.acc as u32).to_le_bytes());
            self.pos += 4;
            self.acc >>= 32;
            self.acc_bits -= 32;
        }
    }

    /// Flushes the last partial bytes, zero-padded; returns the bytes written.
    pub(crate) fn finish(self) -> usize {
        let tail = self.acc_bits.div_ceil(8) as usize;
        self.out[self.pos..self.pos + tail].copy_from_slice(&self.acc.to_le_bytes()[..tail]);
        self.pos + tail
    }
}

/// The bits of `bytes` from bit `pos` on, bit `pos` at bit 0: at least 57 valid bits (zeros
/// past the end of `bytes`). An unaligned 8-byte load; the tail of the slice takes the slow
/// path.
#[inline(always)]
pub(crate) fn window(bytes: &[u8], pos: u64) -> u64 {
    let byte = (pos >> 3) as usize;
    let w = match bytes.get(byte..byte + 8) {
        Some(w) => u64::from_le_bytes(w.try_into().expect("8 bytes")),
        None => {
            let mut w = [0u8; 8];
            let tail = bytes.get(byte..).unwrap_or(&[]);
            w[..tail.len()].copy_from_slice(tail);
            u64::from_le_bytes(w)
        }
    };
    w >> (pos & 7)
}

/// Bytes a [`window_unchecked`] load takes.
pub(crate) const WINDOW_BYTES: usize = 8;

/// As [`window`], without the check against the end of `bytes`: the compact decoder's loop,
/// whose row-start check (`ROW_READ_BYTES` in `compact/decode/row.rs`) covers every read of the
/// row. With the row-start check in place of the per-read one: 5-10 % fewer instructions per
/// compact decode on 8-bit photos (docs/bench-history.md, issue 13, fifth pass).
///
/// # Safety
/// `pos / 8 + WINDOW_BYTES <= bytes.len()`.
#[inline(always)]
pub(crate) unsafe fn window_unchecked(bytes: &[u8], pos: u64) -> u64 {
    let byte = (pos >> 3) as usize;
    debug_assert!(byte + WINDOW_BYTES <= bytes.len());
    // SAFETY: the caller's contract puts all eight bytes inside `bytes`.
    let w = unsafe { bytes.as_ptr().add(byte).cast::<u64>().read_unaligned() };
    u64::from_le(w) >> (pos & 7)
}

/// Reads bit fields from a byte slice. Reads past the end see zero bits; callers compare
/// [`BitReader::position`] with the stream's length before reading, so a short stream becomes
/// an error, never a panic.
#[derive(Debug, Clone)]
pub struct BitReader<'a> {
    bytes: &'a [u8],
    pos: u64,
}

impl<'a> BitReader<'a> {
    /// A reader at bit 0 of `bytes`.
    pub fn new(bytes: &'a [u8]) -> Self {
        BitReader { bytes, pos: 0 }
    }

    /// Bits read so far.
    #[inline]
    pub fn position(&self) -> u64 {
        self.pos
    }

    /// Reads `nbits` (<= 25) bits.
    #[inline(always)]
    pub fn read(&mut self, nbits: u32) -> u32 {
        debug_assert!(nbits <= 25);
        let w = window(self.bytes, self.pos);
        self.pos += nbits as u64;
        (w & ((1u64 << nbits) - 1)) as u32
    }

    /// Skips `nbits` bits.
    #[inline]
    pub fn skip(&mut self, nbits: u64) {
        self.pos += nbits;
    }

    /// Reads `out.len()` fields of `nbits` (<= 16) bits each.
    #[inline(always)]
    pub fn read_many(&mut self, nbits: u32, out: &mut [u16]) {
        if nbits == 0 {
            out.fill(0);
            return;
        }
        for v in out.iter_mut() {
            *v = self.read(nbits) as u16;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_width_round_trips() {
        let mut w = BitWriter::default();
        let mut expect = Vec::new();
        for nbits in 0..=16u32 {
            for i in 0..37u32 {
                let v = if nbits == 0 {
                    0
                } else {
                    i.wrapping_mul(2654435761) & ((1 << nbits) - 1)
                };
                w.write(v, nbits);
                expect.push((v, nbits));
            }
        }
        let bytes = w.finish();
        let mut r = BitReader::new(&bytes);
        for (v, nbits) in expect {
            assert_eq!(r.read(nbits), v, "width {nbits}");
        }
        assert!(bytes.len() as u64 * 8 - r.position() < 8);
    }

    #[test]
    fn lsb_first_layout() {
        let mut w = BitWriter::default();
        w.write(0b1, 1);
        w.write(0b10, 2);
        w.write(0xABC, 12);
        let b = w.finish();
        // bits: 1 | 0 1 | 0011 1101 0101 -> byte0 = 0b1110_0101 ... LSB first.
        let word = u16::from_le_bytes([b[0], b[1]]);
        assert_eq!(word & 1, 1);
        assert_eq!((word >> 1) & 3, 2);
        assert_eq!((word >> 3) & 0xFFF, 0xABC);
    }

    /// A slice writer writes the bytes the vector writer does, for fields of every width
    /// 0..=32, into a slice of exactly the bytes they take.
    #[test]
    fn slice_writer_writes_what_the_vector_writer_does() {
        let fields: Vec<(u32, u32)> = (0..2000u32)
            .map(|i| {
                let nbits = i.wrapping_mul(7919) % 33;
                let v = i.wrapping_mul(2654435761);
                (
                    if nbits == 32 {
                        v
                    } else {
                        v & ((1u32 << nbits) - 1)
                    },
                    nbits,
                )
            })
            .collect();
        let mut w = BitWriter::default();
        for &(v, n) in &fields {
            w.write(v, n);
        }
        let expect = w.finish();
        let mut out = vec![0xffu8; expect.len()];
        let mut s = SliceBits::new(&mut out);
        for &(v, n) in &fields {
            s.write(v, n);
        }
        assert_eq!(s.finish(), expect.len());
        assert_eq!(out, expect);
    }
}
