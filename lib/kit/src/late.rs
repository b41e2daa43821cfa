//! Late interaction (ColBERT, Khattab & Zaharia, SIGIR 2020, <https://arxiv.org/abs/2004.12832>):
//! score a passage by comparing every query token with every passage token.
//!
//! MaxSim sums, over the query's tokens, each token's best cosine similarity with any
//! passage token:
//!
//! ```text
//! maxsim(Q, D) = Σ_{q ∈ Q}  max_{d ∈ D}  cos(q, d)
//! ```
//!
//! The [`LateInteractionRetriever`] uses it as a second stage: a first-stage retriever
//! proposes candidates, a [`TokenLevelEncoder`] encodes query and candidates per token, and
//! the candidates are re-ranked by their token-level score. The engine's dense model is a
//! token-level encoder through its per-token outputs ([`DenseEncoder`]).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use rayon::prelude::*;
use serde_json::Value;
use sextant_core::encode::DenseEncoder;
use sextant_core::error::{Error, Result};
use sextant_core::index::dot;

use super::item::{ContextItem, Query};
use super::rerankers::rank_by_scores;
use super::traits::{Retriever, TokenLevelEncoder};

/// The MaxSim score of per-token query and passage vectors: the sum over query tokens of
/// their best cosine with any passage token. No query tokens, or no passage tokens, score 0;
/// zero vectors have cosine 0 with everything. All vectors must share one dimension
/// ([`LateInteractionRetriever`] checks it).
///
/// ```
/// use sextant_kit::maxsim;
///
/// let query = vec![vec![1.0, 0.0], vec![0.0, 1.0]];
/// let passage = vec![vec![1.0, 0.0], vec![1.0, 1.0]];
/// // Token 1 matches exactly (1.0); token 2's best is cos 45° (0.707).
/// assert!((maxsim(&query, &passage) - (1.0 + std::f32::consts::FRAC_1_SQRT_2)).abs() < 1e-6);
/// assert_eq!(maxsim(&query, &[]), 0.0);
/// ```
pub fn maxsim(query_tokens: &[Vec<f32>], doc_tokens: &[Vec<f32>]) -> f32 {
    if doc_tokens.is_empty() {
        return 0.0;
    }
    let inv_norm = |v: &[f32]| {
        let n = dot(v, v).sqrt();
        if n > 0.0 {
            1.0 / n
        } else {
            0.0
        }
    };
    let doc_inv: Vec<f32> = doc_tokens.iter().map(|d| inv_norm(d)).collect();
    query_tokens
        .iter()
        .map(|q| {
            let qi = inv_norm(q);
            doc_tokens.iter().zip(&doc_inv).map(|(d, di)| dot(q, d) * qi * di).fold(f32::NEG_INFINITY, f32::max)
        })
        .sum()
}

/// Scores per-token query and passage vectors; higher is better.
///
/// ```
/// use sextant_kit::TokenScorer;
///
/// /// Counts passage tokens identical to a query token.
/// struct Exact;
/// impl TokenScorer for Exact {
///     fn score(&self, q: &[Vec<f32>], d: &[Vec<f32>]) -> f32 {
///         d.iter().filter(|t| q.contains(t)).count() as f32
///     }
/// }
/// assert_eq!(Exact.score(&[vec![1.0]], &[vec![1.0], vec![2.0], vec![1.0]]), 2.0);
/// ```
pub trait TokenScorer: Send + Sync {
    /// The score of a passage's token vectors against a query's.
    fn score(&self, query_tokens: &[Vec<f32>], doc_tokens: &[Vec<f32>]) -> f32;
}

/// The [`maxsim`] scorer.
///
/// ```
/// use sextant_kit::{MaxSimScorer, TokenScorer};
///
/// assert_eq!(MaxSimScorer.score(&[vec![2.0, 0.0]], &[vec![3.0, 0.0]]), 1.0);
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct MaxSimScorer;

