//! What the error-bounded encoder's two predictors share: the options, the input (regular
//! cells, offset, bound), a candidate before and after its entropy stage, the size estimates
//! settings are ranked by, and exception runs. Below `encode` and `lattice_encode`.

use super::format::*;
use super::tokens::encode_chunks;
use crate::error::Result;
use crate::field::core::container::CRC_LEN;
use crate::field::core::runs::{write_runs, Run};
use crate::field::core::tokens::token_of;
use crate::field::Bound;

/// Options of [`encode_bounded`](super::encode_bounded).
#[derive(Debug, Clone, PartialEq)]
pub struct BoundedOptions {
    /// The bound (no default): every regular decoded value is within it; a relative bound is
    /// resolved over the array's regular values ([`Bound::resolve`]).
    pub bound: Bound,
    /// A fill value (missing data) stored exactly, like NaN (default none).
    pub fill_value: Option<f32>,
    /// Use this predictor, or `None` for the one whose file is smaller (default `None`).
    pub predictor: Option<Predictor>,
    /// The differences predictor's axis set (bit `a` differences along axis `a`; nonzero,
    /// below `2^ndim`), or `None` for the set an estimate finds smallest (default `None`).
    /// Fixing it skips the estimate (one pass over the array per candidate set).
    pub axes: Option<u8>,
    /// log2 of the values per chunk, 8 to 20 (default 16).
    pub chunk_log2: u8,
    /// Segments per chunk, 1 to 32 (default 8).
    pub segments: u8,
    /// Encode on rayon's thread pool (default true).
    pub parallel: bool,
}

impl BoundedOptions {
    /// `bound` (a bare `f64` is absolute) with the defaults.
    pub fn new(bound: impl Into<Bound>) -> Self {
        BoundedOptions {
            bound: bound.into(),
            fill_value: None,
            predictor: None,
            axes: None,
            chunk_log2: 16,
            segments: 8,
            parallel: true,
        }
    }
}

pub(super) use crate::field::encode::unit_for;

/// An encoded candidate: its header (without chunk table), runs and chunks.
pub(super) struct Candidate {
    pub header: BoundedHeader,
    pub runs: Vec<u8>,
    pub chunks: Vec<Vec<u8>>,
}

/// A candidate before its entropy stage: header, runs section and zigzag stream.
pub(super) struct Pending {
    pub header: BoundedHeader,
    pub runs: Vec<u8>,
    pub z: Vec<u32>,
}

impl Pending {
    /// Estimated bits of the file: [`run_bits`] of the stream plus the runs section.
    pub fn estimate(&self) -> f64 {
        run_bits(&self.z) + 8.0 * self.runs.len() as f64
    }

    /// The candidate: the stream coded in chunks.
    pub fn code(self, options: &BoundedOptions) -> Candidate {
        let chunks = encode_chunks(
            &self.z,
            options.chunk_log2,
            options.segments as usize,
            options.parallel,
        );
        super::scratch::give(self.z);
        Candidate {
            header: self.header,
            runs: self.runs,
            chunks,
        }
    }
}

impl Candidate {
    pub fn len(&self) -> usize {
        self.header.to_bytes().len()
            + 4 * self.chunks.len()
            + self.runs.len()
            + self.chunks.iter().map(Vec::len).sum::<usize>()
            + CRC_LEN
    }

    pub fn into_bytes(self) -> Vec<u8> {
        let mut out = self.header.to_bytes();
        out.reserve(self.len());
        for c in &self.chunks {
            out.extend_from_slice(&(c.len() as u32).to_le_bytes());
        }
        out.extend_from_slice(&self.runs);
        for c in &self.chunks {
            out.extend_from_slice(c);
        }
        let crc = crc32fast::hash(&out);
        out.extend_from_slice(&crc.to_le_bytes());
        out
    }
}

/// Estimated bits of a zigzag stream: order-0 entropy of its single tokens plus raw bits.
pub(super) fn quick_bits(z: &[u32]) -> f64 {
    let mut hist = [0u64; SINGLES as usize];
    let mut raw = 0u64;
    for &v in z {
        let (t, r, _) = token_of(v);
        hist[t as usize] += 1;
        raw += r as u64;
    }
    quick_bits_of(&hist, raw, z.len())
}

/// [`quick_bits`] of a stream of `n` values from its single tokens' histogram and raw bits
/// (the GPU encoder's estimate sums its histograms and calls this).
pub(super) fn quick_bits_of(hist: &[u64], raw: u64, n: usize) -> f64 {
    let n = n as f64;
    raw as f64
        - hist
            .iter()
            .filter(|&&c| c > 0)
            .map(|&c| c as f64 * (c as f64 / n).log2())
            .sum::<f64>()
}

