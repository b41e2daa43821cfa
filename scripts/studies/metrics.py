"""What the fusion studies share (`choose_fusion.py`, `study_fusion.py`): the qrels reader,
a path's documents from its dumped chunk list, and nDCG@10 and Recall@100 as `sextant eval`
computes them, over document ids ranked best first and a question's judged documents.
"""

import math
from collections import defaultdict


def load_qrels(path):
    """BEIR qrels (`query-id corpus-id score`, a header line optional): qid -> {doc: grade}."""
    qrels = defaultdict(dict)
    for i, line in enumerate(open(path)):
        c = line.rstrip("\n").split("\t")
        if i == 0 and c[0] == "query-id":
            continue
        qrels[c[0]][c[1]] = int(c[2])
    return qrels


def ndcg10(ranked, judged):
    """nDCG@10 with graded gains: Σ g_i / log2(i + 2) over the ideal order's."""
    dcg = sum(judged.get(d, 0) / math.log2(i + 2) for i, d in enumerate(ranked[:10]))
    ideal = sorted((g for g in judged.values() if g > 0), reverse=True)[:10]
    idcg = sum(g / math.log2(i + 2) for i, g in enumerate(ideal))
    return dcg / idcg if idcg else 0.0


def recall100(ranked, judged):
    """The share of the relevant documents in the first 100."""
    rel = {d for d, g in judged.items() if g > 0}
    return len(rel & set(ranked[:100])) / len(rel) if rel else 0.0


def documents(chunks):
    """A path's documents at their best (first) chunk, with that chunk's score, from its
    dumped chunk list (`[document, score, chunk]`, best first)."""
    seen, out = set(), []
    for d, x, _ in chunks:
        if d not in seen:
            seen.add(d)
            out.append((d, x))
    return out
