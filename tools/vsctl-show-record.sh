#!/bin/bash
# Records `ovs-vsctl show` from Open vSwitch 3.1 itself (its userspace
# datapath, ovs-vswitchd from Debian's openvswitch-switch) after the
# ovs-vsctl script that crates/cli/tests/ovsdb_live.rs runs against
# flowpath: a netdev bridge with fail_mode secure, a system port (tag 10,
# then native-untagged with trunks 20 and 30), an afxdp port, a port on a
# missing device, a controller, a second netdev bridge joined to the
# first by a patch pair. The veths' names are written as P1 and P2.
# Everything is made in a private directory and two veth pairs of its
# own; the taps the userspace datapath makes (br0, br-ex, ovs-netdev) are
# deleted at the end (those that were not there before it ran).
#
#   tools/vsctl-show-record.sh > crates/cli/tests/data/vsctl-show-ovs31.txt
set -euo pipefail
B=$(mktemp -d /tmp/vsctlrec.XXXXXX)
P1=vrec$$a P2=vrec$$b
cleanup() {
    for f in vswitchd ovsdb; do
        [ -f "$B/$f.pid" ] && kill "$(cat "$B/$f.pid")" 2>/dev/null || true
    done
    sleep 1
    ip link del "$P1" 2>/dev/null || true
    ip link del "$P2" 2>/dev/null || true
    for d in $TAPS; do ip link del "$d" 2>/dev/null || true; done
    rm -rf "$B"
}
# The userspace datapath's taps this run makes (not those there before).
TAPS=""
for d in br0 br-ex ovs-netdev; do ip link show "$d" >/dev/null 2>&1 || TAPS="$TAPS $d"; done
trap cleanup EXIT
ip link add "$P1" type veth peer name "${P1}x"
ip link add "$P2" type veth peer name "${P2}x"
for i in "$P1" "${P1}x" "$P2" "${P2}x"; do ip link set "$i" up; done
ovsdb-tool create "$B/conf.db" /usr/share/openvswitch/vswitch.ovsschema
ovsdb-server "$B/conf.db" --remote=punix:"$B/db.sock" --pidfile="$B/ovsdb.pid" \
    --unixctl="$B/ovsdb.ctl" --detach --no-chdir --log-file="$B/ovsdb.log"
V="ovs-vsctl --db=unix:$B/db.sock --timeout=20"
$V --no-wait init
/usr/lib/openvswitch-switch/ovs-vswitchd unix:"$B/db.sock" --pidfile="$B/vswitchd.pid" \
    --unixctl="$B/vswitchd.ctl" --detach --no-chdir --log-file="$B/vswitchd.log" -vconsole:off
$V add-br br0 -- set bridge br0 datapath_type=netdev fail_mode=secure
$V add-port br0 "$P1" -- set interface "$P1" ofport_request=1
$V add-port br0 "$P2" -- set interface "$P2" type=afxdp options:xdp-mode=generic ofport_request=2
$V add-port br0 fpnosuchdev 2>/dev/null || true
$V set Port "$P1" tag=10
$V set-controller br0 tcp:127.0.0.1:1
$V set Port "$P1" vlan_mode=native-untagged trunks=20,30
$V add-br br-ex -- set bridge br-ex datapath_type=netdev
$V add-port br0 patch-ex -- set Interface patch-ex type=patch options:peer=patch-int \
    -- add-port br-ex patch-int -- set Interface patch-int type=patch options:peer=patch-ex
sleep 2
$V show | sed "s/$P1/P1/g; s/$P2/P2/g"
