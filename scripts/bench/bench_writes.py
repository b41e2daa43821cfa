#!/usr/bin/env python3
"""Document writes against a real `sextant serve`: upsert latency (p50/p99), writes per
second one document per PUT (4 writers) and in batches (`POST .../documents:batch`, the
baseline in the same run), time until a write is searchable, and the compaction's cost,
with the search p50 before and after the writes measured in the same run as the baseline.

Usage: SEXTANT_BIN=target/release/sextant python3 scripts/bench/bench_writes.py [--docs N]

The documents are real 10-K/10-Q sections (../shared/data/sec_filings_sections), cut to
their first 2,000 characters (about one to three chunks each), sent as JSON with metadata.
The server serves three companies of the bundled demo corpus (MA, XOM, ORCL: the index
the end-to-end tests use); its writes go to a temporary directory.
"""

import argparse
import http.client
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
KEY = "sx_bench_writes_key"


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def request(addr, method, path, body=None, content_type="application/json"):
    host, port = addr.split(":")
    c = http.client.HTTPConnection(host, int(port), timeout=300)
    headers = {"Authorization": f"Bearer {KEY}"}
    data = None
    if body is not None:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        headers["Content-Type"] = content_type
    c.request(method, path, body=data, headers=headers)
    r = c.getresponse()
    payload = r.read()
    c.close()
    return r.status, (json.loads(payload) if payload else None)


def documents(n):
    out = []
    with open(os.path.join(ROOT, "..", "shared", "data", "sec_filings_sections", "corpus.jsonl")) as f:
        for line in f:
            d = json.loads(line)
            ticker, form, year = (d["_id"].split("_") + ["", "", ""])[:3]
            out.append({
                "id": "w-" + d["_id"],
                "body": {
                    "title": d.get("title", ""),
                    "text": d["text"][:2000],
                    "metadata": {"source": "bench", "form": form, "company": ticker, "batch": len(out) % 4},
                },
            })
            if len(out) == n:
                break
    return out