impl TokenScorer for MaxSimScorer {
    fn score(&self, query_tokens: &[Vec<f32>], doc_tokens: &[Vec<f32>]) -> f32 {
        maxsim(query_tokens, doc_tokens)
    }
}

type TokenScoreFn = dyn Fn(&[Vec<f32>], &[Vec<f32>]) -> f32 + Send + Sync;

/// A configurable token-level scorer: a function of your own, or [`maxsim`] by default.
///
/// ```
/// use sextant_kit::{LateInteractionScorer, TokenScorer};
///
/// // Average instead of sum: length-independent scores.
/// let mean = LateInteractionScorer::new(|q: &[Vec<f32>], d: &[Vec<f32>]| {
///     if q.is_empty() { 0.0 } else { sextant_kit::maxsim(q, d) / q.len() as f32 }
/// });
/// let q = vec![vec![1.0, 0.0], vec![1.0, 0.0]];
/// assert_eq!(mean.score(&q, &[vec![1.0, 0.0]]), 1.0);
/// assert_eq!(LateInteractionScorer::default().score(&q, &[vec![1.0, 0.0]]), 2.0);
/// ```
#[derive(Clone)]
pub struct LateInteractionScorer {
    score_fn: Arc<TokenScoreFn>,
}

impl LateInteractionScorer {
    /// A scorer delegating to `score_fn(query_tokens, doc_tokens)`.
    pub fn new<F: Fn(&[Vec<f32>], &[Vec<f32>]) -> f32 + Send + Sync + 'static>(score_fn: F) -> Self {
        LateInteractionScorer { score_fn: Arc::new(score_fn) }
    }
}

impl Default for LateInteractionScorer {
    /// MaxSim.
    fn default() -> Self {
        LateInteractionScorer::new(maxsim)
    }
}

impl TokenScorer for LateInteractionScorer {
    fn score(&self, query_tokens: &[Vec<f32>], doc_tokens: &[Vec<f32>]) -> f32 {
        (self.score_fn)(query_tokens, doc_tokens)
    }
}

/// How many candidates the first stage proposes by default.
pub const DEFAULT_FIRST_STAGE_K: usize = 100;

/// How many passages' token vectors are kept by default. With MiniLM (384 floats per
/// token) a 256-token passage takes about 390 KB, so 2,000 passages stay under 800 MB.
pub const DEFAULT_TOKEN_CACHE: usize = 2_000;

/// Two-stage retrieval: candidates from a first stage, re-ranked by a token-level score.
///
/// The first stage is asked for `max(first_stage_k, top_k)` items (its filters apply
/// there). Passages are encoded in parallel and their token vectors cached by item id (up
/// to a capacity, after which the cache starts afresh), so repeated candidates cost one
/// encoding. Each returned item keeps its first-stage score in
/// `metadata["first_stage_score"]`; a failing encoder or first stage fails the retrieval.
///
/// ```
/// use sextant_kit::{Bm25Retriever, ContextItem, LateInteractionRetriever, Query, Retriever, TokenLevelEncoder};
///
/// /// One-hot letters a-z, one token per word's first letter.
/// struct Initials;
/// impl TokenLevelEncoder for Initials {
///     fn encode_tokens(&self, text: &str) -> sextant_core::Result<Vec<Vec<f32>>> {
///         Ok(text.split_whitespace().filter_map(|w| w.bytes().next()).map(|b| {
///             (b'a'..=b'z').map(|c| (c == b.to_ascii_lowercase()) as u8 as f32).collect()
///         }).collect())
///     }
/// }
///
/// let items = vec![ContextItem::new("1", "margin fell"), ContextItem::new("2", "margin rose sharply")];
/// let late = LateInteractionRetriever::new(Box::new(Bm25Retriever::index(items)), Initials).with_first_stage_k(10);
/// let hits = late.retrieve(&Query::new("margin rose"), 2).unwrap();
/// assert_eq!(hits[0].id, "2");
/// assert_eq!(hits[0].score, 2.0); // both query tokens found
/// ```
pub struct LateInteractionRetriever {
    first_stage: Box<dyn Retriever>,
    encoder: Arc<dyn TokenLevelEncoder>,
    scorer: Arc<dyn TokenScorer>,
    first_stage_k: usize,
    cache: Mutex<HashMap<String, Arc<Vec<Vec<f32>>>>>,
    cache_capacity: usize,
}

