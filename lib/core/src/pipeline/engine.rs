//! The engine: one index, the query encoders and an optional reranker.

use std::sync::Arc;
use std::time::Instant;

use super::adaptive::{adaptive_weights, agreement, confidence, identifier_share};
use super::chunks::ChunkSource;
use super::feedback::{feedback_query, feedback_weight};
use super::fusion::{groups_in_order, recall_tail, rrf_fuse, rrf_fuse_grouped, zscore_fuse_grouped, Fused};
use super::instructions::lexical_query;
use super::paths::{Bm25Path, DensePath, Path, PathHit, PathRetriever, PreparedQuery, SpladePath};
use super::request::{Diagnostics, Hit, PathRank, Recency, RerankStatus, SearchOutcome, SearchRequest, StageTimings};
use super::rerank::{Candidate, CrossEncoderReranker, Reranker};
use super::settings::{FusionConfig, FusionMethod};
use super::top::top_by_score;
use crate::corpus::Date;
use crate::encode::{encoders_take_turns, join_encoders, Backend, DenseEncoder, SparseEncoder};
use crate::error::{Error, Result, Stage};
use crate::index::{Bitset, Index};

/// The two texts of a query: whole for the dense encoder, without instructions for the
/// lexical paths.
#[derive(Clone, Copy)]
struct QueryTexts<'a> {
    full: &'a str,
    lexical: &'a str,
}

/// A query encoded for some paths: what ran, whether the text was cut (known when the
/// dense encoder ran), and the last encoder error.
struct Encoding {
    query: PreparedQuery,
    truncated: Option<bool>,
    error: Option<String>,
}

/// What one branch of a search produced: its paths' results and how long encoding took.
#[derive(Default)]
struct Branch {
    encode_ms: f64,
    truncated: Option<bool>,
    /// The query's dense vector, when the branch encoded it (or was given it).
    dense_query: Option<Vec<f32>>,
    results: Vec<(Path, Result<Vec<PathHit>>, f64)>,
}

/// What the retrieval half of a search found ([`Engine::retrieve_paths`]), for its second half
/// ([`Engine::finish`]).
#[derive(Debug, Clone, Default)]
pub struct Retrieved {
    /// Each served path's list, best first (`lists[i]` from `used_paths[i]`).
    pub lists: Vec<Vec<PathHit>>,
    /// The paths that served, in the request's order.
    pub used_paths: Vec<Path>,
    /// Paths that failed and why.
    pub failed_paths: Vec<(Path, String)>,
    /// Paths asked for that are not ready yet.
    pub paths_pending: Vec<Path>,
    /// The query's dense vector, when the dense path ran.
    pub dense_query: Option<Vec<f32>>,
    /// Chunks that passed the filter.
    pub candidates: usize,
    /// Whether the query was cut to the model window.
    pub query_truncated: bool,
    /// Encoding and per-path timings.
    pub timings: StageTimings,
}

/// The two query encoders of an engine.
#[derive(Clone)]
struct QueryEncoders {
    dense: Arc<DenseEncoder>,
    sparse: Arc<SparseEncoder>,
}

/// One index with everything needed to search it.
pub struct Engine {
    index: Arc<Index>,
    /// `None`: the engine answers only queries encoded elsewhere ([`Engine::without_encoders`]).
    encoders: Option<QueryEncoders>,
    reranker: Option<Arc<dyn Reranker>>,
    retrievers: Vec<Box<dyn PathRetriever>>,
    newest_day: Option<i64>,
    ready: Vec<Path>,
}

fn ms(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1e3
}

impl Engine {
    /// Assembles an engine.
    pub fn new(
        index: Arc<Index>,
        dense: Arc<DenseEncoder>,
        sparse: Arc<SparseEncoder>,
        reranker: Option<Arc<dyn Reranker>>,
    ) -> Self {
        Self::assemble(index, Some(QueryEncoders { dense, sparse }), reranker)
    }

    /// An engine over `index` with no models: it answers only queries encoded elsewhere
    /// ([`SearchRequest::prepared`]), as an index shard answers its router
    /// ([`crate::shards::protocol::answer`]), so a process that serves a shard loads no
    /// model. A query it would have to encode fails the paths that need the encoding.
    pub fn without_encoders(index: Arc<Index>) -> Self {
        Self::assemble(index, None, None)
    }

    fn assemble(index: Arc<Index>, encoders: Option<QueryEncoders>, reranker: Option<Arc<dyn Reranker>>) -> Self {
        let retrievers: Vec<Box<dyn PathRetriever>> = vec![
            Box::new(DensePath(index.clone())),
            Box::new(Bm25Path(index.clone())),
            Box::new(SpladePath(index.clone())),
        ];
        let newest_day = index.newest_day();
        Engine { index, encoders, reranker, retrievers, newest_day, ready: Path::ALL.to_vec() }
    }

    /// The query encoders, or what to say when this engine has none.
    fn encoders(&self) -> Result<&QueryEncoders> {
        self.encoders.as_ref().ok_or_else(|| Error::Component {
            component: "query encoders".into(),
            reason: "this engine loads no models: it answers queries encoded elsewhere (an index shard)".into(),
        })
    }

