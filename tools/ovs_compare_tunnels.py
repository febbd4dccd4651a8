"""--tunnels mode of tools/ovs-compare.py: native tunnelling against OVS 3.1.

Needs the sandbox started for tunnels (its bridges on the dummy datapath,
as OVS's own tunnel-push-pop tests have them, so the tunnel classes get
datapath ports 4789 and 6081):

  tools/ovs-sandbox.sh start-tunnels 4
  OVS_RUNDIR=/tmp/ovs-sandbox tools/ovs-compare.py --tunnels [--seed S] [--rulesets N] [--record FILE]

The script then configures both sides the same way (TUN_PORTS,
UNDERLAY_MAC, UNDERLAY_ADDRS, ROUTES, NEIGHS, TLV_MAP below): on OVS,
tunnel ports on br0 (OpenFlow ports 10 and up), a bridge br-phy holding
the underlay addresses (netdev-dummy/ip4addr, ip6addr), routes
(ovs/route/add), neighbours (tnl/neigh/set), a Geneve option map
(add-tlv-map) and flows sending what the tunnels send out on br-phy's
port phy0 and what phy0 receives to br-phy's own port; on flowpath,
`trace --port N=KIND:OPTS --underlay ... --route ... --neigh ...
--tlv-map ...` (flowpath_args()).

Rule sets match tunnel fields (tun_id exact and masked, tun_src/tun_dst
and IPv6 ones with prefixes, tun_flags=+oam/-oam, tun_gbp_id/flags,
tun_metadata0..7), set them (set_field, set_tunnel,
set_tunnel64, load, move between tunnel fields and registers), match the
registers in later tables (resubmits sometimes as if from another port)
and output to tunnel ports (in clones too) (fixed remotes and
keys, key=flow, remote_ip=flow, IPv6, through a gateway, to a neighbour
not known, with ttl/tos/csum/df options) and to p1..p4. Packets come in on
p1..p4 (no tunnel) and on tunnel ports with tunnel metadata (IPv4 and
IPv6 outer addresses, flags, ToS, TTL, GBP, options). Datapath actions and
megaflows are compared exactly. OVS's datapath port numbers are mapped to
flowpath's: tnl_port(4789)/(6081)/(gre_sys's) to the tunnel classes'
(65024 and up, in --port order), br-phy's ports (the tnl_push's out_port
and the output after it) to the underlay's (64768).

Where OVS differs for reasons that are not semantics:
- local_ip: OVS 3.1 routes a tunnel with a local_ip only if that address
  has a "local" route in its route table, which only the kernel's routing
  table gives (ovs_router_lookup); the sandbox's dummy addresses have
  none, so OVS drops every output to such a port ("native tunnel routing
  failed"). Port 12 (vx3, local_ip=172.31.1.100) is on both sides and
  packets come in on it, but no rule outputs to it (nor do packets come
  in on it when a rule has an in_port action).
- tun_tos and tun_ttl: ovs-ofctl 3.1 refuses them in matches
  (OFPBAC_MATCH_INCONSISTENT) and set_field ("read-only"); they are in
  the packets (and tun_tos in megaflows) only.
- A packet in on a tunnel with ECN CE outside and ECN-capable insides is
  marked CE (a rewrite of its ECN bits): flowpath's megaflow then holds
  nw_proto, OVS 3.1's does not (too wide for packets with nw_proto 0,
  which get no rewrite): compared as nw_proto_narrowing in ovs-compare.py.
- flowpath sends at most 40 bytes of Geneve options (OVS 252): a packet
  that would carry more is not sent. The rule sets set few options; no
  run has met one.
- FLOOD, ALL and NORMAL are not used: OVS's bridge floods to its tunnel
  ports in its own port order.

Each rule set also gets --underlay-packets (default 2) tunnel packets
received on the underlay for the endpoint (VXLAN, Geneve over IPv4 and
IPv6, GRE): flowpath traces them in on its underlay port (64768), OVS on
br-phy's phy0 (its flow sends them to the bridge's own port, where OVS
decapsulates them); OVS's megaflow's in_port=1 is read as 64768. Other
packets received there are not compared: flowpath's underlay is not a
bridge (it answers ARP and ND itself and drops the rest; OVS hands them
to its bridge's own port, the kernel).

With --record, one line per rule set: {"rules", "tunnel_args" (flowpath
trace's tunnel options), "traces": [{"packet", "megaflow", "actions"}]},
OVS's answers with its port numbers mapped to flowpath's.
"""
import json, os, re, subprocess

