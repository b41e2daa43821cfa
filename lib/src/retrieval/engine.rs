//! The engine as a [`Retriever`]: the full hybrid pipeline (three paths, RRF, cross-encoder
//! rerank when loaded) behind the library's trait, so it composes with routers, other
//! retrievers and rerankers.

use std::sync::Arc;

use serde_json::Value;

use super::item::{ContextItem, Query};
use super::traits::Retriever;
use crate::error::{Error, Result};
use crate::index::Filter;
use crate::search::{Engine, RerankStatus, SearchRequest};

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
/// use sextant::retrieval::{engine_filter, Query};
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
            return Err(Error::invalid(format!("filters.{key}"), format!("not a filter of the engine (known: {})", known.join(", "))));
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
            let doc = index.document_of(h.chunk);
            let mut item = ContextItem::new(format!("{}#{}", doc.document_id, h.chunk), index.chunks[h.chunk as usize].text.clone())
                .scored_by(method, h.score)
                .with_metadata("document_id", Value::from(doc.document_id.clone()))
                .with_metadata("title", Value::from(doc.title.clone()))
                .with_metadata("document_type", Value::from(doc.document_type.clone()));
            let optional = [
                ("ticker", doc.ticker.clone().map(Value::from)),
                ("year", doc.year.map(Value::from)),
                ("quarter", doc.quarter.clone().map(Value::from)),
                ("published_at", doc.published_at.clone().map(Value::from)),
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
    /// `retrieval_method` (`cross_encoder` when reranked, else `rrf`). Their ids are
    /// `document_id#chunk`.
    ///
    /// ```no_run
    /// use std::sync::Arc;
    /// use sextant::encode::{default_model_dir, ModelSet};
    /// use sextant::index::Index;
    /// use sextant::retrieval::{Query, Retriever};
    /// use sextant::search::open_engine;
    /// use sextant::storage::LocalDir;
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
/// use sextant::encode::{default_model_dir, ModelSet};
/// use sextant::index::Index;
/// use sextant::retrieval::{EngineRetriever, Query, Retriever};
/// use sextant::search::{open_engine, Path, SearchRequest};
/// use sextant::storage::LocalDir;
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn filters_translate_singular_and_plural_keys() {
        let q = Query::new("q")
            .with_filter("ticker", json!("AAPL"))
            .with_filter("years", json!([2023, 2024]))
            .with_filter("published_after", json!("2024-01-01"));
        let f = engine_filter(&q).unwrap();
        assert_eq!(f.tickers, ["AAPL"]);
        assert_eq!(f.years, [2023, 2024]);
        assert_eq!(f.published_after.as_deref(), Some("2024-01-01"));
        assert!(engine_filter(&Query::new("q")).unwrap().is_empty());
    }

    #[test]
    fn unknown_keys_and_wrong_types_are_errors_naming_the_field() {
        let err = engine_filter(&Query::new("q").with_filter("sector", json!("tech"))).unwrap_err();
        assert!(err.to_string().contains("filters.sector"), "{err}");
        let err = engine_filter(&Query::new("q").with_filter("year", json!("last year"))).unwrap_err();
        assert!(err.to_string().contains("filters"), "{err}");
    }
}
