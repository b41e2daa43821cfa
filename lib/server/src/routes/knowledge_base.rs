//! `POST /{WorkspaceId}/index/retrieve`: the Alibaba Cloud Model Studio (Bailian) knowledge-base Retrieve API over any
//! loaded index: dense and sparse top-K, reranking with a minimum score and top N,
//! conversation rewriting, and the `SearchFilters` grammar. Answers in that API's envelope:
//! `Code`, `Data.Nodes[{Text, Score, Metadata}]`, `Message`, `RequestId`, `Status`, `Success`.
//!
//! Two encodings of a request are accepted, with the same validation and error codes:
//! - a JSON body (`Content-Type: application/json`);
//! - the official SDK's: an empty body and every parameter in the query string
//!   (`?IndexId=…&Query=…&EnableReranking=True&SearchFilters=%5B…%5D`). Numbers and
//!   booleans (`True`/`False`, any case) are read from their text; `SearchFilters`,
//!   `Rerank`, `Rewrite`, `QueryHistory` and `Extra` are JSON strings, and `Images` is a
//!   comma-separated list. The SDK signs with `ACS3-HMAC-SHA256` in `Authorization`: the
//!   API key then travels in `X-API-Key`.

use std::sync::Arc;

use axum::extract::{FromRequest, Path as UrlPath, Query, Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sextant_core::index::Provenance;
use sextant_core::pipeline::{IndexView, Path, RerankStatus, SearchRequest};
use sextant_finance::classify::company_names;

use crate::auth::RawCall;
use crate::envelope::ApiError;
use crate::params::{check_query, run_search};
use crate::request::{json_body, json_value};
use crate::state::{AppState, Caller};

/// A model choice (`Rerank`, `Rewrite`): accepted for compatibility; the configured models
/// are used.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ModelChoice {
    /// Model name.
    #[serde(rename = "ModelName", default)]
    pub model_name: Option<String>,
    /// Instruction for an instruction-following reranker (`Rerank` only).
    #[serde(rename = "RerankInstruct", default)]
    pub rerank_instruct: Option<String>,
    /// Reranking mode (`Rerank` only).
    #[serde(rename = "RerankMode", default)]
    pub rerank_mode: Option<String>,
}

/// One earlier message of the conversation, as the official SDK sends it (`QueryHistory`).
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HistoryMessage {
    /// `user` or `assistant` (only user messages are rewritten from).
    pub role: String,
    /// What was said.
    pub content: String,
}

/// `Extra`: accepted; nothing in it changes the search.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Extra {
    /// The caller's own id for the request.
    #[serde(rename = "uniqueId", default)]
    pub unique_id: Option<String>,
}

/// One earlier turn of the conversation.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Turn {
    /// `user` or `assistant` (only user turns are rewritten from).
    #[serde(rename = "Role")]
    pub role: String,
    /// What was said.
    #[serde(rename = "Content")]
    pub content: String,
}

/// The request body (field names as in the seed).
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct KbRequest {
    /// The knowledge base (index id); required.
    #[serde(rename = "IndexId")]
    pub index_id: String,
    /// The query.
    #[serde(rename = "Query", default)]
    pub query: Option<String>,
    /// Dense top K, 0-100 (default 100; 0 turns the dense path off).
    #[serde(rename = "DenseSimilarityTopK", default)]
    pub dense_top_k: Option<i64>,
    /// Sparse (SPLADE and BM25) top K, 0-100 (default 100; 0 turns them off).
    #[serde(rename = "SparseSimilarityTopK", default)]
    pub sparse_top_k: Option<i64>,
    /// Rerank (default true; the reranker runs where one is configured).
    #[serde(rename = "EnableReranking", default)]
    pub enable_reranking: Option<bool>,
    /// Rewrite the query from the conversation (default false).
    #[serde(rename = "EnableRewrite", default)]
    pub enable_rewrite: Option<bool>,
    /// The conversation so far, oldest first.
    #[serde(rename = "History", default)]
    pub history: Option<Vec<Turn>>,
    /// The conversation so far, oldest first, in the official SDK's shape (after `History`
    /// when both are sent).
    #[serde(rename = "QueryHistory", default)]
    pub query_history: Option<Vec<HistoryMessage>>,
    /// Image URLs for a multimodal query: refused (this service retrieves text).
    #[serde(rename = "Images", default)]
    pub images: Option<Vec<String>>,
    /// Accepted; nothing in it changes the search.
    #[serde(rename = "Extra", default)]
    pub extra: Option<Extra>,
    /// Rerank model choice.
    #[serde(rename = "Rerank", default)]
    pub rerank: Option<Vec<ModelChoice>>,
    /// Lowest rerank score returned, 0.01-1.00. It applies to the reranker's scores; when no
    /// reranker ran, nothing is filtered and the answer says so (`RerankMinScoreApplied`).
    #[serde(rename = "RerankMinScore", default)]
    pub rerank_min_score: Option<f64>,
    /// Nodes returned, 1-20 (default 5).
    #[serde(rename = "RerankTopN", default)]
    pub rerank_top_n: Option<i64>,
    /// Rewrite model choice.
    #[serde(rename = "Rewrite", default)]
    pub rewrite: Option<Vec<ModelChoice>>,
    /// Accepted; nothing is stored.
    #[serde(rename = "SaveRetrieverHistory", default)]
    pub save_retriever_history: Option<bool>,
    /// Metadata filters (see `search_filters`).
    #[serde(rename = "SearchFilters", default)]
    pub search_filters: Option<Value>,
}