    /// Serves only `paths` (the others are still building: a search leaves them out and
    /// reports them in [`SearchOutcome::paths_pending`]).
    pub fn with_ready_paths(mut self, paths: &[Path]) -> Self {
        self.ready = Path::ALL.iter().copied().filter(|p| paths.contains(p)).collect();
        self
    }

    /// The paths this engine serves.
    pub fn ready_paths(&self) -> &[Path] {
        &self.ready
    }

    /// Whether some path is not ready yet.
    pub fn degraded(&self) -> bool {
        self.ready.len() < Path::ALL.len()
    }

    /// The same models over another index (a newly published version of the same
    /// corpus): refused unless that index was built with the same dense and SPLADE weights.
    pub fn with_index(&self, index: Arc<Index>) -> Result<Engine> {
        let (old, new) = (&self.index.manifest, &index.manifest);
        for (what, a, b) in
            [("dense", &old.dense_model, &new.dense_model), ("sparse", &old.sparse_model, &new.sparse_model)]
        {
            if a.weights_sha256 != b.weights_sha256 {
                return Err(Error::IndexCorrupted {
                    file: format!("{}/manifest.json", new.index_id),
                    expected: format!("{what} model {} ({}), the one loaded", a.id, a.weights_sha256),
                    found: format!("{} ({})", b.id, b.weights_sha256),
                });
            }
        }
        Ok(self.sharing_encoders(index, self.reranker.clone()))
    }

    /// An engine over `index` with this engine's encoders (or none) and `reranker`, not
    /// checked against the weights `index` was built with ([`with_index`](Self::with_index)
    /// checks them).
    pub fn sharing_encoders(&self, index: Arc<Index>, reranker: Option<Arc<dyn Reranker>>) -> Engine {
        Self::assemble(index, self.encoders.clone(), reranker)
    }

    /// Replaces the retriever of one path (tests use this to make a path fail).
    pub fn with_retriever(mut self, r: Box<dyn PathRetriever>) -> Self {
        self.retrievers.retain(|x| x.path() != r.path());
        self.retrievers.push(r);
        self
    }

    /// Sets or removes the reranker: any [`Reranker`] of the library (the cross-encoder,
    /// a hosted service through a callback, a pipeline of them).
    pub fn with_reranker(mut self, r: Option<Arc<dyn Reranker>>) -> Self {
        self.reranker = r;
        self
    }

    /// The index searched.
    pub fn index(&self) -> &Arc<Index> {
        &self.index
    }

    /// The dense encoder (an error for an engine [without encoders](Self::without_encoders)).
    pub fn dense_encoder(&self) -> Result<&Arc<DenseEncoder>> {
        Ok(&self.encoders()?.dense)
    }

    /// The SPLADE encoder (an error for an engine [without encoders](Self::without_encoders)).
    pub fn sparse_encoder(&self) -> Result<&Arc<SparseEncoder>> {
        Ok(&self.encoders()?.sparse)
    }

    /// Whether a reranker is configured.
    pub fn has_reranker(&self) -> bool {
        self.reranker.is_some()
    }

    /// Encodes a query for the paths that need it, and tells whether it was cut to the
    /// model window. On tract dense and SPLADE run in parallel (each runs on one thread);
    /// on ONNX Runtime one after the other, each on the whole thread pool (measured on 2
    /// cores: 4.7 ms in sequence against 5.0 ms side by side).
    pub fn prepare(&self, text: &str, paths: &[Path]) -> Result<(PreparedQuery, bool)> {
        let lexical = lexical_query(text);
        Ok(self.prepare_texts(QueryTexts { full: text, lexical: &lexical }, paths))
    }

    fn prepare_texts(&self, text: QueryTexts<'_>, paths: &[Path]) -> (PreparedQuery, bool) {
        let dense_paths: Vec<Path> = paths.iter().copied().filter(|&p| p == Path::Dense).collect();
        let sparse_paths: Vec<Path> = paths.iter().copied().filter(|&p| p == Path::Splade).collect();
        let (d, s) =
            join_encoders(self.backends(), || self.encode(text, &dense_paths), || self.encode(text, &sparse_paths));
        // An encoder failure is a failure of its path only, reported by the retriever.
        let query = PreparedQuery { text: text.lexical.to_string(), dense: d.query.dense, sparse: s.query.sparse };
        (query, self.query_truncated(text.full, d.truncated))
    }

    /// The backends of the two encoders (ONNX Runtime's without encoders: then nothing is
    /// encoded, and the two branches only retrieve).
    fn backends(&self) -> (Backend, Backend) {
        match &self.encoders {
            Some(e) => (e.dense.backend(), e.sparse.backend()),
            None => (Backend::OnnxRuntime, Backend::OnnxRuntime),
        }
    }

    /// Whether `text` is cut to the model window: known from the dense encoding when it
    /// ran, else learnt by tokenizing once more (never, without encoders).
    fn query_truncated(&self, text: &str, from_dense: Option<bool>) -> bool {
        from_dense.unwrap_or_else(|| match &self.encoders {
            Some(e) => e.dense.tokenizer().encode(text).map(|e| e.truncated).unwrap_or(false),
            None => false,
        })
    }

