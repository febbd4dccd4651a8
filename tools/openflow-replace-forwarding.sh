#!/bin/bash
# The forwarding rate of a running `flowpath switch` while `ovs-ofctl
# --bundle replace-flows` replaces its whole table (N flows, every flow's
# actions changed), against its steady rate.
#
#   tools/openflow-replace-forwarding.sh [N_FLOWS (100000)]
#
# Traffic: 1,000 UDP flows replayed from memory on port 1 (a looping pcap
# port, one PMD), forwarded to a null port 2 by a UDP flow; the table also
# holds N flows on nw_src/nw_dst, so every packet's lookup sees their
# subtables (1,000 megaflows). The ports' transmit counters are read every
# 200 ms with `ovs-ofctl dump-ports`. Needs a release build and
# openvswitch-common (ovs-ofctl). Stops only the switch it started.
set -euo pipefail
N=${1:-100000}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=$ROOT/target/release/flowpath
[ -x "$BIN" ] || { echo "build first: cargo build --release" >&2; exit 1; }
TMP=$(mktemp -d /tmp/ofrepl.XXXXXX)
FP_PID=
cleanup() {
    [ -n "$FP_PID" ] && kill "$FP_PID" 2>/dev/null || true
    wait 2>/dev/null || true
    rm -rf "$TMP"
}
trap cleanup EXIT

"$BIN" gen flows --flows 1000 --packets 100000 -o "$TMP/t.pcap" --rules-out "$TMP/t.flows" >/dev/null
python3 - "$N" "$TMP" <<'EOF'
import sys
n, d = int(sys.argv[1]), sys.argv[2]
for name, base in (("a", 1), ("b", 2)):
    with open(f"{d}/{name}.flows", "w") as f:
        f.write("priority=10,udp,actions=output:2\npriority=0,actions=drop\n")
        for i in range(n):
            src = f"10.{(i >> 16) & 255}.{(i >> 8) & 255}.{i & 255}"
            dst = f"172.16.{(i >> 8) & 255}.{i & 255}"
            f.write(f"priority={100 + i % 1000},ip,nw_src={src},nw_dst={dst},"
                    f"actions=output:{(i + base) % 2 + 2}\n")
EOF
cpu=$(( $(nproc) > 1 ? 1 : 0 ))
"$BIN" switch --rules "$TMP/a.flows" --port "1=pcap:$TMP/t.pcap,loop" --port 2=null \
    --port 3=null --pmd-cpus "$cpu" --ctl "$TMP/flowpath.ctl" >"$TMP/log" 2>&1 &
FP_PID=$!
for _ in $(seq 100); do [ -S "$TMP/br0.mgmt" ] && break; sleep 0.1; done
export OVS_RUNDIR=$TMP

tx() { # the packets ports 2 and 3 transmitted, and the time
    local out
    out=$(ovs-ofctl dump-ports br0)
    echo "$EPOCHREALTIME $(echo "$out" | sed -n 's/.*tx pkts=\([0-9]*\).*/\1/p' | paste -sd+ | bc)"
}
sample() { # SECONDS: samples every 200 ms
    local end=$(( ${EPOCHREALTIME/./} + $1 * 1000000 ))
    while [ "${EPOCHREALTIME/./}" -lt "$end" ]; do
        tx >>"$TMP/samples"
        sleep 0.2
    done
}
sleep 2
echo "steady" >"$TMP/samples"
sample 3
echo "replace" >>"$TMP/samples"
t0=$EPOCHREALTIME
ovs-ofctl --bundle replace-flows br0 "$TMP/b.flows" 2>"$TMP/replace.log" &
REPL=$!
while kill -0 "$REPL" 2>/dev/null; do
    tx >>"$TMP/samples"
    sleep 0.2
done
wait "$REPL"
t1=$EPOCHREALTIME
echo "after" >>"$TMP/samples"
sample 2
python3 - "$TMP/samples" "$t0" "$t1" "$N" <<'EOF'
import sys
path, t0, t1, n = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
phase, rows = None, []
for line in open(path):
    w = line.split()
    if len(w) == 1:
        phase = w[0]
        continue
    rows.append((phase, float(w[0]), int(w[1])))
rates = {}
for (p0, ta, a), (p1, tb, b) in zip(rows, rows[1:]):
    rates.setdefault(p1, []).append((b - a) / (tb - ta) / 1e6)
steady = sorted(rates.get("steady", [0]))[len(rates.get("steady", [0])) // 2]
during = rates.get("replace", [])
print(f"--bundle replace-flows of {n} flows took {t1 - t0:.2f} s")
print(f"steady: {steady:.2f} Mpps (median of {len(rates.get('steady', []))} samples)")
if during:
    print(f"during: mean {sum(during) / len(during):.2f} Mpps, min {min(during):.2f} Mpps "
          f"over {len(during)} samples: mean {100 * sum(during) / len(during) / steady:.0f} %, "
          f"min {100 * min(during) / steady:.0f} % of steady")
after = rates.get("after", [])
if after:
    print(f"after: {sorted(after)[len(after) // 2]:.2f} Mpps")
EOF
