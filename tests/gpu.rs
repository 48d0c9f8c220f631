//! GPU decoder tests through the public API: the GPU against the CPU decoder (bundled
//! samples, the shared corpus, random files of both format versions, f32 output), errors,
//! limits, chunking via `set_chunk_limit`, the async form, stage timings and the
//! [`l3::gpu::Batcher`]. They get an adapter through `gpu()`, which skips them (printing
//! "SKIPPED: no GPU adapter") when there is none, unless `CI=true`, where a missing adapter
//! fails the test. The tests that need the crate's internals (the CPU twins, the prefix-sum
//! kernel alone, naga validation of the shaders) are unit tests in src/gpu/.
//!
//! On a machine without a GPU, Mesa's lavapipe works: `WGPU_BACKEND=vulkan cargo test
//! --release --test gpu`.
#![cfg(feature = "gpu")]

#[path = "common/gpu_support.rs"]
mod gpu_support;

use std::path::{Path, PathBuf};

use gpu_support::*;
use l3::decode::DecodeOptions;
use l3::encode::EncodeOptions;
use l3::format::{self, ParseOptions};
use l3::gpu::{GpuDecoder, Normalize, OutputLayout};
use l3::{Error, LimitsError, Profile};
use l3::{FastOptions, FastPredictor, PredictorChoice, ProfileOptions};

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

