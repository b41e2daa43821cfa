//! SPLADE learned-sparse term weights.

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::runtime::{load_model_dir, rows_f32, run_sorted, OnnxBert};
use super::tokenize::{Encoded, TextTokenizer};
use crate::error::Result;

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
pub struct SparseEncoder {
    tokenizer: TextTokenizer,
    model: OnnxBert,
}

impl SparseEncoder {
    /// Loads `model.onnx` and `tokenizer.json` from a converted model directory.
    pub fn load(dir: &Path) -> Result<Self> {
        let (tokenizer, model) = load_model_dir(dir)?;
        Ok(SparseEncoder { tokenizer, model })
    }

    /// The tokenizer (to show terms of a vector).
    pub fn tokenizer(&self) -> &TextTokenizer {
        &self.tokenizer
    }

    /// Encodes one query.
    pub fn encode(&self, text: &str) -> Result<SparseVector> {
        Ok(self.encode_encoded(&[self.tokenizer.encode(text)?])?.pop().unwrap_or_default())
    }

    /// Encodes many texts in parallel batches; output order matches input order.
    pub fn encode_batch(&self, texts: &[&str]) -> Result<Vec<SparseVector>> {
        let encoded = self.tokenizer.encode_batch(texts)?;
        run_sorted(&encoded, DOC_BATCH, |b| self.encode_encoded(b))
    }

    fn encode_encoded(&self, batch: &[Encoded]) -> Result<Vec<SparseVector>> {
        let out = self.model.run(batch)?;
        let (flat, cols) = rows_f32(&out, 0)?;
        Ok(flat
            .chunks(cols)
            .map(|row| {
                let mut v = SparseVector::default();
                for (id, &w) in row.iter().enumerate() {
                    if w > MIN_WEIGHT {
                        v.ids.push(id as u32);
                        v.weights.push(w);
                    }
                }
                v
            })
            .collect())
    }
}
