#!/usr/bin/env bash
# tools/ct-bench.sh - connection tracking, OVS-DPDK (dpif-netdev's userspace
# conntrack) and flowpath on the same pcaps with the same rules, in one run
# on this machine; writes a side-by-side Markdown table.
#
# Usage: tools/ct-bench.sh [--out DIR] [--pcaps DIR] [--only REGEX] [--no-huge]
#
# Workloads: the anchor's flows-N-rr pcaps (N UDP flows, round robin) for
# N = 1000, 100000 and 500000 (half of flows-1000000-rr) with their mirror
# images (tools/ct-pcap.py: the
# replies, on the next input port), each with three rule sets:
#   ct      OVS's conntrack tutorial firewall for every port: ct(table=1),
#           +new -> ct(commit),output:2, +est -> output:2 (every packet two
#           datapath passes; once a flow's reply has been seen, every
#           packet of it is an established connection's);
#   ct-nat  the same with source NAT: ct(nat,table=1), +new ->
#           ct(commit,nat(src=10.200.0.1-10.200.0.254)),output:2;
#   plain   the anchor's rules (udp -> output:2), no conntrack;
# and TCP: the same flows as TCP segments and their acknowledgements
# (tools/ct-pcap.py --tcp) through the ct rules at N = 1000, 100000 and
# 500000 (the first half of the million, as for UDP)
# (rows ct-tcp-N).
# (The rule texts are those of `flowpath bench --scenario ct`,
# crates/bench/src/workload.rs CT_RULES / CT_NAT_RULES; a test checks
# they agree.)
# OVS runs its defaults (EMC, no SMC), warm-up W s (default 10) then R
# intervals of M s (default 3 x 5); flowpath its configurations emc,
# emc+smc and auto. Each row runs OVS then flowpath, so both sides of a row are
# measured close together. Memory per connection, for both: resident
# memory after the 500,000-connection run minus after the plain run on the
# same captures, over 500,000 (OVS: VmRSS of the kept switch; flowpath:
# the bench's maximum RSS, /usr/bin/time).
#
# Needs root and: apt-get install -y openvswitch-switch-dpdk librte-net-null23 time
set -euo pipefail

ROOT="$(cd "$(dirname "$(readlink -f "$0")")/.." && pwd)"
OUT=/tmp/ct-bench PCAPS=/tmp/ovsbench/pcap ONLY=. NOHUGE=""
ANCHOR=${ANCHOR:-$ROOT/../shared/anchors/ovs-dpdk}
W=${W:-10} M=${M:-5} R=${R:-3}
while [ $# -gt 0 ]; do
    case "$1" in
        --out) OUT=$2; shift 2 ;;
        --pcaps) PCAPS=$2; shift 2 ;;
        --only) ONLY=$2; shift 2 ;;
        --no-huge) NOHUGE=--no-huge; shift ;;
        -h|--help) sed -n '2,33p' "$0"; exit 0 ;;
        *) echo "unknown option $1" >&2; exit 2 ;;
    esac
done
ANCHOR=$(readlink -f "$ANCHOR")
mkdir -p "$OUT/logs" "$PCAPS"
log() { echo "[ct-bench] $*" >&2; }

cat > "$OUT/ct.rules" <<'EOF'
table=0,priority=1,actions=drop
table=0,priority=100,ip,ct_state=-trk,actions=ct(table=1)
table=1,priority=100,ip,ct_state=+trk+new,actions=ct(commit),output:2
table=1,priority=100,ip,ct_state=+trk+est,actions=output:2
table=1,priority=1,actions=drop
EOF
cat > "$OUT/ct-nat.rules" <<'EOF'
table=0,priority=1,actions=drop
table=0,priority=100,ip,ct_state=-trk,actions=ct(nat,table=1)
table=1,priority=100,ip,ct_state=+trk+new,actions=ct(commit,nat(src=10.200.0.1-10.200.0.254)),output:2
table=1,priority=100,ip,ct_state=+trk+est,actions=output:2
table=1,priority=1,actions=drop
EOF

