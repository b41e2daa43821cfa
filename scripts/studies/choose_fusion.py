#!/usr/bin/env python3
"""Chooses the default fusion among simple, shardable candidates, on dev sets only.

Input: per-path runs dumped by `sextant eval --dump-runs FILE` at the API's settings (each
path's 200 candidate chunks, the dense ones from the HNSW graph), one per dev set, and
optionally the engine's own per-question figures of a fusion the script cannot compute
(`sextant eval --per-query FILE`, for example today's default with dense feedback):

    python3 scripts/studies/choose_fusion.py \
        --set scifact=RUNS.jsonl:QRELS.tsv [--set ...] \
        [--engine default=scifact:PERQ.jsonl,tatqa:PERQ.jsonl,...] \
        [--check NAME=RUNS.jsonl:QRELS.tsv ...] [--json OUT]

`--check` sets (held-out phrasings) are scored but never choose.

Every candidate can be computed by a router from each shard's per-path candidates with
their scores (one round trip): it reads ranks and scores, never vectors.

    chunk RRF:      score(c) = Σ_i w_i / (k + rank_i(c))              (chunks; a document at its best chunk)
    document RRF:   score(d) = Σ_i w_i / (k + urank_i(d))             (urank: the document's rank among
                                                                       path i's documents, each at its best chunk)
    z-scores:       score(d) = Σ_i w_i · z_i(d),   z_i = (s_i − μ_i) / σ_i over path i's documents
                    (a document path i lacks: that list's lowest z)

How the choice is made (the protocol of docs/quality.md):
  1. A candidate is eligible on a set when its Recall@100 is at least the best single
     path's there (no candidate may lose what one path alone finds).
  2. Its figure on a set is its nDCG@10 over the best candidate's on that set; it is judged
     by its worst set, over eligible sets only (ineligible anywhere: out).
  3. Among the candidates within `--tolerance` of the best worst-set figure, the simplest
     wins (chunk RRF < document RRF < weighted document RRF < z-scores < engine-only).
  4. Leave-one-set-out: the rule run on every set but one, the winner scored on that one
     against the best candidate there and against plain RRF of all three.
Only mean figures are printed; nothing here reads a test split.
"""
import argparse
import itertools
import json
import math
import sys
from collections import defaultdict

from metrics import documents, load_qrels, ndcg10, recall100

PATHS = ["dense", "bm25", "splade"]
SHORT = {"dense": "D", "bm25": "B", "splade": "S"}


def load_set(spec):
    name, rest = spec.split("=", 1)
    runs_path, qrels_path = rest.rsplit(":", 1)
    qrels = load_qrels(qrels_path)
    runs = [json.loads(l) for l in open(runs_path) if l.strip()]
    runs = [r for r in runs if any(g > 0 for g in qrels.get(r["qid"], {}).values())]
    for r in runs:
        # Each path's chunks in its own order: by its score, best first (stable for ties).
        for p in PATHS:
            r["chunks"][p] = sorted(r["chunks"][p], key=lambda c: -c[1])
    return name, runs, qrels


def chunk_rrf(paths, k, w):
    def fuse(r):
        score, doc = defaultdict(float), {}
        for p in paths:
            for rank, (d, _, c) in enumerate(r["chunks"][p]):
                score[c] += w[p] / (k + rank + 1)
                doc[c] = d
        order = sorted(score, key=lambda c: (-score[c], c))
        return list(dict.fromkeys(doc[c] for c in order))[:100]

    return fuse


def doc_rrf(paths, k, w):
    def fuse(r):
        score = defaultdict(float)
        for p in paths:
            for rank, (d, _) in enumerate(documents(r["chunks"][p])):
                score[d] += w[p] / (k + rank + 1)
        return sorted(score, key=lambda d: (-score[d], d))[:100]

    return fuse


def zscore_sum(paths, w, lists):
    """Each unit's Σ_i w_i · z_i(u) over `lists` (path i's [(unit, score), ...]): z_i
    standardises path i's scores over its list, and a unit the list lacks gets the list's
    lowest z (a list of fewer than two units, or without spread, adds nothing)."""
    score = dict.fromkeys((u for l in lists for u, _ in l), 0.0)
    for p, l in zip(paths, lists):
        if len(l) < 2:
            continue
        xs = [x for _, x in l]
        mu = sum(xs) / len(xs)
        sd = math.sqrt(sum((x - mu) ** 2 for x in xs) / len(xs))
        if sd <= 1e-9:
            continue
        own = {u: (x - mu) / sd for u, x in l}
        floor = min(own.values())
        for u in score:
            score[u] += w[p] * own.get(u, floor)
    return score


