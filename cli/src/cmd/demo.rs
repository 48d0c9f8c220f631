//! `l3 demo`: the bundled samples (or a folder) encoded in both profiles, verified,
//! decoded on the CPU and as GPU batches, then packed into a dataset and verified.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::Args;
use l3::shard::DatasetManifest;
use l3::EncodeOptions;

use crate::cmd::{pack, verify_dataset};
use crate::display::human;
use crate::flags::{ProfileArg, IMAGE_EXTENSIONS};
use crate::fsio::{self, Job};
use crate::images::read_source;
use crate::limits::decode_options;

#[derive(Args)]
pub(crate) struct DemoArgs {
    /// Directory of images (default: the bundled samples).
    pub(crate) dir: Option<PathBuf>,
}

pub(crate) fn cmd_demo(a: DemoArgs) -> Result<u64> {
    let dir = a.dir.unwrap_or_else(|| {
        let bundled = Path::new(env!("CARGO_MANIFEST_DIR")).join("../samples");
        if bundled.is_dir() {
            bundled
        } else {
            PathBuf::from("samples")
        }
    });
    let roots = fsio::collect_jobs(std::slice::from_ref(&dir), IMAGE_EXTENSIONS)?;
    let jobs: Vec<Job> = roots.into_iter().flat_map(|(_, j)| j).collect();
    if jobs.is_empty() {
        bail!("no images in {}", dir.display());
    }
    println!("l3 demo on {} ({} images)", dir.display(), jobs.len());
    println!(
        "both profiles: fast (format v1, fixed-width rows) and compact (v2, Huffman-coded); \
         CPU encoder and decoder on {} threads, speeds best of 3 runs",
        rayon::current_num_threads()
    );
    println!(
        "{:<34} {:>11} {:>9} {:>9} {:>9} {:>15} {:>15}",
        "image", "size", "input", "fast", "compact", "enc MP/s f / c", "dec MP/s f / c"
    );
    let profiles = [l3::Profile::Fast, l3::Profile::Compact];
    // Per profile: total bytes, encode seconds, decode seconds.
    let mut totals = [(0u64, 0f64, 0f64); 2];
    let (mut tin, mut tpx) = (0u64, 0u64);
    let mut failed = 0;
    // Per profile, the encoded files and their CPU-decoded pixels, for the GPU comparison.
    let mut decoded_files: [Vec<EncodedAndDecoded>; 2] = [Vec::new(), Vec::new()];
    for job in &jobs {
        let r = (|| -> Result<()> {
            let input_bytes = std::fs::metadata(&job.input)?.len();
            let image = read_source(&job.input)?;
            let px = image.width() as u64 * image.height() as u64;
            let mut row = Vec::new();
            for (k, &profile) in profiles.iter().enumerate() {
                let options = EncodeOptions::for_profile(profile);
                // Best of 3 encodes, then best of 3 decodes into one reused buffer.
                let mut enc = f64::MAX;
                let mut encoded = Vec::new();
                for _ in 0..3 {
                    let t0 = Instant::now();
                    encoded = l3::encode_image(&image, &options)?;
                    enc = enc.min(t0.elapsed().as_secs_f64());
                }
                let header = l3::read_header(&encoded)?;
                let mut out = vec![0u8; header.output_bytes() as usize];
                let mut dec = f64::MAX;
                for _ in 0..3 {
                    let t0 = Instant::now();
                    l3::decode_into(&encoded, &mut out, &decode_options())?;
                    dec = dec.min(t0.elapsed().as_secs_f64());
                }
                // `out` holds the decoded samples in the `image` crate's own layout (16-bit
                // in native byte order), so it is compared with the source directly.
                let same = (header.width, header.height) == (image.width(), image.height())
                    && header.channels() == image.color().channel_count()
                    && out == image.as_bytes();
                if !same {
                    bail!("{} round trip is not lossless", profile.name());
                }
                row.push((encoded.len() as u64, enc, dec));
                decoded_files[k].push((encoded, out));
            }
            println!(
                "{:<34} {:>11} {:>9} {:>9} {:>9} {:>15} {:>15}",
                job.relative.display().to_string(),
                format!(
                    "{}x{}x{}",
                    image.width(),
                    image.height(),
                    image.color().channel_count()
                ),
                human(input_bytes),
                human(row[0].0),
                human(row[1].0),
                format!(
                    "{:.0} / {:.0}",
                    px as f64 / 1e6 / row[0].1,
                    px as f64 / 1e6 / row[1].1
                ),
                format!(
                    "{:.0} / {:.0}",
                    px as f64 / 1e6 / row[0].2,
                    px as f64 / 1e6 / row[1].2
                ),
            );
            tin += input_bytes;
            tpx += px;
            for (t, r) in totals.iter_mut().zip(&row) {
                t.0 += r.0;
                t.1 += r.1;
                t.2 += r.2;
            }
            Ok(())
        })();
        if let Err(e) = r {
            failed += 1;
            eprintln!("error: {}: {e:#}", job.input.display());
        }
    }
    for (profile, (bytes, enc, dec)) in profiles.iter().zip(totals) {
        println!(
            "total {:<7}: {} -> {} ({:.3}x the input files), encode {:.1} MP/s, CPU decode {:.1} MP/s",
            profile.name(),
            human(tin),
            human(bytes),
            bytes as f64 / tin.max(1) as f64,
            tpx as f64 / 1e6 / enc,
            tpx as f64 / 1e6 / dec
        );
    }
    println!("every image verified bit-exact in both profiles");
    #[cfg(feature = "gpu")]
    demo_gpu(
        &[
            (profiles[0].name(), &decoded_files[0]),
            (profiles[1].name(), &decoded_files[1]),
        ],
        tpx,
    )?;
    #[cfg(not(feature = "gpu"))]
    println!(
        "GPU decoder: not built (the `gpu` feature is off); the CPU decoder above is the fallback"
    );
    demo_dataset(&dir)?;
    Ok(failed)
}

