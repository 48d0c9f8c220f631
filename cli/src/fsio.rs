//! File-system helpers for the CLI: walking input trees, mirroring them into an output tree
//! (where each output goes), bounded reads, and atomic writes (temp file + fsync + rename), so
//! a crash never leaves a half-written output and a rerun can trust every output that exists.
//! The resume records beside the outputs are `resume`.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::{bail, Context, Result};

/// Creates the folder `path` is in, if missing.
pub fn create_parent(path: &Path) -> Result<()> {
    if path.file_name().is_none() {
        bail!("{} has no file name", path.display());
    }
    let dir = path.parent().filter(|p| !p.as_os_str().is_empty());
    let dir = dir.unwrap_or_else(|| Path::new("."));
    fs::create_dir_all(dir).with_context(|| format!("creating directory {}", dir.display()))
}

/// Writes `bytes` to `path` atomically ([`l3::shard::write_atomic`]: a unique hidden temp file
/// in the same directory, fsync, rename, fsync of the directory), creating the directory first.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    create_parent(path)?;
    l3::shard::write_atomic(path, bytes).with_context(|| format!("writing {}", path.display()))
}

/// Like [`write_atomic`], streaming: `write` fills the temporary file (buffered, seekable), so
/// a large output is never held in memory whole. Unless `replace`, an existing `path` is left
/// as it is and the write fails (checked atomically by the rename).
pub fn write_atomic_with<F>(path: &Path, replace: bool, write: F) -> Result<()>
where
    F: FnOnce(&mut std::io::BufWriter<std::fs::File>) -> std::io::Result<()>,
{
    create_parent(path)?;
    let pending = l3::shard::PendingWrite::new(path, write)
        .with_context(|| format!("writing {}", path.display()))?;
    match if replace {
        pending.commit()
    } else {
        pending.commit_new()
    } {
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => bail!(
            "{} already exists (use --force to overwrite)",
            path.display()
        ),
        r => r.with_context(|| format!("writing {}", path.display())),
    }
}

/// Removes temp files that an interrupted run left in `dir` (not recursive): the library's
/// [`l3::shard::remove_stale_temps`]. A temp file whose writer process is still alive (another
/// `l3` run into the same tree) is left alone.
pub fn remove_stale_temps(dir: &Path) {
    l3::shard::remove_stale_temps(dir);
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

/// Counts one more subdirectory that could not be listed (reported by the caller).
pub fn count_unlistable() {
    UNLISTABLE.fetch_add(1, Ordering::Relaxed);
}

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

/// Reads a whole file of at most `max` bytes: the size is checked before anything is read, and
/// the read stops one byte past `max`, so a file that grows meanwhile, or a device or pipe that
/// never ends, fails with a limits error instead of filling memory.
pub fn read_limited(path: &Path, max: u64) -> Result<Vec<u8>> {
    use std::io::Read;
    let file = fs::File::open(path).with_context(|| format!("cannot read {}", path.display()))?;
    let len = file
        .metadata()
        .with_context(|| format!("cannot read {}", path.display()))?
        .len();
    let too_long = |len| l3::Error::from(l3::LimitsError::InputBytes { len, max });
    if len > max {
        bail!(too_long(len));
    }
    let mut bytes = Vec::with_capacity(len as usize);
    file.take(max.saturating_add(1))
        .read_to_end(&mut bytes)
        .with_context(|| format!("reading {}", path.display()))?;
    if bytes.len() as u64 > max {
        bail!(too_long(bytes.len() as u64));
    }
    Ok(bytes)
}

/// Refuses to replace an existing `output` unless `force`, or it starts with `signature` (an
/// earlier output of the same kind, which re-encoding may replace). Nothing else (an original
/// image named as the output, a folder) is ever overwritten without `--force`.
pub fn check_replace(output: &Path, signature: &[u8], force: bool) -> Result<()> {
    use std::io::Read;
    let meta = match fs::metadata(output) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        r => r.with_context(|| format!("cannot read {}", output.display()))?,
    };
    if meta.is_dir() {
        bail!("{} is a directory", output.display());
    }
    if force {
        return Ok(());
    }
    let mut head = Vec::with_capacity(signature.len());
    fs::File::open(output)
        .and_then(|f| f.take(signature.len() as u64).read_to_end(&mut head))
        .with_context(|| format!("cannot read {}", output.display()))?;
    if head != signature {
        bail!(
            "{} exists and is not an L3 file of this kind (use --force to replace it)",
            output.display()
        );
    }
    Ok(())
}

/// Output path of a job: mirrored under `out_root`, or next to the input; `ext` replaces the
/// input's extension.
fn output_path(job: &Job, out_root: Option<&Path>, ext: &str) -> PathBuf {
    match out_root {
        Some(root) => root.join(&job.relative).with_extension(ext),
        None => job.input.with_extension(ext),
    }
}

/// Resolves where each job's output goes; a single file input with `-o` writes exactly there.
pub fn plan_outputs(
    roots: &[(PathBuf, Vec<Job>)],
    output: Option<&Path>,
    ext: &str,
) -> Result<Vec<(Job, PathBuf)>> {
    let jobs: Vec<&Job> = roots.iter().flat_map(|(_, j)| j).collect();
    let single_file = roots.len() == 1 && roots[0].0.is_file();
    let plan: Vec<(Job, PathBuf)> = jobs
        .into_iter()
        .map(|job| {
            let out = match output {
                // One input file: `-o` names the output file, unless it is a directory or
                // ends with a path separator (a directory to create).
                Some(o)
                    if single_file
                        && !o.is_dir()
                        && !o
                            .as_os_str()
                            .to_string_lossy()
                            .ends_with(std::path::is_separator) =>
                {
                    o.to_path_buf()
                }
                o => output_path(job, o, ext),
            };
            (job.clone(), out)
        })
        .collect();
    let pairs: Vec<(PathBuf, &Path)> = plan
        .iter()
        .map(|(j, o)| (o.clone(), j.input.as_path()))
        .collect();
    check_collisions(&pairs)?;
    Ok(plan)
}
