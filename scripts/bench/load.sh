#!/usr/bin/env bash
# Load test of the local server with wrk (Debian package) and a realistic query mix
# (scripts/bench/load.lua: /v1/retrieve, /v1/search and /v1/context), on the demo index of three
# companies (MA, XOM, ORCL; built once and cached, as by the API tests).
#
#   bash scripts/bench/load.sh                       # 60 s at 8, 32 and 128 connections
#   LOAD_SECONDS=5 bash scripts/bench/load.sh        # CI's short run
#
# Prints one markdown row per run: throughput, latency p50/p99/p99.9, statuses, socket
# errors, and the server's resident memory before and after. Fails when a request gets
# anything but 200, 429 or 503 (an error in the envelope), when a connection fails, when
# the lightest load (the first count) sees any error, or when memory grows by over 25 %
# from the first run to the last.
set -euo pipefail
cd "$(dirname "$0")/../.."
secs=${LOAD_SECONDS:-60}
read -r -a conns <<<"${LOAD_CONNECTIONS:-8 32 128}"
bin=${SEXTANT_BIN:-${CARGO_TARGET_DIR:-target}/debug/sextant}
command -v wrk >/dev/null || { echo "load: wrk is missing (apt-get install wrk)" >&2; exit 1; }
[ -x "$bin" ] || { echo "load: no sextant binary at $bin (cargo build -p sextant-cli, or set SEXTANT_BIN)" >&2; exit 1; }

tmp=$(mktemp -d)
pid=
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null; wait 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
# A plan whose limits the load cannot reach: this measures the engine, not the rate limiter.
"$bin" plans --store "$tmp/keys.json" set load --max-top-k 50 --per-minute 1000000000 --per-day 1000000000 >/dev/null
"$bin" serve --addr 127.0.0.1:0 --docs data/demo/documents.jsonl.gz --ticker MA --ticker XOM --ticker ORCL \
  --facts data/demo/facts.jsonl.gz --keys "$tmp/keys.json" --dev-key sx_load --dev-plan load \
  >"$tmp/serve.out" 2>"$tmp/serve.err" &
pid=$!
addr=
for _ in $(seq 1 1800); do
  addr=$(grep -o 'http://[0-9.:]*' "$tmp/serve.out" | head -n1 | sed 's|http://||') || true
  if [ -n "$addr" ] && [ "$(curl -s -o /dev/null -w '%{http_code}' "http://$addr/health")" = 200 ]; then break; fi
  kill -0 "$pid" 2>/dev/null || { cat "$tmp/serve.err" >&2; echo "load: the server stopped" >&2; exit 1; }
  sleep 0.5
done
rss() { awk '/VmRSS/ { print $2 }' "/proc/$pid/status"; }
export SEXTANT_LOAD_KEY=sx_load
# Warm up (first touches of the index pages, allocator growth) before measuring memory.
wrk -t2 -c8 -d"$(( secs < 10 ? secs : 10 ))"s --timeout 30s -s scripts/bench/load.lua "http://$addr" >/dev/null

echo "| connections | requests/s | p50 ms | p99 ms | p99.9 ms | statuses | socket errors | server RSS MB (before → after) |"
echo "|---|---|---|---|---|---|---|---|"
first_rss=$(rss)
status=0
for c in "${conns[@]}"; do
  before=$(rss)
  wrk -t2 -c"$c" -d"${secs}"s --timeout 30s -s scripts/bench/load.lua "http://$addr" >"$tmp/wrk.out"
  after=$(rss)
  line=$(grep '^RESULT ' "$tmp/wrk.out" | sed 's/^RESULT //') || { cat "$tmp/wrk.out" >&2; exit 1; }
  python3 - "$line" "$c" "$before" "$after" "${conns[0]}" <<'PY' || status=1
import json, sys
r, c, before, after, lightest = json.loads(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
statuses = ", ".join(f"{k}: {v}" for k, v in sorted(r["status"].items()))
sock = r["socket_errors"]
errs = ", ".join(f"{k} {v}" for k, v in sock.items() if v) or "0"
print(f"| {c} | {r['rps']:.1f} | {r['p50_ms']:.0f} | {r['p99_ms']:.0f} | {r['p999_ms']:.0f} | {statuses} | {errs} | {before/1024:.0f} → {after/1024:.0f} |")
bad = [k for k in r["status"] if k not in ("200", "429", "503")]
problems = []
if bad: problems.append(f"statuses {bad}")
if any(sock.values()): problems.append(f"socket errors {sock}")
if c == lightest and any(k != "200" for k in r["status"]): problems.append("errors below saturation")
if problems:
    print(f"load: {c} connections: " + "; ".join(problems), file=sys.stderr)
    sys.exit(1)
PY
done
last_rss=$(rss)
if [ $(( last_rss * 100 )) -gt $(( first_rss * 125 )) ]; then
  echo "load: server memory grew from $((first_rss / 1024)) MB to $((last_rss / 1024)) MB" >&2
  status=1
fi
exit $status
