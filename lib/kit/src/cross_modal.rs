//! Cross-modal retrieval: items of several modalities (text, images, tables...) embedded
//! into one shared vector space and searched with a text query.
//!
//! A [`CrossModalEncoder`] is a registry of encoders, one per modality name, that all map
//! into the same space (CLIP's text and image towers are the classic pair). A
//! [`SharedSpaceRetriever`] indexes items with the encoder of their modality and ranks them
//! by cosine similarity to the query's embedding.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, RwLock};

use serde_json::Value;
use sextant_core::error::{Error, Result};
use sextant_core::index::VectorStore;

use super::item::{ContextItem, Query};
use super::traits::Retriever;
use super::vector::{admitted, hits_to_items, normalize, FlatVectorStore};

/// Content of any modality, as handed to an encoder.
///
/// ```
/// use sextant_kit::Content;
/// use serde_json::json;
///
/// assert_eq!(Content::from("a chart of revenue").as_text(), Some("a chart of revenue"));
/// assert_eq!(Content::from(vec![0x89u8, b'P', b'N', b'G']).as_text(), None);
/// assert!(matches!(Content::from(json!({"rows": 3})), Content::Json(_)));
/// ```
#[derive(Debug, Clone, PartialEq)]
pub enum Content {
    /// Text (a passage, a caption, a query).
    Text(String),
    /// Raw bytes (an image, an audio clip).
    Bytes(Vec<u8>),
    /// Structured data (a table, a record).
    Json(Value),
}

impl Content {
    /// The text, for [`Content::Text`].
    pub fn as_text(&self) -> Option<&str> {
        match self {
            Content::Text(t) => Some(t),
            _ => None,
        }
    }

    /// The bytes, for [`Content::Bytes`].
    pub fn as_bytes(&self) -> Option<&[u8]> {
        match self {
            Content::Bytes(b) => Some(b),
            _ => None,
        }
    }

    /// The JSON value, for [`Content::Json`].
    pub fn as_json(&self) -> Option<&Value> {
        match self {
            Content::Json(v) => Some(v),
            _ => None,
        }
    }
}

impl From<&str> for Content {
    fn from(t: &str) -> Self {
        Content::Text(t.to_string())
    }
}

impl From<String> for Content {
    fn from(t: String) -> Self {
        Content::Text(t)
    }
}

impl From<Vec<u8>> for Content {
    fn from(b: Vec<u8>) -> Self {
        Content::Bytes(b)
    }
}

impl From<Value> for Content {
    fn from(v: Value) -> Self {
        Content::Json(v)
    }
}

type EncodeFn = dyn Fn(&Content) -> Result<Vec<f32>> + Send + Sync;

/// A registry of encoders, one per modality name, into one shared vector space.
///
/// Cloning is cheap (the encoders are shared).
///
/// ```
/// use sextant_kit::{Content, CrossModalEncoder};
///
/// let enc = CrossModalEncoder::new()
///     .register("text", |c: &Content| Ok(vec![c.as_text().map_or(0.0, |t| t.len() as f32), 1.0]))
///     .register("image", |c: &Content| Ok(vec![c.as_bytes().map_or(0.0, |b| b.len() as f32), 1.0]));
/// assert_eq!(enc.modalities(), ["image", "text"]);
/// assert_eq!(enc.encode(&Content::from("abc"), "text").unwrap(), vec![3.0, 1.0]);
/// let err = enc.encode(&Content::from("abc"), "audio").unwrap_err();
/// assert!(err.to_string().contains("known: image, text"), "{err}");
/// ```
#[derive(Clone, Default)]
pub struct CrossModalEncoder {
    encoders: BTreeMap<String, Arc<EncodeFn>>,
}

impl CrossModalEncoder {
    /// An encoder with no modality registered.
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers (or replaces) the encoder of modality `name`.
    pub fn register(
        mut self,
        name: impl Into<String>,
        encode: impl Fn(&Content) -> Result<Vec<f32>> + Send + Sync + 'static,
    ) -> Self {
        self.encoders.insert(name.into(), Arc::new(encode));
        self
    }

