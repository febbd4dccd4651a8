//! `Match`: a key under a mask, built field by field, and its canonical text.
//!
//! Rules, megaflows and trace inputs are all `Match`es. [`Match::set_field_masked`]
//! applies one `field=value[/mask]` (with OVS's special cases for `dl_vlan`
//! and `dl_vlan_pcp`, which write `vlan_tci` with the CFI bit);
//! [`Match::set_protocol`] applies a keyword such as `tcp6`;
//! [`Match::format`] prints in the order of OVS's `match_format`, as a rule
//! (`ovs-ofctl dump-flows`) or as a megaflow (`ofproto/trace`'s
//! `Megaflow:` line, which starts with `recirc_id=0,eth`).

use crate::field::{self, EthReq, FieldId, FieldInfo, ProtoReq};
use crate::key::{FlowKey, FlowMask, Regs, VLAN_CFI};
use crate::value::{format_value, parse_value, ValueError};

/// A key under a mask, with the registers under theirs. Invariant: `key`
/// has no bit outside `mask`, `regs` none outside `regs_mask`.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Default)]
pub struct Match {
    /// Values (zero outside `mask`).
    pub key: FlowKey,
    /// Significant bits.
    pub mask: FlowMask,
    /// Register and `metadata` values (zero outside `regs_mask`); only
    /// rules match them, a packet's are all zero.
    pub regs: Regs,
    /// Significant register bits.
    pub regs_mask: Regs,
}

/// How [`Match::format`] prints.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Style {
    /// As `ovs-ofctl dump-flows` prints a rule's match.
    Rule,
    /// As `ofproto/trace` prints a megaflow: `recirc_id=0,eth,...`.
    Megaflow,
    /// As [`Style::Megaflow`], for a translation that read the CFI bit of
    /// a present tag and no other TCI bit (`move:NXM_OF_VLAN_TCI[12]->...`):
    /// OVS then prints `vlan_tci=0x1000/0x1000`, which it leaves out when
    /// only the datapath's "a tag is present" makes the bit significant.
    MegaflowCfiRead,
}

impl Style {
    fn megaflow(self) -> bool {
        self != Style::Rule
    }
}

/// The protocol keywords: (name, dl_type, nw_proto).
pub const PROTOCOLS: &[(&str, u16, Option<u8>)] = &[
    ("eth", 0, None),
    ("ip", 0x0800, None),
    ("ipv4", 0x0800, None),
    // (OVS 3.1's ovs-ofctl takes these too: `ip4` is `ip`, `ip6` `ipv6`.)
    ("ip4", 0x0800, None),
    ("ipv6", 0x86dd, None),
    ("ip6", 0x86dd, None),
    ("icmp", 0x0800, Some(1)),
    ("icmp6", 0x86dd, Some(58)),
    ("tcp", 0x0800, Some(6)),
    ("tcp6", 0x86dd, Some(6)),
    ("udp", 0x0800, Some(17)),
    ("udp6", 0x86dd, Some(17)),
    ("sctp", 0x0800, Some(132)),
    ("sctp6", 0x86dd, Some(132)),
    ("arp", 0x0806, None),
    ("rarp", 0x8035, None),
    ("mpls", 0x8847, None),
    ("mplsm", 0x8848, None),
];

impl Match {
    /// Matches every packet.
    pub fn catchall() -> Self {
        Match::default()
    }

    /// An exact match on every bit of `key` covered by `mask`.
    pub fn new(key: &FlowKey, mask: &FlowMask) -> Self {
        Match {
            key: key.masked(mask),
            mask: *mask,
            regs: Regs::zero(),
            regs_mask: Regs::zero(),
        }
    }

    /// True when `packet` (with all registers zero, as every packet
    /// enters the pipeline) falls inside this match.
    #[inline]
    pub fn matches(&self, packet: &FlowKey) -> bool {
        self.matches_with(packet, &Regs::zero())
    }

    /// True when `packet` with registers `regs` falls inside this match.
    #[inline]
    pub fn matches_with(&self, packet: &FlowKey, regs: &Regs) -> bool {
        packet.eq_masked(&self.key, &self.mask) && regs.eq_masked(&self.regs, &self.regs_mask)
    }

