//! File generators and checks shared by the GPU tests: the public-API tests in tests/gpu.rs
//! and the crate's unit tests in src/gpu/tests.rs (which include this file with `#[path]`;
//! the crate names itself `l3` in its tests). Every item is used by one of them at least.
#![allow(dead_code)]

#[cfg(feature = "gpu")]
use std::sync::OnceLock;

use l3::decode::DecodeOptions;
use l3::encode::{encode, EncodeOptions};
use l3::format::{parse_file, ParseOptions};
use l3::gpu::Normalize;
#[cfg(feature = "gpu")]
use l3::gpu::{GpuDecoder, OutputLayout};
use l3::raw::{RawImage, Samples};
use l3::{format, ColorType};
use l3::{CompactOptions, PredictorChoice, PredictorSet};

#[cfg(feature = "gpu")]
/// The shared decoder, or `None` (after printing SKIPPED) when no adapter exists.
pub fn gpu() -> Option<&'static GpuDecoder> {
    static GPU: OnceLock<Option<GpuDecoder>> = OnceLock::new();
    let g = GPU
        .get_or_init(|| match l3::gpu::select_adapter() {
            Ok(adapter) => {
                // An adapter exists: failing to build the decoder on it is a test failure.
                let d = GpuDecoder::with_adapter(&adapter)
                    .unwrap_or_else(|e| panic!("decoder on {:?}: {e}", adapter.get_info()));
                eprintln!("GPU adapter: {}", d.adapter_name());
                Some(d)
            }
            Err(e) => {
                eprintln!("no GPU adapter: {e}");
                None
            }
        })
        .as_ref();
    if g.is_none() {
        if std::env::var("CI").as_deref() == Ok("true") {
            panic!(
                "CI=true but no GPU adapter was found: install a Vulkan driver (e.g. Mesa \
                 lavapipe: apt-get install mesa-vulkan-drivers) or unset CI to skip GPU tests"
            );
        }
        println!("SKIPPED: no GPU adapter");
    }
    g
}

/// Small deterministic generator (xorshift64*).
pub struct Rng(pub u64);
impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// A random image: smooth gradients plus noise of a random amplitude (so every predictor and
/// many bit widths occur), or pure noise (full-depth bit widths).
pub fn random_samples(rng: &mut Rng, w: u32, h: u32, c: u8, depth: u8) -> Vec<u16> {
    let max = if depth == 8 { 255u32 } else { 65535 };
    let noise = [0u64, 1, 3, 16, 300, max as u64 + 1][rng.below(6) as usize];
    let (fx, fy) = (rng.below(7) as u32, rng.below(5) as u32);
    let mut v = Vec::with_capacity((w * h * c as u32) as usize);
    for y in 0..h {
        for x in 0..w {
            for ch in 0..c as u32 {
                let smooth = (x * fx + y * fy + ch * 37) * (max / 255);
                let n = if noise == 0 {
                    0
                } else {
                    rng.below(noise) as u32
                };
                v.push((smooth.wrapping_add(n) & max) as u16);
            }
        }
    }
    v
}

/// A label-map-like image: random rectangles of random constant colours over a background,
/// so flat runs with edges occur (the compact profile's run tokens).
pub fn label_samples(rng: &mut Rng, w: u32, h: u32, c: u8, depth: u8) -> Vec<u16> {
    let max = if depth == 8 { 256u64 } else { 65536 };
    let colour = |rng: &mut Rng| -> Vec<u16> { (0..c).map(|_| rng.below(max) as u16).collect() };
    let background = colour(rng);
    let mut v: Vec<u16> = (0..w * h)
        .flat_map(|_| background.iter().copied())
        .collect();
    for _ in 0..1 + rng.below(6) {
        let fill = colour(rng);
        let (x0, y0) = (rng.below(w as u64) as u32, rng.below(h as u64) as u32);
        let (x1, y1) = (
            x0 + 1 + rng.below((w - x0) as u64) as u32,
            y0 + 1 + rng.below((h - y0) as u64) as u32,
        );
        for y in y0..y1 {
            for x in x0..x1 {
                let at = ((y * w + x) * c as u32) as usize;
                v[at..at + c as usize].copy_from_slice(&fill);
            }
        }
    }
    v
}

