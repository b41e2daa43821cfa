#!/usr/bin/env bash
# Time the README's first command on a fresh clone with an empty CARGO_TARGET_DIR and an
# empty SEXTANT_CACHE_DIR: seconds until `cargo run -p sextant-cli -- serve` listens (build
# and models included) and until its first /v1/retrieve answer. Stops the server after.
#
#   bash scripts/bench/serve_from_empty.sh
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
trap 'pkill -f "serve --addr 127.0.0.1:18099" || true; rm -rf "$work"' EXIT
# Beside the repository, so that ../shared resolves as in a clone.
clone=$(dirname "$repo")/sextant-fresh-$$
git clone -q "$repo" "$clone"
trap 'pkill -f "serve --addr 127.0.0.1:18099" || true; rm -rf "$work" "$clone"' EXIT
cd "$clone"
export CARGO_TARGET_DIR=$work/target SEXTANT_CACHE_DIR=$work/cache CARGO_INCREMENTAL=0
start=$(date +%s.%N)
cargo run -q -p sextant-cli -- serve --addr 127.0.0.1:18099 --dev-key sx_fresh >"$work/out" 2>"$work/err" &
listening=""
while true; do
  now() { echo "$(date +%s.%N) - $start" | bc; }
  if [ -z "$listening" ] && grep -q listening "$work/out"; then listening=$(now); echo "listening after $listening s"; fi
  code=$(curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:18099/v1/retrieve -H 'Authorization: Bearer sx_fresh' \
    -H 'Content-Type: application/json' -d '{"query": "What drove revenue growth?"}' || true)
  if [ "$code" = 200 ]; then echo "first answer after $(now) s"; break; fi
  sleep 1
done
