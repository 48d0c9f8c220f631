//! A compact patch stream's header (SPEC "Version 2 (compact) streams"): transform,
//! palette, and per channel the predictor, the code lengths and the segment lengths, parsed
//! and validated by [`parse_patch_header`] (shared by the decoder and `inspect`), and the
//! errors of a compact stream before its position is known ([`CompactError`]).

use super::huffman::{self, MAX_TOKENS};
use crate::codec::bits::BitReader;
use crate::codec::planes::check_padding;
use crate::error::FormatError;
use crate::format::compact::{
    alphabet_size, run_token_first, segments, CompactPredictor, Transform, CODE_LENGTH_BITS,
    PALETTE_COUNT_BITS, PREDICTOR_BITS, SEGMENTS_MAX, SEGMENT_BASE_BITS, SEGMENT_WIDTH_BITS,
    SEGMENT_WIDTH_MAX, TOKEN_COUNT_BITS, TRANSFORM_BITS,
};
use crate::format::Header;

/// What is wrong with a compact stream, before the stream's position is known.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum CompactError {
    /// A header field holds a value the format does not allow.
    Field {
        channel: u8,
        field: &'static str,
        value: u64,
        reason: &'static str,
    },
    /// A segment's rows use more or fewer bits than its stored length.
    Segment {
        channel: u8,
        segment: u32,
        used: u64,
        stored: u64,
    },
    /// The stream is longer than header and segments, or its padding is not zero.
    Trailing { used: u64 },
}

impl CompactError {
    /// The full error, naming the stream.
    pub(crate) fn at(self, h: &Header, patch: u64, offset: u64, size: u32) -> FormatError {
        let pos = |channel| h.stream_pos(patch, channel, offset);
        match self {
            CompactError::Field {
                channel,
                field,
                value,
                reason,
            } => FormatError::InvalidStreamField {
                pos: pos(channel),
                field,
                value,
                reason,
            },
            CompactError::Segment {
                channel,
                segment,
                used,
                stored,
            } => FormatError::SegmentLength {
                pos: pos(channel),
                segment,
                used,
                stored,
            },
            CompactError::Trailing { used } => FormatError::StreamTrailingData {
                pos: pos(0),
                size,
                used,
            },
        }
    }
}

/// One channel's header.
#[derive(Debug, Clone)]
pub(crate) struct ChannelHeader {
    pub predictor: CompactPredictor,
    /// Code length per token (0 = unused), `alphabet_size(depth)` long.
    pub lengths: [u8; MAX_TOKENS],
    /// Bit offset of each segment in the stream, and one past the last.
    pub segment_start: [u64; SEGMENTS_MAX as usize + 1],
    /// Whether the code has run tokens (the channel then decodes symbol by symbol).
    pub runs: bool,
}

impl ChannelHeader {
    /// The error for this channel (`c`) having read to bit `pos` in its segment `s`: past
    /// where the segment ends (or, at the end of the patch, short of it).
    pub(crate) fn segment_error(&self, c: usize, s: usize, pos: u64) -> CompactError {
        let (begin, end) = (self.segment_start[s], self.segment_start[s + 1]);
        CompactError::Segment {
            channel: c as u8,
            segment: s as u32,
            used: pos - begin,
            stored: end - begin,
        }
    }
}

/// A patch stream's header, fully validated: every segment lies inside the stream and the
/// segments end where the stream does.
#[derive(Debug, Clone)]
pub(crate) struct PatchHeader {
    pub transform: Transform,
    pub channels: Vec<ChannelHeader>,
    pub segments: u32,
    /// Bits of each channel's header.
    pub channel_header_bits: [u64; 4],
    /// Entries of the palette (0: no palette; `channels` then has the one index plane).
    pub palette: u32,
    /// Bit offset of the palette's first entry in the stream.
    pub palette_start: u64,
}

