//! Block-coded arrays on the GPU ([`GpuBlocks`]'s kernels): the uniform of an encode or a
//! decode, the checks of its buffers, and the convenience of encoding a host slice or
//! decoding host bytes. Bit for bit the CPU's [`encode_blocks`](super::encode_blocks) and
//! [`decode_blocks`](super::decode_blocks) (tests on lavapipe: `tests/gpu_blocks.rs`).

use super::*;
use crate::error::Error;
use crate::error::FormatError;
use crate::gpu::abi::BlocksParams;
use crate::gpu::{BlocksBuffer, BlocksJob, GpuBlocks};

/// Words a stream of `count` values offered `stride` may take at most (every value escaped
/// with the longest code, at whichever stride has the most blocks): what a buffer the GPU
/// encodes into must hold from the stream's first word.
pub fn stream_capacity_words(count: u64, stride: u64) -> u64 {
    let n = count as usize;
    let blocks = if stride_ok(n, stride as usize) {
        block_count(n, stride as usize).max(block_count(n, 1))
    } else {
        block_count(n, 1)
    } as u64;
    let groups = blocks.div_ceil(GROUP_BLOCKS as u64);
    let group_words = (GROUP_BLOCKS as u64 * MAX_BLOCK_BYTES as u64).div_ceil(4);
    HEAD_WORDS as u64 + groups + blocks.div_ceil(4) + groups * group_words
}

const USAGE: wgpu::BufferUsages = wgpu::BufferUsages::STORAGE
    .union(wgpu::BufferUsages::COPY_SRC)
    .union(wgpu::BufferUsages::COPY_DST);

/// A buffer of `words` words (one at least) the block kernels read and write, and copies go
/// to and from: for values, streams and their copies.
pub fn blocks_buffer(blocks: &GpuBlocks, label: &str, words: u64) -> wgpu::Buffer {
    blocks.device().create_buffer(&wgpu::BufferDescriptor {
        label: Some(label),
        size: 4 * words.max(1),
        usage: USAGE,
        mapped_at_creation: false,
    })
}

fn params(count: u64, e: f32, src_at: u64, dst_at: u64) -> Result<BlocksParams> {
    let word = |v: u64, what: &'static str| -> Result<u32> {
        u32::try_from(v).map_err(|_| {
            Error::from(LimitsError::GpuBuffer {
                what,
                needed: 4 * v,
                max: 4 * u32::MAX as u64,
            })
        })
    };
    Ok(BlocksParams {
        count: word(count, "block-coded values")?,
        e_bits: e.to_bits(),
        inv_bits: inverse_step(e).to_bits(),
        src_at: word(src_at, "block-coded source offset")?,
        dst_at: word(dst_at, "block-coded destination offset")?,
        ..BlocksParams::default()
    })
}

/// Checks that `buffer` holds `words` words from word `at`.
fn check_room(buffer: &wgpu::Buffer, at: u64, words: u64, what: &'static str) -> Result<()> {
    let needed = at
        .checked_add(words)
        .and_then(|w| w.checked_mul(4))
        .unwrap_or(u64::MAX);
    if needed > buffer.size() {
        return Err(LimitsError::GpuBuffer {
            what,
            needed,
            max: buffer.size(),
        }
        .into());
    }
    // The kernels index words with 32-bit integers.
    if at + words > u32::MAX as u64 {
        return Err(LimitsError::GpuBuffer {
            what,
            needed,
            max: 4 * u32::MAX as u64,
        }
        .into());
    }
    Ok(())
}

/// One stream of an [`encode_blocks_batch`]: the `count` f32 values at word `src_at` of the
/// source, within `max_error` (see [`stored_bound`]), offered `stride` (see
/// [`encode_blocks`](super::encode_blocks)), into the destination from word `dst_at` (room
/// for [`stream_capacity_words`]`(count, stride)` words, apart from every other job's).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EncodeJob {
    /// Word of the source where the values start.
    pub src_at: u64,
    /// Values.
    pub count: u64,
    /// The absolute bound.
    pub max_error: f64,
    /// The stride offered (0, 1, or a divisor of `count`).
    pub stride: u64,
    /// Word of the destination where the stream starts.
    pub dst_at: u64,
}

