//! A TRex stateful traffic profile (`cap_info` YAML, e.g.
//! `sfr_delay_10_1g.yaml`) parsed into [`SfrProfile`]. No I/O: the caller
//! reads the text and resolves the templates' capture names.
//!
//! The YAML is read through `yaml-rust2`'s event API into a small tree that
//! keeps each node's line and column, so every error names the file, the
//! line, the field (`cap_info[3].cps`) and the offending value. Fields TRex
//! knows but this generator does not honour are accepted and listed in
//! [`SfrProfile::ignored`]; a field TRex does not know is an error (a typo
//! would otherwise silently change nothing).

use std::fmt;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};

use yaml_rust2::parser::{Event, MarkedEventReceiver, Parser};
use yaml_rust2::scanner::Marker;

/// The parts of a profile the expansion uses.
#[derive(Debug, Clone)]
pub struct SfrProfile {
    /// The profile's `duration` in seconds, if it has one.
    pub duration: Option<f64>,
    /// `generator.clients_start ..= clients_end`.
    pub clients: (Ipv4Addr, Ipv4Addr),
    /// `generator.servers_start ..= servers_end`.
    pub servers: (Ipv4Addr, Ipv4Addr),
    /// `mac`: the client side's Ethernet address (the server side's is it
    /// with the last byte + 1).
    pub mac: [u8; 6],
    /// `cap_ipg`: packet gaps from the captures (true) or `ipg`/`rtt`.
    pub cap_ipg: bool,
    /// `cap_ipg_min` (µs): with `cap_ipg`, shorter gaps become
    /// `cap_override_ipg`.
    pub cap_ipg_min: Option<f64>,
    /// `cap_override_ipg` (µs).
    pub cap_override_ipg: Option<f64>,
    /// The templates, in file order.
    pub templates: Vec<TemplateSpec>,
    /// Fields present but not honoured, as `field=value`.
    pub ignored: Vec<String>,
}

/// One `cap_info` entry.
#[derive(Debug, Clone)]
pub struct TemplateSpec {
    /// `name` as written (TRex's path, e.g. `avl/delay_10_dns_0.pcap`).
    pub name: String,
    /// Line and column of the name, for errors about its capture.
    pub name_at: (usize, usize),
    /// New copies per second at multiplier 1.
    pub cps: f64,
    /// Gap between packets of one direction without `cap_ipg`, µs.
    pub ipg_us: Option<f64>,
    /// Gap when the direction changes without `cap_ipg`, µs.
    pub rtt_us: Option<f64>,
}

/// A profile error: the file, where in it, and what is wrong.
#[derive(Debug)]
pub struct ProfileError {
    /// The profile.
    pub path: PathBuf,
    /// Line, 1-based (0: the whole file).
    pub line: usize,
    /// Column, 1-based.
    pub col: usize,
    /// The field, as `cap_info[3].cps` (empty: none in particular).
    pub field: String,
    /// What is wrong, with the value.
    pub reason: String,
}

impl fmt::Display for ProfileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}: ", self.path.display(), self.line, self.col)?;
        if !self.field.is_empty() {
            write!(f, "{}: ", self.field)?;
        }
        f.write_str(&self.reason)
    }
}

impl std::error::Error for ProfileError {}

/// A YAML node with its position.
#[derive(Debug, Clone)]
enum Node {
    Scalar(String, Marker),
    Seq(Vec<Node>, Marker),
    Map(Vec<(String, Marker, Node)>, Marker),
}

impl Node {
    /// Where the node starts (a mapping: its first key; the parser's own
    /// mark for a block mapping lies after that key).
    fn mark(&self) -> Marker {
        match self {
            Node::Map(entries, m) => entries.first().map_or(*m, |(_, km, _)| *km),
            Node::Scalar(_, m) | Node::Seq(_, m) => *m,
        }
    }
}

/// Builds [`Node`]s from parser events.
#[derive(Default)]
struct TreeBuilder {
    stack: Vec<Node>,
    /// Pending keys of the open mappings (None: next scalar is a key).
    keys: Vec<Option<(String, Marker)>>,
    docs: Vec<Node>,
    error: Option<(Marker, String)>,
}

