//! Response headers set deliberately on every answer, errors included: security headers fit
//! for a JSON API, and CORS for the origins the operator lists, and no other.
//!
//! CORS is off by default. An API key in a web page is a key anyone can read, so browser
//! access is something an operator opts into per origin (`SEXTANT_CORS_ORIGINS`, or
//! `sextant serve --cors-origin`), typically for a backend-for-frontend on the same site.
//! Preflights from listed origins are answered before authentication (browsers send no
//! credentials on them); a preflight from any other origin is a 403 in the error envelope.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::envelope::ApiError;
use crate::state::AppState;

/// Headers every response carries. The API serves JSON to programs (and, from `sextant
/// serve`, the playground's own three files, under their own policy): nothing may be sniffed as HTML, framed, cached by a shared cache (answers depend on the key) or
/// leak a referrer; HSTS tells browsers to keep to HTTPS.
pub const SECURITY_HEADERS: [(&str, &str); 6] = [
    ("x-content-type-options", "nosniff"),
    ("x-frame-options", "DENY"),
    ("content-security-policy", "default-src 'none'; frame-ancestors 'none'"),
    ("referrer-policy", "no-referrer"),
    ("cache-control", "no-store"),
    ("strict-transport-security", "max-age=31536000; includeSubDomains"),
];

/// Request headers a browser may send cross-origin.
const ALLOWED_HEADERS: &str = "authorization, content-type, x-api-key";
/// Response headers a browser may read cross-origin.
const EXPOSED_HEADERS: &str = "x-request-id, retry-after, x-ratelimit-limit, x-ratelimit-remaining, x-ratelimit-reset";
/// How long a browser may cache a preflight answer (seconds).
const PREFLIGHT_MAX_AGE: &str = "600";

/// Parses a comma-separated origin list (`https://app.example.com, https://admin.example.com`
/// or `*`): each origin is a scheme and host with an optional port, no path. An error names
/// the bad entry.
pub fn parse_origins(list: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    for o in list.split(',').map(str::trim).filter(|o| !o.is_empty()) {
        let ok = o == "*"
            || ((o.starts_with("https://") || o.starts_with("http://"))
                && !o.ends_with('/')
                && o.splitn(4, '/').count() == 3
                && HeaderValue::from_str(o).is_ok());
        if !ok {
            return Err(format!("{o:?} is not an origin (scheme://host[:port], no path) or *"));
        }
        out.push(o.to_string());
    }
    Ok(out)
}

/// Whether `origin` is listed (`*` lists every origin).
fn allowed(origins: &[String], origin: &str) -> bool {
    origins.iter().any(|o| o == "*" || o == origin)
}

/// Middleware: answers CORS preflights, then sets the security headers, and the CORS headers
/// for a listed origin, on whatever the rest of the router answered.
pub async fn apply(State(state): State<Arc<AppState>>, req: Request, next: Next) -> Response {
    let origins = &state.config.cors_origins;
    let origin = req.headers().get(header::ORIGIN).and_then(|v| v.to_str().ok()).map(str::to_string);
    let preflight =
        req.method() == Method::OPTIONS && req.headers().contains_key(header::ACCESS_CONTROL_REQUEST_METHOD);
    let mut resp = match (&origin, preflight) {
        (Some(o), true) if allowed(origins, o) => {
            let mut r = StatusCode::NO_CONTENT.into_response();
            let h = r.headers_mut();
            h.insert(header::ACCESS_CONTROL_ALLOW_METHODS, HeaderValue::from_static("GET, POST"));
            h.insert(header::ACCESS_CONTROL_ALLOW_HEADERS, HeaderValue::from_static(ALLOWED_HEADERS));
            h.insert(header::ACCESS_CONTROL_MAX_AGE, HeaderValue::from_static(PREFLIGHT_MAX_AGE));
            r
        }
        (_, true) => {
            let why = match &origin {
                Some(o) => format!(
                    "cross-origin requests from {o} are not allowed (SEXTANT_CORS_ORIGINS lists the allowed origins)"
                ),
                None => "a CORS preflight needs an Origin header".to_string(),
            };
            ApiError::forbidden(why).into_response()
        }
        _ => next.run(req).await,
    };
    let h = resp.headers_mut();
    for (name, value) in SECURITY_HEADERS {
        // The playground's files carry their own policy, which lets the page run its own
        // script and nothing else. Every other answer gets `default-src 'none'`.
        if name == "content-security-policy" && h.contains_key(header::CONTENT_SECURITY_POLICY) {
            continue;
        }
        h.insert(name, HeaderValue::from_static(value));
    }
    if let Some(o) = origin.filter(|o| allowed(origins, o)) {
        if let Ok(v) = HeaderValue::from_str(&o) {
            h.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, v);
            h.insert(header::ACCESS_CONTROL_EXPOSE_HEADERS, HeaderValue::from_static(EXPOSED_HEADERS));
        }
    }
    // Answers differ by origin whenever CORS is on: caches must key on it.
    if !origins.is_empty() {
        h.append(header::VARY, HeaderValue::from_static("origin"));
    }
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_parse_and_bad_ones_are_named() {
        assert_eq!(parse_origins("").unwrap(), Vec::<String>::new());
        assert_eq!(
            parse_origins(" https://a.example.com , http://localhost:3000 ").unwrap(),
            ["https://a.example.com", "http://localhost:3000"]
        );
        assert_eq!(parse_origins("*").unwrap(), ["*"]);
        for bad in ["a.example.com", "https://a.example.com/", "https://a.example.com/app", "ftp://x"] {
            let e = parse_origins(bad).unwrap_err();
            assert!(e.contains(bad), "{e}");
        }
    }

    #[test]
    fn matching_is_exact_unless_wildcard() {
        let list = vec!["https://app.example.com".to_string()];
        assert!(allowed(&list, "https://app.example.com"));
        assert!(!allowed(&list, "https://app.example.com.evil.net"));
        assert!(!allowed(&list, "http://app.example.com"));
        assert!(!allowed(&[], "https://app.example.com"));
        assert!(allowed(&["*".to_string()], "https://anything.example"));
    }
}
