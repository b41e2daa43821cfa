#!/usr/bin/env python3
"""Offline study of fusion over per-path runs dumped by `sextant eval --dump-runs FILE`
(one JSON object a line: qid, query, `paths` {name: [[doc, score], ...]} with each document
once at its best chunk, and `chunks` {name: [[doc, score, chunk], ...]}: the path's top
300 chunks).

Chooses the engine's default fusion for robustness, not for one set's peak: every
candidate is scored on every dev set by its ratio to the best method on that set
(nDCG@10), and judged by its WORST set; a candidate whose Recall@100 falls below the best
single path's on a set is not eligible. The choice is made among equal base weights (no
path trusted more because it won on these sets), with the per-query terms α, β and δ
free. Leave-one-set-out validation then asks whether the choice carries to a set it did
not see: for each set, the candidate chosen on the others is scored on it.

The candidates fuse each path's documents (at their best chunk) in one of two ways, with
base weights and per-query weights

    w_i = base_i · exp(α · (c_i − mean c) + β · (a_i − mean a)) · exp(−δ · ids(q))^[i = dense]
    ranks:  score(d) = Σ_i w_i / (k + rank_i(d))                       (RRF, with its `k`)
    scores: score(d) = Σ_i w_i · z_i(d),  z_i(d) = (s_i(d) − μ_i) / σ_i  (the path's own
            scores, standardised over its list; a document it lacks gets its lowest z)

(c: confidence, the z-score of the path's top score against its next nine; a: agreement,
the share of its top-10 documents in another path's top 10; ids(q): the share of the
question's words that are identifiers, with a digit or all capitals). Then, for the
chosen weights, the levers that need the chunk lists: chunk-level fusion, a chunk's own
ranks beside its document's (λ), several chunks per document (aggregation), depth.

    python3 scripts/studies/study_fusion.py NAME=RUNS.jsonl:QRELS.tsv [NAME=RUNS:QRELS ...]

Needs numpy (`$SEXTANT_CACHE_DIR/venv-peer/bin/python`, made by scripts/bench/peer_bench.py, has
it). Only dev and training splits go in here; test splits are reported by `sextant eval`.
"""
import itertools
import json
import math
import re
import sys
from collections import defaultdict

import numpy as np

from metrics import documents, load_qrels, ndcg10, recall100

PATHS = ["dense", "bm25", "splade"]
DEPTH = 100


def load(runs_path, qrels_path):
    qrels = load_qrels(qrels_path)
    runs = [json.loads(l) for l in open(runs_path) if l.strip()]
    return [r for r in runs if any(g > 0 for g in qrels[r["qid"]].values())], qrels


def confidence(scores, depth=10):
    """z-score of the top score against the next depth-1 (0 when fewer than two)."""
    if len(scores) < 2:
        return 0.0
    rest = scores[1:depth]
    mean = sum(rest) / len(rest)
    sd = max(math.sqrt(sum((x - mean) ** 2 for x in rest) / len(rest)), 1e-6)
    return min((scores[0] - mean) / sd, 50.0)


def agreement(lists, i, n=10):
    """Share of path i's top n documents found in another path's top n."""
    top = [d for d, *_ in lists[i][:n]]
    if not top:
        return 0.0
    others = set()
    for j, l in enumerate(lists):
        if j != i:
            others.update(d for d, *_ in l[:n])
    return sum(1 for d in top if d in others) / len(top)


def words_of(query):
    """The question's words, as the engine splits them (`pipeline::adaptive`)."""
    return re.findall(r"[A-Za-z0-9][A-Za-z0-9.\-']*", query)


def identifier_share(query):
    words = words_of(query)
    ids = [w for w in words if any(c.isdigit() for c in w) or (len(w) >= 2 and w.isupper())]
    return len(ids) / max(1, len(words))


# ---------------------------------------------------------------- the weights grid (numpy)


def zscores(scores):
    """Each score's z against its list, and the list's lowest z for documents it lacks
    (a list without spread: 0, and −1 for the documents it lacks)."""
    s = np.array(scores, dtype=float)
    sd = s.std() if len(s) else 0.0
    if sd <= 1e-9 * max(1.0, abs(s.mean())):
        return np.zeros(len(s)), -1.0
    z = (s - s.mean()) / sd
    return z, z.min()


