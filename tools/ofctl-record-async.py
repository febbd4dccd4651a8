#!/usr/bin/env python3
"""Records how Open vSwitch 3.1 answers `ovs-ofctl --bundle` command
sequences and what `ovs-ofctl monitor br0 65534 watch:` prints while flows
are added, modified, deleted and expire, as golden data for flowpath's
test crates/cli/tests/openflow_async.rs.

  tools/ovs-sandbox.sh start 4 /tmp/ovs-sb
  OVS_RUNDIR=/tmp/ovs-sb tools/ofctl-record-async.py > crates/cli/tests/data/ofctl-async-ovs31.jsonl

Records, one JSON object per line:
- {"scenario": NAME, "version": V, "mm": FLOWS, "mm2": FLOWS, "steps": [...]}:
  as tools/ofctl-record.py (each step: cmd, ok, error, out); `@mm` and
  `@mm2` name files holding FLOWS;
- {"monitor": V, "cmds": [[...], ...], "wait": S, "lines": [...]}: the
  monitor's output lines (durations and xids replaced) while the commands
  ran and S seconds after;
- {"port_monitor": V, "cmds": [[...], ...], "lines": [...]}: the
  PORT_STATUS messages a monitor printed while another connection ran
  the port changes (message, reason and port number, config and state).
"""
import importlib.util, json, os, re, subprocess, tempfile, time

VERSIONS = ["OpenFlow10", "OpenFlow13", "OpenFlow14", "OpenFlow15"]

MM = ("cookie=0x1,priority=10,tcp,tp_dst=80,actions=output:1\n"
      "cookie=0x2,priority=10,udp,actions=output:2\n"
      "cookie=0x3,table=1,priority=5,ip,actions=output:2\n"
      "priority=1,actions=drop\n")
# A good flow, then one that fails (an unknown group): a bundle adds neither.
MM2 = ("priority=20,icmp,actions=output:3\n"
       "priority=21,arp,actions=group:99\n")

SCENARIOS = {
    "bundle": [
        ["del-flows", "br0"],
        ["--bundle", "add-flows", "br0", "@mm"], ["dump-flows", "--no-stats", "br0"],
        ["--bundle", "add-flows", "br0", "@mm2"], ["dump-flows", "--no-stats", "br0"],
        ["--bundle", "add-flow", "br0", "priority=7,ip,actions=group:99"],
        ["--bundle", "mod-flows", "br0", "ip,actions=output:4"], ["dump-flows", "--no-stats", "br0"],
        ["--bundle", "del-flows", "br0", "udp"], ["dump-flows", "--no-stats", "br0"],
        ["--bundle", "replace-flows", "br0", "@mm"], ["dump-flows", "--no-stats", "br0"],
        ["--bundle", "diff-flows", "br0", "@mm"],
        ["--bundle", "del-flows", "br0"], ["dump-flows", "--no-stats", "br0"],
    ],
}

MONITOR_CMDS = [
    ["add-flow", "br0", "priority=3,ip,actions=output:2"],
    ["@monitor"],
    ["add-flow", "br0", "hard_timeout=2,send_flow_rem,priority=9,tcp,tp_dst=81,actions=drop"],
    ["add-flow", "br0", "send_flow_rem,priority=9,tcp,tp_dst=82,actions=drop"],
    ["add-flow", "br0", "priority=9,tcp,tp_dst=83,actions=drop"],
    ["mod-flows", "br0", "tcp,tp_dst=82,actions=output:1"],
    ["del-flows", "br0", "tcp,tp_dst=82"],
    ["del-flows", "br0", "tcp,tp_dst=83"],
]
MONITOR_WAIT = 4

# Packet-ins as NXT_PACKET_IN2 (ovs-ofctl monitor asks for them): with
# controller userdata, and a paused translation's continuation.
PKT = ("ffffffffffff0000000000010800450000280000000040110000c0a80001c0a80002"
       "0035003500140000000000000000000000000000")
PIN_CMDS = [
    ["add-flow", "br0", "table=5,actions=load:7->NXM_NX_REG3[],controller(pause),output:2"],
    ["@monitor"],
    ["packet-out", "br0", f"in_port=1 packet={PKT} actions=controller(userdata=01.02.03),"
                          "load:5->NXM_NX_REG1[],resubmit(,5),output:3"],
]
PIN_WAIT = 1

# Port changes another connection makes, as `ovs-ofctl monitor br0 watch:`
# prints their PORT_STATUS messages (a second "noflood" changes nothing).
PORT_CMDS = [
    ["mod-port", "br0", "2", "down"], ["mod-port", "br0", "2", "noflood"],
    ["mod-port", "br0", "2", "noflood"], ["mod-port", "br0", "2", "up"],
    ["mod-port", "br0", "2", "flood"], ["mod-port", "br0", "3", "noforward"],
    ["mod-port", "br0", "3", "forward"],
]

