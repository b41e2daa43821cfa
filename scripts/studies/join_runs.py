#!/usr/bin/env python3
"""One path's runs from another index, joined into a dump by question, for
`scripts/studies/study_fusion.py`: a path over other chunks than the rest (for example dense over
128-token chunks beside the lexical paths over 200-token ones) fused by document.

    python3 scripts/studies/join_runs.py BASE.jsonl OTHER.jsonl PATH > JOINED.jsonl

BASE and OTHER come from `sextant eval --dump-runs` on the same questions (say, the default
index and `--chunk-tokens 128`). Every question of BASE keeps its runs, except PATH's,
which come from OTHER. The joined chunk lists mix two indexes' chunk ids: only the study's
fusions by document mean anything over them.
"""
import json
import sys


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    base_path, other_path, path = sys.argv[1:]
    other = {}
    for line in open(other_path):
        if line.strip():
            run = json.loads(line)
            other[run["qid"]] = run
    for line in open(base_path):
        if not line.strip():
            continue
        run = json.loads(line)
        if run["qid"] not in other:
            sys.exit(f"question {run['qid']} is in {base_path} but not in {other_path}")
        for key in ("paths", "chunks"):
            run[key][path] = other[run["qid"]][key][path]
        print(json.dumps(run))


if __name__ == "__main__":
    main()
