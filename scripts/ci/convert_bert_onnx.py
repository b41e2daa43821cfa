#!/usr/bin/env python3
"""Convert a BERT or MPNet checkpoint in safetensors into an ONNX graph that tract can run.

No torch: the graph is written op by op with `onnx.helper`, the weights are read with
`safetensors.numpy`. Only plain opset-13 operators are used (MatMul, Add, Softmax, Erf,
ReduceMean, ...), so any ONNX runtime, tract included, runs it.

Three heads are supported, chosen with --kind:

* ``dense``  (sentence-transformers, e.g. all-MiniLM-L6-v2): outputs
  ``sentence_embedding`` [batch, hidden] = L2-normalised mean of the last hidden states
  over the real attention mask, and ``token_embeddings`` [batch, seq, hidden].
* ``splade`` (BertForMaskedLM): outputs ``sparse_weights`` [batch, vocab] =
  max over real tokens of log(1 + relu(MLM logits)), computed as log(1 + relu(max logits))
  (the activation is monotone), so the big [batch, seq, vocab] tensor sees only the max;
  ``mlm_scores`` [batch, seq, vocab], the logits before pooling and before their
  vocabulary bias, and ``mlm_bias`` [vocab], that bias.
* ``cross``  (BertForSequenceClassification): outputs ``logits`` [batch, labels] from the
  tanh pooler over [CLS] and the classifier; --head names a safetensors file holding
  ``bert.pooler.dense.*`` and ``classifier.*`` when they are not in the checkpoint.

Inputs are always ``input_ids``, ``attention_mask`` and ``token_type_ids`` (int64,
[batch, seq]).

MPNet (``model_type: mpnet`` in config.json, e.g. all-mpnet-base-v2; dense head only) differs
from BERT in four places, all taken from transformers' ``modeling_mpnet.py``: no token type
embeddings (``token_type_ids`` is accepted and unused), position ids counted from
``padding_idx + 1 = 2`` (inputs are right-padded, so the real tokens are positions
2, 3, ...), a bucketed relative-position bias added to every layer's attention scores (one
[heads, S, S] tensor for all layers), and the layer names (``attention.attn.{q,k,v,o}``,
``attention.LayerNorm``).
"""
import argparse
import json
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from safetensors.numpy import load_file


class Graph:
    """Accumulates nodes and initializers with unique names."""

    def __init__(self):
        self.nodes = []
        self.inits = []
        self.n = 0

    def name(self, hint):
        self.n += 1
        return f"{hint}_{self.n}"

    def const(self, array, hint="c"):
        name = self.name(hint)
        self.inits.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    def op(self, op_type, inputs, hint=None, **attrs):
        out = self.name(hint or op_type.lower())
        self.nodes.append(helper.make_node(op_type, inputs, [out], **attrs))
        return out

    def rename_const(self, old, new):
        """Renames the initializer `old` to `new` (a graph output can be an initializer)."""
        for init in self.inits:
            if init.name == old:
                init.name = new
        return new

    def rename(self, old, new):
        """Renames the value `old` to `new` everywhere, so that an intermediate value is a
        graph output itself: an `Identity` to a second name would copy it on every run
        (ONNX Runtime runs every node, requested output or not)."""
        for node in self.nodes:
            node.input[:] = [new if i == old else i for i in node.input]
            node.output[:] = [new if o == old else o for o in node.output]
        return new


def strip_prefix(weights):
    """Accept both `bert.`- or `mpnet.`-prefixed (…For*) and bare (…Model) names, and the
    old `gamma`/`beta` LayerNorm names."""
    out = {}
    for k, v in weights.items():
        k2 = k
        for prefix in ("bert.", "mpnet."):
            if k2.startswith(prefix):
                k2 = k2[len(prefix):]
        k2 = k2.replace("LayerNorm.gamma", "LayerNorm.weight").replace("LayerNorm.beta", "LayerNorm.bias")
        out[k2] = v
    return out


def layer_norm(g, x, w, b, eps):
    """LayerNorm over the last axis, written as ONNX Runtime's LayerNormFusion matches it
    (`Pow(d, 2)`, not `Mul(d, d)`), so that its graph optimizer runs one fused kernel."""
    mean = g.op("ReduceMean", [x], axes=[-1], keepdims=1)
    d = g.op("Sub", [x, mean])
    var = g.op("ReduceMean", [g.op("Pow", [d, g.const(np.float32(2.0), "two")])], axes=[-1], keepdims=1)
    std = g.op("Sqrt", [g.op("Add", [var, g.const(np.float32(eps), "eps")])])
    y = g.op("Div", [d, std])
    return g.op("Add", [g.op("Mul", [y, g.const(w, "ln_w")]), g.const(b, "ln_b")])


