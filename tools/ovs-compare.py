#!/usr/bin/env python3
"""Differential check of `flowpath trace` against a running OVS 3.1.

Developer tool, not part of CI: needs ovs-vswitchd running with a netdev
bridge br0 (fail_mode=secure) with dummy ports p1..p4 at OpenFlow ports
1..4, as tools/ovs-sandbox.sh starts it. Usage:

  tools/ovs-sandbox.sh start 4
  OVS_RUNDIR=/tmp/ovs-sandbox tools/ovs-compare.py [--normal|--of13|--regs|--conj|--select|--mpls-actions|--ct|--tunnels] \
      [--seed S] [--rulesets N] [--packets M] [--flowpath target/debug/flowpath] \
      [--record FILE] [--ctl /path/ovs-vswitchd.PID.ctl]

Generates random rule sets and packets, traces each packet with both, and
prints every difference in datapath actions, plus megaflows where OVS's is
wider than ours (ours must never be narrower) or they differ at all.

--conj: conjunctive matches: 1-3 conjunction ids at their own priorities,
2-3 dimensions, conj_id flows (sometimes missing), ordinary flows around
and behind them (same match, lower priority); grouped records as --regs.

--mpls: the usual rule sets (as --of13, loaded with OpenFlow 1.3) with
MPLS matches (mpls, mplsm, mpls_label, mpls_tc, mpls_bos, mpls_ttl) and
MPLS packets among the others; grouped records as --regs.

--mpls-actions: as --mpls, with MPLS actions (push_mpls, pop_mpls,
set_mpls_label/tc/ttl, dec_mpls_ttl, set_field to mpls_label/tc/ttl) and
MPLS packets of one to four labels (datapath-flow syntax, traced on
ovs-netdev). Where OVS recirculates (a pop_mpls followed by what reads
L3) both passes are compared, as with --select; where OVS writes
set(mpls(...)), flowpath's megaflow may add MPLS bits (the whole entry;
OVS leaves the untouched ones out).

--ct: connection tracking as firewall pipelines write it (the OVS
tutorial's, Neutron's and OVN's shapes): table 0 sends untracked IPv4 and
IPv6 through ct(table=1[,zone=N|zone=NXM_NX_REG6[0..15]][,nat]) (REG6
loaded per port first, or a DNAT commit); later tables match ct_state
combinations (masked: +trk+est-rel, +trk+new, +inv, -new+rpl, ...),
ct_mark, ct_label (masked), ct_zone and, with +trk+est, the original
tuple (ct_nw_src/dst, ct_ipv6_src/dst, ct_nw_proto, ct_tp_dst), and act
with ct(commit[,force][,zone][,exec(set_field/load to ct_mark/ct_label)]
[,nat(src|dst=range[,persistent][,hash|random])][,alg=ftp|tftp]), ct
without table (tracked, then the pipeline goes on with the ct fields
cleared), ct(table=N) from later tables, ct_clear, move from ct_mark,
outputs, resubmits and registers. Some packets come already tracked (a
state, zone, mark, label and tuple in the flow). Each packet is traced
under --ct-next trk|new, trk|est, trk|est|rpl, trk|rel and trk|inv (and,
with NAT, two of trk|new|snat, trk|new|dnat, trk|est|dnat,
trk|est|rpl|snat; and a pair of states where a second ct(table=N) may
follow): OVS's ofproto/trace follows each ct recirculation itself and
prints every pass after a "recirc(0x..) - resume conntrack" banner,
flowpath's `trace --json --ct-next` prints the same passes in the same
order; actions and megaflows of every pass are compared, recirculation
ids apart. With --record, one line per rule set holds a sample of its
traces (two that recirculate and one more; every trace is compared):
{"rules", "traces": [{"packet", "ct_next", "passes": [{"megaflow",
"actions"}, ...]}]}. (OVS takes --ct-next as `trk,est`; the script passes
that form, flowpath takes both.)

--select: select groups by the datapath hash (OVS's default method, and
selection_method=dp_hash with a parameter), weighted (weight 0 too),
buckets watching ports, other groups' buckets sending to them. A first
pass that ends in hash(...),recirc(ID) is compared (ids apart: each
switch has its own); then the packet is sent through OVS's own datapath
(netdev-dummy/receive after revalidator/purge; ovs-ofctl compose-packet
makes it) to learn the dp_hash OVS gave it and its recirculation id from
the flows installed, and the second pass is traced on both: OVS with
recirc_id=ID,dp_hash=H and the packet flowpath's `trace --json` says was
recirculated, flowpath (a second run that first traces the same first
passes, so its ids are the same) likewise. Recorded second passes carry
"recirc_of": [trace index, k] and "dp_hash". Rule sets avoid what
OpenFlow 1.3 cannot carry (they are loaded with groups). OVS 3.1 can
crash on some frozen action sets (an assertion in recirc_alloc_id__);
the script then restarts it and says so.

--regs --fin [--learn]: as --regs, with fin_timeout(...) actions (and
learn with fin timeouts): their megaflow (nw_proto) and printing.

--regs --tun: as --regs, with tun_id (matches, set_tunnel, set_tunnel64,
set_field/load/move): translation state, 0 on every packet of these
untunnelled ports.

--regs --cpl: as --regs, with check_pkt_larger(N)->BIT in most rules and
matches on those bits.

--regs: pipelines of 2-4 tables over registers, metadata and pkt_mark
(load, move, push/pop, set_field, write_metadata, load to in_port, and
matches on them); with --record, one line per rule set ("traces").

--tunnels: native tunnelling (tunnel ports, tunnel fields, tnl_push);
see tools/ovs_compare_tunnels.py, which holds it, for its sandbox and
what is compared.

--normal: rule sets built around actions=NORMAL (with matches and other
actions before it), random 802.1Q port configurations (tag= / trunks= on
OVS, --port-vlan on flowpath) and packet sequences over a few MACs;
each packet is traced with `ofproto/trace ... -generate` (which learns, as
a received packet would) and with `flowpath trace --learn`, the MAC
tables flushed between rule sets. Flooding order differs between the two
(OVS uses its port list's order), so actions are compared as the set of
(port, VLAN tags, header rewrites) each output sends.

Port numbers come from `ovs-appctl dpif/show` (tools/ovs-sandbox.sh makes
datapath port = OpenFlow port, LOCAL = datapath port 100).
"""
import argparse, json, os, random, re, subprocess, sys, tempfile, time

def rnd_ip(r):
    return "%d.%d.%d.%d" % (r.choice([7, 10, 192]), r.randrange(4), r.randrange(4), r.randrange(256))

MPLS_LABELS = [0, 1, 5, 16, 1000]

def rnd_match(r, table_count):
    parts = []
    proto = r.choice(["", "ip", "tcp", "udp", "tcp", "udp", "icmp", "arp", "ipv6", "tcp6", "icmp6"])
    if MPLS[0] and r.random() < 0.4:
        proto = r.choice(["mpls", "mpls", "mplsm"])
    if proto:
        parts.append(proto)
    if proto.startswith("mpls"):
        for f, vals in (("mpls_label", MPLS_LABELS), ("mpls_tc", range(8)), ("mpls_bos", (0, 1)), ("mpls_ttl", (1, 64, 255))):
            if r.random() < 0.45:
                parts.append("%s=%d" % (f, r.choice(vals)))
    if r.random() < 0.3:
        parts.append("in_port=%d" % r.randint(1, 4))
    if r.random() < 0.15:
        parts.append("dl_vlan=%d" % r.randint(1, 3))
    if proto in ("ip", "tcp", "udp", "icmp"):
        for f in ("nw_src", "nw_dst"):
            if r.random() < 0.4:
                plen = r.choice([8, 16, 24, 28, 32, 30])
                parts.append("%s=%s/%d" % (f, rnd_ip(r), plen))
        if r.random() < 0.1:
            parts.append("nw_tos=%d" % (r.randrange(4) * 4))
    if proto in ("tcp", "udp", "tcp6"):
        for f in ("tp_src", "tp_dst"):
            if r.random() < 0.4:
                if r.random() < 0.5:
                    parts.append("%s=%d" % (f, r.choice([22, 80, 90, 443, 1024, 5900])))
                else:
                    m = (0xffff << r.randrange(16)) & 0xffff
                    parts.append("%s=0x%x/0x%x" % (f, r.randrange(65536) & m, m))
    if proto == "icmp" and r.random() < 0.5:
        parts.append("icmp_type=%d" % r.choice([0, 8, 3]))
    if FRAGS[0] and proto in ("ip", "tcp", "udp", "icmp", "ipv6", "tcp6") and r.random() < 0.2:
        parts.append("nw_frag=%s" % r.choice(["no", "yes", "first", "later", "not_later"]))
    if FRAGS[0] and proto == "icmp" and r.random() < 0.3:
        parts.append("icmp_code=%d" % r.choice([0, 1]))
    if proto == "arp" and r.random() < 0.5:
        parts.append("arp_op=%d" % r.choice([1, 2]))
    if proto == "arp" and r.random() < 0.3:
        parts.append("arp_sha=00:00:00:00:00:%02x" % r.randrange(3))
    if proto == "tcp" and r.random() < 0.2:
        parts.append("tcp_flags=%s" % r.choice(["+syn", "+syn-ack", "+ack"]))
    if proto == "icmp6" and r.random() < 0.6:
        t = r.choice([128, 135, 136])
        parts.append("icmp_type=%d" % t)
        if t != 128 and r.random() < 0.6:
            parts.append("nd_target=1000::%d" % r.randrange(3))
    if proto == "tcp6" and r.random() < 0.5:
        parts.append("ipv6_dst=2001:db8::%x/%d" % (r.randrange(16), r.choice([64, 120, 128])))
    return parts, proto

GROUP_IDS = []  # the current rule set's groups (group:N actions pick from them)
OF13 = [False]
MPLS = [False]  # --mpls: MPLS matches and packets among the others
MPLS_ACT = [False]  # --mpls-actions: MPLS actions and multi-label packets
FIN = [False]  # --fin: fin_timeout actions, learn with fin_idle/hard_timeout
TUN = [False]  # --tun: tun_id matched, loaded, moved and set in --regs rules
CPL = [False]  # --cpl: check_pkt_larger in most --regs rules, matches on its bits
SELECT = [False]  # --select: select groups (datapath hash, recirculation), compared over both passes
HASHES = [False]  # --hashes: choices made by OVS's hashes (hrw bundles, multipath links, slow-path select groups)
FRAGS = [False]  # --frags: IP fragments (first/later) among the packets, rule sets under a random frag mode
ARPW = [False]  # --arp-rewrites: writes to ARP, ICMP and ND fields (responders), their packets
VLANVID = [False]  # --vlan-vid: OpenFlow 1.3 rule sets over vlan_vid (matches, set_field, load/move) and tagged packets
OUTREG = [False]  # --output-reg: with --regs, output:REG[a..b] to ports the registers hold
CLONE = [False]  # --clone: with --regs, clone(...) around some of a rule's actions
CTLOPTS = [False]  # --controller-opts: with --regs, controller(reason=,max_len=,id=,userdata=,pause) and sample(...)
IPFIX = [False]  # --ipfix: a flow-sample collector set on the bridge (sample(...) samples), sampling_port/ingress/egress
LEARN = [False]  # --learn: a learn action in (nearly) every --regs rule  # --of13: no OpenFlow 1.0-only actions, groups in most rule sets

# Fields a select group may hash (--hashes), some masked.
SELECT_FIELDS = ["eth_src", "eth_dst", "eth_dst=ff:ff:ff:00:00:00", "eth_type", "vlan_tci", "vlan_vid", "vlan_pcp",
                 "ip_src", "ip_dst", "ip_src=255.255.255.0", "ip_dst=0.0.0.255", "ipv6_src", "ipv6_dst=ffff::", "ip_proto", "nw_tos", "ip_dscp", "nw_ecn", "nw_ttl", "ip_frag",
                 "tcp_src", "tcp_dst", "tp_src", "udp_src", "udp_dst=0xff", "sctp_dst", "icmp_type", "icmp_code", "icmpv6_type", "in_port", "arp_op", "arp_spa", "arp_sha",
                 "tcp_flags", "nd_target", "pkt_mark", "reg0", "metadata"]

def rnd_groups(r):
    """1-3 groups of type all, indirect or ff; with --select also select
    groups by the datapath hash (OVS 3.1's default method, or
    selection_method=dp_hash with a parameter), weighted, some buckets
    watching ports, and buckets of the other groups sending to them (a
    freeze inside a bucket). (Select groups by the slow-path hash are not
    compared: the hash is each switch's own.)"""
    groups = []
    n_groups = r.randint(1, 3)
    for gid in range(1, n_groups + 1):
        kinds = ["all", "indirect", "ff"] + (["select"] * 4 if SELECT[0] or HASHES[0] else [])
        kind = r.choice(kinds)
        n = 1 if kind == "indirect" else r.randint(1, 4 if kind == "select" else 3)
        buckets = []
        for _ in range(n):
            choices = ["output:%d" % r.randint(1, 4), "mod_dl_src:00:00:00:00:00:%02x" % r.randrange(256), "pop_vlan", "push_vlan:0x8100"]
            if SELECT[0] and gid < n_groups and r.random() < 0.3:
                choices.append("group:%d" % r.randint(gid + 1, n_groups))
            acts = ",".join(r.choice(choices) for _ in range(r.randint(1, 2)))
            watch = "watch_port:%d," % r.randint(1, 6) if kind == "ff" or (kind == "select" and r.random() < 0.2) else ""
            weight = "weight:%d," % r.choice([1, 1, 1, 2, 3, 5, 10, 0]) if kind == "select" and r.random() < 0.5 else ""
            buckets.append("bucket=%s%sactions=%s" % (weight, watch, acts))
        method = ""
        if kind == "select" and HASHES[0] and r.random() < 0.75:
            # Picked in the slow path by OVS's hashes: selection_method=hash
            # (with fields, some masked, or without), or weights that need
            # more than 256 dp_hash slots.
            if r.random() < 0.7:
                method = ",selection_method=hash"
                if r.random() < 0.4:
                    method += ",selection_method_param=%d" % r.choice([1, 7, 0x12345, 0xfffffffff])
                if r.random() < 0.8:
                    fs = {}
                    for f in r.sample(SELECT_FIELDS, r.randint(1, 4)):
                        fs.setdefault(f.split("=")[0], f)
                    method += ",fields(%s)" % ",".join(fs.values())
            else:
                buckets = [re.sub(r"weight:\d+,", "", b).replace("bucket=", "bucket=weight:%d," % r.choice([1, 2, 300, 1000, 65535]), 1) for b in buckets]
                if len(buckets) == 1:
                    buckets.append("bucket=weight:%d,actions=output:%d" % (r.choice([300, 1000]), r.randint(1, 4)))
        elif kind == "select" and r.random() < 0.3:
            method = ",selection_method=dp_hash" + r.choice(["", ",selection_method_param=%d" % r.randint(1, 9), ",selection_method_param=0x1%08x" % r.randint(0, 9)])
        groups.append("group_id=%d,type=%s%s,%s" % (gid, kind, method, ",".join(buckets)))
    return groups

