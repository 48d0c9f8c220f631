//! `Report`: everything the report shows, the run's context and each section's results, as
//! every view (tables, text, Markdown, JSON) reads it.

use crate::args::Args;
use crate::images::Pixels;
use crate::rows::{CodecRun, DatasetReport, GpuReport, PipelineRow, ScalingRow};

use super::meta::{self, Meta};

/// Everything the report shows: the run's context and each section's results.
pub struct Report {
    pub args: Args,
    pub meta: Meta,
    /// "1-min load average X at start, Y at end".
    pub load: String,
    /// The l3 source the binary was built from, when known (see `meta::source_revision`).
    pub source: Option<String>,
    pub images: Vec<Pixels>,
    pub codecs: CodecRun,
    /// Empty when the section was skipped.
    pub pipeline: Vec<PipelineRow>,
    /// None when the section was skipped; Err: why it could not run.
    pub dataset: Option<std::result::Result<DatasetReport, String>>,
    /// The tiled sample's description and the rows; None when the section was skipped.
    pub scaling: Option<(String, Vec<ScalingRow>)>,
    /// None when the section was skipped; Err: why it could not run.
    pub gpu: Option<std::result::Result<GpuReport, String>>,
}

impl Report {
    /// The report of a finished run (takes the end-of-run load average and the source).
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        args: Args,
        meta: Meta,
        images: Vec<Pixels>,
        codecs: CodecRun,
        pipeline: Vec<PipelineRow>,
        dataset: Option<std::result::Result<DatasetReport, String>>,
        scaling: Option<(String, Vec<ScalingRow>)>,
        gpu: Option<std::result::Result<GpuReport, String>>,
    ) -> Report {
        let load = format!(
            "1-min load average {} at start, {} at end",
            meta.load_start,
            meta::load_average()
        );
        Report {
            args,
            meta,
            load,
            source: meta::source_revision(),
            images,
            codecs,
            pipeline,
            dataset,
            scaling,
            gpu,
        }
    }

    pub fn total_pixels(&self) -> u64 {
        self.images.iter().map(Pixels::pixels).sum()
    }

    pub fn total_raw_bytes(&self) -> u64 {
        self.images.iter().map(|p| p.bytes.len() as u64).sum()
    }

    /// "l3 0.1.0, png 0.18.0, ... (l3 source: git abc1234)".
    pub fn versions_line(&self) -> String {
        let line = self
            .meta
            .versions
            .iter()
            .map(|(n, v)| format!("{n} {v}"))
            .collect::<Vec<_>>()
            .join(", ");
        match &self.source {
            Some(rev) => format!("{line} (l3 source: {rev})"),
            None => line,
        }
    }
}
