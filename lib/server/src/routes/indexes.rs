//! The indexes themselves:
//!
//! | call | scope | answer |
//! |---|---|---|
//! | `GET /v1/indexes` | any key | the indexes the key may read, in id order |
//! | `GET /v1/indexes/{index}` | read | its documents, chunks, version, paths, options |
//! | `PUT /v1/indexes/{index}` | admin | creates an empty index that takes documents (`201`; `200` when it exists with the same options) |
//! | `DELETE /v1/indexes/{index}` | admin | deletes an index created through the API and its documents |
//!
//! Creating and deleting are the [`IndexAdmin`]'s, which the process serving the API gives
//! the state ([`AppState::set_index_admin`]): `sextant serve` creates indexes in its data
//! directory. Where there is none, both answer `501`.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::extract::{Path, Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::{Deserialize, Serialize};
use sextant_keys::Scope;

use super::documents::{answer, blocking, require_scope};
use crate::auth::RawCall;
use crate::envelope::ApiError;
use crate::state::{AppState, Caller, ServedIndex};

/// How an index cuts its documents: the options of `PUT /v1/indexes/{index}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct IndexOptions {
    /// Tokens per chunk, 32 to 512 (default: the server's, 200 unless it was started with
    /// another `--chunk-tokens`).
    #[serde(default)]
    pub chunk_tokens: Option<usize>,
    /// Tokens a chunk repeats from the one before it, at most half of `chunkTokens`
    /// (default: the server's, 0 unless it was started with another `--chunk-overlap`).
    #[serde(default)]
    pub chunk_overlap: Option<usize>,
}

/// Tokens per chunk an index may be created with.
pub const CHUNK_TOKENS: std::ops::RangeInclusive<usize> = 32..=512;

impl IndexOptions {
    /// The options, checked: the error names the field.
    pub fn check(&self) -> Result<(), ApiError> {
        if let Some(t) = self.chunk_tokens {
            if !CHUNK_TOKENS.contains(&t) {
                return Err(ApiError::invalid(
                    "chunkTokens",
                    format!("must be from {} to {}, got {t}", CHUNK_TOKENS.start(), CHUNK_TOKENS.end()),
                ));
            }
        }
        if let (Some(o), t) = (self.chunk_overlap, self.chunk_tokens.unwrap_or(*CHUNK_TOKENS.end())) {
            if o > t / 2 {
                return Err(ApiError::invalid(
                    "chunkOverlap",
                    format!("must be at most half of chunkTokens ({t}), got {o}"),
                ));
            }
        }
        Ok(())
    }
}

impl IndexOptions {
    /// The chunk tokens and overlap an index is created with: the request's, `defaults`
    /// (tokens, overlap) for what it leaves out, checked together (the overlap at most half
    /// the tokens), the error naming the field.
    pub fn resolve(&self, defaults: (usize, usize)) -> Result<(usize, usize), AdminError> {
        let (tokens, overlap) = (self.chunk_tokens.unwrap_or(defaults.0), self.chunk_overlap.unwrap_or(defaults.1));
        if overlap > tokens / 2 {
            return Err(AdminError::Invalid {
                field: "chunkOverlap".into(),
                reason: format!("must be at most half of chunkTokens ({tokens}), got {overlap}"),
            });
        }
        Ok((tokens, overlap))
    }
}

/// What an index is cut with, as built.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct IndexSettings {
    /// Tokens per chunk.
    pub chunk_tokens: usize,
    /// Tokens a chunk repeats from the one before it.
    pub chunk_overlap: usize,
    /// Tokens per dense window (0: one vector per chunk).
    pub dense_window: usize,
    /// The dense model's id.
    pub dense_model: String,
    /// The SPLADE model's id.
    pub sparse_model: String,
}

/// One index as a key sees it.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct IndexInfo {
    /// Its id.
    pub index: String,
    /// Documents served (written ones included, deleted ones not).
    pub documents: usize,
    /// Chunks served.
    pub chunks: usize,
    /// The published version served, when the index is loaded from S3.
    pub version: Option<String>,
    /// When the version served was built (seconds since the Unix epoch).
    pub built_unix: u64,
    /// Whether it takes documents through the document API.
    pub writable: bool,
    /// Whether `/v1/retrieve`, `/v1/search` and `/v1/context` read it when no index is named.
    pub default: bool,
    /// `ready` when every retrieval path serves, else `building`.
    pub state: &'static str,
    /// Each retrieval path's state: `ready`, or `building` while its index builds.
    pub paths: BTreeMap<&'static str, &'static str>,
    /// How it was built.
    pub settings: IndexSettings,
    /// The bytes it holds in memory once loaded, as estimated when it was built (0: not
    /// recorded); a function needs about 3.4 times this plus 16 MiB beside its models to
    /// swap in a version of this size (infra/README.md).
    pub resident_bytes: u64,
}