    /// Sets `field` to `value` under `mask` (field units), replacing any
    /// earlier value for those bits.
    pub fn set_field_masked(&mut self, f: &FieldInfo, value: u128, mask: u128) {
        match f.id {
            FieldId::DlVlan => {
                let (v, m) = field::vlan_vid_bits(value as u16);
                self.set_vlan_bits(v, m);
            }
            FieldId::DlVlanPcp => {
                let (v, m) = field::vlan_pcp_bits(value as u8);
                self.set_vlan_bits(v, m);
            }
            _ if f.is_reg() => {
                let old_m = f.get_regs(&self.regs_mask);
                f.set_regs_masked(&mut self.regs_mask, old_m | mask, u128::MAX);
                f.set_regs_masked(&mut self.regs, value, mask);
            }
            _ => {
                let old_m = f.get_mask(&self.mask);
                f.set_mask(&mut self.mask, old_m | mask);
                f.set_masked(&mut self.key, value, mask);
            }
        }
    }

    fn set_vlan_bits(&mut self, v: u16, m: u16) {
        let old_m = self.mask.to_key().vlan_tci();
        let mut mk = self.mask.to_key();
        mk.set_vlan_tci(old_m | m);
        self.mask = FlowMask::from_key(&mk);
        let old_v = self.key.vlan_tci();
        self.key.set_vlan_tci((old_v & !m) | (v & m));
    }

    /// Parses `text` as a value of `f` and sets it.
    pub fn set_field_text(&mut self, f: &FieldInfo, text: &str) -> Result<(), ValueError> {
        let (v, m) = parse_value(f, text)?;
        self.set_field_masked(f, v, m);
        Ok(())
    }

    /// Applies a protocol keyword (`ip`, `tcp6`, `arp`, ...). Returns false
    /// for an unknown keyword.
    pub fn set_protocol(&mut self, name: &str) -> bool {
        let Some(&(_, dl_type, proto)) = PROTOCOLS.iter().find(|(n, _, _)| *n == name) else {
            return false;
        };
        if dl_type != 0 {
            self.set_field_masked(FieldId::EthType.info(), u128::from(dl_type), 0xffff);
        }
        if let Some(p) = proto {
            self.set_field_masked(FieldId::NwProto.info(), u128::from(p), 0xff);
        }
        true
    }

    /// The Ethernet type the match pins exactly, if any.
    pub fn exact_dl_type(&self) -> Option<u16> {
        (self.mask.to_key().dl_type() == 0xffff).then(|| self.key.dl_type())
    }

    /// The IP protocol the match pins exactly, if any.
    pub fn exact_nw_proto(&self) -> Option<u8> {
        (self.mask.to_key().nw_proto() == 0xff).then(|| self.key.nw_proto())
    }

    /// The words where the match has a significant bit, as a bitmap (see
    /// [`crate::field::FieldInfo::word_bits`]).
    pub fn word_bits(&self) -> u64 {
        let regs = self
            .regs_mask
            .w
            .iter()
            .enumerate()
            .filter(|(_, w)| **w != 0)
            .fold(0u64, |a, (i, _)| a | 1 << (crate::key::FLOW_WORDS + i));
        self.mask.word_map() | regs
    }

    /// Feeds `h` the match's significant words (with their positions)
    /// and their values: equal matches hash equal, and a match of a few
    /// fields costs a few words, not the 800 bytes its `Hash` reads.
    pub fn hash_significant(&self, h: &mut impl core::hash::Hasher) {
        for (i, &w) in self.mask.w.iter().enumerate() {
            if w != 0 {
                h.write_u64(((i as u64) << 56) ^ w);
                h.write_u64(self.key.w[i]);
            }
        }
        for (i, &w) in self.regs_mask.w.iter().enumerate() {
            if w != 0 {
                h.write_u64(((0x80 | i as u64) << 56) ^ w);
                h.write_u64(self.regs.w[i]);
            }
        }
    }

    /// Checks that this match pins the prerequisites of `f` (as OVS
    /// requires before a field may be matched or set). The error names
    /// what is missing.
    pub fn check_prereqs(&self, f: &FieldInfo) -> Result<(), String> {
        if self.prereqs_met(f) {
            Ok(())
        } else {
            Err(format!("{} requires {}", f.name, f.prereq.describe()))
        }
    }

