//! The error envelope every endpoint answers with when a request fails:
//! `{"success": false, "error": {"code", "message", "field"?, "requestId"}}`.

use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

/// `text` quoted for an error message, cut to `max` characters (then "…"): a client's input
/// is echoed, never all of it.
pub(crate) fn echoed(text: &str, max: usize) -> String {
    match cut(text, max) {
        Some(head) => format!("{head:?}…"),
        None => format!("{text:?}"),
    }
}

/// `text` as it is (JSON already written out), cut to `max` characters (then "…").
pub(crate) fn echoed_as_is(text: &str, max: usize) -> String {
    match cut(text, max) {
        Some(head) => format!("{head}…"),
        None => text.to_string(),
    }
}

/// The first `max` characters of `text`, when it has more.
fn cut(text: &str, max: usize) -> Option<&str> {
    text.char_indices().nth(max).map(|(at, _)| &text[..at])
}

/// A failed request: status, machine-readable code, human message, and the request field
/// at fault when there is one.
#[derive(Debug, Clone)]
pub struct ApiError {
    /// HTTP status.
    pub status: StatusCode,
    /// Stable code (`invalid_request`, `unauthorized`, `rate_limited`, ...).
    pub code: &'static str,
    /// What went wrong, for a person.
    pub message: String,
    /// The JSON path of the offending request field (`filters.year`).
    pub field: Option<String>,
    /// Seconds after which a retry may succeed (429, 503).
    pub retry_after: Option<u64>,
    /// Extra headers (rate-limit counters).
    pub headers: Vec<(&'static str, String)>,
    /// Filled in by the router before the response is written.
    pub request_id: String,
}

impl ApiError {
    fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            status,
            code,
            message: message.into(),
            field: None,
            retry_after: None,
            headers: Vec::new(),
            request_id: String::new(),
        }
    }

    /// 400: a field of the body is missing, mistyped or out of range.
    pub fn invalid(field: impl Into<String>, message: impl Into<String>) -> Self {
        let field = field.into();
        let message = message.into();
        let mut e = Self::new(StatusCode::BAD_REQUEST, "invalid_request", format!("{field}: {message}"));
        e.field = Some(field);
        e
    }

    /// 400 about the body as a whole (not JSON, empty).
    pub fn bad_body(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "invalid_request", message)
    }

    /// 401: no key, an unknown key or a revoked one.
    pub fn unauthorized(message: impl Into<String>) -> Self {
        Self::new(StatusCode::UNAUTHORIZED, "unauthorized", message)
    }

    /// 403: a valid key without access to the resource.
    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(StatusCode::FORBIDDEN, "forbidden", message)
    }

    /// 404: no such route or resource.
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, "not_found", message)
    }

    /// 405: the route exists with another method.
    pub fn method_not_allowed() -> Self {
        Self::new(StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed", "this endpoint only accepts POST")
    }

    /// The 405's message for an endpoint that takes `methods`.
    pub fn accepting(mut self, methods: &str) -> Self {
        self.message = format!("this endpoint only accepts {methods}");
        self
    }

    /// 409: the resource exists in a state that the request cannot change as asked.
    pub fn conflict(message: impl Into<String>) -> Self {
        Self::new(StatusCode::CONFLICT, "conflict", message)
    }

    /// 501: this deployment does not offer the operation.
    pub fn not_implemented(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_IMPLEMENTED, "not_implemented", message)
    }

    /// 413: the body is over the limit.
    pub fn too_large(limit: usize) -> Self {
        Self::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "payload_too_large",
            format!("the request body is over the {limit}-byte limit"),
        )
    }

    /// 415: not `application/json`.
    pub fn unsupported_media_type() -> Self {
        Self::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
            "send the body as Content-Type: application/json",
        )
    }

    /// 429 with `Retry-After`.
    pub fn rate_limited(message: impl Into<String>, retry_after: u64) -> Self {
        let mut e = Self::new(StatusCode::TOO_MANY_REQUESTS, "rate_limited", message);
        e.retry_after = Some(retry_after.max(1));
        e
    }

    /// 503: not ready yet, or a dependency is down.
    pub fn unavailable(message: impl Into<String>, retry_after: u64) -> Self {
        let mut e = Self::new(StatusCode::SERVICE_UNAVAILABLE, "unavailable", message);
        e.retry_after = Some(retry_after.max(1));
        e
    }

    /// 408: the request body did not arrive in time.
    pub fn body_timeout(after: std::time::Duration) -> Self {
        Self::new(
            StatusCode::REQUEST_TIMEOUT,
            "request_timeout",
            format!("the request body did not arrive within {} s", after.as_secs()),
        )
    }

    /// 500 that says nothing of the internals (the cause is logged, not returned).
    pub fn internal() -> Self {
        Self::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal_error",
            "the request could not be completed; retry, and report the requestId if it persists",
        )
    }

    /// Sets the request id.
    pub fn with_request_id(mut self, id: &str) -> Self {
        self.request_id = id.to_string();
        self
    }
}

