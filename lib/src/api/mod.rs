//! The HTTP API: one axum router serving `/v1/retrieve`, `/v1/search`,
//! `/{WorkspaceId}/index/retrieve` and `/health`,
//! run by the Lambda functions (through `lambda_http`) and by `sextant serve` alike.
//!
//! Every request gets a `requestId`; every failure answers with the error envelope of
//! [`envelope`]. Authentication takes `Authorization: Bearer KEY` or `X-API-Key: KEY`,
//! looks the key's SHA-256 up in a [`keys::KeyStore`], counts the request against the
//! key's plan and clamps `top_k` to the plan's maximum.

pub mod envelope;
pub mod context;
pub mod evidence;
mod financial;
pub mod fuzz;
pub mod headers;
pub mod keys;
mod kb;
#[cfg(feature = "lambda")]
pub mod lambda;
pub mod openapi;
mod params;
mod period;
mod request;
mod retrieve;
mod rewrite;
mod search;
pub mod search_filters;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;

pub use envelope::ApiError;
use keys::{ApiKey, KeyStatus, KeyStore, Plan, RateDecision};

use crate::search::Engine;

/// Limits and defaults of the API.
#[derive(Debug, Clone)]
pub struct ApiConfig {
    /// Largest request body accepted (bytes); larger is a 413.
    pub max_body_bytes: usize,
    /// Longest query accepted (characters); longer is a 400. Queries longer than the
    /// model window but under this are truncated for the encoders and flagged in `meta`.
    pub max_query_chars: usize,
    /// `/v1/search`: dense candidates under this cosine similarity are dropped.
    pub min_dense_similarity: f32,
    /// The index served by `/v1/retrieve` and `/v1/search`.
    pub default_index: String,
    /// Origins browsers may call the API from (CORS); empty: none ([`headers`]).
    pub cors_origins: Vec<String>,
}

impl Default for ApiConfig {
    /// 64 KiB bodies, 4,000-character queries, 0.3 minimum cosine, index `demo`, no CORS.
    fn default() -> Self {
        ApiConfig {
            max_body_bytes: 64 * 1024,
            max_query_chars: 4_000,
            min_dense_similarity: 0.3,
            default_index: "demo".into(),
            cors_origins: Vec::new(),
        }
    }
}

/// Loaded indexes, by id.
pub type Engines = BTreeMap<String, Arc<Engine>>;

/// What the handlers share: the engines once loaded, the key store, the limits.
pub struct AppState {
    engines: RwLock<Option<Arc<Engines>>>,
    versions: RwLock<BTreeMap<String, String>>,
    loading: RwLock<String>,
    keys: Arc<dyn KeyStore>,
    config: ApiConfig,
    counter: AtomicU64,
}

impl AppState {
    /// State whose engines arrive later through [`AppState::set_engines`] (until then the
    /// endpoints answer 503 and `/health` says what is loading).
    pub fn new(keys: Arc<dyn KeyStore>, config: ApiConfig) -> Arc<Self> {
        Arc::new(AppState {
            engines: RwLock::new(None),
            versions: RwLock::new(BTreeMap::new()),
            loading: RwLock::new("starting".into()),
            keys,
            config,
            counter: AtomicU64::new(0),
        })
    }

    /// Publishes the loaded engines: from now on requests are served.
    pub fn set_engines(&self, engines: Engines) {
        *self.engines.write().expect("engines lock") = Some(Arc::new(engines));
    }

    /// Swaps in a new engine for index `id` (a newly published version): requests already
    /// holding the old engine finish on it, later ones get the new one. `version` is shown
    /// by `/health`.
    pub fn replace_engine(&self, id: &str, engine: Arc<Engine>, version: Option<String>) {
        let mut slot = self.engines.write().expect("engines lock");
        let mut engines: Engines = slot.as_deref().cloned().unwrap_or_default();
        engines.insert(id.to_string(), engine);
        *slot = Some(Arc::new(engines));
        drop(slot);
        self.set_version(id, version);
    }

    /// Records which published version of index `id` is served (shown by `/health`).
    pub fn set_version(&self, id: &str, version: Option<String>) {
        let mut versions = self.versions.write().expect("versions lock");
        match version {
            Some(v) => versions.insert(id.to_string(), v),
            None => versions.remove(id),
        };
    }

