//! The five routes of `/v1/context` and the context they build.

use serde::Serialize;
use sextant_core::error::Result;
use sextant_core::shards::Searcher;

use crate::classify::{classify, Classification, Companies, Granularity, Hints, Intent, Route};
use crate::confidence::{self, Confidence};
use crate::contradictions::{self, Contradiction};
use crate::facts::FactStore;
use crate::metrics::{self, Metric, Statement};
use crate::narrative::{self, Guardrails, Passage};
use crate::relational::{self, Comparison, Period, Series, StatementTable, Value};

/// At most this many periods per company for a statement request.
const MAX_STATEMENT_PERIODS: usize = 4;
/// At most this many years searched per company by the narrative route.
const MAX_NARRATIVE_YEARS: usize = 3;
/// Years in a timeseries when none are named.
const DEFAULT_SERIES_YEARS: i32 = 5;
/// Metrics shown when a relational route is forced on a question naming none.
const DEFAULT_METRICS: [&str; 2] = ["revenue", "net_income"];

/// A route's result: only the parts the route produces are filled.
#[derive(Debug, Clone, Default, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
// The parts a route does not fill are left out of the answer, so its schema requires none.
#[cfg_attr(feature = "schema", schemars(default))]
#[serde(rename_all = "camelCase")]
pub struct RouteResult {
    /// Values asked for, with the prior year's beside them.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub facts: Vec<Value>,
    /// Year-over-year changes.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub comparisons: Vec<Comparison>,
    /// Metrics over ranges.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub timeseries: Vec<Series>,
    /// Statements.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub statements: Vec<StatementTable>,
    /// Whether the statements stand in for facts that were not found.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub statement_fallback: bool,
    /// Passages.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub passages: Vec<Passage>,
}

/// Everything `/v1/context` returns apart from request metadata.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct Context {
    /// The route taken.
    pub route: Route,
    /// How the question was read.
    pub classification: Classification,
    /// The route's result.
    pub result: RouteResult,
    /// What the guardrails did.
    pub guardrails: Vec<String>,
    /// Passages contradicted by the facts.
    pub contradictions: Vec<Contradiction>,
    /// Confidence and its signals.
    pub confidence: Confidence,
    /// Things the caller should know (nothing found, no company named, ...).
    pub warnings: Vec<String>,
    /// Of a sharded index, the fewest shards that answered a passage search and how many
    /// it has (`None`: no passage search, or one index). Not part of the context itself:
    /// the API reports it in its metadata.
    #[serde(skip)]
    #[cfg_attr(feature = "schema", schemars(skip))]
    pub shards: Option<(usize, usize)>,
}

/// What a context request asks.
#[derive(Debug, Clone)]
pub struct ContextRequest {
    /// The question.
    pub question: String,
    /// Overrides for the classifier.
    pub hints: Hints,
    /// Passages at most (narrative).
    pub top_k: usize,
    /// Guardrail settings.
    pub guardrails: Guardrails,
    /// Set when the caller has gone away: the narrative searches stop at their next stage.
    pub cancel: Option<sextant_core::pipeline::CancelFlag>,
}

