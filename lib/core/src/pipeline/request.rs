//! A search as the engine takes it ([`SearchRequest`]) and what it gives back
//! ([`SearchOutcome`]: hits with their diagnostics, the reranker's status, timings).

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::cancel::CancelFlag;
use super::paths::{Path, PreparedQuery};
use super::settings::{FusionConfig, DEFAULT_PER_PATH_K};
use crate::corpus::Date;
use crate::index::{Bitset, Filter};

/// Boost of recent documents: `score · (1 + weight · 0.5^(age_days / half_life_days)) / (1 + weight)`
/// (over the largest boost, so that a relevance stays within [0, 1]; an undated document
/// gets no boost).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Recency {
    /// Age at which the boost halves.
    pub half_life_days: f32,
    /// Boost of a document published "now".
    pub weight: f32,
    /// "Now"; default: the newest publication date in the index.
    pub now: Option<Date>,
}

/// A search.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchRequest {
    /// The query text (non-empty).
    pub query: String,
    /// Metadata conditions applied before ranking.
    pub filter: Filter,
    /// Hits to return.
    pub top_k: usize,
    /// Candidates each path contributes to fusion.
    pub per_path_k: usize,
    /// Candidates of particular paths, instead of `per_path_k` (the knowledge-base API's
    /// `DenseSimilarityTopK` and `SparseSimilarityTopK`).
    pub path_k: BTreeMap<Path, usize>,
    /// Paths to run.
    pub paths: Vec<Path>,
    /// Fusion settings.
    pub fusion: FusionConfig,
    /// Rerank the fused top `rerank_depth` when a reranker is configured.
    pub rerank: bool,
    /// How many fused candidates the reranker sees.
    pub rerank_depth: usize,
    /// Recency boost, if any.
    pub recency: Option<Recency>,
    /// At most this many chunks of one document in the results.
    pub max_per_document: Option<usize>,
    /// Dense candidates under this cosine similarity are dropped before fusion.
    pub min_dense_similarity: Option<f32>,
    /// Only documents whose ordinal is in this set (on top of `filter`): for conditions the
    /// [`Filter`] struct cannot express, evaluated once per document by the caller.
    pub documents: Option<Arc<Bitset>>,
    /// Set when the caller has gone away: the search stops at its next stage boundary
    /// with [`Error::Cancelled`](crate::Error::Cancelled).
    pub cancel: Option<CancelFlag>,
    /// Whether the lexical paths (BM25, SPLADE) read the query without the instructions
    /// around its question ([`lexical_query`](super::lexical_query)); the dense path always
    /// reads it whole. Default: true.
    pub strip_instructions: bool,
    /// The query already encoded ([`Engine::prepare`](super::Engine::prepare)) for several searches of one request:
    /// the search encodes nothing, and `query` only names it. Its `text` is what BM25 reads.
    pub prepared: Option<Arc<PreparedQuery>>,
    /// Whether the results' whole segments are read too (`/v1/retrieve`'s
    /// `include_segments`): a sharded index's fetch phase brings them with the text
    /// ([`crate::shards::ShardedOutcome::fetched`]). Default: false.
    pub fetch_segments: bool,
}

impl SearchRequest {
    /// A hybrid search over every path with the default settings.
    pub fn new(query: impl Into<String>, top_k: usize) -> Self {
        SearchRequest {
            query: query.into(),
            filter: Filter::default(),
            top_k,
            per_path_k: DEFAULT_PER_PATH_K,
            path_k: BTreeMap::new(),
            paths: Path::ALL.to_vec(),
            fusion: FusionConfig::default(),
            rerank: true,
            rerank_depth: 50,
            recency: None,
            max_per_document: None,
            min_dense_similarity: None,
            documents: None,
            cancel: None,
            strip_instructions: true,
            prepared: None,
            fetch_segments: false,
        }
    }
}

/// A hit's rank and score in one path.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PathRank {
    /// 1-based rank in the path's list.
    pub rank: usize,
    /// The path's own score (cosine, BM25, SPLADE dot product).
    pub score: f32,
}

/// Why a hit is where it is.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Diagnostics {
    /// Rank and score in each path that found it.
    pub paths: BTreeMap<Path, PathRank>,
    /// 1-based rank after fusion.
    pub rrf_rank: usize,
    /// Fused score.
    pub rrf_score: f32,
    /// 1-based rank after reranking, when reranked.
    pub rerank_rank: Option<usize>,
    /// Reranker score, when reranked.
    pub rerank_score: Option<f32>,
}

/// One result.
#[derive(Debug, Clone, PartialEq)]
pub struct Hit {
    /// Chunk ordinal in the index.
    pub chunk: u32,
    /// Relevance in [0, 1], never rising down the list: the reranker's score when reranked
    /// (a candidate it did not see: its fused relevance, scaled under the lowest reranked
    /// one), else the fused score's ([`FusionConfig::relevance`](super::FusionConfig::relevance)),
    /// after recency. The fused score itself is in the diagnostics (`rrf_score`).
    pub score: f32,
    /// Per-stage ranks and scores.
    pub diagnostics: Diagnostics,
}

/// What happened to reranking.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case", tag = "status", content = "reason")]
pub enum RerankStatus {
    /// The request did not ask for it.
    NotRequested,
    /// No reranker is configured: fused order.
    Unavailable,
    /// Applied.
    Applied,
    /// The reranker failed: fused order.
    Failed(String),
}

impl RerankStatus {
    /// The status as the API writes it (`meta.rerank.status`, the serde tag above).
    pub fn name(&self) -> &'static str {
        match self {
            RerankStatus::NotRequested => "not_requested",
            RerankStatus::Unavailable => "unavailable",
            RerankStatus::Applied => "applied",
            RerankStatus::Failed(_) => "failed",
        }
    }
}

/// Time spent in each stage, in milliseconds.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StageTimings {
    /// Query encoding (dense and SPLADE run in parallel: the slower of the two).
    pub encode_ms: f64,
    /// Each path's retrieval.
    pub paths_ms: BTreeMap<Path, f64>,
    /// Fusion (with dense feedback's rescoring and second fusion, when it ran).
    pub fuse_ms: f64,
    /// Reranking.
    pub rerank_ms: f64,
    /// Whole search.
    pub total_ms: f64,
}

/// The outcome of a search.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchOutcome {
    /// Hits, best first.
    pub hits: Vec<Hit>,
    /// Paths that failed and why (skipped in fusion).
    pub failed_paths: Vec<(Path, String)>,
    /// Reranking status.
    pub rerank: RerankStatus,
    /// Chunks that passed the filter.
    pub candidates: usize,
    /// Whether the query was cut to the model window.
    pub query_truncated: bool,
    /// Paths that served (in the request's order).
    pub paths_served: Vec<Path>,
    /// Paths the request asked for that are not ready yet (their index is building): the
    /// results are degraded until they are in.
    pub paths_pending: Vec<Path>,
    /// Stage timings.
    pub timings: StageTimings,
}
