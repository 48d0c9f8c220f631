//! GPU decoder tests. The naga validation and CPU-twin tests need no GPU; the others get an
//! adapter through [`gpu`], which skips them (printing "SKIPPED: no GPU adapter") when there is
//! none, unless `CI=true`, where a missing adapter fails the test.
//!
//! On a machine without a GPU, Mesa's lavapipe works: `WGPU_BACKEND=vulkan cargo test
//! --release --test gpu`.
#![cfg(feature = "gpu")]

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use l3::decode::DecodeOptions;
use l3::encode::{encode, EncodeOptions, RawImage, Samples};
use l3::format::{self, parse_file, ParseOptions};
use l3::gpu::{cpu_twin, shaders, GpuDecoder, Normalize, OutputFormat};
use l3::{ColorType, Error, FormatError, LimitsError, Profile};
use l3::{CompactOptions, PredictorChoice, PredictorSet};

/// The shared decoder, or `None` (after printing SKIPPED) when no adapter exists.
fn gpu() -> Option<&'static GpuDecoder> {
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
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// A random image: smooth gradients plus noise of a random amplitude (so every predictor and
/// many bit widths occur), or pure noise (full-depth bit widths).
fn random_samples(rng: &mut Rng, w: u32, h: u32, c: u8, depth: u8) -> Vec<u16> {
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

fn encode_raw(w: u32, h: u32, c: u8, depth: u8, s: &[u16], opts: &EncodeOptions) -> Vec<u8> {
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
fn random_files(seed: u64, count: usize) -> Vec<Vec<u8>> {
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
            let opts = EncodeOptions {
                patch_log2: 3 + (i % 5) as u8,
                profile: l3::ProfileOptions::Fast(l3::FastOptions { predictor }),
                parallel: true,
            };
            encode_raw(w, h, c, depth, &s, &opts)
        })
        .collect()
}

fn cpu_decode(file: &[u8]) -> Vec<u8> {
    l3::decode::decode(file, &DecodeOptions::default())
        .unwrap()
        .1
}

/// The f32 CHW tensor the normalisation formula gives on the CPU decoder's samples (the
/// reference both the f32 twin and the f32 shader are held to).
fn expected_f32_chw(file: &[u8], norm: &Normalize) -> Vec<f32> {
    let (h, cpu) = l3::decode::decode(file, &DecodeOptions::default()).unwrap();
    let (hw, c) = ((h.width * h.height) as usize, h.channels() as usize);
    let max = ((1u32 << h.depth) - 1) as f32;
    (0..hw * c)
        .map(|e| {
            let (ch, r) = (e / hw, e % hw);
            let s = if h.depth == 8 {
                cpu[r * c + ch] as u32
            } else {
                // The CPU decoder writes 16-bit samples in native byte order.
                u16::from_ne_bytes([cpu[(r * c + ch) * 2], cpu[(r * c + ch) * 2 + 1]]) as u32
            };
            (s as f32 / max - norm.mean[ch]) / norm.std[ch]
        })
        .collect()
}

/// Decodes `files` as one batch and checks every image against the CPU decoder.
fn check_batch(gpu: &GpuDecoder, files: &[Vec<u8>], names: &[String]) {
    let refs: Vec<&[u8]> = files.iter().map(|f| f.as_slice()).collect();
    let batch = gpu.decode_batch(&refs, OutputFormat::Interleaved).unwrap();
    let got = batch.read_back().unwrap();
    assert_eq!(got.len(), files.len());
    for ((file, got), name) in files.iter().zip(&got).zip(names) {
        let want = cpu_decode(file);
        assert!(got == &want, "GPU and CPU decodes differ for {name}");
    }
}

#[test]
fn every_shader_validates_with_naga() {
    for stage in shaders::Stage::ALL {
        let src = shaders::source(stage);
        let module = naga::front::wgsl::parse_str(&src)
            .unwrap_or_else(|e| panic!("{}: {}", stage.file_name(), e.emit_to_string(&src)));
        naga::valid::Validator::new(
            naga::valid::ValidationFlags::all(),
            naga::valid::Capabilities::empty(),
        )
        .validate(&module)
        .unwrap_or_else(|e| panic!("{}: {}", stage.file_name(), e.emit_to_string(&src)));
    }
}

/// The CPU twins of all kernels, run as one pipeline, reproduce the CPU decoder (no GPU).
#[test]
fn cpu_twin_pipeline_matches_cpu_decoder() {
    assert_twins_match_cpu_decoder(&random_files(7, 40));
}

