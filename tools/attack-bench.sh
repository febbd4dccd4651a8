#!/usr/bin/env bash
# attack-bench.sh - what legitimate traffic keeps under attack: the TSE and
# new-flow-storm sweeps (attack at 0 %, 1 %, 10 %, 50 % of packets), for
# flowpath with and without its defences, and OVS-DPDK on the same pcaps
# in the same run when its anchor can run (root, openvswitch-switch-dpdk).
#
# flowpath: `flowpath bench --pcap P --rules R --config ...` (one PMD-like
# pinned core, from memory). OVS: ../shared/anchors/ovs-dpdk/ovs-dpdk-bench.sh
# (DPDK net_pcap from memory, one PMD). Legitimate Mpps = total Mpps x
# (1 - share): every packet is processed, attack ones included. Capacity
# kept = total Mpps with the attack / total Mpps without: the share of the
# switch's packet rate the attack leaves (in a replay the attack packets
# take slots from the legitimate ones, so legitimate Mpps alone would fall
# with the share even for a switch the attack costs nothing).
#
# env: OUT (default /tmp/attack-bench), FLOWPATH (binary), ANCHOR,
# NO_OVS=1 to skip OVS, SHARES (default "0 1 10 50").
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
FP=${FLOWPATH:-$ROOT/target/release/flowpath}
ANCHOR=${ANCHOR:-$ROOT/../shared/anchors/ovs-dpdk}
OUT=${OUT:-/tmp/attack-bench}
SHARES=${SHARES:-0 1 10 50}
mkdir -p "$OUT"
[ -x "$FP" ] || (cd "$ROOT" && cargo build --release --quiet)
ovs_ok=false
if [ -z "${NO_OVS:-}" ] && [ -x "$ANCHOR/ovs-dpdk-bench.sh" ] && [ "$(id -u)" = 0 ]; then
  if ! [ -x /usr/lib/openvswitch-switch-dpdk/ovs-vswitchd-dpdk ]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openvswitch-switch-dpdk librte-net-null23 >/dev/null || true
  fi
  [ -x /usr/lib/openvswitch-switch-dpdk/ovs-vswitchd-dpdk ] && ovs_ok=true
fi
exec > >(tee "$OUT/attack-bench.md")
echo "# attack-bench $(date -u +%FT%TZ) commit $(git -C "$ROOT" rev-parse --short HEAD) cpu '$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)'"
echo "| workload | attack share | configuration | total Mpps | legitimate Mpps | capacity kept (total Mpps vs no attack) |"
echo "|---|---|---|---|---|---|"
for wl in tse storm; do
  case $wl in
    tse) configs="ovs-default=emc,emc+mb:8,smc,smc+mb:8"; ovs_args="" ;;
    storm) configs="megaflows-off=emc+nomf,emc+nomf+ub:1,emc+nomf+ub:2"; ovs_args="--no-megaflows" ;;
  esac
  declare -A base=()
  for sh in $SHARES; do
    p="$OUT/$wl-$sh"
    "$FP" gen "$wl" --share "$sh" --flows 1000 --packets 200000 -o "$p.pcap" --rules-out "$p.flows" >/dev/null
    "$FP" bench --pcap "$p.pcap" --rules "$p.flows" --config "$configs" --intervals 2 --json >"$p.json" 2>/dev/null
    rows=$(python3 - "$p.json" "$sh" <<'PY'
import json, sys
v = json.load(open(sys.argv[1])); share = float(sys.argv[2]) / 100
for r in v:
    print(f"{r['config']} {r['mpps']:.3f} {r['mpps'] * (1 - share):.3f}")
PY
)
    while read -r cfg mpps legit; do
      [ "$sh" = 0 ] && base[$cfg]=$mpps
      kept=$(python3 -c "b=float('${base[$cfg]:-0}'); print(f'{100*float($mpps)/b:.0f} %' if b else '-')")
      echo "| $wl | $sh % | flowpath $cfg | $mpps | $legit | $kept |"
    done <<<"$rows"
    if $ovs_ok; then
      o=$("$ANCHOR/ovs-dpdk-bench.sh" -w 3 -m 3 -r 2 $ovs_args --tag "$wl-$sh" "$p.flows" "$p.pcap" 2>/dev/null | grep -o 'MEAN Mpps=[0-9.]*' | cut -d= -f2 | tail -1)
      legit=$(python3 -c "print(f'{float(\"${o:-0}\") * (1 - $sh/100):.3f}')")
      [ "$sh" = 0 ] && base[ovs]=${o:-0}
      kept=$(python3 -c "b=float('${base[ovs]:-0}'); print(f'{100*float(\"${o:-0}\")/b:.0f} %' if b else '-')")
      echo "| $wl | $sh % | OVS-DPDK (default$ovs_args) | ${o:-?} | $legit | $kept |"
    fi
  done
  unset base
done
python3 "$ROOT/tools/plot-attack.py" "$OUT/attack-bench.md" "$OUT/attack-sweep.svg" && echo "plot: $OUT/attack-sweep.svg"
