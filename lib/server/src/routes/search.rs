//! `POST /v1/search`: compact, citable units (the best sentence span of each chunk) from
//! dense + SPLADE + BM25 retrieval with filters pre-applied, fusion, rerank of the fused top
//! candidates where a reranker is configured, recency boost and per-document
//! diversification. Every result carries its diagnostics.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::extract::State;
use axum::Json;
use serde::{Deserialize, Serialize};
use sextant_core::corpus::Date;
use sextant_core::index::Filter;
use sextant_core::index::Provenance;
use sextant_core::pipeline::{IndexView, Path, RerankStatus, SearchRequest};
use sextant_finance::classify::{company_key, company_names};

use crate::auth::Authed;
use crate::envelope::ApiError;
use crate::params::{check_query, default_recency, document_types, result_count, run_search, ShardsMeta};
use crate::state::AppState;

/// Words in a unit at most (about 40 tokens).
const UNIT_WORDS: usize = 30;
/// Fused candidates the reranker sees.
const RERANK_DEPTH: usize = 150;

/// One value or a list of values.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(untagged)]
pub enum OneOrMany {
    /// `"AAPL"`.
    One(String),
    /// `["AAPL", "Microsoft"]`.
    Many(Vec<String>),
}

impl OneOrMany {
    fn into_vec(self) -> Vec<String> {
        match self {
            OneOrMany::One(s) => vec![s],
            OneOrMany::Many(v) => v,
        }
    }
}

/// The request body.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SearchBody {
    /// The query (required, non-empty).
    pub query: String,
    /// The index to search (default: the server's default index, `defaultIndex` in
    /// `GET /health`; `GET /v1/indexes` lists those the key may read).
    #[serde(default)]
    pub index: Option<String>,
    /// Companies: tickers or names (`"AAPL"`, `"Apple"`, `["MA", "Exxon Mobil"]`).
    #[serde(default)]
    pub entity: Option<OneOrMany>,
    /// Source types (`earnings_call`, `10-K`, `10-Q`).
    #[serde(default)]
    pub theme: Option<OneOrMany>,
    /// Published on or after (`YYYY-MM-DD`).
    #[serde(default)]
    pub published_after: Option<String>,
    /// Published on or before (`YYYY-MM-DD`).
    #[serde(default)]
    pub published_before: Option<String>,
    /// Conditions on the documents' own metadata fields, as one group of the
    /// knowledge-base `SearchFilters` grammar (`{"department": "legal", "pages": {"gte": 3}}`).
    #[serde(default)]
    pub metadata: Option<serde_json::Value>,
    /// Results, 1-50 (default 10), clamped to the plan's maximum.
    #[serde(default)]
    pub limit: Option<i64>,
    /// At most this many units from one document (default 3).
    #[serde(default)]
    pub max_per_document: Option<i64>,
    /// Rerank where a reranker is configured (default true).
    #[serde(default)]
    pub rerank: Option<bool>,
    /// Boost recent documents (default true).
    #[serde(default)]
    pub recency_boost: Option<bool>,
    /// Dense candidates under this cosine similarity are dropped (default 0.3).
    #[serde(default)]
    pub min_similarity: Option<f32>,
}

/// The response body.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct SearchResponse {
    /// Units, best first.
    pub results: Vec<Unit>,
    /// About the request.
    pub meta: SearchMeta,
}

/// One citable unit.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Unit {
    /// `<document id>#<chunk ordinal>:<start>-<end>`: stable for one index version.
    pub unit_id: String,
    /// The best-matching sentence span of the chunk.
    pub text: String,
    /// Relevance in [0, 1], never rising down the list: the reranker's score when reranked,
    /// else the fused score's relevance (`rrf_score` in the diagnostics is the raw one).
    pub score: f32,
    /// The document.
    pub document: DocumentRef,
    /// Where the unit sits.
    pub position: Position,
    /// Why it ranked here.
    pub diagnostics: UnitDiagnostics,
}

/// A unit's document.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct DocumentRef {
    /// Document id.
    pub document_id: String,
    /// Title.
    pub title: String,
    /// Type.
    pub document_type: String,
    /// Ticker.
    pub ticker: Option<String>,
    /// Fiscal year.
    pub year: Option<i32>,
    /// Fiscal quarter.
    pub quarter: Option<String>,
    /// Publication date.
    pub published_at: Option<String>,
    /// Link to the original.
    pub source_url: Option<String>,
    /// The document's own metadata fields (absent when it has none).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata: Option<serde_json::Value>,
}

impl From<&Provenance<'_>> for DocumentRef {
    fn from(p: &Provenance<'_>) -> Self {
        let doc = p.document;
        DocumentRef {
            document_id: doc.document_id.clone(),
            title: doc.title.clone(),
            document_type: doc.document_type.to_string(),
            ticker: doc.ticker.clone(),
            year: doc.year,
            quarter: doc.quarter.map(|q| q.to_string()),
            published_at: doc.published_at.map(|d| d.to_string()),
            source_url: doc.source_url.clone(),
            metadata: (!doc.metadata.is_empty()).then(|| doc.metadata.to_json()),
        }
    }
}