impl TreeBuilder {
    fn push_value(&mut self, node: Node) {
        match self.stack.last_mut() {
            None => self.docs.push(node),
            Some(Node::Seq(items, _)) => items.push(node),
            Some(Node::Map(entries, _)) => {
                // A mapping always has a `keys` slot while it is open.
                let slot = self.keys.last_mut().expect("open mapping has a key slot");
                match slot.take() {
                    Some((k, km)) => entries.push((k, km, node)),
                    None => match node {
                        Node::Scalar(k, km) => *slot = Some((k, km)),
                        other => {
                            if self.error.is_none() {
                                self.error =
                                    Some((other.mark(), "a key must be a plain scalar".into()));
                            }
                            *slot = Some((String::new(), other.mark()));
                        }
                    },
                }
            }
            Some(Node::Scalar(..)) => {}
        }
    }
}

impl MarkedEventReceiver for TreeBuilder {
    fn on_event(&mut self, ev: Event, mark: Marker) {
        match ev {
            Event::Scalar(v, ..) => self.push_value(Node::Scalar(v, mark)),
            Event::SequenceStart(..) => self.stack.push(Node::Seq(Vec::new(), mark)),
            Event::MappingStart(..) => {
                self.stack.push(Node::Map(Vec::new(), mark));
                self.keys.push(None);
            }
            Event::SequenceEnd | Event::MappingEnd => {
                if matches!(ev, Event::MappingEnd) {
                    self.keys.pop();
                }
                if let Some(n) = self.stack.pop() {
                    self.push_value(n);
                }
            }
            Event::Alias(_) => {
                if self.error.is_none() {
                    self.error = Some((mark, "YAML aliases are not supported".into()));
                }
                self.push_value(Node::Scalar(String::new(), mark));
            }
            _ => {}
        }
    }
}

/// Parses profile text; `path` names it in errors.
pub fn parse(text: &str, path: &Path) -> Result<SfrProfile, ProfileError> {
    let mut b = TreeBuilder::default();
    let mut parser = Parser::new_from_str(text);
    if let Err(e) = parser.load(&mut b, false) {
        let m = e.marker();
        return Err(ProfileError {
            path: path.to_path_buf(),
            line: m.line(),
            col: m.col() + 1,
            field: String::new(),
            reason: format!("not valid YAML: {}", e.info()),
        });
    }
    let cx = Cx { path };
    if let Some((m, reason)) = b.error {
        return Err(cx.err(m, "", reason));
    }
    let Some(doc) = b.docs.into_iter().next() else {
        return Err(cx.err_at(1, 1, "", "empty profile".into()));
    };
    // TRex profiles are a list holding one mapping (`- duration: ...`).
    let top = match doc {
        Node::Seq(mut items, m) => {
            if items.len() != 1 {
                return Err(cx.err(
                    m,
                    "",
                    format!("expected a list of one mapping, got {} items", items.len()),
                ));
            }
            items.remove(0)
        }
        other => other,
    };
    cx.profile(&top)
}

/// Error context: the profile's path.
struct Cx<'a> {
    path: &'a Path,
}

const TOP_FIELDS: &[&str] = &[
    "duration",
    "generator",
    "mac",
    "cap_ipg",
    "cap_ipg_min",
    "cap_override_ipg",
    "cap_info",
];
const GENERATOR_FIELDS: &[&str] = &[
    "distribution",
    "clients_start",
    "clients_end",
    "servers_start",
    "servers_end",
    "clients_per_gb",
    "min_clients",
    "dual_port_mask",
    "tcp_aging",
    "udp_aging",
];
const CAP_FIELDS: &[&str] = &[
    "name",
    "cps",
    "ipg",
    "rtt",
    "w",
    "one_app_server",
    "plugin_id",
];

