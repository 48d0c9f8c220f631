//! The text report printed on stdout.

use std::fmt::Write as _;

use super::results::Report;
use super::tables::Tables;

pub fn text(r: &Report, t: &Tables) -> String {
    let (args, images, pipeline, scaling, gpu) =
        (&r.args, &r.images, &r.pipeline, &r.scaling, &r.gpu);
    let (date, machine, load) = (&r.meta.date, &r.meta.machine, &r.load);
    let versions_line = r.versions_line();
    let (total_px, total_raw) = (r.total_pixels(), r.total_raw_bytes());
    let mut out = String::new();
    let _ = writeln!(out, "l3-bench  {date}");
    let _ = writeln!(out, "machine:  {machine}; {load}");
    let _ = writeln!(out, "crates:   {versions_line}");
    let _ = writeln!(
        out,
        "inputs:   {} images, {:.1} MP, {:.1} MB raw, from {}",
        images.len(),
        total_px as f64 / 1e6,
        total_raw as f64 / 1e6,
        args.inputs
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    );
    let _ = writeln!(
        out,
        "method:   image by image (one-thread runs first); per (codec, image) 1 warm-up + up to {} timed reps (capped at {} s), the decoders of an image in alternation, one decode each per round; times summed over images; median [slowest-fastest]\n",
        args.reps, args.max_seconds
    );
    out += &t.main.text();
    out += "\n";
    out += &t.classes.text();
    out += "\n";
    if args.per_image {
        out += &t.per_image.text();
        out += "\n";
    }
    if !pipeline.is_empty() {
        out += &t.pipeline.text();
        out += "\n";
    }
    match &r.dataset {
        Some(Ok(d)) => {
            let _ = writeln!(
                out,
                "dataset: scratch {}; {} rayon threads; reads marked \"page cache\" are of files just written; cold reads: {}",
                d.scratch, d.threads, d.cold
            );
            out += &t.dataset.text();
            out += "\n";
            out += &t.dataset_sizes.text();
            out += "\n";
            let p = &d.progressive;
            let _ = writeln!(
                out,
                "progressive shards ({} levels): {} records interlaced, {} flat; {} payload bytes = {:.4}x the one-level shards; pack median {:.2} s",
                p.levels, p.interlaced, p.flat, p.payload_bytes, p.vs_flat, p.pack.median
            );
            out += &t.dataset_levels.text();
            out += "\n";
            out += &t.loader.text();
            out += "\n";
        }
        Some(Err(e)) => {
            let _ = writeln!(out, "dataset: failed ({e})\n");
        }
        None => {}
    }
    if let Some((src, _)) = scaling {
        let _ = writeln!(out, "scaling: tiles of {src}");
        out += &t.scaling.text();
        out += "\n";
    }
    match gpu {
        Some(Ok(g)) => {
            let _ = writeln!(
                out,
                "gpu adapter: {}; GPU decoder lossless: {}",
                g.adapter,
                g.lossless_summary()
            );
            out += &t.gpu.text();
        }
        Some(Err(e)) => {
            let _ = writeln!(out, "gpu: unavailable ({e})");
        }
        None => {}
    }
    out
}
