//! Hybrid retrieval: several retrievers fused with Reciprocal Rank Fusion.
//!
//! The fusion is [`sextant_core::pipeline::rrf_fuse`], the same function the engine fuses its dense,
//! BM25 and SPLADE paths with; [`fuse_items`] applies it to [`ContextItem`] lists keyed by
//! their ids.

use std::collections::HashMap;

use rayon::prelude::*;
use serde_json::Value;
use sextant_core::error::{Error, Result};
use sextant_core::pipeline::{check_rrf_params, rrf_fuse, DEFAULT_RRF_K};

use super::item::{ContextItem, Query};
use super::traits::{AsyncRetriever, ItemsFuture, Retriever};

/// Fuses ranked item lists (best first) with Reciprocal Rank Fusion; items are the same
/// when their ids are.
///
/// Each item scores `Σ_i w_i / (k + rank_i)` over the lists holding it (ranks 1-based,
/// weights 1 by default; see [`sextant_core::pipeline::rrf_fuse`] for ties and duplicates), divided
/// by the best score possible, `Σ_i w_i / (k + 1)`, so that an item ranked first by every
/// list scores 1. The item kept is its first appearance (earliest list, best rank), with
/// `metadata["retrieval_method"] = "rrf"` and `metadata["rrf_ranks"]` (its rank in each
/// list, `null` where absent). `top_k: None` keeps every item.
///
/// Errors: weights whose count differs from the lists', negative or non-finite weights or
/// `k`.
///
/// ```
/// use sextant_kit::{fuse_items, ContextItem};
///
/// let dense = vec![ContextItem::new("a", "A"), ContextItem::new("b", "B")];
/// let bm25 = vec![ContextItem::new("b", "B"), ContextItem::new("c", "C")];
/// let fused = fuse_items(&[dense, bm25], None, 60.0, Some(2)).unwrap();
/// assert_eq!(fused[0].id, "b"); // in both lists
/// assert!((fused[0].score - (1.0 / 62.0 + 1.0 / 61.0) / (2.0 / 61.0)).abs() < 1e-6);
/// assert_eq!(fused.len(), 2);
/// ```
pub fn fuse_items(
    lists: &[Vec<ContextItem>],
    weights: Option<&[f32]>,
    k: f32,
    top_k: Option<usize>,
) -> Result<Vec<ContextItem>> {
    let ids: Vec<Vec<&str>> = lists.iter().map(|l| l.iter().map(|i| i.id.as_str()).collect()).collect();
    let fused = rrf_fuse(&ids, weights, k, top_k.unwrap_or(usize::MAX))?;
    let mut first: HashMap<&str, &ContextItem> = HashMap::new();
    for item in lists.iter().flatten() {
        first.entry(item.id.as_str()).or_insert(item);
    }
    let best: f32 = match weights {
        Some(w) => w.iter().sum::<f32>() / (k + 1.0),
        None => lists.len() as f32 / (k + 1.0),
    };
    Ok(fused
        .into_iter()
        .map(|f| {
            let score = if best > 0.0 { f.score / best } else { 0.0 };
            let ranks: Vec<Value> = f.ranks.iter().map(|r| r.map_or(Value::Null, Value::from)).collect();
            first[f.item].clone().scored_by("rrf", score).with_metadata("rrf_ranks", Value::Array(ranks))
        })
        .collect())
}

/// Fuses the lists of the retrievers that succeeded, with their weights; an error when none
/// did, naming every failure.
fn fuse_outcomes(
    outcomes: Vec<Result<Vec<ContextItem>>>,
    weights: Option<&[f32]>,
    k: f32,
    top_k: usize,
) -> Result<Vec<ContextItem>> {
    let mut lists = Vec::new();
    let mut kept_weights = Vec::new();
    let mut failures = Vec::new();
    for (i, outcome) in outcomes.into_iter().enumerate() {
        match outcome {
            Ok(list) => {
                lists.push(list);
                kept_weights.push(weights.map_or(1.0, |w| w[i]));
            }
            Err(e) => {
                tracing::warn!(retriever = i, error = %e, "retriever failed; skipped in fusion");
                failures.push(format!("retriever {i}: {e}"));
            }
        }
    }
    if lists.is_empty() {
        return Err(Error::AllPathsFailed(failures.join("; ")));
    }
    fuse_items(&lists, Some(&kept_weights), k, Some(top_k))
}

