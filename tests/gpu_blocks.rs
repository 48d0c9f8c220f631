//! Block-coded arrays on the GPU (`l3::field::blocks::gpu`, lavapipe in CI): the GPU's
//! stream is the CPU encoder's byte for byte (the same code built on the device, the same
//! prediction picked) and its decode the CPU decoder's bit for bit, for activation-like
//! values, special values (escapes), bounds from 0 to huge, no stride, stride 1 and column
//! strides, sizes that end mid-block, mid-band and mid-group, more groups than one scan
//! invocation takes, and streams at an offset inside larger buffers; a stream whose blocks
//! the host did not check (damaged in GPU memory) sets the kernel's flags instead of being
//! read out of bounds. Batches (many streams, one submission and one wait) give each
//! stream's bytes and values as if it were alone, and name the one stream that is damaged.
#![cfg(feature = "gpu")]

#[path = "common/gpu_support.rs"]
mod gpu_support;

use l3::field::blocks::gpu::{
    decode_blocks_batch, decode_blocks_buffer, decode_blocks_gpu, encode_blocks_batch,
    encode_blocks_buffer, encode_blocks_gpu, stream_capacity_words, DecodeJob, EncodeJob,
};
use l3::field::blocks::{decode_blocks, encode_blocks, parse_blocks, BlocksHeader};
use l3::gpu::GpuBlocks;

fn blocks() -> Option<GpuBlocks> {
    gpu_support::gpu().map(GpuBlocks::from_decoder)
}

