#!/bin/bash
# Times `ovs-ofctl` flow-table commands against `flowpath switch` and
# against Open vSwitch 3.1 (tools/ovs-sandbox.sh), the same files, one
# after the other, in one run:
#   add-flows N flows, replace-flows (every flow's actions change),
#   --bundle replace-flows back, --bundle add-flows into an empty table.
#
#   tools/openflow-bench.sh [N_FLOWS (100000)] [RUNS (2)]
#
# Each figure is wall / switch CPU / ovs-ofctl CPU seconds (the switch's
# user+system time from /proc, ovs-ofctl's from /usr/bin/time).
#
# Needs a release build (cargo build --release), Debian's
# openvswitch-switch and /usr/bin/time. Everything lives in a temporary directory; both
# switches are stopped by the PIDs this script started.
set -euo pipefail
N=${1:-100000}
RUNS=${2:-2}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=$ROOT/target/release/flowpath
[ -x "$BIN" ] || { echo "build first: cargo build --release" >&2; exit 1; }
command -v ovs-vswitchd >/dev/null || { echo "needs openvswitch-switch" >&2; exit 1; }
TMP=$(mktemp -d /tmp/ofbench.XXXXXX)
FP_PID=
cleanup() {
    [ -n "$FP_PID" ] && kill "$FP_PID" 2>/dev/null || true
    "$ROOT/tools/ovs-sandbox.sh" stop "$TMP/ovs" >/dev/null 2>&1 || true
    rm -rf "$TMP"
}
trap cleanup EXIT

python3 - "$N" "$TMP" <<'EOF'
import sys
n, d = int(sys.argv[1]), sys.argv[2]
for name, base in (("a", 1), ("b", 2)):
    with open(f"{d}/{name}.flows", "w") as f:
        for i in range(n):
            src = f"10.{(i >> 16) & 255}.{(i >> 8) & 255}.{i & 255}"
            dst = f"172.16.{(i >> 8) & 255}.{i & 255}"
            f.write(f"priority={100 + i % 1000},ip,nw_src={src},nw_dst={dst},"
                    f"actions=output:{(i + base) % 4 + 1}\n")
EOF

mkdir -p "$TMP/fp" "$TMP/ovs"
: > "$TMP/empty.flows"
"$BIN" switch --rules "$TMP/empty.flows" --port 1=null --port 2=null --port 3=null \
    --port 4=null --ctl "$TMP/fp/flowpath.ctl" >"$TMP/fp/log" 2>&1 &
FP_PID=$!
"$ROOT/tools/ovs-sandbox.sh" start 4 "$TMP/ovs" >/dev/null 2>&1
for _ in $(seq 100); do [ -S "$TMP/fp/br0.mgmt" ] && break; sleep 0.1; done

cpu() { # PID: user+system seconds so far
    awk '{printf "%.2f", ($14 + $15) / 100}' "/proc/$1/stat"
}

t() { # DIR ARGS...: "wall/switch-cpu/client-cpu" seconds of one ovs-ofctl command
    local dir=$1; shift
    local pid t0 t1 c0 c1 u
    if [ "$dir" = "$TMP/fp" ]; then pid=$FP_PID; else pid=$(cat "$TMP/ovs/ovs-vswitchd.pid"); fi
    c0=$(cpu "$pid")
    t0=$(date +%s.%N)
    u=$( { OVS_RUNDIR=$dir /usr/bin/time -f "%U %S" ovs-ofctl "$@" >/dev/null; } 2>&1 | tail -1)
    t1=$(date +%s.%N)
    c1=$(cpu "$pid")
    python3 -c "u, s = '$u'.split(); print(f'{$t1 - $t0:.2f}/{$c1 - $c0:.2f}/{float(u) + float(s):.2f}')"
}

declare -A R
for run in $(seq "$RUNS"); do
    for sw in ovs fp; do
        d=$TMP/$sw
        OVS_RUNDIR=$d ovs-ofctl del-flows br0
        R[$sw,add]+="$(t "$d" add-flows br0 "$TMP/a.flows") "
        R[$sw,replace]+="$(t "$d" replace-flows br0 "$TMP/b.flows") "
        R[$sw,breplace]+="$(t "$d" --bundle replace-flows br0 "$TMP/a.flows") "
        OVS_RUNDIR=$d ovs-ofctl del-flows br0
        R[$sw,badd]+="$(t "$d" --bundle add-flows br0 "$TMP/b.flows") "
        n=$(OVS_RUNDIR=$d ovs-ofctl dump-aggregate br0 | sed -n 's/.*flow_count=\([0-9]*\).*/\1/p')
        [ "$n" = "$N" ] || { echo "$sw: $n flows after --bundle add-flows, expected $N" >&2; exit 1; }
    done
done
echo "Seconds per run: wall / the switch's CPU / ovs-ofctl's CPU"
echo "| command ($N flows) | Open vSwitch 3.1 (s) | flowpath (s) |"
echo "|---|---|---|"
for k in add replace breplace badd; do
    case $k in
        add) name="add-flows" ;; replace) name="replace-flows" ;;
        breplace) name="--bundle replace-flows" ;; badd) name="--bundle add-flows" ;;
    esac
    echo "| \`$name\` | ${R[ovs,$k]% } | ${R[fp,$k]% } |"
done