/// Parses and checks the header of a patch stream (`stream` is exactly its bytes).
pub(crate) fn parse_patch_header(
    h: &Header,
    stream: &[u8],
    ph: u32,
) -> Result<PatchHeader, CompactError> {
    let stream_bits = stream.len() as u64 * 8;
    let mut r = BitReader::new(stream);
    let field = |channel, field, value: u32, reason| CompactError::Field {
        channel,
        field,
        value: value as u64,
        reason,
    };
    let transform_id = r.read(TRANSFORM_BITS);
    let transform = match Transform::from_id(transform_id) {
        Some(Transform::SubtractGreen) if h.channels() < 3 => {
            return Err(field(
                0,
                "transform",
                transform_id,
                "subtract-green needs 3 or 4 channels",
            ))
        }
        Some(t) => t,
        None => return Err(field(0, "transform", transform_id, "must be 0, 1 or 2")),
    };
    // The palette: its entries are read when the patch decodes (`PatchPalette::read`).
    let (palette, palette_start) = if transform == Transform::Palette {
        let count = r.read(PALETTE_COUNT_BITS) + 1;
        let start = r.position();
        r.skip(count as u64 * h.channels() as u64 * h.depth as u64);
        if r.position() > stream_bits {
            return Err(field(
                0,
                "palette",
                count,
                "runs past the end of the stream",
            ));
        }
        (count, start)
    } else {
        (0, 0)
    };
    // Channels with a header and segments: one index plane with a palette.
    let coded = if palette > 0 { 1 } else { h.channels() };
    let segs = segments(h.patch_size(), ph);
    let ntok_max = alphabet_size(h.depth);
    let mut channels = Vec::with_capacity(coded as usize);
    let mut channel_header_bits = [0u64; 4];
    for c in 0..coded {
        let header_start = r.position();
        let id = r.read(PREDICTOR_BITS);
        let predictor =
            CompactPredictor::from_id(id).ok_or(field(c, "predictor", id, "must be 0..=5"))?;
        let ntok = r.read(TOKEN_COUNT_BITS);
        if ntok == 0 || ntok > ntok_max {
            return Err(field(
                c,
                "token count",
                ntok,
                if h.depth == 8 {
                    "must be 1..=47 at 8 bits"
                } else {
                    "must be 1..=63 at 16 bits"
                },
            ));
        }
        let mut lengths = [0u8; MAX_TOKENS];
        let mut previous = 0u32;
        for l in lengths.iter_mut().take(ntok as usize) {
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
        huffman::check_lengths(&lengths[..ntok_max as usize])
            .map_err(|reason| field(c, "code lengths", ntok, reason))?;
        let width = r.read(SEGMENT_WIDTH_BITS);
        if width > SEGMENT_WIDTH_MAX {
            return Err(field(c, "segment length width", width, "must be 0..=16"));
        }
        let base = r.read(SEGMENT_BASE_BITS) as u64;
        // Segment lengths for now; turned into start bits once all headers are read.
        let mut segment_start = [0; SEGMENTS_MAX as usize + 1];
        for length in segment_start.iter_mut().take(segs as usize) {
            *length = base + r.read(width) as u64;
        }
        // Checked per channel so a hostile header cannot make the reader run far past the
        // stream (each channel header is at most 515 bits).
        if r.position() > stream_bits {
            return Err(field(
                c,
                "channel header",
                0,
                "runs past the end of the stream",
            ));
        }
        channel_header_bits[c as usize] = r.position() - header_start;
        channels.push(ChannelHeader {
            predictor,
            lengths,
            segment_start,
            runs: lengths[run_token_first(h.depth) as usize..]
                .iter()
                .any(|&l| l > 0),
        });
    }
    // Lengths to start bits (an exclusive prefix sum); entry `segs` holds length 0 and so
    // becomes the end of the channel's last segment.
    let mut at = r.position();
    for ch in channels.iter_mut() {
        for start in ch.segment_start.iter_mut().take(segs as usize + 1) {
            let length = *start;
            *start = at;
            at += length;
        }
    }
    if at > stream_bits {
        return Err(CompactError::Field {
            channel: 0,
            field: "segment lengths",
            value: at,
            reason: "segments end past the end of the stream",
        });
    }
    check_padding(stream, at).map_err(|used| CompactError::Trailing { used })?;
    Ok(PatchHeader {
        transform,
        channels,
        segments: segs,
        channel_header_bits,
        palette,
        palette_start,
    })
}
