#!/usr/bin/env bash
# switch-path.sh - the running switch against the datapath alone and
# against OVS-DPDK, per PMD, on the same capture and rules, in one run.
#
# For each flow count in FLOWS (round-robin UDP flows, `flowpath gen
# flows`), ROUNDS times:
#   - `flowpath bench --pcap F --rules R --config emc`: the datapath alone
#     (frames replayed from memory into one Switch on a pinned core);
#   - the anchor's pmd-scale.sh with one PMD: `flowpath switch` with a
#     looped `pcap:` rx port and a `null` port, and OVS-DPDK 3.1 with
#     net_pcap (infinite_rx) and net_null, the same rules
#     (`in_port=1,udp -> output:100`), Mpps from pmd-stats-show deltas.
# Both switches run OVS's default cache configuration (EMC, insertion
# 1/100, no second level; OVS with the EMC off at 100,000 flows, its best).
# Prints one line per measurement and the median per column. Root needed
# (OVS-DPDK); apt-get installs openvswitch-switch-dpdk if missing.
#
# env: FLOWPATH (default target/release/flowpath), FLOWS (default
# "1000 100000"), ROUNDS (default 3), ANCHOR (default
# ../shared/anchors/ovs-dpdk), OUT=FILE also appends the lines,
# SECOND=auto|hybrid|smc|... runs flowpath's switch with that
# `--second-level` and its bench with that `--config` (OVS unchanged).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
FP=${FLOWPATH:-$ROOT/target/release/flowpath}
SECOND=${SECOND:-}
FLOWS=${FLOWS:-1000 100000}
ROUNDS=${ROUNDS:-3}
ANCHOR=${ANCHOR:-$ROOT/../shared/anchors/ovs-dpdk}
OUT=${OUT:-/dev/null}
[ -x /usr/lib/openvswitch-switch-dpdk/ovs-vswitchd-dpdk ] || {
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openvswitch-switch-dpdk librte-net-null23 librte-net-pcap23 >/dev/null
}
[ -x "$FP" ] || (cd "$ROOT" && cargo build --release --quiet -p flowpath-cli)
W=$(mktemp -d /tmp/switch-path.XXXX)
# A userspace Open vSwitch leaves its bridge's taps (br0, ovs-netdev) in
# the root namespace: remove those this run created.
ovs_taps=""
for d in br0 ovs-netdev; do ip link show "$d" >/dev/null 2>&1 || ovs_taps="$ovs_taps $d"; done
drop_taps() { for d in $ovs_taps; do ip link del "$d" 2>/dev/null || true; done; }
# The anchor's script reserves huge pages and leaves them: give them back.
huge_before=$(cat /proc/sys/vm/nr_hugepages)
trap 'drop_taps; rm -rf "$W"; echo "$huge_before" >/proc/sys/vm/nr_hugepages 2>/dev/null || true' EXIT
say() { echo "$*"; echo "$*" >>"$OUT"; echo "$*" >>"$W/all"; }

printf 'priority=10,in_port=1,udp,actions=output:100\npriority=0,actions=drop\n' >"$W/r.flows"
SW=$FP; CONFIG=emc
if [ -n "$SECOND" ]; then
  # The anchor's script starts `$SW switch ...`: a wrapper adds the tier.
  SW=$W/flowpath-$SECOND; CONFIG=$SECOND
  printf '#!/bin/sh\nif [ "$1" = switch ]; then shift; exec "%s" switch --second-level %s "$@"; fi\nexec "%s" "$@"\n' \
    "$FP" "$SECOND" "$FP" >"$SW"
  chmod +x "$SW"
fi
for f in $FLOWS; do
  "$FP" gen flows --flows "$f" --order rr -o "$W/f$f.pcap" --rules-out /dev/null >/dev/null
done
say "# switch-path $(date -u +%FT%TZ) commit $(git -C "$ROOT" rev-parse --short HEAD) second-level=${SECOND:-none} cpu '$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)' nproc=$(nproc)"
for r in $(seq "$ROUNDS"); do
  for f in $FLOWS; do
    b=$("$FP" bench --pcap "$W/f$f.pcap" --rules "$W/r.flows" --config "$CONFIG" --duration-ms 3000 --json -q \
        | python3 -c 'import json,sys; print(round(json.load(sys.stdin)[0]["mpps"], 2))')
    line=$(NS=1 FLOWS=$f bash "$ANCHOR/pmd-scale.sh" "$SW" 2>/dev/null | grep '^flows=' | tail -1)
    sw=$(sed -n 's/.*flowpath=\([0-9.]*\).*/\1/p' <<<"$line")
    ovs=$(sed -n 's/.*OVS=\([0-9.]*\).*/\1/p' <<<"$line")
    say "round=$r flows=$f bench=$b switch=$sw ovs=$ovs"
  done
done
say "# medians (Mpps): flows bench switch ovs switch/bench switch/ovs"
for f in $FLOWS; do
  grep "^round=.* flows=$f " "$W/all" >"$W/m" || true
  [ -s "$W/m" ] || continue
  python3 - "$f" "$W/m" <<'EOF' | while read -r l; do say "$l"; done
import statistics, sys
f, path = sys.argv[1], sys.argv[2]
cols = {"bench": [], "switch": [], "ovs": []}
for line in open(path):
    kv = dict(p.split("=") for p in line.split() if "=" in p)
    for k in cols:
        try:
            cols[k].append(float(kv[k]))
        except (KeyError, ValueError):
            pass
m = {k: statistics.median(v) if v else float("nan") for k, v in cols.items()}
print(f"flows={f} bench={m['bench']:.2f} switch={m['switch']:.2f} ovs={m['ovs']:.2f} "
      f"switch/bench={m['switch'] / m['bench']:.2f} switch/ovs={m['switch'] / m['ovs']:.2f}")
EOF
done
