//! Cross-encoder relevance scores for (query, passage) pairs.

use std::path::Path;

use super::runtime::{load_model_dir, rows_f32, run_sorted, OnnxBert};
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
        let (tokenizer, model) = load_model_dir(dir)?;
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
        run_sorted(&pairs, PAIR_BATCH, |batch| {
            let out = self.model.run(batch)?;
            let (flat, cols) = rows_f32(&out, 0)?;
            Ok(flat.chunks(cols).map(|r| r[0]).collect())
        })
    }
}
