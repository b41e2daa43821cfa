#!/usr/bin/env python3
"""Cold starts as Lambda does them: a fresh `sextant-retrieve` process each time, its
models read from a layer-like directory, its index from the S3-compatible server, and the
first request handed to it through the Lambda Runtime API (emulated here, as the AWS
runtime interface emulator would). Reports p50/p99 over several starts of the time to the
end of init (the process's first `GET .../invocation/next`) and to its first answer, with,
in the same run, the same function reading the same index from a local directory (the
baseline: what S3 adds).

Usage (release binaries; SeaweedFS from scripts/ci/aws_servers.sh, as docs/benchmarks.md says):

    . "$(bash scripts/ci/aws_servers.sh start | tail -n1)"
    export AWS_ENDPOINT_URL_S3=$SEXTANT_TEST_S3_ENDPOINT AWS_REGION=us-east-1 \\
      AWS_ACCESS_KEY_ID=$SEXTANT_TEST_AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY=$SEXTANT_TEST_AWS_SECRET_ACCESS_KEY
    cargo build --release -p sextant-cli -p sextant-retrieve
    python3 scripts/bench/cold_start_lambda.py --index DIR --bucket sextant-bench [--runs 20]

DIR is a built index (`sextant build`); the bucket must exist.
"""

import argparse
import http.server
import json
import os
import queue
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TARGET = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
CACHE = os.environ.get("SEXTANT_CACHE_DIR", os.path.expanduser("~/.cache/sextant"))
KEY = "sx_dev"  # the key events/retrieve-ok.rest.json sends


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


class RuntimeApi(http.server.ThreadingHTTPServer):
    """The Lambda Runtime API for one function process at a time: the event at the first
    `next`, then the times of `next` and of the answer."""

    daemon_threads = True

    def __init__(self, event):
        super().__init__(("127.0.0.1", 0), Handler)
        self.event = event
        self.marks = queue.Queue()
        self.served = threading.Event()


class Handler(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_GET(self):
        if self.path.endswith("/runtime/invocation/next"):
            self.server.marks.put(("next", time.perf_counter()))
            if self.server.served.is_set():
                time.sleep(3600)  # one invocation per process: the next waits, as a frozen sandbox
                return
            self.server.served.set()
            body = json.dumps(self.server.event).encode()
            self.send_response(200)
            self.send_header("Lambda-Runtime-Aws-Request-Id", "bench-1")
            self.send_header("Lambda-Runtime-Deadline-Ms", str(int(time.time() * 1000) + 60_000))
            self.send_header("Lambda-Runtime-Invoked-Function-Arn",
                             "arn:aws:lambda:us-east-1:123456789012:function:sextant-retrieve")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        else:
            self.send_response(404)
            self.end_headers()

    def do_POST(self):
        length = int(self.headers.get("Content-Length", "0"))
        body = self.rfile.read(length)
        kind = "answer" if self.path.endswith("/response") else "error"
        self.server.marks.put((kind, time.perf_counter(), body))
        self.send_response(202)
        self.end_headers()


def start_once(binary, env, event):
    """One cold start: seconds to the end of init and to the first answer, and the answer."""
    api = RuntimeApi(event)
    threading.Thread(target=api.serve_forever, daemon=True).start()
    env = dict(env, AWS_LAMBDA_RUNTIME_API=f"127.0.0.1:{api.server_address[1]}")
    t0 = time.perf_counter()
    proc = subprocess.Popen([binary], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    init = answer = None
    try:
        while answer is None:
            mark = api.marks.get(timeout=120)
            if mark[0] == "next" and init is None:
                init = mark[1] - t0
            elif mark[0] == "answer":
                answer = (mark[1] - t0, json.loads(mark[2]))
            elif mark[0] == "error":
                raise SystemExit(f"the function reported an error: {mark[2][:500]!r}")
    finally:
        proc.kill()
        _, err = proc.communicate()
        api.shutdown()
        api.server_close()
    status = answer[1].get("statusCode")
    if status != 200:
        raise SystemExit(f"answer {status}: {answer[1]}\n{err.decode()[-2000:]}")
    return init, answer[0]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--index", required=True, help="a built index directory")
    ap.add_argument("--bucket", required=True, help="an existing bucket of the S3-compatible server")
    ap.add_argument("--runs", type=int, default=20)
    args = ap.parse_args()
    sextant = os.path.join(TARGET, "release", "sextant")
    function = os.path.join(TARGET, "release", "sextant-retrieve")
    work = tempfile.mkdtemp(prefix="sextant-cold-")
    try:
        # The layer as the function sees it: models and ONNX Runtime's library under /opt.
        layer = os.path.join(work, "opt")
        for m in ("minilm-l6-v2", "splade-tiny"):
            shutil.copytree(os.path.join(CACHE, "models", m), os.path.join(layer, "models", m))
        os.makedirs(os.path.join(layer, "lib"))
        shutil.copy(os.path.join(CACHE, "models", "onnxruntime", "libonnxruntime.so"), os.path.join(layer, "lib"))
        keys = os.path.join(work, "keys.json")
        subprocess.run([sextant, "keys", "--store", keys, "create", "--tenant", "bench", "--plan", "pro", "--key", KEY],
                       check=True, capture_output=True)
        with open(os.path.join(args.index, "manifest.json")) as f:
            manifest = json.load(f)
        # The location's last part is the index id, as the template's SEXTANT_INDEXES has it.
        target = f"s3://{args.bucket}/cold-start-{os.getpid()}/{manifest['index_id']}"
        subprocess.run([sextant, "publish", "--index", args.index, "--to", target], check=True, capture_output=True)
        with open(os.path.join(ROOT, "events", "retrieve-ok.rest.json")) as f:
            event = json.load(f)
        base = {k: v for k, v in os.environ.items() if k.startswith(("AWS_", "PATH", "HOME"))}
        base.update({
            "AWS_LAMBDA_FUNCTION_NAME": "sextant-retrieve",
            "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "3008",
            "AWS_LAMBDA_FUNCTION_VERSION": "$LATEST",
            "SEXTANT_MODEL_DIR": os.path.join(layer, "models"),
            "SEXTANT_ORT_LIB": os.path.join(layer, "lib", "libonnxruntime.so"),
            "SEXTANT_KEYS": keys,
            "RUST_LOG": "warn",
        })
        runs = {"S3": [], "local directory (baseline)": []}
        # Interleaved, so that the machine's noise falls on both alike.
        for _ in range(args.runs):
            runs["S3"].append(start_once(function, dict(base, SEXTANT_INDEXES=target), event))
            runs["local directory (baseline)"].append(
                start_once(function, dict(base, SEXTANT_INDEXES=os.path.abspath(args.index)), event))
        size = sum(e["bytes"] for e in manifest["files"])
        print(f"index: {manifest['chunks']} chunks, {size / 1e6:.1f} MB; {args.runs} fresh processes each, "
              f"models from a layer directory, release build")
        print("| index read from | init p50 / p99 ms | first answer p50 / p99 ms |")
        print("|---|---:|---:|")
        for name, rs in runs.items():
            inits, answers = [r[0] * 1e3 for r in rs], [r[1] * 1e3 for r in rs]
            print(f"| {name} | {pct(inits, 50):.0f} / {pct(inits, 99):.0f} | {pct(answers, 50):.0f} / {pct(answers, 99):.0f} |")
        s3 = statistics.median(r[1] for r in runs["S3"])
        local = statistics.median(r[1] for r in runs["local directory (baseline)"])
        print(f"S3 / local, first answer p50: {s3 / local:.2f}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
