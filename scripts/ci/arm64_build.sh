#!/usr/bin/env bash
# `sam build`, run for real, its arm64 artefacts held to Lambda's limits and run under
# qemu-aarch64.
#
# The machine's Rust toolchain has no aarch64 standard library and rustup cannot fetch one,
# so the build runs in a Debian trixie root (debootstrap) with Debian's own Rust toolchain
# and its arm64 standard library (trixie-backports), cached under $SEXTANT_CACHE_DIR, and
# cargo-lambda, Zig and the SAM CLI from PyPI. There:
#   - `cargo lambda build --release --arm64` builds the four functions and the `sextant`
#     CLI in one cargo run (the CLI is not deployed: it is what runs the search below);
#   - `sam build --beta-features --language-extensions`, the command the README gives,
#     builds the template's functions (cargo lambda again, one `--bin` each: each finds
#     the first run's build fresh, as the same features are unified) and the models layer
#     (infra/layer/Makefile).
# Then, for each function as `sam build` left it in its build directory:
#   - it must be the binary cargo lambda built (byte for byte), stripped;
#   - with the layer, unzipped, it must be at most 250 MB, and its GLIBC symbol versions at
#     most provided.al2023's 2.34;
# and the arm64 `sextant` binary, under qemu-aarch64 with the built layer's ONNX Runtime
# and models, must encode a question and answer a search on a small index with the ONNX
# Runtime backend (not the tract fallback), the same hits as this machine's own binary.
#
#   bash scripts/ci/arm64_build.sh [SEXTANT_X86]    (CI runs it; SEXTANT_X86 builds the index)
#   bash scripts/ci/arm64_build.sh --cached         (exit 0: its caches are warm)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
cache=${SEXTANT_CACHE_DIR:-$HOME/.cache/sextant}
x86=${1:-${CARGO_TARGET_DIR:-$repo/target}/debug/sextant}   # or --cached
root="$cache/arm64-toolchain"              # the Debian root
target=${SEXTANT_ARM64_TARGET_DIR:-$HOME/.cache/sextant-arm64-target}
limit=$((250 * 1000 * 1000))               # Lambda: 250 MB for a function and its layers, unzipped
glibc_max=2.34                             # provided.al2023's glibc
packages="rustc cargo libstd-rust-dev:arm64"          # from trixie-backports
tools="gcc libc6-dev make python3 python3-venv ca-certificates"
lambda="cargo-lambda==1.9.2 ziglang==0.17.1 aws-sam-cli==1.170.0"   # cargo lambda as scripts/ci/cargo_lambda_events.sh
stamp="trixie; backports: $packages; $tools; $lambda"
functions=$(sed -n 's/^ *Binary: //p' "$repo/template.yaml" | sort -u | tr '\n' ' ')   # what SAM builds

step() { echo "== arm64: $1 (at $SECONDS s)"; }

# `--cached`: whether the Debian root and the target directory are already here (.ci/run
# budgets the step by it), without doing anything.
if [ "${1:-}" = --cached ]; then
  [ "$(cat "$root/.sextant-stamp" 2>/dev/null)" = "$stamp" ] && [ -d "$target/lambda" ]
  exit
fi

# The host's CA bundle, so the root reaches the registries through this machine's proxy.
in_root() {
  cp /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/ca-certificates.crt"
  chroot "$root" /usr/bin/env -i HOME=/root PATH=/opt/lambda/bin:/usr/local/bin:/usr/bin:/bin \
    SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt PIP_CERT=/etc/ssl/certs/ca-certificates.crt "$@"
}

if [ "$(cat "$root/.sextant-stamp" 2>/dev/null)" != "$stamp" ]; then
  step "the Debian root with Debian's Rust toolchain (once; cached)"
  command -v debootstrap >/dev/null || apt-get install -y -q debootstrap >/dev/null \
    || { apt-get update -q >/dev/null && apt-get install -y -q debootstrap >/dev/null; }
  rm -rf "$root"
  debootstrap --variant=minbase --include=ca-certificates trixie "$root" http://deb.debian.org/debian >/dev/null
  printf 'Types: deb\nURIs: http://deb.debian.org/debian\nSuites: trixie-backports\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
    > "$root/etc/apt/sources.list.d/backports.sources"
  in_root dpkg --add-architecture arm64
  in_root apt-get update -q >/dev/null
  # shellcheck disable=SC2086
  in_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends -t trixie-backports $packages >/dev/null
  # shellcheck disable=SC2086
  in_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $tools >/dev/null
  in_root python3 -m venv /opt/lambda
  # shellcheck disable=SC2086
  in_root /opt/lambda/bin/pip install -q --disable-pip-version-check $lambda
  echo "$stamp" > "$root/.sextant-stamp"
