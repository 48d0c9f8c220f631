//! The field decoder on the CPU: the bin image's decode, then one f32 addition per value and
//! the exact runs ([`reconstruct_field`], the twin of `shaders/fields.wgsl`).

use super::core::runs::Run;
use super::format::{parse_field, FieldHeader};
use crate::decode::DecodeOptions;
use crate::error::Result;

/// The decoded value of bin `q`: one f32 addition of an exact product (the twin of
/// `reconstruct` in `shaders/fields.wgsl`).
#[inline(always)]
pub fn reconstruct(q: u16, offset: f32, bin_width: f32) -> f32 {
    offset + q as f32 * bin_width
}

/// Decodes a field file into its values (C order) on the CPU.
pub fn decode_field(data: &[u8], options: &DecodeOptions) -> Result<(FieldHeader, Vec<f32>)> {
    let layout = parse_field(data)?;
    let h = layout.header;
    // Limits before any allocation: the values (4 bytes each) and the bins (2 bytes each).
    let values_bytes = h.len() * 4;
    if values_bytes > options.limits.max_output_bytes {
        return Err(crate::error::LimitsError::OutputBytes {
            needed: values_bytes,
            max: options.limits.max_output_bytes,
        }
        .into());
    }
    let mut bins = vec![0u16; h.len() as usize];
    crate::decode::decode_into_u16(layout.image, &mut bins, options)?;
    let mut out = vec![0f32; bins.len()];
    reconstruct_field(&bins, &layout.runs, h.offset, h.bin_width, &mut out);
    Ok((h, out))
}

/// The field's values from its decoded bins and its exception runs (validated: inside `out`):
/// the CPU twin of `shaders/fields.wgsl`'s `reconstruct_field`.
pub fn reconstruct_field(bins: &[u16], runs: &[Run], offset: f32, bin_width: f32, out: &mut [f32]) {
    for (o, &q) in out.iter_mut().zip(bins) {
        *o = reconstruct(q, offset, bin_width);
    }
    for r in runs {
        out[r.start as usize..(r.start + r.len) as usize].fill(f32::from_bits(r.bits));
    }
}
