//! Metadata filters, applied before ranking.

use serde::{Deserialize, Serialize};

use crate::corpus::{Date, Document, DocumentType, Quarter};

/// A conjunction of metadata conditions; an empty list means "any".
///
/// Matching is case-insensitive for tickers and document types; `published_after` and
/// `published_before` are inclusive.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Filter {
    /// Any of these tickers.
    #[serde(default)]
    pub tickers: Vec<String>,
    /// Any of these fiscal years.
    #[serde(default)]
    pub years: Vec<i32>,
    /// Any of these quarters (`Q1`..`Q4`).
    #[serde(default)]
    pub quarters: Vec<Quarter>,
    /// Any of these document types.
    #[serde(default)]
    pub document_types: Vec<DocumentType>,
    /// Any of these document ids.
    #[serde(default)]
    pub document_ids: Vec<String>,
    /// Published on or after this date.
    #[serde(default)]
    pub published_after: Option<Date>,
    /// Published on or before this date.
    #[serde(default)]
    pub published_before: Option<Date>,
}

fn any_ci(list: &[String], value: Option<&str>) -> bool {
    list.is_empty() || value.is_some_and(|v| list.iter().any(|x| x.eq_ignore_ascii_case(v)))
}

impl Filter {
    /// Whether no condition is set.
    pub fn is_empty(&self) -> bool {
        *self == Filter::default()
    }

    /// Whether `doc` satisfies every condition.
    pub fn matches(&self, doc: &Document) -> bool {
        let date = doc.published_at;
        any_ci(&self.tickers, doc.ticker.as_deref())
            && (self.years.is_empty() || doc.year.is_some_and(|y| self.years.contains(&y)))
            && (self.quarters.is_empty() || doc.quarter.is_some_and(|q| self.quarters.contains(&q)))
            && (self.document_types.is_empty() || self.document_types.contains(&doc.document_type))
            && (self.document_ids.is_empty() || self.document_ids.contains(&doc.document_id))
            && self.published_after.is_none_or(|a| date.is_some_and(|d| d >= a))
            && self.published_before.is_none_or(|b| date.is_some_and(|d| d <= b))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_condition_must_hold() {
        let doc = Document {
            document_id: "d".into(),
            document_type: DocumentType::Form10K,
            ticker: Some("AAPL".into()),
            year: Some(2024),
            published_at: "2024-11-01".parse().ok(),
            ..Default::default()
        };
        assert!(Filter::default().matches(&doc));
        assert!(Filter { tickers: vec!["aapl".into(), "MSFT".into()], ..Default::default() }.matches(&doc));
        assert!(!Filter { tickers: vec!["MSFT".into()], ..Default::default() }.matches(&doc));
        assert!(!Filter { years: vec![2023], ..Default::default() }.matches(&doc));
        assert!(
            !Filter { quarters: vec![Quarter::new(1).unwrap()], ..Default::default() }.matches(&doc),
            "no quarter on the doc"
        );
        assert!(Filter { published_after: "2024-11-01".parse().ok(), ..Default::default() }.matches(&doc));
        assert!(!Filter { published_before: "2024-10-31".parse().ok(), ..Default::default() }.matches(&doc));
        assert!(Filter { document_types: vec!["10-k".into()], years: vec![2024], ..Default::default() }.matches(&doc));
    }
}