    /// Runs the encoders `paths` need on `text` (one after the other), keeping the last
    /// encoder error instead of failing.
    fn encode(&self, text: QueryTexts<'_>, paths: &[Path]) -> Encoding {
        let mut out = Encoding {
            query: PreparedQuery { text: text.lexical.to_string(), dense: None, sparse: None },
            truncated: None,
            error: None,
        };
        if !paths.iter().any(|p| matches!(p, Path::Dense | Path::Splade)) {
            return out;
        }
        let encoders = match self.encoders() {
            Ok(e) => e,
            Err(e) => {
                out.error = Some(e.to_string());
                return out;
            }
        };
        if paths.contains(&Path::Dense) {
            match encoders.dense.embed_query(text.full) {
                Ok((v, truncated)) => {
                    out.query.dense = Some(v);
                    out.truncated = Some(truncated);
                }
                Err(e) => out.error = Some(e.to_string()),
            }
        }
        if paths.contains(&Path::Splade) {
            match encoders.sparse.encode(text.lexical) {
                Ok(v) => out.query.sparse = Some(v),
                Err(e) => out.error = Some(e.to_string()),
            }
        }
        out
    }

    /// Encodes `text` for `paths` (only what they need) and runs their retrievers in order.
    /// An encoder failure fails the paths that needed it, not the search.
    /// Dense hits under `min_dense` are dropped.
    /// `encoded`, when given, is the query already encoded for these paths.
    fn run_branch(
        &self,
        text: QueryTexts<'_>,
        paths: &[Path],
        allowed: Option<&Bitset>,
        k: &(dyn Fn(Path) -> usize + Sync),
        min_dense: Option<f32>,
        encoded: Option<(Encoding, f64)>,
    ) -> Branch {
        let mut branch = Branch::default();
        if paths.is_empty() {
            return branch;
        }
        let t = Instant::now();
        let (Encoding { query, truncated, error: encode_error }, encode_ms) =
            encoded.unwrap_or_else(|| (self.encode(text, paths), ms(t)));
        branch.truncated = truncated;
        branch.encode_ms = encode_ms;
        for &p in paths {
            let Some(r) = self.retrievers.iter().find(|r| r.path() == p) else { continue };
            let t = Instant::now();
            let needs_encoding = match p {
                Path::Dense => query.dense.is_none(),
                Path::Splade => query.sparse.is_none(),
                Path::Bm25 => false,
            };
            let result = match (&encode_error, needs_encoding) {
                (Some(e), true) => {
                    Err(Error::Component { component: p.name().into(), reason: format!("query encoding failed: {e}") })
                }
                _ => r.retrieve(&query, allowed, k(p)),
            };
            let result = match (p, min_dense) {
                (Path::Dense, Some(min)) => result.map(|hits| hits.into_iter().filter(|h| h.1 >= min).collect()),
                _ => result,
            };
            branch.results.push((p, result, ms(t)));
        }
        branch.dense_query = query.dense;
        branch
    }

    /// The per-query weight of each path's list (see [`FusionConfig`]): the base weights,
    /// adapted to each path's confidence and agreement on this query over its `units`
    /// (documents or chunks, as the fusion reads them), then rescaled to the base weights'
    /// total (one common factor: the fused order is unchanged, and fused scores stay on the
    /// scale of the base weights).
    fn fusion_weights(fusion: &FusionConfig, paths: &[Path], units: &[Vec<(u32, f32)>]) -> Vec<f32> {
        let base: Vec<f32> = paths.iter().map(|&p| fusion.weight(p)).collect();
        if (fusion.alpha == 0.0 && fusion.agreement == 0.0) || units.len() < 2 {
            return base;
        }
        let conf: Vec<f32> = match fusion.alpha {
            0.0 => vec![0.0; units.len()],
            _ => units
                .iter()
                .map(|l| confidence(&l.iter().map(|u| u.1).collect::<Vec<_>>(), fusion.confidence_depth))
                .collect(),
        };
        let ids: Vec<Vec<u32>> = units.iter().map(|l| l.iter().map(|u| u.0).collect()).collect();
        let views: Vec<&[u32]> = ids.iter().map(Vec::as_slice).collect();
        let agree: Vec<f32> = (0..views.len()).map(|i| agreement(&views, i, fusion.agreement_depth)).collect();
        let w = adaptive_weights(&base, &conf, fusion.alpha, &agree, fusion.agreement);
        let (sum_base, sum_w) = (base.iter().sum::<f32>(), w.iter().sum::<f32>());
        if sum_w > 0.0 && sum_w.is_finite() {
            w.iter().map(|x| x * sum_base / sum_w).collect()
        } else {
            base
        }
    }

