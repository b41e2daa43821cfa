#!/usr/bin/env python3
"""Round 4 of the fusion choice (docs/quality.md): the default with each long question
fused instead by a subset of paths, per question.

A long question is one the engine's length switch reads as long (more than 22 words;
the engine counts the words of the question without its role sentence, this study counts
the question's words as written, which overcounts only questions with a role sentence).
The default's per-question nDCG@10 comes from the engine (`sextant eval --per-query`); a
subset's is computed from the dumped path lists, as `choose_fusion.py` computes it. For
short questions the candidate is the default.

    python3 scripts/studies/long_subsets.py STUDY_DIR

STUDY_DIR is `run_choose_fusion.sh`'s output (NAME.runs.jsonl, NAME.default.jsonl).
"""

import collections
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import choose_fusion as cf  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
DATA = Path(os.environ.get("SEXTANT_SHARED_DIR", REPO.parent / "shared")) / "data"
DEV = Path(os.environ.get("SEXTANT_CACHE_DIR", Path.home() / ".cache/sextant")) / "devsets"
SETS = {
    "scifact-train": (DATA / "scifact", "train"),
    "tatqa-dev": (DATA / "tatqa", "dev"),
    "filings-dev": (DEV / "fin-filings", "dev"),
    "calls-dev": (DEV / "fin-calls", "dev"),
    "ratios-dev": (DEV / "fin-filings", "ratios-dev"),
    "filings-heldout": (DEV / "fin-filings", "heldout"),
    "calls-heldout": (DEV / "fin-calls", "heldout"),
    "ratios-heldout": (DEV / "fin-filings", "ratios-heldout"),
}
LONG_WORDS = 22


def main():
    study = Path(sys.argv[1])
    eq = dict.fromkeys(cf.PATHS, 1.0)
    candidates = {
        "long -> plain RRF D+B": cf.chunk_rrf(("dense", "bm25"), 60, eq),
        "long -> plain RRF D+B+S": cf.chunk_rrf(cf.PATHS, 60, eq),
        "long -> z-scores D+B": cf.zscore_docs(("dense", "bm25"), eq),
    }
    for name, (beir, split) in SETS.items():
        queries = {}
        for line in open(beir / "queries.jsonl"):
            q = json.loads(line)
            queries[q["_id"]] = q["text"]
        _, runs, qrels = cf.load_set(f"{name}={study}/{name}.runs.jsonl:{beir}/qrels/{split}.tsv")
        default = {}
        for line in open(study / f"{name}.default.jsonl"):
            q = json.loads(line)
            default[q["qid"]] = q["ndcg_at_10"]
        out = collections.defaultdict(list)
        long = 0
        for r in runs:
            qid = r["qid"]
            is_long = len(queries[qid].split()) > LONG_WORDS
            long += is_long
            out["the default"].append(default[qid])
            for label, fuse in candidates.items():
                out[label].append(cf.ndcg10(fuse(r)[:100], qrels[qid]) if is_long else default[qid])
        figures = "  ".join(f"{k} {cf.mean(v):.4f}" for k, v in out.items())
        print(f"{name} ({len(runs)} questions, {long} long): {figures}")


if __name__ == "__main__":
    main()