def matmul(g, x, w):
    """x @ w.T, with the transpose done once here, not in the graph."""
    return g.op("MatMul", [x, g.const(np.ascontiguousarray(w.T), "w")])


def linear(g, x, w, b):
    """x @ w.T + b."""
    return g.op("Add", [matmul(g, x, w), g.const(b, "b")])


def gelu(g, x):
    """Exact (erf) GELU, as BERT's `gelu` activation, written as ONNX Runtime's GeluFusion
    matches it (`Div` by √2, not `Mul` by 1/√2): with the bias add before it, one kernel."""
    e = g.op("Erf", [g.op("Div", [x, g.const(np.float32(np.sqrt(2.0)), "sqrt2")])])
    one_plus = g.op("Add", [e, g.const(np.float32(1.0), "one")])
    return g.op("Mul", [g.op("Mul", [x, one_plus]), g.const(np.float32(0.5), "half")])


def relative_position_buckets(size, num_buckets, max_distance):
    """MPNet's (T5's) bidirectional bucket of every relative position j - i, as an int64
    [size, size] table, computed in float32 as transformers does (the log ratio truncated
    toward zero): half the buckets per direction, the first half of those exact distances,
    the rest logarithmic up to `max_distance`."""
    pos = np.arange(size, dtype=np.int64)
    n = -(pos[None, :] - pos[:, None])  # -(memory - context)
    half = num_buckets // 2
    ret = (n < 0).astype(np.int64) * half
    n = np.abs(n)
    max_exact = half // 2
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.log(n.astype(np.float32) / np.float32(max_exact))
        large = max_exact + (ratio / np.float32(np.log(max_distance / max_exact)) *
                             np.float32(half - max_exact)).astype(np.int64)
    large = np.minimum(large, half - 1)
    return ret + np.where(n < max_exact, n, large)