    /// Fuses the paths' lists for `query` (`paths[i]` gave `lists[i]`, best first) as
    /// `fusion` says: each list read as units (documents at their best chunk, or chunks),
    /// per-query weights over those units and the query's wording ([`FusionConfig`]), then
    /// z-scores or RRF. Every chunk of the lists comes back, best first, with its rank in
    /// each list.
    pub fn fuse(
        &self,
        fusion: &FusionConfig,
        query: &str,
        paths: &[Path],
        lists: &[Vec<PathHit>],
    ) -> Result<Vec<Fused<u32>>> {
        Self::fuse_with(&*self.index, fusion, query, paths, lists, &[])
    }

    /// [`fuse`](Self::fuse) over the chunks of `chunks`, each list's per-query weight then
    /// multiplied by its entry in `shares` (a list without one: 1). Dense feedback on a long
    /// query fuses two dense lists that share the dense weight this way ([`FusionConfig`]).
    pub(super) fn fuse_with(
        chunks: &dyn ChunkSource,
        fusion: &FusionConfig,
        query: &str,
        paths: &[Path],
        lists: &[Vec<PathHit>],
        shares: &[f32],
    ) -> Result<Vec<Fused<u32>>> {
        let ids: Vec<Vec<u32>> = lists.iter().map(|l| l.iter().map(|h| h.0).collect()).collect();
        let by_document = fusion.by_document;
        let unit = |c: &u32| if by_document { chunks.doc(*c) } else { *c };
        let units: Vec<Vec<(u32, f32)>> = lists.iter().map(|l| groups_in_order(l, unit)).collect();
        let mut weights = Self::fusion_weights(fusion, paths, &units);
        weights.iter_mut().zip(shares).for_each(|(w, share)| *w *= share);
        let (w, k) = (Some(weights.as_slice()), fusion.k);
        let fused = match (fusion.method_for(query), by_document) {
            (FusionMethod::Scores, _) => zscore_fuse_grouped(lists, &units, unit, w, usize::MAX),
            (FusionMethod::Ranks, true) => rrf_fuse_grouped(&ids, &units, unit, w, k, fusion.chunk_share, usize::MAX),
            (FusionMethod::Ranks, false) => rrf_fuse(&ids, w, k, usize::MAX),
        }?;
        let Some(tail) = &fusion.recall_tail else { return Ok(fused) };
        let tail_weights: Vec<f32> = paths
            .iter()
            .enumerate()
            .map(|(i, &p)| {
                let share = shares.get(i).copied().unwrap_or(1.0);
                if p == Path::Dense {
                    tail.dense_weight * share
                } else {
                    share
                }
            })
            .collect();
        recall_tail(fused, &units, unit, &tail_weights, tail.k, tail.head)
    }

    /// Runs a search.
    pub fn search(&self, req: &SearchRequest) -> Result<SearchOutcome> {
        let start = Instant::now();
        self.check_request(req)?;
        let retrieved = self.retrieve_paths(req)?;
        let outcome = self.finish(&*self.index, self.newest_day, req, retrieved)?;
        Ok(SearchOutcome { timings: StageTimings { total_ms: ms(start), ..outcome.timings }, ..outcome })
    }

    /// Refuses a request no search can answer, naming the field and why.
    pub fn check_request(&self, req: &SearchRequest) -> Result<()> {
        if req.query.trim().is_empty() {
            return Err(Error::invalid("query", "must not be empty"));
        }
        if req.top_k == 0 {
            return Err(Error::invalid("top_k", "must be at least 1"));
        }
        if req.paths.is_empty() {
            return Err(Error::invalid("paths", "at least one retrieval path is needed"));
        }
        if !(req.fusion.feedback.is_finite() && req.fusion.feedback >= 0.0) {
            return Err(Error::invalid("fusion.feedback", "must be a number of at least 0 (0: no dense feedback)"));
        }
        Ok(())
    }

    /// The newest document's day (days since the Unix epoch), what a recency boost counts
    /// from when the request names no day.
    pub fn newest_day(&self) -> Option<i64> {
        self.newest_day
    }

    /// `req`'s query encoded once for its paths, as [`search`](Self::search) encodes it
    /// (the lexical paths read it without instructions unless the request keeps them), and
    /// whether it was cut to the model window.
    pub fn prepare_request(&self, req: &SearchRequest) -> (PreparedQuery, bool) {
        let lexical = lexical_text(req, req.strip_instructions);
        let text = QueryTexts { full: &req.query, lexical: &lexical };
        self.prepare_texts(text, &req.paths)
    }

    /// Whether `text` is cut to the model window.
    pub fn query_truncated_by(&self, text: &str) -> bool {
        self.query_truncated(text, None)
    }