def prepare(runs, qrels):
    """Per question: the rank (inf: absent) and z-score of every document in every path,
    over each path's whole list (the engine's: its top 300 chunks, each document once)."""
    out = []
    for r in runs:
        scored = [documents(r["chunks"][p]) for p in PATHS]
        lists = [[d for d, _ in l] for l in scored]
        docs = sorted(set().union(*lists))
        at = {d: i for i, d in enumerate(docs)}
        ranks = np.full((3, len(docs)), np.inf)
        z = np.zeros((3, len(docs)))
        for i, (l, sl) in enumerate(zip(lists, scored)):
            zi, floor = zscores([x for _, x in sl])
            z[i, :] = floor if l else 0.0
            for rank, d in enumerate(l):
                ranks[i, at[d]] = rank + 1
                z[i, at[d]] = zi[rank]
        conf = np.array([confidence([s for _, s in r["paths"][p]]) for p in PATHS])
        agr = np.array([agreement([r["paths"][p] for p in PATHS], i) for i in range(3)])
        judged = qrels[r["qid"]]
        gains = np.array([judged.get(d, 0) for d in docs], dtype=float)
        ideal = sorted((g for g in judged.values() if g > 0), reverse=True)[:10]
        idcg = sum(g / math.log2(i + 2) for i, g in enumerate(ideal))
        relevant = sum(1 for g in judged.values() if g > 0)
        out.append((ranks, z, conf, agr, identifier_share(r["query"]), gains, idcg, relevant))
    return out


DISCOUNT = 1 / np.log2(np.arange(2, 12))


def grid_scores(data, k, weights_of):
    """Mean nDCG@10 and Recall@100 of every candidate (rows of weights_of's result); `k`
    None fuses z-scores, a number RRF with that `k`."""
    nd = rc = 0.0
    for ranks, z, conf, agr, ids, gains, idcg, relevant in data:
        w = weights_of(conf, agr, ids)
        if k is None:
            fused = w @ z
        else:
            fused = w @ np.where(np.isinf(ranks), 0.0, 1.0 / (k + np.where(np.isinf(ranks), 1.0, ranks)))
        order = np.argsort(-fused, axis=1, kind="stable")
        top10 = gains[order[:, :10]]
        nd = nd + ((top10 * DISCOUNT[: top10.shape[1]]).sum(1) / idcg if idcg else 0.0)
        rc = rc + ((gains[order[:, :100]] > 0).sum(1) / relevant if relevant else 0.0)
    return nd / len(data), rc / len(data)


def weights_grid():
    # Dense fixed at 1 (weights are relative); BM25 and SPLADE at half, equal, one and a half.
    bases = [(1.0, b, s) for b in (0.5, 1.0, 1.5) for s in (0.5, 1.0, 1.5)]
    # k: RRF's; None: z-scores.
    return [
        (k, base, alpha, beta, delta)
        for k in [None, 3, 5, 10, 20, 60]
        for base in bases
        for alpha in [0.0, 0.05, 0.1, 0.2]
        for beta in [0.0, 1.0, 2.0, 3.0, 5.0]
        for delta in [0.0, 1.0, 2.0, 3.0, 4.0]
    ]


# ------------------------------------------------------- levers that need the chunk lists


