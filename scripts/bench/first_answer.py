#!/usr/bin/env python3
"""Time `sextant serve` on the whole demo corpus from an empty cache: seconds until the
first `/v1/retrieve` answer (BM25, `degraded`), and until every path is in (the full
hybrid index built, swapped in and cached).

    python3 scripts/bench/first_answer.py [--sextant PATH] [--backend auto|onnxruntime|tract]

The models come from the usual model directory (fetched by `scripts/ci/fetch_models.sh`);
only the index cache is empty. Prints one JSON object.
"""

import argparse
import json
import os
import socket
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
KEY = "sx_first_answer_timing_key"


def get(url, body=None):
    req = urllib.request.Request(url, data=body, headers={"Authorization": f"Bearer {KEY}",
                                                          "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")
    except OSError:
        return 0, None


def main():
    p = argparse.ArgumentParser()
    target = Path(os.environ.get("CARGO_TARGET_DIR", REPO / "target"))
    p.add_argument("--sextant", type=Path, default=target / "release/sextant")
    p.add_argument("--backend", default="auto")
    args = p.parse_args()
    cache = Path(os.environ.get("SEXTANT_CACHE_DIR", Path.home() / ".cache/sextant"))
    models = os.environ.get("SEXTANT_MODEL_DIR", str(cache / "models"))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    base = f"http://127.0.0.1:{port}"
    with tempfile.TemporaryDirectory(prefix="sextant-first-") as empty:
        env = dict(os.environ, SEXTANT_CACHE_DIR=empty, SEXTANT_MODEL_DIR=models)
        t0 = time.monotonic()
        # serve's log goes to a file: a pipe nobody reads fills up with its access lines (one
        # per /health poll) and blocks the server on its next log line.
        log = tempfile.TemporaryFile(mode="w+")
        proc = subprocess.Popen([str(args.sextant), "--backend", args.backend, "serve", "--addr", f"127.0.0.1:{port}",
                                 "--dev-key", KEY], env=env, stdout=subprocess.DEVNULL, stderr=log, text=True)
        try:
            first = full = None
            answer = None
            while full is None:
                if proc.poll() is not None:
                    log.seek(0)
                    raise SystemExit(f"sextant serve exited: {log.read()[-4000:]}")
                if first is None:
                    status, body = get(f"{base}/v1/retrieve", json.dumps({"query": "What drove revenue growth?"}).encode())
                    if status == 200:
                        first = time.monotonic() - t0
                        answer = body["meta"]
                status, health = get(f"{base}/health")
                if status == 200 and health.get("degraded") is False:
                    full = time.monotonic() - t0
                    chunks = health["indexes"]
                time.sleep(0.5 if first is None else 5)
        finally:
            proc.terminate()
            proc.wait()
    print(json.dumps({"first_answer_s": round(first, 1), "first_answer_meta": answer,
                      "all_paths_s": round(full, 1), "chunks": chunks, "backend": args.backend}))


if __name__ == "__main__":
    main()
