//! The router: every route, the request id, the security headers, the fallbacks.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::HeaderValue;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use tracing::Instrument;

use crate::access;
use crate::envelope::{self, ApiError};
use crate::state::{AppState, RequestId, UpstreamRequestId};
use crate::{auth, headers, openapi, routes};

/// The router with every route. `/health` needs no key; the rest do.
pub fn router(state: Arc<AppState>) -> Router {
    let api = Router::new()
        .route("/v1/retrieve", post(routes::retrieve::handle).fallback(method_not_allowed))
        .route("/v1/search", post(routes::search::handle).fallback(method_not_allowed))
        .route("/v1/context", post(routes::context::handle).fallback(method_not_allowed))
        .route("/{workspace}/index/retrieve", post(routes::knowledge_base::handle).fallback(method_not_allowed))
        .route(
            "/v1/indexes/{index}/documents/{document_id}",
            axum::routing::put(routes::documents::put)
                .delete(routes::documents::delete)
                .get(routes::documents::get_one)
                .fallback(|| async { ApiError::method_not_allowed().accepting("PUT, GET and DELETE") }),
        )
        .route(
            "/v1/indexes/{index}/documents",
            get(routes::documents::list).fallback(|| async { ApiError::method_not_allowed().accepting("GET") }),
        )
        .route(
            "/v1/indexes",
            get(routes::indexes::list).fallback(|| async { ApiError::method_not_allowed().accepting("GET") }),
        )
        .route(
            "/v1/indexes/{index}",
            get(routes::indexes::get_one)
                .put(routes::indexes::put)
                .delete(routes::indexes::delete)
                .fallback(|| async { ApiError::method_not_allowed().accepting("GET, PUT and DELETE") }),
        )
        .route(
            "/v1/indexes/{index}/documents:batch",
            post(routes::batch::handle).fallback(|| async { ApiError::method_not_allowed() }),
        )
        .route("/v1/indexes/{index}/compact", post(routes::documents::compact).fallback(method_not_allowed))
        .route_layer(axum::middleware::from_fn_with_state(state.clone(), auth::authenticate))
        .route_layer(axum::middleware::from_fn_with_state(state.clone(), shed_load));
    let pages = if state.config.playground { crate::playground::routes() } else { Router::new() };
    Router::new()
        .merge(api)
        .merge(pages)
        .route("/health", get(health))
        .route("/openapi.json", get(|| async { axum::Json(openapi::document()) }))
        .fallback(not_found)
        .layer(axum::middleware::from_fn_with_state(state.clone(), headers::apply))
        .layer(axum::middleware::from_fn_with_state(state.clone(), with_request_id))
        .with_state(state)
}

/// Load shedding: a request to a search endpoint beyond [`ApiConfig::max_in_flight`]
/// (crate::state::ApiConfig) gets a 503 with `Retry-After` at once, before its key is even
/// looked up, instead of waiting behind the others.
async fn shed_load(State(state): State<Arc<AppState>>, req: Request, next: Next) -> Response {
    let Ok(_permit) = state.in_flight.clone().try_acquire_owned() else {
        let n = state.config.max_in_flight;
        return ApiError::unavailable(
            format!("the server is at capacity ({n} requests in flight); retry after 1 second"),
            1,
        )
        .into_response();
    };
    next.run(req).await
}

async fn method_not_allowed() -> ApiError {
    ApiError::method_not_allowed()
}

async fn not_found() -> ApiError {
    ApiError::not_found(
        "no such endpoint (POST /v1/retrieve, POST /v1/search, POST /{WorkspaceId}/index/retrieve, \
         PUT|GET|DELETE /v1/indexes/{index}/documents/{documentId}, GET /v1/indexes/{index}/documents, GET /health)",
    )
}

/// `GET /health`: 200 with the loaded indexes once ready, 503 while loading.
async fn health(State(state): State<Arc<AppState>>) -> Response {
    match state.indexes() {
        Ok(engines) => {
            let indexes: BTreeMap<&str, usize> =
                engines.iter().map(|(id, e)| (id.as_str(), e.searcher.view().manifest().chunks)).collect();
            // Per index, each path's state: `ready`, or `building` while its index builds.
            let paths: BTreeMap<&str, BTreeMap<&str, &str>> =
                engines.iter().map(|(id, e)| (id.as_str(), e.path_states())).collect();
            let degraded = engines.values().any(|e| e.engine().degraded());
            let versions = state.versions.read().expect("versions lock").clone();
            axum::Json(serde_json::json!({
                "status": "ok",
                "degraded": degraded,
                "paths": paths,
                "indexes": indexes,
                "indexVersions": versions,
                "defaultIndex": state.config.default_index,
                "version": sextant_core::VERSION
            }))
            .into_response()
        }
        Err(e) => e.into_response(),
    }
}

/// Gives the request an id (the gateway's, see [`UpstreamRequestId`], or a new one), and
/// every response an `x-request-id` header and, for errors, the id inside the envelope.
async fn with_request_id(State(state): State<Arc<AppState>>, mut req: Request, next: Next) -> Response {
    let upstream = req.extensions().get::<UpstreamRequestId>().and_then(|u| u.usable()).map(str::to_string);
    let id = upstream.unwrap_or_else(|| state.request_id());
    // The knowledge-base route answers in its own envelope.
    let kb_route = req.uri().path().ends_with("/index/retrieve");
    req.extensions_mut().insert(RequestId(id.clone()));
    let (method, path) = (req.method().clone(), req.uri().path().chars().take(100).collect::<String>());
    let started = std::time::Instant::now();
    let span = tracing::info_span!("request", id = %id);
    let (mut resp, record) = access::scope(next.run(req).instrument(span.clone())).await;
    let total_ms = started.elapsed().as_secs_f64() * 1000.0;
    if let Some(err) = resp.extensions_mut().remove::<envelope::PendingError>() {
        let headers = std::mem::take(resp.headers_mut());
        resp = if kb_route {
            routes::knowledge_base::error_response(&err.0, &id)
        } else {
            err.0.with_request_id(&id).into_response()
        };
        // Keep what inner layers set (rate-limit, security and CORS headers) unless the
        // envelope sets its own (content type and length).
        for (name, value) in &headers {
            if !resp.headers().contains_key(name) {
                resp.headers_mut().append(name, value.clone());
            }
        }
    }
    if let Ok(v) = HeaderValue::from_str(&id) {
        resp.headers_mut().insert("x-request-id", v);
    }
    if let Ok(v) = HeaderValue::from_str(&access::server_timing(&record, total_ms)) {
        resp.headers_mut().insert("server-timing", v);
    }
    if state.config.metrics {
        let now_ms = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis());
        println!("{}", access::emf_line(&record, "api", resp.status().as_u16(), total_ms, now_ms));
    }
    let _in_request = span.enter();
    tracing::info!(
        target: "access",
        method = %method,
        path = %path,
        status = resp.status().as_u16(),
        latency_ms = (total_ms * 10.0).round() / 10.0,
        key_prefix = record.key_prefix.as_deref().unwrap_or("-"),
        index = record.index.as_deref().unwrap_or("-"),
        results = record.results.map_or(-1, |n| n as i64),
        "request served"
    );
    resp
}