/// Retrievers fused with Reciprocal Rank Fusion ([`fuse_items`]): `R` is `dyn Retriever`
/// ([`HybridRetriever`]) or `dyn AsyncRetriever` ([`AsyncHybridRetriever`]); the two share
/// this one set of settings and builders.
///
/// Every retriever is asked for `max(candidates, top_k)` items (default `top_k`). A
/// retriever that fails is skipped (logged) and the others are fused with their own
/// weights; only when all fail is the search an error ([`Error::AllPathsFailed`], naming
/// each failure).
pub struct Hybrid<R: ?Sized> {
    retrievers: Vec<Box<R>>,
    weights: Option<Vec<f32>>,
    k: f32,
    candidates: Option<usize>,
}

impl<R: ?Sized> Hybrid<R> {
    /// Fuses `retrievers` with equal weights and `k = 60`; at least one is needed.
    pub fn new(retrievers: Vec<Box<R>>) -> Result<Self> {
        if retrievers.is_empty() {
            return Err(Error::invalid("retrievers", "at least one retriever is needed"));
        }
        Ok(Hybrid { retrievers, weights: None, k: DEFAULT_RRF_K, candidates: None })
    }

    /// One weight per retriever, in order (0 removes a retriever's contribution).
    pub fn with_weights(mut self, weights: Vec<f32>) -> Result<Self> {
        check_rrf_params(Some(&weights), self.retrievers.len(), self.k)?;
        self.weights = Some(weights);
        Ok(self)
    }

    /// The RRF constant `k`.
    pub fn with_k(mut self, k: f32) -> Result<Self> {
        check_rrf_params(None, 0, k)?;
        self.k = k;
        Ok(self)
    }

    /// How deep to ask each retriever (at least `top_k`).
    pub fn with_candidates(mut self, candidates: usize) -> Self {
        self.candidates = Some(candidates);
        self
    }

    fn depth(&self, top_k: usize) -> usize {
        self.candidates.map_or(top_k, |c| c.max(top_k))
    }
}

/// Blocking retrievers fused with RRF; they run in parallel (see [`Hybrid`]).
///
/// ```
/// use sextant_kit::{Bm25Retriever, ContextItem, DenseRetriever, HybridRetriever, Query, Retriever};
///
/// let items = vec![ContextItem::new("cat", "the cat sat"), ContextItem::new("dog", "the dog ran")];
/// let embed = |t: &str| Ok(vec![t.matches("cat").count() as f32, t.matches("dog").count() as f32 + 0.1]);
/// let hybrid = HybridRetriever::new(vec![
///     Box::new(DenseRetriever::index(items.clone(), embed).unwrap()),
///     Box::new(Bm25Retriever::index(items)),
/// ])
/// .unwrap()
/// .with_weights(vec![1.0, 2.0])
/// .unwrap();
/// let hits = hybrid.retrieve(&Query::new("cat"), 1).unwrap();
/// assert_eq!(hits[0].id, "cat");
/// ```
pub type HybridRetriever = Hybrid<dyn Retriever>;

impl Retriever for HybridRetriever {
    fn retrieve(&self, query: &Query, top_k: usize) -> Result<Vec<ContextItem>> {
        let depth = self.depth(top_k);
        let outcomes: Vec<_> = self.retrievers.par_iter().map(|r| r.retrieve(query, depth)).collect();
        fuse_outcomes(outcomes, self.weights.as_deref(), self.k, top_k)
    }
}

/// Async retrievers fused with RRF: one concurrent fan-out, failures skipped the same way
/// (see [`Hybrid`]). Blocking retrievers take part too (every [`Retriever`] is an
/// [`AsyncRetriever`]).
///
/// ```
/// use sextant_kit::{AsyncDenseRetriever, AsyncHybridRetriever, AsyncRetriever, Bm25Retriever, ContextItem, Query};
///
/// let items = vec![ContextItem::new("cat", "the cat sat"), ContextItem::new("dog", "the dog ran")];
/// let dense = AsyncDenseRetriever::new(|t: String| async move {
///     Ok(vec![t.matches("cat").count() as f32, t.matches("dog").count() as f32 + 0.1])
/// });
/// let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
/// rt.block_on(async {
///     dense.aindex(items.clone()).await.unwrap();
///     let hybrid = AsyncHybridRetriever::new(vec![Box::new(dense), Box::new(Bm25Retriever::index(items))]).unwrap();
///     assert_eq!(hybrid.aretrieve(&Query::new("dog"), 1).await.unwrap()[0].id, "dog");
/// });
/// ```
pub type AsyncHybridRetriever = Hybrid<dyn AsyncRetriever>;