pub fn encode_raw(w: u32, h: u32, c: u8, depth: u8, s: &[u16], opts: &EncodeOptions) -> Vec<u8> {
    let color = ColorType::from_channels(c).unwrap();
    let bytes: Vec<u8>;
    let samples = if depth == 8 {
        bytes = s.iter().map(|&x| x as u8).collect();
        Samples::U8(&bytes)
    } else {
        Samples::U16(s)
    };
    encode(
        &RawImage {
            width: w,
            height: h,
            color,
            samples,
        },
        opts,
    )
    .unwrap()
}

/// Random files covering odd sizes, 1..=4 channels, both depths, all patch sizes and
/// predictors.
pub fn random_files(seed: u64, count: usize) -> Vec<Vec<u8>> {
    let mut rng = Rng(seed);
    let mut sizes: Vec<(u32, u32)> = vec![(1, 1), (1, 77), (93, 1), (8, 8), (129, 130), (200, 3)];
    while sizes.len() < count {
        sizes.push((1 + rng.below(300) as u32, 1 + rng.below(200) as u32));
    }
    sizes
        .into_iter()
        .enumerate()
        .map(|(i, (w, h))| {
            let c = 1 + (i % 4) as u8;
            let depth = if rng.below(3) == 0 { 16 } else { 8 };
            let s = random_samples(&mut rng, w, h, c, depth);
            let predictor = match rng.below(5) {
                4 => PredictorChoice::Best,
                p => PredictorChoice::Fixed(l3::FastPredictor::ALL[p as usize]),
            };
            // One file in four error-bounded (bound 1..=4), so every GPU test that compares
            // with the CPU decoder covers the dequantisation too.
            let max_error = if rng.below(4) == 0 {
                1 + rng.below(4) as u16
            } else {
                0
            };
            let opts = EncodeOptions {
                patch_log2: 3 + (i % 5) as u8,
                profile: l3::ProfileOptions::Fast(l3::FastOptions { predictor }),
                parallel: true,
                max_error,
            };
            encode_raw(w, h, c, depth, &s, &opts)
        })
        .collect()
}

pub fn cpu_decode(file: &[u8]) -> Vec<u8> {
    l3::decode::decode(file, &DecodeOptions::default())
        .unwrap()
        .1
}

/// The f32 CHW tensor the normalisation formula gives on the CPU decoder's samples (the
/// reference both the f32 twin and the f32 shader are held to).
pub fn expected_f32_chw(file: &[u8], norm: &Normalize) -> Vec<f32> {
    let (h, cpu) = l3::decode::decode(file, &DecodeOptions::default()).unwrap();
    let (hw, c) = ((h.width * h.height) as usize, h.channels() as usize);
    (0..hw * c)
        .map(|e| {
            let (ch, r) = (e / hw, e % hw);
            let s = if h.depth == 8 {
                cpu[r * c + ch] as u32
            } else {
                // The CPU decoder writes 16-bit samples in native byte order.
                u16::from_ne_bytes([cpu[(r * c + ch) * 2], cpu[(r * c + ch) * 2 + 1]]) as u32
            };
            norm.apply(s, h.depth, ch)
        })
        .collect()
}

#[cfg(feature = "gpu")]
/// Decodes `files` as one batch and checks every image against the CPU decoder.
pub fn check_batch(gpu: &GpuDecoder, files: &[Vec<u8>], names: &[String]) {
    let refs: Vec<&[u8]> = files.iter().map(|f| f.as_slice()).collect();
    let batch = gpu.decode_batch(&refs, OutputLayout::Interleaved).unwrap();
    let got = batch.read_back().unwrap();
    assert_eq!(got.len(), files.len());
    for ((file, got), name) in files.iter().zip(&got).zip(names) {
        let want = cpu_decode(file);
        assert!(got == &want, "GPU and CPU decodes differ for {name}");
    }
}

#[cfg(feature = "gpu")]
/// Whether `gpu` runs on a CPU device (lavapipe, what CI runs), whose f32 division is
/// correctly rounded, so f32 output equals the CPU's bit for bit.
pub fn exact_f32(gpu: &GpuDecoder) -> bool {
    gpu.adapter_info()
        .is_some_and(|i| i.device_type == wgpu::DeviceType::Cpu)
}

/// Largest difference allowed between the GPU's `(x / max - mean) / std` and the CPU's
/// correctly rounded one, for `|x / max - mean| <= 1`: WGSL allows 2.5 ulp in each division
/// (subtraction is correctly rounded), ulp(v) <= EPSILON * |v| and <= EPSILON for |v| <= 1.
/// GPU: 2.5 EPSILON from `x / max`, 0.5 EPSILON from the subtraction, both divided by `std`,
/// plus 2.5 ulp of the quotient (|quotient| <= 1 / std): 5.5 EPSILON / std. The CPU's value
/// is off by at most 1.5 EPSILON / std the same way. Total: 7 EPSILON / std (an absolute
/// bound: a ulp bound does not hold where the subtraction cancels near the mean).
pub fn f32_tolerance(std: f32) -> f32 {
    7.0 * f32::EPSILON / std
}

