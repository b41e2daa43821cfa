#!/usr/bin/env bash
# The venv the Python client's tests run in: $SEXTANT_CACHE_DIR/venv-client, from the
# pinned clients/python/requirements-test.txt (made again when it changes), with the package
# (clients/python) built and installed in it, not editable: the venv outlives the checkout
# that made it. The package is installed again whenever its files change. Prints the venv's
# python.
set -euo pipefail
cd "$(dirname "$0")/../.."
cache=${SEXTANT_CACHE_DIR:-$HOME/.cache/sextant}
venv=$cache/venv-client
want=$(sha256sum clients/python/requirements-test.txt | cut -d' ' -f1)
if [ "$(cat "$venv/.requirements-sha256" 2>/dev/null)" != "$want" ]; then
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check -r clients/python/requirements-test.txt >&2
  echo "$want" > "$venv/.requirements-sha256"
  rm -f "$venv/.package-sha256"
fi
package=$(cd clients/python && find pyproject.toml README.md src -type f ! -path '*/__pycache__/*' | LC_ALL=C sort \
  | xargs sha256sum | sha256sum | cut -d' ' -f1)
if [ "$(cat "$venv/.package-sha256" 2>/dev/null)" != "$package" ]; then
  # Its dependencies are the pinned ones above; hatchling, pinned there too, builds it.
  "$venv/bin/pip" install -q --disable-pip-version-check --no-deps --no-build-isolation --force-reinstall \
    ./clients/python >&2
  "$venv/bin/pip" check >&2
  echo "$package" > "$venv/.package-sha256"
fi
echo "$venv/bin/python"