/// Runs the twins on one chunk of `files`, interleaved and f32 output, and compares each
/// image with the CPU decoder: interleaved byte for byte; f32 (cpu_twin::decode_f32_chw)
/// as the normalisation formula on the CPU decoder's samples, bit for bit, in planar order.
fn assert_twins_match_cpu_decoder(files: &[Vec<u8>]) {
    let layouts = layouts_of(files);
    // The image table lists version-1 images first: find each file's entry by its index.
    let info_of = |chunk: &l3::gpu::ChunkInputs, i: usize| {
        *chunk
            .images
            .iter()
            .find(|info| info.image_index as usize == i)
            .unwrap()
    };
    let chunk = l3::gpu::build_chunk(&layouts, 0, OutputFormat::Interleaved);
    let (out, flags) = cpu_twin::run_chunk(&chunk, OutputFormat::Interleaved);
    assert!(flags.iter().all(|&f| f == 0), "{flags:?}");
    for (i, file) in files.iter().enumerate() {
        let want = cpu_decode(file);
        let start = info_of(&chunk, i).out_base as usize * 4;
        assert!(out[start..start + want.len()] == want[..], "file {i}");
    }
    let norm = Normalize::IMAGENET;
    let output = OutputFormat::F32Chw(norm);
    let chunk = l3::gpu::build_chunk(&layouts, 0, output);
    let (out, flags) = cpu_twin::run_chunk(&chunk, output);
    assert!(flags.iter().all(|&f| f == 0), "{flags:?}");
    let out: Vec<f32> = bytemuck::pod_collect_to_vec(&out);
    for (i, file) in files.iter().enumerate() {
        let info = info_of(&chunk, i);
        for (e, expect) in expected_f32_chw(file, &norm).into_iter().enumerate() {
            let got = out[info.out_base as usize + e];
            assert_eq!(got.to_bits(), expect.to_bits(), "file {i} element {e}");
        }
    }
}

#[test]
fn prefix_sum_shader_matches_twin() {
    let Some(gpu) = gpu() else { return };
    let mut rng = Rng(3);
    // 16_777_217 elements need 65_537 blocks: a 2D dispatch and three levels.
    for n in [1usize, 255, 256, 257, 65_537, 300_001, 16_777_217] {
        let sizes: Vec<u32> = (0..n).map(|_| rng.below(40_000) as u32).collect();
        assert_eq!(
            gpu.prefix_sum(&sizes).unwrap(),
            cpu_twin::prefix_sum(&sizes),
            "n = {n}"
        );
    }
}

/// Prefix sums and batches from several threads on one decoder share its scratch buffers:
/// each must finish with its own inputs (the scratch lock is held until the scan is
/// submitted and read back).
#[test]
fn prefix_sums_and_batches_race_on_one_decoder() {
    let Some(shared) = gpu() else { return };
    // A decoder of its own, so that only this test's threads share the scratch buffers.
    let gpu = GpuDecoder::new(shared.device(), shared.queue()).unwrap();
    let files = random_files(17, 6);
    let want: Vec<Vec<u8>> = files.iter().map(|f| cpu_decode(f)).collect();
    std::thread::scope(|s| {
        for t in 0..4u64 {
            let (gpu, files, want) = (&gpu, &files, &want);
            s.spawn(move || {
                let mut rng = Rng(100 + t);
                for round in 0..12 {
                    if (round + t) % 2 == 0 {
                        let n = 1 + rng.below(5_000) as usize;
                        let sizes: Vec<u32> = (0..n).map(|_| rng.below(40_000) as u32).collect();
                        assert_eq!(
                            gpu.prefix_sum(&sizes).unwrap(),
                            cpu_twin::prefix_sum(&sizes),
                            "thread {t} round {round}"
                        );
                    } else {
                        let refs: Vec<&[u8]> = files.iter().map(|f| f.as_slice()).collect();
                        let batch = gpu.decode_batch(&refs, OutputFormat::Interleaved).unwrap();
                        assert!(
                            batch.read_back().unwrap() == *want,
                            "thread {t} round {round}"
                        );
                    }
                }
            });
        }
    });
}

fn image_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut paths: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
    paths.sort();
    for p in paths {
        if p.is_dir() {
            image_files(&p, out);
        } else {
            out.push(p);
        }
    }
}

/// Encodes every readable image under `dirs` in `profile` (patch sizes cycling through
/// 8..128) and checks GPU == CPU in batches of about 64 MiB of output.
fn check_image_dirs(gpu: &GpuDecoder, dirs: &[PathBuf], profile: Profile) -> usize {
    let mut paths = Vec::new();
    for d in dirs {
        image_files(d, &mut paths);
    }
    let (mut files, mut names, mut bytes, mut checked) = (Vec::new(), Vec::new(), 0u64, 0);
    for (i, p) in paths.iter().enumerate() {
        let Ok(img) = l3::read_image(p) else { continue };
        let opts = EncodeOptions {
            patch_log2: 3 + (i % 5) as u8,
            profile: l3::ProfileOptions::default_for(profile),
            ..Default::default()
        };
        let Ok(file) = l3::encode_image(&img, &opts) else {
            continue;
        };
        bytes += l3::read_header(&file).unwrap().output_bytes();
        files.push(file);
        names.push(p.display().to_string());
        if bytes > 64 << 20 {
            check_batch(gpu, &files, &names);
            checked += files.len();
            (files, names, bytes) = (Vec::new(), Vec::new(), 0);
        }
    }
    if !files.is_empty() {
        check_batch(gpu, &files, &names);
        checked += files.len();
    }
    checked
}

