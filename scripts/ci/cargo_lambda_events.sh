#!/usr/bin/env bash
# Proves the events in events/ with the real Lambda tooling: `cargo lambda watch` (the
# cargo-lambda PyPI package, with Zig) runs the retrieve and search functions on a local
# index of the demo corpus (Mastercard) and a key file holding the events' key `sx_dev`,
# and `cargo lambda invoke` sends every API Gateway event, checking its status code.
#   bash scripts/ci/cargo_lambda_events.sh     # needs target/debug/sextant (cargo build)
set -euo pipefail
cd "$(dirname "$0")/../.."
cache=${SEXTANT_CACHE_DIR:-$HOME/.cache/sextant}
venv="$cache/lambda-venv"
stamp="cargo-lambda==1.9.2 ziglang==0.17.1"
if [ "$(cat "$venv/.sextant-stamp" 2>/dev/null)" != "$stamp" ]; then
  rm -rf "$venv"; python3 -m venv "$venv"
  # shellcheck disable=SC2086
  "$venv/bin/pip" install -q --disable-pip-version-check $stamp
  echo "$stamp" > "$venv/.sextant-stamp"
fi
export PATH="$venv/bin:$PATH"
bin=${CARGO_TARGET_DIR:-target}/debug/sextant
work=$(mktemp -d)
watch_pid=
cleanup() { [ -n "$watch_pid" ] && kill -- -"$watch_pid" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
"$bin" build --docs data/demo/documents.jsonl.gz --ticker MA --id demo --out "$work/index" 2>/dev/null
"$bin" keys --store "$work/keys.json" create --tenant events --plan pro --key sx_dev >/dev/null 2>&1
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
set -m
cargo lambda watch -A 127.0.0.1 -P "$port" --env-var "SEXTANT_INDEXES=$work/index" --env-var "SEXTANT_KEYS=$work/keys.json" >"$work/watch.log" 2>&1 &
watch_pid=$!
set +m
for _ in $(seq 60); do (echo >"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break; sleep 1; done
expect() {  # event file → expected status (events/README.md)
  case $1 in *-ok.*) echo 200 ;; *-missing-query.*|*-bad-date.*) echo 400 ;; *-no-key.*) echo 401 ;; *) echo unknown ;; esac
}
failures=0
for event in events/*.json; do
  name=$(basename "$event"); fn=sextant-${name%%-*}
  out=$(cargo lambda invoke "$fn" --data-file "$event" -A 127.0.0.1 -P "$port" 2>&1 || true)
  got=$(printf '%s' "$out" | python3 -c 'import json,sys; print(json.load(sys.stdin).get("statusCode"))' 2>/dev/null || echo "no response")
  want=$(expect "$name")
  if [ "$got" = "$want" ]; then echo "cargo lambda invoke $fn $name: $got"; else echo "FAIL $fn $name: got $got, want $want: ${out:0:300}"; failures=$((failures + 1)); fi
done
if [ "$failures" -ne 0 ]; then tail -20 "$work/watch.log"; exit 1; fi