    /// The retrieval half of [`search`](Self::search): every path's list for `req`, within
    /// its filter, each best first with its own scores (what an index shard answers a
    /// router with, [`crate::shards`]). The request is not checked here; `search` does.
    pub fn retrieve_paths(&self, req: &SearchRequest) -> Result<Retrieved> {
        let checkpoint = |stage: Stage| req.cancel.as_ref().map_or(Ok(()), |c| c.check(stage));
        checkpoint(Stage::Retrieval)?;
        let mut timings = StageTimings::default();
        let allowed = match &req.documents {
            None => self.index.allowed(&req.filter),
            Some(docs) => self.index.allowed_by(|d, doc| docs.contains(d) && req.filter.matches(doc), false),
        };
        let candidates = allowed.as_ref().map_or(self.index.chunks.len(), |a| a.count());

        // Two branches run side by side: the dense path on one core; the SPLADE path, then
        // BM25, on the other. On tract each branch first encodes what its paths need (each
        // encoder runs on one thread), so BM25 and SPLADE hide behind the dense encoder, the
        // slowest stage. ONNX Runtime runs each encoder on every core, so there both encode
        // first, one after the other, and the branches only retrieve.
        let default_k = req.per_path_k.max(req.top_k);
        let k = move |p: Path| req.path_k.get(&p).copied().unwrap_or(default_k);
        let (paths, paths_pending): (Vec<Path>, Vec<Path>) = req.paths.iter().partition(|p| self.ready.contains(p));
        if paths.is_empty() {
            let names: Vec<&str> = paths_pending.iter().map(|p| p.name()).collect();
            return Err(Error::PathsNotReady(names.join(" and ")));
        }
        let on_dense: Vec<Path> = paths.iter().copied().filter(|&p| p == Path::Dense).collect();
        let on_sparse: Vec<Path> = paths.iter().copied().filter(|&p| p != Path::Dense).collect();
        // A prepared query is already encoded (and its text is what BM25 reads): nothing
        // here reads the lexical text then.
        let lexical = lexical_text(req, req.strip_instructions && req.prepared.is_none());
        let texts = QueryTexts { full: &req.query, lexical: &lexical };
        let encode_first = |paths: &[Path]| {
            let t = Instant::now();
            let e = self.encode(texts, paths);
            (e, ms(t))
        };
        let (dense_backend, sparse_backend) = self.backends();
        let encoded_first = encoders_take_turns(dense_backend, sparse_backend);
        let (dense_encoded, sparse_encoded) = match (&req.prepared, encoded_first) {
            // Encoded once by the caller for several searches: nothing to encode here.
            (Some(p), _) => {
                let given = |dense: bool| {
                    let query = PreparedQuery {
                        text: p.text.clone(),
                        dense: if dense { p.dense.clone() } else { None },
                        sparse: if dense { None } else { p.sparse.clone() },
                    };
                    (Encoding { query, truncated: None, error: None }, 0.0)
                };
                (Some(given(true)), Some(given(false)))
            }
            (None, true) => (Some(encode_first(&on_dense)), Some(encode_first(&on_sparse))),
            (None, false) => (None, None),
        };
        let (dense_branch, sparse_branch) = rayon::join(
            || self.run_branch(texts, &on_dense, allowed.as_ref(), &k, req.min_dense_similarity, dense_encoded),
            || self.run_branch(texts, &on_sparse, allowed.as_ref(), &k, None, sparse_encoded),
        );
        // Side by side the slower branch's encoding counts; one after the other, both.
        timings.encode_ms = match encoded_first {
            true => dense_branch.encode_ms + sparse_branch.encode_ms,
            false => dense_branch.encode_ms.max(sparse_branch.encode_ms),
        };
        let query_truncated = self.query_truncated(&req.query, dense_branch.truncated);
        let dense_query = dense_branch.dense_query;
        let mut results: Vec<(Path, Result<Vec<PathHit>>, f64)> =
            dense_branch.results.into_iter().chain(sparse_branch.results).collect();
        // Report paths in the order the request named them.
        results.sort_by_key(|(p, _, _)| req.paths.iter().position(|x| x == p));

        let mut lists = Vec::new();
        let mut used_paths = Vec::new();
        let mut failed_paths = Vec::new();
        for (p, result, took) in results {
            match result {
                Ok(hits) => {
                    lists.push(hits);
                    used_paths.push(p);
                }
                Err(e) => {
                    tracing::warn!(path = p.name(), error = %e, "retrieval path failed; skipped");
                    failed_paths.push((p, e.to_string()));
                }
            }
            timings.paths_ms.insert(p, took);
        }
        if used_paths.is_empty() {
            let why = failed_paths.iter().map(|(p, e)| format!("{p}: {e}")).collect::<Vec<_>>().join("; ");
            return Err(Error::AllPathsFailed(why));
        }
        Ok(Retrieved {
            lists,
            used_paths,
            failed_paths,
            paths_pending,
            dense_query,
            candidates,
            query_truncated,
            timings,
        })
    }

