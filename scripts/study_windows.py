#!/usr/bin/env python3
"""Chooses the fusion again for dense windows: the identifier term `δ` and dense feedback's
strength `c`, by the worst dev set, with leave-one-set-out.

    python3 scripts/study_windows.py --reference DEV_REPORT.json [--runs runs.tsv] [--bin B]

DEV_REPORT.json is `scripts/eval_report.py --json` on the five dev sets (SciFact train,
TAT-QA dev, fin-filings dev, fin-calls dev, fin-ratios dev) with the same binary: it gives
each set's single paths and plain RRF peers. Each candidate (`δ`, `c`) is `sextant eval
--identifiers δ --feedback c` on each dev set (the index's dense window is the build's
default); the figures are kept in `--runs` so that a second run only adds what is missing.

The rule (the issue's goals first, then the fusion study's, `scripts/study_fusion.py`):

- a candidate is eligible on a set when its nDCG@10 is above plain RRF of every pair and
  of all three there, and its Recall@100 at least the best single path's;
- each candidate's ratio on a set is its nDCG@10 over the best method on that set (the best
  candidate, or the best row of the report);
- among the candidates eligible on every set, the best worst set is chosen;
- leave one set out: chosen on the other four by the same rule, scored on the fifth.

Only dev and training splits go in here; test splits are reported by `eval_report.py`.
"""
import argparse
import json
import os
import subprocess
import sys

DEV = [
    ("scifact", "scifact train", "{shared}/data/scifact", "train"),
    ("tatqa", "tatqa dev", "{shared}/data/tatqa", "dev"),
    ("fin-filings", "fin-filings dev", "{devsets}/fin-filings", "dev"),
    ("fin-calls", "fin-calls dev", "{devsets}/fin-calls", "dev"),
    ("fin-ratios", "fin-filings ratios-dev", "{devsets}/fin-filings", "ratios-dev"),
]
GRID = [(d, c) for d in (0.0, 1.0, 2.0) for c in (4.0, 6.0, 8.0, 10.0, 16.0)]
PEERS = [
    "plain RRF, all three",
    "plain RRF, dense + BM25",
    "plain RRF, dense + SPLADE",
    "plain RRF, BM25 + SPLADE",
]
SINGLES = ["dense", "BM25", "SPLADE"]


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    target = os.environ.get("CARGO_TARGET_DIR", os.path.join(here, "..", "target"))
    cache = os.environ.get("SEXTANT_CACHE_DIR", os.path.expanduser("~/.cache/sextant"))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", default=os.path.join(target, "release", "sextant"))
    ap.add_argument("--reference", required=True, help="eval_report.py --json of the five dev sets")
    ap.add_argument("--runs", default="study_windows.tsv", help="where candidates' figures are kept")
    ap.add_argument("--shared", default=os.path.join(here, "..", "..", "shared"))
    a = ap.parse_args()
    runs = {}
    if os.path.exists(a.runs):
        for line in open(a.runs):
            s, d, c, nd, r100 = line.split()
            runs[(float(d), float(c), s)] = (float(nd), float(r100))
    for d, c in GRID:
        for name, _, path, split in DEV:
            if (d, c, name) in runs:
                continue
            path = path.format(shared=a.shared, devsets=os.path.join(cache, "devsets"))
            cmd = [a.bin, "eval", "--beir", path, "--split", split, "--json"]
            cmd += ["--identifiers", f"{d:g}", "--feedback", f"{c:g}"]
            done = subprocess.run(cmd, capture_output=True, text=True)
            if done.returncode != 0:
                sys.exit(f"{' '.join(cmd)} failed:\n{done.stderr}")
            r = json.loads(done.stdout.strip().splitlines()[-1])
            runs[(d, c, name)] = (r["nDCG@10"], r["Recall@100"])
            with open(a.runs, "a") as f:
                f.write(f"{name}\t{d:g}\t{c:g}\t{r['nDCG@10']:.6f}\t{r['Recall@100']:.6f}\n")
    report = json.load(open(a.reference))
    sets = [name for name, *_ in DEV]
    rows = {name: report[key] for name, key, *_ in DEV}
    peer = {s: max(rows[s][p]["nDCG@10"] for p in PEERS) for s in sets}
    floor = {s: max(rows[s][p]["Recall@100"] for p in SINGLES) for s in sets}
    best = {
        s: max([runs[(d, c, s)][0] for d, c in GRID] + [r["nDCG@10"] for k, r in rows[s].items() if k != "**default**"])
        for s in sets
    }

    def ratio(g, s):
        return runs[(*g, s)][0] / best[s]

    def eligible(g, among):
        return all(runs[(*g, s)][0] > peer[s] and runs[(*g, s)][1] + 1e-9 >= floor[s] for s in among)

    def choose(among):
        ok = [g for g in GRID if eligible(g, among)] or GRID
        return max(ok, key=lambda g: (min(ratio(g, s) for s in among), sum(ratio(g, s) for s in among)))

    print(f"{'candidate':16s} " + " ".join(f"{s:>11s}" for s in sets) + "   worst   mean")
    print(f"{'best plain RRF':16s} " + " ".join(f"{peer[s]:11.4f}" for s in sets))
    for g in sorted(GRID, key=lambda g: -min(ratio(g, s) for s in sets)):
        r = [ratio(g, s) for s in sets]
        flag = "" if eligible(g, sets) else "  (not above every peer, or Recall@100 below a path's)"
        cells = " ".join(f"{runs[(*g, s)][0]:11.4f}" for s in sets)
        print(f"δ = {g[0]:g}, c = {g[1]:<4g}  {cells}   {min(r):.4f} {sum(r) / len(r):.4f}{flag}")
    chosen = choose(sets)
    print(f"-- chosen on all {len(sets)} sets: δ = {chosen[0]:g}, c = {chosen[1]:g}")
    print("-- leave one set out (chosen on the others -> the left-out set):")
    for s in sets:
        g = choose([t for t in sets if t != s])
        nd = runs[(*g, s)][0]
        above = "above" if nd > peer[s] else "NOT above"
        print(f"  {s}: δ = {g[0]:g}, c = {g[1]:g} -> {nd:.4f} (ratio {ratio(g, s):.4f}; {above} plain RRF's {peer[s]:.4f})")


if __name__ == "__main__":
    main()
