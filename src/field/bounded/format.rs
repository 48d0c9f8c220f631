//! The error-bounded array format in code (SPEC.md, "Error-bounded float arrays"): constants,
//! the header ([`BoundedHeader`], [`parse_bounded`]), the file layout checked before decoding
//! ([`parse_layout`]: lengths, CRC, exception runs, chunk table), one chunk's layout
//! ([`parse_chunk`]) and the token alphabet (singles, pairs, zero runs).

use crate::codec::bits::BitReader;
use crate::decode::DecodeOptions;
use crate::error::{FormatError, Result};
use crate::field::core::container::{
    self, check_chunk_end, check_start, chunk_error, header_sizes, invalid, read_shape,
    take_segments, truncated, u32_at, ChunkedHeader, Sections, Stream, CHUNK_LOG2_MAX,
    CHUNK_LOG2_MIN, MAX_SEGMENTS,
};
use crate::field::core::tokens::{check_lengths, token_base};
use crate::field::format::bin_width_significand_bits;
use crate::field::{BIN_WIDTH_BITS, FIELD_MAGIC};
use crate::format::compact::CODE_LENGTH_BITS;

/// Version byte of an error-bounded array of 1 to 4 axes.
pub const BOUNDED_VERSION: u8 = 3;
/// Most axes of an error-bounded array.
pub const BOUNDED_MAX_NDIM: usize = 4;
/// Header flag: a fill value is declared.
pub const BOUNDED_FLAG_FILL: u8 = 1;
/// Lattice steps per quantisation step at most (the finest level's step).
pub const LATTICE_STEP_MAX: u32 = 16;
/// Significant bits of the lattice unit at most.
pub const LATTICE_UNIT_BITS: u32 = 7;
/// Significant bits of a reconstruction product `f32(x) x unit` at most (so it is exact).
pub const PRODUCT_BITS: u32 = 24;
pub use crate::format::floats::{
    BOUNDED_ALPHABET, BOUNDED_MAX_BINS, BOUNDED_RUN_MAX, BOUNDED_RUN_TOKENS, PAIR0, PAIR_LIMIT,
    RUN0, SINGLES,
};

/// Bytes of the header before the predictor's tables, for `ndim` axes.
pub const fn bounded_fixed_len(ndim: usize) -> usize {
    44 + 4 * ndim
}

/// The predictor of an error-bounded array.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Predictor {
    /// Closed-loop interpolation on a lattice (id 0).
    Lattice,
    /// Differences of dual-quantised bins along an axis set (id 1).
    Differences,
}

/// What a token decodes to: `(base, raw bit count, flags)` with the lossless coder's entry
/// flags; a single's value and a run's length are `base + raw`, a pair's two values are the
/// base's low and high 16 bits.
pub(super) fn bounded_token(t: u32) -> (u32, u32, u64) {
    use crate::field::core::code::{ENTRY_PAIR, ENTRY_RUN};
    if t < PAIR0 {
        let (b, n, _) = token_base(32, t);
        (b, n, 0)
    } else if t < RUN0 {
        let p = t - PAIR0;
        ((p / PAIR_LIMIT) | ((p % PAIR_LIMIT) << 16), 0, ENTRY_PAIR)
    } else {
        let j = t - RUN0 + 1;
        (1 << j, j, ENTRY_RUN)
    }
}

/// Token of a run of `n` zeros (2 ..= BOUNDED_RUN_MAX): `(token, raw bit count, raw bits)`.
#[inline(always)]
pub(super) fn run_token(n: u32) -> (u32, u32, u32) {
    let j = 31 - n.leading_zeros();
    (RUN0 + j - 1, j, n & ((1 << j) - 1))
}

/// Levels of the lattice predictor for `shape`: `ceil(log2(largest axis))`.
pub fn levels_for(shape: &[u32]) -> u32 {
    let m = shape.iter().copied().max().unwrap_or(1);
    if m <= 1 {
        0
    } else {
        32 - (m - 1).leading_zeros()
    }
}

/// The largest `|x|` + 1 of a lattice value for `unit`: products `f32(x) x unit` stay exact.
pub fn lattice_limit(unit: f32) -> i64 {
    1i64 << (PRODUCT_BITS - bin_width_significand_bits(unit))
}

