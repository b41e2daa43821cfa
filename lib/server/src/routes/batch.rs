//! `POST /v1/indexes/{index}/documents:batch`: many documents in one call.
//!
//! The body is a JSON array (`application/json`) or one document per line
//! (`application/x-ndjson`); each document is the JSON a `PUT` takes plus its
//! `documentId`. At most [`MAX_BATCH_DOCUMENTS`] documents and the server's document-size
//! limit for the whole body. The store writes them together ([`DocumentStore::put_many`]):
//! the embedded server encodes the batch at once and logs it with one flush, so every
//! document written is durable and searchable when the answer comes.
//!
//! The answer has one result per document, in the order sent: what the store did (as a
//! `PUT` answers), or the error naming the field. A document refused leaves the others
//! written. The status is `200` (`202` when the writes are pending, on AWS) whenever the
//! batch itself could be read; `written` and `failed` count the documents.
//!
//! [`DocumentStore::put_many`]: crate::documents::DocumentStore::put_many

use std::sync::Arc;

use axum::extract::{Path, Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Serialize;
use serde_json::Value;
use sextant_core::corpus::Document;
use sextant_keys::Scope;

use super::documents::{answer, blocking, json_document, store_for, DocumentBody};
use crate::auth::RawCall;
use crate::documents::{check_document_path, Written};
use crate::envelope::ApiError;
use crate::state::AppState;

/// Documents one batch may hold.
pub const MAX_BATCH_DOCUMENTS: usize = 1000;

/// Why one document of a batch was not written: the envelope's `error` without the
/// request id (the batch's answer carries it).
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct BatchError {
    /// Stable code: `invalid_request` (the document; `field` names what), or `unavailable`
    /// (the store could not take it now: send it again).
    pub code: &'static str,
    /// What went wrong, for a person.
    pub message: String,
    /// The field of the document at fault, when there is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
}

/// One document's result.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BatchResult {
    /// The document's id, when it had one.
    pub document_id: Option<String>,
    /// The segments it was cut into, when written.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub segments: Option<usize>,
    /// What the store did, when written: `status` (`live` or `pending`), and where known
    /// `created`, `chunks` and `seq`.
    #[serde(flatten)]
    pub written: Option<Written>,
    /// Why it was not written.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<BatchError>,
}

/// The answer to a batch.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BatchResponse {
    /// The index written.
    pub index: String,
    /// Documents written.
    pub written: usize,
    /// Documents not written (each result with an `error`).
    pub failed: usize,
    /// One result per document, in the order sent.
    pub results: Vec<BatchResult>,
    /// The request's id.
    pub request_id: String,
}

/// `POST /v1/indexes/{index}/documents:batch`.
pub(crate) async fn handle(State(state): State<Arc<AppState>>, Path(index): Path<String>, req: Request) -> Response {
    let limit = state.config.max_document_bytes;
    answer(state, req, limit, |state, call| batch_call(state, index, call)).await
}

async fn batch_call(state: Arc<AppState>, index: String, call: RawCall) -> Result<Response, ApiError> {
    let items = items_of(&call)?;
    let store = store_for(&state, &call.caller, &index, Scope::Write)?;
    let mut results: Vec<BatchResult> = Vec::with_capacity(items.len());
    let mut documents: Vec<Document> = Vec::new();
    for item in items {
        match item.and_then(|(id, body)| json_document(&id, body).map_err(|e| (Some(id), batch_error(e)))) {
            Ok(document) => {
                results.push(BatchResult {
                    document_id: Some(document.document_id.clone()),
                    segments: Some(document.segments.len()),
                    written: None,
                    error: None,
                });
                documents.push(document);
            }
            Err((document_id, e)) => {
                results.push(BatchResult { document_id, segments: None, written: None, error: Some(e) })
            }
        }
    }
    let outcomes =
        if documents.is_empty() { Vec::new() } else { blocking(move || store.put_many(documents)).await?? };
    let mut outcomes = outcomes.into_iter();
    for result in results.iter_mut().filter(|r| r.error.is_none()) {
        match outcomes.next().expect("an outcome per document") {
            Ok(written) => result.written = Some(written),
            Err(e) => {
                result.segments = None;
                result.error = Some(batch_error(e.into()));
            }
        }
    }
    crate::access::record(|r| r.index = Some(index.clone()));
    let written = results.iter().filter(|r| r.written.is_some()).count();
    let pending = results.iter().any(|r| r.written.as_ref().is_some_and(|w| w.status == "pending"));
    let status = if pending { StatusCode::ACCEPTED } else { StatusCode::OK };
    let body = BatchResponse { index, written, failed: results.len() - written, results, request_id: call.request_id };
    Ok((status, Json(body)).into_response())
}

