//! `POST /v1/retrieve`: cited chunks for a query, with filters, plan clamping, period
//! fallback and optional segments with character offsets.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::extract::State;
use axum::Json;
use serde::{Deserialize, Serialize};
use sextant_core::corpus::{Document, Quarter};
use sextant_core::index::Filter;
use sextant_core::index::Provenance;
use sextant_core::pipeline::{IndexView, Path, RerankStatus, SearchRequest};
use sextant_core::shards::{Searcher, ShardedOutcome};
use sextant_finance::period::{fallback, PeriodMismatch};

use crate::auth::Authed;
use crate::envelope::ApiError;
use crate::params::{check_query, default_recency, document_types, result_count, run_search, ShardsMeta};
use crate::state::AppState;

/// Default `top_k`.
pub const DEFAULT_TOP_K: i64 = 10;
/// Words in an `evidenceText` at most (it grows from the best sentence).
const EVIDENCE_WORDS: usize = 60;

/// The request body.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RetrieveRequest {
    /// The question (required, non-empty).
    pub query: String,
    /// The index to search (default: the server's default index, `defaultIndex` in
    /// `GET /health`; `GET /v1/indexes` lists those the key may read).
    #[serde(default)]
    pub index: Option<String>,
    /// Metadata filters.
    #[serde(default)]
    pub filters: Option<RetrieveFilters>,
    /// 1-50, default 10, clamped to the plan's maximum.
    #[serde(default)]
    pub top_k: Option<i64>,
    /// Default true: hybrid retrieval, rerank where configured, recency boost. False: raw
    /// dense similarity order.
    #[serde(default)]
    pub rerank: Option<bool>,
    /// Include each chunk's segments with character offsets.
    #[serde(default)]
    pub include_segments: Option<bool>,
}

/// `filters` of a request.
#[derive(Debug, Clone, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RetrieveFilters {
    /// Any of these tickers.
    #[serde(default)]
    pub tickers: Option<Vec<String>>,
    /// Fiscal year.
    #[serde(default)]
    pub year: Option<i32>,
    /// `Q1`..`Q4`.
    #[serde(default)]
    pub quarter: Option<String>,
    /// Document types (`earnings_call`, `10-K`, `10-Q`).
    #[serde(default)]
    pub source_types: Option<Vec<String>>,
    /// Conditions on the documents' own metadata fields, as one group of the
    /// knowledge-base `SearchFilters` grammar (`{"department": "legal", "pages": {"gte": 3}}`).
    #[serde(default)]
    pub metadata: Option<serde_json::Value>,
}

/// The response body.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct RetrieveResponse {
    /// Cited passages, best first.
    pub chunks: Vec<ChunkOut>,
    /// About the request.
    pub meta: Meta,
}

/// One passage.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ChunkOut {
    /// `chunk_01`, `chunk_02`, ... in rank order, for citation markers.
    pub id: String,
    /// The passage.
    pub text: String,
    /// Relevance in [0, 1], never rising down the list: the reranker's score or the fused
    /// score's relevance (`rerank: true`), the dense cosine (`rerank: false`, below 0 as 0).
    pub score: f32,
    /// The sentence(s) of the passage that best match the query.
    pub evidence_text: Option<String>,
    /// Where it comes from.
    pub source: SourceOut,
}

/// A passage's provenance.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SourceOut {
    /// Document id.
    pub document_id: String,
    /// Document title.
    pub document_title: String,
    /// `earnings_call`, `10-K`, `10-Q`, ...
    pub document_type: String,
    /// Ticker.
    pub ticker: Option<String>,
    /// Fiscal year.
    pub year: Option<i32>,
    /// Fiscal quarter.
    pub quarter: Option<String>,
    /// Filing form.
    pub filing_type: Option<String>,
    /// Where the original lives.
    pub source_url: Option<String>,
    /// The document's own metadata fields (absent when it has none).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata: Option<serde_json::Value>,
    /// First character of the passage in its document's text (the segments joined by a
    /// blank line), counted in Unicode scalar values.
    pub char_start: usize,
    /// One past its last character: `text` is the document's text from `char_start` to here.
    pub char_end: usize,
    /// Every page the passage is on, first to last, when its document has pages (a PDF).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub page_numbers: Option<Vec<u32>>,
    /// The segments behind the passage (`include_segments: true`), whole: a passage cut
    /// from a long segment covers part of it (see `char_start`, `char_end`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub segments: Option<Vec<SegmentOut>>,
}

