//! IP fragments through `flowpath run` under each frag mode, against what
//! Open vSwitch 3.1's userspace datapath forwarded of the same capture.
//!
//! `data/fragments.pcap` (written by `tools/frag-capture.py`): TCP
//! segments to ports 8080 and 80 and UDP datagrams to 53 and 5000, whole
//! and cut into a first and later fragments, an ICMP echo in two, UDP
//! fragments out of order and an IPv6 UDP datagram in two.
//! `data/fragments.flows`: port-based rules (drop TCP to 8080, UDP to 53 to
//! port 3, later fragments to port 4, the rest to port 2).
//! `data/fragments-ovs31.json`: for each mode (`ovs-ofctl set-frags`), the
//! frames OVS 3.1 sent on each port when the capture was received on
//! port 1 (`tools/ovs-frag-replay.py`: netdev-dummy/receive, tx_pcap).
//! flowpath must send the same frames, byte for byte, in the same order.

use flowpath_io::load_ethernet_frames;
use std::path::{Path, PathBuf};
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_flowpath");

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name)
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

#[test]
fn fragments_are_forwarded_as_ovs_forwards_them_in_every_mode() {
    let golden: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(data("fragments-ovs31.json")).unwrap())
            .unwrap();
    let modes = golden.as_object().unwrap();
    assert_eq!(modes.len(), 3, "normal, drop and nx-match recorded");
    let mut differ = Vec::new();
    for (mode, ports) in modes {
        let out = Path::new(env!("CARGO_TARGET_TMPDIR"))
            .join("frag-replay")
            .join(mode);
        let _ = std::fs::remove_dir_all(&out);
        let run = Command::new(BIN)
            .args(["run", "--rules"])
            .arg(data("fragments.flows"))
            .arg("--pcap")
            .arg(data("fragments.pcap"))
            .args(["--frag-mode", mode, "--out-dir"])
            .arg(&out)
            .output()
            .unwrap();
        assert!(
            run.status.success(),
            "{mode}: {}",
            String::from_utf8_lossy(&run.stderr)
        );
        for port in ["2", "3", "4"] {
            let want: Vec<String> = ports[port]
                .as_array()
                .map(|a| a.iter().map(|f| f.as_str().unwrap().to_string()).collect())
                .unwrap_or_default();
            let file = out.join(format!("port-{port}.pcap"));
            let got: Vec<String> = if file.exists() {
                load_ethernet_frames(&file)
                    .unwrap()
                    .iter()
                    .map(hex)
                    .collect()
            } else {
                Vec::new()
            };
            if got != want {
                differ.push(format!(
                    "mode {mode}, port {port}: OVS sent {} frames, flowpath {}",
                    want.len(),
                    got.len()
                ));
            }
        }
    }
    assert!(differ.is_empty(), "{}", differ.join("\n"));
    // The data exercises what it is for: the modes forward differently.
    let count = |m: &str, p: &str| golden[m][p].as_array().map_or(0, Vec::len);
    assert!(count("normal", "2") > count("nx-match", "2"));
    assert!(count("nx-match", "3") > count("normal", "3"));
    assert_eq!(count("drop", "4"), 0);
}
