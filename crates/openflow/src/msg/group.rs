//! Groups on the wire: `OFPT_GROUP_MOD` (OpenFlow 1.1-1.4's form and
//! 1.5's, with bucket ids, bucket properties and Open vSwitch's
//! selection-method property) decoded into flowpath's
//! [`Group`], and the GROUP_DESC, GROUP and GROUP_FEATURES replies, laid
//! out per version as Open vSwitch 3.1 lays them out. OpenFlow 1.0 has
//! Open vSwitch's Nicira forms (`NXT_GROUP_MOD`, `NXST_GROUP*`), laid out
//! as OpenFlow 1.5's with OpenFlow 1.0 actions.

use super::*;
use flowpath_ofproto::group::{Bucket, DpHashTable, Group, GroupType, SelectField};

/// `OFPG_MAX`: the highest group id a group may have.
pub const OFPG_MAX: u32 = 0xffff_ff00;
/// `OFPG_ALL`: every group (delete, statistics).
pub const OFPG_ALL: u32 = 0xffff_fffc;
/// `OFPG_ANY`: no group.
const OFPG_ANY: u32 = 0xffff_ffff;
/// OpenFlow 1.5's highest bucket id.
pub const BUCKET_MAX: u32 = 0xffff_ff00;
/// `OFPG15_BUCKET_FIRST`.
pub const BUCKET_FIRST: u32 = 0xffff_fffd;
/// `OFPG15_BUCKET_LAST`.
pub const BUCKET_LAST: u32 = 0xffff_fffe;
/// `OFPG15_BUCKET_ALL`.
pub const BUCKET_ALL: u32 = 0xffff_ffff;

const NTR_VENDOR_ID: u32 = 0x0000_154d;
const NTR_COMPAT_VENDOR_ID: u32 = 0x0000_2320;
const NTRT_SELECTION_METHOD: u32 = 1;

/// A group_mod command.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum GroupCommand {
    /// Add a new group.
    Add,
    /// Replace an existing group.
    Modify,
    /// Open vSwitch's add-or-modify.
    AddOrModify,
    /// Delete a group (or every group, `OFPG_ALL`).
    Delete,
    /// OpenFlow 1.5: insert the buckets next to `command_bucket_id`.
    InsertBucket,
    /// OpenFlow 1.5: remove bucket `command_bucket_id`.
    RemoveBucket,
}

/// A decoded `OFPT_GROUP_MOD`.
#[derive(Clone, Debug)]
pub struct GroupMod {
    /// What to do.
    pub command: GroupCommand,
    /// The group: its id, type, buckets (ids: their positions before
    /// OpenFlow 1.5) and selection properties.
    pub group: Group,
    /// OpenFlow 1.5's `command_bucket_id` ([`BUCKET_ALL`] otherwise).
    pub command_bucket_id: u32,
}

fn group_type(t: u8) -> Result<GroupType, OfError> {
    Ok(match t {
        0 => GroupType::All,
        1 => GroupType::Select,
        2 => GroupType::Indirect,
        3 => GroupType::FastFailover,
        _ => return Err(GMFC_BAD_TYPE),
    })
}

fn type_number(t: GroupType) -> u8 {
    match t {
        GroupType::All => 0,
        GroupType::Select => 1,
        GroupType::Indirect => 2,
        GroupType::FastFailover => 3,
    }
}

fn watch_port(p: u32) -> Result<Option<u32>, OfError> {
    if p == OFPG_ANY {
        return Ok(None);
    }
    port::from_of11(p).map(Some).ok_or(GMFC_BAD_WATCH)
}

fn bucket_actions(body: &[u8], version: u8) -> Result<Vec<Action>, OfError> {
    let mut acts = Vec::new();
    actions::pull_actions(&mut Reader::new(body), version, &mut acts)?;
    Ok(acts)
}

