//! Rerankers: rescore candidate items for a query and keep the best.
//!
//! Score-based rerankers share one ordering rule ([`rank_by_scores`]): best score first,
//! equal scores in input order, so a reranker that cannot tell two items apart keeps the
//! order the previous stage gave them.

use std::collections::HashSet;
use std::future::Future;
use std::sync::Arc;

use sextant_core::error::{Error, Result};
use sextant_core::pipeline::CrossEncoderReranker;

use super::item::{sort_by_score, ContextItem, Query};
use super::traits::{AsyncReranker, BoxFuture, ItemsFuture, Reranker};

/// Gives each item its score, sorts best first (stable: ties keep input order), records
/// `method` in `metadata["retrieval_method"]` and keeps `top_k`. One score per item is
/// required.
///
/// ```
/// use sextant_kit::{rank_by_scores, ContextItem};
///
/// let items = vec![ContextItem::new("a", ""), ContextItem::new("b", ""), ContextItem::new("c", "")];
/// let ranked = rank_by_scores(items, &[0.2, 0.9, 0.2], 2, "mine").unwrap();
/// assert_eq!(ranked.iter().map(|i| i.id.as_str()).collect::<Vec<_>>(), ["b", "a"]);
/// assert_eq!(ranked[0].metadata["retrieval_method"], "mine");
/// ```
pub fn rank_by_scores(items: Vec<ContextItem>, scores: &[f32], top_k: usize, method: &str) -> Result<Vec<ContextItem>> {
    if scores.len() != items.len() {
        return Err(Error::Component {
            component: method.into(),
            reason: format!("{} scores for {} items", scores.len(), items.len()),
        });
    }
    if let Some(bad) = scores.iter().find(|s| s.is_nan()) {
        return Err(Error::Component { component: method.into(), reason: format!("score {bad} is not a number") });
    }
    let mut out: Vec<ContextItem> = items.into_iter().zip(scores).map(|(i, &s)| i.scored_by(method, s)).collect();
    sort_by_score(&mut out);
    out.truncate(top_k);
    Ok(out)
}

/// The smaller of the call's `top_k` and the reranker's own cap.
fn cap(top_k: usize, own: Option<usize>) -> usize {
    own.map_or(top_k, |o| o.min(top_k))
}

/// Reranks with a function scoring one `(query, passage)` pair at a time.
///
/// ```
/// use sextant_kit::{ContextItem, Query, Reranker, ScoreReranker};
///
/// // Word overlap with the query.
/// let overlap = ScoreReranker::new(|q: &str, p: &str| p.split(' ').filter(|w| q.contains(w)).count() as f32);
/// let items = vec![ContextItem::new("a", "gross margin fell"), ContextItem::new("b", "net margin rose")];
/// let out = overlap.rerank(&Query::new("why net margin rose"), items, 10).unwrap();
/// assert_eq!(out[0].id, "b");
/// assert_eq!(out[0].score, 3.0);
/// ```
pub struct ScoreReranker<F> {
    score_fn: F,
    top_k: Option<usize>,
}

impl<F: Fn(&str, &str) -> f32 + Send + Sync> ScoreReranker<F> {
    /// A reranker scoring with `score_fn(query, passage)`; higher is better.
    pub fn new(score_fn: F) -> Self {
        ScoreReranker { score_fn, top_k: None }
    }

    /// Caps every result at `top_k` items.
    pub fn with_top_k(mut self, top_k: usize) -> Self {
        self.top_k = Some(top_k);
        self
    }

    /// Rescores and sorts `items` (keeping the cap, if set); without a query, returns them
    /// unchanged.
    pub fn process(&self, items: Vec<ContextItem>, query: Option<&Query>) -> Result<Vec<ContextItem>> {
        match query {
            Some(q) => self.rerank(q, items, usize::MAX),
            None => Ok(items),
        }
    }
}

impl<F: Fn(&str, &str) -> f32 + Send + Sync> Reranker for ScoreReranker<F> {
    fn rerank(&self, query: &Query, items: Vec<ContextItem>, top_k: usize) -> Result<Vec<ContextItem>> {
        let scores: Vec<f32> = items.iter().map(|i| (self.score_fn)(&query.text, &i.text)).collect();
        rank_by_scores(items, &scores, cap(top_k, self.top_k), "score")
    }
}