    /// [`Match::check_prereqs`] without the message (no allocation).
    pub fn prereqs_met(&self, f: &FieldInfo) -> bool {
        let p = f.prereq;
        let t = self.exact_dl_type();
        let eth_ok = match p.eth {
            EthReq::Any => true,
            EthReq::Ip => matches!(t, Some(0x0800 | 0x86dd)),
            EthReq::Ipv4 => t == Some(0x0800),
            EthReq::Ipv6 => t == Some(0x86dd),
            EthReq::Arp => matches!(t, Some(0x0806 | 0x8035)),
            EthReq::Mpls => matches!(t, Some(0x8847 | 0x8848)),
        };
        let proto = self.exact_nw_proto();
        let proto_ok = match p.proto {
            ProtoReq::Any => true,
            ProtoReq::L4 => matches!(proto, Some(6 | 17 | 132)),
            ProtoReq::One(x) => proto == Some(x),
        };
        let icmp_ok = p.icmp6_types.is_empty() || {
            let tm = FieldId::Icmpv6Type.info();
            tm.get_mask(&self.mask) == 0xff && p.icmp6_types.contains(&(tm.get(&self.key) as u8))
        };
        // OVS's `is_ct_valid` on a match: one of the bits that imply a
        // valid connection set, or `+trk-inv`.
        let ct_ok = !p.ct || {
            let (v, m) = (self.key.ct_state(), self.mask.to_key().ct_state());
            use crate::key::ct_state as cs;
            let valid = cs::NEW | cs::EST | cs::REL | cs::RPL | cs::SNAT | cs::DNAT;
            v & m & valid != 0 || (v & m & cs::TRK != 0 && m & cs::INV != 0 && v & cs::INV == 0)
        };
        eth_ok && proto_ok && icmp_ok && ct_ok
    }

    /// Prints the match in OVS's order. An empty match prints as "" for
    /// rules; megaflows always start with `recirc_id=ID,` (then `dp_hash=H/M`
    /// when read) and `eth`.
    pub fn format(&self, style: Style) -> String {
        let mut parts: Vec<String> = Vec::new();
        let mk = self.mask.to_key();
        let k = &self.key;
        self.format_head(style, &mk, &mut parts);
        let dl_type = self.exact_dl_type();
        let (skip_type, skip_proto) = self.format_proto_name(dl_type, &mut parts);
        let put = |parts: &mut Vec<String>, id: FieldId| put_field(parts, k, &mk, id);
        self.format_regs(k, &mk, style, &mut parts);
        put(&mut parts, FieldId::InPort);
        format_vlan(k, &mk, style, &mut parts);
        if style == Style::Rule {
            put(&mut parts, FieldId::VlanTci1);
        }
        put(&mut parts, FieldId::EthSrc);
        put(&mut parts, FieldId::EthDst);
        if !skip_type {
            put(&mut parts, FieldId::EthType);
        }
        let is_v6 = dl_type == Some(0x86dd);
        let is_arp = matches!(dl_type, Some(0x0806 | 0x8035));
        if is_v6 {
            put(&mut parts, FieldId::Ipv6Src);
            put(&mut parts, FieldId::Ipv6Dst);
            put(&mut parts, FieldId::Ipv6Label);
        } else if is_arp {
            put(&mut parts, FieldId::ArpSpa);
            put(&mut parts, FieldId::ArpTpa);
        } else {
            put(&mut parts, FieldId::NwSrc);
            put(&mut parts, FieldId::NwDst);
        }
        if !skip_proto {
            put(
                &mut parts,
                if is_arp {
                    FieldId::ArpOp
                } else {
                    FieldId::NwProto
                },
            );
        }
        if is_arp {
            put(&mut parts, FieldId::ArpSha);
            put(&mut parts, FieldId::ArpTha);
            // A megaflow of an ARP packet can have the TTL significant
            // (`dec_ttl` reads it whatever the packet), printed last as OVS
            // does.
            put(&mut parts, FieldId::NwTtl);
        }
        if !is_arp {
            put(&mut parts, FieldId::NwTos);
            put(&mut parts, FieldId::NwEcn);
            put(&mut parts, FieldId::NwTtl);
            if matches!(dl_type, Some(0x8847 | 0x8848)) {
                format_mpls(k, &mk, &mut parts);
            }
            put(&mut parts, FieldId::NwFrag);
        }
        format_l4(
            k,
            &mk,
            style,
            is_v6,
            is_arp,
            self.exact_nw_proto(),
            &mut parts,
        );
        parts.join(",")
    }

