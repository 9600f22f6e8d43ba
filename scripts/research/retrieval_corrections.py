#!/usr/bin/env python3
"""Retrieval-time corrections of a zero-shot encoder on XQuAD English->Hindi,
measured before building them into Rosetta (issue 52 item 4).

Embeds with ../shared/peers/encoder_ref.py's Encoder (PyTorch, mean pooling,
e5's prefixes): the 1,190 English questions, the 240 Hindi paragraphs, and the
first N training pairs of enhi-nmt-sample-18k (the workspace's training texts:
no XQuAD text enters any statistic). Then MAP (one relevant paragraph per
question) of cosine ranking and of:
  - hubness reduction: each paragraph penalised by the mean cosine of its k
    nearest training-side English sentences (CSLS's document term);
  - language centring: each side minus its language's training mean;
  - LSAR-style projection (Xie et al.): the language-identity directions (the
    mean difference, or the span of the two means) projected out.

    python scripts/research/retrieval_corrections.py --model /work/models/multilingual-e5-small \
        --data ../shared/data --peers ../shared/peers --cache /tmp/emb --n 2000
"""
import argparse, os, sys, time
import numpy as np

ap = argparse.ArgumentParser()
ap.add_argument("--model", required=True)
ap.add_argument("--data", required=True)
ap.add_argument("--peers", required=True)
ap.add_argument("--cache", required=True)
ap.add_argument("--n", type=int, default=2000)
ap.add_argument("--threads", type=int, default=2)
a = ap.parse_args()
sys.path.insert(0, a.peers)
import torch  # noqa: E402
torch.set_num_threads(a.threads)
from encoder_ref import Encoder, tsv, lines  # noqa: E402

os.makedirs(a.cache, exist_ok=True)
enc = None


def get(name, texts, prefix):
    global enc
    p = os.path.join(a.cache, f"{name}.npy")
    if os.path.exists(p):
        return np.load(p)
    enc = enc or Encoder(a.model, "cpu", 512)
    t = time.time()
    e = enc.encode(texts, prefix, 32)
    np.save(p, e)
    print(f"{name}: {len(texts)} texts in {time.time() - t:.0f} s", file=sys.stderr)
    return e


X = os.path.join(a.data, "xquad/clir")
P = os.path.join(a.data, "enhi-nmt-sample-18k")
q, d = tsv(f"{X}/queries.en.tsv"), tsv(f"{X}/docs.hi.tsv")
qid, did = [x[0] for x in q], [x[0] for x in d]
rel = {}
for l in open(f"{X}/qrels.tsv"):
    f = l.split()
    if int(f[3]) > 0:
        rel.setdefault(f[0], set()).add(f[2])
Q = get("q_en", [x[1] for x in q], "query: ")
D = get("d_hi", [x[1] for x in d], "passage: ")
Te = get(f"tr_en_q{a.n}", lines(f"{P}/train.en")[: a.n], "query: ")
Th = get(f"tr_hi_q{a.n}", lines(f"{P}/train.hi")[: a.n], "query: ")


def nrm(x):
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def MAP(S):
    ap_ = []
    for i, qi in enumerate(qid):
        o = np.argsort(-S[i], kind="stable")
        h = s = 0
        for k, j in enumerate(o):
            if did[j] in rel[qi]:
                h += 1
                s += h / (k + 1)
        ap_.append(s / len(rel[qi]))
    return float(np.mean(ap_))


rows = [("cosine (zero-shot)", MAP(Q @ D.T))]
for k in (5, 10, 50):
    r = np.sort(D @ Te.T, axis=1)[:, -k:].mean(1)
    rows.append((f"hubness, k={k}: CSLS, 2cos - r(d)", MAP(2 * Q @ D.T - r[None, :])))
    rows.append((f"hubness, k={k}: cos - r(d)", MAP(Q @ D.T - r[None, :])))
me, mh = Te.mean(0), Th.mean(0)
rows.append(("language centring", MAP(nrm(Q - me) @ nrm(D - mh).T)))
u = (me - mh) / np.linalg.norm(me - mh)
P1 = lambda X: nrm(X - np.outer(X @ u, u))  # noqa: E731
rows.append(("LSAR: mean difference projected out", MAP(P1(Q) @ P1(D).T)))
V = np.linalg.svd(np.stack([me, mh]), full_matrices=False)[2]
P2 = lambda X: nrm(X - (X @ V.T) @ V)  # noqa: E731
rows.append(("LSAR: span of both means projected out", MAP(P2(Q) @ P2(D).T)))
for name, m in rows:
    print(f"| {name} | {m:.4f} | {m - rows[0][1]:+.4f} |")
