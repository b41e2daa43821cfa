//! Authentication: the key from the request, its record, plan and rate window in the
//! [`KeyStore`](sextant_keys::KeyStore), the [`Caller`] attached to the request; and
//! [`Authed`], the one extractor every endpoint takes its caller, request id and JSON body
//! from.

use std::sync::Arc;

use axum::extract::{FromRequest, Request, State};
use axum::http::{HeaderMap, HeaderValue};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde::de::DeserializeOwned;
use sextant_keys::{KeyStatus, RateDecision};

use crate::envelope::ApiError;
use crate::request::{json_body, read_body};
use crate::state::{AppState, Caller, RequestId};

/// An authenticated request to a JSON endpoint: who calls, the request's id, and the body
/// decoded as `T` (415 unless JSON, 413 over the size limit, 400 naming the field that is
/// missing, unknown or mistyped).
pub struct Authed<T> {
    /// The caller's key record and plan.
    pub caller: Caller,
    /// The request's id.
    pub request_id: String,
    /// The decoded body.
    pub body: T,
}

impl<T: DeserializeOwned + schemars::JsonSchema + 'static> FromRequest<Arc<AppState>> for Authed<T> {
    type Rejection = Response;

    async fn from_request(req: Request, state: &Arc<AppState>) -> Result<Self, Response> {
        let call = RawCall::read(req, state).await?;
        let body =
            json_body(&call.headers, &call.body, state.config.max_body_bytes).map_err(IntoResponse::into_response)?;
        Ok(Authed { caller: call.caller, request_id: call.request_id, body })
    }
}

/// An authenticated request before its body is decoded: what [`Authed`] and the endpoints
/// with their own encodings (the knowledge-base API's query string) start from.
pub(crate) struct RawCall {
    /// The caller's key record and plan.
    pub caller: Caller,
    /// The request's id.
    pub request_id: String,
    /// The request's headers.
    pub headers: HeaderMap,
    /// The request's URI.
    pub uri: axum::http::Uri,
    /// The body, read within the API's size and time limits ([`read_body`]).
    pub body: axum::body::Bytes,
}

impl RawCall {
    /// The caller and id the middleware attached, and the body read within the limits.
    pub(crate) async fn read(req: Request, state: &AppState) -> Result<Self, Response> {
        Self::read_limited(req, state, state.config.max_body_bytes).await
    }

    /// [`RawCall::read`] with a body of at most `limit` bytes (documents are larger than
    /// queries).
    pub(crate) async fn read_limited(req: Request, state: &AppState, limit: usize) -> Result<Self, Response> {
        let caller = req.extensions().get::<Caller>().cloned().ok_or_else(|| missing_key().into_response())?;
        let request_id = req.extensions().get::<RequestId>().map(|r| r.0.clone()).unwrap_or_default();
        let (headers, uri) = (req.headers().clone(), req.uri().clone());
        let body = read_body(req.into_body(), &headers, limit, state.config.body_read_timeout)
            .await
            .map_err(IntoResponse::into_response)?;
        Ok(RawCall { caller, request_id, headers, uri, body })
    }
}

/// The 401 of a request without a key.
fn missing_key() -> ApiError {
    ApiError::unauthorized("missing API key: send Authorization: Bearer <key> or X-API-Key: <key>")
}

/// Authenticates, rate-limits and attaches the [`Caller`].
pub(crate) async fn authenticate(State(state): State<Arc<AppState>>, mut req: Request, next: Next) -> Response {
    let presented = presented_key(req.headers());
    let Some(key) = presented else {
        return missing_key().into_response();
    };
    let hash = sextant_keys::hash_key(&key);
    drop(key);
    let looked_up = async {
        let keys = &state.keys;
        let Some(record) = keys.find(&hash).await? else { return Ok((None, None, None)) };
        if record.status != KeyStatus::Active {
            return Ok((Some(record), None, None));
        }
        let Some(plan) = keys.plan(&record.plan).await? else { return Ok((Some(record), None, None)) };
        let decision = keys.count(&record, &plan, sextant_keys::now_unix()).await?;
        Ok::<_, sextant_core::Error>((Some(record), Some(plan), Some(decision)))
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
            vec![
                ("x-ratelimit-limit", limit.to_string()),
                ("x-ratelimit-remaining", remaining.to_string()),
                ("x-ratelimit-reset", reset_secs.to_string()),
            ]
        }
        Some(RateDecision::Limited { limit, retry_after }) => {
            let mut e = ApiError::rate_limited(
                format!(
                    "rate limit of {limit} requests reached for this key's plan ({}); retry after {retry_after} s",
                    plan.name
                ),
                retry_after,
            );
            e.headers = vec![
                ("x-ratelimit-limit", limit.to_string()),
                ("x-ratelimit-remaining", "0".into()),
                ("x-ratelimit-reset", retry_after.to_string()),
            ];
            return (e).into_response();
        }
        None => Vec::new(),
    };
    crate::access::record(|r| r.key_prefix = Some(record.prefix.clone()));
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