    /// The fields before the protocol: the packet mark, `conj_id`, and a
    /// megaflow's `recirc_id`, `dp_hash`, `skb_priority` and `eth`.
    fn format_head(&self, style: Style, mk: &FlowKey, parts: &mut Vec<String>) {
        let k = &self.key;
        // As OVS: the packet mark before everything, even recirc_id.
        if mk.pkt_mark() != 0 {
            let f = FieldId::PktMark.info();
            parts.push(format!(
                "pkt_mark={}",
                format_value(f, u128::from(k.pkt_mark()), u128::from(mk.pkt_mark()))
            ));
        }
        let cj = FieldId::ConjId.info();
        if cj.get_regs(&self.regs_mask) != 0 {
            parts.push(format!("conj_id={}", cj.get_regs(&self.regs)));
        }
        if style.megaflow() {
            // As OVS's match_format: recirc_id, then dp_hash when read.
            parts.push(match k.recirc_id() {
                0 => "recirc_id=0".into(),
                id => format!("recirc_id={id:#x}"),
            });
            if mk.dp_hash() != 0 {
                let (h, m) = (k.dp_hash() & mk.dp_hash(), mk.dp_hash());
                // As OVS's `%#x`: 0 without the prefix.
                parts.push(match h {
                    0 => format!("dp_hash=0/{m:#x}"),
                    h => format!("dp_hash={h:#x}/{m:#x}"),
                });
            }
            if mk.skb_priority() != 0 {
                let p = k.skb_priority();
                parts.push(if p == 0 {
                    "skb_priority=0".into()
                } else {
                    format!("skb_priority={p:#x}")
                });
            }
        }
        // The connection-tracking fields, in OVS's order (the ports only
        // with the protocol).
        for id in [
            FieldId::CtState,
            FieldId::CtZone,
            FieldId::CtMark,
            FieldId::CtLabel,
            FieldId::CtNwSrc,
            FieldId::CtIpv6Src,
            FieldId::CtNwDst,
            FieldId::CtIpv6Dst,
            FieldId::CtNwProto,
        ] {
            put_field(parts, k, mk, id);
        }
        if mk.ct_nw_proto() != 0 {
            put_field(parts, k, mk, FieldId::CtTpSrc);
            put_field(parts, k, mk, FieldId::CtTpDst);
        }
        if style.megaflow() {
            parts.push("eth".into());
        }
    }

    /// The protocol's name (`tcp`, `ipv6`, `arp`, ...) when the match pins
    /// it; returns whether `dl_type` and `nw_proto` then go unprinted.
    fn format_proto_name(&self, dl_type: Option<u16>, parts: &mut Vec<String>) -> (bool, bool) {
        let mut skip_type = false;
        let mut skip_proto = false;
        if let Some(t) = dl_type {
            let proto = self.exact_nw_proto();
            let name = match t {
                0x0800 => {
                    skip_type = true;
                    match proto {
                        Some(1) => Some("icmp"),
                        Some(6) => Some("tcp"),
                        Some(17) => Some("udp"),
                        Some(132) => Some("sctp"),
                        _ => Some("ip"),
                    }
                }
                0x86dd => {
                    skip_type = true;
                    match proto {
                        Some(58) => Some("icmp6"),
                        Some(6) => Some("tcp6"),
                        Some(17) => Some("udp6"),
                        Some(132) => Some("sctp6"),
                        _ => Some("ipv6"),
                    }
                }
                0x0806 => {
                    skip_type = true;
                    Some("arp")
                }
                0x8035 => {
                    skip_type = true;
                    Some("rarp")
                }
                0x8847 | 0x8848 => {
                    skip_type = true;
                    Some(if t == 0x8847 { "mpls" } else { "mplsm" })
                }
                _ => None,
            };
            if let Some(n) = name {
                if !matches!(n, "ip" | "ipv6" | "arp" | "rarp" | "mpls" | "mplsm") {
                    skip_proto = true;
                }
                parts.push(n.into());
            }
        }
        (skip_type, skip_proto)
    }

