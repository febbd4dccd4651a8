#!/usr/bin/env python3
"""plot-attack.py TABLE.md OUT.svg - the attack sweep of tools/attack-bench.sh
as an SVG: one panel per workload (tse, storm), the attack's share of packets
on the x axis (0, 1, 10, 50 %), the capacity kept (total Mpps with the attack
over total Mpps without, %) on the y axis, one line per configuration.
Standard library only."""
import sys
from collections import defaultdict

rows = []
for line in open(sys.argv[1]):
    c = [x.strip() for x in line.strip().strip("|").split("|")]
    if len(c) == 6 and c[0] in ("tse", "storm"):
        rows.append((c[0], int(c[1].rstrip(" %")), c[2], float(c[5].rstrip(" %"))))

series = defaultdict(lambda: defaultdict(list))
for wl, share, cfg, kept in rows:
    series[wl][cfg].append((share, kept))

shares = [0, 1, 10, 50]
colors = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"]
W, H, PW, PH, M = 900, 380, 380, 260, 50
out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="11">',
       f'<rect width="{W}" height="{H}" fill="white"/>']
for p, wl in enumerate(["tse", "storm"]):
    x0, y0 = M + p * (PW + 2 * M), 40
    title = "Tuple Space Explosion" if wl == "tse" else "New-flow storm (megaflows off)"
    out.append(f'<text x="{x0 + PW / 2}" y="20" text-anchor="middle" font-size="13">{title}</text>')
    out.append(f'<rect x="{x0}" y="{y0}" width="{PW}" height="{PH}" fill="none" stroke="#888"/>')
    for k in range(0, 101, 25):
        y = y0 + PH - PH * k / 100
        out.append(f'<line x1="{x0}" x2="{x0 + PW}" y1="{y}" y2="{y}" stroke="#eee"/>')
        out.append(f'<text x="{x0 - 6}" y="{y + 4}" text-anchor="end">{k} %</text>')
    xs = {s: x0 + 20 + i * (PW - 40) / (len(shares) - 1) for i, s in enumerate(shares)}
    for s, x in xs.items():
        out.append(f'<text x="{x}" y="{y0 + PH + 16}" text-anchor="middle">{s} %</text>')
    out.append(f'<text x="{x0 + PW / 2}" y="{y0 + PH + 34}" text-anchor="middle">attack share of packets</text>')
    for i, (cfg, pts) in enumerate(sorted(series[wl].items())):
        col = colors[i % len(colors)]
        pts = sorted(pts)
        path = " ".join(f"{xs[s]:.1f},{y0 + PH - PH * min(k, 100) / 100:.1f}" for s, k in pts if s in xs)
        out.append(f'<polyline points="{path}" fill="none" stroke="{col}" stroke-width="2"/>')
        for s, k in pts:
            if s in xs:
                out.append(f'<circle cx="{xs[s]:.1f}" cy="{y0 + PH - PH * min(k, 100) / 100:.1f}" r="3" fill="{col}"/>')
        ly = y0 + 14 + 14 * i
        out.append(f'<line x1="{x0 + 10}" x2="{x0 + 28}" y1="{ly - 4}" y2="{ly - 4}" stroke="{col}" stroke-width="2"/>')
        out.append(f'<text x="{x0 + 32}" y="{ly}">{cfg}</text>')
out.append(f'<text x="14" y="{y0 + PH / 2}" transform="rotate(-90 14 {y0 + PH / 2})" text-anchor="middle">capacity kept (Mpps vs no attack)</text>')
out.append("</svg>")
open(sys.argv[2], "w").write("\n".join(out) + "\n")
