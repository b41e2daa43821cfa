#!/usr/bin/env bash
# The venv the end-to-end tests run official SDKs from (scripts/ci/requirements-sdk.txt,
# pinned): the Alibaba Cloud Model Studio SDK (knowledge-base Retrieve) and Cohere's (the
# hosted-reranker test's protocol server): $SEXTANT_CACHE_DIR/venv-sdk. Made once, and again
# when the requirements change. Prints the venv's python.
set -euo pipefail
cd "$(dirname "$0")/../.."
cache=${SEXTANT_CACHE_DIR:-$HOME/.cache/sextant}
venv=$cache/venv-sdk
want=$(sha256sum scripts/ci/requirements-sdk.txt | cut -d' ' -f1)
if [ "$(cat "$venv/.requirements-sha256" 2>/dev/null)" != "$want" ]; then
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check -r scripts/ci/requirements-sdk.txt >&2
  echo "$want" > "$venv/.requirements-sha256"
fi
echo "$venv/bin/python"
