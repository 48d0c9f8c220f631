//! Statistics about a file's layout without decoding pixels: what `l3 info` prints.

use crate::bits::BitReader;
use crate::decode::{self, DecodeOptions, StreamError};
use crate::format::{self, nbit_field_bits, Header, Predictor};
use crate::Result;

/// What a file is made of.
#[derive(Debug, Clone)]
pub struct Inspection {
    /// The header.
    pub header: Header,
    /// File length in bytes.
    pub file_bytes: u64,
    /// Bytes of header + size table + checksum (everything but streams).
    pub overhead_bytes: u64,
    /// Stream bytes per channel.
    pub channel_bytes: Vec<u64>,
    /// Smallest, largest stream in bytes.
    pub stream_min: u32,
    /// Largest stream in bytes.
    pub stream_max: u32,
    /// Streams per predictor, indexed by predictor id.
    pub predictor_counts: [u64; Predictor::ALL.len()],
    /// Rows per bit width 0..=16.
    pub nbit_counts: [u64; 17],
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

/// Parses the file (checksum included) and reads every row header.
pub fn inspect(data: &[u8], options: &DecodeOptions) -> Result<Inspection> {
    let layout = decode::parse(data, options)?;
    let h = layout.header;
    let channels = h.channels() as usize;
    let mut ins = Inspection {
        header: h,
        file_bytes: data.len() as u64,
        overhead_bytes: h.data_offset() + format::CHECKSUM_LEN as u64,
        channel_bytes: vec![0; channels],
        stream_min: u32::MAX,
        stream_max: 0,
        predictor_counts: [0; Predictor::ALL.len()],
        nbit_counts: [0; 17],
    };
    let depth = h.depth as u32;
    let nb = nbit_field_bits(h.depth);
    for index in 0..layout.offsets.len() - 1 {
        let stream = layout.stream(index);
        let size = layout.stream_size(index);
        let patch = (index / channels) as u64;
        let pos = h.stream_pos(patch, (index % channels) as u8, layout.offsets[index]);
        let fail = |e: StreamError| e.at(pos, size, h.depth);
        ins.channel_bytes[index % channels] += size as u64;
        ins.stream_min = ins.stream_min.min(size);
        ins.stream_max = ins.stream_max.max(size);
        let p = Predictor::from_id(stream[0])
            .ok_or_else(|| fail(StreamError::UnknownPredictor(stream[0])))?;
        ins.predictor_counts[p as usize] += 1;
        let (_, _, pw, ph) = h.patch_rect(patch);
        let payload = &stream[format::STREAM_PREFIX_LEN..];
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
            ins.nbit_counts[nbit as usize] += 1;
        }
        // Same end rule as the decoder, so `l3 info` and `l3 verify` agree on every file.
        decode::check_stream_end(payload, r.position()).map_err(fail)?;
    }
    Ok(ins)
}
