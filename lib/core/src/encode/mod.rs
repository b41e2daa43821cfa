//! Text encoders: a tokenizer plus an ONNX model run by ONNX Runtime or tract.
//!
//! Three encoders share one runtime ([`OnnxBert`]), on the process's [`Backend`]:
//! - [`DenseEncoder`]: sentence embeddings (mean pooling over the real attention mask, L2).
//! - [`SparseEncoder`]: SPLADE term weights, `max_t log(1 + relu(logits))`.
//! - [`CrossEncoder`]: a relevance logit for a (query, passage) pair.
//!
//! The pooling and the SPLADE activation are part of the ONNX graphs written by
//! `scripts/ci/convert_bert_onnx.py`, so the Rust side only tokenizes, pads and batches.

mod backend;
mod cross_encoder;
mod embedder;
mod models;
mod runtime;
mod splade;
mod tokenize;

pub use backend::{
    backend, choose_backend, encoders_take_turns, join_encoders, onnxruntime_available, ort_library_candidates,
    Backend, BackendChoice, ORT_LIBRARY,
};
pub use cross_encoder::CrossEncoder;
pub use embedder::DenseEncoder;
pub use models::{default_model_dir, ModelInfo, ModelSet, DEFAULT_DENSE_MODEL};
pub use runtime::{Matrix, OnnxBert};
pub use splade::{SparseEncoder, SparseVector};
pub use tokenize::{Encoded, TextTokenizer, MAX_TOKENS};

#[cfg(test)]
mod golden_tests;
