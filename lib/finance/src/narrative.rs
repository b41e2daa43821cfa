//! The `narrative` route: the engine's hybrid search over filing sections and call
//! transcripts, run once per (company, year) asked, then guarded: a minimum dense
//! similarity, a minimum rerank score (when a reranker is configured), a maximum count,
//! a fair share per company for multi-company questions, and no duplicates.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use serde::Serialize;
use sextant_core::corpus::{DocumentType, Quarter};
use sextant_core::error::Result;
use sextant_core::index::Filter;
use sextant_core::pipeline::{IndexView, Path, SearchRequest};
use sextant_core::shards::Searcher;

/// Guardrail settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Guardrails {
    /// Passages under this cosine similarity to the question are dropped (all-MiniLM-L6-v2
    /// scale: unrelated text sits near 0.1, on-topic passages above 0.3).
    pub min_similarity: f32,
    /// Passages under this reranker score are dropped (only with a reranker). Reranker
    /// scores are probabilities, `σ(logit)` in (0, 1) ([`CrossEncoderReranker::score`](sextant_core::pipeline::CrossEncoderReranker::score)):
    /// the default 0.05 drops what the cross-encoder judges irrelevant (a logit under −2.9).
    pub min_rerank_score: f32,
    /// Passages returned at most.
    pub max_chunks: usize,
    /// Candidates fetched per (company, year) search.
    pub candidates_per_search: usize,
}

impl Default for Guardrails {
    fn default() -> Self {
        Guardrails { min_similarity: 0.25, min_rerank_score: 0.05, max_chunks: 50, candidates_per_search: 20 }
    }
}

/// Searches of one narrative request at most, (company, year) pairs; beyond, one search per
/// company over all its years.
pub const MAX_SEARCHES: usize = 24;

/// Whether the narrative route searches documents of type `t`: 10-K and 10-Q sections and
/// earnings calls.
pub fn is_narrative(t: &DocumentType) -> bool {
    matches!(t, DocumentType::Form10K | DocumentType::Form10Q | DocumentType::EarningsCall)
}

/// One cited passage.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct Passage {
    /// The chunk's id in the index (`<documentId>#<chunk ordinal>`).
    pub chunk_id: String,
    /// Document id.
    pub document_id: String,
    /// Document title (company, form, period, section).
    pub title: String,
    /// `10-K`, `10-Q` or `earnings_call`.
    pub document_type: DocumentType,
    /// Company.
    pub ticker: Option<String>,
    /// Fiscal year.
    pub year: Option<i32>,
    /// Fiscal quarter.
    pub quarter: Option<Quarter>,
    /// The passage.
    pub text: String,
    /// Cosine similarity of the passage to the question.
    pub similarity: f32,
    /// Cross-encoder score, when a reranker ran.
    pub rerank_score: Option<f32>,
    /// Fused (or reranked) score the engine ranked it by.
    pub score: f32,
}

/// Passages and what the guardrails did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Narrative {
    /// Passages, best first.
    pub passages: Vec<Passage>,
    /// Each guardrail action, in words.
    pub actions: Vec<String>,
    /// Of a sharded index, the fewest shards that answered any of its searches, and how
    /// many it has: fewer than all means some passages may be missing.
    pub shards: Option<(usize, usize)>,
}