/// Activation-like values: ReLU zeros, spread magnitudes, runs of small and large values.
fn activations(n: usize, seed: u64) -> Vec<f32> {
    let mut rng = gpu_support::Rng(seed);
    (0..n)
        .map(|i| {
            let u = (rng.below(1 << 24) as f32 / (1 << 24) as f32 - 0.5) * 4.0;
            match rng.below(10) {
                0..=3 => 0.0,
                4 => -u.abs() * 3.0,
                5 if i % 13 == 0 => u * 1e3,
                _ => u + (i % 101) as f32 * 1e-3,
            }
        })
        .collect()
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

#[test]
fn gpu_streams_and_values_equal_the_cpu_codec() {
    let Some(gpu) = blocks() else { return };
    let mut cases: Vec<(Vec<f32>, f64, usize)> = Vec::new();
    for (n, bound, stride) in [
        (0usize, 1e-2, 0),
        (1, 1e-2, 1),
        (31, 1e-3, 0),
        (257, 5e-2, 257),
        (4096, 1e-3, 64),
        (70_001, 1e-2, 1),
        // 300 groups and more: the serial part of the scan.
        (256 * 300 + 16, 3e-3, 0),
        (256 * 300 + 16, 3e-3, 16),
    ] {
        cases.push((activations(n, n as u64 + 3), bound, stride));
    }
    // Rows like the rows above them (column prediction wins), ending mid-band.
    let smooth: Vec<f32> = (0..200 * 96)
        .map(|i| ((i % 96) as f32 * 0.37).sin() * 3.0 + (i / 96) as f32 * 1e-3)
        .collect();
    cases.push((smooth.clone(), 1e-3, 96));
    cases.push((smooth, 1e-3, 1));
    let mut special = activations(3000, 9);
    special[3] = f32::NAN;
    special[700] = f32::NEG_INFINITY;
    special[1500] = 3e37;
    special[2000] = f32::from_bits(5);
    special[2001] = -f32::from_bits(0x7fffff);
    special[2500] = -0.0;
    for bound in [0.0, 1e-40, 1e-6, 1e-2, 1.0, 1e30, f64::INFINITY] {
        cases.push((special.clone(), bound, 100));
    }
    for (values, bound, stride) in &cases {
        let cpu = encode_blocks(values, *bound, *stride).unwrap();
        let on_gpu = encode_blocks_gpu(&gpu, values, *bound, *stride).unwrap();
        assert!(
            cpu == on_gpu,
            "{} values at {bound}, stride {stride}: GPU stream {} bytes, CPU {} bytes, first difference at word {:?}",
            values.len(),
            on_gpu.len(),
            cpu.len(),
            cpu.chunks(4).zip(on_gpu.chunks(4)).position(|(a, b)| a != b)
        );
        let want = decode_blocks(&cpu, u64::MAX).unwrap();
        let got = decode_blocks_gpu(&gpu, &cpu, u64::MAX).unwrap();
        assert_eq!(
            bits(&want),
            bits(&got),
            "{} values at {bound}",
            values.len()
        );
    }
}

#[test]
fn streams_at_offsets_inside_larger_buffers() {
    let Some(gpu) = blocks() else { return };
    let values = activations(5000, 77);
    let usage =
        wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC | wgpu::BufferUsages::COPY_DST;
    let make = |words: u64| {
        gpu.device().create_buffer(&wgpu::BufferDescriptor {
            label: None,
            size: 4 * words,
            usage,
            mapped_at_creation: false,
        })
    };
    let src = make(5000 + 123);
    gpu.queue()
        .write_buffer(&src, 4 * 123, bytemuck::cast_slice(&values));
    let cap = stream_capacity_words(5000, 50);
    let stream = make(cap + 1000);
    let header = encode_blocks_buffer(&gpu, (&src, 123), 5000, 1e-2, 50, (&stream, 1000)).unwrap();
    let cpu = encode_blocks(&values, 1e-2, 50).unwrap();
    assert_eq!(header.stream_words() * 4, cpu.len());
    let parsed: BlocksHeader = parse_blocks(&cpu, u64::MAX).unwrap();
    assert_eq!(header, parsed);
    let out = make(5000 + 55);
    decode_blocks_buffer(&gpu, &stream, 1000, &header, &out, 55).unwrap();
    let got = l3_read(&gpu, &out, 55, 5000);
    assert_eq!(bits(&decode_blocks(&cpu, u64::MAX).unwrap()), got);
    // Too small a destination is refused before anything is dispatched.
    let small = make(cap - 1);
    assert!(encode_blocks_buffer(&gpu, (&src, 123), 5000, 1e-2, 50, (&small, 0)).is_err());
    assert!(encode_blocks_buffer(&gpu, (&src, 123), 5000, 1e-2, 51, (&stream, 0)).is_err());
    assert!(decode_blocks_buffer(&gpu, &stream, 1000, &header, &out, 56).is_err());
}

fn l3_read(gpu: &GpuBlocks, buffer: &wgpu::Buffer, at: u64, words: u64) -> Vec<u32> {
    let staging = gpu.device().create_buffer(&wgpu::BufferDescriptor {
        label: None,
        size: 4 * words,
        usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });
    let mut enc = gpu.device().create_command_encoder(&Default::default());
    enc.copy_buffer_to_buffer(buffer, 4 * at, &staging, 0, 4 * words);
    gpu.queue().submit([enc.finish()]);
    let slice = staging.slice(..);
    slice.map_async(wgpu::MapMode::Read, |r| r.unwrap());
    gpu.device()
        .poll(wgpu::PollType::wait_indefinitely())
        .unwrap();
    let v: Vec<u32> = bytemuck::pod_collect_to_vec(&slice.get_mapped_range().unwrap());
    staging.unmap();
    v
}

#[test]
fn damaged_blocks_in_gpu_memory_set_the_flags() {
    let Some(gpu) = blocks() else { return };
    let values = activations(2048, 5);
    let good = encode_blocks(&values, 1e-2, 0).unwrap();
    let header = parse_blocks(&good, u64::MAX).unwrap();
    assert_eq!(header.stride, 0);
    // 64 blocks in 8 groups: words 8..16 the group offsets, 16..32 the blocks' bytes.
    let mut seen = 0;
    for (word, value) in [
        (16, 0x0000_00ffu32), // a block of 255 bytes
        (17, 0x0101_0101),    // blocks of 1 byte: the group's words change
        (8 + 3, 5),           // a group offset that is not its blocks' words
    ] {
        let mut bad = good.clone();
        bad[4 * word..4 * word + 4].copy_from_slice(&value.to_le_bytes());
        assert!(decode_blocks(&bad, u64::MAX).is_err(), "word {word}");
        let usage = wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST;
        let src = gpu.device().create_buffer(&wgpu::BufferDescriptor {
            label: None,
            size: bad.len() as u64,
            usage,
            mapped_at_creation: false,
        });
        gpu.queue().write_buffer(&src, 0, &bad);
        let out = gpu.device().create_buffer(&wgpu::BufferDescriptor {
            label: None,
            size: 4 * 2048,
            usage,
            mapped_at_creation: false,
        });
        let e = decode_blocks_buffer(&gpu, &src, 0, &header, &out, 0).unwrap_err();
        assert!(e.to_string().contains("malformed blocks"), "{e}");
        seen += 1;
    }
    assert_eq!(seen, 3);
}

fn buffer(gpu: &GpuBlocks, words: u64) -> wgpu::Buffer {
    gpu.device().create_buffer(&wgpu::BufferDescriptor {
        label: None,
        size: 4 * words.max(1),
        usage: wgpu::BufferUsages::STORAGE
            | wgpu::BufferUsages::COPY_SRC
            | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    })
}

/// Many arrays of one source buffer encoded in one batch (each at its own offset, bound
/// and stride, into rooms packed one after the other) give the CPU encoder's streams, and
/// decoding them in one batch (streams in another order, to other offsets) the CPU
/// decoder's values; destinations that overlap are refused before anything runs; a stream
/// damaged in GPU memory is named by its place in the batch.
#[test]
fn batches_of_streams_equal_the_cpu_codec_one_by_one() {
    let Some(gpu) = blocks() else { return };
    let arrays: Vec<(Vec<f32>, f64, u64)> = [
        (4096usize, 1e-2, 64u64),
        (1, 1e-3, 0),
        (70_001, 5e-3, 1),
        (0, 1e-2, 0),
        (31 * 96, 1e-3, 96),
        (256 * 9 + 5, 0.0, 0),
    ]
    .into_iter()
    .enumerate()
    .map(|(k, (n, bound, stride))| (activations(n, 40 + k as u64), bound, stride))
    .collect();
    // Values one after the other, 7 words apart; rooms packed the same way.
    let (mut values, mut jobs, mut room) = (Vec::new(), Vec::new(), 3u64);
    for (v, bound, stride) in &arrays {
        values.extend(std::iter::repeat_n(0f32, 7));
        jobs.push(EncodeJob {
            src_at: values.len() as u64,
            count: v.len() as u64,
            max_error: *bound,
            stride: *stride,
            dst_at: room,
        });
        values.extend_from_slice(v);
        room += stream_capacity_words(v.len() as u64, *stride);
    }
    let src = buffer(&gpu, values.len() as u64);
    gpu.queue()
        .write_buffer(&src, 0, bytemuck::cast_slice(&values));
    let dst = buffer(&gpu, room);
    let headers = encode_blocks_batch(&gpu, &src, &dst, &jobs).unwrap();
    let mut cpu_streams = Vec::new();
    for ((job, header), (v, bound, stride)) in jobs.iter().zip(&headers).zip(&arrays) {
        let cpu = encode_blocks(v, *bound, *stride as usize).unwrap();
        let words = l3_read(&gpu, &dst, job.dst_at, header.stream_words() as u64);
        assert!(
            bytemuck::cast_slice::<u32, u8>(&words) == &cpu[..],
            "{} values at {bound}, stride {stride}",
            v.len()
        );
        assert_eq!(*header, parse_blocks(&cpu, u64::MAX).unwrap());
        cpu_streams.push(cpu);
    }
    // Decoded in one batch, last stream first, each to its own place of one buffer.
    let mut at = 0u64;
    let mut decodes = Vec::new();
    for (job, header) in jobs.iter().zip(&headers).rev() {
        decodes.push(DecodeJob {
            src: &dst,
            src_at: job.dst_at,
            header,
            dst_at: at,
        });
        at += header.values as u64 + 1;
    }
    let out = buffer(&gpu, at);
    decode_blocks_batch(&gpu, &decodes, &out).unwrap();
    for (d, cpu) in decodes.iter().zip(cpu_streams.iter().rev()) {
        let got = l3_read(&gpu, &out, d.dst_at, d.header.values as u64);
        assert_eq!(bits(&decode_blocks(cpu, u64::MAX).unwrap()), got);
    }
    // Rooms that overlap: refused, naming the offset.
    let mut overlapping = jobs.clone();
    overlapping[1].dst_at = jobs[0].dst_at + 1;
    let e = encode_blocks_batch(&gpu, &src, &dst, &overlapping).unwrap_err();
    assert!(e.to_string().contains("must not overlap"), "{e}");
    // A damaged stream in the middle of a batch: the error names its offset.
    let good = &cpu_streams[0];
    let mut bad = good.clone();
    bad[4 * 16..4 * 16 + 4].copy_from_slice(&0x0000_00ffu32.to_le_bytes());
    let damaged = buffer(&gpu, (bad.len() / 4) as u64 + 10);
    gpu.queue().write_buffer(&damaged, 40, &bad);
    let header = parse_blocks(good, u64::MAX).unwrap();
    let batch = [
        DecodeJob {
            src: &dst,
            src_at: jobs[0].dst_at,
            header: &headers[0],
            dst_at: 0,
        },
        DecodeJob {
            src: &damaged,
            src_at: 10,
            header: &header,
            dst_at: 5000,
        },
    ];
    let out = buffer(&gpu, 10_000);
    let e = decode_blocks_batch(&gpu, &batch, &out).unwrap_err();
    let text = e.to_string();
    assert!(
        text.contains("malformed blocks") && text.contains("40"),
        "{text}"
    );
}
