//! SPLADE learned-sparse term weights.

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::backend::{backend, Backend};
use super::runtime::{output, OnnxBert};
use super::tokenize::{Encoded, TextTokenizer};
use crate::error::{Error, Result};

/// Weights below this are dropped (they change no ranking and bloat the index).
const MIN_WEIGHT: f32 = 1e-3;
/// Inputs per inference call when encoding documents.
const DOC_BATCH: usize = 8;

/// A sparse vector over the vocabulary: ids ascending, weights positive.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SparseVector {
    /// Vocabulary ids, ascending.
    pub ids: Vec<u32>,
    /// Weight of each id.
    pub weights: Vec<f32>,
}

impl SparseVector {
    /// Dot product with another sparse vector (both sorted by id).
    pub fn dot(&self, other: &SparseVector) -> f32 {
        let (mut i, mut j, mut s) = (0, 0, 0.0);
        while i < self.ids.len() && j < other.ids.len() {
            match self.ids[i].cmp(&other.ids[j]) {
                std::cmp::Ordering::Less => i += 1,
                std::cmp::Ordering::Greater => j += 1,
                std::cmp::Ordering::Equal => {
                    s += self.weights[i] * other.weights[j];
                    i += 1;
                    j += 1;
                }
            }
        }
        s
    }
}

/// A SPLADE encoder (BertForMaskedLM + max-pooled log-saturated ReLU).
///
/// On tract, two plans of the same graph: documents run in batches through the graph's
/// own pooled output (`sparse_weights`); a query runs alone through the raw logits
/// (`mlm_scores`, before their vocabulary bias `mlm_bias`) and is pooled here, because
/// tract's generic reduction over the sequence axis of a `[1, seq, 30522]` tensor costs
/// more than the whole model for a short input. ONNX Runtime reduces fast, so there one
/// session serves both through `sparse_weights`.
pub struct SparseEncoder {
    tokenizer: TextTokenizer,
    model: OnnxBert,
    /// tract only: the `mlm_scores` and `mlm_bias` plan for single queries.
    query_model: Option<OnnxBert>,
}

impl SparseEncoder {
    /// Loads `model.onnx` and `tokenizer.json` from a converted model directory, on the
    /// process's backend.
    pub fn load(dir: &Path) -> Result<Self> {
        Self::load_with(dir, backend())
    }

    /// Loads on a given backend.
    pub fn load_with(dir: &Path, backend: Backend) -> Result<Self> {
        let tokenizer = TextTokenizer::of_model(dir)?;
        let path = dir.join("model.onnx");
        let model = OnnxBert::load_with(&path, Some(&["sparse_weights"]), backend)?;
        let query_model = match backend {
            Backend::OnnxRuntime => None,
            Backend::Tract => {
                Some(OnnxBert::load_with(&path, Some(&["mlm_scores", "mlm_bias"]), backend).map_err(|e| match e {
                    Error::Model { path, reason } => Error::Model {
                        path,
                        reason: format!("{reason} (a graph of an older conversion: re-run scripts/ci/fetch_models.sh)"),
                    },
                    other => other,
                })?)
            }
        };
        Ok(SparseEncoder { tokenizer, model, query_model })
    }

    /// The backend running the model.
    pub fn backend(&self) -> Backend {
        self.model.backend()
    }

    /// The tokenizer (to show terms of a vector).
    pub fn tokenizer(&self) -> &TextTokenizer {
        &self.tokenizer
    }

    /// Encodes one query: `w_v = ln(1 + relu(max_t s_{t,v} + b_v))`, with `s_{t,v}` token
    /// `t`'s logit for term `v` before the term's bias `b_v` (the same value as the
    /// graph's `sparse_weights`: adding `b_v` commutes with the max).
    pub fn encode(&self, text: &str) -> Result<SparseVector> {
        let encoded = self.tokenizer.encode(text)?;
        let Some(query_model) = &self.query_model else {
            return Ok(self.encode_encoded(&[encoded])?.pop().unwrap_or_default());
        };
        let out = query_model.run(&[encoded])?;
        let (scores, bias) = (output(&out, 0)?, output(&out, 1)?);
        if bias.data.len() != scores.cols {
            return Err(Error::Inference(format!(
                "mlm_bias holds {} terms, mlm_scores {}: a damaged graph; re-run scripts/ci/fetch_models.sh",
                bias.data.len(),
                scores.cols
            )));
        }
        let mut best = vec![f32::NEG_INFINITY; scores.cols];
        for token in scores.rows() {
            for (b, &x) in best.iter_mut().zip(token) {
                *b = b.max(x);
            }
        }
        Ok(sparsify(best.iter().zip(&bias.data).map(|(&x, &b)| (x + b).max(0.0).ln_1p())))
    }

    /// Encodes many texts in parallel batches; output order matches input order.
    pub fn encode_batch(&self, texts: &[&str]) -> Result<Vec<SparseVector>> {
        let encoded = self.tokenizer.encode_batch(texts)?;
        self.model.run_sorted(&encoded, DOC_BATCH, |b| self.encode_encoded(b))
    }

    fn encode_encoded(&self, batch: &[Encoded]) -> Result<Vec<SparseVector>> {
        let out = self.model.run(batch)?;
        Ok(output(&out, 0)?.rows().map(|row| sparsify(row.iter().copied())).collect())
    }
}

/// Keeps the weights above [`MIN_WEIGHT`] of a dense row over the vocabulary.
fn sparsify(row: impl Iterator<Item = f32>) -> SparseVector {
    let mut v = SparseVector::default();
    for (id, w) in row.enumerate() {
        if w > MIN_WEIGHT {
            v.ids.push(id as u32);
            v.weights.push(w);
        }
    }
    v
}