/// The demo's dataset part: the same images packed into progressive record shards (3 levels)
/// in a temporary folder, every shard checked against the manifest and every record decoded,
/// then each shard's level-0 prefix read in one read and decoded on the CPU and (if there is
/// an adapter) on the GPU, compared bit for bit.
fn demo_dataset(dir: &Path) -> Result<()> {
    // A fresh private folder (created exclusively, mode 0700): never a guessable path that
    // another user could have planted in the shared temp folder.
    let tmp_dir = tempfile::Builder::new()
        .prefix("l3-demo-dataset-")
        .tempdir()
        .context("creating the demo's temporary folder")?;
    let tmp = tmp_dir.path().to_path_buf();
    let result = (|| -> Result<()> {
        pack::cmd_pack(pack::PackArgs {
            source: dir.to_path_buf(),
            output: tmp.clone(),
            records_per_shard: 4,
            labels: None,
            profile: ProfileArg::Compact,
            patch_size: 64,
            levels: 3,
            max_overhead: 1.25,
            max_error: 0,
            force: false,
            quiet: true,
        })?;
        let failed = verify_dataset::cmd_verify_dataset(verify_dataset::DatasetArgs {
            dataset: tmp.to_string_lossy().into_owned(),
        })?;
        if failed > 0 {
            bail!("{failed} shard(s) of the demo dataset failed verification");
        }
        demo_prefix_reads(&tmp)?;
        demo_loader(&tmp)
    })();
    drop(tmp_dir);
    result
}

/// Reads every shard's level-0 prefix (1/4 per side) and decodes it on the CPU and the GPU.
fn demo_prefix_reads(dataset: &Path) -> Result<()> {
    let m = l3::shard::Manifest::read(dataset)?;
    #[cfg(feature = "gpu")]
    let gpu = l3::gpu::GpuDecoder::new_default().ok();
    #[cfg_attr(not(feature = "gpu"), allow(unused_mut))]
    let (mut prefix_bytes, mut total_bytes, mut images, mut gpu_images) = (0u64, 0u64, 0, 0);
    for s in &m.shards {
        let shard = l3::shard::ShardReader::open(&dataset.join(&s.file), 1 << 30)?;
        let prefix = shard.read_prefix(0)?;
        prefix_bytes += prefix.bytes.len() as u64;
        total_bytes += s.level_bytes.iter().sum::<u64>();
        let cpu = shard.decode_prefix(&prefix, &decode_options())?;
        images += cpu.len();
        #[cfg(feature = "gpu")]
        if let Some(gpu) = &gpu {
            let batch = shard.decode_prefix_on_gpu(gpu, 0)?;
            for (i, (g, c)) in batch.read_back()?.iter().zip(&cpu).enumerate() {
                if g != &c.data {
                    bail!("{} record {i}: GPU level 0 differs from the CPU's", s.file);
                }
                gpu_images += 1;
            }
        }
    }
    println!(
        "dataset: level-0 prefix read (1/4 per side) of {images} images: {} of {} payload bytes ({:.1}%), decoded on the CPU{}",
        human(prefix_bytes),
        human(total_bytes),
        100.0 * prefix_bytes as f64 / total_bytes.max(1) as f64,
        if gpu_images > 0 {
            format!(" and on the GPU, {gpu_images} images bit-identical")
        } else {
            String::new()
        }
    );
    Ok(())
}

