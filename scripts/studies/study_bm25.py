#!/usr/bin/env python3
"""Offline study of BM25 levers, with a BM25 written here (Lucene's formula, k1 0.9, b 0.4,
the engine's stop list, words split at anything not a letter or digit):

- the analyzer: Snowball English stemming (as the engine's BM25) or none;
- the unit: whole passages, or passages cut into 150-word chunks with the title in front
  of each (about the engine's 200-token chunks), a document at its best chunk;
- query-side term weighting: each query term weighted (idf_t / mean idf of the query)^γ.

Each variant is measured alone (nDCG@10, Recall@100), and, given runs dumped by
`sextant eval --dump-runs`, fused: its document list (with scores) replaces the engine's
BM25 list in the default fusion (z-scores by document, agreement weights with β = 3),
beside the engine's dense and SPLADE lists.

    python3 scripts/studies/study_bm25.py NAME=BEIR_DIR:SPLIT[:RUNS.jsonl] ...

Needs numpy and snowballstemmer (`pip install numpy snowballstemmer` in a venv). Only dev
and training splits go in here.
"""
import json
import math
import re
import sys
from collections import Counter, defaultdict

import numpy as np
import snowballstemmer

sys.path.insert(0, __file__.rsplit("/", 1)[0])
import study_fusion as sf  # noqa: E402

# lib/core/src/index/analyzer.rs's STOP_WORDS.
STOP = set(
    "a an and are as at be but by for if in into is it no not of on or such that the their then there these "
    "they this to was will with we our you your i me my he she his her its them those what which who whom "
    "were been being have has had do does did from so than too very can would should could about also us am "
    "how when where why".split()
)
STEMMER = snowballstemmer.stemmer("english")


def words(text):
    return [w for w in re.findall(r"[^\W_]+", text.lower()) if w not in STOP]


def stemmed(text):
    return [STEMMER.stemWord(w) for w in words(text)]


class Bm25:
    """BM25 over units (passages or chunks) of a BEIR corpus; a document at its best unit."""

    def __init__(self, beir, analyze, chunk_words=None):
        self.analyze = analyze
        units, self.owner = [], []
        for line in open(f"{beir}/corpus.jsonl"):
            d = json.loads(line)
            title, body = analyze(d.get("title") or ""), analyze(d["text"])
            step = chunk_words or max(1, len(body))
            for s in range(0, max(1, len(body)), step):
                units.append(title + body[s : s + step])
                self.owner.append(d["_id"])
        n, avg = len(units), sum(map(len, units)) / len(units)
        df = Counter(t for u in units for t in set(u))
        self.idf = {t: math.log(1 + (n - f + 0.5) / (f + 0.5)) for t, f in df.items()}
        self.post = defaultdict(list)
        for i, u in enumerate(units):
            norm = 0.9 * (1 - 0.4 + 0.4 * len(u) / avg)
            for t, f in Counter(u).items():
                self.post[t].append((i, self.idf[t] * f / (f + norm)))

    def search(self, query, gamma=0.0, depth=200):
        """Documents best first, each with its best unit's score."""
        counts = Counter(t for t in self.analyze(query) if t in self.idf)
        mean_idf = sum(self.idf[t] for t in counts) / max(1, len(counts))
        score = defaultdict(float)
        for t, c in counts.items():
            w = c * (self.idf[t] / mean_idf) ** gamma
            for i, impact in self.post[t]:
                score[i] += w * impact
        best = {}
        for i in sorted(score, key=lambda i: -score[i]):
            best.setdefault(self.owner[i], score[i])
            if len(best) >= depth:
                break
        return list(best.items())


def fuse(lists, beta=3.0):
    """The engine's default fusion of document lists: agreement weights, then z-scores."""
    agr = np.array([sf.agreement(lists, i) for i in range(len(lists))])
    return sf.zscore_fuse(lists, np.exp(beta * (agr - agr.mean())))[:100]


def main():
    variants = [
        ("stemmed, 150-word chunks", stemmed, 150, 0.0),
        ("unstemmed, 150-word chunks", words, 150, 0.0),
        ("stemmed, whole passages", stemmed, None, 0.0),
        ("unstemmed, whole passages", words, None, 0.0),
        ("unstemmed, whole passages, γ = 0.5", words, None, 0.5),
        ("unstemmed, whole passages, γ = 1", words, None, 1.0),
    ]
    for arg in sys.argv[1:]:
        name, spec = arg.split("=", 1)
        parts = spec.split(":")
        beir, split, runs_path = parts[0], parts[1], parts[2] if len(parts) > 2 else None
        qrels = defaultdict(dict)
        for i, line in enumerate(open(f"{beir}/qrels/{split}.tsv")):
            c = line.rstrip("\n").split("\t")
            if i == 0 and c[0] == "query-id":
                continue
            qrels[c[0]][c[1]] = int(c[2])
        queries = {q["_id"]: q["text"] for q in map(json.loads, open(f"{beir}/queries.jsonl"))}
        runs = sf.load(runs_path, f"{beir}/qrels/{split}.tsv")[0] if runs_path else []
        asked = [q for q, j in qrels.items() if any(g > 0 for g in j.values())]
        print(f"{name} ({len(asked)} questions): nDCG@10 / Recall@100 alone" + (", nDCG@10 fused" if runs else ""))
        indexes = {}
        for label, analyze, chunk_words, gamma in variants:
            key = (analyze, chunk_words)
            if key not in indexes:
                indexes[key] = Bm25(beir, analyze, chunk_words)
            bm25 = indexes[key]
            nd = rc = 0.0
            for q in asked:
                ranked = [d for d, _ in bm25.search(queries[q], gamma)]
                nd += sf.ndcg10(ranked, qrels[q])
                rc += sf.recall100(ranked, qrels[q])
            cell = f"  {label:38s} {nd / len(asked):.4f} / {rc / len(asked):.3f}"
            if runs:
                fused = [
                    sf.ndcg10(
                        fuse(
                            [
                                sf.documents(r["chunks"]["dense"]),
                                bm25.search(r["query"], gamma),
                                sf.documents(r["chunks"]["splade"]),
                            ]
                        ),
                        qrels[r["qid"]],
                    )
                    for r in runs
                ]
                cell += f"   fused {sum(fused) / len(fused):.4f}"
            print(cell, flush=True)


if __name__ == "__main__":
    main()