def zscore_doc_scores(paths, w, r):
    """Each document's Σ_i w_i · z_i(d), documents at their best chunk (see `zscore_docs`)."""
    return zscore_sum(paths, w, [documents(r["chunks"][p]) for p in paths])


def doc_rrf_scores(paths, k, r):
    """Each document's Σ_i 1 / (k + urank_i(d)) over the most it can get, |paths| / (k + 1)."""
    score = defaultdict(float)
    for p in paths:
        for rank, (d, _) in enumerate(documents(r["chunks"][p])):
            score[d] += 1 / (k + rank + 1)
    return {d: x * (k + 1) / len(paths) for d, x in score.items()}


def fit_relevance(dev, paths, scores_of):
    """a, b of relevance = σ(a · x + b), x a document's fused score as `scores_of(r)` gives
    it, fitted by logistic regression (Newton's method) on whether each of a question's top
    100 documents is relevant; every dev set weighs the same, whatever its number of
    questions."""
    xs, ys, ws = [], [], []
    for name, runs, qrels in dev:
        pairs = []
        for r in runs:
            score = scores_of(r)
            top = sorted(score, key=lambda d: (-score[d], d))[:100]
            pairs += [(score[d], 1.0 if qrels[r["qid"]].get(d, 0) > 0 else 0.0) for d in top]
        for x, y in pairs:
            xs.append(x)
            ys.append(y)
            ws.append(1.0 / len(pairs))
    a, b = 0.5, -2.0
    for _ in range(50):
        g0 = g1 = h00 = h01 = h11 = 0.0
        for x, y, w in zip(xs, ys, ws):
            t = a * x + b
            p = 1 / (1 + math.exp(-t)) if t > -30 else 0.0
            g0 += w * (p - y) * x
            g1 += w * (p - y)
            v = w * p * (1 - p)
            h00 += v * x * x
            h01 += v * x
            h11 += v
        det = h00 * h11 - h01 * h01
        if det <= 0:
            break
        da = (h11 * g0 - h01 * g1) / det
        db = (h00 * g1 - h01 * g0) / det
        a, b = a - da, b - db
        if abs(da) + abs(db) < 1e-9:
            break
    return a, b


def zscore_docs(paths, w):
    def fuse(r):
        score = zscore_doc_scores(paths, w, r)
        return sorted(score, key=lambda u: (-score[u], u))

    return fuse


def zscore_chunks(paths, w):
    """z-scores of chunks: each path's chunk scores standardised over its chunk list (a
    chunk a path lacks: that list's lowest z), summed; a document at its best chunk."""

    def fuse(r):
        lists = [r["chunks"][p] for p in paths]
        doc = {c: d for l in lists for d, _, c in l}
        score = zscore_sum(paths, w, [[(c, x) for _, x, c in l] for l in lists])
        return list(dict.fromkeys(doc[c] for c in sorted(score, key=lambda c: (-score[c], c))))

    return fuse


def agreement_weights(lists, beta, n=10):
    """w_i = exp(β · (a_i − mean a)), rescaled to sum to the number of lists; a_i the share
    of list i's top n documents that another list has in its top n (the engine's
    `adaptive_weights`)."""
    tops = [[d for d, _ in l[:n]] for l in lists]
    a = []
    for i, top in enumerate(tops):
        others = set(d for j, t in enumerate(tops) if j != i for d in t)
        a.append(sum(1 for d in top if d in others) / len(top) if top else 0.0)
    m = sum(a) / len(a)
    w = [math.exp(beta * (x - m)) for x in a]
    return [x * len(w) / sum(w) for x in w]


def with_tail(fuse, paths, head=20, dense_weight=2.0, k=100):
    """Below the fused top `head` documents, the order of
    tail(d) = Σ_i t_i / (k + urank_i(d)), t_dense = dense_weight, else 1 (the engine's
    recall tail)."""

    def fused(r):
        order = fuse(r)
        ranks = [{d: i + 1 for i, (d, _) in enumerate(documents(r["chunks"][p]))} for p in paths]
        t = [dense_weight if p == "dense" else 1.0 for p in paths]
        rest = order[head:]
        every = set(order) | {d for rk in ranks for d in rk}
        rest = list(dict.fromkeys(rest + sorted(every - set(order), key=str)))
        tail = {d: sum(ti / (k + rk[d]) for ti, rk in zip(t, ranks) if d in rk) for d in rest}
        return (order[:head] + sorted(rest, key=lambda d: (-tail[d], d)))[:100]

    return fused


def zscore_agreement(paths, beta):
    def fuse(r):
        lists = [documents(r["chunks"][p]) for p in paths]
        w = dict(zip(paths, agreement_weights(lists, beta)))
        return zscore_docs(paths, w)(r)

    return fuse


