//! `flowpath trace`: like `ovs-appctl ofproto/trace br0 FLOW --generate`.
//!
//! Loads a rule file, translates one packet description (or one per line
//! of a file) through the tables, and prints the rule hit in each table,
//! the megaflow and the datapath actions — or, with `--json`, one object
//! per packet: `{"packet", "megaflow", "actions"}` (and `"error"` when
//! translation failed, `"recirc"` when the actions end with
//! `recirc(ID)`: each id with the packet the datapath sends back, to trace
//! its next pass as `recirc_id=ID,dp_hash=H,PACKET`).

use anyhow::{bail, Context, Result};
use flowpath_odp::format_actions;
use flowpath_ofproto::parse::parse_packet;
use flowpath_ofproto::xlate::{next_ct_state, packet_text, resume_banner, xlate_on, XlateMode};
use std::io::Write;
use std::path::PathBuf;

/// Arguments of `flowpath trace`.
#[derive(clap::Args)]
#[command(after_help = "Examples:\n  \
flowpath trace --rules examples/nmap.flows 'in_port=1,tcp,nw_src=7.7.7.1,nw_dst=7.7.7.104,tp_src=1234,tp_dst=90'\n  \
flowpath trace --rules examples/nmap.flows --packets packets.txt --json\n\n\
A packet is written in ovs-ofctl flow syntax (in_port=1,tcp,tp_dst=80) or as a datapath flow\n\
(in_port(1),eth(src=..,dst=..),eth_type(0x0800),ipv4(src=..,dst=..,proto=6,frag=no),tcp(dst=80));\n\
fields not mentioned are 0.\n\
Megaflow is the widest match that is sure to get the same datapath actions.\n\n\
NORMAL: the bridge's ports are --ports (or those the rules name) and LOCAL (unless --no-local);\n\
--port-vlan N=vlan=V / N=trunks=V1,V2 / N=native-tagged=V[,trunks=...] / N=native-untagged=V[,trunks=...] configures 802.1Q; --learn fills the MAC table from the\n\
packets traced so far, e.g. trace a reply after its request:\n  \
flowpath trace --rules normal.flows --ports 1,2,3 --learn --packets conversation.txt\n\n\
Tunnels: --port N=vxlan:OPTS (geneve:, gre:) adds tunnel port N, --underlay NAME,ip=ADDR/PLEN,mac=MAC\n\
the underlay its outer packets use, --route and --neigh its routes and neighbours (as ovs/route/add\n\
and tnl/neigh/set), --tlv-map the Geneve options of tun_metadata0..7. An output to a tunnel port\n\
prints tnl_push(tnl_port(VPORT),header(...),out_port(UNDERLAY)),UNDERLAY (datapath ports: 65024 and up\n\
for the tunnel classes, one per kind and UDP port, in --port order; 64768 for the underlay: a packet\n\
traced in on it is one the underlay receives, tnl_pop for a tunnel packet to the endpoint). A packet\n\
received on a tunnel port is traced with its OpenFlow port and tunnel metadata, as\n\
ofproto/trace br0 in_port=vx1,tun_id=5,...:\n  \
flowpath trace --rules t.flows --underlay null,ip=172.31.1.100/24,mac=aa:55:aa:55:00:00 \\\n    \
--neigh 172.31.1.1=aa:55:aa:55:00:01 --port 10=vxlan:remote_ip=172.31.1.1,key=flow \\\n    \
'tun_id=5,tun_src=172.31.1.1,tun_dst=172.31.1.100,in_port=10,tcp'")]
pub struct Args {
    #[command(flatten)]
    rules: crate::rule_args::RuleArgs,
    #[command(flatten)]
    tunnels: crate::trace_tunnels::TunnelArgs,
    /// A file of packet descriptions, one per line ('#' comments allowed).
    #[arg(long, value_name = "FILE", conflicts_with = "flow")]
    packets: Option<PathBuf>,
    /// One JSON object per packet instead of the text report.
    #[arg(long)]
    json: bool,
    /// Side effects, as `ofproto/trace -generate`: NORMAL learns each
    /// packet's source and `learn` actions add their flows before the next
    /// packet is traced (as if each had been received), so a packet file
    /// can fill the MAC table and the learned flows; without it NORMAL's
    /// table stays empty and `learn` only shows what it reads (OVS's
    /// ofproto/trace does not learn either).
    #[arg(long)]
    learn: bool,
    /// The connection-tracking state the next `ct(table=N)` recirculation
    /// resumes with (`trk|est`, `trk,est`, `+trk+est`, `0x22`), as
    /// `ofproto/trace --ct-next`; repeat it for later ones (each packet of
    /// `--packets` starts from the first again). Each `ct(table=N)` pass is
    /// traced after the packet's (default: `trk|new`), with the NAT
    /// simulated as OVS's trace does it (the range's first address and
    /// port).
    #[arg(long = "ct-next", value_name = "FLAGS")]
    ct_next: Vec<String>,
    /// The packet, e.g. `in_port=1,tcp,nw_src=7.7.7.1,nw_dst=7.7.7.104,tp_dst=90`.
    #[arg(value_name = "FLOW", required_unless_present = "packets")]
    flow: Option<String>,
}

/// One line of `--json` output (fields in this order).
#[derive(serde::Serialize)]
struct TraceJson<'a> {
    packet: &'a str,
    megaflow: String,
    actions: String,
    /// Why translation failed (the packet is dropped), if it did.
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
    /// The recirculations the actions end with.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    recirc: Vec<RecircJson>,
    /// For a `ct(table=N)` pass traced after its packet: the
    /// recirculation id it resumes.
    #[serde(skip_serializing_if = "Option::is_none")]
    resumes: Option<u32>,
}

