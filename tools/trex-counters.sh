#!/usr/bin/env bash
# trex-counters.sh FLOWPATH_BIN - seed 001's TRex rows: the cache counters
# of flowpath and OVS-DPDK 3.1 on the same TRex SFR traffic, side by side.
#
# Traffic: `flowpath gen sfr -m $M -d $D` (TRex's sfr_delay_10_1g profile
# from ../shared/trex-sfr/, default -m 1 and 2 s of flow starts), replayed
# once, not looped: client-to-server frames on port 1, server-to-client on
# port 2, each port's capture as fast as the switch takes it.
#   flowpath: flowpath switch --port 1=pcap:C2S --port 2=pcap:S2C
#   OVS:      net_pcap ports (rx_pcap, no infinite_rx) on a netdev bridge
# Rules: the seed's bridge, `priority=0,actions=NORMAL`. Four
# configurations: megaflows on/off (OVS: upcall/disable-megaflows;
# flowpath: --no-megaflows) x EMC insertion probability 1/100 (the
# default) and 1/1 (always). Counters from dpif-netdev/pmd-stats-show once
# the replay is over (no more packets received for a second): packets,
# EMC hits, SMC hits, megaflow hits, misses with a successful upcall and
# with a failed one (the slow path refused it: the packet is dropped),
# avg processing cycles per packet. One PMD each on CPU $CPU (default 1).
# Needs root, openvswitch-switch-dpdk with DPDK's pcap driver; huge pages
# if it can have them (else --no-huge). Removes the taps its OVS made.
set -u
FP=${1:?usage: trex-counters.sh FLOWPATH_BIN}
M=${M:-1}; D=${D:-2}; CPU=${CPU:-1}
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/ovs-dpdk-env.sh" trexc
"$FP" gen sfr -m "$M" -d "$D" -o $B/sfr >/dev/null || { echo "flowpath gen sfr failed" >&2; exit 1; }
printf 'priority=0,actions=NORMAL\n' > $B/r.flows
# counters CTL-COMMAND...: waits for the replay to end, then prints
# "packets emc smc megaflow upcalls failed-upcalls cycles/packet" of the
# PMD threads.
counters() {
  replay_done 600 "$@"
  "$@" dpif-netdev/pmd-stats-show | awk '
    /packets received/ {p+=$3} /emc hits/ {e+=$3} /smc hits/ {s+=$3} /megaflow hits/ {m+=$3}
    /miss with success upcall/ {u+=$5} /miss with failed upcall/ {f+=$5}
    /avg processing cycles per packet/ {if ($6+0 > 0) {c=$6}}
    END {printf "%d %d %d %d %d %d %s\n", p, e, s, m, u, f, c}'
}
printf '| switch | megaflows | EMC insert | packets | EMC hits | SMC hits | megaflow hits | upcalls | failed upcalls | avg processing cycles/packet |\n|---|---|---|---|---|---|---|---|---|---|\n'
for mf in on off; do
  for prob in 100 1; do
    # flowpath
    extra=(); [ $mf = off ] && extra+=(--no-megaflows)
    "$FP" switch --rules $B/r.flows --port 1=pcap:$B/sfr-c2s.pcap --port 2=pcap:$B/sfr-s2c.pcap --pmd-cpus $CPU \
      --emc-insert-inv-prob $prob "${extra[@]}" --ctl $B/fp.ctl >$B/fp.log 2>&1 & pid=$!
    for _ in $(seq 100); do [ -S $B/fp.ctl ] && break; sleep 0.1; done
    read -r p e s m u f c <<<"$(counters "$FP" ctl --ctl $B/fp.ctl)"
    stop; rm -f $B/fp.ctl
    printf '| flowpath | %s | 1/%s | %s | %s | %s | %s | %s | %s | %s |\n' $mf $prob "$p" "$e" "$s" "$m" "$u" "$f" "$c"
    # OVS-DPDK
    [ -x "$VSWITCHD" ] || continue
    ovs_start other_config:emc-insert-inv-prob=$prob || { stop; continue; }
    [ $mf = off ] && $A upcall/disable-megaflows >/dev/null
    $V add-br br0 -- set bridge br0 datapath_type=netdev other_config:disable-in-band=true
    ovs-ofctl del-flows br0; ovs-ofctl add-flows br0 $B/r.flows
    # The two ports start replaying as soon as they are added: both in one transaction.
    $V add-port br0 c2s -- set Interface c2s type=dpdk "options:dpdk-devargs=net_pcap0,rx_pcap=$B/sfr-c2s.pcap" ofport_request=1 \
      -- add-port br0 s2c -- set Interface s2c type=dpdk "options:dpdk-devargs=net_pcap1,rx_pcap=$B/sfr-s2c.pcap" ofport_request=2
    read -r p e s m u f c <<<"$(counters $A)"
    stop
    printf '| OVS-DPDK 3.1 | %s | 1/%s | %s | %s | %s | %s | %s | %s | %s |\n' $mf $prob "$p" "$e" "$s" "$m" "$u" "$f" "$c"
  done
done