class Fusion:
    """Document-level RRF with per-query weights, or chunk-level, with the levers."""

    def __init__(self, k, base, alpha, beta, delta=0.0, depth=DEPTH, chunk_share=None, aggregate=0.0):
        self.k, self.base, self.alpha, self.beta, self.delta = k, base, alpha, beta, delta
        self.depth, self.chunk_share, self.aggregate = depth, chunk_share, aggregate

    def weights(self, r):
        lists = [r["paths"][p] for p in PATHS]
        conf = [confidence([s for _, s in l]) for l in lists]
        agr = [agreement(lists, i) for i in range(3)]
        mc, ma = sum(conf) / 3, sum(agr) / 3
        w = [b * math.exp(self.alpha * (c - mc) + self.beta * (a - ma)) for b, c, a in zip(self.base, conf, agr)]
        w[0] *= math.exp(-self.delta * identifier_share(r["query"]))
        return w

    def __call__(self, r):
        w = self.weights(r)
        chunks = [r["chunks"][p] for p in PATHS]
        score = defaultdict(float)
        if self.k is None:
            return self.zscore_fusion(r, w, chunks)
        if self.chunk_share is not None:
            # score(c) = [by document: Σ w/(k + docrank)] + λ · Σ w/(k + rank(c)); None λ = chunks only.
            own, doc_of = defaultdict(float), {}
            for wi, l in zip(w, chunks):
                for rank, (d, _, c) in enumerate(l[: self.depth]):
                    own[c] += wi / (self.k + rank + 1)
                    doc_of[c] = d
            by_doc = defaultdict(float)
            lam = self.chunk_share
            if lam != "chunks":
                for wi, l in zip(w, chunks):
                    seen = []
                    for d, _, _ in l[: self.depth]:
                        if d not in seen:
                            seen.append(d)
                            by_doc[d] += wi / (self.k + len(seen))
            for c, v in own.items():
                d = doc_of[c]
                s = v if lam == "chunks" else by_doc[d] + lam * v
                score[d] = max(score[d], s)
            return sorted(score, key=lambda d: -score[d])[:100]
        for wi, l, ch in zip(w, [r["paths"][p] for p in PATHS], chunks):
            for rank, (d, _) in enumerate(l[: self.depth]):
                score[d] += wi / (self.k + rank + 1)
            if self.aggregate:
                # Further chunks of a document in the path's list add `aggregate` times their share.
                seen = set()
                for rank, (d, *_) in enumerate(ch[: 3 * self.depth]):
                    if d in seen:
                        score[d] += self.aggregate * wi / (self.k + rank + 1)
                    seen.add(d)
        return sorted(score, key=lambda d: -score[d])[:100]


    def zscore_fusion(self, r, w, chunks):
        """z-scores of documents (at their best chunk) or, with chunk_share "chunks", of
        chunks, over each path's first `depth` documents (or 3 · depth chunks)."""
        if self.chunk_share == "chunks":
            lists = [[(c, x) for _, x, c in l[: 3 * self.depth]] for l in chunks]
            doc_of = {c: d for l in chunks for d, _, c in l}
        else:
            lists = [documents(l)[: self.depth] for l in chunks]
        ranked = zscore_fuse(lists, w)
        if self.chunk_share == "chunks":
            ranked = list(dict.fromkeys(doc_of[c] for c in ranked))
        return ranked[:100]


def zscore_fuse(lists, w):
    """Units best first by Σ_i w_i · z_i(u) over lists of (unit, score), a unit a list lacks
    at that list's lowest z (lib/core/src/pipeline/fusion.rs, zscore_fuse_grouped). Ties
    keep the order in which the lists first hold the units (a set's order would change with
    Python's string hashing from run to run)."""
    units = list(dict.fromkeys(u for l in lists for u, _ in l))
    score = dict.fromkeys(units, 0.0)
    for wi, l in zip(w, lists):
        if not l:
            continue
        z, floor = zscores([x for _, x in l])
        own = {u: z[i] for i, (u, _) in enumerate(l)}
        for u in units:
            score[u] += wi * own.get(u, floor)
    return sorted(score, key=lambda u: -score[u])


def plain_rrf(paths, k=60):
    """Plain RRF of the paths' chunk lists (k = 60, equal weights), documents at their best chunk."""

    def fuse(r):
        score, doc = defaultdict(float), {}
        for p in paths:
            for rank, (d, _, c) in enumerate(r["chunks"][p]):
                score[c] += 1 / (k + rank + 1)
                doc[c] = d
        return list(dict.fromkeys(doc[c] for c in sorted(score, key=lambda c: -score[c])))[:100]

    return fuse


def label_of(c):
    return ("scores" if c[0] is None else f"ranks k={c[0]}") + f" w={c[1]} a={c[2]} b={c[3]} d={c[4]}"


