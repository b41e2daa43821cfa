//! The engine as a [`Retriever`]: the full hybrid pipeline (three paths, RRF, cross-encoder
//! rerank when loaded) behind the toolkit's trait, so it composes with routers, other
//! retrievers and rerankers; and any toolkit [`Reranker`] as the engine's rerank stage
//! ([`EngineReranker`]).

use std::sync::Arc;

use serde_json::Value;
use sextant_core::error::{Error, Result};
use sextant_core::index::Filter;
use sextant_core::pipeline::{self, Candidate, Engine, RerankStatus, Reranked, SearchRequest};

use super::item::{ContextItem, Query};
use super::traits::{Reranker, Retriever};

/// The query filter keys the engine understands, with the [`Filter`] field each sets.
const FILTER_KEYS: [(&str, &str); 12] = [
    ("ticker", "tickers"),
    ("tickers", "tickers"),
    ("year", "years"),
    ("years", "years"),
    ("quarter", "quarters"),
    ("quarters", "quarters"),
    ("document_type", "document_types"),
    ("document_types", "document_types"),
    ("document_id", "document_ids"),
    ("document_ids", "document_ids"),
    ("published_after", "published_after"),
    ("published_before", "published_before"),
];

/// Translates a query's filters into the engine's [`Filter`]: `ticker(s)`, `year(s)`,
/// `quarter(s)`, `document_type(s)`, `document_id(s)` (a value or an array of values, "any
/// of"), `published_after` and `published_before` (`YYYY-MM-DD`, inclusive). Any other key
/// is an error naming it, rather than a filter silently ignored.
///
/// ```
/// use sextant_kit::{engine_filter, Query};
/// use serde_json::json;
///
/// let q = Query::new("buybacks").with_filter("ticker", json!("AAPL")).with_filter("years", json!([2023, 2024]));
/// let f = engine_filter(&q).unwrap();
/// assert_eq!((f.tickers, f.years), (vec!["AAPL".to_string()], vec![2023, 2024]));
/// assert!(engine_filter(&Query::new("x").with_filter("colour", json!("red"))).is_err());
/// ```
pub fn engine_filter(query: &Query) -> Result<Filter> {
    let mut object = serde_json::Map::new();
    for (key, value) in &query.filters {
        let Some((_, field)) = FILTER_KEYS.iter().find(|(k, _)| k == key) else {
            let known: Vec<&str> = FILTER_KEYS.iter().map(|(k, _)| *k).collect();
            return Err(Error::invalid(
                format!("filters.{key}"),
                format!("not a filter of the engine (known: {})", known.join(", ")),
            ));
        };
        let value = match (value, field.starts_with("published")) {
            (v, true) => v.clone(),
            (Value::Array(_), false) => value.clone(),
            (v, false) => Value::Array(vec![v.clone()]),
        };
        object.insert((*field).to_string(), value);
    }
    serde_json::from_value(Value::Object(object)).map_err(|e| Error::invalid("filters", e.to_string()))
}

/// Runs `engine` for `query` with `template`'s settings (paths, depths, fusion, rerank,
/// recency...): the query's text, filters and `top_k` replace the template's.
fn retrieve_with(engine: &Engine, template: &SearchRequest, query: &Query, top_k: usize) -> Result<Vec<ContextItem>> {
    if top_k == 0 {
        return Ok(Vec::new());
    }
    let mut req = template.clone();
    req.query = query.text.clone();
    req.top_k = top_k;
    req.filter = engine_filter(query)?;
    let out = engine.search(&req)?;
    let method = if out.rerank == RerankStatus::Applied { "cross_encoder" } else { "rrf" };
    let index = engine.index();
    Ok(out
        .hits
        .iter()
        .map(|h| {
            let p = index.provenance(h.chunk);
            let doc = p.document;
            let mut item = ContextItem::new(p.chunk_id(), index.chunks[h.chunk as usize].text.clone())
                .scored_by(method, h.score)
                .with_metadata("document_id", Value::from(doc.document_id.clone()))
                .with_metadata("title", Value::from(doc.title.clone()))
                .with_metadata("document_type", Value::from(doc.document_type.as_str()));
            let optional = [
                ("ticker", doc.ticker.clone().map(Value::from)),
                ("year", doc.year.map(Value::from)),
                ("quarter", doc.quarter.map(|q| Value::from(q.to_string()))),
                ("published_at", doc.published_at.map(|d| Value::from(d.to_string()))),
                ("source_url", doc.source_url.clone().map(Value::from)),
            ];
            for (k, v) in optional {
                if let Some(v) = v {
                    item.metadata.insert(k.into(), v);
                }
            }
            item
        })
        .collect())
}

