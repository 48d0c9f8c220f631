//! Running the `l3` binary from the CLI's integration tests.
#![allow(dead_code)]

use std::path::Path;
use std::process::{Command, Output};

/// Runs `l3` with `args`.
pub fn l3(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_l3"))
        .args(args)
        .output()
        .expect("run l3")
}

/// Exit status, stdout and stderr, for assertion messages.
pub fn text(o: &Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// A path as a command-line argument.
pub fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}
