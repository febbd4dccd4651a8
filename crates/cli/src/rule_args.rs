//! The rule-table options shared by `flowpath trace` and `flowpath run`:
//! the rule file, prefix tracking (all tables and per table) and the ports
//! that `ALL`/`FLOOD` reach, and loading them into [`RuleTables`]; the
//! bridge state `NORMAL` uses (ports' VLANs, MAC table size and aging).

use anyhow::{Context, Result};
use flowpath_flow::FieldId;
use flowpath_ofproto::classifier::parse_prefixes;
use flowpath_ofproto::normal::{parse_vlan_mode, Bridge, MacTable, PortVlans};
use flowpath_ofproto::parse::parse_rules;
use flowpath_ofproto::tables::{FragMode, RuleTables};
use std::path::PathBuf;

/// Rule-table options.
#[derive(clap::Args)]
pub struct RuleArgs {
    /// Rule file in `ovs-ofctl add-flows` syntax (one flow per line).
    #[arg(long, value_name = "RULES.flows")]
    pub rules: PathBuf,
    /// Group table in `ovs-ofctl add-groups` syntax (one group per line,
    /// e.g. `group_id=1,type=all,bucket=output:2,bucket=output:3`), for
    /// the rules' `group:N` actions.
    #[arg(long, value_name = "FILE.groups")]
    pub groups: Option<PathBuf>,
    /// Prefix-tracking fields, like OVS's Flow_Table:prefixes
    /// (`none`, or up to three of nw_dst, nw_src, ipv6_dst, ipv6_src).
    #[arg(long, value_name = "FIELDS", default_value = "nw_dst,nw_src")]
    pub prefixes: String,
    /// Prefix-tracking fields for one table, overriding --prefixes there:
    /// `T=FIELDS` (e.g. `1=none`, `2=ipv6_dst`); repeatable.
    #[arg(long = "table-prefixes", value_name = "T=FIELDS")]
    pub table_prefixes: Vec<String>,
    /// The bridge's ports: where ALL, FLOOD and NORMAL's flooding send
    /// (default: every port the rules name).
    #[arg(long, value_name = "P,P,...", value_delimiter = ',')]
    pub ports: Option<Vec<u32>>,
    /// 802.1Q configuration of one port for NORMAL: `N=vlan=V` (access
    /// port of VLAN V: untagged in and out) or `N=trunks=V1,V2,...` (trunk
    /// of those VLANs); ports not given trunk every VLAN. Repeatable.
    #[arg(long = "port-vlan", value_name = "N=vlan=V|N=trunks=V,...")]
    pub port_vlan: Vec<String>,
    /// Most entries of NORMAL's MAC learning table (OVS's
    /// other_config:mac-table-size); the least recently used entry makes
    /// room for a new one.
    #[arg(long, value_name = "N", default_value_t = flowpath_ofproto::normal::DEFAULT_MAC_TABLE_SIZE)]
    pub mac_table_size: usize,
    /// Seconds a learned MAC stays without traffic from it (OVS's
    /// other_config:mac-aging-time).
    #[arg(long, value_name = "S", default_value_t = flowpath_ofproto::normal::DEFAULT_MAC_AGING_S)]
    pub mac_aging: u64,
    /// The bridge has no LOCAL port (by default NORMAL floods to LOCAL
    /// too, as OVS's bridges always have one).
    #[arg(long)]
    pub no_local: bool,
    /// How IP fragments are looked up, as OVS's `ovs-ofctl set-frags`:
    /// `normal` (every fragment as if its L4 ports were 0), `drop` (every
    /// fragment dropped) or `nx-match` (a first fragment with its ports;
    /// match `nw_frag` to tell fragments apart).
    #[arg(long = "frag-mode", value_name = "MODE", default_value = "normal", value_parser = parse_frag_mode)]
    pub frag_mode: FragMode,
    /// A flow-sample collector set, as OVS's `Flow_Sample_Collector_Set`
    /// (repeatable): with any, `sample` actions sample (without, they do
    /// nothing, as in OVS). `ID=IP:PORT` names its IPFIX collector.
    #[arg(long = "sample-collector-set", value_name = "ID[=IP:PORT]", value_parser = parse_collector_set)]
    pub sample_collector_sets: Vec<flowpath_switchd::sampler::CollectorSet>,
}

