//! `POST /{WorkspaceId}/index/retrieve`: the Alibaba Cloud Model Studio (Bailian) knowledge-base Retrieve API over any
//! loaded index: dense and sparse top-K, reranking with a minimum score and top N,
//! conversation rewriting, and the `SearchFilters` grammar. Answers in that API's envelope:
//! `Code`, `Data.Nodes[{Text, Score, Metadata}]`, `Message`, `RequestId`, `Status`, `Success`.

use std::sync::Arc;

use axum::extract::{Path as UrlPath, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sextant_core::index::{Bitset, Provenance};
use sextant_core::pipeline::{Path, RerankStatus, SearchRequest};

use crate::auth::Authed;
use crate::envelope::ApiError;
use crate::params::{check_query, run_search};
use crate::state::AppState;

/// A model choice (`Rerank`, `Rewrite`): accepted for compatibility; the configured models
/// are used.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ModelChoice {
    /// Model name.
    #[serde(rename = "ModelName", default)]
    pub model_name: Option<String>,
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
    /// Rerank model choice.
    #[serde(rename = "Rerank", default)]
    pub rerank: Option<Vec<ModelChoice>>,
    /// Lowest rerank score returned, 0.01-1.00 (applies when the reranker ran).
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
    /// Rerank score when reranked, else the fused score.
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
        "rerank": rerank,
    })
}

/// The handler.
pub(crate) async fn handle(
    State(state): State<Arc<AppState>>,
    UrlPath(workspace): UrlPath<String>,
    Authed { caller, request_id, body: req }: Authed<KbRequest>,
) -> Result<Response, ApiError> {
    if workspace.trim().is_empty() {
        return Err(ApiError::invalid("WorkspaceId", "must not be empty"));
    }
    if req.index_id.trim().is_empty() {
        return Err(ApiError::invalid("IndexId", "must not be empty"));
    }
    let engine = state.engine_for(&caller, &req.index_id)?;
    let names =
        |m: &Option<Vec<ModelChoice>>| m.iter().flatten().filter_map(|c| c.model_name.clone()).collect::<Vec<_>>();
    tracing::debug!(
        rerank_models = ?names(&req.rerank),
        rewrite_models = ?names(&req.rewrite),
        save_history = ?req.save_retriever_history,
        "model choices are accepted for compatibility; the configured models run, and no history is stored"
    );
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
    let index = engine.index().clone();
    let documents = match &req.search_filters {
        Some(f) => {
            let cond = crate::search_filters::compile(f, "SearchFilters")?;
            let mut set = Bitset::empty(index.documents.len());
            for (i, d) in index.documents.iter().enumerate() {
                if cond.matches(d) {
                    set.insert(i);
                }
            }
            Some(Arc::new(set))
        }
        None => None,
    };
    let rewritten = if req.enable_rewrite.unwrap_or(false) {
        let turns: Vec<String> = req
            .history
            .iter()
            .flatten()
            .filter(|t| t.role.eq_ignore_ascii_case("user"))
            .map(|t| t.content.clone())
            .collect();
        Some(crate::rewrite::rewrite(&turns, &query, &super::search::company_names(&index)))
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
    search.per_path_k = dense_k.max(sparse_k).max(top_n);
    search.rerank = req.enable_reranking.unwrap_or(true);
    search.documents = documents;
    let out = run_search(&engine, &search).await?;
    let reranked = out.rerank == RerankStatus::Applied;
    let nodes: Vec<Node> = out
        .hits
        .iter()
        .filter(|h| match (reranked, req.rerank_min_score) {
            (true, Some(min)) => h.diagnostics.rerank_score.is_some_and(|s| s as f64 >= min),
            _ => true,
        })
        .map(|h| Node {
            text: index.chunks[h.chunk as usize].text.clone(),
            score: h.score,
            metadata: node_metadata(&index.provenance(h.chunk), &out.rerank),
        })
        .collect();
    let body = KbResponse {
        code: "Success".into(),
        data: Some(KbData { nodes, rewritten_query: rewritten }),
        message: "success".into(),
        request_id,
        status: "200".into(),
        success: true,
    };
    Ok((StatusCode::OK, Json(body)).into_response())
}