    /// The published version served for index `id`, when it came from an object store.
    pub fn version(&self, id: &str) -> Option<String> {
        self.versions.read().expect("versions lock").get(id).cloned()
    }

    /// The engine of index `id`, if loaded.
    pub fn loaded_engine(&self, id: &str) -> Option<Arc<Engine>> {
        self.engines.read().expect("engines lock").as_ref()?.get(id).cloned()
    }

    /// Tells `/health` what is being loaded.
    pub fn set_loading(&self, what: impl Into<String>) {
        *self.loading.write().expect("loading lock") = what.into();
    }

    /// The engines, or a 503 while loading.
    fn engines(&self) -> Result<Arc<Engines>, ApiError> {
        self.engines.read().expect("engines lock").clone().ok_or_else(|| {
            ApiError::unavailable(format!("the service is loading ({}); retry shortly", self.loading.read().expect("loading lock")), 5)
        })
    }

    /// The engine of index `id`.
    fn engine(&self, id: &str) -> Result<Arc<Engine>, ApiError> {
        let engines = self.engines()?;
        engines.get(id).cloned().ok_or_else(|| {
            ApiError::not_found(format!("no index {id:?} is loaded (loaded: {})", engines.keys().cloned().collect::<Vec<_>>().join(", ")))
        })
    }

    /// The engine of index `id` for `caller`: 403 when the key may not read it, then as
    /// [`AppState::engine`].
    fn engine_for(&self, caller: &Caller, id: &str) -> Result<Arc<Engine>, ApiError> {
        if !caller.key.can_read(id) {
            return Err(ApiError::forbidden(format!("this API key may not read index {id:?}")));
        }
        self.engine(id)
    }

    /// A new request id: `req_` and 16 hex digits (time and a counter, mixed).
    fn request_id(&self) -> String {
        let n = self.counter.fetch_add(1, Ordering::Relaxed);
        let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(0);
        let mut x = t ^ n.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ (std::process::id() as u64).rotate_left(32);
        x ^= x >> 33;
        x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
        x ^= x >> 33;
        format!("req_{x:016x}")
    }
}

/// The caller, once authenticated: their key record and plan.
#[derive(Debug, Clone)]
pub struct Caller {
    /// The key record.
    pub key: ApiKey,
    /// Its plan.
    pub plan: Plan,
}

/// The request id, as a request extension.
#[derive(Debug, Clone)]
pub struct RequestId(pub String);

/// The router with every route. `/health` needs no key; the rest do.
pub fn router(state: Arc<AppState>) -> Router {
    let api = Router::new()
        .route("/v1/retrieve", post(retrieve::handle).fallback(method_not_allowed))
        .route("/v1/search", post(search::handle).fallback(method_not_allowed))
        .route("/v1/context", post(financial::handle).fallback(method_not_allowed))
        .route("/{workspace}/index/retrieve", post(kb::handle).fallback(method_not_allowed))
        .route_layer(axum::middleware::from_fn_with_state(state.clone(), authenticate));
    Router::new()
        .merge(api)
        .route("/health", get(health))
        .route("/openapi.json", get(|| async { axum::Json(openapi::document()) }))
        .fallback(not_found)
        .layer(axum::middleware::from_fn_with_state(state.clone(), headers::apply))
        .layer(axum::middleware::from_fn_with_state(state.clone(), with_request_id))
        .with_state(state)
}

async fn method_not_allowed() -> ApiError {
    ApiError::method_not_allowed()
}

async fn not_found() -> ApiError {
    ApiError::not_found("no such endpoint (POST /v1/retrieve, POST /v1/search, POST /{WorkspaceId}/index/retrieve, GET /health)")
}

/// `GET /health`: 200 with the loaded indexes once ready, 503 while loading.
async fn health(State(state): State<Arc<AppState>>) -> Response {
    match state.engines() {
        Ok(engines) => {
            let indexes: BTreeMap<&str, usize> = engines.iter().map(|(id, e)| (id.as_str(), e.index().chunks.len())).collect();
            let versions = state.versions.read().expect("versions lock").clone();
            axum::Json(serde_json::json!({ "status": "ok", "indexes": indexes, "indexVersions": versions, "version": crate::VERSION })).into_response()
        }
        Err(e) => e.into_response(),
    }
}

