#!/usr/bin/env python3
"""Connection-tracking verdicts of flowpath against Open vSwitch 3.1's
userspace conntrack, capture by capture (developer tool, not part of CI).

  OVS_RUNDIR=/tmp/ctv-sandbox tools/ct-verdicts.py --fix-checksums \\
      [--pcaps ../shared/pcaps] [--flowpath target/debug/flowpath] \\
      [--record crates/cli/tests/data/ct-verdicts-ovs31.jsonl] [--only NAME]
  tools/ovs-sandbox.sh stop /tmp/ctv-sandbox

The tool starts (and, after a crash, restarts) its own sandbox with
tools/ovs-sandbox.sh (5 ports) in $OVS_RUNDIR; stop it afterwards.

Rules: both switches get the same (--rules, by default
crates/cli/tests/data/ct-verdicts.flows): every IPv4 and IPv6 packet goes
through ct(table=1), and table 1 sends each verdict to its own port,
+inv to 4, +rel to 3 (committed), +new to 1 (committed), +est to 2 (the
table-1 rules match ip/ipv6 again: OVS requires it for ct(commit)). The
capture arrives on port 5, which is no output, so OVS never skips an
output to the input port.

Captures: the corpus's Ethernet captures with TCP, UDP or ICMP (v4 or
v6); "two-way" marks those in which some conversation (the same
addresses and ports, reversed) goes both ways. Each capture is first
normalised by flowpath itself (`flowpath run` with one rule sending
everything to one port writes exactly the frames it read), so OVS
receives the very frames flowpath reads.

OVS: for each capture the rules are replaced (flow counters zeroed), the
tracker flushed (dpctl/flush-conntrack) and the datapath flows purged.
Frames are received on p5 one per netdev-dummy/receive call (JSON-RPC on
the unixctl socket, no process per frame): several frames in one call
would be one receive batch, which OVS processes flow batch by flow
batch, not in capture order. They wait in p5's queue, which the main
loop polls one frame per iteration and which silently drops frames
beyond 100, so the tool lets at most 50 wait, and waits for all before
reading any counter, watching p5's RX packets (dpctl/show -s). The
verdict counts are the ports' tx_packets deltas (ovs-ofctl dump-ports;
the ports' MTU is raised to 65535, as a dummy port does not send a frame
longer than its MTU); the table-1 rules' n_packets are shown beside them
where they differ. OVS parses two VLAN tags (other_config:vlan-limit=0)
as flowpath does; with OVS's default of one, double-tagged frames never
reach ct there. A capture that makes ovs-vswitchd fail or die is
skipped, and named (the sandbox restarted).

flowpath: `flowpath run --batch 1 --in-port 5 --json`, packets per output
port (packet by packet, as OVS here: see `flowpath run --help`), on a
copy of the capture whose timestamps are all 0.

Time: OVS replays a capture in real time (well under 30 s each), while
`flowpath run` follows the capture's clock, so a capture with gaps
longer than a timeout would expire connections in flowpath only. The
flowpath copy therefore has one timestamp, and nothing expires on either
side. OVS's clock cannot follow the capture's instead: in 3.1, outside
its test suite, time/stop left the main thread hung after a few packets
and time/warp on a running clock livelocked its threads on the clock's
mutex.

Output: one line per capture (counts and whether they agree) and a
summary; --record writes OVS's counts as JSON lines
{"pcap": NAME, "counts": {"new": N, "est": N, "rel": N, "inv": N},
"two_way": BOOL} for crates/cli/tests/ct_verdicts.rs. --fix-checksums
also runs every capture with its IPv4 header and TCP/UDP/ICMP/ICMPv6
checksums recomputed (frames whose lengths allow it), to tell checksum
differences from the rest: where OVS's counts change, the record also
has "counts_fixed_checksums" (flowpath's datapath does not verify
checksums, so its counts on the capture as it is should be these).
"""
import argparse, glob, json, os, shutil, socket, struct, subprocess, sys, tempfile, time

