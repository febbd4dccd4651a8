//! `flowpath switch`: the switch on live ports, with a control socket.
//!
//! Parses the options into a [`SwitchdConfig`] and runs
//! [`flowpath_switchd::Switchd`] until SIGINT, SIGTERM or `ctl exit`.

use anyhow::{bail, Context, Result};
use flowpath_netdev::PortSpec;
use flowpath_ofproto::classifier::parse_prefixes;
use flowpath_ofproto::normal::{parse_vlan_mode, Bridge, MacTable, PortVlans, VlanMode};
use flowpath_ofproto::parse::parse_rules;
use flowpath_switchd::ofchannel::{ChannelConfig, ControllerSpec, ListenSpec, TlsFiles};
use flowpath_switchd::rules::RuleSet;
use flowpath_switchd::{Switchd, SwitchdConfig};
use std::path::PathBuf;
use std::sync::Arc;

/// Arguments of `flowpath switch`.
#[derive(clap::Args)]
#[command(
    after_help = "Ports (--port N=SPEC, N = OpenFlow and datapath port number):\n  \
afxdp:IFNAME[,mode=native|generic][,queues=N]   AF_XDP sockets + our XDP redirect program\n  \
afpacket:IFNAME[,queues=N]                      AF_PACKET TPACKET_V3 ring(s), vnet headers (GSO kept)\n  \
tap:NAME                                        a tap interface, created and deleted by the switch\n  \
vhost-user:SOCK[,server|client][,queues=N]      a VM or DPDK app attaches over a vhost-user socket\n  \
pcap:FILE[,loop]                                receive a capture's frames (once, or looped)\n  \
pcap-out:FILE                                   write what the port is sent to a capture\n  \
null                                            discard what the port is sent\n  \
vxlan:remote_ip=IP|flow[,key=K|flow][,local_ip=IP][,dst_port=P][,csum=true][,ttl=T][,tos=T]\n  \
geneve:...  gre:...                             tunnel ports (need --underlay; options as vxlan's)\n\
Any of them may end with 802.1Q options for NORMAL: ,vlan=V (access port of VLAN V) or\n\
,trunks=V1,V2,... (trunk of those VLANs; default: trunk of every VLAN).\n\n\
Example (two namespaces joined through the switch):\n  \
flowpath switch --rules fwd.flows --port 1=afxdp:p1 --port 2=afpacket:p2 --ctl /tmp/fp.ctl\n  \
flowpath ctl --ctl /tmp/fp.ctl dpif-netdev/pmd-stats-show     (or: ovs-appctl -t /tmp/fp.ctl ...)\n\n\
The control socket defaults to $FLOWPATH_RUNDIR/flowpath.ctl ($FLOWPATH_RUNDIR defaults to\n\
/run/flowpath). Stop with SIGINT, SIGTERM or `flowpath ctl exit`. With --monitor, a parent process\n\
restarts the switch when it crashes (see docs/switch.md)."
)]
pub struct Args {
    /// Rule file in `ovs-ofctl add-flows` syntax (with --ovsdb: optional,
    /// the flows may all come over OpenFlow).
    #[arg(long, value_name = "RULES.flows", required_unless_present = "ovsdb")]
    rules: Option<PathBuf>,
    /// A port: N=SPEC (repeatable; see below; with --ovsdb: optional, the
    /// ports come from the database).
    #[arg(
        long = "port",
        value_name = "N=SPEC",
        required_unless_present = "ovsdb"
    )]
    ports: Vec<String>,
    /// Take the bridge's ports and settings from an ovsdb-server with Open
    /// vSwitch's schema, as ovs-vswitchd does, so that `ovs-vsctl` drives
    /// the switch: `unix:PATH`, `tcp:IP:PORT` or `ssl:IP:PORT` (with
    /// --private-key, --certificate, --ca-cert; default, when given
    /// without a value: unix:$FLOWPATH_RUNDIR/db.sock). The switch starts
    /// as the bridge named by --bridge; every other netdev bridge of the
    /// database runs beside it.
    #[arg(long, value_name = "REMOTE", num_args = 0..=1, default_missing_value = "")]
    ovsdb: Option<String>,
    /// The tunnels' underlay: a port (afpacket:IF, afxdp:IF, ...) on which
    /// flowpath owns the tunnel endpoint address(es) `ip=ADDR/PLEN`
    /// (repeatable; IPv4 and IPv6), answers ARP for them and receives the
    /// tunnel packets sent to them; `gw=IP` adds a default route, `mac=MAC`
    /// overrides the interface's MAC. Routes and neighbours:
    /// `ovs/route/*`, `tnl/neigh/*` on the control socket.
    #[arg(long, value_name = "SPEC,ip=ADDR/PLEN[,gw=IP][,mac=MAC]")]
    underlay: Option<String>,
    /// CPUs to run PMD threads on, one PMD each (e.g. `1` or `0,1`);
    /// default: one PMD, not pinned.
    #[arg(long, value_name = "CPU,...", value_delimiter = ',')]
    pmd_cpus: Vec<usize>,
    /// Control socket path.
    #[arg(long, value_name = "PATH")]
    ctl: Option<PathBuf>,
    /// Write the process id here (removed on exit).
    #[arg(long, value_name = "PATH")]
    pidfile: Option<PathBuf>,
    /// Prefix-tracking fields, like OVS's Flow_Table:prefixes.
    #[arg(long, value_name = "FIELDS", default_value = "nw_dst,nw_src")]
    prefixes: String,
    /// Prefix-tracking fields for one table: `T=FIELDS`; repeatable.
    #[arg(long = "table-prefixes", value_name = "T=FIELDS")]
    table_prefixes: Vec<String>,
    /// Group table in `ovs-ofctl add-groups` syntax, for `group:N`
    /// actions (`flowpath ctl dump-groups` shows it).
    #[arg(long, value_name = "FILE.groups")]
    groups: Option<PathBuf>,
    /// Most entries of NORMAL's MAC learning table (OVS's
    /// other_config:mac-table-size).
    #[arg(long, value_name = "N", default_value_t = flowpath_ofproto::normal::DEFAULT_MAC_TABLE_SIZE)]
    mac_table_size: usize,
    /// Seconds a learned MAC stays without traffic from it (OVS's
    /// other_config:mac-aging-time).
    #[arg(long, value_name = "S", default_value_t = flowpath_ofproto::normal::DEFAULT_MAC_AGING_S)]
    mac_aging: u64,
    /// How IP fragments are looked up, as OVS's `ovs-ofctl set-frags`:
    /// `normal` (every fragment as if its L4 ports were 0), `drop` (every
    /// fragment dropped) or `nx-match` (a first fragment with its ports;
    /// match `nw_frag` to tell fragments apart). Changed while running
    /// with `config/set frag-mode=MODE`.
    #[arg(long = "frag-mode", value_name = "MODE", default_value = "normal", value_parser = crate::rule_args::parse_frag_mode)]
    frag_mode: flowpath_ofproto::tables::FragMode,
    /// A flow-sample collector set, as OVS's `Flow_Sample_Collector_Set`
    /// (repeatable): with any, `sample` actions sample (without, they do
    /// nothing, as in OVS); `ovs-ofctl dump-ipfix-flow` shows each set's
    /// counters. `ID=IP:PORT` sends its flow records there as IPFIX over
    /// UDP.
    #[arg(long = "sample-collector-set", value_name = "ID[=IP:PORT]", value_parser = crate::rule_args::parse_collector_set)]
    sample_collector_sets: Vec<flowpath_switchd::sampler::CollectorSet>,
    /// The bridge's name: its OpenFlow socket is NAME.mgmt beside the
    /// control socket (as Open vSwitch's br0.mgmt), so that
    /// `OVS_RUNDIR=$FLOWPATH_RUNDIR ovs-ofctl dump-flows br0` works.
    #[arg(long, value_name = "NAME", default_value = "br0")]
    bridge: String,
    /// More OpenFlow listeners: `ptcp:PORT[:IP]`, `pssl:PORT[:IP]` (TLS)
    /// or `punix:PATH` (repeatable), for `ovs-ofctl ... tcp:IP:PORT` and
    /// controllers.
    #[arg(
        long = "openflow",
        value_name = "ptcp:PORT[:IP]|pssl:PORT[:IP]|punix:PATH"
    )]
    openflow: Vec<String>,
    /// A controller to connect to (repeatable): `tcp:IP[:PORT]`,
    /// `ssl:IP[:PORT]` (TLS; port 6653 by default) or `unix:PATH`;
    /// reconnected with back-off up to 8 s, probed with echo requests after
    /// 5 s of silence.
    #[arg(
        long = "controller",
        value_name = "tcp:IP[:PORT]|ssl:IP[:PORT]|unix:PATH"
    )]
    controller: Vec<String>,
    /// The switch's private key (PEM), for `ssl:` and `pssl:` (OpenFlow
    /// and the OVSDB).
    #[arg(long = "private-key", value_name = "FILE")]
    private_key: Option<PathBuf>,
    /// The switch's certificate (PEM), signed by a CA its peers trust.
    #[arg(long = "certificate", value_name = "FILE")]
    certificate: Option<PathBuf>,
    /// The CA certificate (PEM) that signs the peers' certificates: a peer
    /// without a certificate signed by it is refused.
    #[arg(long = "ca-cert", value_name = "FILE")]
    ca_cert: Option<PathBuf>,
    /// With controllers given: `secure` keeps the flows as they are when
    /// no controller is connected; `standalone` forwards as NORMAL (a
    /// learning switch) until one connects, as Open vSwitch's fail-open.
    #[arg(
        long = "fail-mode",
        value_name = "secure|standalone",
        default_value = "secure"
    )]
    fail_mode: String,
    /// Packet-ins per second sent to the controllers (OVS's
    /// controller-rate-limit); more are dropped and counted.
    #[arg(
        long = "controller-rate-limit",
        value_name = "N",
        default_value_t = 1000
    )]
    controller_rate_limit: u32,
    /// Packet-ins sent at once after a quiet spell (OVS's
    /// controller-burst-limit).
    #[arg(
        long = "controller-burst-limit",
        value_name = "N",
        default_value_t = 250
    )]
    controller_burst_limit: u32,
    /// Run the switch as the child of a monitor process that starts it
    /// again (with a back-off) when it dies abnormally — killed by a
    /// signal or stopped by a panic — as Open vSwitch's `--monitor`.
    /// SIGTERM or SIGINT to the monitor stops both.
    #[arg(long)]
    monitor: bool,
    #[command(flatten)]
    dp: crate::dp_args::DatapathArgs,
}

