#!/usr/bin/env bash
# latency-bench.sh - request/response latency and CPU share through
# flowpath (afxdp and afpacket ports), Open vSwitch 3.1's userspace
# datapath on AF_XDP ports and the Linux bridge, on the same veth
# topology, in one run.
#
# Uses the anchor in ../shared/anchors/ovs-afxdp (topo.sh, ovs-afxdp.sh).
# For each switch under test:
#   - idle CPU: the switch process's CPU time over IDLE seconds with no
#     traffic, as a share of one core;
#   - idle ping: PINGS (default 50) pings 200 ms apart, average round trip
#     (ms), and the switch's CPU share meanwhile;
#   - sockperf ping-pong (UDP, 2,000 messages/s, SECS seconds): p50, p99,
#     p99.9 in µs (sockperf's convention: half the round trip), and the
#     switch's CPU share meanwhile;
#   - the same with a background iperf3 TCP stream (1 Gbit/s cap) in the
#     same direction ("loaded").
# Checksum offload is off on gen0/sink0 (what AF_XDP ports need). Root
# needed. Prints one line per measurement; OUT=FILE also appends them.
#
# env: ANCHOR (default ../shared/anchors/ovs-afxdp), FLOWPATH (binary,
# default target/release/flowpath), SECS (default 10), IDLE (default 5),
# PMD_CPU (default the last CPU; empty: flowpath's PMD not pinned), FP_ARGS (more `flowpath switch`
# options, e.g. "--pmd-maxsleep 0"), LABEL (suffix for flowpath's lines), CASES (default all:
# "bridge ovs-afxdp fp-afxdp fp-afpacket fp-afpacket-v3").
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
ANCHOR=${ANCHOR:-$ROOT/../shared/anchors/ovs-afxdp}
FP=${FLOWPATH:-$ROOT/target/release/flowpath}
SECS=${SECS:-10}
IDLE=${IDLE:-5}
PMD_CPU=${PMD_CPU-$(( $(nproc) - 1 ))}
OUT=${OUT:-/dev/null}
FP_ARGS=${FP_ARGS:-}
LABEL=${LABEL:-}
CASES=${CASES:-bridge ovs-afxdp fp-afxdp fp-afpacket fp-afpacket-v3}
W=$(mktemp -d /tmp/latency-bench.XXXX)
need=""
for p in sockperf:sockperf iperf3:iperf3 ovs-vsctl:openvswitch-switch ethtool:ethtool ping:iputils-ping; do
  command -v "${p%%:*}" >/dev/null || need="$need ${p#*:}"
done
if [ -n "$need" ]; then apt-get update -qq; DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $need >/dev/null; fi
[ -x "$FP" ] || (cd "$ROOT" && cargo build --release --quiet -p flowpath-cli)

say() { echo "$*"; echo "$*" >>"$OUT"; }
# A userspace Open vSwitch leaves its bridge's taps (br0, ovs-netdev) in
# the root namespace: remove those this run created.
ovs_taps=""
for d in br0 ovs-netdev; do ip link show "$d" >/dev/null 2>&1 || ovs_taps="$ovs_taps $d"; done
drop_taps() { for d in $ovs_taps; do ip link del "$d" 2>/dev/null || true; done; }
fp_pid=""
srv_pid=""
cleanup() {
  [ -n "$fp_pid" ] && kill "$fp_pid" 2>/dev/null || true
  [ -n "$srv_pid" ] && kill "$srv_pid" 2>/dev/null || true
  "$ANCHOR"/ovs-afxdp.sh stop >/dev/null 2>&1 || true
  ip link del fpbr0 2>/dev/null || true
  "$ANCHOR"/topo.sh down >/dev/null 2>&1 || true
  drop_taps
  rm -rf "$W"
}
trap cleanup EXIT

