//! OpenFlow groups, read in `ovs-ofctl add-group(s)` syntax.
//!
//! What: [`Group`] is a group table entry — an id, a type and buckets of
//! actions; [`parse_group`] reads one (`group_id=1,type=all,bucket=output:1,
//! bucket=output:2`), [`parse_groups`] a groups file (one per line, `#`
//! comments, `\` continuations, all or nothing, errors naming file and
//! line). The `group:N` action ([`crate::action::Action::Group`]) sends the
//! packet through a group; translation ([`crate::xlate`]) gives the types
//! OVS's meaning:
//! - `all`: every bucket, each on the packet as it was before the group;
//! - `indirect`: the one bucket;
//! - `ff` / `fast_failover`: the first bucket whose `watch_port` is a port
//!   of the bridge (or whose `watch_group` has such a bucket), none if no
//!   bucket is live;
//! - `select`: one bucket, weighted, chosen as OVS 3.1 chooses it:
//!   - by default (no `selection_method`) and with
//!     `selection_method=dp_hash`, in the datapath: the first translation
//!     emits `hash(sym_l4(0))` (`hash(l4(B))` for `dp_hash`, B from
//!     `selection_method_param`) and `recirc(ID)` ([`crate::recirc`]); the
//!     recirculated packet's translation picks the bucket that the low
//!     bits of its `dp_hash` name in a table of 16 to 256 slots filled by
//!     Webster's method from the weights ([`DpHashTable`]), those bits
//!     significant in its megaflow. OVS falls back to the next method
//!     when the weights need more than 256 slots, and so does flowpath;
//!   - otherwise (and with `selection_method=hash` without fields), in the
//!     slow path by a hash of the packet's symmetric 5-tuple, or of
//!     `fields(...)` with `selection_method=hash`; the hashed fields become
//!     exact in the megaflow. The hashes are OVS's own functions
//!     ([`flowpath_flow::ovs_hash`]: its symmetric-L4 hash, or
//!     `hash_bytes` over the fields' values under their masks in OVS's
//!     field order, then the bucket with the highest
//!     `hash_int(bucket_id, hash)` × weight), so a packet takes the bucket
//!     it takes in OVS (checked against OVS 3.1).
//!
//! Thread-safety: plain data (part of the immutable rule tables).

use crate::action::{parse_bucket_actions, Action};
use crate::rule::RuleError;
use flowpath_flow::field::{self, FieldId};
use flowpath_flow::value::parse_uint;
use std::fmt;

/// A group's type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GroupType {
    /// Every bucket.
    All,
    /// One bucket, chosen by a hash of the packet.
    Select,
    /// The only bucket.
    Indirect,
    /// The first live bucket.
    FastFailover,
}

impl GroupType {
    fn name(self) -> &'static str {
        match self {
            GroupType::All => "all",
            GroupType::Select => "select",
            GroupType::Indirect => "indirect",
            GroupType::FastFailover => "ff",
        }
    }
}

/// One bucket of a group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Bucket {
    /// `bucket_id:` (its position when not given).
    pub id: u32,
    /// `weight:` (select groups; 1 when not given).
    pub weight: u16,
    /// `watch_port:` (fast-failover liveness).
    pub watch_port: Option<u32>,
    /// `watch_group:` (fast-failover liveness).
    pub watch_group: Option<u32>,
    /// Its actions.
    pub actions: Vec<Action>,
}

/// A select group's datapath-hash table (OVS's `dp_hash` selection
/// method): slot `dp_hash & mask` names a bucket.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DpHashTable {
    /// The hash's bits read: the number of slots minus one.
    pub mask: u32,
    /// Each slot's bucket (an index into the group's buckets).
    pub slots: Vec<u16>,
    /// The datapath hash is symmetric (`sym_l4`) or not (`l4`).
    pub symmetric: bool,
    /// The datapath hash's basis.
    pub basis: u32,
}

