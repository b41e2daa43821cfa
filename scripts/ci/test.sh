#!/usr/bin/env bash
# The project's test command: fetch and convert the models (cached), start the S3 and
# DynamoDB test servers (SeaweedFS, moto), build the binaries the end-to-end tests run,
# then run every test; the servers are stopped on exit.
#   scripts/ci/test.sh            # all tests
#   scripts/ci/test.sh -p sextant # arguments go to cargo test
set -euo pipefail
cd "$(dirname "$0")/../.."
bash scripts/ci/fetch_models.sh --with mpnet-base-v2 >/dev/null   # mpnet: its golden tests
# wrk (Debian) for the load test, so this script alone works on a fresh machine.
if ! command -v wrk >/dev/null; then
  apt-get install -y -q wrk >/dev/null || { apt-get update -q >/dev/null && apt-get install -y -q wrk >/dev/null; }
fi
# Debian's Chromium and chromedriver for the playground's browser test.
if ! [ -x /usr/bin/chromium ] || ! [ -x /usr/bin/chromedriver ]; then
  apt-get install -y -q chromium chromium-driver >/dev/null \
    || { apt-get update -q >/dev/null && apt-get install -y -q chromium chromium-driver >/dev/null; }
fi
# The official Alibaba Cloud SDK, in its own venv, for the knowledge-base API test.
SEXTANT_SDK_PYTHON=$(bash scripts/ci/sdk_venv.sh)
export SEXTANT_SDK_PYTHON
# The Python client (clients/python) and its pinned test requirements, for tests/python_client.rs.
SEXTANT_CLIENT_PYTHON=$(bash scripts/ci/client_venv.sh)
export SEXTANT_CLIENT_PYTHON
envfile=$(bash scripts/ci/aws_servers.sh start | tail -n1)
trap 'bash scripts/ci/aws_servers.sh stop >/dev/null 2>&1 || true' EXIT
# shellcheck disable=SC1090
. "$envfile"
# The Lambda end-to-end tests run the function binaries and the CLI as processes. Built
# with --all-targets, as cargo test builds the library: `--bins` alone unifies features
# without the dev-dependencies, so it compiled tract and the library a second time (3.4 min
# of a run from empty).
locked=()
for a in "$@"; do [ "$a" = --locked ] && locked=(--locked); done
cargo build --workspace --all-targets "${locked[@]}"
cargo test --workspace "$@"
# With no filter, also prove events/ with cargo lambda watch + invoke.
only_locked=true
for a in "$@"; do [ "$a" != --locked ] && only_locked=false; done
if $only_locked; then
  bash scripts/ci/cargo_lambda_events.sh
  # Load, briefly: 5 s at 8, 32 and 128 connections (no error, no 5xx, memory flat).
  echo "== load (short)"
  LOAD_SECONDS=5 bash scripts/bench/load.sh
  # The library reference must build without a warning (broken links, missing docs).
  echo "== cargo doc"
  RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps "${locked[@]}"
fi