/// The header of an error-bounded array.
#[derive(Debug, Clone, PartialEq)]
pub struct BoundedHeader {
    /// Shape, C order (last axis fastest), 1 to 4 axes.
    pub shape: Vec<u32>,
    /// The absolute bound every regular value is within.
    pub bound: f64,
    /// The value of lattice point (or bin) 0.
    pub offset: f32,
    /// The lattice unit (lattice predictor) or the bin width (differences).
    pub unit: f32,
    /// The declared fill value, if any.
    pub fill_value: Option<f32>,
    /// The predictor.
    pub predictor: Predictor,
    /// Lattice: the axis order of each level's passes. Differences: the axes differenced
    /// along (bit `a` = axis `a`), as the first entry's bits.
    pub axes: Vec<u8>,
    /// Segments per chunk.
    pub segments: u8,
    /// log2 of the values per chunk.
    pub chunk_log2: u8,
    /// Lattice: levels `L`; differences: 0.
    pub levels: u8,
    /// Lattice: lattice units per quantisation step of the passes of stride `2^l` (entry
    /// `l`), and of value 0 (entry `L`). Differences: empty.
    pub steps: Vec<u8>,
    /// Lattice: per pass (decode order), whether it predicts cubically.
    pub cubic: Vec<bool>,
    /// Exception runs.
    pub runs: u32,
    /// Bytes of the runs section.
    pub runs_len: u32,
}

header_sizes!(BoundedHeader);

impl BoundedHeader {
    /// Bytes of the predictor's tables after the fixed header.
    fn tables_len(&self) -> usize {
        match self.predictor {
            Predictor::Lattice => {
                let l = self.levels as usize;
                l + 1 + (l * self.shape.len()).div_ceil(8)
            }
            Predictor::Differences => 0,
        }
    }

    /// The axes byte of the header.
    fn axes_byte(&self) -> u8 {
        match self.predictor {
            Predictor::Lattice => self
                .axes
                .iter()
                .enumerate()
                .fold(0, |b, (k, &a)| b | a << (2 * k)),
            Predictor::Differences => self.axes.first().copied().unwrap_or(0),
        }
    }

    /// The header's bytes up to the chunk table.
    pub(super) fn to_bytes(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(bounded_fixed_len(self.shape.len()) + self.tables_len());
        b.extend_from_slice(&FIELD_MAGIC);
        b.push(BOUNDED_VERSION);
        b.push(self.shape.len() as u8);
        b.push(if self.fill_value.is_some() {
            BOUNDED_FLAG_FILL
        } else {
            0
        });
        b.push(match self.predictor {
            Predictor::Lattice => 0,
            Predictor::Differences => 1,
        });
        for d in &self.shape {
            b.extend_from_slice(&d.to_le_bytes());
        }
        b.extend_from_slice(&self.bound.to_le_bytes());
        b.extend_from_slice(&self.offset.to_bits().to_le_bytes());
        b.extend_from_slice(&self.unit.to_bits().to_le_bytes());
        b.extend_from_slice(&self.fill_value.map_or(0, f32::to_bits).to_le_bytes());
        b.extend_from_slice(&[
            self.axes_byte(),
            self.segments,
            self.chunk_log2,
            self.levels,
        ]);
        b.extend_from_slice(&self.runs.to_le_bytes());
        b.extend_from_slice(&self.runs_len.to_le_bytes());
        if self.predictor == Predictor::Lattice {
            b.extend_from_slice(&self.steps);
            let mut kinds = vec![0u8; self.cubic.len().div_ceil(8)];
            for (j, &c) in self.cubic.iter().enumerate() {
                kinds[j / 8] |= (c as u8) << (j % 8);
            }
            b.extend_from_slice(&kinds);
        }
        b
    }
}

