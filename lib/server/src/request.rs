//! Reading a JSON body: media type, size limit, and decoding errors that name the field.

use axum::body::Bytes;
use axum::http::HeaderMap;
use serde::de::DeserializeOwned;

use crate::envelope::ApiError;

/// Decodes `body` as `T`: 415 unless the content type is JSON, 413 over `limit` bytes,
/// 400 naming the JSON path of a missing, unknown or mistyped field.
pub fn json_body<T: DeserializeOwned>(headers: &HeaderMap, body: &Bytes, limit: usize) -> Result<T, ApiError> {
    let ct = headers.get("content-type").and_then(|v| v.to_str().ok()).unwrap_or("");
    let mime = ct.split(';').next().unwrap_or("").trim().to_ascii_lowercase();
    if !(mime == "application/json" || (mime.starts_with("application/") && mime.ends_with("+json"))) {
        return Err(ApiError::unsupported_media_type());
    }
    if body.len() > limit {
        return Err(ApiError::too_large(limit));
    }
    if body.iter().all(|b| b.is_ascii_whitespace()) {
        return Err(ApiError::bad_body("the request body is empty: send a JSON object"));
    }
    let de = &mut serde_json::Deserializer::from_slice(body);
    decoded(serde_path_to_error::deserialize(de))
}

/// Decodes a JSON value already built (from a query string, say) as `T`, with the errors of
/// [`json_body`].
pub fn json_value<T: DeserializeOwned>(value: serde_json::Value) -> Result<T, ApiError> {
    decoded(serde_path_to_error::deserialize(value))
}

/// A decoding result, its error turned into a 400 naming the JSON path.
fn decoded<T>(result: Result<T, serde_path_to_error::Error<serde_json::Error>>) -> Result<T, ApiError> {
    result.map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        let reason = inner.to_string();
        // serde_json appends " at line L column C"; keep the message short.
        let reason = reason.split(" at line ").next().unwrap_or(&reason).to_string();
        if inner.is_syntax() || inner.is_eof() {
            ApiError::bad_body(format!("the request body is not valid JSON: {reason}"))
        } else if let Some(field) = reason.strip_prefix("missing field `").and_then(|r| r.split('`').next()) {
            let full = if path == "." { field.to_string() } else { format!("{path}.{field}") };
            ApiError::invalid(full, "is required")
        } else if reason.starts_with("unknown field `") {
            // The path already ends with the unknown field.
            let full = path;
            let expected = reason.split(", expected ").nth(1).unwrap_or("").to_string();
            ApiError::invalid(full, format!("is not a known field (expected {expected})"))
        } else {
            ApiError::invalid(if path == "." { "body".into() } else { path }, reason)
        }
    })
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;

    use super::*;

    #[derive(Deserialize, Debug)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Req {
        query: String,
        #[serde(default)]
        filters: Option<F>,
    }
    #[derive(Deserialize, Debug)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct F {
        year: Option<i32>,
    }

    fn headers(ct: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert("content-type", ct.parse().unwrap());
        h
    }

    fn err(ct: &str, body: &str) -> ApiError {
        json_body::<Req>(&headers(ct), &Bytes::from(body.to_string()), 100).unwrap_err()
    }

    #[test]
    fn errors_name_the_field_and_the_reason() {
        let e = err("application/json", r#"{"filters": {}}"#);
        assert_eq!((e.status.as_u16(), e.field.as_deref()), (400, Some("query")));
        let e = err("application/json", r#"{"query": "x", "filters": {"year": "2024"}}"#);
        assert_eq!(e.field.as_deref(), Some("filters.year"));
        assert!(e.message.contains("invalid type: string"), "{}", e.message);
        let e = err("application/json", r#"{"query": "x", "filters": {"yaer": 2024}}"#);
        assert_eq!(e.field.as_deref(), Some("filters.yaer"));
        assert!(e.message.contains("not a known field"), "{}", e.message);
        let e = err("application/json", r#"{"query": 5}"#);
        assert_eq!(e.field.as_deref(), Some("query"));
        let e = err("application/json", r#"{"query": "#);
        assert!(e.message.contains("not valid JSON") && e.field.is_none(), "{}", e.message);
        assert_eq!(err("application/json", "  ").status.as_u16(), 400);
        assert_eq!(err("text/plain", r#"{"query": "x"}"#).status.as_u16(), 415);
        assert_eq!(
            err("application/json; charset=utf-8", &format!(r#"{{"query": "{}"}}"#, "x".repeat(200))).status.as_u16(),
            413
        );
        assert!(json_body::<Req>(&headers("application/json; charset=utf-8"), &Bytes::from(r#"{"query":"x"}"#), 100)
            .is_ok());
    }
}