# (name, OpenFlow port, type, options): the same on both sides.
TUN_PORTS = [
    ("vx1", 10, "vxlan", [("remote_ip", "172.31.1.1"), ("key", "flow")]),
    ("vx2", 11, "vxlan", [("remote_ip", "flow"), ("key", "flow")]),
    ("vx3", 12, "vxlan", [("remote_ip", "172.31.1.2"), ("local_ip", "172.31.1.100"), ("key", "123")]),
    ("gnv1", 13, "geneve", [("remote_ip", "172.31.1.3"), ("key", "flow")]),
    ("gnv2", 14, "geneve", [("remote_ip", "flow"), ("key", "flow")]),
    ("gre1", 15, "gre", [("remote_ip", "172.31.1.4"), ("key", "flow")]),
    ("gre2", 16, "gre", [("remote_ip", "flow")]),
    ("vx6", 17, "vxlan", [("remote_ip", "fd00::1"), ("key", "flow")]),
    ("vx4", 18, "vxlan", [("remote_ip", "172.31.1.2"), ("key", "77"), ("ttl", "32"), ("tos", "16")]),
    ("gnv3", 19, "geneve", [("remote_ip", "10.55.1.1"), ("key", "9"), ("csum", "true"), ("df_default", "false")]),
    ("gre3", 20, "gre", [("remote_ip", "172.31.1.9"), ("key", "5")]),
    ("gnv6", 21, "geneve", [("remote_ip", "flow"), ("key", "5"), ("csum", "false")]),
    # in_key and out_key apart (received with one, sent with the other).
    ("vx7", 22, "vxlan", [("remote_ip", "172.31.1.3"), ("in_key", "44"), ("out_key", "55")]),
    ("gre4", 23, "gre", [("remote_ip", "172.31.1.1"), ("in_key", "flow"), ("out_key", "66")]),
    ("gnv4", 24, "geneve", [("remote_ip", "172.31.1.2"), ("in_key", "88"), ("out_key", "flow")]),
    # The outer ToS and TTL from the inner packet.
    ("vx8", 25, "vxlan", [("remote_ip", "172.31.1.4"), ("key", "3"), ("tos", "inherit"), ("ttl", "inherit")]),
    ("gnv5", 26, "geneve", [("remote_ip", "10.55.1.1"), ("key", "11"), ("tos", "inherit")]),
]
NO_OUTPUT = {12}  # local_ip: see the docstring
UNDERLAY_MAC = "aa:55:aa:55:00:00"
UNDERLAY_ADDRS = ["172.31.1.100/24", "fd00::100/64"]
ROUTES = [("172.31.1.0/24", None), ("fd00::/64", None), ("10.55.0.0/16", "172.31.1.254")]
NEIGHS = [("172.31.1.1", "aa:55:aa:55:00:01"), ("172.31.1.2", "aa:55:aa:55:00:02"), ("172.31.1.3", "aa:55:aa:55:00:03"),
          ("172.31.1.4", "aa:55:aa:55:00:04"), ("172.31.1.254", "aa:55:aa:55:00:fe"), ("fd00::1", "aa:55:aa:55:00:61"),
          ("fd00::2", "aa:55:aa:55:00:62")]