BUNDLE_FIELDS = ["eth_src", "symmetric_l4", "symmetric_l3l4", "symmetric_l3l4+udp", "nw_src", "nw_dst", "symmetric_l3"]

def rnd_mpls_action(r, cur):
    """An MPLS action that OpenFlow 1.3 accepts after a list whose packet
    is now `cur` ("mpls" or another protocol); (action, new cur)."""
    k = r.random()
    if cur.startswith("mpls"):
        if k < 0.25:
            t = r.choice(["0x0800", "0x0800", "0x86dd", "0x8847"])
            return "pop_mpls:" + t, ("mpls" if t == "0x8847" else "ip")
        if k < 0.4:
            return "push_mpls:" + r.choice(["0x8847", "0x8848"]), "mpls"
        if k < 0.55:
            return r.choice(["set_mpls_label:%d" % r.choice(MPLS_LABELS), "set_field:%d->mpls_label" % r.choice(MPLS_LABELS)]), cur
        if k < 0.65:
            return r.choice(["set_mpls_tc:%d" % r.randrange(8), "set_field:%d->mpls_tc" % r.randrange(8)]), cur
        if k < 0.75:
            return r.choice(["set_mpls_ttl:%d" % r.choice([0, 1, 2, 64]), "set_field:%d->mpls_ttl" % r.choice([1, 64])]), cur
        return "dec_mpls_ttl", cur
    return "push_mpls:" + r.choice(["0x8847", "0x8847", "0x8848"]), "mpls"

def rnd_actions(r, proto, table, ntables):
    acts = []
    if MPLS_ACT[0] and r.random() < 0.7:
        cur = proto
        for _ in range(r.randint(1, 3)):
            a, cur = rnd_mpls_action(r, cur)
            acts.append(a)
            if r.random() < 0.4:
                acts.append("output:%d" % r.randint(1, 4))
        if cur != proto:
            # Later actions were drawn for the matched protocol: end here.
            if table + 1 < ntables and r.random() < 0.3:
                acts.append("resubmit(,%d)" % r.randint(table + 1, ntables - 1))
            else:
                acts.append("output:%d" % r.randint(1, 4))
            return ",".join(acts)
    if GROUP_IDS and r.random() < (0.6 if SELECT[0] else 0.3):
        acts.append("group:%d" % r.choice(GROUP_IDS))
    if HASHES[0] and r.random() < 0.4:
        # hrw: the member OVS's hash picks among the live ones.
        acts.append("bundle(%s,%d,hrw,ofport,members:%s)" % (r.choice(BUNDLE_FIELDS), r.choice([0, 1, 50, 65535]), ",".join(str(r.choice([1, 2, 3, 4, 7, 8])) for _ in range(r.randint(1, 5)))))
    elif r.random() < 0.05:
        acts.append("bundle(%s,0,active_backup,ofport,members:%s)" % (r.choice(["eth_src", "symmetric_l4", "nw_src"]), ",".join(str(r.choice([1, 2, 3, 4, 7, 8])) for _ in range(r.randint(1, 3)))))
    if r.random() < 0.08:
        acts.append(r.choice(["set_queue:%d" % r.randint(0, 9), "pop_queue"]
                             + ([] if OF13[0] else ["enqueue:%d:%d" % (r.randint(1, 4), r.randint(0, 9))])))
    for _ in range(r.randint(0, 3)):
        k = r.random()
        if k < 0.42:
            acts.append("output:%d" % r.randint(1, 4))
        elif k < 0.45:
            acts.append("output(port=%d,max_len=%d)" % (r.randint(1, 4), r.choice([14, 64, 1500])))
        elif k < 0.55 and table + 1 < ntables:
            acts.append("resubmit(,%d)" % r.randint(table + 1, ntables - 1))
        elif k < 0.62 and proto in ("ip", "tcp", "udp", "icmp"):
            acts.append("mod_nw_dst:%s" % rnd_ip(r))
        elif k < 0.68 and proto in ("tcp", "udp"):
            acts.append("mod_tp_dst:%d" % r.choice([80, 8080]))
        elif k < 0.72:
            acts.append("mod_dl_src:00:00:00:00:00:%02x" % r.randrange(256))
        elif k < 0.77:
            acts.append(r.choice(["dec_ttl", "dec_ttl", "dec_ttl(1,2)"] + ["group:%d" % g for g in GROUP_IDS]))
        elif k < 0.82 and not OF13[0] and not SELECT[0]:
            acts.append("mod_vlan_vid:%d" % r.randint(1, 9))
        elif k < 0.86 and not SELECT[0]:
            acts.append("strip_vlan")
        elif k < 0.9 and proto in ("ip", "tcp", "udp", "icmp") and not OF13[0] and not SELECT[0]:
            acts.append("mod_nw_tos:%d" % (r.randrange(8) * 4))
        elif k < 0.93:
            acts.append("in_port")
        elif k < 0.95 and proto in ("ip", "tcp", "udp", "icmp"):
            acts.append("set_field:%s->nw_src" % rnd_ip(r))
        elif k < 0.96 and proto in ("tcp", "udp", "tcp6"):
            acts.append("set_field:%d->tp_src" % r.choice([1, 5000]))
        elif k < 0.97 and not OF13[0] and not SELECT[0]:
            acts.append("mod_vlan_pcp:%d" % r.randint(0, 7))
        elif k < 0.98 and proto in ("ipv6", "tcp6"):
            acts.append("set_field:2001:db8::99->ipv6_src")
        elif k < 0.985 and not SELECT[0]:
            acts.append("mod_nw_ttl:%d" % r.choice([1, 33]))
        elif k < 0.99:
            acts.append(r.choice(["note:00.11", "dec_ttl(1,2)", "set_queue:%d" % r.randint(0, 9), "pop_queue"]
                                 + ([] if SELECT[0] else ["mod_nw_ecn:2"])
                                 + ([] if OF13[0] or SELECT[0] else ["enqueue:%d:%d" % (r.randint(1, 4), r.randint(0, 9))])))
        else:
            acts.append("push_vlan:0x8100")
    if r.random() < 0.1:
        acts = ["drop"]
    # OpenFlow 1.1+ instructions, in ovs-ofctl's order.
    if acts != ["drop"]:
        if r.random() < 0.1:
            acts.append("clear_actions")
        if r.random() < (0.35 if OF13[0] else 0.2):
            ws = []
            for _ in range(r.randint(1, 3)):
                ws.append(r.choice(["output:%d" % r.randint(1, 4), "push_vlan:0x8100" if SELECT[0] else "strip_vlan", "push_vlan:0x8100", "mod_dl_src:00:00:00:00:00:%02x" % r.randrange(256), "dec_ttl", "NORMAL"]
                                   + (["mod_nw_dst:%s" % rnd_ip(r)] if proto in ("ip", "tcp", "udp", "icmp") else [])))
            acts.append("write_actions(%s)" % ",".join(ws))
    if table + 1 < ntables and r.random() < 0.15:
        acts = [a for a in acts if a != "drop"]
        acts.append("goto_table:%d" % (table + 1))
    return ",".join(acts) if acts else "drop"

def first_by(items, key):
    """The items whose key was not seen before, in order."""
    seen, out = set(), []
    for x in items:
        if key(x) not in seen:
            seen.add(key(x))
            out.append(x)
    return out

REG_VALS = [0, 1, 2, 3, 4, 6, 17, 22, 64, 80, 90, 443, 5900]

def rnd_bits(r, width):
    """A random bit range of a field of `width` bits: '', 'N' or 'A..B'."""
    k = r.random()
    if k < 0.4:
        return "", width
    if k < 0.55:
        b = r.randrange(width)
        return str(b), 1
    a = r.randrange(width)
    b = r.randrange(a, min(width, a + 16))
    return "%d..%d" % (a, b), b - a + 1

def rnd_reg_sub(r, n_bits=None):
    """A register-ish subfield: (text, width)."""
    name, width = r.choice([("NXM_NX_REG%d" % i, 32) for i in range(4)] + [("OXM_OF_METADATA", 64), ("NXM_NX_PKT_MARK", 32), ("OXM_OF_PKT_REG1", 64), ("NXM_NX_XXREG1", 128)] + ([("NXM_NX_TUN_ID", 64)] * 3 if TUN[0] else []))
    if n_bits is None:
        rng, n = rnd_bits(r, width)
        return "%s[%s]" % (name, rng), n
    if n_bits > width:
        return None
    a = r.randrange(width - n_bits + 1)
    return ("%s[%d..%d]" % (name, a, a + n_bits - 1) if n_bits > 1 else "%s[%d]" % (name, a)), n_bits

def pkt_subs(proto):
    """Packet fields (NXM name, width) readable and writable under `proto`."""
    subs = [("NXM_OF_IN_PORT", 16, True), ("NXM_OF_ETH_DST", 48, True), ("NXM_OF_ETH_SRC", 48, True), ("NXM_OF_VLAN_TCI", 16, True)]
    if proto in ("ip", "tcp", "udp", "icmp"):
        subs += [("NXM_OF_IP_SRC", 32, True), ("NXM_OF_IP_DST", 32, True), ("NXM_NX_IP_TTL", 8, True), ("NXM_OF_IP_PROTO", 8, False)]
    if proto == "tcp":
        subs += [("NXM_OF_TCP_SRC", 16, True), ("NXM_OF_TCP_DST", 16, True)]
    if proto == "udp":
        subs += [("NXM_OF_UDP_DST", 16, True)]
    if proto == "arp":
        subs += [("NXM_OF_ARP_OP", 16, False), ("NXM_OF_ARP_SPA", 32, False)]  # flowpath rewrites no ARP field
    return subs

def rnd_reg_match(r):
    parts, proto = (rnd_match(r, 1) if r.random() < 0.5 else ([], ""))
    for _ in range(r.randint(0, 2)):
        k = r.random()
        if TUN[0] and k < 0.3:
            v = r.choice(REG_VALS)
            parts.append(r.choice(["tun_id=%d" % v, "tun_id=0x%x/0xff" % (v & 0xff), "tunnel_id=0x%x" % v]))
            continue
        if CPL[0] and k < 0.3:
            b = 1 << r.randrange(4)
            parts.append(r.choice(["reg0=0x%x/0x%x" % (b * r.randrange(2), b), "metadata=0x%x/0x3" % r.randrange(4)]))
            continue
        if k < 0.6:
            reg = "reg%d" % r.randrange(4)
            v = r.choice(REG_VALS)
            if r.random() < 0.6:
                parts.append("%s=%d" % (reg, v))
            else:
                m = r.choice([0xff, 0xf, 0xff00, 0x1, 0xffff0000, 0xfff])
                parts.append("%s=0x%x/0x%x" % (reg, v & m, m))
        elif k < 0.75:
            parts.append(r.choice(["metadata=0x%x" % r.choice(REG_VALS), "metadata=0x%x/0xff" % r.choice(REG_VALS)]))
        elif k < 0.9:
            parts.append(r.choice(["pkt_mark=%d" % r.choice(REG_VALS), "pkt_mark=0x%x/0xf" % (r.choice(REG_VALS) & 0xf)]))
        else:
            parts.append(r.choice(["xreg1=0x%x" % r.choice(REG_VALS), "xxreg1=0x%x/0xffff" % r.choice(REG_VALS)]))
    # No duplicate fields.
    return first_by(parts, lambda p: p.split("=")[0].replace("tunnel_id", "tun_id")), proto