/// The default control socket: `$FLOWPATH_RUNDIR/flowpath.ctl`.
pub fn default_ctl() -> PathBuf {
    let dir = std::env::var_os("FLOWPATH_RUNDIR").unwrap_or_else(|| "/run/flowpath".into());
    PathBuf::from(dir).join("flowpath.ctl")
}

/// Splits the 802.1Q options (`vlan=V`, `tag=V`, `trunks=V1,V2,...`,
/// `native-tagged=V`, `native-untagged=V`, the last two with or without
/// `trunks=`) off a port spec: the spec without them, and the VLAN mode.
fn split_vlan(spec: &str) -> Result<(String, VlanMode)> {
    let mut rest = Vec::new();
    let mut mode: Option<String> = None;
    let mut trunks: Option<String> = None;
    let mut in_trunks = false;
    for tok in spec.split(',') {
        let t = tok.trim();
        if in_trunks && !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()) {
            if let Some(v) = trunks.as_mut() {
                v.push(',');
                v.push_str(t);
            }
            continue;
        }
        in_trunks = false;
        let is_mode = ["vlan=", "tag=", "native-tagged=", "native-untagged="]
            .iter()
            .any(|p| t.starts_with(p));
        if is_mode && mode.is_none() {
            mode = Some(t.to_string());
        } else if t.starts_with("trunks=") && trunks.is_none() {
            in_trunks = true;
            trunks = Some(t.to_string());
        } else if is_mode || t.starts_with("trunks=") {
            bail!("give one VLAN mode per port (vlan=V, trunks=V1,V2,..., native-tagged=V or native-untagged=V)");
        } else {
            rest.push(tok);
        }
    }
    let text = match (mode, trunks) {
        (Some(m), Some(t)) if m.starts_with("native-") => format!("{m},{t}"),
        (Some(_), Some(_)) => {
            bail!("give one of vlan=V or trunks=V1,V2,... per port (trunks= goes with native-tagged= or native-untagged=)")
        }
        (Some(m), None) => m,
        (None, Some(t)) => t,
        (None, None) => String::new(),
    };
    let mode = parse_vlan_mode(&text).map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok((rest.join(","), mode))
}

