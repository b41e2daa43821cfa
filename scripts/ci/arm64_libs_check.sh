#!/usr/bin/env bash
# The models layer's arm64 native libraries (ONNX Runtime, PDFium), loaded and used under
# qemu-aarch64 by a small C harness (arm64_libs_check.c) cross-compiled with Debian's
# gcc-aarch64-linux-gnu. What it checks: the arm64 ONNX Runtime the layer ships loads and is
# the pinned version with the C API the ort crate asks for; it runs the layer's two converted
# models and their outputs equal PyTorch's reference outputs on two golden lines
# (arm64_encode_check.py, by the golden tests' tolerances; its --long adds the 256-token line,
# 10 CPU-minutes under qemu); the arm64 PDFium loads and reads the test PDF page by page. The
# Rust binaries on arm64 are arm64_build.sh's.
#
#   bash scripts/ci/arm64_libs_check.sh      (CI runs it)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
cache=${SEXTANT_CACHE_DIR:-$HOME/.cache/sextant}
if ! command -v aarch64-linux-gnu-gcc >/dev/null || ! command -v qemu-aarch64 >/dev/null; then
  apt-get install -y -q --no-install-recommends gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user >/dev/null \
    || { apt-get update -q >/dev/null \
         && apt-get install -y -q --no-install-recommends gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user >/dev/null; }
fi
lib="$cache/layer-arm64/lib"   # the same files models_layer.sh puts in the layer's lib/
models=${SEXTANT_MODEL_DIR:-$cache/models}   # and the models it copies into the layer's models/
bash "$here/fetch_models.sh" >/dev/null
bash "$here/fetch_models.sh" --ort-lib aarch64 "$lib" >/dev/null
bash "$here/fetch_models.sh" --pdfium-lib aarch64 "$lib" >/dev/null
ort_version=$(sed -n 's/^ORT_VERSION=\([0-9.]*\).*/\1/p' "$here/fetch_models.sh")
out=$(mktemp -d); trap 'rm -rf "$out"' EXIT
aarch64-linux-gnu-gcc -O1 -Wall -Werror -o "$out/check" "$here/arm64_libs_check.c" -ldl
file "$out/check" 2>/dev/null | grep -q aarch64 || { echo "not an arm64 binary" >&2; exit 1; }
# The guest's root: Debian's arm64 libraries and a Graviton2's CPU files (arm64_guest.sh).
root="$out/root"
bash "$here/arm64_guest.sh" "$root" /usr/aarch64-linux-gnu/lib
run() { qemu-aarch64 -L "$root" "$out/check" "$@"; }
run ort "$lib" "$ort_version"
# The layer's models on that ONNX Runtime, compared with PyTorch's outputs (../shared/golden).
python3 "$here/arm64_encode_check.py" --golden "$repo/../shared/golden" --lib "$lib" --models "$models" \
  -- qemu-aarch64 -L "$root" "$out/check"
run pdfium "$lib" "$repo/tests/data/pdf/report.pdf" page-1-marker page-2-marker page-3-marker
# The check can fail: a marker the PDF does not hold is refused.
if run pdfium "$lib" "$repo/tests/data/pdf/report.pdf" page-9-marker 2>/dev/null; then
  echo "the check passed a marker the PDF does not hold" >&2; exit 1
fi