/// A cross-encoder model (`ms-marco-MiniLM-L-6-v2`) as a reranker: the engine's rerank
/// stage and library users run the same type.
///
/// Scores are the logistic of the model's relevance logit, in (0, 1), in the order of the
/// logits: comparable to a fixed threshold. Passages are scored in batches.
///
/// ```
/// use sextant_core::encode::{default_model_dir, CrossEncoder};
/// use sextant_kit::{ContextItem, CrossEncoderReranker, Query, Reranker};
///
/// // The test models hold an untrained stand-in head (see docs/models.md); pass a
/// // converted ms-marco cross-encoder's directory for real relevance.
/// let model = CrossEncoder::load(&default_model_dir().join("ce-standin"))?;
/// let rr = CrossEncoderReranker::new(model, "ce-standin");
/// let items = vec![
///     ContextItem::new("weather", "It rained in Cupertino all week."),
///     ContextItem::new("buyback", "Apple repurchased $90 billion of its common stock."),
/// ];
/// let out = rr.rerank(&Query::new("How much stock did Apple buy back?"), items, 2)?;
/// assert_eq!(out.len(), 2);
/// assert!(out[0].score >= out[1].score);
/// assert!(out.iter().all(|i| i.score > 0.0 && i.score < 1.0 && i.metadata["retrieval_method"] == "cross_encoder"));
/// # Ok::<(), sextant_core::Error>(())
/// ```
impl Reranker for CrossEncoderReranker {
    fn rerank(&self, query: &Query, items: Vec<ContextItem>, top_k: usize) -> Result<Vec<ContextItem>> {
        let passages: Vec<&str> = items.iter().map(|i| i.text.as_str()).collect();
        let scores = self.score(&query.text, &passages)?;
        rank_by_scores(items, &scores, top_k, "cross_encoder")
    }
}

/// Checks a batch reranker's answer: indices in range, none twice, scores numbers.
fn check_picks(picks: &[(usize, f32)], n: usize) -> Result<()> {
    let mut seen = HashSet::new();
    for &(i, s) in picks {
        if i >= n || !seen.insert(i) || s.is_nan() {
            let why = if i >= n {
                format!("index {i} out of range for {n} documents")
            } else if s.is_nan() {
                "a NaN score".into()
            } else {
                format!("index {i} twice")
            };
            return Err(Error::Component { component: "callback reranker".into(), reason: format!("returned {why}") });
        }
    }
    Ok(())
}

/// Applies a batch reranker's `(index, score)` picks, in the order given.
fn apply_picks(items: Vec<ContextItem>, picks: Vec<(usize, f32)>, top_k: usize) -> Result<Vec<ContextItem>> {
    check_picks(&picks, items.len())?;
    let mut slots: Vec<Option<ContextItem>> = items.into_iter().map(Some).collect();
    Ok(picks
        .into_iter()
        .take(top_k)
        .filter_map(|(i, s)| slots[i].take().map(|it| it.scored_by("callback", s)))
        .collect())
}

type RerankFn = dyn Fn(&str, &[&str], usize) -> Result<Vec<(usize, f32)>> + Send + Sync;

/// Reranks a batch through a callback, for hosted services (Cohere Rerank and the like)
/// that take `(query, documents, top_n)` and answer `(index, relevance)` pairs, best first.
///
/// The answer is checked: an index out of range, an index twice or a NaN score is an
/// error, not a silently wrong result. Documents the service leaves out are dropped.
///
/// ```
/// use sextant_kit::{CallbackReranker, ContextItem, Query, Reranker};
///
/// // A stand-in for an HTTP call: longest document first.
/// let service = CallbackReranker::new(|_q: &str, docs: &[&str], top_n: usize| {
///     let mut order: Vec<(usize, f32)> = docs.iter().enumerate().map(|(i, d)| (i, d.len() as f32)).collect();
///     order.sort_by(|a, b| b.1.total_cmp(&a.1));
///     order.truncate(top_n);
///     Ok(order)
/// });
/// let items = vec![ContextItem::new("short", "ab"), ContextItem::new("long", "abcd")];
/// let out = service.rerank(&Query::new("q"), items, 1).unwrap();
/// assert_eq!((out.len(), out[0].id.as_str(), out[0].score), (1, "long", 4.0));
/// ```
pub struct CallbackReranker {
    rerank_fn: Arc<RerankFn>,
    top_k: Option<usize>,
}

