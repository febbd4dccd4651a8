#!/usr/bin/env bash
# pvp.sh FLOWPATH_BIN - PVP (physical -> VM -> physical), flowpath and
# OVS-DPDK 3.1 side by side in one run, one PMD each, the same guest.
#
#   P: port 1 replays a capture from memory (flowpath `pcap:F,loop`,
#      OVS `net_pcap` with infinite_rx): the "wire" of the set-up;
#   V: port 2 is a vhost-user port in client mode (flowpath
#      `vhost-user:SOCK,client`, OVS `dpdkvhostuserclient`); the guest is
#      DPDK's testpmd with a virtio-user device (server=1), `io` forwarding
#      with `--port-topology=loop`: every frame it receives goes back;
#   P: port 3 is a null port (flowpath `null`, OVS `net_null`): the wire
#      the returning frames leave on.
# Rules: in_port=1 -> output:2, in_port=2 -> output:3. Mpps delivered =
# frames out of port 3 per second over $T s after $W s of warm-up, the
# median of $ROUNDS rounds (default 3; flowpath and OVS alternate); the
# switch's PMD runs on CPU $CPU (default 1), the guest on CPU $GUEST_CPU
# (default 0; its main and forwarding lcores share that CPU).
# $VDEV_EXTRA is appended to the guest's virtio-user device: e.g.
# ",packed_vq=1" for packed virtqueues (both switches then run them).
# Workloads ($WORKLOADS): "1 1000 100000" flows of 64-byte UDP frames
# (`flowpath gen flows --order rr`), and "sfr": TRex's SFR mix
# (`flowpath gen sfr -d 1`: one second of flow starts, client-to-server
# capture, mixed sizes).
# Also printed per row: frames the switch could not hand to the guest
# (its receive ring full) per second.
# Needs root, openvswitch-switch-dpdk, dpdk-testpmd (Debian dpdk) with the
# virtio-user, pcap and null drivers; no huge pages needed (uses them if
# it can have them). Removes the taps its OVS made.
set -u
FP=${1:?usage: pvp.sh FLOWPATH_BIN}
WORKLOADS=${WORKLOADS:-"1 1000 100000 sfr"}; W=${W:-4}; T=${T:-4}; ROUNDS=${ROUNDS:-3}; CPU=${CPU:-1}; GUEST_CPU=${GUEST_CPU:-0}
HERE=$(cd "$(dirname "$0")" && pwd)
TESTPMD=${TESTPMD:-dpdk-testpmd}
. "$HERE/ovs-dpdk-env.sh" pvp
gpid=""
# (The guest's stdin is a fifo the script holds open: closing it is the
# Enter that stops testpmd.)
stop_hook() { [ -n "$gpid" ] && { exec 8>&-; for _ in $(seq 50); do kill -0 "$gpid" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "$gpid" 2>/dev/null; wait "$gpid" 2>/dev/null; gpid=""; }; true; }
if [ -n "$HUGE_PAGES" ]; then GHUGE="--huge-dir=$B/huge -m 512 --single-file-segments"; else GHUGE="--no-huge -m 512"; fi
median() { python3 -c "import sys,statistics; v=[float(x) for x in sys.argv[1:] if x not in ('-','')]; print(round(statistics.median(v),2) if v else '-')" "$@"; }
rate() { python3 -c "import sys; print(round((int(sys.argv[2])-int(sys.argv[1]))/float(sys.argv[3])/1e6,2))" "$1" "$2" "$T"; }
# The guest: testpmd as the vhost-user server on $B/vm.sock, looping frames back.
guest() {
  rm -f $B/vm.sock $B/guest.in; mkfifo $B/guest.in
  taskset -c $GUEST_CPU "$TESTPMD" --lcores "0@$GUEST_CPU,1@$GUEST_CPU" $GHUGE --no-pci --file-prefix=pvp$$ \
    --vdev "net_virtio_user0,path=$B/vm.sock,server=1,queues=1${VDEV_EXTRA:-}" -- --no-numa --total-num-mbufs=16384 \
    --forward-mode=io --port-topology=loop --auto-start < $B/guest.in > $B/guest.log 2>&1 & gpid=$!
  exec 8>$B/guest.in
  for _ in $(seq 100); do [ -S $B/vm.sock ] && return 0; sleep 0.1; done
  echo "the guest did not come up: $(tail -3 $B/guest.log)" >&2; return 1
}
# flowpath's counters of port N: "TX packets" and "TX dropped" from dpctl/show.
fp_port() { "$FP" ctl --ctl $B/fp.ctl dpctl/show | awk -v p="port $1:" '$0 ~ "^  "p {f=1; next} f && /TX packets/ {
  split($2,a,":"); split($4,b,":"); print a[2], b[2]; exit}'; }
