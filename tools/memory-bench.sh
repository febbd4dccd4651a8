#!/usr/bin/env bash
# tools/memory-bench.sh - memory per megaflow (issue: compact megaflow
# storage), as a user measures it: resident memory growth divided by the
# megaflows installed.
#
# Usage: tools/memory-bench.sh [offline|live|all]
#   offline  `flowpath run --no-megaflows` on a 300,000-flow capture with
#            --flow-limit 10000/50000/100000/200000: maximum RSS of each
#            run (/usr/bin/time), for $FLOWPATH and, if set, $BASE (an
#            older binary, for before/after).
#   live     the anchor topology (../shared/anchors/ovs-afxdp): OVS 3.1 on
#            AF_XDP ports with upcall/disable-megaflows, then flowpath switch
#            on the same ports with --no-megaflows; blast.sh offers FLOWS
#            (default 60000) UDP flows for 8 s; RSS before and after, the
#            megaflows upcall/show reports, and flowpath's memory/show.
# Needs root for `live` (namespaces, XDP), and
#   apt-get install -y openvswitch-switch netsniff-ng iproute2
# env: FLOWPATH (default target/release/flowpath), BASE, FLOWS, OUT (work
# dir, default /tmp/memory-bench).
set -euo pipefail
ROOT="$(cd "$(dirname "$(readlink -f "$0")")/.." && pwd)"
FP=${FLOWPATH:-$ROOT/target/release/flowpath}
ANCHOR=${ANCHOR:-$ROOT/../shared/anchors/ovs-afxdp}
OUT=${OUT:-/tmp/memory-bench}
FLOWS=${FLOWS:-60000}
mkdir -p "$OUT"
log() { echo "[memory-bench] $*" >&2; }

offline() {
  local cap=$OUT/flows-300000.pcap
  [ -f "$cap" ] || "$FP" gen flows --flows 300000 --order rr -o "$cap" --rules-out "$OUT/flows-300000.rules" >/dev/null
  echo "| binary | --flow-limit | megaflows installed | max RSS (MB) |"
  echo "|---|---|---|---|"
  for bin in ${BASE:+"$BASE"} "$FP"; do
    for lim in 10000 50000 100000 200000; do
      /usr/bin/time -f %M -o "$OUT/rss" "$bin" run --rules "$OUT/flows-300000.rules" --pcap "$cap" \
        --no-megaflows --flow-limit "$lim" --json > "$OUT/run.json"
      local mf
      mf=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["megaflows"])' "$OUT/run.json")
      echo "| $(basename "$(dirname "$(dirname "$(dirname "$bin")")")")/$(basename "$bin") | $lim | $mf | $(( $(cat "$OUT/rss") / 1024 )) |"
    done
  done
}

rss_kb() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status"; }

fp_pid=""
live() {
  local topo=$ANCHOR/topo.sh ovs=$ANCHOR/ovs-afxdp.sh
  # Runs at exit (after this function has returned): globals only. Stops
  # only the switch this script started, by PID.
  cleanup() {
    if [ -n "${fp_pid:-}" ]; then kill -TERM "$fp_pid" 2>/dev/null || true; wait "$fp_pid" 2>/dev/null || true; fi
    "$ANCHOR/ovs-afxdp.sh" stop >/dev/null 2>&1 || true
    "$ANCHOR/topo.sh" down >/dev/null 2>&1 || true
  }
  trap cleanup EXIT
  "$topo" up >/dev/null
  # OVS 3.1, megaflows disabled: every flow an exact-match datapath flow.
  "$ovs" start >/dev/null
  local appctl="ovs-appctl -t /tmp/ovsafxdp/run/ovs-vswitchd.ctl"
  $appctl upcall/disable-megaflows >/dev/null
  sleep 2
  local pid r0 r1 n
  pid=$(cat /tmp/ovsafxdp/run/ovs-vswitchd.pid)
  r0=$(rss_kb "$pid")
  "$ANCHOR/blast.sh" 8 "$FLOWS" >&2
  n=$($appctl upcall/show | sed -n 's/.*flows *: (current \([0-9]*\)).*/\1/p' | head -1)
  r1=$(rss_kb "$pid")
  echo "OVS 3.1 afxdp, megaflows off: RSS ${r0} kB -> ${r1} kB, ${n} flows: $(( (r1 - r0) * 1024 / (n > 0 ? n : 1) )) bytes per flow"
  "$ovs" stop >/dev/null
  # flowpath switch on the same ports.
  printf 'in_port=1,actions=output:2\nin_port=2,actions=output:1\n' > "$OUT/fwd.flows"
  "$FP" switch --rules "$OUT/fwd.flows" --port 1=afxdp:p1 --port 2=afxdp:p2 \
    --no-megaflows --ctl "$OUT/fp.ctl" 2>"$OUT/fp.log" &
  fp_pid=$!
  for _ in $(seq 100); do [ -S "$OUT/fp.ctl" ] && break; sleep 0.1; done
  sleep 2
  r0=$(rss_kb "$fp_pid")
  "$ANCHOR/blast.sh" 8 "$FLOWS" >&2
  n=$("$FP" ctl --ctl "$OUT/fp.ctl" upcall/show | sed -n 's/.*flows *: (current \([0-9]*\)).*/\1/p' | head -1)
  r1=$(rss_kb "$fp_pid")
  "$FP" ctl --ctl "$OUT/fp.ctl" memory/show
  echo "flowpath afxdp, megaflows off: RSS ${r0} kB -> ${r1} kB, ${n} flows: $(( (r1 - r0) * 1024 / (n > 0 ? n : 1) )) bytes per flow"
}

case "${1:-all}" in
  offline) offline ;;
  live) live ;;
  all) offline; live ;;
  *) echo "usage: $0 [offline|live|all]" >&2; exit 2 ;;
esac