def rnd_reg_actions(r, proto, table, ntables):
    acts = []
    subs = pkt_subs(proto)
    for _ in range(r.randint(1, 5)):
        k = r.random()
        if k < 0.2:
            dst, n = rnd_reg_sub(r)
            acts.append("load:0x%x->%s" % (r.choice(REG_VALS) & ((1 << min(n, 64)) - 1), dst))
        elif k < 0.4:
            name, width, _ = r.choice(subs)
            rng, n = rnd_bits(r, width)
            d = rnd_reg_sub(r, n)
            if d:
                acts.append("move:%s[%s]->%s" % (name, rng, d[0]))
        elif k < 0.5:
            s_, n = rnd_reg_sub(r)
            d = rnd_reg_sub(r, n)
            if d:
                acts.append("move:%s->%s" % (s_, d[0]))
        elif k < 0.58:
            wr = [x for x in subs if x[2]]
            name, width, _ = r.choice(wr)
            rng, n = rnd_bits(r, width)
            if r.random() < 0.5:
                s_ = rnd_reg_sub(r, n)
                if s_:
                    acts.append("move:%s->%s[%s]" % (s_[0], name, rng))
            else:
                acts.append("load:0x%x->%s[%s]" % (r.choice(REG_VALS) & ((1 << min(n, 64)) - 1), name, rng))
        elif k < 0.65:
            acts.append(r.choice(["set_field:%d->reg%d" % (r.choice(REG_VALS), r.randrange(4)), "set_field:0x%x->pkt_mark" % r.choice(REG_VALS), "set_field:0x%x/0xff->metadata" % r.choice(REG_VALS)]))
        elif k < 0.72:
            s_, n = rnd_reg_sub(r) if r.random() < 0.6 else (lambda x: ("%s[]" % x[0], x[1]))(r.choice(subs))
            acts.append("push:%s" % s_)
            if r.random() < 0.8:
                d = rnd_reg_sub(r, n) if n <= 64 else None
                if d:
                    acts.append("pop:%s" % d[0])
        elif k < 0.8 and table + 1 < ntables:
            acts.append("resubmit(,%d)" % r.randint(table + 1, ntables - 1))
        elif k < 0.83:
            acts.append("load:%d->NXM_OF_IN_PORT[]" % r.randint(1, 5))
        elif k < 0.84 or LEARN[0] and not any(x.startswith("learn(") for x in acts):
            # learn: ofproto/trace suppresses its side effect, so what is
            # compared is the megaflow of the bits it reads (learn_mask).
            specs = []
            for _ in range(r.randint(1, 3)):
                j = r.random()
                name, width, _ = r.choice(subs)
                rng, n = rnd_bits(r, width)
                if j < 0.4:
                    specs.append("%s[%s]" % (name, rng))
                elif j < 0.6:
                    d = rnd_reg_sub(r, n) if n <= 64 else None
                    if d:
                        specs.append("%s=%s[%s]" % (d[0], name, rng))
                elif j < 0.85:
                    d = rnd_reg_sub(r, n) if n <= 64 else None
                    if d:
                        specs.append("load:%s[%s]->%s" % (name, rng, d[0]))
                else:
                    specs.append("output:NXM_OF_IN_PORT[]")
            if specs:
                fin = ",fin_idle_timeout=%d,fin_hard_timeout=%d" % (r.randint(0, 5), r.randint(0, 5)) if FIN[0] and r.random() < 0.6 else ""
                acts.append("learn(table=%d,priority=%d,hard_timeout=%d%s,%s)" % (r.randint(0, 3), r.randint(1, 100), r.choice([0, 10]), fin, ",".join(specs)))
        elif k < 0.86:
            # Compared exactly: active_backup, and multipath to one link
            # (the megaflow of its hash fields; flowpath's hash is its own).
            fs = r.choice(BUNDLE_FIELDS)
            if HASHES[0]:
                # The member or link OVS's hash picks, made visible: moved
                # into the packet's mark, which the datapath sets.
                reg = r.randrange(4)
                if r.random() < 0.4:
                    acts.append("bundle_load(%s,%d,hrw,ofport,NXM_NX_REG%d[],members:%s)" % (fs, r.randrange(65536), reg, ",".join(str(r.choice([1, 2, 3, 7, 9])) for _ in range(r.randint(1, 6)))))
                else:
                    n_links = r.choice([2, 3, 4, 5, 8, 13, 64, 65, 100, 1000])
                    alg = r.choice(["modulo_n", "hash_threshold", "hrw", "iter_hash"])
                    acts.append("multipath(%s,%d,%s,%d,%d,NXM_NX_REG%d[0..15])" % (fs, r.randrange(65536), alg, n_links, r.choice([0, n_links, n_links + 1, 2 * n_links, 1000]), reg))
                acts.append("move:NXM_NX_REG%d[0..15]->NXM_NX_PKT_MARK[0..15]" % reg)
                acts.append("output:%d" % r.randint(1, 4))
            elif r.random() < 0.5:
                acts.append("bundle_load(%s,0,active_backup,ofport,NXM_NX_REG%d[],members:%s)" % (fs, r.randrange(4), ",".join(str(r.choice([1, 2, 3, 7, 9])) for _ in range(r.randint(1, 3)))))
            else:
                acts.append("multipath(%s,%d,%s,1,0,NXM_NX_REG%d[0..%d])" % (fs, r.randrange(100), r.choice(["modulo_n", "hash_threshold", "hrw", "iter_hash"]), r.randrange(4), r.randrange(16)))
        else:
            acts.append("output:%d" % r.randint(1, 4))
    if OUTREG[0] and r.random() < 0.5:
        reg = r.randrange(4)
        rng = r.choice(["0..15", "16..31", "0..31", "8..23"])
        a0 = int(rng.split("..")[0])
        # (Not ALL or FLOOD: OVS floods in its own port order, LOCAL too.)
        port = r.choice([1, 2, 3, 4, 1, 2, 3, 4, 0, 0xfff8] + ([0x10004] if rng == "0..31" else []))
        if r.random() < 0.8:
            acts.append("load:0x%x->NXM_NX_REG%d[%s]" % (port, reg, rng) if a0 + 15 <= int(rng.split("..")[1]) else "load:0x%x->NXM_NX_REG%d[%s]" % (port & 0xff, reg, rng))
        acts.append(r.choice(["output:NXM_NX_REG%d[%s]", "output:reg%d[%s]"]) % (reg, rng))
    if CTLOPTS[0] and r.random() < 0.5:
        k = r.random()
        if k < 0.5:
            opts = []
            if r.random() < 0.5:
                opts.append("reason=%s" % r.choice(["no_match", "action", "invalid_ttl", "action_set", "group"]))
            if r.random() < 0.5:
                opts.append("max_len=%d" % r.choice([0, 64, 128, 1500]))
            if r.random() < 0.5:
                opts.append("id=%d" % r.randint(1, 9))
            if r.random() < 0.4:
                opts.append("userdata=%s" % ".".join("%02x" % r.randrange(256) for _ in range(r.randint(1, 8))))
            a = "controller(%s)" % ",".join(opts) if opts else "controller"
        elif k < 0.65:
            a = r.choice(["controller", "CONTROLLER:%d" % r.choice([0, 100, 65535]), "output:CONTROLLER"])
        elif k < 0.75:
            # (Not with --ipfix: a paused packet-in is a documented
            # difference its own recording covers.)
            a = "controller(pause)" if not IPFIX[0] else "controller"
        else:
            a = rnd_sample(r)
        acts.insert(r.randint(0, len(acts)), a)
    if IPFIX[0] and r.random() < 0.6:
        # More samples, as OVS writes them in real tables: before outputs,
        # after rewrites, in clones.
        for _ in range(r.randint(1, 2)):
            acts.insert(r.randint(0, len(acts)), rnd_sample(r))
    if CLONE[0] and acts and r.random() < 0.6:
        i = r.randrange(len(acts))
        j = r.randint(i + 1, len(acts))
        body = acts[i:j]
        if r.random() < 0.5:
            body.append("output:%d" % r.randint(1, 4))
        if r.random() < 0.3:
            # A truncated output: OVS then needs the datapath's clone.
            body.insert(r.randint(0, len(body)), "output(port=%d,max_len=%d)" % (r.randint(1, 4), r.choice([14, 64, 200])))
        acts[i:j] = ["clone(%s)" % ",".join(body)]
    if FIN[0] and r.random() < 0.5:
        kv = [x for x in ("idle_timeout=%d" % r.randint(1, 9) if r.random() < 0.7 else "", "hard_timeout=%d" % r.randint(1, 9) if r.random() < 0.5 else "") if x]
        acts.insert(r.randint(0, len(acts)), "fin_timeout(%s)" % ",".join(kv))
    if TUN[0] and r.random() < 0.4:
        acts.insert(r.randint(0, len(acts)), r.choice(["set_tunnel:%d" % r.choice(REG_VALS), "set_tunnel64:0x%x" % (r.choice(REG_VALS) << 32 | r.choice(REG_VALS)), "set_field:%d->tun_id" % r.choice(REG_VALS)]))
    if CPL[0] and r.random() < 0.6:
        # check_pkt_larger: the actions after it run in both branches; its
        # bit is one of reg0's low four, which later tables match.
        c = "check_pkt_larger(%d)->%s" % (r.choice([64, 100, 128, 200, 1500]), r.choice(["NXM_NX_REG0[%d]" % r.randrange(4), "reg0[%d]" % r.randrange(4), "OXM_OF_METADATA[%d]" % r.randrange(2), "NXM_NX_XXREG0[%d]" % r.randrange(4)]))
        acts.insert(r.randint(0, len(acts)), c)
    # (fin_timeout needs OpenFlow 1.0 with NXM: no instructions with it.)
    if r.random() < 0.15 and not FIN[0]:
        acts.append("write_metadata:0x%x/0x%x" % (r.choice(REG_VALS), r.choice([0xff, 0xffffffffffffffff, 0xf0])))
    if table + 1 < ntables and r.random() < 0.3:
        acts.append(("resubmit(,%d)" if FIN[0] else "goto_table:%d") % r.randint(table + 1, ntables - 1))
    return ",".join(acts)

def rnd_reg_rules(r):
    """A pipeline over registers, metadata and pkt_mark: tables load and
    move packet bits into them, later tables match them."""
    ntables = r.randint(2, 4)
    rules = []
    for t in range(ntables):
        for _ in range(r.randint(1, 6)):
            parts, proto = rnd_reg_match(r)
            rules.append("table=%d,priority=%d,%s%sactions=%s" % (t, r.randint(1, 65535), ",".join(parts), "," if parts else "", rnd_reg_actions(r, proto, t, ntables)))
        if r.random() < 0.6:
            rules.append("table=%d,priority=0,actions=%s" % (t, rnd_reg_actions(r, "", t, ntables)))
    return rules

VIDS = [0, 1, 5, 100, 4095]

def rnd_vlan_match(r):
    """A match over vlan_vid (OpenFlow 1.3 forms); (parts, tagged)."""
    parts, tagged = [], False
    k = r.random()
    if k < 0.15:
        parts.append("vlan_vid=0")
    elif k < 0.3:
        parts.append("vlan_vid=0x1000/0x1000")
        tagged = True
    elif k < 0.55:
        parts.append("vlan_vid=%d" % (0x1000 | r.choice(VIDS)))
        tagged = True
    elif k < 0.62:
        parts.append("vlan_vid=0x%x/0x%x" % (0x1000 | (r.choice(VIDS) & 0xff0), 0x1ff0))
        tagged = True
    elif k < 0.68:
        parts.append("vlan_vid=0x%x/0xfff" % r.choice(VIDS))
    elif k < 0.75:
        parts.append("dl_vlan=%d" % r.choice(VIDS))
        tagged = True
    if tagged and r.random() < 0.2:
        parts.append("vlan_pcp=%d" % r.randrange(8))
    if r.random() < 0.3:
        parts.append("in_port=%d" % r.randint(1, 4))
    if r.random() < 0.3:
        parts.append(r.choice(["tcp", "udp", "ip", "arp"]))
    return parts, tagged

def rnd_vlan_actions(r, tagged, table, ntables):
    acts = []
    pushes = 0
    for _ in range(r.randint(1, 5)):
        k = r.random()
        if k < 0.25:
            acts.append("output:%d" % r.randint(1, 4))
        elif k < 0.45 and tagged:
            acts.append("set_field:%d->vlan_vid" % (0x1000 | r.choice(VIDS + [7, 200])))
        elif k < 0.5 and tagged:
            acts.append("load:0x%x->OXM_OF_VLAN_VID[%s]" % ((r.choice(VIDS) & 0xf, "0..3") if r.random() < 0.5 else (r.choice(VIDS), "")))
        elif k < 0.55 and tagged:
            acts.append("move:OXM_OF_VLAN_VID[]->NXM_NX_REG0[0..11]")
            acts.append("move:NXM_NX_REG0[0..11]->NXM_OF_ETH_SRC[0..11]")
        elif k < 0.6 and tagged:
            acts.append("set_field:%d->vlan_pcp" % r.randrange(8))
        elif k < 0.7 and pushes < 1:
            # (OVS keeps at most two tags: a packet may come with one.)
            acts.append("push_vlan:%s" % r.choice(["0x8100", "0x8100", "0x88a8"]))
            tagged = True
            pushes += 1
        elif k < 0.8 and tagged:
            # (OpenFlow 1.3 refuses a pop without a tag.)
            acts.append("pop_vlan")
            tagged = False
        elif k < 0.85 and table + 1 < ntables:
            acts.append("resubmit(,%d)" % r.randint(table + 1, ntables - 1))
    if table + 1 < ntables and r.random() < 0.3:
        acts.append("goto_table:%d" % (table + 1))
    return ",".join(acts) if acts else "drop"

def rnd_vlan_rules(r):
    ntables = r.randint(1, 2)
    rules = []
    for t in range(ntables):
        for _ in range(r.randint(1, 6)):
            parts, tagged = rnd_vlan_match(r)
            rules.append("table=%d,priority=%d,%s%sactions=%s" % (t, r.randint(1, 65535), ",".join(parts), "," if parts else "", rnd_vlan_actions(r, tagged, t, ntables)))
        if r.random() < 0.5:
            rules.append("table=%d,priority=0,actions=%s" % (t, rnd_vlan_actions(r, False, t, ntables)))
    return first_by(rules, lambda rule: rule.split(",actions=")[0])

def rnd_vlan_packet(r):
    p = ["in_port=%d" % r.randint(1, 4)]
    if r.random() < 0.7:
        p.append("dl_vlan=%d" % r.choice(VIDS))
        if r.random() < 0.3:
            p.append("dl_vlan_pcp=%d" % r.randrange(8))
    proto = r.choice(["tcp", "udp", "arp", "ip"])
    p.append(proto)
    if proto != "arp":
        p += ["nw_src=10.0.0.%d" % r.randint(1, 4), "nw_dst=10.0.0.%d" % r.randint(1, 4), "nw_ttl=64"]
    return ",".join(p)

ARP_IPS = ["10.0.0.1", "10.0.0.2", "10.0.0.254"]
ARP_MACS = ["00:00:00:00:00:01", "00:00:00:00:00:02", "50:54:00:00:00:01"]