/// The bundled sample PNGs, sorted.
fn sample_pngs() -> Vec<PathBuf> {
    let mut paths = Vec::new();
    image_files(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("samples"),
        &mut paths,
    );
    paths.retain(|p| p.extension().is_some_and(|e| e == "png"));
    paths
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
        profile: ProfileOptions::Fast(FastOptions {
            predictor: PredictorChoice::Fixed(FastPredictor::Up),
        }),
        ..Default::default()
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
        .decode_batch(&[&file], OutputLayout::F32Chw(Normalize::UNIT))
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
            encode_raw(
                w,
                h,
                1 + (i % 4) as u8,
                8,
                &s,
                &EncodeOptions::for_profile(l3::Profile::Fast),
            )
        })
        .collect();
    let names: Vec<String> = (0..files.len()).map(|i| format!("chunked #{i}")).collect();
    check_batch(&gpu, &files, &names);
    // Images too large for a chunk are split into bands of patch rows.
    let files = banded_files(&mut rng, &BANDED_SHAPES[..7], |i| EncodeOptions {
        patch_log2: 3 + (i % 4) as u8,
        ..EncodeOptions::for_profile(l3::Profile::Fast)
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
        .decode_batch_with_flags(&refs, OutputLayout::Interleaved)
        .unwrap();
    assert_eq!(
        flags.iter().map(|&f| f != 0).collect::<Vec<_>>(),
        [false, false, true, false, false, false, false]
    );
    // f32 output is not split: an image too large for one chunk is refused clearly, as is
    // an interleaved image whose single patch row is too large.
    match gpu.decode_batch(&[&files[0]], OutputLayout::F32Chw(Normalize::UNIT)) {
        Err(Error::Limits(LimitsError::GpuBuffer { .. })) => {}
        other => panic!("expected GpuBuffer limits error, got {other:?}"),
    }
    let s = random_samples(&mut rng, 4000, 20, 4, 8);
    let wide = encode_raw(
        4000,
        20,
        4,
        8,
        &s,
        &EncodeOptions::for_profile(l3::Profile::Fast),
    );
    match gpu.decode_batch(&[&wide], OutputLayout::Interleaved) {
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
        pollster::block_on(gpu.decode_batch_async(&refs, OutputLayout::Interleaved)).unwrap();
    for (i, f) in files.iter().enumerate() {
        assert_eq!(batch.read_back_image(i).unwrap(), cpu_decode(f));
    }
    let empty = gpu.decode_batch(&[], OutputLayout::Interleaved).unwrap();
    assert!(empty.images.is_empty());
    // Header, size-table and checksum errors come from the CPU-side parse: the CPU decoder's
    // error, naming the bad file's index.
    for corrupt in [0usize, format::OFFSET_DEPTH, files[1].len() - 1] {
        let mut bad = files.clone();
        bad[1][corrupt] ^= 0x40;
        let refs: Vec<&[u8]> = bad.iter().map(|f| f.as_slice()).collect();
        let gpu_err = gpu
            .decode_batch(&refs, OutputLayout::Interleaved)
            .unwrap_err();
        let cpu_err = l3::decode::decode(&bad[1], &DecodeOptions::default()).unwrap_err();
        assert_eq!(
            gpu_err.to_string(),
            format!("image 1 of the batch: {cpu_err}")
        );
    }
}

#[test]
fn stage_timings_with_timestamp_queries_or_none_without() {
    let Some(shared) = gpu() else { return };
    let files = random_files(21, 24);
    let refs: Vec<&[u8]> = files.iter().map(|f| f.as_slice()).collect();
    let out = OutputLayout::Interleaved;
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
        let f32_out = OutputLayout::F32Chw(Normalize::UNIT);
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

#[test]
fn compact_random_images_match_cpu() {
    let Some(gpu) = gpu() else { return };
    let files = random_compact_files(41, 100);
    let names: Vec<String> = (0..files.len()).map(|i| format!("compact #{i}")).collect();
    check_batch(gpu, &files, &names);
}

/// Window decodes (only the patches a crop needs): the GPU writes the patches holding the
/// window as the full decode has them and zero elsewhere, and the CPU's window decode gives
/// the window's pixels, for both format versions, windows inside, across and past the image.
#[test]
fn window_decodes_give_the_windows_pixels_on_the_gpu_and_the_cpu() {
    let Some(gpu) = gpu() else { return };
    let files = mixed_files(77, 24);
    let refs: Vec<&[u8]> = files.iter().map(|f| f.as_slice()).collect();
    let mut rng = Rng(5);
    let windows: Vec<Option<l3::Window>> = files
        .iter()
        .map(|f| {
            let h = l3::read_header(f).unwrap();
            if rng.below(5) == 0 {
                return None;
            }
            let x0 = rng.below(h.width as u64 + 4) as u32;
            let y0 = rng.below(h.height as u64 + 4) as u32;
            Some(l3::Window {
                columns: x0..x0 + 1 + rng.below(h.width as u64) as u32,
                rows: y0..y0 + 1 + rng.below(h.height as u64) as u32,
            })
        })
        .collect();
    let batch = gpu
        .decode_batch_windows(&refs, OutputLayout::Interleaved, &windows)
        .unwrap();
    for (i, (f, w)) in files.iter().zip(&windows).enumerate() {
        let layout = format::parse_file(f, &Default::default(), ParseOptions::default()).unwrap();
        let h = layout.header;
        let w = w.clone().unwrap_or(l3::Window::whole(h.width, h.height));
        // The GPU decodes the patches holding the window whole and leaves the rest zero; the
        // CPU's window decode stops at the window's last row: both give the window's pixels.
        let mut full = vec![0u8; h.output_bytes() as usize];
        l3::decode::decode_layout(&layout, &mut full, false).unwrap();
        let mut cpu = vec![0u8; h.output_bytes() as usize];
        l3::decode::decode_layout_window(
            &layout,
            &mut cpu,
            w.columns.clone(),
            w.rows.clone(),
            false,
        )
        .unwrap();
        let got = batch.read_back_image(i).unwrap();
        let (p, pixel) = (h.patch_size(), h.channels() as usize * h.bytes_per_sample());
        let patches = |r: &std::ops::Range<u32>, len: u32| {
            r.start.min(len) / p * p..r.end.min(len).div_ceil(p) * p
        };
        let (in_x, in_y) = (patches(&w.columns, h.width), patches(&w.rows, h.height));
        for y in 0..h.height {
            for x in 0..h.width {
                let at = (y as usize * h.width as usize + x as usize) * pixel;
                let px = at..at + pixel;
                let held = in_x.contains(&x) && in_y.contains(&y);
                let window = w.columns.contains(&x) && w.rows.contains(&y);
                let want = if held {
                    &full[px.clone()]
                } else {
                    &[0u8; 8][..pixel]
                };
                assert!(
                    got[px.clone()] == *want && (!window || cpu[px.clone()] == full[px]),
                    "image {i} ({}x{}, v{}), window {w:?}, pixel ({x}, {y})",
                    h.width,
                    h.height,
                    h.profile.version()
                );
            }
        }
    }
}

/// f32 CHW output of version-2 files (in a batch with version-1 files).
#[test]
fn compact_f32_chw_output_matches_cpu() {
    let Some(gpu) = gpu() else { return };
    let exact = exact_f32(gpu);
    let files = mixed_files(47, 30);
    let refs: Vec<&[u8]> = files.iter().map(|f| f.as_slice()).collect();
    for norm in [Normalize::UNIT, Normalize::IMAGENET] {
        let output = OutputLayout::F32Chw(norm);
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

// ---- The batcher ----

/// The batcher's results for `files` (tags = indices), sorted by tag.
fn batch_all(
    batcher: &mut Option<l3::gpu::Batcher<'_, usize>>,
    files: &[Vec<u8>],
) -> Vec<l3::gpu::FileResult<usize>> {
    let b = batcher.as_mut().unwrap();
    let mut results = Vec::new();
    for (i, f) in files.iter().enumerate() {
        results.extend(b.push(i, f.clone()));
    }
    results.extend(batcher.take().unwrap().finish());
    results.sort_by_key(|r| r.tag);
    results
}

/// Good files, a file with a bad CRC (rejected on the CPU) and one with corrupt stream data
/// (flagged by the GPU only): the good files equal the CPU decoder, each bad one gets its own
/// error, with a budget of several images, of less than one image, and the default.
#[test]
fn batcher_gives_per_file_results() {
    let Some(gpu) = gpu() else { return };
    let mut files = mixed_files(61, 12);
    let mut bad_crc = files[3].clone();
    let n = bad_crc.len();
    bad_crc[n - 1] ^= 0x55;
    files[3] = bad_crc;
    let mut corrupt = files[4].clone();
    let h = l3::read_header(&corrupt).unwrap();
    assert_eq!(h.profile, l3::Profile::Fast);
    // An unknown predictor id in the first stream: the CPU-side parse passes.
    corrupt[h.data_offset() as usize] = 200;
    fix_crc(&mut corrupt);
    files[4] = corrupt;
    for budget in [1u64, 20_000, l3::gpu::DEFAULT_BUDGET] {
        let mut batcher =
            Some(l3::gpu::Batcher::new(gpu, OutputLayout::Interleaved).with_budget(budget));
        let results = batch_all(&mut batcher, &files);
        assert_eq!(results.len(), files.len());
        for (i, r) in results.iter().enumerate() {
            assert_eq!(r.tag, i);
            match (i, &r.result) {
                (3, Err(l3::gpu::FileError::Invalid(Error::Format(_)))) => {}
                (4, Err(l3::gpu::FileError::Corrupt { flags })) => {
                    assert_eq!(
                        *flags & l3::gpu::flags::PREDICTOR,
                        l3::gpu::flags::PREDICTOR
                    )
                }
                (3 | 4, other) => panic!("file {i}: {other:?}"),
                (_, Ok(d)) => {
                    let (h, want) =
                        l3::decode::decode(&files[i], &DecodeOptions::default()).unwrap();
                    assert_eq!(d.header, h);
                    assert!(d.pixels == want, "budget {budget}: file {i} differs");
                }
                (_, Err(e)) => panic!("budget {budget}: file {i}: {e}"),
            }
        }
    }
}

/// A batch-level failure (one image over the chunk limit in f32 output, which is never cut
/// into bands) falls back to decoding file by file: only that file fails.
#[test]
fn batcher_falls_back_file_by_file() {
    let Some(shared) = gpu() else { return };
    let mut gpu = GpuDecoder::new(shared.device(), shared.queue()).unwrap();
    gpu.set_chunk_limit(64 << 10);
    let mut files = random_files(67, 4);
    files.retain(|f| {
        let h = l3::read_header(f).unwrap();
        h.sample_count() * 4 < 32 << 10
    });
    let big = encode_raw(
        200,
        200,
        1,
        8,
        &vec![7u16; 200 * 200],
        &EncodeOptions::for_profile(l3::Profile::Fast),
    );
    files.push(big);
    let norm = Normalize::UNIT;
    let mut batcher = Some(l3::gpu::Batcher::new(&gpu, OutputLayout::F32Chw(norm)));
    let results = batch_all(&mut batcher, &files);
    let last = files.len() - 1;
    for (i, r) in results.iter().enumerate() {
        match &r.result {
            Err(l3::gpu::FileError::Gpu(Error::Limits(l3::LimitsError::GpuBuffer { .. })))
                if i == last => {}
            Ok(d) if i != last => {
                let got: Vec<f32> = bytemuck::pod_collect_to_vec(&d.pixels);
                let want = expected_f32_chw(&files[i], &norm);
                assert_eq!(got.len(), want.len());
                if exact_f32(&gpu) {
                    assert!(got
                        .iter()
                        .zip(&want)
                        .all(|(g, w)| g.to_bits() == w.to_bits()));
                }
            }
            other => panic!("file {i}: {:?}", other.as_ref().map(|d| d.header)),
        }
    }
}

/// Progressive shards: every level's prefix, read in one contiguous read, decodes as one GPU
/// batch (payload decode, then `levels.wgsl`'s refine chain or subsample) to exactly what the
/// CPU makes of each record: interlaced and flat records, both profiles, 8- and 16-bit, odd
/// sides and 1-pixel columns.
#[test]
fn progressive_prefixes_decode_on_the_gpu_like_the_cpu() {
    let Some(gpu) = gpu() else { return };
    let paths = sample_pngs();
    let mut images: Vec<image::DynamicImage> =
        paths.iter().map(|p| l3::read_image(p).unwrap()).collect();
    // Synthetic edge cases: 16-bit RGBA with odd sides, an 8-bit 1-pixel column.
    let rgba16 = image::ImageBuffer::from_fn(37, 23, |x, y| {
        image::Rgba([
            (x * 1500) as u16,
            (y * 2800) as u16,
            ((x ^ y) * 977) as u16,
            65535,
        ])
    });
    images.push(image::DynamicImage::ImageRgba16(rgba16));
    let column = image::ImageBuffer::from_fn(1, 9, |_, y| image::Luma([(y * 29) as u8]));
    images.push(image::DynamicImage::ImageLuma8(column));
    check_progressive_shard(gpu, &images, |i| {
        let profile = if i % 2 == 0 {
            Profile::Compact
        } else {
            Profile::Fast
        };
        let max_overhead = if i % 3 == 1 { 0.0 } else { f64::INFINITY };
        (profile, max_overhead)
    });
}

/// The shared images (`../shared/data/images` or `$L3_TEST_DATA/images`) as `l3 pack --levels
/// 3` stores them (compact, default flat fallback): every level decodes on the GPU exactly as
/// on the CPU, and the top level is the original.
#[test]
fn shared_images_progressive_levels_match_cpu() {
    let Some(gpu) = gpu() else { return };
    let root = std::env::var_os("L3_TEST_DATA")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/data"));
    let mut paths = Vec::new();
    image_files(&root.join("images"), &mut paths);
    if paths.is_empty() {
        println!("no images under {}: nothing to check", root.display());
        return;
    }
    paths.sort();
    let images: Vec<image::DynamicImage> =
        paths.iter().map(|p| l3::read_image(p).unwrap()).collect();
    let default = l3::progressive::ProgressiveOptions::default().max_overhead;
    check_progressive_shard(gpu, &images, |_| (Profile::Compact, default));
}

/// Packs `images` into one 3-level shard (`options(i)`: profile and flat-fallback threshold of
/// image `i`), then checks every level's prefix on the GPU against the CPU, and the top level
/// against the originals.
fn check_progressive_shard(
    gpu: &l3::gpu::GpuDecoder,
    images: &[image::DynamicImage],
    options: impl Fn(usize) -> (Profile, f64),
) {
    use l3::progressive::{encode_levels, LevelScheme, ProgressiveOptions};
    let levels = 3u8;
    let mut writer = l3::shard::ShardWriter::new(levels).unwrap();
    let mut schemes = Vec::new();
    for (i, img) in images.iter().enumerate() {
        let (profile, max_overhead) = options(i);
        let raw = l3::image_support::raw_image(img).unwrap();
        let progressive = ProgressiveOptions {
            levels,
            max_overhead,
        };
        let encoded =
            encode_levels(&raw, &progressive, &EncodeOptions::for_profile(profile)).unwrap();
        schemes.push(encoded.scheme);
        writer
            .add(l3::shard::RecordInput {
                key: format!("{i}"),
                class: None,
                meta: Vec::new(),
                width: img.width(),
                height: img.height(),
                levels: encoded,
            })
            .unwrap();
    }
    assert!(schemes.contains(&LevelScheme::Interlace));
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.l3s");
    writer.write_to(&path).unwrap();
    let shard = l3::shard::ShardReader::open(&path, 1 << 20).unwrap();
    let flat = schemes.iter().filter(|&&s| s == LevelScheme::Flat).count();
    println!("{} records ({flat} flat), {levels} levels", images.len());
    for level in 0..levels {
        let cpu = shard
            .decode_prefix(
                &shard.read_prefix(level).unwrap(),
                &DecodeOptions::default(),
            )
            .unwrap();
        let batch = shard.decode_prefix_on_gpu(gpu, level).unwrap();
        let gpu_images = batch.read_back().unwrap();
        assert_eq!(gpu_images.len(), images.len());
        for (i, (g, c)) in gpu_images.iter().zip(&cpu).enumerate() {
            let layout = batch.images[i];
            assert_eq!((layout.width, layout.height), (c.width, c.height));
            // The GPU writes 16-bit samples little-endian, the CPU in native order.
            let cpu_le: Vec<u8> = if c.depth == 16 {
                c.data
                    .chunks_exact(2)
                    .flat_map(|s| u16::from_ne_bytes([s[0], s[1]]).to_le_bytes())
                    .collect()
            } else {
                c.data.clone()
            };
            assert!(
                g == &cpu_le,
                "record {i} ({:?}) level {level}: GPU and CPU differ",
                schemes[i]
            );
        }
        if level == levels - 1 {
            for (c, img) in cpu.iter().zip(images) {
                assert_eq!(c.data, img.as_bytes());
            }
        }
    }
}

/// `augment.wgsl` against its CPU twin `Augment::apply`, on the bundled samples (8- and 16-bit,
/// gray, RGB, RGBA) and a 16-bit RGBA edge case, with random crops and flips and also
/// crops of one pixel: equal within the stated float tolerance.
#[test]
fn gpu_augmentation_matches_the_cpu_twin() {
    use l3::loader::{Augment, AugmentParams};
    let Some(gpu) = gpu() else { return };
    let paths = sample_pngs();
    let files: Vec<Vec<u8>> = paths
        .iter()
        .map(|p| {
            l3::encode_image(
                &l3::read_image(p).unwrap(),
                &EncodeOptions::for_profile(l3::Profile::Fast),
            )
            .unwrap()
        })
        .collect();
    let refs: Vec<&[u8]> = files.iter().map(|f| f.as_slice()).collect();
    let batch = gpu.decode_batch(&refs, OutputLayout::Interleaved).unwrap();
    let cpu_images: Vec<l3::progressive::LevelImage> = files
        .iter()
        .map(|f| {
            let (h, data) = l3::decode::decode(f, &DecodeOptions::default()).unwrap();
            l3::progressive::LevelImage {
                width: h.width,
                height: h.height,
                channels: h.channels(),
                depth: h.depth,
                data,
            }
        })
        .collect();
    let mut worst = 0f32;
    let mut general = Augment::with_size(50, 40);
    general.rotate90 = true;
    general.max_angle_degrees = 20.0;
    general.padding = 6;
    general.fill = 0.5;
    general.noise_std = 0.05;
    let mut total = 0usize;
    let mut edge = 0usize;
    for (seed, aug) in [
        (1u64, Augment::default()),
        (2, Augment::with_size(37, 19)),
        (3, Augment::with_size(64, 64).deterministic()),
        (4, general),
    ] {
        let mut params: Vec<AugmentParams> = cpu_images
            .iter()
            .enumerate()
            .map(|(i, im)| aug.params(seed, 0, i as u64, im.width, im.height))
            .collect();
        if seed == 2 {
            // A one-pixel crop at the bottom-right corner, flipped.
            let im = &cpu_images[0];
            params[0] = AugmentParams {
                crop: (im.width - 1, im.height - 1, 1, 1),
                flip: true,
                ..params[0]
            };
        }
        let tensor = l3::loader::gpu::augment(gpu, &batch, &params, &aug).unwrap();
        let got = tensor.read_back().unwrap().to_f32();
        let per = aug.output_len();
        assert_eq!(got.len(), per * cpu_images.len());
        for (i, (im, p)) in cpu_images.iter().zip(&params).enumerate() {
            let mut expect = vec![0f32; per];
            aug.apply(im, p, &mut expect).unwrap();
            for (g, e) in got[i * per..(i + 1) * per].iter().zip(&expect) {
                total += 1;
                // A rotated sample coordinate within rounding of the image edge can land on
                // the other side of the fill decision: counted, and bounded below.
                if (g - e).abs() > 1e-4 && aug.padding > 0 {
                    edge += 1;
                    continue;
                }
                worst = worst.max((g - e).abs());
            }
        }
    }
    println!(
        "largest |GPU - CPU| over every augmented value: {worst:e}; {edge} of {total} values on the other side of an edge"
    );
    assert!(
        edge * 10_000 <= total,
        "{edge} of {total} values differ at edges"
    );
    assert!(
        worst <= 1e-4,
        "GPU augmentation differs from the CPU by {worst}"
    );
}

/// Export of a decoded batch through Vulkan external memory (opaque fd), then re-import of the
/// fd as another buffer: its contents equal the batch. Runs wherever the device has
/// `VK_KHR_external_memory_fd` (lavapipe does); with `CI=true` its absence fails.
#[cfg(all(feature = "interop", unix))]
#[test]
fn exported_batches_reimport_with_equal_contents() {
    use l3::gpu::interop::{export_supported, import_buffer};
    let Some(gpu) = gpu() else { return };
    if !export_supported(gpu.device()) {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "CI=true and the adapter cannot export memory as fds"
        );
        println!("SKIPPED: no VK_KHR_external_memory_fd");
        return;
    }
    let files = mixed_files(91, 6);
    let refs: Vec<&[u8]> = files.iter().map(|f| f.as_slice()).collect();
    let batch = gpu.decode_batch(&refs, OutputLayout::Interleaved).unwrap();
    let want = batch.read_back_all().unwrap();
    let exported = batch.export().unwrap();
    assert!(exported.allocation_size >= batch.buffer.size());
    assert_ne!(exported.device_uuid, [0u8; 16]);
    let size = batch.buffer.size();
    // Values no export can have are refused before Vulkan sees them (1 << 32 used to wrap).
    for (memory_type, allocation) in [
        (32, exported.allocation_size),
        (u32::MAX, exported.allocation_size),
        (exported.memory_type, 0),
        (exported.memory_type, size - 1),
    ] {
        // SAFETY: refused before the fd reaches Vulkan (the error is what is tested).
        let r = unsafe {
            import_buffer(
                gpu.device(),
                exported.fd.try_clone().unwrap(),
                size,
                allocation,
                memory_type,
                exported.dedicated,
            )
        };
        assert!(
            matches!(r, Err(l3::Error::Gpu(_))),
            "type {memory_type}, allocation {allocation}: {r:?}"
        );
    }
    let imported = reimport(gpu, &exported, size);
    let got = read_buffer(gpu, &imported, size);
    assert!(got == want, "the imported memory differs from the batch");
    // Every image is at its offset in the exported memory too.
    for (i, l) in batch.images.iter().enumerate() {
        let (_, pixels) = l3::decode::decode(&files[i], &DecodeOptions::default()).unwrap();
        assert!(got[l.offset as usize..(l.offset + l.len) as usize] == pixels[..]);
    }
}

/// On a device whose storage bindings are smaller than a decoded image (the decoder cuts
/// the image into bands), augmenting that image is a clear limits error, not a wgpu
/// validation panic; images that fit still augment.
#[test]
fn augment_reports_images_larger_than_a_binding() {
    use l3::loader::Augment;
    let Some(_) = gpu() else { return };
    let adapter = l3::gpu::select_adapter().unwrap();
    let mut limits = l3::gpu::required_limits(&adapter);
    limits.max_storage_buffer_binding_size = 1 << 20;
    let (device, queue) = pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
        label: Some("1 MiB bindings"),
        required_limits: limits,
        ..Default::default()
    }))
    .unwrap();
    let small_gpu = GpuDecoder::new(&device, &queue).unwrap();
    let mut rng = Rng(7);
    let encode = |w: u32, h: u32, rng: &mut Rng| {
        let s = random_samples(rng, w, h, 4, 8);
        encode_raw(
            w,
            h,
            4,
            8,
            &s,
            &EncodeOptions::for_profile(l3::Profile::Fast),
        )
    };
    // 2 MiB of RGBA output: twice the binding limit.
    let big = encode(1024, 512, &mut rng);
    let small = encode(64, 48, &mut rng);
    let aug = Augment::with_size(32, 32);
    for (files, fits) in [(vec![&small], true), (vec![&small, &big], false)] {
        let refs: Vec<&[u8]> = files.iter().map(|f| f.as_slice()).collect();
        let batch = small_gpu
            .decode_batch(&refs, OutputLayout::Interleaved)
            .unwrap();
        let params: Vec<_> = batch
            .images
            .iter()
            .enumerate()
            .map(|(i, l)| aug.params(1, 0, i as u64, l.width, l.height))
            .collect();
        match l3::loader::gpu::augment(&small_gpu, &batch, &params, &aug) {
            Ok(t) if fits => assert_eq!(t.read_back().unwrap().to_f32().len(), 32 * 32 * 3),
            Err(l3::Error::Limits(e)) if !fits => {
                assert!(e.to_string().contains("binding"), "{e}")
            }
            other => panic!("fits {fits}: unexpected {other:?}"),
        }
    }
}
