#!/usr/bin/env python3
"""Draws a soak's series (bench/soak.sh: SF_SOAK_SERIES_FILE, CSV `seconds,series,value`) as one
SVG of small panels against minutes: resident memory, threads and open files of the master and
the agents, and the row counts of the tables. Standard library only.

    bench/soak_plot.py SERIES.csv OUT.svg [--title TEXT] [--offset-minutes M]

The first column may also be Unix time (a sampler outside the test); times are shown from the
first sample, plus --offset-minutes (a sampler that started late in a run).
"""

import argparse
import csv
import html
import sys
from collections import defaultdict

PANELS = [
    ("resident memory (MB)", lambda s: s.endswith(" rss_mb")),
    ("threads", lambda s: s.endswith(" threads")),
    ("open files", lambda s: s.endswith(" fds")),
    ("table rows (audit_log excluded: kept by design)",
     lambda s: s.startswith("table ") and s != "table audit_log"),
]
COLOURS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2",
           "#7f7f7f", "#bcbd22", "#17becf", "#393b79", "#637939"]
W, H, LEFT, RIGHT, TOP, BOTTOM = 760, 210, 60, 190, 26, 30


def read(path):
    series = defaultdict(list)
    with open(path, newline="") as f:
        rows = csv.reader(f)
        next(rows, None)
        for row in rows:
            if len(row) != 3 or not row[2]:
                continue
            try:
                series[row[1]].append((float(row[0]), float(row[2])))
            except ValueError:
                continue
    return series


def panel(out, y0, title, lines, t0, t1):
    vmax = max((v for _, pts in lines for _, v in pts), default=1.0) * 1.1 or 1.0
    pw, ph = W - LEFT - RIGHT, H - TOP - BOTTOM
    out.append(f'<text x="{LEFT}" y="{y0 + 16}" font-size="13" font-weight="bold">'
               f'{html.escape(title)}</text>')
    out.append(f'<rect x="{LEFT}" y="{y0 + TOP}" width="{pw}" height="{ph}" fill="none" '
               f'stroke="#999"/>')
    for k in range(5):
        v = vmax * k / 4
        y = y0 + TOP + ph - ph * k / 4
        out.append(f'<text x="{LEFT - 6}" y="{y + 4:.1f}" font-size="10" text-anchor="end">'
                   f'{v:.0f}</text>')
        out.append(f'<line x1="{LEFT}" y1="{y:.1f}" x2="{LEFT + pw}" y2="{y:.1f}" stroke="#eee"/>')
    span = max(t1 - t0, 1e-9)
    for k in range(7):
        t = t0 + span * k / 6
        x = LEFT + pw * k / 6
        out.append(f'<text x="{x:.1f}" y="{y0 + TOP + ph + 14}" font-size="10" '
                   f'text-anchor="middle">{t:.0f}</text>')
    out.append(f'<text x="{LEFT + pw / 2}" y="{y0 + H - 2}" font-size="10" '
               f'text-anchor="middle">minutes</text>')
    for i, (name, pts) in enumerate(lines):
        colour = COLOURS[i % len(COLOURS)]
        path = " ".join(f"{LEFT + pw * (t - t0) / span:.1f},{y0 + TOP + ph - ph * v / vmax:.1f}"
                        for t, v in pts)
        out.append(f'<polyline fill="none" stroke="{colour}" stroke-width="1.3" '
                   f'points="{path}"/>')
        out.append(f'<text x="{LEFT + pw + 8}" y="{y0 + TOP + 10 + 12 * i}" font-size="10" '
                   f'fill="{colour}">{html.escape(name)}</text>')


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("csv")
    ap.add_argument("svg")
    ap.add_argument("--title", default="soak")
    ap.add_argument("--offset-minutes", type=float, default=0.0)
    a = ap.parse_args()
    series = read(a.csv)
    if not series:
        sys.exit(f"{a.csv}: no samples")
    first = min(t for pts in series.values() for t, _ in pts)
    minutes = {name: [((t - first) / 60 + a.offset_minutes, v) for t, v in sorted(pts)]
               for name, pts in series.items()}
    t0 = a.offset_minutes
    t1 = max(t for pts in minutes.values() for t, _ in pts)
    panels = [(title, [(n, minutes[n]) for n in sorted(minutes) if keep(n)])
              for title, keep in PANELS]
    panels = [(title, lines) for title, lines in panels if lines]
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H * len(panels) + 24}" '
           f'font-family="sans-serif">',
           f'<text x="{LEFT}" y="16" font-size="14">{html.escape(a.title)}</text>']
    for i, (title, lines) in enumerate(panels):
        panel(out, 24 + H * i, title, lines, t0, t1)
    out.append("</svg>")
    with open(a.svg, "w") as f:
        f.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