/// Parses and validates the header of an error-bounded array with its predictor's tables
/// (not its chunk table): cheap, nothing allocated beyond the shape and tables.
pub fn parse_bounded(data: &[u8]) -> Result<BoundedHeader> {
    const WHAT: &str = "error-bounded array header";
    check_start(data, WHAT, BOUNDED_VERSION)?;
    let ndim = data[9] as usize;
    if !(1..=BOUNDED_MAX_NDIM).contains(&ndim) {
        return Err(invalid("ndim", 9, ndim as u64, "must be 1 to 4").into());
    }
    let flags = data[10];
    if flags & !BOUNDED_FLAG_FILL != 0 {
        return Err(invalid("flags", 10, flags as u64, "only bit 0 is defined").into());
    }
    let predictor = match data[11] {
        0 => Predictor::Lattice,
        1 => Predictor::Differences,
        p => return Err(invalid("predictor", 11, p as u64, "0 lattice, 1 differences").into()),
    };
    let fixed = bounded_fixed_len(ndim);
    let shape = read_shape(data, ndim, fixed, WHAT)?;
    let p = 12 + 4 * ndim;
    let bound = f64::from_le_bytes(data[p..p + 8].try_into().expect("8 bytes"));
    if !(bound.is_finite() && bound > 0.0) {
        return Err(invalid("bound", p, bound.to_bits(), "must be finite and positive").into());
    }
    let offset = f32::from_bits(u32_at(data, p + 8));
    if !offset.is_finite() || offset.is_subnormal() {
        return Err(invalid(
            "offset",
            p + 8,
            offset.to_bits() as u64,
            "must be finite, not subnormal",
        )
        .into());
    }
    let unit = f32::from_bits(u32_at(data, p + 12));
    let fill = u32_at(data, p + 16);
    if flags & BOUNDED_FLAG_FILL == 0 && fill != 0 {
        return Err(invalid(
            "fill",
            p + 16,
            fill as u64,
            "must be 0 without the fill flag",
        )
        .into());
    }
    let (axes_byte, segments, chunk_log2, levels) =
        (data[p + 20], data[p + 21], data[p + 22], data[p + 23]);
    if !(1..=MAX_SEGMENTS).contains(&segments) {
        return Err(invalid("segments", p + 21, segments as u64, "must be 1 to 32").into());
    }
    if !(CHUNK_LOG2_MIN..=CHUNK_LOG2_MAX).contains(&chunk_log2) {
        return Err(invalid("chunk_log2", p + 22, chunk_log2 as u64, "must be 8 to 20").into());
    }
    let unit_ok = |bits: u32, steps_max: u32| {
        unit.is_normal()
            && unit > 0.0
            && bin_width_significand_bits(unit) <= bits
            && unit as f64 * (steps_max + 1) as f64 <= 2.0 * bound
    };
    let mut steps = Vec::new();
    let mut cubic = Vec::new();
    let axes = match predictor {
        Predictor::Lattice => {
            let want = levels_for(&shape);
            if levels as u32 != want {
                return Err(invalid(
                    "levels",
                    p + 23,
                    levels as u64,
                    "must be ceil(log2(largest axis))",
                )
                .into());
            }
            let order: Vec<u8> = (0..ndim).map(|k| axes_byte >> (2 * k) & 3).collect();
            let mut seen = 0u8;
            for &a in &order {
                seen |= 1 << a;
            }
            if seen != (1u8 << ndim) - 1 || (axes_byte as u32) >> (2 * ndim) != 0 {
                return Err(invalid(
                    "axes",
                    p + 20,
                    axes_byte as u64,
                    "the axis order must be a permutation of the axes",
                )
                .into());
            }
            let l = levels as usize;
            let kinds_len = (l * ndim).div_ceil(8);
            let t = fixed + l + 1 + kinds_len;
            if data.len() < t {
                return Err(truncated(WHAT, t, data.len()).into());
            }
            steps = data[fixed..fixed + l + 1].to_vec();
            if let Some(k) = steps
                .iter()
                .position(|&s| s == 0 || s as u32 > LATTICE_STEP_MAX)
            {
                return Err(invalid("steps", fixed + k, steps[k] as u64, "must be 1 to 16").into());
            }
            let kinds = &data[fixed + l + 1..t];
            cubic = (0..l * ndim)
                .map(|j| kinds[j / 8] >> (j % 8) & 1 == 1)
                .collect();
            if !(l * ndim).is_multiple_of(8) && kinds[kinds_len - 1] >> ((l * ndim) % 8) != 0 {
                return Err(invalid(
                    "kinds",
                    t - 1,
                    kinds[kinds_len - 1] as u64,
                    "bits past the last pass must be zero",
                )
                .into());
            }
            let smax = steps.iter().copied().max().unwrap_or(1) as u32;
            if !unit_ok(LATTICE_UNIT_BITS, smax) {
                return Err(invalid(
                    "unit",
                    p + 12,
                    unit.to_bits() as u64,
                    "positive, normal, at most 7 significant bits, (largest step + 1) x unit <= 2 x bound",
                )
                .into());
            }
            order
        }
        Predictor::Differences => {
            if levels != 0 {
                return Err(invalid("levels", p + 23, levels as u64, "must be 0").into());
            }
            if axes_byte >> ndim != 0 {
                return Err(invalid(
                    "axes",
                    p + 20,
                    axes_byte as u64,
                    "a bit set past the last axis",
                )
                .into());
            }
            if !unit_ok(BIN_WIDTH_BITS, 0) {
                return Err(invalid(
                    "unit",
                    p + 12,
                    unit.to_bits() as u64,
                    "positive, normal, at most 8 significant bits, <= 2 x bound",
                )
                .into());
            }
            vec![axes_byte]
        }
    };
    Ok(BoundedHeader {
        shape,
        bound,
        offset,
        unit,
        fill_value: (flags & BOUNDED_FLAG_FILL != 0).then_some(f32::from_bits(fill)),
        predictor,
        axes,
        segments,
        chunk_log2,
        levels,
        steps,
        cubic,
        runs: u32_at(data, p + 24),
        runs_len: u32_at(data, p + 28),
    })
}