fi
in_root rustc --version

# The sources read-only, with the target directory bound at their `target/` (where SAM's
# Rust build takes each binary from, whatever CARGO_TARGET_DIR says), cargo's registry cache,
# this machine's converted models (read-only) and SAM's output directory: all outside the
# root, bound in a mount namespace of this script's own, so the mounts end with it.
mkdir -p "$target" "$cache/arm64-cargo-home" "$repo/target"
bins=""
for f in $functions sextant-cli; do bins="$bins -p $f"; done
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
export root
export -f in_root step
unshare --mount --propagation private bash -c '
  set -euo pipefail
  repo=$1 target=$2 home=$3 models=$4 out=$5 SECONDS=$6; shift 6
  mkdir -p "$root/src" "$root/cargo-home" "$root/models" "$root/sam" "$root/proc"
  mount --bind "$repo" "$root/src" && mount -o remount,bind,ro "$root/src"
  mount --bind "$target" "$root/src/target"
  mount --bind "$home" "$root/cargo-home"
  mount --bind "$models" "$root/models" && mount -o remount,bind,ro "$root/models"
  mount --bind "$out" "$root/sam"
  mount -t proc proc "$root/proc"
  build_env="CARGO_HOME=/cargo-home CARGO_TARGET_DIR=/src/target CARGO_TERM_COLOR=never"
  step "cargo lambda build --release --arm64 ($*)"
  in_root env $build_env bash -c "cd /src && cargo lambda build --release --arm64 --locked $*"
  step "sam build --beta-features --language-extensions"
  # Telemetry off; the layer reads this machine'"'"'s models, converted by fetch_models.sh.
  in_root env $build_env SAM_CLI_TELEMETRY=0 SEXTANT_MODEL_DIR=/models bash -c \
    "cd /sam && sam build --template-file /src/template.yaml --build-dir /sam/build --beta-features --language-extensions" \
    > "$out/sam-build.log" 2>&1 || { cat "$out/sam-build.log" >&2; echo "FAIL sam build" >&2; exit 1; }
  grep -q "^Build Succeeded" "$out/sam-build.log" || { cat "$out/sam-build.log" >&2; echo "FAIL sam build did not succeed" >&2; exit 1; }
  # Which binary the template names for each function sam build built (expanded as SAM does).
  in_root python3 /src/scripts/ci/sam_functions.py /src/template.yaml > "$out/functions.txt"
' _ "$repo" "$target" "$cache/arm64-cargo-home" "${SEXTANT_MODEL_DIR:-$cache/models}" "$out" "$SECONDS" $bins
bin="$target/lambda"                      # cargo lambda moves each binary to lambda/<binary>/bootstrap
build="$out/build"                        # what `sam build` built: <LogicalId>/bootstrap, ModelsLayer/
[ -d "$build/ModelsLayer/models" ] || { echo "FAIL sam build made no models layer" >&2; exit 1; }
layer_bytes=$(du -sb "$build/ModelsLayer" | cut -f1)

