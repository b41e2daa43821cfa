//! XBRL facts: read from JSONL, placed in each company's fiscal calendar, deduplicated,
//! with missing quarters derived, and kept in a store that travels with an index version.
//!
//! Input lines hold `ticker`, `form`, `fiscal_year`/`fiscal_period`/`period_end` (of the
//! filing), `concept`, `value`, `unit`, `decimals`, `start`/`end`/`instant` and `dims`
//! (empty: a consolidated total). A fact's own period comes from its dates and the
//! company's [`FiscalCalendar`]; the same fact repeated by later filings is kept once,
//! from the newest filing (restated values win).

use std::collections::{BTreeMap, HashMap};
use std::io::BufRead;

use serde::{Deserialize, Serialize};
use sextant_core::corpus::Date;
use sextant_core::error::{Error, Result};

use super::calendar::{days_between, FiscalCalendar};

/// The part of a fiscal year a value covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Span {
    /// The whole fiscal year (a duration of about 12 months).
    Year,
    /// One fiscal quarter, 1-4 (about 3 months).
    Quarter(u8),
    /// From the start of the fiscal year through the end of quarter 2 or 3.
    YearToDate(u8),
    /// A balance at the end of quarter 1-4 (quarter 4: the fiscal year end).
    Instant(u8),
}

/// Where a fact comes from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct FactSource {
    /// `10-K` or `10-Q`.
    pub form: String,
    /// The filing's fiscal year and period, e.g. `FY2024` or `Q3 2024`.
    pub filing: String,
    /// The filing's source document.
    pub file: String,
    /// For a derived value, how it was computed (`FY − Q1 − Q2 − Q3`).
    pub derived: Option<String>,
}

/// One value of a concept for one company and period.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Fact {
    /// Company ticker (upper case).
    pub ticker: String,
    /// Concept with its namespace, e.g. `us-gaap:Revenues`.
    pub concept: String,
    /// The value, in `unit`.
    pub value: f64,
    /// `USD`, `shares`, `USD/shares`, `pure`, ...
    pub unit: String,
    /// Reported precision (`-6`: millions), when given.
    pub decimals: Option<i32>,
    /// Fiscal year (the company's own label).
    pub fiscal_year: i32,
    /// Part of the fiscal year.
    pub span: Span,
    /// Period start (durations), ISO date.
    pub start: Option<String>,
    /// Period end or instant, ISO date.
    pub end: String,
    /// Dimension members (axis, member); empty for consolidated totals.
    pub dims: Vec<(String, String)>,
    /// The filing it comes from.
    pub source: FactSource,
}

impl Fact {
    /// `FY2024` or `Q3 FY2024`.
    pub fn period_label(&self) -> String {
        match self.span {
            Span::Year => format!("FY{}", self.fiscal_year),
            Span::Quarter(q) => format!("Q{q} FY{}", self.fiscal_year),
            Span::YearToDate(q) => format!("{}M FY{}", 3 * q, self.fiscal_year),
            Span::Instant(4) => format!("end of FY{}", self.fiscal_year),
            Span::Instant(q) => format!("end of Q{q} FY{}", self.fiscal_year),
        }
    }
}

/// A company: its ticker, the names it is known by, and its fiscal calendar.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Company {
    /// Ticker (upper case).
    pub ticker: String,
    /// Names as filed (`Apple Inc.`, `APPLE INC`).
    pub names: Vec<String>,
    /// How it labels fiscal years.
    pub calendar: FiscalCalendar,
    /// Newest fiscal year with an annual (10-K) value.
    pub newest_fiscal_year: Option<i32>,
    /// Newest fiscal year with any value.
    pub newest_period: Option<(i32, Span)>,
}

