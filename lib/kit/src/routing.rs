//! Query routing: pick a named retriever per query.
//!
//! A [`Router`] maps a [`Query`] to a route name; a [`RoutedRetriever`] holds named
//! retrievers and sends each query to the one its router names, falling back to a default
//! retriever for routes it does not know. Three routers come with the module: by keywords in
//! the query text ([`KeywordRouter`]), by a closure ([`CallbackRouter`]) and by a metadata
//! field the caller sets ([`MetadataRouter`]).

use std::collections::BTreeMap;
use std::fmt;

use serde_json::Value;
use sextant_core::error::{Error, Result};

use super::item::{ContextItem, Query};
use super::traits::Retriever;

/// The route name routers fall back to unless told otherwise.
///
/// ```
/// use sextant_kit::{MetadataRouter, Query, Router, DEFAULT_ROUTE};
///
/// assert_eq!(MetadataRouter::new().route(&Query::new("q")), DEFAULT_ROUTE);
/// ```
pub const DEFAULT_ROUTE: &str = "default";

/// Chooses a route name for a query. Routing cannot fail: a router that cannot decide
/// returns its default route.
///
/// ```
/// use sextant_kit::{Query, Router};
///
/// /// Long questions to the dense index, short ones to BM25.
/// struct ByLength;
/// impl Router for ByLength {
///     fn route(&self, query: &Query) -> String {
///         if query.text.split_whitespace().count() > 4 { "dense".into() } else { "bm25".into() }
///     }
/// }
/// assert_eq!(ByLength.route(&Query::new("gross margin")), "bm25");
/// ```
pub trait Router: Send + Sync {
    /// The route name for `query`.
    fn route(&self, query: &Query) -> String;
}

impl<R: Router + ?Sized> Router for Box<R> {
    fn route(&self, query: &Query) -> String {
        (**self).route(query)
    }
}

impl<R: Router + ?Sized> Router for std::sync::Arc<R> {
    fn route(&self, query: &Query) -> String {
        (**self).route(query)
    }
}

/// Routes by keywords in the query text: the first route, in the order given, with a
/// keyword in the text wins; no match gives the default route.
///
/// A keyword is a word or a phrase. It matches on word boundaries only: the characters
/// just before and just after the match must not be alphanumeric (or must be the text's
/// ends), so `price` does not match `enterprise` nor `prices`. Matching ignores case unless
/// [`KeywordRouter::case_sensitive`] is set.
///
/// ```
/// use sextant_kit::{KeywordRouter, Query, Router};
///
/// let router = KeywordRouter::new(
///     [("pricing", vec!["price", "cost"]), ("legal", vec!["terms of service"])],
///     "general",
/// )
/// .unwrap();
/// assert_eq!(router.route(&Query::new("What is the PRICE?")), "pricing");
/// assert_eq!(router.route(&Query::new("Read the Terms of Service")), "legal");
/// assert_eq!(router.route(&Query::new("enterprise plans")), "general"); // no word "price"
///
/// let strict = router.case_sensitive(true);
/// assert_eq!(strict.route(&Query::new("What is the PRICE?")), "general");
/// ```
#[derive(Debug, Clone)]
pub struct KeywordRouter {
    /// (route, keywords as given), in priority order.
    routes: Vec<(String, Vec<String>)>,
    default: String,
    case_sensitive: bool,
}

impl KeywordRouter {
    /// A case-insensitive router over `routes`, `(route name, keywords)` in priority order,
    /// falling back to `default`.
    ///
    /// Errors: an empty (or blank) route name, default name or keyword.
    pub fn new<N, K, S>(routes: impl IntoIterator<Item = (N, K)>, default: impl Into<String>) -> Result<Self>
    where
        N: Into<String>,
        K: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let default = default.into();
        if default.trim().is_empty() {
            return Err(Error::invalid("default", "the default route name is empty"));
        }
        let mut checked = Vec::new();
        for (name, keywords) in routes {
            let name = name.into();
            if name.trim().is_empty() {
                return Err(Error::invalid("routes", "a route name is empty"));
            }
            let keywords: Vec<String> = keywords.into_iter().map(Into::into).collect();
            if keywords.iter().any(|k| k.trim().is_empty()) {
                return Err(Error::invalid("routes", format!("route {name:?} has an empty keyword")));
            }
            checked.push((name, keywords));
        }
        Ok(KeywordRouter { routes: checked, default, case_sensitive: false })
    }

    /// Whether keywords must match the text's case exactly (default `false`).
    pub fn case_sensitive(mut self, yes: bool) -> Self {
        self.case_sensitive = yes;
        self
    }

    /// The route name given when no keyword matches.
    pub fn default_route(&self) -> &str {
        &self.default
    }
}

