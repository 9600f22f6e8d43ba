#!/usr/bin/env python3
"""faiss's HNSW at several efSearch values, for comparing Rosetta's graph at equal recall.

  python3 scripts/bench/faiss_hnsw_sweep.py --dir OUT --m 16 --ef-search 16,32,64,128 --threads 2 --repeat 2

OUT is the folder `rosetta bench search --approx --out OUT --faiss ...` wrote: docs.npy and
queries.npy (the rows both engines search) and the exact top-k to measure recall against:
faiss_ids.txt (faiss's exact search, written with --faiss; `same_ranked_lists` checks it against
Rosetta's), else rosetta_ids.txt (Rosetta's exact search, written without --faiss). The index is built as ../shared/peers/faiss_search.py
builds it (IndexHNSWFlat(d, M, inner product), faiss's default efConstruction 40); each efSearch
is timed as that script times a search (the whole query batch, best of --repeat), and recall@k is
against the exact ids. Prints one JSON object.
"""
import argparse
import json
import os
import time

import faiss
import numpy as np


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--dir", required=True)
    p.add_argument("--m", type=int, default=16)
    p.add_argument("--ef-search", default="16,32,64,128")
    p.add_argument("--k", type=int, default=10)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--repeat", type=int, default=2)
    a = p.parse_args()
    faiss.omp_set_num_threads(a.threads)
    for f in ("docs.npy", "queries.npy"):
        if not os.path.isfile(os.path.join(a.dir, f)):
            raise SystemExit(f"{a.dir}/{f}: missing (run `rosetta bench search --approx --out {a.dir}` first)")
    if not any(os.path.isfile(os.path.join(a.dir, f)) for f in ("faiss_ids.txt", "rosetta_ids.txt")):
        raise SystemExit(f"{a.dir}: neither faiss_ids.txt nor rosetta_ids.txt (the exact top-k) is there")
    docs = np.ascontiguousarray(np.load(os.path.join(a.dir, "docs.npy")), dtype=np.float32)
    queries = np.ascontiguousarray(np.load(os.path.join(a.dir, "queries.npy")), dtype=np.float32)
    name = "faiss_ids.txt" if os.path.exists(os.path.join(a.dir, "faiss_ids.txt")) else "rosetta_ids.txt"
    exact = np.loadtxt(os.path.join(a.dir, name), dtype=np.int64, ndmin=2)[:, : a.k]
    if exact.shape[0] != queries.shape[0] or exact.shape[1] != a.k:
        raise SystemExit(f"{a.dir}/{name} has {exact.shape[0]} lists of {exact.shape[1]} for {queries.shape[0]} queries and k {a.k}")
    t = time.perf_counter()
    index = faiss.IndexHNSWFlat(docs.shape[1], a.m, faiss.METRIC_INNER_PRODUCT)
    index.add(docs)
    build = time.perf_counter() - t
    rows = []
    for ef in [int(x) for x in a.ef_search.split(",")]:
        index.hnsw.efSearch = ef
        best = float("inf")
        for _ in range(a.repeat):
            t = time.perf_counter()
            _, ids = index.search(queries, a.k)
            best = min(best, time.perf_counter() - t)
        hits = sum(len(set(r.tolist()) & set(e.tolist())) for r, e in zip(ids, exact))
        rows.append({"ef_search": ef, "search_s": round(best, 4),
                     "queries_per_s": round(queries.shape[0] / best, 1),
                     "recall_at_k": round(hits / exact.size, 4)})
    print(json.dumps({"exact_ids": name, "docs": docs.shape[0], "dim": docs.shape[1], "queries": queries.shape[0],
                      "k": a.k, "m": a.m, "ef_construction": index.hnsw.efConstruction,
                      "threads": a.threads, "build_s": round(build, 3), "by_ef_search": rows}))


if __name__ == "__main__":
    main()
