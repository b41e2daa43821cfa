//! Contradiction detection: directional claims in returned passages ("net sales
//! increased 8%") set against the year-over-year change of the facts for the same company,
//! metric and period.
//!
//! A claim is a company-level metric phrase ("total net sales", "our revenue", "net
//! income"; not "iPhone net sales"), then within the same sentence a direction verb and a
//! percentage. Its period is a fiscal year named in the sentence, else the passage's year
//! (a quarter when the sentence speaks of "the quarter" in a 10-Q). A claim is flagged when
//! its direction differs from the facts' (`direction_mismatch`), or when the size differs
//! by more than [`TOLERANCE_POINTS`] percentage points and [`TOLERANCE_RELATIVE`] of the
//! facts' change (`magnitude_gap`).

use regex_lite::Regex;
use serde::Serialize;
use sextant_core::corpus::{DocumentType, Quarter};

use super::facts::FactStore;
use super::metrics::{Metric, METRICS};
use super::narrative::Passage;
use super::relational::{metric_lookup, Comparison, Period};

/// Absolute tolerance, in percentage points.
pub const TOLERANCE_POINTS: f64 = 2.0;
/// Relative tolerance, as a share of the facts' change.
pub const TOLERANCE_RELATIVE: f64 = 0.25;

/// A claim read from a passage.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct Claim {
    /// The sentence.
    pub text: String,
    /// Metric key.
    pub metric: String,
    /// `up` or `down`.
    pub direction: String,
    /// The percentage claimed.
    pub pct: f64,
    /// Fiscal year the claim is about.
    pub fiscal_year: i32,
    /// Quarter, when the claim is about one.
    pub quarter: Option<u8>,
}

/// A claim the facts disagree with.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct Contradiction {
    /// `direction_mismatch` or `magnitude_gap`.
    pub kind: String,
    /// Company.
    pub ticker: String,
    /// What the passage says.
    pub claim: Claim,
    /// The passage it comes from.
    pub chunk_id: String,
    /// What the facts say (with their sources in `concept`, periods and values).
    pub facts: Comparison,
    /// The XBRL concept the facts come from.
    pub concept: String,
    /// In words.
    pub explanation: String,
}

