#!/usr/bin/env bash
# patch-bench.sh - what crossing a patch port costs: the running switch
# forwarding a looped capture (round-robin UDP flows) to a null port in
# one bridge, against the same traffic crossing a patch pair into a
# second bridge of the same process (set up from a private ovsdb-server,
# as OVS hosts lay out br-int and br-ex). Mpps from the null port's
# transmit counter over DURATION seconds, ROUNDS times each, alternating.
#
# env: FLOWPATH (default target/release/flowpath), FLOWS (default 1000),
# ROUNDS (default 3), DURATION (default 3). Needs ovsdb-server, ovsdb-tool
# and ovs-vsctl (Debian's openvswitch-common / openvswitch-switch).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
FP=${FLOWPATH:-$ROOT/target/release/flowpath}
FLOWS=${FLOWS:-1000}
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-3}
[ -x "$FP" ] || (cd "$ROOT" && cargo build --release --quiet -p flowpath-cli)
W=$(mktemp -d /tmp/patch-bench.XXXX)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; sleep 0.5; rm -rf "$W"; }
trap cleanup EXIT
"$FP" gen flows --flows "$FLOWS" --order rr -o "$W/f.pcap" --rules-out /dev/null >/dev/null
printf 'priority=10,in_port=1,udp,actions=output:100\npriority=0,actions=drop\n' >"$W/r.flows"

# Packets the null port (port 100 of bridge BR, "" = the first) sent.
sent() {
  ovs-appctl -t "$1" dpctl/show $2 --json 2>/dev/null | python3 -c '
import json, sys
for p in json.load(sys.stdin)["ports"]:
    if p["port_no"] == 100:
        print(p["tx"]["packets"])'
}
rate() { # CTL [BRIDGE]
  local a b
  a=$(sent "$1" "${2:-}"); sleep "$DURATION"; b=$(sent "$1" "${2:-}")
  python3 -c "print(round(($b - $a) / $DURATION / 1e6, 2))"
}

one_bridge() {
  "$FP" switch --rules "$W/r.flows" --port "1=pcap:$W/f.pcap,loop" --port 100=null \
    --ctl "$W/one.ctl" >"$W/one.log" 2>&1 &
  pids+=($!); local p=$!
  for _ in $(seq 50); do [ -S "$W/one.ctl" ] && break; sleep 0.1; done
  sleep 1
  rate "$W/one.ctl"
  kill "$p"; wait "$p" 2>/dev/null || true
}

two_bridges() {
  rm -f "$W/conf.db"
  ovsdb-tool create "$W/conf.db" /usr/share/openvswitch/vswitch.ovsschema
  ovsdb-server "$W/conf.db" --remote=punix:"$W/db.sock" --unixctl="$W/ovsdb.ctl" \
    --log-file="$W/ovsdb.log" >/dev/null 2>&1 &
  pids+=($!); local db=$!
  for _ in $(seq 50); do [ -S "$W/db.sock" ] && break; sleep 0.1; done
  local V="ovs-vsctl --db=unix:$W/db.sock --timeout=20"
  $V --no-wait init
  "$FP" switch --ovsdb --ctl "$W/two.ctl" >"$W/two.log" 2>&1 &
  pids+=($!); local sw=$!
  for _ in $(seq 50); do [ -S "$W/two.ctl" ] && break; sleep 0.1; done
  $V add-br br0 -- set bridge br0 datapath_type=netdev fail_mode=secure \
    -- add-br br-ex -- set bridge br-ex datapath_type=netdev fail_mode=secure \
    -- add-port br0 patch-ex -- set Interface patch-ex type=patch options:peer=patch-int ofport_request=2 \
    -- add-port br-ex patch-int -- set Interface patch-int type=patch options:peer=patch-ex ofport_request=2
  ovs-appctl -t "$W/two.ctl" dpctl/add-if br-ex 100=null >/dev/null
  OVS_RUNDIR=$W ovs-ofctl add-flow br0 'priority=10,in_port=1,udp,actions=output:2'
  OVS_RUNDIR=$W ovs-ofctl add-flow br-ex 'priority=10,in_port=2,udp,actions=output:100'
  ovs-appctl -t "$W/two.ctl" dpctl/add-if "1=pcap:$W/f.pcap,loop" >/dev/null
  sleep 1
  rate "$W/two.ctl" br-ex
  kill "$sw"; wait "$sw" 2>/dev/null || true
  kill "$db"; wait "$db" 2>/dev/null || true
}

echo "# patch-bench $(date -u +%FT%TZ) commit $(git -C "$ROOT" rev-parse --short HEAD) cpu '$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)' nproc=$(nproc) flows=$FLOWS"
for r in $(seq "$ROUNDS"); do
  echo "round=$r one_bridge=$(one_bridge) Mpps two_bridges_via_patch=$(two_bridges) Mpps"
done