def search_p50(addr, queries, rounds=3):
    times = []
    for _ in range(rounds):
        for q in queries:
            t = time.perf_counter()
            s, _ = request(addr, "POST", "/v1/search", {"query": q, "limit": 10})
            times.append((time.perf_counter() - t) * 1e3)
            assert s == 200
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--docs", type=int, default=300)
    ap.add_argument("--batch", type=int, default=64, help="documents per batch (as `sextant put` sends them)")
    args = ap.parse_args()
    binary = os.environ.get("SEXTANT_BIN", os.path.join(ROOT, "target", "release", "sextant"))
    docs = documents(args.docs)
    data = tempfile.mkdtemp(prefix="sextant-writes-")
    log = open(os.path.join(data, "serve.log"), "w")
    proc = subprocess.Popen(
        [binary, "serve", "--addr", "127.0.0.1:0", "--dev-key", KEY, "--dev-plan", "enterprise",
         "--docs", "data/demo/documents.jsonl.gz", "--ticker", "MA", "--ticker", "XOM", "--ticker", "ORCL",
         "--data-dir", os.path.join(data, "live"), "--compact-at-chunks", "0", "--max-in-flight", "64"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=log, text=True)
    try:
        addr = proc.stdout.readline().split("http://")[1].split()[0]
        threading.Thread(target=lambda: [None for _ in proc.stdout], daemon=True).start()
        while True:
            try:
                s, _ = request(addr, "GET", "/v1/indexes/demo/documents?limit=1")
                if s == 200:
                    break
            except OSError:
                pass
            time.sleep(0.5)
        queries = ["What drove revenue growth?", "capital expenditures outlook", "risk factors supply chain",
                   "share repurchase program", "operating margin decline"]
        search_before = search_p50(addr, queries)

        # 1. Sequential upserts: each durable (fsync) and searchable at its 200.
        third = len(docs) // 4
        lat = []
        for d in docs[:third]:
            t = time.perf_counter()
            s, body = request(addr, "PUT", f"/v1/indexes/demo/documents/{d['id']}", d["body"])
            lat.append((time.perf_counter() - t) * 1e3)
            assert s == 200, body
        # 2. Writes per second with 4 writers.
        rest = docs[third:2 * third]
        lock = threading.Lock()
        def writer(part):
            for d in part:
                s, body = request(addr, "PUT", f"/v1/indexes/demo/documents/{d['id']}", d["body"])
                assert s == 200, body
        t = time.perf_counter()
        threads = [threading.Thread(target=writer, args=(rest[i::4],)) for i in range(4)]
        [th.start() for th in threads]
        [th.join() for th in threads]
        wps = len(rest) / (time.perf_counter() - t)
        # 2b. The same number of other documents in batches, one writer: every one durable and
        # searchable when its batch is answered.
        batched = docs[2 * third:3 * third]
        t = time.perf_counter()
        for i in range(0, len(batched), args.batch):
            part = [dict(d["body"], documentId=d["id"]) for d in batched[i:i + args.batch]]
            s, body = request(addr, "POST", "/v1/indexes/demo/documents:batch", part)
            assert s == 200 and body["failed"] == 0, body
        batch_wps = len(batched) / (time.perf_counter() - t)
        # 3. Time until searchable: from the PUT's send to the first search that returns it.
        visible, first_try = [], []
        for i, d in enumerate(docs[3 * third:3 * third + 20]):
            token = f"zqx{i}marker"
            body = dict(d["body"], text=d["body"]["text"] + f" Reference code {token}.")
            t = time.perf_counter()
            s, _ = request(addr, "PUT", f"/v1/indexes/demo/documents/{d['id']}", body)
            assert s == 200
            polls = 0
            while True:
                query = token
                s, r = request(addr, "POST", "/v1/search", {"query": query, "limit": 50, "rerank": False})
                assert s == 200, (s, r)
                polls += 1
                if any(u["document"]["document_id"] == d["id"] for u in r["results"]):
                    break
                assert polls < 200, f"{d['id']} not found by {query!r}"
                time.sleep(0.005)
            visible.append((time.perf_counter() - t) * 1e3)
            first_try.append(polls == 1)
        _, page = request(addr, "GET", "/v1/indexes/demo/documents?limit=1")
        search_delta = search_p50(addr, queries)
        # 4. Compaction: every written document folded into a new version.
        t = time.perf_counter()
        s, comp = request(addr, "POST", "/v1/indexes/demo/compact")
        compact_s = time.perf_counter() - t
        assert s == 200 and comp["compacted"], comp
        search_after = search_p50(addr, queries)
        report = comp["report"]
        print(f"documents written: {third + len(rest) + len(batched) + len(visible)} "
              f"(real 10-K/10-Q sections, <= 2,000 chars each)")
        print(f"upsert, sequential:       p50 {pct(lat, 50):.1f} ms, p99 {pct(lat, 99):.1f} ms (n={len(lat)}); "
              f"turbopuffer's published upsert p50: 165 ms")
        print(f"writes per second:        {wps:.1f} one per PUT (4 writers, {len(rest)} documents); "
              f"{batch_wps:.1f} in batches of {args.batch} (1 writer, {len(batched)} documents): "
              f"{batch_wps / wps:.2f}x")
        print(f"time until searchable:    p50 {pct(visible, 50):.1f} ms, max {max(visible):.1f} ms "
              f"(PUT sent to the first /v1/search returning it; found by the first search "
              f"{sum(first_try)} times of {len(first_try)})")
        print(f"compaction:               {compact_s:.2f} s for {report['documents']} documents, {report['chunks']} chunks, "
              f"{report['chunks_encoded']} encoded ({report['writes']} writes folded)")
        print(f"search p50 (same run):    {search_before:.1f} ms before the writes, {search_delta:.1f} ms with "
              f"the delta, {search_after:.1f} ms after the compaction")
    finally:
        proc.kill()
        proc.wait()


if __name__ == "__main__":
    sys.exit(main())
