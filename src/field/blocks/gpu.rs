//! Block-coded arrays on the GPU ([`GpuBlocks`]'s kernels): the uniform of an encode or a
//! decode, the checks of its buffers, and the convenience of encoding a host slice or
//! decoding host bytes. Bit for bit the CPU's [`encode_blocks`](super::encode_blocks) and
//! [`decode_blocks`](super::decode_blocks) (tests on lavapipe: `tests/gpu_blocks.rs`).

use super::*;
use crate::error::Error;
use crate::gpu::abi::BlocksParams;
use crate::gpu::{BlocksBuffer, GpuBlocks};

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
    let needed = 4 * (at + words);
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

/// Encodes the `count` f32 values at word `src_at` of `src` within `max_error` (see
/// [`stored_bound`]), offered `stride` (see [`encode_blocks`](super::encode_blocks)), into
/// `dst` from word `dst_at` (room for [`stream_capacity_words`]`(count, stride)` words), in
/// one submission; returns the stream's header (reading back its payload count: the one wait; the stream takes
/// [`BlocksHeader::stream_words`] words).
pub fn encode_blocks_buffer(
    gpu: &GpuBlocks,
    (src, src_at): (&wgpu::Buffer, u64),
    count: u64,
    max_error: f64,
    stride: u64,
    (dst, dst_at): (&wgpu::Buffer, u64),
) -> Result<BlocksHeader> {
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
    let e = stored_bound(max_error)?;
    check_room(src, src_at, count, "block-coded values")?;
    let capacity = stream_capacity_words(count, stride);
    check_room(dst, dst_at, capacity, "block-coded stream")?;
    let mut p = params(count, e, src_at, dst_at)?;
    p.offer = stride as u32;
    let n = count as usize;
    let groups = block_count(n, stride as usize)
        .max(block_count(n, 1))
        .div_ceil(GROUP_BLOCKS) as u32;
    let scratch = gpu.scratch();
    gpu.encode(
        &p,
        BlocksBuffer {
            buffer: src,
            what: "block-coded values",
        },
        BlocksBuffer {
            buffer: dst,
            what: "block-coded stream",
        },
        &scratch,
        groups,
    )?;
    let head = gpu.read_words(dst, dst_at + 3, 5)?;
    Ok(BlocksHeader {
        values: count as u32,
        bound: e,
        payload_words: head[0],
        lengths: std::array::from_fn(|s| (head[1 + s / 8] >> (4 * (s % 8))) & 0xf),
        stride: head[4],
    })
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

/// Decodes the stream `header` describes (checked by [`parse_blocks`], or written by
/// [`encode_blocks_buffer`]) at word `src_at` of `src` into `dst` from word `dst_at`, in one
/// submission; waits for it and reads back the kernel's error flags.
pub fn decode_blocks_buffer(
    gpu: &GpuBlocks,
    src: &wgpu::Buffer,
    src_at: u64,
    header: &BlocksHeader,
    dst: &wgpu::Buffer,
    dst_at: u64,
) -> Result<()> {
    check_room(
        src,
        src_at,
        header.stream_words() as u64,
        "block-coded stream",
    )?;
    let n = header.values as u64;
    check_room(dst, dst_at, n, "block-decoded values")?;
    let mut p = params(n, header.bound, src_at, dst_at)?;
    let blocks = block_count(n as usize, header.stride as usize);
    p.stride = header.stride;
    p.blocks = blocks as u32;
    p.groups = blocks.div_ceil(GROUP_BLOCKS) as u32;
    p.payload_words = header.payload_words;
    let scratch = gpu.scratch();
    gpu.decode(
        &p,
        BlocksBuffer {
            buffer: src,
            what: "block-coded stream",
        },
        BlocksBuffer {
            buffer: dst,
            what: "block-decoded values",
        },
        &scratch,
    )?;
    let f = gpu.read_words(&scratch, 0, 1)?[0];
    if f != 0 {
        return Err(FormatError::InvalidHeader {
            field: "block-coded stream",
            offset: 4 * src_at,
            value: f as u64,
            reason:
                "the GPU decode found malformed blocks (1: a header, 2: a group offset, 4: a mask)",
        }
        .into());
    }
    Ok(())
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