impl AsyncRetriever for AsyncHybridRetriever {
    fn aretrieve<'a>(&'a self, query: &'a Query, top_k: usize) -> ItemsFuture<'a> {
        Box::pin(async move {
            let depth = self.depth(top_k);
            let outcomes =
                futures_util::future::join_all(self.retrievers.iter().map(|r| r.aretrieve(query, depth))).await;
            fuse_outcomes(outcomes, self.weights.as_deref(), self.k, top_k)
        })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    use sextant_core::testutil::block_on;

    use super::*;

    /// Returns a fixed list (cut to `top_k`), or fails.
    struct Fixed(std::result::Result<Vec<&'static str>, &'static str>);
    impl Retriever for Fixed {
        fn retrieve(&self, _q: &Query, top_k: usize) -> Result<Vec<ContextItem>> {
            match &self.0 {
                Ok(ids) => {
                    Ok(ids.iter().take(top_k).map(|id| ContextItem::new(*id, format!("text of {id}"))).collect())
                }
                Err(why) => Err(Error::Component { component: "fixed".into(), reason: (*why).into() }),
            }
        }
    }

    fn ids(items: &[ContextItem]) -> Vec<&str> {
        items.iter().map(|i| i.id.as_str()).collect()
    }

    fn hybrid(parts: Vec<std::result::Result<Vec<&'static str>, &'static str>>) -> HybridRetriever {
        HybridRetriever::new(parts.into_iter().map(|p| Box::new(Fixed(p)) as Box<dyn Retriever>).collect()).unwrap()
    }

    #[test]
    fn fuse_items_of_nothing_is_nothing() {
        assert!(fuse_items(&[], None, 60.0, None).unwrap().is_empty());
        assert!(fuse_items(&[vec![], vec![]], None, 60.0, Some(3)).unwrap().is_empty());
    }

    #[test]
    fn fuse_items_scores_are_normalised_and_ranks_recorded() {
        let l1 = vec![ContextItem::new("a", "first copy"), ContextItem::new("b", "")];
        let l2 = vec![ContextItem::new("a", "second copy")];
        let f = fuse_items(&[l1, l2], None, 60.0, None).unwrap();
        assert_eq!(ids(&f), ["a", "b"]);
        assert_eq!(f[0].score, 1.0, "first everywhere");
        assert_eq!(f[0].text, "first copy", "the first appearance is kept");
        assert_eq!(f[0].metadata["rrf_ranks"], serde_json::json!([1, 1]));
        assert_eq!(f[1].metadata["rrf_ranks"], serde_json::json!([2, null]));
        assert!((f[1].score - (1.0 / 62.0) / (2.0 / 61.0)).abs() < 1e-6);
    }

    #[test]
    fn fuse_items_refuses_bad_parameters() {
        let l = vec![vec![ContextItem::new("a", "")]];
        assert!(fuse_items(&l, Some(&[1.0, 1.0]), 60.0, None).is_err());
        assert!(fuse_items(&l, Some(&[-1.0]), 60.0, None).is_err());
        assert!(fuse_items(&l, None, f32::NAN, None).is_err());
        let zero = fuse_items(&l, Some(&[0.0]), 60.0, None).unwrap();
        assert_eq!(zero[0].score, 0.0, "all weights zero: no evidence, score 0");
    }

    #[test]
    fn fuses_in_rrf_order_and_breaks_ties_by_best_rank() {
        let h = hybrid(vec![Ok(vec!["a", "b", "c"]), Ok(vec!["c", "b"])]);
        // b: 1/62 + 1/62; a: 1/61; c: 1/63 + 1/61 (> b).
        assert_eq!(ids(&h.retrieve(&Query::new("q"), 10).unwrap()), ["c", "b", "a"]);
        let tie = hybrid(vec![Ok(vec!["x"]), Ok(vec!["y"])]);
        assert_eq!(ids(&tie.retrieve(&Query::new("q"), 10).unwrap()), ["x", "y"], "equal scores: earlier list first");
    }

    #[test]
    fn weights_shift_the_order_and_zero_removes_a_retriever() {
        let h = hybrid(vec![Ok(vec!["a", "b"]), Ok(vec!["b", "a"])]);
        let h = h.with_weights(vec![1.0, 2.0]).unwrap();
        assert_eq!(ids(&h.retrieve(&Query::new("q"), 2).unwrap()), ["b", "a"]);
        let only_first = hybrid(vec![Ok(vec!["a", "b"]), Ok(vec!["b", "a"])]).with_weights(vec![1.0, 0.0]).unwrap();
        assert_eq!(ids(&only_first.retrieve(&Query::new("q"), 2).unwrap()), ["a", "b"]);
    }

    #[test]
    fn mismatched_weights_bad_k_and_no_retrievers_are_refused() {
        assert!(hybrid(vec![Ok(vec![]), Ok(vec![])]).with_weights(vec![1.0]).is_err());
        assert!(hybrid(vec![Ok(vec![])]).with_weights(vec![f32::INFINITY]).is_err());
        assert!(hybrid(vec![Ok(vec![])]).with_k(-1.0).is_err());
        assert!(HybridRetriever::new(Vec::new()).is_err());
        assert!(AsyncHybridRetriever::new(Vec::new()).is_err());
    }

    #[test]
    fn a_failed_retriever_is_skipped_with_the_others_weights_kept() {
        let h = hybrid(vec![Err("down"), Ok(vec!["a", "b"]), Ok(vec!["b", "a"])])
            .with_weights(vec![5.0, 1.0, 3.0])
            .unwrap();
        assert_eq!(ids(&h.retrieve(&Query::new("q"), 2).unwrap()), ["b", "a"], "weight 3 list wins");
    }

    #[test]
    fn all_failing_is_an_error_naming_each_failure() {
        let h = hybrid(vec![Err("dense down"), Err("bm25 down")]);
        let err = h.retrieve(&Query::new("q"), 2).unwrap_err();
        let msg = err.to_string();
        assert!(matches!(err, Error::AllPathsFailed(_)));
        assert!(msg.contains("dense down") && msg.contains("bm25 down"), "{msg}");
    }

    #[test]
    fn candidates_deepen_each_retriever_and_top_k_cuts_the_fusion() {
        let h = hybrid(vec![Ok(vec!["a", "b", "c"]), Ok(vec!["c"])]);
        assert_eq!(ids(&h.retrieve(&Query::new("q"), 1).unwrap()), ["a"], "depth 1: c unseen in list 1");
        let deep = hybrid(vec![Ok(vec!["a", "b", "c"]), Ok(vec!["c"])]).with_candidates(3);
        assert_eq!(ids(&deep.retrieve(&Query::new("q"), 1).unwrap()), ["c"]);
    }

    /// Counts concurrent calls: proves the async fan-out overlaps its retrievers.
    struct Slow(Arc<AtomicUsize>, Arc<AtomicUsize>, &'static str);
    impl AsyncRetriever for Slow {
        fn aretrieve<'a>(&'a self, _q: &'a Query, _k: usize) -> ItemsFuture<'a> {
            Box::pin(async move {
                let now = self.0.fetch_add(1, Ordering::SeqCst) + 1;
                self.1.fetch_max(now, Ordering::SeqCst);
                YieldOnce(false).await;
                self.0.fetch_sub(1, Ordering::SeqCst);
                Ok(vec![ContextItem::new(self.2, "")])
            })
        }
    }

    struct YieldOnce(bool);
    impl std::future::Future for YieldOnce {
        type Output = ();
        fn poll(mut self: std::pin::Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<()> {
            if self.0 {
                return std::task::Poll::Ready(());
            }
            self.0 = true;
            cx.waker().wake_by_ref();
            std::task::Poll::Pending
        }
    }

    #[test]
    fn async_hybrid_fans_out_concurrently_and_skips_failures() {
        let (live, peak) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let h = AsyncHybridRetriever::new(vec![
            Box::new(Slow(live.clone(), peak.clone(), "a")),
            Box::new(Slow(live.clone(), peak.clone(), "b")),
            Box::new(Fixed(Err("down"))),
        ])
        .unwrap();
        let hits = block_on(h.aretrieve(&Query::new("q"), 5)).unwrap();
        assert_eq!(ids(&hits), ["a", "b"]);
        assert_eq!(peak.load(Ordering::SeqCst), 2, "both retrievers were in flight at once");
        let all_down = AsyncHybridRetriever::new(vec![Box::new(Fixed(Err("x"))), Box::new(Fixed(Err("y")))]).unwrap();
        assert!(matches!(block_on(all_down.aretrieve(&Query::new("q"), 5)), Err(Error::AllPathsFailed(_))));
        let weighted =
            AsyncHybridRetriever::new(vec![Box::new(Fixed(Ok(vec!["a", "b"]))), Box::new(Fixed(Ok(vec!["b", "a"])))])
                .unwrap()
                .with_weights(vec![0.0, 1.0])
                .unwrap();
        assert_eq!(ids(&block_on(weighted.aretrieve(&Query::new("q"), 2)).unwrap()), ["b", "a"]);
        assert!(AsyncHybridRetriever::new(vec![Box::new(Fixed(Ok(vec![])))])
            .unwrap()
            .with_weights(vec![1.0, 1.0])
            .is_err());
    }
}