fn pull_buckets11(r: &mut Reader<'_>, version: u8) -> Result<Vec<(Bucket, u16)>, OfError> {
    let mut out = Vec::new();
    while r.remaining() > 0 {
        if r.remaining() < 16 {
            return Err(GMFC_BAD_BUCKET);
        }
        let mut peek = *r;
        let len = usize::from(peek.u16()?);
        if len < 16 || len > r.remaining() {
            return Err(GMFC_BAD_BUCKET);
        }
        let mut b = Reader::new(r.bytes(len)?);
        b.skip(2)?;
        let weight = b.u16()?;
        let wp = b.u32()?;
        let wg = b.u32()?;
        b.skip(4)?;
        let actions = bucket_actions(b.rest(), version)?;
        let bucket = Bucket {
            id: out.len() as u32,
            weight,
            watch_port: watch_port(wp)?,
            watch_group: (wg != OFPG_ANY).then_some(wg),
            actions,
        };
        out.push((bucket, weight));
    }
    Ok(out)
}

/// Reads OpenFlow 1.4+ properties: `(type, body)` pairs, each padded to 8.
fn pull_props<'a>(r: &mut Reader<'a>) -> Result<Vec<(u16, &'a [u8])>, OfError> {
    let mut out = Vec::new();
    while r.remaining() > 0 {
        if r.remaining() < 4 {
            return Err(BPC_BAD_LEN);
        }
        let mut peek = *r;
        let t = peek.u16()?;
        let len = usize::from(peek.u16()?);
        let padded = len.next_multiple_of(8);
        if len < 4 || padded > r.remaining() {
            return Err(BPC_BAD_LEN);
        }
        let all = r.bytes(padded)?;
        out.push((t, &all[4..len]));
    }
    Ok(out)
}

fn pull_buckets15(
    r: &mut Reader<'_>,
    version: u8,
    kind: Result<GroupType, OfError>,
) -> Result<Vec<(Bucket, u16)>, OfError> {
    let mut out: Vec<(Bucket, u16)> = Vec::new();
    let select = kind == Ok(GroupType::Select);
    while r.remaining() > 0 {
        if r.remaining() < 8 {
            return Err(GMFC_BAD_BUCKET);
        }
        let mut peek = *r;
        let len = usize::from(peek.u16()?);
        let alen = usize::from(peek.u16()?);
        if len < 8 || len > r.remaining() || alen > len - 8 {
            return Err(GMFC_BAD_BUCKET);
        }
        let mut b = Reader::new(r.bytes(len)?);
        b.skip(4)?;
        let id = b.u32()?;
        let actions = bucket_actions(b.bytes(alen)?, version)?;
        let (mut weight, mut wp, mut wg) = (u16::from(select), OFPG_ANY, OFPG_ANY);
        for (t, body) in pull_props(&mut b)? {
            let mut p = Reader::new(body);
            match t {
                0 => weight = p.u16().map_err(|_| BPC_BAD_LEN)?,
                1 => wp = p.u32().map_err(|_| BPC_BAD_LEN)?,
                2 => wg = p.u32().map_err(|_| BPC_BAD_LEN)?,
                _ => return Err(BPC_BAD_TYPE),
            }
        }
        if id > BUCKET_MAX {
            return Err(GMFC_BAD_BUCKET);
        }
        if out.iter().any(|(o, _)| o.id == id) {
            return Err(GMFC_BAD_BUCKET);
        }
        out.push((
            Bucket {
                id,
                weight,
                watch_port: watch_port(wp)?,
                watch_group: (wg != OFPG_ANY).then_some(wg),
                actions,
            },
            weight,
        ));
    }
    Ok(out)
}

/// The selection-method property: method, parameter, hashed fields.
type Selection = (String, u64, Option<Vec<SelectField>>);