impl LateInteractionRetriever {
    /// Re-ranks `first_stage`'s candidates with MaxSim over `encoder`'s token vectors.
    pub fn new(first_stage: Box<dyn Retriever>, encoder: impl TokenLevelEncoder + 'static) -> Self {
        LateInteractionRetriever {
            first_stage,
            encoder: Arc::new(encoder),
            scorer: Arc::new(MaxSimScorer),
            first_stage_k: DEFAULT_FIRST_STAGE_K,
            cache: Mutex::new(HashMap::new()),
            cache_capacity: DEFAULT_TOKEN_CACHE,
        }
    }

    /// Scores with `scorer` instead of MaxSim.
    pub fn with_scorer(mut self, scorer: impl TokenScorer + 'static) -> Self {
        self.scorer = Arc::new(scorer);
        self
    }

    /// How many candidates to ask the first stage for (at least `top_k` is always asked).
    pub fn with_first_stage_k(mut self, k: usize) -> Self {
        self.first_stage_k = k;
        self
    }

    /// How many passages' token vectors to cache (0: none).
    pub fn with_cache_capacity(mut self, capacity: usize) -> Self {
        self.cache_capacity = capacity;
        self
    }

    /// The token vectors of `item`, from the cache or the encoder.
    fn doc_tokens(&self, item: &ContextItem) -> Result<Arc<Vec<Vec<f32>>>> {
        if let Some(hit) = self.cache.lock().unwrap_or_else(|e| e.into_inner()).get(&item.id) {
            return Ok(hit.clone());
        }
        let tokens = Arc::new(self.encoder.encode_tokens(&item.text)?);
        if self.cache_capacity > 0 {
            let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
            if cache.len() >= self.cache_capacity {
                cache.clear();
            }
            cache.insert(item.id.clone(), tokens.clone());
        }
        Ok(tokens)
    }
}

/// The dimension shared by every vector of `sets`; an error naming `what` otherwise.
fn common_dim<'a>(sets: impl IntoIterator<Item = &'a [Vec<f32>]>) -> Result<Option<usize>> {
    let mut dim = None;
    for v in sets.into_iter().flatten() {
        match dim {
            None => dim = Some(v.len()),
            Some(d) if d != v.len() => {
                return Err(Error::invalid(
                    "token vectors",
                    format!("dimensions {d} and {} in one comparison", v.len()),
                ));
            }
            Some(_) => {}
        }
    }
    Ok(dim)
}

impl Retriever for LateInteractionRetriever {
    fn retrieve(&self, query: &Query, top_k: usize) -> Result<Vec<ContextItem>> {
        if top_k == 0 {
            return Ok(Vec::new());
        }
        let candidates = self.first_stage.retrieve(query, self.first_stage_k.max(top_k))?;
        if candidates.is_empty() {
            return Ok(candidates);
        }
        let q = self.encoder.encode_tokens(&query.text)?;
        let docs: Vec<Arc<Vec<Vec<f32>>>> = candidates.par_iter().map(|c| self.doc_tokens(c)).collect::<Result<_>>()?;
        common_dim(std::iter::once(q.as_slice()).chain(docs.iter().map(|d| d.as_slice())))?;
        let scores: Vec<f32> = docs.iter().map(|d| self.scorer.score(&q, d)).collect();
        let candidates = candidates.into_iter().map(|c| {
            let first = c.score;
            c.with_metadata("first_stage_score", Value::from(first))
        });
        rank_by_scores(candidates.collect(), &scores, top_k, "late_interaction")
    }
}

