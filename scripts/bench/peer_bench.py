#!/usr/bin/env python3
"""Sextant beside a peer, in one run on one machine: `sextant bench --json` (on each
backend) and, on the same queries, passages, chunks and ONNX graphs, ONNX Runtime from
Python and LanceDB embedded.

What the peer measures (release builds and PyPI wheels on both sides):
- query embed p50/p99 per model: tokenize (HF `tokenizers`, the same tokenizer.json) and
  run the same ONNX graph on ONNX Runtime (default session options, as a user gets them);
- passage encode throughput of both encoders: the passages `sextant bench` timed, sorted by
  length into batches (16 for MiniLM, 8 for SPLADE, as Sextant batches them);
- LanceDB embed + hybrid: the query embedded as above, then one hybrid query (vector search
  + full-text search, fused by LanceDB's default RRF reranker) over a table of the same
  chunks and dense vectors Sextant searched, at every scale Sextant measured.

Ratios (Sextant / peer) are printed for the issue's targets; below 1 means Sextant is
faster. Usage (from the repository root, after `cargo build --release -p sextant-cli`):

    python3 scripts/bench/peer_bench.py --beir ../shared/data/scifact --scale 100000

`--samples FILE` also writes the peer's raw samples (ms): the query encoders' under
`stages` (`encode_dense`, `encode_sparse`, named as `sextant bench` names its stages) and,
per index size in chunks, LanceDB's embed + hybrid query under `search_total` (the faster
vector setting's). `sextant bench --report DIR --peer FILE` draws them beside Sextant's.

The venv (onnxruntime, lancedb, tokenizers, numpy, pyarrow) is made on first use under
$SEXTANT_CACHE_DIR/venv-peer.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CACHE = Path(os.environ.get("SEXTANT_CACHE_DIR", Path.home() / ".cache/sextant"))
VENV = CACHE / "venv-peer"
REQUIREMENTS = REPO / "scripts/bench/requirements-peer.txt"


def ensure_venv(script=__file__):
    """Re-runs `script` (this one by default) inside the peer venv, creating it first when
    needed."""
    if Path(sys.prefix).resolve() == VENV.resolve():
        return
    py = VENV / "bin/python"
    stamp = VENV / ".requirements"
    want = REQUIREMENTS.read_text()
    if not py.exists() or not stamp.exists() or stamp.read_text() != want:
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
        subprocess.run([str(py), "-m", "pip", "install", "-q", "-r", str(REQUIREMENTS)], check=True)
        stamp.write_text(want)
    os.execv(str(py), [str(py), str(script), *sys.argv[1:]])


def pct(xs, q):
    xs = sorted(xs)
    return xs[round((len(xs) - 1) * q)]


def model_dir():
    if os.environ.get("SEXTANT_MODEL_DIR"):
        return Path(os.environ["SEXTANT_MODEL_DIR"])
    return CACHE / "models"


class Encoder:
    """A tokenizer and an ONNX Runtime session of one converted model directory."""

    def __init__(self, directory, output, options=None):
        """`options`: ONNX Runtime session options (its defaults, as a user gets them, when
        None)."""
        import onnxruntime as ort
        from tokenizers import Tokenizer

        self.tok = Tokenizer.from_file(str(directory / "tokenizer.json"))
        self.tok.no_padding()  # the file pads to 128; batches are padded to their longest input below
        self.tok.enable_truncation(256)
        self.session = ort.InferenceSession(str(directory / "model.onnx"), options, providers=["CPUExecutionProvider"])
        self.output = output

    def run(self, texts):
        import numpy as np

        encs = self.tok.encode_batch(texts)
        seq = max(len(e.ids) for e in encs)
        n = len(encs)
        ids = np.zeros((n, seq), np.int64)
        mask = np.zeros((n, seq), np.int64)
        types = np.zeros((n, seq), np.int64)
        for i, e in enumerate(encs):
            ids[i, : len(e.ids)] = e.ids
            mask[i, : len(e.ids)] = 1
            types[i, : len(e.ids)] = e.type_ids
        feed = {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
        return self.session.run([self.output], feed)[0]

    def query_times(self, queries):
        for q in queries[:10]:
            self.run([q])
        out = []
        for q in queries:
            t = time.perf_counter()
            self.run([q])
            out.append((time.perf_counter() - t) * 1e3)
        return out

    def throughput(self, passages, batch):
        order = sorted(range(len(passages)), key=lambda i: len(self.tok.encode(passages[i]).ids))
        self.run([passages[i] for i in order[:batch]])
        t = time.perf_counter()
        for k in range(0, len(order), batch):
            self.run([passages[i] for i in order[k : k + batch]])
        return len(passages) / (time.perf_counter() - t)


def lancedb_hybrid(chunks_dir, queries, dense, work):
    """Embed + hybrid search times (ms) on a LanceDB table of one exported scale, with
    exact vector search and with an HNSW vector index (IVF_HNSW_SQ, cosine): the faster
    setting is the peer's figure, so the peer is never held back by a choice made here."""
    import lancedb
    import numpy as np
    import pyarrow as pa
    from lancedb.index import FTS

    dim = int((chunks_dir / "dim.txt").read_text())
    vectors = np.fromfile(chunks_dir / "vectors.f32", dtype="<f4").reshape(-1, dim)
    texts = [json.loads(line) for line in (chunks_dir / "texts.jsonl").open()]
    db = lancedb.connect(str(work / chunks_dir.name))
    table = db.create_table(
        "chunks",
        pa.table(
            {
                "id": pa.array(range(len(texts)), pa.int64()),
                "text": pa.array(texts, pa.string()),
                "vector": pa.FixedSizeListArray.from_arrays(pa.array(vectors.reshape(-1), pa.float32()), dim),
            }
        ),
        mode="overwrite",
    )
    table.create_index("text", config=FTS(), replace=True)

    def one(q):
        v = dense.run([q])[0]
        return table.search(query_type="hybrid").vector(v).text(q).limit(10).to_list()

    def timed():
        for q in queries[:10]:
            one(q)
        out = []
        for q in queries:
            t = time.perf_counter()
            one(q)
            out.append((time.perf_counter() - t) * 1e3)
        return out

    runs = {"exact": timed()}
    t = time.perf_counter()
    table.create_index(metric="cosine", vector_column_name="vector", index_type="IVF_HNSW_SQ", replace=True)
    print(f"LanceDB HNSW index on {len(texts)} rows: {time.perf_counter() - t:.1f} s", file=sys.stderr)
    runs["IVF_HNSW_SQ"] = timed()
    best = min(runs, key=lambda k: pct(runs[k], 0.5))
    return len(texts), best, runs


