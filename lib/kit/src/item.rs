//! What flows through the library API: a [`Query`] in, [`ContextItem`]s out.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Metadata of a query or an item: a JSON object.
pub type Metadata = Map<String, Value>;

/// A query: its text, an optional precomputed embedding, filters and free metadata.
///
/// Filters are applied **before** ranking by every retriever in this module: an item is a
/// candidate only when, for every filter key, its metadata holds that key with an equal JSON
/// value, or, when the filter value is an array, with any of the array's values (see
/// [`Query::admits`]). Metadata carries anything else a router or retriever may read (a
/// route name, a user id).
///
/// ```
/// use sextant_kit::{ContextItem, Query};
/// use serde_json::json;
///
/// let q = Query::new("net sales by region")
///     .with_filter("ticker", json!(["AAPL", "MSFT"]))
///     .with_metadata("route", json!("filings"));
/// let apple = ContextItem::new("a1", "Net sales rose.").with_metadata("ticker", json!("AAPL"));
/// let nvidia = ContextItem::new("n1", "Revenue rose.").with_metadata("ticker", json!("NVDA"));
/// assert!(q.admits(&apple));
/// assert!(!q.admits(&nvidia));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Query {
    /// The question as the user wrote it.
    pub text: String,
    /// A precomputed embedding; dense retrievers use it instead of embedding `text`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub embedding: Option<Vec<f32>>,
    /// Metadata conditions every returned item satisfies (see the type's documentation).
    #[serde(default)]
    pub filters: Metadata,
    /// Free metadata for routers and custom retrievers.
    #[serde(default)]
    pub metadata: Metadata,
}

impl Query {
    /// A query with text only.
    pub fn new(text: impl Into<String>) -> Self {
        Query { text: text.into(), ..Default::default() }
    }

    /// Sets a precomputed embedding.
    pub fn with_embedding(mut self, embedding: Vec<f32>) -> Self {
        self.embedding = Some(embedding);
        self
    }

    /// Adds a filter: `key` must equal `value` (or one of its values, for an array).
    pub fn with_filter(mut self, key: impl Into<String>, value: Value) -> Self {
        self.filters.insert(key.into(), value);
        self
    }

    /// Adds a metadata entry.
    pub fn with_metadata(mut self, key: impl Into<String>, value: Value) -> Self {
        self.metadata.insert(key.into(), value);
        self
    }

    /// Whether `item` passes every filter. An array filter value means "any of"; an array
    /// item value passes when any of its elements does. A key the item lacks fails.
    pub fn admits(&self, item: &ContextItem) -> bool {
        self.filters.iter().all(|(key, want)| item.metadata.get(key).is_some_and(|have| value_matches(want, have)))
    }
}

fn value_matches(want: &Value, have: &Value) -> bool {
    match (want, have) {
        (Value::Array(options), _) => options.iter().any(|w| value_matches(w, have)),
        (_, Value::Array(values)) => values.iter().any(|h| h == want),
        _ => want == have,
    }
}

/// Where an item came from; consumers packing a context window may treat sources apart.
///
/// ```
/// use sextant_kit::{ContextItem, Source};
///
/// assert_eq!(ContextItem::new("a", "text").source, Source::Retrieval);
/// assert_eq!(serde_json::to_string(&Source::Memory).unwrap(), "\"memory\"");
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    /// A retrieved document passage.
    #[default]
    Retrieval,
    /// A remembered fact about a user or a conversation ([`ScoredMemoryRetriever`](super::ScoredMemoryRetriever)).
    Memory,
}

/// The default [`ContextItem::priority`] of retrieved passages.
pub const DEFAULT_PRIORITY: u8 = 5;

