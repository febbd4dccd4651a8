#!/usr/bin/env python3
"""Differential check of `flowpath trace` against a running OVS 3.1.

Developer tool, not part of CI: needs ovs-vswitchd running with a netdev
bridge br0 (fail_mode=secure) whose dummy ports p1..pN have OpenFlow port
numbers 1..N and datapath port numbers 2..N+1 (created in that order after
the bridge). Usage:

  tools/ovs-compare.py --ctl /path/ovs-vswitchd.PID.ctl --rundir DIR \
      [--seed S] [--rulesets N] [--packets M] [--flowpath target/debug/flowpath]

Generates random rule sets and packets, traces each packet with both, and
prints every difference in datapath actions, plus megaflows where OVS's is
wider than ours (ours must never be narrower) or they differ at all.
"""
import argparse, json, os, random, re, subprocess, sys, tempfile

def rnd_ip(r):
    return "%d.%d.%d.%d" % (r.choice([7, 10, 192]), r.randrange(4), r.randrange(4), r.randrange(256))

def rnd_match(r, table_count):
    parts = []
    proto = r.choice(["", "ip", "tcp", "udp", "tcp", "udp", "icmp", "arp", "ipv6", "tcp6"])
    if proto:
        parts.append(proto)
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
    if proto == "arp" and r.random() < 0.5:
        parts.append("arp_op=%d" % r.choice([1, 2]))
    if proto == "tcp6" and r.random() < 0.5:
        parts.append("ipv6_dst=2001:db8::%x/%d" % (r.randrange(16), r.choice([64, 120, 128])))
    return parts, proto

def rnd_actions(r, proto, table, ntables):
    acts = []
    for _ in range(r.randint(0, 3)):
        k = r.random()
        if k < 0.45:
            acts.append("output:%d" % r.randint(1, 4))
        elif k < 0.55 and table + 1 < ntables:
            acts.append("resubmit(,%d)" % r.randint(table + 1, ntables - 1))
        elif k < 0.62 and proto in ("ip", "tcp", "udp", "icmp"):
            acts.append("mod_nw_dst:%s" % rnd_ip(r))
        elif k < 0.68 and proto in ("tcp", "udp"):
            acts.append("mod_tp_dst:%d" % r.choice([80, 8080]))
        elif k < 0.72:
            acts.append("mod_dl_src:00:00:00:00:00:%02x" % r.randrange(256))
        elif k < 0.77 and proto in ("ip", "tcp", "udp", "icmp", "ipv6", "tcp6"):
            acts.append("dec_ttl")
        elif k < 0.82:
            acts.append("mod_vlan_vid:%d" % r.randint(1, 9))
        elif k < 0.86:
            acts.append("strip_vlan")
        elif k < 0.9 and proto in ("ip", "tcp", "udp", "icmp"):
            acts.append("mod_nw_tos:%d" % (r.randrange(8) * 4))
        elif k < 0.93:
            acts.append("in_port")
        elif k < 0.95 and proto in ("ip", "tcp", "udp", "icmp"):
            acts.append("set_field:%s->nw_src" % rnd_ip(r))
        elif k < 0.96 and proto in ("tcp", "udp", "tcp6"):
            acts.append("set_field:%d->tp_src" % r.choice([1, 5000]))
        elif k < 0.97:
            acts.append("mod_vlan_pcp:%d" % r.randint(0, 7))
        elif k < 0.98 and proto in ("ipv6", "tcp6"):
            acts.append("set_field:2001:db8::99->ipv6_src")
        else:
            acts.append("push_vlan:0x8100")
    if table + 1 < ntables and r.random() < 0.15:
        acts.append("goto_table:%d" % (table + 1))
    if r.random() < 0.1:
        acts = ["drop"]
    return ",".join(acts) if acts else "drop"

def rnd_packet(r):
    proto = r.choice(["tcp", "udp", "icmp", "arp", "tcp6", "ip"])
    p = ["in_port=%d" % r.randint(1, 4)]
    if r.random() < 0.2:
        p.append("dl_vlan=%d" % r.randint(1, 3))
    p.append(proto)
    if proto in ("tcp", "udp", "icmp", "ip"):
        p += ["nw_src=%s" % rnd_ip(r), "nw_dst=%s" % rnd_ip(r), "nw_ttl=%d" % r.choice([1, 64]), "nw_tos=%d" % (r.randrange(4) * 4)]
    if proto in ("tcp", "udp"):
        pre = "tp" if proto == "tcp" else "udp"
        p += [pre + "_src=%d" % r.choice([22, 80, 90, 1024, r.randrange(65536)]), pre + "_dst=%d" % r.choice([22, 80, 90, 443, 5900, r.randrange(65536)])]
    if proto == "icmp":
        p.append("icmp_type=%d" % r.choice([0, 8, 3]))
    if proto == "arp":
        p += ["arp_op=%d" % r.choice([1, 2]), "arp_spa=%s" % rnd_ip(r), "arp_tpa=%s" % rnd_ip(r)]
    if proto == "tcp6":
        p += ["ipv6_src=2001:db8::1", "ipv6_dst=2001:db8::%x" % r.randrange(16), "nw_ttl=64", "tp_dst=%d" % r.choice([80, 90, 443])]
    return ",".join(p)

