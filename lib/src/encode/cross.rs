//! Cross-encoder relevance scores for (query, passage) pairs.

use std::path::Path;

use super::runtime::{load_model_dir, rows_f32, OnnxBert};
use super::tokenize::TextTokenizer;
use crate::error::Result;

/// Pairs per inference call.
const PAIR_BATCH: usize = 16;

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

    /// One logit per passage, in input order (higher is more relevant).
    pub fn score(&self, query: &str, passages: &[&str]) -> Result<Vec<f32>> {
        let mut scores = Vec::with_capacity(passages.len());
        for chunk in passages.chunks(PAIR_BATCH) {
            let batch = chunk.iter().map(|p| self.tokenizer.encode_pair(query, p)).collect::<Result<Vec<_>>>()?;
            let out = self.model.run(&batch)?;
            let (flat, cols) = rows_f32(&out, 0)?;
            scores.extend(flat.chunks(cols).map(|r| r[0]));
        }
        Ok(scores)
    }
}
