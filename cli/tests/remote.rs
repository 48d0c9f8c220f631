//! The dataset commands over an object store (a real SeaweedFS S3 server, started by
//! `scripts/test.sh`; with `CI=true` and none configured the test fails): `pack -o s3://...`,
//! `ls`, `verify-dataset`, `unpack`, `bench-loader` and `cp` both ways give what they give on
//! a local folder; a second pack to the same URL is refused without `--force`.

#[path = "../../tests/common/mod.rs"]
mod common;
mod support;

use std::time::Duration;

use support::{l3_within, text};

fn l3(args: &[&str]) -> String {
    let o = l3_within(args, Duration::from_secs(120));
    assert!(o.status.success(), "l3 {args:?}: {}", text(&o));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn the_dataset_commands_work_on_a_bucket() {
    let Some(url) = common::s3_prefix("cli") else {
        return;
    };
    let samples = common::samples_dir();
    let tmp = tempfile::tempdir().unwrap();
    let local = tmp.path().join("local");
    let s = |p: &std::path::Path| p.to_str().unwrap().to_owned();
    l3(&["pack", &s(&samples), "-o", &url, "--levels", "3", "-q"]);
    l3(&[
        "pack",
        &s(&samples),
        "-o",
        &s(&local),
        "--levels",
        "3",
        "-q",
    ]);
    // The same listing, but for the name.
    let (ls_remote, ls_local) = (l3(&["ls", &url, "-r"]), l3(&["ls", &s(&local), "-r"]));
    assert_eq!(
        ls_remote.replace(&url, "DS"),
        ls_local.replace(&s(&local), "DS")
    );
    assert!(l3(&["verify-dataset", &url]).contains("0 shard(s) failed"));
    // Unpacked from the bucket: the same PNG files as from the folder.
    let (ua, ub) = (tmp.path().join("ua"), tmp.path().join("ub"));
    l3(&["unpack", &url, "-o", &s(&ua)]);
    l3(&["unpack", &s(&local), "-o", &s(&ub)]);
    let files = common::files_under(&ub);
    assert_eq!(files.len(), 6);
    for f in files {
        let rel = f.strip_prefix(&ub).unwrap();
        assert!(std::fs::read(ua.join(rel)).unwrap() == std::fs::read(&f).unwrap());
    }
    assert!(l3(&["bench-loader", &url, "--epochs", "1"]).contains("0 skipped"));
    // Packing over it again is refused, with --force it is replaced.
    let o = l3_within(
        &["pack", &s(&samples), "-o", &url, "-q"],
        Duration::from_secs(120),
    );
    assert!(
        !o.status.success() && text(&o).contains("--force"),
        "{}",
        text(&o)
    );
    l3(&["pack", &s(&samples), "-o", &url, "-q", "--force"]);
    assert!(l3(&["ls", &url]).contains("1 level(s)"));
    // And back to a folder.
    let back = tmp.path().join("back");
    assert!(l3(&["cp", &url, &s(&back), "-q"]).contains("copied 6 records"));
    assert!(l3(&["verify-dataset", &s(&back)]).contains("0 shard(s) failed"));
}
