//! A sharded index answers as one index: the same top 10, the same scores to the bit, at
//! any shard count; it survives a shard that fails; it is saved and loaded by its root.

use std::sync::{Arc, OnceLock};

use super::*;
use crate::build::{build, build_shards, BuildOptions, EncodedShard, InProcess, Previous, DEFAULT_DENSE_WINDOW};
use crate::corpus::{load_beir, Document};
use crate::encode::{DenseEncoder, ModelSet, SparseEncoder};
use crate::error::Error;
use crate::index::format::ModelRef;
use crate::index::{Bitset, Bm25Params, Index, ShardStore};
use crate::pipeline::{ChunkSource, IndexView};
use crate::pipeline::{Engine, Path, PathHit, PathRetriever, PreparedQuery, SearchOutcome, SearchRequest};
use crate::storage::LocalDir;
use crate::testutil::{model_dir, shared_dir};

struct Fixture {
    dense: Arc<DenseEncoder>,
    sparse: Arc<SparseEncoder>,
    documents: Vec<Document>,
    queries: Vec<String>,
    options: BuildOptions,
    single: Engine,
    encoded: Vec<EncodedShard>,
}

/// SciFact's first 400 abstracts as one index, built once per test process with the
/// real models, and 80 of its test claims.
fn fixture() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        let set = load_beir(&shared_dir().join("data/scifact"), "test").unwrap();
        let documents: Vec<Document> = set.documents.into_iter().take(400).collect();
        let queries = set.queries.into_iter().take(80).map(|(_, q)| q).collect();
        let models = ModelSet::under(&model_dir());
        let dense = Arc::new(DenseEncoder::load(&models.dense).unwrap());
        let sparse = Arc::new(SparseEncoder::load(&models.sparse).unwrap());
        let options = BuildOptions {
            index_id: "scifact-400".into(),
            chunk_tokens: 200,
            chunk_overlap: 0,
            dense_window: DEFAULT_DENSE_WINDOW,
            bm25: Bm25Params::default(),
            dense_model: ModelRef { id: "d".into(), weights_sha256: "x".into() },
            sparse_model: ModelRef { id: "s".into(), weights_sha256: "y".into() },
            shard_chunks: 256,
        };
        let runner = InProcess { dense: &dense, sparse: &sparse };
        let tokenizers = (dense.tokenizer(), sparse.tokenizer());
        let built =
            build(documents.clone(), Vec::new(), &options, tokenizers, &Previous::none(), &runner, &|_, _, _| {})
                .unwrap();
        let single = Engine::new(Arc::new(built.index.unwrap()), dense.clone(), sparse.clone(), None);
        Fixture { dense, sparse, documents, queries, options, single, encoded: built.shards }
    })
}

/// The fixture's documents as `k` shards, from the single index's vectors.
fn shard_indexes(k: usize) -> Shards {
    let f = fixture();
    let runner = InProcess { dense: &f.dense, sparse: &f.sparse };
    let tokenizers = (f.dense.tokenizer(), f.sparse.tokenizer());
    let previous = Previous::with_vectors(&f.encoded);
    let built =
        build_shards(f.documents.clone(), &f.options, tokenizers, &previous, &runner, k, &|_, _, _| {}).unwrap();
    assert_eq!(built.report.chunks_encoded, 0, "sharding reuses every vector");
    let shards = built.shards.expect("a first sharded build is never unchanged");
    assert_eq!(shards.indexes.len(), k);
    shards
}

fn engines(indexes: Vec<Index>) -> Vec<Engine> {
    let f = fixture();
    indexes.into_iter().map(|i| Engine::new(Arc::new(i), f.dense.clone(), f.sparse.clone(), None)).collect()
}

/// What a router loads of `index` as one shard's store: its documents, no text.
fn store_of(index: &Index) -> ShardStore {
    let storage = crate::storage::MemStore::new("mem://store");
    index.save(&storage).unwrap();
    ShardStore::load(&storage).unwrap()
}

