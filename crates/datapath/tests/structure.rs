//! The fast path stands on its own: the datapath crate depends on neither
//! the OpenFlow slow path nor the crate that joins the two (it calls the
//! slow path only through its `Upcall` trait), in any dependency section.

#[test]
fn the_datapath_does_not_depend_on_the_slow_path() {
    let toml = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml")).unwrap();
    for forbidden in ["flowpath-ofproto", "flowpath-slowpath", "flowpath-switchd"] {
        assert!(
            !toml.contains(forbidden),
            "crates/datapath/Cargo.toml names {forbidden}"
        );
    }
    // Nor does its code name them.
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    for e in std::fs::read_dir(src).unwrap() {
        let p = e.unwrap().path();
        let text = std::fs::read_to_string(&p).unwrap_or_default();
        for line in text.lines().filter(|l| !l.trim_start().starts_with("//")) {
            assert!(
                !line.contains("flowpath_ofproto") && !line.contains("flowpath_slowpath"),
                "{}: {line}",
                p.display()
            );
        }
    }
}

/// The documentation's table of configuration keys is the one the key
/// table makes (`flowpath_datapath::keys::markdown_table`): a key added,
/// renamed or given another default changes the docs too.
#[test]
fn the_configuration_page_lists_every_key_as_declared() {
    let page = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/configuration.md");
    let text = std::fs::read_to_string(page).expect("docs/configuration.md");
    let table = flowpath_datapath::keys::markdown_table();
    assert!(
        text.contains(&table),
        "docs/configuration.md does not hold the current table of keys; replace it with:\n{table}"
    );
}