TLV_MAP = "{class=0xffff,type=0,len=4}->tun_metadata0,{class=0xffff,type=1,len=8}->tun_metadata1,{class=0x102,type=0x80,len=4}->tun_metadata2,{class=0x102,type=0x81,len=4}->tun_metadata3,{class=0x103,type=2,len=4}->tun_metadata4,{class=0x103,type=3,len=8}->tun_metadata5,{class=0x104,type=0,len=4}->tun_metadata6,{class=0x104,type=1,len=4}->tun_metadata7"
UNDERLAY_PORT = 64768  # flowpath's UNDERLAY_PORT
FIRST_VPORT = 65024  # flowpath's FIRST_VPORT

# Outer addresses: ours, the neighbours', one without a neighbour, one
# without a route.
TUN_DSTS = ["172.31.1.1", "172.31.1.2", "172.31.1.3", "172.31.1.4", "10.55.1.1", "172.31.1.9", "10.9.9.9", "172.31.1.100"]
TUN_SRCS = ["172.31.1.1", "172.31.1.2", "172.31.1.3", "172.31.1.4", "172.31.1.77"]
TUN6 = ["fd00::1", "fd00::2", "fd00::100", "fd00::9"]
VALS = [0, 1, 3, 5, 9, 11, 44, 77, 88, 123, 0x1234, 0xffffff]
# Geneve option values (0 is a value: the option is present).
MD_VALS = [0, 1, 5, 9, 77, 123, 0x1234, 0xffffff, 0x100]


def flowpath_args():
    """flowpath trace's tunnel options for the configuration above."""
    args = ["--underlay", "null,%s,mac=%s" % (",".join("ip=" + a for a in UNDERLAY_ADDRS), UNDERLAY_MAC)]
    for net, gw in ROUTES:
        args += ["--route", net + (",gw=" + gw if gw else "")]
    for ip, mac in NEIGHS:
        args += ["--neigh", "%s=%s" % (ip, mac)]
    for _, n, kind, opts in TUN_PORTS:
        args += ["--port", "%d=%s:%s" % (n, kind, ",".join("%s=%s" % kv for kv in opts))]
    args += ["--tlv-map", TLV_MAP]
    return args


def vport_of(kind):
    """flowpath's datapath port of a tunnel class (one per kind and UDP
    port, numbered in --port order)."""
    seen = []
    for _, _, k, _ in TUN_PORTS:
        if k not in seen:
            seen.append(k)
    return FIRST_VPORT + seen.index(kind)


