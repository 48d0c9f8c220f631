//! Data-preparation pipeline: files on disk -> normalised f32 CHW tensors.

use std::path::{Path, PathBuf};

use anyhow::{anyhow, Result};
use rayon::prelude::*;

use l3::{DecodeOptions, EncodeOptions, Profile};

use crate::args::Args;
use crate::guard::{guard, one_line};
use crate::images::{pixels_from_dynamic, Pixels};
use crate::measure::{gpu_wait, measure};
use crate::rows::PipelineRow;

/// The CPU path's "decode then normalise": one l3 file to a normalised f32 CHW tensor
/// (samples / 255 or / 65535).
fn l3_decode_to_chw(data: &[u8], parallel: bool) -> Result<Vec<f32>> {
    // The library decodes straight into the normalised tensor (x / max, each value written
    // once in the decoder's row loop); the peers decode, then convert with `to_chw`.
    let h = l3::read_header(data)?;
    let mut out = vec![0f32; h.sample_count() as usize];
    l3::decode_into_f32_chw(
        data,
        &mut out,
        l3::Normalize::UNIT,
        &DecodeOptions {
            parallel,
            ..DecodeOptions::default()
        },
    )?;
    Ok(out)
}

/// Interleaved 8- or 16-bit samples (native byte order) to a normalised f32 CHW tensor.
fn to_chw(bytes: &[u8], channels: usize, depth: u8, w: usize, h: usize) -> Vec<f32> {
    let plane = w * h;
    let mut out = vec![0f32; plane * channels];
    if depth == 8 {
        let scale = 1.0 / 255.0;
        for (i, px) in bytes.chunks_exact(channels).enumerate() {
            for (c, &v) in px.iter().enumerate() {
                out[c * plane + i] = v as f32 * scale;
            }
        }
    } else {
        let scale = 1.0 / 65535.0;
        let s: &[u16] = bytemuck::cast_slice(bytes);
        for (i, px) in s.chunks_exact(channels).enumerate() {
            for (c, &v) in px.iter().enumerate() {
                out[c * plane + i] = v as f32 * scale;
            }
        }
    }
    out
}

