//! The library's protocols: retrievers, rerankers and token-level encoders, blocking and
//! async.
//!
//! Async traits return a boxed future ([`BoxFuture`]) so that they can be used as trait
//! objects (`Box<dyn AsyncRetriever>`), which an async hybrid needs to fan out to retrievers
//! of different types. Every blocking [`Retriever`] and [`Reranker`] is also an async one: its
//! work then runs inside the future, on the polling thread.

use std::future::Future;
use std::pin::Pin;

use sextant_core::error::Result;

use super::item::{ContextItem, Query};

/// A boxed, sendable future: what async trait methods return.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// What the async retrievers and rerankers return: ranked items, later.
pub type ItemsFuture<'a> = BoxFuture<'a, Result<Vec<ContextItem>>>;

/// Finds the items most relevant to a query.
///
/// Implementations return at most `top_k` items, best first, each admitted by the query's
/// filters ([`Query::admits`]); an empty result is not an error.
///
/// ```
/// use sextant_kit::{ContextItem, Query, Retriever};
///
/// /// Items whose text contains the query, in corpus order.
/// struct Grep(Vec<ContextItem>);
///
/// impl Retriever for Grep {
///     fn retrieve(&self, query: &Query, top_k: usize) -> sextant_core::Result<Vec<ContextItem>> {
///         Ok(self.0.iter().filter(|i| i.text.contains(&query.text) && query.admits(i)).take(top_k).cloned().collect())
///     }
/// }
///
/// let r = Grep(vec![ContextItem::new("1", "gross margin"), ContextItem::new("2", "net margin")]);
/// assert_eq!(r.retrieve(&Query::new("net"), 10).unwrap()[0].id, "2");
/// ```
pub trait Retriever: Send + Sync {
    /// The `top_k` best items for `query`, best first.
    fn retrieve(&self, query: &Query, top_k: usize) -> Result<Vec<ContextItem>>;
}

/// A retriever whose work is asynchronous (a remote embedding service, a remote store).
///
/// ```
/// use sextant_kit::{AsyncRetriever, BoxFuture, ContextItem, Query};
///
/// struct Echo;
/// impl AsyncRetriever for Echo {
///     fn aretrieve<'a>(
///         &'a self,
///         query: &'a Query,
///         _top_k: usize,
///     ) -> BoxFuture<'a, sextant_core::Result<Vec<ContextItem>>> {
///         Box::pin(async move { Ok(vec![ContextItem::new("echo", query.text.clone())]) })
///     }
/// }
///
/// let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
/// let items = rt.block_on(Echo.aretrieve(&Query::new("hello"), 1)).unwrap();
/// assert_eq!(items[0].text, "hello");
/// ```
pub trait AsyncRetriever: Send + Sync {
    /// The `top_k` best items for `query`, best first.
    fn aretrieve<'a>(&'a self, query: &'a Query, top_k: usize) -> ItemsFuture<'a>;
}

impl<R: Retriever + ?Sized> AsyncRetriever for R {
    fn aretrieve<'a>(&'a self, query: &'a Query, top_k: usize) -> ItemsFuture<'a> {
        Box::pin(async move { self.retrieve(query, top_k) })
    }
}

/// Reorders candidate items for a query and keeps the best `top_k`.
///
/// A reranker sets each returned item's `score` to its own score and records itself in
/// `metadata["retrieval_method"]`. Items it cannot score are an error, not silently dropped.
///
/// ```
/// use sextant_kit::{ContextItem, Query, Reranker};
///
/// /// Shorter passages first.
/// struct Shortest;
/// impl Reranker for Shortest {
///     fn rerank(
///         &self,
///         _q: &Query,
///         mut items: Vec<ContextItem>,
///         top_k: usize,
///     ) -> sextant_core::Result<Vec<ContextItem>> {
///         items.sort_by_key(|i| i.text.len());
///         items.truncate(top_k);
///         Ok(items)
///     }
/// }
///
/// let items = vec![ContextItem::new("long", "a long passage"), ContextItem::new("short", "short")];
/// assert_eq!(Shortest.rerank(&Query::new("q"), items, 1).unwrap()[0].id, "short");
/// ```
pub trait Reranker: Send + Sync {
    /// The best `top_k` of `items` for `query`, best first.
    fn rerank(&self, query: &Query, items: Vec<ContextItem>, top_k: usize) -> Result<Vec<ContextItem>>;
}

