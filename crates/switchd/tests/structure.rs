//! The switch's modules import each other without a circle: the crate
//! root ties them together, `shared` holds what the control handlers and
//! the revalidator both use, and no module imports the root.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The `crate::MODULE` names a source file imports (`use crate::x::...`,
/// `use crate::{x, ...}` and paths written out in the code), doc
/// comments left out.
fn imports(src: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for line in src.lines() {
        let l = line.trim_start();
        if l.starts_with("//") {
            continue;
        }
        let mut rest = l;
        while let Some(i) = rest.find("crate::") {
            rest = &rest[i + "crate::".len()..];
            let name: String = rest
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() {
                out.insert(name);
            } else if let Some(group) = rest.strip_prefix('{') {
                // `use crate::{a, b::c}`: every first segment.
                let inner = group.split('}').next().unwrap_or("");
                for part in inner.split(',') {
                    let first = part.trim().split("::").next().unwrap_or("").trim();
                    if !first.is_empty() {
                        out.insert(first.to_string());
                    }
                }
            }
        }
    }
    out
}

#[test]
fn switchd_modules_import_no_circle() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut modules = BTreeSet::new();
    for e in std::fs::read_dir(&src).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "rs") {
            let name = p.file_stem().unwrap().to_string_lossy().into_owned();
            modules.insert(name.clone());
            graph.insert(name, imports(&std::fs::read_to_string(&p).unwrap()));
        } else if p.join("mod.rs").exists() {
            // A module in a directory: the imports of all its files
            // (its own submodules' `crate::NAME::...` are itself).
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            let mut all = BTreeSet::new();
            for f in std::fs::read_dir(&p).unwrap() {
                let f = f.unwrap().path();
                if f.extension().is_some_and(|x| x == "rs") {
                    all.extend(imports(&std::fs::read_to_string(&f).unwrap()));
                }
            }
            modules.insert(name.clone());
            graph.insert(name, all);
        }
    }
    assert!(modules.len() >= 6, "{modules:?}");
    for (m, deps) in &mut graph {
        // A module's `crate::X` that is not a module is an item of the
        // crate root (lib.rs).
        let named: BTreeSet<String> = deps
            .iter()
            .map(|d| {
                if modules.contains(d) {
                    d.clone()
                } else {
                    "lib".to_string()
                }
            })
            .collect();
        *deps = named;
        deps.remove(m);
        if m != "lib" {
            assert!(
                !deps.contains("lib"),
                "{m}.rs imports the crate root: {deps:?}"
            );
        }
    }
    // Depth-first search for a cycle.
    fn visit(
        m: &str,
        g: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) {
        if done.contains(m) {
            return;
        }
        if let Some(i) = path.iter().position(|p| p == m) {
            panic!("import circle: {} -> {m}", path[i..].join(" -> "));
        }
        path.push(m.to_string());
        for d in g.get(m).into_iter().flatten() {
            visit(d, g, path, done);
        }
        path.pop();
        done.insert(m.to_string());
    }
    let mut done = BTreeSet::new();
    for m in graph.keys() {
        visit(m, &graph, &mut Vec::new(), &mut done);
    }
}

#[test]
fn the_import_reader_sees_grouped_and_inline_paths() {
    let s = "use crate::{a, b::C};\n//! [`crate::doc`]\nlet x = crate::d::f();\n";
    let got: Vec<String> = imports(s).into_iter().collect();
    assert_eq!(got, ["a", "b", "d"]);
}

/// The manual's page of control commands names every command the switch
/// registers.
#[test]
fn the_control_page_names_every_command() {
    let page = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/control.md");
    let text = std::fs::read_to_string(page).expect("docs/control.md");
    let missing: Vec<String> = flowpath_switchd::control::commands()
        .into_iter()
        .map(|c| c.name)
        .filter(|n| !text.contains(&format!("`{n}")))
        .collect();
    assert!(missing.is_empty(), "docs/control.md lacks {missing:?}");
}
