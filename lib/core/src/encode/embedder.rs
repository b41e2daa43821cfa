//! Dense sentence embeddings.

use std::path::Path;

use super::backend::{backend, Backend};
use super::runtime::{load_model_dir, output, OnnxBert};
use super::tokenize::{Encoded, TextTokenizer};
use crate::error::Result;

/// Inputs per inference call when encoding documents.
const DOC_BATCH: usize = 16;

/// A sentence-transformers encoder (e.g. all-MiniLM-L6-v2): L2-normalised embeddings.
pub struct DenseEncoder {
    tokenizer: TextTokenizer,
    model: OnnxBert,
    dim: usize,
}

impl DenseEncoder {
    /// Loads `model.onnx` and `tokenizer.json` from a converted model directory, on the
    /// process's backend.
    pub fn load(dir: &Path) -> Result<Self> {
        Self::load_with(dir, backend())
    }

    /// Loads on a given backend.
    pub fn load_with(dir: &Path, backend: Backend) -> Result<Self> {
        let (tokenizer, model) = load_model_dir(dir, backend)?;
        let probe = model.run(&[tokenizer.encode("probe")?])?;
        let dim = output(&probe, 0)?.cols;
        Ok(DenseEncoder { tokenizer, model, dim })
    }

    /// The backend running the model.
    pub fn backend(&self) -> Backend {
        self.model.backend()
    }

    /// The embedding dimension.
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// The tokenizer (for token counts and late interaction).
    pub fn tokenizer(&self) -> &TextTokenizer {
        &self.tokenizer
    }

    /// Embeds one query.
    pub fn embed(&self, text: &str) -> Result<Vec<f32>> {
        Ok(self.embed_query(text)?.0)
    }

    /// Embeds one query and tells whether it was cut to the model window.
    pub fn embed_query(&self, text: &str) -> Result<(Vec<f32>, bool)> {
        let encoded = self.tokenizer.encode(text)?;
        let truncated = encoded.truncated;
        Ok((self.embed_encoded(&[encoded])?.pop().unwrap_or_default(), truncated))
    }

    /// Embeds many texts: sorted by length into batches (little padding), batches run in
    /// parallel on the rayon pool. Output order matches input order.
    pub fn embed_batch(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
        let encoded = self.tokenizer.encode_batch(texts)?;
        self.model.run_sorted(&encoded, DOC_BATCH, |b| self.embed_encoded(b))
    }

    /// Per-token output vectors of the last layer (no pooling), for late interaction.
    pub fn token_embeddings(&self, text: &str) -> Result<Vec<Vec<f32>>> {
        let out = self.model.run(&[self.tokenizer.encode(text)?])?;
        Ok(output(&out, 1)?.rows().map(|c| c.to_vec()).collect())
    }

    fn embed_encoded(&self, batch: &[Encoded]) -> Result<Vec<Vec<f32>>> {
        let out = self.model.run(batch)?;
        Ok(output(&out, 0)?.rows().map(|c| c.to_vec()).collect())
    }
}