    /// The registered modality names, sorted.
    pub fn modalities(&self) -> Vec<String> {
        self.encoders.keys().cloned().collect()
    }

    /// Whether `modality` has an encoder.
    pub fn supports(&self, modality: &str) -> bool {
        self.encoders.contains_key(modality)
    }

    /// Encodes `content` with the encoder of `modality`.
    ///
    /// Errors: an unknown modality ([`Error::InvalidArgument`] listing the known ones); the
    /// encoder's own error; an empty vector or one holding NaN or infinity
    /// ([`Error::Component`]).
    pub fn encode(&self, content: &Content, modality: &str) -> Result<Vec<f32>> {
        let encode = self.encoders.get(modality).ok_or_else(|| {
            Error::invalid("modality", format!("{modality:?} has no encoder (known: {})", self.modalities().join(", ")))
        })?;
        let v = encode(content)?;
        let bad = |reason: &str| Error::Component { component: format!("{modality} encoder"), reason: reason.into() };
        if v.is_empty() {
            return Err(bad("returned an empty vector"));
        }
        if v.iter().any(|x| !x.is_finite()) {
            return Err(bad("returned a vector holding NaN or infinity"));
        }
        Ok(v)
    }
}

impl fmt::Debug for CrossModalEncoder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CrossModalEncoder").field("modalities", &self.modalities()).finish()
    }
}

/// What a [`SharedSpaceRetriever`] has indexed: ordinal `i` of the store is `items[i]`.
#[derive(Default)]
struct Indexed {
    store: FlatVectorStore,
    items: Vec<ContextItem>,
}

/// Retrieval across modalities in a shared embedding space.
///
/// Items are embedded with the encoder of their modality and kept in an exact
/// [`FlatVectorStore`]; a query is embedded with the query modality's encoder (`"text"`
/// unless set), or taken from [`Query::embedding`], and items are ranked by cosine
/// similarity, after the query's filters ([`Query::admits`]) have been applied. Every
/// indexed item carries its modality in `metadata["modality"]`, so a filter on that key
/// restricts a search to some modalities. Returned items have
/// `metadata["retrieval_method"] = "shared_space"`.
///
/// Indexing takes `&self` (the index sits behind a lock), so a retriever shared between
/// threads (in an `Arc`) can grow while it serves; a search sees each indexing call
/// entirely or not at all.
///
/// ```
/// use sextant_kit::{Content, ContextItem, CrossModalEncoder, Query, Retriever, SharedSpaceRetriever};
/// use serde_json::json;
///
/// // Toy shared space: [mentions of "revenue", mentions of "margin"].
/// let text = |c: &Content| {
///     let t = c.as_text().unwrap_or("");
///     Ok(vec![t.matches("revenue").count() as f32, t.matches("margin").count() as f32])
/// };
/// // "Images" here are bytes whose first two values are the coordinates.
/// let image = |c: &Content| match c {
///     Content::Bytes(b) if b.len() >= 2 => Ok(vec![b[0] as f32, b[1] as f32]),
///     _ => Err(sextant_core::Error::invalid("content", "not an image")),
/// };
/// let retriever = SharedSpaceRetriever::new(CrossModalEncoder::new().register("text", text).register("image", image));
/// retriever.index(vec![ContextItem::new("note", "gross margin fell")], Some("text")).unwrap();
/// retriever
///     .index_content(ContextItem::new("chart", "revenue by quarter (chart)"), &Content::Bytes(vec![5, 0]), "image")
///     .unwrap();
///
/// let hits = retriever.retrieve(&Query::new("revenue growth"), 2).unwrap();
/// assert_eq!(hits[0].id, "chart");
/// assert_eq!(hits[0].metadata["modality"], "image");
/// assert!((hits[0].score - 1.0).abs() < 1e-6);
/// let text_only = retriever.retrieve(&Query::new("revenue").with_filter("modality", json!("text")), 2).unwrap();
/// assert_eq!(text_only.len(), 1);
/// ```
pub struct SharedSpaceRetriever {
    encoder: CrossModalEncoder,
    query_modality: String,
    indexed: RwLock<Indexed>,
}

