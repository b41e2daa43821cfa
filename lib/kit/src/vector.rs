//! Dense retrieval: an embedding function, a [`VectorStore`] and the items it indexes.
//!
//! Similarity is cosine: stores hold unit vectors and are searched with a unit query, so
//! the dot product is the cosine. [`DenseRetriever`] normalises what it embeds.

use std::future::Future;
use std::sync::{Arc, RwLock};

use sextant_core::encode::DenseEncoder;
use sextant_core::error::{Error, Result};
use sextant_core::index::{dot, top_k, Bitset, DenseIndex, VectorStore};

use super::item::{ContextItem, Query};
use super::traits::{AsyncRetriever, BoxFuture, ItemsFuture, Retriever};

/// Turns a text into an embedding. Closures `Fn(&str) -> Result<Vec<f32>>` and the
/// engine's [`DenseEncoder`] implement it.
///
/// ```
/// use sextant_kit::Embed;
///
/// let embed = |t: &str| Ok(vec![t.len() as f32, 1.0]);
/// assert_eq!(embed.embed("abc").unwrap(), vec![3.0, 1.0]);
/// assert_eq!(embed.embed_batch(&["a", "bb"]).unwrap().len(), 2);
/// ```
pub trait Embed: Send + Sync {
    /// The embedding of one text.
    fn embed(&self, text: &str) -> Result<Vec<f32>>;
    /// The embeddings of many texts, in input order (one [`Embed::embed`] each unless
    /// overridden with a batched model call).
    fn embed_batch(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
        texts.iter().map(|t| self.embed(t)).collect()
    }
}

impl<F: Fn(&str) -> Result<Vec<f32>> + Send + Sync> Embed for F {
    fn embed(&self, text: &str) -> Result<Vec<f32>> {
        self(text)
    }
}

impl Embed for DenseEncoder {
    fn embed(&self, text: &str) -> Result<Vec<f32>> {
        DenseEncoder::embed(self, text)
    }
    fn embed_batch(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
        DenseEncoder::embed_batch(self, texts)
    }
}

impl<E: Embed + ?Sized> Embed for Arc<E> {
    fn embed(&self, text: &str) -> Result<Vec<f32>> {
        (**self).embed(text)
    }
    fn embed_batch(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
        (**self).embed_batch(texts)
    }
}

/// Scales `v` to unit length (a zero vector stays zero).
///
/// ```
/// let mut v = vec![3.0, 4.0];
/// sextant_kit::normalize(&mut v);
/// assert_eq!(v, vec![0.6, 0.8]);
/// let mut zero = vec![0.0, 0.0];
/// sextant_kit::normalize(&mut zero);
/// assert_eq!(zero, vec![0.0, 0.0]);
/// ```
pub fn normalize(v: &mut [f32]) {
    let norm = dot(v, v).sqrt();
    if norm > 0.0 && norm.is_finite() {
        v.iter_mut().for_each(|x| *x /= norm);
    }
}

/// An exact vector store: every search scans every (allowed) vector. Vectors are normalised
/// when added. Right for up to some tens of thousands of vectors; beyond, build a
/// [`DenseIndex`].
///
/// ```
/// use sextant_kit::{FlatVectorStore, VectorStore};
///
/// let mut store = FlatVectorStore::new(0); // dimension taken from the first vector
/// assert_eq!(store.add(&[3.0, 4.0]).unwrap(), 0);
/// assert!(store.add(&[1.0, 2.0, 3.0]).is_err()); // another dimension
/// let (ordinal, cosine) = store.search(&[0.6, 0.8], None, 1)[0];
/// assert_eq!(ordinal, 0);
/// assert!((cosine - 1.0).abs() < 1e-6);
/// ```
#[derive(Debug, Clone, Default)]
pub struct FlatVectorStore {
    dim: usize,
    vectors: Vec<f32>,
}

impl FlatVectorStore {
    /// An empty store for vectors of `dim` dimensions (0: taken from the first vector).
    pub fn new(dim: usize) -> Self {
        FlatVectorStore { dim, vectors: Vec::new() }
    }