/// The engine a router searches with: the models, over the first store's empty index.
fn router_engine(stores: &[Arc<ShardStore>], reranker: Option<Arc<dyn crate::pipeline::Reranker>>) -> Arc<Engine> {
    let f = fixture();
    Arc::new(Engine::new(Arc::new(stores[0].router_index()), f.dense.clone(), f.sparse.clone(), reranker))
}

/// The shards searched as one, in the single index's order, by a router that holds their
/// stores (no text) and asks the shards, in this process, through the protocol.
fn shard_set(shards: Shards) -> ShardSet {
    let stores: Vec<Arc<ShardStore>> = shards.indexes.iter().map(|i| Arc::new(store_of(i))).collect();
    let router = router_engine(&stores, None);
    let asked = engines(shards.indexes).into_iter().map(|e| Arc::new(e) as Arc<dyn Shard>).collect();
    ShardSet::with_shards(router, stores, asked, Some(shards.order), shards.stats).unwrap()
}

/// A search at the API's default fusion, exact on every path (300 candidates a path is
/// above the HNSW beam, and these indexes are small enough to be searched exactly).
fn request(q: &str) -> SearchRequest {
    let mut req = SearchRequest::new(q, 10);
    req.per_path_k = 300;
    req
}

/// Each hit as (document id, chunk text, score bits, each path's score bits).
type Seen = Vec<(String, String, u32, Vec<(Path, u32)>)>;

fn seen(out: &SearchOutcome, index: &dyn IndexView) -> Seen {
    out.hits
        .iter()
        .map(|h| {
            let paths = h.diagnostics.paths.iter().map(|(p, r)| (*p, r.score.to_bits())).collect();
            (index.document(h.chunk).document_id.clone(), index.text(h.chunk).to_string(), h.score.to_bits(), paths)
        })
        .collect()
}

/// What a sharded search returned, read as its results are: with the text it fetched.
fn seen_sharded(set: &ShardSet, out: ShardedOutcome) -> Seen {
    seen(&out.outcome, &ResultsView::new(set, out.fetched))
}

#[test]
fn every_query_answers_the_same_at_any_shard_count() {
    let f = fixture();
    let single: Vec<Seen> =
        f.queries.iter().map(|q| seen(&f.single.search(&request(q)).unwrap(), &**f.single.index())).collect();
    for k in [1, 2, 3, 7] {
        let set = shard_set(shard_indexes(k));
        if k > 1 {
            assert!(set.stores().iter().all(|i| i.chunk_count() > 0), "every shard holds documents");
        }
        let texts = set.stores().iter().flat_map(|i| i.documents.iter()).all(|d| d.segments.is_empty());
        assert!(texts, "the router holds no text");
        for (q, want) in f.queries.iter().zip(&single) {
            let out = set.search(&request(q)).unwrap();
            assert_eq!((out.answered, out.of, out.degraded()), (k, k, false));
            assert_eq!(out.fetched.len(), 10, "the fetch phase brings the results' text, and only theirs");
            // Ids, order, text, fused relevance and every path's score, to the bit.
            assert_eq!(&seen_sharded(&set, out), want, "K = {k}: {q}");
        }
        // What dense feedback asks of the shards (scores for two queries, nearest windows)
        // is the single index's, chunk by chunk, in any order of global ids.
        let index: &Index = f.single.index();
        let (a, b) = (f.dense.embed(&f.queries[0]).unwrap(), f.dense.embed(&f.queries[1]).unwrap());
        let all: Vec<u32> = (0..index.chunks.len() as u32).rev().step_by(3).collect();
        let bits = |rows: Vec<Vec<f32>>| -> Vec<Vec<u32>> {
            rows.into_iter().map(|r| r.into_iter().map(f32::to_bits).collect()).collect()
        };
        let scores = |c: &dyn ChunkSource| bits(c.dense_scores(&all, &[&a, &b]).unwrap());
        assert_eq!(scores(&set), scores(index), "K = {k}: dense scores");
        let nearest = |c: &dyn ChunkSource| bits(c.nearest_windows(&all, &b).unwrap());
        assert_eq!(nearest(&set), nearest(index), "K = {k}: nearest windows");
        // So are the texts a reranker reads, and each chunk's segments.
        let texts =
            |c: &dyn ChunkSource| c.texts(&all).unwrap().into_iter().map(|t| t.into_owned()).collect::<Vec<_>>();
        assert_eq!(texts(&set), texts(index), "K = {k}: texts");
        let (mut fetched, failed) = set.fetch(&all, true);
        assert!(failed.is_empty());
        for &c in &all {
            assert_eq!(fetched.remove(&c).unwrap().segments, index.segments_of(c), "K = {k}: chunk {c}'s segments");
        }
    }
}

