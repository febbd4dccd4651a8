#!/usr/bin/env python3
"""Records how Open vSwitch 3.1 answers `ovs-ofctl` command sequences, as
golden data for flowpath's OpenFlow channel test
(crates/cli/tests/openflow_ofctl.rs replays them against `flowpath switch`).

  tools/ovs-sandbox.sh start 4 /tmp/ovs-sb
  OVS_RUNDIR=/tmp/ovs-sb tools/ofctl-record.py > crates/cli/tests/data/ofctl-ovs31.jsonl

Two kinds of records, one JSON object per line:
- {"set": "FILE:LINE", "version": V, "ok": bool, "error": NAME, "dump": [...]}:
  a golden rule set of crates/ofproto/tests/data (the same selection as
  the test: PER_FILE sets per file without groups or learn), deleted,
  added with `add-flows`, dumped with `dump-flows --no-stats` (sorted);
- {"scenario": NAME, "version": V, "steps": [{"cmd": [...], "ok": bool,
  "error": NAME, "out": [...]}]}: a command sequence (modify, delete,
  cookies, out_port, strict, overlap, replace/diff).
"""
import json, os, re, subprocess, sys, tempfile

DATA = os.path.join(os.path.dirname(__file__), "..", "crates", "ofproto", "tests", "data")
PER_FILE = 8
VERSIONS = ["OpenFlow10", "OpenFlow13", "OpenFlow15"]

MM = ("cookie=0x1,priority=10,tcp,tp_dst=80,actions=output:1\n"
      "cookie=0x2,priority=10,udp,actions=output:2\n"
      "cookie=0x3,table=1,priority=5,ip,actions=output:2\n"
      "priority=1,actions=drop\n")

SCENARIOS = {
    "modify-delete": [
        ["del-flows", "br0"], ["add-flows", "br0", "@mm"], ["dump-flows", "--no-stats", "br0"],
        ["mod-flows", "br0", "ip,actions=output:3"], ["dump-flows", "--no-stats", "br0"],
        ["del-flows", "br0", "cookie=0x2/-1"], ["dump-flows", "--no-stats", "br0"],
        ["mod-flows", "--strict", "br0", "priority=1,actions=output:4"], ["dump-flows", "--no-stats", "br0"],
        ["del-flows", "br0", "out_port=4"], ["dump-flows", "--no-stats", "br0"],
        ["del-flows", "--strict", "br0", "tcp,tp_dst=80"], ["dump-flows", "--no-stats", "br0"],
        ["del-flows", "--strict", "br0", "priority=10,tcp,tp_dst=80"], ["dump-flows", "--no-stats", "br0"],
        ["dump-aggregate", "br0"],
        ["add-flows", "br0", "@mm"],
        ["mod-flows", "br0", "cookie=0x3/-1,actions=drop"], ["dump-flows", "--no-stats", "br0"],
        ["del-flows", "br0", "table=1"], ["dump-flows", "--no-stats", "br0"],
        ["dump-flows", "--no-stats", "br0", "udp"],
        ["dump-flows", "--no-stats", "br0", "table=0,ip"],
        ["dump-aggregate", "br0", "ip"],
    ],
    "add-semantics": [
        ["del-flows", "br0"], ["add-flows", "br0", "@mm"],
        ["add-flow", "br0", "check_overlap,priority=10,tcp,actions=drop"],
        ["add-flow", "br0", "check_overlap,priority=11,tcp,actions=drop"],
        ["add-flow", "br0", "cookie=0x9,priority=10,tcp,tp_dst=80,actions=output:2"],
        ["dump-flows", "--no-stats", "br0"],
        ["add-flow", "br0", "idle_timeout=50,hard_timeout=60,send_flow_rem,priority=3,in_port=1,actions=drop"],
        ["dump-flows", "--no-stats", "br0", "in_port=1"],
        ["mod-flows", "br0", "in_port=2,actions=output:1"], ["dump-flows", "--no-stats", "br0", "in_port=2"],
        ["replace-flows", "br0", "@mm"], ["diff-flows", "br0", "@mm"], ["dump-flows", "--no-stats", "br0"],
        ["add-flow", "br0", "ip,actions=set_field:1->tcp_dst"],
        ["add-flow", "br0", "table=3,actions=goto_table:2"],
        ["add-flow", "br0", "actions=group:7"],
        ["dump-flows", "--no-stats", "br0"],
    ],
    "tables": [
        ["del-flows", "br0"], ["add-flows", "br0", "@mm"],
        ["dump-tables", "br0"],
        ["get-frags", "br0"], ["set-frags", "br0", "drop"], ["get-frags", "br0"],
        ["set-frags", "br0", "nx-match"], ["get-frags", "br0"], ["set-frags", "br0", "normal"],
    ],
}

ERR = re.compile(r"\b((?!OFPT_)OFP[A-Z]+_[A-Z_]+|NX[A-Z]+_[A-Z_]+)\b")


def ofctl(version, args):
    p = subprocess.run(["ovs-ofctl", "-O", version] + args, capture_output=True, text=True)
    m = ERR.findall(p.stderr)
    return p.returncode == 0, (m[0] if m else ""), p.stdout


def norm(cmd, out):
    lines = [l.rstrip() for l in out.splitlines() if l.strip()]
    if cmd[0] in ("dump-flows", "diff-flows"):
        return sorted(l.strip() for l in lines if "reply" not in l)
    return [re.sub(r" \(xid=0x[0-9a-f]+\)", "", l) for l in lines]


def rule_sets():
    names = sorted(n for n in os.listdir(DATA) if n.startswith("ovs31-") and n.endswith(".jsonl"))
    for n in names:
        k = 0
        for i, line in enumerate(open(os.path.join(DATA, n))):
            v = json.loads(line)
            rules = v["rules"]
            if v.get("groups") or any("learn(" in r or "group:" in r for r in rules):
                continue
            yield f"{n}:{i + 1}", rules
            k += 1
            if k == PER_FILE:
                break


def main():
    tmp = tempfile.mkdtemp()
    mm = os.path.join(tmp, "mm.flows")
    open(mm, "w").write(MM)
    f = os.path.join(tmp, "set.flows")
    for name, rules in rule_sets():
        open(f, "w").write("\n".join(rules) + "\n")
        for v in VERSIONS:
            ok, _, _ = ofctl(v, ["parse-flows", f])
            if not ok:
                continue
            ofctl(v, ["del-flows", "br0"])
            ok, err, _ = ofctl(v, ["add-flows", "br0", f])
            dump = []
            if ok:
                _, _, out = ofctl(v, ["dump-flows", "--no-stats", "br0"])
                dump = norm(["dump-flows"], out)
            print(json.dumps({"set": name, "version": v, "ok": ok, "error": err, "dump": dump}))
    for sname, steps in SCENARIOS.items():
        for v in VERSIONS:
            rec = []
            for cmd in steps:
                args = [mm if a == "@mm" else a for a in cmd]
                ok, err, out = ofctl(v, args)
                rec.append({"cmd": cmd, "ok": ok, "error": err, "out": norm(cmd, out)})
            print(json.dumps({"scenario": sname, "version": v, "mm": MM, "steps": rec}))


if __name__ == "__main__":
    main()
