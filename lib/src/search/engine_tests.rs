//! The engine end to end on a small real index: path failures, reranker fallback,
//! recency, diversification and validation.

use std::sync::{Arc, OnceLock};

use super::*;
use crate::corpus::Document;
use crate::encode::{DenseEncoder, ModelSet, SparseEncoder};
use crate::error::{Error, Result};
use crate::index::format::ModelRef;
use crate::index::{Bitset, Bm25Params, BuildOptions, Filter, Index};
use crate::testutil::model_dir;

fn doc(id: &str, ticker: &str, date: &str, segments: &[&str]) -> Document {
    Document {
        document_id: id.into(),
        title: format!("{ticker} filing"),
        document_type: "10-K".into(),
        ticker: Some(ticker.into()),
        year: Some(date[..4].parse().unwrap()),
        published_at: Some(date.into()),
        segments: segments.iter().map(|s| s.to_string()).collect(),
        ..Default::default()
    }
}

fn engine() -> &'static Engine {
    static ENGINE: OnceLock<Engine> = OnceLock::new();
    ENGINE.get_or_init(|| {
        let models = ModelSet::under(&model_dir());
        let dense = DenseEncoder::load(&models.dense).unwrap();
        let sparse = SparseEncoder::load(&models.sparse).unwrap();
        let docs = vec![
            doc("old", "KO", "2015-02-10", &["Concentrate sales to bottlers rose as unit case volume grew in Latin America."]),
            doc("new", "KO", "2024-02-10", &["Concentrate sales to bottlers rose as unit case volume grew in Latin America and Asia."]),
            doc(
                "long",
                "AAPL",
                "2024-11-01",
                &[
                    "iPhone net sales increased due to higher sales of Pro models.",
                    "Services net sales grew on advertising, the App Store and cloud services.",
                    "Mac net sales were flat compared with the prior year.",
                    "Wearables, home and accessories net sales declined.",
                ],
            ),
            doc("fx", "AAPL", "2024-11-01", &["Foreign currency exchange rates weighed on gross margin."]),
        ];
        let opts = BuildOptions {
            index_id: "t".into(),
            chunk_tokens: 16,
            bm25: Bm25Params::default(),
            dense_model: ModelRef { id: "d".into(), weights_sha256: "x".into() },
            sparse_model: ModelRef { id: "s".into(), weights_sha256: "y".into() },
        };
        let index = Index::build(docs, &dense, &sparse, &opts, &|_, _, _| {}).unwrap();
        Engine::new(Arc::new(index), Arc::new(dense), Arc::new(sparse), None)
    })
}

fn with<F: FnOnce(Engine) -> Engine>(f: F) -> Engine {
    let e = engine();
    f(Engine::new(e.index().clone(), e.dense_encoder().clone(), e.sparse_encoder().clone(), None))
}

fn doc_ids(e: &Engine, out: &SearchOutcome) -> Vec<String> {
    out.hits.iter().map(|h| e.index().document_of(h.chunk).document_id.clone()).collect()
}

struct Failing(Path);
impl PathRetriever for Failing {
    fn path(&self) -> Path {
        self.0
    }
    fn retrieve(&self, _: &PreparedQuery, _: Option<&Bitset>, _: usize) -> Result<Vec<PathHit>> {
        Err(Error::Component { component: self.0.name().into(), reason: "backend down".into() })
    }
}