/// Facts of many companies, consolidated totals kept apart from dimensional ones.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FactStore {
    /// Companies by ticker.
    pub companies: BTreeMap<String, Company>,
    /// Consolidated totals (no dimensions), sorted by ticker, concept, year, span.
    consolidated: Vec<Fact>,
    /// Facts with dimensions (segments, products, ...), same order.
    dimensional: Vec<Fact>,
    #[serde(skip)]
    by_key: HashMap<(String, String), Vec<u32>>,
}

/// A fact line as the data files hold it (numbers may be strings).
#[derive(Deserialize)]
struct RawFact {
    ticker: String,
    #[serde(default)]
    entity: Option<String>,
    #[serde(default)]
    form: Option<String>,
    #[serde(default)]
    fiscal_year: Option<serde_json::Value>,
    #[serde(default)]
    fiscal_period: Option<String>,
    #[serde(default)]
    period_end: Option<String>,
    #[serde(default)]
    source_file: Option<String>,
    concept: String,
    value: serde_json::Value,
    #[serde(default)]
    unit: Option<String>,
    #[serde(default)]
    decimals: Option<serde_json::Value>,
    #[serde(default)]
    start: Option<String>,
    #[serde(default)]
    end: Option<String>,
    #[serde(default)]
    instant: bool,
    #[serde(default)]
    dims: BTreeMap<String, String>,
}

