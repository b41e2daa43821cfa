//! The question classifier: deterministic rules whose every decision is reported.
//!
//! It finds the companies (ticker symbols written in capitals, and company names from
//! the filings: "Apple", "Apple's", "AAPL" all resolve), the periods ("FY2023", "fiscal
//! 2024", "Q3 2024", "2Q 2025", "2020 to 2024", "since 2021", "last 3 years", "latest
//! fiscal year", relative to the newest year held for the company), the metrics, the
//! statements, and cue words for trends, comparisons and explanations. The route follows:
//!
//! | condition (first that holds) | route |
//! |---|---|
//! | a statement is named ("balance sheet", "P&L") | `full_statement` |
//! | a metric and an explanation cue ("why", "what drove") | `hybrid` |
//! | a metric and two or more companies | `hybrid` |
//! | a metric and several periods or a trend cue ("trend", "since", "history") | `timeseries` |
//! | a metric | `metric_lookup` |
//! | an explanation cue and a change cue ("why did ... decline") | `hybrid` |
//! | otherwise | `narrative` |

use std::collections::BTreeMap;

use regex_lite::Regex;
use serde::{Deserialize, Serialize};

use super::facts::FactStore;
use super::metrics::{find_metrics, Metric, Statement};
use super::text::{match_phrases, normalize};

/// The five retrieval routes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, PartialOrd, Ord)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum Route {
    /// One metric for one period, with the year-over-year change.
    MetricLookup,
    /// One metric over several periods.
    Timeseries,
    /// Whole statements built from facts.
    FullStatement,
    /// Passages of filings and calls.
    Narrative,
    /// Relational results and passages together.
    Hybrid,
}

impl Route {
    /// Every route.
    pub const ALL: [Route; 5] =
        [Route::MetricLookup, Route::Timeseries, Route::FullStatement, Route::Narrative, Route::Hybrid];

    /// The wire name (`metric_lookup`).
    pub fn name(self) -> &'static str {
        match self {
            Route::MetricLookup => "metric_lookup",
            Route::Timeseries => "timeseries",
            Route::FullStatement => "full_statement",
            Route::Narrative => "narrative",
            Route::Hybrid => "hybrid",
        }
    }

    /// The route named `name`.
    pub fn parse(name: &str) -> Option<Route> {
        Route::ALL.into_iter().find(|r| r.name() == name)
    }
}

/// What the question asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum Intent {
    /// A value.
    Metric,
    /// Values over time.
    Trend,
    /// A whole statement.
    Statement,
    /// Text: risks, strategy, commentary.
    Narrative,
    /// Several companies side by side.
    Comparison,
}

/// Annual or quarterly values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum Granularity {
    /// Fiscal years.
    Annual,
    /// Fiscal quarters.
    Quarterly,
}

/// Everything the classifier decided, with the words that decided it.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Classification {
    /// The route chosen.
    pub route: Route,
    /// Whether the caller forced the route.
    pub forced: bool,
    /// What is asked.
    pub intent: Intent,
    /// Annual or quarterly.
    pub granularity: Granularity,
    /// Companies, in the order they appear.
    pub tickers: Vec<String>,
    /// Fiscal years asked about, ascending (empty: none named).
    pub years: Vec<i32>,
    /// Fiscal quarters asked about, ascending.
    pub quarters: Vec<u8>,
    /// Metric keys, in the order they appear.
    pub metrics: Vec<String>,
    /// The XBRL concepts those metrics map to.
    pub concepts: Vec<String>,
    /// Statements named.
    pub statements: Vec<Statement>,
    /// The question asks why / what drove a change.
    pub explain: bool,
    /// Each decision and the words behind it.
    pub signals: Vec<String>,
}

/// Words in capitals that are not tickers even when a ticker has that symbol.
const NOT_TICKERS: &[&str] = &[
    "A", "AN", "ARE", "HAS", "IT", "AI", "EPS", "FY", "CEO", "CFO", "COO", "US", "USA", "UK", "EU", "GAAP", "SEC",
    "IPO", "ESG", "EV", "EVS", "HR", "IR", "PM", "AM", "RE", "HE", "HI", "CC", "CF", "MD", "ON", "OR", "SO", "NOW",
    "ALL", "KEY", "PE", "EBIT", "EBITDA", "COGS", "FCF", "SBC", "YOY", "QOQ", "TTM", "LTM", "ROE", "ROA", "ROI",
    "CEOS", "AND", "THE", "FOR", "CAN", "BE", "DO", "GO", "I", "Q", "K", "ETF", "API", "LLM", "GPU", "GPUS", "CPU",
    "DTC", "M", "B", "BN",
];

