//! Reading a JSON body: media type, size limit, and decoding errors that name the field.

use axum::body::Bytes;
use axum::http::HeaderMap;
use serde::de::DeserializeOwned;

use crate::envelope::ApiError;

/// Reads a request's body, at most `limit` bytes, within `within`: a `Content-Length` over
/// the limit is a 413 before a byte is read, and a body without one is counted as it
/// streams and cut off at the limit (never buffered beyond it); a body still arriving after
/// `within` is a 408. Both are in the error envelope.
pub async fn read_body(
    body: axum::body::Body,
    headers: &HeaderMap,
    limit: usize,
    within: std::time::Duration,
) -> Result<Bytes, ApiError> {
    let declared =
        headers.get("content-length").and_then(|v| v.to_str().ok()).and_then(|v| v.trim().parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit as u64) {
        return Err(ApiError::too_large(limit));
    }
    let read = tokio::time::timeout(within, axum::body::to_bytes(body, limit)).await;
    let read = read.map_err(|_| ApiError::body_timeout(within))?;
    read.map_err(|e| {
        // axum reports the limit as "length limit exceeded"; anything else is a broken stream.
        if e.to_string().contains("length limit") {
            ApiError::too_large(limit)
        } else {
            ApiError::bad_body("the request body could not be read")
        }
    })
}

/// Decodes `body` as `T`: 415 unless the content type is JSON, 413 over `limit` bytes,
/// 400 naming the JSON path of a missing, unknown or mistyped field.
pub fn json_body<T: DeserializeOwned + schemars::JsonSchema + 'static>(
    headers: &HeaderMap,
    body: &Bytes,
    limit: usize,
) -> Result<T, ApiError> {
    let ct = headers.get("content-type").and_then(|v| v.to_str().ok()).unwrap_or("");
    let mime = ct.split(';').next().unwrap_or("").trim().to_ascii_lowercase();
    if !(mime == "application/json" || (mime.starts_with("application/") && mime.ends_with("+json"))) {
        return Err(ApiError::unsupported_media_type());
    }
    if body.len() > limit {
        return Err(ApiError::too_large(limit));
    }
    match body.iter().find(|b| !b.is_ascii_whitespace()) {
        None => return Err(ApiError::bad_body("the request body is empty: send a JSON object")),
        Some(b'{') => {}
        Some(b'[') => return Err(ApiError::bad_body("the request body must be a JSON object, not an array")),
        Some(_) => return Err(ApiError::bad_body("the request body must be a JSON object")),
    }
    let de = &mut serde_json::Deserializer::from_slice(body);
    let out = decoded(serde_path_to_error::deserialize(de))?;
    // Only a body with an array in it can hold one where an object belongs.
    if body.contains(&b'[') {
        if let Ok(value) = serde_json::from_slice::<serde_json::Value>(body) {
            refuse_arrays_for_objects::<T>(&value)?;
        }
    }
    Ok(out)
}

fn refuse_arrays_for_objects<T: schemars::JsonSchema + 'static>(value: &serde_json::Value) -> Result<(), ApiError> {
    match array_for_object::<T>(value) {
        Some(path) => Err(ApiError::invalid(path, "must be a JSON object, not an array")),
        None => Ok(()),
    }
}

/// Decodes a JSON value already built (from a query string, say) as `T`, with the errors of
/// [`json_body`].
pub fn json_value<T: DeserializeOwned + schemars::JsonSchema + 'static>(
    value: serde_json::Value,
) -> Result<T, ApiError> {
    if !value.is_object() {
        return Err(ApiError::bad_body("the request must be a JSON object"));
    }
    refuse_arrays_for_objects::<T>(&value)?;
    decoded(serde_path_to_error::deserialize(value))
}

/// The JSON path of the first array given where `T`'s schema wants an object, if any.
///
/// Serde reads a struct from an array by position (`"filters": [["AAPL"], 2024]` as
/// `{"tickers": ["AAPL"], "year": 2024}`); the API takes objects only. Checked against the
/// schema the OpenAPI document publishes, at every depth, after a successful decode.
fn array_for_object<T: schemars::JsonSchema + 'static>(value: &serde_json::Value) -> Option<String> {
    let schema = schema_of::<T>();
    let defs = schema.get("$defs").unwrap_or(&serde_json::Value::Null);
    let mut path = String::new();
    walk(value, &schema, defs, &mut path).then_some(path)
}

