//! File-system helpers for the CLI: walking input trees, mirroring them into an output tree,
//! and atomic writes (temp file + fsync + rename), so a crash never leaves a half-written
//! output and a rerun can trust every output that exists.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::{bail, Context, Result};

/// Marker in the names of temp files, so a rerun can remove what a crash left behind (the
/// library's: the shard writer and manifest name their temp files the same way).
pub use l3::shard::TEMP_MARKER;

/// Writes `bytes` to `path` atomically ([`l3::shard::write_atomic`]: a hidden temp file in the
/// same directory, fsync, rename), creating the directory first.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let dir = path.parent().filter(|p| !p.as_os_str().is_empty());
    let dir = dir.unwrap_or_else(|| Path::new("."));
    fs::create_dir_all(dir).with_context(|| format!("creating directory {}", dir.display()))?;
    if path.file_name().is_none() {
        bail!("{} has no file name", path.display());
    }
    l3::shard::write_atomic(path, bytes).with_context(|| format!("writing {}", path.display()))
}

/// Like [`write_atomic`], streaming: `write` fills the temporary file (buffered, seekable), so
/// a large output is never held in memory whole.
pub fn write_atomic_with<F>(path: &Path, write: F) -> Result<()>
where
    F: FnOnce(&mut std::io::BufWriter<std::fs::File>) -> std::io::Result<()>,
{
    let dir = path.parent().filter(|p| !p.as_os_str().is_empty());
    let dir = dir.unwrap_or_else(|| Path::new("."));
    fs::create_dir_all(dir).with_context(|| format!("creating directory {}", dir.display()))?;
    if path.file_name().is_none() {
        bail!("{} has no file name", path.display());
    }
    l3::shard::write_atomic_with(path, write).with_context(|| format!("writing {}", path.display()))
}

/// Removes temp files that an interrupted run left in `dir` (not recursive). A temp file whose
/// writer process is still alive (another `l3` run into the same tree) is left alone.
pub fn remove_stale_temps(dir: &Path) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let name = name.to_string_lossy();
        let Some((_, pid)) = name.split_once(TEMP_MARKER) else {
            continue;
        };
        if name.starts_with('.') && is_stale(&e.path(), pid) {
            let _ = fs::remove_file(e.path());
        }
    }
}

/// Whether a temp file was left by a process that is gone. Where that cannot be told (no
/// /proc), a temp file counts as stale once it is an hour old.
fn is_stale(path: &Path, pid: &str) -> bool {
    if Path::new("/proc/self").exists() {
        let ours = pid.parse::<u32>().is_ok_and(|p| p == std::process::id());
        return ours || !Path::new("/proc").join(pid).exists();
    }
    fs::metadata(path)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.elapsed().ok())
        .is_some_and(|age| age.as_secs() > 3600)
}

/// Whether `path` has one of `extensions` (case-insensitive).
pub fn has_extension(path: &Path, extensions: &[&str]) -> bool {
    path.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| extensions.iter().any(|x| x.eq_ignore_ascii_case(e)))
}

/// One input file and the path it has relative to the root it was found under.
#[derive(Debug, Clone)]
pub struct Job {
    pub input: PathBuf,
    pub relative: PathBuf,
}

/// Expands files and directories into jobs: a file stands for itself; a directory for every
/// file under it whose extension is in `extensions`, sorted, without following symlinked
/// directories (no loops). Hidden files and directories are skipped.
pub fn collect_jobs(inputs: &[PathBuf], extensions: &[&str]) -> Result<Vec<(PathBuf, Vec<Job>)>> {
    let mut roots = Vec::new();
    for input in inputs {
        let meta =
            fs::metadata(input).with_context(|| format!("cannot read {}", input.display()))?;
        if meta.is_dir() {
            let mut jobs = Vec::new();
            walk(input, input, extensions, &mut jobs)?;
            jobs.sort_by(|a, b| a.relative.cmp(&b.relative));
            roots.push((input.clone(), jobs));
        } else {
            let relative = PathBuf::from(input.file_name().context("input has no file name")?);
            roots.push((
                input.clone(),
                vec![Job {
                    input: input.clone(),
                    relative,
                }],
            ));
        }
    }
    Ok(roots)
}

fn walk(root: &Path, dir: &Path, extensions: &[&str], jobs: &mut Vec<Job>) -> Result<()> {
    let entries = fs::read_dir(dir).with_context(|| format!("listing {}", dir.display()))?;
    for e in entries {
        let e = e.with_context(|| format!("listing {}", dir.display()))?;
        if e.file_name().to_string_lossy().starts_with('.') {
            continue;
        }
        let path = e.path();
        let kind = e
            .file_type()
            .with_context(|| format!("reading {}", path.display()))?;
        if kind.is_dir() {
            // One unreadable subdirectory fails itself, not the whole conversion.
            if let Err(err) = walk(root, &path, extensions, jobs) {
                UNLISTABLE.fetch_add(1, Ordering::Relaxed);
                eprintln!("error: {}: {err:#}", path.display());
            }
        } else if (kind.is_file() || kind.is_symlink()) && has_extension(&path, extensions) {
            let relative = path.strip_prefix(root).unwrap_or(&path).to_path_buf();
            jobs.push(Job {
                input: path,
                relative,
            });
        }
    }
    Ok(())
}

/// Subdirectories that could not be listed (each reported on stderr), counted as failures.
static UNLISTABLE: AtomicU64 = AtomicU64::new(0);

/// How many subdirectories could not be listed so far.
pub fn unlistable_dirs() -> u64 {
    UNLISTABLE.load(Ordering::Relaxed)
}

/// Fails if two inputs would be written to the same output (e.g. `a.png` and `a.jpg`).
pub fn check_collisions(outputs: &[(PathBuf, &Path)]) -> Result<()> {
    let mut seen = std::collections::HashMap::new();
    for (out, input) in outputs {
        if let Some(prev) = seen.insert(out.clone(), *input) {
            bail!(
                "{} and {} would both be written to {}; convert them separately",
                prev.display(),
                input.display(),
                out.display()
            );
        }
    }
    Ok(())
}

/// True if `output` exists and is at least as new as `input`: a previous run finished it
/// (outputs only appear, by rename, once complete and verified).
pub fn is_up_to_date(input: &Path, output: &Path) -> bool {
    match (fs::metadata(input), fs::metadata(output)) {
        (Ok(i), Ok(o)) => {
            o.len() > 0 && matches!((i.modified(), o.modified()), (Ok(i), Ok(o)) if o >= i)
        }
        _ => false,
    }
}
