//! The shared capture corpus that tests run on (`../shared/pcaps` beside
//! the checkout, or `$FLOWPATH_PCAPS`), and the rule for tests that need
//! files beside the checkout.
//!
//! One place for finding the corpus and listing its captures, so the
//! parser, reader and end-to-end tests agree on what "every capture" is.
//! Only file-system reads; not used on any packet path.
//!
//! A fresh clone has nothing beside it, and `cargo test` must pass there:
//! a test that needs `../shared` asks [`shared_available`] first, which
//! says plainly that the test is skipped, and why. Under CI (the `CI`
//! environment variable set) a missing `../shared` is a failure instead,
//! so CI can never pass by skipping.

use std::path::{Path, PathBuf};

/// The corpus directory: `$FLOWPATH_PCAPS`, or `shared/pcaps` beside the
/// workspace, given a crate's `CARGO_MANIFEST_DIR` (crates live at
/// `<workspace>/crates/NAME`).
pub fn shared_pcaps_dir(manifest_dir: &str) -> PathBuf {
    match std::env::var_os("FLOWPATH_PCAPS") {
        Some(d) => PathBuf::from(d),
        None => Path::new(manifest_dir).join("../../../shared/pcaps"),
    }
}

/// The corpus directory if it is there (see [`shared_available`]): `None`
/// means the calling test should return without checking anything.
pub fn corpus_or_skip(manifest_dir: &str, test: &str) -> Option<PathBuf> {
    let dir = shared_pcaps_dir(manifest_dir);
    shared_available(&dir, test).then_some(dir)
}

/// Whether `path`, a file or directory from `../shared` that `test`
/// needs, is there. When it is not: under CI (`CI` set and not `false`
/// or `0`) this panics, naming the path; elsewhere it prints
/// `SKIPPED <test>: <path> not found` and returns false.
pub fn shared_available(path: &Path, test: &str) -> bool {
    if path.exists() {
        return true;
    }
    assert!(
        !under_ci(),
        "{test}: {} is missing, and CI must not skip (is ../shared beside the checkout?)",
        path.display()
    );
    eprintln!(
        "SKIPPED {test}: {} not found (it comes with ../shared beside the checkout; \
         FLOWPATH_PCAPS points elsewhere)",
        path.display()
    );
    false
}

/// True when running under CI: `CI` is set to anything but `false`/`0`/"".
pub fn under_ci() -> bool {
    match std::env::var("CI") {
        Ok(v) => !matches!(v.as_str(), "" | "0" | "false"),
        Err(std::env::VarError::NotPresent) => false,
        Err(std::env::VarError::NotUnicode(_)) => true,
    }
}

/// Every capture file below `dir`, sorted, recursively; documentation and
/// licence files are left out.
pub fn capture_files(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    walk(dir, &mut out)?;
    Ok(out)
}

fn walk(d: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    let mut entries = Vec::new();
    for e in std::fs::read_dir(d)? {
        entries.push(e?.path());
    }
    entries.sort();
    for p in entries {
        if p.is_dir() {
            walk(&p, out)?;
        } else {
            let name = p
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            if name != "LICENSE" && name != "COPYING" && !name.ends_with(".md") {
                out.push(p);
            }
        }
    }
    Ok(())
}