/// A reranker whose scoring is asynchronous (a hosted reranking service).
///
/// ```
/// use sextant_kit::{AsyncReranker, BoxFuture, ContextItem, Query};
///
/// struct Reverse;
/// impl AsyncReranker for Reverse {
///     fn arerank<'a>(
///         &'a self,
///         _q: &'a Query,
///         mut items: Vec<ContextItem>,
///         top_k: usize,
///     ) -> BoxFuture<'a, sextant_core::Result<Vec<ContextItem>>> {
///         Box::pin(async move { items.reverse(); items.truncate(top_k); Ok(items) })
///     }
/// }
///
/// let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
/// let items = vec![ContextItem::new("a", "a"), ContextItem::new("b", "b")];
/// assert_eq!(rt.block_on(Reverse.arerank(&Query::new("q"), items, 2)).unwrap()[0].id, "b");
/// ```
pub trait AsyncReranker: Send + Sync {
    /// The best `top_k` of `items` for `query`, best first.
    fn arerank<'a>(&'a self, query: &'a Query, items: Vec<ContextItem>, top_k: usize) -> ItemsFuture<'a>;
}

impl<R: Reranker + ?Sized> AsyncReranker for R {
    fn arerank<'a>(&'a self, query: &'a Query, items: Vec<ContextItem>, top_k: usize) -> ItemsFuture<'a> {
        Box::pin(async move { self.rerank(query, items, top_k) })
    }
}

/// Encodes a text into one vector per token, for late-interaction scoring
/// ([`super::LateInteractionRetriever`]).
///
/// ```
/// use sextant_kit::TokenLevelEncoder;
///
/// /// One-hot vowels, one "token" per character.
/// struct Chars;
/// impl TokenLevelEncoder for Chars {
///     fn encode_tokens(&self, text: &str) -> sextant_core::Result<Vec<Vec<f32>>> {
///         Ok(text.chars().map(|c| "aeiou".chars().map(|v| (c == v) as u8 as f32).collect()).collect())
///     }
/// }
/// assert_eq!(Chars.encode_tokens("ai").unwrap().len(), 2);
/// ```
pub trait TokenLevelEncoder: Send + Sync {
    /// One vector per token of `text`, all of the same dimension.
    fn encode_tokens(&self, text: &str) -> Result<Vec<Vec<f32>>>;
}

impl<T: TokenLevelEncoder + ?Sized> TokenLevelEncoder for std::sync::Arc<T> {
    fn encode_tokens(&self, text: &str) -> Result<Vec<Vec<f32>>> {
        (**self).encode_tokens(text)
    }
}

impl<R: Retriever + ?Sized> Retriever for Box<R> {
    fn retrieve(&self, query: &Query, top_k: usize) -> Result<Vec<ContextItem>> {
        (**self).retrieve(query, top_k)
    }
}

impl<R: Retriever + ?Sized> Retriever for std::sync::Arc<R> {
    fn retrieve(&self, query: &Query, top_k: usize) -> Result<Vec<ContextItem>> {
        (**self).retrieve(query, top_k)
    }
}

impl<R: Reranker + ?Sized> Reranker for Box<R> {
    fn rerank(&self, query: &Query, items: Vec<ContextItem>, top_k: usize) -> Result<Vec<ContextItem>> {
        (**self).rerank(query, items, top_k)
    }
}

impl<R: Reranker + ?Sized> Reranker for std::sync::Arc<R> {
    fn rerank(&self, query: &Query, items: Vec<ContextItem>, top_k: usize) -> Result<Vec<ContextItem>> {
        (**self).rerank(query, items, top_k)
    }
}
