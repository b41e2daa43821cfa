//! The document API of an index:
//!
//! | call | scope | answer |
//! |---|---|---|
//! | `PUT /v1/indexes/{index}/documents/{documentId}` | write | the write (`200` live, `202` pending) |
//! | `DELETE /v1/indexes/{index}/documents/{documentId}` | write | `200`, or `404` when there is none |
//! | `GET /v1/indexes/{index}/documents/{documentId}` | read | the document, its text and segments, `status` (`live` or `pending`) |
//! | `GET /v1/indexes/{index}/documents?limit=&cursor=` | read | a page of documents, in id order |
//! | `POST /v1/indexes/{index}/compact` | admin | folds the writes into a new version |
//!
//! A `PUT` body is either a raw file (`text/plain`, `text/markdown`, `text/html`,
//! `application/pdf`, whose segments keep their page; its
//! title and metadata in the `Sextant-Title` and `Sextant-Metadata` headers, the latter a
//! JSON object) or JSON (`application/json`): `text` (read as `contentType` says, plain
//! by default) or `segments`, with `title`, `metadata` and the financial fields. The
//! server segments raw text ([`sextant_core::corpus::segment_blocks`]); segments' character
//! offsets are exact in the rebuilt text, as for every document.

use std::sync::Arc;

use axum::extract::{Path, Query, Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sextant_core::corpus::{segment_blocks, Date, Document, DocumentType, Quarter, Segmented};
use sextant_keys::Scope;

use crate::auth::RawCall;
use crate::documents::{check_document_path, metadata_of, DocumentStore, StoredDocument, Written};
use crate::envelope::ApiError;
use crate::state::{AppState, Caller};

/// Documents a listing returns by default, and at most.
const DEFAULT_PAGE: usize = 100;
const MAX_PAGE: usize = 1000;

/// A document sent as JSON.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct DocumentBody {
    /// The document's id: required in a batch; a `PUT` names it in its path (when given
    /// here too, it must be the same).
    #[serde(default)]
    pub document_id: Option<String>,
    /// The document's text, read as `contentType` says (one of `text` and `segments`).
    #[serde(default)]
    pub text: Option<String>,
    /// How to read `text`: `text/plain` (default), `text/markdown` or `text/html`.
    #[serde(default)]
    pub content_type: Option<String>,
    /// The document already cut into segments (one of `text` and `segments`).
    #[serde(default)]
    pub segments: Option<Vec<String>>,
    /// The page of each of `segments`, from 1, never decreasing (a document with pages,
    /// such as a PDF whose text was extracted elsewhere); with `segments` only.
    #[serde(default)]
    pub pages: Option<Vec<u32>>,
    /// Its title (default: the first heading of Markdown or HTML, else none).
    #[serde(default)]
    pub title: Option<String>,
    /// The team's own fields: strings, numbers, booleans, dates, lists of strings, nested
    /// objects (see docs/api.md, "Your own documents").
    #[serde(default)]
    pub metadata: Option<Value>,
    /// `article` by default; `10-K`, `10-Q`, `earnings_call`, ...
    #[serde(default)]
    pub document_type: Option<String>,
    /// Company ticker.
    #[serde(default)]
    pub ticker: Option<String>,
    /// Fiscal year.
    #[serde(default)]
    pub year: Option<i32>,
    /// Fiscal quarter, `Q1`-`Q4`.
    #[serde(default)]
    pub quarter: Option<String>,
    /// Filing form.
    #[serde(default)]
    pub filing_type: Option<String>,
    /// Where the original lives.
    #[serde(default)]
    pub source_url: Option<String>,
    /// Publication date, `YYYY-MM-DD`.
    #[serde(default)]
    pub published_at: Option<String>,
}

/// The query of a listing.
#[derive(Debug, Deserialize)]
pub struct ListQuery {
    /// Documents per page.
    limit: Option<String>,
    /// The `nextCursor` of the page before.
    cursor: Option<String>,
}

