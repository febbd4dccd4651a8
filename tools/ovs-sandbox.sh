#!/bin/bash
# Starts (or stops) a private Open vSwitch 3.1 for tools/ovs-compare.py:
# ovsdb-server and ovs-vswitchd --enable-dummy=$DUMMY in DIR (default
# /tmp/ovs-sandbox), a userspace bridge br0 with fail_mode=secure and dummy
# ports p1..pN (OpenFlow port i = datapath port i + 1; br0 LOCAL is
# datapath port 1). Nothing outside DIR is touched; stop kills the two
# daemons by the PIDs they wrote.
#
#   tools/ovs-sandbox.sh start [N_PORTS] [DIR]   # prints the export line
#   tools/ovs-sandbox.sh start-tunnels [N_PORTS] [DIR]
#   tools/ovs-sandbox.sh stop [DIR]
#
# start-tunnels (for ovs-compare.py --tunnels, which adds the tunnel ports,
# the underlay bridge br-phy, routes and neighbours itself): the same, but
# with --enable-dummy (only system devices made dummy, so vxlan, geneve
# and gre ports stay tunnels) and br0 on the dummy datapath, as OVS's own
# tunnel tests (tunnel-push-pop.at) run; datapath ports are then numbered
# as the dummy datapath does (p1..pN: 1..N, LOCAL: 100, tunnel classes:
# their UDP port).
#
# Needs Debian's openvswitch-switch (apt-get install openvswitch-switch).
set -euo pipefail
cmd=${1:-start}
if [ "$cmd" = stop ]; then
    DIR=${2:-/tmp/ovs-sandbox}
else
    N=${2:-4}
    DIR=${3:-/tmp/ovs-sandbox}
fi
export OVS_RUNDIR=$DIR OVS_LOGDIR=$DIR OVS_DBDIR=$DIR OVS_SYSCONFDIR=$DIR
stop() {
    for p in ovs-vswitchd ovsdb-server; do
        if [ -f "$DIR/$p.pid" ]; then
            kill "$(cat "$DIR/$p.pid")" 2>/dev/null || true
            rm -f "$DIR/$p.pid"
        fi
    done
}
DUMMY=override
DPTYPE=netdev
if [ "$cmd" = start-tunnels ]; then
    cmd=start
    DUMMY=system
    DPTYPE=dummy
fi
case $cmd in
stop)
    stop
    ;;
start)
    command -v ovs-vswitchd >/dev/null || { echo "ovs-sandbox: install openvswitch-switch first" >&2; exit 1; }
    stop
    mkdir -p "$DIR"
    rm -f "$DIR/conf.db"
    ovsdb-tool create "$DIR/conf.db" /usr/share/openvswitch/vswitch.ovsschema
    ovsdb-server --detach --no-chdir --pidfile="$DIR/ovsdb-server.pid" \
        --log-file="$DIR/ovsdb-server.log" --remote="punix:$DIR/db.sock" "$DIR/conf.db"
    ovs-vsctl --db="unix:$DIR/db.sock" --no-wait init
    ovs-vswitchd --detach --no-chdir --pidfile="$DIR/ovs-vswitchd.pid" \
        --log-file="$DIR/ovs-vswitchd.log" --enable-dummy=$DUMMY \
        -vvconn -vofproto_dpif -vunixctl "unix:$DIR/db.sock"
    VS="ovs-vsctl --db=unix:$DIR/db.sock"
    $VS add-br br0 -- set bridge br0 datapath_type=$DPTYPE fail_mode=secure \
        protocols=OpenFlow10,OpenFlow11,OpenFlow12,OpenFlow13,OpenFlow14,OpenFlow15
    for i in $(seq 1 "$N"); do
        $VS add-port br0 "p$i" -- set interface "p$i" type=dummy ofport_request="$i"
    done
    echo "export OVS_RUNDIR=$DIR OVS_DBDIR=$DIR; ctl: $DIR/ovs-vswitchd.$(cat "$DIR/ovs-vswitchd.pid").ctl"
    ;;
*)
    echo "usage: $0 start|start-tunnels [N_PORTS] [DIR] | stop [DIR]" >&2
    exit 2
    ;;
esac