fn pull_selection(body: &[u8], kind: GroupType, command: u16) -> Result<Selection, OfError> {
    if kind != GroupType::Select {
        return Err(BPC_BAD_VALUE);
    }
    if !matches!(command, 0 | 1 | 0x8000) {
        return Err(BPC_BAD_VALUE);
    }
    // experimenter u32 already read by the caller: exp_type u32, pad,
    // selection_method[16], param u64, then the OXM field array.
    let mut r = Reader::new(body);
    r.skip(4).map_err(|_| BPC_BAD_LEN)?;
    r.skip(4).map_err(|_| BPC_BAD_LEN)?;
    let name = r.bytes(16).map_err(|_| BPC_BAD_LEN)?;
    let param = r.u64().map_err(|_| BPC_BAD_LEN)?;
    let Some(n) = name.iter().position(|b| *b == 0) else {
        return Err(BPC_BAD_VALUE);
    };
    let method = match &name[..n] {
        b"hash" => "hash",
        b"dp_hash" => "dp_hash",
        _ => return Err(BPC_BAD_VALUE),
    };
    if r.remaining() > 0 && method != "hash" {
        return Err(BPC_BAD_VALUE);
    }
    let mut fields: Vec<SelectField> = Vec::new();
    while r.remaining() > 0 {
        let h = r.u32().map_err(|_| BMC_BAD_LEN)?;
        let id = nxm::field_of_header(h).ok_or(BMC_BAD_FIELD)?;
        if nxm::has_mask(h) {
            return Err(BMC_BAD_MASK);
        }
        let mask = r.uint(nxm::len_of(h)).map_err(|_| BMC_BAD_LEN)?;
        if fields.iter().any(|f| f.id == id) {
            return Err(BMC_DUP_FIELD);
        }
        let mut sf = SelectField { id, mask: 0 };
        let mask = mask & sf.full_mask();
        if mask == 0 {
            return Err(BMC_BAD_MASK);
        }
        sf.mask = mask;
        fields.push(sf);
    }
    fields.sort_by_key(SelectField::rank);
    let fields = (!fields.is_empty()).then_some(fields);
    Ok((method.to_string(), param, fields))
}

/// OpenFlow 1.5's layout (also Open vSwitch's OpenFlow 1.0 extension).
fn of15_layout(version: u8) -> bool {
    version == OFP10 || version >= OFP15
}

fn command_of_group(c: u16, version: u8) -> Result<GroupCommand, OfError> {
    Ok(match c {
        0 => GroupCommand::Add,
        1 => GroupCommand::Modify,
        2 => GroupCommand::Delete,
        3 if of15_layout(version) => GroupCommand::InsertBucket,
        5 if of15_layout(version) => GroupCommand::RemoveBucket,
        0x8000 => GroupCommand::AddOrModify,
        _ => return Err(GMFC_BAD_COMMAND),
    })
}

/// Decodes the body of an `OFPT_GROUP_MOD` of `version` (or of an
/// `NXT_GROUP_MOD` after its subtype, `version` 1.0), checked as Open
/// vSwitch checks it before looking at the group table.
pub fn decode_group_mod(r: &mut Reader<'_>, version: u8) -> Result<GroupMod, OfError> {
    let cmd = r.u16()?;
    let kind = group_type(r.u8()?);
    r.skip(1)?;
    let id = r.u32()?;
    let (buckets, props, command_bucket_id) = if !of15_layout(version) {
        let buckets = pull_buckets11(r, version)?;
        if version >= OFP13 && cmd == 2 && !buckets.is_empty() {
            return Err(GMFC_INVALID_GROUP);
        }
        (buckets, Vec::new(), BUCKET_ALL)
    } else {
        let blen = usize::from(r.u16()?);
        r.skip(2)?;
        let cbid = r.u32()?;
        let ok = match cmd {
            5 => cbid == BUCKET_ALL || cbid <= BUCKET_MAX || cbid >= BUCKET_FIRST,
            3 => cbid <= BUCKET_MAX || cbid == BUCKET_FIRST || cbid == BUCKET_LAST,
            _ => cbid == BUCKET_ALL,
        };
        if !ok {
            return Err(GMFC_BAD_BUCKET);
        }
        if blen > r.remaining() {
            return Err(BRC_BAD_LEN_E);
        }
        let mut br = Reader::new(r.bytes(blen)?);
        let buckets = pull_buckets15(&mut br, version, kind)?;
        let props = pull_props(r)?;
        (buckets, props, cbid)
    };
    let mut selection: Option<Selection> = None;
    for (t, body) in props {
        let exp = Reader::new(body).u32().unwrap_or(0);
        let exp_type = Reader::new(body.get(4..).unwrap_or(&[])).u32().unwrap_or(0);
        if t == 0xffff
            && (exp == NTR_VENDOR_ID || exp == NTR_COMPAT_VENDOR_ID)
            && exp_type == NTRT_SELECTION_METHOD
        {
            let k = kind?;
            selection = Some(pull_selection(&body[4..], k, cmd)?);
        } else {
            return Err(BPC_BAD_TYPE);
        }
    }
    let kind = kind?;
    let command = command_of_group(cmd, version)?;
    // Open vSwitch's consistency checks.
    if kind == GroupType::Indirect && command != GroupCommand::Delete && buckets.len() != 1 {
        return Err(GMFC_INVALID_GROUP);
    }
    if command == GroupCommand::RemoveBucket && !buckets.is_empty() {
        return Err(GMFC_BAD_BUCKET);
    }
    for (b, weight) in &buckets {
        if *weight != 0 && kind != GroupType::Select && command != GroupCommand::InsertBucket {
            return Err(GMFC_INVALID_GROUP);
        }
        let live = b.watch_port.is_some() || b.watch_group.is_some();
        match kind {
            GroupType::All | GroupType::Indirect if live => return Err(GMFC_WATCH_UNSUPPORTED),
            GroupType::FastFailover if !live => return Err(GMFC_INVALID_GROUP),
            _ => {}
        }
    }
    let buckets: Vec<Bucket> = buckets
        .into_iter()
        .map(|(mut b, w)| {
            // flowpath's groups give every bucket weight 1 but a select
            // group's, as `add-group` text does.
            b.weight = if kind == GroupType::Select { w } else { 1 };
            b
        })
        .collect();
    let (method, param, fields) = match selection {
        Some((m, p, f)) => (Some(m), p, f),
        None => (None, 0, None),
    };
    let mut group = Group {
        id,
        kind,
        buckets,
        fields,
        method,
        param,
        dp_hash: None,
    };
    refresh_dp_hash(&mut group);
    Ok(GroupMod {
        command,
        group,
        command_bucket_id,
    })
}