/// `GET /v1/indexes`.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct IndexList {
    /// The indexes the key may read, in id order.
    pub indexes: Vec<IndexInfo>,
    /// The request's id.
    pub request_id: String,
}

/// `GET`, `PUT` and `DELETE /v1/indexes/{index}`.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct IndexResponse {
    /// The index (absent after a `DELETE`).
    #[serde(flatten)]
    pub info: Option<IndexInfo>,
    /// `true` after a `DELETE`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deleted: Option<bool>,
    /// The request's id.
    pub request_id: String,
}

/// Why the admin refused or failed a call.
#[derive(Debug, Clone, PartialEq)]
pub enum AdminError {
    /// The request was refused (a 400 naming the field, or a 409 when `field` is `index`).
    Invalid {
        /// The field at fault.
        field: String,
        /// Why, in the API's words.
        reason: String,
    },
    /// The index exists and cannot be created or deleted as asked (a 409).
    Conflict(String),
    /// The admin cannot do it now (a 503; the cause is logged).
    Unavailable(String),
}

impl From<AdminError> for ApiError {
    fn from(e: AdminError) -> Self {
        match e {
            AdminError::Invalid { field, reason } => ApiError::invalid(field, reason),
            AdminError::Conflict(message) => ApiError::conflict(message),
            AdminError::Unavailable(why) => {
                tracing::error!("index admin: {why}");
                ApiError::unavailable("the index could not be changed now; retry shortly", 2)
            }
        }
    }
}

/// Creates and deletes indexes. Calls block (they build and write to disk): handlers run
/// them off the async threads. When a call returns, the state already serves (or no longer
/// serves) the index.
pub trait IndexAdmin: Send + Sync {
    /// Creates index `id`, empty, taking documents, cut with `options`: `Ok(false)` when it
    /// exists already with those options (a `200`), `Ok(true)` when created (a `201`).
    fn create(&self, id: &str, options: IndexOptions) -> Result<bool, AdminError>;
    /// Deletes index `id` and its documents: `Ok(false)` when there is none.
    fn delete(&self, id: &str) -> Result<bool, AdminError>;
}

/// An index id: 1-64 characters of `a-z`, `0-9`, `-` and `_`, starting with a letter or a
/// digit (it names a directory, an S3 prefix and a path segment).
pub fn check_index_id(id: &str) -> Result<(), ApiError> {
    let ok = (1..=64).contains(&id.len())
        && id.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
        && id.bytes().next().is_some_and(|b| b.is_ascii_alphanumeric());
    if ok {
        Ok(())
    } else {
        Err(ApiError::invalid(
            "index",
            format!(
                "must be 1 to 64 characters of a-z, 0-9, '-' and '_', starting with a letter or a digit, got {}",
                crate::envelope::echoed(id, 64)
            ),
        ))
    }
}

/// What a key sees of `served`.
fn info(state: &AppState, id: &str, served: &ServedIndex) -> IndexInfo {
    let index = served.searcher.view();
    let live: Vec<u32> = (0..index.document_count() as u32).filter(|&d| !index.is_withdrawn(d)).collect();
    let chunks = live.iter().map(|&d| index.chunks_of(d).len()).sum();
    let paths = served.path_states();
    let m = index.manifest();
    IndexInfo {
        index: id.to_string(),
        documents: live.len(),
        chunks,
        version: state.version(id),
        built_unix: m.created_unix,
        writable: state.document_store(id).is_some(),
        default: state.config.default_index == id,
        state: if paths.values().all(|s| *s == "ready") { "ready" } else { "building" },
        paths,
        resident_bytes: m.resident_bytes,
        settings: IndexSettings {
            chunk_tokens: m.chunk_tokens,
            chunk_overlap: m.chunk_overlap,
            dense_window: m.dense_window,
            dense_model: m.dense_model.id.clone(),
            sparse_model: m.sparse_model.id.clone(),
        },
    }
}

