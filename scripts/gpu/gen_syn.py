#!/usr/bin/env python3
"""Synthetic parallel text with V terms per language (Zipfian, exponent 1), for
throughput and memory at vocabulary sizes no corpus in ../shared reaches.
Source term i translates to target term perm[i]; 10% of words dropped, 10% noise.
Usage: gen_syn.py OUTDIR [V] [TRAIN_PAIRS]"""
import itertools, os, random, sys

out = sys.argv[1]
V = int(sys.argv[2]) if len(sys.argv) > 2 else 50000
N = int(sys.argv[3]) if len(sys.argv) > 3 else 100000
rng = random.Random(1)
cum = list(itertools.accumulate(1.0 / r for r in range(1, V + 1)))
perm = list(range(V))
rng.shuffle(perm)
os.makedirs(out, exist_ok=True)
for split, n in (("train", N), ("val", 2000), ("test", 3000)):
    with open(f"{out}/{split}.src", "w") as fs, open(f"{out}/{split}.tgt", "w") as ft:
        for _ in range(n):
            L = 3 + sum(rng.random() < 0.5 for _ in range(24))
            w = rng.choices(range(V), cum_weights=cum, k=L)
            t = []
            for x in w:
                u = rng.random()
                if u < 0.1:
                    continue
                t.append(perm[x] if u > 0.2 else rng.choices(range(V), cum_weights=cum)[0])
            fs.write(" ".join(f"s{x}" for x in w) + "\n")
            ft.write(" ".join(f"t{x}" for x in t) + "\n")
