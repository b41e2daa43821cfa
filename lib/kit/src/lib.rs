//! # sextant-kit
//!
//! The retrieval toolkit: composable retrievers, rerankers and routers for Rust services
//! that embed retrieval, and BEIR-style evaluation of any of them ([`eval`]).
//!
//! Everything speaks two types, [`Query`] (text, optional embedding, filters, metadata) and
//! [`ContextItem`] (id, text, score, source, metadata), through a few traits: [`Retriever`]
//! and [`AsyncRetriever`], [`Reranker`] and [`AsyncReranker`], [`TokenLevelEncoder`].
//!
//! The pieces are the engine's own: [`fuse_items`] fuses with [`sextant_core::pipeline::rrf_fuse`],
//! the function the engine fuses its paths with; [`DenseRetriever`] searches any
//! [`VectorStore`], of which the engine's HNSW [`sextant_core::index::DenseIndex`] is one;
//! [`Bm25Retriever`] builds the engine's [`sextant_core::index::Bm25Index`]; any [`Reranker`]
//! becomes the engine's rerank stage through [`EngineReranker`]; and the engine itself is a
//! [`Retriever`] ([`sextant_core::pipeline::Engine`]).
//!
//! Queries can be routed to named retrievers ([`RoutedRetriever`] with a [`Router`]), items
//! of several modalities searched in one embedding space ([`SharedSpaceRetriever`]), and a
//! user's remembered facts ranked by recency, relevance and importance
//! ([`ScoredMemoryRetriever`], a [`Retriever`] through [`MemoryRetrieverAdapter`]).
//!
//! A hybrid of dense (the real MiniLM model) and BM25 retrieval over your own items, the
//! example of docs/internals.md ("Using the library"):
//!
//! ```
//! use sextant_core::encode::{default_model_dir, DenseEncoder};
//! use sextant_kit::{Bm25Retriever, ContextItem, DenseRetriever, HybridRetriever, Query, Retriever};
//!
//! let items = vec![
//!     ContextItem::new("fx", "A stronger dollar reduced gross margin by 40 basis points."),
//!     ContextItem::new("ai", "Data centre revenue doubled on demand for AI accelerators."),
//! ];
//! let encoder = DenseEncoder::load(&default_model_dir().join("minilm-l6-v2"))?;
//! let hybrid = HybridRetriever::new(vec![
//!     Box::new(DenseRetriever::index(items.clone(), encoder)?),
//!     Box::new(Bm25Retriever::index(items)),
//! ])?;
//! let hits = hybrid.retrieve(&Query::new("How did currency moves affect profitability?"), 1)?;
//! assert_eq!(hits[0].id, "fx");
//! # Ok::<(), sextant_core::Error>(())
//! ```

mod bm25;
mod cross_modal;
mod engine_retriever;
pub mod eval;
mod hybrid;
mod item;
mod late;
mod memory;
mod rerankers;
mod routing;
mod traits;
mod vector;

pub use bm25::Bm25Retriever;
pub use cross_modal::{Content, CrossModalEncoder, SharedSpaceRetriever};
pub use engine_retriever::{engine_filter, EngineReranker, EngineRetriever};
pub use hybrid::{fuse_items, AsyncHybridRetriever, Hybrid, HybridRetriever};
pub use item::{ContextItem, Metadata, Query, Source, DEFAULT_PRIORITY};
pub use late::{
    maxsim, LateInteractionRetriever, LateInteractionScorer, MaxSimScorer, TokenScorer, DEFAULT_FIRST_STAGE_K,
    DEFAULT_TOKEN_CACHE,
};
pub use memory::{
    InMemoryStore, MemoryDecay, MemoryEntry, MemoryFilter, MemoryRetrieverAdapter, MemoryStore, ScoredMemoryRetriever,
    MEMORY_PRIORITY,
};
pub use rerankers::{
    rank_by_scores, AsyncCallbackReranker, AsyncScoreReranker, CallbackReranker, RerankerPipeline, RoundRobinReranker,
    ScoreReranker,
};
pub use routing::{CallbackRouter, KeywordRouter, MetadataRouter, RoutedRetriever, Router, DEFAULT_ROUTE};
pub use traits::{AsyncReranker, AsyncRetriever, BoxFuture, ItemsFuture, Reranker, Retriever, TokenLevelEncoder};
pub use vector::{normalize, AsyncDenseRetriever, DenseRetriever, Embed, FlatVectorStore};

/// The vector store interface the engine's dense path searches through.
pub use sextant_core::index::VectorStore;
/// The engine's cross-encoder, a [`Reranker`] of items here too.
pub use sextant_core::pipeline::CrossEncoderReranker;
/// The engine's Reciprocal Rank Fusion, the only fusion code in the crate.
pub use sextant_core::pipeline::{rrf_fuse, DEFAULT_RRF_K};

#[cfg(test)]
mod readme_example;