/// The answer to a `PUT` or `DELETE`: `200` when the write is live (durable and searched
/// now), `202` when it is pending (stored; searched once the build it started is published).
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WriteResponse {
    /// The document written.
    pub document_id: String,
    /// Its index.
    pub index: String,
    /// The segments the document was cut into (a `PUT`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub segments: Option<usize>,
    /// `true` (a `DELETE`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deleted: Option<bool>,
    /// What the store did: `status` (`live` or `pending`), and where known `created`,
    /// `chunks` and `seq`.
    #[serde(flatten)]
    pub written: Written,
    /// The request's id.
    pub request_id: String,
}

/// A document's fields without its text, as a listing shows it.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DocumentSummary {
    /// Its id.
    pub document_id: String,
    /// Its title (empty when it has none).
    pub title: String,
    /// `article`, `10-K`, `10-Q`, `earnings_call`, ...
    pub document_type: DocumentType,
    /// Company ticker.
    pub ticker: Option<String>,
    /// Fiscal year.
    pub year: Option<i32>,
    /// Fiscal quarter.
    pub quarter: Option<Quarter>,
    /// Filing form.
    pub filing_type: Option<String>,
    /// Where the original lives.
    pub source_url: Option<String>,
    /// Publication date.
    pub published_at: Option<Date>,
    /// The team's own fields, nested as they were sent.
    pub metadata: serde_json::Map<String, Value>,
    /// Its chunks, when indexed.
    pub chunks: Option<usize>,
    /// `live` (searched) or `pending` (stored, not yet indexed).
    pub status: String,
    /// For a live document of a writable index: in a built (compacted) version, or in the
    /// delta written since.
    pub compacted: Option<bool>,
}

/// One segment of a document, with its place in the document's text.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DocumentSegment {
    /// The segment's text.
    pub text: String,
    /// Where it starts in `text`, in characters (Unicode scalar values).
    pub char_start: usize,
    /// Where it ends, exclusive.
    pub char_end: usize,
    /// The page it is on, from 1, in a document with pages (a PDF).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub page: Option<u32>,
}

/// `GET` of one document: its fields, its text and its segments.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DocumentResponse {
    /// The document's fields.
    #[serde(flatten)]
    pub summary: DocumentSummary,
    /// Its index.
    pub index: String,
    /// Its text: the segments joined by a blank line (`"\n\n"`).
    pub text: String,
    /// Its segments, with character offsets into `text`.
    pub segments: Vec<DocumentSegment>,
    /// The request's id.
    pub request_id: String,
}

/// A page of a listing, in id order.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DocumentPage {
    /// The index listed.
    pub index: String,
    /// The documents of this page.
    pub documents: Vec<DocumentSummary>,
    /// The `cursor` of the next page; `null` on the last one.
    pub next_cursor: Option<String>,
    /// The request's id.
    pub request_id: String,
}

/// The answer to `POST .../compact`.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CompactResponse {
    /// The index.
    pub index: String,
    /// Whether a new version was built (false: there were no writes to fold).
    pub compacted: bool,
    /// What the compaction did (version, documents, chunks, chunks encoded, seconds), when
    /// it ran.
    pub report: Option<Value>,
    /// The request's id.
    pub request_id: String,
}

/// A 403 unless the caller's key holds `scope` on `index`: it says what the key may not be
/// `doing` there, the scope needed and the scope held.
pub(crate) fn require_scope(caller: &Caller, index: &str, scope: Scope, doing: &str) -> Result<(), ApiError> {
    if caller.key.allows(index, scope) {
        return Ok(());
    }
    let held = caller.key.scope(index).map_or("none".to_string(), |s| s.name().to_string());
    Err(ApiError::forbidden(format!(
        "this API key may not {doing} index {} (it needs the {} scope there; it holds: {held})",
        crate::envelope::echoed(index, 64),
        scope.name()
    )))
}