impl Cx<'_> {
    fn err(&self, m: Marker, field: &str, reason: String) -> ProfileError {
        self.err_at(m.line(), m.col() + 1, field, reason)
    }

    fn err_at(&self, line: usize, col: usize, field: &str, reason: String) -> ProfileError {
        ProfileError {
            path: self.path.to_path_buf(),
            line,
            col,
            field: field.to_string(),
            reason,
        }
    }

    /// The entries of a mapping, every key checked against `known`.
    fn map<'n>(
        &self,
        n: &'n Node,
        field: &str,
        known: &[&str],
    ) -> Result<&'n [(String, Marker, Node)], ProfileError> {
        let Node::Map(entries, _) = n else {
            return Err(self.err(n.mark(), field, "expected a mapping".into()));
        };
        for (k, km, _) in entries {
            if !known.contains(&k.as_str()) {
                let f = join(field, k);
                return Err(self.err(
                    *km,
                    &f,
                    format!("unknown field (known: {})", known.join(", ")),
                ));
            }
        }
        Ok(entries)
    }

    fn scalar<'n>(&self, n: &'n Node, field: &str) -> Result<&'n str, ProfileError> {
        match n {
            Node::Scalar(s, _) => Ok(s.trim()),
            _ => Err(self.err(n.mark(), field, "expected a single value".into())),
        }
    }

    fn number(
        &self,
        n: &Node,
        field: &str,
        min_exclusive: Option<f64>,
    ) -> Result<f64, ProfileError> {
        let s = self.scalar(n, field)?;
        let v = parse_number(s)
            .ok_or_else(|| self.err(n.mark(), field, format!("expected a number, got '{s}'")))?;
        if let Some(min) = min_exclusive {
            if v.partial_cmp(&min) != Some(std::cmp::Ordering::Greater) {
                return Err(self.err(
                    n.mark(),
                    field,
                    format!("expected a number above {min}, got '{s}'"),
                ));
            }
        } else if v < 0.0 {
            return Err(self.err(
                n.mark(),
                field,
                format!("expected a number >= 0, got '{s}'"),
            ));
        }
        Ok(v)
    }

    fn ipv4(&self, n: &Node, field: &str) -> Result<Ipv4Addr, ProfileError> {
        let s = self.scalar(n, field)?;
        s.parse().map_err(|_| {
            self.err(
                n.mark(),
                field,
                format!("expected an IPv4 address, got '{s}'"),
            )
        })
    }

    fn boolean(&self, n: &Node, field: &str) -> Result<bool, ProfileError> {
        match self.scalar(n, field)? {
            "true" | "True" | "TRUE" | "yes" => Ok(true),
            "false" | "False" | "FALSE" | "no" => Ok(false),
            s => Err(self.err(
                n.mark(),
                field,
                format!("expected true or false, got '{s}'"),
            )),
        }
    }

    fn profile(&self, top: &Node) -> Result<SfrProfile, ProfileError> {
        let entries = self.map(top, "", TOP_FIELDS)?;
        let get = |k: &str| entries.iter().find(|(key, ..)| key == k).map(|(_, _, n)| n);
        let mut ignored = Vec::new();
        let duration = get("duration")
            .map(|n| self.number(n, "duration", Some(0.0)))
            .transpose()?;
        let gen = get("generator").ok_or_else(|| {
            self.err(
                top.mark(),
                "generator",
                "missing (the client and server ranges)".into(),
            )
        })?;
        let gen_entries = self.map(gen, "generator", GENERATOR_FIELDS)?;
        let gget = |k: &str| {
            gen_entries
                .iter()
                .find(|(key, ..)| key == k)
                .map(|(_, _, n)| n)
        };
        let range = |a: &str, b: &str| -> Result<(Ipv4Addr, Ipv4Addr), ProfileError> {
            let fa = format!("generator.{a}");
            let fb = format!("generator.{b}");
            let na = gget(a).ok_or_else(|| self.err(gen.mark(), &fa, "missing".into()))?;
            let nb = gget(b).ok_or_else(|| self.err(gen.mark(), &fb, "missing".into()))?;
            let (lo, hi) = (self.ipv4(na, &fa)?, self.ipv4(nb, &fb)?);
            if u32::from(hi) < u32::from(lo) {
                return Err(self.err(nb.mark(), &fb, format!("{hi} is below {a} {lo}")));
            }
            Ok((lo, hi))
        };
        let clients = range("clients_start", "clients_end")?;
        let servers = range("servers_start", "servers_end")?;
        if let Some(n) = gget("distribution") {
            let d = self.scalar(n, "generator.distribution")?;
            if d != "seq" {
                return Err(self.err(
                    n.mark(),
                    "generator.distribution",
                    format!("only \"seq\" is supported, got '{d}'"),
                ));
            }
        }
        for (k, _, n) in gen_entries {
            let v = self.scalar(n, k).unwrap_or("...");
            // Aging 0 (no hold after a flow's last packet) is what the
            // expansion does anyway.
            let honoured = match k.as_str() {
                "distribution" | "clients_start" | "clients_end" | "servers_start"
                | "servers_end" => true,
                "tcp_aging" | "udp_aging" => parse_number(v) == Some(0.0),
                _ => false,
            };
            if !honoured {
                ignored.push(format!("generator.{k}={v}"));
            }
        }
        let mac = match get("mac") {
            None => [0, 0, 0, 1, 0, 0],
            Some(n) => self.mac(n)?,
        };
        let cap_ipg = get("cap_ipg")
            .map(|n| self.boolean(n, "cap_ipg"))
            .transpose()?
            .unwrap_or(false);
        let cap_ipg_min = get("cap_ipg_min")
            .map(|n| self.number(n, "cap_ipg_min", None))
            .transpose()?;
        let cap_override_ipg = get("cap_override_ipg")
            .map(|n| self.number(n, "cap_override_ipg", None))
            .transpose()?;
        if cap_ipg_min.is_some() != cap_override_ipg.is_some() {
            let (k, n) = match get("cap_ipg_min") {
                Some(n) => ("cap_override_ipg", n),
                None => ("cap_ipg_min", get("cap_override_ipg").unwrap_or(top)),
            };
            return Err(self.err(
                n.mark(),
                k,
                "missing (cap_ipg_min and cap_override_ipg go together)".into(),
            ));
        }
        let caps = get("cap_info")
            .ok_or_else(|| self.err(top.mark(), "cap_info", "missing (the templates)".into()))?;
        let Node::Seq(items, m) = caps else {
            return Err(self.err(
                caps.mark(),
                "cap_info",
                "expected a list of templates".into(),
            ));
        };
        if items.is_empty() {
            return Err(self.err(*m, "cap_info", "no templates".into()));
        }
        let mut templates = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            templates.push(self.template(item, i, cap_ipg, &mut ignored)?);
        }
        Ok(SfrProfile {
            duration,
            clients,
            servers,
            mac,
            cap_ipg,
            cap_ipg_min,
            cap_override_ipg,
            templates,
            ignored,
        })
    }

    fn mac(&self, n: &Node) -> Result<[u8; 6], ProfileError> {
        let Node::Seq(items, m) = n else {
            return Err(self.err(n.mark(), "mac", "expected a list of 6 bytes".into()));
        };
        if items.len() != 6 {
            return Err(self.err(*m, "mac", format!("expected 6 bytes, got {}", items.len())));
        }
        let mut mac = [0u8; 6];
        for (i, item) in items.iter().enumerate() {
            let f = format!("mac[{i}]");
            let s = self.scalar(item, &f)?;
            mac[i] = parse_number(s)
                .filter(|v| v.fract() == 0.0 && (0.0..=255.0).contains(v))
                .map(|v| v as u8)
                .ok_or_else(|| {
                    self.err(
                        item.mark(),
                        &f,
                        format!("expected a byte (0..=255), got '{s}'"),
                    )
                })?;
        }
        Ok(mac)
    }

    fn template(
        &self,
        item: &Node,
        i: usize,
        cap_ipg: bool,
        ignored: &mut Vec<String>,
    ) -> Result<TemplateSpec, ProfileError> {
        let field = format!("cap_info[{i}]");
        let entries = self.map(item, &field, CAP_FIELDS)?;
        let get = |k: &str| entries.iter().find(|(key, ..)| key == k).map(|(_, _, n)| n);
        let need = |k: &str| {
            get(k).ok_or_else(|| self.err(item.mark(), &join(&field, k), "missing".into()))
        };
        let name_node = need("name")?;
        let name = self.scalar(name_node, &join(&field, "name"))?.to_string();
        let cps = self.number(need("cps")?, &join(&field, "cps"), Some(0.0))?;
        let (mut ipg_us, mut rtt_us) = (None, None);
        for k in ["ipg", "rtt"] {
            let v = match get(k) {
                Some(n) => Some(self.number(n, &join(&field, k), None)?),
                None if !cap_ipg => {
                    return Err(self.err(
                        item.mark(),
                        &join(&field, k),
                        "missing (cap_ipg is false)".into(),
                    ))
                }
                None => None,
            };
            if k == "ipg" {
                ipg_us = v;
            } else {
                rtt_us = v;
            }
        }
        if let Some(n) = get("w") {
            let w = self.number(n, &join(&field, "w"), Some(0.0))?;
            if w != 1.0 {
                return Err(self.err(
                    n.mark(),
                    &join(&field, "w"),
                    format!("only w: 1 (no bursts) is supported, got '{w}'"),
                ));
            }
        }
        if let Some(n) = get("one_app_server") {
            // false (a server address per copy) is what the expansion does.
            if self.boolean(n, &join(&field, "one_app_server"))? {
                ignored.push(format!("{}=true", join(&field, "one_app_server")));
            }
        }
        if let Some(n) = get("plugin_id") {
            ignored.push(format!(
                "{}={}",
                join(&field, "plugin_id"),
                self.scalar(n, "plugin_id").unwrap_or("...")
            ));
        }
        let m = name_node.mark();
        Ok(TemplateSpec {
            name,
            name_at: (m.line(), m.col() + 1),
            cps,
            ipg_us,
            rtt_us,
        })
    }
}

