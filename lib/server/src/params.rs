//! Checks and defaults the endpoints share: the query, result counts, document types,
//! the recency boost, and running a search off the async runtime.

use sextant_core::corpus::DocumentType;
use sextant_core::pipeline::{CancelFlag, CancelOnDrop, IndexView, Recency, SearchRequest};
use sextant_core::shards::{Searcher, ShardedOutcome};

use crate::envelope::ApiError;

/// The most results any request may ask for (plans clamp further).
pub const MAX_RESULTS: i64 = 50;

/// Refuses an empty (or all-blank) query, or one over `max_chars` characters, on `field`.
pub fn check_query(text: &str, field: &str, max_chars: usize) -> Result<(), ApiError> {
    if text.trim().is_empty() {
        return Err(ApiError::invalid(field, "must not be empty"));
    }
    if text.chars().count() > max_chars {
        return Err(ApiError::invalid(field, format!("is longer than {max_chars} characters")));
    }
    Ok(())
}

/// A result count: `default` when absent, a 400 on `field` below 1, otherwise capped
/// silently at [`MAX_RESULTS`] and at the plan's `plan_max`.
pub fn result_count(value: Option<i64>, field: &str, default: i64, plan_max: usize) -> Result<usize, ApiError> {
    let n = value.unwrap_or(default);
    if n < 1 {
        return Err(ApiError::invalid(field, format!("must be between 1 and {MAX_RESULTS}, got {n}")));
    }
    Ok((n.min(MAX_RESULTS) as usize).min(plan_max))
}

/// Each value must name a document type `index` holds (any case); a 400 on `field[i]`
/// otherwise, calling the values `what` ("source type", "theme").
pub fn document_types(
    index: &dyn IndexView,
    values: &[String],
    field: &str,
    what: &str,
) -> Result<Vec<DocumentType>, ApiError> {
    let known: std::collections::BTreeSet<&str> = index.documents().map(|d| d.document_type.as_str()).collect();
    for (i, t) in values.iter().enumerate() {
        if !known.iter().any(|k| k.eq_ignore_ascii_case(t.trim())) {
            return Err(ApiError::invalid(
                format!("{field}[{i}]"),
                format!(
                    "unknown {what} {t:?} (this index holds: {})",
                    known.iter().copied().collect::<Vec<_>>().join(", ")
                ),
            ));
        }
    }
    Ok(values.iter().map(|t| DocumentType::parse(t)).collect())
}

/// The recency boost of the public endpoints: a 365-day half-life, weight 0.1.
pub fn default_recency() -> Recency {
    Recency { half_life_days: 365.0, weight: 0.1, now: None }
}

/// Runs `work` on the blocking pool (it is CPU-bound), so the runtime keeps serving. It gets
/// a flag that is cancelled when the request's future is dropped first (the client went
/// away), for the searches it runs to stop at their next stage.
pub async fn run_cancellable<T: Send + 'static>(
    work: impl FnOnce(CancelFlag) -> T + Send + 'static,
) -> Result<T, ApiError> {
    let flag = CancelFlag::default();
    let guard = CancelOnDrop::new(flag.clone());
    let out = tokio::task::spawn_blocking(move || work(flag)).await.map_err(|_| ApiError::internal())?;
    guard.disarm();
    Ok(out)
}

/// Runs `search` with [`run_cancellable`], on one engine or every shard.
pub async fn run_search(searcher: &Searcher, search: &SearchRequest) -> Result<ShardedOutcome, ApiError> {
    let (owned, mut search) = (searcher.clone(), search.clone());
    let out = run_cancellable(move |flag| {
        search.cancel = Some(flag);
        owned.search(&search)
    })
    .await??;
    crate::access::add_timings(&out.outcome.timings);
    // The index is recorded where the request resolved it (`AppState::index_for`).
    let sharded = searcher.shard_count() > 1;
    crate::access::record(|r| {
        r.results = Some(out.outcome.hits.len());
        r.rerank = Some(out.outcome.rerank.name());
        r.shards_missing = sharded.then_some((out.of - out.answered, out.of));
    });
    Ok(out)
}

/// `meta.shards` of a response from a sharded index: how many of its shards answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
pub struct ShardsMeta {
    /// Shards that answered (the results come from these).
    pub answered: usize,
    /// Shards the index has.
    pub of: usize,
}

impl ShardsMeta {
    /// The shards of `out`, for an index of more than one shard (`None` for one index).
    pub fn of(out: &ShardedOutcome, searcher: &Searcher) -> Option<Self> {
        (searcher.shard_count() > 1).then_some(ShardsMeta { answered: out.answered, of: out.of })
    }
}

/// Whether a response is degraded: a path the request asked for is still being built, a
/// shard did not answer, or one answered without some path.
pub fn degraded(out: &ShardedOutcome) -> bool {
    !out.outcome.paths_pending.is_empty() || out.degraded()
}
