//! The encoders against reference outputs computed with PyTorch (`shared/golden`), on
//! both backends. The ONNX Runtime tests need its library (`scripts/ci/fetch_models.sh`
//! fetches it; CI runs them): a missing library fails them rather than skipping.

use serde_json::Value;

use super::*;
use crate::testutil::{golden, model_dir, onnx_nodes, repo_golden, shared_dir};

fn ids(v: &Value) -> Vec<u32> {
    v.as_array().unwrap().iter().map(|x| x.as_u64().unwrap() as u32).collect()
}

/// `backend`, or a failure naming what to run when ONNX Runtime is not there.
fn on(backend: Backend) -> Backend {
    if backend == Backend::OnnxRuntime {
        if let Err(e) = onnxruntime_available() {
            panic!("the ONNX Runtime golden tests need its library: {e}");
        }
    }
    backend
}

/// One test per backend for each check.
macro_rules! on_both_backends {
    ($check:ident: $tract:ident, $ort:ident) => {
        #[test]
        fn $tract() {
            $check(on(Backend::Tract));
        }
        #[test]
        fn $ort() {
            $check(on(Backend::OnnxRuntime));
        }
    };
}

on_both_backends!(dense_matches: dense_matches_pytorch_embeddings_on_tract, dense_matches_pytorch_embeddings_on_onnxruntime);
on_both_backends!(mpnet_matches: mpnet_matches_pytorch_embeddings_on_tract, mpnet_matches_pytorch_embeddings_on_onnxruntime);
on_both_backends!(splade_matches: splade_matches_pytorch_term_weights_on_tract, splade_matches_pytorch_term_weights_on_onnxruntime);
on_both_backends!(cross_encoder_matches: cross_encoder_matches_pytorch_logits_on_tract, cross_encoder_matches_pytorch_logits_on_onnxruntime);

fn dense_matches(backend: Backend) {
    dense_model_matches(backend, "minilm-l6-v2", &golden("dense_all-MiniLM-L6-v2.jsonl"));
}

/// all-mpnet-base-v2, the optional stronger embedder (`fetch_models.sh --with
/// mpnet-base-v2`, which CI runs): its relative-position bias and positions from 2 are
/// what the BERT graphs do not have, and the 256-token line exercises the longest buckets.
fn mpnet_matches(backend: Backend) {
    let dir = model_dir().join("mpnet-base-v2");
    assert!(
        dir.join("model.onnx").is_file(),
        "no {}: run scripts/ci/fetch_models.sh --with mpnet-base-v2",
        dir.display()
    );
    dense_model_matches(backend, "mpnet-base-v2", &repo_golden("dense_all-mpnet-base-v2.jsonl"));
}

fn dense_model_matches(backend: Backend, model: &str, rows: &[Value]) {
    let enc = DenseEncoder::load_with(&model_dir().join(model), backend).unwrap();
    assert_eq!(enc.backend(), backend);
    let texts: Vec<&str> = rows.iter().map(|r| r["text"].as_str().unwrap()).collect();
    // Batched (padded) and one by one must both match: padding must not leak into pooling.
    let batched = enc.embed_batch(&texts).unwrap();
    for (row, got) in rows.iter().zip(&batched) {
        let text = row["text"].as_str().unwrap();
        assert_eq!(enc.tokenizer().encode(text).unwrap().ids, ids(&row["input_ids"]), "input_ids of {text:?}");
        let want: Vec<f32> = row["embedding"].as_array().unwrap().iter().map(|x| x.as_f64().unwrap() as f32).collect();
        let single = enc.embed(text).unwrap();
        for got in [got, &single] {
            let cos: f32 = got.iter().zip(&want).map(|(a, b)| a * b).sum();
            let max = got.iter().zip(&want).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
            assert!(cos >= 0.9999 && max <= 1e-4, "{text:?}: cosine {cos}, max abs diff {max}");
        }
    }
}

fn splade_matches(backend: Backend) {
    let enc = SparseEncoder::load_with(&model_dir().join("splade-tiny"), backend).unwrap();
    assert_eq!(enc.backend(), backend);
    let rows = golden("splade_tiny.jsonl");
    let texts: Vec<&str> = rows.iter().map(|r| r["text"].as_str().unwrap()).collect();
    let batched = enc.encode_batch(&texts).unwrap();
    for (row, batched) in rows.iter().zip(&batched) {
        let text = row["text"].as_str().unwrap();
        // A query runs alone (on tract through another output, pooled in Rust): both ways
        // must match the reference.
        let single = enc.encode(text).unwrap();
        for got in [batched, &single] {
            splade_row_matches(&enc, row, text, got);
        }
    }
}

