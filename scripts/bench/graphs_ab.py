#!/usr/bin/env python3
"""Two conversions of the same models, timed in one process: ONNX Runtime (the wheel
Sextant loads, 1.31.1) runs each model directory's `minilm-l6-v2` and `splade-tiny` graphs
on the same questions and passages, the directories taking turns question by question
(the first one rotating), so that a noisy machine slows both alike.

Prints, per directory: the dense and SPLADE query encoders' p50 (ms), both one after the
other as a search runs them, one passage through each model, and each as a ratio to the
first directory; first, the largest difference between the two graphs' outputs.

    python3 scripts/bench/graphs_ab.py BEFORE_MODELS_DIR AFTER_MODELS_DIR

Queries are SciFact's (`../shared/data/scifact`). Sessions use two intra-op threads
without spinning: separate sessions each keep their own pool, and pools that spin slow
each other down (Sextant's own sessions share one pool, docs/models.md). The venv is the
peer benchmark's ($SEXTANT_CACHE_DIR/venv-peer, made on first use).
"""

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from peer_bench import REPO, Encoder, ensure_venv  # noqa: E402

OUTPUTS = {"minilm-l6-v2": "sentence_embedding", "splade-tiny": "sparse_weights"}


def main():
    ensure_venv(__file__)
    import numpy as np
    import onnxruntime as ort

    dirs = [Path(d) for d in sys.argv[1:]]
    if len(dirs) < 2:
        raise SystemExit(__doc__)
    data = REPO.parent / "shared/data/scifact"
    queries = [json.loads(line)["text"] for line in (data / "queries.jsonl").open()][:300]
    passages = []
    for line in (data / "corpus.jsonl").open():
        d = json.loads(line)
        passages.append(d["title"] + "\n" + d["text"])
        if len(passages) == 96:
            break

    def options():
        o = ort.SessionOptions()
        o.intra_op_num_threads = 2
        o.log_severity_level = 3
        o.add_session_config_entry("session.intra_op.allow_spinning", "0")
        return o

    encoders = [{m: Encoder(d / m, out, options()) for m, out in OUTPUTS.items()} for d in dirs]

    def run(e, m, text):
        return e[m].run([text])[0]

    for i, e in enumerate(encoders[1:], 1):
        for m in OUTPUTS:
            diff = max(float(np.abs(run(encoders[0], m, x) - run(e, m, x)).max()) for x in queries[:50] + passages[:20])
            print(f"{dirs[i]} {m}: largest |difference| from {dirs[0]}: {diff:.3g}")
    for e in encoders:
        for m in OUTPUTS:
            for q in queries[:10]:
                run(e, m, q)
    times = [{k: [] for k in ("dense", "splade", "both", "passage dense", "passage SPLADE")} for _ in dirs]

    def time_both(texts, dense, splade, both=None):
        """Each text through both models of every directory, the directories taking turns
        (the first one rotating), recorded under the keys given."""
        for i, text in enumerate(texts):
            for j in [(k + i) % len(dirs) for k in range(len(dirs))]:
                t0 = time.perf_counter()
                run(encoders[j], "minilm-l6-v2", text)
                t1 = time.perf_counter()
                run(encoders[j], "splade-tiny", text)
                t2 = time.perf_counter()
                times[j][dense].append((t1 - t0) * 1e3)
                times[j][splade].append((t2 - t1) * 1e3)
                if both:
                    times[j][both].append((t2 - t0) * 1e3)

    time_both(queries, "dense", "splade", "both")
    time_both(passages, "passage dense", "passage SPLADE")
    base = {k: float(np.median(v)) for k, v in times[0].items()}
    for d, t in zip(dirs, times):
        p50 = {k: float(np.median(v)) for k, v in t.items()}
        cells = "  ".join(f"{k} {p50[k]:.2f} ms ({p50[k] / base[k]:.3f})" for k in p50)
        print(f"{d}: {cells}")


if __name__ == "__main__":
    main()
