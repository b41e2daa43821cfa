//! # sextant-server
//!
//! The HTTP API: one axum router serving `/v1/retrieve`, `/v1/search`, `/v1/context`, the
//! Alibaba Cloud Model Studio (Bailian) knowledge-base Retrieve API at
//! `/{WorkspaceId}/index/retrieve`, `/health` and `/openapi.json`, run by the Lambda
//! functions (crate `sextant-lambda`) and by `sextant serve` alike.
//!
//! Every request gets a `requestId`; every failure answers with the error envelope of
//! [`envelope`]. Authentication takes `Authorization: Bearer KEY` or `X-API-Key: KEY`, looks
//! the key's SHA-256 up in a [`KeyStore`](sextant_keys::KeyStore), counts the request against
//! the key's plan and clamps `top_k` to the plan's maximum.
//!
//! Each endpoint is a module of `routes` whose handler takes an [`Authed`] request;
//! what is shared by several (query limits, the search runner, the knowledge-base filter
//! language) has a module of its own. What a search needs on any index, sharded or not, is
//! in the library crates: evidence spans in `sextant-core`, periods, company names and the
//! conversation rewrite in `sextant-finance`.

#![warn(missing_docs)]

pub mod access;
mod auth;
pub mod documents;
pub mod envelope;
pub mod headers;
pub mod listen;
pub mod openapi;
mod params;
pub mod playground;
mod request;
mod router;
mod routes;
pub mod search_filters;
pub mod shard_worker;
mod state;

pub use auth::Authed;
pub use envelope::ApiError;
pub use router::router;
pub use routes::indexes::{check_index_id, AdminError, IndexAdmin, IndexOptions};
pub use state::{
    ApiConfig, AppState, Caller, Indexes, RequestId, ServedIndex, UpstreamRequestId, DEFAULT_MAX_IN_FLIGHT,
};
