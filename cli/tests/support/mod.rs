//! Running the `l3` binary from the CLI's integration tests.
#![allow(dead_code)]

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Runs `l3` with `args`.
pub fn l3(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_l3"))
        .args(args)
        .output()
        .expect("run l3")
}

/// Runs `l3` with `args`, killing it and failing the test if it has not ended within
/// `limit` (a hang).
pub fn l3_within(args: &[&str], limit: Duration) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_l3"))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run l3");
    let started = Instant::now();
    while child.try_wait().expect("wait for l3").is_none() {
        if started.elapsed() > limit {
            let _ = child.kill();
            let o = child.wait_with_output().expect("wait for l3");
            panic!("l3 {args:?} still running after {limit:?}: {}", text(&o));
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    child.wait_with_output().expect("wait for l3")
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
