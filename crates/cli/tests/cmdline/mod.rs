//! What the command-line tests share: running `flowpath` and checking
//! its exit status, and a fresh directory per test.

// Each test binary uses its own part of these helpers.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The `flowpath` binary.
pub const BIN: &str = env!("CARGO_BIN_EXE_flowpath");

/// A fresh, empty directory for one test (under the test binary's own).
pub fn temp_dir(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(concat!("cli-", env!("CARGO_CRATE_NAME")))
        .join(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("create temp dir");
    d
}

/// Runs `flowpath ARGS`.
pub fn flowpath(args: &[&str]) -> Output {
    Command::new(BIN).args(args).output().expect("run flowpath")
}

/// `flowpath ARGS`'s standard output (it must succeed).
pub fn ok(args: &[&str]) -> String {
    let out = flowpath(args);
    assert!(
        out.status.success(),
        "flowpath {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8 stdout")
}

/// `flowpath ARGS`'s standard error: it must fail with an error exit
/// (1: flowpath's error; 2: clap's usage error), never a panic (101) or a
/// signal.
pub fn fails(args: &[&str]) -> String {
    let out = flowpath(args);
    assert!(!out.status.success(), "flowpath {args:?} should fail");
    assert!(
        matches!(out.status.code(), Some(1 | 2)),
        "an error exit, not a crash: {out:?}"
    );
    String::from_utf8(out.stderr).expect("utf-8 stderr")
}

/// A path as a `&str` (the tests' paths are UTF-8).
pub fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}