impl SharedSpaceRetriever {
    /// An empty retriever encoding queries as `"text"`.
    pub fn new(encoder: CrossModalEncoder) -> Self {
        SharedSpaceRetriever { encoder, query_modality: "text".into(), indexed: RwLock::new(Indexed::default()) }
    }

    /// The modality queries are encoded with. Errors when the encoder has no such modality.
    pub fn with_query_modality(mut self, modality: impl Into<String>) -> Result<Self> {
        let modality = modality.into();
        if !self.encoder.supports(&modality) {
            return Err(Error::invalid(
                "query_modality",
                format!("{modality:?} has no encoder (known: {})", self.encoder.modalities().join(", ")),
            ));
        }
        self.query_modality = modality;
        Ok(self)
    }

    /// The encoder registry.
    pub fn encoder(&self) -> &CrossModalEncoder {
        &self.encoder
    }

    /// Embeds and adds items whose content is their text; returns how many were added.
    ///
    /// Each item is encoded as [`Content::Text`] of its `text` with the encoder of
    /// `modality`, or, when `modality` is `None`, of the item's own `metadata["modality"]`
    /// (a string). All or nothing: on any error (an item without a modality, an unknown
    /// modality, an encoder failure, vectors of different dimensions, within the batch or
    /// against the items already indexed) nothing is added.
    ///
    /// ```
    /// use sextant_kit::{Content, ContextItem, CrossModalEncoder, SharedSpaceRetriever};
    /// use serde_json::json;
    ///
    /// let enc = CrossModalEncoder::new().register("text", |_c: &Content| Ok(vec![1.0, 0.0]));
    /// let r = SharedSpaceRetriever::new(enc);
    /// let tagged = ContextItem::new("a", "alpha").with_metadata("modality", json!("text"));
    /// assert_eq!(r.index(vec![tagged], None).unwrap(), 1);
    /// // An untagged item with no modality argument fails the whole batch.
    /// let batch = vec![ContextItem::new("b", "beta"), ContextItem::new("c", "gamma")];
    /// assert!(r.index(batch.clone(), None).is_err());
    /// assert_eq!(r.len(), 1);
    /// assert_eq!(r.index(batch, Some("text")).unwrap(), 2);
    /// ```
    pub fn index(&self, items: Vec<ContextItem>, modality: Option<&str>) -> Result<usize> {
        let mut prepared = Vec::with_capacity(items.len());
        for item in items {
            let m = match modality {
                Some(m) => m.to_string(),
                None => match item.metadata.get("modality") {
                    Some(Value::String(m)) => m.clone(),
                    _ => {
                        return Err(Error::invalid(
                            "modality",
                            format!(
                                "item {:?} has no string metadata[\"modality\"] and no modality was given",
                                item.id
                            ),
                        ))
                    }
                },
            };
            let vector = self.encoder.encode(&Content::Text(item.text.clone()), &m)?;
            prepared.push((item.with_metadata("modality", Value::from(m)), vector));
        }
        self.add(prepared)
    }

    /// Embeds `content` (an image, a table...) with the encoder of `modality` and adds
    /// `item` as its retrievable form (the text, id and metadata returned on a hit).
    ///
    /// ```
    /// use sextant_kit::{Content, ContextItem, CrossModalEncoder, SharedSpaceRetriever};
    ///
    /// let enc = CrossModalEncoder::new().register("table", |c: &Content| {
    ///     let rows = c.as_json().and_then(|v| v["rows"].as_array()).map_or(0, |r| r.len());
    ///     Ok(vec![rows as f32, 1.0])
    /// });
    /// let r = SharedSpaceRetriever::new(enc);
    /// let table = Content::Json(serde_json::json!({"rows": [[1, 2], [3, 4]]}));
    /// r.index_content(ContextItem::new("t1", "Segment revenue table"), &table, "table").unwrap();
    /// assert_eq!(r.len(), 1);
    /// assert!(r.index_content(ContextItem::new("t2", "?"), &table, "audio").is_err());
    /// ```
    pub fn index_content(&self, item: ContextItem, content: &Content, modality: &str) -> Result<()> {
        let vector = self.encoder.encode(content, modality)?;
        self.add(vec![(item.with_metadata("modality", Value::from(modality)), vector)]).map(|_| ())
    }