ticks() { # PID -> utime+stime of the whole process, in clock ticks
  [ -n "$1" ] || { echo 0; return; }
  awk '{print $14 + $15}' "/proc/$1/stat"
}
share() { # PID T0_TICKS T0_NS -> percent of one core since
  [ -n "$1" ] || { echo "-"; return; }
  local t1 n1 hz
  t1=$(ticks "$1"); n1=$(date +%s%N); hz=$(getconf CLK_TCK)
  awk -v d=$((t1 - $2)) -v ns=$((n1 - $3)) -v hz="$hz" 'BEGIN { printf "%.1f", 100 * d / hz / (ns / 1e9) }'
}
pingpong() { # -> "p50 p99 p99.9" (µs)
  ip netns exec fpgen timeout $((SECS + 20)) sockperf ping-pong -i 10.0.0.2 -p 11111 \
      -t "$SECS" --mps 2000 2>&1 \
    | awk '/percentile 50.000/ {a=$NF} /percentile 99.000/ {b=$NF} /percentile 99.900/ {c=$NF}
           END { if (a == "") print "fail fail fail"; else print a, b, c }'
}
measure() { # label pid
  local pid=$2 t0 n0 r
  sleep 1
  t0=$(ticks "$pid"); n0=$(date +%s%N); sleep "$IDLE"
  say "$1 idle_cpu_pct=$(share "$pid" "$t0" "$n0")"
  t0=$(ticks "$pid"); n0=$(date +%s%N)
  r=$(ip netns exec fpgen ping -c "${PINGS:-50}" -i 0.2 -q 10.0.0.2 | awk -F/ '/rtt/ {print $5}')
  say "$1 idle_ping_rtt_ms=${r:-fail} cpu_pct=$(share "$pid" "$t0" "$n0")"
  ip netns exec fpsink sockperf server -i 10.0.0.2 -p 11111 >/dev/null 2>&1 &
  srv_pid=$!
  sleep 0.5
  t0=$(ticks "$pid"); n0=$(date +%s%N)
  r=$(pingpong)
  say "$1 sockperf_idle_p50_p99_p999_us=${r// /,} cpu_pct=$(share "$pid" "$t0" "$n0")"
  ip netns exec fpsink iperf3 -s -1 -p 5299 >/dev/null 2>&1 &
  local is=$!
  sleep 0.5
  ip netns exec fpgen timeout $((SECS + 30)) iperf3 -c 10.0.0.2 -p 5299 -b 1G -t $((SECS + 4)) \
    >/dev/null 2>&1 &
  local ic=$!
  sleep 2
  t0=$(ticks "$pid"); n0=$(date +%s%N)
  r=$(pingpong)
  say "$1 sockperf_loaded_p50_p99_p999_us=${r// /,} cpu_pct=$(share "$pid" "$t0" "$n0")"
  wait "$ic" 2>/dev/null || true
  kill "$is" 2>/dev/null || true; wait "$is" 2>/dev/null || true
  kill "$srv_pid" 2>/dev/null || true; wait "$srv_pid" 2>/dev/null || true; srv_pid=""
}

cat >"$W/fwd.flows" <<EOF
in_port=1,actions=output:2
in_port=2,actions=output:1
EOF

"$ANCHOR"/topo.sh up
ip netns exec fpgen ethtool -K gen0 tx off >/dev/null 2>&1 || true
ip netns exec fpsink ethtool -K sink0 tx off >/dev/null 2>&1 || true
say "# latency-bench $(date -u +%FT%TZ) commit $(git -C "$ROOT" rev-parse --short HEAD) cpu '$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)' nproc=$(nproc) pmd_cpu=$PMD_CPU secs=$SECS"

for c in $CASES; do
  case $c in
    bridge)
      ip link add fpbr0 type bridge; ip link set fpbr0 up
      ip link set p1 master fpbr0; ip link set p2 master fpbr0
      measure linux-bridge ""
      ip link del fpbr0 ;;
    ovs-afxdp)
      "$ANCHOR"/ovs-afxdp.sh start >/dev/null
      measure ovs-afxdp "$(cat /tmp/ovsafxdp/run/ovs-vswitchd.pid)"
      "$ANCHOR"/ovs-afxdp.sh stop >/dev/null ;;
    fp-*)
      case $c in
        fp-afxdp) p1=afxdp:p1; p2=afxdp:p2 ;;
        fp-afpacket) p1=afpacket:p1; p2=afpacket:p2 ;;
        fp-afpacket-v3) p1=afpacket:p1,ring=v3; p2=afpacket:p2,ring=v3 ;;
        *) echo "unknown case $c" >&2; exit 2 ;;
      esac
      "$FP" switch --rules "$W/fwd.flows" --port "1=$p1" --port "2=$p2" \
        ${PMD_CPU:+--pmd-cpus "$PMD_CPU"} --ctl "$W/fp.ctl" $FP_ARGS 2>"$W/fp.log" &
      fp_pid=$!
      for _ in $(seq 100); do [ -S "$W/fp.ctl" ] && break; sleep 0.1; done
      measure "flowpath-${c#fp-}$LABEL" "$fp_pid"
      kill -TERM "$fp_pid"; wait "$fp_pid" || true; fp_pid="" ;;
    *) echo "unknown case $c" >&2; exit 2 ;;
  esac
done