/// Where a unit sits: its chunk, and character offsets (Unicode scalar values, end
/// exclusive) into the document text rebuilt by joining segments with `"\n\n"`.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Position {
    /// The chunk the unit came from (as `/v1/retrieve` would return it).
    pub chunk_text: String,
    /// First segment of the chunk.
    pub segment_start: u32,
    /// One past its last segment.
    pub segment_end: u32,
    /// First character of the unit in the document text.
    pub char_start: usize,
    /// One past its last character.
    pub char_end: usize,
    /// The first and last page of the chunk, when its document has pages (a PDF).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub page: Option<PageSpan>,
}

/// The pages a passage spans, from 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct PageSpan {
    /// The page it starts on.
    pub first: u32,
    /// The page it ends on.
    pub last: u32,
}

/// Ranks at each stage.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct UnitDiagnostics {
    /// Rank in the dense path (absent: not found by it).
    pub dense_rank: Option<usize>,
    /// Rank in the SPLADE path.
    pub sparse_rank: Option<usize>,
    /// Rank in the BM25 path.
    pub bm25_rank: Option<usize>,
    /// Dense cosine similarity, when found by the dense path.
    pub dense_score: Option<f32>,
    /// Rank after fusion (the name is the API's; the default fusion adds the z-scores of
    /// each path's own scores).
    pub rrf_rank: usize,
    /// Fused score: a weighted sum of z-scores by default, so it can be negative; only its
    /// order means something.
    pub rrf_score: f32,
    /// Rank after reranking.
    pub rerank_rank: Option<usize>,
    /// Reranker score.
    pub rerank_score: Option<f32>,
}

/// `meta` of a response.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct SearchMeta {
    /// Units returned.
    pub total: usize,
    /// Chunks that passed the filters.
    pub candidates: usize,
    /// The limit served (after the plan's clamp).
    pub limit: usize,
    /// The companies the `entity` filter resolved to.
    pub entities: Vec<String>,
    /// What happened to reranking (`applied`, `unavailable`, `failed` with a reason).
    pub rerank: RerankStatus,
    /// Paths that failed and were skipped.
    pub failed_paths: BTreeMap<String, String>,
    /// Whether the query was cut to the model window.
    pub query_truncated: bool,
    /// The retrieval paths that served this answer.
    pub paths_served: Vec<String>,
    /// True while a path the request asked for is still being built (a fresh `sextant
    /// serve` serves BM25 within seconds and the other paths when their index is in), and
    /// when a shard of a sharded index did not answer or answered without some path.
    pub degraded: bool,
    /// Of a sharded index, how many shards answered (the results come from these).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shards: Option<ShardsMeta>,
    /// The request id.
    pub request_id: String,
    /// Milliseconds per stage: `encode`, each path, `fuse`, `rerank`, and the whole `search`
    /// (also in the `Server-Timing` header).
    pub timings: BTreeMap<String, f64>,
}

/// A day of the calendar written exactly `YYYY-MM-DD`.
fn parse_date(s: &str) -> Option<Date> {
    s.parse().ok().filter(|_| s.len() == 10)
}

