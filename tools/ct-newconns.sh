#!/usr/bin/env bash
# ct-newconns.sh FLOWPATH_BIN - new connections per second and a million
# tracked connections: flowpath and OVS-DPDK 3.1 (dpif-netdev's userspace
# conntrack) on the same captures with the same rules, side by side.
#
# Traffic: the anchor's flows-1000000-rr as tools/ct-bench.sh makes it
# (/tmp/ovsbench/pcap/ctbi-1000000-*; made here if missing): four captures
# of 250,000 UDP frames, each frame its own flow (1,000,000 flows), and
# their mirror images (the replies). Rules: OVS's conntrack tutorial
# firewall (ct(table=1); +new -> ct(commit),output:5; +est -> output:5),
# port 5 a null port. Two phases on one switch, each capture replayed
# once, not looped:
#   new   ports 1-4 replay the forward captures: every packet opens a
#         connection (a tracker miss, a commit, two datapath passes);
#   reply ports 6-9 (added then) replay the replies: every packet is an
#         established connection's, among 1,000,000;
#   loop  the forward captures again, looped (flowpath `pcap:F,loop`,
#         OVS `infinite_rx=1` with a distinct MTU per port, so each has
#         its own shared mempool to hold its 250,000 frames): established
#         traffic at 1,000,000 connections as a rate, Mpps received over
#         R intervals of M seconds (default 3 of 3) after W (5) of
#         warm-up, from each switch's pmd-stats-show, and the cycles per
#         packet of the last interval.
# Per phase: packets, avg processing cycles per packet (each switch's
# dpif-netdev/pmd-stats-show: TSC cycles of the PMD's busy iterations
# over packets received, cleared between phases), the rate that gives
# (TSC Hz / cycles), and the connections tracked at the end
# (dpctl/ct-get-nconns). Memory per connection: the switch's resident
# memory after the new phase minus before it, over the connections.
# NAT=1: the rules commit with source NAT (ct(nat,table=1), +new ->
# ct(commit,nat(src=10.200.0.1-10.200.0.254)), as tools/ct-bench.sh's
# ct-nat rows), and only the new phase runs (the captured replies are
# addressed to the untranslated sources).
# One PMD each on CPU $CPU (default 1), each switch with its default
# caches (OVS's: EMC, no SMC; flowpath's the same). Needs root, openvswitch-switch-dpdk
# with DPDK's pcap and null drivers (librte-net-null23); huge pages if it
# can have them (else --no-huge). Removes the taps its OVS made.
set -u
FP=${1:?usage: ct-newconns.sh FLOWPATH_BIN}
CPU=${CPU:-1}
HERE=$(cd "$(dirname "$0")" && pwd)
PC=${PCAPS:-/tmp/ovsbench/pcap}
ANCHOR=${ANCHOR:-$HERE/../../shared/anchors/ovs-dpdk}
# TCP=1: the same flows as TCP segments and their acknowledgements
# (ct-pcap.py --tcp; both switches pick the connections up midstream and
# track them as ESTABLISHED once they see both directions).
CAP=ctbi-1000000 CT_PCAP_ARGS=""
if [ "${TCP:-0}" = 1 ]; then CAP=ctbi-tcp-1000000 CT_PCAP_ARGS=--tcp; fi
if [ ! -f "$PC/$CAP-rev3.pcap" ]; then
  mkdir -p "$PC"
  [ -f "$PC/flows-1000000-rr.parts" ] || python3 "$ANCHOR/gen-pcap.py" -o "$PC/flows-1000000-rr" flows --n 1000000 --order rr >/dev/null
  python3 "$HERE/ct-pcap.py" $CT_PCAP_ARGS "$PC/flows-1000000-rr.parts" "$PC/$CAP" || exit 1