impl CallbackReranker {
    /// A reranker calling `rerank_fn(query, documents, top_n)`.
    pub fn new<F>(rerank_fn: F) -> Self
    where
        F: Fn(&str, &[&str], usize) -> Result<Vec<(usize, f32)>> + Send + Sync + 'static,
    {
        CallbackReranker { rerank_fn: Arc::new(rerank_fn), top_k: None }
    }

    /// Caps every result at `top_k` items.
    pub fn with_top_k(mut self, top_k: usize) -> Self {
        self.top_k = Some(top_k);
        self
    }
}

impl Reranker for CallbackReranker {
    fn rerank(&self, query: &Query, items: Vec<ContextItem>, top_k: usize) -> Result<Vec<ContextItem>> {
        let top_k = cap(top_k, self.top_k);
        if items.is_empty() || top_k == 0 {
            return Ok(Vec::new());
        }
        let docs: Vec<&str> = items.iter().map(|i| i.text.as_str()).collect();
        let picks = (self.rerank_fn)(&query.text, &docs, top_k.min(items.len()))?;
        apply_picks(items, picks, top_k)
    }
}

/// Merges result sets round-robin, and re-sorts a single set by its existing scores.
///
/// ```
/// use sextant_kit::{ContextItem, RoundRobinReranker};
///
/// let a = vec![ContextItem::new("a1", ""), ContextItem::new("shared", "")];
/// let b = vec![ContextItem::new("shared", ""), ContextItem::new("b2", "")];
/// let merged = RoundRobinReranker::new().merge(vec![a, b], None);
/// let ids: Vec<&str> = merged.iter().map(|i| i.id.as_str()).collect();
/// assert_eq!(ids, ["a1", "shared", "b2"]);
/// ```
#[derive(Debug, Clone, Default)]
pub struct RoundRobinReranker {
    top_k: Option<usize>,
}

impl RoundRobinReranker {
    /// A round-robin reranker without its own cap.
    pub fn new() -> Self {
        RoundRobinReranker { top_k: None }
    }

    /// Caps every result at `top_k` items.
    pub fn with_top_k(mut self, top_k: usize) -> Self {
        self.top_k = Some(top_k);
        self
    }

    /// Takes the first item of each set, then the second of each, and so on, skipping ids
    /// already taken; stops at `top_k` (or the reranker's cap; all when neither is set).
    pub fn merge(&self, sets: Vec<Vec<ContextItem>>, top_k: Option<usize>) -> Vec<ContextItem> {
        let limit = cap(top_k.unwrap_or(usize::MAX), self.top_k);
        let mut seen = HashSet::new();
        let mut out = Vec::new();
        let mut iters: Vec<_> = sets.into_iter().map(|s| s.into_iter()).collect();
        while out.len() < limit {
            let mut any = false;
            for it in iters.iter_mut() {
                if out.len() == limit {
                    break;
                }
                if let Some(item) = it.next() {
                    any = true;
                    if seen.insert(item.id.clone()) {
                        out.push(item);
                    }
                }
            }
            if !any {
                break;
            }
        }
        out
    }
}

impl Reranker for RoundRobinReranker {
    /// Re-sorts by the items' existing scores (stable on ties) and keeps `top_k`.
    fn rerank(&self, _query: &Query, mut items: Vec<ContextItem>, top_k: usize) -> Result<Vec<ContextItem>> {
        sort_by_score(&mut items);
        items.truncate(cap(top_k, self.top_k));
        Ok(items)
    }
}

/// Chains rerankers: each stage sees every item the previous one kept, and the final
/// `top_k` is applied once, at the end. A failing stage fails the pipeline.
///
/// ```
/// use sextant_kit::{ContextItem, Query, Reranker, RerankerPipeline, ScoreReranker};
///
/// let by_length = ScoreReranker::new(|_q: &str, p: &str| p.len() as f32);
/// let cheap_first = ScoreReranker::new(|_q: &str, p: &str| if p.contains("cheap") { 1.0 } else { 0.0 });
/// let pipeline = RerankerPipeline::new(vec![Box::new(by_length), Box::new(cheap_first)]).with_top_k(2);
/// let items =
///     vec![ContextItem::new("a", "cheap"), ContextItem::new("b", "expensive"), ContextItem::new("c", "cheap too")];
/// let ids: Vec<String> = pipeline.rerank(&Query::new("q"), items, 10).unwrap().into_iter().map(|i| i.id).collect();
/// assert_eq!(ids, ["c", "a"]); // cheap ones, longer first (the first stage breaks the tie)
/// ```
pub struct RerankerPipeline {
    stages: Vec<Box<dyn Reranker>>,
    top_k: Option<usize>,
}

