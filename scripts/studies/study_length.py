#!/usr/bin/env python3
"""Offline study of the query-length switch: a question of more than L words is fused by
the ranks of the paths' documents (RRF with k), a shorter one by their z-scores, both with
the default's per-query weights (β = 2, δ = 2, equal base weights). Reads the runs that
`sextant eval --dump-runs FILE` writes, as `scripts/studies/study_fusion.py` does (whose functions
it uses), so it cannot show dense feedback: `sextant eval` measures the chosen switch with
it.

    method(q) = ranks (k)   when len(q) > L
              = z-scores    otherwise            (len(q): the question's words)

len(q) here counts every word, as the switch did when L was chosen; the engine has since
stopped counting the role set in front of a question ("You are an equity analyst."),
which BM25 and SPLADE do not read, and L = 22 was measured again then beside 16, 19, 26
and 30 with `sextant eval` (git history: README.md at d186f3e, "Then the dense list beside
feedback").

Every (k, L) is scored on every dev set by its ratio to the best candidate on that set
(nDCG@10) and judged by its worst set; L = ∞ is the default without the switch.
Leave-one-set-out then asks whether the choice carries to a set it did not see.

    python3 scripts/studies/study_length.py NAME=RUNS.jsonl:QRELS.tsv [NAME=RUNS:QRELS ...]

Needs numpy (see scripts/studies/study_fusion.py). Only dev and training splits go in here.
"""
import sys

import numpy as np

from study_fusion import Fusion, load, ndcg10, words_of

KS = (20, 40, 60, 100)
LENGTHS = (14, 16, 18, 20, 22, 24, 26, 28, 30, None)  # None: never by ranks


def main():
    sets = {}
    for arg in sys.argv[1:]:
        name, files = arg.split("=", 1)
        sets[name] = load(*files.split(":"))
    names = list(sets)
    by_scores = Fusion(None, (1.0, 1.0, 1.0), 0.0, 2.0, 2.0, depth=10**6)
    by_ranks = {k: Fusion(k, (1.0, 1.0, 1.0), 0.0, 2.0, 2.0, depth=10**6) for k in KS}
    # Per question: its length, nDCG@10 by scores, and by ranks for each k.
    per = {}
    for n, (runs, qrels) in sets.items():
        per[n] = [
            (len(words_of(r["query"])), ndcg10(by_scores(r), qrels[r["qid"]]),
             {k: ndcg10(f(r), qrels[r["qid"]]) for k, f in by_ranks.items()})
            for r in runs
        ]
        lengths = [q[0] for q in per[n]]
        print(f"{n}: {len(lengths)} questions, words median {np.median(lengths):.0f}, "
              f"10th-90th percentile {np.percentile(lengths, 10):.0f}-{np.percentile(lengths, 90):.0f}, "
              f"{np.mean([x > 22 for x in lengths]):.0%} over 22")
    results = {}
    for k in KS:
        for limit in LENGTHS:
            results[(k, limit)] = [
                float(np.mean([ranks[k] if limit is not None and n_words > limit else z for n_words, z, ranks in per[n]]))
                for n in names
            ]
    best = [max(r[j] for r in results.values()) for j in range(len(names))]
    everywhere = range(len(names))

    def worst(c, among):
        return min(results[c][j] / best[j] for j in among)

    def label(c):
        return "never (scores)" if c[1] is None else f"k={c[0]}, L={c[1]}"

    print(f"{'nDCG@10':24s} " + "  ".join(f"{n[:11]:>11s}" for n in names))
    for c in sorted(results, key=lambda c: -worst(c, everywhere))[:10] + [(60, None)]:
        print(f"{label(c):24s} " + "  ".join(f"{x:11.4f}" for x in results[c]) + f"   worst {worst(c, everywhere):.4f}")
    print("-- leave one set out (chosen on the others -> the left-out set; ties: the longer L):")
    for j, n in enumerate(names):
        others = [i for i in everywhere if i != j]
        pick = max(results, key=lambda c: (worst(c, others), c[1] if c[1] is not None else 10**6))
        print(f"  {n}: {label(pick)} -> {results[pick][j]:.4f} (never: {results[(60, None)][j]:.4f})")


if __name__ == "__main__":
    main()