/// Searches `searcher` (one index or a sharded one) for `question` per (ticker, year)
/// pair and applies `guard`, keeping `top_k` passages shared fairly across `tickers`.
/// Every search carries `cancel`.
pub fn narrative(
    searcher: &Searcher,
    question: &str,
    tickers: &[String],
    years: &[i32],
    top_k: usize,
    guard: &Guardrails,
    cancel: Option<&sextant_core::pipeline::CancelFlag>,
) -> Result<Narrative> {
    let (engine, index) = (searcher.engine(), searcher.view());
    // Encoded once for every (company, year) search below.
    let (prepared, _) = engine.prepare(question, &Path::ALL)?;
    let query_vec = match &prepared.dense {
        Some(v) => v.clone(),
        None => engine.dense_encoder()?.embed(question)?,
    };
    let prepared = Arc::new(prepared);
    let ticker_list: Vec<Option<&String>> =
        if tickers.is_empty() { vec![None] } else { tickers.iter().map(Some).collect() };
    // One search per (company, year), for fairness across years, while that stays within
    // MAX_SEARCHES; beyond, one search per company over all its years.
    let per_year = !years.is_empty() && ticker_list.len() * years.len() <= MAX_SEARCHES;
    let year_list: Vec<Option<Vec<i32>>> = match (years.is_empty(), per_year) {
        (true, _) => vec![None],
        (false, true) => years.iter().map(|&y| Some(vec![y])).collect(),
        (false, false) => vec![Some(years.to_vec())],
    };
    let types: HashSet<&DocumentType> =
        index.documents().map(|d| &d.document_type).filter(|t| is_narrative(t)).collect();
    let mut actions = Vec::new();
    let mut candidates: Vec<Passage> = Vec::new();
    let shards: std::cell::Cell<Option<(usize, usize)>> = std::cell::Cell::new(None);
    for t in &ticker_list {
        // Each hit with its text (of a sharded index, from the search's fetch phase).
        let search = |years: Vec<i32>| -> Result<Vec<(sextant_core::pipeline::Hit, String)>> {
            let mut req = SearchRequest::new(question, guard.candidates_per_search);
            req.cancel = cancel.cloned();
            req.prepared = Some(prepared.clone());
            req.filter = Filter {
                tickers: t.map(|t| vec![t.clone()]).unwrap_or_default(),
                years,
                document_types: types.iter().map(|t| (*t).clone()).collect(),
                ..Default::default()
            };
            let out = searcher.search(&req)?;
            if searcher.shard_count() > 1 {
                let fewest = shards.get().map_or(out.answered, |(a, _)| a.min(out.answered));
                shards.set(Some((fewest, out.of)));
            }
            let results = searcher.results(out.fetched);
            Ok(out
                .outcome
                .hits
                .into_iter()
                .map(|h| {
                    let text = results.text(h.chunk).to_string();
                    (h, text)
                })
                .collect())
        };
        let mut hits = Vec::new();
        for y in &year_list {
            hits.extend(search(y.clone().unwrap_or_default())?);
        }
        if hits.is_empty() && !years.is_empty() {
            // Nothing filed for the years asked: the company's other years, said so.
            hits = search(Vec::new())?;
            if !hits.is_empty() {
                let who = t.map(|t| t.as_str()).unwrap_or("any company");
                let asked: Vec<String> = years.iter().map(|y| format!("FY{y}")).collect();
                actions.push(format!("no {who} passage for {}: passages from other years", asked.join(", ")));
            }
        }
        // A chunk's similarity is its best window's cosine with the question.
        let ids: Vec<u32> = hits.iter().map(|(h, _)| h.chunk).collect();
        let similarity = index.dense_scores(&ids, &[&query_vec])?.swap_remove(0);
        for ((h, text), similarity) in hits.into_iter().zip(similarity) {
            let p = index.provenance(h.chunk);
            let doc = p.document;
            candidates.push(Passage {
                chunk_id: p.chunk_id(),
                document_id: doc.document_id.clone(),
                title: doc.title.clone(),
                document_type: doc.document_type.clone(),
                ticker: doc.ticker.clone(),
                year: doc.year,
                quarter: doc.quarter,
                text,
                similarity,
                rerank_score: h.diagnostics.rerank_score,
                score: h.score,
            });
        }
    }
    let fetched = candidates.len();
    // Duplicates: the same chunk from two searches, or the same text twice.
    let mut seen = HashSet::new();
    candidates.retain(|p| seen.insert(p.chunk_id.clone()) && seen.insert(crate::text::normalize(&p.text)));
    if candidates.len() < fetched {
        actions.push(format!("removed {} duplicate passages", fetched - candidates.len()));
    }
    let before = candidates.len();
    candidates.retain(|p| p.similarity >= guard.min_similarity);
    if candidates.len() < before {
        actions.push(format!(
            "removed {} passages under similarity {}",
            before - candidates.len(),
            guard.min_similarity
        ));
    }
    let before = candidates.len();
    candidates.retain(|p| p.rerank_score.is_none_or(|s| s >= guard.min_rerank_score));
    if candidates.len() < before {
        actions.push(format!(
            "removed {} passages under rerank score {}",
            before - candidates.len(),
            guard.min_rerank_score
        ));
    }
    let key = |p: &Passage| p.rerank_score.unwrap_or(p.score);
    candidates.sort_by(|a, b| key(b).total_cmp(&key(a)).then(b.similarity.total_cmp(&a.similarity)));
    let limit = top_k.min(guard.max_chunks);
    let passages = if tickers.len() > 1 {
        fair_share(candidates, tickers, limit, &mut actions)
    } else {
        if candidates.len() > limit {
            actions.push(format!("kept the best {limit} of {} passages", candidates.len()));
        }
        candidates.truncate(limit);
        candidates
    };
    if passages.is_empty() {
        actions.push("no passage passed the guardrails: the context has no narrative".into());
    }
    Ok(Narrative { passages, actions, shards: shards.get() })
}

