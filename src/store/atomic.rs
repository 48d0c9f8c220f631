//! Atomic file writes, shared by the shard writer, the manifest, the Python module and the `l3`
//! tool: a hidden temporary file created exclusively beside the target (a unique name, never
//! opened through a symlink), fsync, rename, fsync of the folder. A crash leaves the old file
//! or the new one, never a partial file under the target's name; concurrent writers of one
//! target (threads or processes) each have their own temporary file and the target ends as one
//! writer's complete bytes. A leftover temporary file carries [`TEMP_MARKER`] and the writer's
//! process id, so a rerun can tell it is stale and remove it ([`remove_stale_temps`]).

use std::ffi::OsString;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Marker in the names of temporary files: `.<name><TEMP_MARKER><pid>-<random>`.
pub const TEMP_MARKER: &str = ".l3-tmp-";

/// Writes `bytes` to `path` atomically (see the module docs); the folder must exist.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    write_atomic_with(path, |f| f.write_all(bytes))
}

/// Like [`write_atomic`], but `write` streams the contents into the (buffered, seekable)
/// temporary file, so a large output is never held in memory whole.
pub fn write_atomic_with<F>(path: &Path, write: F) -> std::io::Result<()>
where
    F: FnOnce(&mut std::io::BufWriter<std::fs::File>) -> std::io::Result<()>,
{
    PendingWrite::new(path, write)?.commit()
}

/// A complete, fsynced temporary file waiting to be renamed onto its target: the first half
/// of [`write_atomic_with`], for outputs made of several files that should appear together
/// (write every file's temporary file, then commit them in a chosen order). Dropped without
/// [`commit`](Self::commit), it removes its temporary file.
#[derive(Debug)]
pub struct PendingWrite {
    temp: tempfile::TempPath,
    target: PathBuf,
}

impl PendingWrite {
    /// Creates the temporary file beside `path` (exclusively: `O_CREAT | O_EXCL`, so an existing
    /// file or symlink under its name is never opened), lets `write` fill it, flushes and
    /// fsyncs it. The folder must exist.
    pub fn new<F>(path: &Path, write: F) -> std::io::Result<Self>
    where
        F: FnOnce(&mut std::io::BufWriter<std::fs::File>) -> std::io::Result<()>,
    {
        let name = path.file_name().ok_or_else(|| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("{} has no file name", path.display()),
            )
        })?;
        let mut prefix = OsString::from(".");
        prefix.push(name);
        prefix.push(format!("{TEMP_MARKER}{}-", std::process::id()));
        let mut builder = tempfile::Builder::new();
        builder.prefix(&prefix).rand_bytes(8);
        // The permissions a plain `File::create` gives (0o666 less the umask), not 0o600.
        #[cfg(unix)]
        builder.permissions(std::os::unix::fs::PermissionsExt::from_mode(0o666));
        let (file, temp) = builder.tempfile_in(folder_of(path))?.into_parts();
        let mut w = std::io::BufWriter::with_capacity(1 << 20, file);
        write(&mut w)?;
        let file = w.into_inner().map_err(|e| e.into_error())?;
        file.sync_all()?;
        Ok(Self {
            temp,
            target: path.to_path_buf(),
        })
    }

    /// The target this write replaces when committed.
    pub fn target(&self) -> &Path {
        &self.target
    }

    /// Renames the temporary file onto the target (replacing a file or symlink there, never
    /// writing through it), then fsyncs the folder so the rename itself is durable.
    pub fn commit(self) -> std::io::Result<()> {
        self.temp.persist(&self.target).map_err(|e| e.error)?;
        sync_folder(folder_of(&self.target))
    }

    /// Like [`commit`](Self::commit), but fails with [`std::io::ErrorKind::AlreadyExists`] if
    /// the target exists (checked atomically by the file system), leaving it untouched.
    pub fn commit_new(self) -> std::io::Result<()> {
        self.temp
            .persist_noclobber(&self.target)
            .map_err(|e| e.error)?;
        sync_folder(folder_of(&self.target))
    }
}

/// The folder a path is in (`.` for a bare file name).
fn folder_of(path: &Path) -> &Path {
    path.parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or_else(|| Path::new("."))
}

/// Fsyncs a folder, making renames in it durable. File systems that cannot sync a folder
/// (`EINVAL`) are taken as having nothing to sync.
fn sync_folder(dir: &Path) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        match std::fs::File::open(dir)?.sync_all() {
            Err(e) if e.kind() == std::io::ErrorKind::InvalidInput => Ok(()),
            r => r,
        }
    }
    #[cfg(not(unix))]
    {
        let _ = dir;
        Ok(())
    }
}

