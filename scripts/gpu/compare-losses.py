#!/usr/bin/env python3
"""CPU against GPU: the loss of each of the first 100 logged steps and the test MRR.

Usage: compare-losses.py CPU_DIR GPU_DIR
CPU_DIR holds the sessions <model>-cpu/ and <model>-cpu.eval.json (rosetta eval --task sentence
--json); GPU_DIR is results.tgz unpacked (r/<model>/metrics.jsonl, r/eval-<model>.out)."""
import json
import sys

cpu, gpu = sys.argv[1], sys.argv[2]


def steps(path):
    return [r for r in map(json.loads, open(path)) if r.get("kind") == "step"]


for m in ["s2net", "xcnn", "bae", "dbn-cca", "adv-bilstm"]:
    cs, gs = steps(f"{cpu}/{m}-cpu/metrics.jsonl"), steps(f"{gpu}/r/{m}/metrics.jsonl")
    n = min(100, len(cs), len(gs))
    d = [abs(a["loss"] - b["loss"]) for a, b in zip(cs[:n], gs[:n])]
    rel = [x / max(abs(a["loss"]), 1e-12) for x, a in zip(d, cs[:n])]
    ce = json.load(open(f"{cpu}/{m}-cpu.eval.json"))["sentence"]
    ge = json.loads(open(f"{gpu}/r/eval-{m}.out").read().strip().splitlines()[-1])["sentence"]
    print(f"{m}: {n} steps, max |d| {max(d):.2e}, max rel {max(rel):.2e}; test MRR cpu "
          f"{ce['MRR']:.4f} ({ce['MRR_ties_for']:.4f}) gpu {ge['MRR']:.4f} ({ge['MRR_ties_for']:.4f})")