/// `T`'s JSON schema, generated once per type.
fn schema_of<T: schemars::JsonSchema + 'static>() -> std::sync::Arc<serde_json::Value> {
    use std::any::TypeId;
    use std::collections::HashMap;
    use std::sync::{Arc, Mutex, OnceLock};
    static SCHEMAS: OnceLock<Mutex<HashMap<TypeId, Arc<serde_json::Value>>>> = OnceLock::new();
    let mut cache = SCHEMAS.get_or_init(Default::default).lock().unwrap_or_else(|p| p.into_inner());
    cache.entry(TypeId::of::<T>()).or_insert_with(|| Arc::new(schemars::schema_for!(T).to_value())).clone()
}

/// The schema `s` points to (`$ref` into `defs` followed).
fn resolve<'a>(s: &'a serde_json::Value, defs: &'a serde_json::Value) -> &'a serde_json::Value {
    match s.get("$ref").and_then(|r| r.as_str()).and_then(|r| r.strip_prefix("#/$defs/")) {
        Some(name) => defs.get(name).map(|d| resolve(d, defs)).unwrap_or(s),
        None => s,
    }
}

/// The branches of `s`: its `anyOf`/`oneOf` alternatives, or itself.
fn branches<'a>(s: &'a serde_json::Value, defs: &'a serde_json::Value) -> Vec<&'a serde_json::Value> {
    let s = resolve(s, defs);
    match s.get("anyOf").or_else(|| s.get("oneOf")).and_then(|b| b.as_array()) {
        Some(list) => list.iter().flat_map(|b| branches(b, defs)).collect(),
        None => vec![s],
    }
}

/// Whether the schema allows JSON type `kind` (no `type` allows any).
fn allows(s: &serde_json::Value, kind: &str) -> bool {
    match s.get("type") {
        None => true,
        Some(serde_json::Value::String(t)) => t == kind,
        Some(serde_json::Value::Array(ts)) => ts.iter().any(|t| t == kind),
        Some(_) => true,
    }
}

/// Walks `value` beside `schema`, extending `path`; true (with `path` at it) on an array
/// where only an object is allowed.
fn walk(value: &serde_json::Value, schema: &serde_json::Value, defs: &serde_json::Value, path: &mut String) -> bool {
    let alternatives = branches(schema, defs);
    match value {
        serde_json::Value::Array(items) => {
            let list: Vec<_> = alternatives.iter().filter(|b| allows(b, "array")).collect();
            if list.is_empty() {
                return alternatives.iter().any(|b| allows(b, "object"));
            }
            let Some(item_schema) = list.iter().find_map(|b| b.get("items")) else { return false };
            for (i, item) in items.iter().enumerate() {
                let len = path.len();
                path.push_str(&format!("[{i}]"));
                if walk(item, item_schema, defs, path) {
                    return true;
                }
                path.truncate(len);
            }
            false
        }
        serde_json::Value::Object(fields) => {
            let Some(props) = alternatives.iter().find_map(|b| b.get("properties")) else { return false };
            for (k, v) in fields {
                let Some(sub) = props.get(k) else { continue };
                let len = path.len();
                if !path.is_empty() {
                    path.push('.');
                }
                path.push_str(k);
                if walk(v, sub, defs, path) {
                    return true;
                }
                path.truncate(len);
            }
            false
        }
        _ => false,
    }
}

