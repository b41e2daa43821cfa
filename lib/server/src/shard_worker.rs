//! The shard worker's HTTP API: one index shard answering its router over the shard
//! protocol ([`sextant_core::shards::protocol`]) at `POST /v1/shard`, a JSON
//! [`ShardRequest`] in and a JSON [`ShardResponse`] out, as `sextant shard-worker` serves it
//! on loopback (the Lambda shard function takes the same payloads). A request that is not
//! a shard request is a 400 in the error envelope; a shard that fails answers a 500 in it.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use sextant_core::pipeline::Engine;
use sextant_core::shards::protocol::{answer, ShardRequest};

use crate::ApiError;

/// The path a shard worker answers the protocol at.
pub const SHARD_PATH: &str = "/v1/shard";

/// A shard worker's state: its engine, and whether to fail every request (fault injection,
/// for the tests of a router's failure handling).
#[derive(Clone)]
struct Worker {
    engine: Arc<Engine>,
    failing: bool,
}

/// The router of a shard worker serving `engine` (one shard's index and the models);
/// with `failing`, every protocol request is answered a 500, as a broken shard would.
pub fn shard_router(engine: Arc<Engine>, failing: bool) -> Router {
    Router::new()
        .route(SHARD_PATH, post(ask))
        .route("/health", get(|| async { "ok" }))
        .with_state(Worker { engine, failing })
}

async fn ask(State(worker): State<Worker>, headers: HeaderMap, body: Bytes) -> Response {
    // The router names its search; a bare request is the worker's own.
    let id = headers.get("x-request-id").and_then(|v| v.to_str().ok()).unwrap_or("shard").to_string();
    let request: ShardRequest = match serde_json::from_slice(&body) {
        Ok(r) => r,
        Err(e) => return ApiError::bad_body(format!("not a shard request: {e}")).with_request_id(&id).into_response(),
    };
    if worker.failing {
        tracing::warn!("shard worker: failing as asked (--fault error)");
        return ApiError::internal().with_request_id(&id).into_response();
    }
    let engine = worker.engine.clone();
    match tokio::task::spawn_blocking(move || answer(&engine, &request)).await {
        Ok(Ok(response)) => Json(response).into_response(),
        Ok(Err(e)) => ApiError::from(e).with_request_id(&id).into_response(),
        Err(e) => {
            tracing::error!(error = %e, "shard worker: the search panicked");
            ApiError::internal().with_request_id(&id).into_response()
        }
    }
}