/// Encodes `jobs` from `src` into `dst` in one submission and one wait (the streams' heads
/// read back together); returns each stream's header (it takes
/// [`BlocksHeader::stream_words`] words from its `dst_at`). Refused before anything runs: a
/// job over the limits, a stride the count does not allow, a range past a buffer, or
/// destinations that overlap.
pub fn encode_blocks_batch(
    gpu: &GpuBlocks,
    src: &wgpu::Buffer,
    dst: &wgpu::Buffer,
    jobs: &[EncodeJob],
) -> Result<Vec<BlocksHeader>> {
    let mut planned = Vec::with_capacity(jobs.len());
    let mut ranges = Vec::with_capacity(jobs.len());
    for job in jobs {
        let (count, stride) = (job.count, job.stride);
        if count > MAX_VALUES {
            return Err(LimitsError::OutputBytes {
                needed: count * 4,
                max: MAX_VALUES * 4,
            }
            .into());
        }
        if !stride_ok(count as usize, stride as usize) {
            return Err(crate::error::invalid_option(
                "stride",
                stride,
                "0, 1, or a divisor of the values' count",
            ));
        }
        let e = stored_bound(job.max_error)?;
        check_room(src, job.src_at, count, "block-coded values")?;
        let capacity = stream_capacity_words(count, stride);
        check_room(dst, job.dst_at, capacity, "block-coded stream")?;
        ranges.push((job.dst_at, job.dst_at.saturating_add(capacity)));
        let mut p = params(count, e, job.src_at, job.dst_at)?;
        p.offer = stride as u32;
        let n = count as usize;
        let groups = block_count(n, stride as usize)
            .max(block_count(n, 1))
            .div_ceil(GROUP_BLOCKS) as u32;
        planned.push((p, groups));
    }
    ranges.sort_unstable();
    if let Some(w) = ranges.windows(2).find(|w| w[1].0 < w[0].1) {
        return Err(crate::error::invalid_option(
            "dst_at",
            w[1].0,
            "a word past the room of the stream before it (streams of a batch must not overlap)",
        ));
    }
    if jobs.is_empty() {
        return Ok(Vec::new());
    }
    let (values, stream) = (
        BlocksBuffer {
            buffer: src,
            what: "block-coded values",
        },
        BlocksBuffer {
            buffer: dst,
            what: "block-coded stream",
        },
    );
    let batch: Vec<BlocksJob<'_>> = planned
        .iter()
        .map(|&(p, groups)| BlocksJob::encode(p, values, stream, groups))
        .collect();
    let scratch = gpu.scratch(jobs.len());
    let heads = gpu.read_back_buffer(HEAD_READ_WORDS * jobs.len() as u64);
    gpu.submit(&batch, &scratch, |enc| {
        for (j, job) in jobs.iter().enumerate() {
            enc.copy_buffer_to_buffer(
                dst,
                4 * (job.dst_at + 3),
                &heads,
                4 * HEAD_READ_WORDS * j as u64,
                4 * HEAD_READ_WORDS,
            );
        }
    })?;
    let words = gpu.read_mapped(&heads)?;
    Ok(jobs
        .iter()
        .zip(&planned)
        .zip(words.chunks_exact(HEAD_READ_WORDS as usize))
        .map(|((job, (p, _)), head)| BlocksHeader {
            values: job.count as u32,
            bound: f32::from_bits(p.e_bits),
            payload_words: head[0],
            lengths: std::array::from_fn(|s| (head[1 + s / 8] >> (4 * (s % 8))) & 0xf),
            stride: head[4],
        })
        .collect())
}

/// Words of a stream's head read back after an encode: the payload count, the code
/// lengths' three words and the stride (words 3 to 7 of the stream).
const HEAD_READ_WORDS: u64 = 5;

/// Encodes the `count` f32 values at word `src_at` of `src` within `max_error` (see
/// [`stored_bound`]), offered `stride` (see [`encode_blocks`](super::encode_blocks)), into
/// `dst` from word `dst_at` (room for [`stream_capacity_words`]`(count, stride)` words): an
/// [`encode_blocks_batch`] of one.
pub fn encode_blocks_buffer(
    gpu: &GpuBlocks,
    (src, src_at): (&wgpu::Buffer, u64),
    count: u64,
    max_error: f64,
    stride: u64,
    (dst, dst_at): (&wgpu::Buffer, u64),
) -> Result<BlocksHeader> {
    let job = EncodeJob {
        src_at,
        count,
        max_error,
        stride,
        dst_at,
    };
    let mut headers = encode_blocks_batch(gpu, src, dst, &[job])?;
    Ok(headers.remove(0))
}

/// [`encode_blocks`](super::encode_blocks) on the GPU: the values uploaded, encoded, the
/// stream read back.
pub fn encode_blocks_gpu(
    gpu: &GpuBlocks,
    values: &[f32],
    max_error: f64,
    stride: usize,
) -> Result<Vec<u8>> {
    let n = values.len() as u64;
    let src = blocks_buffer(gpu, "l3 blocks values", n);
    gpu.queue()
        .write_buffer(&src, 0, bytemuck::cast_slice(values));
    let dst = blocks_buffer(
        gpu,
        "l3 blocks stream",
        stream_capacity_words(n, stride as u64),
    );
    let header = encode_blocks_buffer(gpu, (&src, 0), n, max_error, stride as u64, (&dst, 0))?;
    let w = gpu.read_words(&dst, 0, header.stream_words() as u64)?;
    Ok(bytemuck::cast_slice(&w).to_vec())
}

