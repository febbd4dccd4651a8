//! Fuzz target `wire`: every `flowpath_wire` view, checked or not, on
//! arbitrary bytes: no accessor or setter panics, and on a packet whose
//! IPv4 header checksum verifies, the incremental rewrites keep it valid.

#![no_main]

use core::net::Ipv4Addr;

use flowpath_wire::{
    ethernet, ArpPacket, EthernetFrame, IcmpPacket, Icmpv6Packet, Ipv4Packet, Ipv6ExtHeader,
    Ipv6FragHeader, Ipv6Packet, NdPacket, SctpPacket, TcpPacket, UdpPacket, VlanTag,
};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let e = EthernetFrame::new_unchecked(data);
    let _ = (
        e.dst_addr(),
        e.src_addr(),
        e.ethertype(),
        e.payload(),
        e.check_len(),
    );
    let v = VlanTag::new_unchecked(data);
    let _ = (
        v.tci(),
        v.pcp(),
        v.dei(),
        v.vid(),
        v.ethertype(),
        v.payload(),
        v.check_len(),
    );
    let _ = ethernet::llc_snap_ethertype(data);

    let a = ArpPacket::new_unchecked(data);
    let _ = (
        a.check_len(),
        a.is_eth_ipv4(),
        a.operation(),
        a.sender_hw_addr(),
        a.target_proto_addr(),
    );
    let _ = (
        a.sender_eth(),
        a.sender_ipv4(),
        a.target_eth(),
        a.target_ipv4(),
        a.total_len(),
    );

    let ip = Ipv4Packet::new_unchecked(data);
    let _ = (
        ip.check_len(),
        ip.payload(),
        ip.options(),
        ip.verify_checksum(),
        ip.pseudo_header_sum(),
    );
    let _ = (
        ip.src_addr(),
        ip.dst_addr(),
        ip.frag_offset(),
        ip.is_later_fragment(),
        ip.dscp(),
        ip.ecn(),
    );
    if ip.check_len().is_ok() && ip.verify_checksum() {
        let mut buf = data.to_vec();
        let mut p = Ipv4Packet::new_unchecked(&mut buf[..]);
        p.rewrite_ttl(data.len() as u8);
        p.rewrite_tos(data.first().copied().unwrap_or(0));
        p.rewrite_src_addr(Ipv4Addr::new(10, 0, 0, 1));
        p.rewrite_dst_addr(Ipv4Addr::BROADCAST);
        assert!(p.verify_checksum());
    }

    let ip6 = Ipv6Packet::new_unchecked(data);
    let _ = (
        ip6.check_len(),
        ip6.payload(),
        ip6.flow_label(),
        ip6.traffic_class(),
        ip6.src_addr(),
    );
    let _ = ip6.pseudo_header_sum(58, data.len() as u32);
    for kind in [0u8, 51] {
        let h = Ipv6ExtHeader::new_unchecked(data, kind);
        let _ = (
            h.check_len(),
            h.header_len(),
            h.next_header(),
            h.data(),
            h.payload(),
        );
    }
    let f = Ipv6FragHeader::new_unchecked(data);
    let _ = (
        f.check_len(),
        f.frag_offset(),
        f.more_frags(),
        f.ident(),
        f.payload(),
    );

    let t = TcpPacket::new_unchecked(data);
    let _ = (
        t.check_len(),
        t.flags(),
        t.options(),
        t.payload(),
        t.verify_checksum(0),
    );
    let u = UdpPacket::new_unchecked(data);
    let _ = (
        u.check_len(),
        u.check_len_field(),
        u.payload(),
        u.verify_checksum(0),
    );
    let s = SctpPacket::new_unchecked(data);
    let _ = (s.check_len(), s.verify_checksum(), s.payload());
    let i = IcmpPacket::new_unchecked(data);
    let _ = (
        i.check_len(),
        i.verify_checksum(),
        i.payload(),
        i.echo_ident(),
    );
    let i6 = Icmpv6Packet::new_unchecked(data);
    let _ = (
        i6.check_len(),
        i6.data_word(),
        i6.payload(),
        i6.verify_checksum(0),
    );
    let nd = NdPacket::new_unchecked(data);
    let _ = (nd.check_len(), nd.target_addr(), nd.na_flags());
    for o in nd.options().take(64).flatten() {
        let _ = (o.kind(), o.len(), o.link_layer_addr());
    }

    // Setters on any buffer, including short ones.
    let mut buf = data.to_vec();
    let mut t = TcpPacket::new_unchecked(&mut buf[..]);
    t.rewrite_src_port(1);
    t.update_checksum_for_addr(&[1, 2, 3, 4], &[5, 6, 7, 8]);
    let mut u = UdpPacket::new_unchecked(&mut buf[..]);
    u.rewrite_dst_port(2);
    u.fill_checksum(0);
    let mut s = SctpPacket::new_unchecked(&mut buf[..]);
    s.rewrite_src_port(3);
    assert!(s.check_len().is_err() || s.verify_checksum());
});