def rnd_arpw_rule(r, t, ntables):
    """A rule matching ARP, ICMP, ICMPv6 echo or neighbour discovery that
    writes their fields (set_field, load, move), as responders do."""
    kind = r.choice(["arp", "arp", "icmp", "icmp6", "ns", "na"])
    m, w = [], []
    if kind == "arp":
        m.append("arp")
        if r.random() < 0.5:
            m.append("arp_op=%d" % r.choice([1, 2]))
        if r.random() < 0.4:
            m.append("arp_tpa=%s" % r.choice(ARP_IPS))
        w = [lambda: "set_field:%d->arp_op" % r.choice([1, 2]),
             lambda: "load:0x2->NXM_OF_ARP_OP[]",
             lambda: "set_field:%s->arp_spa" % r.choice(ARP_IPS),
             lambda: "set_field:%s->arp_tpa" % r.choice(ARP_IPS),
             lambda: "set_field:%s->arp_sha" % r.choice(ARP_MACS),
             lambda: "set_field:%s->arp_tha" % r.choice(ARP_MACS),
             lambda: "move:NXM_OF_ARP_SPA[]->NXM_OF_ARP_TPA[]",
             lambda: "move:NXM_NX_ARP_SHA[]->NXM_NX_ARP_THA[]",
             lambda: "move:NXM_OF_ARP_TPA[]->NXM_NX_REG0[],move:NXM_NX_REG0[]->NXM_OF_ARP_SPA[]",
             lambda: "load:0x%x->NXM_NX_ARP_SHA[]" % r.randrange(1 << 48),
             lambda: "load:0x%x->NXM_OF_ARP_SPA[0..7]" % r.randrange(256),
             lambda: "move:NXM_OF_ETH_SRC[]->NXM_OF_ETH_DST[]"]
    elif kind == "icmp":
        m.append("icmp")
        if r.random() < 0.4:
            m.append("icmp_type=%d" % r.choice([0, 8, 3]))
        w = [lambda: "set_field:%d->icmp_type" % r.choice([0, 8, 3, 11]),
             lambda: "set_field:%d->icmp_code" % r.choice([0, 1, 3]),
             lambda: "load:0->NXM_OF_ICMP_TYPE[]",
             lambda: "move:NXM_OF_ICMP_CODE[]->NXM_OF_ICMP_TYPE[]",
             lambda: "move:NXM_OF_IP_SRC[]->NXM_OF_IP_DST[]"]
    elif kind == "icmp6":
        m.append("icmp6")
        if r.random() < 0.4:
            m.append("icmp_type=%d" % r.choice([128, 129]))
        w = [lambda: "set_field:%d->icmpv6_type" % r.choice([128, 129, 1]),
             lambda: "set_field:%d->icmpv6_code" % r.choice([0, 1]),
             lambda: "load:0x81->NXM_NX_ICMPV6_TYPE[]"]
    else:
        t6 = 135 if kind == "ns" else 136
        m.append("icmp6,icmp_type=%d" % t6)
        if r.random() < 0.3:
            m.append("nd_target=fe80::%d" % r.randint(1, 3))
        ll = "nd_sll" if t6 == 135 else "nd_tll"
        if r.random() < 0.2:
            m.append(r.choice(["nd_reserved=%d" % r.choice([0, 0x20000000, 0x60000000]), "nd_options_type=%d" % r.choice([0, 1, 2])]))
        w = [lambda: "set_field:fe80::%d->nd_target" % r.randint(1, 3),
             lambda: "set_field:%d->nd_reserved" % r.choice([0, 1, 0x40000000]),
             lambda: "set_field:%d->nd_options_type" % r.choice([1, 2]),
             lambda: "load:0x%x->ERICOXM_OF_ICMPV6_ND_RESERVED[%s]" % r.choice([(1, "0..3"), (0xe, "28..31"), (0x7, "")]),
             lambda: "set_field:%s->%s" % (r.choice(ARP_MACS), ll),
             lambda: "load:0x%x->NXM_NX_ND_TARGET[0..15]" % r.randrange(1 << 16),
             lambda: "move:NXM_OF_ETH_SRC[]->NXM_NX_%s[]" % ll.upper(),
             lambda: "set_field:%d->icmpv6_type" % (271 - t6)]
    acts = []
    for _ in range(r.randint(1, 4)):
        acts.append(r.choice(w)())
        if r.random() < 0.3:
            acts.append(r.choice(["output:%d" % r.randint(1, 4), "in_port", "mod_dl_src:%s" % r.choice(ARP_MACS)]))
    if r.random() < 0.2 and t + 1 < ntables:
        acts.append("resubmit(,%d)" % (t + 1))
    acts.append(r.choice(["in_port", "output:%d" % r.randint(1, 4)]))
    if r.random() < 0.3:
        m.append("in_port=%d" % r.randint(1, 4))
    return "table=%d,priority=%d,%s,actions=%s" % (t, r.randint(1, 65535), ",".join(m), ",".join(acts))

def rnd_arpw_rules(r):
    ntables = r.randint(1, 2)
    rules = []
    for t in range(ntables):
        for _ in range(r.randint(1, 6)):
            rules.append(rnd_arpw_rule(r, t, ntables))
        if r.random() < 0.5:
            rules.append("table=%d,priority=0,actions=output:%d" % (t, r.randint(1, 4)))
    return first_by(rules, lambda rule: rule.split(",actions=")[0])

def rnd_arpw_packet(r):
    p = ["in_port=%d" % r.randint(1, 4), "dl_src=%s" % r.choice(ARP_MACS), "dl_dst=%s" % r.choice(ARP_MACS + ["ff:ff:ff:ff:ff:ff"])]
    kind = r.choice(["arp", "arp", "icmp", "icmp6", "ns", "na", "tcp"])
    if kind == "arp":
        p += ["arp", "arp_op=%d" % r.choice([1, 2]), "arp_spa=%s" % r.choice(ARP_IPS), "arp_tpa=%s" % r.choice(ARP_IPS), "arp_sha=%s" % r.choice(ARP_MACS), "arp_tha=%s" % r.choice(ARP_MACS + ["00:00:00:00:00:00"])]
    elif kind == "icmp":
        p += ["icmp", "nw_src=10.0.0.1", "nw_dst=10.0.0.2", "nw_ttl=64", "icmp_type=%d" % r.choice([0, 8, 3]), "icmp_code=%d" % r.choice([0, 0, 1])]
    elif kind == "icmp6":
        p += ["icmp6", "ipv6_src=fe80::1", "ipv6_dst=fe80::2", "nw_ttl=64", "icmpv6_type=%d" % r.choice([128, 129]), "icmpv6_code=0"]
    elif kind in ("ns", "na"):
        t6 = 135 if kind == "ns" else 136
        p += ["icmp6", "ipv6_src=fe80::1", "ipv6_dst=ff02::1", "nw_ttl=255", "icmpv6_type=%d" % t6, "icmpv6_code=0", "nd_target=fe80::%d" % r.randint(1, 3)]
        p.append("%s=%s" % ("nd_sll" if t6 == 135 else "nd_tll", r.choice(ARP_MACS)))
        # What the extractor reads: the reserved word (an NA's flags) and
        # the first link-layer option's type.
        p.append("nd_reserved=%d" % (r.choice([0, 0x20000000, 0x60000000]) if t6 == 136 else 0))
        p.append("nd_options_type=%d" % (1 if t6 == 135 else 2))
    else:
        p += ["tcp", "nw_src=10.0.0.1", "nw_dst=10.0.0.2", "tp_dst=80"]
    return ",".join(p)

# Small value spaces, so that most packets complete some conjunction.
CONJ_SRC = ["10.0.0.%d" % i for i in range(1, 4)]
CONJ_DST = ["10.0.1.%d" % i for i in range(1, 4)]
CONJ_PORTS = [22, 80, 443]

def conj_dim_match(r, dim):
    """A match for one dimension of a conjunction: each dimension keeps to
    one field family, so dimensions are independent."""
    fam = dim % 4
    if fam == 0:
        return "ip,nw_src=%s" % r.choice(CONJ_SRC + ["10.0.0.0/31", "10.0.0.2/31"])
    if fam == 1:
        return "ip,nw_dst=%s" % r.choice(CONJ_DST + ["10.0.1.0/30"])
    if fam == 2:
        return "tcp,tp_dst=%d" % r.choice(CONJ_PORTS)
    return "in_port=%d" % r.randint(1, 3)

def rnd_conj_rules(r):
    """Conjunctive matches: 1-3 ids, each at its own priority, 2-3
    dimensions of 1-3 flows; conj_id flows (sometimes missing), ordinary
    flows above, below and with the same match as conjunctive ones."""
    rules = []
    prios = r.sample(range(10, 200, 10), 3)
    # Distinct priorities for ordinary flows (OpenFlow leaves ties between
    # overlapping flows unspecified; OVS's answer then depends on its
    # internal order).
    used = set(prios)
    def fresh(lo, hi):
        while True:
            p = r.randint(lo, hi)
            if p not in used:
                used.add(p)
                return p
    ntables = r.randint(1, 2)
    t = ntables - 1
    if ntables == 2:
        rules.append("table=0,priority=1,actions=resubmit(,1)")
    for cid in range(1, r.randint(1, 3) + 1):
        prio = prios[cid - 1]
        n = r.randint(2, 3)
        dims = r.sample(range(4), n)
        for k in range(1, n + 1):
            for _ in range(r.randint(1, 3)):
                m = conj_dim_match(r, dims[k - 1])
                rules.append("table=%d,priority=%d,%s,actions=conjunction(%d,%d/%d)" % (t, prio, m, cid, k, n))
                if r.random() < 0.15:
                    rules.append("table=%d,priority=%d,%s,actions=output:%d" % (t, fresh(prio - 9, prio - 1), m, r.randint(1, 4)))
        if r.random() < 0.85:
            extra = r.choice(["", "", ",tcp", ",ip,nw_src=10.0.0.1"])
            rules.append("table=%d,priority=%d,conj_id=%d%s,actions=%s" % (t, fresh(1, 300), cid, extra, r.choice(["output:%d" % r.randint(1, 4), "mod_dl_src:00:00:00:00:00:%02x,output:%d" % (r.randrange(256), r.randint(1, 4)), "drop"])))
    for _ in range(r.randint(0, 4)):
        rules.append("table=%d,priority=%d,%s,actions=output:%d" % (t, fresh(1, 250), conj_dim_match(r, r.randrange(4)), r.randint(1, 4)))
    # Drop duplicates (same table, priority and match: a modification).
    return first_by(rules, lambda rule: rule.split(",actions=")[0])

def rnd_conj_packet(r):
    proto = r.choice(["tcp", "tcp", "tcp", "udp", "icmp", "arp"])
    p = ["in_port=%d" % r.randint(1, 3), proto]
    if proto == "arp":
        return ",".join(p)
    p += ["nw_src=%s" % r.choice(CONJ_SRC + ["10.0.0.9"]), "nw_dst=%s" % r.choice(CONJ_DST + ["10.0.1.9"])]
    if proto in ("tcp", "udp"):
        pre = "tp" if proto == "tcp" else "udp"
        p += [pre + "_src=1234", pre + "_dst=%d" % r.choice(CONJ_PORTS + [9])]
    return ",".join(p)

def rnd_mpls_dp_packet(r):
    """An MPLS packet of 1-4 label stack entries in datapath-flow syntax."""
    n = r.choice([1, 2, 2, 3, 3, 4])
    lses = []
    for i in range(n):
        bos = 1 if i == n - 1 and r.random() < 0.9 else 0
        lses.append("label=%d,tc=%d,ttl=%d,bos=%d" % (r.choice(MPLS_LABELS), r.randrange(8), r.choice([1, 2, 64]), bos))
    return "in_port(%d),eth(src=00:00:00:00:00:01,dst=00:00:00:00:00:02),eth_type(%s),mpls(%s)" % (r.randint(1, 4), r.choice(["0x8847", "0x8847", "0x8848"]), ",".join(lses[:3]))

def rnd_packet(r):
    if MPLS_ACT[0] and r.random() < 0.35:
        return rnd_mpls_dp_packet(r)
    proto = r.choice(["tcp", "udp", "icmp", "arp", "tcp6", "ip", "icmp6"])
    if MPLS[0] and r.random() < 0.5:
        proto = r.choice(["mpls", "mpls", "mplsm"])
    p = ["in_port=%d" % r.randint(1, 4)]
    if r.random() < 0.2:
        p.append("dl_vlan=%d" % r.randint(1, 3))
    p.append(proto)
    if proto.startswith("mpls"):
        p += ["mpls_label=%d" % r.choice(MPLS_LABELS + [r.randrange(1 << 20)]), "mpls_tc=%d" % r.randrange(8), "mpls_ttl=%d" % r.choice([1, 64, 255]), "mpls_bos=%d" % r.randrange(2)]
    if proto in ("tcp", "udp", "icmp", "ip"):
        p += ["nw_src=%s" % rnd_ip(r), "nw_dst=%s" % rnd_ip(r), "nw_ttl=%d" % r.choice([1, 64]), "nw_tos=%d" % (r.randrange(4) * 4)]
    if proto in ("tcp", "udp"):
        pre = "tp" if proto == "tcp" else "udp"
        p += [pre + "_src=%d" % r.choice([22, 80, 90, 1024, r.randrange(65536)]), pre + "_dst=%d" % r.choice([22, 80, 90, 443, 5900, r.randrange(65536)])]
    if proto == "icmp":
        p.append("icmp_type=%d" % r.choice([0, 8, 3]))
    if proto == "arp":
        p += ["arp_op=%d" % r.choice([1, 2]), "arp_spa=%s" % rnd_ip(r), "arp_tpa=%s" % rnd_ip(r), "arp_sha=00:00:00:00:00:%02x" % r.randrange(3)]
    if proto == "tcp" and r.random() < 0.5:
        p.append("tcp_flags=0x%03x" % r.choice([0x002, 0x012, 0x010]))
    if proto == "icmp6":
        t = r.choice([128, 135, 136])
        p += ["ipv6_src=2001:db8::1", "ipv6_dst=2001:db8::2", "nw_ttl=%d" % r.choice([64, 255]), "icmpv6_type=%d" % t, "icmpv6_code=0"]
        if t in (135, 136):
            p.append("nd_target=1000::%d" % r.randrange(3))
    if proto == "tcp6":
        p += ["ipv6_src=2001:db8::1", "ipv6_dst=2001:db8::%x" % r.randrange(16), "nw_ttl=64", "tp_dst=%d" % r.choice([80, 90, 443])]
    if FRAGS[0] and proto in ("tcp", "udp", "icmp", "ip", "tcp6") and r.random() < 0.7:
        if r.random() < 0.5:
            p.append("nw_frag=first")
        else:
            # A later fragment has no L4 header: no ports, type or flags.
            p = [x for x in p if not re.match(r"(tp|udp)_(src|dst)=|icmp_type=|tcp_flags=", x)]
            p.append("nw_frag=later")
    return ",".join(p)

DP2OF = {}
CTL = []  # ["-t", path] when --ctl is given; else ovs-appctl finds OVS_RUNDIR's

def load_port_map():
    # "    p1 1/1: (dummy)" / "    br0 65534/100: (dummy-internal)": OpenFlow/datapath.
    out = subprocess.run(["ovs-appctl"] + CTL + ["dpif/show"], capture_output=True, text=True).stdout
    for m in re.finditer(r"^\s+\S+ (\d+)/(\d+):", out, re.M):
        DP2OF[m.group(2)] = m.group(1)

def split_top(s):
    out, depth, tok = [], 0, ""
    for ch in s + ",":
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            if tok:
                out.append(tok)
            tok = ""
        else:
            tok += ch
    return out

