#!/bin/bash
# Alternating A/B of flowpath binaries on flows-rr 1,000,000 (DFC and SMC):
# each round runs every binary once, one `flowpath bench` launch each, and
# prints "BINARY dfc=MPPS(CYCLES) smc=MPPS(CYCLES)". Launches vary far more
# than intervals on a shared VM, so compare medians over many rounds.
#
#   benchmarks/memory-ab/ab.sh ROUNDS BIN_A BIN_B [...]
#
# The capture is generated (with the first binary) into $DIR (default
# /tmp/mf) when missing.
set -euo pipefail
R=$1
shift
DIR=${DIR:-/tmp/mf}
mkdir -p "$DIR"
if [ ! -f "$DIR/f1m.pcap" ]; then
    "$1" gen flows --flows 1000000 --order rr -o "$DIR/f1m.pcap" --rules-out "$DIR/f1m.rules" >/dev/null
fi
for _ in $(seq "$R"); do
    for b in "$@"; do
        out=$("$b" bench --pcap "$DIR/f1m.pcap" --rules "$DIR/f1m.rules" --config dfc,smc \
            --warmup-ms 300 --duration-ms 1000 --intervals 3 2>&1 |
            grep -E '^\| f1m +\| (dfc|smc)' |
            awk -F'|' '{gsub(/ /,"",$3); gsub(/ /,"",$4); gsub(/ /,"",$5); printf "%s=%s(%s) ", $3, $4, $5}')
        echo "$(basename "$b") $out"
    done
done