/// `GET /v1/indexes`.
pub(crate) async fn list(State(state): State<Arc<AppState>>, req: Request) -> Response {
    let limit = state.config.max_body_bytes;
    answer(state, req, limit, |state, call| async move {
        let indexes = state.indexes()?;
        let readable =
            indexes.iter().filter(|(id, _)| call.caller.key.can_read(id)).map(|(id, s)| info(&state, id, s)).collect();
        Ok(Json(IndexList { indexes: readable, request_id: call.request_id }).into_response())
    })
    .await
}

/// `GET /v1/indexes/{index}`.
pub(crate) async fn get_one(State(state): State<Arc<AppState>>, Path(index): Path<String>, req: Request) -> Response {
    let limit = state.config.max_body_bytes;
    answer(state, req, limit, |state, call| async move {
        let served = state.index_for(&call.caller, &index)?;
        let info = info(&state, &index, &served);
        Ok(Json(IndexResponse { info: Some(info), deleted: None, request_id: call.request_id }).into_response())
    })
    .await
}

/// The admin, for a caller holding the admin scope on `index`.
fn admin_for(state: &AppState, caller: &Caller, index: &str) -> Result<Arc<dyn IndexAdmin>, ApiError> {
    check_index_id(index)?;
    require_scope(caller, index, Scope::Admin, "create or delete")?;
    state.index_admin().ok_or_else(|| {
        ApiError::not_implemented(
            "indexes are not created or deleted through this deployment's API: build them with the index-build \
             workflow (docs/aws.md)",
        )
    })
}

/// `PUT /v1/indexes/{index}`: the body is [`IndexOptions`] (or empty: the defaults).
pub(crate) async fn put(State(state): State<Arc<AppState>>, Path(index): Path<String>, req: Request) -> Response {
    let limit = state.config.max_body_bytes;
    answer(state, req, limit, |state, call| put_call(state, index, call)).await
}

async fn put_call(state: Arc<AppState>, index: String, call: RawCall) -> Result<Response, ApiError> {
    let options: IndexOptions = if call.body.iter().all(u8::is_ascii_whitespace) {
        IndexOptions { chunk_tokens: None, chunk_overlap: None }
    } else {
        crate::request::json_body(&call.headers, &call.body, call.body.len())?
    };
    options.check()?;
    let admin = admin_for(&state, &call.caller, &index)?;
    let id = index.clone();
    let created = blocking(move || admin.create(&id, options)).await??;
    let served = state.loaded_index(&index).ok_or_else(ApiError::internal)?;
    let body = IndexResponse { info: Some(info(&state, &index, &served)), deleted: None, request_id: call.request_id };
    Ok((if created { StatusCode::CREATED } else { StatusCode::OK }, Json(body)).into_response())
}

/// `DELETE /v1/indexes/{index}`.
pub(crate) async fn delete(State(state): State<Arc<AppState>>, Path(index): Path<String>, req: Request) -> Response {
    let limit = state.config.max_body_bytes;
    answer(state, req, limit, |state, call| async move {
        let admin = admin_for(&state, &call.caller, &index)?;
        let id = index.clone();
        if !blocking(move || admin.delete(&id)).await?? {
            return Err(ApiError::not_found(format!("there is no index {index} to delete")));
        }
        Ok(Json(IndexResponse { info: None, deleted: Some(true), request_id: call.request_id }).into_response())
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_ids_name_a_directory_and_a_prefix_safely() {
        for ok in ["demo", "team-docs", "a", "q3_2024", &"x".repeat(64)] {
            assert!(check_index_id(ok).is_ok(), "{ok}");
        }
        for bad in ["", "Team", "-x", "a/b", "a.b", "..", "é", &"x".repeat(65)] {
            let e = check_index_id(bad).unwrap_err();
            assert_eq!(e.field.as_deref(), Some("index"), "{bad}");
        }
    }

    #[test]
    fn options_are_checked_and_the_error_names_the_field() {
        let o = |t, v| IndexOptions { chunk_tokens: t, chunk_overlap: v };
        assert!(o(None, None).check().is_ok());
        assert!(o(Some(128), Some(32)).check().is_ok());
        assert_eq!(o(Some(8), None).check().unwrap_err().field.as_deref(), Some("chunkTokens"));
        assert_eq!(o(Some(600), None).check().unwrap_err().field.as_deref(), Some("chunkTokens"));
        assert_eq!(o(Some(64), Some(33)).check().unwrap_err().field.as_deref(), Some("chunkOverlap"));
        assert!(o(Some(64), Some(32)).check().is_ok());
    }
}