impl DpHashTable {
    /// The table for `buckets`' weights, as OVS 3.1 builds it: as many
    /// slots as the smallest weight needs to get one (total weight over
    /// smallest non-zero weight, rounded up to a power of two, at least 16),
    /// shared out by Webster's method (each slot to the bucket with the
    /// highest weight / (2 × slots so far + 1), the first on ties). `None`
    /// when no bucket has weight or more than `max` slots (at most 256)
    /// would be needed.
    pub fn build(buckets: &[Bucket], max: u64, symmetric: bool, basis: u32) -> Option<Self> {
        let total: u64 = buckets.iter().map(|b| u64::from(b.weight)).sum();
        let min = buckets.iter().map(|b| b.weight).filter(|w| *w > 0).min()?;
        if total == 0 || buckets.len() > usize::from(u16::MAX) {
            return None;
        }
        let n = total.div_ceil(u64::from(min)).next_power_of_two().max(16);
        if n > 256 || n > max {
            return None;
        }
        let mut divisor: Vec<u32> = vec![1; buckets.len()];
        let mut value: Vec<f64> = buckets.iter().map(|b| f64::from(b.weight)).collect();
        let mut slots = Vec::with_capacity(n as usize);
        for _ in 0..n {
            let mut w = 0;
            for i in 1..buckets.len() {
                if value[i] > value[w] {
                    w = i;
                }
            }
            divisor[w] += 2;
            value[w] = f64::from(buckets[w].weight) / f64::from(divisor[w]);
            slots.push(w as u16);
        }
        Some(DpHashTable {
            mask: (n - 1) as u32,
            slots,
            symmetric,
            basis,
        })
    }
}

/// One field of a select group's `fields(...)`: OVS hashes its value
/// (as the field's bytes, in network order) under `mask` and makes those
/// bits significant. The VLAN fields are OXM's (`dl_vlan` and
/// `dl_vlan_pcp` are refused): [`FieldId::VlanVid`], the VID with the
/// present bit 0x1000, and [`FieldId::DlVlanPcp`] standing for `vlan_pcp`,
/// which needs a tag.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SelectField {
    /// The field.
    pub id: FieldId,
    /// The mask (field units; `fields(ip_src=255.255.255.0)`), all ones
    /// by default.
    pub mask: u128,
}

impl SelectField {
    fn parse(item: &str) -> Result<SelectField, RuleError> {
        let (name, mask) = match item.split_once('=') {
            Some((n, m)) => (n.trim(), Some(m.trim())),
            None => (item, None),
        };
        let f = field::lookup(name)
            .filter(|f| f.id != FieldId::VlanTci1)
            .ok_or_else(|| err("fields", format!("{item}: unknown field {name}")))?;
        // OpenFlow's group property has no encoding for the OpenFlow
        // 1.0 VLAN fields: OVS 3.1 refuses dl_vlan_pcp, and silently
        // hashes in_port for dl_vlan (checked with ovs-ofctl dump-groups).
        // flowpath refuses both.
        if matches!(name, "dl_vlan" | "dl_vlan_pcp") {
            let oxm = if name == "dl_vlan" {
                "vlan_vid"
            } else {
                "vlan_pcp"
            };
            return Err(err(
                "fields",
                format!(
                    "{item}: OVS cannot hash {name} in a group (OVS 3.1 refuses dl_vlan_pcp \
                     and hashes in_port for dl_vlan): use {oxm}"
                ),
            ));
        }
        let mut sf = SelectField { id: f.id, mask: 0 };
        sf.mask = sf.full_mask();
        if let Some(m) = mask.filter(|m| !m.is_empty()) {
            let (v, _) = flowpath_flow::value::parse_value(f, m)
                .map_err(|e| err("fields", format!("{item}: {e}")))?;
            if v == 0 {
                return Err(err(
                    "fields",
                    format!("{item}: values are wildcards here and must not be all-zeros"),
                ));
            }
            sf.mask = v & sf.full_mask();
        }
        Ok(sf)
    }