#[test]
fn bundled_samples_match_cpu() {
    let Some(gpu) = gpu() else { return };
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("samples");
    for profile in [Profile::Fast, Profile::Compact] {
        let n = check_image_dirs(gpu, std::slice::from_ref(&dir), profile);
        assert!(n >= 6, "only {n} samples decoded ({profile:?})");
    }
}

#[test]
fn shared_data_images_match_cpu() {
    check_shared_data_images(Profile::Fast);
}

#[test]
fn shared_data_images_match_cpu_compact() {
    check_shared_data_images(Profile::Compact);
}

fn check_shared_data_images(profile: Profile) {
    let Some(gpu) = gpu() else { return };
    let root = std::env::var_os("L3_TEST_DATA")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/data"));
    let dirs: Vec<PathBuf> = ["images", "pngsuite", "testpngs"]
        .iter()
        .map(|d| root.join(d))
        .filter(|d| d.is_dir())
        .collect();
    if dirs.is_empty() {
        println!("no test data under {}: nothing to check", root.display());
        return;
    }
    let n = check_image_dirs(gpu, &dirs, profile);
    println!(
        "{n} images from {} decoded identically ({profile:?})",
        root.display()
    );
}

#[test]
fn random_images_match_cpu_in_one_mixed_batch() {
    let Some(gpu) = gpu() else { return };
    let files = random_files(11, 120);
    let names: Vec<String> = (0..files.len()).map(|i| format!("random #{i}")).collect();
    check_batch(gpu, &files, &names);
    // The whole buffer, alignment padding included, equals the CPU twins' output.
    let refs: Vec<&[u8]> = files.iter().map(|f| f.as_slice()).collect();
    let batch = gpu.decode_batch(&refs, OutputFormat::Interleaved).unwrap();
    let layouts = layouts_of(&files);
    let chunk = l3::gpu::build_chunk(&layouts, 0, OutputFormat::Interleaved);
    let (twin, _) = cpu_twin::run_chunk(&chunk, OutputFormat::Interleaved);
    assert!(
        batch.read_back_all().unwrap() == twin,
        "shader and twin buffers differ"
    );
}