impl RerankerPipeline {
    /// A pipeline of `stages`, in order (none: items pass through, cut to `top_k`).
    pub fn new(stages: Vec<Box<dyn Reranker>>) -> Self {
        RerankerPipeline { stages, top_k: None }
    }

    /// Caps the final result at `top_k` items.
    pub fn with_top_k(mut self, top_k: usize) -> Self {
        self.top_k = Some(top_k);
        self
    }
}

impl Reranker for RerankerPipeline {
    fn rerank(&self, query: &Query, mut items: Vec<ContextItem>, top_k: usize) -> Result<Vec<ContextItem>> {
        for stage in &self.stages {
            let n = items.len();
            items = stage.rerank(query, items, n)?;
        }
        items.truncate(cap(top_k, self.top_k));
        Ok(items)
    }
}

type AsyncScoreFn = dyn Fn(String, String) -> BoxFuture<'static, Result<f32>> + Send + Sync;

/// Reranks with an asynchronous pair-scoring function (a hosted cross-encoder), scoring
/// every item concurrently. One failed score fails the rerank.
///
/// ```
/// use sextant_kit::{AsyncReranker, AsyncScoreReranker, ContextItem, Query};
///
/// let rr = AsyncScoreReranker::new(|q: String, p: String| async move { Ok(p.matches(q.as_str()).count() as f32) });
/// let items = vec![ContextItem::new("a", "tax"), ContextItem::new("b", "tax tax")];
/// let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
/// let out = rt.block_on(rr.arerank(&Query::new("tax"), items, 1)).unwrap();
/// assert_eq!(out[0].id, "b");
/// ```
pub struct AsyncScoreReranker {
    score_fn: Arc<AsyncScoreFn>,
}

impl AsyncScoreReranker {
    /// A reranker awaiting `score_fn(query, passage)` for every item at once.
    pub fn new<F, Fut>(score_fn: F) -> Self
    where
        F: Fn(String, String) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<f32>> + Send + 'static,
    {
        AsyncScoreReranker { score_fn: Arc::new(move |q, p| Box::pin(score_fn(q, p))) }
    }
}

impl AsyncReranker for AsyncScoreReranker {
    fn arerank<'a>(&'a self, query: &'a Query, items: Vec<ContextItem>, top_k: usize) -> ItemsFuture<'a> {
        Box::pin(async move {
            let calls = items.iter().map(|i| (self.score_fn)(query.text.clone(), i.text.clone()));
            let scores = futures_util::future::join_all(calls).await.into_iter().collect::<Result<Vec<f32>>>()?;
            rank_by_scores(items, &scores, top_k, "score")
        })
    }
}

type AsyncRerankFn = dyn Fn(String, Vec<String>, usize) -> BoxFuture<'static, Result<Vec<(usize, f32)>>> + Send + Sync;

/// The async [`CallbackReranker`]: one awaited call per batch, checked the same way.
///
/// ```
/// use sextant_kit::{AsyncCallbackReranker, AsyncReranker, ContextItem, Query};
///
/// let service = AsyncCallbackReranker::new(|_q: String, docs: Vec<String>, _n: usize| async move {
///     Ok((0..docs.len()).rev().map(|i| (i, i as f32)).collect()) // last document first
/// });
/// let items = vec![ContextItem::new("a", "x"), ContextItem::new("b", "y")];
/// let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
/// assert_eq!(rt.block_on(service.arerank(&Query::new("q"), items, 2)).unwrap()[0].id, "b");
/// ```
pub struct AsyncCallbackReranker {
    rerank_fn: Arc<AsyncRerankFn>,
}