/// The store of `index`, for a caller holding `scope` there.
pub(crate) fn store_for(
    state: &AppState,
    caller: &Caller,
    index: &str,
    scope: Scope,
) -> Result<Arc<dyn DocumentStore>, ApiError> {
    let shown = crate::envelope::echoed(index, 64);
    let doing = match scope {
        Scope::Read => "read",
        Scope::Write => "write the documents of",
        Scope::Admin => "administer",
    };
    require_scope(caller, index, scope, doing)?;
    state.document_store(index).ok_or_else(|| {
        ApiError::not_found(format!(
            "no index {shown} takes documents here (this server writes: {})",
            state.writable().join(", ")
        ))
    })
}

fn path_ids(
    path: Result<Path<(String, String)>, axum::extract::rejection::PathRejection>,
) -> Result<(String, String), ApiError> {
    let Path((index, id)) =
        path.map_err(|_| ApiError::bad_body("the path is not valid UTF-8 after percent-decoding"))?;
    check_document_path(&id, "documentId")?;
    Ok((index, id))
}

/// The raw body's media type, from `Content-Type` (`None`: JSON).
fn raw_media(headers: &axum::http::HeaderMap) -> Result<Option<sextant_ingest::MediaType>, ApiError> {
    let ct = headers.get("content-type").and_then(|v| v.to_str().ok()).unwrap_or("");
    let mime = ct.split(';').next().unwrap_or("").trim().to_ascii_lowercase();
    if mime == "application/json" || (mime.starts_with("application/") && mime.ends_with("+json")) {
        return Ok(None);
    }
    sextant_ingest::MediaType::from_content_type(ct).map(Some).map_err(|e| unsupported(&e.to_string()))
}

fn unsupported(message: &str) -> ApiError {
    let mut e = ApiError::unsupported_media_type();
    e.message = format!("{message} (or application/json with text or segments)");
    e
}

fn ingest_error(e: sextant_ingest::Error) -> ApiError {
    use sextant_ingest::Error as E;
    match e {
        E::UnsupportedMediaType { .. } | E::UnsupportedCharset { .. } | E::PdfUnavailable { .. } => {
            unsupported(&e.to_string())
        }
        E::TooLarge { .. } | E::PdfTooManyPages { .. } => {
            let mut too_large = ApiError::too_large(0);
            too_large.message = e.to_string();
            too_large
        }
        other => ApiError::bad_body(other.to_string()),
    }
}

/// The document a `PUT` describes.
async fn document_of(id: &str, call: &RawCall) -> Result<Document, ApiError> {
    let header = |name: &str| call.headers.get(name).map(|v| v.to_str().map(str::to_string));
    match raw_media(&call.headers)? {
        Some(media) => {
            let body = call.body.clone();
            let parsed = blocking(move || sextant_ingest::parse(media, &body)).await?.map_err(ingest_error)?;
            let title = match header("sextant-title") {
                Some(Ok(t)) => t,
                Some(Err(_)) => {
                    return Err(ApiError::invalid("Sextant-Title", "must be ASCII (send JSON for other titles)"))
                }
                None => parsed.title.clone().unwrap_or_default(),
            };
            let metadata = match header("sextant-metadata") {
                None => None,
                Some(Ok(t)) => Some(serde_json::from_str::<Value>(&t).map_err(|e| {
                    ApiError::invalid(
                        "Sextant-Metadata",
                        format!("must be a JSON object ({e}); escape non-ASCII as \\u"),
                    )
                })?),
                Some(Err(_)) => {
                    return Err(ApiError::invalid("Sextant-Metadata", "must be ASCII JSON (escape non-ASCII as \\u)"))
                }
            };
            let segmented = segment_blocks(parsed.blocks);
            Ok(Document {
                document_id: id.to_string(),
                title,
                document_type: "article".into(),
                segments: segmented.segments,
                pages: segmented.pages,
                metadata: metadata_of(metadata.as_ref())?,
                ..Default::default()
            })
        }
        None => {
            let body: DocumentBody = crate::request::json_body(&call.headers, &call.body, call.body.len().max(1))?;
            json_document(id, body)
        }
    }
}