/// Recomputes a select group's datapath-hash table after its buckets or
/// method changed (as `add-group` text would build it).
pub fn refresh_dp_hash(g: &mut Group) {
    g.dp_hash = match (g.kind, g.method.as_deref()) {
        (GroupType::Select, None) => DpHashTable::build(&g.buckets, 256, true, 0),
        (GroupType::Select, Some("dp_hash")) => {
            DpHashTable::build(&g.buckets, 256, g.param >> 32 == 1, g.param as u32)
        }
        _ => None,
    };
}

fn put_bucket_actions(w: &mut Writer, b: &Bucket, version: u8) -> Result<(), String> {
    let m = Match::catchall();
    actions::put_actions(
        w,
        &b.actions,
        Ctx {
            version,
            matching: &m,
        },
    )
}

fn wire_weight(g: &Group, b: &Bucket) -> u16 {
    if g.kind == GroupType::Select {
        b.weight
    } else {
        0
    }
}

/// One group's GROUP_DESC (or `NXST_GROUP_DESC`) entry for `version`.
pub fn group_desc_entry(version: u8, g: &Group) -> Result<Vec<u8>, String> {
    let mut w = Writer::new();
    if !of15_layout(version) {
        w.u16(0);
        w.u8(type_number(g.kind));
        w.u8(0);
        w.u32(g.id);
        for b in &g.buckets {
            let s = w.len();
            w.u16(0);
            w.u16(wire_weight(g, b));
            w.u32(b.watch_port.map_or(OFPG_ANY, port::to_of11));
            w.u32(b.watch_group.unwrap_or(OFPG_ANY));
            w.zeros(4);
            put_bucket_actions(&mut w, b, version)?;
            let n = (w.len() - s) as u16;
            w.patch_u16(s, n);
        }
    } else {
        w.u16(0);
        w.u8(type_number(g.kind));
        w.u8(0);
        w.u32(g.id);
        w.u16(0);
        w.zeros(6);
        let start = w.len();
        for b in &g.buckets {
            let s = w.len();
            w.u16(0);
            w.u16(0);
            w.u32(b.id);
            put_bucket_actions(&mut w, b, version)?;
            let alen = (w.len() - s - 8) as u16;
            let prop = |w: &mut Writer, t: u16, body: &[u8]| {
                let ps = w.len();
                w.u16(t);
                w.u16((4 + body.len()) as u16);
                w.bytes(body);
                w.pad8_from(ps);
            };
            if g.kind == GroupType::Select {
                // A 16-bit property is 8 bytes long (OpenFlow's rule, as
                // Open vSwitch writes it).
                let [hi, lo] = b.weight.to_be_bytes();
                prop(&mut w, 0, &[hi, lo, 0, 0]);
            }
            if let Some(p) = b.watch_port {
                prop(&mut w, 1, &port::to_of11(p).to_be_bytes());
            }
            if let Some(x) = b.watch_group {
                prop(&mut w, 2, &x.to_be_bytes());
            }
            let n = (w.len() - s) as u16;
            w.patch_u16(s, n);
            w.patch_u16(s + 2, alen);
        }
        let blen = (w.len() - start) as u16;
        w.patch_u16(8, blen);
        if let Some(m) = g.method.as_deref() {
            put_selection(&mut w, m, g.param, g.fields.as_deref())?;
        }
    }
    let n = w.len() as u16;
    w.patch_u16(0, n);
    Ok(w.buf)
}