/// One result.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Node {
    /// The chunk text.
    #[serde(rename = "Text")]
    pub text: String,
    /// Relevance in [0, 1], never rising down the list: the rerank score when reranked, else
    /// the fused score's relevance (a logistic of the mean z-score, fitted on the dev sets).
    #[serde(rename = "Score")]
    pub score: f32,
    /// Document metadata and the chunk's place in it.
    #[serde(rename = "Metadata")]
    pub metadata: Value,
}

/// `Data` of a response.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct KbData {
    /// Results.
    #[serde(rename = "Nodes")]
    pub nodes: Vec<Node>,
    /// The query actually searched (after rewriting).
    #[serde(rename = "RewrittenQuery", skip_serializing_if = "Option::is_none")]
    pub rewritten_query: Option<String>,
}

/// The envelope.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct KbResponse {
    /// `Success` or an error code (`Index.InvalidParameter`, ...).
    #[serde(rename = "Code")]
    pub code: String,
    /// Results (absent on errors).
    #[serde(rename = "Data", skip_serializing_if = "Option::is_none")]
    pub data: Option<KbData>,
    /// What happened.
    #[serde(rename = "Message")]
    pub message: String,
    /// The request id.
    #[serde(rename = "RequestId")]
    pub request_id: String,
    /// The HTTP status, as a string.
    #[serde(rename = "Status")]
    pub status: String,
    /// Whether it worked.
    #[serde(rename = "Success")]
    pub success: bool,
    /// Sent when the request set `RerankMinScore`: whether it filtered the nodes (false when
    /// no reranker ran, as `Message` then says).
    #[serde(rename = "RerankMinScoreApplied", skip_serializing_if = "Option::is_none")]
    pub rerank_min_score_applied: Option<bool>,
}

/// This API's error code for an [`ApiError`].
pub fn error_code(e: &ApiError) -> &'static str {
    match e.status.as_u16() {
        400 | 413 | 415 => "Index.InvalidParameter",
        401 => "Index.Unauthorized",
        403 => "Index.AccessDenied",
        404 => "Index.NotFound",
        405 => "Index.MethodNotAllowed",
        429 => "Throttling.User",
        503 => "ServiceUnavailable",
        _ => "InternalError",
    }
}

/// Renders an error in this API's envelope (the field, when known, leads the message).
pub fn error_response(e: &ApiError, request_id: &str) -> Response {
    let body = KbResponse {
        code: error_code(e).into(),
        data: None,
        message: e.message.clone(),
        request_id: request_id.into(),
        status: e.status.as_u16().to_string(),
        success: false,
        rerank_min_score_applied: None,
    };
    let mut resp = (e.status, Json(body)).into_response();
    if let Some(s) = e.retry_after {
        resp.headers_mut().insert("retry-after", s.into());
    }
    resp
}

fn range(v: Option<i64>, field: &str, lo: i64, hi: i64, default: i64) -> Result<i64, ApiError> {
    let x = v.unwrap_or(default);
    if !(lo..=hi).contains(&x) {
        return Err(ApiError::invalid(field, format!("must be between {lo} and {hi}, got {x}")));
    }
    Ok(x)
}