for n in 1000 100000 1000000; do
    if [ ! -f "$PCAPS/flows-$n-rr.parts" ]; then
        log "generating flows-$n-rr"
        python3 "$ANCHOR/gen-pcap.py" -o "$PCAPS/flows-$n-rr" flows --n "$n" --order rr >/dev/null
    fi
    # Both directions of every flow (see tools/ct-pcap.py).
    [ -f "$PCAPS/ctbi-$n.parts" ] || python3 "$ROOT/tools/ct-pcap.py" "$PCAPS/flows-$n-rr.parts" "$PCAPS/ctbi-$n"
    [ -f "$PCAPS/ctbi-tcp-$n.parts" ] \
        || python3 "$ROOT/tools/ct-pcap.py" --tcp "$PCAPS/flows-$n-rr.parts" "$PCAPS/ctbi-tcp-$n"
done
# The harness takes at most four input ports of 250,000 packets: both
# directions of 1,000,000 flows need eight, so the largest row is the
# first 500,000 flows (the first two parts and their mirrors).
head -4 "$PCAPS/ctbi-1000000.parts" > "$PCAPS/ctbi-500000.parts"
head -4 "$PCAPS/ctbi-tcp-1000000.parts" > "$PCAPS/ctbi-tcp-500000.parts"

# tag | pcap | rules file
CASES=()
for n in 1000 100000 500000; do
    CASES+=("ct-$n|ctbi-$n|$OUT/ct.rules" "ct-nat-$n|ctbi-$n|$OUT/ct-nat.rules"
            "plain-$n|ctbi-$n|$PCAPS/flows-1000-rr.rules")
done
for n in 1000 100000 500000; do
    CASES+=("ct-tcp-$n|ctbi-tcp-$n|$OUT/ct.rules")
done

# --- OVS-DPDK -------------------------------------------------------------------
command -v ovs-vsctl >/dev/null || { log "OVS not installed (see the header)"; exit 1; }
rm -f "$OUT/ovs.csv" "$OUT/ovs-mem.txt"
# The anchor's harness reserves huge pages for OVS and keeps them: the
# count goes back to what it was when this script exits.
HUGE_BEFORE=$(cat /proc/sys/vm/nr_hugepages)
NSNAME=""
cleanup() {
    if [ -n "$NSNAME" ]; then ip netns del "$NSNAME" 2>/dev/null || true; fi
    echo "$HUGE_BEFORE" > /proc/sys/vm/nr_hugepages 2>/dev/null || true
}
trap cleanup EXIT
NS=()
if ip link show ovs-netdev >/dev/null 2>&1; then
    NSNAME=flowpath-ct-$$
    ip netns add "$NSNAME"
    NS=(ip netns exec "$NSNAME")
fi
RUNDIR=${OVSBENCH_DIR:-/tmp/ovsbench}/run
if [ -z "${FLOWPATH:-}" ]; then
    (cd "$ROOT" && cargo build --release -q -p flowpath-cli)
    FLOWPATH=$ROOT/target/release/flowpath
fi
rm -f "$OUT/flowpath-mem.txt"
# Case by case, OVS then flowpath (this machine's speed drifts over
# minutes: the two sides of a row are measured close together).
for c in "${CASES[@]}"; do
    IFS='|' read -r tag wl rules <<< "$c"
    [[ "$tag" =~ $ONLY ]] || continue
    log "OVS-DPDK $tag ($(cut -d' ' -f1-3 /proc/loadavg))"
    keep=""
    # (Resident memory with and without connections on the same
    # captures: the difference is the tracker's.)
    case "$tag" in ct-1000|ct-500000|plain-500000) keep=--keep ;; esac
    # shellcheck disable=SC2086
    "${NS[@]}" "$ANCHOR/ovs-dpdk-bench.sh" -w "$W" -m "$M" -r "$R" $NOHUGE $keep --tag "$tag" \
        --csv "$OUT/ovs.csv" "$rules" "$PCAPS/$wl.parts" \
        > "$OUT/logs/ovs-$tag.log" 2>&1 || { log "OVS $tag failed: see $OUT/logs/ovs-$tag.log"; tail -5 "$OUT/logs/ovs-$tag.log" >&2; }
    grep -E '^(MEAN|WARNING)' "$OUT/logs/ovs-$tag.log" >&2 || true
    if [ -n "$keep" ]; then
        pid=$(cat "$RUNDIR/ovs-vswitchd.pid" 2>/dev/null || true)
        if [ -n "$pid" ]; then
            rss=$(awk '/VmRSS/ {print $2}' "/proc/$pid/status")
            nconns=$(ovs-appctl -t "$RUNDIR/ovs-vswitchd.$pid.ctl" dpctl/ct-get-nconns 2>/dev/null \
                || ovs-appctl -t "$RUNDIR/ovs-vswitchd.ctl" dpctl/ct-get-nconns 2>/dev/null || echo "?")
            echo "$tag rss_kb=$rss nconns=$nconns" >> "$OUT/ovs-mem.txt"
        fi
        "$ANCHOR/ovs-dpdk-bench.sh" --stop >/dev/null 2>&1 || true
    fi
    log "flowpath $tag ($(cut -d' ' -f1-3 /proc/loadavg))"
    /usr/bin/time -f "$tag maxrss_kb=%M" -a -o "$OUT/flowpath-mem.txt" \
        "$FLOWPATH" bench --pcap "$PCAPS/$wl.parts" --rules "$rules" --config emc,emc+smc,auto \
        --warmup-ms 2000 --duration-ms 2000 --intervals 3 \
        --json-out "$OUT/flowpath-$tag.json" > "$OUT/logs/flowpath-$tag.log" 2>&1 \
        || { log "flowpath $tag failed"; tail -5 "$OUT/logs/flowpath-$tag.log" >&2; }