def rnd_sample(r):
    """A random sample(...) action (with --ipfix, its sampling_port, ingress
    and egress options too; port 7 is not on the bridge)."""
    prob = r.choice([1, 100, 6554, 32768, 65534, 65535, r.randint(1, 65535)])
    a = "sample(probability=%d,collector_set_id=%d,obs_domain_id=%d,obs_point_id=%d" % (prob, r.randrange(3), r.randrange(3), r.randrange(3))
    if IPFIX[0]:
        if r.random() < 0.4:
            a += ",sampling_port=%d" % r.choice([1, 2, 3, 4, 7])
        if r.random() < 0.3:
            a += r.choice([",ingress", ",egress"])
    return a + ")"

def map_ovs_actions(s):
    s = re.sub(r"output_port=(\d+)", lambda m: "output_port=" + DP2OF.get(m.group(1), m.group(1)) if m.group(1) != "4294967295" else m.group(0), s)
    return ",".join(DP2OF.get(t, t) if t.isdigit() else t for t in split_top(s))

def ovs_alive():
    return subprocess.run(["ovs-appctl"] + CTL + ["version"], capture_output=True).returncode == 0

def restart_ovs():
    """OVS died (an assertion of its own): start the sandbox again."""
    here = os.path.dirname(os.path.abspath(__file__))
    subprocess.run([os.path.join(here, "ovs-sandbox.sh"), "start", "4"], capture_output=True, check=True)
    DP2OF.clear()
    load_port_map()

def load_rules(rules, of13_fallback=False, groups=()):
    """Writes `rules` to a temporary file and loads them into br0 (replacing
    its flows); returns (file, completed ovs-ofctl process). --vlan-vid
    rule sets always go in with OpenFlow 1.3 (vlan_vid is its field)."""
    with tempfile.NamedTemporaryFile("w", suffix=".flows", delete=False) as f:
        f.write("\n".join(rules) + "\n")
        rf = f.name
    subprocess.run(["ovs-ofctl", "del-flows", "br0"], check=True)
    subprocess.run(["ovs-ofctl", "-O", "OpenFlow13", "del-groups", "br0"], check=True)
    text = open(rf).read()
    if VLANVID[0]:
        return rf, subprocess.run(["ovs-ofctl", "-O", "OpenFlow13", "add-flows", "br0", rf], capture_output=True, text=True)
    if groups:
        with open(rf + ".groups", "w") as f:
            f.write("\n".join(groups) + "\n")
        # (OpenFlow 1.5: selection_method is a 1.5 group property.)
        res = subprocess.run(["ovs-ofctl", "-O", "OpenFlow15", "add-groups", "br0", rf + ".groups"], capture_output=True, text=True)
        if res.returncode:
            return rf, res
    # OpenFlow 1.0 cannot carry instructions: ovs-ofctl would silently drop
    # write_actions/clear_actions, so such rule sets go in with 1.3 (unless
    # they use mod_vlan_vid, whose meaning differs there: then not at all).
    if "_actions" in text or "group:" in text or "write_metadata" in text:
        # Under 1.1+ these OpenFlow 1.0 actions change meaning (mod_vlan_vid
        # pushes no tag; mod_nw_tos becomes a set_field of ip_dscp, which
        # leaves nw_proto wildcarded): such rule sets are not compared.
        if "mod_vlan" in text or "mod_nw_tos" in text:
            return rf, subprocess.CompletedProcess([], 1, "", "1.1+ rule set with mod_vlan_*/mod_nw_tos: skipped")
        # OVS 3.1 encodes strip_vlan in OpenFlow 1.0 only: 1.1+ says pop_vlan
        # (the same action; flowpath reads the same file).
        if "strip_vlan" in text:
            text = text.replace("strip_vlan", "pop_vlan")
            with open(rf, "w") as f:
                f.write(text)
        return rf, subprocess.run(["ovs-ofctl", "-O", "OpenFlow13", "add-flows", "br0", rf], capture_output=True, text=True)
    res = subprocess.run(["ovs-ofctl", "add-flows", "br0", rf], capture_output=True, text=True)
    if res.returncode and of13_fallback and "mod_vlan" not in text:
        # (OpenFlow 1.1+ encodes mod_vlan_vid with different semantics.)
        res = subprocess.run(["ovs-ofctl", "-O", "OpenFlow13", "add-flows", "br0", rf], capture_output=True, text=True)
    return rf, res

def write_packets(pkts):
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
        f.write("\n".join(pkts) + "\n")
        return f.name

def ovs_trace(pkt, *extra):
    """OVS's (Megaflow, Datapath actions) for `pkt`, ports mapped to OpenFlow
    numbers; None (after printing why) when OVS cannot trace it."""
    # A datapath-flow packet is traced on the datapath, not the bridge.
    where = "ovs-netdev" if pkt.startswith("in_port(") else "br0"
    oo = subprocess.run(["ovs-appctl"] + CTL + ["ofproto/trace", where, pkt] + list(extra), capture_output=True, text=True)
    o = oo.stdout + oo.stderr
    mfm = re.search(r"^Megaflow: (.*)$", o, re.M)
    if not mfm:
        print("OVS could not trace", pkt, o[:300])
        return None
    da = re.search(r"^Datapath actions: (.*)$", o, re.M).group(1)
    if CTLOPTS[0]:
        # The packet-in's reason, rule cookie, controller id and length;
        # not OVS's own bookkeeping (pid, dont_send, continuation, the
        # recirculation id of its continuation).
        da = re.sub(r"userspace\(pid=0,controller\(reason=(\d+),dont_send=\d+,continuation=\d+,recirc_id=\d+,", r"userspace(controller(reason=\1,", da)
    else:
        da = re.sub(r"userspace\(pid=0,controller\([^)]*\)\)", "userspace(controller)", da)
    return mfm.group(1), map_ovs_actions(da)

def flowpath_trace(a, rf, pf, extra=()):
    """flowpath's JSON answers for the packets of file `pf` (None, after
    printing why, if it fails)."""
    fp = subprocess.run([a.flowpath, "trace", "--rules", rf, "--packets", pf, "--json", "--ports", "1,2,3,4"] + list(extra), capture_output=True, text=True)
    if fp.returncode:
        print("flowpath failed:", fp.stderr, open(rf).read())
        if a.record and (FRAGS[0] or VLANVID[0] or ARPW[0] or OUTREG[0] or CLONE[0] or CTLOPTS[0]):
            # OVS's answers are still recorded: a rule set OVS loads and
            # flowpath refuses is a difference the replay must show.
            n = sum(1 for l in open(pf) if l.strip())
            return [{"actions": "(flowpath refused the rule set)", "megaflow": ""}] * n
        return None
    out = [json.loads(l) for l in fp.stdout.splitlines()]
    for o in out:
        # Documented difference: flowpath's paused packet-in is a datapath
        # action; OVS sends it from the translation (its trace shows none).
        if "continuation=1" in o.get("actions", ""):
            kept = [t for t in split_top(o["actions"]) if "continuation=1" not in t]
            o["actions"] = ",".join(kept) if kept else "drop"
    return out

def mpls_set_narrowing(da, ovs_mf, our_mf, pkt=""):
    """True when the megaflows differ only as flowpath means to, ours having
    OVS's items plus MPLS ones: with a set(mpls(...)) among the actions, or
    for a packet without a bottom of stack in its first three entries."""
    deep = ("mpls(" in pkt and "bos=1" not in pkt) or "mpls_bos=0" in pkt
    if "set(mpls(" not in da and "pop_mpls(" not in da and not deep:
        return False
    o, m = ovs_mf.split(","), our_mf.split(",")
    extra = [x for x in m if x not in o]
    return all(x in m for x in o if not x.startswith("mpls_")) and all(x.startswith("mpls_") for x in extra) \
        and all(x.startswith("mpls_") for x in o if x not in m)

def l2_hash_narrowing(rules, ovs_mf, our_mf):
    """True when our megaflow is OVS's with the L2 fields a symmetric_l3l4
    hash of a packet that is not IP reads made significant (OVS 3.1 hashes
    them, flow_hash_symmetric_l2, but leaves them out of its megaflow,
    which is then too wide; flowpath makes them significant on purpose)."""
    l2 = ("dl_src", "dl_dst", "dl_vlan", "vlan_tci")
    if "symmetric_l3l4" not in rules or ",ip" in ovs_mf or ",ipv6" in ovs_mf:
        return False
    o = [i.split("=", 1) + [""] for i in ovs_mf.split(",")]
    u = [i.split("=", 1) + [""] for i in our_mf.split(",")]
    return (all(any(k == k2 and (v == v2 or k in l2) for k2, v2, *_ in u) for k, v, *_ in o)
            and all(k in l2 or any(k == k2 for k2, *_ in o) for k, *_ in u))

def vlan_narrowing(rules, ovs_mf, our_mf):
    """True when the megaflows differ only in VLAN items, ours having
    OVS's and more, in a rule set that pops and pushes tags (a tag pushed
    after a pop is compared with the packet's whole tag; OVS reads nothing
    when they are equal, a megaflow too wide)."""
    vl = ("dl_vlan", "dl_vlan_pcp", "vlan_tci")
    if "push_vlan" not in rules or "pop_vlan" not in rules:
        return False
    part = lambda m: ([i for i in m.split(",") if i.split("=")[0] in vl], [i for i in m.split(",") if i.split("=")[0] not in vl])
    (ov, oo), (uv, uo) = part(ovs_mf), part(our_mf)
    return oo == uo and all(i in uv for i in ov) and len(uv) > len(ov)

def nw_proto_narrowing(rules, ovs_mf, our_mf):
    """True when our megaflow is OVS's with nw_proto (arp_op) exact, in a
    rule set that moves or pops into packet fields (an L3 rewrite pending
    makes it significant; OVS 3.1 leaves it out after a move or pop alone,
    a megaflow too wide for packets with nw_proto 0)."""
    if "move:" not in rules and "pop:" not in rules:
        return False
    kw = {"tcp": "ip", "udp": "ip", "icmp": "ip", "sctp": "ip", "tcp6": "ipv6", "udp6": "ipv6", "icmp6": "ipv6", "sctp6": "ipv6"}
    norm = lambda m: [kw.get(i, i) for i in m.split(",") if not i.startswith(("nw_proto=", "arp_op="))]
    return ovs_mf != our_mf and norm(ovs_mf) == norm(our_mf)

def unmasked_eth_sets(actions):
    """`actions` without the masks of set(eth(...)) rewrites."""
    return re.sub(r"set\(eth\(([^)]*)\)\)", lambda m: "set(eth(%s))" % ",".join(x.split("/")[0] for x in m.group(1).split(",")), actions)

def without_recirc_ids(s):
    """Recirculation ids are each switch's own: `recirc(ID)`, `recirc_id=ID`."""
    s = re.sub(r"recirc\(0x[0-9a-f]+\)", "recirc(ID)", s)
    return re.sub(r"recirc_id=0x[0-9a-f]+", "recirc_id=ID", s)

def ovs_datapath_passes(pkt):
    """Sends `pkt` through OVS's datapath (netdev-dummy/receive, its flows
    purged first) and returns (the first pass's actions, ports mapped;
    {recirculation id: the dp_hash of its flow, or None}) from the flows
    it installed; None when nothing was installed."""
    # (revalidator/purge drops the flows and their ukeys: a flow deleted
    # with dpctl/del-flows keeps its ukey a while, and the same packet's
    # flow could not be installed again.)
    subprocess.run(["ovs-appctl"] + CTL + ["revalidator/purge"], capture_output=True)
    if pkt.startswith("in_port("):
        port, data = re.match(r"in_port\((\d+)\)", pkt).group(1), pkt
    else:
        port = re.search(r"in_port=(\d+)", pkt).group(1)
        flow = re.sub(r"in_port=\d+,?", "", pkt)
        dump = subprocess.run(["ovs-ofctl", "compose-packet", flow], capture_output=True, text=True).stdout
        data = "".join(l[10:58].replace(" ", "").replace("-", "") for l in dump.splitlines())
        if not data:
            return None
    subprocess.run(["ovs-appctl"] + CTL + ["netdev-dummy/receive", "p" + port, data], capture_output=True)
    first, hashes = None, {}
    got = None
    for _ in range(50):
        out = subprocess.run(["ovs-appctl"] + CTL + ["dpctl/dump-flows"], capture_output=True, text=True).stdout
        for line in out.splitlines():
            m = re.search(r"recirc_id\((0x[0-9a-f]+|0)\),", line)
            if not m or "actions:" not in line:
                continue
            acts = line.split("actions:", 1)[1].strip()
            if m.group(1) == "0":
                first = map_ovs_actions(acts)
            else:
                h = re.search(r"dp_hash\((0x[0-9a-f]+)(?:/(0x[0-9a-f]+))?", line)
                hashes[m.group(1)] = (h.group(1), h.group(2) or "0xffffffff") if h else None
        if first is not None and all(i in hashes for i in re.findall(r"recirc\((0x[0-9a-f]+)\)", first)):
            got = first, hashes
            break
        time.sleep(0.02)
    else:
        got = (first, hashes) if first is not None else None
    # NORMAL learnt from the packet: forget it (traces start from an
    # empty MAC table, as flowpath's).
    subprocess.run(["ovs-appctl"] + CTL + ["fdb/flush", "br0"], capture_output=True)
    return got

def canon_actions(s):
    """The set of (port, tags, rewrites) the outputs of an action list send."""
    tags, mods, outs = [], [], []
    for t in split_top(s):
        if t.isdigit():
            outs.append((t, tuple(tags), tuple(mods)))
        elif t.startswith("push_vlan("):
            tags.insert(0, t)
        elif t == "pop_vlan":
            if tags:
                tags.pop(0)
            else:
                mods.append("pop")
        elif t == "drop":
            pass
        else:
            mods.append(t)
    return sorted(set(outs)), mods if not outs else []

MACS = ["50:54:00:00:00:%02x" % i for i in range(1, 6)]