# ovs-ofctl runs and output normalisation as tools/ofctl-record.py.
_spec = importlib.util.spec_from_file_location(
    "ofctl_record", os.path.join(os.path.dirname(os.path.abspath(__file__)), "ofctl-record.py"))
_base = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_base)
ofctl = _base.ofctl


def norm(cmd, out):
    return _base.norm([a for a in cmd if not a.startswith("--")], out)


def norm_monitor(out):
    """Monitor lines without durations and xids (they differ run to run)."""
    lines = []
    for l in out.splitlines():
        if not l.strip() or "fatal_signal" in l:
            continue
        l = re.sub(r"duration[0-9.]+s", "duration?", l)
        l = re.sub(r"\(xid=0x[0-9a-f]+\)", "(xid=?)", l)
        l = re.sub(r"continuation.bridge=[0-9a-f-]+", "continuation.bridge=?", l)
        lines.append(l.rstrip())
    return lines


def monitor(version, cmds=MONITOR_CMDS, wait=MONITOR_WAIT):
    """Runs the monitor commands with `ovs-ofctl monitor` watching; returns
    its normalised output."""
    ofctl(version, ["del-flows", "br0"])
    proc = None
    for cmd in cmds:
        if cmd == ["@monitor"]:
            log = tempfile.TemporaryFile(mode="w+")
            proc = subprocess.Popen(
                ["ovs-ofctl", "-O", version, "monitor", "br0", "65534", "watch:"],
                stdout=log, stderr=subprocess.STDOUT, text=True)
            time.sleep(0.5)
            continue
        ofctl(version, cmd)
        # One command at a time through the monitor (the order of updates
        # across connections is then fixed).
        time.sleep(0.2)
    time.sleep(wait)
    proc.terminate()
    proc.wait(timeout=5)
    log.seek(0)
    return norm_monitor(log.read())


def norm_port_status(out):
    """PORT_STATUS lines: the message and port number, config and state
    (names, addresses and speeds differ between switches)."""
    lines = []
    for l in out.splitlines():
        m = re.match(r"^(OFPT_PORT_STATUS.*?) \(xid=0x[0-9a-f]+\): (\w+): (\d+)\(", l)
        if m:
            lines.append(" ".join(m.groups()))
        elif l.strip().split(":")[0] in ("config", "state"):
            lines.append(l.strip())
    return lines


def port_monitor(version):
    """Runs PORT_CMDS with a monitor watching; its PORT_STATUS lines."""
    log = tempfile.TemporaryFile(mode="w+")
    proc = subprocess.Popen(
        ["ovs-ofctl", "-O", version, "monitor", "br0", "65534", "watch:"],
        stdout=log, stderr=subprocess.STDOUT, text=True)
    time.sleep(0.5)
    for cmd in PORT_CMDS:
        ofctl(version, cmd)
        time.sleep(0.2)
    time.sleep(0.5)
    proc.terminate()
    proc.wait(timeout=5)
    log.seek(0)
    return norm_port_status(log.read())


def main():
    tmp = tempfile.mkdtemp()
    files = {"@mm": MM, "@mm2": MM2}
    paths = {}
    for k, text in files.items():
        paths[k] = os.path.join(tmp, k[1:] + ".flows")
        open(paths[k], "w").write(text)
    for sname, steps in SCENARIOS.items():
        for v in VERSIONS:
            rec = []
            for cmd in steps:
                args = [paths.get(a, a) for a in cmd]
                ok, err, out = ofctl(v, args)
                rec.append({"cmd": cmd, "ok": ok, "error": err, "out": norm(cmd, out)})
            print(json.dumps({"scenario": sname, "version": v, "mm": MM, "mm2": MM2,
                              "steps": rec}))
    for v in ["OpenFlow10", "OpenFlow13", "OpenFlow15"]:
        print(json.dumps({"monitor": v, "cmds": MONITOR_CMDS, "wait": MONITOR_WAIT,
                          "lines": monitor(v)}))
    for v in ["OpenFlow10", "OpenFlow13", "OpenFlow15"]:
        print(json.dumps({"monitor": v, "cmds": PIN_CMDS, "wait": PIN_WAIT,
                          "lines": monitor(v, PIN_CMDS, PIN_WAIT)}))
    for v in VERSIONS:
        print(json.dumps({"port_monitor": v, "cmds": PORT_CMDS, "lines": port_monitor(v)}))


if __name__ == "__main__":
    main()