/// The dense model's last-layer output per token, without the `[CLS]` and `[SEP]` markers
/// (MiniLM was not trained for late interaction: the markers match everything alike and
/// only add a constant).
impl TokenLevelEncoder for DenseEncoder {
    fn encode_tokens(&self, text: &str) -> Result<Vec<Vec<f32>>> {
        let mut rows = self.token_embeddings(text)?;
        if rows.len() >= 2 {
            rows.pop();
            rows.remove(0);
        }
        Ok(rows)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    /// One-hot vectors over a tiny vocabulary; unknown words are zero vectors.
    struct Words(Arc<AtomicUsize>);
    const VOCAB: [&str; 5] = ["cat", "dog", "sat", "ran", "mat"];
    impl TokenLevelEncoder for Words {
        fn encode_tokens(&self, text: &str) -> Result<Vec<Vec<f32>>> {
            self.0.fetch_add(1, Ordering::SeqCst);
            if text.contains("boom") {
                return Err(Error::Inference("encoder crashed".into()));
            }
            Ok(text.split_whitespace().map(|w| VOCAB.iter().map(|v| (*v == w) as u8 as f32).collect()).collect())
        }
    }

    struct Fixed(Vec<ContextItem>);
    impl Retriever for Fixed {
        fn retrieve(&self, _q: &Query, top_k: usize) -> Result<Vec<ContextItem>> {
            Ok(self.0.iter().take(top_k).cloned().collect())
        }
    }

    fn corpus() -> Vec<ContextItem> {
        vec![
            ContextItem::new("a", "dog ran").with_score(0.9),
            ContextItem::new("b", "cat sat mat").with_score(0.8),
            ContextItem::new("c", "cat ran").with_score(0.7),
        ]
    }

    #[test]
    fn maxsim_edge_cases() {
        assert_eq!(maxsim(&[], &[vec![1.0]]), 0.0);
        assert_eq!(maxsim(&[vec![1.0]], &[]), 0.0);
        assert_eq!(maxsim(&[vec![0.0, 0.0]], &[vec![1.0, 0.0]]), 0.0, "zero vector");
        // Scale-free: cosine, not dot.
        assert_eq!(maxsim(&[vec![5.0, 0.0]], &[vec![0.1, 0.0]]), 1.0);
        // Each query token takes its own best; a passage token may serve several.
        assert_eq!(maxsim(&[vec![1.0, 0.0], vec![1.0, 0.0]], &[vec![1.0, 0.0], vec![0.0, 1.0]]), 2.0);
        assert_eq!(maxsim(&[vec![1.0, 0.0]], &[vec![-1.0, 0.0]]), -1.0, "opposite tokens count against");
    }

    #[test]
    fn rescoring_reorders_candidates_and_keeps_first_stage_scores() {
        let calls = Arc::new(AtomicUsize::new(0));
        let late = LateInteractionRetriever::new(Box::new(Fixed(corpus())), Words(calls.clone()));
        let hits = late.retrieve(&Query::new("cat sat"), 2).unwrap();
        assert_eq!(hits.iter().map(|h| h.id.as_str()).collect::<Vec<_>>(), ["b", "c"]);
        assert_eq!(hits[0].score, 2.0);
        assert_eq!(hits[0].metadata["first_stage_score"], serde_json::json!(0.8f32));
        assert_eq!(hits[0].metadata["retrieval_method"], "late_interaction");
    }

    #[test]
    fn passages_are_encoded_once_and_the_cache_is_bounded() {
        let calls = Arc::new(AtomicUsize::new(0));
        let late = LateInteractionRetriever::new(Box::new(Fixed(corpus())), Words(calls.clone()));
        late.retrieve(&Query::new("cat"), 3).unwrap();
        late.retrieve(&Query::new("dog"), 3).unwrap();
        assert_eq!(calls.load(Ordering::SeqCst), 2 + 3, "two queries, three passages once");
        let calls = Arc::new(AtomicUsize::new(0));
        let uncached =
            LateInteractionRetriever::new(Box::new(Fixed(corpus())), Words(calls.clone())).with_cache_capacity(0);
        uncached.retrieve(&Query::new("cat"), 3).unwrap();
        uncached.retrieve(&Query::new("dog"), 3).unwrap();
        assert_eq!(calls.load(Ordering::SeqCst), 2 + 6);
        assert!(uncached.cache.lock().unwrap().is_empty());
    }

    #[test]
    fn first_stage_depth_ties_and_empty_results() {
        let calls = Arc::new(AtomicUsize::new(0));
        // Depth 1: only "a" is a candidate, whatever the token scores say.
        let shallow =
            LateInteractionRetriever::new(Box::new(Fixed(corpus())), Words(calls.clone())).with_first_stage_k(1);
        assert_eq!(shallow.retrieve(&Query::new("cat sat"), 1).unwrap()[0].id, "a");
        // "zebra" matches nothing: all score 0 and the first-stage order stays.
        let late = LateInteractionRetriever::new(Box::new(Fixed(corpus())), Words(calls.clone()));
        let ids: Vec<String> = late.retrieve(&Query::new("zebra"), 3).unwrap().into_iter().map(|h| h.id).collect();
        assert_eq!(ids, ["a", "b", "c"]);
        assert!(late.retrieve(&Query::new("cat"), 0).unwrap().is_empty());
        let none = LateInteractionRetriever::new(Box::new(Fixed(Vec::new())), Words(calls));
        assert!(none.retrieve(&Query::new("cat"), 3).unwrap().is_empty());
    }

    #[test]
    fn encoder_failures_and_mixed_dimensions_are_errors() {
        let calls = Arc::new(AtomicUsize::new(0));
        let late = LateInteractionRetriever::new(Box::new(Fixed(corpus())), Words(calls.clone()));
        assert!(late.retrieve(&Query::new("boom"), 2).is_err());
        let mut bad = corpus();
        bad[1].text = "boom".into();
        let late = LateInteractionRetriever::new(Box::new(Fixed(bad)), Words(calls));
        assert!(late.retrieve(&Query::new("cat"), 2).is_err());
        struct Ragged;
        impl TokenLevelEncoder for Ragged {
            fn encode_tokens(&self, text: &str) -> Result<Vec<Vec<f32>>> {
                Ok(vec![vec![1.0; text.len()]])
            }
        }
        let late = LateInteractionRetriever::new(Box::new(Fixed(corpus())), Ragged);
        let err = late.retrieve(&Query::new("q"), 2).unwrap_err();
        assert!(err.to_string().contains("dimensions"), "{err}");
    }

    #[test]
    fn a_custom_scorer_replaces_maxsim() {
        let calls = Arc::new(AtomicUsize::new(0));
        // Fewest tokens first.
        let late = LateInteractionRetriever::new(Box::new(Fixed(corpus())), Words(calls))
            .with_scorer(LateInteractionScorer::new(|_q: &[Vec<f32>], d: &[Vec<f32>]| -(d.len() as f32)));
        assert_eq!(late.retrieve(&Query::new("cat"), 1).unwrap()[0].id, "a");
    }

    #[test]
    fn the_dense_model_gives_one_vector_per_word_piece_without_markers() {
        let enc = DenseEncoder::load(&sextant_core::testutil::model_dir().join("minilm-l6-v2")).unwrap();
        let toks = enc.encode_tokens("revenue increased").unwrap();
        let pieces = enc.tokenizer().encode("revenue increased").unwrap();
        assert_eq!(toks.len() + 2, pieces.ids.len(), "[CLS] and [SEP] dropped");
        assert!(toks.iter().all(|t| t.len() == 384));
        // A passage sharing the query's words outscores one that does not.
        let q = enc.encode_tokens("revenue increased").unwrap();
        let near = maxsim(&q, &enc.encode_tokens("Total revenue increased by 8 percent.").unwrap());
        let far = maxsim(&q, &enc.encode_tokens("The board appointed a new auditor.").unwrap());
        assert!(near > far, "{near} vs {far}");
    }
}
