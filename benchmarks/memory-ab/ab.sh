#!/bin/bash
# usage: ab.sh ROUNDS binA binB ...  -> prints per-run Mpps for dfc and smc
R=$1; shift
for r in $(seq $R); do
  for b in "$@"; do
    out=$($b bench --pcap /tmp/mf/f1m.pcap --rules /tmp/mf/f1m.rules --config dfc,smc --warmup-ms 300 --duration-ms 1000 --intervals 3 2>&1 | grep -E '^\| f1m +\| (dfc|smc)' | awk -F'|' '{gsub(/ /,"",$3); gsub(/ /,"",$4); gsub(/ /,"",$5); printf "%s=%s(%s) ", $3, $4, $5}')
    echo "$(basename $b) $out"
  done
done
