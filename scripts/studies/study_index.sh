#!/bin/bash
# Index settings on the four dev sets: one `sextant eval` per set, candidate and mode, printed
# as "set split candidate mode nDCG@10 Recall@10 Recall@100 MRR@10" (the candidate's spaces
# as underscores; an empty one is "default"). A candidate is a string of build flags of `sextant eval`:
#   scripts/studies/study_index.sh "" "--k1 1.2 --b 0.3" "--chunk-tokens 128" > runs.tsv
# A candidate that changes only BM25 (--k1, --b, --bm25-stemming) reuses the vectors of the
# set's other cached indexes and takes seconds; one that changes the chunks encodes the set.
# MODES picks the modes (default: hybrid); SEXTANT_BIN the binary (default: the debug
# build of CARGO_TARGET_DIR or target/).
set -euo pipefail
D=${SEXTANT_CACHE_DIR:-$HOME/.cache/sextant}/devsets
BIN=${SEXTANT_BIN:-${CARGO_TARGET_DIR:-target}/debug/sextant}
for spec in ../shared/data/scifact:train ../shared/data/tatqa:dev $D/fin-filings:dev $D/fin-calls:dev; do
  p=${spec%:*} s=${spec##*:}
  for cand in "$@"; do
    name=${cand:-default}
    for mode in ${MODES:-hybrid}; do
      # shellcheck disable=SC2086 # a candidate is several flags
      "$BIN" eval --beir "$p" --split "$s" --mode "$mode" $cand --json 2>/dev/null | tail -1 |
        python3 -c 'import json,sys; d=json.load(sys.stdin); print(*sys.argv[1:], *("%.4f" % d[k] for k in ("nDCG@10","Recall@10","Recall@100","MRR@10")))' \
          "$(basename "$p")" "$s" "${name// /_}" "$mode"
    done
  done
done
