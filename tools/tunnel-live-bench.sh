#!/usr/bin/env bash
# tunnel-live-bench.sh [FLOWPATH_BIN] - TCP over a live VXLAN tunnel
# through flowpath, Open vSwitch 3.1's userspace datapath on AF_XDP ports
# (its native tunnelling) and the Linux bridge with the kernel's own
# `vxlan` device, on the same namespaces, in one run.
#
#   [ns A] a1 10.88.0.1/24 ==veth== a0 ┐
#                                      ├ [ns X] the switch under test,
#   [ns C] c1 172.31.1.1/24 ==veth== u0┘   tunnel endpoint 172.31.1.100
#   ns C: kernel vxlan vx1 (VNI 5, remote 172.31.1.100), 10.88.0.2/24
#
# Cases (CASES, default all but the -tso ones): linux (X: bridge of a0 and a kernel vxlan
# device over u0), fp-afpacket and fp-afxdp (flowpath switch --port
# 1=KIND:a0 --port 10=vxlan:remote_ip=172.31.1.1,key=5 --underlay
# KIND:u0,ip=172.31.1.100/24), ovs-afxdp (br-int: a0 afxdp + a vxlan port;
# br-phy: u0 afxdp, 172.31.1.100/24 on its LOCAL port, as OVS's userspace
# tunnelling guide sets it up); linux-tso and fp-afpacket-tso: the same
# with A's offloads on (TCP segmentation offload, as a VM's or container's
# interface has them; AF_XDP ports cannot take such frames). Each switch's PMD on CPU PMD_CPU (default
# the last). Checksum offload off on a1 and c1 (what AF_XDP ports and OVS's
# tunnel tests need). iperf3, one TCP stream, SECS (default 5) seconds,
# A -> C and C -> A (-R); ROUNDS (default 2) rounds, cases alternating.
# Prints one line per measurement (Gbit/s); OUT=FILE also appends them.
# Root needed; namespaces, daemons (by PID) removed at the end.
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
FP=${1:-$ROOT/target/release/flowpath}
CASES=${CASES:-linux fp-afpacket fp-afxdp ovs-afxdp}
SECS=${SECS:-5}; ROUNDS=${ROUNDS:-2}; OUT=${OUT:-/dev/null}
PMD_CPU=${PMD_CPU:-$(( $(nproc) - 1 ))}
VSWITCHD=${OVS_VSWITCHD:-/usr/lib/openvswitch-switch/ovs-vswitchd}
T=tl$$; A=${T}A; X=${T}X; C=${T}C
B=$(mktemp -d /tmp/tunnel-live.XXXX)
export OVS_RUNDIR=$B OVS_LOGDIR=$B OVS_DBDIR=$B OVS_SYSCONFDIR=$B
V="ovs-vsctl --db=unix:$B/db.sock --timeout=30"
fp_pid=""
# Stops the switch under test: flowpath and OVS's daemons, by PID.
stop_switch() {
  [ -n "$fp_pid" ] && { kill -INT "$fp_pid" 2>/dev/null; wait "$fp_pid" 2>/dev/null; fp_pid=""; }
  for d in ovs-vswitchd ovsdb-server; do [ -f $B/$d.pid ] || continue; p=$(cat $B/$d.pid); kill "$p" 2>/dev/null
    for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done; rm -f $B/$d.pid; done
}
# stop_switch, then host X in a fresh namespace with its two veths (what a
# case built there goes with the old one).
fresh_host() {
  stop_switch
  ip netns del $X 2>/dev/null; ip netns add $X
  ip -n $A link del a1 2>/dev/null; ip -n $C link del c1 2>/dev/null
  ip link add a0 netns $X type veth peer name a1 netns $A
  ip link add u0 netns $X type veth peer name c1 netns $C
  ip -n $A addr add 10.88.0.1/24 dev a1; ip -n $A link set a1 mtu 1450 up
  ip netns exec $A ethtool -K a1 tx off >/dev/null
  ip -n $C addr add 172.31.1.1/24 dev c1; ip -n $C link set c1 up
  ip netns exec $C ethtool -K c1 tx off >/dev/null
  ip -n $X link set a0 up; ip -n $X link set u0 up; ip -n $X link set lo up
}
cleanup() { stop_switch; for n in $A $X $C; do ip netns del $n 2>/dev/null; done; rm -rf "$B"; }
trap cleanup EXIT
say() { echo "$*"; echo "$*" >>"$OUT"; }
for n in $A $X $C; do ip netns add $n; done
ip -n $A link set lo up; ip -n $C link set lo up

# The remote end's vxlan device sits on c1, which each case makes anew.
remote_up() {
  ip -n $C link del vx1 2>/dev/null
  ip -n $C link add vx1 type vxlan id 5 remote 172.31.1.100 local 172.31.1.1 dstport 4789 dev c1
  ip -n $C addr add 10.88.0.2/24 dev vx1; ip -n $C link set vx1 up
}