fn join(field: &str, key: &str) -> String {
    if field.is_empty() {
        key.to_string()
    } else {
        format!("{field}.{key}")
    }
}

/// A YAML number: decimal (fractions allowed) or `0x` hexadecimal.
fn parse_number(s: &str) -> Option<f64> {
    if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        return u64::from_str_radix(h, 16).ok().map(|v| v as f64);
    }
    s.parse::<f64>().ok().filter(|v| v.is_finite())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(text: &str) -> String {
        parse(text, Path::new("/nonexistent/p.yaml"))
            .unwrap_err()
            .to_string()
    }

    const GEN: &str = "- duration: 1\n  generator:\n    distribution: seq\n    clients_start: 16.0.0.1\n    clients_end: 16.0.0.9\n    servers_start: 48.0.0.1\n    servers_end: 48.0.0.9\n";

    #[test]
    fn bad_cps_names_line_field_and_value() {
        let e = err(&format!(
            "{GEN}  cap_info:\n    - name: x.pcap\n      cps: abc\n"
        ));
        assert_eq!(
            e,
            "/nonexistent/p.yaml:10:12: cap_info[0].cps: expected a number, got 'abc'"
        );
    }

    #[test]
    fn unknown_field_and_bad_address() {
        let e = err(&format!("{GEN}  cap_inf: []\n"));
        assert!(e.contains(":8:3: cap_inf: unknown field"), "{e}");
        let e = err(&GEN.replace("48.0.0.9", "48.0.0.x"));
        assert!(
            e.contains(":7:18: generator.servers_end: expected an IPv4 address, got '48.0.0.x'"),
            "{e}"
        );
        let e = err(&GEN.replace("seq", "random"));
        assert!(e.contains("generator.distribution: only \"seq\""), "{e}");
    }

    #[test]
    fn template_name_is_located() {
        let text =
            format!("{GEN}  cap_ipg: true\n  cap_info:\n    - name: avl/x.pcap\n      cps: 1\n");
        let p = parse(&text, Path::new("p.yaml")).expect("parses");
        assert_eq!(p.templates[0].name, "avl/x.pcap");
        assert_eq!(p.templates[0].name_at, (10, 13));
        assert!(p.cap_ipg);
    }

    #[test]
    fn gaps_need_ipg_and_rtt_without_cap_ipg() {
        let e = err(&format!(
            "{GEN}  cap_info:\n    - name: x.pcap\n      cps: 1\n"
        ));
        assert!(
            e.contains(":9:7: cap_info[0].ipg: missing (cap_ipg is false)"),
            "{e}"
        );
    }

    #[test]
    fn not_yaml() {
        let e = err("- a: [1\n");
        assert!(e.starts_with("/nonexistent/p.yaml:"), "{e}");
        assert!(e.contains("not valid YAML"), "{e}");
    }

    #[test]
    fn numbers() {
        assert_eq!(parse_number("0x1f"), Some(31.0));
        assert_eq!(parse_number("404.52"), Some(404.52));
        assert_eq!(parse_number("inf"), None);
    }
}
