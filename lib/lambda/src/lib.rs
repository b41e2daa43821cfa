//! # sextant-lambda
//!
//! What Sextant's Lambda functions share, so each `main.rs` stays a few lines: the
//! context built once at cold start from the environment ([`startup`]: indexes from
//! directories or S3, models, the key store), the warm refresh of S3 indexes, the
//! `lambda_http` runners of the API functions and the index-build function ([`runner`]),
//! the shard function of a sharded index ([`shard`]), the document API's store in S3
//! ([`documents`]), and the indexes created and deleted through the API ([`index_admin`]).

#![warn(missing_docs)]

pub mod documents;
pub mod index_admin;
pub mod runner;
pub mod shard;
pub mod startup;
#[cfg(test)]
mod template_tests;

pub use runner::{
    finish_step, gateway_request_id, handle_build_event, init_logging, refresh, serve, serve_index_build, Builds,
    Watch, BUILD_REQUEST_SOURCE,
};
pub use shard::serve_shard;
pub use startup::{from_env, key_store_from_env, models_from_env, Context};
