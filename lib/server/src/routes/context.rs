//! `POST /v1/context`: structured, cited context for a financial question, on the model of
//! financial question engines' five routes (XBRL metric lookup, timeseries, statements,
//! narrative search, hybrid).
//!
//! The question is classified (route, companies, periods, metrics, intent, granularity),
//! the route gathers facts, statements and passages, and the response carries the
//! guardrail actions, contradictions and a confidence object. Sextant never writes the
//! answer: a language model answers from this context.

use std::sync::Arc;

use axum::extract::State;
use axum::Json;
use serde::{Deserialize, Serialize};
use sextant_finance::{build_context, classify, Context, ContextRequest, Guardrails, Hints, Route};

use crate::auth::Authed;
use crate::envelope::ApiError;
use crate::params::{check_query, result_count};
use crate::state::{AppState, ServedIndex};

/// Default `top_k` (passages of the narrative part).
pub const DEFAULT_TOP_K: i64 = 10;
/// Companies, years or quarters a request may name at most.
const MAX_LIST: usize = 10;

/// The request body.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ContextBody {
    /// The question (required, non-empty).
    pub question: String,
    /// Companies to use instead of those the question names (tickers, any case).
    #[serde(default)]
    pub tickers: Option<Vec<String>>,
    /// Fiscal years to use instead of those the question names.
    #[serde(default)]
    pub years: Option<Vec<i32>>,
    /// Fiscal quarters to use: `1`-`4` or `"Q1"`-`"Q4"`.
    #[serde(default)]
    pub quarters: Option<Vec<QuarterIn>>,
    /// Force a route: `metric_lookup`, `timeseries`, `full_statement`, `narrative`, `hybrid`.
    #[serde(default)]
    pub route: Option<String>,
    /// Passages at most (1-50, default 10, clamped to the plan's maximum).
    #[serde(default)]
    pub top_k: Option<i64>,
}

/// A quarter as a number or as `Q1`..`Q4`.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(untagged)]
pub enum QuarterIn {
    /// 1-4.
    Number(i64),
    /// `Q1`-`Q4`.
    Text(String),
}

impl QuarterIn {
    /// The value as the request wrote it (JSON), for an error message.
    fn shown(&self) -> String {
        match self {
            QuarterIn::Number(n) => n.to_string(),
            QuarterIn::Text(t) => serde_json::Value::String(t.chars().take(40).collect()).to_string(),
        }
    }
}

/// The response body: the context and request metadata.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct ContextResponse {
    /// Route, classification, result, guardrails, contradictions, confidence, warnings.
    #[serde(flatten)]
    pub context: Context,
    /// About the request.
    pub meta: ContextMeta,
}

/// `meta` of a response.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ContextMeta {
    /// The request id.
    pub request_id: String,
    /// The index answered from.
    pub index: String,
    /// The `top_k` served (after the plan's clamp).
    pub top_k: usize,
    /// Facts held by the index (consolidated, dimensional).
    pub facts_held: [usize; 2],
    /// Time spent, milliseconds.
    pub took_ms: u64,
    /// The retrieval paths the index serves now.
    pub paths_served: Vec<String>,
    /// True while some path is still being built, or when a shard of a sharded index did
    /// not answer a passage search (`shards`).
    pub degraded: bool,
    /// Of a sharded index whose passages were searched, how many of its shards answered
    /// (the fewest over the searches); absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shards: Option<crate::params::ShardsMeta>,
}

