#!/usr/bin/env python3
"""Chooses dense feedback's strength and depth by the worst dev set, with leave-one-set-out.

    python3 scripts/studies/study_feedback.py runs.tsv

runs.tsv comes from `scripts/studies/study_feedback.sh` (set, split, c, m, nDCG@10, Recall@10,
Recall@100, MRR@10; c = 0 is the fusion without feedback). The rule is the fusion study's
(`scripts/studies/study_fusion.py`; its round is in git history: README.md at d186f3e,
"How the default fusion was chosen"):

- each candidate's ratio on a set is its nDCG@10 over the best method on that set: the best
  candidate here or the best of that README's dev table (`REFERENCE`);
- a candidate whose Recall@100 falls below the best single path's on a set (`RECALL_FLOOR`)
  is not eligible;
- candidates are judged by their worst set; among those within 0.005 of the best worst set,
  the best mean ratio is chosen;
- leave one set out: chosen on the other three by the same rule, scored on the fourth.
"""
import sys
from collections import defaultdict

# The best of the dev table's other methods (README.md at d186f3e: single paths, plain RRF of every
# pair and of all three, earlier defaults) on each dev set, nDCG@10.
REFERENCE = {"scifact": 0.7357, "tatqa": 0.5616, "fin-filings": 0.5587, "fin-calls": 0.8302}
# The best single path's Recall@100 on each dev set (the same table, README.md at d186f3e).
RECALL_FLOOR = {"scifact": 0.931, "tatqa": 0.861, "fin-filings": 0.986, "fin-calls": 1.000}
NEAR = 0.005


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    runs = defaultdict(dict)  # (c, m) -> set -> (nDCG@10, Recall@100)
    sets = []
    for line in open(sys.argv[1]):
        name, _split, c, m, ndcg, _r10, r100, _mrr = line.split()
        key = (float(c), int(m))
        if key[0] == 0:
            key = (0.0, 0)  # without feedback, m means nothing
        runs[key][name] = (float(ndcg), float(r100))
        if name not in sets:
            sets.append(name)
    cands = [c for c in runs if all(s in runs[c] for s in sets)]
    best = {s: max([runs[c][s][0] for c in cands] + [REFERENCE.get(s, 0.0)]) for s in sets}

    def ratios(c, among):
        return [runs[c][s][0] / best[s] for s in among]

    def eligible(c, among):
        return all(runs[c][s][1] + 1e-9 >= RECALL_FLOOR.get(s, 0.0) for s in among)

    def choose(among):
        ok = [c for c in cands if eligible(c, among)]
        top = max(min(ratios(c, among)) for c in ok)
        near = [c for c in ok if min(ratios(c, among)) >= top - NEAR]
        return max(near, key=lambda c: (sum(ratios(c, among)), -c[0]))

    label = lambda c: "no feedback" if c[0] == 0 else f"c = {c[0]:g}, m = {c[1]}"
    print(f"{'candidate':22s} " + " ".join(f"{s:>12s}" for s in sets) + "   worst   mean")
    for c in sorted(cands, key=lambda c: -min(ratios(c, sets))):
        r = ratios(c, sets)
        flag = "" if eligible(c, sets) else "  (Recall@100 below a single path's)"
        cells = " ".join(f"{runs[c][s][0]:12.4f}" for s in sets)
        print(f"{label(c):22s} {cells}   {min(r):.4f} {sum(r) / len(r):.4f}{flag}")
    chosen = choose(sets)
    print(f"-- chosen on all {len(sets)} sets: {label(chosen)}")
    print("-- leave one set out (chosen on the others -> the left-out set):")
    for s in sets:
        pick = choose([t for t in sets if t != s])
        nd = runs[pick][s][0]
        base = runs[(0.0, 0)][s][0] if (0.0, 0) in runs else float("nan")
        print(f"  {s}: {label(pick)} -> {nd:.4f} (ratio {nd / best[s]:.4f}; without feedback {base:.4f})")


if __name__ == "__main__":
    main()
