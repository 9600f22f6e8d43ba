#!/usr/bin/env python3
"""The linear models' time and memory curve (issue 20) as Markdown.

Reads the JSON lines `scripts/bench-linear.sh` writes (one `rosetta bench
fit` per line) and prints the table of docs/results.md and, per model and
solver, the exponents of fit time and peak RSS in the vocabulary size
(least squares on log-log over the points measured).

Usage: scripts/linear-curve.py RUNS.jsonl
"""
import json
import math
import sys
from collections import defaultdict


def fit_exponent(xs, ys):
    """Slope of log y against log x (least squares)."""
    lx = [math.log(x) for x in xs]
    ly = [math.log(y) for y in ys]
    mx = sum(lx) / len(lx)
    my = sum(ly) / len(ly)
    sxx = sum((a - mx) ** 2 for a in lx)
    sxy = sum((a - mx) * (b - my) for a, b in zip(lx, ly))
    return sxy / sxx


def main(path):
    rows = [json.loads(l) for l in open(path) if l.strip().startswith("{")]
    print("| model | solver | terms per language (used) | nonzeros per language "
          "| fit (wall) | fit (CPU) | peak RSS | held-out MRR |")
    print("|---|---|---|---|---|---|---|---|")
    groups = defaultdict(list)
    for r in rows:
        used = " / ".join(f"{u:,}" for u in r["terms_used"])
        nnz = " / ".join(f"{n:,}" for n in r["nnz"])
        print(f"| {r['model']} | {r['solver']} | {r['terms_per_language']:,} ({used}) | {nnz} "
              f"| {r['fit_s']:.1f} s | {r['fit_cpu_s']:.1f} s | {r['peak_rss_mb']:.0f} MB "
              f"| {r['test_mrr_ties_against']:.4f} |")
        solver = "dense" if "dense" in r["solver"].lower() else "matrix-free"
        groups[(r["model"], solver)].append(r)
    print()
    for (model, solver), rs in groups.items():
        if len(rs) < 3:
            continue
        v = [r["terms_per_language"] for r in rs]
        t = fit_exponent(v, [r["fit_s"] for r in rs])
        m = fit_exponent(v, [r["peak_rss_mb"] for r in rs])
        print(f"- {model} ({solver}): time ∝ V^{t:.2f}, peak memory ∝ V^{m:.2f} "
              f"(least squares on log-log, {min(v):,}-{max(v):,} terms, {len(rs)} points)")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