/// Removes temporary files that interrupted runs left in `dir` (not recursive) and returns how
/// many. A temporary file whose writer process is still alive (another run into the same
/// folder) is left alone; one of this process counts as stale, so call this before this
/// process starts writing into `dir`. Where liveness cannot be told (no `/proc`), a temporary
/// file counts as stale once it is an hour old.
pub fn remove_stale_temps(dir: &Path) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    let mut removed = 0;
    for e in entries.flatten() {
        let name = e.file_name();
        let name = name.to_string_lossy();
        let Some((_, rest)) = name.split_once(TEMP_MARKER) else {
            continue;
        };
        // `<pid>-<random>`, or `<pid>` as versions before the random part wrote it.
        let pid = rest.split('-').next().unwrap_or_default();
        if name.starts_with('.')
            && is_stale(&e.path(), pid)
            && std::fs::remove_file(e.path()).is_ok()
        {
            removed += 1;
        }
    }
    removed
}

/// Whether a temporary file was left by a process that is gone.
fn is_stale(path: &Path, pid: &str) -> bool {
    if Path::new("/proc/self").exists() {
        let Ok(pid) = pid.parse::<u32>() else {
            return false;
        };
        return pid == std::process::id() || !Path::new("/proc").join(pid.to_string()).exists();
    }
    std::fs::symlink_metadata(path)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.elapsed().ok())
        .is_some_and(|age| age.as_secs() > 3600)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Many threads of one process write one target at once: every write succeeds and the
    /// target holds one writer's complete bytes, with no temporary file left.
    #[test]
    fn concurrent_writers_of_one_target_all_succeed_with_one_complete_result() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("out.bin");
        let contents: Vec<Vec<u8>> = (0..16u8)
            .map(|i| vec![i; 64 * 1024 + i as usize * 977])
            .collect();
        std::thread::scope(|s| {
            let handles: Vec<_> = contents
                .iter()
                .map(|c| {
                    let target = &target;
                    s.spawn(move || {
                        for _ in 0..8 {
                            write_atomic(target, c)?;
                        }
                        Ok::<_, std::io::Error>(())
                    })
                })
                .collect();
            for h in handles {
                h.join().unwrap().expect("every concurrent write succeeds");
            }
        });
        let got = std::fs::read(&target).unwrap();
        assert!(
            contents.contains(&got),
            "target is no writer's complete bytes"
        );
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![OsString::from("out.bin")]);
    }

    /// A symlink planted where a temporary file name could be guessed (the writer's pid) is
    /// never written through; the file it points to stays as it was.
    #[cfg(unix)]
    #[test]
    fn a_planted_symlink_at_a_guessable_temp_name_is_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, b"keep me").unwrap();
        let planted = dir
            .path()
            .join(format!(".out{TEMP_MARKER}{}", std::process::id()));
        std::os::unix::fs::symlink(&victim, &planted).unwrap();
        let target = dir.path().join("out");
        write_atomic(&target, b"new bytes").unwrap();
        assert_eq!(std::fs::read(&victim).unwrap(), b"keep me");
        assert_eq!(std::fs::read(&target).unwrap(), b"new bytes");
        assert!(!std::fs::symlink_metadata(&target).unwrap().is_symlink());
    }

    /// `commit_new` refuses an existing target and leaves it as it was; a dropped pending
    /// write leaves no temporary file.
    #[test]
    fn commit_new_keeps_an_existing_target() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("t");
        std::fs::write(&target, b"old").unwrap();
        let p = PendingWrite::new(&target, |f| f.write_all(b"new")).unwrap();
        let e = p.commit_new().unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::AlreadyExists);
        assert_eq!(std::fs::read(&target).unwrap(), b"old");
        drop(PendingWrite::new(&target, |f| f.write_all(b"x")).unwrap());
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    /// Leftovers of a dead process, in the current and the older naming, are removed; those
    /// of a live process other than this one are kept.
    #[test]
    fn stale_temps_are_removed_and_live_ones_kept() {
        let dir = tempfile::tempdir().unwrap();
        // No process has this pid (Linux caps pids at 2^22).
        let dead = [
            format!(".a{TEMP_MARKER}99999999-abcdefgh"),
            format!(".b{TEMP_MARKER}99999999"),
        ];
        // Pid 1 is alive wherever /proc exists.
        let live = format!(".c{TEMP_MARKER}1-abcdefgh");
        for n in dead.iter().chain([&live]) {
            std::fs::write(dir.path().join(n), b"x").unwrap();
        }
        if !Path::new("/proc/1").exists() {
            return;
        }
        assert_eq!(remove_stale_temps(dir.path()), 2);
        assert!(dir.path().join(&live).exists());
    }
}
