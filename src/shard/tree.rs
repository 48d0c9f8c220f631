//! The plan of packing a folder of images (`l3 pack`, Python's `l3.plan_pack` and `l3.pack`):
//! which files are images ([`IMAGE_EXTENSIONS`]), their order (sorted by path, component by
//! component), each one's key (its path under the folder, `/`-separated) and class (the first
//! folder under the root; none for an image directly in it), and the shards they go to
//! ([`ImageTree::shards`], [`shard_name`]). One place, so the CLI and Python pack the same
//! tree into the same dataset.

use std::path::{Path, PathBuf};

use super::format::check_key;
use crate::error::{ParameterError, Result};

/// Extensions (lowercase, compared without case) of the files an image tree's plan takes.
pub const IMAGE_EXTENSIONS: &[&str] = &[
    "png", "jpg", "jpeg", "tif", "tiff", "pnm", "ppm", "pgm", "pbm", "pam", "bmp", "webp", "gif",
    "qoi", "tga", "ico",
];

/// One image of a tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TreeImage {
    /// Its path under the root, `/`-separated: the record's key.
    pub key: String,
    /// The file.
    pub path: PathBuf,
    /// The first folder under the root, if the image is below one.
    pub class: Option<String>,
}

/// The images under a folder, planned for packing ([`ImageTree::list`]).
#[derive(Debug, Default)]
pub struct ImageTree {
    /// Every image, sorted by path.
    pub images: Vec<TreeImage>,
    /// Folders below the root that could not be listed, with why (their images are left
    /// out; the root itself failing is an error).
    pub unlisted: Vec<(PathBuf, std::io::Error)>,
}

impl ImageTree {
    /// The images under `root`: files with an image extension, hidden files and folders
    /// (names starting with `.`) left out, symlinked folders not followed (no loops). Every
    /// key is checked as a record key ([`check_key`]) before anything is packed.
    pub fn list(root: &Path) -> Result<Self> {
        if !std::fs::metadata(root)
            .map_err(|e| std::io::Error::new(e.kind(), format!("{}: {e}", root.display())))?
            .is_dir()
        {
            return Err(std::io::Error::new(
                std::io::ErrorKind::NotADirectory,
                format!("{} is not a folder", root.display()),
            )
            .into());
        }
        let mut tree = ImageTree::default();
        let mut relative = Vec::new();
        walk(root, root, &mut relative, &mut tree.unlisted, true)?;
        relative.sort();
        for rel in relative {
            let key = rel
                .iter()
                .map(|c| c.to_string_lossy())
                .collect::<Vec<_>>()
                .join("/");
            if let Err(reason) = check_key(&key) {
                return Err(ParameterError::Location {
                    location: root.join(&rel).display().to_string(),
                    reason: format!("cannot be a record key: {reason}"),
                }
                .into());
            }
            let mut parts = rel.iter();
            let first = parts.next().map(|c| c.to_string_lossy().into_owned());
            let class = first.filter(|_| parts.next().is_some());
            tree.images.push(TreeImage {
                key,
                path: root.join(&rel),
                class,
            });
        }
        Ok(tree)
    }

    /// The class names, sorted and distinct; an image's class id is its index here.
    pub fn classes(&self) -> Vec<String> {
        let set: std::collections::BTreeSet<&String> = self
            .images
            .iter()
            .filter_map(|i| i.class.as_ref())
            .collect();
        set.into_iter().cloned().collect()
    }

    /// The images in shards of `records_per_shard` (at least 1), in order, each with its
    /// file name ([`shard_name`]).
    pub fn shards(&self, records_per_shard: usize) -> Result<Vec<(String, &[TreeImage])>> {
        if records_per_shard == 0 {
            return Err(ParameterError::InvalidOption {
                name: "records_per_shard",
                value: 0,
                reason: "must be at least 1",
            }
            .into());
        }
        Ok(self
            .images
            .chunks(records_per_shard)
            .enumerate()
            .map(|(i, chunk)| (shard_name(i), chunk))
            .collect())
    }
}

/// The file name of shard `i` of a packed dataset: `shard-00000.l3s`, ...
pub fn shard_name(i: usize) -> String {
    format!("shard-{i:05}.l3s")
}

/// Whether `path` has one of [`IMAGE_EXTENSIONS`].
fn is_image(path: &Path) -> bool {
    path.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| IMAGE_EXTENSIONS.iter().any(|x| x.eq_ignore_ascii_case(e)))
}

/// Appends the images under `dir` (relative to `root`) to `out`; a folder below the root that
/// cannot be listed goes to `unlisted`.
fn walk(
    root: &Path,
    dir: &Path,
    out: &mut Vec<PathBuf>,
    unlisted: &mut Vec<(PathBuf, std::io::Error)>,
    is_root: bool,
) -> Result<()> {
    let entries = match std::fs::read_dir(dir).and_then(|r| r.collect::<std::io::Result<Vec<_>>>())
    {
        Ok(e) => e,
        Err(e) if !is_root => {
            unlisted.push((dir.to_path_buf(), e));
            return Ok(());
        }
        Err(e) => {
            return Err(std::io::Error::new(e.kind(), format!("{}: {e}", dir.display())).into())
        }
    };
    for e in entries {
        if e.file_name().to_string_lossy().starts_with('.') {
            continue;
        }
        let path = e.path();
        let kind = match e.file_type() {
            Ok(k) => k,
            Err(err) => {
                unlisted.push((path, err));
                continue;
            }
        };
        if kind.is_dir() {
            walk(root, &path, out, unlisted, false)?;
        } else if (kind.is_file() || kind.is_symlink()) && is_image(&path) {
            out.push(path.strip_prefix(root).unwrap_or(&path).to_path_buf());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_sorts_and_labels_a_tree() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        for f in [
            "b/2.png",
            "b/10.PNG",
            "a/x/1.jpg",
            "top.png",
            ".hidden/3.png",
            "a/.4.png",
            "a/notes.txt",
        ] {
            let p = root.join(f);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, b"x").unwrap();
        }
        let tree = ImageTree::list(root).unwrap();
        let keys: Vec<&str> = tree.images.iter().map(|i| i.key.as_str()).collect();
        assert_eq!(keys, ["a/x/1.jpg", "b/10.PNG", "b/2.png", "top.png"]);
        let classes: Vec<Option<&str>> = tree.images.iter().map(|i| i.class.as_deref()).collect();
        assert_eq!(classes, [Some("a"), Some("b"), Some("b"), None]);
        assert_eq!(tree.classes(), ["a", "b"]);
        let shards = tree.shards(3).unwrap();
        assert_eq!(shards.len(), 2);
        assert_eq!(shards[1].0, "shard-00001.l3s");
        assert_eq!(shards[1].1.len(), 1);
        assert!(tree.shards(0).is_err());
        assert!(ImageTree::list(&root.join("top.png")).is_err());
        assert!(tree.unlisted.is_empty());
    }
}
