//! The retrieval library: composable retrievers, rerankers and routers for Rust services
//! that embed retrieval.
//!
//! Everything speaks two types, [`Query`] (text, optional embedding, filters, metadata) and
//! [`ContextItem`] (id, text, score, source, metadata), through a few traits: [`Retriever`]
//! and [`AsyncRetriever`], [`Reranker`] and [`AsyncReranker`], [`TokenLevelEncoder`].
//!
//! The pieces are the engine's own: [`fuse_items`] fuses with [`crate::search::rrf_fuse`],
//! the function the engine fuses its paths with; [`DenseRetriever`] searches any
//! [`VectorStore`], of which the engine's HNSW [`crate::index::DenseIndex`] is one;
//! [`Bm25Retriever`] builds the engine's [`crate::index::Bm25Index`]; the engine's rerank
//! stage takes any [`Reranker`]; and the engine itself is a [`Retriever`]
//! ([`crate::search::Engine`]).
//!
//! Queries can be routed to named retrievers ([`RoutedRetriever`] with a [`Router`]), items
//! of several modalities searched in one embedding space ([`SharedSpaceRetriever`]), and a
//! user's remembered facts ranked by recency, relevance and importance
//! ([`ScoredMemoryRetriever`], a [`Retriever`] through [`MemoryRetrieverAdapter`]).
//!
//! A hybrid of dense and BM25 retrieval over your own items:
//!
//! ```
//! use sextant::retrieval::{Bm25Retriever, ContextItem, DenseRetriever, HybridRetriever, Query, Retriever};
//!
//! let items = vec![
//!     ContextItem::new("fx", "Foreign exchange reduced gross margin by 40 basis points."),
//!     ContextItem::new("ai", "Data centre revenue doubled on demand for AI accelerators."),
//! ];
//! let embed = |t: &str| Ok(vec![t.matches("margin").count() as f32, t.matches("revenue").count() as f32 + 0.1]);
//! let hybrid = HybridRetriever::new(vec![
//!     Box::new(DenseRetriever::index(items.clone(), embed).unwrap()),
//!     Box::new(Bm25Retriever::index(items)),
//! ]).unwrap();
//! let hits = hybrid.retrieve(&Query::new("what hurt the margin?"), 1).unwrap();
//! assert_eq!(hits[0].id, "fx");
//! ```

mod cross_modal;
mod dense;
mod hybrid;
mod item;
mod memory;
mod routing;
mod sparse;
mod traits;

pub use cross_modal::{Content, CrossModalEncoder, SharedSpaceRetriever};
pub use dense::{normalize, AsyncDenseRetriever, DenseRetriever, Embed, FlatVectorStore, VectorStore};
pub use hybrid::{fuse_items, AsyncHybridRetriever, HybridRetriever};
pub use item::{ContextItem, Metadata, Query, Source, DEFAULT_PRIORITY};
pub use memory::{
    InMemoryStore, MemoryDecay, MemoryEntry, MemoryFilter, MemoryRetrieverAdapter, MemoryStore, ScoredMemoryRetriever, MEMORY_PRIORITY,
};
pub use routing::{CallbackRouter, KeywordRouter, MetadataRouter, RoutedRetriever, Router, DEFAULT_ROUTE};
pub use sparse::Bm25Retriever;
pub use traits::{AsyncReranker, AsyncRetriever, BoxFuture, Reranker, Retriever, TokenLevelEncoder};

/// The engine's Reciprocal Rank Fusion, the only fusion code in the crate.
pub use crate::search::{rrf_fuse, DEFAULT_RRF_K};