/// One retrieved passage with its score and where it came from.
///
/// `id` identifies the passage across retrievers: fusion and deduplication key on it.
/// `score` is the score of the last stage that ranked the item (similarity, BM25, fused or
/// reranker score); higher is better. Stages record themselves in
/// `metadata["retrieval_method"]`.
///
/// ```
/// use sextant_kit::{ContextItem, Source};
///
/// let item = ContextItem::new("10-K/2024#7", "Net sales decreased 3%.").with_score(0.82);
/// assert_eq!(item.source, Source::Retrieval);
/// assert_eq!(item.score, 0.82);
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ContextItem {
    /// Stable identifier (a chunk id, a memory id...).
    pub id: String,
    /// The passage text.
    pub text: String,
    /// The last ranking stage's score; higher is better.
    pub score: f32,
    /// Where the item came from.
    pub source: Source,
    /// How much a consumer should prefer keeping it when space runs out (0-10).
    pub priority: u8,
    /// Attribution (document, ticker, period...) and stage records.
    pub metadata: Metadata,
}

impl ContextItem {
    /// A retrieved item with score 0 and no metadata.
    pub fn new(id: impl Into<String>, text: impl Into<String>) -> Self {
        ContextItem {
            id: id.into(),
            text: text.into(),
            score: 0.0,
            source: Source::Retrieval,
            priority: DEFAULT_PRIORITY,
            metadata: Metadata::new(),
        }
    }

    /// Sets the score.
    pub fn with_score(mut self, score: f32) -> Self {
        self.score = score;
        self
    }

    /// Adds a metadata entry.
    pub fn with_metadata(mut self, key: impl Into<String>, value: Value) -> Self {
        self.metadata.insert(key.into(), value);
        self
    }

    /// Records the stage that set the score in `metadata["retrieval_method"]`.
    pub(crate) fn scored_by(mut self, method: &str, score: f32) -> Self {
        self.score = score;
        self.metadata.insert("retrieval_method".into(), Value::from(method));
        self
    }
}

/// Sorts best first by score; equal scores keep their input order (a stable sort).
pub(crate) fn sort_by_score(items: &mut [ContextItem]) {
    items.sort_by(|a, b| b.score.total_cmp(&a.score));
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn item(meta: Value) -> ContextItem {
        let mut it = ContextItem::new("x", "text");
        it.metadata = meta.as_object().unwrap().clone();
        it
    }

    #[test]
    fn no_filter_admits_everything() {
        assert!(Query::new("q").admits(&item(json!({}))));
    }

    #[test]
    fn scalar_filters_need_equal_values_and_a_missing_key_fails() {
        let q = Query::new("q").with_filter("year", json!(2024));
        assert!(q.admits(&item(json!({"year": 2024}))));
        assert!(!q.admits(&item(json!({"year": 2023}))));
        assert!(!q.admits(&item(json!({"year": "2024"}))), "JSON types must agree");
        assert!(!q.admits(&item(json!({}))));
    }

    #[test]
    fn array_filters_mean_any_of_and_array_values_match_any_element() {
        let q = Query::new("q").with_filter("ticker", json!(["AAPL", "MSFT"]));
        assert!(q.admits(&item(json!({"ticker": "MSFT"}))));
        assert!(!q.admits(&item(json!({"ticker": "NVDA"}))));
        assert!(q.admits(&item(json!({"ticker": ["NVDA", "AAPL"]}))));
        assert!(
            !Query::new("q").with_filter("ticker", json!([])).admits(&item(json!({"ticker": "AAPL"}))),
            "empty any-of admits nothing"
        );
    }

    #[test]
    fn every_filter_must_pass() {
        let q = Query::new("q").with_filter("ticker", json!("AAPL")).with_filter("year", json!(2024));
        assert!(q.admits(&item(json!({"ticker": "AAPL", "year": 2024}))));
        assert!(!q.admits(&item(json!({"ticker": "AAPL", "year": 2023}))));
    }

    #[test]
    fn sorting_is_stable_on_ties() {
        let mut v = vec![
            ContextItem::new("a", "").with_score(1.0),
            ContextItem::new("b", "").with_score(2.0),
            ContextItem::new("c", "").with_score(1.0),
        ];
        sort_by_score(&mut v);
        assert_eq!(v.iter().map(|i| i.id.as_str()).collect::<Vec<_>>(), ["b", "a", "c"]);
    }
}