/// Builds the context for `req` from `facts` and (for passages) `searcher`, one index or
/// a sharded one.
pub fn build_context(
    facts: &FactStore,
    companies: &Companies,
    searcher: Option<&Searcher>,
    req: &ContextRequest,
) -> Result<Context> {
    let c = classify(&req.question, companies, &req.hints);
    let mut result = RouteResult::default();
    let mut warnings = Vec::new();
    let mut guard_actions = Vec::new();
    let relational = c.route != Route::Narrative;
    let quarterly = c.granularity == Granularity::Quarterly;
    if relational && c.tickers.is_empty() {
        warnings.push("no company named: name one (\"Apple\", \"AAPL\") or pass `tickers`".into());
    }
    let mut metrics: Vec<&'static Metric> = c.metrics.iter().filter_map(|k| metrics::metric(k)).collect();
    let intent_relational = match c.route {
        Route::Hybrid => match c.intent {
            Intent::Statement => Route::FullStatement,
            Intent::Trend => Route::Timeseries,
            _ => Route::MetricLookup,
        },
        r => r,
    };
    if matches!(intent_relational, Route::MetricLookup | Route::Timeseries) && metrics.is_empty() && relational {
        if c.route == Route::Hybrid {
            warnings.push("no metric named: the relational part shows the income statement".into());
        } else {
            warnings.push(format!("no metric named: showing {}", DEFAULT_METRICS.join(" and ")));
            metrics = DEFAULT_METRICS.iter().filter_map(|k| metrics::metric(k)).collect();
        }
    }
    let mut asked = 0usize;
    let mut answered = 0usize;
    let mut retrieval_relational: Vec<f64> = Vec::new();
    let mut newest_returned: Option<i32> = None;
    let mut note_year = |y: i32| newest_returned = Some(newest_returned.map_or(y, |n: i32| n.max(y)));
    let newest_held = c.tickers.iter().filter_map(|t| facts.companies.get(t).and_then(|x| x.newest_fiscal_year)).max();

    if relational {
        for ticker in &c.tickers {
            if !facts.companies.contains_key(ticker) {
                warnings.push(format!("no facts held for {ticker}"));
            }
            let periods = periods_for(facts, ticker, &c, intent_relational, quarterly);
            if periods.is_empty() {
                warnings.push(format!("no period held for {ticker}"));
            }
            match intent_relational {
                Route::FullStatement => {
                    let kinds = if c.statements.is_empty() { Statement::ALL.to_vec() } else { c.statements.clone() };
                    for p in periods.iter().rev().take(MAX_STATEMENT_PERIODS).rev() {
                        for st in &kinds {
                            let table = relational::statement(facts, ticker, *st, *p);
                            asked += 1;
                            if !table.lines.is_empty() {
                                answered += 1;
                                note_year(p.fiscal_year);
                                retrieval_relational.push(95.0);
                            } else {
                                warnings.push(format!(
                                    "no {} lines held for {ticker} {}",
                                    st.title().to_lowercase(),
                                    p.label()
                                ));
                            }
                            result.statements.push(table);
                        }
                    }
                }
                Route::Timeseries => {
                    for m in &metrics {
                        let s = relational::timeseries(facts, ticker, m, &periods);
                        asked += periods.len();
                        answered += s.points.len();
                        if let Some(last) = s.points.last() {
                            note_year(last.period.fiscal_year);
                        }
                        retrieval_relational.push(90.0 * s.coverage);
                        result.timeseries.push(s);
                    }
                }
                _ => {
                    if metrics.is_empty() {
                        // Hybrid with no metric: the income statement of the period.
                        if let Some(p) = periods.last() {
                            let table = relational::statement(facts, ticker, Statement::IncomeStatement, *p);
                            asked += 1;
                            if !table.lines.is_empty() {
                                answered += 1;
                                note_year(p.fiscal_year);
                                retrieval_relational.push(72.0);
                            }
                            result.statements.push(table);
                        }
                    }
                    for m in &metrics {
                        for p in &periods {
                            asked += 1;
                            let l = relational::metric_lookup(facts, ticker, m, *p);
                            match l.value {
                                Some(v) => {
                                    answered += 1;
                                    note_year(p.fiscal_year);
                                    retrieval_relational.push(90.0);
                                    result.facts.push(v);
                                    result.facts.extend(l.prior);
                                    result.comparisons.extend(l.comparison);
                                }
                                None => {
                                    let table = relational::statement(facts, ticker, m.statement, *p);
                                    if table.lines.is_empty() {
                                        warnings.push(format!(
                                            "no {} held for {ticker} {}",
                                            m.label.to_lowercase(),
                                            p.label()
                                        ));
                                        retrieval_relational.push(0.0);
                                    } else {
                                        warnings.push(format!(
                                            "no {} fact for {ticker} {}: the {} stands in",
                                            m.label.to_lowercase(),
                                            p.label(),
                                            m.statement.title().to_lowercase()
                                        ));
                                        result.statement_fallback = true;
                                        answered += 1;
                                        note_year(p.fiscal_year);
                                        retrieval_relational.push(72.0);
                                        if !result.statements.iter().any(|s| {
                                            s.ticker == table.ticker
                                                && s.statement == table.statement
                                                && s.period == table.period
                                        }) {
                                            result.statements.push(table);
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }

    let mut narrative_quality = None;
    let mut shards = None;
    if matches!(c.route, Route::Narrative | Route::Hybrid) {
        match searcher {
            Some(searcher) => {
                let mut years = c.years.clone();
                if years.len() > MAX_NARRATIVE_YEARS {
                    years = years.split_off(years.len() - MAX_NARRATIVE_YEARS);
                }
                let n = narrative::narrative(
                    searcher,
                    &req.question,
                    &c.tickers,
                    &years,
                    req.top_k,
                    &req.guardrails,
                    req.cancel.as_ref(),
                )?;
                guard_actions.extend(n.actions);
                shards = n.shards;
                let rerank: Vec<f32> = n.passages.iter().filter_map(|p| p.rerank_score).collect();
                let sims: Vec<f32> = n.passages.iter().map(|p| p.similarity).collect();
                let docs: std::collections::HashSet<&str> = n.passages.iter().map(|p| p.document_id.as_str()).collect();
                narrative_quality = Some(confidence::narrative_quality(&rerank, &sims, docs.len()));
                for p in &n.passages {
                    if let Some(y) = p.year {
                        if !relational {
                            note_year(y);
                        }
                    }
                }
                if !relational {
                    let covered = c
                        .tickers
                        .iter()
                        .filter(|t| n.passages.iter().any(|p| p.ticker.as_deref() == Some(t.as_str())))
                        .count();
                    asked += c.tickers.len().max(1);
                    answered += if c.tickers.is_empty() { usize::from(!n.passages.is_empty()) } else { covered };
                }
                result.passages = n.passages;
            }
            None => warnings.push("no passage index loaded: narrative context unavailable".into()),
        }
    }
    // Guardrail: at most five facts per (company, concept) in a lookup.
    let before = result.facts.len();
    let mut per: std::collections::HashMap<(String, String), usize> = std::collections::HashMap::new();
    result.facts.retain(|v| {
        let n = per.entry((v.ticker.clone(), v.concept.clone())).or_default();
        *n += 1;
        *n <= 5
    });
    if result.facts.len() < before {
        guard_actions.push(format!("trimmed {} facts beyond five per concept", before - result.facts.len()));
    }
    if result.facts.is_empty()
        && result.timeseries.iter().all(|s| s.points.is_empty())
        && result.statements.iter().all(|s| s.lines.is_empty())
        && result.passages.is_empty()
    {
        warnings.push("the context is empty: nothing held matches the question".into());
    }

    let contradictions = contradictions::detect(facts, &result.passages);
    let retrieval = {
        let rel = (!retrieval_relational.is_empty()).then(|| {
            let mean = retrieval_relational.iter().sum::<f64>() / retrieval_relational.len() as f64;
            (mean, format!("{} relational results, mean {mean:.0}", retrieval_relational.len()))
        });
        match (rel, narrative_quality) {
            (Some(r), Some(n)) => (((r.0 + n.0) / 2.0), format!("relational: {}; narrative: {}", r.1, n.1)),
            (Some(r), None) => r,
            (None, Some(n)) => n,
            (None, None) => (0.0, "nothing retrieved".into()),
        }
    };
    let coverage = if asked == 0 { 0.0 } else { 100.0 * answered as f64 / asked as f64 };
    let held_for_recency = if relational { newest_held } else { newest_held.or(newest_returned) };
    let confidence = confidence::score(
        c.route,
        confidence::Inputs {
            retrieval,
            coverage: (coverage, format!("{answered} of {asked} asked")),
            agreement: confidence::agreement(contradictions.len()),
            recency: confidence::recency(held_for_recency, newest_returned),
        },
    );
    Ok(Context {
        route: c.route,
        classification: c,
        result,
        guardrails: guard_actions,
        contradictions,
        confidence,
        warnings,
        shards,
    })
}

/// The periods a relational route looks at for `ticker`.
fn periods_for(facts: &FactStore, ticker: &str, c: &Classification, route: Route, quarterly: bool) -> Vec<Period> {
    let newest = relational::newest_period(facts, ticker, quarterly);
    let quarters: Vec<Option<u8>> = if !c.quarters.is_empty() {
        c.quarters.iter().map(|q| Some(*q)).collect()
    } else if quarterly && route == Route::Timeseries {
        (1..=4).map(Some).collect()
    } else {
        vec![None]
    };
    let years: Vec<i32> = if !c.years.is_empty() {
        c.years.clone()
    } else {
        let Some(newest) = newest else { return Vec::new() };
        match route {
            Route::Timeseries if !quarterly => {
                (newest.fiscal_year - DEFAULT_SERIES_YEARS + 1..=newest.fiscal_year).collect()
            }
            _ if !c.quarters.is_empty() => {
                // A quarter without a year: the newest year holding it.
                let q = c.quarters[0];
                let y =
                    if newest.quarter.is_some_and(|n| n >= q) { newest.fiscal_year } else { newest.fiscal_year - 1 };
                vec![y]
            }
            _ if quarterly => return vec![newest],
            _ => vec![newest.fiscal_year],
        }
    };
    let mut out: Vec<Period> =
        years.iter().flat_map(|y| quarters.iter().map(move |q| Period { fiscal_year: *y, quarter: *q })).collect();
    out.sort();
    out
}

#[cfg(test)]
mod tests {
    //! The routes on the real facts of the demo corpus (both files of `xbrl_facts`).
    use std::sync::OnceLock;

    use super::*;

    fn facts() -> &'static (FactStore, Companies) {
        static F: OnceLock<(FactStore, Companies)> = OnceLock::new();
        F.get_or_init(|| {
            let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/demo/facts.jsonl.gz");
            let store = FactStore::open(&[path]).expect("demo facts");
            let companies = Companies::new(&store, Vec::new());
            (store, companies)
        })
    }

    fn ask(question: &str) -> Context {
        let (store, companies) = facts();
        let req = ContextRequest {
            question: question.into(),
            hints: Hints::default(),
            top_k: 10,
            guardrails: Guardrails::default(),
            cancel: None,
        };
        build_context(store, companies, None, &req).unwrap()
    }

    #[test]
    fn apple_revenue_2023_with_the_year_before_and_the_change() {
        let c = ask("What was Apple's revenue in 2023?");
        assert_eq!(c.route, Route::MetricLookup);
        assert_eq!(c.classification.tickers, ["AAPL"]);
        let v = &c.result.facts[0];
        assert_eq!((v.display.as_str(), v.period_label.as_str()), ("383,285 M USD", "FY2023"));
        assert_eq!(v.concept, "us-gaap:RevenueFromContractWithCustomerExcludingAssessedTax");
        assert_eq!(v.source.form, "10-K");
        let cmp = &c.result.comparisons[0];
        assert_eq!(cmp.prior_value, 394_328e6);
        assert_eq!(cmp.pct_change, Some(-2.8));
        assert_eq!(c.confidence.tier, "high", "{:?}", c.confidence);
        assert!(c.warnings.is_empty(), "{:?}", c.warnings);
    }

    #[test]
    fn net_income_and_older_concept_names() {
        let c = ask("AAPL net income fiscal 2024");
        assert_eq!(c.result.facts[0].value, 93_736e6);
        // 2010 revenue was filed as SalesRevenueNet.
        let c = ask("Apple net sales FY2010");
        assert_eq!(c.result.facts[0].concept, "us-gaap:SalesRevenueNet");
        assert_eq!(c.result.facts[0].value, 65_225e6);
    }

    #[test]
    fn a_multi_year_trend_is_chronological_with_full_coverage() {
        let c = ask("Show AAPL revenue from 2020 to 2024");
        assert_eq!(c.route, Route::Timeseries);
        let s = &c.result.timeseries[0];
        let years: Vec<i32> = s.points.iter().map(|p| p.period.fiscal_year).collect();
        assert_eq!(years, [2020, 2021, 2022, 2023, 2024]);
        assert_eq!(s.points[0].value, 274_515e6);
        assert_eq!(s.coverage, 1.0);
        assert_eq!(s.changes.len(), 4);
        // A range reaching past what is held reports what is missing.
        let c = ask("Apple revenue 2022 to 2027");
        assert!(c.result.timeseries[0].coverage < 1.0);
        assert!(c.result.timeseries[0].missing.contains(&"FY2027".to_string()));
    }

    #[test]
    fn a_fourth_quarter_is_derived_from_the_year_and_nine_months() {
        let c = ask("Apple quarterly revenue in fiscal 2024");
        assert_eq!((c.route, c.classification.granularity), (Route::Timeseries, Granularity::Quarterly));
        let s = &c.result.timeseries[0];
        let q4 = s.points.iter().find(|p| p.period.quarter == Some(4)).expect("Q4");
        assert_eq!(q4.value, 391_035e6 - 296_105e6);
        assert_eq!(q4.source.derived.as_deref(), Some("FY − 9M"));
        assert_eq!(s.points.len(), 4, "{:?}", s.missing);
        let q1 = &s.points[0];
        assert_eq!(q1.value, 210_328e6 - 90_753e6);
    }

    #[test]
    fn a_balance_sheet_from_facts() {
        let c = ask("Apple's 2024 balance sheet");
        assert_eq!(c.route, Route::FullStatement);
        let t = &c.result.statements[0];
        assert_eq!(t.statement, Statement::BalanceSheet);
        let assets = t.lines.iter().find(|l| l.metric == "total_assets").expect("total assets");
        assert_eq!(assets.value.value, 364_980e6);
        assert_eq!(assets.prior.as_ref().map(|p| p.value), Some(352_583e6));
        assert!(t.markdown.contains("| Total assets | 364,980 | 352,583 |"), "{}", t.markdown);
        // A quarterly balance sheet takes the quarter-end balances.
        let c = ask("Apple balance sheet Q3 2024");
        let t = &c.result.statements[0];
        assert_eq!(t.period, "Q3 FY2024");
        assert_eq!(t.lines.iter().find(|l| l.metric == "total_assets").map(|l| l.value.value), Some(331_612e6));
    }

    #[test]
    fn a_planted_contradiction_is_flagged_with_both_sources() {
        let (store, _) = facts();
        let planted = Passage {
            chunk_id: "planted#0".into(),
            document_id: "planted".into(),
            title: "Apple Inc. 10-K FY2023 — Item 7".into(),
            document_type: sextant_core::corpus::DocumentType::Form10K,
            ticker: Some("AAPL".into()),
            year: Some(2023),
            quarter: None,
            text: "Total net sales increased 8% during 2023 compared to 2022, driven by services.".into(),
            similarity: 0.6,
            rerank_score: None,
            score: 1.0,
        };
        let found = contradictions::detect(store, std::slice::from_ref(&planted));
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].kind, "direction_mismatch");
        assert_eq!(found[0].facts.pct_change, Some(-2.8));
        assert_eq!(found[0].chunk_id, "planted#0");
        // The true statement is not flagged; a wrong size is.
        let honest =
            Passage { text: "Total net sales decreased 3% during 2023 compared to 2022.".into(), ..planted.clone() };
        assert!(contradictions::detect(store, &[honest]).is_empty());
        let big = Passage { text: "Total net sales decreased 15% during 2023.".into(), ..planted };
        assert_eq!(contradictions::detect(store, &[big])[0].kind, "magnitude_gap");
    }

    #[test]
    fn statement_fallback_and_unknown_companies() {
        let c = ask("What was Apple's goodwill in 2024?");
        assert!(c.result.statement_fallback, "{:?}", c.warnings);
        assert_eq!(c.result.statements[0].statement, Statement::BalanceSheet);
        assert!(c.confidence.signals[0].value < 90.0);
        let c = ask("What was the revenue in 2023?");
        assert!(c.warnings.iter().any(|w| w.contains("no company named")), "{:?}", c.warnings);
        assert_eq!(c.confidence.tier, "low");
    }
}