def setup_ovs(ctl, vsctl):
    """Configures OVS as described above (idempotent); returns the map of
    OVS datapath port numbers to flowpath's."""
    appctl = ["ovs-appctl"] + ctl
    run = lambda *c: subprocess.run(list(c), check=True, capture_output=True, text=True).stdout
    run(*vsctl, "--may-exist", "add-br", "br-phy", "--", "set", "bridge", "br-phy", "datapath_type=dummy",
        "fail_mode=secure", "other-config:hwaddr=" + UNDERLAY_MAC,
        "--", "--may-exist", "add-port", "br-phy", "phy0", "--", "set", "interface", "phy0", "type=dummy", "ofport_request=1")
    for name, n, kind, opts in TUN_PORTS:
        run(*vsctl, "--may-exist", "add-port", "br0", name, "--", "set", "interface", name, "type=" + kind,
            "ofport_request=%d" % n, *["options:%s=%s" % kv for kv in opts])
    for a in UNDERLAY_ADDRS:
        run(*appctl, "netdev-dummy/ip6addr" if ":" in a else "netdev-dummy/ip4addr", "br-phy", a)
    for net, gw in ROUTES:
        subprocess.run(appctl + ["ovs/route/add", net, "br-phy"] + ([gw] if gw else []), capture_output=True)
    for ip, mac in NEIGHS:
        run(*appctl, "tnl/neigh/set", "br-phy", ip, mac)
    # (A mapping in use by a flow cannot be deleted.)
    run("ovs-ofctl", "del-flows", "br0")
    subprocess.run(["ovs-ofctl", "del-tlv-map", "br0"], capture_output=True)
    run("ovs-ofctl", "add-tlv-map", "br0", TLV_MAP)
    # br-phy: what comes in on phy0 goes to the bridge's own port (the
    # endpoint address: tunnel packets to it are decapsulated), what the
    # tunnels send goes out on phy0.
    run("ovs-ofctl", "del-flows", "br-phy")
    run("ovs-ofctl", "add-flow", "br-phy", "in_port=1,actions=LOCAL")
    run("ovs-ofctl", "add-flow", "br-phy", "in_port=LOCAL,actions=output:1")
    show = run(*appctl, "dpif/show")
    if "dummy@" not in show:
        raise SystemExit("--tunnels: OVS's bridges must be on the dummy datapath (tools/ovs-sandbox.sh start-tunnels)")
    for name, n, _, _ in TUN_PORTS:
        # (OVS refuses a tunnel port configured as another one.)
        if not re.search(r"^\s+%s %d/\d+:" % (name, n), show, re.M):
            raise SystemExit("--tunnels: OVS has no tunnel port %s at %d (see its log)" % (name, n))
    dp = {}
    for bridge in re.split(r"^  (?=\S)", show, flags=re.M)[1:]:
        name = bridge.split(":", 1)[0]
        for m in re.finditer(r"^\s+(\S+) (\d+)/(\d+):", bridge, re.M):
            if name == "br-phy":
                dp[m.group(3)] = str(UNDERLAY_PORT)
    tnl = {}
    ports = run(*appctl, "tnl/ports/show")
    for m in re.finditer(r"^(\w+?)_sys(?:_\d+)? \((\d+)\)", ports, re.M):
        kind = {"vxlan": "vxlan", "genev": "geneve", "gre": "gre"}[m.group(1)]
        tnl[m.group(2)] = str(vport_of(kind))
    return dp, tnl


def map_actions(s, dp, tnl, split_top, dp2of):
    """OVS's datapath actions with flowpath's port numbers."""
    out = []
    for t in split_top(s):
        if t.startswith("clone(") and t.endswith(")"):
            out.append("clone(%s)" % map_actions(t[6:-1], dp, tnl, split_top, dp2of))
        elif t.isdigit():
            out.append(dp.get(t, dp2of.get(t, t)))
        elif t.startswith("tnl_pop("):
            out.append("tnl_pop(%s)" % tnl.get(t[8:-1], t[8:-1]))
        elif t.startswith("tnl_push("):
            t = re.sub(r"tnl_port\((\d+)\)", lambda m: "tnl_port(%s)" % tnl.get(m.group(1), m.group(1)), t)
            t = re.sub(r"out_port\((\d+)\)", lambda m: "out_port(%s)" % dp.get(m.group(1), m.group(1)), t)
            out.append(t)
        else:
            out.append(t)
    return ",".join(out)