def sextant_bench(binary, backend, args, export):
    cmd = [str(binary), "--backend", backend, "bench", "--beir", str(args.beir), "--queries", str(args.queries),
           "--passages", str(args.passages), "--json"]
    for s in args.scale:
        cmd += ["--scale", str(s)]
    if export:
        cmd += ["--export", str(export)]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def main():
    ensure_venv()
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--beir", type=Path, required=True)
    p.add_argument("--scale", type=int, action="append", default=[])
    p.add_argument("--queries", type=int, default=200)
    p.add_argument("--passages", type=int, default=256)
    p.add_argument("--sextant", type=Path,
                   default=Path(os.environ.get("CARGO_TARGET_DIR", REPO / "target")) / "release/sextant")
    p.add_argument("--backends", default="onnxruntime,tract")
    p.add_argument("--json", type=Path, help="also write every figure to this file")
    p.add_argument("--samples", type=Path,
                   help="also write the peer's raw samples (ms) to this file, for `sextant bench --report DIR --peer FILE`")
    args = p.parse_args()

    work = Path(tempfile.mkdtemp(prefix="sextant-peer-"))
    try:
        backends = args.backends.split(",")
        sextant = {}
        for i, b in enumerate(backends):
            sextant[b] = sextant_bench(args.sextant, b, args, work / "export" if i == 0 else None)
        export = work / "export"
        queries = [json.loads(line) for line in (export / "queries.jsonl").open()]
        passages = [json.loads(line) for line in (export / "passages.jsonl").open()]

        models = model_dir()
        dense = Encoder(models / "minilm-l6-v2", "sentence_embedding")
        sparse = Encoder(models / "splade-tiny", "sparse_weights")
        peer = {"dense_query_ms": dense.query_times(queries), "sparse_query_ms": sparse.query_times(queries)}
        peer["dense_per_s"] = dense.throughput(passages, 16)
        peer["sparse_per_s"] = sparse.throughput(passages, 8)
        # Both encoders over the same passages, one after the other.
        peer["both_per_s"] = 1.0 / (1.0 / peer["dense_per_s"] + 1.0 / peer["sparse_per_s"])
        lance = {}
        for d in sorted(export.glob("chunks-*"), key=lambda d: int(d.name.split("-")[1])):
            n, best, runs = lancedb_hybrid(d, queries, dense, work)
            lance[n] = (best, runs)
    finally:
        shutil.rmtree(work, ignore_errors=True)

    report = {"sextant": sextant, "peer": {
        "query_dense_p50_ms": pct(peer["dense_query_ms"], 0.5), "query_dense_p99_ms": pct(peer["dense_query_ms"], 0.99),
        "query_sparse_p50_ms": pct(peer["sparse_query_ms"], 0.5), "query_sparse_p99_ms": pct(peer["sparse_query_ms"], 0.99),
        "encode_dense_per_s": peer["dense_per_s"], "encode_sparse_per_s": peer["sparse_per_s"],
        "encode_both_per_s": peer["both_per_s"],
        "lancedb_hybrid": {str(n): {"vector_search": best, "p50_ms": pct(runs[best], 0.5), "p99_ms": pct(runs[best], 0.99),
                                    "all": {k: {"p50_ms": pct(t, 0.5), "p99_ms": pct(t, 0.99)} for k, t in runs.items()}}
                           for n, (best, runs) in lance.items()},
    }}
    pr = report["peer"]
    print(f"\n### Sextant beside ONNX Runtime (Python) and LanceDB {args.beir.name}, {len(queries)} queries, "
          f"{len(passages)} passages\n")
    print("| figure | " + " | ".join(f"Sextant ({b})" for b in backends) + " | peer | ratio (" + backends[0] + ") |")
    print("|---|" + "---:|" * (len(backends) + 2))

    def line(name, key, peer_value):
        vals = [sextant[b][0][key] for b in backends]
        print(f"| {name} | " + " | ".join(f"{v:.2f}" for v in vals) + f" | {peer_value:.2f} | {vals[0] / peer_value:.2f} |")

    line("query encode dense p50 ms", "encode_dense_p50_ms", pr["query_dense_p50_ms"])
    line("query encode dense p99 ms", "encode_dense_p99_ms", pr["query_dense_p99_ms"])
    line("query encode SPLADE p50 ms", "encode_sparse_p50_ms", pr["query_sparse_p50_ms"])
    line("query encode SPLADE p99 ms", "encode_sparse_p99_ms", pr["query_sparse_p99_ms"])
    line("passages/s, MiniLM", "build_dense_chunks_per_s", pr["encode_dense_per_s"])
    line("passages/s, SPLADE", "build_sparse_chunks_per_s", pr["encode_sparse_per_s"])
    line("passages/s, both (as a build)", "build_chunks_per_s", pr["encode_both_per_s"])
    for i, fig in enumerate(sextant[backends[0]]):
        n = fig["chunks"]
        if n not in lance:
            continue
        for q in ("p50", "p99"):
            vals = [sextant[b][i][f"search_{q}_ms"] for b in backends]
            peer_value = pr["lancedb_hybrid"][str(n)][f"{q}_ms"]
            how = pr["lancedb_hybrid"][str(n)]["vector_search"]
            print(f"| search {q} ms at {n} chunks (peer: LanceDB embed + hybrid, {how} vectors) | "
                  + " | ".join(f"{v:.2f}" for v in vals) + f" | {peer_value:.2f} | {vals[0] / peer_value:.2f} |")
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))
    if args.samples:
        args.samples.write_text(json.dumps(peer_samples(queries, peer, lance)))


def peer_samples(queries, peer, lance):
    """The peer's raw samples, in the shape `sextant bench --peer FILE` reads."""
    import lancedb
    import onnxruntime

    return {
        "peer": f"ONNX Runtime {onnxruntime.__version__} (Python) + LanceDB {lancedb.__version__}",
        "queries": len(queries),
        "stages": {"encode_dense": peer["dense_query_ms"], "encode_sparse": peer["sparse_query_ms"]},
        "search_total": {str(n): {"vector_search": best, "samples_ms": runs[best]} for n, (best, runs) in lance.items()},
    }


if __name__ == "__main__":
    main()