    /// Adds a vector (normalised) and returns its ordinal. A vector of another dimension
    /// than the store's is refused.
    pub fn add(&mut self, v: &[f32]) -> Result<u32> {
        if self.dim == 0 && self.vectors.is_empty() {
            self.dim = v.len();
        }
        check_dim(v.len(), self.dim)?;
        if v.iter().any(|x| !x.is_finite()) {
            return Err(Error::invalid("embedding", "holds a NaN or infinite value"));
        }
        let start = self.vectors.len();
        self.vectors.extend_from_slice(v);
        normalize(&mut self.vectors[start..]);
        Ok((start / self.dim.max(1)) as u32)
    }

    fn vector(&self, i: usize) -> &[f32] {
        &self.vectors[i * self.dim..(i + 1) * self.dim]
    }
}

impl VectorStore for FlatVectorStore {
    fn dim(&self) -> usize {
        self.dim
    }
    fn len(&self) -> usize {
        self.vectors.len().checked_div(self.dim).unwrap_or(0)
    }
    fn search(&self, query: &[f32], allowed: Option<&Bitset>, k: usize) -> Vec<(u32, f32)> {
        let score = |i: usize| (i as u32, dot(query, self.vector(i)));
        match allowed {
            Some(a) => top_k(a.iter().filter(|&i| i < self.len()).map(score), k),
            None => top_k((0..self.len()).map(score), k),
        }
    }
}

fn check_dim(got: usize, want: usize) -> Result<()> {
    if got != want {
        return Err(Error::invalid("embedding", format!("dimension {got} but the store holds {want}")));
    }
    Ok(())
}

/// The ordinals of `items` that `query`'s filters admit; `None` when there are no filters.
pub(crate) fn admitted(query: &Query, items: &[ContextItem]) -> Option<Bitset> {
    if query.filters.is_empty() {
        return None;
    }
    let mut set = Bitset::empty(items.len());
    for (i, item) in items.iter().enumerate() {
        if query.admits(item) {
            set.insert(i);
        }
    }
    Some(set)
}

/// Turns store hits into items scored by `method`.
pub(crate) fn hits_to_items(items: &[ContextItem], hits: Vec<(u32, f32)>, method: &str) -> Vec<ContextItem> {
    hits.into_iter().map(|(i, s)| items[i as usize].clone().scored_by(method, s)).collect()
}

/// Dense retrieval: embeds the query (or takes [`Query::embedding`]), searches a
/// [`VectorStore`] with the query's filters applied first, and returns the stored items
/// with their cosine similarity as score.
///
/// ```
/// use sextant_kit::{ContextItem, DenseRetriever, Query, Retriever};
///
/// // A toy embedding: counts of "cat" and "dog".
/// let embed = |t: &str| Ok(vec![t.matches("cat").count() as f32, t.matches("dog").count() as f32]);
/// let items = vec![ContextItem::new("c", "a cat on a mat"), ContextItem::new("d", "a dog in a fog")];
/// let dense = DenseRetriever::index(items, embed).unwrap();
/// let hits = dense.retrieve(&Query::new("dog"), 1).unwrap();
/// assert_eq!(hits[0].id, "d");
/// assert!((hits[0].score - 1.0).abs() < 1e-6);
/// ```
pub struct DenseRetriever<S: VectorStore = DenseIndex> {
    store: S,
    items: Vec<ContextItem>,
    embed: Option<Arc<dyn Embed>>,
}

