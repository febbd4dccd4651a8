#!/usr/bin/env bash
# tunnel-bench.sh FLOWPATH_BIN - VXLAN decapsulation and encapsulation
# (KIND=geneve or KIND=gre: those tunnels instead, key 5, no options),
# flowpath and OVS-DPDK 3.1 side by side in one run, one PMD each, traffic
# replayed from memory (looped pcaps), at 1, 1,000 and 100,000 inner flows.
#   decap: the underlay port replays VXLAN packets to the endpoint
#          10.99.0.1 (tools/pcap-encap.py over `flowpath gen flows`); rule
#          in_port=10 (the VXLAN port) -> output to a null port.
#   encap: a port replays the inner frames; rule -> output to the VXLAN
#          port (remote 10.99.0.2, its neighbour set by hand); the
#          underlay is a null port.
#   flowpath: flowpath switch --underlay pcap:...|null,ip=10.99.0.1/24
#   OVS:      br-int (VXLAN port, net_pcap/net_null ports) and br-phy
#             (net_pcap or net_null underlay port, 10.99.0.1/24 on its
#             LOCAL tap, MAC fixed), ovs/route and tnl/neigh as OVS's own
#             tunnel tests set them.
# flowpath runs once per entry of SECOND (default "none auto": OVS's
# default tiers, and the EMC and hybrid table switched by measurement;
# `--second-level`), one column each; the ratios are each column's over OVS.
# Mpps from pmd-stats-show's "packets received" over $T s after $W s of
# warm-up. Needs root, openvswitch-switch-dpdk and librte-net-pcap/null
# (huge pages if it can have them, else --no-huge; shared mempools: a
# looped capture of 100,000 frames needs them). Removes the br-phy/br-int
# taps its OVS made and sets the huge page count back.
set -u
FP=${1:?usage: tunnel-bench.sh FLOWPATH_BIN}
FLOWS=${FLOWS:-"1 1000 100000"}; W=${W:-4}; T=${T:-3}; CPU=${CPU:-1}
SECOND=${SECOND:-"none auto"}; KIND=${KIND:-vxlan}
case $KIND in vxlan|geneve|gre) ;; *) echo "KIND must be vxlan, geneve or gre" >&2; exit 2 ;; esac
HERE=$(cd "$(dirname "$0")" && pwd)
VSWITCHD=${VSWITCHD:-/usr/lib/openvswitch-switch-dpdk/ovs-vswitchd-dpdk}
SCHEMA=/usr/share/openvswitch/vswitch.ovsschema
B=$(mktemp -d /tmp/tnlbench.XXXX)
export OVS_RUNDIR=$B OVS_LOGDIR=$B OVS_DBDIR=$B OVS_SYSCONFDIR=$B
V="ovs-vsctl --db=unix:$B/db.sock --timeout=60"
A="ovs-appctl -t $B/ovs-vswitchd.ctl"
pid=""
stop() { [ -n "$pid" ] && { kill -INT "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; pid=""; }
  for d in ovs-vswitchd ovsdb-server; do [ -f $B/$d.pid ] || continue; p=$(cat $B/$d.pid); kill $p 2>/dev/null
    for _ in $(seq 50); do kill -0 $p 2>/dev/null || break; sleep 0.1; done; rm -f $B/$d.pid; done
  ip link del br-phy 2>/dev/null; ip link del br-int 2>/dev/null; ip link del ovs-netdev 2>/dev/null; true; }
HUGE_BEFORE=$(cat /proc/sys/vm/nr_hugepages)
trap 'stop; umount $B/huge 2>/dev/null; rm -rf $B; echo $HUGE_BEFORE > /proc/sys/vm/nr_hugepages 2>/dev/null' EXIT
mkdir -p $B/huge
if echo 2048 > /proc/sys/vm/nr_hugepages 2>/dev/null && [ "$(awk '/HugePages_Free/{print $2}' /proc/meminfo)" -ge 1024 ] \
   && mount -t hugetlbfs nodev $B/huge 2>/dev/null; then HUGE="--huge-dir=$B/huge"; else HUGE="--no-huge --legacy-mem -m 4096 --iova-mode=va"; fi
mpps() { python3 -c "import sys; print(round((int(sys.argv[2])-int(sys.argv[1]))/float(sys.argv[3])/1e6,2))" "$1" "$2" "$T"; }
rx_sum() { awk '/packets received/{s+=$3} END{print s+0}'; }
measure() { # CTL-COMMAND...: Mpps of packets received
  sleep $W; local a b; a=$("$@" dpif-netdev/pmd-stats-show | rx_sum); sleep $T; b=$("$@" dpif-netdev/pmd-stats-show | rx_sum); mpps $a $b; }
ovs_start() {
  rm -f $B/conf.db $B/*.log
  ovsdb-tool create $B/conf.db $SCHEMA
  ovsdb-server $B/conf.db --remote=punix:$B/db.sock --pidfile=$B/ovsdb-server.pid --detach --no-chdir --log-file=$B/ovsdb.log -vconsole:off
  $V --no-wait init
  $V --no-wait set Open_vSwitch . other_config:dpdk-init=true "other_config:dpdk-extra=--no-pci --file-prefix=tnlb$$ $HUGE" \
    other_config:pmd-cpu-mask=$(printf '0x%x' $((1 << CPU)))
  "$VSWITCHD" unix:$B/db.sock --pidfile=$B/ovs-vswitchd.pid --unixctl=$B/ovs-vswitchd.ctl --detach --no-chdir --log-file=$B/vswitchd.log -vconsole:off \
    || { echo "ovs-vswitchd failed: $(grep -E 'ERR|EMER' $B/vswitchd.log | head -3)"; return 1; }
  $V add-br br-phy -- set bridge br-phy datapath_type=netdev other_config:hwaddr=02:99:00:00:00:01
  $V add-br br-int -- set bridge br-int datapath_type=netdev fail_mode=secure
  $V add-port br-int vx -- set interface vx type=$KIND options:remote_ip=10.99.0.2 options:key=5 ofport_request=10
  ip addr add 10.99.0.1/24 dev br-phy; ip link set br-phy up
  $A tnl/neigh/set br-phy 10.99.0.2 02:99:00:00:00:02 >/dev/null
}
echo "# $KIND"
printf '| workload | inner flows |'; for c in $SECOND; do printf ' flowpath %s Mpps |' "$c"; done
printf ' OVS-DPDK 3.1 Mpps | ratios |\n|---|---|'; for c in $SECOND; do printf -- '---|'; done; printf -- '---|---|\n'
for f in $FLOWS; do
  "$FP" gen flows --flows $f --order rr -o $B/in$f.pcap --rules-out /dev/null >/dev/null 2>&1
  python3 "$HERE/pcap-encap.py" --kind $KIND $B/in$f.pcap $B/vx$f.pcap
  for w in decap encap; do
    if [ $w = decap ]; then
      printf 'in_port=10,actions=output:1\n' > $B/r.flows
      args=(--port 1=null --underlay "pcap:$B/vx$f.pcap,loop,ip=10.99.0.1/24,mac=02:99:00:00:00:01")
    else
      printf 'in_port=1,actions=output:10\n' > $B/r.flows
      args=(--port "1=pcap:$B/in$f.pcap,loop" --underlay "null,ip=10.99.0.1/24,mac=02:99:00:00:00:01")
    fi
    fpm=()
    for c in $SECOND; do
      "$FP" switch --rules $B/r.flows "${args[@]}" --port 10=$KIND:remote_ip=10.99.0.2,key=5 \
        --second-level "$c" --pmd-cpus $CPU --ctl $B/fp.ctl --flow-limit 1000000 >$B/fp.log 2>&1 & pid=$!
      for _ in $(seq 50); do [ -S $B/fp.ctl ] && break; sleep 0.1; done
      "$FP" ctl --ctl $B/fp.ctl tnl/neigh/set br0 10.99.0.2 02:99:00:00:00:02 >/dev/null
      fpm+=("$(measure "$FP" ctl --ctl $B/fp.ctl)"); stop; rm -f $B/fp.ctl
    done
    om="-"
    if [ -x "$VSWITCHD" ] && ovs_start; then
      if [ $w = decap ]; then
        $V add-port br-phy phy0 -- set Interface phy0 type=dpdk "options:dpdk-devargs=net_pcap0,rx_pcap=$B/vx$f.pcap,infinite_rx=1"
        $V add-port br-int out0 -- set Interface out0 type=dpdk "options:dpdk-devargs=net_null0,no-rx=1" ofport_request=1
        ovs-ofctl add-flow br-int in_port=10,actions=output:1
      else
        $V add-port br-phy phy0 -- set Interface phy0 type=dpdk "options:dpdk-devargs=net_null0,no-rx=1"
        $V add-port br-int in0 -- set Interface in0 type=dpdk "options:dpdk-devargs=net_pcap0,rx_pcap=$B/in$f.pcap,infinite_rx=1" ofport_request=1
        ovs-ofctl add-flow br-int in_port=1,actions=output:10
      fi
      om=$(measure $A)
      [ -n "${DEBUG:-}" ] && $A dpctl/dump-flows | cut -c1-200 >&2
      stop
    fi
    ratio=$(python3 -c "import sys; o=sys.argv[1]; print(' / '.join(str(round(float(x)/float(o),2)) for x in sys.argv[2:]) if o not in ('-','0','0.0') else '-')" "$om" "${fpm[@]}")
    printf '| %s | %s |' $w $f; printf ' %s |' "${fpm[@]}"; printf ' %s | %s |\n' "$om" "$ratio"
  done
done