/// Whether `gpu` runs on a CPU device (lavapipe, what CI runs), whose f32 division is
/// correctly rounded, so f32 output equals the CPU's bit for bit.
fn exact_f32(gpu: &GpuDecoder) -> bool {
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
fn f32_tolerance(std: f32) -> f32 {
    7.0 * f32::EPSILON / std
}

#[test]
fn f32_chw_output_matches_cpu_twin() {
    let Some(gpu) = gpu() else { return };
    // Bit-identical on a CPU device (correctly rounded division), within [`f32_tolerance`]
    // elsewhere.
    let exact = exact_f32(gpu);
    let mut max_diff = 0f32;
    let files = random_files(5, 24);
    let refs: Vec<&[u8]> = files.iter().map(|f| f.as_slice()).collect();
    for norm in [Normalize::UNIT, Normalize::IMAGENET] {
        let output = OutputFormat::F32Chw(norm);
        let batch = gpu.decode_batch(&refs, output).unwrap();
        let got = batch.read_back().unwrap();
        for (i, file) in files.iter().enumerate() {
            let layout = parse_file(file, &l3::Limits::default(), ParseOptions::default()).unwrap();
            let chunk = l3::gpu::build_chunk(std::slice::from_ref(&layout), 0, output);
            let (want, _) = cpu_twin::run_chunk(&chunk, output);
            let want: &[f32] = bytemuck::cast_slice(&want[..got[i].len()]);
            let got: Vec<f32> = bytemuck::pod_collect_to_vec(&got[i]);
            // Independent check of the twin: the formula on the CPU decoder's samples.
            let expected = expected_f32_chw(file, &norm);
            let hw = (layout.header.width * layout.header.height) as usize;
            for (e, &g) in got.iter().enumerate() {
                let (expect, ch) = (expected[e], e / hw);
                assert_eq!(want[e].to_bits(), expect.to_bits(), "twin, image {i}");
                if exact {
                    assert_eq!(
                        g.to_bits(),
                        expect.to_bits(),
                        "image {i} element {e}: {g} vs {expect}"
                    );
                } else {
                    let tol = f32_tolerance(norm.std[ch]);
                    assert!(
                        (g - expect).abs() <= tol,
                        "image {i} element {e}: {g} vs {expect} (tolerance {tol})"
                    );
                }
                max_diff = max_diff.max((g - expect).abs());
            }
        }
    }
    println!("f32 CHW: largest difference from the CPU value: {max_diff} (exact: {exact})");
    // The alignment padding between images is 0.0, as in the twin's buffer (the elements
    // were compared above, within the stated bound).
    let layouts = layouts_of(&files);
    let output = OutputFormat::F32Chw(Normalize::IMAGENET);
    let batch = gpu.decode_batch(&refs, output).unwrap();
    let all = batch.read_back_all().unwrap();
    let (twin, flags) = cpu_twin::run_chunk(&l3::gpu::build_chunk(&layouts, 0, output), output);
    assert!(flags.iter().all(|&f| f == 0), "{flags:?}");
    assert_eq!(all.len(), twin.len());
    let mut pos = 0;
    for (l, next) in batch.images.iter().zip(
        batch
            .images
            .iter()
            .skip(1)
            .map(|l| l.offset as usize)
            .chain([all.len()]),
    ) {
        assert_eq!(l.offset as usize, pos);
        let end = (l.offset + l.len) as usize;
        assert!(
            all[end..next].iter().all(|&b| b == 0),
            "padding after {l:?}"
        );
        assert!(twin[end..next].iter().all(|&b| b == 0));
        pos = next;
    }
}

/// More than 65535 decode workgroups (8x8 patches, 8 streams per workgroup), for both
/// decode stages (interleaved and f32 output): 2D dispatches.
#[test]
fn dispatches_beyond_65535_workgroups_per_dimension() {
    let Some(gpu) = gpu() else { return };
    // 8192 x 4096 x 4 bytes is exactly the 128 MiB binding limit of lavapipe.
    let (w, h) = (8192u32, 4096u32);
    let mut rng = Rng(29);
    let s: Vec<u16> = (0..w * h)
        .map(|i| ((i % w + i / w) as u64 + rng.below(4)) as u16 & 255)
        .collect();
    let opts = EncodeOptions {
        patch_log2: 3,
        profile: l3::ProfileOptions::Fast(l3::FastOptions {
            predictor: PredictorChoice::Fixed(l3::FastPredictor::Up),
        }),
        parallel: true,
    };
    let file = encode_raw(w, h, 1, 8, &s, &opts);
    let streams = l3::read_header(&file).unwrap().stream_count();
    assert!(streams.div_ceil(8) > 65_535, "{streams} streams");
    check_batch(
        gpu,
        std::slice::from_ref(&file),
        &["8192x4096 gray, 8x8 patches".into()],
    );
    let batch = gpu
        .decode_batch(&[&file], OutputFormat::F32Chw(Normalize::UNIT))
        .unwrap();
    let got: Vec<f32> = bytemuck::pod_collect_to_vec(&batch.read_back().unwrap()[0]);
    assert!(got.len() / 256 > 65_535);
    let cpu = cpu_decode(&file);
    // Bit-identical on a CPU device, within the stated bound elsewhere (std 1).
    let exact = exact_f32(gpu);
    for (i, (&g, &c)) in got.iter().zip(&cpu).enumerate() {
        let expect = c as f32 / 255.0;
        if exact {
            assert_eq!(g.to_bits(), expect.to_bits(), "sample {i}: {g} vs {expect}");
        } else {
            assert!(
                (g - expect).abs() <= f32_tolerance(1.0),
                "sample {i}: {g} vs {expect}"
            );
        }
    }
}

/// Images too large for a 256 KiB chunk (split into bands of patch rows, interleaved
/// output) mixed with small ones: 8- and 16-bit, odd sizes, every channel count.
const BANDED_SHAPES: [(u32, u32, u8, u8); 8] = [
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
fn banded_files(
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

#[test]
fn small_chunks_split_batches_transparently() {
    let Some(shared) = gpu() else { return };
    let mut gpu = GpuDecoder::new(shared.device(), shared.queue()).unwrap();
    gpu.set_chunk_limit(256 << 10);
    let mut rng = Rng(9);
    let files: Vec<Vec<u8>> = (0..40)
        .map(|i| {
            let (w, h) = (1 + rng.below(90) as u32, 1 + rng.below(60) as u32);
            let s = random_samples(&mut rng, w, h, 1 + (i % 4) as u8, 8);
            encode_raw(w, h, 1 + (i % 4) as u8, 8, &s, &EncodeOptions::default())
        })
        .collect();
    let names: Vec<String> = (0..files.len()).map(|i| format!("chunked #{i}")).collect();
    check_batch(&gpu, &files, &names);
    // Images too large for a chunk are split into bands of patch rows.
    let files = banded_files(&mut rng, &BANDED_SHAPES[..7], |i| EncodeOptions {
        patch_log2: 3 + (i % 4) as u8,
        ..Default::default()
    });
    let names: Vec<String> = (0..files.len()).map(|i| format!("banded #{i}")).collect();
    check_batch(&gpu, &files, &names);
    // A corrupt band is reported for its image.
    let mut bad = files.clone();
    let h = l3::read_header(&bad[2]).unwrap();
    let last_stream =
        *l3::format::parse_file(&bad[2], &l3::Limits::default(), ParseOptions::default())
            .unwrap()
            .offsets
            .iter()
            .rev()
            .nth(1)
            .unwrap() as usize;
    assert!(last_stream > h.data_offset() as usize);
    bad[2][last_stream] = 9; // unknown predictor in the last stream (last band)
    fix_crc(&mut bad[2]);
    let refs: Vec<&[u8]> = bad.iter().map(|f| f.as_slice()).collect();
    let (_, flags) = gpu
        .decode_batch_with_flags(&refs, OutputFormat::Interleaved)
        .unwrap();
    assert_eq!(
        flags.iter().map(|&f| f != 0).collect::<Vec<_>>(),
        [false, false, true, false, false, false, false]
    );
    // f32 output is not split: an image too large for one chunk is refused clearly, as is
    // an interleaved image whose single patch row is too large.
    match gpu.decode_batch(&[&files[0]], OutputFormat::F32Chw(Normalize::UNIT)) {
        Err(Error::Limits(LimitsError::GpuBuffer { .. })) => {}
        other => panic!("expected GpuBuffer limits error, got {other:?}"),
    }
    let s = random_samples(&mut rng, 4000, 20, 4, 8);
    let wide = encode_raw(4000, 20, 4, 8, &s, &EncodeOptions::default());
    match gpu.decode_batch(&[&wide], OutputFormat::Interleaved) {
        Err(Error::Limits(LimitsError::GpuBuffer { .. })) => {}
        other => panic!("expected GpuBuffer limits error, got {other:?}"),
    }
}

#[test]
fn async_form_and_empty_batch() {
    let Some(gpu) = gpu() else { return };
    let files = random_files(13, 8);
    let refs: Vec<&[u8]> = files.iter().map(|f| f.as_slice()).collect();
    let batch =
        pollster::block_on(gpu.decode_batch_async(&refs, OutputFormat::Interleaved)).unwrap();
    for (i, f) in files.iter().enumerate() {
        assert_eq!(batch.read_back_image(i).unwrap(), cpu_decode(f));
    }
    let empty = gpu.decode_batch(&[], OutputFormat::Interleaved).unwrap();
    assert!(empty.images.is_empty());
    // Header, size-table and checksum errors come from the CPU-side parse: the CPU decoder's
    // error, naming the bad file's index.
    for corrupt in [0usize, format::OFFSET_DEPTH, files[1].len() - 1] {
        let mut bad = files.clone();
        bad[1][corrupt] ^= 0x40;
        let refs: Vec<&[u8]> = bad.iter().map(|f| f.as_slice()).collect();
        let gpu_err = gpu
            .decode_batch(&refs, OutputFormat::Interleaved)
            .unwrap_err();
        let cpu_err = l3::decode::decode(&bad[1], &DecodeOptions::default()).unwrap_err();
        assert_eq!(
            gpu_err.to_string(),
            format!("image 1 of the batch: {cpu_err}")
        );
    }
}

/// Fixes the trailing CRC after a corruption, so only the stream checks can catch it.
fn fix_crc(file: &mut [u8]) {
    let n = file.len() - format::CHECKSUM_LEN;
    let crc = crc32fast::hash(&file[..n]);
    file[n..].copy_from_slice(&crc.to_le_bytes());
}

#[test]
fn corrupted_streams_are_flagged_like_the_cpu_decoder() {
    let Some(gpu) = gpu() else { return };
    let base = random_files(17, 30);
    let mut rng = Rng(23);
    let mut files = Vec::new();
    for (i, f) in base.iter().enumerate() {
        let h = l3::read_header(f).unwrap();
        let data_start = h.data_offset() as usize;
        let data_end = f.len() - format::CHECKSUM_LEN;
        for k in 0..6 {
            let mut g = f.clone();
            match k {
                // An unknown predictor id in the first stream.
                0 => g[data_start] = 4 + rng.below(250) as u8,
                // The first row's bit width set above the depth.
                1 => g[data_start + 1] |= 0x1f,
                // Random byte flips anywhere in the streams.
                _ => {
                    for _ in 0..=rng.below(3) {
                        let at = data_start + rng.below((data_end - data_start) as u64) as usize;
                        g[at] ^= 1 + rng.below(255) as u8;
                    }
                }
            }
            fix_crc(&mut g);
            files.push((i, k, g));
        }
    }
    let refs: Vec<&[u8]> = files.iter().map(|(_, _, g)| g.as_slice()).collect();
    let (batch, flags) = gpu
        .decode_batch_with_flags(&refs, OutputFormat::Interleaved)
        .unwrap();
    let got = batch.read_back().unwrap();
    let mut flagged = 0;
    for (j, (i, k, g)) in files.iter().enumerate() {
        let cpu = l3::decode::decode(g, &DecodeOptions::default());
        // The twin pipeline must flag exactly what the shader flags.
        let layout = parse_file(g, &l3::Limits::default(), ParseOptions::default()).unwrap();
        let (_, twin_flags) = cpu_twin::run_chunk(
            &l3::gpu::build_chunk(&[layout], 0, OutputFormat::Interleaved),
            OutputFormat::Interleaved,
        );
        assert_eq!(
            twin_flags[0], flags[j],
            "file {i} corruption {k}: twin vs shader flags"
        );
        match cpu {
            Err(e) => {
                assert_ne!(
                    flags[j], 0,
                    "file {i} corruption {k}: CPU says {e}, GPU no flag"
                );
                flagged += 1;
            }
            Ok((_, want)) => {
                assert_eq!(flags[j], 0, "file {i} corruption {k}: GPU flag, CPU fine");
                assert_eq!(got[j], want, "file {i} corruption {k}: valid but different");
            }
        }
        if *k < 2 {
            assert_ne!(flags[j], 0, "file {i} corruption {k} must be flagged");
        }
    }
    assert!(flagged >= 60, "only {flagged} corruptions detected");
    // The blocking form reports the first flagged image.
    match gpu.decode_batch(&refs, OutputFormat::Interleaved) {
        Err(Error::Format(FormatError::GpuReported { image: 0, flags })) => assert_ne!(flags, 0),
        other => panic!("expected GpuReported for image 0, got {other:?}"),
    }
}

/// Checks a decoded batch against the CPU decoder.
fn assert_matches_cpu(batch: &l3::gpu::GpuBatch, files: &[Vec<u8>], what: &str) {
    let got = batch.read_back().unwrap();
    assert_eq!(got.len(), files.len());
    for (i, (file, got)) in files.iter().zip(&got).enumerate() {
        assert!(
            *got == cpu_decode(file),
            "{what}: image {i} differs from the CPU decode"
        );
    }
}

#[test]
fn stage_timings_with_timestamp_queries_or_none_without() {
    let Some(shared) = gpu() else { return };
    let files = random_files(21, 24);
    let refs: Vec<&[u8]> = files.iter().map(|f| f.as_slice()).collect();
    let out = OutputFormat::Interleaved;
    let supported = shared
        .device()
        .features()
        .contains(wgpu::Features::TIMESTAMP_QUERY);
    eprintln!("TIMESTAMP_QUERY on {}: {supported}", shared.adapter_name());
    assert_eq!(shared.timing_supported(), supported);

    // Timing off (the default): no timings.
    let mut gpu = GpuDecoder::new(shared.device(), shared.queue()).unwrap();
    // Several chunks per batch (interleaved output: about 1 byte per sample per chunk).
    gpu.set_chunk_limit(256 << 10);
    assert_matches_cpu(&gpu.decode_batch(&refs, out).unwrap(), &files, "untimed");
    assert_eq!(gpu.last_stage_timings(), None);

    // Timing on: present and non-zero for decode where supported, else None.
    assert_eq!(gpu.set_timing(true), supported);
    assert_matches_cpu(&gpu.decode_batch(&refs, out).unwrap(), &files, "timed");
    let (batch, timed) = gpu.decode_batch_timed(&refs, out).unwrap();
    assert_matches_cpu(&batch, &files, "decode_batch_timed");
    let async_batch = pollster::block_on(gpu.decode_batch_async(&refs, out)).unwrap();
    assert_matches_cpu(&async_batch, &files, "timed async");
    let last = gpu.last_stage_timings();
    if supported {
        for t in [timed.unwrap(), last.unwrap()] {
            eprintln!("stage timings: {t:?}");
            assert!(t.chunks > 1, "expected several chunks: {t:?}");
            assert!(t.decode_ns > 0, "decode stage timed as zero: {t:?}");
            assert_eq!(t.kernels_ns(), t.prefix_sum_ns + t.decode_ns);
        }
        // An empty batch is timed as zero chunks.
        let (_, t) = gpu.decode_batch_timed(&[], out).unwrap();
        assert_eq!(t.unwrap().chunks, 0);
        // f32 output: the decode stage writes the output too.
        let f32_out = OutputFormat::F32Chw(Normalize::UNIT);
        // f32 images are never split into bands: a limit every image fits (still several
        // chunks: 4 bytes per sample).
        gpu.set_chunk_limit(1 << 20);
        let (batch, t) = gpu.decode_batch_timed(&refs, f32_out).unwrap();
        let t = t.unwrap();
        eprintln!("f32 stage timings: {t:?}");
        assert!(t.chunks > 1 && t.decode_ns > 0, "{t:?}");
        let untimed = GpuDecoder::new(shared.device(), shared.queue()).unwrap();
        assert!(
            batch.read_back_all().unwrap()
                == untimed
                    .decode_batch(&refs, f32_out)
                    .unwrap()
                    .read_back_all()
                    .unwrap(),
            "timed and untimed f32 batches differ"
        );
    } else {
        assert_eq!(timed, None);
        assert_eq!(last, None);
    }
    assert!(!gpu.set_timing(false));
    assert_eq!(gpu.last_stage_timings(), None);

    // A device without TIMESTAMP_QUERY (the fallback path, whatever the adapter supports):
    // timing requests are ignored and batches still decode.
    let adapter = l3::gpu::select_adapter().unwrap();
    let (device, queue) = pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
        label: Some("no timestamps"),
        required_limits: l3::gpu::required_limits(&adapter),
        ..Default::default()
    }))
    .unwrap();
    let mut plain = GpuDecoder::new(&device, &queue).unwrap();
    assert!(!plain.timing_supported());
    assert!(!plain.set_timing(true));
    let (batch, t) = plain.decode_batch_timed(&refs, out).unwrap();
    assert_eq!(t, None);
    assert_matches_cpu(&batch, &files, "no TIMESTAMP_QUERY");
    assert_matches_cpu(
        &plain.decode_batch(&refs, out).unwrap(),
        &files,
        "no TIMESTAMP_QUERY, timing asked",
    );
    assert_eq!(plain.last_stage_timings(), None);
}

