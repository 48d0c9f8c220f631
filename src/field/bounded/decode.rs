//! The error-bounded decoder on the CPU: every chunk's tokens (in parallel when asked) into
//! the residual stream, then the predictor's inverse (the lattice passes in decode order, or
//! the wrapping prefix sums of the differences), one `offset + f32(x) x unit` per value, and
//! the exception runs last.

use rayon::prelude::*;

use super::format::*;
use super::predict::{differences_inverse, lattice_inverse, passes, Geometry};
use super::tokens::decode_chunks;
use crate::decode::DecodeOptions;
use crate::error::{FormatError, ParameterError, Result};

/// The decoded value of lattice value (or bin) `x`: one f32 addition of an exact product.
#[inline(always)]
pub fn reconstruct_bounded(x: i32, offset: f32, unit: f32) -> f32 {
    offset + x as f32 * unit
}

/// Decodes an error-bounded array on the CPU: its header and values (C order).
pub fn decode_bounded(data: &[u8], options: &DecodeOptions) -> Result<(BoundedHeader, Vec<f32>)> {
    let layout = parse_layout(data, options)?;
    let mut out = vec![0f32; layout.header.len() as usize];
    decode_layout(&layout, data, options, &mut out)?;
    Ok((layout.header, out))
}

/// Decodes an error-bounded array into `out`, whose length must be the array's values.
pub fn decode_bounded_into(
    data: &[u8],
    options: &DecodeOptions,
    out: &mut [f32],
) -> Result<BoundedHeader> {
    let layout = parse_layout(data, options)?;
    let needed = layout.header.len() as usize;
    if out.len() != needed {
        return Err(ParameterError::BufferSize {
            got: out.len(),
            needed,
        }
        .into());
    }
    decode_layout(&layout, data, options, out)?;
    Ok(layout.header)
}

/// Applies `f` to every value, on rayon's pool when asked.
fn map_values(out: &mut [f32], parallel: bool, f: impl Fn(&mut f32) + Sync) {
    const BLOCK: usize = 1 << 16;
    if parallel {
        out.par_chunks_mut(BLOCK)
            .for_each(|c| c.iter_mut().for_each(&f));
    } else {
        out.iter_mut().for_each(f);
    }
}

fn decode_layout(
    layout: &Layout<'_>,
    data: &[u8],
    options: &DecodeOptions,
    out: &mut [f32],
) -> Result<()> {
    let h = &layout.header;
    let parallel = options.parallel && rayon::current_num_threads() > 1;
    let (offset, unit) = (h.offset, h.unit);
    match h.predictor {
        Predictor::Lattice => {
            let mut z = vec![0u32; out.len()];
            decode_chunks(
                data,
                &layout.chunks,
                h.chunk_log2,
                h.segments as usize,
                parallel,
                &mut z,
            )?;
            let geo = Geometry::new(&h.shape);
            let ps = passes(h.shape.len(), h.levels as u32, &h.axes);
            let x: &mut [i32] = bytemuck::cast_slice_mut(out);
            lattice_inverse(&geo, &ps, &z, &h.steps, &h.cubic, lattice_limit(unit), x).map_err(
                |(i, reason)| FormatError::InvalidHeader {
                    field: "residuals",
                    offset: 0,
                    value: i as u64,
                    reason,
                },
            )?;
            map_values(out, parallel, |v| {
                *v = reconstruct_bounded(v.to_bits() as i32, offset, unit)
            });
        }
        Predictor::Differences => {
            let words: &mut [u32] = bytemuck::cast_slice_mut(out);
            decode_chunks(
                data,
                &layout.chunks,
                h.chunk_log2,
                h.segments as usize,
                parallel,
                words,
            )?;
            differences_inverse(words, &h.shape, h.axes[0]);
            if let Some(i) = words.iter().position(|&q| q >= BOUNDED_MAX_BINS) {
                return Err(FormatError::InvalidHeader {
                    field: "residuals",
                    offset: 0,
                    value: i as u64,
                    reason: "a bin past 65535",
                }
                .into());
            }
            map_values(out, parallel, |v| {
                *v = reconstruct_bounded(v.to_bits() as i32, offset, unit)
            });
        }
    }
    for r in &layout.runs {
        out[r.start as usize..(r.start + r.len) as usize].fill(f32::from_bits(r.bits));
    }
    Ok(())
}
