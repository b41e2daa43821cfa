//! # sextant-finance
//!
//! Financial questions answered with structured, cited context (never a generated
//! answer): a deterministic classifier picks one of five routes, the route gathers facts,
//! statements and passages, then guardrails, contradiction detection and a confidence
//! score are applied. What each route returns:
//!
//! - `metric_lookup`: the value of each metric for the period, the year before and the change; a statement when no
//!   fact matches
//! - `timeseries`: each metric over the periods asked, chronological, with coverage; quarterly Q4 derived as
//!   FY − Q1 − Q2 − Q3
//! - `full_statement`: income statement, balance sheet, cash flow as markdown tables built from facts
//! - `narrative`: passages of 10-K/10-Q sections and calls, per (company, year), guarded
//! - `hybrid`: the relational result for the intent, and the narrative
//!
//! Facts come from [`FactStore`], which travels with an index version as its own file
//! ([`FACTS_FILE`], loaded beside the index by [`Financials::load`]).
//!
//! The modules, from the data up: [`calendar`] and [`facts`] (XBRL facts and fiscal
//! periods), [`metrics`] (the metric and statement table), [`text`] and [`classify`](mod@classify) (reading
//! the question), [`relational`] and [`narrative`] (what the routes gather),
//! [`contradictions`] and [`confidence`], then [`routes`] (the five routes together).
//! Beside them, what the search endpoints use of the same knowledge on any index, sharded
//! or not: [`period`] (a period with no filing served from the nearest prior one) and
//! [`rewrite`] (a conversation's follow-up completed with its companies and periods).

#![warn(missing_docs)]

pub mod calendar;
pub mod classify;
pub mod confidence;
pub mod contradictions;
pub mod facts;
pub mod financials;
pub mod metrics;
pub mod narrative;
pub mod period;
pub mod relational;
pub mod rewrite;
pub mod routes;
pub mod text;

pub use classify::{classify, Classification, Companies, Granularity, Hints, Intent, Route};
pub use confidence::Confidence;
pub use contradictions::Contradiction;
pub use facts::{Fact, FactStore, Span};
pub use financials::{Financials, FACTS_FILE};
pub use metrics::{Metric, Statement, METRICS};
pub use narrative::{Guardrails, Passage};
pub use relational::{Comparison, Period, Series, StatementTable, Value};
pub use routes::{build_context, Context, ContextRequest, RouteResult};
