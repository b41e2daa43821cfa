//! Retrieval metrics on BEIR-style relevance judgements, and a runner that evaluates an
//! engine over a query set.
//!
//! Conventions follow `trec_eval` as BEIR reports it: nDCG uses the judged grade as the
//! gain and `log2(rank + 1)` discounts (1-based ranks); a document counts as relevant
//! when its grade is positive; queries without any relevant document are skipped.

use std::collections::HashMap;

use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use sextant_core::corpus::BeirSet;
use sextant_core::error::Result;
use sextant_core::pipeline::{Engine, SearchRequest};

use crate::{Query, Retriever};

/// Mean metrics over a query set.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Metrics {
    /// nDCG@10.
    pub ndcg_at_10: f64,
    /// Recall@10.
    pub recall_at_10: f64,
    /// Recall@100.
    pub recall_at_100: f64,
    /// MRR@10.
    pub mrr_at_10: f64,
    /// Queries evaluated.
    pub queries: usize,
}

/// The metrics of one query: what [`Metrics`] averages.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct QueryMetrics {
    /// The query's id.
    pub qid: String,
    /// nDCG@10 ([`ndcg_at`]).
    pub ndcg_at_10: f64,
    /// Recall@10 ([`recall_at`]).
    pub recall_at_10: f64,
    /// Recall@100.
    pub recall_at_100: f64,
    /// MRR@10 ([`mrr_at`]).
    pub mrr_at_10: f64,
}

impl Metrics {
    /// The mean of per-query metrics, in their order (the sums are the ones
    /// [`score_runs`] always took, so the means are bit for bit the same).
    pub fn mean(per_query: &[QueryMetrics]) -> Metrics {
        let mut m = Metrics::default();
        for q in per_query {
            m.ndcg_at_10 += q.ndcg_at_10;
            m.recall_at_10 += q.recall_at_10;
            m.recall_at_100 += q.recall_at_100;
            m.mrr_at_10 += q.mrr_at_10;
            m.queries += 1;
        }
        let n = m.queries.max(1) as f64;
        m.ndcg_at_10 /= n;
        m.recall_at_10 /= n;
        m.recall_at_100 /= n;
        m.mrr_at_10 /= n;
        m
    }
}

/// nDCG@k of a ranked list of document ids:
///
/// ```text
/// DCG@k  = Σ_{i=1..k} g(d_i) / log2(i + 1)     (g: the judged grade, 0 when unjudged or negative)
/// nDCG@k = DCG@k / IDCG@k                       (IDCG: the DCG of the judged grades sorted down)
/// ```
///
/// 0 when no judged grade is positive.
pub fn ndcg_at(ranked: &[String], judged: &HashMap<String, i32>, k: usize) -> f64 {
    let dcg: f64 = ranked
        .iter()
        .take(k)
        .enumerate()
        .map(|(i, d)| judged.get(d).copied().unwrap_or(0).max(0) as f64 / (i as f64 + 2.0).log2())
        .sum();
    let mut ideal: Vec<i32> = judged.values().copied().filter(|&g| g > 0).collect();
    ideal.sort_unstable_by(|a, b| b.cmp(a));
    let idcg: f64 = ideal.iter().take(k).enumerate().map(|(i, &g)| g as f64 / (i as f64 + 2.0).log2()).sum();
    if idcg == 0.0 {
        0.0
    } else {
        dcg / idcg
    }
}

/// Recall@k: the share of relevant documents found in the first `k`.
pub fn recall_at(ranked: &[String], judged: &HashMap<String, i32>, k: usize) -> f64 {
    let relevant = judged.values().filter(|&&g| g > 0).count();
    if relevant == 0 {
        return 0.0;
    }
    let found = ranked.iter().take(k).filter(|d| judged.get(*d).is_some_and(|&g| g > 0)).count();
    found as f64 / relevant as f64
}

/// MRR@k: the reciprocal rank of the first relevant document within `k`, else 0.
pub fn mrr_at(ranked: &[String], judged: &HashMap<String, i32>, k: usize) -> f64 {
    ranked.iter().take(k).position(|d| judged.get(d).is_some_and(|&g| g > 0)).map_or(0.0, |i| 1.0 / (i as f64 + 1.0))
}

/// Averages the metrics of per-query rankings.
pub fn score_runs(runs: &[(String, Vec<String>)], qrels: &HashMap<String, HashMap<String, i32>>) -> Metrics {
    Metrics::mean(&score_runs_per_query(runs, qrels))
}

/// The metrics of each query's ranking, in the order of `runs`; queries without judgements,
/// or without a positive one, are left out.
pub fn score_runs_per_query(
    runs: &[(String, Vec<String>)],
    qrels: &HashMap<String, HashMap<String, i32>>,
) -> Vec<QueryMetrics> {
    let mut out = Vec::with_capacity(runs.len());
    for (qid, ranked) in runs {
        let Some(j) = qrels.get(qid) else { continue };
        if !j.values().any(|&g| g > 0) {
            continue;
        }
        out.push(QueryMetrics {
            qid: qid.clone(),
            ndcg_at_10: ndcg_at(ranked, j, 10),
            recall_at_10: recall_at(ranked, j, 10),
            recall_at_100: recall_at(ranked, j, 100),
            mrr_at_10: mrr_at(ranked, j, 10),
        });
    }
    out
}