    /// Its name (the OXM one for the VLAN fields).
    pub fn name(&self) -> &'static str {
        match self.id {
            FieldId::DlVlanPcp => "vlan_pcp",
            id => id.info().name,
        }
    }

    /// All the field's value bits (`vlan_vid`: the VID and the present
    /// bit).
    pub fn full_mask(&self) -> u128 {
        self.id.info().full_mask()
    }

    /// The field's place in OVS's field numbering (`enum mf_field_id`),
    /// which orders a select group's hash.
    pub fn rank(&self) -> u16 {
        use FieldId as F;
        match self.id {
            F::ConjId => 3,
            F::TunId => 4,
            F::TunSrc => 5,
            F::TunDst => 6,
            F::TunIpv6Src => 7,
            F::TunIpv6Dst => 8,
            // The last tunnel fields share one rank (OVS: 9 and on).
            F::TunFlags | F::TunTtl | F::TunTos | F::TunGbpId | F::TunGbpFlags => 9,
            F::TunMetadata0
            | F::TunMetadata1
            | F::TunMetadata2
            | F::TunMetadata3
            | F::TunMetadata4
            | F::TunMetadata5
            | F::TunMetadata6
            | F::TunMetadata7 => 9,
            F::Metadata => 10,
            F::InPort => 11,
            F::PktMark => 14,
            // The connection-tracking fields come next in OVS's numbering
            // (five ranks here: the last ones share one).
            F::CtState => 15,
            F::CtZone => 16,
            F::CtMark => 17,
            F::CtLabel => 18,
            F::CtNwProto
            | F::CtNwSrc
            | F::CtNwDst
            | F::CtIpv6Src
            | F::CtIpv6Dst
            | F::CtTpSrc
            | F::CtTpDst => 19,
            F::Reg0 => 20,
            F::Reg1 => 21,
            F::Reg2 => 22,
            F::Reg3 => 23,
            F::Reg4 => 24,
            F::Reg5 => 25,
            F::Reg6 => 26,
            F::Reg7 => 27,
            F::Reg8 => 28,
            F::Reg9 => 29,
            F::Reg10 => 30,
            F::Reg11 => 31,
            F::Reg12 => 32,
            F::Reg13 => 33,
            F::Reg14 => 34,
            F::Reg15 => 35,
            F::Xreg0 => 36,
            F::Xreg1 => 37,
            F::Xreg2 => 38,
            F::Xreg3 => 39,
            F::Xreg4 => 40,
            F::Xreg5 => 41,
            F::Xreg6 => 42,
            F::Xreg7 => 43,
            F::Xxreg0 => 44,
            F::Xxreg1 => 45,
            F::Xxreg2 => 46,
            F::Xxreg3 => 47,
            F::EthSrc => 50,
            F::EthDst => 51,
            F::EthType => 52,
            F::VlanTci => 53,
            F::DlVlan => 54,
            F::VlanVid => 55,
            F::DlVlanPcp => 57,
            F::MplsLabel => 58,
            F::MplsTc => 59,
            F::MplsBos => 60,
            F::MplsTtl => 61,
            F::NwSrc => 62,
            F::NwDst => 63,
            F::Ipv6Src => 64,
            F::Ipv6Dst => 65,
            F::Ipv6Label => 66,
            F::NwProto => 67,
            F::NwTos => 68,
            F::IpDscp => 69,
            F::NwEcn => 70,
            F::NwTtl => 71,
            F::NwFrag => 72,
            F::ArpOp => 73,
            F::ArpSpa => 74,
            F::ArpTpa => 75,
            F::ArpSha => 76,
            F::ArpTha => 77,
            F::TpSrc | F::TcpSrc => 78,
            F::TpDst | F::TcpDst => 79,
            F::TcpFlags => 80,
            F::UdpSrc => 81,
            F::UdpDst => 82,
            F::SctpSrc => 83,
            F::SctpDst => 84,
            F::IcmpType => 85,
            F::IcmpCode => 86,
            F::Icmpv6Type => 87,
            F::Icmpv6Code => 88,
            F::NdTarget => 89,
            F::NdSll => 90,
            F::NdTll => 91,
            F::NdReserved => 92,
            F::NdOptionsType => 93,
            F::VlanTci1 => 200,
        }
    }

    /// How many bytes OVS's value of the field has (`mf_field.n_bytes`).
    pub fn n_bytes(&self) -> usize {
        use FieldId as F;
        match self.id {
            F::DlVlanPcp
            | F::MplsTc
            | F::MplsBos
            | F::MplsTtl
            | F::NwProto
            | F::NwTos
            | F::IpDscp
            | F::NwEcn
            | F::NwTtl
            | F::NwFrag
            | F::IcmpType
            | F::IcmpCode
            | F::Icmpv6Type
            | F::Icmpv6Code
            | F::NdOptionsType => 1,
            F::InPort
            | F::EthType
            | F::VlanTci
            | F::VlanTci1
            | F::DlVlan
            | F::VlanVid
            | F::ArpOp
            | F::TpSrc
            | F::TpDst
            | F::TcpSrc
            | F::TcpDst
            | F::UdpSrc
            | F::UdpDst
            | F::SctpSrc
            | F::SctpDst
            | F::TcpFlags => 2,
            F::EthSrc | F::EthDst | F::ArpSha | F::ArpTha | F::NdSll | F::NdTll => 6,
            F::Metadata
            | F::TunId
            | F::Xreg0
            | F::Xreg1
            | F::Xreg2
            | F::Xreg3
            | F::Xreg4
            | F::Xreg5
            | F::Xreg6
            | F::Xreg7 => 8,
            F::Ipv6Src
            | F::Ipv6Dst
            | F::TunIpv6Src
            | F::TunIpv6Dst
            | F::NdTarget
            | F::Xxreg0
            | F::Xxreg1
            | F::Xxreg2
            | F::Xxreg3 => 16,
            _ => 4,
        }
    }
}