impl AsyncCallbackReranker {
    /// A reranker awaiting `rerank_fn(query, documents, top_n)`.
    pub fn new<F, Fut>(rerank_fn: F) -> Self
    where
        F: Fn(String, Vec<String>, usize) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Vec<(usize, f32)>>> + Send + 'static,
    {
        AsyncCallbackReranker { rerank_fn: Arc::new(move |q, d, n| Box::pin(rerank_fn(q, d, n))) }
    }
}

impl AsyncReranker for AsyncCallbackReranker {
    fn arerank<'a>(&'a self, query: &'a Query, items: Vec<ContextItem>, top_k: usize) -> ItemsFuture<'a> {
        Box::pin(async move {
            if items.is_empty() || top_k == 0 {
                return Ok(Vec::new());
            }
            let docs = items.iter().map(|i| i.text.clone()).collect();
            let picks = (self.rerank_fn)(query.text.clone(), docs, top_k.min(items.len())).await?;
            apply_picks(items, picks, top_k)
        })
    }
}

#[cfg(test)]
mod tests {
    use sextant_core::testutil::block_on;

    use super::*;

    fn items(ids: &[&str]) -> Vec<ContextItem> {
        ids.iter().map(|id| ContextItem::new(*id, format!("passage {id}"))).collect()
    }

    fn ids(items: &[ContextItem]) -> Vec<&str> {
        items.iter().map(|i| i.id.as_str()).collect()
    }

    #[test]
    fn rank_by_scores_refuses_wrong_counts_and_nan() {
        assert!(rank_by_scores(items(&["a", "b"]), &[1.0], 2, "x").is_err());
        assert!(rank_by_scores(items(&["a"]), &[f32::NAN], 1, "x").is_err());
        assert!(rank_by_scores(Vec::new(), &[], 3, "x").unwrap().is_empty());
        assert!(rank_by_scores(items(&["a"]), &[1.0], 0, "x").unwrap().is_empty());
    }

    #[test]
    fn score_reranker_sorts_caps_and_keeps_ties_in_order() {
        let rr = ScoreReranker::new(|_q: &str, p: &str| if p.ends_with('b') { 2.0 } else { 1.0 });
        assert_eq!(ids(&rr.rerank(&Query::new("q"), items(&["a", "b", "c"]), 10).unwrap()), ["b", "a", "c"]);
        let capped = ScoreReranker::new(|_q: &str, _p: &str| 0.0).with_top_k(1);
        assert_eq!(ids(&capped.rerank(&Query::new("q"), items(&["a", "b"]), 10).unwrap()), ["a"]);
        assert_eq!(ids(&capped.process(items(&["b", "a"]), None).unwrap()), ["b", "a"], "no query: unchanged");
    }

    #[test]
    fn callback_reranker_follows_the_service_and_refuses_bad_answers() {
        let ok = CallbackReranker::new(|_q: &str, _d: &[&str], _n: usize| Ok(vec![(2, 0.9), (0, 0.5)]));
        let out = ok.rerank(&Query::new("q"), items(&["a", "b", "c"]), 5).unwrap();
        assert_eq!(ids(&out), ["c", "a"], "documents left out are dropped");
        assert_eq!(out[0].score, 0.9);
        for bad in [vec![(3, 1.0)], vec![(0, 1.0), (0, 0.5)], vec![(1, f32::NAN)]] {
            let rr = CallbackReranker::new(move |_q: &str, _d: &[&str], _n: usize| Ok(bad.clone()));
            let err = rr.rerank(&Query::new("q"), items(&["a", "b", "c"]), 5).unwrap_err();
            assert!(err.to_string().contains("callback reranker"), "{err}");
        }
        let down = CallbackReranker::new(|_q: &str, _d: &[&str], _n: usize| {
            Err(Error::Component { component: "cohere".into(), reason: "503".into() })
        });
        assert!(down.rerank(&Query::new("q"), items(&["a"]), 1).is_err());
        assert!(down.rerank(&Query::new("q"), Vec::new(), 1).unwrap().is_empty(), "no items: no call");
    }