def rnd_normal_rules(r):
    rules = ["table=0,priority=0,actions=NORMAL"]
    for _ in range(r.randint(0, 4)):
        k = r.random()
        prio = r.randint(1, 1000)
        if k < 0.25:
            rules.append("table=0,priority=%d,dl_src=%s,actions=drop" % (prio, r.choice(MACS)))
        elif k < 0.45:
            rules.append("table=0,priority=%d,in_port=%d,actions=mod_dl_src:%s,NORMAL" % (prio, r.randint(1, 4), r.choice(MACS)))
        elif k < 0.6:
            rules.append("table=0,priority=%d,ip,nw_dst=10.0.0.%d,actions=NORMAL,output:%d" % (prio, r.randint(1, 4), r.randint(1, 4)))
        elif k < 0.75:
            rules.append("table=0,priority=%d,tcp,tp_dst=80,actions=mod_vlan_vid:%d,NORMAL" % (prio, r.randint(1, 3)))
        elif k < 0.85:
            rules.append("table=0,priority=%d,dl_vlan=%d,actions=strip_vlan,NORMAL" % (prio, r.randint(1, 3)))
        else:
            rules.append("table=0,priority=%d,arp,actions=resubmit(,1)" % prio)
            rules.append("table=1,priority=0,actions=NORMAL")
    return rules

def rnd_vlan_config(r, native=False):
    cfg = {}
    for p in range(1, 5):
        k = r.random()
        if native and k < 0.4:
            # vlan_mode=native-tagged|native-untagged with a tag, and trunks
            # (none: every VLAN) that may or may not hold the tag.
            trunks = sorted(set(r.choice([0, 1, 2, 3]) for _ in range(r.choice([0, 1, 2]))))
            cfg[p] = (r.choice(["native-tagged", "native-untagged"]), (r.randint(1, 3), trunks))
        elif k < 0.2:
            cfg[p] = ("tag", r.randint(1, 3))
        elif k < 0.35:
            cfg[p] = ("trunks", sorted(set(r.choice([0, 1, 2, 3]) for _ in range(2))))
    return cfg

def vlan_vsctl(kind, v):
    """ovs-vsctl `set port` column settings for one port's configuration."""
    if kind == "tag":
        return ["tag=%d" % v]
    if kind == "trunks":
        return ["trunks=[" + ",".join(map(str, v)) + "]"]
    tag, trunks = v
    out = ["vlan_mode=" + kind, "tag=%d" % tag]
    if trunks:
        out.append("trunks=[" + ",".join(map(str, trunks)) + "]")
    return out

def vlan_option(kind, v):
    """The same configuration as flowpath's --port-vlan value."""
    if kind == "tag":
        return "vlan=%d" % v
    if kind == "trunks":
        return "trunks=" + ",".join(map(str, v))
    tag, trunks = v
    return "%s=%d" % (kind, tag) + (",trunks=" + ",".join(map(str, trunks)) if trunks else "")

def rnd_normal_packet(r):
    p = ["in_port=%d" % r.randint(1, 4)]
    if r.random() < 0.25:
        p.append("dl_vlan=%d" % r.choice([0, 1, 2, 3]))
        if r.random() < 0.3:
            p.append("dl_vlan_pcp=%d" % r.randint(0, 7))
    src = r.choice(MACS)
    k = r.random()
    dst = "ff:ff:ff:ff:ff:ff" if k < 0.15 else "01:00:5e:00:00:01" if k < 0.2 else "01:80:c2:00:00:00" if k < 0.22 else r.choice(MACS)
    p += ["dl_src=" + src, "dl_dst=" + dst]
    proto = r.choice(["tcp", "udp", "arp", "ip", "ipv6"])
    p.append(proto)
    if proto in ("tcp", "udp", "ip"):
        p += ["nw_src=10.0.0.%d" % r.randint(1, 4), "nw_dst=10.0.0.%d" % r.randint(1, 4), "nw_ttl=64"]
    if proto in ("tcp", "udp"):
        pre = "tp" if proto == "tcp" else "udp"
        p += [pre + "_src=%d" % r.choice([1024, 5000]), pre + "_dst=%d" % r.choice([80, 22])]
    if proto == "arp":
        a = r.randint(1, 4)
        p += ["arp_op=%d" % r.choice([1, 2]), "arp_spa=10.0.0.%d" % a, "arp_tpa=10.0.0.%d" % r.choice([a, r.randint(1, 4)])]
    return ",".join(p)

VSCTL = ["ovs-vsctl", "--db=unix:%s/db.sock" % os.environ.get("OVS_RUNDIR", "/tmp/ovs-sandbox")]

def reset_vlans():
    """Ports p1..p4 back to trunks of every VLAN (a --normal run leaves
    its last configuration behind)."""
    for p in range(1, 5):
        subprocess.run(VSCTL + ["clear", "port", "p%d" % p, "tag", "--", "clear", "port", "p%d" % p, "trunks", "--", "clear", "port", "p%d" % p, "vlan_mode"], check=True)

def normal_main(a, r, rec):
    vs = VSCTL
    diffs = mfd = total = 0
    for rs in range(a.rulesets):
        rules = rnd_normal_rules(r)
        cfg = rnd_vlan_config(r, a.native_vlans)
        reset_vlans()
        for p in range(1, 5):
            if p in cfg:
                kind, v = cfg[p]
                subprocess.run(vs + ["set", "port", "p%d" % p] + vlan_vsctl(kind, v), check=True)
        rf, res = load_rules(rules)
        if res.returncode:
            print("OVS rejected rule set", rs, res.stderr, open(rf).read())
            continue
        subprocess.run(["ovs-appctl"] + CTL + ["revalidator/wait"], capture_output=True)
        subprocess.run(["ovs-appctl"] + CTL + ["fdb/flush", "br0"], check=True, capture_output=True)
        pkts = [rnd_normal_packet(r) for _ in range(a.packets)]
        pf = write_packets(pkts)
        pv = []
        for p, (kind, v) in sorted(cfg.items()):
            pv += ["--port-vlan", "%d=%s" % (p, vlan_option(kind, v))]
        ours = flowpath_trace(a, rf, pf, ["--learn"] + pv)
        if ours is None:
            continue
        grouped = []
        for pkt, mine in zip(pkts, ours):
            total += 1
            t = ovs_trace(pkt, "-generate")
            if t is None:
                continue
            mf, da = t
            if rec:
                rec.write(json.dumps({"set": "%d/%d" % (a.seed, rs), "rules": rules, "vlans": pv, "packet": pkt, "megaflow": mf, "actions": da}) + "\n")
            if canon_actions(da) != canon_actions(mine["actions"].replace("65534", "LOCAL")) and canon_actions(da) != canon_actions(mine["actions"]):
                diffs += 1
                print("ACTIONS DIFFER\n  rules: %s\n  vlans: %s\n  packet: %s\n  ovs:  %s\n  ours: %s" % ("\n         ".join(rules), " ".join(pv), pkt, da, mine["actions"]))
            elif mf != mine["megaflow"]:
                mfd += 1
                print("MEGAFLOW DIFFERS\n  rules: %s\n  vlans: %s\n  packet: %s\n  ovs:  %s\n  ours: %s" % ("\n         ".join(rules), " ".join(pv), pkt, mf, mine["megaflow"]))
        if grouped:
            # --regs: one line per rule set, its traces in "traces".
            rec.write(json.dumps({"rules": rules, "groups": groups, "traces": grouped}) + "\n")
        os.unlink(rf); os.unlink(pf)
    print("NORMAL: rule sets %d, packets %d, action diffs %d, megaflow diffs %d" % (a.rulesets, total, diffs, mfd))

# --ct: connection tracking as firewall pipelines write it.
CT_STATES = ["+trk+est-rel", "+trk+new", "+trk+inv", "-new+rpl", "+trk+est", "+trk+est+rpl", "+trk+rel", "+trk",
             "+trk-new-est", "+est-inv", "+trk+new-rpl", "+trk+snat", "+trk+dnat", "-trk", "+trk+est-rel-inv"]
CT_NEXT = ["trk|new", "trk|est", "trk|est|rpl", "trk|rel", "trk|inv"]
CT_NEXT_NAT = ["trk|new|snat", "trk|new|dnat", "trk|est|dnat", "trk|est|rpl|snat"]

def ct_nat(r, v6):
    """A `nat(...)` argument of IPv4 or IPv6 addresses (or none)."""
    k = r.random()
    if k < 0.3:
        return "nat"
    kind = r.choice(["src", "dst"])
    if v6:
        a = "[fd00::%x]" % r.randint(1, 9)
        if r.random() < 0.4:
            a += "-[fd00::%x]" % r.randint(10, 20)
    else:
        a = "10.9.%d.%d" % (r.randrange(3), r.randint(1, 9))
        if r.random() < 0.4:
            a += "-10.9.9.%d" % r.randint(10, 20)
    if r.random() < 0.5:
        p = r.choice([80, 1000, 4096])
        a += ":%d" % p
        if r.random() < 0.5:
            a += "-%d" % (p + r.choice([1, 100]))
    flags = [f for f in ("persistent", r.choice(["hash", "random", ""])) if f and r.random() < 0.3]
    return "nat(%s=%s%s)" % (kind, a, "".join("," + f for f in flags))

def ct_exec(r):
    """`exec(...)` writes to ct_mark and ct_label."""
    w = []
    for _ in range(r.randint(1, 2)):
        w.append(r.choice(["set_field:0x%x->ct_mark" % r.choice([1, 2, 5, 0x100]),
                           "set_field:0x%x/0x%x->ct_mark" % (r.choice([1, 2]), r.choice([0xff, 0x3, 0xf0f])),
                           "load:0x%x->NXM_NX_CT_MARK[%s]" % (r.randrange(4), r.choice(["0..1", "4..7", "16..31"])),
                           "set_field:0x%x->ct_label" % r.choice([1, 0x10000, 0x100000000000000000]),
                           "set_field:0x%x/0x%x->ct_label" % (r.choice([1, 2]), r.choice([0x3, 0xffff])),
                           "load:0x%x->NXM_NX_CT_LABEL[%s]" % (r.randrange(8), r.choice(["0..2", "64..66", "125..127"]))]))
    return "exec(%s)" % ",".join(first_by(w, lambda x: x.split("->")[1].split("[")[0]))

def ct_action(r, proto, table, ntables, recirc):
    """A `ct(...)`: commit or not, a zone (number or REG6), exec, nat,
    alg; with `recirc`, table= a later table."""
    v6 = proto in ("ipv6", "tcp6", "udp6", "icmp6")
    parts = []
    commit = not recirc or r.random() < 0.3
    if commit:
        parts.append("commit")
        if r.random() < 0.1:
            parts.append("force")
    k = r.random()
    if k < 0.35:
        parts.append("zone=%d" % r.choice([1, 5, 7, 0xffff]))
    elif k < 0.55:
        parts.append("zone=NXM_NX_REG6[0..15]")
    elif k < 0.6:
        parts.append(r.choice(["zone=NXM_NX_REG5[16..31]", "zone=NXM_NX_PKT_MARK[0..15]"]))
    if recirc:
        parts.append("table=%d" % r.randint(table + 1, ntables - 1))
    if commit and r.random() < 0.5:
        parts.append(ct_exec(r))
    if r.random() < (0.4 if recirc else 0.35):
        n = ct_nat(r, v6)
        if n != "nat" and not commit:
            # (OVS: a NAT range needs commit.)
            n = "nat"
        parts.append(n)
    if commit and proto in ("tcp", "tcp6") and r.random() < 0.15:
        parts.append("alg=ftp")
    elif commit and proto in ("udp", "udp6") and r.random() < 0.15:
        parts.append("alg=tftp")
    return "ct(%s)" % ",".join(parts)

def ct_post_match(r):
    """A match of a table after conntrack: ct_state combinations, mark,
    label, zone, the original tuple."""
    proto = r.choice(["ip", "ip", "tcp", "udp", "icmp", "ipv6", "tcp6", "udp6", "icmp6", ""])
    parts = [proto] if proto else []
    if r.random() < 0.3:
        parts.append("in_port=%d" % r.randint(1, 4))
    if r.random() < 0.85:
        parts.append("ct_state=%s" % r.choice(CT_STATES))
    if r.random() < 0.25:
        parts.append(r.choice(["ct_mark=%d" % r.choice([0, 1, 2, 5]), "ct_mark=0x%x/0x%x" % (r.choice([0, 1, 2]), r.choice([0x1, 0x3, 0xff]))]))
    if r.random() < 0.2:
        parts.append(r.choice(["ct_label=0x%x" % r.choice([0, 1, 0x10000]), "ct_label=0x%x/0x%x" % (r.choice([0, 1]), r.choice([0x1, 0xffff, 0x10000000000000000]))]))
    if r.random() < 0.2:
        parts.append("ct_zone=%d" % r.choice([0, 1, 5, 7]))
    if proto and r.random() < 0.2:
        # The original direction's tuple: needs a tracked connection.
        parts = [p for p in parts if not p.startswith("ct_state=")] + ["ct_state=+trk+est"]
        if proto in ("ipv6", "tcp6", "udp6", "icmp6"):
            parts.append(r.choice(["ct_ipv6_dst=fd00::%x" % r.randint(1, 3), "ct_ipv6_src=2001:db8::1/64"]))
        else:
            parts.append(r.choice(["ct_nw_dst=10.0.0.%d" % r.randint(1, 3), "ct_nw_src=10.0.0.0/24", "ct_nw_dst=10.9.0.0/16"]))
        if r.random() < 0.5:
            parts.append("ct_nw_proto=%d" % r.choice([6, 17, 1]))
            if r.random() < 0.5 and parts[-1] != "ct_nw_proto=1":
                parts.append("ct_tp_dst=%d" % r.choice([80, 22, 8080]))
    if proto in ("tcp", "udp") and r.random() < 0.3:
        parts.append("tp_dst=%d" % r.choice([22, 80, 443]))
    if r.random() < 0.2:
        parts.append("reg%d=%d" % (r.choice([0, 6]), r.choice([0, 1, 5])))
    return first_by(parts, lambda p: p.split("=")[0]), proto

def ct_post_actions(r, proto, table, ntables):
    acts = []
    for _ in range(r.randint(1, 3)):
        k = r.random()
        if k < 0.35 and proto:
            acts.append(ct_action(r, proto, table, ntables, table + 1 < ntables and r.random() < 0.25))
        elif k < 0.55:
            acts.append("output:%d" % r.randint(1, 4))
        elif k < 0.65:
            acts.append("ct_clear")
        elif k < 0.75 and table + 1 < ntables:
            acts.append("resubmit(,%d)" % r.randint(table + 1, ntables - 1))
        elif k < 0.85:
            acts.append("load:0x%x->NXM_NX_REG%d[%s]" % (r.choice([1, 5, 7]), r.choice([0, 6]), r.choice(["", "0..15"])))
        elif k < 0.9:
            acts.append("move:NXM_NX_CT_MARK[]->NXM_NX_REG0[]")
        elif k < 0.95 and proto in ("ip", "tcp", "udp", "icmp"):
            acts.append("mod_nw_dst:10.0.0.%d" % r.randint(1, 9))
        else:
            acts.append("mod_dl_src:00:00:00:00:00:%02x" % r.randrange(256))
    if r.random() < 0.1:
        acts = ["drop"]
    return ",".join(acts)