impl DenseRetriever<DenseIndex> {
    /// Embeds `items` (in batches, through [`Embed::embed_batch`]) and indexes them in an
    /// HNSW [`DenseIndex`] (exact search for small collections).
    pub fn index(items: Vec<ContextItem>, embed: impl Embed + 'static) -> Result<Self> {
        let texts: Vec<&str> = items.iter().map(|i| i.text.as_str()).collect();
        let vectors = embed.embed_batch(&texts)?;
        if vectors.len() != items.len() {
            return Err(Error::invalid("embed", format!("{} embeddings for {} items", vectors.len(), items.len())));
        }
        let dim = vectors.first().map_or(0, Vec::len);
        let mut flat = Vec::with_capacity(dim * vectors.len());
        for mut v in vectors {
            check_dim(v.len(), dim)?;
            normalize(&mut v);
            flat.extend(v);
        }
        DenseRetriever::new(DenseIndex::build(dim, flat), items, Some(Arc::new(embed)))
    }
}

impl<S: VectorStore> DenseRetriever<S> {
    /// A retriever over a filled store whose ordinal `i` holds the vector of `items[i]`.
    /// Without `embed`, every query must carry its embedding.
    pub fn new(store: S, items: Vec<ContextItem>, embed: Option<Arc<dyn Embed>>) -> Result<Self> {
        if store.len() != items.len() {
            return Err(Error::invalid("items", format!("{} items for {} stored vectors", items.len(), store.len())));
        }
        Ok(DenseRetriever { store, items, embed })
    }

    /// The vector store.
    pub fn store(&self) -> &S {
        &self.store
    }

    /// The indexed items.
    pub fn items(&self) -> &[ContextItem] {
        &self.items
    }

    fn query_vector(&self, query: &Query) -> Result<Vec<f32>> {
        let mut v = match (&query.embedding, &self.embed) {
            (Some(v), _) => v.clone(),
            (None, Some(e)) => e.embed(&query.text)?,
            (None, None) => {
                return Err(Error::invalid("query.embedding", "missing, and the retriever has no embed function"))
            }
        };
        check_dim(v.len(), self.store.dim())?;
        normalize(&mut v);
        Ok(v)
    }
}

impl<S: VectorStore> Retriever for DenseRetriever<S> {
    fn retrieve(&self, query: &Query, top_k: usize) -> Result<Vec<ContextItem>> {
        if self.items.is_empty() || top_k == 0 {
            return Ok(Vec::new());
        }
        let v = self.query_vector(query)?;
        let allowed = admitted(query, &self.items);
        Ok(hits_to_items(&self.items, self.store.search(&v, allowed.as_ref(), top_k), "dense"))
    }
}

type AsyncEmbedFn = dyn Fn(String) -> BoxFuture<'static, Result<Vec<f32>>> + Send + Sync;

/// Dense retrieval with an asynchronous embedding function (a hosted embedding API), over
/// an exact in-memory store that can grow while it serves.
///
/// ```
/// use sextant_kit::{AsyncDenseRetriever, AsyncRetriever, ContextItem, Query};
///
/// let dense = AsyncDenseRetriever::new(|t: String| async move {
///     Ok(vec![t.matches("cat").count() as f32, t.matches("dog").count() as f32])
/// });
/// let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
/// rt.block_on(async {
///     dense.aindex(vec![ContextItem::new("c", "cat"), ContextItem::new("d", "dog")]).await.unwrap();
///     let hits = dense.aretrieve(&Query::new("dog"), 1).await.unwrap();
///     assert_eq!(hits[0].id, "d");
/// });
/// ```
pub struct AsyncDenseRetriever {
    embed: Arc<AsyncEmbedFn>,
    state: RwLock<(FlatVectorStore, Vec<ContextItem>)>,
}

impl AsyncDenseRetriever {
    /// A retriever embedding with `embed`.
    pub fn new<F, Fut>(embed: F) -> Self
    where
        F: Fn(String) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Vec<f32>>> + Send + 'static,
    {
        AsyncDenseRetriever {
            embed: Arc::new(move |t| Box::pin(embed(t))),
            state: RwLock::new((FlatVectorStore::new(0), Vec::new())),
        }
    }

