//! The data-side GPU stages (augment, float fields, progressive levels) on mixed batches: one
//! dispatch per stage per batch (`gpu::jobs`) gives each image, field or record exactly what
//! it gets alone and what the CPU gives. Batches mix sizes, channels, depths, crop windows,
//! schemes and field shapes; a batch of one; and batches on a device whose storage bindings
//! are 1 MiB, where a batch's images, values or levels outgrow one binding and the stage
//! splits into windows. Augment is compared bit for bit with per-image runs on the GPU and
//! within the shader's stated float tolerance with the CPU; fields and levels bit for bit
//! with the CPU.
//!
//! On a machine without a GPU, Mesa's lavapipe works: `WGPU_BACKEND=vulkan cargo test
//! --release --test gpu_batches`.
#![cfg(feature = "gpu")]

#[path = "common/gpu_support.rs"]
mod gpu_support;

use gpu_support::*;
use l3::decode::DecodeOptions;
use l3::encode::EncodeOptions;
use l3::field::{decode_field, encode_field, Bound, FieldOptions};
use l3::gpu::{GpuDecoder, OutputLayout};
use l3::loader::{Augment, AugmentParams, TensorType};
use l3::progressive::{decode_level, encode_levels, LevelScheme, ProgressiveOptions, StoredLevels};
use l3::Profile;

/// A decoder on a new device of the shared adapter whose storage bindings hold 1 MiB.
fn small_binding_decoder() -> GpuDecoder {
    let adapter = l3::gpu::select_adapter().unwrap();
    let mut limits = l3::gpu::required_limits(&adapter);
    limits.max_storage_buffer_binding_size = 1 << 20;
    let (device, queue) = pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
        label: Some("1 MiB bindings"),
        required_limits: limits,
        ..Default::default()
    }))
    .unwrap();
    GpuDecoder::new(&device, &queue).unwrap()
}

/// Random images of the given (width, height, channels, depth), as L3 files.
fn files_of(seed: u64, shapes: &[(u32, u32, u8, u8)]) -> Vec<Vec<u8>> {
    let mut rng = Rng(seed);
    shapes
        .iter()
        .map(|&(w, h, c, d)| {
            let s = random_samples(&mut rng, w, h, c, d);
            encode_raw(
                w,
                h,
                c,
                d,
                &s,
                &EncodeOptions::for_profile(l3::Profile::Fast),
            )
        })
        .collect()
}

/// The CPU's decoded image of `file`, as the augment's twin takes it.
fn level_image(file: &[u8]) -> l3::progressive::LevelImage {
    let (h, data) = l3::decode::decode(file, &DecodeOptions::default()).unwrap();
    l3::progressive::LevelImage {
        width: h.width,
        height: h.height,
        channels: h.channels(),
        depth: h.depth,
        data,
    }
}

/// Augments `files` as one batch on `gpu` with `params` and checks every image's values: bit
/// for bit what the same image gives in a batch of its own, and within 1e-4 of the CPU twin
/// (f16 output: within its rounding too). With padding or rotation, a sample coordinate
/// within rounding of an image edge may land on the other side of the fill decision: at most
/// one value in 500 may differ more.
fn check_augment(gpu: &GpuDecoder, files: &[Vec<u8>], params: &[AugmentParams], aug: &Augment) {
    let refs: Vec<&[u8]> = files.iter().map(|f| f.as_slice()).collect();
    let batch = gpu.decode_batch(&refs, OutputLayout::Interleaved).unwrap();
    let all = l3::loader::gpu::augment(gpu, &batch, params, aug)
        .unwrap()
        .read_back()
        .unwrap();
    let per = aug.output_len();
    assert_eq!(all.len(), per * files.len());
    let (values, bytes) = (all.to_f32(), all.as_bytes());
    let size = bytes.len() / all.len();
    let (mut worst, mut edge) = (0f32, 0usize);
    for (i, file) in files.iter().enumerate() {
        let one = gpu
            .decode_batch(&[file.as_slice()], OutputLayout::Interleaved)
            .unwrap();
        let alone = l3::loader::gpu::augment(gpu, &one, &params[i..=i], aug)
            .unwrap()
            .read_back()
            .unwrap();
        assert!(
            bytes[i * per * size..(i + 1) * per * size] == *alone.as_bytes(),
            "image {i}: its values in the batch differ from its values alone"
        );
        let mut expect = vec![0f32; per];
        aug.apply(&level_image(file), &params[i], &mut expect)
            .unwrap();
        for (g, e) in values[i * per..(i + 1) * per].iter().zip(&expect) {
            let rounding = match aug.output {
                TensorType::F32 => 0.0,
                TensorType::F16 => e.abs() / 1024.0,
            };
            let d = (g - e).abs() - rounding;
            if d > 1e-4 && aug.padding > 0 {
                edge += 1;
            } else {
                worst = worst.max(d);
            }
        }
    }
    assert!(
        worst <= 1e-4,
        "GPU augmentation differs from the CPU by {worst}"
    );
    assert!(
        edge * 500 <= values.len(),
        "{edge} of {} values differ at edges",
        values.len()
    );
}

