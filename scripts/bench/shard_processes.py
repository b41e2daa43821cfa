#!/usr/bin/env python3
"""What the processes of a sharded index cost, for two binaries, alternating.

- `worker`: a fresh `sextant shard-worker` on one shard, timed until it prints that it
  listens (its shard loaded, ready to answer); its resident memory (VmRSS) and peak (VmHWM)
  from /proc; one shard-protocol question asked to check that it answers.
- `router`: a fresh `sextant serve --index DIR --shard-workers`, waited for until `/health`
  answers; the resident memory of the serving process, which routes (it holds each shard's
  store, the models and the root's statistics; the shards are worker processes of their
  own, which exit with it).

Prints one JSON line per run and the medians per binary.

    python3 scripts/bench/shard_processes.py worker --index DIR --runs 5 BEFORE AFTER
    python3 scripts/bench/shard_processes.py router --index DIR --runs 3 BEFORE AFTER
"""

import argparse
import json
import statistics
import subprocess
import time
import urllib.request


def status_mib(pid: int) -> dict:
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                out[key] = int(value.split()[0]) / 1024
    return out


def worker(binary: str, a: argparse.Namespace) -> dict:
    t = time.monotonic()
    p = subprocess.Popen(
        [binary, "shard-worker", "--index", a.index, "--shard", str(a.shard), "--listen", "127.0.0.1:0"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )
    try:
        line = p.stdout.readline()
        ready_ms = (time.monotonic() - t) * 1e3
        base = next(w for w in line.split() if w.startswith("http://"))
        mem = status_mib(p.pid)
        # One BM25 question (no vector needed): the worker answers as it is.
        question = {"op": "retrieve", "text": "net sales", "paths": ["bm25"], "per_path_k": 10}
        req = urllib.request.Request(base.rstrip("/") + "/v1/shard", data=json.dumps(question).encode(),
                                     headers={"content-type": "application/json"})
        with urllib.request.urlopen(req, timeout=30) as r:
            if r.status != 200:
                raise SystemExit(f"{binary}: the worker answered {r.status}")
        return {"ready_ms": round(ready_ms, 1), "rss_mib": round(mem["VmRSS"], 1), "peak_mib": round(mem["VmHWM"], 1)}
    finally:
        p.kill()
        p.wait()


def router(binary: str, a: argparse.Namespace) -> dict:
    p = subprocess.Popen([binary, "serve", "--index", a.index, "--shard-workers", "--addr", a.addr],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        start = time.monotonic()
        while True:
            try:
                urllib.request.urlopen(f"http://{a.addr}/health", timeout=2)
                break
            except OSError:
                if time.monotonic() - start > 300 or p.poll() is not None:
                    raise SystemExit(f"{binary} did not serve {a.index}")
                time.sleep(0.2)
        time.sleep(1)
        return {"router_rss_mib": round(status_mib(p.pid)["VmRSS"], 1)}
    finally:
        p.terminate()
        p.wait()
        time.sleep(1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("process", choices=["worker", "router"])
    ap.add_argument("--index", required=True, help="a sharded index directory (root.json)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--shard", type=int, default=0, help="worker: the shard it serves")
    ap.add_argument("--addr", default="127.0.0.1:18787", help="router: where it listens")
    ap.add_argument("binaries", nargs="+")
    a = ap.parse_args()
    measure = worker if a.process == "worker" else router
    rows = {b: [] for b in a.binaries}
    for _ in range(a.runs):
        for b in a.binaries:
            r = measure(b, a)
            rows[b].append(r)
            print(json.dumps({"binary": b, **r}), flush=True)
    for b, rs in rows.items():
        medians = {k: statistics.median(r[k] for r in rs) for k in rs[0]}
        print(json.dumps({"binary": b, "median": medians, "runs": len(rs)}))


if __name__ == "__main__":
    main()