/// Estimated bits of a zigzag stream as [`quick_bits`], with each zero run of 4 or more
/// counted as one run symbol plus its length's bits (as the token stage codes it): sparse
/// streams rank by their non-zero values, not by their zeros.
pub(super) fn run_bits(z: &[u32]) -> f64 {
    let mut hist = [0u64; SINGLES as usize + 1];
    let mut raw = 0u64;
    let mut i = 0;
    while i < z.len() {
        if z[i] == 0 {
            let run = zero_run(&z[i..]);
            if run >= 4 {
                hist[SINGLES as usize] += 1;
                raw += (usize::BITS - run.leading_zeros()) as u64;
                i += run;
                continue;
            }
        }
        let (t, r, _) = token_of(z[i]);
        hist[t as usize] += 1;
        raw += r as u64;
        i += 1;
    }
    quick_bits_of(&hist, raw, hist.iter().sum::<u64>() as usize)
}

/// The number of zeros `z` starts with, 16 values at a time (a vectorised OR) while they are
/// all zero.
#[inline]
pub(super) fn zero_run(z: &[u32]) -> usize {
    let mut n = 0;
    let mut blocks = z.chunks_exact(16);
    for b in &mut blocks {
        if b.iter().fold(0, |a, &v| a | v) != 0 {
            return n + b.iter().take_while(|&&v| v == 0).count();
        }
        n += 16;
    }
    n + blocks.remainder().iter().take_while(|&&v| v == 0).count()
}

/// Runs of equal bits over the exception cells, and the runs section's bytes.
pub(super) fn runs_of(values: &[f32], exc: impl Iterator<Item = usize>) -> Result<(u32, Vec<u8>)> {
    let mut runs: Vec<Run> = Vec::new();
    for i in exc {
        let bits = values[i].to_bits();
        match runs.last_mut() {
            Some(r) if r.bits == bits && r.start + r.len == i as u32 => r.len += 1,
            _ => runs.push(Run {
                start: i as u32,
                len: 1,
                bits,
            }),
        }
    }
    let mut out = Vec::new();
    if !runs.is_empty() {
        write_runs(&runs, &mut out)?;
    }
    Ok((runs.len() as u32, out))
}

/// The common part of the input: shape, bound, regular cells, offset.
pub(super) struct Input<'a> {
    pub(super) values: &'a [f32],
    pub(super) shape: &'a [u32],
    pub(super) bound: f64,
    /// Cells that are not regular (NaN, infinities, the fill value).
    pub(super) special: Vec<bool>,
    pub(super) offset: f32,
    /// Largest regular value minus the offset (0 without regular values).
    pub(super) range: f64,
    pub(super) options: &'a BoundedOptions,
}

impl Input<'_> {
    pub(super) fn header(&self, predictor: Predictor, unit: f32) -> BoundedHeader {
        BoundedHeader {
            shape: self.shape.to_vec(),
            bound: self.bound,
            offset: self.offset,
            unit,
            fill_value: self.options.fill_value,
            predictor,
            axes: Vec::new(),
            segments: self.options.segments,
            chunk_log2: self.options.chunk_log2,
            levels: 0,
            steps: Vec::new(),
            cubic: Vec::new(),
            runs: 0,
            runs_len: 0,
        }
    }

    /// The cells stored exactly: special ones and those whose reconstruction
    /// `offset + f32(x) * unit` is subnormal or misses the bound.
    pub(super) fn misses(&self, x: &[i32], unit: f32) -> impl Iterator<Item = usize> + '_ {
        let miss = |v: f32, special: bool, x: i32| {
            let r = self.offset + x as f32 * unit;
            let b = r.to_bits();
            let subnormal = (b & 0x7f80_0000 == 0) & (b & 0x007f_ffff != 0);
            special | subnormal | ((r as f64 - v as f64).abs() > self.bound)
        };
        // Blocks of cells checked without branches first (a vectorised loop); only a block
        // with a miss is walked.
        const BLOCK: usize = 64;
        let mut bad = Vec::new();
        let blocks = self.values.chunks(BLOCK).zip(self.special.chunks(BLOCK));
        for (j, ((v, sp), x)) in blocks.zip(x.chunks(BLOCK)).enumerate() {
            let cells = v.iter().zip(sp).zip(x);
            if cells
                .clone()
                .fold(false, |a, ((&v, &s), &x)| a | miss(v, s, x))
            {
                let at = cells
                    .enumerate()
                    .filter(|(_, ((&v, &s), &x))| miss(v, s, x));
                bad.extend(at.map(|(k, _)| j * BLOCK + k));
            }
        }
        bad.into_iter()
    }
}