/// Images too large for a 256 KiB chunk (split into bands of patch rows, interleaved
/// output) mixed with small ones: 8- and 16-bit, odd sizes, every channel count.
pub const BANDED_SHAPES: [(u32, u32, u8, u8); 8] = [
    (300, 300, 3, 8),
    (20, 10, 1, 8),
    (257, 199, 4, 16),
    (5, 3, 2, 8),
    (123, 411, 2, 8),
    (3, 30000, 1, 16),
    (170, 93, 3, 16),
    (600, 257, 4, 8),
];

/// Random images of these shapes, image `i` encoded with `options(i)`.
pub fn banded_files(
    rng: &mut Rng,
    shapes: &[(u32, u32, u8, u8)],
    options: impl Fn(usize) -> EncodeOptions,
) -> Vec<Vec<u8>> {
    shapes
        .iter()
        .enumerate()
        .map(|(i, &(w, h, c, depth))| {
            let s = random_samples(rng, w, h, c, depth);
            encode_raw(w, h, c, depth, &s, &options(i))
        })
        .collect()
}

/// Fixes the trailing CRC after a corruption, so only the stream checks can catch it.
pub fn fix_crc(file: &mut [u8]) {
    let n = file.len() - format::CHECKSUM_LEN;
    let crc = crc32fast::hash(&file[..n]);
    file[n..].copy_from_slice(&crc.to_le_bytes());
}

#[cfg(feature = "gpu")]
/// Checks a decoded batch against the CPU decoder.
pub fn assert_matches_cpu(batch: &l3::gpu::GpuBatch, files: &[Vec<u8>], what: &str) {
    let got = batch.read_back().unwrap();
    assert_eq!(got.len(), files.len());
    for (i, (file, got)) in files.iter().zip(&got).enumerate() {
        assert!(
            *got == cpu_decode(file),
            "{what}: image {i} differs from the CPU decode"
        );
    }
}

/// Random version-2 files: 1..=4 channels, 8 and 16 bits, every patch size 8..=128, odd
/// widths and heights below and above a patch; smooth images with noise of every amplitude,
/// pure noise, and flat images (one-token codes, with raw bits when the value is 16 or more);
/// each predictor alone or the encoder's choice, with and without subtract-green and pair
/// tokens.
pub fn random_compact_files(seed: u64, count: usize) -> Vec<Vec<u8>> {
    let mut rng = Rng(seed);
    let mut sizes: Vec<(u32, u32)> = vec![
        (1, 1),
        (1, 77),
        (93, 1),
        (8, 8),
        (129, 130),
        (200, 3),
        (7, 9),
        (127, 131),
        (65, 63),
        (33, 17),
    ];
    while sizes.len() < count {
        sizes.push((1 + rng.below(300) as u32, 1 + rng.below(200) as u32));
    }
    sizes
        .into_iter()
        .enumerate()
        .map(|(i, (w, h))| {
            let c = 1 + (i % 4) as u8;
            let depth = if rng.below(3) == 0 { 16 } else { 8 };
            let mut s = if rng.below(3) == 0 {
                label_samples(&mut rng, w, h, c, depth)
            } else {
                random_samples(&mut rng, w, h, c, depth)
            };
            if rng.below(6) == 0 {
                let v = s[rng.below(s.len() as u64) as usize];
                s.fill(v);
            }
            let all = l3::format::compact::CompactPredictor::ALL;
            let predictors = match rng.below(9) as usize {
                p if p < all.len() => PredictorSet::only(&[all[p]]),
                _ => PredictorSet::all(),
            };
            let opts = EncodeOptions {
                profile: l3::ProfileOptions::Compact(CompactOptions {
                    predictors,
                    subtract_green: rng.below(3) != 0,
                    pair_tokens: rng.below(3) != 0,
                    run_tokens: rng.below(4) != 0,
                    palette: rng.below(4) != 0,
                    shared_codes: rng.below(4) != 0,
                }),
                patch_log2: 3 + (i % 5) as u8,
                // Every fourth file error-bounded, as for version 1.
                max_error: if i % 4 == 3 {
                    1 + (i / 4 % 4) as u16
                } else {
                    0
                },
                ..Default::default()
            };
            encode_raw(w, h, c, depth, &s, &opts)
        })
        .collect()
}