/// First words of company names too common to name the company alone.
const GENERIC_FIRST_WORDS: &[&str] = &[
    "the",
    "global",
    "international",
    "united",
    "american",
    "general",
    "first",
    "national",
    "home",
    "union",
    "wells",
    "johnson",
    "procter",
    "bank",
    "new",
    "great",
    "southern",
    "northern",
    "western",
    "eastern",
    "central",
    "carbo",
];

/// A few well-known names that the filings do not carry.
const EXTRA_NAMES: &[(&str, &str)] =
    &[("google", "GOOGL"), ("facebook", "META"), ("j&j", "JNJ"), ("p&g", "PG"), ("coke", "KO")];

/// The company dictionary: names and tickers to tickers.
#[derive(Debug, Clone, Default)]
pub struct Companies {
    /// Normalised name → ticker; longest names are tried first.
    names: Vec<(String, String)>,
    /// Tickers with facts (single-letter symbols only count for these).
    with_facts: Vec<String>,
    /// Every ticker known (facts and documents).
    tickers: std::collections::BTreeSet<String>,
    /// Newest fiscal year held per ticker.
    newest: BTreeMap<String, i32>,
}

/// Company name → ticker, from filing titles (`Apple Inc. 10-K FY2024 — ...`), with
/// legal suffixes dropped: `apple`, `apple inc` → `AAPL`.
pub fn company_names(index: &dyn sextant_core::pipeline::IndexView) -> BTreeMap<String, String> {
    let mut names = BTreeMap::new();
    for d in index.documents() {
        let Some(t) = &d.ticker else { continue };
        names.insert(t.to_ascii_lowercase(), t.clone());
        for marker in [" 10-K", " 10-Q", " 8-K", " 20-F"] {
            if let Some(pos) = d.title.find(marker) {
                let name = company_key(&d.title[..pos]);
                if !name.is_empty() {
                    names.insert(name, t.clone());
                }
            }
        }
    }
    names
}

/// A company name as a lookup key: [`normalize`]d, legal suffixes and a leading "the"
/// dropped. `Apple Inc.` → `apple`; `HOME DEPOT, INC.` → `home depot`; `AMAZON.COM, INC.`
/// → `amazon`. Shared by the classifier and `/v1/search`'s `entity`.
pub fn company_key(name: &str) -> String {
    const SUFFIXES: &[&str] = &[
        "incorporated",
        "inc",
        "corporation",
        "corp",
        "company",
        "co",
        "plc",
        "ltd",
        "limited",
        "llc",
        "holdings",
        "holding",
        "group",
        "sa",
        "nv",
        "ag",
        "mn",
        "de",
        "the",
        "&",
        "and",
    ];
    let n = normalize(name);
    let mut words: Vec<&str> = n.split(' ').collect();
    while words.len() > 1 && SUFFIXES.contains(words.last().unwrap_or(&"")) {
        words.pop();
    }
    if words.len() > 1 && words[0] == "the" {
        words.remove(0);
    }
    if words.len() > 1 && words.last() == Some(&"com") {
        words.pop();
    }
    words.join(" ")
}

impl Companies {
    /// The dictionary of a fact store's companies plus `other_tickers` (from documents).
    pub fn new(facts: &FactStore, other_tickers: impl IntoIterator<Item = String>) -> Companies {
        let mut c = Companies::default();
        for (ticker, company) in &facts.companies {
            c.with_facts.push(ticker.clone());
            c.tickers.insert(ticker.clone());
            if let Some(y) = company.newest_fiscal_year {
                c.newest.insert(ticker.clone(), y);
            }
            for name in &company.names {
                let clean = company_key(name);
                if clean.is_empty() {
                    continue;
                }
                c.add_name(&clean, ticker);
                c.add_name(&clean.replace('&', "and"), ticker);
                c.add_name(&clean.replace(' ', ""), ticker);
                let first = clean.split(' ').next().unwrap_or_default();
                if clean.contains(' ') && first.len() >= 4 && !GENERIC_FIRST_WORDS.contains(&first) {
                    c.add_name(first, ticker);
                }
            }
        }
        for (name, ticker) in EXTRA_NAMES {
            if c.tickers.contains(*ticker) {
                c.add_name(name, ticker);
            }
        }
        c.tickers.extend(other_tickers.into_iter().map(|t| t.to_ascii_uppercase()));
        c.names.sort_by(|a, b| b.0.len().cmp(&a.0.len()).then(a.0.cmp(&b.0)));
        c
    }

