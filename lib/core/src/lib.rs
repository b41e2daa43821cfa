//! # sextant-core
//!
//! Sextant's retrieval engine. Documents are cut into chunks (no text left out), encoded,
//! indexed by three paths (dense HNSW, BM25, SPLADE), retrieved with filters applied before
//! ranking, fused (by the z-scores of each path's own scores by default, or by Reciprocal Rank
//! Fusion) and optionally reranked.
//!
//! The modules follow the pipeline, and each uses only those before it:
//! [`corpus`] (documents, chunks, sentences) → [`encode`] (the ONNX models) → [`index`]
//! (the indexes and their on-disk format, read and written through [`storage`]) →
//! [`pipeline`] (one query: plan, paths, fusion, rerank, recency, diversification).
//! [`build`] makes indexes from documents (plan, encode, merge) with [`corpus`],
//! [`encode`] and [`index`].
//!
//! Every other Sextant crate builds on this one: the financial routes (`sextant-finance`),
//! the retrieval toolkit (`sextant-kit`), the key store (`sextant-keys`), the AWS backends
//! (`sextant-aws`) and the HTTP API (`sextant-server`).

#![warn(missing_docs)]

pub mod build;
pub mod corpus;
pub mod encode;
pub mod error;
pub mod index;
pub mod pipeline;
pub mod shards;
pub mod storage;

pub use error::{Error, Result, Stage};

/// Helpers for the tests of Sextant's crates (where the models are, a seeded generator, a
/// one-thread executor); not part of the API.
#[doc(hidden)]
pub mod testutil;

/// The engine's version.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
