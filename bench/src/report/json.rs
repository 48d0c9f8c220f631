//! The report as JSON (`--json PATH`): serde views of the sections' results.
//!
//! The document: `date`, `machine`, `cpu`, `threads`, `load`, `source`, `crates` (name ->
//! version), `reps`, `images`, `codecs` (per codec, one result per image, null where the codec
//! does not take the image), `memcpy`, `pipeline`, `dataset` and `gpu` (null when skipped,
//! `{"error": ...}` when they could not run), `scaling`. Times are `Stats` objects:
//! `median_s`, `min_s`, `max_s` (seconds) and `reps`.

use anyhow::Result;
use serde::{Serialize, Serializer};

use l3::Profile;

use super::results::Report;
use crate::measure::Stats;
use crate::rows::{Cell, DatasetReport, GpuReport, ScalingRow};

#[derive(Serialize)]
struct Document<'a> {
    date: &'a str,
    machine: &'a str,
    cpu: &'a str,
    threads: usize,
    load: &'a str,
    source: Option<&'a str>,
    crates: InOrder<'a>,
    reps: usize,
    images: Vec<Image<'a>>,
    codecs: Vec<CodecResults<'a>>,
    memcpy: Memcpy,
    pipeline: Vec<PipelineRow<'a>>,
    dataset: Option<Dataset<'a>>,
    scaling: &'a [ScalingRow],
    gpu: Option<Gpu<'a>>,
}

#[derive(Serialize)]
struct Image<'a> {
    name: &'a str,
    class: &'a str,
    width: u32,
    height: u32,
    channels: usize,
    depth: u8,
    raw_bytes: usize,
}

#[derive(Serialize)]
struct CodecResults<'a> {
    codec: &'static str,
    /// The l3 profile; null for the other codecs.
    profile: Option<&'static str>,
    /// The l3 patch side in pixels (64, or 128 for "l3 compact 128px"); null for the others.
    patch_size: Option<u32>,
    threads: String,
    /// One per image; null where the codec does not take the image.
    results: Vec<Option<CodecCell<'a>>>,
}

#[derive(Serialize)]
struct CodecCell<'a> {
    image: &'a str,
    bytes: u64,
    /// null where the encode time is not the codec's own (zune-png).
    encode: Option<Stats>,
    decode: Stats,
    lossless: bool,
}

#[derive(Serialize)]
struct Memcpy {
    bytes: u64,
    one_thread: Stats,
    all_threads: Stats,
}

#[derive(Serialize)]
struct PipelineRow<'a> {
    name: &'a str,
    images: usize,
    pixels: u64,
    disk_bytes: u64,
    /// null when the row could not be measured; `error` says why.
    time: Option<Stats>,
    error: Option<&'a str>,
}

#[derive(Serialize)]
#[serde(untagged)]
enum Dataset<'a> {
    Report(&'a DatasetReport),
    Error { error: &'a str },
}

#[derive(Serialize)]
#[serde(untagged)]
enum Gpu<'a> {
    Report(&'a GpuReport),
    Error { error: &'a str },
}

/// Name-value pairs as a JSON object, in their order.
struct InOrder<'a>(&'a [(String, String)]);

impl Serialize for InOrder<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.collect_map(self.0.iter().map(|(k, v)| (k, v)))
    }
}

pub fn json(r: &Report) -> Result<String> {
    let images = &r.images;
    let cell = |i: usize, c: &Cell| CodecCell {
        image: &images[i].name,
        bytes: c.size,
        encode: c.enc,
        decode: c.dec,
        lossless: c.lossless,
    };
    let doc = Document {
        date: &r.meta.date,
        machine: &r.meta.machine,
        cpu: &r.meta.cpu,
        threads: r.meta.threads,
        load: &r.load,
        source: r.source.as_deref(),
        crates: InOrder(&r.meta.versions),
        reps: r.args.reps,
        images: images
            .iter()
            .map(|p| Image {
                name: &p.name,
                class: &p.class,
                width: p.width,
                height: p.height,
                channels: p.channels(),
                depth: p.depth,
                raw_bytes: p.bytes.len(),
            })
            .collect(),
        codecs: r
            .codecs
            .results
            .iter()
            .map(|res| CodecResults {
                codec: res.codec.name(),
                profile: res.codec.profile().map(Profile::name),
                patch_size: res.codec.patch_size(),
                threads: res.codec.threads(),
                results: res
                    .cells
                    .iter()
                    .enumerate()
                    .map(|(i, c)| c.as_ref().map(|c| cell(i, c)))
                    .collect(),
            })
            .collect(),
        memcpy: Memcpy {
            bytes: r.total_raw_bytes(),
            one_thread: r.codecs.memcpy_1,
            all_threads: r.codecs.memcpy_n,
        },
        pipeline: r
            .pipeline
            .iter()
            .map(|p| PipelineRow {
                name: &p.name,
                images: p.images,
                pixels: p.pixels,
                disk_bytes: p.disk_bytes,
                time: p.stats.as_ref().ok().copied(),
                error: p.stats.as_ref().err().map(String::as_str),
            })
            .collect(),
        dataset: r.dataset.as_ref().map(|d| match d {
            Ok(d) => Dataset::Report(d),
            Err(e) => Dataset::Error { error: e },
        }),
        scaling: r.scaling.as_ref().map_or(&[], |(_, rows)| rows.as_slice()),
        gpu: r.gpu.as_ref().map(|g| match g {
            Ok(g) => Gpu::Report(g),
            Err(e) => Gpu::Error { error: e },
        }),
    };
    Ok(serde_json::to_string_pretty(&doc)? + "\n")
}
