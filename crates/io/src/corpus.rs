//! The shared capture corpus that tests run on (`../shared/pcaps` beside
//! the checkout, or `$FLOWPATH_PCAPS`).
//!
//! One place for finding the corpus and listing its captures, so the
//! parser, reader and end-to-end tests agree on what "every capture" is.
//! Only file-system reads; not used on any packet path.

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
