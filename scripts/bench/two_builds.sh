#!/usr/bin/env bash
# Two release builds of `sextant` side by side, in one run: nDCG@10 and Recall@100 at the
# API's settings on SciFact and TAT-QA (test, and the splits constants are chosen on), the
# memory a loaded 100,000-chunk index holds (`bench-load`: estimate, resident, peak of one
# load and of two), and search latency at 11,249 and 100,000 chunks, the builds alternating.
# A change to what an index holds is kept only if nDCG@10 moves by less than 0.002
# (issue 40, item 8).
#   scripts/bench/two_builds.sh BEFORE AFTER     # two sextant binaries
# AFTER builds and saves the indexes first, so they carry what it writes.
set -u
[ $# -eq 2 ] || { echo "usage: $0 BEFORE AFTER" >&2; exit 2; }
B=$1 A=$2
cd "$(dirname "$0")/../.."
export SEXTANT_CACHE_DIR=${SEXTANT_CACHE_DIR:-$HOME/.cache/sextant}
for s in "scifact test" "scifact train" "tatqa test" "tatqa dev"; do
  set -- $s
  for S in "$A" "$B"; do
    echo "== $S eval $1 $2"
    "$S" eval --beir ../shared/data/$1 --split $2 --json 2>/dev/null
  done
done
echo "== $A bench (makes the 100,000-chunk index)"
"$A" bench --beir ../shared/data/scifact --scale 100000 --queries 300 --json 2>/dev/null >/dev/null
dir=$(ls -d "$SEXTANT_CACHE_DIR"/bench/synthetic-100000-* | head -1)
python3 -c "import json; m=json.load(open('$dir/manifest.json')); \
  [print(f['name'], round(f['bytes']/m['chunks']), 'bytes a chunk') for f in m['files']]"
for S in "$B" "$A" "$B" "$A"; do echo "== $S bench-load"; "$S" bench-load --index "$dir"; done
for S in "$B" "$A" "$B" "$A"; do
  echo "== $S bench"
  "$S" bench --beir ../shared/data/scifact --scale 100000 --queries 300 --json 2>/dev/null
done
