#!/bin/bash
# usage: ab.sh pcapname cfgpair n
P=/tmp/ovsbench/pcap; wl=$1; cfg=$2; n=$3
for k in $(seq 1 $n); do for b in old new; do
/tmp/fp-$b bench --pcap $P/$wl.parts --rules $P/$wl.rules --config $cfg --warmup-ms 1100 --duration-ms 3000 --interleave-ms 50 --json-out /tmp/ab-$b-$k.json -q >/dev/null 2>&1
python3 -c '
import json,sys
r=json.load(open(sys.argv[1])); r=r["results"] if isinstance(r,dict) else r
print(sys.argv[2], " ".join("%s %.2f" % (x["config"], x["mpps"]) for x in r), "auto/best %.3f" % (r[1]["mpps"]/r[0]["mpps"]), r[1]["auto"]["arm"], r[1]["auto"]["switches"])' /tmp/ab-$b-$k.json $b
done; done
