#!/usr/bin/env python3
"""Offline study of fusion functions over per-path runs dumped by
`sextant eval --dump-runs FILE` (one JSON object a line: qid, query, paths{name: [[doc, score], ...]}).

Used to choose the engine's default fusion on training splits (SciFact train, TAT-QA dev);
the chosen configuration is then reported on the test splits by `sextant eval`.

    python3 scripts/study_fusion.py RUNS.jsonl QRELS.tsv [RUNS2.jsonl QRELS2.tsv ...]
"""
import itertools
import json
import math
import sys
from collections import defaultdict

PATHS = ["dense", "bm25", "splade"]


def load(runs_path, qrels_path):
    qrels = defaultdict(dict)
    for i, line in enumerate(open(qrels_path)):
        c = line.rstrip("\n").split("\t")
        if i == 0 and c[0] == "query-id":
            continue
        qrels[c[0]][c[1]] = int(c[2])
    runs = [json.loads(l) for l in open(runs_path) if l.strip()]
    return [r for r in runs if any(g > 0 for g in qrels[r["qid"]].values())], qrels


def ndcg10(ranked, judged):
    dcg = sum(judged.get(d, 0) / math.log2(i + 2) for i, d in enumerate(ranked[:10]))
    ideal = sorted((g for g in judged.values() if g > 0), reverse=True)[:10]
    idcg = sum(g / math.log2(i + 2) for i, g in enumerate(ideal))
    return dcg / idcg if idcg else 0.0


def rrf(lists, weights, k):
    s = defaultdict(float)
    for lst, w in zip(lists, weights):
        for r, (d, _) in enumerate(lst):
            s[d] += w / (k + r + 1)
    return sorted(s, key=lambda d: -s[d])


def confidence(lst, depth=10):
    """How much the path's top result stands out from its next ones (0 when flat)."""
    if len(lst) < 2:
        return 0.0
    top = lst[0][1]
    rest = [x[1] for x in lst[1:depth]]
    mean = sum(rest) / len(rest)
    sd = max(math.sqrt(sum((x - mean) ** 2 for x in rest) / len(rest)), 1e-6)
    return min((top - mean) / sd, 50.0)


def adaptive_rrf(lists, base, k, alpha, depth=10):
    conf = [confidence(l, depth) for l in lists]
    mean = sum(conf) / len(conf)
    ws = [b * math.exp(alpha * (c - mean)) for b, c in zip(base, conf)]
    return rrf(lists, ws, k)


def evaluate(data, fuse):
    total = 0.0
    n = 0
    for runs, qrels in data:
        for r in runs:
            lists = [r["paths"][p] for p in PATHS]
            total += ndcg10(fuse(lists), qrels[r["qid"]])
            n += 1
    return total / n


def main():
    args = sys.argv[1:]
    sets = [load(args[i], args[i + 1]) for i in range(0, len(args), 2)]
    names = [args[i] for i in range(0, len(args), 2)]
    def report(label, fuse):
        scores = [evaluate([s], fuse) for s in sets]
        print(f"{label:48s} " + "  ".join(f"{x:.4f}" for x in scores) + f"   mean {sum(scores)/len(scores):.4f}")
        return scores
    print("sets:", names)
    for i, p in enumerate(PATHS):
        report(p, lambda L, i=i: [d for d, _ in L[i]])
    report("rrf(all) k=60", lambda L: rrf(L, [1, 1, 1], 60))
    report("rrf(dense,bm25) k=60", lambda L: rrf(L, [1, 1, 0], 60))
    report("rrf(bm25,splade) k=60", lambda L: rrf(L, [0, 1, 1], 60))
    best = []
    for k in [float(x) for x in sys.argv[0:0]] or [5, 10, 20, 60]:
        for w in itertools.product([0.25, 0.5, 1.0, 1.5], repeat=3):
            for alpha in [0.0, 0.2, 0.4, 0.7]:
                s = [evaluate([st], lambda L: adaptive_rrf(L, w, k, alpha)) for st in sets]
                best.append((sum(s) / len(s), k, w, alpha, s))
    best.sort(reverse=True)
    for b in best[:15]:
        print("adaptive k=%d w=%s alpha=%.2f -> %s mean %.4f" % (b[1], b[2], b[3], " ".join("%.4f" % x for x in b[4]), b[0]))


if __name__ == "__main__":
    main()