/// A document of the batch as read: its id and body, or its id (if any) and the error.
type Item = Result<(String, DocumentBody), (Option<String>, BatchError)>;

/// The documents of the batch's body, each read as far as it goes: a body that is not a
/// batch at all is the request's error; a document that cannot be read is its own.
fn items_of(call: &RawCall) -> Result<Vec<Item>, ApiError> {
    let ct = call.headers.get("content-type").and_then(|v| v.to_str().ok()).unwrap_or("");
    let mime = ct.split(';').next().unwrap_or("").trim().to_ascii_lowercase();
    let values: Vec<Result<Value, ApiError>> = match mime.as_str() {
        "application/json" => {
            if call.body.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'[') {
                return Err(ApiError::bad_body(
                    "the request body must be a JSON array of documents (or one document per line, as \
                     application/x-ndjson)",
                ));
            }
            let array: Vec<Value> = serde_json::from_slice(&call.body)
                .map_err(|e| ApiError::bad_body(format!("the request body is not valid JSON: {e}")))?;
            array.into_iter().map(Ok).collect()
        }
        "application/x-ndjson" | "application/ndjson" | "application/jsonl" | "application/x-jsonlines" => call
            .body
            .split(|&b| b == b'\n')
            .enumerate()
            .filter(|(_, line)| !line.iter().all(u8::is_ascii_whitespace))
            .map(|(n, line)| {
                serde_json::from_slice(line)
                    .map_err(|e| ApiError::bad_body(format!("line {} is not a JSON document: {e}", n + 1)))
            })
            .collect(),
        _ => {
            let mut e = ApiError::unsupported_media_type();
            e.message = "send the batch as application/json (an array of documents) or application/x-ndjson (one \
                         document per line)"
                .into();
            return Err(e);
        }
    };
    if values.is_empty() {
        return Err(ApiError::bad_body("the batch holds no documents"));
    }
    if values.len() > MAX_BATCH_DOCUMENTS {
        return Err(ApiError::bad_body(format!(
            "a batch holds at most {MAX_BATCH_DOCUMENTS} documents, got {}: send the rest in another batch",
            values.len()
        )));
    }
    Ok(values.into_iter().map(|v| v.map_err(|e| (None, batch_error(e))).and_then(item_of)).collect())
}

/// One document of the batch: a `PUT`'s JSON body with its `documentId`.
fn item_of(value: Value) -> Item {
    if !value.is_object() {
        return Err((None, batch_error(ApiError::bad_body("a document of a batch must be a JSON object"))));
    }
    let id = value.get("documentId").and_then(Value::as_str).map(str::to_string);
    let body = crate::request::json_value::<DocumentBody>(value).map_err(|e| (id.clone(), batch_error(e)))?;
    let Some(id) = body.document_id.clone() else {
        return Err((None, batch_error(ApiError::invalid("documentId", "is required in a batch: the document's id"))));
    };
    check_document_path(&id, "documentId").map_err(|e| (Some(id.clone()), batch_error(e)))?;
    Ok((id, body))
}

fn batch_error(e: ApiError) -> BatchError {
    BatchError { code: e.code, message: e.message, field: e.field }
}
