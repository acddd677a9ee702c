#!/usr/bin/env python3
"""Per-cell agreement of an adaptive-window run with a fixed-window run (docs/performance.md,
"Precision"): for each main figure, adaptive − fixed in %, how many cells agree within 1 %, and
how many differ significantly by methodology §12.5 (the gap beyond the root-sum-square of the
half-widths facing each other). Also each run's wall time and where a cell's time went.

usage: compare.py FIXED/run.json ADAPTIVE/run.json
"""
import json
import statistics
import sys
from datetime import datetime

FIGURES = ["total_tok_s", "per_request_tok_s", "tbt_ms_p50", "tbt_ms_p99"]


def cells(run):
    return {(c["context"], c["concurrency"]): c for c in run["decode"] if c.get("status") == "valid"}


def differ(a, ia, b, ib):
    """§12.5, as sm_core::precision::differ: None without both intervals."""
    if not ia or not ib:
        return None
    ha, hb = (ia["hi"] - a, b - ib["lo"]) if b >= a else (a - ia["lo"], ib["hi"] - b)
    return abs(b - a) > (max(ha, 0) ** 2 + max(hb, 0) ** 2) ** 0.5


def wall_s(run):
    t = lambda s: datetime.fromisoformat(s.replace("Z", "+00:00"))
    return (t(run["finished"]) - t(run["started"])).total_seconds()


def phases(run):
    ps = [c["phases"] for c in run["decode"] if c.get("phases")]
    keys = ["before_s", "ramp_s", "window_s", "after_s"]
    return {k: statistics.mean(p[k] for p in ps) for k in keys}, len(ps)


def main(fixed_path, adaptive_path):
    fixed, adaptive = (json.load(open(p)) for p in (fixed_path, adaptive_path))
    f, a = cells(fixed), cells(adaptive)
    common = sorted(f.keys() & a.keys())
    fw, aw = wall_s(fixed), wall_s(adaptive)
    print(f"wall time: fixed {fw:.0f} s, adaptive {aw:.0f} s ({aw / fw * 100:.0f} %); {len(common)} cells in both")
    for name, run in (("fixed", fixed), ("adaptive", adaptive)):
        mean, n = phases(run)
        print(f"  {name}: per cell over {n}: " + ", ".join(f"{k} {v:.2f}" for k, v in mean.items()))
    windows = sorted(a[k]["measured_s"] for k in common)
    met = sum(1 for k in common if a[k].get("precision_met"))
    print(f"adaptive windows: min {windows[0]:.1f} s, median {statistics.median(windows):.1f} s, "
          f"max {windows[-1]:.1f} s; at the 30 s longest {sum(w >= 29.9 for w in windows)}; precision_met {met}")
    print("| figure | adaptive − fixed, median | range | within 1 % | difference significant (§12.5) |")
    print("|---|---|---|---|---|")
    for fig in FIGURES:
        diffs, sig, within = [], 0, 0
        for k in common:
            fv, av = f[k].get(fig), a[k].get(fig)
            if fv is None or av is None:
                continue
            d = (av - fv) / fv * 100
            diffs.append(d)
            within += abs(d) <= 1.0
            sig += bool(differ(fv, f[k].get("ci", {}).get(fig), av, a[k].get("ci", {}).get(fig)))
        n = len(diffs)
        print(f"| {fig} | {statistics.median(diffs):+.2f} % | {min(diffs):+.2f} to {max(diffs):+.2f} % "
              f"| {within} of {n} | {sig} of {n} |")
    if "-v" in sys.argv:
        for k in common:
            row = [f"{k[0] // 1024}K×{k[1]}", f"{a[k]['measured_s']:.1f}s"]
            for fig in FIGURES:
                fv, av = f[k].get(fig), a[k].get(fig)
                if fv and av:
                    s = differ(fv, f[k].get("ci", {}).get(fig), av, a[k].get("ci", {}).get(fig))
                    row.append(f"{fig} {(av - fv) / fv * 100:+.2f}%{'!' if s else ''}")
            print("  ".join(row))


if __name__ == "__main__":
    args = [x for x in sys.argv[1:] if x != "-v"]
    if len(args) != 2:
        sys.exit(__doc__)
    main(*args)