    fn add_name(&mut self, name: &str, ticker: &str) {
        let name = normalize(name);
        if name.len() >= 2 && !self.names.iter().any(|(n, _)| *n == name) {
            self.names.push((name, ticker.to_string()));
        }
    }

    /// Whether `ticker` is known.
    pub fn knows(&self, ticker: &str) -> bool {
        self.tickers.contains(&ticker.to_ascii_uppercase())
    }

    /// Newest fiscal year held for `ticker`, or for any company.
    pub fn newest_year(&self, ticker: Option<&str>) -> Option<i32> {
        match ticker.and_then(|t| self.newest.get(t)) {
            Some(y) => Some(*y),
            None => self.newest.values().max().copied(),
        }
    }

    /// Companies named in `question`, in order of appearance, with the words that named them.
    pub fn find(&self, question: &str) -> Vec<(String, String)> {
        let mut found: Vec<(usize, String, String)> = Vec::new();
        // Ticker symbols: words in capitals (possessive allowed), as written.
        let mut pos = 0;
        for word in
            question.split(|c: char| !(c.is_ascii_alphanumeric() || c == '\'' || c == '’' || c == '.' || c == '&'))
        {
            let start = pos;
            pos += word.len() + 1;
            let w = word.trim_end_matches(['\'', '’', '.']);
            let w = w.strip_suffix("'s").or_else(|| w.strip_suffix("’s")).unwrap_or(w);
            if w.is_empty() || !w.chars().all(|c| c.is_ascii_uppercase() || c == '.') || NOT_TICKERS.contains(&w) {
                continue;
            }
            let single = w.len() == 1;
            if self.tickers.contains(w) && (!single || self.with_facts.iter().any(|t| t == w)) {
                found.push((start, w.to_string(), word.to_string()));
            }
        }
        // Names, longest first, on the normalised text (positions scaled for ordering).
        let norm = normalize(question);
        let scale = question.len() as f64 / (norm.len() + 2) as f64;
        for (p, i) in match_phrases(&norm, self.names.iter().map(|(name, _)| name.as_str())) {
            let (name, ticker) = &self.names[i];
            found.push(((p as f64 * scale) as usize, ticker.clone(), name.clone()));
        }
        found.sort_by_key(|f| f.0);
        let mut out: Vec<(String, String)> = Vec::new();
        for (_, t, w) in found {
            if !out.iter().any(|(o, _)| *o == t) {
                out.push((t, w));
            }
        }
        out
    }
}

/// Periods found in a question.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Periods {
    /// Fiscal years, ascending.
    pub years: Vec<i32>,
    /// Quarters, ascending.
    pub quarters: Vec<u8>,
    /// Several years were asked for as a range or a relative span.
    pub range: bool,
    /// The words that named them.
    pub signals: Vec<String>,
}

fn word_number(w: &str) -> Option<i32> {
    const WORDS: [&str; 10] = ["one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten"];
    w.parse().ok().or_else(|| WORDS.iter().position(|x| *x == w).map(|i| i as i32 + 1))
}

fn full_year(y: &str) -> Option<i32> {
    let n: i32 = y.parse().ok()?;
    match y.len() {
        2 => Some(2000 + n),
        4 if (1990..=2100).contains(&n) => Some(n),
        _ => None,
    }
}

fn quarter_word(w: &str) -> Option<u8> {
    match w {
        "first" | "1st" | "1" => Some(1),
        "second" | "2nd" | "2" => Some(2),
        "third" | "3rd" | "3" => Some(3),
        "fourth" | "4th" | "4" => Some(4),
        _ => None,
    }
}

/// The regular expressions of period parsing, compiled once.
struct PeriodPatterns {
    forms: Regex,
    quarter_range: Regex,
    year_range: Regex,
    quarter: Regex,
    since: Regex,
    last_n: Regex,
    latest: Regex,
    year: Regex,
}