fn claim_pattern() -> &'static (Regex, Vec<(&'static Metric, String)>) {
    static P: std::sync::OnceLock<(Regex, Vec<(&'static Metric, String)>)> = std::sync::OnceLock::new();
    P.get_or_init(|| {
        let mut phrases: Vec<(&'static Metric, String)> = METRICS
            .iter()
            .filter(|m| !m.instant && m.key != "free_cash_flow" && !m.key.starts_with("eps"))
            .flat_map(|m| m.phrases.iter().filter(|p| p.contains(' ') || p.len() > 6).map(move |p| (m, p.to_string())))
            .collect();
        phrases.sort_by_key(|(_, p)| std::cmp::Reverse(p.len()));
        let alternatives: Vec<String> = phrases.iter().map(|(_, p)| regex_lite::escape(p)).collect();
        let re = format!(
            concat!(
                r"(?i)(?:^|[.;:]\s+|\b(?:total|our|the company's|the company’s|consolidated|company)\s+)({})\s+",
                r"(?:(?:was|were|have|has|had)\s+)?",
                r"(increased|increase|grew|rose|improved|decreased|decrease|declined|fell|dropped|",
                r"was up|were up|was down|were down)\s+",
                r"(?:by\s+)?(?:approximately\s+|about\s+|nearly\s+)?(\d+(?:\.\d+)?)\s*(?:%|percent)",
            ),
            alternatives.join("|")
        );
        (Regex::new(&re).expect("claim pattern"), phrases)
    })
}

/// The claims of one passage; `year`/`quarter` are the passage's period.
pub fn claims(text: &str, year: Option<i32>, quarterly_doc: Option<u8>) -> Vec<Claim> {
    let (re, phrases) = claim_pattern();
    let year_re = {
        static Y: std::sync::OnceLock<Regex> = std::sync::OnceLock::new();
        Y.get_or_init(|| Regex::new(r"\b(?:fiscal\s+(?:year\s+)?)?(20\d\d)\b").expect("year"))
    };
    let mut out = Vec::new();
    for sentence in sentences(text) {
        for c in re.captures_iter(sentence) {
            let phrase = c[1].to_lowercase();
            let Some((m, _)) = phrases.iter().find(|(_, p)| *p == phrase) else { continue };
            let verb = c[2].to_lowercase();
            let up = ["increase", "grew", "rose", "improved", "up"].iter().any(|v| verb.contains(v));
            let Ok(pct) = c[3].parse::<f64>() else { continue };
            // The first year named in the sentence is the period spoken of ("during 2023
            // compared to 2022"); otherwise the passage's own year.
            let named = year_re.captures(sentence).and_then(|y| y[1].parse().ok());
            let Some(fiscal_year) = named.or(year) else { continue };
            let lower = sentence.to_lowercase();
            let quarter = quarterly_doc.filter(|_| lower.contains("quarter") && !lower.contains("months"));
            if quarterly_doc.is_some() && quarter.is_none() {
                continue; // a 10-Q's year-to-date comparison: not a period we hold as such
            }
            out.push(Claim {
                text: sentence.to_string(),
                metric: m.key.into(),
                direction: if up { "up" } else { "down" }.into(),
                pct,
                fiscal_year,
                quarter,
            });
        }
    }
    out
}

/// Sentences: split after `.`, `!` or `?` followed by white space, and at line breaks
/// (a decimal point is not a sentence end).
fn sentences(text: &str) -> impl Iterator<Item = &str> {
    let mut out = Vec::new();
    let mut start = 0;
    let bytes = text.as_bytes();
    for (i, &b) in bytes.iter().enumerate() {
        let end =
            b == b'\n' || (matches!(b, b'.' | b'!' | b'?') && bytes.get(i + 1).is_none_or(|n| n.is_ascii_whitespace()));
        if end {
            out.push(&text[start..=i]);
            start = i + 1;
        }
    }
    out.push(&text[start..]);
    out.into_iter().map(str::trim).filter(|s| !s.is_empty())
}

/// Checks every claim of `passages` against `facts`.
pub fn detect(facts: &FactStore, passages: &[Passage]) -> Vec<Contradiction> {
    let mut out = Vec::new();
    for p in passages {
        let Some(ticker) = p.ticker.as_deref() else { continue };
        if !p.document_type.is_filing() {
            continue; // call transcripts mix segments, constant currency and guidance
        }
        let ten_q = p.document_type == DocumentType::Form10Q;
        let quarter = if ten_q { p.quarter.map(Quarter::number) } else { None };
        if ten_q && quarter.is_none() {
            continue;
        }
        for claim in claims(&p.text, p.year, quarter) {
            let Some(m) = METRICS.iter().find(|m| m.key == claim.metric) else { continue };
            let period = Period { fiscal_year: claim.fiscal_year, quarter: claim.quarter };
            let lookup = metric_lookup(facts, ticker, m, period);
            let (Some(cmp), Some(value)) = (lookup.comparison, lookup.value) else { continue };
            let Some(actual) = cmp.pct_change else { continue };
            let claimed = if claim.direction == "up" { claim.pct } else { -claim.pct };
            let concept = value.concept;
            let (kind, explanation) = if actual != 0.0 && claimed.signum() != actual.signum() && claim.pct > 0.0 {
                (
                    "direction_mismatch",
                    format!(
                        "the passage says {} {} {}%, the facts show {actual:+.1}% ({} vs {})",
                        m.label.to_lowercase(),
                        if claimed > 0.0 { "rose" } else { "fell" },
                        claim.pct,
                        cmp.period,
                        cmp.prior_period
                    ),
                )
            } else if (claimed - actual).abs() > TOLERANCE_POINTS.max(TOLERANCE_RELATIVE * actual.abs()) {
                (
                    "magnitude_gap",
                    format!(
                        "the passage says {claimed:+.1}%, the facts show {actual:+.1}% ({} vs {})",
                        cmp.period, cmp.prior_period
                    ),
                )
            } else {
                continue;
            };
            out.push(Contradiction {
                kind: kind.into(),
                ticker: ticker.into(),
                claim,
                chunk_id: p.chunk_id.clone(),
                facts: cmp,
                concept,
                explanation,
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_company_level_claims_only() {
        let c = claims(
            "Total net sales decreased 3% during 2023 compared to 2022. \
             iPhone net sales increased 6% due to higher sales.",
            Some(2023),
            None,
        );
        assert_eq!(c.len(), 1, "{c:?}");
        assert_eq!(
            (c[0].metric.as_str(), c[0].direction.as_str(), c[0].pct, c[0].fiscal_year),
            ("revenue", "down", 3.0, 2023)
        );
        let c = claims("Net income rose by approximately 12.5 percent.", Some(2024), None);
        assert_eq!((c[0].metric.as_str(), c[0].pct, c[0].fiscal_year), ("net_income", 12.5, 2024));
        assert!(claims("Revenue increased in most regions.", Some(2024), None).is_empty(), "no percentage, no claim");
        assert!(
            claims("Net sales increased 5% during the first nine months.", Some(2024), Some(3)).is_empty(),
            "a 10-Q's nine months"
        );
        let q = claims("Net sales increased 5% during the third quarter of 2024.", Some(2024), Some(3));
        assert_eq!(q[0].quarter, Some(3));
    }
}
