#!/usr/bin/env bash
# live-bench.sh - flowpath switch against Open vSwitch 3.1's userspace
# datapath (AF_XDP ports) on the same veth topology, in one run.
#
# Uses the anchor in ../shared/anchors/ovs-afxdp (topo.sh, ovs-afxdp.sh,
# blast.sh). For each switch under test (OVS afxdp; flowpath with afxdp
# ports; flowpath with afpacket ports; the Linux bridge as a reference):
#   - 64-byte UDP at the generator's maximum rate, 1 and 100,000 flows:
#     offered and delivered pps (blast.sh), and for flowpath the PMD's
#     processing cycles per packet (pmd-stats-show);
#   - iperf3 TCP, one stream, 5 s, gen -> sink, checksum offload off on
#     gen0/sink0 (what AF_XDP ports need), and for afpacket also with it on
#     (GSO/checksum passthrough);
#   - ping RTT (20 pings).
# Root needed. Prints one line per measurement; OUT=FILE also appends them.
#
# env: ANCHOR (default ../shared/anchors/ovs-afxdp), FLOWPATH (binary,
# default target/release/flowpath), SECS (blast seconds, default 5),
# PMD_CPU (default last CPU; the generator runs on CPU 0).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
ANCHOR=${ANCHOR:-$ROOT/../shared/anchors/ovs-afxdp}
FP=${FLOWPATH:-$ROOT/target/release/flowpath}
SECS=${SECS:-5}
PMD_CPU=${PMD_CPU:-$(( $(nproc) - 1 ))}
OUT=${OUT:-/dev/null}
W=$(mktemp -d /tmp/live-bench.XXXX)
need=""
for p in trafgen:netsniff-ng iperf3:iperf3 ovs-vsctl:openvswitch-switch ethtool:ethtool ping:iputils-ping; do
  command -v "${p%%:*}" >/dev/null || need="$need ${p#*:}"
done
if [ -n "$need" ]; then apt-get update -qq; DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $need >/dev/null; fi
[ -x "$FP" ] || (cd "$ROOT" && cargo build --release --quiet)

say() { echo "$*"; echo "$*" >>"$OUT"; }
fp_pid=""
cleanup() {
  [ -n "$fp_pid" ] && kill "$fp_pid" 2>/dev/null || true
  "$ANCHOR"/ovs-afxdp.sh stop >/dev/null 2>&1 || true
  ip link del fpbr0 2>/dev/null || true
  "$ANCHOR"/topo.sh down >/dev/null 2>&1 || true
  rm -rf "$W"
}
trap cleanup EXIT

offload() { # on|off
  ip netns exec fpgen ethtool -K gen0 tx "$1" >/dev/null 2>&1 || true
  ip netns exec fpsink ethtool -K sink0 tx "$1" >/dev/null 2>&1 || true
}
tcp() { # label
  ip netns exec fpsink iperf3 -s -1 -p 5299 >/dev/null 2>&1 &
  local s=$!; sleep 0.5
  local g
  g=$(ip netns exec fpgen timeout 30 iperf3 -c 10.0.0.2 -p 5299 -t 5 -J 2>/dev/null \
      | python3 -c 'import json,sys; print("%.2f" % (json.load(sys.stdin)["end"]["sum_received"]["bits_per_second"]/1e9))' || echo fail)
  kill "$s" 2>/dev/null || true; wait "$s" 2>/dev/null || true
  say "$1 iperf3_tcp_gbps=$g"
}
rtt() {
  local r
  r=$(ip netns exec fpgen ping -c 20 -i 0.05 -q 10.0.0.2 | awk -F/ '/rtt/ {print $5}')
  say "$1 ping_rtt_avg_ms=$r"
}
fp_cycles() { # prints avg processing cycles per packet since the last clear
  "$FP" ctl -t "$W/fp.ctl" dpif-netdev/pmd-stats-show --json \
    | python3 -c 'import json,sys; v=json.load(sys.stdin); print("%.0f" % v[0]["avg_processing_cycles_per_packet"])'
}
ovs_cycles() {
  ovs-appctl -t /tmp/ovsafxdp/run/ovs-vswitchd.ctl dpif-netdev/pmd-stats-show \
    | awk -F': ' '/avg processing cycles per packet/ {split($2, a, " "); print a[1]; exit}'
}
blast() { # label flows cyclesfn
  local c=""
  case "$3" in
    fp) "$FP" ctl -t "$W/fp.ctl" dpif-netdev/pmd-stats-clear >/dev/null ;;
    ovs) ovs-appctl -t /tmp/ovsafxdp/run/ovs-vswitchd.ctl dpif-netdev/pmd-stats-clear >/dev/null ;;
  esac
  local r
  r=$("$ANCHOR"/blast.sh "$SECS" "$2")
  case "$3" in fp) c=" cycles_per_packet=$(fp_cycles)" ;; ovs) c=" cycles_per_packet=$(ovs_cycles)" ;; esac
  say "$1 $r$c"
}

cat >"$W/fwd.flows" <<EOF
in_port=1,actions=output:2
in_port=2,actions=output:1
EOF

"$ANCHOR"/topo.sh up
say "# live-bench $(date -u +%FT%TZ) commit $(git -C "$ROOT" rev-parse --short HEAD) cpu '$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)' pmd_cpu=$PMD_CPU"

# OVS 3.1, afxdp ports.
offload off
"$ANCHOR"/ovs-afxdp.sh start >/dev/null
sleep 1
for f in 1 100000; do blast "ovs-afxdp" "$f" ovs; done
tcp "ovs-afxdp offload=off"; rtt "ovs-afxdp"
"$ANCHOR"/ovs-afxdp.sh stop >/dev/null

# flowpath, afxdp and afpacket ports.
for kind in afxdp afpacket; do
  "$FP" switch --rules "$W/fwd.flows" --port 1=$kind:p1 --port 2=$kind:p2 \
    --pmd-cpus "$PMD_CPU" --ctl "$W/fp.ctl" 2>"$W/fp.log" &
  fp_pid=$!
  for _ in $(seq 100); do [ -S "$W/fp.ctl" ] && break; sleep 0.1; done
  offload off
  for f in 1 100000; do blast "flowpath-$kind" "$f" fp; done
  tcp "flowpath-$kind offload=off"
  if [ $kind = afpacket ]; then offload on; tcp "flowpath-$kind offload=on"; offload off; fi
  rtt "flowpath-$kind"
  kill -TERM "$fp_pid"; wait "$fp_pid" || true; fp_pid=""
done

# The Linux bridge, for reference.
ip link add fpbr0 type bridge; ip link set fpbr0 up
ip link set p1 master fpbr0; ip link set p2 master fpbr0
offload off; tcp "linux-bridge offload=off"
offload on; tcp "linux-bridge offload=on"
rtt "linux-bridge"
