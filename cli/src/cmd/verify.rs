//! `l3 verify`: decode L3 files in full and optionally compare them with their originals.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::{bail, Result};
use clap::Args;
use rayon::prelude::*;

use crate::flags::{IMAGE_EXTENSIONS, L3_EXTENSION};
use crate::fsio::{self, Job};
use crate::images::{max_difference, read_source};
use crate::limits::{decode_options, read_l3};

#[derive(Args)]
pub(crate) struct VerifyArgs {
    /// L3 files or directories.
    #[arg(required = true)]
    pub(crate) inputs: Vec<PathBuf>,
    /// The original image (for one file) or the original tree (for a directory), compared
    /// pixel for pixel with the decoded L3 files.
    #[arg(long)]
    pub(crate) against: Option<PathBuf>,
}

pub(crate) fn cmd_verify(a: VerifyArgs) -> Result<u64> {
    let roots = fsio::collect_jobs(&a.inputs, &[L3_EXTENSION])?;
    // Originals of a tree: index the tree by relative path without extension.
    let originals: Option<std::collections::HashMap<PathBuf, Option<PathBuf>>> = match &a.against {
        Some(dir) if dir.is_dir() => {
            let jobs = fsio::collect_jobs(std::slice::from_ref(dir), IMAGE_EXTENSIONS)?;
            // Two originals with the same stem (a.png, a.jpg) would both match a.l3: such a
            // name maps to None and is reported as ambiguous, never compared with a guess.
            let mut map = std::collections::HashMap::new();
            for j in jobs.into_iter().flat_map(|(_, j)| j) {
                map.entry(j.relative.with_extension(L3_EXTENSION))
                    .and_modify(|e: &mut Option<PathBuf>| *e = None)
                    .or_insert(Some(j.input));
            }
            Some(map)
        }
        _ => None,
    };
    let failed = AtomicU64::new(0);
    let jobs: Vec<Job> = roots.into_iter().flat_map(|(_, j)| j).collect();
    jobs.par_iter().for_each(|job| {
        let original = match (&a.against, &originals) {
            (_, Some(map)) => match map.get(&job.relative) {
                Some(Some(o)) => Some(o.clone()),
                Some(None) => {
                    failed.fetch_add(1, Ordering::Relaxed);
                    eprintln!(
                        "error: {}: several originals share its name; compare them one by one",
                        job.input.display()
                    );
                    return;
                }
                None => None,
            },
            (Some(file), None) => Some(file.clone()),
            (None, None) => None,
        };
        let r = (|| -> Result<String> {
            let data = read_l3(&job.input)?;
            let bound = l3::read_header(&data)?.max_error as u32;
            let decoded = l3::decode_image(&data, &decode_options())?;
            match original {
                Some(o) => {
                    let orig = read_source(&o)?;
                    match max_difference(&orig, &decoded) {
                        None => bail!("shape differs from {}", o.display()),
                        Some(0) => Ok(format!("ok, identical to {}", o.display())),
                        Some(d) if d <= bound => Ok(format!(
                            "ok, within its bound {bound} of {} (largest difference {d})",
                            o.display()
                        )),
                        Some(d) if bound == 0 => bail!(
                            "pixels differ from {} (largest difference {d}; the file is lossless)",
                            o.display()
                        ),
                        Some(d) => bail!(
                            "pixels differ from {} by up to {d}, past the file's bound {bound}",
                            o.display()
                        ),
                    }
                }
                None if a.against.is_some() => bail!("no original found for it"),
                None => Ok("ok".into()),
            }
        })();
        match r {
            Ok(msg) => println!("{}: {msg}", job.input.display()),
            Err(e) => {
                failed.fetch_add(1, Ordering::Relaxed);
                eprintln!("error: {}: {e:#}", job.input.display());
            }
        }
    });
    Ok(failed.into_inner())
}
