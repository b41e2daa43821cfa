//! The playground: one page at `/` that sends a question to this server and draws the
//! answer (the evidence highlighted in its document, each path's rank, the stage timings,
//! the period-mismatch and contradiction banners, `/v1/context` tables and a series chart).
//!
//! Its three files are compiled into the binary (it works offline, from the same origin),
//! and served under a Content-Security-Policy that lets the page run only its own script and
//! style and talk only to this origin: no inline code, no other host. The key a user types
//! stays in the page's memory; the page stores nothing.

use axum::http::{header, HeaderValue};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;

/// The page's policy: its own script, style and requests; nothing inline, nothing framed.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
     connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

const INDEX_HTML: &str = include_str!("../assets/playground/index.html");
const APP_JS: &str = include_str!("../assets/playground/app.js");
const APP_CSS: &str = include_str!("../assets/playground/app.css");

/// The playground's routes: `/`, `/playground/app.js` and `/playground/app.css`.
pub fn routes<S: Clone + Send + Sync + 'static>() -> Router<S> {
    Router::new()
        .route("/", get(|| async { asset(INDEX_HTML, "text/html; charset=utf-8") }))
        .route("/playground/app.js", get(|| async { asset(APP_JS, "text/javascript; charset=utf-8") }))
        .route("/playground/app.css", get(|| async { asset(APP_CSS, "text/css; charset=utf-8") }))
}

/// One file with its type and the page's policy (the security-header layer keeps a policy
/// a route set).
fn asset(body: &'static str, content_type: &'static str) -> Response {
    let mut resp = body.into_response();
    let h = resp.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    h.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CONTENT_SECURITY_POLICY));
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The page keeps to its policy: no inline script or style, no handler attributes, no
    /// other origin, and nothing written to storage.
    #[test]
    fn the_page_holds_no_inline_code_and_no_other_origin() {
        let html = INDEX_HTML.to_ascii_lowercase();
        for script in html.split("<script").skip(1) {
            let tag = script.split('>').next().unwrap();
            assert!(tag.contains("src=\"/playground/"), "an inline or foreign script: <script{tag}>");
        }
        assert!(!html.contains("<style"), "inline style");
        assert!(!html.contains(" style="), "a style attribute");
        let handler = html.split_whitespace().any(|w| {
            w.strip_prefix("on")
                .and_then(|r| r.split_once('='))
                .is_some_and(|(n, _)| n.chars().all(|c| c.is_ascii_lowercase()))
        });
        assert!(!handler, "an inline event handler attribute");
        for file in [INDEX_HTML, APP_JS, APP_CSS] {
            // The SVG namespace is a name, not a place the page loads from.
            let rest = file.replace("http://www.w3.org/2000/svg", "");
            assert!(
                !rest.contains("http://") && !rest.contains("https://") && !rest.contains("//cdn"),
                "another origin"
            );
        }
        assert!(!APP_JS.contains("innerHTML") && !APP_JS.contains("eval("), "HTML or code built from strings");
        assert!(!APP_JS.contains("localStorage") && !APP_JS.contains("sessionStorage") && !APP_JS.contains("cookie"));
    }
}