impl Router for KeywordRouter {
    fn route(&self, query: &Query) -> String {
        let text = if self.case_sensitive { query.text.clone() } else { query.text.to_lowercase() };
        for (name, keywords) in &self.routes {
            let hit = keywords.iter().any(|k| {
                if self.case_sensitive {
                    contains_phrase(&text, k)
                } else {
                    contains_phrase(&text, &k.to_lowercase())
                }
            });
            if hit {
                return name.clone();
            }
        }
        self.default.clone()
    }
}

/// Whether `needle` occurs in `text` with no alphanumeric character right before or after.
/// Every occurrence is tried (overlapping ones too), so an occurrence glued to a word does
/// not hide a later free-standing one.
fn contains_phrase(text: &str, needle: &str) -> bool {
    if needle.is_empty() {
        return false;
    }
    let mut from = 0;
    while let Some(pos) = text[from..].find(needle) {
        let start = from + pos;
        let end = start + needle.len();
        let before_ok = text[..start].chars().next_back().is_none_or(|c| !c.is_alphanumeric());
        let after_ok = text[end..].chars().next().is_none_or(|c| !c.is_alphanumeric());
        if before_ok && after_ok {
            return true;
        }
        // Advance by one character, staying on a char boundary.
        from = start + text[start..].chars().next().map_or(1, char::len_utf8);
    }
    false
}

type RouteFn = dyn Fn(&Query) -> Option<String> + Send + Sync;

/// Routes with a closure; `None` from the closure gives the default route
/// ([`DEFAULT_ROUTE`] unless set with [`CallbackRouter::with_default`]).
///
/// ```
/// use sextant_kit::{CallbackRouter, Query, Router};
///
/// let router =
///     CallbackRouter::new(|q: &Query| q.text.ends_with('?').then(|| "qa".to_string())).with_default("search");
/// assert_eq!(router.route(&Query::new("who audits Apple?")), "qa");
/// assert_eq!(router.route(&Query::new("apple auditor")), "search");
/// ```
pub struct CallbackRouter {
    callback: Box<RouteFn>,
    default: String,
}

impl CallbackRouter {
    /// A router asking `callback`, with default route [`DEFAULT_ROUTE`].
    pub fn new(callback: impl Fn(&Query) -> Option<String> + Send + Sync + 'static) -> Self {
        CallbackRouter { callback: Box::new(callback), default: DEFAULT_ROUTE.into() }
    }

    /// The route given when the callback returns `None`.
    pub fn with_default(mut self, default: impl Into<String>) -> Self {
        self.default = default.into();
        self
    }
}

impl fmt::Debug for CallbackRouter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CallbackRouter").field("default", &self.default).finish_non_exhaustive()
    }
}

impl Router for CallbackRouter {
    fn route(&self, query: &Query) -> String {
        (self.callback)(query).unwrap_or_else(|| self.default.clone())
    }
}

/// Routes by a field of the query's metadata (`"route"` unless set): the caller decides.
///
/// A string value is the route; a number or a boolean routes by its JSON text (`2024`,
/// `true`). A missing key, `null`, an empty string, an array or an object gives the default
/// route ([`DEFAULT_ROUTE`] unless set).
///
/// ```
/// use sextant_kit::{MetadataRouter, Query, Router};
/// use serde_json::json;
///
/// let router = MetadataRouter::new().with_key("corpus").with_default("filings");
/// assert_eq!(router.route(&Query::new("q").with_metadata("corpus", json!("news"))), "news");
/// assert_eq!(router.route(&Query::new("q").with_metadata("corpus", json!(2024))), "2024");
/// assert_eq!(router.route(&Query::new("q")), "filings");
/// ```
#[derive(Debug, Clone)]
pub struct MetadataRouter {
    key: String,
    default: String,
}