pub fn bench_pipeline(
    files: &[PathBuf],
    images: &[Pixels],
    args: &Args,
    gpu: Option<&l3::gpu::GpuDecoder>,
) -> Result<Vec<PipelineRow>> {
    let pixels: u64 = images.iter().map(Pixels::pixels).sum();
    let size_of = |fs: &[PathBuf]| -> u64 {
        fs.iter()
            .map(|f| std::fs::metadata(f).map(|m| m.len()).unwrap_or(0))
            .sum()
    };
    let budget = args.max_seconds * 4.0;

    let image_path = |f: &PathBuf| -> Result<Vec<f32>> {
        let data = std::fs::read(f)?;
        let img = image::load_from_memory(&data)?;
        let p = pixels_from_dynamic(String::new(), String::new(), &img)
            .ok_or_else(|| anyhow!("pixel type"))?;
        Ok(to_chw(
            &p.bytes,
            p.channels(),
            p.depth,
            p.width as usize,
            p.height as usize,
        ))
    };

    let mut rows = Vec::new();
    let (s, batch) = measure(args.reps, budget, || {
        files.par_iter().map(image_path).collect::<Result<Vec<_>>>()
    })?;
    let png_floats: usize = batch.iter().map(Vec::len).sum();
    drop(batch);
    rows.push(PipelineRow {
        name: format!(
            "source files + image crate, rayon over files ({} threads)",
            rayon::current_num_threads()
        ),
        stats: Ok(s),
        images: files.len(),
        pixels,
        disk_bytes: size_of(files),
    });
    let dir = std::env::temp_dir().join(format!("l3-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let l3_rows = [Profile::Fast, Profile::Compact]
        .into_iter()
        .map(|profile| bench_pipeline_l3(&dir, profile, images, args, gpu, png_floats))
        .collect::<Result<Vec<_>>>();
    let _ = std::fs::remove_dir_all(&dir);
    rows.extend(l3_rows?.into_iter().flatten());
    Ok(rows)
}

/// The pipeline's rows of one l3 profile: CPU decoder over files in parallel, one file at a
/// time with the parallel decoder, and the GPU decoder (where there is one).
fn bench_pipeline_l3(
    dir: &Path,
    profile: Profile,
    images: &[Pixels],
    args: &Args,
    gpu: Option<&l3::gpu::GpuDecoder>,
    png_floats: usize,
) -> Result<Vec<PipelineRow>> {
    let label = format!("l3 {}", profile.name());
    // l3 copies of the inputs, written once (untimed) to a scratch folder.
    let mut l3_files = Vec::new();
    for (i, p) in images.iter().enumerate() {
        let path = dir.join(format!("{i}.{}.l3", profile.name()));
        let options = EncodeOptions {
            profile: l3::ProfileOptions::default_for(profile),
            ..EncodeOptions::default()
        };
        std::fs::write(&path, l3::encode::encode(&p.raw(), &options)?)?;
        l3_files.push(path);
    }
    let pixels: u64 = images.iter().map(Pixels::pixels).sum();
    let disk_bytes: u64 = l3_files
        .iter()
        .map(|f| std::fs::metadata(f).map(|m| m.len()).unwrap_or(0))
        .sum();
    let budget = args.max_seconds * 4.0;
    let row = |name: String, stats| PipelineRow {
        name,
        stats,
        images: images.len(),
        pixels,
        disk_bytes,
    };
    let l3_path = |f: &PathBuf, parallel: bool| -> Result<Vec<f32>> {
        l3_decode_to_chw(&std::fs::read(f)?, parallel)
    };

    let mut rows = Vec::new();
    let (s, batch) = measure(args.reps, budget, || {
        l3_files
            .par_iter()
            .map(|f| l3_path(f, false))
            .collect::<Result<Vec<_>>>()
    })?;
    let l3_floats: usize = batch.iter().map(Vec::len).sum();
    drop(batch);
    if l3_floats != png_floats {
        eprintln!("  pipeline: {label} tensor sizes differ ({l3_floats} vs {png_floats} floats)");
    }
    rows.push(row(
        format!(
            "{label} files + l3 CPU decoder, rayon over files ({} threads)",
            rayon::current_num_threads()
        ),
        Ok(s),
    ));
    let (s, _) = measure(args.reps, budget, || {
        l3_files
            .iter()
            .map(|f| l3_path(f, true))
            .collect::<Result<Vec<_>>>()
    })?;
    rows.push(row(
        format!(
            "{label} files, one at a time, parallel decoder ({} threads)",
            rayon::current_num_threads()
        ),
        Ok(s),
    ));
    if let Some(dec) = gpu {
        // Files read from disk, decoded and normalised by the GPU decoder in one batch.
        let format = l3::gpu::OutputLayout::F32Chw(l3::gpu::Normalize::UNIT);
        let read_all = || -> Result<Vec<Vec<u8>>> {
            l3_files
                .iter()
                .map(|f| Ok(std::fs::read(f)?))
                .collect::<Result<Vec<_>>>()
        };
        let run = |read_back: bool| -> Result<Option<Vec<Vec<u8>>>> {
            let data = read_all()?;
            let refs: Vec<&[u8]> = data.iter().map(Vec::as_slice).collect();
            let batch = dec.decode_batch(&refs, format)?;
            Ok(if read_back {
                Some(batch.read_back()?)
            } else {
                gpu_wait(dec.device())?;
                None
            })
        };
        // A failure is a row, not the end of the report: the GPU decoder may not take every
        // profile yet.
        let unavailable = |e: anyhow::Error| {
            eprintln!("  pipeline: GPU decoder failed on {label} files: {e:#}");
            Err(format!("unavailable: {}", one_line(&format!("{e:#}"))))
        };
        let name = format!("{label} files + GPU decoder, one batch, tensors left on device");
        match guard(|| measure(args.reps, budget, || run(false))) {
            Ok((s, _)) => rows.push(row(name, Ok(s))),
            Err(e) => rows.push(row(name, unavailable(e))),
        }
        match guard(|| measure(args.reps, budget, || run(true))) {
            Ok((s, host)) => {
                // Compare with the CPU path's tensors.
                let mut worst = 0f32;
                for (h, p) in host.iter().flatten().zip(images) {
                    let g: &[f32] = bytemuck::cast_slice(h);
                    let c = to_chw(
                        &p.bytes,
                        p.channels(),
                        p.depth,
                        p.width as usize,
                        p.height as usize,
                    );
                    if g.len() != c.len() {
                        worst = f32::INFINITY;
                        continue;
                    }
                    for (a, b) in g.iter().zip(&c) {
                        worst = worst.max((a - b).abs());
                    }
                }
                if worst > 1e-6 {
                    eprintln!(
                        "  pipeline: GPU tensors of {label} files differ from the CPU's by up \
                         to {worst}"
                    );
                }
                rows.push(row(
                    format!(
                        "{label} files + GPU decoder, one batch, tensors read back (max |GPU - CPU| = {worst:.1e})"
                    ),
                    Ok(s),
                ));
            }
            Err(e) => rows.push(row(
                format!("{label} files + GPU decoder, one batch, tensors read back"),
                unavailable(e),
            )),
        }
    }
    Ok(rows)
}