/// Gives the request an id, and every response an `x-request-id` header and, for
/// errors, the id inside the envelope.
async fn with_request_id(State(state): State<Arc<AppState>>, mut req: Request, next: Next) -> Response {
    let id = state.request_id();
    // The knowledge-base route answers in its own envelope.
    let kb_route = req.uri().path().ends_with("/index/retrieve");
    req.extensions_mut().insert(RequestId(id.clone()));
    let mut resp = next.run(req).await;
    if let Some(err) = resp.extensions_mut().remove::<envelope::PendingError>() {
        let headers = std::mem::take(resp.headers_mut());
        resp = if kb_route { kb::error_response(&err.0, &id) } else { err.0.with_request_id(&id).into_response() };
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
    resp
}

/// Authenticates, rate-limits and attaches the [`Caller`].
async fn authenticate(State(state): State<Arc<AppState>>, mut req: Request, next: Next) -> Response {
    let presented = presented_key(req.headers());
    let Some(key) = presented else {
        return (ApiError::unauthorized("missing API key: send Authorization: Bearer <key> or X-API-Key: <key>")).into_response();
    };
    let hash = keys::hash_key(&key);
    drop(key);
    let looked_up = async {
        let keys = &state.keys;
        let Some(record) = keys.find(&hash).await? else { return Ok((None, None, None)) };
        if record.status != KeyStatus::Active {
            return Ok((Some(record), None, None));
        }
        let Some(plan) = keys.plan(&record.plan).await? else { return Ok((Some(record), None, None)) };
        let decision = keys.count(&record, &plan, keys::now_unix()).await?;
        Ok::<_, crate::Error>((Some(record), Some(plan), Some(decision)))
    }
    .await;
    let (record, plan, decision) = match looked_up {
        Ok(x) => x,
        Err(e) => {
            tracing::error!(error = %e, "key store unavailable");
            return (ApiError::unavailable("the key store is unavailable; retry shortly", 5)).into_response();
        }
    };
    let Some(record) = record else {
        return (ApiError::unauthorized("unknown API key")).into_response();
    };
    if record.status != KeyStatus::Active {
        return (ApiError::unauthorized("this API key has been revoked")).into_response();
    }
    let Some(plan) = plan else {
        tracing::error!(plan = %record.plan, "key refers to an unknown plan");
        return (ApiError::internal()).into_response();
    };
    let rate_headers = match decision {
        Some(RateDecision::Allowed { limit, remaining, reset_secs }) => {
            vec![("x-ratelimit-limit", limit.to_string()), ("x-ratelimit-remaining", remaining.to_string()), ("x-ratelimit-reset", reset_secs.to_string())]
        }
        Some(RateDecision::Limited { limit, retry_after }) => {
            let mut e = ApiError::rate_limited(format!("rate limit of {limit} requests reached for this key's plan ({}); retry after {retry_after} s", plan.name), retry_after);
            e.headers = vec![("x-ratelimit-limit", limit.to_string()), ("x-ratelimit-remaining", "0".into()), ("x-ratelimit-reset", retry_after.to_string())];
            return (e).into_response();
        }
        None => Vec::new(),
    };
    req.extensions_mut().insert(Caller { key: record, plan });
    let mut resp = next.run(req).await;
    for (k, v) in rate_headers {
        if let Ok(v) = HeaderValue::from_str(&v) {
            resp.headers_mut().insert(k, v);
        }
    }
    resp
}

/// The key from `Authorization: Bearer` or `X-API-Key`.
fn presented_key(h: &HeaderMap) -> Option<String> {
    if let Some(v) = h.get("authorization").and_then(|v| v.to_str().ok()) {
        let v = v.trim();
        if let Some(k) = v.strip_prefix("Bearer ").or_else(|| v.strip_prefix("bearer ")) {
            let k = k.trim();
            if !k.is_empty() {
                return Some(k.to_string());
            }
        }
    }
    h.get("x-api-key").and_then(|v| v.to_str().ok()).map(|v| v.trim().to_string()).filter(|v| !v.is_empty())
}
