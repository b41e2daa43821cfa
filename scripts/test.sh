#!/usr/bin/env bash
# The project's test command: fetch and convert the models (cached), then run every test.
#   scripts/test.sh            # all tests
#   scripts/test.sh -p sextant # arguments go to cargo test
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/fetch_models.sh >/dev/null
cargo test --workspace "$@"