fi
# Four shared mempools of 262,144 mbufs of up to 6 KB for the loop phase.
OVS_MEM_MB=${OVS_MEM_MB:-6144}
W=${W:-5} M=${M:-3} R=${R:-3}
. "$HERE/ovs-dpdk-env.sh" ctnew
NAT=${NAT:-0}
if [ "$NAT" = 1 ]; then
cat > $B/ct.flows <<'EOF'
table=0,priority=1,actions=drop
table=0,priority=100,ip,ct_state=-trk,actions=ct(nat,table=1)
table=1,priority=100,ip,ct_state=+trk+new,actions=ct(commit,nat(src=10.200.0.1-10.200.0.254)),output:5
table=1,priority=100,ip,ct_state=+trk+est,actions=output:5
table=1,priority=1,actions=drop
EOF
else
cat > $B/ct.flows <<'EOF'
table=0,priority=1,actions=drop
table=0,priority=100,ip,ct_state=-trk,actions=ct(table=1)
table=1,priority=100,ip,ct_state=+trk+new,actions=ct(commit),output:5
table=1,priority=100,ip,ct_state=+trk+est,actions=output:5
table=1,priority=1,actions=drop
EOF
fi
# (%.0f: awk's %d stops at 2^31 - 1, below a 2.6 GHz clock.)
HZ=$(awk -F: '/^cpu MHz/{printf "%.0f", $2 * 1e6; exit}' /proc/cpuinfo)
# phase CTL-COMMAND...: waits until no more packets arrive (a second
# without), prints "packets cycles/packet".
phase() {
  replay_done 120 "$@"
  "$@" dpif-netdev/pmd-stats-show | awk '
    /packets received/ {p+=$3}
    /avg processing cycles per packet/ {if ($6+0 > 0) {a=$6}}
    END {printf "%d %s\n", p, a}'
}
# loop CTL...: after W s, R intervals of M s; prints "Mpps,Mpps,... cycles/packet".
loop() {
  sleep "$W"
  local r out="" p a
  for r in $(seq "$R"); do
    "$@" dpif-netdev/pmd-stats-clear >/dev/null
    sleep "$M"
    read -r p a <<<"$("$@" dpif-netdev/pmd-stats-show | awk '
      /packets received/ {p+=$3}
      /avg processing cycles per packet/ {if ($6+0 > 0) {a=$6}}
      END {printf "%d %s\n", p, a}')"
    out="$out${out:+,}$(awk -v p="$p" -v m="$M" 'BEGIN{printf "%.2f", p / m / 1e6}')"
  done
  echo "$out $a"
}
loop_row() { # switch "Mpps,..." cycles/pkt conns
  local mean; mean=$(echo "$2" | tr , '\n' | awk '{s+=$1; n++} END{printf "%.2f", s / n}')
  printf '| %s | loop (established, looped) | Mpps %s (mean %s) | %s | %s | %s |\n' "$1" "$2" "$mean" "$3" "$mean" "$4"
}
rss_kb() { awk '/VmRSS/{print $2}' /proc/$1/status; }
row() { # switch phase packets cycles/pkt conns
  local rate; rate=$(awk -v a="$4" -v hz=$HZ 'BEGIN{ if (a > 0) printf "%.2f", hz / a / 1e6; else print "-" }')
  printf '| %s | %s | %s | %s | %s | %s |\n' "$1" "$2" "$3" "$4" "$rate" "$5"
}
printf 'TSC %s MHz (from /proc/cpuinfo)\n\n' $((HZ / 1000000))
printf '| switch | phase | packets | avg processing cycles/packet | Mpps per busy core | connections after |\n|---|---|---|---|---|---|\n'
# flowpath
"$FP" switch --rules $B/ct.flows --port 5=null --pmd-cpus $CPU --ctl $B/fp.ctl >$B/fp.log 2>&1 & pid=$!
for _ in $(seq 100); do [ -S $B/fp.ctl ] && break; sleep 0.1; done
C="$FP ctl --ctl $B/fp.ctl"
sleep 1; r0=$(rss_kb $pid)
for i in 0 1 2 3; do $C dpctl/add-if $((i + 1))=pcap:$PC/$CAP-fwd$i.pcap >/dev/null; done
read -r p a <<<"$(phase $C)"; n=$($C dpctl/ct-get-nconns | tr -d '\n')
row flowpath new "$p" "$a" "$n"
# (A pcap: port holds its whole capture: removed before the count.)
for i in 1 2 3 4; do $C dpctl/del-if $i >/dev/null; done
sleep 1; r1=$(rss_kb $pid)
fp_mem=$(( (r1 - r0) * 1024 / (n > 0 ? n : 1) ))
$C dpif-netdev/pmd-stats-clear >/dev/null
if [ "$NAT" != 1 ]; then
  for i in 0 1 2 3; do $C dpctl/add-if $((i + 6))=pcap:$PC/$CAP-rev$i.pcap >/dev/null; done
  read -r p a <<<"$(phase $C)"; n=$($C dpctl/ct-get-nconns | tr -d '\n')
  row flowpath reply "$p" "$a" "$n"
  for i in 6 7 8 9; do $C dpctl/del-if $i >/dev/null; done
  for i in 0 1 2 3; do $C dpctl/add-if $((i + 1))=pcap:$PC/$CAP-fwd$i.pcap,loop >/dev/null; done
  read -r l a <<<"$(loop $C)"; n=$($C dpctl/ct-get-nconns | tr -d '\n')
  loop_row flowpath "$l" "$a" "$n"