    /// Registers (always one 32-bit register at a time, as OVS), the tunnel
    /// fields and metadata, between the protocol and in_port.
    fn format_regs(&self, k: &FlowKey, mk: &FlowKey, style: Style, parts: &mut Vec<String>) {
        for i in 0..16 {
            let m = self.regs_mask.reg(i);
            if m != 0 {
                let f = field::FIELDS[FieldId::Reg0 as usize + i];
                parts.push(format!(
                    "{}={}",
                    f.name,
                    format_value(&f, u128::from(self.regs.reg(i)), u128::from(m))
                ));
            }
        }
        for id in field::TUNNEL_FIELDS {
            if id == FieldId::TunFlags && style != Style::Rule {
                // A megaflow's: every tunnel flag it holds, as OVS's
                // match printer (`-df-csum+key`; all four: the flags set,
                // `|`-separated, or 0, as its format_flags_masked).
                let m = mk.tun_dp_flags();
                if m != 0 {
                    let v = k.tun_dp_flags();
                    let mut t = String::from("tun_flags=");
                    const NAMES: [(u8, &str); 4] = [(1, "oam"), (2, "df"), (4, "csum"), (8, "key")];
                    if m & 0xf == 0xf {
                        let set: Vec<&str> = NAMES
                            .iter()
                            .filter(|(bit, _)| v & bit != 0)
                            .map(|(_, name)| *name)
                            .collect();
                        if set.is_empty() {
                            t.push('0');
                        } else {
                            t.push_str(&set.join("|"));
                        }
                    } else {
                        for (bit, name) in NAMES {
                            if m & bit != 0 {
                                t.push(if v & bit != 0 { '+' } else { '-' });
                                t.push_str(name);
                            }
                        }
                    }
                    parts.push(t);
                }
                continue;
            }
            if style != Style::Rule {
                // A megaflow's, as OVS's match printer: the ToS in hex
                // without 0x, the TTL in decimal, the GBP flags as %#x,
                // each without a mask.
                let f = id.info();
                let (v, m) = (f.get(k), f.get(mk));
                let text = match id {
                    _ if m == 0 => None,
                    // An option the packet did not carry (OVS: "NP", not
                    // present).
                    _ if id
                        .tun_metadata_index()
                        .is_some_and(|n| !k.tun_metadata_present(n)) =>
                    {
                        Some("NP".to_string())
                    }
                    FieldId::TunTos => Some(format!("{v:x}")),
                    FieldId::TunTtl => Some(format!("{v}")),
                    FieldId::TunGbpFlags if v == 0 => Some("0".to_string()),
                    FieldId::TunGbpFlags => Some(format!("{v:#x}")),
                    _ => None,
                };
                if let Some(t) = text {
                    parts.push(format!("{}={t}", f.name));
                    continue;
                }
            }
            put_field(parts, k, mk, id);
        }
        {
            let f = FieldId::Metadata.info();
            let m = f.get_regs(&self.regs_mask);
            if m != 0 {
                parts.push(format!(
                    "{}={}",
                    f.name,
                    format_value(f, f.get_regs(&self.regs), m)
                ));
            }
        }
    }
}

/// Prints field `id` of `k` under `mk`, if the mask has any of its bits.
fn put_field(parts: &mut Vec<String>, k: &FlowKey, mk: &FlowKey, id: FieldId) {
    let f = id.info();
    let m = f.get(mk);
    if m != 0 {
        // As OVS's match printer: the one-byte IP fields and the ARP
        // opcode print their value under the mask, without the mask
        // (a megaflow can hold part of them: `move` of a few bits).
        if matches!(
            id,
            FieldId::NwProto
                | FieldId::ArpOp
                | FieldId::NwTos
                | FieldId::NwEcn
                | FieldId::NwTtl
                | FieldId::CtNwProto
        ) {
            parts.push(format!("{}={}", f.name, f.get(k)));
        } else {
            parts.push(format!("{}={}", f.name, format_value(f, f.get(k), m)));
        }
    }
}