    /// The second half of [`search`](Self::search): fuses `retrieved`'s lists (after dense
    /// feedback), turns fused scores into relevances, reranks, boosts recent documents
    /// (`newest_day`: the newest document's day, when the request names no day) and keeps
    /// the first `top_k`. Every chunk id in the lists is read from `chunks`: this engine's
    /// index, or the shards of a sharded index with the ids counted across them.
    pub fn finish(
        &self,
        chunks: &dyn ChunkSource,
        newest_day: Option<i64>,
        req: &SearchRequest,
        retrieved: Retrieved,
    ) -> Result<SearchOutcome> {
        let checkpoint = |stage: Stage| req.cancel.as_ref().map_or(Ok(()), |c| c.check(stage));
        let Retrieved {
            mut lists,
            used_paths,
            failed_paths,
            paths_pending,
            dense_query,
            candidates,
            query_truncated,
            mut timings,
        } = retrieved;
        let default_k = req.per_path_k.max(req.top_k);
        let k = move |p: Path| req.path_k.get(&p).copied().unwrap_or(default_k);
        checkpoint(Stage::Fusion)?;
        let t = Instant::now();
        let mut fused = Self::fuse_with(chunks, &req.fusion, &req.query, &used_paths, &lists, &[])?;
        // Feedback lets the dense path read what the other paths found: with dense alone
        // there is nothing to read.
        let dense_at = used_paths.iter().position(|&p| p == Path::Dense).filter(|_| used_paths.len() > 1);
        if let (Some(i), Some(q)) = (dense_at, &dense_query) {
            if let Some((list, gamma)) = Self::dense_feedback(chunks, req, q, &fused, &lists, k(Path::Dense)) {
                let own = std::mem::replace(&mut lists[i], list);
                fused = if req.fusion.dense_beside_feedback && req.fusion.is_long(&req.query) {
                    // The dense path's own list goes last, after the paths the hits report
                    // (their diagnostics below read `lists` only as far as `used_paths`).
                    let mut paths = used_paths.clone();
                    paths.push(Path::Dense);
                    let mut shares = vec![1.0; used_paths.len()];
                    shares[i] = gamma;
                    shares.push(1.0 - gamma);
                    lists.push(own);
                    Self::fuse_with(chunks, &req.fusion, &req.query, &paths, &lists, &shares)?
                } else {
                    Self::fuse_with(chunks, &req.fusion, &req.query, &used_paths, &lists, &[])?
                };
            }
        }
        let total_weight: f32 = used_paths.iter().map(|&p| req.fusion.weight(p)).sum();
        let mut hits: Vec<Hit> = fused
            .into_iter()
            .enumerate()
            .map(|(i, f)| {
                let mut d = Diagnostics { rrf_rank: i + 1, rrf_score: f.score, ..Default::default() };
                for ((&p, rank), list) in used_paths.iter().zip(&f.ranks).zip(&lists) {
                    if let Some(r) = rank {
                        d.paths.insert(p, PathRank { rank: *r, score: list[r - 1].1 });
                    }
                }
                let score = req.fusion.relevance(f.score, total_weight, &req.query);
                Hit { chunk: f.item, score, diagnostics: d }
            })
            .collect();
        timings.fuse_ms = ms(t);

        if req.rerank && self.reranker.is_some() {
            checkpoint(Stage::Rerank)?;
        }
        let t = Instant::now();
        let rerank = self.rerank(chunks, req, &mut hits);
        timings.rerank_ms = ms(t);

        if let Some(rec) = &req.recency {
            Self::apply_recency(chunks, newest_day, &mut hits, rec)?;
        }
        let mut out = Self::diversify(chunks, hits, req.top_k, req.max_per_document);
        // Scores never rise down the list: a hit the reranker or the recency boost left
        // below another keeps at most that one's score.
        for i in 1..out.len() {
            out[i].score = out[i].score.min(out[i - 1].score);
        }
        Ok(SearchOutcome {
            hits: out,
            failed_paths,
            rerank,
            candidates,
            query_truncated,
            paths_served: used_paths,
            paths_pending,
            timings,
        })
    }

    /// Dense feedback ([`FusionConfig`], [`feedback_query`]): the dense list again, with the
    /// query's feedback weight `γ(q)`, for the
    /// query vector `q` moved towards the vectors of the best chunks of `fused`'s top `m`
    /// documents (each chunk's window nearest to `q`). Every chunk a path found (`lists`,
    /// each already within the request's filter) is scored by its best window's cosine with
    /// the moved query, and the best `k` make the new
    /// list. This is an exact product per candidate, not a second graph search: on the dev
    /// sets the two were at most 0.003 apart, and with the graph search a search took 1.08
    /// to 1.19 times as long as without feedback, against 1.02 to 1.05 (docs/quality.md,
    /// "The formula": "Rescoring, not a second graph search"). `None` when the request's
    /// fusion has no feedback or this query's weight `γ(q)` is 0. Chunks whose cosine with
    /// `q` itself is under the request's `min_dense_similarity` are left out, as from the
    /// first dense list.
    fn dense_feedback(
        chunks: &dyn ChunkSource,
        req: &SearchRequest,
        q: &[f32],
        fused: &[Fused<u32>],
        lists: &[Vec<PathHit>],
        k: usize,
    ) -> Option<(Vec<PathHit>, f32)> {
        let gamma = feedback_weight(identifier_share(&req.query), req.fusion.feedback);
        if gamma == 0.0 || req.fusion.feedback_documents == 0 {
            return None;
        }
        let mut seen = std::collections::HashSet::new();
        let top: Vec<u32> = fused
            .iter()
            .map(|f| f.item)
            .filter(|&c| seen.insert(chunks.doc(c)))
            .take(req.fusion.feedback_documents)
            .collect();
        if top.is_empty() {
            return None;
        }
        let unread = |e: Error| tracing::warn!(error = %e, "dense vectors unread; no dense feedback");
        let nearest = chunks.nearest_windows(&top, q).map_err(unread).ok()?;
        let moved = feedback_query(q, nearest.iter().map(Vec::as_slice), gamma);
        let min = req.min_dense_similarity;
        let mut seen = std::collections::HashSet::new();
        let found: Vec<u32> = lists.iter().flatten().map(|h| h.0).filter(|&c| seen.insert(c)).collect();
        let queries: Vec<&[f32]> = if min.is_some() { vec![&moved, q] } else { vec![&moved] };
        let scores = chunks.dense_scores(&found, &queries).map_err(unread).ok()?;
        let mut hits: Vec<PathHit> = (0..found.len())
            .filter(|&i| min.is_none_or(|min| scores[1][i] >= min))
            .map(|i| (found[i], scores[0][i]))
            .collect();
        top_by_score(&mut hits, k);
        Some((hits, gamma))
    }

