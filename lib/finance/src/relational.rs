//! The relational routes over facts: `metric_lookup` (a value with its year-over-year
//! change), `timeseries` (a metric over a range, with coverage) and `full_statement`
//! (statements as markdown tables), every number with its source.

use serde::Serialize;

use super::facts::{Fact, FactSource, FactStore, Span};
use super::metrics::{metric, statement_metrics, Metric, Statement, FREE_CASH_FLOW_TERMS};

/// A period of a company: a fiscal year, or one quarter of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct Period {
    /// Fiscal year.
    pub fiscal_year: i32,
    /// Quarter 1-4, or none for the whole year.
    pub quarter: Option<u8>,
}

impl Period {
    /// `FY2024` or `Q3 FY2024`.
    pub fn label(&self) -> String {
        match self.quarter {
            None => format!("FY{}", self.fiscal_year),
            Some(q) => format!("Q{q} FY{}", self.fiscal_year),
        }
    }

    /// The same period a year earlier.
    pub fn prior_year(&self) -> Period {
        Period { fiscal_year: self.fiscal_year - 1, ..*self }
    }

    /// The span a metric takes in this period: flows cover it, balances close it.
    fn span(&self, instant: bool) -> Span {
        match (self.quarter, instant) {
            (None, false) => Span::Year,
            (None, true) => Span::Instant(4),
            (Some(q), false) => Span::Quarter(q),
            (Some(q), true) => Span::Instant(q),
        }
    }
}

/// One number with its source.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct Value {
    /// Company.
    pub ticker: String,
    /// Metric key.
    pub metric: String,
    /// Metric label.
    pub label: String,
    /// XBRL concept (`derived:free_cash_flow` for a computed metric).
    pub concept: String,
    /// Period asked for.
    pub period: Period,
    /// `FY2023`, `Q3 FY2024`.
    pub period_label: String,
    /// Period start and end (ISO dates).
    pub start: Option<String>,
    /// Period end or balance date.
    pub end: String,
    /// The value in `unit`.
    pub value: f64,
    /// `USD`, `USD/shares`, ...
    pub unit: String,
    /// Human form: `383,285 M USD`.
    pub display: String,
    /// Filing(s) it comes from; `derived` says how it was computed when it was.
    pub source: FactSource,
}

/// A value beside the same period a year earlier.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct Comparison {
    /// Company.
    pub ticker: String,
    /// Metric key.
    pub metric: String,
    /// The later period.
    pub period: String,
    /// The earlier period.
    pub prior_period: String,
    /// Later value.
    pub value: f64,
    /// Earlier value.
    pub prior_value: f64,
    /// `value - prior_value`.
    pub delta: f64,
    /// Percent change, one decimal; none when the prior value is zero.
    pub pct_change: Option<f64>,
    /// Human form: `-11,043 M USD (-2.8%)`.
    pub display: String,
}

/// Formats an amount: currency in millions with separators, per-share with cents.
pub fn display(value: f64, unit: &str) -> String {
    match unit {
        "USD" => format!("{} M USD", thousands(value / 1e6, if (value / 1e6).abs() < 10.0 { 1 } else { 0 })),
        "USD/shares" => format!("{value:.2} USD/share"),
        "shares" => format!("{} M shares", thousands(value / 1e6, 1)),
        "pure" => format!("{value}"),
        u => format!("{} {u}", thousands(value, 0)),
    }
}