def rnd_tun_match(r):
    """Matches on tunnel fields, and sometimes on the packet and the
    registers earlier tables load."""
    parts = []
    k = r.random()
    if k < 0.45:
        parts.append("in_port=%d" % r.choice([n for _, n, _, _ in TUN_PORTS]))
    elif k < 0.7:
        parts.append("in_port=%d" % r.randint(1, 4))
    for _ in range(r.randint(0, 3)):
        j = r.random()
        if j < 0.25:
            v = r.choice(VALS)
            parts.append(r.choice(["tun_id=%d" % v, "tun_id=0x%x/0xff" % (v & 0xff), "tunnel_id=0x%x" % v, "tun_id=0x%x/0xffff00" % (v & 0xffff00)]))
        elif j < 0.4:
            parts.append(r.choice(["tun_src=%s" % r.choice(TUN_SRCS), "tun_src=172.31.1.0/24", "tun_src=172.31.0.0/16",
                                   "tun_dst=172.31.1.100", "tun_dst=172.31.1.0/24"]))
        elif j < 0.45:
            parts.append(r.choice(["tun_ipv6_src=%s" % r.choice(TUN6), "tun_ipv6_src=fd00::/64", "tun_ipv6_dst=fd00::100"]))
        elif j < 0.55:
            parts.append(r.choice(["tun_flags=+oam", "tun_flags=-oam"]))
        elif j < 0.72:
            parts.append(r.choice(["tun_gbp_id=%d" % r.choice([0, 7, 100]), "tun_gbp_flags=%d" % r.choice([0, 1, 8])]))
        elif j < 0.87:
            i = r.randrange(8)
            v = r.choice(MD_VALS)
            parts.append(r.choice(["tun_metadata%d=0x%x" % (i, v), "tun_metadata%d=0x%x/0xff" % (i, v & 0xff)]))
        elif j < 0.95:
            parts.append(r.choice(["reg0=%d" % r.choice(VALS[:5]), "reg1=0x%x/0xff" % r.choice(VALS[:5]), "reg2=%d" % r.choice([0, 1])]))
        else:
            parts.append(r.choice(["ip", "tcp", "udp,tp_dst=80", "ip,nw_dst=10.0.0.2", "arp", "ipv6"]))
    # No field twice (the prerequisites and a field only once).
    seen, out = set(), []
    for p in parts:
        key = p.split("=")[0].replace("tunnel_id", "tun_id")
        if key in ("ip", "tcp", "udp", "arp", "ipv6") or key.startswith(("ip,", "tcp,", "udp,", "arp,", "ipv6,")):
            key = "proto"
        if key not in seen:
            seen.add(key)
            out.append(p)
    return out


TUN_SUBS = [("NXM_NX_TUN_ID", 64), ("NXM_NX_TUN_IPV4_SRC", 32), ("NXM_NX_TUN_IPV4_DST", 32), ("NXM_NX_TUN_GBP_ID", 16),
            ("NXM_NX_TUN_METADATA0", 32), ("NXM_NX_TUN_METADATA1", 64), ("NXM_NX_TUN_METADATA2", 32), ("NXM_NX_TUN_METADATA5", 64)]
REG_SUBS = [("NXM_NX_REG0", 32), ("NXM_NX_REG1", 32), ("NXM_NX_REG2", 32), ("OXM_OF_PKT_REG1", 64)]


def rnd_set(r):
    """A write of a tunnel field (or a move out of one)."""
    k = r.random()
    if k < 0.12:
        return "set_field:%d->tun_id" % r.choice(VALS)
    if k < 0.18:
        return "set_tunnel:%d" % r.choice(VALS)
    if k < 0.22:
        return "set_tunnel64:0x%x" % (r.choice([0, 1, 5]) << 32 | r.choice(VALS))
    if k < 0.32:
        return "set_field:%s->tun_dst" % r.choice(TUN_DSTS)
    if k < 0.36:
        return "set_field:%s->tun_src" % r.choice(TUN_SRCS + ["172.31.1.100"])
    if k < 0.41:
        return "set_field:%s->tun_ipv6_dst" % r.choice(TUN6)
    if k < 0.46:
        return r.choice(["set_field:%d->tun_gbp_id" % r.choice([0, 7, 100]), "set_field:%d->tun_gbp_flags" % r.choice([0, 1])])
    if k < 0.52:
        return r.choice(["set_field:+oam->tun_flags", "set_field:-oam->tun_flags", "set_field:0x1->tun_flags"])
    if k < 0.64:
        return "set_field:0x%x->tun_metadata%d" % (r.choice(MD_VALS), r.randrange(8))
    if k < 0.72:
        name, w = r.choice(TUN_SUBS)
        a = r.randrange(w)
        b = r.randrange(a, min(w, a + 16))
        v = r.choice(VALS) & ((1 << (b - a + 1)) - 1)
        return "load:0x%x->%s[%d..%d]" % (v, name, a, b)
    # move between tunnel fields and registers, either way.
    (sn, sw), (dn, dw) = r.choice(TUN_SUBS), r.choice(REG_SUBS)
    if r.random() < 0.5:
        (sn, sw), (dn, dw) = (dn, dw), (sn, sw)
    n = r.choice([1, 4, 8, 16, min(sw, dw)])
    n = min(n, sw, dw)
    a, b = r.randrange(sw - n + 1), r.randrange(dw - n + 1)
    return "move:%s[%d..%d]->%s[%d..%d]" % (sn, a, a + n - 1, dn, b, b + n - 1)