/// Checks a request against the index's companies; returns the engine request.
fn plan(
    body: &ContextBody,
    companies: &sextant_finance::Companies,
    plan_max: usize,
    max_chars: usize,
) -> Result<ContextRequest, ApiError> {
    check_query(&body.question, "question", max_chars)?;
    let top_k = result_count(body.top_k, "top_k", DEFAULT_TOP_K, plan_max)?;
    let mut hints = Hints::default();
    for (field, len) in [
        ("tickers", body.tickers.as_ref().map(Vec::len)),
        ("years", body.years.as_ref().map(Vec::len)),
        ("quarters", body.quarters.as_ref().map(Vec::len)),
    ] {
        if len.is_some_and(|n| n > MAX_LIST) {
            return Err(ApiError::invalid(field, format!("names more than {MAX_LIST} values")));
        }
    }
    for (i, t) in body.tickers.iter().flatten().enumerate() {
        let t = t.trim();
        if t.is_empty() || t.len() > 10 || !t.chars().all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-') {
            return Err(ApiError::invalid(
                format!("tickers[{i}]"),
                format!("must be a ticker symbol (letters, digits, '.', '-'; up to 10), got {t:?}"),
            ));
        }
        if !companies.knows(t) {
            return Err(ApiError::invalid(
                format!("tickers[{i}]"),
                format!("unknown ticker {t:?}: this index holds no document or fact for it"),
            ));
        }
        hints.tickers.push(t.to_ascii_uppercase());
    }
    for (i, y) in body.years.iter().flatten().enumerate() {
        if !(1900..=2100).contains(y) {
            return Err(ApiError::invalid(
                format!("years[{i}]"),
                format!("must be a fiscal year between 1900 and 2100, got {y}"),
            ));
        }
        hints.years.push(*y);
    }
    for (i, q) in body.quarters.iter().flatten().enumerate() {
        let n = match q {
            QuarterIn::Number(n) => Some(*n),
            QuarterIn::Text(s) => s.parse::<sextant_core::corpus::Quarter>().ok().map(|q| i64::from(q.number())),
        };
        match n {
            Some(n @ 1..=4) => hints.quarters.push(n as u8),
            _ => {
                return Err(ApiError::invalid(
                    format!("quarters[{i}]"),
                    format!("must be 1-4 or \"Q1\"-\"Q4\", got {}", q.shown()),
                ))
            }
        }
    }
    hints.years.sort_unstable();
    hints.years.dedup();
    hints.quarters.sort_unstable();
    hints.quarters.dedup();
    if let Some(r) = &body.route {
        let names: Vec<&str> = Route::ALL.iter().map(|r| r.name()).collect();
        hints.route =
            Some(Route::parse(r.trim()).ok_or_else(|| {
                ApiError::invalid("route", format!("must be one of {}, got {r:?}", names.join(", ")))
            })?);
    }
    // Companies named in the question count against the same cap as `tickers`: each one is
    // a search (or several, one per year) of the narrative route.
    let named = classify(body.question.trim(), companies, &hints).tickers;
    if named.len() > MAX_LIST {
        let shown: Vec<&str> = named.iter().take(MAX_LIST + 5).map(String::as_str).collect();
        let more = if named.len() > shown.len() { ", …" } else { "" };
        return Err(ApiError::invalid(
            "question",
            format!(
                "names {} companies ({}{more}), more than {MAX_LIST}: ask about at most {MAX_LIST} at once",
                named.len(),
                shown.join(", ")
            ),
        ));
    }
    Ok(ContextRequest {
        question: body.question.trim().to_string(),
        hints,
        top_k,
        guardrails: Guardrails::default(),
        cancel: None,
    })
}

/// The handler.
pub(crate) async fn handle(
    State(state): State<Arc<AppState>>,
    Authed { caller, request_id, body }: Authed<ContextBody>,
) -> Result<Json<ContextResponse>, ApiError> {
    let t = std::time::Instant::now();
    let ServedIndex { searcher, financials } = state.index_for(&caller, &state.config.default_index)?;
    let mut req = plan(&body, financials.companies(), caller.plan.max_top_k, state.config.max_query_chars)?;
    let top_k = req.top_k;
    let (s, f) = (searcher.clone(), financials.clone());
    let context = crate::params::run_cancellable(move |flag| {
        req.cancel = Some(flag);
        build_context(&f.facts, f.companies(), Some(&s), &req)
    })
    .await??;
    let (engine, index) = (searcher.engine(), searcher.view());
    crate::access::record(|r| r.index = Some(index.manifest().index_id.clone()));
    let (consolidated, dimensional) = financials.facts.len();
    let shards = context.shards.map(|(answered, of)| crate::params::ShardsMeta { answered, of });
    Ok(Json(ContextResponse {
        context,
        meta: ContextMeta {
            request_id,
            index: index.manifest().index_id.clone(),
            top_k,
            facts_held: [consolidated, dimensional],
            took_ms: t.elapsed().as_millis() as u64,
            paths_served: engine.ready_paths().iter().map(|p| p.name().to_string()).collect(),
            degraded: engine.degraded() || shards.is_some_and(|s| s.answered < s.of),
            shards,
        },
    }))
}