/// A group table entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Group {
    /// `group_id=`.
    pub id: u32,
    /// `type=`.
    pub kind: GroupType,
    /// The buckets, in order.
    pub buckets: Vec<Bucket>,
    /// `selection_method=hash,fields(...)`: the fields a select group
    /// hashes (`None`: the symmetric 5-tuple).
    pub fields: Option<Vec<SelectField>>,
    /// `selection_method=` as written (`hash`, `dp_hash`), if given.
    pub method: Option<String>,
    /// `selection_method_param=` (0 when not given).
    pub param: u64,
    /// A select group that picks by the datapath's hash (see the module
    /// documentation): its table; `None` picks in the slow path.
    pub dp_hash: Option<DpHashTable>,
}

impl fmt::Display for Group {
    /// As `ovs-ofctl dump-groups` prints it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "group_id={},type={}", self.id, self.kind.name())?;
        match (self.method.as_deref(), &self.fields) {
            (Some("dp_hash"), _) => f.write_str(",selection_method=dp_hash")?,
            (Some("hash"), None) => f.write_str(",selection_method=hash")?,
            _ => {}
        }
        if self.param != 0 {
            write!(f, ",selection_method_param={}", self.param)?;
        }
        if let Some(fields) = &self.fields {
            f.write_str(",selection_method=hash,fields(")?;
            for (i, sf) in fields.iter().enumerate() {
                if i > 0 {
                    f.write_str(",")?;
                }
                f.write_str(sf.name())?;
                let info = sf.id.info();
                if sf.mask != sf.full_mask() {
                    write!(
                        f,
                        "={}",
                        flowpath_flow::value::format_value(info, sf.mask, info.full_mask())
                    )?;
                }
            }
            f.write_str(")")?;
        }
        for (i, b) in self.buckets.iter().enumerate() {
            f.write_str(",bucket=")?;
            if b.id != i as u32 {
                write!(f, "bucket_id:{},", b.id)?;
            }
            if b.weight != 1 {
                write!(f, "weight:{},", b.weight)?;
            }
            if let Some(p) = b.watch_port {
                write!(f, "watch_port:{p},")?;
            }
            if let Some(g) = b.watch_group {
                write!(f, "watch_group:{g},")?;
            }
            write!(f, "actions={}", crate::action::format_actions(&b.actions))?;
        }
        Ok(())
    }
}

fn err(field: &str, msg: impl Into<String>) -> RuleError {
    RuleError::new(Some(field), msg)
}

