//! TRex's SFR profile as a bench workload (`--scenario trex`), and the
//! file side of `flowpath_trafficgen::sfr` that `flowpath gen sfr` shares:
//! finding the seed's profile, reading a profile and its template captures.
//!
//! The workload is the expansion held in memory as two input ports, as
//! `flowpath gen sfr` writes it: client-to-server frames on port 1,
//! server-to-client on port 11 (the second `.parts` port), classified
//! against the seed's bridge rule `priority=0,actions=NORMAL`.

use std::path::{Path, PathBuf};

use flowpath_io::PcapReader;
use flowpath_trafficgen::sfr::{self, Dir, SfrProfile, Template, TemplateBuilder};

use crate::workload::{part_port, PortTraffic, WorkloadError};

/// The rules of the SFR workload: the seed's bridge rule.
pub const SFR_RULES: &str = "priority=0,actions=NORMAL\n";

/// The seed's profile, `shared/trex-sfr/sfr_delay_10_1g.yaml` beside the
/// repository.
pub fn default_profile() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/trex-sfr/sfr_delay_10_1g.yaml")
}

/// Reads and parses the profile at `path` (errors name the file, line,
/// field and value).
pub fn read_profile(path: &Path) -> Result<SfrProfile, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("{}: cannot read the profile: {e}", path.display()))?;
    sfr::parse(&text, path).map_err(|e| e.to_string())
}

/// Loads every template's capture: its `name` beside the profile at
/// `path`, or (TRex names them from its scripts directory, `avl/x.pcap`)
/// its file name there.
pub fn load_templates(profile: &SfrProfile, path: &Path) -> Result<Vec<Template>, String> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut templates = Vec::with_capacity(profile.templates.len());
    for (i, spec) in profile.templates.iter().enumerate() {
        let Some(file) = resolve(dir, &spec.name) else {
            return Err(format!(
                "{}:{}:{}: cap_info[{i}].name: capture '{}' not found in {} (as written, nor by its file name)",
                path.display(),
                spec.name_at.0,
                spec.name_at.1,
                spec.name,
                dir.display()
            ));
        };
        let mut reader = PcapReader::open(&file).map_err(|e| e.to_string())?;
        let mut b = TemplateBuilder::new(spec, profile);
        while let Some(p) = reader.next_packet() {
            let p = p.map_err(|e| e.to_string())?;
            let bad = |what: String| format!("{}: record {}: {what}", file.display(), p.record);
            if p.link_type != flowpath_io::LINKTYPE_ETHERNET {
                return Err(bad(format!("link type {}, not Ethernet", p.link_type)));
            }
            b.push(p.timestamp_ns, p.data, p.orig_len).map_err(bad)?;
        }
        templates.push(b.finish().map_err(|e| format!("{}: {e}", file.display()))?);
    }
    Ok(templates)
}

fn resolve(dir: &Path, name: &str) -> Option<PathBuf> {
    let p = Path::new(name);
    let direct = if p.is_absolute() {
        p.to_path_buf()
    } else {
        dir.join(p)
    };
    if direct.is_file() {
        return Some(direct);
    }
    let by_name = dir.join(p.file_name()?);
    by_name.is_file().then_some(by_name)
}

/// The expansion of `profile` at `multiplier` for `duration` seconds as
/// two ports (c2s on 1, s2c on 11).
pub fn ports(
    profile: &Path,
    multiplier: f64,
    duration: f64,
) -> Result<Vec<PortTraffic>, WorkloadError> {
    let p = read_profile(profile).map_err(WorkloadError::Profile)?;
    let templates = load_templates(&p, profile).map_err(WorkloadError::Profile)?;
    let mut data = [Vec::new(), Vec::new()];
    let mut offsets = [vec![0usize], vec![0usize]];
    let Ok(_) = sfr::expand(&p, &templates, multiplier, duration, |dir, _, frame, _| {
        let i = usize::from(dir == Dir::S2c);
        data[i].extend_from_slice(frame);
        offsets[i].push(data[i].len());
        Ok::<(), std::convert::Infallible>(())
    });
    let [c2s, s2c] = data;
    let [oc, os] = offsets;
    if oc.len() < 2 || os.len() < 2 {
        return Err(WorkloadError::Empty(profile.to_path_buf()));
    }
    Ok(vec![
        PortTraffic::packed(part_port(0), c2s, &oc),
        PortTraffic::packed(part_port(1), s2c, &os),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_seed_profile_loads_as_two_ports() {
        let profile = default_profile();
        if !profile.is_file() {
            eprintln!("{} not found: skipping", profile.display());
            return;
        }
        let ports = ports(&profile, 1.0, 0.05).expect("loads");
        assert_eq!(ports.iter().map(|p| p.in_port).collect::<Vec<_>>(), [1, 11]);
        let p = read_profile(&profile).expect("profile");
        let t = load_templates(&p, &profile).expect("templates");
        let mut want = 0u64;
        for (spec, tpl) in p.templates.iter().zip(&t) {
            want += sfr::starts_before(spec.cps, 0.05) * tpl.frames.len() as u64;
        }
        let got: usize = ports.iter().map(PortTraffic::len).sum();
        assert_eq!(got as u64, want);
    }

    #[test]
    fn a_missing_capture_names_the_field() {
        let dir = std::env::temp_dir().join(format!("flowpath-sfr-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let path = dir.join("p.yaml");
        let text = "- duration: 1\n  generator:\n    clients_start: 16.0.0.1\n    clients_end: 16.0.0.9\n    servers_start: 48.0.0.1\n    servers_end: 48.0.0.9\n  cap_ipg: true\n  cap_info:\n    - name: avl/none.pcap\n      cps: 1\n";
        std::fs::write(&path, text).expect("write");
        let p = read_profile(&path).expect("parses");
        let e = load_templates(&p, &path).expect_err("no capture");
        assert!(
            e.contains(":9:13: cap_info[0].name: capture 'avl/none.pcap' not found"),
            "{e}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
