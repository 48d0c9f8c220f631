//! The GPU unit tests that need the crate's internals: the CPU twins against the CPU decoder
//! (no GPU, and no `gpu` feature, needed), and, with the `gpu` feature, the twins against the
//! shaders, the prefix-sum kernel alone, the shaders' error flags against the twins', the
//! [`crate::gpu::Batcher`] (per-file results, fallback, buffer reuse) and the async form. The
//! tests that go through the public API only are in tests/gpu.rs; both share the
//! generators of tests/common/gpu_support.rs. GPU tests skip without an adapter unless
//! `CI=true` (see `gpu()`).

use super::cpu_twin;
use super::plan::{build_chunk, ChunkInputs};
use l3::decode::DecodeOptions;
use l3::format::{parse_file, ParseOptions};
use l3::gpu::{Normalize, OutputLayout};

#[path = "../../tests/common/gpu_support.rs"]
pub(crate) mod support;
use support::*;

/// The CPU twins of all kernels, run as one pipeline, reproduce the CPU decoder (no GPU).
#[test]
fn cpu_twin_pipeline_matches_cpu_decoder() {
    assert_twins_match_cpu_decoder(&random_files(7, 40));
}

/// Runs the twins on one chunk of `files`, interleaved and f32 output, and compares each
/// image with the CPU decoder: interleaved byte for byte; f32 (the `cpu_twin::F32Chw` sink)
/// as the normalisation formula on the CPU decoder's samples, bit for bit, in planar order.
fn assert_twins_match_cpu_decoder(files: &[Vec<u8>]) {
    let layouts = layouts_of(files);
    // The image table lists version-1 images first: find each file's entry by its index.
    let info_of = |chunk: &ChunkInputs, i: usize| {
        *chunk
            .images
            .iter()
            .find(|info| info.image_index as usize == i)
            .unwrap()
    };
    let chunk = build_chunk(&layouts, 0, OutputLayout::Interleaved);
    let (out, flags) = cpu_twin::run_chunk(&chunk, OutputLayout::Interleaved);
    assert!(flags.iter().all(|&f| f == 0), "{flags:?}");
    for (i, file) in files.iter().enumerate() {
        let want = cpu_decode(file);
        let start = info_of(&chunk, i).out_base as usize * 4;
        assert!(out[start..start + want.len()] == want[..], "file {i}");
    }
    let norm = Normalize::IMAGENET;
    let output = OutputLayout::F32Chw(norm);
    let chunk = build_chunk(&layouts, 0, output);
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

/// The CPU twins reproduce the CPU decoder for a batch of version-1 and version-2 files,
/// interleaved and f32 output (no GPU).
#[test]
fn cpu_twin_pipeline_matches_cpu_decoder_for_mixed_versions() {
    assert_twins_match_cpu_decoder(&mixed_files(31, 40));
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
        let output = OutputLayout::Interleaved;
        let chunk = build_chunk(std::slice::from_ref(&layout), 0, output);
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

/// The tests that run the shaders.
#[cfg(feature = "gpu")]
mod on_gpu {
    use super::*;
    use l3::gpu::GpuDecoder;
    use l3::{format, Error, FormatError};

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
                            let sizes: Vec<u32> =
                                (0..n).map(|_| rng.below(40_000) as u32).collect();
                            assert_eq!(
                                gpu.prefix_sum(&sizes).unwrap(),
                                cpu_twin::prefix_sum(&sizes),
                                "thread {t} round {round}"
                            );
                        } else {
                            let refs: Vec<&[u8]> = files.iter().map(|f| f.as_slice()).collect();
                            let batch = gpu.decode_batch(&refs, OutputLayout::Interleaved).unwrap();
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

    #[test]
    fn random_images_match_cpu_in_one_mixed_batch() {
        let Some(gpu) = gpu() else { return };
        let files = random_files(11, 120);
        let names: Vec<String> = (0..files.len()).map(|i| format!("random #{i}")).collect();
        check_batch(gpu, &files, &names);
        // The whole buffer, alignment padding included, equals the CPU twins' output.
        let refs: Vec<&[u8]> = files.iter().map(|f| f.as_slice()).collect();
        let batch = gpu.decode_batch(&refs, OutputLayout::Interleaved).unwrap();
        let layouts = layouts_of(&files);
        let chunk = build_chunk(&layouts, 0, OutputLayout::Interleaved);
        let (twin, _) = cpu_twin::run_chunk(&chunk, OutputLayout::Interleaved);
        assert!(
            batch.read_back_all().unwrap() == twin,
            "shader and twin buffers differ"
        );
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
            let output = OutputLayout::F32Chw(norm);
            let batch = gpu.decode_batch(&refs, output).unwrap();
            let got = batch.read_back().unwrap();
            for (i, file) in files.iter().enumerate() {
                let layout =
                    parse_file(file, &l3::Limits::default(), ParseOptions::default()).unwrap();
                let chunk = build_chunk(std::slice::from_ref(&layout), 0, output);
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
        let output = OutputLayout::F32Chw(Normalize::IMAGENET);
        let batch = gpu.decode_batch(&refs, output).unwrap();
        let all = batch.read_back_all().unwrap();
        let (twin, flags) = cpu_twin::run_chunk(&build_chunk(&layouts, 0, output), output);
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
                            let at =
                                data_start + rng.below((data_end - data_start) as u64) as usize;
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
            .decode_batch_with_flags(&refs, OutputLayout::Interleaved)
            .unwrap();
        let got = batch.read_back().unwrap();
        let mut flagged = 0;
        for (j, (i, k, g)) in files.iter().enumerate() {
            let cpu = l3::decode::decode(g, &DecodeOptions::default());
            // The twin pipeline must flag exactly what the shader flags.
            let layout = parse_file(g, &l3::Limits::default(), ParseOptions::default()).unwrap();
            let (_, twin_flags) = cpu_twin::run_chunk(
                &build_chunk(&[layout], 0, OutputLayout::Interleaved),
                OutputLayout::Interleaved,
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
        match gpu.decode_batch(&refs, OutputLayout::Interleaved) {
            Err(Error::Format(FormatError::GpuReported { image: 0, flags })) => {
                assert_ne!(flags, 0)
            }
            other => panic!("expected GpuReported for image 0, got {other:?}"),
        }
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
        let batch = gpu.decode_batch(&refs, OutputLayout::Interleaved).unwrap();
        let chunk = build_chunk(&layouts_of(&files), 0, OutputLayout::Interleaved);
        let (twin, _) = cpu_twin::run_chunk(&chunk, OutputLayout::Interleaved);
        assert!(
            batch.read_back_all().unwrap() == twin,
            "shader and twin buffers differ"
        );
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
                .decode_batch_with_flags(&refs, OutputLayout::Interleaved)
                .unwrap();
            let got = batch.read_back().unwrap();
            let layouts: Vec<_> = files
                .iter()
                .map(|(_, _, g)| {
                    let parse = ParseOptions { verify_checksum };
                    parse_file(g, &l3::Limits::default(), parse).unwrap()
                })
                .collect();
            let chunk = build_chunk(&layouts, 0, OutputLayout::Interleaved);
            let (_, twin_flags) = cpu_twin::run_chunk(&chunk, OutputLayout::Interleaved);
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

    /// Repeated equal batches reuse the batcher's buffers and the decoder's scratch buffers: no
    /// allocation after the first round.
    #[test]
    fn batcher_reuses_its_buffers() {
        let Some(shared) = gpu() else { return };
        let gpu = GpuDecoder::new(shared.device(), shared.queue()).unwrap();
        let files = mixed_files(71, 16);
        let budget = files
            .iter()
            .map(|f| l3::read_header(f).unwrap().output_bytes())
            .sum::<u64>()
            / 3;
        let mut batcher =
            crate::gpu::Batcher::new(&gpu, OutputLayout::Interleaved).with_budget(budget);
        let mut stats = Vec::new();
        for round in 0..4 {
            let mut n = 0;
            for (i, f) in files.iter().enumerate() {
                for r in batcher.push(i, f.clone()) {
                    assert!(r.result.is_ok(), "round {round}, file {}", r.tag);
                    n += 1;
                }
            }
            stats.push((batcher.stats().allocations, gpu.allocations(), n));
        }
        let s = batcher.stats();
        assert!(s.batches >= 8 && s.fallbacks == 0, "{s:?}");
        // Rounds after the first (its buffers are grown by then) allocate nothing.
        assert_eq!(stats[1].0, stats[3].0, "{stats:?}");
        assert_eq!(stats[1].1, stats[3].1, "{stats:?}");
        // Two sets of four buffers, grown a few times at most, not one set per batch.
        assert!(stats[3].0 < 4 * s.batches, "{stats:?} {s:?}");
        let rest = batcher.finish();
        assert!(rest.iter().all(|r| r.result.is_ok()));
    }

    /// The async form resolves under `pollster::block_on` without the caller polling the device,
    /// with two batches awaited in turn.
    #[test]
    fn async_batches_resolve_without_caller_polling() {
        let Some(gpu) = gpu() else { return };
        let files = mixed_files(73, 10);
        let refs: Vec<&[u8]> = files.iter().map(|f| f.as_slice()).collect();
        let first = gpu.decode_batch_async(&refs[..5], OutputLayout::Interleaved);
        let second = gpu.decode_batch_async(&refs[5..], OutputLayout::Interleaved);
        let (a, b) = pollster::block_on(async { (first.await, second.await) });
        let got: Vec<Vec<u8>> = [a.unwrap(), b.unwrap()]
            .iter()
            .flat_map(|batch| batch.read_back().unwrap())
            .collect();
        for (f, g) in files.iter().zip(&got) {
            assert!(*g == cpu_decode(f));
        }
    }
}