/// Splits `text` at top-level (outside parentheses) occurrences of
/// `bucket=`: the group's own part, then one part per bucket.
fn split_buckets(text: &str) -> Vec<&str> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut depth = 0i32;
    let mut start = 0;
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'(' => depth += 1,
            b')' => depth -= 1,
            _ => {}
        }
        let at_item = i == 0 || matches!(b[i - 1], b',' | b' ' | b'\t');
        if depth == 0 && at_item && text[i..].starts_with("bucket=") {
            out.push(&text[start..i]);
            i += "bucket=".len();
            start = i;
            continue;
        }
        i += 1;
    }
    out.push(&text[start..]);
    out
}

fn num(field: &str, v: &str, max: u128) -> Result<u128, RuleError> {
    let n = parse_uint(v.trim()).map_err(|e| err(field, e.0))?;
    if n > max {
        return Err(err(
            field,
            format!("{} is out of range (0 to {max})", v.trim()),
        ));
    }
    Ok(n)
}

fn parse_bucket(text: &str, pos: usize) -> Result<Bucket, RuleError> {
    let mut b = Bucket {
        id: pos as u32,
        weight: 1,
        watch_port: None,
        watch_group: None,
        actions: Vec::new(),
    };
    let mut rest = text.trim().trim_matches(',').trim();
    loop {
        let (item, tail) = match rest.find(',') {
            Some(i) => (&rest[..i], &rest[i + 1..]),
            None => (rest, ""),
        };
        let kv = item.split_once(':').or_else(|| item.split_once('='));
        match kv {
            Some(("bucket_id", v)) => b.id = num("bucket_id", v, 0xffff_fffe)? as u32,
            Some(("weight", v)) => b.weight = num("weight", v, 0xffff)? as u16,
            Some(("watch_port", v)) => {
                b.watch_port = Some(match v.trim() {
                    "LOCAL" | "local" => crate::action::OFPP_LOCAL,
                    v => num("watch_port", v, 0xfeff)? as u32,
                })
            }
            Some(("watch_group", v)) => {
                b.watch_group = Some(num("watch_group", v, 0xffff_ff00)? as u32)
            }
            _ => break,
        }
        rest = tail.trim();
    }
    let acts = rest.strip_prefix("actions=").unwrap_or(rest);
    b.actions = parse_bucket_actions(acts)
        .map_err(|e| RuleError::new(e.field.as_deref(), format!("bucket {pos}: {}", e.msg)))?;
    if b.actions.iter().any(|a| {
        matches!(
            a,
            Action::GotoTable(_) | Action::ClearActions | Action::WriteActions
        )
    }) {
        return Err(err(
            "bucket",
            format!("bucket {pos}: instructions are not allowed in a bucket"),
        ));
    }
    Ok(b)
}

