//! OpenFlow 1.0's fixed 40-byte match (`ofp_match`), read into and
//! written from flowpath's [`Match`] as Open vSwitch translates it.

use crate::buf::{Reader, Writer};
use crate::error::*;
use flowpath_flow::{FieldId, Match};

const FW_IN_PORT: u32 = 1 << 0;
const FW_DL_VLAN: u32 = 1 << 1;
const FW_DL_SRC: u32 = 1 << 2;
const FW_DL_DST: u32 = 1 << 3;
const FW_DL_TYPE: u32 = 1 << 4;
const FW_NW_PROTO: u32 = 1 << 5;
const FW_TP_SRC: u32 = 1 << 6;
const FW_TP_DST: u32 = 1 << 7;
const FW_DL_VLAN_PCP: u32 = 1 << 20;
const FW_NW_TOS: u32 = 1 << 21;
/// Bytes of an `ofp_match`.
pub const MATCH_LEN: usize = 40;

fn set(m: &mut Match, f: FieldId, v: u128, mask: u128) {
    m.set_field_masked(f.info(), v & mask, mask);
}

fn prefix_mask(wild_bits: u32) -> u128 {
    let n = wild_bits.min(32);
    if n >= 32 {
        0
    } else {
        u128::from(u32::MAX << n)
    }
}

/// Reads an `ofp_match`.
pub fn pull(r: &mut Reader<'_>) -> Result<Match, OfError> {
    let wc = r.u32()?;
    let in_port = r.u16()?;
    let dl_src = r.uint(6)?;
    let dl_dst = r.uint(6)?;
    let dl_vlan = r.u16()?;
    let pcp = r.u8()?;
    r.skip(1)?;
    let dl_type = r.u16()?;
    let tos = r.u8()?;
    let proto = r.u8()?;
    r.skip(2)?;
    let nw_src = r.u32()?;
    let nw_dst = r.u32()?;
    let tp_src = r.u16()?;
    let tp_dst = r.u16()?;
    let mut m = Match::catchall();
    if wc & FW_IN_PORT == 0 {
        set(&mut m, FieldId::InPort, u128::from(in_port), 0xffff);
    }
    if wc & FW_DL_SRC == 0 {
        set(&mut m, FieldId::EthSrc, dl_src, (1 << 48) - 1);
    }
    if wc & FW_DL_DST == 0 {
        set(&mut m, FieldId::EthDst, dl_dst, (1 << 48) - 1);
    }
    // VLAN, as Open vSwitch: 0xffff is "no tag".
    let vid_exact = wc & FW_DL_VLAN == 0;
    let pcp_exact = wc & FW_DL_VLAN_PCP == 0;
    if vid_exact && dl_vlan == 0xffff {
        set(&mut m, FieldId::VlanTci, 0, 0xffff);
    } else {
        let (mut v, mut mk) = (0u16, 0u16);
        if vid_exact {
            v |= (dl_vlan & 0xfff) | 0x1000;
            mk |= 0x1fff;
        }
        if pcp_exact {
            v |= (u16::from(pcp & 7) << 13) | 0x1000;
            mk |= 0xf000;
        }
        if mk != 0 {
            set(&mut m, FieldId::VlanTci, u128::from(v), u128::from(mk));
        }
    }
    if wc & FW_DL_TYPE == 0 {
        set(&mut m, FieldId::EthType, u128::from(dl_type), 0xffff);
    }
    let is_ip = wc & FW_DL_TYPE == 0 && dl_type == 0x0800;
    let is_arp = wc & FW_DL_TYPE == 0 && dl_type == 0x0806;
    let src_mask = prefix_mask((wc >> 8) & 0x3f);
    let dst_mask = prefix_mask((wc >> 14) & 0x3f);
    if is_ip {
        if wc & FW_NW_TOS == 0 {
            set(&mut m, FieldId::NwTos, u128::from(tos & 0xfc), 0xfc);
        }
        if wc & FW_NW_PROTO == 0 {
            set(&mut m, FieldId::NwProto, u128::from(proto), 0xff);
        }
        if src_mask != 0 {
            set(&mut m, FieldId::NwSrc, u128::from(nw_src), src_mask);
        }
        if dst_mask != 0 {
            set(&mut m, FieldId::NwDst, u128::from(nw_dst), dst_mask);
        }
        let l4 = wc & FW_NW_PROTO == 0;
        let (fs, fd) = match proto {
            6 => (FieldId::TcpSrc, FieldId::TcpDst),
            17 => (FieldId::UdpSrc, FieldId::UdpDst),
            132 => (FieldId::SctpSrc, FieldId::SctpDst),
            1 => (FieldId::IcmpType, FieldId::IcmpCode),
            _ => (FieldId::InPort, FieldId::InPort),
        };
        if l4 && fs != FieldId::InPort {
            let full = fs.info().full_mask();
            if wc & FW_TP_SRC == 0 {
                set(&mut m, fs, u128::from(tp_src) & full, full);
            }
            if wc & FW_TP_DST == 0 {
                set(&mut m, fd, u128::from(tp_dst) & full, full);
            }
        }
    } else if is_arp {
        if wc & FW_NW_PROTO == 0 {
            set(&mut m, FieldId::ArpOp, u128::from(proto), 0xff);
        }
        if src_mask != 0 {
            set(&mut m, FieldId::ArpSpa, u128::from(nw_src), src_mask);
        }
        if dst_mask != 0 {
            set(&mut m, FieldId::ArpTpa, u128::from(nw_dst), dst_mask);
        }
    }
    Ok(m)
}