start_case() { # CASE: the switch in X; 0 if it runs
  case $1 in
  linux)
    ip -n $X link add br0 type bridge; ip -n $X link set a0 master br0
    ip -n $X addr add 172.31.1.100/24 dev u0
    ip -n $X link add vxX type vxlan id 5 remote 172.31.1.1 local 172.31.1.100 dstport 4789 dev u0
    ip -n $X link set vxX master br0; ip -n $X link set vxX up; ip -n $X link set br0 up ;;
  fp-*)
    local k=${1#fp-}
    printf 'in_port=1,actions=output:10\nin_port=10,actions=output:1\n' > $B/r.flows
    ip netns exec $X "$FP" switch --rules $B/r.flows --port 1=$k:a0 --port 10=vxlan:remote_ip=172.31.1.1,key=5 \
      --underlay $k:u0,ip=172.31.1.100/24 --pmd-cpus $PMD_CPU --ctl $B/fp.ctl > $B/fp.log 2>&1 & fp_pid=$!
    for _ in $(seq 50); do [ -S $B/fp.ctl ] && break; sleep 0.1; done
    [ -S $B/fp.ctl ] || { echo "flowpath did not start: $(tail -3 $B/fp.log)"; return 1; } ;;
  ovs-afxdp)
    rm -f $B/conf.db; ovsdb-tool create $B/conf.db /usr/share/openvswitch/vswitch.ovsschema
    ip netns exec $X ovsdb-server $B/conf.db --remote=punix:$B/db.sock --pidfile=$B/ovsdb-server.pid \
      --detach --no-chdir --log-file=$B/ovsdb.log -vconsole:off
    $V --no-wait init
    $V --no-wait set Open_vSwitch . other_config:pmd-cpu-mask=$(printf '0x%x' $((1 << PMD_CPU)))
    ip netns exec $X "$VSWITCHD" unix:$B/db.sock --pidfile=$B/ovs-vswitchd.pid --unixctl=$B/ovs-vswitchd.ctl \
      --detach --no-chdir --log-file=$B/vswitchd.log -vconsole:off || return 1
    $V add-br br-phy -- set bridge br-phy datapath_type=netdev
    $V add-port br-phy u0 -- set interface u0 type=afxdp options:xdp-mode=best-effort
    $V add-br br-int -- set bridge br-int datapath_type=netdev fail_mode=secure
    $V add-port br-int a0 -- set interface a0 type=afxdp options:xdp-mode=best-effort ofport_request=1
    $V add-port br-int vx -- set interface vx type=vxlan options:remote_ip=172.31.1.1 options:key=5 ofport_request=10
    ip -n $X addr add 172.31.1.100/24 dev br-phy; ip -n $X link set br-phy up
    ovs-ofctl add-flow br-int in_port=1,actions=output:10
    ovs-ofctl add-flow br-int in_port=10,actions=output:1 ;;
  esac
}

iperf() { # ARGS: Gbit/s received, or 0
  ip netns exec $C iperf3 -s -1 -B 10.88.0.2 >/dev/null 2>&1 & local s=$!
  sleep 0.5
  ip netns exec $A timeout $((SECS + 20)) iperf3 -c 10.88.0.2 -t "$SECS" -J "$@" 2>/dev/null \
    | python3 -c 'import json,sys
try: print(round(json.load(sys.stdin)["end"]["sum_received"]["bits_per_second"]/1e9, 2))
except Exception: print(0)'
  kill $s 2>/dev/null; wait $s 2>/dev/null
}

say "# tunnel-live-bench $(date -u +%FT%TZ) commit $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null) cpu '$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)' nproc=$(nproc) secs=$SECS"
for r in $(seq "$ROUNDS"); do
  for c in $CASES; do
    fresh_host; remote_up
    # "-tso": A's end keeps its offloads (TCP segmentation, checksum), as
    # a VM or container interface has them.
    [ "${c%-tso}" != "$c" ] && ip netns exec $A ethtool -K a1 tx on >/dev/null
    if ! start_case ${c%-tso}; then say "round=$r case=$c failed to start"; continue; fi
    # The first ping learns the neighbours (and OVS its tunnel route).
    ok=""; for _ in $(seq 20); do ip netns exec $A ping -c1 -W1 10.88.0.2 >/dev/null 2>&1 && { ok=1; break; }; sleep 0.5; done
    if [ -z "$ok" ]; then say "round=$r case=$c no ping across the tunnel"; continue; fi
    fwd=$(iperf); rev=$(iperf -R)
    say "round=$r case=$c a_to_c_gbps=$fwd c_to_a_gbps=$rev"
  done
done