/// `1234567.8` → `1,234,568` (with `decimals` decimals).
pub fn thousands(x: f64, decimals: usize) -> String {
    let s = format!("{:.*}", decimals, x.abs());
    let (int, frac) = s.split_once('.').map_or((s.as_str(), None), |(i, f)| (i, Some(f)));
    let mut out = String::new();
    for (i, c) in int.chars().enumerate() {
        if i > 0 && (int.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    if let Some(f) = frac {
        out.push('.');
        out.push_str(f);
    }
    if x < 0.0 && s.chars().any(|c| c.is_ascii_digit() && c != '0') {
        out.insert(0, '-');
    }
    out
}

fn value_of(m: &Metric, f: &Fact, period: Period) -> Value {
    Value {
        ticker: f.ticker.clone(),
        metric: m.key.into(),
        label: m.label.into(),
        concept: f.concept.clone(),
        period,
        period_label: period.label(),
        start: f.start.clone(),
        end: f.end.clone(),
        value: f.value,
        unit: f.unit.clone(),
        display: display(f.value, &f.unit),
        source: f.source.clone(),
    }
}

/// The value of metric `m` for `ticker` in `period`: the first of its concepts that has
/// one (older names cover older years); free cash flow is computed.
pub fn lookup(facts: &FactStore, ticker: &str, m: &Metric, period: Period) -> Option<Value> {
    if m.key == "free_cash_flow" {
        let parts: Vec<(Value, f64)> = FREE_CASH_FLOW_TERMS
            .iter()
            .map(|(k, w)| Some((lookup(facts, ticker, metric(k)?, period)?, *w)))
            .collect::<Option<_>>()?;
        let total: f64 = parts.iter().map(|(v, w)| v.value * w).sum();
        let first = &parts[0].0;
        return Some(Value {
            concept: "derived:free_cash_flow".into(),
            metric: m.key.into(),
            label: m.label.into(),
            value: total,
            display: display(total, &first.unit),
            source: FactSource {
                derived: Some(format!("{} − {}", parts[0].0.concept, parts[1].0.concept)),
                ..first.source.clone()
            },
            ..first.clone()
        });
    }
    let span = period.span(m.instant);
    m.concepts.iter().find_map(|c| facts.get(ticker, c, period.fiscal_year, span)).map(|f| value_of(m, f, period))
}

/// `later` against `earlier` of the same metric and company.
pub fn compare(later: &Value, earlier: &Value) -> Comparison {
    let delta = later.value - earlier.value;
    let pct = (earlier.value != 0.0).then(|| (delta / earlier.value.abs() * 1000.0).round() / 10.0);
    Comparison {
        ticker: later.ticker.clone(),
        metric: later.metric.clone(),
        period: later.period_label.clone(),
        prior_period: earlier.period_label.clone(),
        value: later.value,
        prior_value: earlier.value,
        delta,
        pct_change: pct,
        display: match pct {
            Some(p) => format!("{} ({p:+.1}%)", display(delta, &later.unit)),
            None => display(delta, &later.unit),
        },
    }
}

/// The newest period a company holds at the granularity asked.
pub fn newest_period(facts: &FactStore, ticker: &str, quarterly: bool) -> Option<Period> {
    let c = facts.companies.get(ticker)?;
    if quarterly {
        c.newest_period
            .map(|(y, s)| Period { fiscal_year: y, quarter: if let Span::Quarter(q) = s { Some(q) } else { Some(4) } })
    } else {
        c.newest_fiscal_year.map(|y| Period { fiscal_year: y, quarter: None })
    }
}

/// The result of `metric_lookup` for one company, metric and period.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Lookup {
    /// The value, when a fact holds it.
    pub value: Option<Value>,
    /// The same period a year earlier.
    pub prior: Option<Value>,
    /// Year-over-year change.
    pub comparison: Option<Comparison>,
}

/// `metric_lookup`: the value in `period` and the year before.
pub fn metric_lookup(facts: &FactStore, ticker: &str, m: &Metric, period: Period) -> Lookup {
    let value = lookup(facts, ticker, m, period);
    let prior = lookup(facts, ticker, m, period.prior_year());
    let comparison = match (&value, &prior) {
        (Some(v), Some(p)) => Some(compare(v, p)),
        _ => None,
    };
    Lookup { value, prior, comparison }
}

/// A metric over a range of periods.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct Series {
    /// Company.
    pub ticker: String,
    /// Metric key.
    pub metric: String,
    /// Values found, chronological.
    pub points: Vec<Value>,
    /// Periods asked for but not held.
    pub missing: Vec<String>,
    /// Points found / points asked.
    pub coverage: f64,
    /// Change from each point to the one before (same-quarter year over year for
    /// quarterly series asked across years; sequential otherwise).
    pub changes: Vec<Comparison>,
}