/// What a `--port` is.
#[derive(Debug, PartialEq)]
enum PortArg {
    /// A port with a device.
    Net(PortSpec),
    /// A tunnel port.
    Tunnel(flowpath_ofproto::tunnel::TunnelPort),
}

/// The port number `n` of `--port` argument `s` (1 to 65279).
pub(crate) fn port_number(s: &str, n: &str) -> Result<u32> {
    n.trim()
        .parse()
        .ok()
        .filter(|n| (1..=0xfeff).contains(n) || *n == flowpath_ofproto::action::OFPP_LOCAL)
        .with_context(|| {
            format!("--port '{s}': '{n}' is not a port number (1 to 65279, or 65534: LOCAL)")
        })
}

/// Parses `N=SPEC[,vlan=V|,trunks=V1,V2]`.
fn parse_port(s: &str) -> Result<(u32, PortArg, VlanMode)> {
    let (n, spec) = s
        .split_once('=')
        .with_context(|| format!("--port '{s}': expected N=SPEC, e.g. 1=afxdp:p1"))?;
    let n = port_number(s, n)?;
    if flowpath_ofproto::tunnel::is_tunnel_spec(spec) {
        let t = flowpath_ofproto::tunnel::TunnelPort::parse(n, spec)
            .map_err(|e| anyhow::anyhow!("--port {n}: {e}"))?;
        return Ok((n, PortArg::Tunnel(t), VlanMode::TrunkAll));
    }
    let (spec, mode) = split_vlan(spec).map_err(|e| anyhow::anyhow!("--port {n}: {e}"))?;
    let spec = PortSpec::parse(&spec).map_err(|e| anyhow::anyhow!("--port {n}: {e}"))?;
    Ok((n, PortArg::Net(spec), mode))
}