/// Parses one group in `ovs-ofctl add-group` syntax.
pub fn parse_group(text: &str) -> Result<Group, RuleError> {
    let parts = split_buckets(text);
    let head = parts.first().copied().unwrap_or("");
    let (mut id, mut kind, mut method, mut fields) = (None, None, None, None);
    let mut param = 0u64;
    let mut rest = head;
    while !rest.trim().is_empty() {
        let r = rest.trim_start_matches([',', ' ', '\t']);
        if let Some(inner) = r.strip_prefix("fields(") {
            let Some(end) = inner.find(')') else {
                return Err(err("fields", "missing ')'"));
            };
            let mut v: Vec<SelectField> = Vec::new();
            for item in inner[..end]
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
            {
                let sf = SelectField::parse(item)?;
                if v.iter().any(|x| x.id == sf.id) {
                    return Err(err("fields", format!("{}: duplicate field", sf.name())));
                }
                v.push(sf);
            }
            // As OVS: hashed in its field order, not as written.
            v.sort_by_key(SelectField::rank);
            fields = Some(v);
            rest = &inner[end + 1..];
            continue;
        }
        let end = r.find([',', ' ', '\t']).unwrap_or(r.len());
        let item = &r[..end];
        rest = &r[end..];
        if item.is_empty() {
            continue;
        }
        let (k, v) = item.split_once('=').unwrap_or((item, ""));
        match k {
            "group_id" => id = Some(num("group_id", v, 0xffff_ff00)? as u32),
            "type" => {
                kind = Some(match v {
                    "all" => GroupType::All,
                    "select" => GroupType::Select,
                    "indirect" => GroupType::Indirect,
                    "ff" | "fast_failover" => GroupType::FastFailover,
                    _ => {
                        return Err(err(
                            "type",
                            format!("'{v}' is not a group type (all, select, indirect, ff)"),
                        ))
                    }
                })
            }
            "selection_method" => match v {
                "hash" | "dp_hash" => method = Some(v.to_string()),
                _ => {
                    return Err(err(
                        "selection_method",
                        format!("'{v}' is not hash or dp_hash"),
                    ))
                }
            },
            "selection_method_param" => {
                param = num("selection_method_param", v, u128::from(u64::MAX))? as u64
            }
            "command_bucket_id" | "bucket_id" => {
                return Err(err(
                    k,
                    "is for insert-buckets/remove-buckets, not supported by flowpath",
                ))
            }
            _ => return Err(err(k, "unknown group keyword")),
        }
    }
    let id = id.ok_or_else(|| err("group_id", "must specify a group_id"))?;
    let kind = kind.ok_or_else(|| err("type", "must specify a type"))?;
    let mut buckets = Vec::new();
    for (i, p) in parts.iter().skip(1).enumerate() {
        buckets.push(parse_bucket(p, i)?);
    }
    if kind == GroupType::Indirect && buckets.len() != 1 {
        return Err(err("type", "an indirect group has exactly one bucket"));
    }
    if fields.is_some() && kind != GroupType::Select {
        return Err(err("fields", "fields(...) is for select groups"));
    }
    if fields.is_some() && method.as_deref() != Some("hash") {
        return Err(err(
            "fields",
            "fields may only be specified with \"selection_method=hash\"",
        ));
    }
    if method.is_none() && param != 0 {
        return Err(err(
            "selection_method_param",
            "selection_method_param is only allowed with \"selection_method\"",
        ));
    }
    // As OVS 3.1: `hash` without fields is the default slow-path hash.
    if fields.as_ref().is_some_and(|f| f.is_empty()) {
        fields = None;
    }
    // As OVS 3.1: no method tries dp_hash with the symmetric L4 hash and
    // basis 0; `dp_hash` takes its algorithm (0 = l4, 1 = sym_l4; other
    // values l4) and basis from the parameter's high and low halves.
    let dp_hash = match (kind, method.as_deref()) {
        (GroupType::Select, None) => DpHashTable::build(&buckets, 256, true, 0),
        (GroupType::Select, Some("dp_hash")) => {
            DpHashTable::build(&buckets, 256, param >> 32 == 1, param as u32)
        }
        _ => None,
    };
    Ok(Group {
        id,
        kind,
        buckets,
        fields,
        method,
        param,
        dp_hash,
    })
}

/// Checks that every `group:N` of `rules` (actions and write sets) and of
/// the groups' buckets names one of `groups`; the error names the rule's
/// line (or the group) and the missing group, as OVS refuses such a flow.
pub fn check_refs(rules: &[crate::rule::Rule], groups: &[Group]) -> Result<(), String> {
    let missing = |acts: &[Action]| {
        acts.iter().find_map(|a| match a {
            Action::Group(g) if !groups.iter().any(|x| x.id == *g) => Some(*g),
            _ => None,
        })
    };
    for r in rules {
        if let Some(g) = missing(&r.actions).or_else(|| missing(&r.write_actions)) {
            return Err(format!("line {}: group:{g}: no such group", r.line));
        }
    }
    for grp in groups {
        for b in &grp.buckets {
            if let Some(g) = missing(&b.actions) {
                return Err(format!("group {}: group:{g}: no such group", grp.id));
            }
        }
    }
    Ok(())
}