def rnd_ct_rules(r):
    """A firewall pipeline: table 0 sends untracked IP through the tracker
    (`ct(table=1[,zone][,nat])`, the zone from REG6 that a rule per port
    loads), later tables decide on ct_state, mark, label, zone and tuple,
    commit (exec, NAT, ALG), clear, output and resubmit."""
    ntables = r.randint(2, 3)
    rules = []
    style = r.choice(["tutorial", "neutron", "ovn"])
    if style == "tutorial":
        rules += ["table=0,priority=1,actions=drop",
                  "table=0,priority=10,arp,actions=output:%d" % r.randint(1, 4),
                  "table=0,priority=100,ip,ct_state=-trk,actions=ct(table=1)"]
        if r.random() < 0.5:
            rules.append("table=0,priority=100,ipv6,ct_state=-trk,actions=ct(table=1)")
        for p in (1, 2):
            q = 3 - p
            rules.append("table=1,in_port=%d,ip,ct_state=+trk+new,actions=%s,%d" % (p, ct_action(r, "ip", 1, ntables, False) if r.random() < 0.5 else "ct(commit)", q) if p == 1 else "table=1,in_port=2,ip,ct_state=+trk+new,actions=drop")
            rules.append("table=1,in_port=%d,ip,ct_state=+trk+est,actions=%d" % (p, q))
    else:
        for proto in ("ip", "ipv6"):
            if r.random() < 0.8:
                zone = ""
                k = r.random()
                if k < 0.3:
                    zone = ",zone=%d" % r.choice([1, 5, 7])
                elif k < 0.7:
                    zone = ",zone=NXM_NX_REG6[0..15]"
                nat = ",nat" if r.random() < 0.4 else ""
                if nat and r.random() < 0.3:
                    # A load balancer: DNAT on the way in.
                    nat = ",commit," + ct_nat(r, proto == "ipv6")
                rules.append("table=0,priority=100,%s,ct_state=-trk,actions=ct(table=1%s%s)" % (proto, zone, nat))
        if style == "ovn" or r.random() < 0.5:
            # The zone of each port (OVN: REG6 before conntrack).
            for p in r.sample([1, 2, 3, 4], r.randint(1, 4)):
                proto = r.choice(["ip", "ipv6"])
                rules.append("table=0,priority=110,in_port=%d,%s,ct_state=-trk,actions=load:0x%x->NXM_NX_REG6[0..15],ct(table=1,zone=NXM_NX_REG6[0..15]%s)" % (p, proto, r.choice([1, 2, 5, 7]), ",nat" if r.random() < 0.3 else ""))
        rules.append("table=0,priority=0,actions=%s" % r.choice(["resubmit(,1)", "drop", "output:%d" % r.randint(1, 4)]))
    for t in range(1, ntables):
        for _ in range(r.randint(2, 5)):
            parts, proto = ct_post_match(r)
            acts = ct_post_actions(r, proto, t, ntables)
            while "+inv" in ",".join(parts) and "commit" in acts:
                # (OVS: no ct(commit) for packets matched as +inv.)
                acts = ct_post_actions(r, proto, t, ntables)
            rules.append("table=%d,priority=%d,%s%sactions=%s" % (t, r.randint(1, 1000), ",".join(parts), "," if parts else "", acts))
        if r.random() < 0.6:
            rules.append("table=%d,priority=0,actions=%s" % (t, r.choice(["drop", "output:%d" % r.randint(1, 4), "ct_clear,output:%d" % r.randint(1, 4)])))
    # Drop duplicates (same table, priority and match).
    return first_by(rules, lambda rule: rule.split(",actions=")[0]), ntables

def rnd_ct_packet(r):
    proto = r.choice(["tcp", "tcp", "udp", "icmp", "tcp6", "udp6", "icmp6", "arp"])
    p = ["in_port=%d" % r.randint(1, 4), proto]
    if r.random() < 0.1 and proto != "arp":
        # A packet already tracked (a patch port's, or a later pass):
        # skips table 0's conntrack, with the original tuple.
        p.append("ct_state=%s" % r.choice(["trk|est", "trk|new", "trk|est|rpl"]))
        p.append("ct_zone=%d" % r.choice([0, 5]))
        p.append("ct_mark=%d" % r.choice([0, 1, 2]))
        if r.random() < 0.5:
            p.append("ct_label=0x%x" % r.choice([1, 0x10000]))
        p.append("ct_nw_proto=%d" % {"tcp": 6, "tcp6": 6, "udp": 17, "udp6": 17}.get(proto, 1 if proto == "icmp" else 58))
        if proto.endswith("6"):
            p += ["ct_ipv6_src=2001:db8::1", "ct_ipv6_dst=fd00::%x" % r.randint(1, 3)]
        else:
            p += ["ct_nw_src=10.0.0.%d" % r.randint(1, 3), "ct_nw_dst=10.0.0.%d" % r.randint(1, 3)]
        if proto in ("tcp", "udp", "tcp6", "udp6"):
            p += ["ct_tp_src=%d" % r.choice([1234, 5000]), "ct_tp_dst=%d" % r.choice([80, 22, 8080])]
    if r.random() < 0.2:
        p.append("pkt_mark=%d" % r.choice([1, 5]))
    if proto in ("tcp", "udp", "icmp"):
        p += ["nw_src=10.0.0.%d" % r.randint(1, 3), "nw_dst=10.0.0.%d" % r.randint(1, 3), "nw_ttl=64"]
    if proto in ("tcp6", "udp6", "icmp6"):
        p += ["ipv6_src=2001:db8::1", "ipv6_dst=fd00::%x" % r.randint(1, 3), "nw_ttl=64"]
    if proto in ("tcp", "tcp6"):
        p += ["tp_src=%d" % r.choice([1234, 5000]), "tp_dst=%d" % r.choice([22, 80, 443, 8080])]
    if proto in ("udp", "udp6"):
        p += ["udp_src=%d" % r.choice([1234, 5000]), "udp_dst=%d" % r.choice([53, 69, 80])]
    if proto == "icmp":
        p.append("icmp_type=8")
    if proto == "icmp6":
        p += ["icmpv6_type=128", "icmpv6_code=0"]
    if proto == "arp":
        p += ["arp_op=1", "arp_spa=10.0.0.1", "arp_tpa=10.0.0.2"]
    return ",".join(p)

def ovs_trace_passes(pkt, ct_next):
    """OVS's [(megaflow, datapath actions)] for `pkt` and each conntrack
    pass ofproto/trace follows, `ct_next` its --ct-next states; None
    (after printing why) when OVS cannot trace it."""
    extra = []
    for s in ct_next:
        extra += ["--ct-next", s.replace("|", ",")]
    oo = subprocess.run(["ovs-appctl"] + CTL + ["ofproto/trace", "br0", pkt] + extra, capture_output=True, text=True)
    o = oo.stdout + oo.stderr
    passes = []
    for part in re.split(r"^=+$", o, flags=re.M):
        mfm = re.search(r"^Megaflow: (.*)$", part, re.M)
        dam = re.search(r"^Datapath actions: (.*)$", part, re.M)
        if mfm and dam:
            passes.append((mfm.group(1), map_ovs_actions(dam.group(1))))
    if not passes:
        print("OVS could not trace", pkt, o[:300])
        return None
    return passes

