#!/bin/bash
# usage: ab-bin.sh OLD NEW ROUNDS WORKLOAD:CONFIG...
# Alternates two flowpath binaries on the parity pcaps (tools/parity.sh's
# /tmp/ovsbench/pcap), one configuration per launch, and prints each
# run's cycles per packet, then the median and best per binary.
old=$1; new=$2; n=$3; shift 3
P=${PCAPS:-/tmp/ovsbench/pcap}
for spec in "$@"; do
  wl=${spec%%:*}; cfg=${spec#*:}
  for k in $(seq 1 $n); do
    for b in "$old" "$new"; do
      "$b" bench --pcap $P/$wl.parts --rules $P/$wl.rules --config $cfg \
        --warmup-ms 1100 --duration-ms 1000 --json-out /tmp/ab-bin.json -q >/dev/null 2>&1
      python3 -c '
import json,sys
r=json.load(open("/tmp/ab-bin.json")); r=r["results"] if isinstance(r,dict) else r
print(sys.argv[1], sys.argv[2], sys.argv[3], "%.1f" % r[0]["avg_processing_cycles_per_packet"])' "$wl" "$cfg" "$b"
    done
  done
done | tee /tmp/ab-bin.txt
python3 - <<'PY'
import statistics as st, collections
d=collections.defaultdict(list)
for l in open("/tmp/ab-bin.txt"):
    wl,cfg,b,c=l.split(); d[(wl,cfg,b)].append(float(c))
for (wl,cfg,b),v in d.items():
    print("%-22s %-10s %-16s median %6.1f best %6.1f  (%d runs)" % (wl,cfg,b,st.median(v),min(v),len(v)))
PY