impl Retriever for Engine {
    /// Runs [`Engine::search`] with the engine's defaults (every path, rerank when a
    /// reranker is loaded); the query's embedding is not used (the engine embeds with its
    /// own model). Items carry the chunk's text and attribution: `document_id`, `title`,
    /// `ticker`, `year`, `quarter`, `document_type`, `published_at`, `source_url`, and
    /// `retrieval_method` (`cross_encoder` when reranked, else `rrf`). Their ids are the
    /// chunks' citation ids, `document_id#n` ([`Provenance::chunk_id`](sextant_core::index::Provenance::chunk_id)).
    ///
    /// ```no_run
    /// use std::sync::Arc;
    /// use sextant_core::encode::{default_model_dir, ModelSet};
    /// use sextant_core::index::Index;
    /// use sextant_kit::{Query, Retriever};
    /// use sextant_core::pipeline::open_engine;
    /// use sextant_core::storage::LocalDir;
    ///
    /// let index = Index::load(&LocalDir::new("indexes/demo")).unwrap();
    /// let engine = open_engine(Arc::new(index), &ModelSet::under(&default_model_dir())).unwrap();
    /// let hits = engine.retrieve(&Query::new("share repurchases").with_filter("ticker", "AAPL".into()), 5).unwrap();
    /// for h in hits {
    ///     println!("{:.3} {} {}", h.score, h.metadata["document_id"], h.text);
    /// }
    /// ```
    fn retrieve(&self, query: &Query, top_k: usize) -> Result<Vec<ContextItem>> {
        retrieve_with(self, &SearchRequest::new(query.text.clone(), top_k), query, top_k)
    }
}

/// The engine as a [`Retriever`] with settings of your own: a [`SearchRequest`] template
/// whose text, filters and `top_k` each query replaces.
///
/// ```no_run
/// use std::sync::Arc;
/// use sextant_core::encode::{default_model_dir, ModelSet};
/// use sextant_core::index::Index;
/// use sextant_kit::{EngineRetriever, Query, Retriever};
/// use sextant_core::pipeline::{open_engine, Path, SearchRequest};
/// use sextant_core::storage::LocalDir;
///
/// let index = Index::load(&LocalDir::new("indexes/demo")).unwrap();
/// let engine = Arc::new(open_engine(Arc::new(index), &ModelSet::under(&default_model_dir())).unwrap());
/// let mut template = SearchRequest::new("", 10);
/// template.paths = vec![Path::Bm25, Path::Splade];
/// template.rerank = false;
/// let lexical = EngineRetriever::new(engine, template);
/// let hits = lexical.retrieve(&Query::new("goodwill impairment"), 5).unwrap();
/// ```
pub struct EngineRetriever {
    engine: Arc<Engine>,
    template: SearchRequest,
}

impl EngineRetriever {
    /// Searches `engine` with `template`'s settings.
    pub fn new(engine: Arc<Engine>, template: SearchRequest) -> Self {
        EngineRetriever { engine, template }
    }
}

impl Retriever for EngineRetriever {
    fn retrieve(&self, query: &Query, top_k: usize) -> Result<Vec<ContextItem>> {
        retrieve_with(&self.engine, &self.template, query, top_k)
    }
}

/// A toolkit [`Reranker`] (a [`CallbackReranker`](crate::CallbackReranker) for a hosted
/// service, a [`RerankerPipeline`](crate::RerankerPipeline), ...) as the engine's rerank
/// stage: each candidate goes in as an item whose id is its chunk ordinal, and comes back
/// by that id. An id the engine did not send is an error, which the engine reports as a
/// failed rerank and keeps the fused order.
///
/// ```
/// use std::sync::Arc;
/// use sextant_core::pipeline::{Candidate, Reranker as _};
/// use sextant_kit::{EngineReranker, ScoreReranker};
///
/// // Shortest passage first, through the engine's interface.
/// let stage = EngineReranker::new(ScoreReranker::new(|_q: &str, p: &str| -(p.len() as f32)));
/// let candidates = [
///     Candidate { chunk: 4, text: "a longer passage", fused_score: 0.9 },
///     Candidate { chunk: 8, text: "short", fused_score: 0.5 },
/// ];
/// let out = stage.rerank("q", &candidates)?;
/// assert_eq!(out.iter().map(|r| r.chunk).collect::<Vec<_>>(), [8, 4]);
/// # Ok::<(), sextant_core::Error>(())
/// ```
pub struct EngineReranker<R>(R);

impl<R: Reranker> EngineReranker<R> {
    /// The engine's rerank stage through `reranker`.
    pub fn new(reranker: R) -> Self {
        EngineReranker(reranker)
    }
}

