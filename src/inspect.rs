//! Statistics about a file's layout without decoding pixels: what `l3 info` prints.

use crate::codec::bits::BitReader;
use crate::codec::sink::InterleavedBand;
use crate::compact;
use crate::decode::{self, DecodeOptions};
use crate::error::Result;
use crate::fast::decode::{check_stream_end, StreamError};
use crate::format::fast::{nbit_field_bits, FastPredictor, STREAM_PREFIX_LEN};
use crate::format::{self, FileLayout, Header, Profile};

/// What a file is made of.
#[derive(Debug, Clone)]
pub struct Inspection {
    /// The header.
    pub header: Header,
    /// File length in bytes.
    pub file_bytes: u64,
    /// Bytes of header + size table + checksum (everything but streams).
    pub overhead_bytes: u64,
    /// Stream bytes per channel (version 2: the channel's header and segments, rounded).
    pub channel_bytes: Vec<u64>,
    /// Smallest, largest stream in bytes.
    pub stream_min: u32,
    /// Largest stream in bytes.
    pub stream_max: u32,
    /// What the streams chose, per profile.
    pub coding: Coding,
}

/// Per-profile statistics of an [`Inspection`].
#[derive(Debug, Clone)]
pub enum Coding {
    /// Version 1.
    Fast {
        /// Streams per predictor, indexed by predictor id.
        predictor_counts: [u64; FastPredictor::ALL.len()],
        /// Rows per bit width 0..=16.
        nbit_counts: [u64; 17],
    },
    /// Version 2.
    Compact {
        /// Patches per colour transform id (none, subtract-green, palette).
        transform_counts: [u64; 3],
        /// Channel streams per predictor id.
        predictor_counts: [u64; format::compact::CompactPredictor::ALL.len()],
        /// Bits of all channel headers (code and segment-length tables).
        header_bits: u64,
    },
}

impl Inspection {
    /// Compressed bits per pixel (whole file).
    pub fn bits_per_pixel(&self) -> f64 {
        self.file_bytes as f64 * 8.0 / (self.header.width as f64 * self.header.height as f64)
    }
    /// File size over decoded size.
    pub fn ratio_to_raw(&self) -> f64 {
        self.file_bytes as f64 / self.header.output_bytes() as f64
    }
}

/// Parses the file (checksum included) and reads every row header (version 1), or every
/// patch header and decodes every patch a band at a time (version 2, whose segments can
/// only be checked by decoding), so `inspect` accepts exactly the files the decoder accepts.
pub fn inspect(data: &[u8], options: &DecodeOptions) -> Result<Inspection> {
    let layout = decode::parse(data, options)?;
    let h = layout.header;
    let mut ins = Inspection {
        header: h,
        file_bytes: data.len() as u64,
        overhead_bytes: h.data_offset() + format::CHECKSUM_LEN as u64,
        channel_bytes: vec![0; h.channels() as usize],
        stream_min: u32::MAX,
        stream_max: 0,
        coding: Coding::Fast {
            predictor_counts: [0; FastPredictor::ALL.len()],
            nbit_counts: [0; 17],
        },
    };
    for index in 0..layout.offsets.len() - 1 {
        let size = layout.stream_size(index);
        ins.stream_min = ins.stream_min.min(size);
        ins.stream_max = ins.stream_max.max(size);
    }
    match h.profile {
        Profile::Fast => inspect_fast(&layout, &mut ins)?,
        Profile::Compact => inspect_compact(&layout, &mut ins)?,
    }
    Ok(ins)
}