    /// Adds items that already carry their embedding in `metadata["embedding"]` (an array of
    /// numbers); returns how many were added. Nothing is added if one lacks it.
    pub fn index(&self, items: Vec<ContextItem>) -> Result<usize> {
        let vectors = items
            .iter()
            .map(|it| {
                let v = it.metadata.get("embedding").and_then(|v| v.as_array());
                let v = v.ok_or_else(|| {
                    Error::invalid("metadata.embedding", format!("item {:?} has no embedding array", it.id))
                })?;
                v.iter().map(|x| x.as_f64().map(|x| x as f32)).collect::<Option<Vec<f32>>>().ok_or_else(|| {
                    Error::invalid("metadata.embedding", format!("item {:?} has a non-number in its embedding", it.id))
                })
            })
            .collect::<Result<Vec<_>>>()?;
        self.add(items, vectors)
    }

    /// Embeds items concurrently with the embedding function and adds them; returns how
    /// many were added. Nothing is added if one embedding fails.
    pub async fn aindex(&self, items: Vec<ContextItem>) -> Result<usize> {
        let futures: Vec<_> = items.iter().map(|it| (self.embed)(it.text.clone())).collect();
        let vectors = futures_util::future::join_all(futures).await.into_iter().collect::<Result<Vec<_>>>()?;
        self.add(items, vectors)
    }

    fn add(&self, items: Vec<ContextItem>, vectors: Vec<Vec<f32>>) -> Result<usize> {
        let mut state = self.state.write().unwrap_or_else(|e| e.into_inner());
        // Checked on a copy so that a bad vector leaves the store as it was.
        let mut store = state.0.clone();
        for v in &vectors {
            store.add(v)?;
        }
        let n = items.len();
        state.0 = store;
        state.1.extend(items);
        Ok(n)
    }

    /// How many items are indexed.
    pub fn len(&self) -> usize {
        self.state.read().unwrap_or_else(|e| e.into_inner()).1.len()
    }