    /// Checks every vector's dimension before touching the store, so a failure adds nothing.
    fn add(&self, prepared: Vec<(ContextItem, Vec<f32>)>) -> Result<usize> {
        let mut indexed = self.indexed.write().unwrap_or_else(|e| e.into_inner());
        let dim =
            if indexed.items.is_empty() { prepared.first().map_or(0, |p| p.1.len()) } else { indexed.store.dim() };
        if let Some((item, v)) = prepared.iter().find(|(_, v)| v.len() != dim) {
            return Err(Error::invalid(
                "embedding",
                format!("item {:?} embeds to dimension {} but the shared space has dimension {dim}", item.id, v.len()),
            ));
        }
        if indexed.items.is_empty() {
            indexed.store = FlatVectorStore::new(dim);
        }
        let n = prepared.len();
        for (item, v) in prepared {
            // Cannot fail: the dimension is checked above and encoders' vectors are finite.
            indexed.store.add(&v)?;
            indexed.items.push(item);
        }
        Ok(n)
    }

    /// How many items are indexed.
    pub fn len(&self) -> usize {
        self.indexed.read().unwrap_or_else(|e| e.into_inner()).items.len()
    }

    /// Whether no item is indexed.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl fmt::Debug for SharedSpaceRetriever {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SharedSpaceRetriever")
            .field("encoder", &self.encoder)
            .field("query_modality", &self.query_modality)
            .field("len", &self.len())
            .finish()
    }
}