/// Parses a groups file: one group per line, `#` comments, `\`
/// continuations; all or nothing, the error located at its line; a group
/// id given twice is refused.
pub fn parse_groups(text: &str, file: Option<&str>) -> Result<Vec<Group>, RuleError> {
    let mut out: Vec<(usize, Group)> = Vec::new();
    for (start, t) in crate::parse::logical_lines(text, file)? {
        let g = parse_group(t.trim()).map_err(|e| e.at(file, start))?;
        if let Some((l, _)) = out.iter().find(|(_, o)| o.id == g.id) {
            return Err(err(
                "group_id",
                format!("group {} given twice (first on line {l})", g.id),
            )
            .at(file, start));
        }
        out.push((start, g));
    }
    Ok(out.into_iter().map(|(_, g)| g).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_prints_as_dump_groups() {
        let g = parse_group(
            "group_id=3,type=all,bucket=mod_dl_src:00:00:00:00:00:01,output:2,bucket=output:3",
        )
        .unwrap();
        assert_eq!(g.kind, GroupType::All);
        assert_eq!(g.buckets.len(), 2);
        assert_eq!(
            g.to_string(),
            "group_id=3,type=all,bucket=actions=mod_dl_src:00:00:00:00:00:01,output:2,bucket=actions=output:3"
        );
        assert_eq!(parse_group(&g.to_string()).unwrap(), g);
        let g = parse_group(
            "group_id=4,type=ff,bucket=watch_port:9,output:2,bucket=watch_port:3,actions=output:3",
        )
        .unwrap();
        assert_eq!(g.buckets[0].watch_port, Some(9));
        assert_eq!(g.buckets[1].actions, vec![Action::Output(3)]);
        // As OVS: masks, OXM VLAN names, and OVS's field order (not the
        // text's), printed back as written.
        let g = parse_group("group_id=6,type=select,selection_method=hash,fields(tcp_dst,ip_src=255.255.255.0,vlan_vid,eth_src),bucket=output:1").unwrap();
        let f = g.fields.as_ref().unwrap();
        assert_eq!(
            f.iter().map(|x| (x.name(), x.mask)).collect::<Vec<_>>(),
            vec![
                ("dl_src", 0xffff_ffff_ffff),
                ("vlan_vid", 0x1fff),
                ("nw_src", 0xffff_ff00),
                ("tcp_dst", 0xffff)
            ]
        );
        assert!(
            g.to_string()
                .contains("fields(dl_src,vlan_vid,nw_src=255.255.255.0,tcp_dst)"),
            "{g}"
        );
        let g = parse_group("group_id=5 type=select selection_method=hash fields(ip_src,nw_proto) bucket=weight:10,output:1 bucket=bucket_id:7,output:2").unwrap();
        assert_eq!(
            g.fields
                .as_ref()
                .map(|v| v.iter().map(|f| f.id).collect::<Vec<_>>()),
            Some(vec![FieldId::NwSrc, FieldId::NwProto])
        );
        assert_eq!((g.buckets[0].weight, g.buckets[1].id), (10, 7));
        assert_eq!(parse_group(&g.to_string()).unwrap(), g);
    }

    #[test]
    fn errors_name_field_and_line() {
        for (bad, needle) in [
            ("type=all,bucket=output:1", "must specify a group_id"),
            ("group_id=1,bucket=output:1", "must specify a type"),
            ("group_id=1,type=foo", "not a group type"),
            (
                "group_id=1,type=indirect,bucket=output:1,bucket=output:2",
                "exactly one bucket",
            ),
            ("group_id=1,type=all,bucket=goto_table:1", "bucket 0"),
            ("group_id=1,type=all,fields(ip_src)", "for select groups"),
            ("group_id=1,type=all,color=red", "unknown group keyword"),
            (
                "group_id=1,type=select,selection_method=hash,fields(ip_src,ip_src=255.0.0.0)",
                "duplicate field",
            ),
            (
                "group_id=1,type=select,selection_method=hash,fields(dl_vlan)",
                "use vlan_vid",
            ),
            (
                "group_id=1,type=select,selection_method=hash,fields(ip_dst=0.0.0.0)",
                "must not be all-zeros",
            ),
            (
                "group_id=1,type=select,selection_method=hash,fields(vlan_tci1)",
                "unknown field",
            ),
        ] {
            let e = parse_group(bad).unwrap_err().to_string();
            assert!(e.contains(needle), "{bad}: {e}");
        }
        let e = parse_groups(
            "# g\ngroup_id=1,type=all,bucket=output:1\ngroup_id=1,type=all\n",
            Some("g.groups"),
        )
        .unwrap_err();
        assert_eq!(e.line, 3);
        assert!(
            e.to_string().contains("given twice (first on line 2)"),
            "{e}"
        );
    }
}