/// Runs every query of `set` through `engine` (document-level: one chunk per document,
/// 100 documents per query) with `template`'s settings, and scores the rankings.
pub fn evaluate(engine: &Engine, set: &BeirSet, template: &SearchRequest) -> Result<Metrics> {
    Ok(Metrics::mean(&evaluate_per_query(engine, set, template)?))
}

/// [`evaluate`], query by query: each evaluated query's metrics, in `set`'s query order.
pub fn evaluate_per_query(engine: &Engine, set: &BeirSet, template: &SearchRequest) -> Result<Vec<QueryMetrics>> {
    let runs: Vec<(String, Vec<String>)> = set
        .queries
        .par_iter()
        .map(|(qid, text)| {
            let mut req = template.clone();
            req.query = text.clone();
            req.top_k = 100;
            req.max_per_document = Some(1);
            let out = engine.search(&req)?;
            let docs = out.hits.iter().map(|h| engine.index().document_of(h.chunk).document_id.clone()).collect();
            Ok((qid.clone(), docs))
        })
        .collect::<Result<_>>()?;
    Ok(score_runs_per_query(&runs, &set.qrels))
}

/// Runs every query of `set` through a library [`Retriever`] and scores the document
/// rankings: items map to documents through `metadata["document_id"]` (else their id), the
/// first item of a document gives its rank, and 100 items are asked for.
pub fn evaluate_retriever(retriever: &dyn Retriever, set: &BeirSet) -> Result<Metrics> {
    let runs: Vec<(String, Vec<String>)> = set
        .queries
        .par_iter()
        .map(|(qid, text)| {
            let items = retriever.retrieve(&Query::new(text.clone()), 100)?;
            let mut seen = std::collections::HashSet::new();
            let docs = items
                .iter()
                .map(|i| i.metadata.get("document_id").and_then(|v| v.as_str()).unwrap_or(&i.id).to_string())
                .filter(|d| seen.insert(d.clone()))
                .collect();
            Ok((qid.clone(), docs))
        })
        .collect::<Result<_>>()?;
    Ok(score_runs(&runs, &set.qrels))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn judged(pairs: &[(&str, i32)]) -> HashMap<String, i32> {
        pairs.iter().map(|(d, g)| (d.to_string(), *g)).collect()
    }

    fn ranked(ids: &[&str]) -> Vec<String> {
        ids.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn ndcg_of_perfect_worst_and_partial_rankings() {
        let j = judged(&[("a", 1), ("b", 1)]);
        assert!((ndcg_at(&ranked(&["a", "b", "x"]), &j, 10) - 1.0).abs() < 1e-12);
        assert_eq!(ndcg_at(&ranked(&["x", "y"]), &j, 10), 0.0);
        // Relevant at ranks 2 and 3: (1/log2 3 + 1/log2 4) / (1 + 1/log2 3).
        let want = (1.0 / 3f64.log2() + 0.5) / (1.0 + 1.0 / 3f64.log2());
        assert!((ndcg_at(&ranked(&["x", "a", "b"]), &j, 10) - want).abs() < 1e-12);
        assert_eq!(ndcg_at(&ranked(&["x", "a"]), &j, 1), 0.0);
    }

    #[test]
    fn recall_and_mrr() {
        let j = judged(&[("a", 1), ("b", 2), ("c", 0)]);
        let r = ranked(&["c", "x", "b"]);
        assert_eq!(recall_at(&r, &j, 10), 0.5);
        assert_eq!(recall_at(&r, &j, 2), 0.0);
        assert!((mrr_at(&r, &j, 10) - 1.0 / 3.0).abs() < 1e-12);
        assert_eq!(mrr_at(&r, &j, 2), 0.0);
        assert_eq!(recall_at(&r, &judged(&[]), 10), 0.0);
    }

    #[test]
    fn queries_without_relevant_documents_are_skipped() {
        let mut q = HashMap::new();
        q.insert("q1".to_string(), judged(&[("a", 1)]));
        q.insert("q2".to_string(), judged(&[("a", 0)]));
        let m = score_runs(&[("q1".into(), ranked(&["a"])), ("q2".into(), ranked(&["a"]))], &q);
        assert_eq!(m.queries, 1);
        assert_eq!(m.ndcg_at_10, 1.0);
    }

    #[test]
    fn per_query_metrics_average_to_the_set_metrics() {
        let mut q = HashMap::new();
        q.insert("q1".to_string(), judged(&[("a", 1), ("b", 2)]));
        q.insert("q2".to_string(), judged(&[("c", 1)]));
        q.insert("q3".to_string(), judged(&[("a", 0)]));
        let runs = [
            ("q1".to_string(), ranked(&["x", "b", "a"])),
            ("q2".to_string(), ranked(&["y", "z"])),
            ("q3".to_string(), ranked(&["a"])),
        ];
        let per = score_runs_per_query(&runs, &q);
        assert_eq!(per.iter().map(|m| m.qid.as_str()).collect::<Vec<_>>(), ["q1", "q2"]);
        assert_eq!(per[1].ndcg_at_10, 0.0);
        assert!((per[0].ndcg_at_10 - ndcg_at(&runs[0].1, &q["q1"], 10)).abs() < 1e-15);
        let m = score_runs(&runs, &q);
        assert_eq!(m.queries, 2);
        assert_eq!(m.ndcg_at_10, (per[0].ndcg_at_10 + per[1].ndcg_at_10) / 2.0);
        assert_eq!(m.mrr_at_10, 0.5 / 2.0);
    }
}