#[test]
fn evidence_spans_weigh_terms_by_the_whole_index_at_any_shard_count() {
    use crate::pipeline::evidence::best_span;
    let f = fixture();
    let single: &dyn IndexView = &**f.single.index();
    for k in [2, 3, 7] {
        let set = shard_set(shard_indexes(k));
        for q in f.queries.iter().take(20) {
            for t in single.analyzer().terms(q) {
                assert_eq!(set.idf(&t).to_bits(), single.idf(&t).to_bits(), "K = {k}: idf of {t:?}");
            }
            let out = set.search(&request(q)).unwrap();
            let hits = out.outcome.hits.clone();
            let results = ResultsView::new(&set, out.fetched);
            for h in &hits {
                let span = |index: &dyn IndexView, c: u32| {
                    best_span(index.text(c), q, &index.analyzer(), &|t| index.idf(t), 12).map(|e| e.text)
                };
                // The router numbers chunks as the single index does.
                assert_eq!(span(&results, h.chunk), span(single, h.chunk), "K = {k}: {q}");
            }
        }
    }
}

#[test]
fn a_sharded_index_is_saved_and_loaded_by_its_root() {
    let shards = shard_indexes(3);
    let dir = tempfile::tempdir().unwrap();
    let storage = LocalDir::new(dir.path());
    let root = save_sharded(&storage, &shards, &[]).unwrap();
    assert_eq!(root.shards.len(), 3);
    assert_eq!(root.shards.iter().map(|s| s.documents).sum::<usize>(), 400);
    let (loaded_root, loaded) = load_sharded(&storage).unwrap().expect("a root");
    assert_eq!((&loaded_root, &loaded.stats, &loaded.order), (&root, &shards.stats, &shards.order));
    let set = shard_set(loaded);
    let f = fixture();
    let q = &f.queries[0];
    let want = seen(&f.single.search(&request(q)).unwrap(), &**f.single.index());
    assert_eq!(seen_sharded(&set, set.search(&request(q)).unwrap()), want);

    // A single index has no root: it loads as today.
    assert!(load_sharded(&LocalDir::new(dir.path().join("shards/000"))).unwrap().is_none());
    // A shard rebuilt under the root's feet is another version: refused, by name.
    shards.indexes[0].save(&crate::storage::Within::new(&storage, shard_prefix(1))).unwrap();
    let err = load_sharded(&storage).err().expect("a shard the root does not name");
    assert!(err.to_string().contains("shards/001/manifest.json"), "{err}");
}

/// Builds the fixture's documents into `storage` as `k` shards (1: a single index), with
/// the vectors already there, and returns the report.
fn build_into(storage: &dyn crate::storage::Storage, k: usize) -> crate::build::BuildReport {
    let f = fixture();
    let runner = InProcess { dense: &f.dense, sparse: &f.sparse };
    let tokenizers = (f.dense.tokenizer(), f.sparse.tokenizer());
    let previous = Previous::read(storage);
    let docs = f.documents.clone();
    let report = match k {
        1 => {
            build(docs, Vec::new(), &f.options, tokenizers, &previous, &runner, &|_, _, _| {})
                .unwrap()
                .save(storage, &previous)
                .unwrap()
                .report
        }
        _ => build_shards(docs, &f.options, tokenizers, &previous, &runner, k, &|_, _, _| {})
            .unwrap()
            .save(storage, &previous)
            .unwrap(),
    };
    assert_eq!(report.chunks_encoded, 0, "every vector is in the directory's cache");
    report
}