def single(p):
    return lambda r: [d for d, _ in documents(r["chunks"][p])][:100]


def candidates():
    """(label, simplicity, fuse): simplicity orders the tie-break of rule 3."""
    out = []
    subsets = [s for n in (2, 3) for s in itertools.combinations(PATHS, n)]
    eq = dict.fromkeys(PATHS, 1.0)
    name = lambda s: "+".join(SHORT[p] for p in s)
    for s in subsets:
        out.append((f"chunk RRF k=60 {name(s)}", 1, chunk_rrf(s, 60, eq)))
    for s in subsets:
        for k in (10, 30, 60):
            out.append((f"doc RRF k={k} {name(s)}", 2, doc_rrf(s, k, eq)))
    for wd, wb, ws in itertools.product((1.0, 1.5, 2.0), (0.5, 1.0), (0.5, 1.0)):
        if (wd, wb, ws) == (1.0, 1.0, 1.0):
            continue
        w = {"dense": wd, "bm25": wb, "splade": ws}
        out.append((f"doc RRF k=60 D{wd:g} B{wb:g} S{ws:g}", 3, doc_rrf(PATHS, 60, w)))
    for s in subsets:
        out.append((f"z-scores {name(s)}", 4, zscore_docs(s, eq)))
    out.append(("z-scores D+B+S, recall tail", 4, with_tail(zscore_docs(PATHS, eq), PATHS)))
    out.append(("z-scores of chunks D+B+S", 4, zscore_chunks(PATHS, eq)))
    out.append(("z-scores of chunks D+B+S, recall tail", 4, with_tail(zscore_chunks(PATHS, eq), PATHS)))
    out.append(("z-scores D+B+S, agreement β=2", 4, zscore_agreement(PATHS, 2.0)))
    out.append(("z-scores D+B+S, agreement β=2, recall tail", 4, with_tail(zscore_agreement(PATHS, 2.0), PATHS)))
    return out


def per_question(runs, qrels, fuse):
    out = {}
    for r in runs:
        ranked = fuse(r)[:100]
        j = qrels[r["qid"]]
        out[r["qid"]] = (ndcg10(ranked, j), recall100(ranked, j))
    return out


def mean(xs):
    xs = list(xs)
    return sum(xs) / len(xs) if xs else 0.0