// ---- Version 2 (compact profile) ----

/// Random version-2 files: 1..=4 channels, 8 and 16 bits, every patch size 8..=128, odd
/// widths and heights below and above a patch; smooth images with noise of every amplitude,
/// pure noise, and flat images (one-token codes, with raw bits when the value is 16 or more);
/// each predictor alone or the encoder's choice, with and without subtract-green and pair
/// tokens.
fn random_compact_files(seed: u64, count: usize) -> Vec<Vec<u8>> {
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
            let mut s = random_samples(&mut rng, w, h, c, depth);
            if rng.below(6) == 0 {
                let v = s[rng.below(s.len() as u64) as usize];
                s.fill(v);
            }
            let all = l3::CompactPredictor::ALL;
            let predictors = match rng.below(9) as usize {
                p if p < all.len() => PredictorSet::only(&[all[p]]),
                _ => PredictorSet::all(),
            };
            let opts = EncodeOptions {
                profile: l3::ProfileOptions::Compact(CompactOptions {
                    predictors,
                    subtract_green: rng.below(3) != 0,
                    pair_tokens: rng.below(3) != 0,
                }),
                patch_log2: 3 + (i % 5) as u8,
                ..Default::default()
            };
            encode_raw(w, h, c, depth, &s, &opts)
        })
        .collect()
}