def ct_main(a, r, rec):
    """--ct: each packet traced under several --ct-next states, every pass
    compared (recirculation ids apart)."""
    diffs = mfd = total = passes = sets = 0
    for rs in range(a.rulesets):
        if not ovs_alive():
            print("OVS CRASHED during rule set %d: restarting it" % (rs - 1))
            restart_ovs()
        rules, ntables = rnd_ct_rules(r)
        rf, res = load_rules(rules)
        if res.returncode:
            print("OVS rejected rule set", rs, res.stderr, open(rf).read())
            continue
        sets += 1
        pkts = [rnd_ct_packet(r) for _ in range(a.packets)]
        pf = write_packets(pkts)
        text = open(rf).read()
        nat = "nat(" in text
        states = CT_NEXT + (r.sample(CT_NEXT_NAT, 2) if nat else [])
        # Sometimes two states, for pipelines with a second ct(table=N).
        lists = [[s] for s in states] + ([[r.choice(CT_NEXT), r.choice(states)]] if text.count("table=") > ntables + 1 or "ct(commit,table" in text else [])
        grouped = []
        for cn in lists:
            extra = []
            for s in cn:
                extra += ["--ct-next", s]
            ours = flowpath_trace(a, rf, pf, extra)
            if ours is None:
                continue
            # One packet's passes: its own, then those with "resumes".
            per = []
            for o in ours:
                if "resumes" in o:
                    per[-1].append(o)
                else:
                    per.append([o])
            for pkt, mine in zip(pkts, per):
                total += 1
                t = ovs_trace_passes(pkt, cn)
                if t is None:
                    continue
                if rec:
                    grouped.append({"packet": pkt, "ct_next": cn, "passes": [{"megaflow": m, "actions": d} for m, d in t]})
                theirs = [(without_recirc_ids(m), without_recirc_ids(d)) for m, d in t]
                ours_p = [(without_recirc_ids(o["megaflow"]), without_recirc_ids(o["actions"])) for o in mine]
                passes += len(theirs)
                if [d for _, d in theirs] != [d for _, d in ours_p]:
                    diffs += 1
                    print("ACTIONS DIFFER\n  rules: %s\n  packet: %s --ct-next %s\n  ovs:  %s\n  ours: %s" % (text.strip().replace("\n", "\n         "), pkt, " ".join(cn), "\n        ".join(d for _, d in theirs), "\n        ".join(d for _, d in ours_p)))
                elif [m for m, _ in theirs] != [m for m, _ in ours_p] and not any(o.get("error") for o in mine):
                    mfd += 1
                    print("MEGAFLOW DIFFERS\n  rules: %s\n  packet: %s --ct-next %s\n  actions: %s\n  ovs:  %s\n  ours: %s" % (text.strip().replace("\n", "\n         "), pkt, " ".join(cn), " / ".join(d for _, d in theirs), "\n        ".join(m for m, _ in theirs), "\n        ".join(m for m, _ in ours_p)))
        if rec and grouped:
            # Every trace is compared above; a sample is recorded (the file
            # stays small): two that recirculate, one more, each under
            # another --ct-next state where it can.
            rr = random.Random(a.seed * 100003 + rs)
            rr.shuffle(grouped)
            pick, states_seen = [], set()
            for want_multi in (True, True, False):
                cands = [g for g in grouped if g not in pick and (len(g["passes"]) > 1) == want_multi] or [g for g in grouped if g not in pick]
                fresh = [g for g in cands if tuple(g["ct_next"]) not in states_seen]
                if cands:
                    g = (fresh or cands)[0]
                    pick.append(g)
                    states_seen.add(tuple(g["ct_next"]))
            rec.write(json.dumps({"rules": rules, "traces": [g for g in grouped if g in pick]}, separators=(",", ":")) + "\n")
        os.unlink(rf); os.unlink(pf)
    print("CT: rule sets %d (loaded %d), traces %d, passes %d, action diffs %d, megaflow diffs %d" % (a.rulesets, sets, total, passes, diffs, mfd))

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ctl", help="ovs-vswitchd's control socket (default: the one in $OVS_RUNDIR)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--rulesets", type=int, default=20)
    ap.add_argument("--packets", type=int, default=30)
    ap.add_argument("--flowpath", default="target/debug/flowpath")
    ap.add_argument("--record", help="append OVS's answers (rules, packet, megaflow, actions) as JSON lines to this file")
    ap.add_argument("--normal", action="store_true", help="NORMAL rule sets, VLAN ports and learning packet sequences")
    ap.add_argument("--native-vlans", action="store_true", help="with --normal: ports in vlan_mode=native-tagged and native-untagged too")
    ap.add_argument("--conj", action="store_true", help="conjunctive matches (conjunction(id,k/n), conj_id)")
    ap.add_argument("--learn", action="store_true", help="with --regs: a learn action in nearly every rule")
    ap.add_argument("--mpls", action="store_true", help="MPLS matches (mpls, mplsm, mpls_label/tc/bos/ttl) and MPLS packets among the usual rule sets (OpenFlow 1.3, as --of13)")
    ap.add_argument("--mpls-actions", action="store_true", help="as --mpls, with MPLS actions (push/pop_mpls, set_mpls_*, dec_mpls_ttl, set_field to MPLS fields) and packets of 1-4 labels")
    ap.add_argument("--fin", action="store_true", help="with --regs: fin_timeout(...) actions, and learn with fin_idle_timeout/fin_hard_timeout (with --learn)")
    ap.add_argument("--tun", action="store_true", help="with --regs: tun_id matches, set_tunnel[64], set_field/load/move with tun_id")
    ap.add_argument("--cpl", action="store_true", help="with --regs: check_pkt_larger(N)->BIT in most rules, later tables matching its bits")
    ap.add_argument("--select", action="store_true", help="select groups by the datapath hash (OVS's default; recirculation), weighted, watched, nested in other groups' buckets: both passes compared (the second through OVS's datapath: netdev-dummy/receive, dpctl/dump-flows)")
    ap.add_argument("--hashes", action="store_true", help="choices made by OVS's hashes: bundle hrw members, and select groups by selection_method=hash (fields, masks) or by weights too many for dp_hash; with --regs, bundle_load hrw and multipath links (all algorithms) moved into pkt_mark")
    ap.add_argument("--regs", action="store_true", help="pipelines over registers, metadata and pkt_mark (load, move, push/pop, write_metadata)")
    ap.add_argument("--frags", action="store_true", help="IP fragments: first and later fragments of TCP/UDP/ICMP/IPv6 among the packets, nw_frag matches, each rule set under a random frag mode (ovs-ofctl set-frags; flowpath --frag-mode); recorded with \"frag_mode\"")
    ap.add_argument("--arp-rewrites", action="store_true", help="writes to ARP, ICMP, ICMPv6 and ND fields (set_field, load, move; responder-style rules) and their packets")
    ap.add_argument("--vlan-vid", action="store_true", help="OpenFlow 1.3 rule sets over vlan_vid: matches (0, present bit, VIDs, masks), set_field, load/move of OXM_OF_VLAN_VID, push/pop_vlan; tagged and untagged packets")
    ap.add_argument("--output-reg", action="store_true", help="with --regs: output:REG[a..b] (the port a register holds)")
    ap.add_argument("--clone", action="store_true", help="with --regs: clone(...) around some of a rule's actions")
    ap.add_argument("--controller-opts", action="store_true", help="with --regs: controller(reason=,max_len=,id=,userdata=,pause) and sample(...); the packet-in's reason, cookie, id and length compared")
    ap.add_argument("--ipfix", action="store_true", help="with --regs --controller-opts: a flow-sample collector set on the bridge (OVS's Flow_Sample_Collector_Set; flowpath --sample-collector-set 1), so sample(...) actions sample; more of them, with sampling_port, ingress and egress; recorded with \"sampling\": true")
    ap.add_argument("--ct", action="store_true", help="connection tracking: firewall pipelines (ct(table=N) in table 0, later tables on ct_state/mark/label/zone/tuple, ct(commit,exec,nat,alg), ct_clear), each packet traced under several --ct-next states, every pass compared")
    ap.add_argument("--tunnels", action="store_true", help="native tunnelling: tunnel ports (VXLAN, Geneve, GRE; remote_ip/key fixed or flow), matches on and writes to tunnel fields, packets in on tunnel ports with tunnel metadata; tnl_push headers compared byte for byte (needs tools/ovs-sandbox.sh start-tunnels; see tools/ovs_compare_tunnels.py)")
    ap.add_argument("--underlay-packets", type=int, default=2, help="with --tunnels: tunnel packets received on the underlay (decapsulated) per rule set, after the --packets ones")
    ap.add_argument("--of13", action="store_true", help="rule sets OpenFlow 1.3 can carry as flowpath means them (no mod_vlan_*/mod_nw_tos), with groups and instructions more often")
    a = ap.parse_args()
    r = random.Random(a.seed)
    rec = open(a.record, "a") if a.record else None
    # --mpls-actions: OpenFlow 1.0 (NXM) where it can (no instructions, no
    # groups): OpenFlow 1.3 refuses MPLS actions ovs-ofctl finds
    # inconsistent with the match (set_mpls_* after a pop, ...).
    OF13[0] = a.of13 or a.mpls
    MPLS[0] = a.mpls or a.mpls_actions
    MPLS_ACT[0] = a.mpls_actions
    SELECT[0] = a.select
    HASHES[0] = a.hashes
    LEARN[0] = a.learn
    CPL[0] = a.cpl
    TUN[0] = a.tun
    FIN[0] = a.fin
    FRAGS[0] = a.frags
    VLANVID[0] = a.vlan_vid
    ARPW[0] = a.arp_rewrites
    OUTREG[0] = a.output_reg
    CLONE[0] = a.clone
    CTLOPTS[0] = a.controller_opts
    IPFIX[0] = a.ipfix
    if a.ctl:
        CTL.extend(["-t", a.ctl])
    load_port_map()
    if a.ipfix:
        # A flow-sample collector set on br0 (OVS then translates sample
        # actions; the collector need not listen).
        db = "unix:%s/db.sock" % os.environ.get("OVS_RUNDIR", "/tmp/ovs-sandbox")
        subprocess.run(["ovs-vsctl", "--db=" + db, "--all", "destroy", "Flow_Sample_Collector_Set"], capture_output=True)
        subprocess.run(["ovs-vsctl", "--db=" + db, "--", "--id=@br", "get", "Bridge", "br0", "--", "--id=@i", "create", "IPFIX", 'targets="127.0.0.1:4739"',
                        "--", "create", "Flow_Sample_Collector_Set", "id=1", "bridge=@br", "ipfix=@i"], check=True, capture_output=True)
    if a.normal:
        return normal_main(a, r, rec)
    if a.tunnels:
        import types
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import ovs_compare_tunnels
        h = types.SimpleNamespace(CTL=CTL, VSCTL=VSCTL, DP2OF=DP2OF, split_top=split_top, load_rules=load_rules,
                                  write_packets=write_packets, flowpath_trace=flowpath_trace,
                                  nw_proto_narrowing=nw_proto_narrowing)
        return ovs_compare_tunnels.tunnels_main(a, r, rec, h)
    if a.ct:
        return ct_main(a, r, rec)
    reset_vlans()
    subprocess.run(["ovs-appctl"] + CTL + ["fdb/flush", "br0"], capture_output=True)
    diffs = narrower = wider = total = skipped = 0
    recirc_passes = passes2 = uncomparable = select_sets = hashes_compared = 0
    crashes = 0
    for rs in range(a.rulesets):
        if not ovs_alive():
            # The previous rule set crashed OVS (printed above): its
            # answers after the crash are not counted as compared.
            crashes += 1
            print("OVS CRASHED during rule set %d (see its ovs-vswitchd.log): restarting it" % (rs - 1))
            restart_ovs()
        special = a.regs or a.conj or a.vlan_vid or a.arp_rewrites
        ntables = 0 if special else r.randint(1, 3)
        groups = rnd_groups(r) if not special and r.random() < (0.8 if OF13[0] or a.select or a.hashes else 0.3) else []
        GROUP_IDS[:] = [i + 1 for i in range(len(groups))]
        rules = rnd_reg_rules(r) if a.regs else rnd_conj_rules(r) if a.conj else rnd_vlan_rules(r) if a.vlan_vid else rnd_arpw_rules(r) if a.arp_rewrites else []
        frag_mode = r.choice(["normal", "normal", "drop", "nx-match"]) if a.frags else None
        if frag_mode:
            subprocess.run(["ovs-ofctl", "set-frags", "br0", frag_mode], check=True)
        for t in range(ntables):
            for _ in range(r.randint(1, 8)):
                parts, proto = rnd_match(r, ntables)
                prio = r.randint(0, 65535)
                rules.append("table=%d,priority=%d,%s%sactions=%s" % (t, prio, ",".join(parts), "," if parts else "", rnd_actions(r, proto, t, ntables)))
        rf, res = load_rules(rules, of13_fallback=True, groups=groups)
        if res.returncode and ("mod_vlan" in open(rf).read() or "skipped" in res.stderr):
            skipped += 1
            continue
        if res.returncode:
            print("OVS rejected rule set", rs, res.stderr, open(rf).read())
            continue
        if any("type=select" in g for g in groups):
            select_sets += 1
        pkts = [rnd_conj_packet(r) if a.conj else rnd_vlan_packet(r) if a.vlan_vid else rnd_arpw_packet(r) if a.arp_rewrites else rnd_packet(r) for _ in range(a.packets)]
        pf = write_packets(pkts)
        fm = (["--frag-mode", frag_mode] if frag_mode else []) + (["--sample-collector-set", "1"] if a.ipfix else [])
        ours = flowpath_trace(a, rf, pf, (["--groups", rf + ".groups"] if groups else []) + fm)
        if ours is None:
            continue
        grouped = []
        # Second passes to compare: (pass-1 index, k-th recirc, packet,
        # dp_hash, OVS's (megaflow, actions), our packet).
        second = []
        gidx = {}  # packet index -> its record's index in "traces"
        for i, (pkt, mine) in enumerate(zip(pkts, ours)):
            total += 1
            t = ovs_trace(pkt)
            if t is None:
                continue
            mf, da = t
            if rec and (a.regs or a.conj or a.of13 or a.mpls or a.mpls_actions or a.select or a.hashes or a.frags or a.vlan_vid or a.arp_rewrites):
                gidx[i] = len(grouped)
                grouped.append({"packet": pkt, "megaflow": mf, "actions": da})
            elif rec and ("OpenFlow13" not in " ".join(res.args) or "mod_vlan" not in open(rf).read()):
                rec.write(json.dumps({"rules": rules, "groups": groups, "packet": pkt, "megaflow": mf, "actions": da}) + "\n")
            # Recirculation ids are each switch's own.
            da, mf = without_recirc_ids(da), without_recirc_ids(mf)
            mine = dict(mine, actions=without_recirc_ids(mine["actions"]), megaflow=without_recirc_ids(mine["megaflow"]))
            if "recirc(" in da and da == mine["actions"] and mine.get("recirc"):
                recirc_passes += 1
                got = ovs_datapath_passes(pkt)
                ids = re.findall(r"recirc\((0x[0-9a-f]+)\)", got[0]) if got else []
                if not got or without_recirc_ids(got[0]) != da or len(ids) != len(mine["recirc"]):
                    # The packet OVS composed takes another way (or
                    # nothing was installed): no second pass to compare.
                    uncomparable += 1
                    if os.environ.get("OVS_COMPARE_DEBUG"):
                        print("NOT COMPARABLE", pkt, "trace:", da, "datapath:", got)
                else:
                    for k, (oid, rc) in enumerate(zip(ids, mine["recirc"])):
                        if oid not in got[1]:
                            uncomparable += 1
                            if os.environ.get("OVS_COMPARE_DEBUG"):
                                print("NO SECOND PASS FLOW", pkt, oid, got, open(rf).read(), groups)
                            continue
                        h, hmask = got[1][oid] or (None, None)
                        hs = "dp_hash=%s," % h if h else ""
                        if h:
                            # The hash flowpath's datapath computes (OVS's
                            # function) against the bits OVS's flow matched.
                            hashes_compared += 1
                            # (dump-flows prints OVS's whole hash, and the mask.)
                            if (rc.get("dp_hash", 0) ^ int(h, 16)) & int(hmask, 16):
                                diffs += 1
                                print("DATAPATH HASH DIFFERS\n  rules: %s\n  groups: %s\n  packet: %s\n  ovs:  %s/%s\n  ours: %#x" % (open(rf).read().strip().replace("\n", "\n         "), "\n          ".join(groups), rc["packet"], h, hmask, rc.get("dp_hash", 0)))
                        t2 = ovs_trace("recirc_id=%s,%s%s" % (oid, hs, rc["packet"]))
                        if t2 is None:
                            uncomparable += 1
                            continue
                        second.append((i, k, rc["packet"], h, t2, "recirc_id=%#x,%s%s" % (rc["id"], hs, rc["packet"])))
            l2n = l2_hash_narrowing(open(rf).read(), mf, mine["megaflow"])
            if da != mine["actions"] and not (l2n and unmasked_eth_sets(da) == unmasked_eth_sets(mine["actions"])):
                diffs += 1
                print("ACTIONS DIFFER\n  rules: %s\n  groups: %s\n  packet: %s\n  ovs:  %s\n  ours: %s" % (open(rf).read().strip().replace("\n", "\n         "), "\n          ".join(groups), pkt, da, mine["actions"]))
            elif mf != mine["megaflow"] and not mpls_set_narrowing(da, mf, mine["megaflow"], pkt) and not l2n and not mine.get("error") and not vlan_narrowing(open(rf).read(), mf, mine["megaflow"]) and not nw_proto_narrowing(open(rf).read(), mf, mine["megaflow"]):
                print("MEGAFLOW DIFFERS\n  rules: %s\n  groups: %s\n  packet: %s\n  actions: %s\n  ovs:  %s\n  ours: %s" % (open(rf).read().strip().replace("\n", "\n         "), "\n          ".join(groups), pkt, da, mf, mine["megaflow"]))
                wider += 1
        if second:
            # The second passes: traced by a flowpath that first traced the
            # same first passes (so its recirculation ids are the same).
            pf2 = write_packets(pkts + [x[5] for x in second])
            ours2 = flowpath_trace(a, rf, pf2, (["--groups", rf + ".groups"] if groups else []) + fm)
            os.unlink(pf2)
            for (i, k, rp, h, (mf2, da2), our_pkt), mine2 in zip(second, (ours2 or [])[len(pkts):]):
                total += 1
                passes2 += 1
                if rec and i in gidx:
                    grouped.append({"packet": rp, "recirc_of": [gidx[i], k], "dp_hash": int(h, 16) if h else 0, "megaflow": mf2, "actions": da2})
                da2, mf2 = without_recirc_ids(da2), without_recirc_ids(mf2)
                acts2, ourmf2 = without_recirc_ids(mine2["actions"]), without_recirc_ids(mine2["megaflow"])
                if da2 != acts2:
                    diffs += 1
                    print("SECOND PASS ACTIONS DIFFER\n  rules: %s\n  groups: %s\n  packet: %s\n  pass 1: %s\n  ovs:  %s\n  ours: %s" % (open(rf).read().strip().replace("\n", "\n         "), "\n          ".join(groups), our_pkt, pkts[i], da2, acts2))
                elif mf2 != ourmf2 and not mpls_set_narrowing(da2, mf2, ourmf2, pkts[i]) and not mine2.get("error"):
                    wider += 1
                    print("SECOND PASS MEGAFLOW DIFFERS\n  rules: %s\n  groups: %s\n  packet: %s\n  actions: %s\n  ovs:  %s\n  ours: %s" % (open(rf).read().strip().replace("\n", "\n         "), "\n          ".join(groups), our_pkt, da2, mf2, ourmf2))
        if grouped:
            # --regs: one line per rule set, its traces in "traces".
            line = {"rules": rules, "groups": groups, "traces": grouped}
            if frag_mode:
                line["frag_mode"] = frag_mode
            if a.ipfix:
                line["sampling"] = True
            rec.write(json.dumps(line) + "\n")
        os.unlink(rf); os.unlink(pf)
    if a.frags:
        subprocess.run(["ovs-ofctl", "set-frags", "br0", "normal"], check=True)
    print("rule sets %d (%d skipped: mod_vlan_*/mod_nw_tos cannot be compared under OpenFlow 1.1+), packets %d, action diffs %d, megaflow diffs %d" % (a.rulesets, skipped, total, diffs, wider))
    if crashes:
        print("OVS crashed %d times (its own assertions; rule sets printed above)" % crashes)
    if recirc_passes:
        print("rule sets with a select group compared %d; first passes that recirculate %d: second passes compared %d (in the packets above), not comparable %d (OVS's composed packet took another way); datapath hashes compared %d" % (select_sets, recirc_passes, passes2, uncomparable, hashes_compared))

main()
