#!/bin/bash
# Dense feedback on the four dev sets: one `sextant eval` per set and candidate, printed as
# "set split c m nDCG@10 Recall@10 Recall@100 MRR@10". Candidates are C,M pairs (c: strength,
# m: documents read; c = 0 is the fusion without feedback):
#   scripts/study_feedback.sh 0,3 4,3 8,3 8,2 > runs.tsv && python3 scripts/study_feedback.py runs.tsv
# SEXTANT_BIN picks the binary (default: the debug build of CARGO_TARGET_DIR or target/).
set -euo pipefail
D=${SEXTANT_CACHE_DIR:-$HOME/.cache/sextant}/devsets
BIN=${SEXTANT_BIN:-${CARGO_TARGET_DIR:-target}/debug/sextant}
for spec in ../shared/data/scifact:train ../shared/data/tatqa:dev $D/fin-filings:dev $D/fin-calls:dev; do
  p=${spec%:*} s=${spec##*:}
  for cand in "$@"; do
    c=${cand%,*} m=${cand#*,}
    "$BIN" eval --beir "$p" --split "$s" --feedback "$c" --feedback-documents "$m" --json 2>/dev/null | tail -1 |
      python3 -c 'import json,sys; d=json.load(sys.stdin); print(sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], *("%.4f" % d[k] for k in ("nDCG@10","Recall@10","Recall@100","MRR@10")))' "$(basename "$p")" "$s" "$c" "$m"
  done
done
