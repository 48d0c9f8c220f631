//! Command-line options.

use std::path::PathBuf;

use clap::Parser;

#[derive(Parser, Debug)]
#[command(
    name = "l3-bench",
    about = "Compare l3 with PNG, QOI and WebP lossless on sizes and speeds"
)]
pub struct Args {
    /// Image files or folders (searched recursively). Default: the crate's `samples/`.
    pub inputs: Vec<PathBuf>,
    /// Timed repetitions per measurement (after one warm-up run); median, min and max kept.
    #[arg(long, default_value_t = 5)]
    pub reps: usize,
    /// Cap on the timed seconds of one (codec, image) measurement: fewer reps (at least 1)
    /// are run when the warm-up shows that `reps` would take longer.
    #[arg(long, default_value_t = 4.0)]
    pub max_seconds: f64,
    /// Write all results as JSON to this path.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Write the report as Markdown (the format of the run reports in docs/bench-history.md)
    /// to this path.
    #[arg(long)]
    pub markdown: Option<PathBuf>,
    /// List the wgpu adapters (backend, device type, driver) and exit.
    #[arg(long)]
    pub list_adapters: bool,
    /// Skip the wgpu section.
    #[arg(long)]
    pub no_gpu: bool,
    /// Skip the data-preparation pipeline section.
    #[arg(long)]
    pub no_pipeline: bool,
    /// Skip the dataset section (pack into l3 shards vs PNG files; read throughput).
    #[arg(long)]
    pub no_dataset: bool,
    /// Skip the scaling section.
    #[arg(long)]
    pub no_scaling: bool,
    /// Skip the codec comparison (the main table is then empty; for running one section)
    #[arg(long)]
    pub no_codecs: bool,
    /// Decoded megabytes of the GPU steady-state batch (the inputs' files repeated; kernels
    /// timed with GPU timestamps next to a copy kernel of the same size). Default: 1024 on a
    /// hardware GPU, 0 (skipped) on a software adapter such as lavapipe.
    #[arg(long)]
    pub gpu_steady_mb: Option<u64>,
    /// Leave out the generated images (a class-label map, a screenshot, a star field: the
    /// flat classes a photo folder lacks; class `generated` in the per-class table).
    #[arg(long)]
    pub no_synthetic: bool,
    /// Write the generated images as PNG files into this folder and exit (to profile or
    /// decode them outside the bench).
    #[arg(long, value_name = "DIR")]
    pub write_generated: Option<PathBuf>,
    /// Sizes of the scaling run in megapixels.
    #[arg(long, value_delimiter = ',', default_value = "1,4,16,64")]
    pub scaling_mp: Vec<f64>,
    /// Print the per-image table on stdout too (it is always in the Markdown and JSON).
    #[arg(long)]
    pub per_image: bool,
}