/// The loader on the demo dataset: 2 epochs of 224 x 224 augmented batches, killed after the
/// first batch of two ranks and resumed with one; every sample must be seen exactly once per
/// epoch.
fn demo_loader(dataset: &Path) -> Result<()> {
    use l3::loader::{DropLast, Loader, LoaderOptions, LoaderState, Partition};
    use std::collections::BTreeMap;
    let ds = std::sync::Arc::new(l3::shard::Dataset::open(dataset)?);
    let options = |world: u32, rank: u32| {
        let mut o = LoaderOptions::new(Partition {
            batch_size: 2,
            world_size: world,
            rank,
            drop_last: DropLast::Partial,
        });
        o.end_epoch = 2;
        o
    };
    let t0 = Instant::now();
    let mut seen: BTreeMap<(u64, u64), u32> = BTreeMap::new();
    let mut count = |b: &l3::loader::Batch| {
        for &s in &b.samples {
            *seen.entry((b.epoch, s)).or_default() += 1;
        }
    };
    // Two ranks, one step each, then the "kill" (the loaders are dropped).
    let mut state = LoaderState::default();
    for rank in 0..2 {
        let mut l = Loader::new(ds.clone(), options(2, rank), LoaderState::default())?;
        let b = l.next().context("no first batch")??;
        count(&b);
        state = l.state();
    }
    let mut batches = 2;
    for b in Loader::new(ds.clone(), options(1, 0), state)? {
        count(&b?);
        batches += 1;
    }
    let n = ds.len();
    let once = (0..2).all(|e| (0..n).all(|s| seen.get(&(e, s)) == Some(&1)));
    if !once || seen.len() as u64 != 2 * n {
        bail!("the loader did not see every sample exactly once per epoch: {seen:?}");
    }
    println!(
        "loader: 2 epochs of {n} images as {batches} batches of 224x224 f32 tensors on the CPU, killed after one step of 2 ranks and resumed with 1: every image exactly once per epoch ({:.2} s)",
        t0.elapsed().as_secs_f64()
    );
    Ok(())
}

/// An encoded file and the pixels the CPU decoder made of it.
type EncodedAndDecoded = (Vec<u8>, Vec<u8>);

#[cfg(feature = "gpu")]
/// The demo's GPU part: the same files as one batch on the GPU, compared byte for byte with
/// the CPU decoder; without an adapter, says so and stays on the CPU.
fn demo_gpu(sets: &[(&str, &Vec<EncodedAndDecoded>)], pixels: u64) -> Result<()> {
    let decoder = match l3::gpu::GpuDecoder::new_default() {
        Ok(d) => d,
        Err(e) => {
            println!("GPU decoder: not used ({e}); the CPU decoder above is the fallback");
            return Ok(());
        }
    };
    let software = decoder.is_software();
    println!(
        "GPU decoder: {}{}",
        decoder.adapter_name(),
        if software {
            " (a software rasteriser running on the CPU: correct, but not GPU speed)"
        } else {
            ""
        }
    );
    for &(profile, files) in sets {
        let refs: Vec<&[u8]> = files.iter().map(|(f, _)| f.as_slice()).collect();
        let mut best = f64::MAX;
        let mut batch = None;
        for _ in 0..3 {
            let t0 = Instant::now();
            let b = decoder.decode_batch(&refs, l3::gpu::OutputLayout::Interleaved)?;
            best = best.min(t0.elapsed().as_secs_f64());
            batch = Some(b);
        }
        let images = batch.expect("three runs").read_back()?;
        let identical = images
            .iter()
            .zip(files)
            .filter(|(gpu, (_, cpu))| *gpu == cpu)
            .count();
        println!(
            "GPU batch of {} {profile} files: {:.1} MP/s (parse, upload and kernels; best of 3); {}/{} identical to the CPU decoder",
            files.len(),
            pixels as f64 / 1e6 / best,
            identical,
            files.len()
        );
        if identical != files.len() {
            bail!("GPU and CPU decoders disagree on {profile} files");
        }
    }
    Ok(())
}
