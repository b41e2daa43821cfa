//! Confidence in a context, from signals that need no generated answer.
//!
//! `score = Σ weight_i · value_i` over four signals, each 0-100:
//!
//! - **retrieval quality**: relational: 90 when facts answer, 72 on the statement fallback, 90 × coverage for a
//!   timeseries, 0 when nothing; narrative: mean reranker probability (σ of the score) or, without a reranker,
//!   `(mean similarity − 0.2) / 0.4`, plus 5 for three or more documents and 5 for five or more passages; hybrid:
//!   the mean of both
//! - **source coverage**: (company, metric, period) cells answered / asked; narrative: companies with a passage /
//!   companies asked
//! - **cross-source agreement**: 100 − 25 per contradiction
//! - **data recency**: 100 − 20 per fiscal year between the newest period held for the company and the newest
//!   period returned
//!
//! Weights per route (the seed's citation-density signal needs a generated answer and is
//! left out; its weight is shared among the others):
//!
//! | route | retrieval | coverage | agreement | recency |
//! |---|---|---|---|---|
//! | metric_lookup, timeseries, full_statement | 0.45 | 0.25 | 0.15 | 0.15 |
//! | narrative | 0.35 | 0.25 | 0.20 | 0.20 |
//! | hybrid | 0.40 | 0.25 | 0.20 | 0.15 |
//!
//! Tier: `high` from 80, `medium` from 60, `low` below.

use serde::Serialize;

use super::classify::Route;

/// One signal's value and weight.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Signal {
    /// `retrieval_quality`, `source_coverage`, `cross_source_agreement`, `data_recency`.
    pub name: &'static str,
    /// 0-100.
    pub value: f64,
    /// Its weight for the route.
    pub weight: f64,
    /// How the value was reached.
    pub detail: String,
}

/// The confidence object of a context.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Confidence {
    /// 0-100, one decimal.
    pub score: f64,
    /// `high`, `medium` or `low`.
    pub tier: &'static str,
    /// The signals behind the score.
    pub signals: Vec<Signal>,
}

/// The four signal values, 0-100, with how each was reached.
#[derive(Debug, Clone, Default)]
pub struct Inputs {
    /// Retrieval quality and its explanation.
    pub retrieval: (f64, String),
    /// Source coverage.
    pub coverage: (f64, String),
    /// Cross-source agreement.
    pub agreement: (f64, String),
    /// Data recency.
    pub recency: (f64, String),
}

/// The weights (retrieval, coverage, agreement, recency) of a route.
pub fn weights(route: Route) -> [f64; 4] {
    match route {
        Route::MetricLookup | Route::Timeseries | Route::FullStatement => [0.45, 0.25, 0.15, 0.15],
        Route::Narrative => [0.35, 0.25, 0.20, 0.20],
        Route::Hybrid => [0.40, 0.25, 0.20, 0.15],
    }
}

/// Agreement from a contradiction count.
pub fn agreement(contradictions: usize) -> (f64, String) {
    ((100.0 - 25.0 * contradictions as f64).max(0.0), format!("{contradictions} contradictions"))
}

/// Recency from the newest year held and the newest year returned.
pub fn recency(newest_held: Option<i32>, newest_returned: Option<i32>) -> (f64, String) {
    match (newest_held, newest_returned) {
        (Some(h), Some(r)) => {
            let stale = (h - r).max(0);
            ((100.0 - 20.0 * stale as f64).max(0.0), format!("newest returned FY{r}, newest held FY{h}"))
        }
        (_, None) => (0.0, "nothing returned".into()),
        (None, Some(r)) => (100.0, format!("newest returned FY{r}")),
    }
}

/// Narrative retrieval quality from passages' scores.
pub fn narrative_quality(rerank_scores: &[f32], similarities: &[f32], documents: usize) -> (f64, String) {
    if similarities.is_empty() {
        return (0.0, "no passage".into());
    }
    let (base, how) = if rerank_scores.len() == similarities.len() {
        // Reranker scores are already probabilities, σ(logit): averaged as they are.
        let mean = rerank_scores.iter().sum::<f32>() / rerank_scores.len() as f32;
        (mean as f64 * 100.0, format!("mean reranker probability {mean:.2}"))
    } else {
        let mean = similarities.iter().sum::<f32>() / similarities.len() as f32;
        ((((mean - 0.2) / 0.4).clamp(0.0, 1.0)) as f64 * 100.0, format!("mean similarity {mean:.2}"))
    };
    let bonus = if documents >= 3 { 5.0 } else { 0.0 } + if similarities.len() >= 5 { 5.0 } else { 0.0 };
    (
        (base + bonus).min(100.0),
        format!("{how}, {documents} documents, {} passages (+{bonus} bonus)", similarities.len()),
    )
}

/// Combines the signals with the route's weights.
pub fn score(route: Route, inputs: Inputs) -> Confidence {
    let w = weights(route);
    let signals = vec![
        Signal { name: "retrieval_quality", value: inputs.retrieval.0, weight: w[0], detail: inputs.retrieval.1 },
        Signal { name: "source_coverage", value: inputs.coverage.0, weight: w[1], detail: inputs.coverage.1 },
        Signal { name: "cross_source_agreement", value: inputs.agreement.0, weight: w[2], detail: inputs.agreement.1 },
        Signal { name: "data_recency", value: inputs.recency.0, weight: w[3], detail: inputs.recency.1 },
    ];
    let total: f64 = signals.iter().map(|s| s.value.clamp(0.0, 100.0) * s.weight).sum();
    let score = (total * 10.0).round() / 10.0;
    let tier = if score >= 80.0 {
        "high"
    } else if score >= 60.0 {
        "medium"
    } else {
        "low"
    };
    Confidence { score, tier, signals }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weights_sum_to_one_for_every_route() {
        for r in Route::ALL {
            assert!((weights(r).iter().sum::<f64>() - 1.0).abs() < 1e-9, "{r:?}");
        }
    }

    #[test]
    fn a_fresh_xbrl_answer_is_high_and_contradictions_lower_it() {
        let inputs = |n| Inputs {
            retrieval: (90.0, String::new()),
            coverage: (100.0, String::new()),
            agreement: agreement(n),
            recency: recency(Some(2024), Some(2023)),
        };
        let c = score(Route::MetricLookup, inputs(0));
        assert_eq!((c.score, c.tier), (92.5, "high"));
        let c = score(Route::MetricLookup, inputs(4));
        assert_eq!((c.score, c.tier), (77.5, "medium"));
        assert_eq!(agreement(9).0, 0.0, "never below zero");
    }

    #[test]
    fn recency_and_narrative_quality_edges() {
        assert_eq!(recency(Some(2024), Some(2019)).0, 0.0);
        assert_eq!(recency(Some(2024), Some(2025)).0, 100.0, "newer than held is not stale");
        assert_eq!(recency(Some(2024), None).0, 0.0);
        assert_eq!(narrative_quality(&[], &[], 0).0, 0.0);
        assert_eq!(narrative_quality(&[], &[0.6; 5], 3).0, 100.0);
        // Reranker scores are probabilities already: averaged as they are (a second sigmoid
        // squeezed every mean into 0.50-0.73: 0.69 here).
        assert!((narrative_quality(&[0.9, 0.7], &[0.4, 0.4], 1).0 - 80.0).abs() < 1e-3);
        assert_eq!(narrative_quality(&[0.0], &[0.4], 1).0, 0.0);
        assert_eq!(score(Route::Narrative, Inputs::default()).tier, "low");
    }
}