#[test]
fn an_index_directory_holds_its_last_build_whatever_the_shard_count() {
    use crate::index::format::MANIFEST;
    use crate::storage::Storage;
    let f = fixture();
    // On disk: a memory store hands a blob out only once.
    let dir = tempfile::tempdir().unwrap();
    let storage = LocalDir::new(dir.path());
    // The first build, a single index, reuses the fixture's vectors from memory.
    let runner = InProcess { dense: &f.dense, sparse: &f.sparse };
    let tokenizers = (f.dense.tokenizer(), f.sparse.tokenizer());
    let previous = Previous::with_vectors(&f.encoded);
    build(f.documents.clone(), Vec::new(), &f.options, tokenizers, &previous, &runner, &|_, _, _| {})
        .unwrap()
        .save(&storage, &previous)
        .unwrap();
    let has = |key: &str| storage.exists(key).unwrap();

    assert!(!build_into(&storage, 3).unchanged);
    assert!(has(ROOT_MANIFEST) && has("shards/002/manifest.json"));
    assert!(!has(MANIFEST), "the single index the root shadows is removed");

    let root = storage.read(ROOT_MANIFEST).unwrap();
    assert!(build_into(&storage, 3).unchanged, "same inputs, same count");
    assert_eq!(storage.read(ROOT_MANIFEST).unwrap(), root, "an unchanged build writes nothing");

    assert!(!build_into(&storage, 2).unchanged);
    assert!(!has("shards/002/manifest.json") && !has("shards/002/documents.order"), "shard 2 is gone");
    assert_eq!(load_sharded(&storage).unwrap().expect("a root").1.indexes.len(), 2);

    // The same inputs as the first single build: still a build, since the root shadowed it.
    assert!(!build_into(&storage, 1).unchanged);
    assert!(!has(ROOT_MANIFEST) && !has(STATS_FILE) && !has("shards/000/manifest.json"));
    assert!(load_sharded(&storage).unwrap().is_none());
    assert_eq!(Index::load(&storage).unwrap().documents.len(), 400);
}

/// Fails every search, as a shard whose process died would.
struct Down(Path);
impl PathRetriever for Down {
    fn path(&self) -> Path {
        self.0
    }
    fn retrieve(&self, _: &PreparedQuery, _: Option<&Bitset>, _: usize) -> crate::error::Result<Vec<PathHit>> {
        Err(Error::Component { component: self.0.name().into(), reason: "shard down".into() })
    }
}

/// Answers as its engine does after `.1`, as a shard on a slow or overloaded machine
/// would. It waits in the thread the router asks it from, so it holds none of the threads
/// the other shards search on (a path that slept would hold one of a two-core machine's
/// two, and leave every other test of the process, and the other shards, the second).
struct Slow(Engine, std::time::Duration);
impl Shard for Slow {
    fn ask(&self, request: &ShardRequest) -> crate::error::Result<ShardResponse> {
        std::thread::sleep(self.1);
        self.0.ask(request)
    }
}

#[test]
fn a_shard_that_misses_the_deadline_is_left_out() {
    let f = fixture();
    let built = shard_indexes(3);
    let (order, stats) = (built.order.clone(), built.stats.clone());
    let stores: Vec<Arc<ShardStore>> = built.indexes.iter().map(|i| Arc::new(store_of(i))).collect();
    let mut searching = engines(built.indexes);
    let first = searching.remove(0);
    let mut asked: Vec<Arc<dyn Shard>> = searching.into_iter().map(|e| Arc::new(e) as Arc<dyn Shard>).collect();
    asked.insert(0, Arc::new(Slow(first, std::time::Duration::from_secs(20))));
    // Generous for the shards that answer (a search of one takes well under a second, in
    // a debug build beside other tests), far short of the slow one.
    let set = ShardSet::with_shards(router_engine(&stores, None), stores, asked, Some(order), stats)
        .unwrap()
        .with_deadline(std::time::Duration::from_secs(8));
    let out = set.search(&request(&f.queries[0])).unwrap();
    assert_eq!((out.answered, out.of, out.degraded()), (2, 3, true));
    assert_eq!(out.failed_shards[0].0, 0);
    assert!(out.failed_shards[0].1.contains("deadline of 8000 ms"), "{}", out.failed_shards[0].1);
    assert_eq!(out.outcome.hits.len(), 10);
}

