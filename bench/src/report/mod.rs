//! The report: tables built from the sections' results, written as text (stdout),
//! Markdown and JSON.

pub mod json;
pub mod markdown;
pub mod meta;
pub mod tables;
pub mod text;

use anyhow::{Context, Result};

use crate::args::Args;
use crate::codecs::CodecRun;
use crate::dataset::DatasetReport;
use crate::gpu::GpuReport;
use crate::images::Pixels;
use crate::measure::Stats;
use crate::pipeline::PipelineRow;
use crate::scaling::ScalingRow;
use meta::Meta;
use tables::Tables;

pub fn gbs(bytes: u64, secs: f64) -> f64 {
    bytes as f64 / secs / 1e9
}
pub fn mps(pixels: u64, secs: f64) -> f64 {
    pixels as f64 / secs / 1e6
}

/// `median [slowest..fastest]` throughput.
pub fn tput(units: u64, s: Stats, f: fn(u64, f64) -> f64, prec: usize) -> String {
    format!(
        "{:.p$} [{:.p$}-{:.p$}]",
        f(units, s.median),
        f(units, s.max),
        f(units, s.min),
        p = prec
    )
}

pub struct Table {
    pub header: Vec<String>,
    pub rows: Vec<Vec<String>>,
}

impl Table {
    pub fn new(header: &[&str]) -> Table {
        Table {
            header: header.iter().map(|s| s.to_string()).collect(),
            rows: Vec::new(),
        }
    }
    pub fn push(&mut self, row: Vec<String>) {
        self.rows.push(row);
    }
    pub fn text(&self) -> String {
        let n = self.header.len();
        let mut w = vec![0; n];
        for r in std::iter::once(&self.header).chain(&self.rows) {
            for (i, c) in r.iter().enumerate() {
                w[i] = w[i].max(c.chars().count());
            }
        }
        let line = |r: &Vec<String>| {
            let mut s = String::new();
            for (i, c) in r.iter().enumerate() {
                let pad = w[i] - c.chars().count();
                if i == 0 {
                    s += c;
                    s += &" ".repeat(pad);
                } else {
                    s += "  ";
                    s += &" ".repeat(pad);
                    s += c;
                }
            }
            s.trim_end().to_string() + "\n"
        };
        let mut s = line(&self.header);
        s += &"-".repeat(w.iter().sum::<usize>() + 2 * (n - 1));
        s += "\n";
        for r in &self.rows {
            s += &line(r);
        }
        s
    }
    pub fn markdown(&self) -> String {
        let mut s = format!("| {} |\n", self.header.join(" | "));
        s += &format!(
            "|{}\n",
            (0..self.header.len())
                .map(|i| if i == 0 { " --- |" } else { " ---: |" })
                .collect::<String>()
        );
        for r in &self.rows {
            let cells: Vec<String> = r.iter().map(|c| c.replace('|', "\\|")).collect();
            s += &format!("| {} |\n", cells.join(" | "));
        }
        s
    }
}

/// Error messages (wgpu's span several lines) on one line, for tables.
pub fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

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

    /// Prints the text report, then writes the Markdown and JSON files asked for.
    pub fn write(&self) -> Result<()> {
        let tables = Tables::new(self);
        print!("{}", text::text(self, &tables));
        if let Some(path) = &self.args.markdown {
            std::fs::write(path, markdown::markdown(self, &tables))
                .with_context(|| format!("writing {}", path.display()))?;
        }
        if let Some(path) = &self.args.json {
            std::fs::write(path, json::json(self)?)
                .with_context(|| format!("writing {}", path.display()))?;
        }
        Ok(())
    }
}
