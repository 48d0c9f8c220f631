//! `l3 cp`: a dataset from one place to another (a folder or an object store, either way):
//! every shard checked against the manifest's size and CRC-32 as it is read, the manifest
//! written last, then the copy opened through the destination and its shards' indexes checked.

use anyhow::{Context, Result};
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};

use crate::display::human;
use crate::shards::open_store;
use l3::shard::copy_dataset;

#[derive(Args)]
pub struct CpArgs {
    /// The dataset: a folder or a URL (`s3://bucket/prefix`, `gs://`, `az://`, `https://`).
    pub from: String,
    /// Where the copy goes: a folder (created) or a URL.
    pub to: String,
    /// Replace a dataset that is already there (without it, a destination with a manifest is
    /// refused before anything is written).
    #[arg(long)]
    pub force: bool,
    /// No progress bar.
    #[arg(short, long)]
    pub quiet: bool,
}

pub fn cmd_cp(a: CpArgs) -> Result<u64> {
    copy(&a.from, &a.to, a.force, a.quiet)?;
    Ok(0)
}

/// Copies the dataset at `from` to `to` (see the module docs) and prints what was copied.
pub(crate) fn copy(from: &str, to: &str, force: bool, quiet: bool) -> Result<()> {
    let source = open_store(from)?;
    if !l3::store::is_remote(to) {
        std::fs::create_dir_all(to).with_context(|| format!("creating {to}"))?;
    }
    let dest = open_store(to)?;
    let bar = if quiet {
        ProgressBar::hidden()
    } else {
        let pb = ProgressBar::new(0);
        pb.set_style(
            ProgressStyle::with_template(
                "{bar:40} {bytes}/{total_bytes}, {elapsed} elapsed, eta {eta}",
            )
            .expect("valid template"),
        );
        pb
    };
    let report = copy_dataset(&source, &dest, force, |done, total| {
        bar.set_length(total);
        bar.set_position(done);
    })
    .with_context(|| format!("copying {from} to {to}"))?;
    bar.finish_and_clear();
    println!(
        "copied {} records in {} shard(s), {}, from {from} to {to}",
        report.records,
        report.shards,
        human(report.bytes)
    );
    Ok(())
}