/// Version-1 and version-2 files alternating: one batch of both.
fn mixed_files(seed: u64, count: usize) -> Vec<Vec<u8>> {
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

fn layouts_of(files: &[Vec<u8>]) -> Vec<l3::format::FileLayout<'_>> {
    files
        .iter()
        .map(|f| parse_file(f, &l3::Limits::default(), ParseOptions::default()).unwrap())
        .collect()
}

/// The CPU twins reproduce the CPU decoder for a batch of version-1 and version-2 files,
/// interleaved and f32 output (no GPU).
#[test]
fn cpu_twin_pipeline_matches_cpu_decoder_for_mixed_versions() {
    assert_twins_match_cpu_decoder(&mixed_files(31, 40));
}

#[test]
fn compact_random_images_match_cpu() {
    let Some(gpu) = gpu() else { return };
    let files = random_compact_files(41, 100);
    let names: Vec<String> = (0..files.len()).map(|i| format!("compact #{i}")).collect();
    check_batch(gpu, &files, &names);
}

/// One batch of version-1 and version-2 files: every image equals the CPU decode, and the
/// whole buffer (alignment padding included) the twins' output.
#[test]
fn mixed_version_batch_matches_cpu_and_twin() {
    let Some(gpu) = gpu() else { return };
    let files = mixed_files(43, 60);
    let names: Vec<String> = (0..files.len()).map(|i| format!("mixed #{i}")).collect();
    check_batch(gpu, &files, &names);
    let refs: Vec<&[u8]> = files.iter().map(|f| f.as_slice()).collect();
    let batch = gpu.decode_batch(&refs, OutputFormat::Interleaved).unwrap();
    let chunk = l3::gpu::build_chunk(&layouts_of(&files), 0, OutputFormat::Interleaved);
    let (twin, _) = cpu_twin::run_chunk(&chunk, OutputFormat::Interleaved);
    assert!(
        batch.read_back_all().unwrap() == twin,
        "shader and twin buffers differ"
    );
}