def evaluate(runs, qrels, fuse):
    nd = rc = 0.0
    for r in runs:
        ranked = fuse(r)
        nd += ndcg10(ranked, qrels[r["qid"]])
        rc += recall100(ranked, qrels[r["qid"]])
    return nd / len(runs), rc / len(runs)


def main():
    sets = {}
    for arg in sys.argv[1:]:
        name, files = arg.split("=", 1)
        runs, qrels = files.split(":")
        sets[name] = load(runs, qrels)
    names = list(sets)
    print("sets:", ", ".join(f"{n} ({len(sets[n][0])} questions)" for n in names))

    grid = weights_grid()
    results = {}
    data = {n: prepare(*sets[n]) for n in names}
    for k in list(dict.fromkeys(c[0] for c in grid)):
        rows = [c for c in grid if c[0] == k]
        base = np.array([c[1] for c in rows])
        alpha = np.array([c[2] for c in rows])[:, None]
        beta = np.array([c[3] for c in rows])[:, None]
        delta = np.array([c[4] for c in rows])

        def weights_of(conf, agr, ids):
            w = base * np.exp(alpha * (conf - conf.mean())[None, :] + beta * (agr - agr.mean())[None, :])
            w[:, 0] *= np.exp(-delta * ids)
            return w

        per = {n: grid_scores(data[n], k, weights_of) for n in names}
        for i, c in enumerate(rows):
            results[c] = [(per[n][0][i], per[n][1][i]) for n in names]
    singles = {}
    for i, p in enumerate(PATHS):
        singles[p] = [evaluate(*sets[n], lambda r, p=p: [d for d, _ in r["paths"][p]]) for n in names]
    best = [max([v[j][0] for v in results.values()] + [s[j][0] for s in singles.values()]) for j in range(len(names))]
    best_recall = [max(s[j][1] for s in singles.values()) for j in range(len(names))]

    def worst(c, among):
        return min(results[c][j][0] / best[j] for j in among)

    def recall_kept(c, among):
        return all(results[c][j][1] >= best_recall[j] for j in among)

    def show(label, row, ratio=None):
        cells = "  ".join(f"{nd:.4f}/{rc:.3f}" for nd, rc in row)
        print(f"{label:44s} {cells}" + (f"   worst {ratio:.3f}" if ratio is not None else ""))

    everywhere = range(len(names))
    print(f"{'(nDCG@10/Recall@100)':44s} " + "  ".join(f"{n[:12]:>12s}" for n in names))
    for p, row in singles.items():
        show(p, row)
    for label, c in [("plain RRF k=60 (by document)", (60, (1.0, 1.0, 1.0), 0.0, 0.0, 0.0))]:
        show(label, results[c], worst(c, everywhere))
    ranked = sorted((c for c in results if recall_kept(c, everywhere)), key=lambda c: -worst(c, everywhere))
    print("-- best by worst set (Recall@100 >= the best single path's on every set):")
    for c in ranked[:12]:
        show(label_of(c), results[c], worst(c, everywhere))
    # The choice is made among candidates with equal base weights: no path is trusted more
    # because it won on these sets. The per-query terms (α, β, δ) are free: they read the
    # query and the paths, not the set.
    equal = [c for c in ranked if c[1] == (1.0, 1.0, 1.0)]
    print("-- equal base weights:")
    for c in equal[:8]:
        mean = sum(results[c][j][0] / best[j] for j in everywhere) / len(names)
        show(f"{label_of(c)} (mean {mean:.3f})", results[c], worst(c, everywhere))
    print("-- leave one set out, equal base weights (chosen on the others -> the left-out set):")
    for j, n in enumerate(names):
        others = [i for i in everywhere if i != j]
        eligible = [c for c in results if c[1] == (1.0, 1.0, 1.0) and recall_kept(c, others)]
        pick = max(eligible, key=lambda c: worst(c, others))
        nd, rc = results[pick][j]
        print(f"  {n}: {label_of(pick)} -> {nd:.4f}/{rc:.3f} (ratio {nd / best[j]:.3f})")

    # The choice: among equal-base candidates whose worst ratio is within 0.005 of the best
    # one (a paired standard error on the financial sets is about 0.01), the best mean ratio.
    top = worst(equal[0], everywhere)
    near = [c for c in equal if worst(c, everywhere) >= top - 0.005]
    chosen = max(near, key=lambda c: sum(results[c][j][0] / best[j] for j in everywhere))
    print(f"-- chosen (worst within 0.005 of {top:.3f}, best mean ratio among {len(near)}):")
    show(label_of(chosen), results[chosen], worst(chosen, everywhere))
    k, base, alpha, beta, delta = chosen
    print("-- paired differences over the questions, chosen minus (mean ± one standard error):")
    chosen_fusion = Fusion(*chosen, depth=10**6)
    for label, other in [
        ("plain RRF of chunks, all three", plain_rrf(PATHS)),
        ("plain RRF of chunks, BM25 + SPLADE", plain_rrf(["bm25", "splade"])),
        ("plain RRF of chunks, dense + BM25", plain_rrf(["dense", "bm25"])),
        ("plain RRF of chunks, dense + SPLADE", plain_rrf(["dense", "splade"])),
        ("ranks, k=10 (the same weights)", Fusion(10, *chosen[1:], depth=10**6)),
    ]:
        cells = []
        for n in names:
            runs, qrels = sets[n]
            d = [ndcg10(chosen_fusion(r), qrels[r["qid"]]) - ndcg10(other(r), qrels[r["qid"]]) for r in runs]
            m = sum(d) / len(d)
            se = math.sqrt(sum((x - m) ** 2 for x in d) / (len(d) - 1) / len(d))
            cells.append(f"{m:+.4f} ± {se:.4f}")
        print(f"  {label:40s} " + "  ".join(cells))
    print(f"-- levers, with {label_of(chosen)}:")
    for lever, same in [
        ("δ = 0", lambda c: c[4] == 0.0 and c[2] == alpha),
        ("the chosen δ, β = 3", lambda c: c[4] == delta and c[3] == 3.0 and c[2] == alpha),
        ("α > 0", lambda c: c[2] != 0.0 and c[4] == delta),
    ]:
        alike = [c for c in ranked if c[0] == k and c[1] == base and same(c)]
        if alike:
            show(f"best with {lever}: {label_of(alike[0])}", results[alike[0]], worst(alike[0], everywhere))
    if k is None:
        levers = [
            ("by document", Fusion(k, base, alpha, beta, delta, depth=10**6)),
            ("chunks only", Fusion(k, base, alpha, beta, delta, depth=10**6, chunk_share="chunks")),
            ("depth 30", Fusion(k, base, alpha, beta, delta, depth=30)),
            ("depth 50", Fusion(k, base, alpha, beta, delta, depth=50)),
            ("depth 100", Fusion(k, base, alpha, beta, delta, depth=100)),
            ("ranks instead, k=10", Fusion(10, base, alpha, beta, delta)),
        ]
        for label, f in levers:
            show(label, [evaluate(*sets[n], f) for n in names])
        return
    levers = [
        ("by document", Fusion(k, base, alpha, beta, delta)),
        ("chunks only", Fusion(k, base, alpha, beta, delta, chunk_share="chunks")),
        ("by document + 0.5 · chunk", Fusion(k, base, alpha, beta, delta, chunk_share=0.5)),
        ("by document + 1.0 · chunk", Fusion(k, base, alpha, beta, delta, chunk_share=1.0)),
        ("aggregate further chunks 0.25", Fusion(k, base, alpha, beta, delta, aggregate=0.25)),
        ("aggregate further chunks 0.5", Fusion(k, base, alpha, beta, delta, aggregate=0.5)),
        ("depth 30", Fusion(k, base, alpha, beta, delta, depth=30)),
        ("depth 50", Fusion(k, base, alpha, beta, delta, depth=50)),
    ]
    for label, f in levers:
        show(label, [evaluate(*sets[n], f) for n in names])


if __name__ == "__main__":
    main()