fi
stop
# OVS-DPDK
ovs_mem=-
if [ -x "$VSWITCHD" ] && ovs_start; then
  $V add-br br0 -- set bridge br0 datapath_type=netdev other_config:disable-in-band=true
  $V add-port br0 null0 -- set Interface null0 type=dpdk options:dpdk-devargs=net_null0,no-rx=1 ofport_request=5
  ovs-ofctl del-flows br0; ovs-ofctl add-flows br0 $B/ct.flows
  op=$(cat $B/ovs-vswitchd.pid); sleep 1; r0=$(rss_kb $op)
  $A dpif-netdev/pmd-stats-clear >/dev/null
  args=(); for i in 0 1 2 3; do
    args+=(-- add-port br0 f$i -- set Interface f$i type=dpdk "options:dpdk-devargs=net_pcap$i,rx_pcap=$PC/$CAP-fwd$i.pcap" ofport_request=$((i + 1)))
  done
  $V "${args[@]}"
  read -r p a <<<"$(phase $A)"; n=$($A dpctl/ct-get-nconns | tr -d '\n'); r1=$(rss_kb $op)
  row "OVS-DPDK 3.1" new "$p" "$a" "$n"
  ovs_mem=$(( (r1 - r0) * 1024 / (n > 0 ? n : 1) ))
  if [ "$NAT" = 1 ]; then
    stop
    printf '\nresident memory per connection (bytes): flowpath %s, OVS-DPDK 3.1 %s\n' "$fp_mem" "$ovs_mem"
    exit 0
  fi
  $A dpif-netdev/pmd-stats-clear >/dev/null
  args=(); for i in 0 1 2 3; do
    args+=(-- add-port br0 r$i -- set Interface r$i type=dpdk "options:dpdk-devargs=net_pcap$((i + 4)),rx_pcap=$PC/$CAP-rev$i.pcap" ofport_request=$((i + 6)))
  done
  $V "${args[@]}"
  read -r p a <<<"$(phase $A)"; n=$($A dpctl/ct-get-nconns | tr -d '\n')
  row "OVS-DPDK 3.1" reply "$p" "$a" "$n"
  args=(); for i in 0 1 2 3; do args+=(-- del-port br0 f$i -- del-port br0 r$i); done
  $V "${args[@]}"
  args=(); for i in 0 1 2 3; do
    args+=(-- add-port br0 l$i -- set Interface l$i type=dpdk "options:dpdk-devargs=net_pcap$((i + 8)),rx_pcap=$PC/$CAP-fwd$i.pcap,infinite_rx=1" mtu_request=$((1500 + 1000 * i)) ofport_request=$((i + 1)))
  done
  $V "${args[@]}"
  for i in 0 1 2 3; do
    e=$($V get Interface l$i error); [ "$e" = "[]" ] || echo "OVS port l$i: $e" >&2
  done
  read -r l a <<<"$(loop $A)"; n=$($A dpctl/ct-get-nconns | tr -d '\n')
  loop_row "OVS-DPDK 3.1" "$l" "$a" "$n"
  stop
fi
printf '\nresident memory per connection (bytes): flowpath %s, OVS-DPDK 3.1 %s\n' "$fp_mem" "$ovs_mem"