impl Default for MetadataRouter {
    fn default() -> Self {
        MetadataRouter { key: "route".into(), default: DEFAULT_ROUTE.into() }
    }
}

impl MetadataRouter {
    /// A router reading `metadata["route"]`, with default route [`DEFAULT_ROUTE`].
    pub fn new() -> Self {
        Self::default()
    }

    /// The metadata key to read.
    pub fn with_key(mut self, key: impl Into<String>) -> Self {
        self.key = key.into();
        self
    }

    /// The route given when the key holds no usable value.
    pub fn with_default(mut self, default: impl Into<String>) -> Self {
        self.default = default.into();
        self
    }
}

impl Router for MetadataRouter {
    fn route(&self, query: &Query) -> String {
        match query.metadata.get(&self.key) {
            Some(Value::String(s)) if !s.is_empty() => s.clone(),
            Some(v @ (Value::Number(_) | Value::Bool(_))) => v.to_string(),
            _ => self.default.clone(),
        }
    }
}

/// Sends each query to the retriever its router names.
///
/// A route that names no retriever goes to the default retriever when there is one, else
/// the search fails with [`Error::Component`] (component `"router"`) naming the route and
/// the known retrievers. Every returned item records the router's answer in
/// `metadata["route"]` and the retriever that served it in `metadata["retriever"]` (they
/// differ on a fallback).
///
/// ```
/// use sextant_kit::{ContextItem, MetadataRouter, Query, Retriever, RoutedRetriever};
/// use serde_json::json;
///
/// /// Answers with its own name.
/// struct Named(&'static str);
/// impl Retriever for Named {
///     fn retrieve(&self, _q: &Query, _k: usize) -> sextant_core::Result<Vec<ContextItem>> {
///         Ok(vec![ContextItem::new(self.0, self.0)])
///     }
/// }
///
/// let routed = RoutedRetriever::new(
///     MetadataRouter::new(),
///     vec![("a", Box::new(Named("a")) as Box<dyn Retriever>), ("b", Box::new(Named("b")))],
///     None,
/// )
/// .unwrap();
/// let hit = &routed.retrieve(&Query::new("q").with_metadata("route", json!("b")), 1).unwrap()[0];
/// assert_eq!((hit.id.as_str(), &hit.metadata["route"]), ("b", &json!("b")));
/// // No default retriever: an unknown route is an error naming the known ones.
/// let err = routed.retrieve(&Query::new("q").with_metadata("route", json!("c")), 1).unwrap_err();
/// assert!(err.to_string().contains("known: a, b"), "{err}");
/// ```
///
/// Keyword routing between a filings index and a news index:
///
/// ```
/// use sextant_kit::{Bm25Retriever, ContextItem, KeywordRouter, Query, Retriever, RoutedRetriever};
///
/// let filings = Bm25Retriever::index(vec![ContextItem::new("10-K", "Net sales by segment and region.")]);
/// let news = Bm25Retriever::index(vec![ContextItem::new("wire", "Shares rose on strong sales news.")]);
/// let router = KeywordRouter::new([("filings", vec!["10-K", "annual report"])], "news").unwrap();
/// let routed = RoutedRetriever::new(
///     router,
///     vec![("filings", Box::new(filings) as Box<dyn Retriever>), ("news", Box::new(news))],
///     Some("news"),
/// )
/// .unwrap();
/// let hits = routed.retrieve(&Query::new("sales in the 10-K"), 3).unwrap();
/// assert_eq!(hits[0].id, "10-K");
/// assert_eq!(hits[0].metadata["route"], "filings");
/// ```
pub struct RoutedRetriever {
    router: Box<dyn Router>,
    retrievers: BTreeMap<String, Box<dyn Retriever>>,
    default: Option<String>,
}

