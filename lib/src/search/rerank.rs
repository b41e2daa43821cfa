//! Rerankers: score (query, passage) pairs after fusion.

use crate::encode::CrossEncoder;
use crate::error::Result;

/// Scores passages against a query; higher is more relevant.
pub trait Reranker: Send + Sync {
    /// A short name for diagnostics.
    fn name(&self) -> &str;
    /// One score per passage, in input order.
    fn score(&self, query: &str, passages: &[&str]) -> Result<Vec<f32>>;
}

/// A cross-encoder model as a reranker.
pub struct CrossEncoderReranker {
    model: CrossEncoder,
    name: String,
}

impl CrossEncoderReranker {
    /// Wraps a loaded cross-encoder.
    pub fn new(model: CrossEncoder, name: impl Into<String>) -> Self {
        CrossEncoderReranker { model, name: name.into() }
    }
}

impl Reranker for CrossEncoderReranker {
    fn name(&self) -> &str {
        &self.name
    }
    /// The logistic of the model's relevance logit: a score in (0, 1), in the same order as
    /// the logits, comparable to a threshold such as `RerankMinScore`.
    fn score(&self, query: &str, passages: &[&str]) -> Result<Vec<f32>> {
        Ok(self.model.score(query, passages)?.into_iter().map(|x| 1.0 / (1.0 + (-x).exp())).collect())
    }
}