fn patterns() -> &'static PeriodPatterns {
    static P: std::sync::OnceLock<PeriodPatterns> = std::sync::OnceLock::new();
    P.get_or_init(|| {
        let fy = r"(?:(?:fy|fiscal\s+year|fiscal)\s*'?)?";
        let re = |s: &str| Regex::new(s).expect("period pattern");
        PeriodPatterns {
            forms: re(r"\b10-?[kq]\b|\b8-?k\b"),
            quarter_range: re(&format!(
                r"\bq([1-4])(?:\s+{fy}(\d{{4}}))?\s*(?:-|–|to|through|thru)\s*q([1-4])\s+(?:of\s+)?{fy}(\d{{4}})\b"
            )),
            year_range: re(&format!(
                concat!(r"\b{fy}(\d{{4}})\s*(?:-|–|to|through|thru|until|and)\s*", r"{fy}(\d{{4}}|\d{{2}})\b"),
                fy = fy
            )),
            quarter: re(&format!(
                concat!(
                    r"\b(?:q([1-4])|([1-4])q|(first|second|third|fourth|1st|2nd|3rd|4th)[\s-]+(?:fiscal\s+)?quarter)",
                    r"(?:\s+(?:of\s+)?{fy}(\d{{4}}|\d{{2}}))?\b|\b([1-4])q(\d{{2}})\b"
                ),
                fy = fy
            )),
            since: re(&format!(r"\bsince\s+{fy}(\d{{4}})\b")),
            last_n: re(concat!(
                r"\b(?:last|past|previous|prior|recent)\s+",
                r"(\d+|two|three|four|five|six|seven|eight|nine|ten)\s+(?:fiscal\s+)?years?\b"
            )),
            latest: re(
                r"\b(?:last|latest|most\s+recent|this|current|recent)\s+(?:fiscal\s+)?year\b|\blatest\s+10-?k\b",
            ),
            year: re(r"\b(?:fy|fiscal\s+year|fiscal)\s*'?(\d{4}|\d{2})\b|\b(19[89]\d|20\d\d)\b"),
        }
    })
}