fn get(m: &Match, f: FieldId) -> (u128, u128) {
    crate::nxm::field_get(m, f.info())
}

fn prefix_bits(mask: u128) -> Option<u32> {
    let m = mask as u32;
    let ones = m.leading_ones();
    (m.checked_shl(ones).unwrap_or(0) == 0).then_some(32 - ones)
}

/// Writes `m` as an `ofp_match`; fails when OpenFlow 1.0 cannot express
/// it (registers, IPv6, masks other than IP prefixes, ...).
pub fn put(w: &mut Writer, m: &Match) -> Result<(), String> {
    let mut wc: u32 = 0x003f_ffff;
    let clear = |bit: u32, wc: &mut u32| *wc &= !bit;
    let mut cover = Match::catchall();
    let take = |f: FieldId, cover: &mut Match| -> (u128, u128) {
        let (v, mk) = get(m, f);
        if mk != 0 {
            cover.set_field_masked(f.info(), v, mk);
        }
        (v, mk)
    };
    let (in_port, mk) = take(FieldId::InPort, &mut cover);
    if mk != 0 {
        clear(FW_IN_PORT, &mut wc);
    }
    let (dl_src, mk) = take(FieldId::EthSrc, &mut cover);
    if mk != 0 {
        clear(FW_DL_SRC, &mut wc);
    }
    let (dl_dst, mk) = take(FieldId::EthDst, &mut cover);
    if mk != 0 {
        clear(FW_DL_DST, &mut wc);
    }
    let (tci, tmask) = take(FieldId::VlanTci, &mut cover);
    let (tci, tmask) = (tci as u16, tmask as u16);
    let (mut dl_vlan, mut pcp) = (0u16, 0u8);
    if tmask == 0xffff && tci == 0 {
        dl_vlan = 0xffff;
        clear(FW_DL_VLAN, &mut wc);
    } else if tmask != 0 {
        if tmask & 0x0fff == 0x0fff {
            dl_vlan = tci & 0xfff;
            clear(FW_DL_VLAN, &mut wc);
        }
        if tmask & 0xe000 == 0xe000 {
            pcp = (tci >> 13) as u8;
            clear(FW_DL_VLAN_PCP, &mut wc);
        }
    }
    let (dl_type, mk) = take(FieldId::EthType, &mut cover);
    if mk != 0 {
        clear(FW_DL_TYPE, &mut wc);
    }
    let (mut tos, mut proto, mut nw_src, mut nw_dst, mut tp_src, mut tp_dst) = (0, 0, 0, 0, 0, 0);
    let ip = m.prereqs_met(FieldId::NwProto.info()) && dl_type == 0x0800;
    let arp = m.prereqs_met(FieldId::ArpOp.info());
    let (fp, fs, fd) = if arp {
        (FieldId::ArpOp, FieldId::ArpSpa, FieldId::ArpTpa)
    } else {
        (FieldId::NwProto, FieldId::NwSrc, FieldId::NwDst)
    };
    if ip || arp {
        let (p, mk) = take(fp, &mut cover);
        if mk != 0 {
            proto = p as u8;
            clear(FW_NW_PROTO, &mut wc);
        }
        let (s, smk) = take(fs, &mut cover);
        let (d, dmk) = take(fd, &mut cover);
        nw_src = s as u32;
        nw_dst = d as u32;
        let sb = prefix_bits(smk).ok_or("nw_src mask is not a prefix")?;
        let db = prefix_bits(dmk).ok_or("nw_dst mask is not a prefix")?;
        wc = (wc & !(0x3f << 8) & !(0x3f << 14)) | (sb << 8) | (db << 14);
    }
    if ip {
        let (t, mk) = take(FieldId::NwTos, &mut cover);
        if mk != 0 {
            tos = t as u8;
            clear(FW_NW_TOS, &mut wc);
        }
        let pair = match proto {
            6 => Some((FieldId::TcpSrc, FieldId::TcpDst)),
            17 => Some((FieldId::UdpSrc, FieldId::UdpDst)),
            132 => Some((FieldId::SctpSrc, FieldId::SctpDst)),
            1 => Some((FieldId::IcmpType, FieldId::IcmpCode)),
            _ => None,
        };
        if let Some((a, b)) = pair.filter(|_| wc & FW_NW_PROTO == 0) {
            let (s, mk) = take(a, &mut cover);
            if mk != 0 {
                tp_src = s as u16;
                clear(FW_TP_SRC, &mut wc);
            }
            let (d, mk) = take(b, &mut cover);
            if mk != 0 {
                tp_dst = d as u16;
                clear(FW_TP_DST, &mut wc);
            }
        }
    }
    w.u32(wc);
    w.u16(in_port as u16);
    w.uint(dl_src, 6);
    w.uint(dl_dst, 6);
    w.u16(dl_vlan);
    w.u8(pcp);
    w.u8(0);
    w.u16(dl_type as u16);
    w.u8(tos);
    w.u8(proto);
    w.u16(0);
    w.u32(nw_src);
    w.u32(nw_dst);
    w.u16(tp_src);
    w.u16(tp_dst);
    let back = pull(&mut Reader::new(&w.buf[w.len() - MATCH_LEN..])).map_err(|e| e.to_string())?;
    if back != *m {
        return Err(format!(
            "OpenFlow 1.0's match cannot express {}",
            m.format(flowpath_flow::Style::Rule)
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use flowpath_ofproto::parse::parse_match;

    #[test]
    fn round_trips_what_of10_expresses_and_refuses_the_rest() {
        for text in [
            "",
            "in_port=1",
            "tcp,nw_src=10.0.0.0/8,tp_dst=80",
            "udp,nw_tos=32,udp_src=53",
            "icmp,icmp_type=8,icmp_code=0",
            "arp,arp_op=2,arp_tpa=1.2.3.4",
            "dl_vlan=5,dl_vlan_pcp=3,dl_src=00:00:00:00:00:01",
            "vlan_tci=0",
        ] {
            let m = parse_match(text).unwrap_or_else(|_| Match::catchall());
            let mut w = Writer::new();
            put(&mut w, &m).unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!(w.len(), MATCH_LEN);
        }
        for text in [
            "reg0=1",
            "ipv6,ipv6_src=::1",
            "ip,nw_src=10.0.0.1/255.0.255.0",
            "dl_src=01:00:00:00:00:00/01:00:00:00:00:00",
        ] {
            let m = parse_match(text).unwrap();
            assert!(put(&mut Writer::new(), &m).is_err(), "{text}");
        }
    }
}