/// VLAN, as OVS: `dl_vlan` / `dl_vlan_pcp` when expressible, else
/// `vlan_tci`.
fn format_vlan(k: &FlowKey, mk: &FlowKey, style: Style, parts: &mut Vec<String>) {
    let mut tm = mk.vlan_tci();
    if style.megaflow() {
        // Datapath megaflows always match whether a tag is present (the
        // CFI bit); OVS keeps that in the datapath key's structure and
        // does not print it, nor any TCI bits of an absent tag.
        if k.vlan_tci() & VLAN_CFI == 0 || (tm == VLAN_CFI && style == Style::Megaflow) {
            tm = 0;
        }
    }
    if tm != 0 {
        let tv = k.vlan_tci();
        let vid_m = tm & 0x0fff;
        let pcp_m = tm & 0xe000;
        if tm & VLAN_CFI != 0
            && tv & VLAN_CFI != 0
            && (vid_m == 0 || vid_m == 0x0fff)
            && (pcp_m == 0 || pcp_m == 0xe000)
            && (vid_m != 0 || pcp_m != 0)
        {
            if vid_m != 0 {
                parts.push(format!("dl_vlan={}", tv & 0x0fff));
            }
            if pcp_m != 0 {
                parts.push(format!("dl_vlan_pcp={}", tv >> 13));
            }
        } else if tm == 0xffff {
            parts.push(format!("vlan_tci=0x{tv:04x}"));
        } else {
            parts.push(format!("vlan_tci=0x{tv:04x}/0x{tm:04x}"));
        }
    }
}

/// The top MPLS label stack entry, after the TTL, as OVS orders it, and
/// the entries below it (significant only in megaflows: MPLS actions count
/// and move them).
fn format_mpls(k: &FlowKey, mk: &FlowKey, parts: &mut Vec<String>) {
    let put = |parts: &mut Vec<String>, id: FieldId| put_field(parts, k, mk, id);
    for id in [
        FieldId::MplsLabel,
        FieldId::MplsTc,
        FieldId::MplsTtl,
        FieldId::MplsBos,
    ] {
        put(parts, id);
    }
    for (name, v, m) in [
        ("mpls_lse1", k.mpls_lse1(), mk.mpls_lse1()),
        ("mpls_lse2", k.mpls_lse2(), mk.mpls_lse2()),
    ] {
        if m == u32::MAX {
            parts.push(format!("{name}={v}"));
        } else if m != 0 {
            parts.push(format!("{name}=0x{v:08x}/0x{m:08x}"));
        }
    }
}