/// Runs `flowpath switch`.
pub fn run(args: Args) -> Result<()> {
    if args.monitor {
        // The child: this program with the same arguments but --monitor.
        let exe = std::env::current_exe().context("--monitor: cannot find this program")?;
        let child: Vec<std::ffi::OsString> = std::env::args_os()
            .skip(1)
            .filter(|a| a != "--monitor")
            .collect();
        let code = flowpath_switchd::monitor::run(&exe, &child).map_err(anyhow::Error::msg)?;
        std::process::exit(code);
    }
    let (rules, rules_name) = match &args.rules {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("cannot read rule file {}", path.display()))?;
            let name = path.display().to_string();
            (parse_rules(&text, Some(&name))?, name)
        }
        None => (Vec::new(), "(no rule file)".to_string()),
    };
    let prefixes = parse_prefixes(&args.prefixes).context("--prefixes")?;
    let per_table = crate::rule_args::parse_table_prefixes(&args.table_prefixes)?;
    let mut ports = Vec::new();
    let mut tunnels = Vec::new();
    let mut vlans = PortVlans::default();
    for p in &args.ports {
        let (n, spec, mode) = parse_port(p)?;
        vlans.set(n, mode);
        match spec {
            PortArg::Net(spec) => ports.push((n, spec)),
            PortArg::Tunnel(t) => tunnels.push(t),
        }
    }
    let underlay = args
        .underlay
        .as_deref()
        .map(flowpath_switchd::underlay::UnderlayConfig::parse)
        .transpose()
        .map_err(anyhow::Error::msg)?;
    if args.mac_table_size == 0 {
        bail!("--mac-table-size must be at least 1");
    }
    // The switch has no LOCAL port device: NORMAL floods to the ports.
    let bridge = Arc::new(Bridge::new(
        MacTable::new(args.mac_table_size, args.mac_aging),
        vlans,
        false,
    ));
    let mut nums: Vec<u32> = ports
        .iter()
        .map(|(n, _)| *n)
        .chain(tunnels.iter().map(|t| t.ofport))
        .collect();
    nums.sort_unstable();
    if let Some(w) = nums.windows(2).find(|w| w[0] == w[1]) {
        bail!("--port {}: port number given twice", w[0]);
    }
    let ctl_path = args.ctl.clone().unwrap_or_else(default_ctl);
    let mut rule_set = RuleSet::new(rules, prefixes, per_table, nums);
    rule_set.set_frag_mode(args.frag_mode);
    rule_set
        .set_groups(crate::rule_args::load_groups(args.groups.as_deref())?)
        .map_err(|e| anyhow::anyhow!("{rules_name}: {e}"))?;
    args.dp.apply_process_settings();
    if args.bridge.is_empty() || args.bridge.contains('/') {
        bail!(
            "--bridge {:?}: a bridge name is a plain word (br0)",
            args.bridge
        );
    }
    let mgmt = ctl_path
        .parent()
        .unwrap_or(std::path::Path::new("."))
        .join(format!("{}.mgmt", args.bridge));
    let mut openflow = ChannelConfig {
        bridge: args.bridge.clone(),
        listen: vec![ListenSpec::Unix(mgmt.clone())],
        fail_standalone: match args.fail_mode.as_str() {
            "secure" => false,
            "standalone" => true,
            m => bail!("--fail-mode {m:?}: expected secure or standalone"),
        },
        rate_limit: args.controller_rate_limit,
        burst_limit: args.controller_burst_limit,
        snoop: Some(mgmt.with_extension("snoop")),
        tls: TlsFiles {
            private_key: args.private_key.clone(),
            certificate: args.certificate.clone(),
            ca_cert: args.ca_cert.clone(),
        },
        ..ChannelConfig::default()
    };
    for s in &args.openflow {
        openflow
            .listen
            .push(ListenSpec::parse(s).map_err(|e| anyhow::anyhow!("--openflow {e}"))?);
    }
    for s in &args.controller {
        openflow
            .controllers
            .push(ControllerSpec::parse(s).map_err(|e| anyhow::anyhow!("--controller {e}"))?);
    }
    openflow.check_tls().map_err(anyhow::Error::msg)?;
    let cfg = SwitchdConfig {
        rules: rule_set,
        ports,
        pmd_cpus: args.pmd_cpus.clone(),
        datapath: args.dp.config()?,
        ctl_path: ctl_path.clone(),
        pidfile: args.pidfile.clone(),
        bridge,
        openflow,
        sample_sets: args.sample_collector_sets.clone(),
        ovsdb: args.ovsdb.as_ref().map(|r| {
            if r.is_empty() {
                let dir = ctl_path.parent().unwrap_or(std::path::Path::new("."));
                format!("unix:{}", dir.join("db.sock").display())
            } else {
                r.clone()
            }
        }),
        tunnels,
        underlay,
    };
    let sw = Switchd::start(cfg)?;
    eprintln!(
        "flowpath: switch running: {} ports, {} PMD thread(s), control socket {}, OpenFlow {}",
        args.ports.len(),
        args.pmd_cpus.len().max(1),
        ctl_path.display(),
        mgmt.display()
    );
    if let Err(e) = sw.run_until_stopped() {
        if flowpath_switchd::fault::fatal() {
            // A distinct status, so that a supervisor restarts the switch.
            eprintln!("flowpath: {e}");
            std::process::exit(flowpath_switchd::monitor::EXIT_CRASHED);
        }
        return Err(e.into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn port_specs_with_vlans() {
        let (n, spec, mode) = parse_port("1=afxdp:p1,mode=generic,vlan=10").unwrap();
        assert_eq!((n, mode), (1, VlanMode::Access(10)));
        assert_eq!(
            spec,
            PortArg::Net(PortSpec::parse("afxdp:p1,mode=generic").unwrap())
        );
        let (_, spec, mode) = parse_port("2=afpacket:p2,trunks=20,10,queues=2").unwrap();
        assert_eq!(mode, VlanMode::Trunk(vec![10, 20]));
        assert_eq!(
            spec,
            PortArg::Net(PortSpec::parse("afpacket:p2,queues=2").unwrap())
        );
        let (_, _, mode) = parse_port("3=null").unwrap();
        assert_eq!(mode, VlanMode::TrunkAll);
        let (_, spec, mode) = parse_port("4=afpacket:p4,native-untagged=5,trunks=7,8").unwrap();
        assert_eq!(mode, VlanMode::native(5, vec![7, 8], true));
        assert_eq!(spec, PortArg::Net(PortSpec::parse("afpacket:p4").unwrap()));
        let (n, _, _) = parse_port("65534=tap:br9").unwrap();
        assert_eq!(n, 65534);
        assert!(parse_port("65533=null").is_err());
        for bad in [
            "1=null,vlan=4096",
            "1=null,vlan=1,trunks=2",
            "1=null,trunks=x",
            "1=null,vlan=1,native-tagged=2",
        ] {
            let e = parse_port(bad).unwrap_err().to_string();
            assert!(e.starts_with("--port 1:"), "{bad}: {e}");
        }
    }

    #[test]
    fn tunnel_port_specs() {
        let (n, spec, _) = parse_port("10=vxlan:remote_ip=172.31.1.1,key=5").unwrap();
        assert_eq!(n, 10);
        let PortArg::Tunnel(t) = spec else {
            panic!("not a tunnel: {spec:?}")
        };
        assert_eq!(t.describe(), "vxlan:remote_ip=172.31.1.1,key=5");
        let e = parse_port("11=geneve:key=1").unwrap_err().to_string();
        assert!(
            e.starts_with("--port 11:") && e.contains("remote_ip"),
            "{e}"
        );
    }
}