/// The document that the JSON `body` describes, as document `id`.
pub(crate) fn json_document(id: &str, body: DocumentBody) -> Result<Document, ApiError> {
    if body.document_id.as_deref().is_some_and(|named| named != id) {
        return Err(ApiError::invalid("documentId", "is not the id the path names (leave it out of a PUT's body)"));
    }
    let (fields, metadata) = (body.rest(), body.metadata.clone());
    let (segmented, found_title) = match (body.text, body.segments) {
        (Some(_), Some(_)) => return Err(ApiError::invalid("segments", "send text or segments, not both")),
        (None, None) => return Err(ApiError::invalid("text", "is required (or segments)")),
        (None, Some(segments)) => (Segmented { segments, pages: body.pages.unwrap_or_default() }, None),
        (Some(_), None) if body.pages.is_some() => {
            return Err(ApiError::invalid("pages", "goes with segments, not text (the server segments text)"))
        }
        (Some(text), None) => {
            let media = match body.content_type.as_deref() {
                None => sextant_ingest::MediaType::PlainText,
                Some(ct) => sextant_ingest::MediaType::from_content_type(ct)
                    .map_err(|e| ApiError::invalid("contentType", e.to_string()))?,
            };
            if media == sextant_ingest::MediaType::Pdf {
                return Err(ApiError::invalid(
                    "contentType",
                    "application/pdf is not text: PUT the PDF itself as the body, with Content-Type: application/pdf",
                ));
            }
            let parsed = sextant_ingest::parse(media, text.as_bytes()).map_err(ingest_error)?;
            (segment_blocks(parsed.blocks), parsed.title)
        }
    };
    let title = body.title.or(found_title).unwrap_or_default();
    finish(id, title, segmented, metadata, fields)
}

/// The financial fields of a JSON document.
struct Fields {
    document_type: Option<String>,
    ticker: Option<String>,
    year: Option<i32>,
    quarter: Option<String>,
    filing_type: Option<String>,
    source_url: Option<String>,
    published_at: Option<String>,
}

impl DocumentBody {
    fn rest(&self) -> Fields {
        Fields {
            document_type: self.document_type.clone(),
            ticker: self.ticker.clone(),
            year: self.year,
            quarter: self.quarter.clone(),
            filing_type: self.filing_type.clone(),
            source_url: self.source_url.clone(),
            published_at: self.published_at.clone(),
        }
    }
}

fn finish(
    id: &str,
    title: String,
    segmented: Segmented,
    metadata: Option<Value>,
    f: Fields,
) -> Result<Document, ApiError> {
    let Segmented { segments, pages } = segmented;
    if segments.iter().all(|s| s.trim().is_empty()) {
        return Err(ApiError::invalid("text", "holds no text to index"));
    }
    let quarter = match f.quarter {
        Some(q) => Some(q.parse::<Quarter>().map_err(|reason| ApiError::invalid("quarter", reason))?),
        None => None,
    };
    let published_at = match f.published_at {
        Some(p) => Some(p.parse::<Date>().map_err(|reason| ApiError::invalid("publishedAt", reason))?),
        None => None,
    };
    if let Some(y) = f.year {
        if !(1800..=2200).contains(&y) {
            return Err(ApiError::invalid("year", format!("must be a year between 1800 and 2200, got {y}")));
        }
    }
    Ok(Document {
        document_id: id.to_string(),
        title,
        document_type: f
            .document_type
            .map_or_else(|| DocumentType::from("article"), |t| DocumentType::from(t.as_str())),
        ticker: f.ticker,
        year: f.year,
        quarter,
        filing_type: f.filing_type,
        source_url: f.source_url,
        published_at,
        segments,
        metadata: metadata_of(metadata.as_ref())?,
        pages,
    })
    .and_then(|document| match document.pages_problem() {
        Some(problem) => Err(ApiError::invalid("pages", problem)),
        None => Ok(document),
    })
}