    /// Reranks the fused top `rerank_depth` in place when asked and possible; candidates
    /// beyond the depth stay below every reranked one. On failure the fused order stays.
    fn rerank(&self, chunks: &dyn ChunkSource, req: &SearchRequest, hits: &mut Vec<Hit>) -> RerankStatus {
        if !req.rerank {
            return RerankStatus::NotRequested;
        }
        let Some(rr) = &self.reranker else { return RerankStatus::Unavailable };
        let depth = req.rerank_depth.min(hits.len());
        let ids: Vec<u32> = hits[..depth].iter().map(|h| h.chunk).collect();
        let texts = match chunks.texts(&ids) {
            Ok(texts) => texts,
            Err(e) => {
                tracing::warn!(error = %e, "candidates' text unread; fused order kept");
                return RerankStatus::Failed(format!("the candidates' text could not be read: {e}"));
            }
        };
        let candidates: Vec<Candidate<'_>> = hits[..depth]
            .iter()
            .zip(&texts)
            .map(|(h, text)| Candidate { chunk: h.chunk, text, fused_score: h.score })
            .collect();
        let reranked = match rr.rerank(&req.query, &candidates) {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!(error = %e, "reranker failed; fused order kept");
                return RerankStatus::Failed(e.to_string());
            }
        };
        // A reranker that invents or repeats chunks is a failed one: checked before any hit moves.
        let position: std::collections::HashMap<u32, usize> =
            candidates.iter().enumerate().map(|(i, c)| (c.chunk, i)).collect();
        let mut seen = vec![false; depth];
        let mut order = Vec::with_capacity(reranked.len());
        for r in &reranked {
            match position.get(&r.chunk) {
                Some(&i) if !std::mem::replace(&mut seen[i], true) => order.push((i, r.score)),
                _ => {
                    return RerankStatus::Failed(format!("reranker returned an unknown or repeated chunk {}", r.chunk))
                }
            }
        }
        let mut slots: Vec<Option<Hit>> = hits.drain(..depth).map(Some).collect();
        let mut head = Vec::with_capacity(depth);
        for (i, score) in order {
            let mut h = slots[i].take().expect("checked: each position once");
            h.diagnostics.rerank_score = Some(score);
            h.diagnostics.rerank_rank = Some(head.len() + 1);
            // A reranker gives a relevance in [0, 1] ([`Reranker`]); one that does not is held to it.
            h.score = score.clamp(0.0, 1.0);
            head.push(h);
        }
        // Candidates the reranker left out follow, in fused order, their relevance scaled
        // under the lowest reranked one's so that scores never rise down the list.
        let floor = head.iter().map(|h| h.score).fold(1.0f32, f32::min).clamp(0.0, 1.0);
        let mut rest: Vec<Hit> = slots.into_iter().flatten().collect();
        rest.append(hits);
        rest.iter_mut().for_each(|h| h.score *= floor);
        head.append(&mut rest);
        *hits = head;
        RerankStatus::Applied
    }

    /// The first `top_k` hits, keeping at most `max_per_document` chunks of a document.
    fn diversify(chunks: &dyn ChunkSource, hits: Vec<Hit>, top_k: usize, max_per_document: Option<usize>) -> Vec<Hit> {
        let mut out = Vec::with_capacity(top_k);
        let mut per_doc: std::collections::HashMap<u32, usize> = std::collections::HashMap::new();
        for h in hits {
            if out.len() == top_k {
                break;
            }
            let n = per_doc.entry(chunks.doc(h.chunk)).or_default();
            if max_per_document.is_some_and(|m| *n >= m) {
                continue;
            }
            *n += 1;
            out.push(h);
        }
        out
    }

    fn apply_recency(chunks: &dyn ChunkSource, newest_day: Option<i64>, hits: &mut [Hit], rec: &Recency) -> Result<()> {
        if rec.half_life_days.partial_cmp(&0.0) != Some(std::cmp::Ordering::Greater)
            || !rec.weight.is_finite()
            || rec.weight < 0.0
        {
            return Err(Error::invalid("recency", "half_life_days must be positive and weight non-negative"));
        }
        let now = rec.now.map(Date::days_since_epoch).or(newest_day);
        let Some(now) = now else { return Ok(()) };
        for h in hits.iter_mut() {
            let doc = chunks.document(h.chunk);
            let boost = match doc.published_at.map(Date::days_since_epoch) {
                Some(day) => 1.0 + rec.weight * 0.5f32.powf((now - day).max(0) as f32 / rec.half_life_days),
                None => 1.0,
            };
            // Over the largest boost, so that a relevance stays within [0, 1].
            h.score = h.score * boost / (1.0 + rec.weight);
        }
        // The reranked head is re-sorted within itself and stays above the candidates the
        // reranker never saw: a boost may not lift a candidate over the reranker's verdict.
        hits.sort_by(|a, b| {
            let reranked = |h: &Hit| h.diagnostics.rerank_score.is_some();
            reranked(b)
                .cmp(&reranked(a))
                .then(b.score.total_cmp(&a.score))
                .then(a.diagnostics.rrf_rank.cmp(&b.diagnostics.rrf_rank))
        });
        Ok(())
    }
}

