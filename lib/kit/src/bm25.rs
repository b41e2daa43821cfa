//! Sparse retrieval: BM25 over the items' analysed terms.

use sextant_core::error::Result;
use sextant_core::index::{Bm25Index, Bm25Params};

use super::item::{ContextItem, Query};
use super::traits::Retriever;
use super::vector::{admitted, hits_to_items};

/// BM25 retrieval over a set of items, with the engine's analyser (lower-casing, stop words,
/// and the stemming of [`Bm25Params`]: none by default) and its impact-ordered postings: the
/// same [`Bm25Index`] the engine's BM25 path searches.
///
/// Scores are divided by the best score of the query, so they lie in `(0, 1]` (the best hit
/// scores 1) and can be read beside a dense retriever's cosines; the order is BM25's.
///
/// ```
/// use sextant_kit::{Bm25Retriever, ContextItem, Query, Retriever};
///
/// let bm25 = Bm25Retriever::index(vec![
///     ContextItem::new("fx", "Foreign exchange rates reduced gross margin."),
///     ContextItem::new("ai", "Data centre revenue grew on AI demand."),
/// ]);
/// let hits = bm25.retrieve(&Query::new("exchange rate impact on margins"), 10).unwrap();
/// assert_eq!(hits.len(), 1);
/// assert_eq!((hits[0].id.as_str(), hits[0].score), ("fx", 1.0));
/// ```
pub struct Bm25Retriever {
    index: Bm25Index,
    items: Vec<ContextItem>,
}

impl Bm25Retriever {
    /// Indexes `items` with the default parameters (`k1 = 0.9`, `b = 0.4`).
    pub fn index(items: Vec<ContextItem>) -> Self {
        Self::with_params(items, Bm25Params::default())
    }

    /// Indexes `items` with explicit BM25 parameters.
    pub fn with_params(items: Vec<ContextItem>, params: Bm25Params) -> Self {
        let index = Bm25Index::build(items.iter().map(|i| i.text.as_str()), params);
        Bm25Retriever { index, items }
    }

    /// The indexed items.
    pub fn items(&self) -> &[ContextItem] {
        &self.items
    }
}

impl Retriever for Bm25Retriever {
    fn retrieve(&self, query: &Query, top_k: usize) -> Result<Vec<ContextItem>> {
        let allowed = admitted(query, &self.items);
        let mut hits = self.index.search(&query.text, allowed.as_ref(), top_k);
        if let Some(best) = hits.first().map(|h| h.1).filter(|b| *b > 0.0) {
            hits.iter_mut().for_each(|h| h.1 /= best);
        }
        Ok(hits_to_items(&self.items, hits, "bm25"))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn items() -> Vec<ContextItem> {
        vec![
            ContextItem::new("a", "Revenue increased on iPhone sales.").with_metadata("ticker", json!("AAPL")),
            ContextItem::new("b", "Revenue increased, revenue from data centres doubled.")
                .with_metadata("ticker", json!("NVDA")),
            ContextItem::new("c", "Operating expenses were flat.").with_metadata("ticker", json!("AAPL")),
        ]
    }

    #[test]
    fn ranks_by_bm25_with_the_best_normalised_to_one() {
        let r = Bm25Retriever::index(items());
        let hits = r.retrieve(&Query::new("revenue"), 10).unwrap();
        assert_eq!(hits.iter().map(|h| h.id.as_str()).collect::<Vec<_>>(), ["b", "a"]);
        assert_eq!(hits[0].score, 1.0);
        assert!(hits[1].score > 0.0 && hits[1].score < 1.0);
        assert_eq!(hits[0].metadata["retrieval_method"], "bm25");
    }

    #[test]
    fn filters_apply_before_ranking() {
        let r = Bm25Retriever::index(items());
        let hits = r.retrieve(&Query::new("revenue").with_filter("ticker", json!("AAPL")), 10).unwrap();
        assert_eq!(hits.iter().map(|h| h.id.as_str()).collect::<Vec<_>>(), ["a"]);
        assert_eq!(hits[0].score, 1.0);
    }

    #[test]
    fn no_match_empty_query_empty_index_and_zero_k_give_nothing() {
        let r = Bm25Retriever::index(items());
        assert!(r.retrieve(&Query::new("zeppelin"), 10).unwrap().is_empty());
        assert!(r.retrieve(&Query::new(""), 10).unwrap().is_empty());
        assert!(r.retrieve(&Query::new("the of and"), 10).unwrap().is_empty(), "stop words only");
        assert!(r.retrieve(&Query::new("revenue"), 0).unwrap().is_empty());
        assert!(Bm25Retriever::index(Vec::new()).retrieve(&Query::new("revenue"), 3).unwrap().is_empty());
    }
}