impl From<&Provenance<'_>> for SourceOut {
    /// The source without its segments.
    fn from(p: &Provenance<'_>) -> Self {
        let doc = p.document;
        SourceOut {
            document_id: doc.document_id.clone(),
            document_title: doc.title.clone(),
            document_type: doc.document_type.to_string(),
            ticker: doc.ticker.clone(),
            year: doc.year,
            quarter: doc.quarter.map(|q| q.to_string()),
            filing_type: doc.filing_type.clone(),
            source_url: doc.source_url.clone(),
            metadata: (!doc.metadata.is_empty()).then(|| doc.metadata.to_json()),
            char_start: p.chars.start,
            char_end: p.chars.end,
            page_numbers: p.pages().map(|(first, last)| (first..=last).collect()),
            segments: None,
        }
    }
}

/// One document segment. Offsets count characters (Unicode scalar values, not bytes) in
/// the document text rebuilt by joining its segments with `"\n\n"`; `charEnd` is exclusive.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SegmentOut {
    /// `seg_<sequence>`.
    pub id: String,
    /// Position of the segment in the document, from 0.
    pub sequence: usize,
    /// The segment's text.
    pub content: String,
    /// First character.
    pub char_start: usize,
    /// One past the last character.
    pub char_end: usize,
}

/// `meta` of a response.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Meta {
    /// Chunks returned.
    pub total: usize,
    /// Set when the chunks come from another period than the one asked for.
    pub period_mismatch: Option<PeriodMismatch>,
    /// The request id.
    pub request_id: String,
    /// The `top_k` served (after the plan's clamp).
    pub top_k: usize,
    /// Whether the query was longer than the model window and cut for the encoders.
    pub query_truncated: bool,
    /// What happened to reranking.
    pub rerank: RerankStatus,
    /// The retrieval paths that served this answer.
    pub paths_served: Vec<String>,
    /// True while a path the request asked for is still being built (a fresh `sextant
    /// serve` serves BM25 within seconds and the other paths when their index is in), and
    /// when a shard of a sharded index did not answer or answered without some path.
    pub degraded: bool,
    /// Of a sharded index, how many shards answered (the results come from these).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shards: Option<ShardsMeta>,
    /// Milliseconds per stage: `encode`, each path (`dense`, `bm25`, `splade`), `fuse`,
    /// `rerank`, and the whole `search` (also in the `Server-Timing` header).
    pub timings: BTreeMap<String, f64>,
}

/// Checks the request and turns it into an engine search (plus the period mismatch).
pub(crate) fn plan_search(
    index: &dyn IndexView,
    req: &RetrieveRequest,
    max_top_k: usize,
    max_query_chars: usize,
) -> Result<(SearchRequest, Option<PeriodMismatch>), ApiError> {
    let query = req.query.trim();
    check_query(query, "query", max_query_chars)?;
    let top_k = result_count(req.top_k, "top_k", DEFAULT_TOP_K, max_top_k)?;
    let f = req.filters.clone().unwrap_or_default();
    let mut filter = Filter::default();
    if let Some(tickers) = &f.tickers {
        if let Some(i) = tickers.iter().position(|t| t.trim().is_empty()) {
            return Err(ApiError::invalid(format!("filters.tickers[{i}]"), "must not be empty"));
        }
        filter.tickers = tickers.iter().map(|t| t.trim().to_ascii_uppercase()).collect();
    }
    if let Some(types) = &f.source_types {
        filter.document_types = document_types(index, types, "filters.source_types", "source type")?;
    }
    if let Some(y) = f.year {
        if !(1900..=2100).contains(&y) {
            return Err(ApiError::invalid("filters.year", format!("must be a year between 1900 and 2100, got {y}")));
        }
    }
    let quarter = match &f.quarter {
        Some(q) => Some(q.parse::<Quarter>().map_err(|reason| ApiError::invalid("filters.quarter", reason))?),
        None => None,
    };
    let metadata = crate::search_filters::metadata_filter(f.metadata.as_ref(), "filters.metadata", index)?;
    let base = filter.clone();
    let admits = |d: &Document| base.matches(d) && metadata.as_ref().is_none_or(|c| c.matches(d));
    let live = index.documents().enumerate().filter(|(d, _)| !index.is_withdrawn(*d as u32)).map(|(_, d)| d);
    let mismatch = match fallback(live, admits, f.year, quarter) {
        Some((ids, mismatch)) => {
            // An empty id list must still match nothing.
            filter.document_ids = if ids.is_empty() { vec![String::new()] } else { ids };
            Some(mismatch)
        }
        None => {
            filter.years = f.year.into_iter().collect();
            filter.quarters = quarter.into_iter().collect();
            None
        }
    };
    let mut search = SearchRequest::new(query, top_k);
    search.filter = filter;
    search.documents = metadata.map(|c| crate::search_filters::admitted(&c, index));
    search.fetch_segments = req.include_segments.unwrap_or(false);
    if req.rerank.unwrap_or(true) {
        search.recency = Some(default_recency());
    } else {
        search.paths = vec![Path::Dense];
        search.rerank = false;
    }
    Ok((search, mismatch))
}