/// Fails with the reason given, or prefers shorter passages: a visible, checkable reordering.
struct FixedReranker(Option<&'static str>);
impl crate::retrieval::Reranker for FixedReranker {
    fn rerank(&self, q: &crate::retrieval::Query, items: Vec<crate::retrieval::ContextItem>, top_k: usize) -> Result<Vec<crate::retrieval::ContextItem>> {
        match self.0 {
            Some(reason) => Err(Error::Component { component: "reranker".into(), reason: reason.into() }),
            None => crate::retrieval::ScoreReranker::new(|_q: &str, p: &str| -(p.len() as f32)).rerank(q, items, top_k),
        }
    }
}

/// Answers with items the engine never sent, or the same item twice.
struct LyingReranker(bool);
impl crate::retrieval::Reranker for LyingReranker {
    fn rerank(&self, _q: &crate::retrieval::Query, items: Vec<crate::retrieval::ContextItem>, _k: usize) -> Result<Vec<crate::retrieval::ContextItem>> {
        Ok(if self.0 { vec![crate::retrieval::ContextItem::new("999", "invented")] } else { vec![items[0].clone(), items[0].clone()] })
    }
}

#[test]
fn hybrid_finds_the_right_document_with_diagnostics_from_every_path() {
    let e = engine();
    let out = e.search(&SearchRequest::new("foreign exchange gross margin", 3)).unwrap();
    assert_eq!(doc_ids(e, &out)[0], "fx");
    let d = &out.hits[0].diagnostics;
    assert_eq!(d.rrf_rank, 1);
    assert_eq!(d.paths.keys().copied().collect::<Vec<_>>(), Path::ALL.to_vec());
    assert_eq!(out.rerank, RerankStatus::Unavailable);
    assert!(out.failed_paths.is_empty());
}

#[test]
fn a_failing_path_is_skipped_and_reported_and_all_failing_is_an_error() {
    let e = with(|e| e.with_retriever(Box::new(Failing(Path::Dense))));
    let out = e.search(&SearchRequest::new("foreign exchange gross margin", 3)).unwrap();
    assert_eq!(doc_ids(&e, &out)[0], "fx");
    assert_eq!(out.failed_paths.len(), 1);
    assert_eq!(out.failed_paths[0].0, Path::Dense);
    assert!(out.hits.iter().all(|h| !h.diagnostics.paths.contains_key(&Path::Dense)));
    let all = with(|e| {
        e.with_retriever(Box::new(Failing(Path::Dense)))
            .with_retriever(Box::new(Failing(Path::Bm25)))
            .with_retriever(Box::new(Failing(Path::Splade)))
    });
    let err = all.search(&SearchRequest::new("margin", 3)).unwrap_err();
    assert!(matches!(err, Error::AllPathsFailed(ref why) if why.contains("backend down")), "{err}");
}

#[test]
fn a_failing_reranker_keeps_the_fused_order_and_says_so() {
    let plain = engine().search(&SearchRequest::new("net sales", 4)).unwrap();
    let e = with(|e| e.with_reranker(Some(Arc::new(FixedReranker(Some("model crashed"))))));
    let out = e.search(&SearchRequest::new("net sales", 4)).unwrap();
    assert_eq!(out.rerank, RerankStatus::Failed("reranker failed: model crashed".into()));
    assert_eq!(doc_ids(&e, &out), doc_ids(engine(), &plain));
    assert!(out.hits.iter().all(|h| h.diagnostics.rerank_rank.is_none()));
}

#[test]
fn a_reranker_reorders_the_fused_candidates_and_records_its_ranks() {
    let e = with(|e| e.with_reranker(Some(Arc::new(FixedReranker(None)))));
    let out = e.search(&SearchRequest::new("net sales", 4)).unwrap();
    assert_eq!(out.rerank, RerankStatus::Applied);
    let lens: Vec<usize> = out.hits.iter().map(|h| e.index().chunks[h.chunk as usize].text.len()).collect();
    assert!(lens.windows(2).all(|w| w[0] <= w[1]), "shortest first: {lens:?}");
    for (i, h) in out.hits.iter().enumerate() {
        assert_eq!(h.diagnostics.rerank_rank, Some(i + 1));
        assert_eq!(h.diagnostics.rerank_score, Some(h.score));
    }
    let mut off = SearchRequest::new("net sales", 4);
    off.rerank = false;
    assert_eq!(e.search(&off).unwrap().rerank, RerankStatus::NotRequested);
}

#[test]
fn a_reranker_inventing_or_repeating_items_fails_and_leaves_the_fused_order() {
    let plain = engine().search(&SearchRequest::new("net sales", 4)).unwrap();
    for repeat in [true, false] {
        let e = with(|e| e.with_reranker(Some(Arc::new(LyingReranker(repeat)))));
        let out = e.search(&SearchRequest::new("net sales", 4)).unwrap();
        assert!(matches!(out.rerank, RerankStatus::Failed(ref why) if why.contains("unknown or repeated")), "{:?}", out.rerank);
        assert_eq!(doc_ids(&e, &out), doc_ids(engine(), &plain));
    }
}

#[test]
fn the_engine_is_a_library_retriever_with_attribution_and_filters() {
    use crate::retrieval::{Query, Retriever};
    let e = engine();
    let hits = e.retrieve(&Query::new("foreign exchange gross margin"), 2).unwrap();
    assert_eq!(hits[0].metadata["document_id"], "fx");
    assert_eq!(hits[0].metadata["retrieval_method"], "rrf");
    assert!(hits[0].id.starts_with("fx#"));
    let ko = e.retrieve(&Query::new("foreign exchange gross margin").with_filter("ticker", serde_json::json!("KO")), 5).unwrap();
    assert!(!ko.is_empty() && ko.iter().all(|h| h.metadata["ticker"] == "KO"));
    assert!(e.retrieve(&Query::new("margin").with_filter("sector", serde_json::json!("x")), 5).is_err());
}

#[test]
fn recency_lifts_the_newer_of_two_near_duplicates() {
    let e = engine();
    let mut req = SearchRequest::new("concentrate sales to bottlers Latin America", 2);
    req.filter = Filter { tickers: vec!["KO".into()], ..Default::default() };
    req.recency = Some(Recency { half_life_days: 365.0, weight: 1.0, now: Some("2024-06-01".into()) });
    assert_eq!(doc_ids(e, &e.search(&req).unwrap()), vec!["new", "old"]);
    req.recency = Some(Recency { half_life_days: 0.0, weight: 1.0, now: None });
    assert!(matches!(e.search(&req), Err(Error::InvalidArgument { .. })));
}

#[test]
fn max_per_document_diversifies_and_filters_apply_before_ranking() {
    let e = engine();
    let mut req = SearchRequest::new("net sales", 10);
    let all = e.search(&req).unwrap();
    assert!(doc_ids(e, &all).iter().filter(|d| *d == "long").count() >= 2, "the long document has several chunks");
    req.max_per_document = Some(1);
    let ids = doc_ids(e, &e.search(&req).unwrap());
    let mut uniq = ids.clone();
    uniq.dedup();
    assert_eq!(ids.len(), uniq.len());
    req.filter = Filter { tickers: vec!["MSFT".into()], ..Default::default() };
    let none = e.search(&req).unwrap();
    assert!(none.hits.is_empty());
    assert_eq!(none.candidates, 0);
}

#[test]
fn invalid_requests_name_the_field() {
    let e = engine();
    for (req, field) in [
        (SearchRequest::new("  ", 5), "query"),
        (SearchRequest::new("margin", 0), "top_k"),
        (SearchRequest { paths: vec![], ..SearchRequest::new("margin", 5) }, "paths"),
    ] {
        match e.search(&req) {
            Err(Error::InvalidArgument { field: f, .. }) => assert_eq!(f, field),
            other => panic!("{field}: {other:?}"),
        }
    }
}

#[test]
fn a_cancelled_search_stops_with_the_stage_it_did_not_run() {
    let mut req = SearchRequest::new("net sales", 3);
    let flag = super::CancelFlag::default();
    req.cancel = Some(flag.clone());
    assert!(engine().search(&req).is_ok(), "not cancelled: searched");
    flag.cancel();
    let err = engine().search(&req).unwrap_err();
    assert!(matches!(err, Error::Cancelled(ref stage) if stage == "retrieval"), "{err}");
}