/// f32 CHW output of version-2 files (in a batch with version-1 files).
#[test]
fn compact_f32_chw_output_matches_cpu() {
    let Some(gpu) = gpu() else { return };
    let exact = exact_f32(gpu);
    let files = mixed_files(47, 30);
    let refs: Vec<&[u8]> = files.iter().map(|f| f.as_slice()).collect();
    for norm in [Normalize::UNIT, Normalize::IMAGENET] {
        let output = OutputFormat::F32Chw(norm);
        let got = gpu
            .decode_batch(&refs, output)
            .unwrap()
            .read_back()
            .unwrap();
        for (i, (file, got)) in files.iter().zip(&got).enumerate() {
            let h = l3::read_header(file).unwrap();
            let hw = (h.width * h.height) as usize;
            let got: Vec<f32> = bytemuck::pod_collect_to_vec(got);
            let expected = expected_f32_chw(file, &norm);
            assert_eq!(got.len(), expected.len());
            for (e, (&g, &expect)) in got.iter().zip(&expected).enumerate() {
                if exact {
                    assert_eq!(g.to_bits(), expect.to_bits(), "image {i} element {e}");
                } else {
                    let tol = f32_tolerance(norm.std[e / hw]);
                    assert!((g - expect).abs() <= tol, "image {i} element {e}");
                }
            }
        }
    }
}