RULES = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                     "../crates/cli/tests/data/ct-verdicts.flows")
VERDICT_PORT = {"new": 1, "est": 2, "rel": 3, "inv": 4}
IN_PORT = 5


# ---------------------------------------------------------------- captures

def read_pcap(path):
    """Frames and timestamps (ns) of a classic little-endian pcap as
    flowpath's PcapWriter writes it."""
    d = open(path, "rb").read()
    magic = struct.unpack("<I", d[:4])[0]
    nano = magic == 0xA1B23C4D
    out, o = [], 24
    while o + 16 <= len(d):
        sec, sub, n, _ = struct.unpack("<IIII", d[o:o + 16])
        ts = sec * 10**9 + (sub if nano else sub * 1000)
        out.append((ts, d[o + 16:o + 16 + n]))
        o += 16 + n
    return out


def l3(frame):
    """(ethertype, offset of L3) after up to two VLAN tags."""
    if len(frame) < 14:
        return None, None
    o, et = 12, struct.unpack(">H", frame[12:14])[0]
    for _ in range(2):
        if et in (0x8100, 0x88A8) and len(frame) >= o + 6:
            o += 4
            et = struct.unpack(">H", frame[o:o + 2])[0]
    return et, o + 2


def five_tuple(frame):
    """(src, dst, proto, sport, dport) of an unfragmented IPv4/IPv6
    TCP/UDP/ICMP/ICMPv6 packet, else None."""
    et, o = l3(frame)
    if et == 0x0800 and len(frame) >= o + 20:
        ihl = (frame[o] & 15) * 4
        if frame[o] >> 4 != 4 or ihl < 20:
            return None
        if struct.unpack(">H", frame[o + 6:o + 8])[0] & 0x3FFF:
            return None
        proto, src, dst, l4 = frame[o + 9], frame[o + 12:o + 16], frame[o + 16:o + 20], o + ihl
    elif et == 0x86DD and len(frame) >= o + 40:
        proto, src, dst, l4 = frame[o + 6], frame[o + 8:o + 24], frame[o + 24:o + 40], o + 40
    else:
        return None
    if proto in (6, 17) and len(frame) >= l4 + 4:
        sp, dp = struct.unpack(">HH", frame[l4:l4 + 4])
        return src, dst, proto, sp, dp
    if proto in (1, 58) and len(frame) >= l4 + 2:
        return src, dst, proto, 0, 0
    return None


def conversations(frames):
    """(whether any frame is TCP/UDP/ICMP, whether some conversation goes
    both ways: a 5-tuple and its reverse are both seen)."""
    seen = set()
    for _, f in frames:
        t = five_tuple(f)
        if t is not None:
            seen.add(t)
    both = any((d, s, p, dp, sp) in seen for (s, d, p, sp, dp) in seen if (s, sp) != (d, dp))
    return bool(seen), both