/// The handler.
pub(crate) async fn handle(
    State(state): State<Arc<AppState>>,
    Authed { caller, request_id, body: req }: Authed<SearchBody>,
) -> Result<Json<SearchResponse>, ApiError> {
    let searcher = state.searcher_for(&caller, req.index.as_deref().unwrap_or(&state.config.default_index))?;
    let index = searcher.view();
    let query = req.query.trim().to_string();
    check_query(&query, "query", state.config.max_query_chars)?;
    let limit = result_count(req.limit, "limit", 10, caller.plan.max_top_k)?;
    let max_per_document = req.max_per_document.unwrap_or(3);
    if max_per_document < 1 {
        return Err(ApiError::invalid("max_per_document", format!("must be at least 1, got {max_per_document}")));
    }
    let min_similarity = req.min_similarity.unwrap_or(state.config.min_dense_similarity);
    if !(-1.0..=1.0).contains(&min_similarity) {
        return Err(ApiError::invalid(
            "min_similarity",
            format!("must be a cosine similarity in [-1, 1], got {min_similarity}"),
        ));
    }
    let mut filter = Filter::default();
    let mut entities = Vec::new();
    if let Some(e) = req.entity.clone() {
        let names = company_names(index);
        for (i, name) in e.into_vec().iter().enumerate() {
            let key = company_key(name);
            let ticker = names.get(&name.trim().to_ascii_lowercase()).or_else(|| names.get(&key)).ok_or_else(|| {
                ApiError::invalid(
                    format!("entity[{i}]"),
                    format!(
                        "no company in this index matches {name:?} (use a ticker such as {} or a company name)",
                        names.values().next().map_or("AAPL", |s| s.as_str())
                    ),
                )
            })?;
            entities.push(ticker.clone());
        }
        entities.sort();
        entities.dedup();
        filter.tickers = entities.clone();
    }
    if let Some(t) = req.theme.clone() {
        filter.document_types = document_types(index, &t.into_vec(), "theme", "theme")?;
    }
    let date = |field: &str, value: &Option<String>| match value {
        Some(v) => parse_date(v)
            .map(Some)
            .ok_or_else(|| ApiError::invalid(field, format!("must be a date YYYY-MM-DD, got {v:?}"))),
        None => Ok(None),
    };
    let (after, before) =
        (date("published_after", &req.published_after)?, date("published_before", &req.published_before)?);
    if let (Some(a), Some(b)) = (after, before) {
        if a > b {
            return Err(ApiError::invalid("published_before", format!("{b} is before published_after {a}")));
        }
    }
    filter.published_after = after;
    filter.published_before = before;

    let metadata = crate::search_filters::metadata_filter(req.metadata.as_ref(), "metadata", index)?;
    let mut search = SearchRequest::new(query.clone(), limit);
    search.filter = filter;
    search.documents = metadata.map(|c| crate::search_filters::admitted(&c, index));
    search.rerank = req.rerank.unwrap_or(true);
    search.rerank_depth = RERANK_DEPTH;
    search.max_per_document = Some(max_per_document as usize);
    search.min_dense_similarity = Some(min_similarity);
    if req.recency_boost.unwrap_or(true) {
        search.recency = Some(default_recency());
    }
    let searched = run_search(&searcher, &search).await?;
    let (shards, degraded) = (ShardsMeta::of(&searched, &searcher), crate::params::degraded(&searched));
    let out = searched.outcome;
    let index = searcher.results(searched.fetched);
    let (analyzer, idf) = (index.analyzer(), |t: &str| index.idf(t));
    let results: Vec<Unit> = out
        .hits
        .iter()
        .map(|h| {
            let (chunk_text, p) = (index.text(h.chunk), index.provenance(h.chunk));
            let ev = sextant_core::pipeline::evidence::best_span(chunk_text, &query, &analyzer, &idf, UNIT_WORDS);
            let (text, c0, c1) = ev.map_or((chunk_text.to_string(), 0, chunk_text.chars().count()), |e| {
                (e.text, e.char_start, e.char_end)
            });
            // The chunk's text is its range of the document's text, so offsets shift by
            // where that range starts.
            let base = p.chars.start;
            let rank = |p: Path| h.diagnostics.paths.get(&p).map(|r| r.rank);
            Unit {
                unit_id: format!("{}:{}-{}", p.chunk_id(), base + c0, base + c1),
                text,
                score: h.score,
                document: DocumentRef::from(&p),
                position: Position {
                    chunk_text: chunk_text.to_string(),
                    segment_start: p.segments.start,
                    segment_end: p.segments.end,
                    char_start: base + c0,
                    char_end: base + c1,
                    page: p.pages().map(|(first, last)| PageSpan { first, last }),
                },
                diagnostics: UnitDiagnostics {
                    dense_rank: rank(Path::Dense),
                    sparse_rank: rank(Path::Splade),
                    bm25_rank: rank(Path::Bm25),
                    dense_score: h.diagnostics.paths.get(&Path::Dense).map(|r| r.score),
                    rrf_rank: h.diagnostics.rrf_rank,
                    rrf_score: h.diagnostics.rrf_score,
                    rerank_rank: h.diagnostics.rerank_rank,
                    rerank_score: h.diagnostics.rerank_score,
                },
            }
        })
        .collect();
    crate::access::record(|r| r.results = Some(results.len()));
    Ok(Json(SearchResponse {
        meta: SearchMeta {
            total: results.len(),
            candidates: out.candidates,
            limit,
            entities,
            rerank: out.rerank,
            failed_paths: out.failed_paths.iter().map(|(p, e)| (p.name().to_string(), e.clone())).collect(),
            query_truncated: out.query_truncated,
            paths_served: out.paths_served.iter().map(|p| p.name().to_string()).collect(),
            degraded,
            shards,
            timings: crate::access::stages(),
            request_id,
        },
        results,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_must_be_exact_calendar_days() {
        // Company name keys are tested beside `finance::classify::company_key`.
        assert_eq!(parse_date("2024-02-29").map(|d| d.to_string()).as_deref(), Some("2024-02-29"));
        for bad in ["2024-13-01", "24-01-01", "2024-02-31", "2023-02-29", "2024-02-29T00:00"] {
            assert!(parse_date(bad).is_none(), "{bad}");
        }
    }
}