def choose(table, sets, floors, tolerance):
    """Rule 1-3 over `sets`: the chosen label, and every label's worst-set figure."""
    best = {s: max(v[s][0] for v in table.values() if s in v) for s in sets}
    worst = {}
    for label, v in table.items():
        if any(s not in v for s in sets) or any(v[s][1] < floors[s] - 1e-9 for s in sets):
            continue
        worst[label] = min(v[s][0] / best[s] for s in sets)
    top = max(worst.values())
    near = [l for l in worst if worst[l] >= top - tolerance]
    chosen = min(near, key=lambda l: (table[l]["_simplicity"], -worst[l]))
    return chosen, worst


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--set", action="append", required=True, help="NAME=RUNS.jsonl:QRELS.tsv (a dev set)")
    ap.add_argument("--check", action="append", default=[], help="NAME=RUNS.jsonl:QRELS.tsv (scored only)")
    ap.add_argument("--engine", action="append", default=[],
                    help="LABEL=SET:PERQ.jsonl,SET:PERQ.jsonl,... (the engine's per-question figures)")
    ap.add_argument("--tolerance", type=float, default=0.005,
                    help="worst-set figures within this of the best count as tied (simplest wins)")
    ap.add_argument("--json", help="write every figure here")
    a = ap.parse_args()

    dev = [load_set(s) for s in a.set]
    check = [load_set(s) for s in a.check]
    cands = candidates()
    table = {}  # label -> {set: (nDCG@10, Recall@100)}, plus _simplicity
    perq = {}  # (label, set) -> {qid: (ndcg, recall)}
    floors = {}
    for name, runs, qrels in dev + check:
        singles = {p: per_question(runs, qrels, single(p)) for p in PATHS}
        floors[name] = max(mean(r for _, r in q.values()) for q in singles.values())
        for p, q in singles.items():
            table.setdefault(f"{p} alone", {"_simplicity": 0})[name] = (mean(n for n, _ in q.values()), mean(r for _, r in q.values()))
        for label, simplicity, fuse in cands:
            q = per_question(runs, qrels, fuse)
            perq[(label, name)] = q
            table.setdefault(label, {"_simplicity": simplicity})[name] = (
                mean(n for n, _ in q.values()), mean(r for _, r in q.values()))
        print(f"{name}: {len(runs)} questions scored", file=sys.stderr)
    for spec in a.engine:
        label, parts = spec.split("=", 1)
        # "LABEL@S": simplicity S (default 5, below every candidate computed here).
        label, _, simplicity = label.partition("@")
        table[label] = {"_simplicity": float(simplicity or 5)}
        for part in parts.split(","):
            s, path = part.split(":", 1)
            rows = [json.loads(l) for l in open(path) if l.strip()]
            table[label][s] = (mean(r["ndcg_at_10"] for r in rows), mean(r["recall_at_100"] for r in rows))
    for label in [l for l in table if l.endswith(" alone")]:
        table[label]["_simplicity"] = 99  # single paths are baselines, never the fusion

    dev_names = [n for n, *_ in dev]
    chosen, worst = choose({l: v for l, v in table.items() if v["_simplicity"] < 99}, dev_names, floors, a.tolerance)
    cols = dev_names + [n for n, *_ in check]
    print("| candidate | worst dev set (share of best) | " + " | ".join(cols) + " |")
    print("|---|---:|" + "---:|" * len(cols))
    order = sorted(table, key=lambda l: -worst.get(l, -1))
    for label in order:
        v = table[label]
        cells = [f"{v[c][0]:.4f} / {v[c][1]:.3f}" if c in v else "" for c in cols]
        w = f"{worst[label]:.4f}" if label in worst else "not eligible" if v["_simplicity"] < 99 else "(baseline)"
        mark = "**" if label == chosen else ""
        print(f"| {mark}{label}{mark} | {w} | " + " | ".join(cells) + " |")
    print(f"\nchosen (rule 1-3, tolerance {a.tolerance}): {chosen}")
    print("floors (best single path's Recall@100): " + ", ".join(f"{s} {floors[s]:.3f}" for s in cols))

    # Leave-one-set-out.
    print("\nleave-one-set-out: | held-out set | chosen on the others | its nDCG@10 | best candidate there | plain RRF of all three |")
    fusions = {l: v for l, v in table.items() if v["_simplicity"] < 99}
    for held in dev_names if len(dev_names) > 1 else []:
        others = [s for s in dev_names if s != held]
        c, _ = choose(fusions, others, floors, a.tolerance)
        best = max(fusions, key=lambda l: fusions[l].get(held, (0, 0))[0])
        plain = "chunk RRF k=60 D+B+S"
        print(f"| {held} | {c} | {fusions[c][held][0]:.4f} | {best} {fusions[best][held][0]:.4f} | {fusions[plain][held][0]:.4f} |")

    # Paired: the chosen candidate against plain RRF of all three and each other subset's plain RRF.
    if chosen in {l for l, _, _ in cands}:
        print("\npaired per question, chosen minus plain chunk RRF (mean ± 1.96 SE):")
        for name in cols:
            for other in [l for l, _, _ in cands if l.startswith("chunk RRF")]:
                x, y = perq[(chosen, name)], perq[(other, name)]
                d = [x[q][0] - y[q][0] for q in x]
                m = mean(d)
                se = math.sqrt(mean((v - m) ** 2 for v in d) / max(1, len(d) - 1))
                print(f"  {name:28s} vs {other:24s} {m:+.4f} ± {1.96 * se:.4f}")
    sig = lambda x: 1 / (1 + math.exp(-x))
    eq = dict.fromkeys(PATHS, 1.0)
    a_, b_ = fit_relevance(dev, PATHS, lambda r: {d: x / 3 for d, x in zscore_doc_scores(PATHS, eq, r).items()})
    print(f"\nrelevance of z-scores of all three paths: σ({a_:.4f} · z̄ + {b_:.4f}), z̄ the mean z-score "
          f"(z̄ = 1: {sig(a_ + b_):.3f}; 2: {sig(2 * a_ + b_):.3f}; 3: {sig(3 * a_ + b_):.3f}; 4: {sig(4 * a_ + b_):.3f})")
    a_, b_ = fit_relevance(dev, PATHS, lambda r: doc_rrf_scores(PATHS, 60, r))
    print(f"relevance of RRF (k = 60) of all three paths: σ({a_:.4f} · r + {b_:.4f}), r the share of the most RRF gives "
          f"(r = 0.4: {sig(0.4 * a_ + b_):.3f}; 0.7: {sig(0.7 * a_ + b_):.3f}; 1: {sig(a_ + b_):.3f})")
    if a.json:
        json.dump({"chosen": chosen, "floors": floors, "worst": worst,
                   "table": {l: {s: list(x) for s, x in v.items() if s != "_simplicity"} for l, v in table.items()}},
                  open(a.json, "w"), indent=1)


if __name__ == "__main__":
    main()
