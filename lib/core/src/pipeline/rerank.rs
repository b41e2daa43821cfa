//! The rerank stage's interface: a [`Reranker`] re-scores the fused head of a search, by
//! chunk ordinal, and [`CrossEncoderReranker`] is the one the models provide.
//!
//! The engine hands a reranker the `rerank_depth` best fused candidates and takes back
//! `(chunk, score)` pairs, best first. An answer that names a chunk it was not given, or one
//! chunk twice, is a failed rerank (the fused order stays), never a reordering.

use crate::encode::CrossEncoder;
use crate::error::{Error, Result};

/// One candidate handed to a reranker: a chunk of the index, its text and its fused score.
#[derive(Debug, Clone, Copy)]
pub struct Candidate<'a> {
    /// The chunk's ordinal in the index.
    pub chunk: u32,
    /// The chunk's text.
    pub text: &'a str,
    /// Its score after fusion.
    pub fused_score: f32,
}

/// A reranker's verdict on one candidate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Reranked {
    /// The candidate's chunk ordinal.
    pub chunk: u32,
    /// The reranker's score: a relevance in [0, 1], higher is more relevant (a hit's
    /// `score` is held to that range).
    pub score: f32,
}

/// Re-scores the fused head of a search.
pub trait Reranker: Send + Sync {
    /// Scores `candidates` against `query` and returns them best first. Candidates left out
    /// keep their fused order below the reranked ones.
    fn rerank(&self, query: &str, candidates: &[Candidate<'_>]) -> Result<Vec<Reranked>>;
}

/// A cross-encoder as a reranker: each `(query, passage)` pair is read jointly and its
/// logit `x` turned into a relevance in (0, 1) by the logistic function
/// `σ(x) = 1 / (1 + e^(-x))`. Sorted best first; ties keep the fused order.
///
/// ```
/// use sextant_core::encode::{default_model_dir, CrossEncoder};
/// use sextant_core::pipeline::{Candidate, CrossEncoderReranker, Reranker};
///
/// // The test models hold an untrained stand-in head (see docs/models.md); pass a
/// // converted ms-marco cross-encoder's directory for real relevance.
/// let rr = CrossEncoderReranker::new(CrossEncoder::load(&default_model_dir().join("ce-standin"))?, "ce-standin");
/// let candidates = [
///     Candidate { chunk: 7, text: "It rained in Cupertino all week.", fused_score: 0.5 },
///     Candidate { chunk: 9, text: "Apple repurchased $90 billion of its common stock.", fused_score: 0.4 },
/// ];
/// let out = rr.rerank("How much stock did Apple buy back?", &candidates)?;
/// assert_eq!(out.len(), 2);
/// assert!(out[0].score >= out[1].score && out.iter().all(|r| r.score > 0.0 && r.score < 1.0));
/// # Ok::<(), sextant_core::Error>(())
/// ```
pub struct CrossEncoderReranker {
    model: CrossEncoder,
    name: String,
}

impl CrossEncoderReranker {
    /// Wraps a loaded cross-encoder; `name` is reported in diagnostics.
    pub fn new(model: CrossEncoder, name: impl Into<String>) -> Self {
        CrossEncoderReranker { model, name: name.into() }
    }

    /// The model's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// One relevance score in (0, 1) per passage, in input order: `σ(logit)`.
    pub fn score(&self, query: &str, passages: &[&str]) -> Result<Vec<f32>> {
        Ok(self.model.score(query, passages)?.into_iter().map(|x| 1.0 / (1.0 + (-x).exp())).collect())
    }
}

impl Reranker for CrossEncoderReranker {
    fn rerank(&self, query: &str, candidates: &[Candidate<'_>]) -> Result<Vec<Reranked>> {
        let passages: Vec<&str> = candidates.iter().map(|c| c.text).collect();
        let scores = self.score(query, &passages)?;
        if let Some(bad) = scores.iter().find(|s| s.is_nan()) {
            return Err(Error::Component {
                component: self.name.clone(),
                reason: format!("score {bad} is not a number"),
            });
        }
        let mut out: Vec<Reranked> =
            candidates.iter().zip(scores).map(|(c, score)| Reranked { chunk: c.chunk, score }).collect();
        // Stable: ties keep the fused order.
        out.sort_by(|a, b| b.score.total_cmp(&a.score));
        Ok(out)
    }
}