fn inspect_compact(layout: &FileLayout, ins: &mut Inspection) -> Result<()> {
    let h = layout.header;
    let mut transform_counts = [0u64; 3];
    let mut predictor_counts = [0u64; format::compact::CompactPredictor::ALL.len()];
    let mut header_bits = 0u64;
    let mut channel_bits = vec![0u64; h.channels() as usize];
    for patch in 0..h.patch_count() as usize {
        let (_, _, _, ph) = h.patch_rect(patch as u64);
        let stream = layout.stream(patch);
        let header = compact::decode::parse_patch_header(&h, stream, ph).map_err(|e| {
            e.at(
                &h,
                patch as u64,
                layout.offsets[patch],
                layout.stream_size(patch),
            )
        })?;
        transform_counts[header.transform as usize] += 1;
        // A palette counts with the tables (its entries and their count).
        header_bits += header.palette.min(1) as u64 * format::compact::PALETTE_COUNT_BITS as u64
            + header.palette as u64 * h.channels() as u64 * h.depth as u64;
        for (c, ch) in header.channels.iter().enumerate() {
            predictor_counts[ch.predictor as usize] += 1;
            let segs = ch.segment_start[header.segments as usize] - ch.segment_start[0];
            channel_bits[c] += segs + header.channel_header_bits[c];
            header_bits += header.channel_header_bits[c];
        }
    }
    for (b, bits) in ins.channel_bytes.iter_mut().zip(channel_bits) {
        *b = bits.div_ceil(8);
    }
    // Segment contents are only checked by decoding them: every patch into one reused band
    // of patch rows, so memory stays a band, not the image. (Each patch header is parsed
    // again there; headers are a small part of the work.)
    let band_bytes =
        h.patch_size() as usize * h.width as usize * h.channels() as usize * h.bytes_per_sample();
    let mut band = vec![0u8; band_bytes.min(h.output_bytes() as usize)];
    let mut scratch = compact::decode::Scratch::new(&h);
    let mut sink = InterleavedBand::new(&h, &mut band);
    for patch in 0..h.patch_count() as usize {
        compact::decode::decode_patch(layout, patch, u32::MAX, &mut sink, &mut scratch)?;
    }
    ins.coding = Coding::Compact {
        transform_counts,
        predictor_counts,
        header_bits,
    };
    Ok(())
}

fn inspect_fast(layout: &FileLayout, ins: &mut Inspection) -> Result<()> {
    let h = layout.header;
    let channels = h.channels() as usize;
    let mut predictor_counts = [0u64; FastPredictor::ALL.len()];
    let mut nbit_counts = [0u64; 17];
    let depth = h.depth as u32;
    let nb = nbit_field_bits(h.depth);
    for index in 0..layout.offsets.len() - 1 {
        let stream = layout.stream(index);
        let size = layout.stream_size(index);
        let patch = (index / channels) as u64;
        let pos = h.stream_pos(patch, (index % channels) as u8, layout.offsets[index]);
        let fail = |e: StreamError| e.at(pos, size, h.depth);
        ins.channel_bytes[index % channels] += size as u64;
        let p = FastPredictor::from_id(stream[0])
            .ok_or_else(|| fail(StreamError::UnknownPredictor(stream[0])))?;
        predictor_counts[p as usize] += 1;
        let (_, _, pw, ph) = h.patch_rect(patch);
        let payload = &stream[STREAM_PREFIX_LEN..];
        let payload_bits = payload.len() as u64 * 8;
        let mut r = BitReader::new(payload);
        for row in 0..ph {
            if r.position() + (nb + depth) as u64 > payload_bits {
                return Err(fail(StreamError::Overrun { row }).into());
            }
            let nbit = r.read(nb);
            if nbit > depth {
                return Err(fail(StreamError::BadBitWidth { row, nbit }).into());
            }
            r.skip(depth as u64 + pw as u64 * nbit as u64);
            if r.position() > payload_bits {
                return Err(fail(StreamError::Overrun { row }).into());
            }
            nbit_counts[nbit as usize] += 1;
        }
        // Same end rule as the decoder, so `l3 info` and `l3 verify` agree on every file.
        check_stream_end(payload, r.position()).map_err(fail)?;
    }
    ins.coding = Coding::Fast {
        predictor_counts,
        nbit_counts,
    };
    Ok(())
}
