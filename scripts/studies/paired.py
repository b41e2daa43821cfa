#!/usr/bin/env python3
"""Paired difference of two runs over the same questions: B minus A, per question.

    python3 scripts/studies/paired.py A.jsonl B.jsonl [metric]

A and B come from `sextant eval --per-query FILE` (one JSON object per question: qid and its
metrics); the metric is ndcg_at_10 unless named. Prints the mean difference ± one standard
error (sd / sqrt(n)), and how many questions B does better, worse and the same on.
"""
import json
import math
import sys


def load(path, metric):
    with open(path) as f:
        return {q["qid"]: q[metric] for q in map(json.loads, f) if q}


def main():
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__)
    metric = sys.argv[3] if len(sys.argv) == 4 else "ndcg_at_10"
    a, b = load(sys.argv[1], metric), load(sys.argv[2], metric)
    if set(a) != set(b):
        sys.exit(f"the runs hold different questions ({len(a)} and {len(b)})")
    d = [b[q] - a[q] for q in sorted(a)]
    n = len(d)
    mean = sum(d) / n
    sd = math.sqrt(sum((x - mean) ** 2 for x in d) / (n - 1)) if n > 1 else 0.0
    better, worse = sum(x > 1e-12 for x in d), sum(x < -1e-12 for x in d)
    print(f"{metric}: {mean:+.4f} ± {sd / math.sqrt(n):.4f} over {n} questions; {better} better, {worse} worse, {n - better - worse} the same")


if __name__ == "__main__":
    main()
