//! What the commands show people besides their result lines: the progress bar, byte counts.

use indicatif::{ProgressBar, ProgressStyle};

/// A progress bar over `len` files (hidden with `quiet`).
pub(crate) fn progress(len: usize, quiet: bool) -> ProgressBar {
    if quiet {
        return ProgressBar::hidden();
    }
    let pb = ProgressBar::new(len as u64);
    pb.set_style(
        ProgressStyle::with_template("{bar:40} {pos}/{len} files, {elapsed} elapsed, eta {eta}")
            .expect("valid template"),
    );
    pb
}

/// `bytes` in B, kB, MB or GB (powers of 1000).
pub(crate) fn human(bytes: u64) -> String {
    let b = bytes as f64;
    if b >= 1e9 {
        format!("{:.2} GB", b / 1e9)
    } else if b >= 1e6 {
        format!("{:.2} MB", b / 1e6)
    } else if b >= 1e3 {
        format!("{:.1} kB", b / 1e3)
    } else {
        format!("{bytes} B")
    }
}
