//! The report as Markdown (the format of the run reports in docs/bench-history.md).

use std::fmt::Write as _;

use super::results::Report;
use super::tables::Tables;
use crate::codecs::Codec;
use crate::rows::LoaderRow;

/// One line per codec (the all-thread l3 rows share their one-thread row's note).
fn codec_notes() -> String {
    Codec::ALL
        .iter()
        .filter(|c| !matches!(c, Codec::L3 { parallel: true, .. }))
        .map(|c| format!("- {}: {}\n", c.name(), c.note()))
        .collect()
}

pub fn markdown(r: &Report, t: &Tables) -> String {
    let (args, images, pipeline, scaling, gpu) =
        (&r.args, &r.images, &r.pipeline, &r.scaling, &r.gpu);
    let (date, machine, load) = (&r.meta.date, &r.meta.machine, &r.load);
    let versions_line = r.versions_line();
    let (total_px, total_raw) = (r.total_pixels(), r.total_raw_bytes());
    let codec_notes = codec_notes();
    let mut md = String::new();
    let _ = writeln!(md, "- date: {date}");
    let _ = writeln!(md, "- machine: {machine}; {load}");
    let _ = writeln!(md, "- crates: {versions_line}");
    let _ = writeln!(
        md,
        "- inputs: {} images, {:.1} MP, {:.1} MB of raw pixels",
        images.len(),
        total_px as f64 / 1e6,
        total_raw as f64 / 1e6
    );
    let _ = writeln!(
        md,
        "- method: image by image, the one-thread runs before the parallel ones; per (codec, image) one warm-up run, then up to {} timed runs, capped at {} s; the decoders of an image run in alternation, one decode of each per round (so a change in the machine's speed falls on all of them alike); per-image medians (and slowest / fastest runs) summed over the images a codec supports; throughput in megapixels and gigabytes of raw (decoded) pixels per second, shown as median [slowest-fastest]; `vs png` = size / png (default) size on the same images; lossless = bit-exact round trip on every image.\n",
        args.reps, args.max_seconds
    );
    let _ = writeln!(md, "### Codecs\n");
    md += &t.main.markdown();
    let _ = writeln!(md, "\n{codec_notes}");
    let _ = writeln!(md, "### Per image class\n");
    let _ = writeln!(md, "Classes are the inputs' folders (`generated`: the generated label map, screenshot and star field). Size ratios are totals; decode ratios are one-thread speeds (the peer's summed median time over ours), each over the class's images both codecs ran; \"of memcpy\" is a decoder's speed as a fraction of a one-thread copy of the same output in the same run.\n");
    md += &t.classes.markdown();
    let _ = writeln!(md);
    let _ = writeln!(md, "### Per image (bits per pixel)\n");
    md += &t.per_image.markdown();
    if !pipeline.is_empty() {
        let _ = writeln!(md, "\n### Data-preparation pipeline\n");
        let _ = writeln!(md, "Files on disk (page cache warm) to a batch of normalised f32 CHW tensors (one per image, samples / 255 or / 65535).\n");
        md += &t.pipeline.markdown();
    }
    match &r.dataset {
        Some(Ok(d)) => {
            let _ = writeln!(md, "\n### Dataset: l3 shards vs PNG files\n");
            let _ = writeln!(
                md,
                "The run's images packed as `l3 pack` does (compact profile, each record verified by decoding, shards of up to {} records written atomically with fsync) versus one PNG file per image (png crate default, fsynced), in a scratch folder ({}); rayon over {} threads. One run, timed with the usual warm-up and reps. Reads marked \"page cache\" are of files just written, so they measure CPU and memory, not the disk. Cold reads: {}. `speed vs PNG` = PNG time / this time for the PNG row of the same kind and cache state (- for the reads without decoding: PNG has no such row). MB/s are of source pixels; file GB/s of bytes written or read.\n",
                d.records_per_shard, d.scratch, d.threads, d.cold
            );
            md += &t.dataset.markdown();
            md += "\n";
            md += &t.dataset_sizes.markdown();
            let p = &d.progressive;
            let _ = writeln!(
                md,
                "\n#### Progressive shards\n\nThe same images packed as `l3 pack --levels {}` does (compact, interlace with the flat fallback above 1.25x): {} records interlaced, {} stored flat; {} payload bytes, **{:.4}x** the one-level shards above; pack median {:.2} s (encodes the flat and the interlaced form, verifies through every level). Each row reads every shard's prefix up to that level in one read (`read_prefix`) and decodes every record at that level on the CPU (`decode_prefix`, rayon over records), page cache; `read / ideal` = bytes read / the records' payloads of levels 0..=k.\n",
                p.levels, p.interlaced, p.flat, p.payload_bytes, p.vs_flat, p.pack.median
            );
            md += &t.dataset_levels.markdown();
            let _ = writeln!(
                md,
                "\n#### Loader\n\nOne epoch (seed 1, batches of {}) from files to batches of augmented f32 NCHW tensors: random resized crop (torchvision's parameters) to 224 x 224 with bilinear resize, horizontal flip, ImageNet normalisation, the same `l3::loader::Augment` code in every row. l3 rows: `l3::loader::Loader` (plan, positional reads of the payloads the level needs, decode + augment on its pool, no cache). PNG row: the same permutation and batches, each file read and decoded by the `image` crate and augmented, rayon over a batch's files. CPU ms per image: process user + system time of the last rep / images. Page cache warm.\n",
                LoaderRow::BATCH
            );
            md += &t.loader.markdown();
        }
        Some(Err(e)) => {
            let _ = writeln!(md, "\n### Dataset: l3 shards vs PNG files\n\nfailed: {e}");
        }
        None => {}
    }
    if let Some((src, _)) = scaling {
        let _ = writeln!(md, "\n### Scaling\n");
        let _ = writeln!(
            md,
            "{src} tiled to each size (alternate tiles mirrored, so every size holds the same pixels in the same proportions).\n"
        );
        md += &t.scaling.markdown();
    }
    match gpu {
        Some(Ok(g)) => {
            let _ = writeln!(md, "\n### GPU (wgpu)\n");
            let _ = writeln!(
                md,
                "Adapter: {}. GPU decoder round trip bit-exact on every image: {} (- = not run).\n",
                g.adapter,
                g.lossless_summary()
            );
            md += &t.gpu.markdown();
        }
        Some(Err(e)) => {
            let _ = writeln!(md, "\n### GPU (wgpu)\n\nunavailable: {e}");
        }
        None => {}
    }
    md
}