/// Mixed shapes: gray, gray+alpha, RGB and RGBA, 8 and 16 bits, one-pixel sides.
const MIXED: [(u32, u32, u8, u8); 7] = [
    (61, 47, 3, 8),
    (1, 9, 1, 8),
    (130, 33, 4, 16),
    (17, 1, 2, 8),
    (96, 80, 3, 16),
    (5, 5, 1, 16),
    (200, 150, 4, 8),
];

#[test]
fn augment_mixed_batches_match_each_image_alone_and_the_cpu() {
    let Some(gpu) = gpu() else { return };
    let files = files_of(11, &MIXED);
    let images: Vec<_> = files.iter().map(|f| level_image(f)).collect();
    let mut general = Augment::with_size(23, 17);
    general.rotate90 = true;
    general.max_angle_degrees = 15.0;
    general.padding = 3;
    general.fill = 0.25;
    general.noise_std = 0.02;
    let mut half = Augment::with_size(20, 14);
    half.output = TensorType::F16;
    for (seed, aug) in [
        (1u64, Augment::with_size(31, 29)),
        (2, general),
        (3, half),
        (4, Augment::with_size(8, 8).deterministic()),
    ] {
        let mut params: Vec<AugmentParams> = images
            .iter()
            .enumerate()
            .map(|(i, im)| aug.params(seed, 0, i as u64, im.width, im.height))
            .collect();
        // Explicit windows: one pixel in a corner, the whole image flipped.
        let p = aug.padding;
        let im = &images[2];
        params[2].crop = (im.width + 2 * p - 1, im.height + 2 * p - 1, 1, 1);
        let im = &images[4];
        params[4].crop = (0, 0, im.width + 2 * p, im.height + 2 * p);
        params[4].flip = true;
        check_augment(gpu, &files, &params, &aug);
        // A batch of one.
        check_augment(gpu, &files[6..], &params[6..], &aug);
    }
}

/// On 1 MiB bindings, a batch of images that together outgrow a binding (about 1.8 MiB
/// decoded) augments in windows, each image exactly as alone.
#[test]
fn augment_batches_larger_than_a_binding_split_into_windows() {
    let Some(_) = gpu() else { return };
    let small = small_binding_decoder();
    let shapes: Vec<_> = (0..16u32).map(|k| (200 - k, 150 + k, 4, 8)).collect();
    let files = files_of(12, &shapes);
    let aug = Augment::with_size(24, 24);
    let params: Vec<_> = shapes
        .iter()
        .enumerate()
        .map(|(i, &(w, h, _, _))| aug.params(5, 1, i as u64, w, h))
        .collect();
    check_augment(&small, &files, &params, &aug);
}

/// Fields of different shapes, with and without exact runs, in one batch; alone; and on 1
/// MiB bindings, where the batch's values (about 1.6 MiB) outgrow a binding: every field
/// bit for bit as on the CPU.
#[test]
fn field_batches_mixed_alone_and_larger_than_a_binding_match_the_cpu() {
    let Some(gpu) = gpu() else { return };
    let small = small_binding_decoder();
    let field = |ny: u32, nx: u32, holes: usize| {
        let mut v: Vec<f32> = (0..ny * nx)
            .map(|i| ((i / nx) as f32 * 0.13).sin() * 40.0 + (i % nx) as f32 * 0.07)
            .collect();
        if holes > 0 {
            for i in (0..v.len()).step_by(holes) {
                v[i] = f32::NAN;
            }
        }
        encode_field(&v, &[ny, nx], &FieldOptions::new(Bound::Absolute(1e-2))).unwrap()
    };
    let mixed = vec![
        field(1, 1, 0),
        field(37, 53, 11),
        field(3, 700, 0),
        field(64, 64, 1),
        field(9, 2, 0),
    ];
    let big: Vec<_> = (0..7)
        .map(|k| field(200 + k, 300, 97 * (k as usize % 2)))
        .collect();
    for (decoder, files) in [
        (gpu, &mixed),
        (gpu, &mixed[1..2].to_vec()),
        (&small, &big),
        (&small, &mixed),
    ] {
        let refs: Vec<&[u8]> = files.iter().map(|f| f.as_slice()).collect();
        let batch = l3::field::gpu::decode_fields(decoder, &refs).unwrap();
        for (k, f) in files.iter().enumerate() {
            let (_, cpu) = decode_field(f, &DecodeOptions::default()).unwrap();
            let got = batch.read_back_field(k).unwrap();
            assert!(
                got.len() == cpu.len()
                    && got
                        .iter()
                        .zip(&cpu)
                        .all(|(a, b)| a.to_bits() == b.to_bits()),
                "field {k} of {}: GPU and CPU differ",
                files.len()
            );
        }
    }
}