/// One `recirc(ID)`: the id, the packet sent back and, after a
/// `hash(...)`, the 32-bit hash the datapath gives it.
#[derive(serde::Serialize)]
struct RecircJson {
    id: u32,
    packet: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    dp_hash: Option<u32>,
}

/// The note of recirculation `id`'s header (taken from `pending`).
fn notes_for(pending: &mut Vec<(u32, String)>, id: u32) -> String {
    match pending.iter().position(|(i, _)| *i == id) {
        Some(k) => pending.remove(k).1,
        None => String::new(),
    }
}

/// Runs `flowpath trace`.
pub fn run(args: Args) -> Result<()> {
    let mut base = args.rules.load()?;
    if let Some(t) = args.tunnels.tunnels()? {
        base.set_tunnels(Some(t));
    }
    let mut tables = std::sync::Arc::new(base.clone());
    let bridge = args.rules.bridge()?;
    let packets: Vec<(usize, String)> = match (&args.flow, &args.packets) {
        (Some(f), _) => vec![(0, f.clone())],
        (None, Some(path)) => {
            let t = std::fs::read_to_string(path)
                .with_context(|| format!("cannot read packet file {}", path.display()))?;
            t.lines()
                .enumerate()
                .map(|(i, l)| (i + 1, l.trim().to_string()))
                .filter(|(_, l)| !l.is_empty() && !l.starts_with('#'))
                .collect()
        }
        (None, None) => bail!("give a FLOW or --packets FILE"),
    };
    let pfile = args.packets.as_ref().map(|p| p.display().to_string());
    let mut pending_notes: Vec<(u32, String)> = Vec::new();
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let mut ct_states = Vec::new();
    for f in &args.ct_next {
        let info = flowpath_flow::FieldId::CtState.info();
        // (OVS's ofproto/trace writes the flags `trk,est`.)
        let (v, m) = flowpath_flow::value::parse_value(info, &f.replace(',', "|"))
            .map_err(|e| anyhow::anyhow!("--ct-next {f}: {e}"))?;
        if m != 0xff && v & !m != 0 {
            bail!("--ct-next {f}: give the whole state (trk|est)");
        }
        ct_states.push(v as u8);
    }
    for (n, (line_no, line)) in packets.iter().enumerate() {
        // Each packet's trace takes the states from the first (as one
        // ofproto/trace call).
        let mut ct_next = ct_states.iter().copied();
        let key = parse_packet(line).map_err(|e| match &pfile {
            Some(f) => anyhow::anyhow!("{f}:{line_no}: {e}"),
            None => anyhow::anyhow!("{e}"),
        })?;
        if n > 0 && !args.json {
            writeln!(out)?;
        }
        // The packet's pass, then each `ct(table=N)` pass it leads to (as
        // OVS's ofproto/trace follows its recirculation queue).
        let mut queue = std::collections::VecDeque::from([(key, line.clone(), None::<u32>)]);
        while let Some((key, text, resumes)) = queue.pop_front() {
            let mode = XlateMode {
                trace: !args.json,
                learn: args.learn,
                ..XlateMode::default()
            };
            let x = xlate_on(&*tables, Some(&bridge), &key, 0, mode);
            if !x.learned.is_empty() {
                bridge.learned.add(x.learned.clone(), 0);
                tables = std::sync::Arc::new(base.with_added(&bridge.learned.flows()));
            }
            let mut notes = Vec::new();
            for rc in x.recirculations.iter().filter(|rc| rc.ct.is_some()) {
                let (state, note) = next_ct_state(&mut ct_next);
                let next = rc.next_key(state);
                notes.push(note);
                let text = format!("recirc_id={:#x},{}", rc.id, packet_text(&next));
                queue.push_back((next, text, Some(rc.id)));
            }
            if args.json {
                let obj = TraceJson {
                    packet: &text,
                    megaflow: x.megaflow_text(&key),
                    actions: format_actions(&x.actions),
                    error: x.error.clone(),
                    recirc: x
                        .recirculations
                        .iter()
                        .filter(|rc| rc.ct.is_none())
                        .map(|rc| RecircJson {
                            id: rc.id,
                            packet: packet_text(&rc.packet),
                            dp_hash: rc.dp_hash,
                        })
                        .collect(),
                    resumes,
                };
                writeln!(out, "{}", serde_json::to_string(&obj)?)?;
                continue;
            }
            if let Some(id) = resumes {
                let note = notes_for(&mut pending_notes, id);
                writeln!(out, "{}", resume_banner(id, &note))?;
            }
            writeln!(out, "{}", x.report(&key, &text))?;
            for (rc, note) in x
                .recirculations
                .iter()
                .filter(|rc| rc.ct.is_some())
                .zip(notes)
            {
                pending_notes.push((rc.id, note));
            }
            for rc in x.recirculations.iter().filter(|rc| rc.ct.is_none()) {
                let hash = rc
                    .dp_hash
                    .map(|h| format!("dp_hash={h:#x},"))
                    .unwrap_or_default();
                writeln!(
                    out,
                    "\nrecirc({:#x}): the datapath looks the packet up again; its next pass, \
                     traced:\n  recirc_id={:#x},{hash}{}",
                    rc.id,
                    rc.id,
                    packet_text(&rc.packet)
                )?;
            }
        }
    }
    out.flush()?;
    Ok(())
}