/// Finds the periods in `question`; relative ones count back from `newest`.
pub fn find_periods(question: &str, newest: Option<i32>) -> Periods {
    let p = patterns();
    let lower = question.to_lowercase().replace(['’', '‘'], "'");
    let mut text = p.forms.replace_all(&lower, " ").to_string();
    let mut out = Periods::default();
    let blank = |text: &mut String, r: std::ops::Range<usize>| text.replace_range(r.clone(), &" ".repeat(r.len()));

    let caps: Vec<_> = p
        .quarter_range
        .captures_iter(&text)
        .map(|c| {
            let g = |i: usize| c.get(i).map(|m| m.as_str().to_string());
            (c.get(0).map(|m| m.range()).unwrap_or_default(), g(1), g(2), g(3), g(4))
        })
        .collect();
    for (r, q1, y1, q2, y2) in caps {
        let (q1, q2) = (q1.and_then(|q| q.parse().ok()).unwrap_or(1u8), q2.and_then(|q| q.parse().ok()).unwrap_or(4u8));
        let y2 = y2.as_deref().and_then(full_year);
        let y1 = y1.as_deref().and_then(full_year).or(y2);
        if let (Some(y1), Some(y2)) = (y1, y2) {
            out.years.extend(y1..=y2);
            out.quarters.extend(q1.min(q2)..=q1.max(q2));
            out.signals.push(format!("quarters Q{q1}-Q{q2} from {:?}", &text[r.clone()].trim()));
            blank(&mut text, r);
        }
    }
    let caps: Vec<_> = p
        .year_range
        .captures_iter(&text)
        .map(|c| (c.get(0).map(|m| m.range()).unwrap_or_default(), c[1].to_string(), c[2].to_string()))
        .collect();
    for (r, a, b) in caps {
        let (Some(a), Some(b)) = (full_year(&a), full_year(&b)) else { continue };
        let b = if b < 100 + 2000 && b < a { b + 100 } else { b };
        if b > a && b - a <= 30 {
            out.years.extend(a..=b);
            out.range = true;
            out.signals.push(format!("years {a}-{b} from {:?}", text[r.clone()].trim()));
            blank(&mut text, r);
        }
    }
    let caps: Vec<_> = p
        .quarter
        .captures_iter(&text)
        .map(|c| {
            let g = |i: usize| c.get(i).map(|m| m.as_str().to_string());
            (c.get(0).map(|m| m.range()).unwrap_or_default(), g(1).or(g(2)).or(g(3)).or(g(5)), g(4).or(g(6)))
        })
        .collect();
    for (r, q, y) in caps {
        let Some(q) = q.as_deref().and_then(quarter_word) else { continue };
        out.quarters.push(q);
        if let Some(y) = y.as_deref().and_then(full_year) {
            out.years.push(y);
        }
        out.signals.push(format!("quarter Q{q} from {:?}", text[r.clone()].trim()));
        blank(&mut text, r);
    }
    if let Some(newest) = newest {
        let caps: Vec<_> = p
            .since
            .captures_iter(&text)
            .map(|c| (c.get(0).map(|m| m.range()).unwrap_or_default(), c[1].to_string()))
            .collect();
        for (r, y) in caps {
            if let Some(y) = full_year(&y).filter(|y| *y <= newest) {
                out.years.extend(y..=newest);
                out.range = true;
                out.signals.push(format!(
                    "years {y}-{newest} from {:?} (newest fiscal year held: {newest})",
                    text[r.clone()].trim()
                ));
                blank(&mut text, r);
            }
        }
        let caps: Vec<_> = p
            .last_n
            .captures_iter(&text)
            .map(|c| (c.get(0).map(|m| m.range()).unwrap_or_default(), c[1].to_string()))
            .collect();
        for (r, n) in caps {
            if let Some(n) = word_number(&n).filter(|n| (1..=30).contains(n)) {
                out.years.extend(newest - n + 1..=newest);
                out.range = n > 1;
                out.signals.push(format!(
                    "years {}-{newest} from {:?} (newest fiscal year held: {newest})",
                    newest - n + 1,
                    text[r.clone()].trim()
                ));
                blank(&mut text, r);
            }
        }
        let caps: Vec<_> = p.latest.find_iter(&text).map(|m| m.range()).collect();
        for r in caps {
            out.years.push(newest);
            out.signals.push(format!("year {newest} from {:?} (newest fiscal year held)", text[r.clone()].trim()));
            blank(&mut text, r);
        }
    }
    let caps: Vec<_> = p
        .year
        .captures_iter(&text)
        .map(|c| {
            (c.get(0).map(|m| m.range()).unwrap_or_default(), c.get(1).or(c.get(2)).map(|m| m.as_str().to_string()))
        })
        .collect();
    for (r, y) in caps {
        if let Some(y) = y.as_deref().and_then(full_year) {
            out.years.push(y);
            out.signals.push(format!("year {y} from {:?}", text[r.clone()].trim()));
            blank(&mut text, r);
        }
    }
    out.years.sort_unstable();
    out.years.dedup();
    out.quarters.sort_unstable();
    out.quarters.dedup();
    out
}

/// Cue words, matched on the normalised question.
fn has_any(norm: &str, cues: &[&str]) -> Option<String> {
    let padded = format!(" {norm} ");
    cues.iter().find(|c| padded.contains(&format!(" {c} "))).map(|c| c.to_string())
}

const STATEMENT_CUES: &[(&str, Statement)] = &[
    ("income statement", Statement::IncomeStatement),
    ("statement of operations", Statement::IncomeStatement),
    ("statements of operations", Statement::IncomeStatement),
    ("statement of income", Statement::IncomeStatement),
    ("statements of income", Statement::IncomeStatement),
    ("p&l", Statement::IncomeStatement),
    ("profit and loss statement", Statement::IncomeStatement),
    ("balance sheet", Statement::BalanceSheet),
    ("balance sheets", Statement::BalanceSheet),
    ("statement of financial position", Statement::BalanceSheet),
    ("statements of financial position", Statement::BalanceSheet),
    ("cash flow statement", Statement::CashFlow),
    ("cash flows statement", Statement::CashFlow),
    ("statement of cash flows", Statement::CashFlow),
    ("statements of cash flows", Statement::CashFlow),
    ("financial statements", Statement::IncomeStatement),
];
const EXPLAIN_CUES: &[&str] = &[
    "why",
    "what drove",
    "drove",
    "drivers",
    "driver",
    "driven",
    "explain",
    "explains",
    "explained",
    "caused",
    "cause",
    "causing",
    "causes",
    "reason",
    "reasons",
    "affect",
    "affected",
    "impact",
    "impacted",
    "contributed",
    "behind",
    "what happened",
];
const CHANGE_CUES: &[&str] = &[
    "decline",
    "declined",
    "fall",
    "fell",
    "drop",
    "dropped",
    "rise",
    "rose",
    "grow",
    "grew",
    "growth",
    "increase",
    "increased",
    "decrease",
    "decreased",
    "jump",
    "jumped",
    "surge",
    "change",
    "changed",
];
const TREND_CUES: &[&str] = &[
    "trend",
    "trends",
    "trended",
    "trending",
    "history",
    "historical",
    "over time",
    "each year",
    "every year",
    "year by year",
    "by year",
    "evolve",
    "evolved",
    "over the years",
    "quarterly",
    "each quarter",
    "per quarter",
    "every quarter",
    "each of the last",
    "time series",
    "timeseries",
];
const COMPARE_CUES: &[&str] = &[
    "compare",
    "compared",
    "comparison",
    "versus",
    "vs",
    "more than",
    "less than",
    "higher",
    "lower",
    "which",
    "bigger",
    "larger",
];
/// Words that make a comparison of companies numeric even when no metric is named.
const QUANTITY_CUES: &[&str] =
    &["margin", "margins", "growth", "grew", "bigger", "larger", "more profitable", "valuation", "size"];