def rnd_output(r):
    if r.random() < 0.6:
        return "output:%d" % r.choice([n for _, n, _, _ in TUN_PORTS if n not in NO_OUTPUT])
    return r.choice(["output:%d" % r.randint(1, 4), "in_port"])


def rnd_tun_actions(r, t, ntables, ip):
    acts = []
    for _ in range(r.randint(1, 5)):
        k = r.random()
        if k < 0.45:
            acts.append(rnd_set(r))
        elif k < 0.8:
            acts.append(rnd_output(r))
        elif k < 0.85:
            # A clone: its writes to the tunnel fields end with it.
            acts.append("clone(%s)" % ",".join([rnd_set(r), rnd_output(r)] + ([rnd_set(r)] if r.random() < 0.3 else [])))
        elif k < 0.9:
            # (ECN and ToS rewrites need an IP match.)
            acts.append(r.choice(["mod_dl_src:00:00:00:00:00:0%d" % r.randrange(4)] + (["mod_nw_tos:%d" % r.choice([0, 16]), "mod_nw_ecn:%d" % r.randrange(4)] * 2 if ip else [])))
        elif t + 1 < ntables:
            # (Sometimes as if the packet had come in on another port.)
            acts.append("resubmit(%s,%d)" % (r.choice(["", "", str(r.choice([1, 10, 13, 15, 17]))]), r.randint(t + 1, ntables - 1)))
        else:
            acts.append("load:%d->NXM_NX_REG0[]" % r.choice(VALS[:5]))
    if t + 1 < ntables and r.random() < 0.4:
        acts.append("resubmit(,%d)" % r.randint(t + 1, ntables - 1))
    return ",".join(acts)


def rnd_tun_rules(r):
    ntables = r.randint(1, 3)
    rules, seen = [], set()
    for t in range(ntables):
        for _ in range(r.randint(1, 6)):
            parts = rnd_tun_match(r)
            head = "table=%d,priority=%d,%s" % (t, r.randint(1, 65535), ",".join(parts))
            if head in seen:
                continue
            seen.add(head)
            ip = any(p.split(",")[0] in ("ip", "tcp", "udp") for p in parts)
            rules.append("%s%sactions=%s" % (head, "," if parts else "", rnd_tun_actions(r, t, ntables, ip)))
        if r.random() < 0.6:
            rules.append("table=%d,priority=0,actions=%s" % (t, rnd_tun_actions(r, t, ntables, False)))
    return rules