# OVS's counters of OpenFlow port N: tx packets and tx drops from dump-ports.
ovs_port() { ovs-ofctl dump-ports br0 "$1" | awk '/tx pkts/ {gsub(/[^0-9 ]/," "); print $1, $3; exit}'; }
printf '| workload | flowpath Mpps | OVS-DPDK 3.1 Mpps | ratio | to-guest drops Mpps (flowpath / OVS) |\n|---|---|---|---|---|\n'
printf 'in_port=1,actions=output:2\nin_port=2,actions=output:3\n' > $B/r.flows
for w in $WORKLOADS; do
  if [ "$w" = sfr ]; then
    "$FP" gen sfr -d 1 -o $B/sfr >/dev/null 2>&1; cap=$B/sfr-c2s.pcap; label="SFR mix (client to server)"
  else
    "$FP" gen flows --flows $w --order rr -o $B/in$w.pcap --rules-out /dev/null >/dev/null 2>&1; cap=$B/in$w.pcap; label="$w flows, 64 B"
  fi
  FPM=(); FPD=(); OM=(); OD=()
  for round in $(seq $ROUNDS); do
  # flowpath
  fpm="-"; fpd="-"
  if guest; then
    "$FP" switch --rules $B/r.flows --port "1=pcap:$cap,loop" --port "2=vhost-user:$B/vm.sock,client" --port 3=null \
      --pmd-cpus $CPU --ctl $B/fp.ctl --flow-limit 1000000 >$B/fp.log 2>&1 & pid=$!
    sleep $W; read -r a da <<<"$(fp_port 3)"; read -r _ ga <<<"$(fp_port 2)"
    sleep $T; read -r b db <<<"$(fp_port 3)"; read -r _ gb <<<"$(fp_port 2)"
    fpm=$(rate "${a:-0}" "${b:-0}"); fpd=$(rate "${ga:-0}" "${gb:-0}")
    [ -n "${DEBUG:-}" ] && { "$FP" ctl --ctl $B/fp.ctl dpctl/show; tail -5 $B/guest.log; } >&2
    stop; rm -f $B/fp.ctl
  fi
  # OVS-DPDK
  om="-"; od="-"
  if [ -x "$VSWITCHD" ] && guest; then
    if ovs_start "other_config:dpdk-lcore-mask=$(printf '0x%x' $((1 << GUEST_CPU)))"; then
      $V add-br br0 -- set bridge br0 datapath_type=netdev fail_mode=secure other_config:disable-in-band=true
      $V add-port br0 phy0 -- set Interface phy0 type=dpdk "options:dpdk-devargs=net_pcap0,rx_pcap=$cap,infinite_rx=1" ofport_request=1
      $V add-port br0 vhu0 -- set Interface vhu0 type=dpdkvhostuserclient "options:vhost-server-path=$B/vm.sock" ofport_request=2
      $V add-port br0 out0 -- set Interface out0 type=dpdk "options:dpdk-devargs=net_null0,no-rx=1" ofport_request=3
      ovs-ofctl del-flows br0; ovs-ofctl add-flows br0 $B/r.flows
      sleep $W; read -r a da <<<"$(ovs_port 3)"; read -r _ ga <<<"$(ovs_port 2)"
      sleep $T; read -r b db <<<"$(ovs_port 3)"; read -r _ gb <<<"$(ovs_port 2)"
      om=$(rate "${a:-0}" "${b:-0}"); od=$(rate "${ga:-0}" "${gb:-0}")
      [ -n "${DEBUG:-}" ] && { $A dpif-netdev/pmd-stats-show; ovs-ofctl dump-ports br0; tail -5 $B/guest.log; } >&2
    fi
    stop
  fi
  [ -n "${VERBOSE:-}" ] && echo "  round $round, $label: flowpath $fpm, OVS $om" >&2
  FPM+=("$fpm"); FPD+=("$fpd"); OM+=("$om"); OD+=("$od")
  done
  fpm=$(median "${FPM[@]}"); fpd=$(median "${FPD[@]}"); om=$(median "${OM[@]}"); od=$(median "${OD[@]}")
  ratio=$(python3 -c "import sys; print(round(float(sys.argv[1])/float(sys.argv[2]),2) if sys.argv[2] not in ('-','0','0.0') and sys.argv[1] != '-' else '-')" "$fpm" "$om")
  printf '| %s | %s | %s | %s | %s / %s |\n' "$label" "$fpm" "$om" "$ratio" "$fpd" "$od"
done
