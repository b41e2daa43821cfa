#!/usr/bin/env bash
# The Lambda layer of the models: OUT/models/{minilm-l6-v2,splade-tiny} as converted by
# fetch_models.sh, and for arm64 OUT/lib/libonnxruntime.so (from the onnxruntime wheel) and
# OUT/lib/libpdfium.so (PDF text extraction, from the pypdfium2 wheel).
# The stand-in cross-encoder is never included: it is a test fixture, not a reranker.
#
#   bash scripts/ci/models_layer.sh OUT     (run by `sam build` through infra/layer/Makefile)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:?usage: models_layer.sh OUT}
cache=${SEXTANT_CACHE_DIR:-$HOME/.cache/sextant}
models=${SEXTANT_MODEL_DIR:-$cache/models}
bash "$here/fetch_models.sh" >/dev/null
mkdir -p "$out/models" "$out/lib"
for m in minilm-l6-v2 splade-tiny; do
  rm -rf "$out/models/$m"; mkdir -p "$out/models/$m"
  for f in model.onnx tokenizer.json model.json config.json LICENSE; do
    [ -f "$models/$m/$f" ] && cp "$models/$m/$f" "$out/models/$m/"
  done
done
bash "$here/fetch_models.sh" --ort-lib aarch64 "$out/lib" >/dev/null
bash "$here/fetch_models.sh" --pdfium-lib aarch64 "$out/lib" >/dev/null
du -sh "$out" >&2