/// The transport fields: ICMP type and code (and ND for ICMPv6), or the
/// ports; then the TCP flags.
fn format_l4(
    k: &FlowKey,
    mk: &FlowKey,
    style: Style,
    is_v6: bool,
    is_arp: bool,
    proto: Option<u8>,
    parts: &mut Vec<String>,
) {
    let put = |parts: &mut Vec<String>, id: FieldId| put_field(parts, k, mk, id);
    let t = k.dl_type();
    let is_icmp = t == 0x0800 && proto == Some(1);
    let is_icmp6 = is_v6 && proto == Some(58);
    if is_icmp || is_icmp6 {
        if style.megaflow() {
            // OVS prints a megaflow's ICMP type/code as the 16-bit
            // transport-port words they live in, masked to 8 bits.
            for (name, v, m) in [
                ("icmp_type", k.tp_src(), mk.tp_src()),
                ("icmp_code", k.tp_dst(), mk.tp_dst()),
            ] {
                if m == 0xffff {
                    parts.push(format!("{name}={v}"));
                } else if m != 0 {
                    parts.push(format!("{name}={v:#x}/{m:#x}"));
                }
            }
        } else {
            put(parts, FieldId::IcmpType);
            put(parts, FieldId::IcmpCode);
        }
        if is_icmp6 {
            put(parts, FieldId::NdTarget);
            put(parts, FieldId::NdSll);
            put(parts, FieldId::NdTll);
            // As OVS: decimal when exact, else hex value/mask (32 and 16
            // bits, as OVS keeps them).
            let (v, m) = (k.nd_reserved(), mk.nd_reserved());
            if m == u32::MAX {
                parts.push(format!("nd_reserved={v}"));
            } else if m != 0 {
                parts.push(format!("nd_reserved=0x{v:08x}/0x{m:08x}"));
            }
            // (OVS keeps the option type in 16 bits: a match sets all 16,
            // a write or a read the low 8, printed as value/mask.)
            let f = FieldId::NdOptionsType.info();
            let (v, m) = (f.get(k), f.get(mk));
            if m == f.full_mask() {
                parts.push(format!("nd_options_type={v}"));
            } else if m != 0 {
                parts.push(format!("nd_options_type={v:#x}/{m:#x}"));
            }
        }
    } else if !is_arp {
        put(parts, FieldId::TpSrc);
        put(parts, FieldId::TpDst);
    }
    // (ICMPv6 neighbour discovery keeps its option type where TCP's flags
    // are: printed above.)
    let icmp6 = is_v6 && proto == Some(58);
    if !(is_arp || icmp6) {
        put(parts, FieldId::TcpFlags);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::field::lookup;

    fn m(fields: &[(&str, &str)], protos: &[&str]) -> Match {
        let mut m = Match::catchall();
        for p in protos {
            assert!(m.set_protocol(p));
        }
        for (n, v) in fields {
            m.set_field_text(lookup(n).unwrap(), v).unwrap();
        }
        m
    }

    /// A Geneve option is present or not apart from its value: a match
    /// on `tun_metadataN=0` needs the option (value 0), a packet without
    /// it does not match, and a megaflow that holds the field prints an
    /// option the packet lacked as `NP`, as OVS 3.1's.
    #[test]
    fn a_zero_option_is_present_and_an_absent_one_is_np() {
        let rule = m(&[("tun_metadata2", "0")], &[]);
        let mut absent = FlowKey::zero();
        absent.set_tun_dst(0x0a00_0001);
        let mut zero = absent;
        zero.set_tun_metadata(2, 0);
        assert!(zero.tun_metadata_present(2) && !absent.tun_metadata_present(2));
        assert!(rule.matches(&zero));
        assert!(!rule.matches(&absent));
        // A zero mask covers nothing, presence included.
        let any = m(&[("tun_metadata2", "0x5/0")], &[]);
        assert!(any.matches(&absent) && any.mask == FlowMask::catchall());
        let mut wc = FlowMask::catchall();
        FieldId::TunMetadata2
            .info()
            .or_mask(&mut wc, u128::from(u64::MAX));
        let text = |k: &FlowKey| Match::new(k, &wc).format(Style::Megaflow);
        assert!(
            text(&absent).contains("tun_metadata2=NP"),
            "{}",
            text(&absent)
        );
        assert!(text(&zero).contains("tun_metadata2=0"), "{}", text(&zero));
        assert!(!text(&zero).contains("NP"), "{}", text(&zero));
    }

    #[test]
    fn registers_print_as_ovs_31() {
        // Each expected text is what OVS 3.1's `ovs-ofctl dump-flows`
        // printed for the rule on the left.
        let x = m(
            &[
                ("in_port", "1"),
                ("pkt_mark", "0x10/0xf0"),
                ("metadata", "0x5/0xff"),
                ("reg3", "7"),
                ("reg0", "0x10/0xf0"),
            ],
            &["ip"],
        );
        assert_eq!(
            x.format(Style::Rule),
            "pkt_mark=0x10/0xf0,ip,reg0=0x10/0xf0,reg3=0x7,metadata=0x5/0xff,in_port=1"
        );
        assert_eq!(
            m(&[("xreg1", "0x100000002")], &[]).format(Style::Rule),
            "reg2=0x1,reg3=0x2"
        );
        assert_eq!(
            m(&[("xreg0", "1")], &[]).format(Style::Rule),
            "reg0=0,reg1=0x1"
        );
        assert_eq!(
            m(&[("xreg2", "0x100000000/0xffffffff00000000")], &[]).format(Style::Rule),
            "reg4=0x1"
        );
        assert_eq!(
            m(
                &[(
                    "NXM_NX_XXREG1",
                    "0x1000000020000000300000004/0xffffffffffffffffffffffffffffffff"
                )],
                &[]
            )
            .format(Style::Rule),
            "reg4=0x1,reg5=0x2,reg6=0x3,reg7=0x4"
        );
        let r = m(&[("reg5", "9")], &[]);
        let mut regs = Regs::zero();
        assert!(!r.matches_with(&FlowKey::zero(), &regs));
        assert!(!r.matches(&FlowKey::zero()));
        FieldId::Reg5
            .info()
            .set_regs_masked(&mut regs, 9, u128::MAX);
        assert_eq!(regs.reg(5), 9);
        assert!(r.matches_with(&FlowKey::zero(), &regs));
        // A megaflow's pkt_mark comes even before recirc_id.
        let mut mf = Match::catchall();
        mf.set_field_text(lookup("pkt_mark").unwrap(), "0/0xf")
            .unwrap();
        assert!(mf.set_protocol("ip"));
        assert_eq!(
            mf.format(Style::Megaflow),
            "pkt_mark=0/0xf,recirc_id=0,eth,ip"
        );
    }

    #[test]
    fn megaflow_format_matches_ovs_example() {
        let mut x = m(
            &[
                ("in_port", "1"),
                ("nw_frag", "no"),
                ("tp_dst", "0x40/0xffc0"),
            ],
            &["tcp"],
        );
        assert_eq!(
            x.format(Style::Megaflow),
            "recirc_id=0,eth,tcp,in_port=1,nw_frag=no,tp_dst=0x40/0xffc0"
        );
        x.set_field_text(lookup("nw_dst").unwrap(), "7.7.7.96/29")
            .unwrap();
        assert_eq!(
            x.format(Style::Megaflow),
            "recirc_id=0,eth,tcp,in_port=1,nw_dst=7.7.7.96/29,nw_frag=no,tp_dst=0x40/0xffc0"
        );
    }

    #[test]
    fn rule_format_and_keywords() {
        let x = m(&[("nw_src", "10.0.0.0/8"), ("tp_dst", "80")], &["tcp"]);
        assert_eq!(x.format(Style::Rule), "tcp,nw_src=10.0.0.0/8,tp_dst=80");
        let x = m(&[("dl_type", "0x88cc")], &[]);
        assert_eq!(x.format(Style::Rule), "dl_type=0x88cc");
        let x = m(&[("nw_proto", "47")], &["ip"]);
        assert_eq!(x.format(Style::Rule), "ip,nw_proto=47");
        let x = m(&[("arp_op", "1"), ("arp_tpa", "10.0.0.1")], &["arp"]);
        assert_eq!(x.format(Style::Rule), "arp,arp_tpa=10.0.0.1,arp_op=1");
        let x = m(&[("icmp_type", "8")], &["icmp"]);
        assert_eq!(x.format(Style::Rule), "icmp,icmp_type=8");
        assert_eq!(Match::catchall().format(Style::Rule), "");
    }

    #[test]
    fn vlan_forms() {
        let x = m(&[("dl_vlan", "5")], &[]);
        assert_eq!(x.key.vlan_tci(), 0x1005);
        assert_eq!(x.format(Style::Rule), "dl_vlan=5");
        let x = m(&[("dl_vlan", "5"), ("dl_vlan_pcp", "3")], &[]);
        assert_eq!(x.format(Style::Rule), "dl_vlan=5,dl_vlan_pcp=3");
        let x = m(&[("dl_vlan", "0xffff")], &[]);
        assert_eq!(x.format(Style::Rule), "vlan_tci=0x0000");
        let x = m(&[("vlan_tci", "0x1000/0x1000")], &[]);
        assert_eq!(x.format(Style::Rule), "vlan_tci=0x1000/0x1000");
    }

    #[test]
    fn prereqs() {
        let x = m(&[], &["tcp"]);
        assert!(x.check_prereqs(lookup("tcp_dst").unwrap()).is_ok());
        assert!(x.check_prereqs(lookup("udp_dst").unwrap()).is_err());
        assert!(x.check_prereqs(lookup("nw_src").unwrap()).is_ok());
        assert!(x.check_prereqs(lookup("ipv6_src").unwrap()).is_err());
        let y = m(&[], &[]);
        let e = y.check_prereqs(lookup("tp_dst").unwrap()).unwrap_err();
        assert!(e.contains("tp_dst requires"), "{e}");
        let nd = m(&[("icmpv6_type", "135")], &["icmp6"]);
        assert!(nd.check_prereqs(lookup("nd_target").unwrap()).is_ok());
        assert!(nd.check_prereqs(lookup("nd_tll").unwrap()).is_err());
    }
}