/// Builds the response from an engine outcome.
pub(crate) fn respond(
    searcher: &Searcher,
    req: &RetrieveRequest,
    search: &SearchRequest,
    searched: ShardedOutcome,
    mismatch: Option<PeriodMismatch>,
    request_id: String,
) -> RetrieveResponse {
    let (shards, degraded) = (ShardsMeta::of(&searched, searcher), crate::params::degraded(&searched));
    let out = searched.outcome;
    let index = searcher.results(searched.fetched);
    let with_segments = req.include_segments.unwrap_or(false);
    let raw_dense = search.paths == [Path::Dense];
    let (analyzer, idf) = (index.analyzer(), |t: &str| index.idf(t));
    let chunks: Vec<ChunkOut> = out
        .hits
        .iter()
        .enumerate()
        .map(|(i, h)| {
            let chunk_text = index.text(h.chunk);
            let p = index.provenance(h.chunk);
            // Without fusion the dense path's cosine, which is a relevance too once below 0 is 0.
            let score = if raw_dense {
                h.diagnostics.paths.get(&Path::Dense).map_or(h.score, |p| p.score.clamp(0.0, 1.0))
            } else {
                h.score
            };
            let evidence =
                sextant_core::pipeline::evidence::best_span(chunk_text, &search.query, &analyzer, &idf, EVIDENCE_WORDS)
                    .map(|e| e.text);
            let segments = with_segments.then(|| {
                index
                    .segments_of(h.chunk)
                    .into_iter()
                    .map(|s| SegmentOut {
                        id: format!("seg_{}", s.sequence),
                        sequence: s.sequence as usize,
                        content: s.content,
                        char_start: s.char_start,
                        char_end: s.char_end,
                    })
                    .collect()
            });
            ChunkOut {
                id: format!("chunk_{:02}", i + 1),
                text: chunk_text.to_string(),
                score,
                evidence_text: evidence,
                source: SourceOut { segments, ..SourceOut::from(&p) },
            }
        })
        .collect();
    crate::access::record(|r| r.results = Some(chunks.len()));
    RetrieveResponse {
        meta: Meta {
            total: chunks.len(),
            period_mismatch: mismatch,
            request_id,
            top_k: search.top_k,
            query_truncated: out.query_truncated,
            rerank: out.rerank,
            paths_served: out.paths_served.iter().map(|p| p.name().to_string()).collect(),
            degraded,
            shards,
            timings: crate::access::stages(),
        },
        chunks,
    }
}

/// The handler.
pub(crate) async fn handle(
    State(state): State<Arc<AppState>>,
    Authed { caller, request_id, body: req }: Authed<RetrieveRequest>,
) -> Result<Json<RetrieveResponse>, ApiError> {
    let searcher = state.searcher_for(&caller, req.index.as_deref().unwrap_or(&state.config.default_index))?;
    let (search, mismatch) = plan_search(searcher.view(), &req, caller.plan.max_top_k, state.config.max_query_chars)?;
    let out = run_search(&searcher, &search).await?;
    Ok(Json(respond(&searcher, &req, &search, out, mismatch, request_id)))
}