/// `timeseries`: `m` for `ticker` over `periods` (chronological).
pub fn timeseries(facts: &FactStore, ticker: &str, m: &Metric, periods: &[Period]) -> Series {
    let mut points = Vec::new();
    let mut missing = Vec::new();
    for p in periods {
        match lookup(facts, ticker, m, *p) {
            Some(v) => points.push(v),
            None => missing.push(p.label()),
        }
    }
    let changes = points.windows(2).map(|w| compare(&w[1], &w[0])).collect();
    let coverage = if periods.is_empty() { 0.0 } else { points.len() as f64 / periods.len() as f64 };
    Series { ticker: ticker.into(), metric: m.key.into(), points, missing, coverage, changes }
}

/// One line of a statement.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct StatementLine {
    /// Metric key.
    pub metric: String,
    /// The period's value.
    pub value: Value,
    /// A year earlier, when held.
    pub prior: Option<Value>,
}

/// A statement built from facts.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct StatementTable {
    /// Company.
    pub ticker: String,
    /// Which statement.
    pub statement: Statement,
    /// The period.
    pub period: String,
    /// Lines held, in statement order.
    pub lines: Vec<StatementLine>,
    /// Lines of the template with no value.
    pub missing: Vec<String>,
    /// The table, in markdown.
    pub markdown: String,
}

/// `full_statement`: one statement of `ticker` for `period`, with the prior year beside it.
pub fn statement(facts: &FactStore, ticker: &str, st: Statement, period: Period) -> StatementTable {
    let mut lines = Vec::new();
    let mut missing = Vec::new();
    for m in statement_metrics(st) {
        match lookup(facts, ticker, m, period) {
            Some(value) => lines.push(StatementLine {
                metric: m.key.into(),
                prior: lookup(facts, ticker, m, period.prior_year()),
                value,
            }),
            None => missing.push(m.key.to_string()),
        }
    }
    let prior_label = period.prior_year().label();
    let mut md = format!(
        "**{} — {} {}** (USD millions, per-share amounts in USD)\n\n\
         | Line item | {} | {} | Source |\n|---|---:|---:|---|\n",
        ticker,
        st.title(),
        period.label(),
        period.label(),
        prior_label
    );
    let cell = |v: &Value| match v.unit.as_str() {
        "USD" => thousands(v.value / 1e6, 0),
        "USD/shares" => format!("{:.2}", v.value),
        _ => display(v.value, &v.unit),
    };
    for l in &lines {
        let source = match &l.value.source.derived {
            Some(d) => format!("{} ({d})", l.value.concept),
            None => format!("{}, {} {}", l.value.concept, l.value.source.form, l.value.source.filing),
        };
        md.push_str(&format!(
            "| {} | {} | {} | {} |\n",
            l.value.label,
            cell(&l.value),
            l.prior.as_ref().map(cell).unwrap_or_else(|| "—".into()),
            source
        ));
    }
    StatementTable { ticker: ticker.into(), statement: st, period: period.label(), lines, missing, markdown: md }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn number_formats() {
        assert_eq!(thousands(383_285.0, 0), "383,285");
        assert_eq!(thousands(-11_043.4, 0), "-11,043");
        assert_eq!(thousands(999.0, 0), "999");
        assert_eq!(thousands(1_000.0, 0), "1,000");
        assert_eq!(thousands(-0.04, 1), "0.0");
        assert_eq!(display(383_285e6, "USD"), "383,285 M USD");
        assert_eq!(display(6.16, "USD/shares"), "6.16 USD/share");
        assert_eq!(display(2.5e6, "USD"), "2.5 M USD");
    }

    #[test]
    fn labels_and_prior_periods() {
        let p = Period { fiscal_year: 2024, quarter: Some(3) };
        assert_eq!(p.label(), "Q3 FY2024");
        assert_eq!(p.prior_year().label(), "Q3 FY2023");
        assert_eq!(p.span(true), Span::Instant(3));
        assert_eq!(Period { fiscal_year: 2024, quarter: None }.span(true), Span::Instant(4));
    }
}