fn number(v: &serde_json::Value) -> Option<f64> {
    match v {
        serde_json::Value::Number(n) => n.as_f64(),
        serde_json::Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
    .filter(|x: &f64| x.is_finite())
}

/// `iso4217:USD` → `USD`, `iso4217:USD/xbrli:shares` → `USD/shares`.
pub fn normalize_unit(unit: Option<&str>) -> String {
    let Some(u) = unit else { return "pure".into() };
    u.split('/').map(|p| p.rsplit(':').next().unwrap_or(p)).collect::<Vec<_>>().join("/")
}

/// An ISO date from `2024-09-28` or `September 28, 2024` (any case).
pub fn parse_date(s: &str) -> Option<String> {
    let s = s.trim();
    if let Ok(d) = s.parse::<Date>() {
        return Some(d.to_string());
    }
    const MONTHS: [&str; 12] = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"];
    let lower = s.to_ascii_lowercase();
    let mut words = lower.split([' ', ',']).filter(|w| !w.is_empty());
    let month = words.next()?;
    let m = MONTHS.iter().position(|p| month.starts_with(p))? + 1;
    let d: u8 = words.next()?.parse().ok()?;
    let y: i32 = words.next()?.parse().ok()?;
    Date::from_ymd(y, m as u8, d).map(|d| d.to_string())
}

/// What makes two facts the same: ticker, concept, dimensions, start date, end date, unit.
type FactKey = (String, String, Vec<(String, String)>, Option<String>, String, String);

/// A span derived from others: the target, the terms (span and sign) that sum to it, and
/// how the derivation is described.
type DerivationRule = (Span, &'static [(Span, f64)], &'static str);

/// The facts' sort key: ticker, concept, year, span, dimensions, then what tells apart two
/// facts of one concept and period (unit, dates, derived or filed). A total order over the
/// facts kept, which come out of a HashMap in a random order.
#[allow(clippy::type_complexity)]
fn fact_order(f: &Fact) -> (&str, &str, i32, Span, &[(String, String)], &str, Option<&str>, &str, bool) {
    let derived = f.source.derived.is_some();
    (&f.ticker, &f.concept, f.fiscal_year, f.span, &f.dims, &f.unit, f.start.as_deref(), &f.end, derived)
}

/// One filing seen in the input.
#[derive(Debug, Clone)]
struct Filing {
    form: String,
    fiscal_year: i32,
    fiscal_period: String,
    period_end: String,
}

impl FactStore {
    /// Reads facts from JSONL readers (`name` is used in error messages).
    pub fn from_jsonl<R: BufRead>(inputs: Vec<(String, R)>) -> Result<FactStore> {
        let mut raws = Vec::new();
        for (name, reader) in inputs {
            for (i, line) in reader.lines().enumerate() {
                let line =
                    line.map_err(|e| Error::Corpus { source_name: name.clone(), line: i + 1, reason: e.to_string() })?;
                if line.trim().is_empty() {
                    continue;
                }
                let raw: RawFact = serde_json::from_str(&line).map_err(|e| Error::Corpus {
                    source_name: name.clone(),
                    line: i + 1,
                    reason: e.to_string(),
                })?;
                raws.push(raw);
            }
        }
        Ok(Self::from_raw(raws))
    }

    /// Reads facts from JSONL files (`.jsonl` or `.jsonl.gz`).
    pub fn open(paths: &[std::path::PathBuf]) -> Result<FactStore> {
        let inputs = paths
            .iter()
            .map(|p| Ok((p.display().to_string(), std::fs::read(p).map_err(|e| Error::io(p, e))?)))
            .collect::<Result<_>>()?;
        Self::from_bytes(inputs)
    }

    /// Reads facts from named JSONL contents held in memory, gzip-compressed or not (told
    /// by the gzip magic bytes).
    pub fn from_bytes(inputs: Vec<(String, Vec<u8>)>) -> Result<FactStore> {
        let readers = inputs
            .into_iter()
            .map(|(name, bytes)| {
                let reader: Box<dyn BufRead> = if bytes.starts_with(&[0x1f, 0x8b]) {
                    Box::new(std::io::BufReader::new(flate2::read::GzDecoder::new(std::io::Cursor::new(bytes))))
                } else {
                    Box::new(std::io::Cursor::new(bytes))
                };
                (name, reader)
            })
            .collect();
        Self::from_jsonl(readers)
    }

    fn from_raw(raws: Vec<RawFact>) -> FactStore {
        // Filings and names per ticker, to learn each calendar.
        let mut filings: BTreeMap<String, Vec<Filing>> = BTreeMap::new();
        let mut names: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for r in &raws {
            let ticker = r.ticker.trim().to_ascii_uppercase();
            if let Some(e) = r.entity.as_deref().map(str::trim).filter(|e| !e.is_empty()) {
                let list = names.entry(ticker.clone()).or_default();
                if !list.iter().any(|n| n == e) {
                    list.push(e.to_string());
                }
            }
            let (Some(form), Some(fy), Some(fp), Some(end)) = (
                r.form.as_deref(),
                r.fiscal_year.as_ref().and_then(number),
                r.fiscal_period.as_deref(),
                r.period_end.as_deref().and_then(parse_date),
            ) else {
                continue;
            };
            let list = filings.entry(ticker).or_default();
            if !list.iter().any(|f| f.period_end == end && f.form == form) {
                list.push(Filing {
                    form: form.into(),
                    fiscal_year: fy as i32,
                    fiscal_period: fp.into(),
                    period_end: end,
                });
            }
        }
        let calendars: BTreeMap<String, FiscalCalendar> = filings
            .iter()
            .map(|(t, fs)| {
                let mut fs = fs.clone();
                fs.sort_by(|a, b| b.period_end.cmp(&a.period_end));
                let annual = fs
                    .iter()
                    .find(|f| f.fiscal_period == "FY")
                    .and_then(|f| FiscalCalendar::from_annual(f.fiscal_year, &f.period_end));
                let quarterly = || {
                    fs.iter().find_map(|f| {
                        let q = f.fiscal_period.strip_prefix('Q')?.parse().ok()?;
                        FiscalCalendar::from_quarter(f.fiscal_year, q, &f.period_end)
                    })
                };
                (t.clone(), annual.or_else(quarterly).unwrap_or_default())
            })
            .collect();

        // Place each fact in its period; keep one per (ticker, concept, dims, dates, unit),
        // from the newest filing.
        let mut kept: HashMap<FactKey, (String, Fact)> = HashMap::new();
        for r in raws {
            let Some(value) = number(&r.value) else { continue };
            let ticker = r.ticker.trim().to_ascii_uppercase();
            let calendar = calendars.get(&ticker).copied().unwrap_or_default();
            let Some(end) = r.end.as_deref().and_then(parse_date) else { continue };
            let start = r.start.as_deref().and_then(parse_date);
            let (fiscal_year, span) = if r.instant || start.is_none() {
                let Some((fy, q)) = calendar.quarter_of(&end) else { continue };
                let q = if calendar.is_year_end(&end) { 4 } else { q };
                (fy, Span::Instant(q))
            } else {
                let days = days_between(start.as_deref().unwrap_or_default(), &end).unwrap_or(0);
                let Some((fy, q)) = calendar.quarter_of(&end) else { continue };
                let span = match days {
                    80..=100 => Span::Quarter(q),
                    170..=195 if q == 2 => Span::YearToDate(2),
                    260..=285 if q == 3 => Span::YearToDate(3),
                    350..=380 => Span::Year,
                    _ => continue,
                };
                (fy, span)
            };
            let unit = normalize_unit(r.unit.as_deref());
            let dims: Vec<(String, String)> = r.dims.into_iter().collect();
            let filing_end = r.period_end.as_deref().and_then(parse_date).unwrap_or_default();
            let source = FactSource {
                form: r.form.clone().unwrap_or_default(),
                filing: filing_label(r.fiscal_period.as_deref(), r.fiscal_year.as_ref().and_then(number)),
                file: r.source_file.clone().unwrap_or_default(),
                derived: None,
            };
            let decimals = r.decimals.as_ref().and_then(number).map(|d| d as i32);
            let key = (ticker.clone(), r.concept.clone(), dims.clone(), start.clone(), end.clone(), unit.clone());
            let fact =
                Fact { ticker, concept: r.concept, value, unit, decimals, fiscal_year, span, start, end, dims, source };
            match kept.get(&key) {
                Some((seen_end, _)) if *seen_end >= filing_end => {}
                _ => {
                    kept.insert(key, (filing_end, fact));
                }
            }
        }
        let (mut consolidated, mut dimensional): (Vec<Fact>, Vec<Fact>) =
            kept.into_values().map(|(_, f)| f).partition(|f| f.dims.is_empty());
        consolidated.extend(derive_quarters(&consolidated));
        // A total order (the facts come out of a HashMap in a random order): two facts of
        // one concept and period differ in unit or dates, or one is derived.
        let order = |a: &Fact, b: &Fact| fact_order(a).cmp(&fact_order(b));
        consolidated.sort_by(order);
        dimensional.sort_by(order);

        let mut companies = BTreeMap::new();
        for (ticker, calendar) in &calendars {
            let facts = consolidated.iter().filter(|f| &f.ticker == ticker);
            let newest_fiscal_year = facts.clone().filter(|f| f.span == Span::Year).map(|f| f.fiscal_year).max();
            let newest_period = facts
                .filter(|f| matches!(f.span, Span::Year | Span::Quarter(_)) && f.source.derived.is_none())
                .map(|f| (f.fiscal_year, f.span))
                .max_by_key(|&(y, s)| (y, if let Span::Quarter(q) = s { q } else { 5 }));
            companies.insert(
                ticker.clone(),
                Company {
                    ticker: ticker.clone(),
                    names: names.remove(ticker).unwrap_or_default(),
                    calendar: *calendar,
                    newest_fiscal_year,
                    newest_period,
                },
            );
        }
        let mut store = FactStore { companies, consolidated, dimensional, by_key: HashMap::new() };
        store.reindex();
        store
    }

    /// Keeps only the facts and companies of `tickers` (any case); all when empty.
    pub fn retain_tickers(&mut self, tickers: &[String]) {
        if tickers.is_empty() {
            return;
        }
        let keep = |t: &str| tickers.iter().any(|x| x.eq_ignore_ascii_case(t));
        self.consolidated.retain(|f| keep(&f.ticker));
        self.dimensional.retain(|f| keep(&f.ticker));
        self.companies.retain(|t, _| keep(t));
        self.reindex();
    }

    /// Rebuilds the lookup table (after decoding).
    pub fn reindex(&mut self) {
        self.by_key.clear();
        for (i, f) in self.consolidated.iter().enumerate() {
            self.by_key.entry((f.ticker.clone(), f.concept.clone())).or_default().push(i as u32);
        }
    }

    /// Whether the store holds no facts.
    pub fn is_empty(&self) -> bool {
        self.consolidated.is_empty() && self.dimensional.is_empty()
    }

    /// Number of (consolidated, dimensional) facts.
    pub fn len(&self) -> (usize, usize) {
        (self.consolidated.len(), self.dimensional.len())
    }

    /// The consolidated value of `concept` for `ticker` in `fiscal_year`/`span`.
    pub fn get(&self, ticker: &str, concept: &str, fiscal_year: i32, span: Span) -> Option<&Fact> {
        self.by_key
            .get(&(ticker.to_string(), concept.to_string()))?
            .iter()
            .map(|&i| &self.consolidated[i as usize])
            .find(|f| f.fiscal_year == fiscal_year && f.span == span)
    }

    /// Every consolidated value of `concept` for `ticker`, by period.
    pub fn series(&self, ticker: &str, concept: &str) -> impl Iterator<Item = &Fact> {
        self.by_key
            .get(&(ticker.to_string(), concept.to_string()))
            .into_iter()
            .flatten()
            .map(|&i| &self.consolidated[i as usize])
    }

    /// Dimensional facts of `concept` for `ticker` in `fiscal_year`/`span`
    /// (segments, products, geographies).
    pub fn breakdown<'a>(
        &'a self,
        ticker: &'a str,
        concept: &'a str,
        fiscal_year: i32,
        span: Span,
    ) -> impl Iterator<Item = &'a Fact> {
        let start = self.dimensional.partition_point(|f| (f.ticker.as_str(), f.concept.as_str()) < (ticker, concept));
        self.dimensional[start..]
            .iter()
            .take_while(move |f| f.ticker == ticker && f.concept == concept)
            .filter(move |f| f.fiscal_year == fiscal_year && f.span == span)
    }
}