/// A decoding result, its error turned into a 400 naming the JSON path.
fn decoded<T>(result: Result<T, serde_path_to_error::Error<serde_json::Error>>) -> Result<T, ApiError> {
    result.map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        let reason = inner.to_string();
        // serde_json appends " at line L column C"; keep the message short.
        let reason = reason.split(" at line ").next().unwrap_or(&reason).to_string();
        let reason = plain_words(&reason);
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

/// A decoding error in the API's words instead of Rust's: JSON's names for types ("an
/// object", "an array", "an integer"), never a Rust type or enum name.
fn plain_words(reason: &str) -> String {
    if reason.starts_with("invalid length ") && reason.contains("expected struct ") {
        return "must be a JSON object, not an array".into();
    }
    if reason.starts_with("data did not match any variant of untagged enum") {
        return "must be a string or an array of strings".into();
    }
    let mut out = reason.replace("invalid type: sequence", "invalid type: array");
    out = out.replace("invalid type: map", "invalid type: object");
    out = out.replace("expected a sequence", "expected an array");
    out = out.replace("expected a map", "expected an object");
    // "expected struct Foo" and "expected struct Foo with 5 elements".
    if let Some(at) = out.find("expected struct ") {
        out.truncate(at);
        out.push_str("expected a JSON object");
    }
    for (rust, json) in [
        ("usize", "a non-negative integer"),
        ("u64", "a non-negative integer"),
        ("u32", "a non-negative integer"),
        ("u16", "a non-negative integer"),
        ("u8", "a non-negative integer"),
        ("isize", "an integer"),
        ("i64", "an integer"),
        ("i32", "an integer"),
        ("i16", "an integer"),
        ("i8", "an integer"),
        ("f64", "a number"),
        ("f32", "a number"),
    ] {
        let needle = format!("expected {rust}");
        if out.ends_with(&needle) {
            out.truncate(out.len() - needle.len());
            out.push_str("expected ");
            out.push_str(json);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;

    use super::*;

    #[derive(Deserialize, Debug, schemars::JsonSchema)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Req {
        query: String,
        #[serde(default)]
        filters: Option<F>,
    }
    #[derive(Deserialize, Debug, schemars::JsonSchema)]
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

    #[test]
    fn errors_speak_json_not_rust() {
        for (rust, plain) in [
            (
                "invalid length 3, expected struct RetrieveRequest with 5 elements",
                "must be a JSON object, not an array",
            ),
            ("invalid type: sequence, expected struct Filters", "invalid type: array, expected a JSON object"),
            ("invalid type: string \"abc\", expected i32", "invalid type: string \"abc\", expected an integer"),
            (
                "invalid value: integer `-1`, expected usize",
                "invalid value: integer `-1`, expected a non-negative integer",
            ),
            ("invalid type: integer `5`, expected a sequence", "invalid type: integer `5`, expected an array"),
            ("data did not match any variant of untagged enum OneOrMany", "must be a string or an array of strings"),
            ("invalid type: map, expected f64", "invalid type: object, expected a number"),
        ] {
            assert_eq!(plain_words(rust), plain, "{rust}");
        }
    }

    #[test]
    fn a_body_that_is_not_an_object_is_refused() {
        assert_eq!(
            err("application/json", r#"["question", {"tickers": ["AAPL"]}, 2]"#).message,
            "the request body must be a JSON object, not an array"
        );
        assert_eq!(err("application/json", r#""question""#).message, "the request body must be a JSON object");
        assert_eq!(
            json_value::<Req>(serde_json::json!(["q"])).unwrap_err().message,
            "the request must be a JSON object"
        );
    }

    #[test]
    fn an_array_where_an_object_belongs_is_refused_at_any_depth() {
        // Serde alone reads `[2024]` as `{"year": 2024}`.
        let e = err("application/json", r#"{"query": "x", "filters": [2024]}"#);
        assert_eq!((e.status.as_u16(), e.field.as_deref()), (400, Some("filters")));
        assert_eq!(e.message, "filters: must be a JSON object, not an array");
        let e = json_value::<Req>(serde_json::json!({"query": "x", "filters": [2024]})).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("filters"));
        // Arrays where arrays belong, and objects where objects belong, pass.
        #[derive(Deserialize, Debug, schemars::JsonSchema)]
        #[allow(dead_code)]
        struct Many {
            items: Vec<F>,
            tags: Option<Vec<String>>,
        }
        let many = |body: &str| json_body::<Many>(&headers("application/json"), &Bytes::from(body.to_string()), 1000);
        assert!(many(r#"{"items": [{"year": 1}], "tags": ["a"]}"#).is_ok());
        let e = many(r#"{"items": [{"year": 1}, [2]]}"#).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("items[1]"));
    }
}