/// A node's `Metadata`: the chunk's provenance in the knowledge-base API's field names.
fn node_metadata(p: &Provenance<'_>, rerank: &RerankStatus) -> Value {
    let d = p.document;
    serde_json::json!({
        "doc_id": d.document_id, "title": d.title, "documentType": d.document_type, "ticker": d.ticker,
        "year": d.year, "quarter": d.quarter, "filingType": d.filing_type, "publishedAt": d.published_at,
        "sourceUrl": d.source_url, "segmentStart": p.segments.start, "segmentEnd": p.segments.end,
        "charStart": p.chars.start, "charEnd": p.chars.end,
        "page": p.pages().map(|(first, last)| serde_json::json!({"first": first, "last": last})),
        "rerank": rerank, "metadata": d.metadata.to_json(),
    })
}

/// An authenticated Retrieve call: the caller, the request id and the request, from a JSON
/// body or, when the body is empty, from the query string (the official SDK's encoding).
pub(crate) struct KbCall {
    caller: Caller,
    request_id: String,
    body: KbRequest,
}

impl FromRequest<Arc<AppState>> for KbCall {
    type Rejection = Response;

    async fn from_request(req: Request, state: &Arc<AppState>) -> Result<Self, Response> {
        let RawCall { caller, request_id, headers, uri, body: bytes } = RawCall::read(req, state).await?;
        let body = if bytes.iter().all(|b| b.is_ascii_whitespace()) {
            let pairs = Query::<Vec<(String, String)>>::try_from_uri(&uri)
                .map_err(|_| ApiError::bad_body("the query string is not valid URL encoding").into_response())?;
            json_value(query_request(pairs.0).map_err(IntoResponse::into_response)?)
        } else {
            json_body(&headers, &bytes, state.config.max_body_bytes)
        };
        Ok(KbCall { caller, request_id, body: body.map_err(IntoResponse::into_response)? })
    }
}

/// The JSON object a query-string request stands for (see the module documentation).
fn query_request(pairs: Vec<(String, String)>) -> Result<Value, ApiError> {
    let mut obj = serde_json::Map::new();
    for (name, text) in pairs {
        if obj.contains_key(&name) {
            return Err(ApiError::invalid(name, "is given more than once"));
        }
        let value = match name.as_str() {
            "DenseSimilarityTopK" | "SparseSimilarityTopK" | "RerankTopN" => {
                text.trim().parse::<i64>().map(Value::from).map_err(|_| not_a(&name, "an integer", &text))?
            }
            "RerankMinScore" => text
                .trim()
                .parse::<f64>()
                .ok()
                .filter(|x| x.is_finite())
                .map(Value::from)
                .ok_or_else(|| not_a(&name, "a number", &text))?,
            "EnableReranking" | "EnableRewrite" | "SaveRetrieverHistory" => match text.trim() {
                t if t.eq_ignore_ascii_case("true") => Value::Bool(true),
                t if t.eq_ignore_ascii_case("false") => Value::Bool(false),
                _ => return Err(not_a(&name, "true or false", &text)),
            },
            "SearchFilters" | "Rerank" | "Rewrite" | "QueryHistory" | "History" | "Extra" => {
                serde_json::from_str(&text).map_err(|e| {
                    let why = e.to_string();
                    let why = why.split(" at line ").next().unwrap_or(&why).to_string();
                    ApiError::invalid(name.clone(), format!("must be JSON: {why}"))
                })?
            }
            "Images" => Value::Array(
                text.split(',').map(str::trim).filter(|s| !s.is_empty()).map(|s| Value::String(s.into())).collect(),
            ),
            _ => Value::String(text),
        };
        obj.insert(name, value);
    }
    Ok(Value::Object(obj))
}

/// The 400 of a query-string value of the wrong kind; the value is echoed, cut to 40 characters.
fn not_a(name: &str, expected: &str, text: &str) -> ApiError {
    ApiError::invalid(name, format!("must be {expected}, got {}", crate::envelope::echoed(text, 40)))
}