done
"$ANCHOR/ovs-dpdk-bench.sh" --stop >/dev/null 2>&1 || true
if [ ${#NS[@]} -eq 0 ]; then
    # The netdev datapath's taps outlive our OVS: remove those it made.
    for tap in ovs-netdev br0; do
        ip link show "$tap" >/dev/null 2>&1 && ip link del "$tap" 2>/dev/null || true
    done
fi

# --- side by side ---------------------------------------------------------------
python3 - "$OUT" "${CASES[@]}" > "$OUT/ct.md" <<'EOF'
import csv, json, os, sys
out, cases = sys.argv[1], sys.argv[2:]
ovs = {}
if os.path.exists(f"{out}/ovs.csv"):
    for row in csv.DictReader(open(f"{out}/ovs.csv")):
        try:
            ovs.setdefault(row["tag"], []).append(float(row["mpps"]))
        except (ValueError, KeyError, TypeError):
            pass
print("| workload | OVS-DPDK Mpps | flowpath emc Mpps | flowpath emc+smc Mpps | flowpath auto Mpps | ratio (best) |")
print("|---|---:|---:|---:|---:|---:|")
for c in cases:
    tag = c.split("|")[0]
    o = sum(ovs[tag]) / len(ovs[tag]) if ovs.get(tag) else None
    f = {}
    p = f"{out}/flowpath-{tag}.json"
    if os.path.exists(p):
        for r in json.load(open(p)):
            f[r["config"]] = r["mpps"]
    best = max(f.values()) if f else None
    ratio = f"{best / o:.2f}x" if o and best else "-"
    fmt = lambda v: f"{v:.2f}" if v else "-"
    print(f"| {tag} | {fmt(o)} | {fmt(f.get('emc'))} | {fmt(f.get('emc+smc'))} | {fmt(f.get('auto'))} | {ratio} |")
def mem(path, key):
    m = {}
    if os.path.exists(path):
        for l in open(path):
            f = l.split()
            if len(f) >= 2 and f[1].startswith(key + "="):
                try:
                    m[f[0]] = int(f[1].split("=")[1])
                except ValueError:
                    pass
    return m
om = mem(f"{out}/ovs-mem.txt", "rss_kb")
fm = mem(f"{out}/flowpath-mem.txt", "maxrss_kb")
if om or fm:
    print()
    print("OVS memory: " + "; ".join(l.strip() for l in open(f"{out}/ovs-mem.txt")) if om else "")
    for name, m in (("OVS-DPDK", om), ("flowpath", fm)):
        if "ct-500000" in m and "plain-500000" in m:
            per = (m["ct-500000"] - m["plain-500000"]) * 1024 / 500000
            print(f"{name}: {per:.0f} bytes per connection (resident memory with 500,000 connections minus without, same captures)")
EOF
cat "$OUT/ct.md"