impl RoutedRetriever {
    /// Routes with `router` among the named `retrievers`; `default_retriever` serves the
    /// routes that name none.
    ///
    /// Errors: no retrievers, an empty or repeated retriever name, or a default naming no
    /// retriever.
    pub fn new<N: Into<String>>(
        router: impl Router + 'static,
        retrievers: impl IntoIterator<Item = (N, Box<dyn Retriever>)>,
        default_retriever: Option<&str>,
    ) -> Result<Self> {
        let mut named = BTreeMap::new();
        for (name, retriever) in retrievers {
            let name = name.into();
            if name.is_empty() {
                return Err(Error::invalid("retrievers", "a retriever name is empty"));
            }
            if named.contains_key(&name) {
                return Err(Error::invalid("retrievers", format!("the name {name:?} is given twice")));
            }
            named.insert(name, retriever);
        }
        if named.is_empty() {
            return Err(Error::invalid("retrievers", "at least one retriever is needed"));
        }
        if let Some(d) = default_retriever {
            if !named.contains_key(d) {
                return Err(Error::invalid(
                    "default_retriever",
                    format!("{d:?} names no retriever (known: {})", known(&named)),
                ));
            }
        }
        Ok(RoutedRetriever {
            router: Box::new(router),
            retrievers: named,
            default: default_retriever.map(str::to_string),
        })
    }

    /// The retriever names, sorted.
    pub fn names(&self) -> Vec<&str> {
        self.retrievers.keys().map(String::as_str).collect()
    }

    /// The route for `query` and the name of the retriever that would serve it.
    ///
    /// ```
    /// use sextant_kit::{Bm25Retriever, CallbackRouter, Query, Retriever, RoutedRetriever};
    ///
    /// let routed = RoutedRetriever::new(
    ///     CallbackRouter::new(|_q: &Query| Some("elsewhere".into())),
    ///     vec![("bm25", Box::new(Bm25Retriever::index(Vec::new())) as Box<dyn Retriever>)],
    ///     Some("bm25"),
    /// )
    /// .unwrap();
    /// let (route, served_by) = routed.resolve(&Query::new("q")).unwrap();
    /// assert_eq!((route.as_str(), served_by), ("elsewhere", "bm25"));
    /// ```
    pub fn resolve(&self, query: &Query) -> Result<(String, &str)> {
        let route = self.router.route(query);
        if let Some((name, _)) = self.retrievers.get_key_value(&route) {
            return Ok((route, name.as_str()));
        }
        match &self.default {
            Some(d) => {
                tracing::debug!(route = %route, default = %d, "route names no retriever; using the default");
                Ok((route, d.as_str()))
            }
            None => Err(Error::Component {
                component: "router".into(),
                reason: format!(
                    "route {route:?} names no retriever (known: {}) and there is no default",
                    known(&self.retrievers)
                ),
            }),
        }
    }
}

fn known(retrievers: &BTreeMap<String, Box<dyn Retriever>>) -> String {
    retrievers.keys().map(String::as_str).collect::<Vec<_>>().join(", ")
}

impl fmt::Debug for RoutedRetriever {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RoutedRetriever")
            .field("retrievers", &self.names())
            .field("default", &self.default)
            .finish_non_exhaustive()
    }
}