fn splade_row_matches(enc: &SparseEncoder, row: &Value, text: &str, got: &SparseVector) {
    assert_eq!(enc.tokenizer().encode(text).unwrap().ids, ids(&row["input_ids"]), "input_ids of {text:?}");
    let weights = row["weights"].as_object().unwrap();
    let token_ids = row["token_ids"].as_object().unwrap();
    let mut want: Vec<(u32, f32)> = weights
        .iter()
        .map(|(tok, w)| (token_ids[tok].as_u64().unwrap() as u32, w.as_f64().unwrap() as f32))
        .filter(|&(_, w)| w >= 1e-3)
        .collect();
    want.sort_by_key(|p| p.0);
    let got: Vec<(u32, f32)> =
        got.ids.iter().copied().zip(got.weights.iter().copied()).filter(|&(_, w)| w >= 1e-3).collect();
    // Same term set, up to terms right at the 1e-3 edge.
    let want_ids: Vec<u32> = want.iter().map(|p| p.0).collect();
    let got_ids: Vec<u32> = got.iter().map(|p| p.0).collect();
    for (id, w) in &want {
        match got.iter().find(|p| p.0 == *id) {
            Some((_, g)) => assert!((g - w).abs() <= 1e-3, "{text:?}: term {id} weight {g} vs {w}"),
            None => assert!(*w < 2e-3, "{text:?}: term {id} (weight {w}) missing"),
        }
    }
    for (id, g) in &got {
        assert!(want_ids.contains(id) || *g < 2e-3, "{text:?}: extra term {id} weight {g}");
    }
    assert!(!got_ids.is_empty());
}

fn cross_encoder_matches(backend: Backend) {
    let dir = std::env::var_os("SEXTANT_MODEL_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(model_dir)
        .join("ce-standin");
    assert!(dir.is_dir(), "{} missing: fetch_models.sh builds it from {}", dir.display(), shared_dir().display());
    let enc = CrossEncoder::load_with(&dir, backend).unwrap();
    for row in golden("cross_encoder_standin.jsonl") {
        let (q, p) = (row["query"].as_str().unwrap(), row["passage"].as_str().unwrap());
        let e = enc.tokenizer().encode_pair(q, p).unwrap();
        assert_eq!(e.ids, ids(&row["input_ids"]));
        assert_eq!(e.type_ids, ids(&row["token_type_ids"]));
        let got = enc.score(q, &[p, "an unrelated passage to make a padded batch"]).unwrap()[0];
        let want = row["logit"].as_f64().unwrap() as f32;
        assert!((got - want).abs() <= 1e-3, "logit {got} vs {want}");
    }
}

#[test]
fn truncates_long_inputs_to_the_window() {
    let enc = DenseEncoder::load(&model_dir().join("minilm-l6-v2")).unwrap();
    let long = "revenue ".repeat(600);
    let e = enc.tokenizer().encode(&long).unwrap();
    assert_eq!(e.ids.len(), MAX_TOKENS);
    assert!(e.truncated);
    assert_eq!(enc.embed(&long).unwrap().len(), enc.dim());
}

/// The converter writes its graphs in the forms ONNX Runtime's graph optimizer fuses
/// (docs/models.md, "The graphs' form"): every LayerNorm's variance through `Pow`, every
/// GELU's `Erf` fed by a `Div`, Q, K and V as one MatMul a layer (one `Split` each), no
/// output copied by an `Identity` (ONNX Runtime would copy it on every run), and SPLADE's
/// vocabulary bias added after the max over tokens.
#[test]
fn the_graphs_are_written_in_the_forms_onnx_runtime_fuses() {
    for (name, layers) in [("minilm-l6-v2", 6), ("splade-tiny", 2), ("ce-standin", 6)] {
        let nodes = onnx_nodes(&model_dir().join(name).join("model.onnx"));
        let count = |op: &str| nodes.iter().filter(|n| n.op_type == op).count();
        let producer = |value: &str| nodes.iter().find(|n| n.output.iter().any(|o| o == value));
        assert_eq!(count("Identity"), 0, "{name}: an output copied by an Identity node");
        assert_eq!(count("Split"), layers, "{name}: Q, K and V not one MatMul a layer");
        assert_eq!(count("Pow"), count("ReduceMean") / 2, "{name}: a LayerNorm's variance not through Pow");
        assert!(count("Erf") >= layers);
        for erf in nodes.iter().filter(|n| n.op_type == "Erf") {
            let fed_by = producer(&erf.input[0]).map(|n| n.op_type.as_str());
            assert_eq!(fed_by, Some("Div"), "{name}: a GELU's Erf not fed by a Div");
        }
        if name == "splade-tiny" {
            // Its [batch, tokens, 30522] logits see one Add only (the padding mask before
            // the max): their vocabulary bias is added after it, on [batch, 30522].
            let readers: Vec<&str> = nodes
                .iter()
                .filter(|n| n.input.iter().any(|i| i == "mlm_scores"))
                .map(|n| n.op_type.as_str())
                .collect();
            assert_eq!(readers, ["Add"], "the logits are read by {readers:?}");
        }
    }
}