/// The text the lexical paths read for `req`: its query without instructions when `strip`
/// ([`lexical_query`]), else as written.
fn lexical_text(req: &SearchRequest, strip: bool) -> std::borrow::Cow<'_, str> {
    match strip {
        true => lexical_query(&req.query),
        false => std::borrow::Cow::Borrowed(req.query.as_str()),
    }
}

/// Loaded models, not yet tied to an index: loading them can overlap with fetching the
/// index (a cold start from S3 does both at once).
pub struct LoadedModels {
    dense: Arc<DenseEncoder>,
    sparse: Arc<SparseEncoder>,
    reranker: Option<Arc<dyn Reranker>>,
    dense_info: crate::encode::ModelInfo,
    sparse_info: crate::encode::ModelInfo,
    set: crate::encode::ModelSet,
}

impl LoadedModels {
    /// Loads the encoders of `models` (and the reranker when one is configured).
    pub fn load(models: &crate::encode::ModelSet) -> Result<Self> {
        use crate::encode::{CrossEncoder, ModelInfo};
        let (dense_info, sparse_info) = (ModelInfo::read(&models.dense)?, ModelInfo::read(&models.sparse)?);
        let (dense, sparse) = rayon::join(|| DenseEncoder::load(&models.dense), || SparseEncoder::load(&models.sparse));
        let reranker: Option<Arc<dyn Reranker>> = match &models.reranker {
            Some(dir) => {
                let name = ModelInfo::read(dir).map(|i| i.id).unwrap_or_else(|_| dir.display().to_string());
                Some(Arc::new(CrossEncoderReranker::new(CrossEncoder::load(dir)?, name)))
            }
            None => None,
        };
        Ok(LoadedModels {
            dense: Arc::new(dense?),
            sparse: Arc::new(sparse?),
            reranker,
            dense_info,
            sparse_info,
            set: models.clone(),
        })
    }

    /// Reranks with `reranker` instead of the model set's cross-encoder.
    pub fn with_reranker(mut self, reranker: Arc<dyn Reranker>) -> Self {
        self.reranker = Some(reranker);
        self
    }

    /// An engine over `index`, refused unless it was built with these dense and SPLADE weights.
    pub fn engine(&self, index: Arc<Index>) -> Result<Engine> {
        check_built_with(&index, &self.set, &self.dense_info, &self.sparse_info)?;
        Ok(Engine::new(index, self.dense.clone(), self.sparse.clone(), self.reranker.clone()))
    }
}

/// Refuses `index` unless it was built with the dense and SPLADE weights described by
/// `dense` and `sparse` (the model infos of `models`).
fn check_built_with(
    index: &Index,
    models: &crate::encode::ModelSet,
    dense: &crate::encode::ModelInfo,
    sparse: &crate::encode::ModelInfo,
) -> Result<()> {
    for (what, dir, info, built) in [
        ("dense", &models.dense, dense, &index.manifest.dense_model),
        ("sparse", &models.sparse, sparse, &index.manifest.sparse_model),
    ] {
        if info.weights_sha256 != built.weights_sha256 {
            return Err(Error::Model {
                path: dir.clone(),
                reason: format!(
                    "index was built with {} ({}), not these {what} weights ({}): rebuild the index",
                    built.id, built.weights_sha256, info.weights_sha256
                ),
            });
        }
    }
    Ok(())
}

/// Loads the encoders of `models` (and the reranker when one is configured) and checks
/// that `index` was built with the same dense and SPLADE weights.
pub fn open_engine(index: Arc<Index>, models: &crate::encode::ModelSet) -> Result<Engine> {
    use crate::encode::ModelInfo;
    // Check the weights before the (slow) load, so a mismatch fails fast.
    check_built_with(&index, models, &ModelInfo::read(&models.dense)?, &ModelInfo::read(&models.sparse)?)?;
    LoadedModels::load(models)?.engine(index)
}