/// Progressive records of mixed sizes, channels, depths and schemes (interlaced and flat) at
/// every level in one batch; a record alone; and on 1 MiB bindings, where a batch's levels
/// (about 1.7 MiB at the top) outgrow a binding: every record bit for bit as on the CPU.
#[test]
fn level_batches_mixed_alone_and_larger_than_a_binding_match_the_cpu() {
    let Some(gpu) = gpu() else { return };
    let small = small_binding_decoder();
    let levels = 3u8;
    let encode = |shapes: &[(u32, u32, u8, u8)], seed: u64| {
        let mut rng = Rng(seed);
        shapes
            .iter()
            .enumerate()
            .map(|(i, &(w, h, c, d))| {
                let s = random_samples(&mut rng, w, h, c, d);
                let s8: Vec<u8> = s.iter().map(|&v| v as u8).collect();
                let color = match c {
                    1 => l3::ColorType::Gray,
                    2 => l3::ColorType::GrayAlpha,
                    3 => l3::ColorType::Rgb,
                    _ => l3::ColorType::Rgba,
                };
                let raw = l3::RawImage {
                    width: w,
                    height: h,
                    color,
                    samples: if d == 16 {
                        l3::Samples::U16(&s)
                    } else {
                        l3::Samples::U8(&s8)
                    },
                };
                let progressive = ProgressiveOptions {
                    levels,
                    max_overhead: if i % 3 == 1 { 0.0 } else { f64::INFINITY },
                };
                let profile = if i % 2 == 0 {
                    Profile::Compact
                } else {
                    Profile::Fast
                };
                let encoded =
                    encode_levels(&raw, &progressive, &EncodeOptions::for_profile(profile))
                        .unwrap();
                ((w, h, c, d), encoded)
            })
            .collect::<Vec<_>>()
    };
    let mixed = encode(&MIXED, 21);
    assert!(mixed.iter().any(|(_, e)| e.scheme == LevelScheme::Flat));
    assert!(mixed
        .iter()
        .any(|(_, e)| e.scheme == LevelScheme::Interlace));
    let big_shapes: Vec<_> = (0..6u32).map(|k| (300 + k, 250 - k, 4, 8)).collect();
    let big = encode(&big_shapes, 22);
    let cases: [(&GpuDecoder, &[_]); 4] = [
        (gpu, &mixed),
        (gpu, &mixed[2..3]),
        (&small, &big),
        (&small, &mixed),
    ];
    for (decoder, records) in cases {
        let payloads: Vec<Vec<&[u8]>> = records
            .iter()
            .map(|(_, e)| e.payloads.iter().map(|p| p.as_slice()).collect())
            .collect();
        let stored: Vec<StoredLevels> = records
            .iter()
            .zip(&payloads)
            .map(|(&((w, h, c, d), ref e), p)| StoredLevels {
                scheme: e.scheme,
                level_count: levels,
                width: w,
                height: h,
                channels: c,
                depth: d,
                payloads: p,
            })
            .collect();
        for level in 0..levels {
            let batch = l3::progressive::gpu::decode_levels(decoder, &stored, level).unwrap();
            let got = batch.read_back().unwrap();
            for (i, s) in stored.iter().enumerate() {
                let cpu = decode_level(s, level, &DecodeOptions::default()).unwrap();
                let cpu_le: Vec<u8> = if s.depth == 16 {
                    cpu.data
                        .chunks_exact(2)
                        .flat_map(|b| u16::from_ne_bytes([b[0], b[1]]).to_le_bytes())
                        .collect()
                } else {
                    cpu.data
                };
                assert!(
                    got[i] == cpu_le,
                    "record {i} of {} ({:?}) level {level}: GPU and CPU differ",
                    stored.len(),
                    s.scheme
                );
            }
        }
    }
}
