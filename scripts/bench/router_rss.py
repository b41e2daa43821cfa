#!/usr/bin/env python3
"""Resident memory of a router: `sextant serve --index DIR --shard-workers` for two binaries,
alternating.

The serving process routes (it holds each shard's store, the models and the root's
statistics; the shards are worker processes of their own). Each run starts a fresh server,
waits for `/health`, reads the server process's VmRSS from /proc, and stops it (its workers
exit with it). Prints one JSON line per run and a median per binary.

    python3 scripts/bench/router_rss.py --index DIR --runs 3 BEFORE AFTER
"""

import argparse
import json
import statistics
import subprocess
import time
import urllib.request


def rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS"):
                return int(line.split()[1]) / 1024
    raise SystemExit(f"no VmRSS for {pid}")


def run(binary: str, index: str, addr: str) -> float:
    p = subprocess.Popen([binary, "serve", "--index", index, "--shard-workers", "--addr", addr],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        start = time.monotonic()
        while True:
            try:
                urllib.request.urlopen(f"http://{addr}/health", timeout=2)
                break
            except OSError:
                if time.monotonic() - start > 300 or p.poll() is not None:
                    raise SystemExit(f"{binary} did not serve {index}")
                time.sleep(0.2)
        time.sleep(1)
        return rss_mib(p.pid)
    finally:
        p.terminate()
        p.wait()
        time.sleep(1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--index", required=True, help="a sharded index directory (root.json)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--addr", default="127.0.0.1:18787")
    ap.add_argument("binaries", nargs="+")
    a = ap.parse_args()
    rows = {b: [] for b in a.binaries}
    for _ in range(a.runs):
        for b in a.binaries:
            r = run(b, a.index, a.addr)
            rows[b].append(r)
            print(json.dumps({"binary": b, "router_rss_mib": round(r, 1)}), flush=True)
    for b, v in rows.items():
        print(json.dumps({"binary": b, "median_router_rss_mib": round(statistics.median(v), 1), "runs": len(v)}))


if __name__ == "__main__":
    main()
