#!/usr/bin/env python3
"""Chooses the recall tail (git history: README.md at d186f3e, "The fusion chosen again"):
how the fused list is ordered below its first H documents, so that fusion never loses what
a single path found.

    python3 scripts/studies/study_tail.py NAME=RUNS.jsonl:QRELS.tsv [NAME=RUNS:QRELS ...]

RUNS come from `sextant eval --dump-runs` (every path's list per question, as
`scripts/studies/study_fusion.py` reads them). The head is the fusion of `study_fusion.py`'s space
(z-scores of documents, equal base weights, `β` = 2, `δ` = 0; dense feedback needs the
engine and is not simulated): the tail does not change the first H ≥ 10 documents, so
nDCG@10 is the head's whatever the tail. Each tail is

    tail(d) = Σ_i t_i / (k' + rank_i(d)),   t_dense = D, t_BM25 = t_SPLADE = 1

over the documents below the head, and is scored on each set by its Recall@100 over the
best single path's there; candidates are judged by their worst set (then the mean), with
leave-one-set-out. Needs numpy (`$SEXTANT_CACHE_DIR/venv-convert/bin/python` has it). Only
dev and training splits go in here.
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import study_fusion as sf  # noqa: E402

HEADS = (10, 20, 30)
DENSE_WEIGHTS = (1.0, 1.5, 2.0, 2.5, 3.0, 4.0)
KS = (10, 20, 60, 100)
BETA, DELTA = 2.0, 0.0


def weights(agr, ids):
    w = np.exp(BETA * (agr - agr.mean()))
    w[0] *= np.exp(-DELTA * ids)
    return w * 3 / w.sum()


def head_order(ranks, z, agr, ids):
    return np.argsort(-(weights(agr, ids) @ z), kind="stable")


def tail_order(order, ranks, head, dense_weight, k):
    t = np.array([dense_weight, 1.0, 1.0])[:, None]
    rrf = (t * np.where(np.isinf(ranks), 0.0, 1.0 / (k + np.where(np.isinf(ranks), 1.0, ranks)))).sum(0)
    rest = order[head:]
    rest = rest[np.argsort(-rrf[rest], kind="stable")]
    return np.concatenate([order[:head], rest])


def recall(data, order_of):
    total = 0.0
    for ranks, z, _conf, agr, ids, gains, _idcg, relevant in data:
        order = order_of(ranks, z, agr, ids)
        total += (gains[order[:100]] > 0).sum() / relevant if relevant else 0.0
    return total / len(data)


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    data = {}
    for spec in sys.argv[1:]:
        name, rest = spec.split("=", 1)
        runs, qrels = rest.rsplit(":", 1)
        data[name] = sf.prepare(*sf.load(runs, qrels))
    sets = list(data)
    best = {s: max(recall(d, lambda r, z, a, i, p=p: np.argsort(r[p], kind="stable")) for p in range(3)) for s, d in data.items()}
    grid = [None] + [(h, dw, k) for h in HEADS for dw in DENSE_WEIGHTS for k in KS]
    ratio = {}
    for g in grid:
        for s, d in data.items():
            if g is None:
                fn = head_order
            else:
                fn = lambda r, z, a, i, g=g: tail_order(head_order(r, z, a, i), r, *g)
            ratio[(g, s)] = recall(d, fn) / best[s]

    def key(g, among):
        return (min(ratio[(g, s)] for s in among), sum(ratio[(g, s)] for s in among))

    label = lambda g: "no tail" if g is None else f"H = {g[0]}, t_dense = {g[1]:g}, k' = {g[2]}"
    print("best single path's Recall@100: " + ", ".join(f"{s} {best[s]:.4f}" for s in sets))
    print(f"{'candidate':34s} " + " ".join(f"{s:>12s}" for s in sets) + "   worst")
    ranked = sorted(grid, key=lambda g: key(g, sets), reverse=True)
    for g in ranked[:12] + [None]:
        cells = " ".join(f"{ratio[(g, s)]:12.4f}" for s in sets)
        print(f"{label(g):34s} {cells}   {key(g, sets)[0]:.4f}")
    print(f"-- chosen on all {len(sets)} sets: {label(ranked[0])}")
    print("-- leave one set out (chosen on the others -> the left-out set's ratio):")
    for s in sets:
        g = max(grid, key=lambda g: key(g, [t for t in sets if t != s]))
        print(f"  {s}: {label(g)} -> {ratio[(g, s)]:.4f}")


if __name__ == "__main__":
    main()