/// Gives each company `ceil(limit / companies)` slots filled by its best passages, then
/// hands unused slots to the best passages left; the result stays sorted by score.
fn fair_share(sorted: Vec<Passage>, tickers: &[String], limit: usize, actions: &mut Vec<String>) -> Vec<Passage> {
    let share = limit.div_ceil(tickers.len().max(1));
    let mut per: BTreeMap<String, usize> = BTreeMap::new();
    // Passages with their rank in `sorted`.
    let mut kept: Vec<(usize, Passage)> = Vec::new();
    let mut rest: Vec<(usize, Passage)> = Vec::new();
    for (i, p) in sorted.into_iter().enumerate() {
        let t = p.ticker.clone().unwrap_or_default();
        let n = per.entry(t).or_default();
        if *n < share && kept.len() < limit {
            *n += 1;
            kept.push((i, p));
        } else {
            rest.push((i, p));
        }
    }
    let spare = limit.saturating_sub(kept.len());
    kept.extend(rest.into_iter().take(spare));
    kept.sort_by_key(|(i, _)| *i);
    let counts: Vec<String> = tickers
        .iter()
        .map(|t| format!("{t} {}", kept.iter().filter(|(_, p)| p.ticker.as_deref() == Some(t.as_str())).count()))
        .collect();
    actions.push(format!("fair allocation: up to {share} passages per company ({})", counts.join(", ")));
    kept.into_iter().map(|(_, p)| p).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(t: &str, score: f32) -> Passage {
        Passage {
            chunk_id: format!("{t}{score}"),
            document_id: String::new(),
            title: String::new(),
            document_type: DocumentType::Form10K,
            ticker: Some(t.into()),
            year: None,
            quarter: None,
            text: String::new(),
            similarity: 0.5,
            rerank_score: None,
            score,
        }
    }

    #[test]
    fn fair_share_gives_each_company_its_slots_then_the_rest_by_score() {
        let sorted = vec![p("A", 9.0), p("A", 8.0), p("A", 7.0), p("A", 6.0), p("B", 1.0)];
        let mut actions = Vec::new();
        let out = fair_share(sorted.clone(), &["A".into(), "B".into()], 4, &mut actions);
        let ids: Vec<_> = out.iter().map(|p| p.chunk_id.as_str()).collect();
        assert_eq!(ids, ["A9", "A8", "A7", "B1"], "B keeps its one passage although A's are better");
        assert!(actions[0].contains("A 3, B 1"), "{actions:?}");
        // A company without passages leaves its slots to the others.
        let out = fair_share(sorted, &["A".into(), "C".into()], 4, &mut actions);
        assert_eq!(out.len(), 4);
        assert!(out.iter().all(|p| p.ticker.as_deref() == Some("A") || p.ticker.as_deref() == Some("B")));
        assert!(fair_share(Vec::new(), &["A".into(), "B".into()], 4, &mut actions).is_empty());
    }
}
