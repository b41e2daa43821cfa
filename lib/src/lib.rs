//! # Sextant
//!
//! A hybrid retrieval engine: documents are cut into chunks of whole segments, indexed by
//! three paths (dense HNSW, BM25, SPLADE), retrieved with filters applied before ranking,
//! fused with Reciprocal Rank Fusion and optionally reranked by a cross-encoder.
//!
//! Modules follow the pipeline: [`corpus`] → [`encode`] → [`index`] → [`search`], with
//! [`storage`] for where index files live, [`retrieval`] for the same pieces as a
//! composable library API, [`finance`] for the financial question routes, [`eval`] for BEIR-style evaluation and `api`
//! (feature `api`, on by default) for the HTTP endpoints.

#![warn(missing_docs)]

#[cfg(feature = "api")]
pub mod api;
#[cfg(feature = "aws")]
pub mod cloud;
pub mod corpus;
pub mod encode;
pub mod finance;
pub mod index;
pub mod retrieval;
pub mod search;
pub mod storage;
pub mod error;
pub mod eval;

pub use error::{Error, Result};

#[cfg(test)]
mod testutil;

/// The engine's version.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
