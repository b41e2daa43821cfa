//! Cross-encoder relevance scores for (query, passage) pairs.

use std::path::Path;

use super::backend::{backend, Backend};
use super::runtime::{load_model_dir, output, OnnxBert};
use super::tokenize::TextTokenizer;
use crate::error::Result;

/// Pairs per inference call.
const PAIR_BATCH: usize = 8;

/// A BertForSequenceClassification model with one output logit.
pub struct CrossEncoder {
    tokenizer: TextTokenizer,
    model: OnnxBert,
}

impl CrossEncoder {
    /// Loads `model.onnx` and `tokenizer.json` from a model directory.
    pub fn load(dir: &Path) -> Result<Self> {
        Self::load_with(dir, backend())
    }

    /// Loads on a given backend.
    pub fn load_with(dir: &Path, backend: Backend) -> Result<Self> {
        let (tokenizer, model) = load_model_dir(dir, backend)?;
        Ok(CrossEncoder { tokenizer, model })
    }

    /// The tokenizer used for pairs.
    pub fn tokenizer(&self) -> &TextTokenizer {
        &self.tokenizer
    }

    /// One logit per passage, in input order (higher is more relevant). Pairs are
    /// batched by similar length and the batches run in parallel.
    pub fn score(&self, query: &str, passages: &[&str]) -> Result<Vec<f32>> {
        let pairs = passages.iter().map(|p| self.tokenizer.encode_pair(query, p)).collect::<Result<Vec<_>>>()?;
        self.model.run_sorted(&pairs, PAIR_BATCH, |batch| {
            let out = self.model.run(batch)?;
            Ok(output(&out, 0)?.rows().map(|r| r[0]).collect())
        })
    }
}