/// Small chunk limits: batches of version-2 files (and mixed ones) split into chunks, and
/// large version-2 images into bands of patch rows.
#[test]
fn compact_small_chunks_split_batches_transparently() {
    let Some(shared) = gpu() else { return };
    let mut gpu = GpuDecoder::new(shared.device(), shared.queue()).unwrap();
    gpu.set_chunk_limit(256 << 10);
    let files = mixed_files(53, 60);
    let names: Vec<String> = (0..files.len()).map(|i| format!("chunked #{i}")).collect();
    check_batch(&gpu, &files, &names);
    let mut rng = Rng(59);
    let files = banded_files(&mut rng, &BANDED_SHAPES, |i| EncodeOptions {
        profile: l3::ProfileOptions::default_for(if i % 3 == 2 {
            Profile::Fast
        } else {
            Profile::Compact
        }),
        patch_log2: 3 + (i % 5) as u8,
        ..Default::default()
    });
    let names: Vec<String> = (0..files.len()).map(|i| format!("banded #{i}")).collect();
    check_batch(&gpu, &files, &names);
}

/// Corrupt copies of version-2 files: header bits, random bytes and single bits in the
/// stream bodies, with the size table left valid (so the CPU-side parse passes).
fn corrupt_compact_files(seed: u64) -> Vec<(usize, usize, Vec<u8>)> {
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

/// The twins flag a corrupt version-2 file exactly when the CPU decoder errors, and decode
/// the others as it does (no GPU).
#[test]
fn compact_corruptions_twin_flags_exactly_when_cpu_errors() {
    let options = DecodeOptions {
        verify_checksum: false,
        ..Default::default()
    };
    let mut flagged = 0;
    for (i, k, g) in corrupt_compact_files(61) {
        let layout = parse_file(
            &g,
            &l3::Limits::default(),
            ParseOptions {
                verify_checksum: false,
            },
        )
        .unwrap();
        let output = OutputFormat::Interleaved;
        let chunk = l3::gpu::build_chunk(std::slice::from_ref(&layout), 0, output);
        let (out, flags) = cpu_twin::run_chunk(&chunk, output);
        match l3::decode::decode(&g, &options) {
            Err(e) => {
                assert_ne!(
                    flags[0], 0,
                    "file {i} corruption {k}: CPU says {e}, no flag"
                );
                flagged += 1;
            }
            Ok((_, want)) => {
                assert_eq!(flags[0], 0, "file {i} corruption {k}: flag {}", flags[0]);
                assert!(out[..want.len()] == want[..], "file {i} corruption {k}");
            }
        }
    }
    assert!(flagged >= 150, "only {flagged} corruptions detected");
}

#[test]
fn compact_corrupted_streams_are_flagged_like_the_cpu_decoder() {
    let Some(shared) = gpu() else { return };
    let files = corrupt_compact_files(67);
    // Twice: with the checksum fixed and checked, and with the checksum check skipped.
    for verify_checksum in [true, false] {
        let mut gpu = GpuDecoder::new(shared.device(), shared.queue()).unwrap();
        let options = DecodeOptions {
            verify_checksum,
            ..Default::default()
        };
        gpu.set_options(options);
        let files: Vec<(usize, usize, Vec<u8>)> = files
            .iter()
            .map(|(i, k, g)| {
                let mut g = g.clone();
                if verify_checksum {
                    fix_crc(&mut g);
                }
                (*i, *k, g)
            })
            .collect();
        let refs: Vec<&[u8]> = files.iter().map(|(_, _, g)| g.as_slice()).collect();
        let (batch, flags) = gpu
            .decode_batch_with_flags(&refs, OutputFormat::Interleaved)
            .unwrap();
        let got = batch.read_back().unwrap();
        let layouts: Vec<_> = files
            .iter()
            .map(|(_, _, g)| {
                let parse = ParseOptions { verify_checksum };
                parse_file(g, &l3::Limits::default(), parse).unwrap()
            })
            .collect();
        let chunk = l3::gpu::build_chunk(&layouts, 0, OutputFormat::Interleaved);
        let (_, twin_flags) = cpu_twin::run_chunk(&chunk, OutputFormat::Interleaved);
        let mut flagged = 0;
        for (j, (i, k, g)) in files.iter().enumerate() {
            let what = format!("file {i} corruption {k} (checksum {verify_checksum})");
            assert_eq!(twin_flags[j], flags[j], "{what}: twin vs shader flags");
            match l3::decode::decode(g, &options) {
                Err(e) => {
                    assert_ne!(flags[j], 0, "{what}: CPU says {e}, GPU no flag");
                    flagged += 1;
                }
                Ok((_, want)) => {
                    assert_eq!(flags[j], 0, "{what}: GPU flag {}, CPU fine", flags[j]);
                    assert!(got[j] == want, "{what}: valid but different");
                }
            }
        }
        assert!(flagged >= 150, "only {flagged} corruptions detected");
    }
}