def rnd_tun_packet(r, in_port_action):
    """A packet on p1..p4 (no tunnel) or on a tunnel port with its tunnel
    metadata (IPv4 or IPv6 outer addresses); not on a NO_OUTPUT port when
    the rules send packets back to their in_port."""
    p = []
    if r.random() < 0.35:
        p.append("in_port=%d" % r.randint(1, 4))
    else:
        name, n, kind, opts = r.choice([t for t in TUN_PORTS if not (in_port_action and t[1] in NO_OUTPUT)])
        o = dict(opts)
        p.append("in_port=%d" % n)
        v6 = o["remote_ip"].startswith("fd00") or (o["remote_ip"] == "flow" and r.random() < 0.3)
        if r.random() < 0.9:
            if v6:
                p += ["tun_ipv6_src=%s" % r.choice(TUN6[:2] + ["fd00::9"]), "tun_ipv6_dst=fd00::100"]
            else:
                src = o["remote_ip"] if o["remote_ip"] != "flow" and r.random() < 0.8 else r.choice(TUN_SRCS)
                p += ["tun_src=%s" % src, "tun_dst=172.31.1.100"]
        key = o.get("key", o.get("in_key", "0"))
        p.append("tun_id=%s" % (key if key != "flow" and r.random() < 0.8 else str(r.choice(VALS))))
        if r.random() < 0.3:
            p.append("tun_flags=%s" % r.choice(["oam", "0"]))
        if r.random() < 0.4:
            p.append("tun_tos=%d" % r.choice([0, 4, 16, 3]))
        if r.random() < 0.4:
            p.append("tun_ttl=%d" % r.choice([1, 64]))
        if kind == "vxlan" and r.random() < 0.2:
            p += ["tun_gbp_id=%d" % r.choice([7, 100]), "tun_gbp_flags=%d" % r.choice([0, 1])]
        if kind == "geneve":
            for i in r.sample(range(8), r.choice([0, 1, 1, 2])):
                p.append("tun_metadata%d=0x%x" % (i, r.choice(MD_VALS)))
    proto = r.choice(["tcp", "udp", "icmp", "ip", "arp", "tcp6"])
    p.append(proto)
    if proto in ("tcp", "udp", "icmp", "ip"):
        p += ["nw_src=10.0.0.1", "nw_dst=10.0.0.%d" % r.randint(1, 3), "nw_ttl=%d" % r.choice([64, 64, 7]), "nw_tos=%d" % r.choice([0, 16, 184]), "nw_ecn=%d" % r.randrange(4)]
    if proto in ("tcp", "udp"):
        pre = "tp" if proto == "tcp" else "udp"
        p += [pre + "_src=1234", pre + "_dst=%d" % r.choice([80, 22])]
    if proto == "tcp6":
        p += ["ipv6_src=2001:db8::1", "ipv6_dst=2001:db8::2", "nw_ttl=64", "nw_ecn=%d" % r.randrange(4), "tp_dst=80"]
    if proto == "arp":
        p += ["arp_op=1", "arp_spa=10.0.0.1", "arp_tpa=10.0.0.2"]
    return ",".join(p)


def rnd_underlay_packet(r):
    """A tunnel packet received on the underlay for the endpoint (OVS:
    on br-phy's phy0, OpenFlow port 1): VXLAN or Geneve over IPv4 or IPv6,
    or GRE."""
    kind = r.choice(["vxlan", "geneve", "gre", "vxlan6", "geneve6"])
    p = ["in_port=1", "dl_src=aa:55:aa:55:00:0%d" % r.randint(1, 4), "dl_dst=" + UNDERLAY_MAC]
    if kind.endswith("6"):
        p += ["udp6", "ipv6_src=%s" % r.choice(TUN6[:2]), "ipv6_dst=fd00::100", "nw_ttl=64"]
    elif kind == "gre":
        p += ["ip", "nw_proto=47", "nw_src=%s" % r.choice(TUN_SRCS), "nw_dst=172.31.1.100", "nw_ttl=64"]
    else:
        p += ["udp", "nw_src=%s" % r.choice(TUN_SRCS), "nw_dst=172.31.1.100", "nw_ttl=64", "nw_tos=%d" % r.choice([0, 16])]
    if kind != "gre":
        p += ["udp_src=%d" % r.choice([1234, 49152, 60000]), "udp_dst=%d" % (4789 if kind.startswith("vxlan") else 6081)]
    return ",".join(p)


def ce_marked(pkt):
    """A packet in on a tunnel whose outer ToS says congestion (ECN CE)
    with ECN-capable insides: OVS marks it CE (tnl_process_ecn), a rewrite
    of its ECN bits that makes nw_proto significant in flowpath's megaflow
    (a documented narrowing: OVS 3.1's megaflow also covers packets with
    nw_proto 0, which get no rewrite; see nw_proto_narrowing)."""
    tos = re.search(r"(?:^|,)tun_tos=(\d+)", pkt)
    ecn = re.search(r"(?:^|,)nw_ecn=(\d+)", pkt)
    return bool(tos and int(tos.group(1)) & 3 == 3 and ecn and int(ecn.group(1)))