    #[test]
    fn callback_reranker_asks_for_at_most_the_items_it_has() {
        let asked = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let seen = asked.clone();
        let rr = CallbackReranker::new(move |_q: &str, d: &[&str], n: usize| {
            seen.store(n, std::sync::atomic::Ordering::SeqCst);
            Ok((0..d.len()).map(|i| (i, 0.0)).collect())
        });
        assert_eq!(rr.rerank(&Query::new("q"), items(&["a", "b"]), 10).unwrap().len(), 2);
        assert_eq!(asked.load(std::sync::atomic::Ordering::SeqCst), 2);
        let capped =
            CallbackReranker::new(|_q: &str, d: &[&str], _n: usize| Ok((0..d.len()).map(|i| (i, 0.0)).collect()))
                .with_top_k(1);
        assert_eq!(
            capped.rerank(&Query::new("q"), items(&["a", "b"]), 10).unwrap().len(),
            1,
            "the service's extra picks are cut"
        );
    }

    #[test]
    fn round_robin_merges_dedups_and_stops_at_top_k() {
        let rr = RoundRobinReranker::new();
        assert!(rr.merge(Vec::new(), None).is_empty());
        assert!(rr.merge(vec![Vec::new(), Vec::new()], Some(3)).is_empty());
        let merged = rr.merge(vec![items(&["a", "b", "c"]), items(&["b", "d"]), items(&["e"])], None);
        assert_eq!(ids(&merged), ["a", "b", "e", "d", "c"]);
        assert_eq!(ids(&rr.merge(vec![items(&["a", "b"]), items(&["c", "d"])], Some(3))), ["a", "c", "b"]);
        assert_eq!(
            ids(&RoundRobinReranker::new().with_top_k(1).merge(vec![items(&["a"]), items(&["b"])], Some(5))),
            ["a"]
        );
    }

    #[test]
    fn round_robin_rerank_resorts_by_existing_scores() {
        let mut v = items(&["a", "b", "c"]);
        v[1].score = 3.0;
        v[2].score = 3.0;
        assert_eq!(ids(&RoundRobinReranker::new().rerank(&Query::new("q"), v, 2).unwrap()), ["b", "c"]);
    }

    #[test]
    fn pipeline_runs_every_stage_on_everything_and_cuts_once() {
        let empty = RerankerPipeline::new(Vec::new()).with_top_k(2);
        assert_eq!(ids(&empty.rerank(&Query::new("q"), items(&["a", "b", "c"]), 10).unwrap()), ["a", "b"]);
        // Stage 1 alone would keep only "c"; the pipeline lets stage 2 see all three.
        let first = ScoreReranker::new(|_q: &str, p: &str| if p.ends_with('c') { 1.0 } else { 0.0 }).with_top_k(1);
        let pipeline = RerankerPipeline::new(vec![Box::new(first)]);
        assert_eq!(
            ids(&pipeline.rerank(&Query::new("q"), items(&["a", "c"]), 5).unwrap()),
            ["c"],
            "a stage's own cap still applies"
        );
        let failing = CallbackReranker::new(|_q: &str, _d: &[&str], _n: usize| Err(Error::Inference("down".into())));
        let p = RerankerPipeline::new(vec![Box::new(RoundRobinReranker::new()), Box::new(failing)]);
        assert!(p.rerank(&Query::new("q"), items(&["a"]), 1).is_err());
    }

    #[test]
    fn async_rerankers_score_concurrently_and_fail_as_a_whole() {
        let rr = AsyncScoreReranker::new(|_q: String, p: String| async move { Ok(p.len() as f32) });
        let mut v = items(&["a", "b"]);
        v[1].text.push_str(" longer");
        assert_eq!(ids(&block_on(rr.arerank(&Query::new("q"), v, 2)).unwrap()), ["b", "a"]);
        let failing = AsyncScoreReranker::new(|_q: String, p: String| async move {
            if p.ends_with('b') {
                Err(Error::Inference("timeout".into()))
            } else {
                Ok(1.0)
            }
        });
        assert!(block_on(failing.arerank(&Query::new("q"), items(&["a", "b"]), 2)).is_err());
        let cb = AsyncCallbackReranker::new(|_q: String, _d: Vec<String>, _n: usize| async { Ok(vec![(5, 1.0)]) });
        assert!(block_on(cb.arerank(&Query::new("q"), items(&["a"]), 1)).is_err(), "out-of-range index");
        // A blocking reranker is an async one too.
        let sync_as_async: &dyn AsyncReranker = &RoundRobinReranker::new();
        assert_eq!(block_on(sync_as_async.arerank(&Query::new("q"), items(&["a", "b"]), 1)).unwrap().len(), 1);
    }
}