def csum(b):
    if len(b) % 2:
        b += b"\0"
    s = sum(struct.unpack(">%dH" % (len(b) // 2), b))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return (~s) & 0xFFFF


def fix_checksums(frame):
    """The frame with its IPv4 header checksum and TCP/UDP/ICMP/ICMPv6
    checksum recomputed, where the lengths are whole; else unchanged."""
    f = bytearray(frame)
    et, o = l3(f)
    if et == 0x0800 and len(f) >= o + 20 and f[o] >> 4 == 4:
        ihl = (f[o] & 15) * 4
        tot = struct.unpack(">H", f[o + 2:o + 4])[0]
        if ihl < 20 or tot < ihl or len(f) < o + tot:
            return frame
        f[o + 10:o + 12] = b"\0\0"
        f[o + 10:o + 12] = struct.pack(">H", csum(bytes(f[o:o + ihl])))
        if struct.unpack(">H", f[o + 6:o + 8])[0] & 0x3FFF:
            return bytes(f)
        proto, l4, end = f[o + 9], o + ihl, o + tot
        pseudo = bytes(f[o + 12:o + 20]) + struct.pack(">BBH", 0, proto, end - l4)
    elif et == 0x86DD and len(f) >= o + 40:
        plen = struct.unpack(">H", f[o + 4:o + 6])[0]
        proto, l4, end = f[o + 6], o + 40, o + 40 + plen
        if plen == 0 or len(f) < end:
            return frame
        pseudo = bytes(f[o + 8:o + 40]) + struct.pack(">IxxxB", end - l4, proto)
    else:
        return frame
    off = {6: 16, 17: 6, 1: 2, 58: 2}.get(proto)
    if off is None or end - l4 < off + 2:
        return bytes(f)
    if proto == 17 and et == 0x0800 and f[l4 + 6:l4 + 8] == b"\0\0":
        return bytes(f)  # IPv4 UDP without checksum
    f[l4 + off:l4 + off + 2] = b"\0\0"
    c = csum((b"" if proto == 1 else pseudo) + bytes(f[l4:end]))
    if proto == 17 and c == 0:
        c = 0xFFFF
    f[l4 + off:l4 + off + 2] = struct.pack(">H", c)
    return bytes(f)


def write_pcap(path, frames):
    with open(path, "wb") as w:
        w.write(struct.pack("<IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, 262144, 1))
        for ts, f in frames:
            w.write(struct.pack("<IIII", ts // 10**9, ts % 10**9, len(f), len(f)))
            w.write(f)


# --------------------------------------------------------------------- OVS

class Unixctl:
    """JSON-RPC on ovs-vswitchd's unixctl socket (what ovs-appctl does,
    without a process per call)."""

    def __init__(self, path):
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.s.connect(path)
        self.buf, self.id = b"", 0
        self.dec = json.JSONDecoder()

    def call(self, method, *params):
        self.id += 1
        self.s.sendall(json.dumps({"method": method, "params": list(params), "id": self.id}).encode())
        while True:
            try:
                msg, end = self.dec.raw_decode(self.buf.decode())
                self.buf = self.buf[end:].lstrip()
                if msg.get("id") == self.id:
                    if msg.get("error") is not None:
                        raise RuntimeError("%s: %s" % (method, msg["error"]))
                    return msg.get("result")
                continue
            except ValueError:
                pass
            chunk = self.s.recv(65536)
            if not chunk:
                raise RuntimeError("unixctl socket closed")
            self.buf += chunk


def sh(*a, **kw):
    return subprocess.run(list(a), check=True, capture_output=True, text=True, **kw).stdout


def port_packets(direction="tx"):
    """Packets each port sent (or received) so far: port -> count."""
    out, port = {}, None
    for line in sh("ovs-ofctl", "dump-ports", "br0").splitlines():
        line = line.strip()
        if line.startswith("port"):
            head, line = line.split(":", 1)
            p = head.split()[1]
            port = int(p) if p.isdigit() else None
            line = line.strip()
        if line.startswith(direction + " pkts=") and port is not None:
            out[port] = int(line.split("=")[1].split(",")[0])
    return out


def table1_packets():
    got = {}
    for line in sh("ovs-ofctl", "dump-flows", "br0", "table=1").splitlines():
        if "n_packets=" not in line:
            continue
        n = int(line.split("n_packets=")[1].split(",")[0])
        for v, p in VERDICT_PORT.items():
            if "output:%d" % p in line:
                got[v] = got.get(v, 0) + n
        if "actions=drop" in line:
            got["none"] = n
    return got


def start_ovs(rundir):
    """(Re)starts the sandbox; returns its unixctl connection. The ports'
    MTU is raised so that they send the corpus's large frames too."""
    sandbox = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ovs-sandbox.sh")
    sh(sandbox, "start", str(IN_PORT), rundir)
    vsctl = ["ovs-vsctl", "--db=unix:%s/db.sock" % rundir]
    # Two VLAN tags parsed, as flowpath does (OVS's default, vlan-limit=1,
    # leaves a double-tagged frame with dl_type 0x8100: no `ip` rule).
    sh(*vsctl, "set", "Open_vSwitch", ".", "other_config:vlan-limit=0")
    for p in list(VERDICT_PORT.values()) + [IN_PORT]:
        sh(*vsctl, "set", "interface", "p%d" % p, "mtu_request=65535")
    pid = open(os.path.join(rundir, "ovs-vswitchd.pid")).read().strip()
    ctl = Unixctl(os.path.join(rundir, "ovs-vswitchd.%s.ctl" % pid))
    for module in ("unixctl", "dpif_netdev", "vconn"):
        ctl.call("vlog/set", "%s:file:info" % module)
    return ctl


# A dummy port's receive queue holds 100 frames and drops what comes
# beyond (netdev_dummy_queue_packet); the main loop takes one frame per
# iteration. The tool lets at most this many wait.
QUEUE_STEP = 50


def p5_received(ctl):
    """Frames p5 has taken from its queue (dpctl/show -s: RX packets)."""
    port = None
    for line in ctl.call("dpctl/show", "-s").splitlines():
        line = line.strip()
        if line.startswith("port "):
            port = line.split()[2]
        elif line.startswith("RX packets:") and port == "p%d" % IN_PORT:
            return int(line.split()[1].split(":")[1])
    raise RuntimeError("no p%d in dpctl/show" % IN_PORT)


def wait_received(ctl, n):
    """Waits until p5 has received its n-th frame (each is processed
    whole before the main loop takes the next, and before it answers the
    next command)."""
    deadline = time.time() + 60
    while True:
        got = p5_received(ctl)
        if got >= n:
            return
        if time.time() > deadline:
            raise RuntimeError("p%d received %d frames, not %d" % (IN_PORT, got, n))
        time.sleep(0.001)


def run_ovs(ctl, rules, frames):
    sh("ovs-ofctl", "del-flows", "br0")
    sh("ovs-ofctl", "add-flows", "br0", rules)
    ctl.call("dpctl/flush-conntrack")
    ctl.call("revalidator/purge")
    before, received = port_packets(), p5_received(ctl)
    for i, (_, f) in enumerate(frames):
        if i % QUEUE_STEP == 0:
            wait_received(ctl, received + i)
        ctl.call("netdev-dummy/receive", "p%d" % IN_PORT, f.hex())
    wait_received(ctl, received + len(frames))
    ctl.call("revalidator/purge")
    after = port_packets()
    counts = {v: after.get(p, 0) - before.get(p, 0) for v, p in VERDICT_PORT.items()}
    flows = table1_packets()
    conns = ctl.call("dpctl/dump-conntrack") or ""
    return counts, flows, len([c for c in conns.splitlines() if c.strip()])


# ---------------------------------------------------------------- flowpath

def run_flowpath(fp, rules, pcap):
    r = subprocess.run([fp, "run", "--rules", rules, "--pcap", pcap, "--in-port", str(IN_PORT),
                        "--batch", "1", "--json"], capture_output=True, text=True)
    if r.returncode:
        raise RuntimeError(r.stderr.strip())
    ports = json.loads(r.stdout)["output_packets"]
    return {v: int(ports.get(str(p), 0)) for v, p in VERDICT_PORT.items()}


def normalise(fp, pcap, tmp):
    rules = os.path.join(tmp, "all.flows")
    with open(rules, "w") as w:
        w.write("priority=0,actions=output:1\n")
    out = os.path.join(tmp, "norm")
    for f in glob.glob(os.path.join(out, "*")):
        os.remove(f)
    r = subprocess.run([fp, "run", "--rules", rules, "--pcap", pcap, "--in-port", str(IN_PORT),
                        "--batch", "1", "--out-dir", out], capture_output=True, text=True)
    if r.returncode:
        return None
    p = os.path.join(out, "port-1.pcap")
    return read_pcap(p) if os.path.exists(p) else []


def captures(root):
    out = []
    for dp, _, files in os.walk(root):
        for f in files:
            if f.endswith(".md") or f in ("LICENSE", "COPYING") or f.endswith(".zst"):
                continue
            out.append(os.path.relpath(os.path.join(dp, f), root))
    return sorted(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pcaps", default=os.path.join(os.path.dirname(__file__), "../../shared/pcaps"))
    ap.add_argument("--flowpath", default=os.path.join(os.path.dirname(__file__), "../target/debug/flowpath"))
    ap.add_argument("--rules", default=RULES)
    ap.add_argument("--record")
    ap.add_argument("--only", action="append")
    ap.add_argument("--fix-checksums", action="store_true")
    a = ap.parse_args()
    rundir = os.environ.get("OVS_RUNDIR", "/tmp/ovs-sandbox")
    ctl = start_ovs(rundir)
    tmp = tempfile.mkdtemp(prefix="ct-verdicts-")
    rules = a.rules
    records, agree, differ, skipped = [], 0, [], []
    for name in captures(a.pcaps):
        if a.only and name not in a.only:
            continue
        frames = normalise(a.flowpath, os.path.join(a.pcaps, name), tmp)
        if not frames:
            continue
        l4, two_way = conversations(frames)
        if not l4:
            continue
        try:
            ovs, flows, nconns = run_ovs(ctl, rules, frames)
        except (OSError, RuntimeError, subprocess.CalledProcessError) as e:
            alive = os.path.exists("/proc/" + open(os.path.join(rundir, "ovs-vswitchd.pid")).read().strip())
            why = "%s%s" % (e, "" if alive else "; ovs-vswitchd died, restarted")
            skipped.append((name, why))
            print("%-60s SKIPPED (OVS: %s)" % (name, why), flush=True)
            ctl = start_ovs(rundir)
            continue
        flat = os.path.join(tmp, "flat.pcap")
        write_pcap(flat, [(0, f) for _, f in frames])
        fpc = run_flowpath(a.flowpath, rules, flat)
        same = ovs == fpc
        note = ""
        if any(flows.get(v, 0) != ovs[v] for v in ovs):
            note = "  (OVS rule counters %s)" % flows
        if flows.get("none"):
            note += "  (untracked verdict: %d)" % flows["none"]
        line = "%-60s %s %s ovs=%s flowpath=%s conns=%d%s" % (
            name, "same  " if same else "DIFFER", "two-way" if two_way else "one-way",
            ovs, fpc, nconns, note)
        record = {"pcap": name, "counts": ovs, "two_way": two_way}
        if a.fix_checksums:
            fixed = [(ts, fix_checksums(f)) for ts, f in frames]
            fpcap = os.path.join(tmp, "fixed.pcap")
            write_pcap(fpcap, [(0, f) for _, f in fixed])
            o2, _, _ = run_ovs(ctl, rules, fixed)
            f2 = run_flowpath(a.flowpath, rules, fpcap)
            line += "  fixed-checksums: %s ovs=%s flowpath=%s" % ("same" if o2 == f2 else "DIFFER", o2, f2)
            if o2 != ovs:
                record["counts_fixed_checksums"] = o2
        print(line, flush=True)
        records.append(record)
        if same:
            agree += 1
        else:
            differ.append(name)
    print("\n%d captures compared: %d agree, %d differ%s; %d skipped" % (
        agree + len(differ), agree, len(differ), (": " + ", ".join(differ)) if differ else "", len(skipped)))
    if a.record:
        with open(a.record, "w") as w:
            for r in records:
                w.write(json.dumps(r, sort_keys=True) + "\n")
    shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