/// Version-1 and version-2 files alternating: one batch of both.
pub fn mixed_files(seed: u64, count: usize) -> Vec<Vec<u8>> {
    let fast = random_files(seed, count.div_ceil(2));
    let compact = random_compact_files(seed + 1, count / 2);
    let mut out = Vec::with_capacity(count);
    for i in 0..count {
        out.push(
            if i % 2 == 0 {
                &fast[i / 2]
            } else {
                &compact[i / 2]
            }
            .clone(),
        );
    }
    out
}

pub fn layouts_of(files: &[Vec<u8>]) -> Vec<l3::format::FileLayout<'_>> {
    files
        .iter()
        .map(|f| parse_file(f, &l3::Limits::default(), ParseOptions::default()).unwrap())
        .collect()
}

/// Corrupt copies of version-2 files: header bits, random bytes and single bits in the
/// stream bodies, with the size table left valid (so the CPU-side parse passes).
pub fn corrupt_compact_files(seed: u64) -> Vec<(usize, usize, Vec<u8>)> {
    let base = random_compact_files(seed, 40);
    let mut rng = Rng(seed + 100);
    let mut files = Vec::new();
    for (i, f) in base.iter().enumerate() {
        let layout = parse_file(f, &l3::Limits::default(), ParseOptions::default()).unwrap();
        let data_start = layout.header.data_offset() as usize;
        let data_end = f.len() - format::CHECKSUM_LEN;
        let streams = layout.offsets.len() - 1;
        for k in 0..8 {
            let mut g = f.clone();
            let stream = rng.below(streams as u64) as usize;
            let (s0, s1) = (
                layout.offsets[stream] as usize,
                layout.offsets[stream + 1] as usize,
            );
            let mut flip_in = |from: usize, to: usize, g: &mut Vec<u8>| {
                let at = from + rng.below((to - from) as u64) as usize;
                g[at] ^= 1 << rng.below(8);
            };
            match k {
                // A bit of a stream's header (transform, predictor, token count, lengths).
                0 | 1 => flip_in(s0, s1.min(s0 + 8), &mut g),
                // A stream's last byte (segment ends, padding).
                2 => flip_in(s1 - 1, s1, &mut g),
                // A single bit anywhere in the streams.
                3 | 4 => flip_in(data_start, data_end, &mut g),
                // Random bytes anywhere in the streams.
                _ => {
                    for _ in 0..=rng.below(3) {
                        let at = data_start + rng.below((data_end - data_start) as u64) as usize;
                        g[at] ^= 1 + rng.below(255) as u8;
                    }
                }
            }
            files.push((i, k, g));
        }
    }
    files
}

/// The first `size` bytes of `buffer` on `gpu`'s device, through the test's own mapped
/// staging buffer (independent of the library's read-backs).
#[cfg(feature = "gpu")]
pub fn read_buffer(gpu: &GpuDecoder, buffer: &wgpu::Buffer, size: u64) -> Vec<u8> {
    let staging = gpu.device().create_buffer(&wgpu::BufferDescriptor {
        label: None,
        size,
        usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });
    let mut encoder = gpu
        .device()
        .create_command_encoder(&wgpu::CommandEncoderDescriptor { label: None });
    encoder.copy_buffer_to_buffer(buffer, 0, &staging, 0, size);
    gpu.queue().submit([encoder.finish()]);
    staging
        .slice(..)
        .map_async(wgpu::MapMode::Read, |r| r.unwrap());
    gpu.device()
        .poll(wgpu::PollType::wait_indefinitely())
        .unwrap();
    let v = staging.slice(..).get_mapped_range().unwrap().to_vec();
    v
}

/// `exported`'s memory imported again on `gpu`'s device from a duplicate of its fd, as a
/// buffer of `size` bytes (what another API importing it sees).
#[cfg(all(feature = "interop", unix))]
pub fn reimport(
    gpu: &GpuDecoder,
    exported: &l3::gpu::interop::ExportedBuffer,
    size: u64,
) -> wgpu::Buffer {
    // SAFETY: the fd, size, type and dedication are the export's, on the same device; the
    // callers wait for every write of the exported buffer before reading the imported one.
    unsafe {
        l3::gpu::interop::import_buffer(
            gpu.device(),
            exported.fd.try_clone().unwrap(),
            size,
            exported.allocation_size,
            exported.memory_type,
            exported.dedicated,
        )
    }
    .unwrap()
}
