#!/usr/bin/env bash
# Full and incremental build on the bundled demo corpus (or the companies in TICKERS), in
# one script on one machine: build 99 % of the documents from empty, then the whole corpus
# into the same directory (the 1 % added, at least one document, is spread evenly), then the
# same again (unchanged). Prints each build report's figures and the incremental/full encode ratio.
#   bash scripts/bench/bench_build.sh                 # whole demo corpus (about an hour on 2 cores)
#   TICKERS="MA XOM ORCL" bash scripts/bench/bench_build.sh
#   WORKERS=2 bash scripts/bench/bench_build.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
bash scripts/ci/fetch_models.sh >/dev/null
cargo build --release -p sextant-cli >/dev/null
bin=${CARGO_TARGET_DIR:-target}/release/sextant
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 - "$work" "${TICKERS:-}" <<'PY'
import gzip, json, sys
work, tickers = sys.argv[1], sys.argv[2].split()
docs = [l for l in gzip.open("data/demo/documents.jsonl.gz", "rt") if l.strip()]
if tickers:
    docs = [l for l in docs if json.loads(l).get("ticker") in tickers]
with open(f"{work}/all.jsonl", "w") as f:
    f.writelines(docs)
held = max(1, len(docs) // 100)
step = len(docs) // held
back = {step * k + step - 1 for k in range(held)}
with open(f"{work}/base.jsonl", "w") as f:
    f.writelines(l for i, l in enumerate(docs) if i not in back)
print(f"{len(docs)} documents, {held} held back for the incremental build (every {step}th)")
PY
run() { "$bin" build --docs "$1" --out "$work/index" --workers "${WORKERS:-1}" --json 2>/dev/null > "$work/$2.json"; }
run "$work/base.jsonl" full
run "$work/all.jsonl" incremental
run "$work/all.jsonl" unchanged
python3 - "$work" <<'PY'
import json, sys
work = sys.argv[1]
r = {k: json.load(open(f"{work}/{k}.json")) for k in ["full", "incremental", "unchanged"]}
for k, v in r.items():
    p = v["phases"]
    print(f"{k:12} documents {v['documents']:6} chunks {v['chunks']:6} encoded {v['chunks_encoded']:6} "
          f"reused {v['chunks_reused']:6} beyond_window {v['tokens_beyond_window']} unchanged {v['unchanged']} "
          f"seconds {v['seconds']:8.1f} (plan {p['plan']:.1f}, encode {p['encode']:.1f}, merge {p['merge']:.1f}, "
          f"write {p['write']:.1f})")
f, i = r["full"], r["incremental"]
print(f"full build: {f['chunks_encoded'] / f['phases']['encode']:.1f} chunks/s encoded")
print(f"incremental encode time / full encode time: {i['phases']['encode'] / f['phases']['encode']:.2%} "
      f"(chunks added: {i['chunks'] - f['chunks']}, {(i['chunks'] - f['chunks']) / f['chunks']:.2%} of the full build)")
print(f"incremental total / full total: {i['seconds'] / f['seconds']:.2%}")
PY
