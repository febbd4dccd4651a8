//! The rule-table options shared by `flowpath trace` and `flowpath run`:
//! the rule file, prefix tracking (all tables and per table) and the ports
//! that `ALL`/`FLOOD` reach, and loading them into [`RuleTables`].

use anyhow::{Context, Result};
use flowpath_flow::FieldId;
use flowpath_ofproto::classifier::parse_prefixes;
use flowpath_ofproto::parse::parse_rules;
use flowpath_ofproto::tables::RuleTables;
use std::path::PathBuf;

/// Rule-table options.
#[derive(clap::Args)]
pub struct RuleArgs {
    /// Rule file in `ovs-ofctl add-flows` syntax (one flow per line).
    #[arg(long, value_name = "RULES.flows")]
    pub rules: PathBuf,
    /// Prefix-tracking fields, like OVS's Flow_Table:prefixes
    /// (`none`, or up to three of nw_dst, nw_src, ipv6_dst, ipv6_src).
    #[arg(long, value_name = "FIELDS", default_value = "nw_dst,nw_src")]
    pub prefixes: String,
    /// Prefix-tracking fields for one table, overriding --prefixes there:
    /// `T=FIELDS` (e.g. `1=none`, `2=ipv6_dst`); repeatable.
    #[arg(long = "table-prefixes", value_name = "T=FIELDS")]
    pub table_prefixes: Vec<String>,
    /// Ports that ALL and FLOOD send to (default: every port the rules name).
    #[arg(long, value_name = "P,P,...", value_delimiter = ',')]
    pub ports: Option<Vec<u32>>,
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
        Ok(tables)
    }
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