impl ChunkedHeader for BoundedHeader {
    const FILE: &'static str = "error-bounded array (header, chunk table, runs and CRC)";
    const CHUNK: &'static str = "error-bounded chunk";

    fn parse(data: &[u8]) -> Result<Self> {
        parse_bounded(data)
    }

    fn sections(&self) -> Sections<'_> {
        Sections {
            shape: &self.shape,
            chunk_log2: self.chunk_log2,
            fixed: (bounded_fixed_len(self.shape.len()) + self.tables_len()) as u64,
            value_size: 4,
            runs: (self.runs, self.runs_len),
        }
    }
}

/// A checked error-bounded file.
pub(super) type Layout<'a> = container::Layout<'a, BoundedHeader>;

/// Checks a whole error-bounded file before anything is decoded (see
/// [`container::parse_layout`]).
pub(super) fn parse_layout<'a>(data: &'a [u8], options: &DecodeOptions) -> Result<Layout<'a>> {
    container::parse_layout(data, options)
}

/// Bits of a chunk head's `ntok - 1` field.
pub const NTOK_BITS: u32 = 7;
/// Bits of a chunk head's segment-length width field.
pub const SEG_WIDTH_BITS: u32 = 5;
/// Largest segment-length width.
pub const SEG_WIDTH_MAX: u32 = 25;

/// Reads a chunk's head (the chunk starts at byte `base` of the file) and splits its
/// segments. The head is an LSB-first bit stream: `ntok - 1` ([`NTOK_BITS`]), the code
/// lengths as the image codec writes them ("0" the previous length, "100" one more, "101" one
/// less, "11" and a 4-bit length), the width `w` of the segment lengths ([`SEG_WIDTH_BITS`],
/// at most [`SEG_WIDTH_MAX`]), `segments` byte lengths of `w` bits, zero padding to a byte;
/// the segments follow and must end with the chunk.
pub(super) fn parse_chunk<'a>(
    chunk: &'a [u8],
    base: usize,
    segments: usize,
) -> std::result::Result<Stream<'a>, FormatError> {
    let bad = chunk_error(base);
    let mut r = BitReader::new(chunk);
    let ntok = r.read(NTOK_BITS) + 1;
    if ntok > BOUNDED_ALPHABET {
        return Err(bad("ntok", ntok as u64, "must be 1 to the alphabet size"));
    }
    let mut lengths = vec![0u8; ntok as usize];
    let mut previous = 0u32;
    for l in lengths.iter_mut() {
        if r.read(1) == 1 {
            previous = match r.read(1) {
                0 if r.read(1) == 0 => previous + 1,
                // Wraps below 0 to a length > 11, which check_lengths rejects.
                0 => previous.wrapping_sub(1) & 0xff,
                _ => r.read(CODE_LENGTH_BITS),
            };
        }
        *l = previous.min(0xff) as u8;
    }
    check_lengths(&lengths).map_err(|why| bad("code lengths", ntok as u64, why))?;
    let width = r.read(SEG_WIDTH_BITS);
    if width > SEG_WIDTH_MAX {
        return Err(bad("segment width", width as u64, "must be 0 to 25"));
    }
    let lens: Vec<usize> = (0..segments).map(|_| r.read(width) as usize).collect();
    let pad = (8 - r.position() % 8) % 8;
    if r.read(pad as u32) != 0 {
        return Err(bad("chunk head", pad, "padding bits must be zero"));
    }
    let mut at = (r.position() / 8) as usize;
    if at > chunk.len() {
        return Err(bad("chunk head", at as u64, "past the chunk's end"));
    }
    let segs = take_segments(chunk, &mut at, lens, &bad)?;
    check_chunk_end(chunk, at, &bad)?;
    Ok(Stream {
        lengths,
        segments: segs,
    })
}
