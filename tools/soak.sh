#!/usr/bin/env bash
# tools/soak.sh [SECONDS] [OUT_DIR] - the endurance run: the soak test
# (crates/cli/tests/soak.rs) on the release build for SECONDS (default
# 1800), its per-second samples written to OUT_DIR/soak.csv and plotted to
# OUT_DIR/soak.svg (resident memory, megaflows, control-command latency
# over time). CI runs the same test for 60 s on the debug build.
#
# Needs root, iperf3, nmap, ovs-ofctl/ovs-appctl (openvswitch-common).
set -euo pipefail
SECS=${1:-1800}
OUT=${2:-/tmp/soak}
ROOT="$(cd "$(dirname "$(readlink -f "$0")")/.." && pwd)"
mkdir -p "$OUT"
cd "$ROOT"
status=0
SOAK_SECONDS=$SECS SOAK_REPORT="$OUT/soak.csv" \
    cargo test --release --locked -q -p flowpath-cli --test soak -- --nocapture \
    2>&1 | tee "$OUT/soak.log" | grep -E '^soak:|panicked|test result' || status=$?
python3 - "$OUT/soak.csv" "$OUT/soak.svg" <<'PY'
import sys
rows = [l.strip().split(",") for l in open(sys.argv[1]).readlines()[1:] if l.strip()]
t = [float(r[0]) for r in rows]
series = [("resident memory (MiB)", [int(r[1]) / 1024 for r in rows], "#1f77b4"),
          ("megaflows", [int(r[3]) for r in rows], "#2ca02c"),
          ("control command (ms)", [float(r[4]) for r in rows], "#d62728")]
W, H, P = 760, 190, 50
out = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="11">' % (W, H * 3)]
for k, (name, ys, col) in enumerate(series):
    y0 = k * H
    top = max(ys) * 1.1 or 1
    tmax = max(t) or 1
    pts = " ".join("%.1f,%.1f" % (P + (W - 2 * P) * x / tmax, y0 + H - 30 - (H - 50) * y / top) for x, y in zip(t, ys))
    out.append('<text x="%d" y="%d">%s (max %.1f)</text>' % (P, y0 + 15, name, max(ys)))
    out.append('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#999"/>' % (P, y0 + H - 30, W - P, y0 + H - 30))
    out.append('<text x="%d" y="%d">0</text><text x="%d" y="%d">%.0f s</text>' % (P, y0 + H - 15, W - P - 30, y0 + H - 15, tmax))
    out.append('<polyline fill="none" stroke="%s" points="%s"/>' % (col, pts))
out.append("</svg>")
open(sys.argv[2], "w").write("\n".join(out))
print("soak: report %s, plot %s" % (sys.argv[1], sys.argv[2]))
PY
exit $status
