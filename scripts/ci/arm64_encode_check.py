"""The layer's arm64 ONNX Runtime encodes as PyTorch does: the converted graphs of the models
layer run under qemu-aarch64 by the C harness (arm64_libs_check.c, `encode`), compared with
the reference outputs of ../shared/golden by the tolerances the Rust golden tests use (that
directory's README): dense, cosine >= 0.9999 and max |diff| <= 1e-4; SPLADE, the same
terms (weights of at least 1e-3) and max |diff| <= 1e-3.

    python3 scripts/ci/arm64_encode_check.py --golden DIR --lib DIR --models DIR [--long] -- RUN...

--lib holds the layer's arm64 libonnxruntime.so, --models its converted models
(models_layer.sh copies both into the layer); RUN... is the command that runs the arm64
harness (qemu-aarch64 -L ROOT HARNESS), which arm64_libs_check.sh passes. Exits non-zero
on the first output that differs, and when the comparison fails to tell two inputs apart.
"""

import argparse
import json
import math
import subprocess
import sys

# Which golden lines: the first (12 tokens) and the longest but one (30). The line cut at
# 256 tokens (`--long`), where attention over many positions differs most between kernels,
# is left out of CI: qemu-user runs AArch64 floating point in software, and that one line
# took 7.6 CPU-minutes for MiniLM and 2.8 for SPLADE (2026-12-04), the other lines under one
# CPU-minute each. The golden tests run it on this machine's ONNX Runtime and tract.
LINES = (0, 13)
LONG = 14


def encode(run, lib, model, output, inputs):
    """The harness's output for each list of token ids, in one ONNX Runtime session."""
    args = run + ["encode", lib, model, output] + [",".join(map(str, ids)) for ids in inputs]
    out = subprocess.run(args, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"FAIL the harness exited with {out.returncode}: {out.stderr.strip()}")
    return [[float(v) for v in line.split()] for line in out.stdout.splitlines()]


def dense_differs(got, want):
    """Why the embedding `got` is not `want` by the golden tolerances, or None."""
    if len(got) != len(want):
        return f"{len(got)} values, expected {len(want)}"
    cos = sum(a * b for a, b in zip(got, want)) / (
        math.sqrt(sum(a * a for a in got)) * math.sqrt(sum(b * b for b in want))
    )
    diff = max(abs(a - b) for a, b in zip(got, want))
    if cos < 0.9999 or diff > 1e-4:
        return f"cosine {cos:.6f}, max |diff| {diff:.2e}"
    return None


def splade_differs(got, want):
    """Why the term weights `got` are not `want` by the golden tolerances, or None."""
    big = lambda terms: {t for t, w in terms.items() if w >= 1e-3}
    if big(got) != big(want):
        return f"{len(big(want) - big(got))} terms missing, {len(big(got) - big(want))} not in the reference"
    diff = max(abs(got.get(t, 0.0) - want.get(t, 0.0)) for t in set(got) | set(want))
    return f"max |diff| {diff:.2e}" if diff > 1e-3 else None


def check(name, rows, lines, outputs, want_of, got_of, differs):
    for n, values in zip(lines, outputs):
        why = differs(got_of(values), want_of(rows[n]))
        if why:
            sys.exit(f"FAIL {name} on arm64, golden line {n}: {why}")
        print(f"ok {name} on arm64 equals PyTorch on golden line {n} ({len(rows[n]['input_ids'])} tokens)")
    # The comparison can fail: the first line's output is not taken for the second's.
    if differs(got_of(outputs[0]), want_of(rows[lines[1]])) is None:
        sys.exit(f"FAIL the {name} comparison took one text's output for another's")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--golden", required=True)
    ap.add_argument("--lib", required=True)
    ap.add_argument("--models", required=True)
    ap.add_argument("--long", action="store_true", help="also the line cut at 256 tokens (minutes under qemu)")
    ap.add_argument("run", nargs="+")
    args = ap.parse_args()
    lines = LINES + (LONG,) if args.long else LINES

    rows = [json.loads(line) for line in open(f"{args.golden}/dense_all-MiniLM-L6-v2.jsonl")]
    model = f"{args.models}/minilm-l6-v2/model.onnx"
    outputs = encode(args.run, args.lib, model, "sentence_embedding", [rows[n]["input_ids"] for n in lines])
    check("MiniLM", rows, lines, outputs, lambda r: r["embedding"], lambda v: v, dense_differs)

    rows = [json.loads(line) for line in open(f"{args.golden}/splade_tiny.jsonl")]
    model = f"{args.models}/splade-tiny/model.onnx"
    outputs = encode(args.run, args.lib, model, "sparse_weights", [rows[n]["input_ids"] for n in lines])
    weights = lambda r: {r["token_ids"][t]: w for t, w in r["weights"].items()}
    nonzero = lambda v: {i: x for i, x in enumerate(v) if x > 0}
    check("SPLADE", rows, lines, outputs, weights, nonzero, splade_differs)


if __name__ == "__main__":
    main()
