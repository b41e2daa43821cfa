#!/bin/bash
# Dense feedback on the four dev sets: one `sextant eval` per set and candidate, printed as
# "set split c m nDCG@10 Recall@10 Recall@100 MRR@10". Candidates are C,M pairs (c: strength,
# m: documents read; c = 0 is the fusion without feedback):
#   scripts/studies/study_feedback.sh 0,3 4,3 8,3 8,2 > runs.tsv && python3 scripts/studies/study_feedback.py runs.tsv
# SEXTANT_BIN picks the binary (default: the debug build of CARGO_TARGET_DIR or target/).
# The evaluations are scripts/studies/study_index.sh's, with the feedback flags as candidates.
set -euo pipefail
candidates=()
for cand in "$@"; do
  candidates+=("--feedback ${cand%,*} --feedback-documents ${cand#*,}")
done
# study_index.sh names a candidate "--feedback_C_--feedback-documents_M".
MODES=hybrid "$(dirname "$0")/study_index.sh" "${candidates[@]}" |
  awk '{ split($3, f, "_"); print $1, $2, f[2], f[4], $5, $6, $7, $8 }'
