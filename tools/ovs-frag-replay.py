#!/usr/bin/env python3
"""Records what Open vSwitch 3.1's userspace datapath forwards of a capture
of IP fragments under each fragment handling mode, for the replay test
(crates/cli/tests/frag_replay.rs). Developer tool, not part of CI.

  tools/ovs-sandbox.sh start 4
  OVS_RUNDIR=/tmp/ovs-sandbox tools/ovs-frag-replay.py \\
      crates/cli/tests/data/fragments.pcap crates/cli/tests/data/fragments.flows \\
      > crates/cli/tests/data/fragments-ovs31.json

For each mode (ovs-ofctl set-frags), the rules are loaded into br0, every
frame of the capture is received on p1 (netdev-dummy/receive, the
datapath's flows purged first) and what ports p2..p4 send is read back
from their tx_pcap files: {"mode": {"port": [frame hex, ...]}}.
"""
import json, os, struct, subprocess, sys, tempfile, time

def frames(path):
    d = open(path, "rb").read()
    out, o = [], 24
    while o + 16 <= len(d):
        n = struct.unpack("<I", d[o + 8:o + 12])[0]
        out.append(d[o + 16:o + 16 + n])
        o += 16 + n
    return out

run = lambda *a: subprocess.run(list(a), check=True, capture_output=True, text=True).stdout
vsctl = ["ovs-vsctl", "--db=unix:%s/db.sock" % os.environ.get("OVS_RUNDIR", "/tmp/ovs-sandbox")]
pcap, rules = sys.argv[1], sys.argv[2]
tmp = tempfile.mkdtemp()
result = {}
for mode in ("normal", "drop", "nx-match"):
    run("ovs-ofctl", "set-frags", "br0", mode)
    run("ovs-ofctl", "del-flows", "br0")
    run("ovs-ofctl", "add-flows", "br0", rules)
    outs = {}
    for p in (2, 3, 4):
        outs[p] = os.path.join(tmp, "%s-p%d.pcap" % (mode, p))
        run(*vsctl, "set", "interface", "p%d" % p, "options:tx_pcap=%s" % outs[p])
    run("ovs-appctl", "revalidator/purge")
    time.sleep(0.5)
    for f in frames(pcap):
        run("ovs-appctl", "netdev-dummy/receive", "p1", f.hex())
    time.sleep(0.5)
    for p in (2, 3, 4):
        run(*vsctl, "remove", "interface", "p%d" % p, "options", "tx_pcap")
    time.sleep(0.5)
    result[mode] = {str(p): [f.hex() for f in frames(outs[p])] for p in (2, 3, 4) if os.path.exists(outs[p])}
run("ovs-ofctl", "set-frags", "br0", "normal")
run("ovs-ofctl", "del-flows", "br0")
print(json.dumps(result, indent=1, sort_keys=True))