#[cfg(test)]
mod tests {
    use sextant_finance::{Companies, FactStore};

    use super::*;

    fn body(json: serde_json::Value) -> ContextBody {
        serde_json::from_value(json).unwrap()
    }

    fn companies() -> Companies {
        Companies::new(&FactStore::default(), ["AAPL".to_string(), "MSFT".to_string()])
    }

    #[test]
    fn every_invalid_field_is_named() {
        let err = |j: serde_json::Value| {
            let e = plan(&body(j), &companies(), 50, 1000).unwrap_err();
            assert_eq!(e.status, axum::http::StatusCode::BAD_REQUEST);
            format!("{}: {}", e.field.unwrap_or_default(), e.message)
        };
        assert!(err(serde_json::json!({"question": "  "})).contains("question"));
        assert!(err(serde_json::json!({"question": "q", "tickers": ["AAPL", "ZZZZ"]})).contains("tickers[1]"));
        assert!(err(serde_json::json!({"question": "q", "tickers": ["AA PL"]})).contains("tickers[0]"));
        assert!(err(serde_json::json!({"question": "q", "years": [2024, 12]})).contains("years[1]"));
        assert!(err(serde_json::json!({"question": "q", "quarters": ["Q5"]})).contains("quarters[0]"));
        assert!(err(serde_json::json!({"question": "q", "quarters": ["Q5"]})).ends_with("got \"Q5\""), "no Rust names");
        assert!(err(serde_json::json!({"question": "q", "quarters": [0]})).contains("quarters[0]"));
        assert!(err(serde_json::json!({"question": "q", "route": "sql"})).contains("route"));
        assert!(err(serde_json::json!({"question": "q", "top_k": 0})).contains("top_k"));
        assert!(
            err(serde_json::json!({"question": "q", "years": (2000..2020).collect::<Vec<i32>>()})).contains("years")
        );
    }

    #[test]
    fn a_question_naming_more_companies_than_the_cap_is_refused_naming_them() {
        let tickers: Vec<String> =
            ["AAPL", "MSFT", "KO", "XOM", "MA", "ORCL", "NVDA", "META", "AMZN", "TSLA", "NFLX", "IBM"]
                .map(String::from)
                .to_vec();
        let many = Companies::new(&FactStore::default(), tickers.clone());
        let question = format!("Compare the revenue of {}", tickers.join(", "));
        let e = plan(&body(serde_json::json!({"question": question})), &many, 50, 10_000).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("question"));
        assert!(
            e.message.contains("names 12 companies") && e.message.contains("AAPL") && e.message.contains("IBM"),
            "{}",
            e.message
        );
        let ten = format!("Compare the revenue of {}", tickers[..10].join(", "));
        assert!(plan(&body(serde_json::json!({"question": ten})), &many, 50, 10_000).is_ok());
    }

    #[test]
    fn hints_are_normalised() {
        let b = body(serde_json::json!({
            "question": " q ",
            "tickers": ["aapl"],
            "years": [2024, 2023, 2024],
            "quarters": ["q3", 1],
            "route": "timeseries",
            "top_k": 99
        }));
        let r = plan(&b, &companies(), 25, 1000).unwrap();
        assert_eq!(r.hints.tickers, ["AAPL"]);
        assert_eq!(r.hints.years, [2023, 2024]);
        assert_eq!(r.hints.quarters, [1, 3]);
        assert_eq!(r.hints.route, Some(Route::Timeseries));
        assert_eq!((r.top_k, r.question.as_str()), (25, "q"), "clamped to the plan");
    }
}