impl<R: Reranker> pipeline::Reranker for EngineReranker<R> {
    fn rerank(&self, query: &str, candidates: &[Candidate<'_>]) -> Result<Vec<Reranked>> {
        let items: Vec<ContextItem> = candidates
            .iter()
            .map(|c| ContextItem::new(c.chunk.to_string(), c.text).with_score(c.fused_score))
            .collect();
        let sent: std::collections::HashMap<String, u32> =
            candidates.iter().map(|c| (c.chunk.to_string(), c.chunk)).collect();
        let ranked = self.0.rerank(&Query::new(query), items, candidates.len())?;
        ranked
            .into_iter()
            .map(|item| match sent.get(&item.id) {
                Some(&chunk) => Ok(Reranked { chunk, score: item.score }),
                None => Err(Error::Component {
                    component: "reranker".into(),
                    reason: format!("returned an item the engine did not send: {:?}", item.id),
                }),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn filters_translate_singular_and_plural_keys() {
        let q = Query::new("q")
            .with_filter("ticker", json!("AAPL"))
            .with_filter("years", json!([2023, 2024]))
            .with_filter("published_after", json!("2024-01-01"));
        let f = engine_filter(&q).unwrap();
        assert_eq!(f.tickers, ["AAPL"]);
        assert_eq!(f.years, [2023, 2024]);
        assert_eq!(f.published_after.map(|d| d.to_string()).as_deref(), Some("2024-01-01"));
        assert!(engine_filter(&Query::new("q")).unwrap().is_empty());
    }

    #[test]
    fn unknown_keys_and_wrong_types_are_errors_naming_the_field() {
        let err = engine_filter(&Query::new("q").with_filter("sector", json!("tech"))).unwrap_err();
        assert!(err.to_string().contains("filters.sector"), "{err}");
        let err = engine_filter(&Query::new("q").with_filter("year", json!("last year"))).unwrap_err();
        assert!(err.to_string().contains("filters"), "{err}");
    }

    #[test]
    fn the_engine_is_a_library_retriever_with_attribution_and_filters() {
        let e = sextant_core::testutil::small_engine();
        let hits = e.retrieve(&Query::new("foreign exchange gross margin"), 2).unwrap();
        assert_eq!(hits[0].metadata["document_id"], "fx");
        assert_eq!(hits[0].metadata["retrieval_method"], "rrf");
        assert_eq!(hits[0].id, "fx#0", "the chunk's ordinal within its document");
        let ko =
            e.retrieve(&Query::new("foreign exchange gross margin").with_filter("ticker", json!("KO")), 5).unwrap();
        assert!(!ko.is_empty() && ko.iter().all(|h| h.metadata["ticker"] == "KO"));
        assert!(e.retrieve(&Query::new("margin").with_filter("sector", json!("x")), 5).is_err());
    }

    #[test]
    fn a_toolkit_reranker_reorders_the_engine_and_an_invented_item_fails_the_rerank() {
        use crate::{CallbackReranker, ScoreReranker};
        let base = sextant_core::testutil::small_engine();
        let with = |r: Arc<dyn sextant_core::pipeline::Reranker>| base.sharing_encoders(base.index().clone(), Some(r));
        let shortest_first =
            with(Arc::new(EngineReranker::new(ScoreReranker::new(|_q: &str, p: &str| -(p.len() as f32)))));
        let mut req = SearchRequest::new("net sales", 3);
        req.rerank = true;
        let out = shortest_first.search(&req).unwrap();
        assert_eq!(out.rerank, RerankStatus::Applied);
        let lens: Vec<usize> = out.hits.iter().map(|h| base.index().chunks[h.chunk as usize].text.len()).collect();
        assert!(lens.windows(2).all(|w| w[0] <= w[1]), "{lens:?}");
        let liar = CallbackReranker::new(|_q: &str, _docs: &[&str], _k: usize| Ok(vec![(0, 1.0)]));
        let inventing = with(Arc::new(EngineReranker::new(InventingReranker(liar))));
        let out = inventing.search(&req).unwrap();
        assert!(
            matches!(out.rerank, RerankStatus::Failed(ref why) if why.contains("did not send")),
            "{:?}",
            out.rerank
        );
    }

    /// Renames the first item it returns: an id the engine never sent.
    struct InventingReranker<R>(R);
    impl<R: Reranker> Reranker for InventingReranker<R> {
        fn rerank(&self, q: &Query, items: Vec<ContextItem>, k: usize) -> Result<Vec<ContextItem>> {
            let mut out = self.0.rerank(q, items, k)?;
            out[0].id = "invented".into();
            Ok(out)
        }
    }
}