impl From<sextant_core::Error> for ApiError {
    /// Invalid arguments become a 400 naming the field; a search whose paths are all still
    /// building, or that no shard of a sharded index answered, a 503 with `Retry-After`; a
    /// search cancelled because the
    /// client went away a 499 (nginx's "client closed request", which nobody reads); anything
    /// else is logged and becomes a bare 500.
    fn from(e: sextant_core::Error) -> Self {
        match e {
            sextant_core::Error::InvalidArgument { field, reason } => ApiError::invalid(field, reason),
            sextant_core::Error::PathsNotReady(_) => ApiError::unavailable(e.to_string(), 30),
            sextant_core::Error::NoShardAnswered(ref why) => {
                tracing::error!(error = %why, "no index shard answered");
                ApiError::unavailable("no index shard answered; try again shortly", 5)
            }
            sextant_core::Error::Cancelled(stage) => {
                tracing::info!(stage = %stage, "search cancelled: the client went away");
                let status = axum::http::StatusCode::from_u16(499).expect("499 is a valid status code");
                ApiError::new(status, "cancelled", format!("the client went away before {stage}"))
            }
            other => {
                tracing::error!(error = %other, "request failed");
                ApiError::internal()
            }
        }
    }
}

/// The body of every failed `/v1` request.
#[derive(Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ErrorEnvelope<'a> {
    /// Always false.
    success: bool,
    /// What went wrong.
    error: ErrorDetail<'a>,
}

/// The `error` of an [`ErrorEnvelope`].
#[derive(Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ErrorDetail<'a> {
    code: &'a str,
    message: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    field: Option<&'a str>,
    request_id: &'a str,
}

/// An error rendered before its request id was known; the router's request-id layer
/// renders it.
#[derive(Clone)]
pub(crate) struct PendingError(pub(crate) ApiError);

impl IntoResponse for ApiError {
    /// The envelope, with `Retry-After` and rate-limit headers where set. Without a request
    /// id yet, the error travels as a response extension to the request-id layer.
    fn into_response(self) -> Response {
        if self.request_id.is_empty() {
            let mut resp = Response::new(axum::body::Body::empty());
            resp.extensions_mut().insert(PendingError(self));
            return resp;
        }
        let body = ErrorEnvelope {
            success: false,
            error: ErrorDetail {
                code: self.code,
                message: &self.message,
                field: self.field.as_deref(),
                request_id: &self.request_id,
            },
        };
        let mut resp = (self.status, axum::Json(body)).into_response();
        let h = resp.headers_mut();
        if let Some(s) = self.retry_after {
            h.insert("retry-after", HeaderValue::from(s));
        }
        for (k, v) in self.headers {
            if let Ok(v) = HeaderValue::from_str(&v) {
                h.insert(k, v);
            }
        }
        resp
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_search_no_shard_answered_is_a_503_to_retry_that_names_no_internals() {
        let e = ApiError::from(sextant_core::Error::NoShardAnswered("shard 0: dense: connection reset".into()));
        assert_eq!((e.status, e.code, e.retry_after), (StatusCode::SERVICE_UNAVAILABLE, "unavailable", Some(5)));
        assert!(!e.message.contains("connection reset"), "{}", e.message);
        let other = ApiError::from(sextant_core::Error::AllPathsFailed("dense: down".into()));
        assert_eq!(other.status, StatusCode::INTERNAL_SERVER_ERROR);
    }
}
