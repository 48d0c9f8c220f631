//! Atomic file writes, shared by the shard writer, the manifest and the `l3` tool: a hidden
//! temporary file beside the target, fsync, rename. A crash leaves the old file or the new
//! one, never a partial file under the target's name; a leftover temporary file carries
//! [`TEMP_MARKER`] and the writer's process id, so a rerun can tell it is stale and remove it.

use std::io::Write;
use std::path::{Path, PathBuf};

/// Marker in the names of temporary files: `.<name><TEMP_MARKER><pid>`.
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
    let tmp = temp_path(path);
    let result = (|| {
        let mut f = std::io::BufWriter::with_capacity(1 << 20, std::fs::File::create(&tmp)?);
        write(&mut f)?;
        let f = f.into_inner().map_err(|e| e.into_error())?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// `.<name><TEMP_MARKER><pid>` beside `path`: in the same folder (so the rename is atomic),
/// hidden, and never a name a finished file has.
fn temp_path(path: &Path) -> PathBuf {
    let mut name = std::ffi::OsString::from(".");
    name.push(path.file_name().unwrap_or_default());
    name.push(format!("{TEMP_MARKER}{}", std::process::id()));
    path.with_file_name(name)
}
