//! Period fallback: a year/quarter with no document for the requested companies is served
//! from the nearest prior period of each company, and the response says so.

use std::collections::BTreeMap;

use serde::Serialize;
use sextant_core::corpus::{Document, Quarter};

/// Reported in `meta.periodMismatch` when the chunks come from another period.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct PeriodMismatch {
    /// The period asked for (`Q4 2025`, or `2025`).
    pub requested: String,
    /// The periods served, one per company (`AMD Q3 2025`, `MA FY2024`).
    pub served: Vec<String>,
    /// What to tell the user.
    pub message: String,
}

/// A document's period as a sortable key: `(year, quarter)`, an annual document counting
/// as the year's last quarter.
fn key(d: &Document) -> Option<(i32, u8)> {
    let y = d.year?;
    let q = d.quarter.map_or(4, Quarter::number);
    Some((y, q))
}

fn label(d: &Document) -> String {
    let who = d.ticker.clone().unwrap_or_else(|| "corpus".into());
    match (d.quarter, d.year) {
        (Some(q), Some(y)) => format!("{who} {q} {y}"),
        (None, Some(y)) => format!("{who} FY{y}"),
        _ => who,
    }
}

/// When no document of `base` (tickers and source types already applied) falls in the
/// requested period, the ids of the documents of each company's nearest prior period and
/// the mismatch to report. `None` when the requested period has documents (or none is
/// requested).
pub fn fallback<'a>(
    documents: impl IntoIterator<Item = &'a Document>,
    base: impl Fn(&Document) -> bool,
    year: Option<i32>,
    quarter: Option<Quarter>,
) -> Option<(Vec<String>, PeriodMismatch)> {
    let year = year?;
    let in_period = |d: &Document| d.year == Some(year) && quarter.is_none_or(|q| d.quarter == Some(q));
    let candidates: Vec<&Document> = documents.into_iter().filter(|d| base(d)).collect();
    if candidates.iter().any(|d| in_period(d)) {
        return None;
    }
    let requested = match quarter {
        Some(q) => format!("{q} {year}"),
        None => year.to_string(),
    };
    let limit = (year, quarter.map_or(1, Quarter::number));
    // Nearest prior period per company.
    let mut best: BTreeMap<String, (i32, u8)> = BTreeMap::new();
    for d in &candidates {
        let Some(k) = key(d) else { continue };
        if k >= limit {
            continue;
        }
        let who = d.ticker.clone().unwrap_or_default();
        let e = best.entry(who).or_insert(k);
        if k > *e {
            *e = k;
        }
    }
    let served_docs: Vec<&Document> = candidates
        .iter()
        .copied()
        .filter(|d| key(d).is_some_and(|k| best.get(&d.ticker.clone().unwrap_or_default()) == Some(&k)))
        .collect();
    let mut served: Vec<String> = served_docs.iter().map(|d| label(d)).collect();
    served.sort();
    served.dedup();
    let message = if served.is_empty() {
        format!("No document for {requested} exists in the corpus for this request, and no earlier period either.")
    } else {
        format!(
            "No document for {requested} exists in the corpus for this request. \
             The returned chunks come from the nearest prior period(s): {}. Do not present them as {requested}.",
            served.join(", ")
        )
    };
    let ids = served_docs.iter().map(|d| d.document_id.clone()).collect();
    Some((ids, PeriodMismatch { requested, served, message }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serves_each_companys_nearest_prior_period() {
        let doc = |id: &str, t: &str, y: i32, q: Option<&str>| Document {
            document_id: id.into(),
            ticker: Some(t.into()),
            year: Some(y),
            quarter: q.map(|q: &str| q.parse().unwrap()),
            document_type: "earnings_call".into(),
            segments: vec!["text".into()],
            ..Default::default()
        };
        let index = [
            doc("a1", "AMD", 2025, Some("Q2")),
            doc("a2", "AMD", 2025, Some("Q3")),
            doc("n1", "NVDA", 2024, Some("Q4")),
            doc("n2", "NVDA", 2026, Some("Q1")),
            doc("k1", "MA", 2024, None),
        ];
        let index = &index[..];
        let all = |_: &Document| true;
        // Q3 2025 exists for AMD: no fallback.
        assert!(fallback(index, all, Some(2025), Quarter::new(3)).is_none());
        assert!(fallback(index, all, None, Quarter::new(3)).is_none());
        let (ids, m) = fallback(index, all, Some(2025), Quarter::new(4)).unwrap();
        assert_eq!(m.requested, "Q4 2025");
        assert_eq!(m.served, vec!["AMD Q3 2025", "MA FY2024", "NVDA Q4 2024"]);
        assert!(m.message.contains("nearest prior period(s): AMD Q3 2025"));
        let mut ids = ids;
        ids.sort();
        assert_eq!(ids, vec!["a2", "k1", "n1"]);
        // Restricted to one company; nothing earlier exists.
        let (ids, m) = fallback(index, |d: &Document| d.ticker.as_deref() == Some("AMD"), Some(2020), None).unwrap();
        assert!(ids.is_empty() && m.served.is_empty() && m.message.contains("no earlier period"));
    }
}
