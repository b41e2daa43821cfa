#!/usr/bin/env python3
"""Build ``data/demo/facts.jsonl.gz``: the XBRL facts of the bundled demo corpus.

Why: the ``/v1/context`` routes answer metric, timeseries and statement questions from
facts, and the embedded default must answer every route without the shared data.

It concatenates both files of ``<shared>/xbrl_facts/`` (``facts.jsonl.gz``: older instance
documents; ``facts_ixbrl_10k10q_2024_2025.jsonl.gz``: the 2024-25 filings of the demo
corpus), unchanged but for one field: facts of the 2024-25 file carry no ``entity``, so
the company name of their filing is copied from ``sec_filings_sections/filings.json``
(same ``source_file``). The engine reads the company names from ``entity`` to build its
dictionary of company names. Duplicates are kept: the engine deduplicates (the newest
filing wins), so the file stays a faithful copy.

Output is sorted (by source file, then line order), gzip with mtime 0, so reruns are
byte-identical.

Usage::

    python3 scripts/data/build_demo_facts.py [SHARED_DATA_DIR] [--out DIR]

Standard library only.
"""
from __future__ import annotations

import argparse
import gzip
import io
import json
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DEFAULT_SHARED = REPO.parent / "shared" / "data"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("shared", nargs="?", type=Path, default=DEFAULT_SHARED)
    ap.add_argument("--out", type=Path, default=REPO / "data" / "demo")
    args = ap.parse_args()
    names = {f["source_file"]: f["company"] for f in json.loads((args.shared / "sec_filings_sections" / "filings.json").read_text())}
    rows = []
    for fn in ["facts.jsonl.gz", "facts_ixbrl_10k10q_2024_2025.jsonl.gz"]:
        with gzip.open(args.shared / "xbrl_facts" / fn, "rt", encoding="utf-8") as f:
            for i, line in enumerate(f):
                fact = json.loads(line)
                if not fact.get("entity") and fact.get("source_file") in names:
                    fact["entity"] = names[fact["source_file"]]
                rows.append((fn, fact.get("source_file") or "", i, json.dumps(fact, ensure_ascii=False, sort_keys=True)))
    rows.sort()
    buf = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buf, mtime=0, compresslevel=9) as gz:
        for *_, line in rows:
            gz.write(line.encode("utf-8") + b"\n")
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "facts.jsonl.gz").write_bytes(buf.getvalue())
    print(f"{len(rows)} facts -> {args.out / 'facts.jsonl.gz'} ({len(buf.getvalue()) / 1e6:.1f} MB)")


if __name__ == "__main__":
    main()