fn down(engine: Engine) -> Engine {
    Path::ALL.iter().fold(engine, |e, &p| e.with_retriever(Box::new(Down(p))))
}

#[test]
fn a_shard_that_fails_leaves_the_answer_to_the_others() {
    let f = fixture();
    let built = shard_indexes(3);
    let order = built.order.clone();
    let mut shards = engines(built.indexes);
    let lost: std::collections::HashSet<String> =
        shards[1].index().documents.iter().map(|d| d.document_id.clone()).collect();
    let failing = down(shards.remove(1));
    shards.insert(1, failing);
    let set = ShardSet::new(shards, Some(order), built.stats).unwrap();
    for q in f.queries.iter().take(10) {
        let out = set.search(&request(q)).unwrap();
        assert_eq!((out.answered, out.of, out.degraded()), (2, 3, true));
        assert_eq!(out.failed_shards.len(), 1);
        assert_eq!(out.failed_shards[0].0, 1);
        assert!(out.partial.is_empty());
        assert_eq!(out.outcome.hits.len(), 10);
        assert!(out.outcome.hits.iter().all(|h| !lost.contains(&set.document(h.chunk).document_id)));
    }
    // A shard whose dense path fails answers with its other paths: a partial answer, said so.
    let built = shard_indexes(3);
    let order = built.order.clone();
    let mut shards = engines(built.indexes);
    let dense_down = shards.remove(2).with_retriever(Box::new(Down(Path::Dense)));
    shards.push(dense_down);
    let set = ShardSet::new(shards, Some(order), built.stats).unwrap();
    let out = set.search(&request(&f.queries[0])).unwrap();
    assert_eq!((out.answered, out.of, out.degraded()), (3, 3, true));
    assert_eq!(out.partial.len(), 1);
    assert_eq!((out.partial[0].0, out.partial[0].1), (2, Path::Dense));
    assert!(out.outcome.failed_paths.is_empty(), "dense served on the other shards");
    assert_eq!(out.outcome.hits.len(), 10);

    let two = shard_indexes(2);
    let none = ShardSet::new(engines(two.indexes).into_iter().map(down).collect(), None, two.stats).unwrap();
    match none.search(&request(&f.queries[0])) {
        Err(Error::NoShardAnswered(why)) => assert!(why.contains("shard 0") && why.contains("shard 1"), "{why}"),
        other => panic!("expected no shard to answer: {:?}", other.map(|o| o.answered)),
    }
}

/// Searches as its engine does, and fails every fetch of text, as a shard whose process
/// died between the two phases would.
struct NoText(Engine);
impl Shard for NoText {
    fn ask(&self, request: &ShardRequest) -> crate::error::Result<ShardResponse> {
        match request {
            ShardRequest::Fetch(_) => Err(Error::Component { component: "shard".into(), reason: "gone".into() }),
            other => self.0.ask(other),
        }
    }
}