impl Retriever for SharedSpaceRetriever {
    fn retrieve(&self, query: &Query, top_k: usize) -> Result<Vec<ContextItem>> {
        if top_k == 0 || self.is_empty() {
            return Ok(Vec::new());
        }
        let mut v = match &query.embedding {
            Some(v) => v.clone(),
            None => self.encoder.encode(&Content::Text(query.text.clone()), &self.query_modality)?,
        };
        if v.iter().any(|x| !x.is_finite()) {
            return Err(Error::invalid("query.embedding", "holds a NaN or infinite value"));
        }
        normalize(&mut v);
        let indexed = self.indexed.read().unwrap_or_else(|e| e.into_inner());
        if v.len() != indexed.store.dim() {
            return Err(Error::invalid(
                "query.embedding",
                format!("dimension {} but the shared space has dimension {}", v.len(), indexed.store.dim()),
            ));
        }
        let allowed = admitted(query, &indexed.items);
        Ok(hits_to_items(&indexed.items, indexed.store.search(&v, allowed.as_ref(), top_k), "shared_space"))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use serde_json::json;

    use super::*;

    /// Text: counts of "cat" and "dog". Image: the first two bytes.
    fn encoder() -> CrossModalEncoder {
        CrossModalEncoder::new()
            .register("text", |c: &Content| {
                let t = c.as_text().ok_or_else(|| Error::invalid("content", "not text"))?;
                Ok(vec![t.matches("cat").count() as f32, t.matches("dog").count() as f32])
            })
            .register("image", |c: &Content| match c {
                Content::Bytes(b) if b.len() >= 2 => Ok(vec![b[0] as f32, b[1] as f32]),
                // Image "captions" indexed as text: "image" encoder reading text.
                Content::Text(t) => {
                    Ok(vec![t.matches("cat").count() as f32 * 2.0, t.matches("dog").count() as f32 * 2.0])
                }
                _ => Err(Error::invalid("content", "not an image")),
            })
    }

    fn ids(items: &[ContextItem]) -> Vec<&str> {
        items.iter().map(|i| i.id.as_str()).collect()
    }

    #[test]
    fn encode_dispatches_by_modality_and_refuses_unknown_ones() {
        let enc = encoder();
        assert_eq!(enc.modalities(), ["image", "text"]);
        assert_eq!(enc.encode(&Content::Bytes(vec![3, 4]), "image").unwrap(), vec![3.0, 4.0]);
        let err = enc.encode(&Content::from("cat"), "audio").unwrap_err();
        assert!(matches!(&err, Error::InvalidArgument { field, .. } if field == "modality"));
        assert!(err.to_string().contains("\"audio\"") && err.to_string().contains("known: image, text"), "{err}");
        assert!(enc.encode(&Content::Json(json!(1)), "image").is_err(), "the encoder's own error is passed on");
        assert!(CrossModalEncoder::new().modalities().is_empty());
        let none = CrossModalEncoder::new().encode(&Content::from("x"), "text").unwrap_err();
        assert!(none.to_string().contains("known: )"), "{none}");
    }

    #[test]
    fn encode_refuses_empty_and_non_finite_vectors() {
        let enc = CrossModalEncoder::new()
            .register("empty", |_c: &Content| Ok(Vec::new()))
            .register("nan", |_c: &Content| Ok(vec![f32::NAN, 1.0]));
        assert!(enc.encode(&Content::from("x"), "empty").unwrap_err().to_string().contains("empty vector"));
        assert!(enc.encode(&Content::from("x"), "nan").unwrap_err().to_string().contains("NaN"));
    }

    #[test]
    fn registering_again_replaces_the_encoder() {
        let enc = encoder().register("text", |_c: &Content| Ok(vec![9.0]));
        assert_eq!(enc.encode(&Content::from("cat"), "text").unwrap(), vec![9.0]);
        assert_eq!(enc.modalities().len(), 2);
    }

    #[test]
    fn ranks_across_modalities_by_cosine() {
        let r = SharedSpaceRetriever::new(encoder());
        r.index(vec![ContextItem::new("t-dog", "dog"), ContextItem::new("t-mix", "cat dog")], Some("text")).unwrap();
        r.index_content(ContextItem::new("img-cat", "photo of a cat"), &Content::Bytes(vec![7, 0]), "image").unwrap();
        let hits = r.retrieve(&Query::new("cat"), 3).unwrap();
        assert_eq!(ids(&hits), ["img-cat", "t-mix", "t-dog"]);
        assert!((hits[0].score - 1.0).abs() < 1e-6);
        assert!((hits[1].score - std::f32::consts::FRAC_1_SQRT_2).abs() < 1e-5);
        assert_eq!(hits[2].score, 0.0);
        assert_eq!(hits[0].metadata["retrieval_method"], "shared_space");
        assert_eq!(hits[0].metadata["modality"], "image");
        assert_eq!(hits[1].metadata["modality"], "text");
    }

    #[test]
    fn modality_comes_from_the_argument_else_the_item() {
        let r = SharedSpaceRetriever::new(encoder());
        let tagged = ContextItem::new("a", "cat").with_metadata("modality", json!("image"));
        r.index(vec![tagged.clone()], None).unwrap();
        r.index(vec![tagged.with_metadata("modality", json!("image"))], Some("text")).unwrap();
        let hits = r.retrieve(&Query::new("cat"), 2).unwrap();
        let modalities: Vec<_> = hits.iter().map(|h| h.metadata["modality"].clone()).collect();
        assert_eq!(modalities, [json!("image"), json!("text")], "the argument overrides the item's tag");
    }

    #[test]
    fn indexing_is_all_or_nothing() {
        let r = SharedSpaceRetriever::new(encoder());
        let untagged =
            vec![ContextItem::new("a", "cat").with_metadata("modality", json!("text")), ContextItem::new("b", "dog")];
        let err = r.index(untagged, None).unwrap_err();
        assert!(err.to_string().contains("\"b\""), "{err}");
        let non_string = vec![ContextItem::new("a", "cat").with_metadata("modality", json!(1))];
        assert!(r.index(non_string, None).is_err());
        assert!(r.index(vec![ContextItem::new("a", "cat")], Some("audio")).is_err());
        assert!(r.is_empty(), "no failed batch added anything");
        assert_eq!(r.index(Vec::new(), None).unwrap(), 0);
        assert!(r.is_empty());
    }

    #[test]
    fn dimensions_must_agree_within_and_across_batches() {
        let enc = encoder().register("wide", |_c: &Content| Ok(vec![1.0, 0.0, 0.0]));
        let r = SharedSpaceRetriever::new(enc);
        let mixed = vec![
            ContextItem::new("a", "cat").with_metadata("modality", json!("text")),
            ContextItem::new("w", "x").with_metadata("modality", json!("wide")),
        ];
        let err = r.index(mixed, None).unwrap_err();
        assert!(err.to_string().contains("dimension 3") && err.to_string().contains("dimension 2"), "{err}");
        assert!(r.is_empty());
        r.index(vec![ContextItem::new("a", "cat")], Some("text")).unwrap();
        assert!(r.index(vec![ContextItem::new("w", "x")], Some("wide")).is_err());
        assert!(r.index_content(ContextItem::new("w", "x"), &Content::from("x"), "wide").is_err());
        assert_eq!(r.len(), 1);
    }

    #[test]
    fn filters_apply_before_ranking() {
        let r = SharedSpaceRetriever::new(encoder());
        r.index(vec![ContextItem::new("t", "cat").with_metadata("year", json!(2024))], Some("text")).unwrap();
        r.index(vec![ContextItem::new("i", "cat dog").with_metadata("year", json!(2023))], Some("text")).unwrap();
        let hits = r.retrieve(&Query::new("cat").with_filter("year", json!(2023)), 1).unwrap();
        assert_eq!(ids(&hits), ["i"], "the best admitted item, not the best overall");
        assert!(r.retrieve(&Query::new("cat").with_filter("modality", json!("image")), 5).unwrap().is_empty());
    }

    #[test]
    fn query_modality_and_precomputed_embeddings() {
        let r = SharedSpaceRetriever::new(encoder()).with_query_modality("image").unwrap();
        r.index(vec![ContextItem::new("c", "cat"), ContextItem::new("d", "dog")], Some("text")).unwrap();
        assert_eq!(r.retrieve(&Query::new("dog"), 1).unwrap()[0].id, "d", "queried through the image encoder");
        assert_eq!(
            r.retrieve(&Query::new("dog").with_embedding(vec![1.0, 0.0]), 1).unwrap()[0].id,
            "c",
            "the embedding wins"
        );
        let err = r.retrieve(&Query::new("q").with_embedding(vec![1.0]), 1).unwrap_err();
        assert!(err.to_string().contains("dimension 1"), "{err}");
        assert!(r.retrieve(&Query::new("q").with_embedding(vec![f32::NAN, 1.0]), 1).is_err());
        assert!(SharedSpaceRetriever::new(encoder()).with_query_modality("audio").is_err());
    }

    #[test]
    fn empty_index_zero_top_k_and_ties() {
        let calls = Arc::new(AtomicUsize::new(0));
        let c = calls.clone();
        let enc = CrossModalEncoder::new().register("text", move |_c: &Content| {
            c.fetch_add(1, Ordering::SeqCst);
            Ok(vec![1.0, 1.0])
        });
        let r = SharedSpaceRetriever::new(enc);
        assert!(r.retrieve(&Query::new("q"), 5).unwrap().is_empty());
        assert_eq!(calls.load(Ordering::SeqCst), 0, "an empty index does not embed the query");
        r.index(vec![ContextItem::new("a", "x"), ContextItem::new("b", "y")], Some("text")).unwrap();
        assert!(r.retrieve(&Query::new("q"), 0).unwrap().is_empty());
        assert_eq!(ids(&r.retrieve(&Query::new("q"), 5).unwrap()), ["a", "b"], "ties keep indexing order");
    }

    #[test]
    fn a_failing_query_encoder_is_an_error() {
        let enc = CrossModalEncoder::new()
            .register("image", |_c: &Content| Ok(vec![1.0]))
            .register("text", |_c: &Content| Err(Error::Inference("model down".into())));
        let r = SharedSpaceRetriever::new(enc);
        r.index_content(ContextItem::new("i", "img"), &Content::Bytes(vec![1]), "image").unwrap();
        assert!(r.retrieve(&Query::new("q"), 1).unwrap_err().to_string().contains("model down"));
    }
}
