#!/usr/bin/env python3
"""Start-up time and memory of `sextant shard-worker` for two binaries, alternating.

Each run starts a fresh worker on one shard of a sharded index, times it until it prints
that it listens (its shard loaded, ready to answer), reads its resident memory (VmRSS)
and peak (VmHWM) from /proc, asks it one question through the shard protocol, and stops
it. Prints one JSON line per run and a median per binary.

    python3 scripts/bench/shard_worker_start.py --index DIR --runs 5 BEFORE AFTER
"""

import argparse
import json
import statistics
import subprocess
import time
import urllib.request


def status(pid: int) -> dict:
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                out[key] = int(value.split()[0]) / 1024
    return out


def run(binary: str, index: str, shard: int) -> dict:
    t = time.monotonic()
    p = subprocess.Popen(
        [binary, "shard-worker", "--index", index, "--shard", str(shard), "--listen", "127.0.0.1:0"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )
    try:
        line = p.stdout.readline()
        ready_ms = (time.monotonic() - t) * 1e3
        base = next(w for w in line.split() if w.startswith("http://"))
        mem = status(p.pid)
        # One BM25 question (no vector needed): the worker answers as it is.
        question = {"op": "retrieve", "text": "net sales", "paths": ["bm25"], "per_path_k": 10}
        req = urllib.request.Request(base.rstrip("/") + "/v1/shard", data=json.dumps(question).encode(),
                                     headers={"content-type": "application/json"})
        with urllib.request.urlopen(req, timeout=30) as r:
            answered = r.status == 200
        return {"binary": binary, "ready_ms": round(ready_ms, 1), "rss_mib": round(mem["VmRSS"], 1),
                "peak_mib": round(mem["VmHWM"], 1), "answered": answered}
    finally:
        p.kill()
        p.wait()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--index", required=True, help="a sharded index directory (root.json)")
    ap.add_argument("--shard", type=int, default=0)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("binaries", nargs="+")
    a = ap.parse_args()
    rows = {b: [] for b in a.binaries}
    for _ in range(a.runs):
        for b in a.binaries:
            r = run(b, a.index, a.shard)
            print(json.dumps(r), flush=True)
            rows[b].append(r)
    for b, rs in rows.items():
        med = {k: statistics.median(r[k] for r in rs) for k in ("ready_ms", "rss_mib", "peak_mib")}
        print(json.dumps({"binary": b, "median": med, "runs": len(rs)}))


if __name__ == "__main__":
    main()