/// Parses `--sample-collector-set`.
pub fn parse_collector_set(s: &str) -> Result<flowpath_switchd::sampler::CollectorSet, String> {
    s.parse()
}

/// Parses `--frag-mode`.
pub fn parse_frag_mode(s: &str) -> Result<FragMode, String> {
    s.parse()
}

impl RuleArgs {
    /// Reads and parses the rule file and builds the tables; errors name
    /// the file, line and field, or the option at fault.
    pub fn load(&self) -> Result<RuleTables> {
        let text = std::fs::read_to_string(&self.rules)
            .with_context(|| format!("cannot read rule file {}", self.rules.display()))?;
        let name = self.rules.display().to_string();
        let rules = parse_rules(&text, Some(&name))?;
        let prefixes = parse_prefixes(&self.prefixes).context("--prefixes")?;
        let per_table = parse_table_prefixes(&self.table_prefixes)?;
        let mut tables = RuleTables::with_table_prefixes(rules, &prefixes, &per_table);
        if let Some(p) = &self.ports {
            tables.set_ports(p.clone());
        }
        tables.set_frag_mode(self.frag_mode);
        tables.set_sampling(!self.sample_collector_sets.is_empty());
        tables
            .set_groups(load_groups(self.groups.as_deref())?)
            .map_err(|e| anyhow::anyhow!("{name}: {e}"))?;
        Ok(tables)
    }
}

impl RuleArgs {
    /// The bridge state NORMAL uses: an empty learning table of the given
    /// size and aging, the ports' VLANs, LOCAL or not.
    pub fn bridge(&self) -> Result<Bridge> {
        let mut vlans = PortVlans::default();
        for item in &self.port_vlan {
            let (n, mode) = item.split_once('=').with_context(|| {
                format!("--port-vlan '{item}': expected N=vlan=V or N=trunks=V1,V2")
            })?;
            let n: u32 = n
                .trim()
                .parse()
                .ok()
                .filter(|n| (1..0xff00).contains(n))
                .with_context(|| {
                    format!("--port-vlan '{item}': '{n}' is not a port number (1 to 65279)")
                })?;
            let mode =
                parse_vlan_mode(mode).map_err(|e| anyhow::anyhow!("--port-vlan '{item}': {e}"))?;
            vlans.set(n, mode);
        }
        if self.mac_table_size == 0 {
            anyhow::bail!("--mac-table-size must be at least 1");
        }
        Ok(Bridge::new(
            MacTable::new(self.mac_table_size, self.mac_aging),
            vlans,
            !self.no_local,
        ))
    }
}

/// Reads a groups file (none: no groups); errors name the file and line.
pub fn load_groups(path: Option<&std::path::Path>) -> Result<Vec<flowpath_ofproto::group::Group>> {
    let Some(path) = path else {
        return Ok(Vec::new());
    };
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read groups file {}", path.display()))?;
    Ok(flowpath_ofproto::group::parse_groups(
        &text,
        Some(&path.display().to_string()),
    )?)
}

/// Parses `--table-prefixes T=FIELDS` values.
pub fn parse_table_prefixes(items: &[String]) -> Result<Vec<(u8, Vec<FieldId>)>> {
    let mut out = Vec::new();
    for item in items {
        let (t, fields) = item.split_once('=').with_context(|| {
            format!("--table-prefixes '{item}': expected T=FIELDS, e.g. 1=nw_dst")
        })?;
        let t: u8 = t
            .trim()
            .parse()
            .ok()
            .filter(|t| *t < 255)
            .with_context(|| {
                format!("--table-prefixes '{item}': '{t}' is not a table number (0 to 254)")
            })?;
        let f = parse_prefixes(fields).with_context(|| format!("--table-prefixes '{item}'"))?;
        out.push((t, f));
    }
    Ok(out)
}