pub(crate) async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> Result<T, ApiError> {
    tokio::task::spawn_blocking(f).await.map_err(|e| {
        tracing::error!("a document call did not finish: {e}");
        ApiError::internal()
    })
}

/// A path naming a document, as axum extracts it.
type DocPath = Result<Path<(String, String)>, axum::extract::rejection::PathRejection>;

/// Runs `inner` on the request read within `limit` bytes; its error is the envelope.
pub(crate) async fn answer<F: std::future::Future<Output = Result<Response, ApiError>>>(
    state: Arc<AppState>,
    req: Request,
    limit: usize,
    inner: impl FnOnce(Arc<AppState>, RawCall) -> F,
) -> Response {
    match RawCall::read_limited(req, &state, limit).await {
        Ok(call) => inner(state, call).await.unwrap_or_else(IntoResponse::into_response),
        Err(resp) => resp,
    }
}

/// The 404 of a document the index does not hold.
fn no_document(index: &str, id: &str) -> ApiError {
    ApiError::not_found(format!("index {index} holds no document {}", crate::envelope::echoed(id, 64)))
}

/// The answer to a write of document `id`: what the store did, `202` when the write is
/// pending (stored, not yet indexed), else `200`.
fn written_answer(
    written: &Written,
    (index, id, request_id): (String, String, String),
    segments: Option<usize>,
    deleted: Option<bool>,
) -> Response {
    let status = if written.status == "pending" { StatusCode::ACCEPTED } else { StatusCode::OK };
    let body = WriteResponse { document_id: id, index, segments, deleted, written: written.clone(), request_id };
    (status, Json(body)).into_response()
}

/// `PUT /v1/indexes/{index}/documents/{documentId}`.
pub(crate) async fn put(State(state): State<Arc<AppState>>, path: DocPath, req: Request) -> Response {
    let limit = state.config.max_document_bytes;
    answer(state, req, limit, |state, call| put_call(state, path, call)).await
}

async fn put_call(state: Arc<AppState>, path: DocPath, call: RawCall) -> Result<Response, ApiError> {
    let (index, id) = path_ids(path)?;
    let store = store_for(&state, &call.caller, &index, Scope::Write)?;
    let document = document_of(&id, &call).await?;
    let segments = document.segments.len();
    let written = blocking(move || store.put(document)).await??;
    crate::access::record(|r| r.index = Some(index.clone()));
    Ok(written_answer(&written, (index, id, call.request_id), Some(segments), None))
}

/// `DELETE /v1/indexes/{index}/documents/{documentId}`.
pub(crate) async fn delete(State(state): State<Arc<AppState>>, path: DocPath, req: Request) -> Response {
    let limit = state.config.max_body_bytes;
    answer(state, req, limit, |state, call| delete_call(state, path, call)).await
}

async fn delete_call(state: Arc<AppState>, path: DocPath, call: RawCall) -> Result<Response, ApiError> {
    let (index, id) = path_ids(path)?;
    let store = store_for(&state, &call.caller, &index, Scope::Write)?;
    let target = id.clone();
    let Some(written) = blocking(move || store.delete(&target)).await?? else {
        return Err(no_document(&index, &id));
    };
    Ok(written_answer(&written, (index, id, call.request_id), None, Some(true)))
}

/// `GET /v1/indexes/{index}/documents/{documentId}`.
pub(crate) async fn get_one(State(state): State<Arc<AppState>>, path: DocPath, req: Request) -> Response {
    let limit = state.config.max_body_bytes;
    answer(state, req, limit, |state, call| get_call(state, path, call)).await
}