    /// Whether no item is indexed.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl AsyncRetriever for AsyncDenseRetriever {
    fn aretrieve<'a>(&'a self, query: &'a Query, top_k: usize) -> ItemsFuture<'a> {
        Box::pin(async move {
            if self.is_empty() || top_k == 0 {
                return Ok(Vec::new());
            }
            let mut v = match &query.embedding {
                Some(v) => v.clone(),
                None => (self.embed)(query.text.clone()).await?,
            };
            normalize(&mut v);
            let state = self.state.read().unwrap_or_else(|e| e.into_inner());
            check_dim(v.len(), state.0.dim())?;
            let allowed = admitted(query, &state.1);
            Ok(hits_to_items(&state.1, state.0.search(&v, allowed.as_ref(), top_k), "dense"))
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use sextant_core::testutil::block_on;

    use super::*;

    fn toy(t: &str) -> Result<Vec<f32>> {
        Ok(["cat", "dog", "fish"].iter().map(|w| t.matches(w).count() as f32).collect())
    }

    fn items() -> Vec<ContextItem> {
        vec![
            ContextItem::new("c", "cat cat").with_metadata("kind", json!("feline")),
            ContextItem::new("d", "dog").with_metadata("kind", json!("canine")),
            ContextItem::new("cd", "cat dog").with_metadata("kind", json!("mixed")),
        ]
    }

    #[test]
    fn finds_the_nearest_items_with_cosine_scores() {
        let r = DenseRetriever::index(items(), toy).unwrap();
        let hits = r.retrieve(&Query::new("cat"), 3).unwrap();
        assert_eq!(hits.iter().map(|h| h.id.as_str()).collect::<Vec<_>>(), ["c", "cd", "d"]);
        assert!((hits[1].score - std::f32::consts::FRAC_1_SQRT_2).abs() < 1e-5);
        assert_eq!(hits[0].metadata["retrieval_method"], "dense");
    }

    #[test]
    fn filters_apply_before_ranking() {
        let r = DenseRetriever::index(items(), toy).unwrap();
        let q = Query::new("cat").with_filter("kind", json!(["canine", "mixed"]));
        let hits = r.retrieve(&q, 1).unwrap();
        assert_eq!(hits[0].id, "cd", "the best admitted item, not the best overall");
    }

    #[test]
    fn a_precomputed_embedding_wins_and_none_without_embed_fn_is_an_error() {
        let r = DenseRetriever::index(items(), toy).unwrap();
        let hits = r.retrieve(&Query::new("cat").with_embedding(vec![0.0, 1.0, 0.0]), 1).unwrap();
        assert_eq!(hits[0].id, "d");
        let store = r.store;
        let bare = DenseRetriever::new(store, items(), None).unwrap();
        let err = bare.retrieve(&Query::new("cat"), 1).unwrap_err();
        assert!(err.to_string().contains("query.embedding"), "{err}");
    }

    #[test]
    fn wrong_dimensions_and_mismatched_counts_are_errors() {
        let r = DenseRetriever::index(items(), toy).unwrap();
        let err = r.retrieve(&Query::new("x").with_embedding(vec![1.0]), 1).unwrap_err();
        assert!(err.to_string().contains("dimension 1"), "{err}");
        assert!(DenseRetriever::new(FlatVectorStore::new(3), items(), None).is_err());
        let ragged = |t: &str| Ok(vec![1.0; t.len()]);
        assert!(DenseRetriever::index(items(), ragged).is_err());
    }

    #[test]
    fn empty_collections_and_zero_top_k_give_nothing() {
        let r = DenseRetriever::index(Vec::new(), toy).unwrap();
        assert!(r.retrieve(&Query::new("cat"), 5).unwrap().is_empty());
        let r = DenseRetriever::index(items(), toy).unwrap();
        assert!(r.retrieve(&Query::new("cat"), 0).unwrap().is_empty());
    }

    #[test]
    fn ties_keep_ordinal_order() {
        let same = vec![ContextItem::new("a", "cat"), ContextItem::new("b", "cat")];
        let r = DenseRetriever::index(same, toy).unwrap();
        let hits = r.retrieve(&Query::new("cat"), 2).unwrap();
        assert_eq!(hits.iter().map(|h| h.id.as_str()).collect::<Vec<_>>(), ["a", "b"]);
    }

    #[test]
    fn flat_store_refuses_bad_vectors() {
        let mut s = FlatVectorStore::new(0);
        assert_eq!(s.add(&[3.0, 4.0]).unwrap(), 0);
        assert_eq!(s.dim(), 2);
        assert!(s.add(&[1.0]).is_err());
        assert!(s.add(&[f32::NAN, 1.0]).is_err());
        assert_eq!(s.len(), 1);
        assert!((s.search(&[0.6, 0.8], None, 1)[0].1 - 1.0).abs() < 1e-6, "stored normalised");
    }

    #[test]
    fn async_dense_indexes_concurrently_and_is_unchanged_by_a_failed_batch() {
        let r = AsyncDenseRetriever::new(|t: String| async move { toy(&t) });
        block_on(async {
            assert_eq!(r.aindex(items()).await.unwrap(), 3);
            let hits = r.aretrieve(&Query::new("dog"), 1).await.unwrap();
            assert_eq!(hits[0].id, "d");
        });
        let bad = vec![
            ContextItem::new("e", "x").with_metadata("embedding", json!([1.0, 0.0, 0.0])),
            ContextItem::new("f", "no vector"),
        ];
        assert!(r.index(bad).is_err());
        assert_eq!(r.len(), 3);
        let good = vec![ContextItem::new("e", "x").with_metadata("embedding", json!([0.0, 0.0, 1.0]))];
        assert_eq!(r.index(good).unwrap(), 1);
        let hits = block_on(r.aretrieve(&Query::new("fish"), 1)).unwrap();
        assert_eq!(hits[0].id, "e");
        let failing =
            AsyncDenseRetriever::new(|_t: String| async { Err(Error::Inference("embedding service down".into())) });
        assert!(block_on(failing.aindex(items())).is_err());
        assert!(failing.is_empty());
    }
}