impl Retriever for RoutedRetriever {
    fn retrieve(&self, query: &Query, top_k: usize) -> Result<Vec<ContextItem>> {
        let (route, name) = self.resolve(query)?;
        let retriever = self.retrievers.get(name).ok_or_else(|| Error::Component {
            component: "router".into(),
            reason: format!("retriever {name:?} vanished"),
        })?;
        let items = retriever.retrieve(query, top_k)?;
        Ok(items
            .into_iter()
            .map(|item| {
                item.with_metadata("route", Value::from(route.as_str())).with_metadata("retriever", Value::from(name))
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    use serde_json::json;

    use super::*;

    fn kw(routes: Vec<(&str, Vec<&str>)>) -> KeywordRouter {
        KeywordRouter::new(routes, "default").unwrap()
    }

    fn route(r: &impl Router, text: &str) -> String {
        r.route(&Query::new(text))
    }

    #[test]
    fn keywords_match_on_word_boundaries_only() {
        let r = kw(vec![("pricing", vec!["price"]), ("legal", vec!["terms of service"])]);
        assert_eq!(route(&r, "price?"), "pricing");
        assert_eq!(route(&r, "(price)"), "pricing");
        assert_eq!(route(&r, "enterprise"), "default");
        assert_eq!(route(&r, "prices"), "default", "no stemming: a keyword is matched as written");
        assert_eq!(route(&r, "priceless price"), "pricing", "a later free-standing occurrence counts");
        assert_eq!(route(&r, "see terms of service."), "legal");
        assert_eq!(route(&r, "terms of services"), "default");
        assert_eq!(route(&r, "price ü"), "pricing");
        assert_eq!(route(&r, "üprice"), "default", "non-ASCII letters are word characters too");
    }

    #[test]
    fn overlapping_occurrences_are_all_tried() {
        let r = kw(vec![("x", vec!["ab ab"])]);
        assert_eq!(route(&r, "xab ab ab"), "x", "the occurrence at 4 is free-standing");
    }

    #[test]
    fn first_route_in_insertion_order_wins() {
        let r = kw(vec![("z", vec!["margin"]), ("a", vec!["gross margin", "margin"])]);
        assert_eq!(route(&r, "gross margin"), "z");
        let r = kw(vec![("a", vec!["gross margin"]), ("z", vec!["margin"])]);
        assert_eq!(route(&r, "gross margin"), "a");
    }

    #[test]
    fn case_is_ignored_unless_asked() {
        let r = kw(vec![("ai", vec!["GPU"])]);
        assert_eq!(route(&r, "gpu demand"), "ai");
        let strict = r.case_sensitive(true);
        assert_eq!(route(&strict, "gpu demand"), "default");
        assert_eq!(route(&strict, "GPU demand"), "ai");
    }

    #[test]
    fn empty_text_and_no_routes_give_the_default() {
        assert_eq!(route(&kw(vec![("a", vec!["x"])]), ""), "default");
        assert_eq!(route(&kw(vec![]), "anything"), "default");
        assert_eq!(route(&kw(vec![("a", vec![])]), "anything"), "default", "a route without keywords never matches");
    }

    #[test]
    fn keyword_router_refuses_empty_names_and_keywords() {
        assert!(KeywordRouter::new([("a", vec![""])], "d").is_err());
        assert!(KeywordRouter::new([("a", vec!["  "])], "d").is_err());
        assert!(KeywordRouter::new([("", vec!["x"])], "d").is_err());
        assert!(KeywordRouter::new([("a", vec!["x"])], "").is_err());
        let err = KeywordRouter::new([("pricing", vec!["ok", ""])], "d").unwrap_err();
        assert!(err.to_string().contains("pricing"), "{err}");
    }

    #[test]
    fn callback_router_uses_the_default_on_none() {
        let r = CallbackRouter::new(|q: &Query| (q.text == "x").then(|| "hit".to_string()));
        assert_eq!(route(&r, "x"), "hit");
        assert_eq!(route(&r, "y"), DEFAULT_ROUTE);
        assert_eq!(route(&r.with_default("other"), "y"), "other");
    }

    #[test]
    fn metadata_router_reads_strings_numbers_and_bools() {
        let r = MetadataRouter::new();
        let q = |v: Value| Query::new("q").with_metadata("route", v);
        assert_eq!(r.route(&q(json!("news"))), "news");
        assert_eq!(r.route(&q(json!(7))), "7");
        assert_eq!(r.route(&q(json!(1.5))), "1.5");
        assert_eq!(r.route(&q(json!(false))), "false");
        for other in [json!(null), json!(""), json!(["a"]), json!({"a": 1})] {
            assert_eq!(r.route(&q(other.clone())), "default", "{other}");
        }
        assert_eq!(r.route(&Query::new("q")), "default");
        assert_eq!(MetadataRouter::new().with_key("k").route(&q(json!("news"))), "default", "another key is not read");
    }

    /// Returns one item named after itself and counts its calls.
    struct Named(&'static str, Arc<AtomicUsize>);
    impl Retriever for Named {
        fn retrieve(&self, _q: &Query, top_k: usize) -> Result<Vec<ContextItem>> {
            self.1.fetch_add(1, Ordering::SeqCst);
            Ok(vec![ContextItem::new(self.0, "text").with_metadata("route", json!("overwritten"))]
                .into_iter()
                .take(top_k)
                .collect())
        }
    }

    struct Failing;
    impl Retriever for Failing {
        fn retrieve(&self, _q: &Query, _k: usize) -> Result<Vec<ContextItem>> {
            Err(Error::Component { component: "bm25".into(), reason: "index missing".into() })
        }
    }

    fn routed(default: Option<&str>) -> (RoutedRetriever, Arc<AtomicUsize>, Arc<AtomicUsize>) {
        let (a, b) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let r = RoutedRetriever::new(
            MetadataRouter::new(),
            vec![("a", Box::new(Named("a", a.clone())) as Box<dyn Retriever>), ("b", Box::new(Named("b", b.clone())))],
            default,
        )
        .unwrap();
        (r, a, b)
    }

    fn to(route: &str) -> Query {
        Query::new("q").with_metadata("route", json!(route))
    }

    #[test]
    fn delegates_to_the_named_retriever_only_and_records_the_route() {
        let (r, a, b) = routed(None);
        let hits = r.retrieve(&to("b"), 5).unwrap();
        assert_eq!(hits[0].id, "b");
        assert_eq!(hits[0].metadata["route"], "b", "the router's record replaces the item's own");
        assert_eq!(hits[0].metadata["retriever"], "b");
        assert_eq!((a.load(Ordering::SeqCst), b.load(Ordering::SeqCst)), (0, 1));
        assert!(r.retrieve(&to("a"), 0).unwrap().is_empty(), "top_k is passed through");
    }

    #[test]
    fn unknown_routes_fall_back_to_the_default_or_fail() {
        let (r, _, _) = routed(Some("a"));
        let hits = r.retrieve(&to("zzz"), 5).unwrap();
        assert_eq!(hits[0].id, "a");
        assert_eq!(hits[0].metadata["route"], "zzz");
        assert_eq!(hits[0].metadata["retriever"], "a");
        let (r, _, _) = routed(None);
        let err = r.retrieve(&to("zzz"), 5).unwrap_err();
        assert!(matches!(&err, Error::Component { component, .. } if component == "router"));
        let msg = err.to_string();
        assert!(msg.contains("\"zzz\"") && msg.contains("known: a, b") && msg.contains("no default"), "{msg}");
    }

    #[test]
    fn a_retriever_error_is_passed_on() {
        let r = RoutedRetriever::new(
            MetadataRouter::new(),
            vec![("default", Box::new(Failing) as Box<dyn Retriever>)],
            None,
        )
        .unwrap();
        let err = r.retrieve(&Query::new("q"), 3).unwrap_err();
        assert!(err.to_string().contains("index missing"), "{err}");
    }

    #[test]
    fn constructor_refuses_bad_retriever_sets() {
        let n = || Box::new(Named("x", Arc::new(AtomicUsize::new(0)))) as Box<dyn Retriever>;
        let err = RoutedRetriever::new(MetadataRouter::new(), vec![("a", n())], Some("b")).unwrap_err();
        assert!(err.to_string().contains("\"b\" names no retriever"), "{err}");
        assert!(RoutedRetriever::new(MetadataRouter::new(), Vec::<(&str, Box<dyn Retriever>)>::new(), None).is_err());
        assert!(RoutedRetriever::new(MetadataRouter::new(), vec![("a", n()), ("a", n())], None).is_err());
        assert!(RoutedRetriever::new(MetadataRouter::new(), vec![("", n())], None).is_err());
        let ok = RoutedRetriever::new(MetadataRouter::new(), vec![("b", n()), ("a", n())], Some("a")).unwrap();
        assert_eq!(ok.names(), ["a", "b"]);
    }

    #[test]
    fn routers_work_boxed_and_shared() {
        let boxed: Box<dyn Router> = Box::new(kw(vec![("a", vec!["x"])]));
        assert_eq!(route(&boxed, "x"), "a");
        let shared: Arc<dyn Router> = Arc::new(MetadataRouter::new());
        assert_eq!(route(&shared, "x"), "default");
    }
}
