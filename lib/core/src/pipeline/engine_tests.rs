//! The engine end to end on a small real index: path failures, reranker fallback,
//! recency, diversification and validation.

use std::collections::HashMap;
use std::sync::Arc;

use super::*;
use crate::error::{Error, Result, Stage};
use crate::index::{Bitset, Filter};
use crate::testutil::small_engine as engine;

fn with<F: FnOnce(Engine) -> Engine>(f: F) -> Engine {
    let e = engine();
    f(e.sharing_encoders(e.index().clone(), None))
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
impl Reranker for FixedReranker {
    fn rerank(&self, _q: &str, candidates: &[Candidate<'_>]) -> Result<Vec<Reranked>> {
        match self.0 {
            Some(reason) => Err(Error::Component { component: "reranker".into(), reason: reason.into() }),
            None => {
                // A relevance in (0, 1), as rerankers give: 1 / (1 + length).
                let mut out: Vec<Reranked> = candidates
                    .iter()
                    .map(|c| Reranked { chunk: c.chunk, score: 1.0 / (1.0 + c.text.len() as f32) })
                    .collect();
                out.sort_by(|a, b| b.score.total_cmp(&a.score));
                Ok(out)
            }
        }
    }
}

/// Answers with chunks the engine never sent, or the same chunk twice.
struct LyingReranker(bool);
impl Reranker for LyingReranker {
    fn rerank(&self, _q: &str, candidates: &[Candidate<'_>]) -> Result<Vec<Reranked>> {
        let first = Reranked { chunk: candidates[0].chunk, score: 1.0 };
        Ok(if self.0 { vec![Reranked { chunk: 999_999, score: 1.0 }] } else { vec![first, first] })
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
        assert!(
            matches!(out.rerank, RerankStatus::Failed(ref why) if why.contains("unknown or repeated")),
            "{:?}",
            out.rerank
        );
        assert_eq!(doc_ids(&e, &out), doc_ids(engine(), &plain));
    }
}

#[test]
fn recency_lifts_the_newer_of_two_near_duplicates() {
    let e = engine();
    let mut req = SearchRequest::new("concentrate sales to bottlers Latin America", 3);
    req.filter = Filter { tickers: vec!["KO".into()], ..Default::default() };
    let position = |req: &SearchRequest, id: &str| doc_ids(e, &e.search(req).unwrap()).iter().position(|d| d == id);
    assert!(position(&req, "old") < position(&req, "new"), "without recency the closer match leads");
    req.recency = Some(Recency { half_life_days: 365.0, weight: 1.0, now: "2024-06-01".parse().ok() });
    assert!(position(&req, "new") < position(&req, "old"), "{:?}", doc_ids(e, &e.search(&req).unwrap()));
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
        (
            SearchRequest {
                fusion: FusionConfig { feedback: -1.0, ..FusionConfig::default() },
                ..SearchRequest::new("margin", 5)
            },
            "fusion.feedback",
        ),
        (
            SearchRequest {
                fusion: FusionConfig { feedback: f32::NAN, ..FusionConfig::default() },
                ..SearchRequest::new("margin", 5)
            },
            "fusion.feedback",
        ),
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
    assert!(matches!(err, Error::Cancelled(Stage::Retrieval)), "{err}");
}

#[test]
fn the_lexical_paths_read_the_question_without_the_role_in_front_of_it() {
    let e = engine();
    let scores = |query: &str, strip: bool, path: Path| -> Vec<(u32, f32)> {
        let mut req = SearchRequest::new(query, 5);
        req.paths = vec![path];
        req.strip_instructions = strip;
        e.search(&req).unwrap().hits.iter().map(|h| (h.chunk, h.diagnostics.paths[&path].score)).collect()
    };
    let question = "How did concentrate sales to bottlers grow in Latin America?";
    let prompted = format!("You are a meticulous equity research analyst. {question}");
    for path in [Path::Bm25, Path::Splade] {
        assert_eq!(scores(&prompted, true, path), scores(question, true, path), "{path}");
    }
    // Read whole, the role changes what SPLADE matches.
    assert_ne!(scores(&prompted, false, Path::Splade), scores(question, false, Path::Splade));
}

#[test]
fn a_document_ranks_at_its_best_chunk_and_its_other_chunks_score_their_own_evidence() {
    // Fused by document, a document ranks at its leading chunk, which carries the
    // document's score (every path's vote, through whichever chunk); its other chunks score
    // what they showed themselves, which is less: they do not tie with their lead.
    let e = engine();
    let out = e.search(&SearchRequest::new("net sales", 20)).unwrap();
    for w in out.hits.windows(2) {
        assert!(w[0].score >= w[1].score);
    }
    let mut lead: HashMap<u32, f32> = HashMap::new();
    let mut seconds = 0;
    for h in &out.hits {
        let doc = e.index().chunks[h.chunk as usize].doc;
        match lead.get(&doc) {
            Some(&first) => {
                assert!(h.score < first, "a document's other chunk ties with or passes its lead: {:?}", out.hits);
                seconds += 1;
            }
            None => {
                lead.insert(doc, h.score);
            }
        }
    }
    assert!(seconds > 0, "no document gave two chunks: {:?}", out.hits);
    let mut by_chunk = SearchRequest::new("net sales", 20);
    by_chunk.fusion.by_document = false;
    assert_ne!(
        e.search(&by_chunk).unwrap().hits.iter().map(|h| h.score).collect::<Vec<_>>(),
        out.hits.iter().map(|h| h.score).collect::<Vec<_>>()
    );
}

#[test]
fn a_query_encoded_once_serves_several_searches_without_encoding_again() {
    let e = engine();
    let (prepared, _) = e.prepare("concentrate sales to bottlers", &Path::ALL).unwrap();
    let prepared = Arc::new(prepared);
    for ticker in ["KO", "AAPL"] {
        let mut plain = SearchRequest::new("concentrate sales to bottlers", 5);
        plain.filter = Filter { tickers: vec![ticker.into()], ..Default::default() };
        let mut reused = plain.clone();
        reused.prepared = Some(prepared.clone());
        let (a, b) = (e.search(&plain).unwrap(), e.search(&reused).unwrap());
        assert_eq!(doc_ids(e, &a), doc_ids(e, &b), "{ticker}");
        assert_eq!(
            a.hits.iter().map(|h| h.score).collect::<Vec<_>>(),
            b.hits.iter().map(|h| h.score).collect::<Vec<_>>()
        );
        assert_eq!(b.timings.encode_ms, 0.0, "nothing encoded again");
        assert!(a.timings.encode_ms > 0.0);
    }
}

#[test]
fn recency_never_lifts_a_candidate_the_reranker_did_not_see_above_one_it_did() {
    // The fixed reranker's scores are small relevances; fused relevances can be larger.
    // Boosted together, the unreranked tail used to jump over the reranked head.
    let e = with(|e| e.with_reranker(Some(Arc::new(FixedReranker(None)))));
    let mut req = SearchRequest::new("net sales", 10);
    req.rerank_depth = 3;
    req.recency = Some(Recency { half_life_days: 365.0, weight: 1.0, now: "2024-12-01".parse().ok() });
    let out = e.search(&req).unwrap();
    assert_eq!(out.rerank, RerankStatus::Applied);
    assert!(out.hits.len() > 3, "a tail beyond the rerank depth");
    let reranked: Vec<bool> = out.hits.iter().map(|h| h.diagnostics.rerank_score.is_some()).collect();
    let first_unreranked = reranked.iter().position(|r| !r).unwrap();
    assert!(
        reranked[..first_unreranked].iter().all(|r| *r) && !reranked[first_unreranked..].iter().any(|r| *r),
        "{reranked:?}"
    );
}

/// Every hit's score is a relevance in [0, 1] that never rises down the list: fused (by
/// z-scores, whose sums are often negative or above 1, and by ranks), reranked with a tail
/// the reranker never saw, and boosted by recency.
#[test]
fn scores_are_relevances_in_the_unit_interval_that_never_rise_down_the_list() {
    let check = |e: &Engine, req: &SearchRequest, what: &str| {
        let out = e.search(req).unwrap();
        assert!(out.hits.len() > 3, "{what}: {} hits", out.hits.len());
        let scores: Vec<f32> = out.hits.iter().map(|h| h.score).collect();
        assert!(scores.iter().all(|s| (0.0..=1.0).contains(s)), "{what}: {scores:?}");
        assert!(scores.windows(2).all(|w| w[0] >= w[1]), "{what}: {scores:?}");
        out
    };
    let e = engine();
    let short = SearchRequest::new("net sales by region", 10);
    let out = check(e, &short, "z-scores");
    let raw: Vec<f32> = out.hits.iter().map(|h| h.diagnostics.rrf_score).collect();
    assert!(raw.iter().any(|x| !(0.0..=1.0).contains(x)), "the raw fused z-sums leave [0, 1]: {raw:?}");
    check(e, &SearchRequest::new(LONG_QUESTION, 10), "a long question, by ranks");
    check(e, &SearchRequest { fusion: FusionConfig::plain(), ..short.clone() }, "plain RRF");
    let mut recent = short.clone();
    recent.recency = Some(Recency { half_life_days: 365.0, weight: 1.0, now: "2024-12-01".parse().ok() });
    check(e, &recent, "with recency");
    let reranked = with(|e| e.with_reranker(Some(Arc::new(FixedReranker(None)))));
    let mut deep = recent.clone();
    deep.rerank_depth = 3;
    let out = check(&reranked, &deep, "reranked, with a tail and recency");
    assert_eq!(out.rerank, RerankStatus::Applied);
    // The relevance of a fused score: σ(a · mean z + b), growing with the fused score.
    let f = FusionConfig::default();
    let (lo, hi) = (f.relevance(0.0, 3.0, "margins"), f.relevance(9.0, 3.0, "margins"));
    assert!(0.0 < lo && lo < hi && hi < 1.0, "{lo} {hi}");
    assert_eq!(f.relevance(f32::NAN, 3.0, "margins"), 0.0);
    // By ranks, first in every list is x = 1.
    let plain = FusionConfig::plain();
    let first = plain.relevance(3.0 / 61.0, 3.0, "margins");
    let (a, b) = RELEVANCE_RANKS;
    assert!((first - 1.0 / (1.0 + (-(a + b)).exp())).abs() < 1e-6, "{first}");
}

#[test]
fn each_path_contributes_its_own_number_of_candidates() {
    let e = engine();
    let mut req = SearchRequest::new("net sales", 20);
    req.paths = vec![Path::Dense, Path::Bm25];
    req.rerank = false;
    req.path_k = std::collections::BTreeMap::from([(Path::Dense, 2), (Path::Bm25, 7)]);
    let out = e.search(&req).unwrap();
    let deepest = |p: Path| out.hits.iter().filter_map(|h| h.diagnostics.paths.get(&p).map(|r| r.rank)).max();
    assert_eq!(deepest(Path::Dense), Some(2), "dense gave 2");
    assert!(deepest(Path::Bm25).is_some_and(|r| r > 2 && r <= 7), "BM25 gave up to 7: {:?}", deepest(Path::Bm25));
}

#[test]
fn rerank_status_names_are_the_serde_tags() {
    for s in
        [RerankStatus::NotRequested, RerankStatus::Unavailable, RerankStatus::Applied, RerankStatus::Failed("x".into())]
    {
        assert_eq!(serde_json::to_value(&s).unwrap()["status"], s.name());
    }
}

/// The first chunk of each of the engine's first four documents, for fusing hand-made lists
/// in which each document comes through one chunk.
fn first_chunks_of_four_documents(e: &Engine) -> [u32; 4] {
    [0, 1, 2, 3].map(|d| e.index().chunks.iter().position(|c| c.doc == d).unwrap() as u32)
}

#[test]
fn the_recall_tail_keeps_what_dense_alone_found_among_the_candidates() {
    // W is dense's second chunk and no lexical path has it; Y is third in both lexical
    // lists. By z-scores W gets each lexical list's lowest z and falls below Y. Below a
    // head of one, the tail (dense weighted as the two lexical lists together, k = 100)
    // ranks W above Y: 2/102 against 1/103 + 1/103.
    // Chunks are the units here (`by_document` false): the test index has four documents.
    let e = engine();
    assert!(e.index().chunks.len() >= 5);
    let [x, y, z, w, v] = [0, 1, 2, 3, 4];
    let dense = vec![(x, 1.0), (w, 0.5), (z, 0.0)];
    let lexical = vec![(x, 1.0), (z, 0.9), (y, 0.8), (v, 0.0)];
    let lists = [dense, lexical.clone(), lexical];
    let order = |fusion: &FusionConfig| -> Vec<u32> {
        e.fuse(fusion, "what did management say about margins", &Path::ALL, &lists)
            .unwrap()
            .into_iter()
            .map(|f| f.item)
            .collect()
    };
    let chunks = FusionConfig { by_document: false, recall_tail: None, ..FusionConfig::default() };
    let without = order(&chunks);
    let at = |order: &[u32], c: u32| order.iter().position(|&i| i == c).unwrap();
    assert!(at(&without, w) > at(&without, y), "the fused order puts dense's own find below: {without:?}");
    let tail = RecallTail { head: 1, ..DEFAULT_RECALL_TAIL };
    let with = order(&FusionConfig { recall_tail: Some(tail), ..chunks });
    assert_eq!(with[0], x, "the head stays");
    assert!(at(&with, w) < at(&with, y), "dense's own find rises above the lexical paths' third: {with:?}");
    assert_eq!(FusionConfig::default().recall_tail, Some(DEFAULT_RECALL_TAIL));
}

/// A question of a computed measure in FinanceBench's wording: 35 words, long.
const LONG_QUESTION: &str = "What is the fixed asset turnover ratio for the company in its last fiscal year? Fixed \
                             asset turnover ratio is defined as: total revenue divided by property, plant and \
                             equipment, net. Round your answer to two decimal places.";

#[test]
fn a_long_question_is_fused_by_ranks_so_one_lists_outlier_does_not_decide() {
    // Dense and SPLADE put X first and Y second, close together; BM25 puts Y first, far
    // above everything else (the outlier a long question's incidental words can make).
    // By scores Y wins on BM25's z-score; by ranks X wins on two lists' first place.
    let e = engine();
    let [x, y, z, w] = first_chunks_of_four_documents(e);
    let close = vec![(x, 0.80), (y, 0.79), (z, 0.2), (w, 0.1)];
    let outlier = vec![(y, 30.0), (x, 1.0), (z, 0.9), (w, 0.8)];
    let lists = [close.clone(), outlier, close];
    let first = |fusion: &FusionConfig, query: &str| e.fuse(fusion, query, &Path::ALL, &lists).unwrap()[0].item;
    let short = "what was the company's fixed asset turnover ratio last year";
    let long = LONG_QUESTION;
    assert!(word_count(short) <= DEFAULT_LONG_QUERY_WORDS && word_count(long) > DEFAULT_LONG_QUERY_WORDS);
    let default = FusionConfig::default();
    assert_eq!(first(&default, short), y, "a short question: fused by scores, BM25's outlier wins");
    assert_eq!(first(&default, long), x, "a long question: fused by ranks, two lists' first place wins");
    let never_long = FusionConfig { long_query_words: 0, ..FusionConfig::default() };
    assert_eq!(first(&never_long, long), y, "without the switch it is fused by scores");
    assert_eq!(default.method_for(long), FusionMethod::Ranks);
    assert_eq!(default.method_for(short), FusionMethod::Scores);
}

#[test]
fn a_role_in_front_of_a_question_does_not_make_it_long() {
    // The switch is for the words BM25 and SPLADE read, and they read no role.
    let default = FusionConfig::default();
    let role = "As a buy-side analyst preparing a note, summarise what INCY management said about revenue on \
                the August 4, 2015 call, with the figure.";
    assert_eq!(word_count(role), 23);
    assert!(!default.is_long(role), "16 words besides the role clause");
    assert_eq!(default.method_for(role), FusionMethod::Scores);
    let measure = "You are an equity analyst. Using the cash flow statement, calculate Visa Inc.'s cash returned \
                   to shareholders in fiscal 2024, where cash returned to shareholders is share repurchases plus \
                   dividends paid. Answer in USD millions.";
    assert!(default.is_long(measure), "30 words besides the role sentence");
    assert!(!FusionConfig { long_query_words: 0, ..default }.is_long(measure), "0: never long");
}

#[test]
fn a_long_questions_dense_weight_is_shared_by_its_own_list_and_the_feedback_list() {
    // A long question's second fusion reads four lists: the feedback list (dense's place),
    // BM25, SPLADE and the dense path's own list, the two dense ones sharing dense's weight
    // as γ and 1 − γ. The own list puts X first, the feedback list Y; the lexical lists
    // hold both, in opposite orders. With little feedback weight dense's own first place
    // decides; with much, the feedback's.
    let e = engine();
    let [x, y, z, w] = first_chunks_of_four_documents(e);
    let own = vec![(x, 0.9), (z, 0.8), (w, 0.7), (y, 0.6)];
    let feedback = vec![(y, 0.9), (z, 0.8), (w, 0.7), (x, 0.6)];
    let bm25 = vec![(z, 9.0), (x, 8.0), (y, 7.9), (w, 1.0)];
    let splade = vec![(z, 9.0), (y, 8.0), (x, 7.9), (w, 1.0)];
    let lists = [feedback, bm25, splade, own];
    let paths = [Path::Dense, Path::Bm25, Path::Splade, Path::Dense];
    let long = LONG_QUESTION;
    let default = FusionConfig::default();
    assert!(default.dense_beside_feedback && default.is_long(long));
    let first = |gamma: f32| {
        let fused =
            Engine::fuse_with(&**e.index(), &default, long, &paths, &lists, &[gamma, 1.0, 1.0, 1.0 - gamma]).unwrap();
        fused.into_iter().map(|f| f.item).find(|&c| c == x || c == y).unwrap()
    };
    assert_eq!(first(0.2), x, "γ = 0.2: dense's own list weighs four times the feedback's");
    assert_eq!(first(0.8), y, "γ = 0.8: the feedback list decides");
}

/// The dense path's rank and score of each hit, by chunk.
fn dense_scores(out: &SearchOutcome) -> Vec<(u32, Option<PathRank>)> {
    out.hits.iter().map(|h| (h.chunk, h.diagnostics.paths.get(&Path::Dense).copied())).collect()
}

#[test]
fn dense_feedback_moves_the_dense_query_towards_the_fused_top_on_a_question_of_identifiers() {
    let e = engine();
    let search = |query: &str, feedback: f32| {
        let mut req = SearchRequest::new(query, 10);
        req.fusion = FusionConfig { feedback, feedback_documents: 1, ..FusionConfig::default() };
        e.search(&req).unwrap()
    };
    // "AAPL" and "FY2024" are 2 identifiers in 6 words: γ = min(1, 8 · 1/3) = 1.
    let query = "AAPL FY2024 iPhone net sales growth";
    let (with, without) = (search(query, 8.0), search(query, 0.0));
    let top = without.hits[0].chunk;
    let dense_of = |out: &SearchOutcome, chunk: u32| {
        out.hits.iter().find(|h| h.chunk == chunk).and_then(|h| h.diagnostics.paths.get(&Path::Dense)).map(|r| r.score)
    };
    // q' = (q + v) / ‖q + v‖ for the top's vector v: its cosine with v is √((1 + q·v) / 2),
    // above q·v itself.
    let (before, after) = (dense_of(&without, top).unwrap(), dense_of(&with, top).unwrap());
    let want = ((1.0 + before) / 2.0).sqrt();
    assert!((after - want).abs() < 1e-3, "cosine with the fused top: {before} -> {after}, want {want}");
    assert_ne!(dense_scores(&with), dense_scores(&without));
    // Dense alone has no other path's finds to read: its list stays its own.
    let alone = |feedback: f32| {
        let mut req = SearchRequest::new(query, 10);
        req.paths = vec![Path::Dense];
        req.fusion = FusionConfig { feedback, ..FusionConfig::default() };
        dense_scores(&e.search(&req).unwrap())
    };
    assert_eq!(alone(8.0), alone(0.0));
    // The default fusion has feedback.
    assert_eq!(FusionConfig::default().feedback, DEFAULT_FEEDBACK);
}

#[test]
fn a_question_without_identifiers_gets_no_feedback_search() {
    let e = engine();
    let search = |feedback: f32| {
        let mut req = SearchRequest::new("which products had higher net sales", 10);
        req.fusion = FusionConfig { feedback, ..FusionConfig::default() };
        e.search(&req).unwrap()
    };
    let (with, without) = (search(8.0), search(0.0));
    assert_eq!(dense_scores(&with), dense_scores(&without));
    assert_eq!(
        with.hits.iter().map(|h| h.score).collect::<Vec<_>>(),
        without.hits.iter().map(|h| h.score).collect::<Vec<_>>()
    );
}

#[test]
fn dense_feedback_keeps_the_filter_and_the_minimum_similarity_to_the_question() {
    let e = engine();
    let query = "KO 2024 concentrate sales to bottlers";
    let mut req = SearchRequest::new(query, 10);
    req.filter = Filter { tickers: vec!["AAPL".into()], ..Default::default() };
    let out = e.search(&req).unwrap();
    assert!(!out.hits.is_empty());
    assert!(out.hits.iter().all(|h| e.index().document_of(h.chunk).ticker.as_deref() == Some("AAPL")));

    // The minimum is the cosine with the question as asked, not with the moved query.
    let (q, _) = e.dense_encoder().unwrap().embed_query(query).unwrap();
    let cosine = |c: u32| e.index().dense_score(c, &q);
    let mut all = SearchRequest::new(query, 10);
    all.paths = vec![Path::Dense];
    let mut cosines: Vec<f32> = e.search(&all).unwrap().hits.iter().map(|h| cosine(h.chunk)).collect();
    cosines.sort_by(f32::total_cmp);
    let min = cosines[cosines.len() / 2];
    let mut req = SearchRequest::new(query, 10);
    req.min_dense_similarity = Some(min);
    let out = e.search(&req).unwrap();
    let dense: Vec<u32> =
        out.hits.iter().filter(|h| h.diagnostics.paths.contains_key(&Path::Dense)).map(|h| h.chunk).collect();
    assert!(!dense.is_empty());
    assert!(dense.iter().all(|&c| cosine(c) >= min - 1e-6), "every dense hit at least {min}");
}

/// An engine without encoders (an index shard's) retrieves a query encoded elsewhere as
/// the engine with them does, to the bit; a query it would have to encode fails the dense
/// and SPLADE paths with a reason that says so, while BM25 still serves.
#[test]
fn an_engine_without_encoders_answers_encoded_queries_only() {
    let e = engine();
    let bare = Engine::without_encoders(e.index().clone());
    assert!(bare.dense_encoder().is_err() && bare.sparse_encoder().is_err());
    let mut req = SearchRequest::new("iPhone net sales by region", 10);
    let (prepared, _) = e.prepare_request(&req);
    req.prepared = Some(Arc::new(prepared));
    let (a, b) = (e.retrieve_paths(&req).unwrap(), bare.retrieve_paths(&req).unwrap());
    assert_eq!(a.used_paths, Path::ALL.to_vec());
    assert_eq!((a.used_paths, a.lists), (b.used_paths, b.lists));

    let out = bare.retrieve_paths(&SearchRequest::new("iPhone net sales by region", 10)).unwrap();
    assert_eq!(out.used_paths, [Path::Bm25]);
    let failed: Vec<Path> = out.failed_paths.iter().map(|(p, _)| *p).collect();
    assert_eq!(failed, [Path::Dense, Path::Splade]);
    assert!(out.failed_paths.iter().all(|(_, why)| why.contains("loads no models")), "{:?}", out.failed_paths);
}
