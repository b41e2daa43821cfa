//! The shard worker's HTTP API: one index shard answering its router over the shard
//! protocol ([`sextant_core::shards::protocol`]) at `POST /v1/shard`, a JSON
//! [`ShardRequest`] in and a JSON [`ShardResponse`](sextant_core::shards::ShardResponse)
//! out, as `sextant shard-worker` serves it on loopback (a Lambda shard function takes the
//! same questions as its payload, `sextant_aws::ShardInvocation`). A request that is not a shard request is a 400 in the error
//! envelope; a shard that fails answers a 500 in it.

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

/// The largest request a worker reads: a retrieve question restricted to a set of the
/// shard's documents carries their ordinals (a few bytes each in JSON), so a filter that
/// keeps millions of documents is tens of megabytes, far past axum's default 2 MB.
pub const MAX_REQUEST_BYTES: usize = 128 << 20;

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
        .layer(axum::extract::DefaultBodyLimit::max(MAX_REQUEST_BYTES))
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

#[cfg(test)]
mod tests {
    use axum::body::Body;
    use axum::http::{Request, StatusCode};
    use sextant_core::pipeline::Path;
    use sextant_core::shards::protocol::{ShardQuery, ShardResponse};
    use sextant_core::testutil::small_engine;
    use tower::ServiceExt;

    use super::*;

    fn ask(app: &Router, body: Vec<u8>) -> (StatusCode, serde_json::Value) {
        let request = Request::post(SHARD_PATH).header("content-type", "application/json").body(Body::from(body));
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(async {
            let response = app.clone().oneshot(request.unwrap()).await.unwrap();
            let status = response.status();
            let bytes = axum::body::to_bytes(response.into_body(), usize::MAX).await.unwrap();
            (status, serde_json::from_slice(&bytes).unwrap())
        })
    }

    /// A question restricted to a large set of documents (here 3 MB of JSON, past axum's
    /// default limit) is answered, as one index would answer it; a body that is not a
    /// shard question is a 400 in the error envelope.
    #[test]
    fn a_worker_answers_large_questions_and_refuses_what_is_not_one() {
        let engine = small_engine();
        let app = shard_router(Arc::new(engine.with_index(engine.index().clone()).unwrap()), false);
        let (prepared, _) = engine.prepare("net sales", &[Path::Bm25]).unwrap();
        let mut q = ShardQuery::of(&sextant_core::pipeline::SearchRequest::new("net sales", 5), &prepared, None);
        q.paths = vec![Path::Bm25];
        let all: Vec<u32> = (0..engine.index().documents.len() as u32).collect();
        // Every document, then the same again: a set of the shard's documents in any length.
        q.documents = Some(all.iter().copied().cycle().take(1_500_000).collect());
        let body = serde_json::to_vec(&ShardRequest::Retrieve(Box::new(q))).unwrap();
        assert!(body.len() > 2 << 20, "{} bytes", body.len());
        let (status, answer) = ask(&app, body);
        assert_eq!(status, StatusCode::OK, "{answer}");
        let ShardResponse::Retrieve(a) = serde_json::from_value(answer).unwrap() else { panic!("not candidates") };
        assert_eq!(a.used_paths, vec![Path::Bm25]);
        assert!(!a.lists[0].is_empty());

        let (status, answer) = ask(&app, br#"{"op": "search", "query": "x"}"#.to_vec());
        assert_eq!(status, StatusCode::BAD_REQUEST, "{answer}");
        assert!(answer["error"]["message"].as_str().unwrap().contains("not a shard request"), "{answer}");
    }
}