def encoder(g, w, cfg, ids, mask, types):
    hidden = cfg["hidden_size"]
    heads = cfg["num_attention_heads"]
    dh = hidden // heads
    mpnet = cfg.get("model_type") == "mpnet"
    eps = cfg.get("layer_norm_eps", 1e-12)

    # Embeddings: word + position (sliced to the sequence length) + token type (BERT only).
    word = g.op("Gather", [g.const(w["embeddings.word_embeddings.weight"], "word_emb"), ids], axis=0)
    seq_len = g.op("Gather", [g.op("Shape", [ids]), g.const(np.array([1], dtype=np.int64), "i1")], axis=0)
    first = 2 if mpnet else 0  # MPNet counts real tokens' positions from padding_idx + 1
    pos_table = w["embeddings.position_embeddings.weight"][first:]
    pos = g.op("Slice", [g.const(pos_table, "pos_emb"),
                         g.const(np.array([0], dtype=np.int64), "z"), seq_len,
                         g.const(np.array([0], dtype=np.int64), "ax0")])
    if mpnet:
        x = g.op("Add", [word, pos])
    else:
        typ = g.op("Gather", [g.const(w["embeddings.token_type_embeddings.weight"], "type_emb"), types], axis=0)
        x = g.op("Add", [g.op("Add", [word, pos]), typ])
    x = layer_norm(g, x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], eps)

    # Additive attention bias: 0 where attended, a large negative number on padding.
    maskf = g.op("Cast", [mask], to=TensorProto.FLOAT)
    bias = g.op("Mul", [g.op("Sub", [g.const(np.float32(1.0), "one"), maskf]),
                        g.const(np.float32(-1e9), "neg")])
    bias = g.op("Unsqueeze", [bias, g.const(np.array([1, 2], dtype=np.int64), "ax12")])  # [B,1,1,S]
    if mpnet:
        # The relative-position bias [1,h,S,S]: the bucket table cut to S×S, each bucket's
        # per-head weight gathered, heads first; added once to the padding bias, so every
        # layer adds one [B,h,S,S] term as BERT adds its [B,1,1,S] one.
        buckets = relative_position_buckets(pos_table.shape[0], cfg.get("relative_attention_num_buckets", 32), 128)
        zero2 = g.const(np.array([0, 0], dtype=np.int64), "z2")
        ends = g.op("Concat", [seq_len, seq_len], axis=0)
        cut = g.op("Slice", [g.const(buckets, "rel_buckets"), zero2, ends, g.const(np.array([0, 1], dtype=np.int64), "ax01")])
        rel = g.op("Gather", [g.const(w["encoder.relative_attention_bias.weight"], "rel_bias"), cut], axis=0)  # [S,S,h]
        rel = g.op("Unsqueeze", [g.op("Transpose", [rel], perm=[2, 0, 1]), g.const(np.array([0], dtype=np.int64), "ax0b")])
        bias = g.op("Add", [bias, rel])  # [B,h,S,S]

    split_shape = g.const(np.array([0, 0, heads, dh], dtype=np.int64), "split")
    merge_shape = g.const(np.array([0, 0, hidden], dtype=np.int64), "merge")
    split_sizes = g.const(np.array([hidden] * 3, dtype=np.int64), "qkv_sizes")
    for i in range(cfg["num_hidden_layers"]):
        p = f"encoder.layer.{i}."
        if mpnet:
            names, att_out, att_norm = ("attn.q", "attn.k", "attn.v"), "attention.attn.o", "attention.LayerNorm"
        else:
            names = ("self.query", "self.key", "self.value")
            att_out, att_norm = "attention.output.dense", "attention.output.LayerNorm"

        # Q, K and V in one MatMul (one [hidden, 3·hidden] weight, then split), with the
        # attention scale 1/√d folded into Q's weight and bias: fewer, larger kernels.
        scales = (1.0 / np.sqrt(dh), 1.0, 1.0)
        w_qkv = np.concatenate([w[p + f"attention.{n}.weight"] * np.float32(c) for n, c in zip(names, scales)])
        b_qkv = np.concatenate([w[p + f"attention.{n}.bias"] * np.float32(c) for n, c in zip(names, scales)])
        qkv = linear(g, x, w_qkv.astype(np.float32), b_qkv.astype(np.float32))
        parts = [g.name("qkv") for _ in names]
        g.nodes.append(helper.make_node("Split", [qkv, split_sizes], parts, axis=-1))

        def heads_of(t, perm):
            return g.op("Transpose", [g.op("Reshape", [t, split_shape])], perm=perm)

        q = heads_of(parts[0], [0, 2, 1, 3])  # [B,h,S,d]
        k = heads_of(parts[1], [0, 2, 3, 1])  # [B,h,d,S]
        v = heads_of(parts[2], [0, 2, 1, 3])  # [B,h,S,d]
        scores = g.op("Add", [g.op("MatMul", [q, k]), bias])
        probs = g.op("Softmax", [scores], axis=-1)
        ctx = g.op("Transpose", [g.op("MatMul", [probs, v])], perm=[0, 2, 1, 3])
        ctx = g.op("Reshape", [ctx, merge_shape])
        attn = linear(g, ctx, w[p + att_out + ".weight"], w[p + att_out + ".bias"])
        x = layer_norm(g, g.op("Add", [attn, x]), w[p + att_norm + ".weight"], w[p + att_norm + ".bias"], eps)
        inter = gelu(g, linear(g, x, w[p + "intermediate.dense.weight"], w[p + "intermediate.dense.bias"]))
        out = linear(g, inter, w[p + "output.dense.weight"], w[p + "output.dense.bias"])
        x = layer_norm(g, g.op("Add", [out, x]), w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"], eps)
    return x, maskf


def build(kind, w, cfg, raw):
    if cfg.get("model_type") == "mpnet" and kind != "dense":
        raise SystemExit("MPNet checkpoints convert with --kind dense only")
    g = Graph()
    ids, mask, types = "input_ids", "attention_mask", "token_type_ids"
    x, maskf = encoder(g, w, cfg, ids, mask, types)
    hidden = cfg["hidden_size"]
    outputs = []
    if kind == "dense":
        x = g.rename(x, "token_embeddings")
        m3 = g.op("Unsqueeze", [maskf, g.const(np.array([2], dtype=np.int64), "ax2")])  # [B,S,1]
        summed = g.op("ReduceSum", [g.op("Mul", [x, m3]), g.const(np.array([1], dtype=np.int64), "ax1")], keepdims=0)
        count = g.op("Max", [g.op("ReduceSum", [m3, g.const(np.array([1], dtype=np.int64), "ax1")], keepdims=0),
                             g.const(np.float32(1e-9), "tiny")])
        mean = g.op("Div", [summed, count])
        norm = g.op("Sqrt", [g.op("ReduceSum", [g.op("Mul", [mean, mean]), g.const(np.array([1], dtype=np.int64), "ax1")], keepdims=1)])
        norm = g.op("Max", [norm, g.const(np.float32(1e-12), "tiny")])
        g.nodes.append(helper.make_node("Div", [mean, norm], ["sentence_embedding"]))
        outputs = [helper.make_tensor_value_info("sentence_embedding", TensorProto.FLOAT, ["batch", hidden]),
                   helper.make_tensor_value_info("token_embeddings", TensorProto.FLOAT, ["batch", "seq", hidden])]
    elif kind == "splade":
        t = gelu(g, linear(g, x, raw["cls.predictions.transform.dense.weight"], raw["cls.predictions.transform.dense.bias"]))
        t = layer_norm(g, t, raw["cls.predictions.transform.LayerNorm.weight"],
                       raw["cls.predictions.transform.LayerNorm.bias"], cfg.get("layer_norm_eps", 1e-12))
        dec = raw.get("cls.predictions.decoder.weight", w["embeddings.word_embeddings.weight"])  # tied
        # The logits without their vocabulary bias are a second output (the value itself,
        # not a copy), and the bias a third, so that a runtime can pick them for short single
        # inputs (a query) and pool them itself, skipping the [B,S,V] reduction.
        scores = g.rename(matmul(g, t, dec), "mlm_scores")  # [B,S,V]
        vocab_bias = g.rename_const(g.const(raw["cls.predictions.bias"], "mlm_b"), "mlm_bias")  # [V]
        # max_t log(1 + relu(s_t + b)) over real tokens == log(1 + relu(max_t s_t + b)),
        # because log1p∘relu is monotone and adding the per-term bias b commutes with the
        # max (rounding is monotone too, so the two are equal in float): mask padding with
        # a large negative bias, take the max, and add b and run the activation on [B,V]
        # instead of [B,S,V].
        pad_bias = g.op("Mul", [g.op("Sub", [g.const(np.float32(1.0), "one"), maskf]), g.const(np.float32(-1e9), "neg")])
        pad_bias = g.op("Unsqueeze", [pad_bias, g.const(np.array([2], dtype=np.int64), "ax2")])  # [B,S,1]
        best = g.op("ReduceMax", [g.op("Add", [scores, pad_bias])], axes=[1], keepdims=0)  # [B,V]
        best = g.op("Add", [best, vocab_bias])
        g.nodes.append(helper.make_node("Log", [g.op("Add", [g.op("Relu", [best]), g.const(np.float32(1.0), "one")])],
                                        ["sparse_weights"]))
        outputs = [helper.make_tensor_value_info("sparse_weights", TensorProto.FLOAT, ["batch", cfg["vocab_size"]]),
                   helper.make_tensor_value_info("mlm_scores", TensorProto.FLOAT, ["batch", "seq", cfg["vocab_size"]]),
                   helper.make_tensor_value_info("mlm_bias", TensorProto.FLOAT, [cfg["vocab_size"]])]
    elif kind == "cross":
        cls = g.op("Gather", [x, g.const(np.int64(0), "i0")], axis=1)  # [B,H]
        pooled = g.op("Tanh", [linear(g, cls, w["pooler.dense.weight"], w["pooler.dense.bias"])])
        cw, cb = w["classifier.weight"], w["classifier.bias"]
        g.rename(linear(g, pooled, cw, cb), "logits")
        outputs = [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", cw.shape[0]])]
    else:
        raise SystemExit(f"unknown kind {kind}")
    inputs = [helper.make_tensor_value_info(n, TensorProto.INT64, ["batch", "seq"]) for n in (ids, mask, types)]
    graph = helper.make_graph(g.nodes, f"sextant_{kind}", inputs, outputs, g.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], producer_name="sextant-convert")
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--safetensors", required=True)
    ap.add_argument("--config", required=True)
    ap.add_argument("--kind", choices=["dense", "splade", "cross"], required=True)
    ap.add_argument("--head", help="extra safetensors with pooler/classifier weights (cross)")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    cfg = json.load(open(a.config))
    raw = {k: v.astype(np.float32) if v.dtype != np.int64 else v for k, v in load_file(a.safetensors).items()}
    if a.head:
        raw.update(load_file(a.head))
    w = strip_prefix(raw)
    raw = {k.replace("LayerNorm.gamma", "LayerNorm.weight").replace("LayerNorm.beta", "LayerNorm.bias"): v
           for k, v in raw.items()}
    model = build(a.kind, w, cfg, raw)
    onnx.save(model, a.out)
    print(f"wrote {a.out} ({a.kind}, {cfg['num_hidden_layers']} layers, hidden {cfg['hidden_size']})", file=sys.stderr)


if __name__ == "__main__":
    main()
