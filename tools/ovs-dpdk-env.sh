# ovs-dpdk-env.sh - sourced by the scripts that run OVS-DPDK 3.1 beside
# flowpath (tools/pvp.sh, tools/trex-counters.sh,
# tools/ct-newconns.sh): a private run directory
# $B (mktemp under /tmp, PREFIX given), OVS's environment pointed at it,
# huge pages if the machine can spare them (else --no-huge), and:
#   ovs_start OTHER_CONFIG...  ovsdb-server + ovs-vswitchd-dpdk with DPDK
#                              on, the PMD on CPU $CPU, the extra
#                              Open_vSwitch other_config keys given
#   stop                       stops flowpath ($pid), whatever `stop_hook`
#                              stops (if the script defines one), both OVS
#                              daemons (by the PIDs they wrote), and removes
#                              the br0/ovs-netdev taps that were absent at
#                              the start (only those)
#   replay_done SECS CTL...    waits (at most SECS) until a switch's PMDs
#                              received packets and then none for a
#                              second (dpif-netdev/pmd-stats-show through
#                              CTL...; printed to stderr with DEBUG set)
# Everything is stopped and removed on exit, and the huge page count set
# back to what it was. Needs: set -u, $CPU.
# Usage: . "$HERE/ovs-dpdk-env.sh" PREFIX
VSWITCHD=${VSWITCHD:-/usr/lib/openvswitch-switch-dpdk/ovs-vswitchd-dpdk}
SCHEMA=/usr/share/openvswitch/vswitch.ovsschema
B=$(mktemp -d "/tmp/$1.XXXX")
export OVS_RUNDIR=$B OVS_LOGDIR=$B OVS_DBDIR=$B OVS_SYSCONFDIR=$B
V="ovs-vsctl --db=unix:$B/db.sock --timeout=300"
A="ovs-appctl -t $B/ovs-vswitchd.ctl"
pid=""
ours_taps=""; for t in br0 ovs-netdev; do ip link show "$t" >/dev/null 2>&1 || ours_taps="$ours_taps $t"; done
stop() { declare -F stop_hook >/dev/null && stop_hook
  [ -n "$pid" ] && { kill -INT "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; pid=""; }
  local d q; for d in ovs-vswitchd ovsdb-server; do [ -f $B/$d.pid ] || continue; q=$(cat $B/$d.pid); kill $q 2>/dev/null
    for _ in $(seq 50); do kill -0 $q 2>/dev/null || break; sleep 0.1; done; rm -f $B/$d.pid; done
  for t in $ours_taps; do ip link del "$t" 2>/dev/null; done; true; }
HUGE_BEFORE=$(cat /proc/sys/vm/nr_hugepages)
trap 'stop; umount $B/huge 2>/dev/null; rm -rf $B; echo $HUGE_BEFORE > /proc/sys/vm/nr_hugepages 2>/dev/null' EXIT
mkdir -p $B/huge
# OVS_MEM_MB: DPDK memory for OVS in MB (default 4096): as many 2 MB pages
# are asked for, and used if at least half of them are free; else as much
# ordinary memory (--no-huge).
MEM_MB=${OVS_MEM_MB:-4096}
if echo $((MEM_MB / 2)) > /proc/sys/vm/nr_hugepages 2>/dev/null && [ "$(awk '/HugePages_Free/{print $2}' /proc/meminfo)" -ge $((MEM_MB / 4)) ] \
   && mount -t hugetlbfs nodev $B/huge 2>/dev/null; then HUGE="--huge-dir=$B/huge"; HUGE_PAGES=1
else HUGE="--no-huge --legacy-mem -m $MEM_MB --iova-mode=va"; HUGE_PAGES=""; fi
ovs_start() {
  rm -f $B/conf.db $B/ovsdb.log $B/vswitchd.log
  ovsdb-tool create $B/conf.db $SCHEMA
  ovsdb-server $B/conf.db --remote=punix:$B/db.sock --pidfile=$B/ovsdb-server.pid --detach --no-chdir --log-file=$B/ovsdb.log -vconsole:off
  $V --no-wait init
  $V --no-wait set Open_vSwitch . other_config:dpdk-init=true "other_config:dpdk-extra=--no-pci --file-prefix=ovs$$ $HUGE" \
    other_config:pmd-cpu-mask=$(printf '0x%x' $((1 << CPU))) "$@"
  "$VSWITCHD" unix:$B/db.sock --pidfile=$B/ovs-vswitchd.pid --unixctl=$B/ovs-vswitchd.ctl --detach --no-chdir --log-file=$B/vswitchd.log -vconsole:off \
    || { echo "ovs-vswitchd failed: $(grep -E 'ERR|EMER' $B/vswitchd.log | head -3)" >&2; return 1; }
}
replay_done() { local secs=$1 last=-1 now; shift
  for _ in $(seq "$secs"); do
    now=$("$@" dpif-netdev/pmd-stats-show | awk '/packets received/{s+=$3} END{print s+0}')
    [ "$now" = "$last" ] && [ "$now" != 0 ] && break
    last=$now; sleep 1
  done
  [ -n "${DEBUG:-}" ] && "$@" dpif-netdev/pmd-stats-show >&2; true; }