step "each function as sam build left it, beside the layer, against Lambda's limits"
fail=0
# Each function's build directory must hold the binary cargo lambda built for the binary
# the template names (retrieve and search are the same code, so byte-identical binaries:
# only the template says which is which).
[ -s "$out/functions.txt" ] || { echo "FAIL the template names no function that cargo lambda builds" >&2; exit 1; }
while read -r id f; do
  b="$build/$id/bootstrap"
  [ -f "$b" ] || { echo "FAIL sam build built no $id ($f)" >&2; fail=1; continue; }
  [ -f "$bin/$f/bootstrap" ] || { echo "FAIL no arm64 binary $bin/$f/bootstrap" >&2; exit 1; }
  cmp -s "$b" "$bin/$f/bootstrap" || { echo "FAIL sam build's $id/bootstrap is not the $f that cargo lambda built" >&2; fail=1; continue; }
  file -b "$b" | grep -q "ARM aarch64" || { echo "FAIL $id is not an arm64 executable: $(file -b "$b")" >&2; exit 1; }
  readelf -S "$b" | grep -q '\.symtab' && { echo "FAIL $id is not stripped" >&2; fail=1; }
  size=$(stat -c %s "$b")
  total=$((size + layer_bytes))
  # The highest GLIBC_x.y that the binary asks of the C library.
  need=$(readelf -V "$b" | grep -o 'GLIBC_[0-9.]*' | sed 's/GLIBC_//' | sort -V | tail -n1)
  awk -v id="$id ($f)" -v s="$size" -v l="$layer_bytes" -v n="$need" -v g="$glibc_max" 'BEGIN {
    printf "%-40s %6.1f MB + layer %6.1f MB = %6.1f MB unzipped (limit 250), needs GLIBC %s (limit %s)\n",
      id, s / 1e6, l / 1e6, (s + l) / 1e6, n, g }'
  [ "$total" -le "$limit" ] || { echo "FAIL $id and the layer are over Lambda's 250 MB" >&2; fail=1; }
  [ "$(printf '%s\n%s\n' "$need" "$glibc_max" | sort -V | tail -n1)" = "$glibc_max" ] \
    || { echo "FAIL $id needs GLIBC $need, provided.al2023 has $glibc_max" >&2; fail=1; }
done < "$out/functions.txt"
for f in $functions; do
  grep -q " $f\$" "$out/functions.txt" || { echo "FAIL the expanded template has no function of binary $f" >&2; fail=1; }
done
[ "$fail" = 0 ] || exit 1

step "the arm64 sextant under qemu-aarch64: one search with the layer's ONNX Runtime"
command -v qemu-aarch64 >/dev/null || apt-get install -y -q --no-install-recommends qemu-user >/dev/null \
  || { apt-get update -q >/dev/null && apt-get install -y -q --no-install-recommends qemu-user >/dev/null; }
# The guest's root: the Debian root's arm64 libraries and a Graviton2's CPU files
# (arm64_guest.sh says why).
guest="$out/guest"
bash "$here/arm64_guest.sh" "$guest" "$root/usr/lib/aarch64-linux-gnu"
# A small index of the demo corpus (Mastercard's 16 filings), built by this machine's binary:
# the index format does not depend on the architecture.
"$x86" build --docs "$repo/data/demo/documents.jsonl.gz" --ticker MA --id demo --out "$out/index" >/dev/null 2>&1
question="How much did cross-border volume grow?"
host_ort="${SEXTANT_MODEL_DIR:-$cache/models}/onnxruntime/libonnxruntime.so"   # this machine's own
SEXTANT_MODEL_DIR="$build/ModelsLayer/models" SEXTANT_ORT_LIB="$host_ort" "$x86" --backend onnxruntime search --index "$out/index" --json "$question" \
  > "$out/x86.json"
SEXTANT_MODEL_DIR="$build/ModelsLayer/models" SEXTANT_ORT_LIB="$build/ModelsLayer/lib/libonnxruntime.so" SEXTANT_LOG=info \
  qemu-aarch64 -L "$guest" "$bin/sextant/bootstrap" --backend onnxruntime search --index "$out/index" --json "$question" \
  > "$out/arm64.json" 2> "$out/arm64.log" || { cat "$out/arm64.log" >&2; echo "FAIL the arm64 search" >&2; exit 1; }
grep -q "encoding with ONNX Runtime" "$out/arm64.log" && ! grep -q "encoding with tract" "$out/arm64.log" \
  || { cat "$out/arm64.log" >&2; echo "FAIL the arm64 binary did not encode with ONNX Runtime" >&2; exit 1; }
python3 - "$out/x86.json" "$out/arm64.json" <<'PY'
import json, sys
x86, arm = (json.load(open(p))["hits"] for p in sys.argv[1:3])
if not arm:
    sys.exit("FAIL the arm64 search found nothing")
key = lambda hits: [(h["documentId"], h["text"]) for h in hits]
if key(arm) != key(x86):
    sys.exit(f"FAIL the arm64 hits differ from this machine's: {[h['documentId'] for h in arm]} against {[h['documentId'] for h in x86]}")
diff = max(abs(a["score"] - b["score"]) for a, b in zip(arm, x86))
if diff > 1e-3:
    sys.exit(f"FAIL the arm64 scores differ from this machine's by up to {diff:.2e}")
print(f"ok the arm64 sextant encoded with ONNX Runtime and found this machine's {len(arm)} hits in its order, scores within {diff:.1e}")
PY
