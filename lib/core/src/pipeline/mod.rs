//! The ranking pipeline: plan, retrieve on every path with filters pre-applied, fuse (the
//! z-scores of the paths' scores, or RRF of their ranks), rerank, boost recent documents,
//! diversify.

mod adaptive;
mod cancel;
mod chunks;
mod engine;
pub mod evidence;
mod feedback;
mod fusion;
mod instructions;
mod paths;
mod request;
mod rerank;
mod settings;
mod shared_models;
mod top;

pub use adaptive::{adaptive_weights, agreement, confidence, identifier_share, word_count};
pub use cancel::{CancelFlag, CancelOnDrop};
pub use chunks::{ChunkSegment, ChunkSource, IndexView};
pub use engine::{open_engine, Engine, LoadedModels, Retrieved};
pub use feedback::{feedback_query, feedback_weight};
pub use fusion::{
    check_rrf_params, groups_in_order, recall_tail, rrf_fuse, rrf_fuse_grouped, zscore_fuse_grouped, Fused,
    DEFAULT_RRF_K,
};
pub use instructions::lexical_query;
pub use paths::{Bm25Path, DensePath, Path, PathHit, PathRetriever, PreparedQuery, SpladePath};
pub use request::{Diagnostics, Hit, PathRank, Recency, RerankStatus, SearchOutcome, SearchRequest, StageTimings};
pub use rerank::{Candidate, CrossEncoderReranker, Reranked, Reranker};
pub use settings::{
    FusionConfig, FusionMethod, RecallTail, DEFAULT_FEEDBACK, DEFAULT_FEEDBACK_DOCUMENTS, DEFAULT_LONG_QUERY_WORDS,
    DEFAULT_PER_PATH_K, DEFAULT_RECALL_TAIL, RELEVANCE_RANKS, RELEVANCE_SCORES,
};
pub use shared_models::SharedModels;
pub use top::{top_by_full_sort, top_by_score};

#[cfg(test)]
mod engine_tests;