def tunnels_main(a, r, rec, h):
    """--tunnels. `h` holds ovs-compare.py's helpers (ovs_trace,
    split_top, load_rules, write_packets, DP2OF, CTL, VSCTL)."""
    dp, tnl = setup_ovs(h.CTL, h.VSCTL)
    targs = flowpath_args()
    diffs = mfd = total = sets = pushes = pops = 0
    for rs in range(a.rulesets):
        rules = rnd_tun_rules(r)
        rf, res = h.load_rules(rules)
        if res.returncode:
            print("OVS rejected rule set", rs, res.stderr, open(rf).read())
            continue
        back = any(re.search(r"(^|[,(])in_port($|[,)])", x.split("actions=", 1)[1]) for x in rules)
        pkts = [rnd_tun_packet(r, back) for _ in range(a.packets)]
        # Tunnel packets arriving on the underlay (flowpath: its datapath
        # port; OVS: br-phy's phy0), decapsulated (tnl_pop).
        under = [rnd_underlay_packet(r) for _ in range(a.underlay_packets)]
        pkts += [u.replace("in_port=1,", "in_port=%d," % UNDERLAY_PORT, 1) for u in under]
        pf = h.write_packets(pkts)
        ours = h.flowpath_trace(a, rf, pf, targs)
        if ours is None:
            continue
        sets += 1
        grouped = []
        for i, (pkt, mine) in enumerate(zip(pkts, ours)):
            total += 1
            on_underlay = i >= len(pkts) - len(under)
            ovs_pkt = under[i - len(pkts) + len(under)] if on_underlay else pkt
            out = subprocess.run(["ovs-appctl"] + h.CTL + ["ofproto/trace", "br-phy" if on_underlay else "br0", ovs_pkt], capture_output=True, text=True)
            o = out.stdout + out.stderr
            mfm = re.search(r"^Megaflow: (.*)$", o, re.M)
            dam = re.search(r"^Datapath actions: (.*)$", o, re.M)
            if not mfm or not dam:
                print("OVS could not trace", pkt, o[:300])
                continue
            mf, da = mfm.group(1), map_actions(dam.group(1), dp, tnl, h.split_top, h.DP2OF)
            if on_underlay:
                mf = mf.replace(",in_port=1,", ",in_port=%d," % UNDERLAY_PORT, 1)
                pops += da.count("tnl_pop(")
            pushes += da.count("tnl_push(")
            grouped.append({"packet": pkt, "megaflow": mf, "actions": da})
            if da != mine["actions"]:
                diffs += 1
                print("ACTIONS DIFFER\n  rules: %s\n  packet: %s\n  ovs:  %s\n  ours: %s" % ("\n         ".join(rules), pkt, da, mine["actions"]))
            elif mf != mine["megaflow"] and not (ce_marked(pkt) and h.nw_proto_narrowing("move:", mf, mine["megaflow"])):
                mfd += 1
                print("MEGAFLOW DIFFERS\n  rules: %s\n  packet: %s\n  actions: %s\n  ovs:  %s\n  ours: %s" % ("\n         ".join(rules), pkt, da, mf, mine["megaflow"]))
        if rec and grouped:
            rec.write(json.dumps({"rules": rules, "tunnel_args": targs, "traces": grouped}, separators=(",", ":")) + "\n")
        os.unlink(rf)
        os.unlink(pf)
    print("TUNNELS: rule sets %d (loaded %d), packets %d (tnl_push actions %d, tnl_pop %d), action diffs %d, megaflow diffs %d" % (a.rulesets, sets, total, pushes, pops, diffs, mfd))