#[test]
fn a_shard_that_fails_to_give_its_results_text_is_left_out() {
    let f = fixture();
    let built = shard_indexes(3);
    let (order, stats) = (built.order.clone(), built.stats.clone());
    let stores: Vec<Arc<ShardStore>> = built.indexes.iter().map(|i| Arc::new(store_of(i))).collect();
    let lost: std::collections::HashSet<String> = stores[1].documents.iter().map(|d| d.document_id.clone()).collect();
    let router = router_engine(&stores, None);
    let mut searching = engines(built.indexes);
    let middle = searching.remove(1);
    let mut asked: Vec<Arc<dyn Shard>> = searching.into_iter().map(|e| Arc::new(e) as Arc<dyn Shard>).collect();
    asked.insert(1, Arc::new(NoText(middle)));
    let set = ShardSet::with_shards(router.clone(), stores.clone(), asked, Some(order.clone()), stats.clone()).unwrap();
    let mut dropped = 0;
    for q in f.queries.iter().take(10) {
        let single = f.single.search(&request(q)).unwrap();
        let kept =
            single.hits.iter().filter(|h| !lost.contains(&f.single.index().document(h.chunk).document_id)).count();
        dropped += 10 - kept;
        let out = set.search(&request(q)).unwrap();
        if kept == 10 {
            assert_eq!((out.answered, out.degraded()), (3, false), "shard 1 had no result to give: {q}");
            continue;
        }
        assert_eq!((out.answered, out.of, out.degraded()), (2, 3, true), "{q}");
        assert_eq!(out.failed_shards[0].0, 1);
        assert!(out.failed_shards[0].1.contains("results' text"), "{}", out.failed_shards[0].1);
        // The other shards' results stand, in the single index's order, with their text.
        let results = ResultsView::new(&set, out.fetched);
        let ids: Vec<String> = out.outcome.hits.iter().map(|h| results.document(h.chunk).document_id.clone()).collect();
        assert_eq!(out.outcome.hits.len(), kept, "{q}");
        assert!(ids.iter().all(|d| !lost.contains(d)));
        assert!(out.outcome.hits.iter().all(|h| !results.text(h.chunk).is_empty()));
    }
    assert!(dropped > 0, "some question's results were in shard 1");
    // With every shard failing to give text, the search fails: nothing can be cited.
    let indexes = shard_indexes(3).indexes;
    let asked = engines(indexes).into_iter().map(|e| Arc::new(NoText(e)) as Arc<dyn Shard>).collect();
    let none = ShardSet::with_shards(router, stores, asked, Some(order), stats).unwrap();
    match none.search(&request(&f.queries[0])) {
        Err(Error::NoShardAnswered(why)) => assert!(why.contains("results' text"), "{why}"),
        other => panic!("expected no shard to answer: {:?}", other.map(|o| o.answered)),
    }
}

/// Ranks candidates by their text, longest first: a reranker that reads what it ranks.
struct ByLength;
impl crate::pipeline::Reranker for ByLength {
    fn rerank(
        &self,
        _: &str,
        candidates: &[crate::pipeline::Candidate<'_>],
    ) -> crate::error::Result<Vec<crate::pipeline::Reranked>> {
        let longest = candidates.iter().map(|c| c.text.len()).max().unwrap_or(1).max(1) as f32;
        let mut out: Vec<_> = candidates
            .iter()
            .map(|c| crate::pipeline::Reranked { chunk: c.chunk, score: c.text.len() as f32 / longest })
            .collect();
        out.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.chunk.cmp(&b.chunk)));
        Ok(out)
    }
}

#[test]
fn a_reranker_reads_the_text_the_router_fetches_for_it() {
    use crate::pipeline::RerankStatus;
    let f = fixture();
    let single = Engine::new(f.single.index().clone(), f.dense.clone(), f.sparse.clone(), Some(Arc::new(ByLength)));
    let built = shard_indexes(3);
    let stores: Vec<Arc<ShardStore>> = built.indexes.iter().map(|i| Arc::new(store_of(i))).collect();
    let router = router_engine(&stores, Some(Arc::new(ByLength)));
    let asked = engines(built.indexes).into_iter().map(|e| Arc::new(e) as Arc<dyn Shard>).collect();
    let set = ShardSet::with_shards(router, stores, asked, Some(built.order), built.stats).unwrap();
    for q in f.queries.iter().take(10) {
        let want = single.search(&request(q)).unwrap();
        assert_eq!(want.rerank, RerankStatus::Applied);
        let out = set.search(&request(q)).unwrap();
        assert_eq!(out.outcome.rerank, RerankStatus::Applied, "{q}");
        assert_eq!(seen_sharded(&set, out), seen(&want, &**single.index()), "{q}");
    }
}
