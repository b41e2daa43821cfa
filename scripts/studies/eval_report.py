#!/usr/bin/env python3
"""A retrieval report per set: `sextant eval` for the default fusion, each path alone,
plain RRF (chunks, k = 60, equal weights) of every pair and of all three, and the default
without each of its parts (one vector per chunk, no dense feedback, no agreement weights)
and at its exhaustive setting, all with the same binary in one run (earlier releases'
defaults are in git). Prints one Markdown table per set.

    python3 scripts/studies/eval_report.py [--bin target/release/sextant] [--json OUT]
        SET_DIR:SPLIT [SET_DIR:SPLIT ...]

Example (four dev sets):

    python3 scripts/data/build_devsets.py
    python3 scripts/studies/eval_report.py ../shared/data/scifact:train ../shared/data/tatqa:dev \\
        ~/.cache/sextant/devsets/fin-filings:dev ~/.cache/sextant/devsets/fin-calls:dev
"""
import argparse
import json
import os
import subprocess
import sys

METHODS = [
    ("**default**", ["--fusion", "default"]),
    ("dense", ["--mode", "dense"]),
    ("BM25", ["--mode", "bm25"]),
    ("SPLADE", ["--mode", "splade"]),
    ("plain RRF, all three", ["--fusion", "plain"]),
    ("plain RRF, dense + BM25", ["--fusion", "plain", "--paths", "dense,bm25"]),
    ("plain RRF, dense + SPLADE", ["--fusion", "plain", "--paths", "dense,splade"]),
    ("plain RRF, BM25 + SPLADE", ["--fusion", "plain", "--paths", "bm25,splade"]),
    ("one vector per chunk (`--dense-window 0`)", ["--dense-window", "0"]),
    ("without dense feedback (`--feedback 0`)", ["--feedback", "0"]),
    ("without agreement weights (`--agreement 0`)", ["--agreement", "0"]),
    ("the exhaustive figure (`--exact`)", ["--exact"]),
]
FIGURES = ["nDCG@10", "Recall@10", "Recall@100", "MRR@10"]


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    target = os.environ.get("CARGO_TARGET_DIR", os.path.join(here, "..", "..", "target"))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", default=os.path.join(target, "release", "sextant"))
    ap.add_argument("--json", help="also write every figure here")
    ap.add_argument("--extra", action="append", default=[], help="an argument for every `sextant eval` (repeatable)")
    ap.add_argument("sets", nargs="+", metavar="SET_DIR:SPLIT")
    a = ap.parse_args()
    out = {}
    for spec in a.sets:
        path, split = spec.rsplit(":", 1)
        name = f"{os.path.basename(os.path.normpath(path))} {split}"
        rows = {}
        for label, args in METHODS:
            cmd = [a.bin, "eval", "--beir", path, "--split", split, "--json", *args, *a.extra]
            done = subprocess.run(cmd, capture_output=True, text=True)
            if done.returncode != 0:
                sys.exit(f"{' '.join(cmd)} failed:\n{done.stderr}")
            rows[label] = json.loads(done.stdout.strip().splitlines()[-1])
        queries = rows["**default**"]["queries"]
        docs = rows["**default**"]["docs"]
        print(f"\n**{name}** ({queries} questions, {docs} documents)\n")
        print("| method | " + " | ".join(FIGURES) + " |")
        print("|---|" + "---:|" * len(FIGURES))
        for label, r in rows.items():
            cells = [f"{r[f]:.4f}" for f in FIGURES]
            if label == "**default**":
                cells = [f"**{c}**" for c in cells]
            print(f"| {label} | " + " | ".join(cells) + " |")
        out[name] = rows
        sys.stdout.flush()
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