fn put_selection(
    w: &mut Writer,
    method: &str,
    param: u64,
    fields: Option<&[SelectField]>,
) -> Result<(), String> {
    let s = w.len();
    w.u16(0xffff);
    w.u16(0);
    w.u32(NTR_VENDOR_ID);
    w.u32(NTRT_SELECTION_METHOD);
    w.zeros(4);
    let mut name = [0u8; 16];
    let n = method.len().min(15);
    name[..n].copy_from_slice(&method.as_bytes()[..n]);
    w.bytes(&name);
    w.u64(param);
    for f in fields.unwrap_or(&[]) {
        let h = nxm::header_of(f.id, true)
            .ok_or_else(|| format!("{}: no OXM header to hash it by", f.name()))?;
        w.u32(h);
        w.uint(f.mask, nxm::len_of(h));
    }
    let n = (w.len() - s) as u16;
    w.patch_u16(s + 2, n);
    w.pad8_from(s);
    Ok(())
}

/// One group's statistics entry (GROUP or `NXST_GROUP` reply, OpenFlow
/// 1.3's layout; 1.1/1.2's lacks the duration): its reference count,
/// counters, and each bucket's counters.
pub fn group_stats_entry(
    version: u8,
    id: u32,
    ref_count: u32,
    counters: (u64, u64),
    buckets: &[(u64, u64)],
    duration: (u32, u32),
) -> Vec<u8> {
    let mut w = Writer::new();
    w.u16(0);
    w.zeros(2);
    w.u32(id);
    w.u32(ref_count);
    w.zeros(4);
    w.u64(counters.0);
    w.u64(counters.1);
    if version >= OFP13 || version == OFP10 {
        w.u32(duration.0);
        w.u32(duration.1);
    }
    for (p, b) in buckets {
        w.u64(*p);
        w.u64(*b);
    }
    let n = w.len() as u16;
    w.patch_u16(0, n);
    w.buf
}

/// The GROUP_FEATURES (`NXST_GROUP_FEATURES`) reply body for `version`,
/// as Open vSwitch 3.1 answers: every type, weights, liveness and
/// chaining, `OFPG_MAX` groups of each type, and the same actions for
/// each (in `version`'s action numbering).
pub fn group_features_body(version: u8) -> Vec<u8> {
    let mut w = Writer::new();
    w.u32(0xf);
    w.u32(0x7);
    for _ in 0..4 {
        w.u32(OFPG_MAX);
    }
    // output, set_mpls_ttl, dec_mpls_ttl, push_vlan, pop_vlan, push_mpls,
    // pop_mpls, set_queue, group, set_nw_ttl, dec_nw_ttl, set_field.
    let acts: u32 = if version == OFP10 {
        // Every OpenFlow 1.0 action, output to enqueue.
        0xfff
    } else {
        [0u32, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25]
            .iter()
            .map(|b| 1u32 << b)
            .sum()
    };
    for _ in 0..4 {
        w.u32(acts);
    }
    w.buf
}

/// Decodes a GROUP or GROUP_DESC statistics request's group id (1.1+;
/// OpenFlow 1.5's GROUP_DESC carries one too).
pub(super) fn pull_group_id(r: &mut Reader<'_>) -> u32 {
    r.u32().unwrap_or(OFPG_ALL)
}