def map_ovs_actions(s):
    # OVS datapath port d is OpenFlow port d-1 (bridge created before ports).
    out, depth, tok = [], 0, ""
    for ch in s + ",":
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(str(int(tok) - 1) if tok.isdigit() else tok)
            tok = ""
        else:
            tok += ch
    return ",".join(out)

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ctl", required=True)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--rulesets", type=int, default=20)
    ap.add_argument("--packets", type=int, default=30)
    ap.add_argument("--flowpath", default="target/debug/flowpath")
    ap.add_argument("--record", help="append OVS's answers (rules, packet, megaflow, actions) as JSON lines to this file")
    a = ap.parse_args()
    r = random.Random(a.seed)
    rec = open(a.record, "a") if a.record else None
    diffs = narrower = wider = total = 0
    for rs in range(a.rulesets):
        ntables = r.randint(1, 3)
        rules = []
        for t in range(ntables):
            for _ in range(r.randint(1, 8)):
                parts, proto = rnd_match(r, ntables)
                prio = r.randint(0, 65535)
                rules.append("table=%d,priority=%d,%s%sactions=%s" % (t, prio, ",".join(parts), "," if parts else "", rnd_actions(r, proto, t, ntables)))
        with tempfile.NamedTemporaryFile("w", suffix=".flows", delete=False) as f:
            f.write("\n".join(rules) + "\n")
            rf = f.name
        subprocess.run(["ovs-ofctl", "del-flows", "br0"], check=True)
        res = subprocess.run(["ovs-ofctl", "add-flows", "br0", rf], capture_output=True, text=True)
        if res.returncode:
            if "mod_vlan" in open(rf).read():
                # OpenFlow 1.1+ encodes mod_vlan_vid with different semantics.
                continue
            res = subprocess.run(["ovs-ofctl", "-O", "OpenFlow13", "add-flows", "br0", rf], capture_output=True, text=True)
        if res.returncode:
            print("OVS rejected rule set", rs, res.stderr, open(rf).read())
            continue
        pkts = [rnd_packet(r) for _ in range(a.packets)]
        with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
            f.write("\n".join(pkts) + "\n")
            pf = f.name
        fp = subprocess.run([a.flowpath, "trace", "--rules", rf, "--packets", pf, "--json", "--ports", "1,2,3,4"], capture_output=True, text=True)
        if fp.returncode:
            print("flowpath failed:", fp.stderr, open(rf).read())
            continue
        ours = [json.loads(l) for l in fp.stdout.splitlines()]
        for pkt, mine in zip(pkts, ours):
            total += 1
            oo = subprocess.run(["ovs-appctl", "-t", a.ctl, "ofproto/trace", "br0", pkt], capture_output=True, text=True)
            o = oo.stdout + oo.stderr
            mfm = re.search(r"^Megaflow: (.*)$", o, re.M)
            if not mfm:
                print("OVS could not trace", pkt, o[:300])
                continue
            mf = mfm.group(1)
            da = re.sub(r"userspace\(pid=0,controller\([^)]*\)\)", "userspace(controller)", re.search(r"^Datapath actions: (.*)$", o, re.M).group(1))
            da = map_ovs_actions(da) if False else map_ovs_actions(da)
            if "in_port" in rf and False:
                pass
            if rec and "OpenFlow13" not in " ".join(res.args):
                rec.write(json.dumps({"rules": rules, "packet": pkt, "megaflow": mf, "actions": da}) + "\n")
            if da != mine["actions"]:
                diffs += 1
                print("ACTIONS DIFFER\n  rules: %s\n  packet: %s\n  ovs:  %s\n  ours: %s" % (open(rf).read().strip().replace("\n", "\n         "), pkt, da, mine["actions"]))
            elif mf != mine["megaflow"]:
                print("MEGAFLOW DIFFERS\n  rules: %s\n  packet: %s\n  ovs:  %s\n  ours: %s" % (open(rf).read().strip().replace("\n", "\n         "), pkt, mf, mine["megaflow"]))
                wider += 1
        os.unlink(rf); os.unlink(pf)
    print("packets %d, action diffs %d, megaflow diffs %d" % (total, diffs, wider))

main()