fn filing_label(period: Option<&str>, year: Option<f64>) -> String {
    match (period, year) {
        (Some("FY"), Some(y)) => format!("FY{}", y as i32),
        (Some(p), Some(y)) => format!("{p} FY{}", y as i32),
        _ => String::new(),
    }
}

/// Currency durations whose quarters are missing are derived from year-to-date and annual
/// values: `Q2 = 6M − Q1`, `Q3 = 9M − 6M`, `Q4 = FY − 9M` (or `FY − Q1 − Q2 − Q3`).
///
/// Only additive values are derived: amounts in a currency. Per-share amounts, ratios and
/// share counts are not (a fourth-quarter EPS is not FY EPS minus three quarters), and
/// balance-sheet instants take the period-end value instead.
fn derive_quarters(facts: &[Fact]) -> Vec<Fact> {
    let mut groups: BTreeMap<(&str, &str, i32), BTreeMap<Span, &Fact>> = BTreeMap::new();
    for f in facts.iter().filter(|f| f.unit == "USD" && !matches!(f.span, Span::Instant(_))) {
        groups.entry((&f.ticker, &f.concept, f.fiscal_year)).or_default().insert(f.span, f);
    }
    let mut out = Vec::new();
    for spans in groups.values() {
        let mut have: BTreeMap<Span, (f64, Fact)> = spans.iter().map(|(s, f)| (*s, (f.value, (*f).clone()))).collect();
        let value = |have: &BTreeMap<Span, (f64, Fact)>, s: Span| have.get(&s).map(|x| x.0);
        let rules: [DerivationRule; 6] = [
            (Span::Quarter(1), &[(Span::YearToDate(2), 1.0), (Span::Quarter(2), -1.0)], "6M − Q2"),
            (Span::Quarter(2), &[(Span::YearToDate(2), 1.0), (Span::Quarter(1), -1.0)], "6M − Q1"),
            (Span::Quarter(3), &[(Span::YearToDate(3), 1.0), (Span::YearToDate(2), -1.0)], "9M − 6M"),
            (
                Span::Quarter(3),
                &[(Span::YearToDate(3), 1.0), (Span::Quarter(1), -1.0), (Span::Quarter(2), -1.0)],
                "9M − Q1 − Q2",
            ),
            (Span::Quarter(4), &[(Span::Year, 1.0), (Span::YearToDate(3), -1.0)], "FY − 9M"),
            (
                Span::Quarter(4),
                &[(Span::Year, 1.0), (Span::Quarter(1), -1.0), (Span::Quarter(2), -1.0), (Span::Quarter(3), -1.0)],
                "FY − Q1 − Q2 − Q3",
            ),
        ];
        for (target, terms, formula) in rules {
            if have.contains_key(&target) {
                continue;
            }
            let Some(parts) = terms.iter().map(|(s, w)| value(&have, *s).map(|v| v * w)).collect::<Option<Vec<f64>>>()
            else {
                continue;
            };
            let base = &have[&terms[0].0].1;
            let files: Vec<&str> = terms.iter().map(|(s, _)| have[s].1.source.file.as_str()).collect();
            let mut files_unique: Vec<&str> = Vec::new();
            for f in files {
                if !files_unique.contains(&f) {
                    files_unique.push(f);
                }
            }
            let derived = Fact {
                value: parts.iter().sum(),
                span: target,
                start: None,
                source: FactSource {
                    form: base.source.form.clone(),
                    filing: base.source.filing.clone(),
                    file: files_unique.join(" + "),
                    derived: Some(formula.to_string()),
                },
                ..base.clone()
            };
            have.insert(target, (derived.value, derived.clone()));
            out.push(derived);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_facts_give_the_same_file() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/demo/facts.jsonl.gz");
        let file = || bincode::serialize(&FactStore::open(std::slice::from_ref(&path)).expect("demo facts")).unwrap();
        assert!(file() == file(), "facts are written in one total order");
    }

    fn line(
        ticker: &str,
        filing: (&str, &str, &str),
        concept: &str,
        value: f64,
        start: Option<&str>,
        end: &str,
    ) -> String {
        serde_json::json!({
            "ticker": ticker, "form": filing.0, "fiscal_year": filing.1, "fiscal_period": filing.2,
            "period_end": if filing.2 == "FY" { "September 28, 2024" } else { "2024-06-29" },
            "source_file": format!("{}-{}.htm", filing.0, filing.1),
            "concept": concept, "value": value.to_string(), "unit": "iso4217:USD", "decimals": "-6",
            "start": start, "end": end, "instant": start.is_none(), "dims": {}
        })
        .to_string()
    }

    fn store(lines: &[String]) -> FactStore {
        let text = lines.join("\n");
        FactStore::from_jsonl(vec![("t".into(), std::io::Cursor::new(text))]).unwrap()
    }

    const K: (&str, &str, &str) = ("10-K", "2024", "FY");
    const Q3: (&str, &str, &str) = ("10-Q", "2024", "Q3");

    #[test]
    fn places_facts_in_the_fiscal_calendar_and_keeps_the_newest_filing() {
        let s = store(&[
            line("AAPL", K, "us-gaap:Revenues", 391_035.0, Some("2023-10-01"), "2024-09-28"),
            line("AAPL", K, "us-gaap:Revenues", 383_285.0, Some("2022-09-25"), "2023-09-30"),
            // An older filing's value for the same period loses to the 10-K's.
            line("AAPL", Q3, "us-gaap:Revenues", 1.0, Some("2022-09-25"), "2023-09-30"),
            line("AAPL", K, "us-gaap:Assets", 364_980.0, None, "2024-09-28"),
            line("AAPL", Q3, "us-gaap:Assets", 331_612.0, None, "2024-06-29"),
        ]);
        assert_eq!(s.get("AAPL", "us-gaap:Revenues", 2023, Span::Year).unwrap().value, 383_285.0);
        assert_eq!(s.get("AAPL", "us-gaap:Revenues", 2024, Span::Year).unwrap().source.filing, "FY2024");
        assert_eq!(s.get("AAPL", "us-gaap:Assets", 2024, Span::Instant(4)).unwrap().value, 364_980.0);
        assert_eq!(s.get("AAPL", "us-gaap:Assets", 2024, Span::Instant(3)).unwrap().value, 331_612.0);
        assert_eq!(s.companies["AAPL"].newest_fiscal_year, Some(2024));
        assert_eq!(s.len(), (4, 0));
    }

    #[test]
    fn derives_missing_quarters_from_year_to_date_values() {
        let s = store(&[
            line("AAPL", K, "us-gaap:Revenues", 391_035.0, Some("2023-10-01"), "2024-09-28"),
            line("AAPL", Q3, "us-gaap:Revenues", 296_105.0, Some("2023-10-01"), "2024-06-29"),
            line("AAPL", Q3, "us-gaap:Revenues", 210_328.0, Some("2023-10-01"), "2024-03-30"),
            line("AAPL", Q3, "us-gaap:Revenues", 85_777.0, Some("2024-03-31"), "2024-06-29"),
            line("AAPL", Q3, "us-gaap:Revenues", 90_753.0, Some("2023-12-31"), "2024-03-30"),
        ]);
        let q = |n| s.get("AAPL", "us-gaap:Revenues", 2024, Span::Quarter(n)).unwrap();
        assert_eq!(q(4).value, 391_035.0 - 296_105.0);
        assert_eq!(q(4).source.derived.as_deref(), Some("FY − 9M"));
        assert_eq!(q(1).value, 210_328.0 - 90_753.0);
        assert_eq!(q(1).source.derived.as_deref(), Some("6M − Q2"));
        assert_eq!(q(3).source.derived, None, "a reported quarter is never replaced");
    }

    #[test]
    fn units_dates_and_dimensions() {
        assert_eq!(normalize_unit(Some("iso4217:USD/xbrli:shares")), "USD/shares");
        assert_eq!(normalize_unit(None), "pure");
        assert_eq!(parse_date("DECEMBER 31, 2024").as_deref(), Some("2024-12-31"));
        assert_eq!(parse_date("2024-02-02").as_deref(), Some("2024-02-02"));
        assert_eq!(parse_date("someday"), None);
        let mut l: serde_json::Value =
            serde_json::from_str(&line("AAPL", K, "us-gaap:Revenues", 5.0, Some("2023-10-01"), "2024-09-28")).unwrap();
        l["dims"] = serde_json::json!({"srt:ProductOrServiceAxis": "us-gaap:ProductMember"});
        let s = store(&[l.to_string(), line("AAPL", K, "us-gaap:Revenues", 9.0, Some("2023-10-01"), "2024-09-28")]);
        assert_eq!(s.len(), (1, 1), "dimensional facts are kept apart");
        assert_eq!(s.breakdown("AAPL", "us-gaap:Revenues", 2024, Span::Year).count(), 1);
        assert_eq!(s.get("AAPL", "us-gaap:Revenues", 2024, Span::Year).unwrap().value, 9.0);
    }

    #[test]
    fn a_bad_line_is_named() {
        let err =
            FactStore::from_jsonl(vec![("facts.jsonl".into(), std::io::Cursor::new("{\"ticker\": 1}"))]).unwrap_err();
        assert!(err.to_string().contains("facts.jsonl line 1"), "{err}");
    }
}