/// One stream of a [`decode_blocks_batch`]: the stream `header` describes (checked by
/// [`parse_blocks`], or written by [`encode_blocks_batch`]) at word `src_at` of `src`, its
/// values to the destination from word `dst_at`.
#[derive(Debug, Clone, Copy)]
pub struct DecodeJob<'a> {
    /// The buffer holding the stream.
    pub src: &'a wgpu::Buffer,
    /// Word of `src` where the stream starts.
    pub src_at: u64,
    /// Its header.
    pub header: &'a BlocksHeader,
    /// Word of the destination where its values go.
    pub dst_at: u64,
}

/// Decodes `jobs` into `dst` in one submission and one wait (the kernel's error flags of
/// every stream read back together). A stream the kernel finds malformed is named by its
/// index in `jobs`.
pub fn decode_blocks_batch(
    gpu: &GpuBlocks,
    jobs: &[DecodeJob<'_>],
    dst: &wgpu::Buffer,
) -> Result<()> {
    let mut batch = Vec::with_capacity(jobs.len());
    for job in jobs {
        let header = job.header;
        check_room(
            job.src,
            job.src_at,
            header.stream_words() as u64,
            "block-coded stream",
        )?;
        let n = header.values as u64;
        check_room(dst, job.dst_at, n, "block-decoded values")?;
        let mut p = params(n, header.bound, job.src_at, job.dst_at)?;
        let blocks = block_count(n as usize, header.stride as usize);
        p.stride = header.stride;
        p.blocks = blocks as u32;
        p.groups = blocks.div_ceil(GROUP_BLOCKS) as u32;
        p.payload_words = header.payload_words;
        batch.push(BlocksJob::decode(
            p,
            BlocksBuffer {
                buffer: job.src,
                what: "block-coded stream",
            },
            BlocksBuffer {
                buffer: dst,
                what: "block-decoded values",
            },
        ));
    }
    if jobs.is_empty() {
        return Ok(());
    }
    let scratch = gpu.scratch(jobs.len());
    let flags = gpu.read_back_buffer(jobs.len() as u64);
    let slot = 4 * crate::gpu::abi::BLOCKS_SCRATCH_WORDS as u64;
    gpu.submit(&batch, &scratch, |enc| {
        for j in 0..jobs.len() as u64 {
            enc.copy_buffer_to_buffer(&scratch, slot * j, &flags, 4 * j, 4);
        }
    })?;
    let words = gpu.read_mapped(&flags)?;
    if let Some((j, &f)) = words.iter().enumerate().find(|(_, &f)| f != 0) {
        return Err(FormatError::InvalidHeader {
            field: "block-coded stream",
            offset: 4 * jobs[j].src_at,
            value: f as u64,
            reason: if jobs.len() == 1 {
                "the GPU decode found malformed blocks (1: a header, 2: a group offset, 4: a mask)"
            } else {
                "the GPU decode found malformed blocks in one of the batch's streams (1: a \
                 header, 2: a group offset, 4: a mask; the offset is that stream's)"
            },
        }
        .into());
    }
    Ok(())
}

/// Decodes the stream `header` describes (checked by [`parse_blocks`], or written by
/// [`encode_blocks_buffer`]) at word `src_at` of `src` into `dst` from word `dst_at`: a
/// [`decode_blocks_batch`] of one.
pub fn decode_blocks_buffer(
    gpu: &GpuBlocks,
    src: &wgpu::Buffer,
    src_at: u64,
    header: &BlocksHeader,
    dst: &wgpu::Buffer,
    dst_at: u64,
) -> Result<()> {
    decode_blocks_batch(
        gpu,
        &[DecodeJob {
            src,
            src_at,
            header,
            dst_at,
        }],
        dst,
    )
}

/// [`decode_blocks`](super::decode_blocks) on the GPU: the stream checked on the host
/// ([`parse_blocks`]), uploaded, decoded, the values read back.
pub fn decode_blocks_gpu(gpu: &GpuBlocks, data: &[u8], max_values: u64) -> Result<Vec<f32>> {
    let header = parse_blocks(data, max_values)?;
    let words = header.stream_words() as u64;
    let src = blocks_buffer(gpu, "l3 blocks stream", words);
    gpu.queue().write_buffer(&src, 0, data);
    let n = header.values as u64;
    let dst = blocks_buffer(gpu, "l3 blocks values", n);
    decode_blocks_buffer(gpu, &src, 0, &header, &dst, 0)?;
    let w = gpu.read_words(&dst, 0, n)?;
    Ok(bytemuck::cast_slice(&w).to_vec())
}
