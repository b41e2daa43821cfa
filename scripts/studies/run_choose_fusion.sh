#!/usr/bin/env bash
# Dumps what scripts/studies/choose_fusion.py reads, on dev splits only, at the API's
# settings (200 candidates a path, HNSW): every path's candidates per question, and the
# engine's own per-question figures for the default and for plain RRF (the latter checks
# that the study's offline RRF is the engine's). Then runs the study.
#
#   SEXTANT=target/release/sextant bash scripts/studies/run_choose_fusion.sh OUT_DIR
#
# Builds the financial dev sets first (scripts/data/build_devsets.py). Indexes are built once
# and cached under $SEXTANT_CACHE_DIR/indexes, as by any `sextant eval`.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
out=${1:?usage: run_choose_fusion.sh OUT_DIR}
sextant=${SEXTANT:-$repo/target/release/sextant}
data=${SEXTANT_SHARED_DIR:-$repo/../shared}/data
cache=${SEXTANT_CACHE_DIR:-$HOME/.cache/sextant}
dev=$cache/devsets
mkdir -p "$out"
python3 "$repo/scripts/data/build_devsets.py" --out "$dev" >&2

# name beir-dir split
sets=(
  "scifact-train $data/scifact train"
  "tatqa-dev $data/tatqa dev"
  "filings-dev $dev/fin-filings dev"
  "calls-dev $dev/fin-calls dev"
  "ratios-dev $dev/fin-filings ratios-dev"
)
checks=(
  "filings-heldout $dev/fin-filings heldout"
  "calls-heldout $dev/fin-calls heldout"
  "ratios-heldout $dev/fin-filings ratios-heldout"
)
args=() engine_default=() engine_plain=()
for spec in "${sets[@]}" "${checks[@]}"; do
  read -r name dir split <<<"$spec"
  if [ ! -s "$out/$name.runs.jsonl" ]; then
    "$sextant" eval --beir "$dir" --split "$split" --json --dump-runs "$out/$name.runs.jsonl" \
      --per-query "$out/$name.default.jsonl" >"$out/$name.default.json"
    "$sextant" eval --beir "$dir" --split "$split" --json --fusion plain \
      --per-query "$out/$name.plain.jsonl" >"$out/$name.plain.json"
  fi
  echo "$name: default $(python3 -c 'import json,sys; v=json.load(open(sys.argv[1])); print(v["nDCG@10"], v["Recall@100"])' "$out/$name.default.json")" >&2
  engine_default+=("$name:$out/$name.default.jsonl")
  engine_plain+=("$name:$out/$name.plain.jsonl")
done
for spec in "${sets[@]}"; do
  read -r name dir split <<<"$spec"
  args+=(--set "$name=$out/$name.runs.jsonl:$dir/qrels/$split.tsv")
done
for spec in "${checks[@]}"; do
  read -r name dir split <<<"$spec"
  args+=(--check "$name=$out/$name.runs.jsonl:$dir/qrels/$split.tsv")
done
join() { local IFS=,; echo "$*"; }
python3 "$here/choose_fusion.py" "${args[@]}" \
  --engine "today's default (engine)=$(join "${engine_default[@]}")" \
  --engine "plain RRF of all three (engine)=$(join "${engine_plain[@]}")" \
  --json "$out/study.json" | tee "$out/study.md"
