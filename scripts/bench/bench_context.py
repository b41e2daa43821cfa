#!/usr/bin/env python3
"""Times one long /v1/context question (3,489 characters, 3 companies x 3 years, route
narrative) on two `sextant` builds served side by side, in one run: the median of 6
requests each, after one warm-up.

    python3 scripts/bench/bench_context.py BEFORE_BINARY AFTER_BINARY
"""
import json, subprocess, sys, time, urllib.request, statistics
bins = {"before": sys.argv[1], "after": sys.argv[2]}
procs, addrs = {}, {}
for i, (name, b) in enumerate(bins.items()):
    p = subprocess.Popen([b, "serve", "--addr", f"127.0.0.1:{8791+i}", "--docs", "data/demo/documents.jsonl.gz", "--ticker", "MA", "--ticker", "XOM", "--ticker", "ORCL",
                          "--facts", "data/demo/facts.jsonl.gz", "--dev-key", "sx_b", "--dev-plan", "enterprise"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    procs[name], addrs[name] = p, f"127.0.0.1:{8791+i}"
for name, a in addrs.items():
    for _ in range(600):
        try:
            if json.load(urllib.request.urlopen(f"http://{a}/health"))["degraded"] is False: break
        except Exception: pass
        time.sleep(0.5)
base = ("How did Mastercard, Exxon Mobil and Oracle describe their risk factors, capital allocation, "
        "liquidity and outlook in fiscal 2023, 2024 and 2025? ")
filler = "Consider management's discussion of demand, pricing, costs, regulation and competition. "
q = base + filler * ((3500 - len(base)) // len(filler))
print("question chars:", len(q))
body = json.dumps({"question": q, "route": "narrative", "top_k": 10}).encode()
times = {n: [] for n in bins}
for rep in range(7):
    for name, a in addrs.items():
        req = urllib.request.Request(f"http://{a}/v1/context", data=body, headers={"Authorization": "Bearer sx_b", "Content-Type": "application/json"})
        t = time.perf_counter(); r = json.load(urllib.request.urlopen(req)); dt = time.perf_counter() - t
        if rep: times[name].append(dt * 1000)
for n, v in times.items():
    print(f"{n}: median {statistics.median(v):.0f} ms over {len(v)} requests ({', '.join(f'{x:.0f}' for x in v)})")
print(f"ratio after/before: {statistics.median(times['after'])/statistics.median(times['before']):.3f}")
for p in procs.values(): p.terminate()