/// The handler.
pub(crate) async fn handle(
    State(state): State<Arc<AppState>>,
    UrlPath(workspace): UrlPath<String>,
    KbCall { caller, request_id, body: req }: KbCall,
) -> Result<Response, ApiError> {
    if workspace.trim().is_empty() {
        return Err(ApiError::invalid("WorkspaceId", "must not be empty"));
    }
    if req.index_id.trim().is_empty() {
        return Err(ApiError::invalid("IndexId", "must not be empty"));
    }
    let searcher = state.searcher_for(&caller, &req.index_id)?;
    let names =
        |m: &Option<Vec<ModelChoice>>| m.iter().flatten().filter_map(|c| c.model_name.clone()).collect::<Vec<_>>();
    let rerank_options: Vec<(Option<&String>, Option<&String>)> =
        req.rerank.iter().flatten().map(|c| (c.rerank_mode.as_ref(), c.rerank_instruct.as_ref())).collect();
    tracing::debug!(
        rerank_models = ?names(&req.rerank),
        rerank_modes_and_instructions = ?rerank_options,
        rewrite_models = ?names(&req.rewrite),
        save_history = ?req.save_retriever_history,
        unique_id = ?req.extra.as_ref().and_then(|e| e.unique_id.as_ref()),
        "model choices are accepted for compatibility; the configured models run, and no history is stored"
    );
    if req.images.as_ref().is_some_and(|i| !i.is_empty()) {
        return Err(ApiError::invalid(
            "Images",
            "image queries are not supported: this service retrieves text; send Query",
        ));
    }
    let query = req.query.clone().unwrap_or_default();
    check_query(&query, "Query", state.config.max_query_chars)?;
    let dense_k = range(req.dense_top_k, "DenseSimilarityTopK", 0, 100, 100)? as usize;
    let sparse_k = range(req.sparse_top_k, "SparseSimilarityTopK", 0, 100, 100)? as usize;
    if dense_k == 0 && sparse_k == 0 {
        return Err(ApiError::invalid("DenseSimilarityTopK", "and SparseSimilarityTopK cannot both be 0"));
    }
    let top_n = range(req.rerank_top_n, "RerankTopN", 1, 20, 5)? as usize;
    let top_n = top_n.min(caller.plan.max_top_k);
    if let Some(m) = req.rerank_min_score {
        if !(0.01..=1.0).contains(&m) {
            return Err(ApiError::invalid("RerankMinScore", format!("must be between 0.01 and 1.00, got {m}")));
        }
    }
    let index = searcher.view();
    let documents = match &req.search_filters {
        Some(f) => {
            let cond = crate::search_filters::compile(f, "SearchFilters", index.metadata_schema())?;
            Some(crate::search_filters::admitted(&cond, index))
        }
        None => None,
    };
    let rewritten = if req.enable_rewrite.unwrap_or(false) {
        let turns: Vec<String> = req
            .history
            .iter()
            .flatten()
            .map(|t| (&t.role, &t.content))
            .chain(req.query_history.iter().flatten().map(|t| (&t.role, &t.content)))
            .filter(|(role, _)| role.eq_ignore_ascii_case("user"))
            .map(|(_, content)| content.clone())
            .collect();
        Some(sextant_finance::rewrite::rewrite(&turns, &query, &company_names(index)))
    } else {
        None
    };
    let searched = rewritten.clone().unwrap_or_else(|| query.trim().to_string());
    let mut search = SearchRequest::new(searched, top_n);
    search.paths = Vec::new();
    if dense_k > 0 {
        search.paths.push(Path::Dense);
    }
    if sparse_k > 0 {
        search.paths.extend([Path::Splade, Path::Bm25]);
    }
    // Each path's own top K, as the API defines them (at least the nodes asked for).
    search.per_path_k = top_n;
    search.path_k = [(Path::Dense, dense_k), (Path::Splade, sparse_k), (Path::Bm25, sparse_k)]
        .into_iter()
        .filter(|(_, k)| *k > 0)
        .map(|(p, k)| (p, k.max(top_n)))
        .collect();
    search.rerank = req.enable_reranking.unwrap_or(true);
    search.documents = documents;
    let searched = run_search(&searcher, &search).await?;
    let out = searched.outcome;
    let index = searcher.results(searched.fetched);
    let reranked = out.rerank == RerankStatus::Applied;
    let nodes: Vec<Node> = out
        .hits
        .iter()
        .filter(|h| match (reranked, req.rerank_min_score) {
            (true, Some(min)) => h.diagnostics.rerank_score.is_some_and(|s| s as f64 >= min),
            _ => true,
        })
        .map(|h| Node {
            text: index.text(h.chunk).to_string(),
            score: h.score,
            metadata: node_metadata(&index.provenance(h.chunk), &out.rerank),
        })
        .collect();
    crate::access::record(|r| r.results = Some(nodes.len()));
    let min_score_applied = req.rerank_min_score.map(|_| reranked);
    let message = match min_score_applied {
        Some(false) => format!(
            "success; RerankMinScore was not applied: no reranker ran ({}), so the nodes are in fused order, unfiltered",
            match &out.rerank {
                RerankStatus::NotRequested => "EnableReranking is false".to_string(),
                RerankStatus::Unavailable => "none is configured".to_string(),
                RerankStatus::Failed(why) => format!("the reranker failed: {why}"),
                RerankStatus::Applied => "it ran".to_string(),
            }
        ),
        _ => "success".into(),
    };
    let body = KbResponse {
        code: "Success".into(),
        data: Some(KbData { nodes, rewritten_query: rewritten }),
        message,
        request_id,
        status: "200".into(),
        success: true,
        rerank_min_score_applied: min_score_applied,
    };
    Ok((StatusCode::OK, Json(body)).into_response())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn pairs(p: &[(&str, &str)]) -> Vec<(String, String)> {
        p.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn the_sdks_query_string_reads_as_the_json_body() {
        let v = query_request(pairs(&[
            ("IndexId", "demo"),
            ("Query", "capex, in USD millions"),
            ("DenseSimilarityTopK", "50"),
            ("RerankMinScore", "0.25"),
            ("EnableReranking", "True"),
            ("EnableRewrite", "false"),
            ("SearchFilters", r#"[{"ticker": "XOM"}]"#),
            ("QueryHistory", r#"[{"role": "user", "content": "hi"}]"#),
            ("Rerank", r#"[{"ModelName": "gte-rerank-hybrid", "RerankMode": "hybrid"}]"#),
            ("Images", "https://a/x.png,https://a/y.png"),
            ("Extra", r#"{"uniqueId": "u"}"#),
        ]))
        .unwrap();
        assert_eq!(
            v,
            json!({
                "IndexId": "demo", "Query": "capex, in USD millions", "DenseSimilarityTopK": 50,
                "RerankMinScore": 0.25, "EnableReranking": true, "EnableRewrite": false,
                "SearchFilters": [{"ticker": "XOM"}], "QueryHistory": [{"role": "user", "content": "hi"}],
                "Rerank": [{"ModelName": "gte-rerank-hybrid", "RerankMode": "hybrid"}],
                "Images": ["https://a/x.png", "https://a/y.png"], "Extra": {"uniqueId": "u"}
            })
        );
        let req: KbRequest = json_value(v).unwrap();
        assert_eq!(req.query_history.unwrap()[0].content, "hi");
    }

    #[test]
    fn a_bad_value_names_its_parameter_in_the_apis_words() {
        let err = |p: &[(&str, &str)]| query_request(pairs(p)).unwrap_err().message;
        assert_eq!(err(&[("RerankTopN", "five")]), "RerankTopN: must be an integer, got \"five\"");
        assert_eq!(err(&[("EnableRewrite", "yes")]), "EnableRewrite: must be true or false, got \"yes\"");
        assert_eq!(err(&[("RerankMinScore", "NaN")]), "RerankMinScore: must be a number, got \"NaN\"");
        assert!(err(&[("SearchFilters", "[{")]).starts_with("SearchFilters: must be JSON: "));
        assert_eq!(err(&[("IndexId", "a"), ("IndexId", "b")]), "IndexId: is given more than once");
        let long = "x".repeat(500);
        let m = err(&[("DenseSimilarityTopK", &long)]);
        assert!(m.len() < 100 && m.ends_with("…"), "echoed input is cut: {m}");
        // Unknown parameters and missing ones fail as in a JSON body.
        let e =
            json_value::<KbRequest>(query_request(pairs(&[("IndexId", "d"), ("Colour", "red")])).unwrap()).unwrap_err();
        assert!(e.message.starts_with("Colour: is not a known field"), "{}", e.message);
        let e = json_value::<KbRequest>(query_request(pairs(&[("Query", "q")])).unwrap()).unwrap_err();
        assert_eq!(e.message, "IndexId: is required");
    }
}