async fn get_call(state: Arc<AppState>, path: DocPath, call: RawCall) -> Result<Response, ApiError> {
    let (index, id) = path_ids(path)?;
    let store = store_for(&state, &call.caller, &index, Scope::Read)?;
    let target = id.clone();
    let Some(doc) = blocking(move || store.get(&target)).await?? else {
        return Err(no_document(&index, &id));
    };
    let spans = doc.document.segment_spans();
    let segments = doc
        .document
        .segments
        .iter()
        .zip(spans)
        .enumerate()
        .map(|(i, (s, sp))| DocumentSegment {
            text: s.clone(),
            char_start: sp.char_start,
            char_end: sp.char_end,
            page: doc.document.pages.get(i).copied(),
        })
        .collect();
    let body = DocumentResponse {
        text: doc.document.text(),
        summary: summary(&doc),
        index,
        segments,
        request_id: call.request_id,
    };
    Ok(Json(body).into_response())
}

/// `GET /v1/indexes/{index}/documents`.
pub(crate) async fn list(
    State(state): State<Arc<AppState>>,
    Path(index): Path<String>,
    query: Result<Query<ListQuery>, axum::extract::rejection::QueryRejection>,
    req: Request,
) -> Response {
    let limit = state.config.max_body_bytes;
    answer(state, req, limit, |state, call| list_call(state, index, query, call)).await
}

async fn list_call(
    state: Arc<AppState>,
    index: String,
    query: Result<Query<ListQuery>, axum::extract::rejection::QueryRejection>,
    call: RawCall,
) -> Result<Response, ApiError> {
    let Query(q) = query.map_err(|_| ApiError::bad_body("the query string is not valid: use limit and cursor"))?;
    let limit = match q.limit.as_deref() {
        None => DEFAULT_PAGE,
        Some(l) => match l.parse::<usize>() {
            Ok(n) if (1..=MAX_PAGE).contains(&n) => n,
            _ => return Err(ApiError::invalid("limit", format!("must be an integer from 1 to {MAX_PAGE}, got {l:?}"))),
        },
    };
    let store = store_for(&state, &call.caller, &index, Scope::Read)?;
    let cursor = q.cursor.clone();
    let page = blocking(move || store.list(cursor.as_deref(), limit)).await??;
    let documents = page.documents.iter().map(summary).collect();
    Ok(Json(DocumentPage { index, documents, next_cursor: page.next_cursor, request_id: call.request_id })
        .into_response())
}

/// `POST /v1/indexes/{index}/compact`.
pub(crate) async fn compact(State(state): State<Arc<AppState>>, Path(index): Path<String>, req: Request) -> Response {
    let limit = state.config.max_body_bytes;
    answer(state, req, limit, |state, call| compact_call(state, index, call)).await
}

async fn compact_call(state: Arc<AppState>, index: String, call: RawCall) -> Result<Response, ApiError> {
    let store = store_for(&state, &call.caller, &index, Scope::Admin)?;
    let report = blocking(move || store.compact()).await??;
    Ok(Json(CompactResponse { index, compacted: report.is_some(), report, request_id: call.request_id })
        .into_response())
}

/// A document's fields without its text.
fn summary(d: &StoredDocument) -> DocumentSummary {
    let doc = &d.document;
    let metadata = match doc.metadata.to_json() {
        Value::Object(m) => m,
        _ => serde_json::Map::new(),
    };
    DocumentSummary {
        document_id: doc.document_id.clone(),
        title: doc.title.clone(),
        document_type: doc.document_type.clone(),
        ticker: doc.ticker.clone(),
        year: doc.year,
        quarter: doc.quarter,
        filing_type: doc.filing_type.clone(),
        source_url: doc.source_url.clone(),
        published_at: doc.published_at,
        metadata,
        chunks: d.chunks,
        status: d.status.to_string(),
        compacted: d.compacted,
    }
}