/// Words in metric phrases that only count when not part of a longer expression.
const NOT_METRIC_CONTEXTS: &[&str] = &["earnings call", "earnings calls", "earnings release", "earnings conference"];

/// Overrides the caller may give beside the question.
#[derive(Debug, Clone, Default)]
pub struct Hints {
    /// Companies to use (replace those found).
    pub tickers: Vec<String>,
    /// Fiscal years to use.
    pub years: Vec<i32>,
    /// Quarters to use.
    pub quarters: Vec<u8>,
    /// The route to take.
    pub route: Option<Route>,
}

/// Classifies `question`.
pub fn classify(question: &str, companies: &Companies, hints: &Hints) -> Classification {
    let mut signals = Vec::new();
    let mut norm = normalize(question);
    for ctx in NOT_METRIC_CONTEXTS {
        norm = norm.replace(ctx, "call");
    }
    let found = companies.find(question);
    let tickers: Vec<String> = if hints.tickers.is_empty() {
        for (t, w) in &found {
            signals.push(format!("ticker {t} from {w:?}"));
        }
        found.into_iter().map(|(t, _)| t).collect()
    } else {
        signals.push("tickers given by the caller".into());
        hints.tickers.iter().map(|t| t.to_ascii_uppercase()).collect()
    };
    let newest = companies.newest_year(tickers.first().map(String::as_str));
    let periods = find_periods(question, newest);
    signals.extend(periods.signals.iter().cloned());
    let years = if hints.years.is_empty() { periods.years.clone() } else { hints.years.clone() };
    let quarters = if hints.quarters.is_empty() { periods.quarters.clone() } else { hints.quarters.clone() };

    let metrics: Vec<(&'static Metric, &'static str)> = find_metrics(&norm);
    for (m, p) in &metrics {
        signals.push(format!("metric {} from {p:?}", m.key));
    }
    let mut statements: Vec<Statement> = Vec::new();
    let padded = format!(" {norm} ");
    for (cue, st) in STATEMENT_CUES {
        if padded.contains(&format!(" {cue} ")) && !statements.contains(st) {
            statements.push(*st);
            signals.push(format!("statement {st:?} from {cue:?}"));
        }
    }
    if padded.contains(" financial statements ") {
        statements = Statement::ALL.to_vec();
    }
    let explain = has_any(&norm, EXPLAIN_CUES);
    let change = has_any(&norm, CHANGE_CUES);
    let trend = has_any(&norm, TREND_CUES);
    let compare = has_any(&norm, COMPARE_CUES);
    let quantity = has_any(&norm, QUANTITY_CUES);
    let multi_period = years.len() > 1 || quarters.len() > 1 || periods.range;
    let has_metric = !metrics.is_empty();

    let (route, intent, why) = if !statements.is_empty() && explain.is_none() {
        (Route::FullStatement, Intent::Statement, "a statement is named".to_string())
    } else if has_metric && explain.is_some() {
        let intent = if multi_period || trend.is_some() { Intent::Trend } else { Intent::Metric };
        (Route::Hybrid, intent, format!("a metric and the explanation cue {:?}", explain.clone().unwrap_or_default()))
    } else if has_metric && tickers.len() > 1 {
        (Route::Hybrid, Intent::Comparison, format!("a metric and {} companies", tickers.len()))
    } else if has_metric && (multi_period || trend.is_some()) {
        let cue = trend.clone().map(|t| format!("the trend cue {t:?}")).unwrap_or_else(|| "several periods".into());
        (Route::Timeseries, Intent::Trend, format!("a metric and {cue}"))
    } else if has_metric {
        (Route::MetricLookup, Intent::Metric, "a metric for one period".to_string())
    } else if let (true, Some(_), Some(q)) = (tickers.len() > 1, &compare, &quantity) {
        (Route::Hybrid, Intent::Comparison, format!("{} companies compared on {q:?}", tickers.len()))
    } else if explain.is_some() && change.is_some() {
        (
            Route::Hybrid,
            Intent::Metric,
            format!(
                "the explanation cue {:?} on the change {:?}",
                explain.clone().unwrap_or_default(),
                change.clone().unwrap_or_default()
            ),
        )
    } else {
        let intent = if tickers.len() > 1 && compare.is_some() { Intent::Comparison } else { Intent::Narrative };
        (Route::Narrative, intent, "no metric or statement named".to_string())
    };
    signals.push(format!("route {} because {why}", route.name()));
    let (route, forced) = match hints.route {
        Some(r) if r != route => {
            signals.push(format!("route {} forced by the caller", r.name()));
            (r, true)
        }
        Some(r) => (r, true),
        None => (route, false),
    };
    let every_quarter = trend.as_deref().is_some_and(|t| t.contains("quarter"));
    let mut quarters = quarters;
    if every_quarter && quarters.is_empty() && !years.is_empty() && hints.quarters.is_empty() {
        quarters = vec![1, 2, 3, 4];
        signals.push(format!("quarters Q1-Q4 from {:?}", trend.clone().unwrap_or_default()));
    }
    let granularity = if !quarters.is_empty() || every_quarter { Granularity::Quarterly } else { Granularity::Annual };
    let concepts = metrics.iter().flat_map(|(m, _)| m.concepts.iter().map(|c| c.to_string())).collect();
    Classification {
        route,
        forced,
        intent,
        granularity,
        tickers,
        years,
        quarters,
        metrics: metrics.iter().map(|(m, _)| m.key.to_string()).collect(),
        concepts,
        statements,
        explain: explain.is_some(),
        signals,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::calendar::FiscalCalendar;
    use crate::facts::{Company, FactStore};

    fn companies() -> Companies {
        let mut store = FactStore::default();
        for (t, names, newest) in [
            ("AAPL", vec!["Apple Inc.", "APPLE INC"], 2024),
            ("MSFT", vec!["MICROSOFT CORPORATION"], 2015),
            ("V", vec!["VISA INC."], 2024),
            ("MA", vec!["Mastercard Incorporated"], 2024),
            ("HD", vec!["HOME DEPOT, INC."], 2024),
            ("KO", vec!["COCA COLA CO"], 2024),
            ("UNP", vec!["UNION PACIFIC CORP"], 2024),
        ] {
            store.companies.insert(
                t.into(),
                Company {
                    ticker: t.into(),
                    names: names.into_iter().map(String::from).collect(),
                    calendar: FiscalCalendar::default(),
                    newest_fiscal_year: Some(newest),
                    newest_period: None,
                },
            );
        }
        Companies::new(&store, ["A".to_string(), "IT".to_string(), "XOM".to_string()])
    }

    fn route(q: &str) -> Route {
        classify(q, &companies(), &Hints::default()).route
    }

    #[test]
    fn companies_by_name_possessive_and_symbol() {
        let c = companies();
        let t = |q: &str| c.find(q).into_iter().map(|x| x.0).collect::<Vec<_>>();
        assert_eq!(t("What was Apple's revenue?"), ["AAPL"]);
        assert_eq!(t("AAPL vs MSFT"), ["AAPL", "MSFT"]);
        assert_eq!(t("how did microsoft do"), ["MSFT"]);
        assert_eq!(t("V net income 2024 and MA's"), ["V", "MA"]);
        assert_eq!(t("Coca-Cola's dividends; the Home Depot"), ["KO", "HD"]);
        assert_eq!(
            t("A question about IT and AI, in the US"),
            Vec::<String>::new(),
            "acronyms and articles are not tickers"
        );
        assert_eq!(t("the home team and union members"), Vec::<String>::new(), "generic first words alone name nobody");
        assert_eq!(t("What does XOM say"), ["XOM"], "a ticker known from documents only");
    }

    #[test]
    fn periods() {
        let y = |q: &str| find_periods(q, Some(2024));
        assert_eq!(y("revenue in FY2023").years, [2023]);
        assert_eq!(y("fiscal 2022 and fiscal year 2021").years, [2021, 2022]);
        assert_eq!(y("from 2020 to 2024").years, [2020, 2021, 2022, 2023, 2024]);
        assert_eq!(y("between 2019 and 2022").years, [2019, 2020, 2021, 2022]);
        assert_eq!(y("fiscal 2021-2025").years, [2021, 2022, 2023, 2024, 2025]);
        let q = y("Q3 2024 results");
        assert_eq!((q.years, q.quarters), (vec![2024], vec![3]));
        let q = y("gross profit for 2Q 2025 in the 10-Q");
        assert_eq!((q.years, q.quarters), (vec![2025], vec![2]));
        let q = y("the second quarter of fiscal 2026");
        assert_eq!((q.years, q.quarters), (vec![2026], vec![2]));
        let q = y("Q1 2024 through Q3 2024");
        assert_eq!((q.years, q.quarters), (vec![2024], vec![1, 2, 3]));
        assert_eq!(y("since 2021").years, [2021, 2022, 2023, 2024]);
        assert_eq!(y("over the past three years").years, [2022, 2023, 2024]);
        assert_eq!(y("in the latest fiscal year").years, [2024]);
        assert_eq!(y("last year").years, [2024]);
        assert_eq!(y("in its 10-K").years, Vec::<i32>::new());
        assert_eq!(y("for fiscal '23").years, [2023]);
        assert_eq!(y("FY25 results").years, [2025]);
        let q = y("Q1 through Q4 of 2024");
        assert_eq!((q.years, q.quarters), (vec![2024], vec![1, 2, 3, 4]));
        assert_eq!(find_periods("last year", None).years, Vec::<i32>::new(), "nothing held: nothing relative");
    }

    #[test]
    fn routes_follow_the_table() {
        assert_eq!(route("What was Apple's revenue in 2023?"), Route::MetricLookup);
        assert_eq!(route("Show AAPL revenue from 2020 to 2024"), Route::Timeseries);
        assert_eq!(route("Apple net income trend"), Route::Timeseries);
        assert_eq!(route("Apple's 2024 balance sheet"), Route::FullStatement);
        assert_eq!(route("What are Apple's main risks?"), Route::Narrative);
        assert_eq!(route("Which is more profitable, AAPL or MSFT?"), Route::Hybrid);
        assert_eq!(route("Why did Apple's revenue fall in 2023?"), Route::Hybrid);
        assert_eq!(
            route("What did management say on the earnings call?"),
            Route::Narrative,
            "'earnings call' is not a metric"
        );
        assert_eq!(
            route("compare the margins of Visa and Mastercard"),
            Route::Hybrid,
            "a numeric comparison without a metric name"
        );
        assert_eq!(route("How does Visa's strategy compare with Mastercard's?"), Route::Narrative);
        let c = classify("Apple revenue for each quarter of 2024", &companies(), &Hints::default());
        assert_eq!((c.route, c.quarters.clone()), (Route::Timeseries, vec![1, 2, 3, 4]));
        let c = classify(
            "Apple revenue 2023",
            &companies(),
            &Hints { route: Some(Route::Narrative), ..Default::default() },
        );
        assert_eq!((c.route, c.forced), (Route::Narrative, true));
        assert!(c.signals.iter().any(|s| s.contains("forced")));
    }

    #[test]
    fn normalization() {
        assert_eq!(normalize("Apple’s  R&D, (FY2023)"), "apple r&d fy2023");
        assert_eq!(normalize("shareholders' equity"), "shareholders equity");
        assert_eq!(company_key("HOME DEPOT, INC."), "home depot");
        assert_eq!(company_key("AMAZON.COM, INC."), "amazon");
        assert_eq!(company_key("WELLS FARGO & COMPANY/MN"), "wells fargo");
        assert_eq!(company_key("Apple Inc."), "apple");
        assert_eq!(company_key("Apple's"), "apple");
        assert_eq!(company_key("The Coca-Cola Company"), "coca cola");
        assert_eq!(company_key("Exxon Mobil Corporation"), "exxon mobil");
        assert_eq!(company_key("Mastercard Incorporated"), "mastercard");
    }
}
