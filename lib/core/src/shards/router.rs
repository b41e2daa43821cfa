//! The router: one search over every shard of an index, answered as one index would.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::ops::Range;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use rayon::prelude::*;

use super::fetch::{Fetched, ResultsView, SearchScope};
use super::protocol::{DenseQuery, FetchQuery, FetchedChunk, Shard, ShardQuery, ShardRequest, ShardResponse};
use super::root::Shards;
use crate::corpus::{Document, MetadataSchema};
use crate::error::{Error, Result};
use crate::index::{Analyzer, Bitset, Index, LexicalStats, Manifest, Provenance, ShardStore};
use crate::pipeline::{
    top_by_score, ChunkSource, Engine, IndexView, Path, PathHit, Retrieved, SearchOutcome, SearchRequest, StageTimings,
};

/// The shards of one index searched as one index: a router. It asks each shard through
/// the shard protocol ([`Shard`]: an engine in this process, or a worker behind it) for
/// candidates, dense scores and the text and place of the results (the fetch phase), reads
/// the documents' metadata and where each document's chunks start from each shard's store
/// ([`ShardStore`]: nothing per chunk, no text), and the whole index's BM25 statistics from
/// the root's. Chunk and document ids in its outcomes are those of the
/// single index built from the same documents (documents in the order [`Shards::order`]
/// gives, each document's chunks in order), so every tie between equal scores breaks as it
/// would there ([`ShardSet::locate`] finds a chunk's shard).
pub struct ShardSet {
    /// The models and settings every search runs with (fusion, rerank, recency).
    router: Arc<Engine>,
    /// The shards, asked through the protocol.
    shards: Vec<Arc<dyn Shard>>,
    /// Each shard's documents and where their chunks start ([`ShardStore`]).
    stores: Vec<Arc<ShardStore>>,
    /// BM25's statistics over every shard (the root's): the whole index's `N` and `df`.
    stats: LexicalStats,
    /// How long a search waits for a shard before leaving it out (`None`: for every one).
    deadline: Option<Duration>,
    /// Global document → (shard, the shard's document).
    docs: Vec<(u32, u32)>,
    /// Global document → its first global chunk.
    first_chunk: Vec<u32>,
    /// Per shard, its document → global document.
    global_doc: Vec<Vec<u32>>,
    newest_day: Option<i64>,
    /// The first shard's manifest with the whole index's counts ([`IndexView::manifest`]).
    manifest: Manifest,
    /// The metadata fields of every shard's documents, worked out when first asked.
    schema: OnceLock<MetadataSchema>,
    /// The shards' indexes, when every shard is an engine in this process
    /// ([`ShardSet::new`]); empty when they are asked elsewhere.
    local: Vec<Arc<Index>>,
}

/// The shards of a router that holds them in this process ([`ShardSet::local_shards`]).
#[derive(Clone, Copy)]
pub struct LocalShards<'a> {
    /// Each shard's index, in shard order.
    pub indexes: &'a [Arc<Index>],
    /// Each shard's documents' ordinals among the whole index's.
    pub order: &'a [Vec<u32>],
    /// BM25's statistics over every shard.
    pub stats: &'a LexicalStats,
}

/// A search's outcome on a sharded index, with how many shards answered.
#[derive(Debug)]
pub struct ShardedOutcome {
    /// The outcome, its chunk ids global ([`ShardSet::locate`]).
    pub outcome: SearchOutcome,
    /// Shards that answered.
    pub answered: usize,
    /// Shards asked.
    pub of: usize,
    /// Each shard that did not answer, with why.
    pub failed_shards: Vec<(usize, String)>,
    /// Each path that failed on a shard that answered with its other paths, with why:
    /// that path's list lacks the shard's candidates (a path that failed on every shard
    /// is in the outcome's `failed_paths` instead).
    pub partial: Vec<(usize, Path, String)>,
    /// Milliseconds from asking the shards to the last answer (or the deadline).
    pub shards_ms: f64,
    /// Milliseconds the router spent after that: merging each path's lists and the rest
    /// of the search ([`Engine::finish`]), the reranker's fetch of its candidates' text
    /// included.
    pub merge_ms: f64,
    /// Milliseconds of the fetch phase: asking the shards for the text of the results
    /// that the search had not fetched for the reranker.
    pub fetch_ms: f64,
    /// The results' text, from their shards (empty for one index): read the results
    /// through [`Searcher::results`].
    pub fetched: Fetched,
}

impl ShardedOutcome {
    /// Whether some shard did not answer, or answered without some path (the results come
    /// from the rest).
    pub fn degraded(&self) -> bool {
        self.answered < self.of || !self.partial.is_empty()
    }
}

impl ShardSet {
    /// The shards `engines` in this process, in shard order (at least one), their
    /// documents in the global order `order` (`order[s][d]`: shard `s`'s document `d`'s
    /// ordinal among all; every ordinal once), BM25's statistics over all of them `stats`
    /// ([`Shards::stats`]). Without an order the shards' documents follow each other.
    pub fn new(engines: Vec<Engine>, order: Option<Vec<Vec<u32>>>, stats: LexicalStats) -> Result<Self> {
        let engines: Vec<Arc<Engine>> = engines.into_iter().map(Arc::new).collect();
        let Some(router) = engines.first().cloned() else {
            return Err(Error::invalid("shards", "a sharded index needs at least one shard"));
        };
        let stores = engines.iter().map(|e| Arc::new(ShardStore::of(e.index()))).collect();
        let local = engines.iter().map(|e| e.index().clone()).collect();
        let shards = engines.into_iter().map(|e| e as Arc<dyn Shard>).collect();
        let mut set = Self::with_shards(router, stores, shards, order, stats)?;
        set.local = local;
        Ok(set)
    }

    /// The loaded shards `shards` in this process, each shard's engine made by `engine`
    /// from its index (the same models for all).
    pub fn of_shards<E: From<Error>>(
        shards: Shards,
        engine: impl FnMut(Arc<Index>) -> std::result::Result<Engine, E>,
    ) -> std::result::Result<Self, E> {
        let engines = shards.indexes.into_iter().map(Arc::new).map(engine).collect::<std::result::Result<_, E>>()?;
        Ok(Self::new(engines, Some(shards.order), shards.stats)?)
    }

    /// A router over `shards` (asked through the protocol, in shard order), whose
    /// documents are in `stores` (one per shard, the same order) and whose
    /// searches run with `router`'s models and settings; `order` and `stats` as for
    /// [`ShardSet::new`].
    pub fn with_shards(
        router: Arc<Engine>,
        stores: Vec<Arc<ShardStore>>,
        shards: Vec<Arc<dyn Shard>>,
        order: Option<Vec<Vec<u32>>>,
        stats: LexicalStats,
    ) -> Result<Self> {
        let wrong = |why: String| Error::invalid("shards", why);
        if stores.is_empty() || stores.len() != shards.len() {
            return Err(wrong(format!(
                "{} shards and {} stores: one store per shard, at least one",
                shards.len(),
                stores.len()
            )));
        }
        let sizes: Vec<usize> = stores.iter().map(|i| i.documents.len()).collect();
        let total: usize = sizes.iter().sum();
        let global_doc = match order {
            Some(order) => order,
            None => {
                let mut start = 0u32;
                let mut order = Vec::with_capacity(sizes.len());
                for &n in &sizes {
                    order.push((start..start + n as u32).collect());
                    start += n as u32;
                }
                order
            }
        };
        if global_doc.len() != stores.len() || global_doc.iter().zip(&sizes).any(|(o, &n)| o.len() != n) {
            return Err(wrong("one document order per shard, one entry per document".into()));
        }
        let chunks: u64 = stores.iter().map(|i| i.chunk_count() as u64).sum();
        if chunks > u32::MAX as u64 {
            return Err(wrong(format!("{chunks} chunks: at most {} across the shards", u32::MAX)));
        }
        if stats.chunks != chunks {
            return Err(wrong(format!("BM25 statistics over {} chunks for shards of {chunks}", stats.chunks)));
        }
        let mut docs = vec![(u32::MAX, u32::MAX); total];
        for (s, order) in global_doc.iter().enumerate() {
            for (d, &g) in order.iter().enumerate() {
                match docs.get_mut(g as usize) {
                    Some(slot) if slot.0 == u32::MAX => *slot = (s as u32, d as u32),
                    _ => return Err(wrong(format!("document ordinal {g} is out of range or given twice"))),
                }
            }
        }
        let mut first_chunk = Vec::with_capacity(total);
        let mut next = 0u32;
        for &(s, d) in &docs {
            first_chunk.push(next);
            next += stores[s as usize].chunks_of(d).len() as u32;
        }
        let newest_day = stores.iter().filter_map(|i| i.newest_day()).max();
        let mut manifest = stores[0].manifest.clone();
        manifest.documents = total;
        manifest.chunks = chunks as usize;
        manifest.resident_bytes = stores.iter().map(|i| i.manifest.resident_bytes).sum();
        manifest.created_unix = stores.iter().map(|i| i.manifest.created_unix).max().unwrap_or(0);
        manifest.files = Vec::new();
        Ok(ShardSet {
            router,
            shards,
            stores,
            stats,
            deadline: None,
            docs,
            first_chunk,
            global_doc,
            newest_day,
            manifest,
            schema: OnceLock::new(),
            local: Vec::new(),
        })
    }

    /// Leaves out of a search any shard that has not answered within `deadline` (by
    /// default a search waits for every shard), in each of its round trips (the
    /// candidates, dense feedback's scores, the fetch of the results' text): its work goes
    /// on in the background and its answer is dropped.
    pub fn with_deadline(mut self, deadline: Duration) -> Self {
        self.deadline = Some(deadline);
        self
    }

    /// How long a search waits for a shard, when it does not wait for every one
    /// ([`ShardSet::with_deadline`]).
    pub fn deadline(&self) -> Option<Duration> {
        self.deadline
    }

    /// The shards in this process, each one's documents' place among all and BM25's
    /// statistics over all (what [`ShardSet::new`] was given): `None` when the shards are
    /// asked elsewhere (worker processes, functions).
    pub fn local_shards(&self) -> Option<LocalShards<'_>> {
        (!self.local.is_empty()).then_some(LocalShards {
            indexes: &self.local,
            order: &self.global_doc,
            stats: &self.stats,
        })
    }

    /// The shards, in shard order, as the router asks them.
    pub fn shards(&self) -> &[Arc<dyn Shard>] {
        &self.shards
    }

    /// Each shard's store (its documents and where their chunks start), in shard order.
    pub fn stores(&self) -> &[Arc<ShardStore>] {
        &self.stores
    }

    /// The shard of `chunk` (a global chunk id) and the shard's own id for it.
    pub fn locate(&self, chunk: u32) -> (usize, u32) {
        let g = self.first_chunk.partition_point(|&f| f <= chunk) - 1;
        let (s, d) = self.docs[g];
        (s as usize, self.stores[s as usize].chunks_of(d).start + (chunk - self.first_chunk[g]))
    }

    /// The global id of shard `s`'s chunk `c`.
    pub fn global(&self, s: usize, c: u32) -> u32 {
        let index = &self.stores[s];
        let d = index.doc_of(c);
        self.first_chunk[self.global_doc[s][d as usize] as usize] + (c - index.chunks_of(d).start)
    }

    /// Searches every shard as one index:
    /// 1. the query is encoded once, as [`Engine::search`] encodes it;
    /// 2. every shard retrieves each path's candidates within the filter, with their scores
    ///    and no text ([`ShardRequest::Retrieve`], [`Engine::retrieve_paths`]), in parallel;
    /// 3. each path's lists are merged by score, ties by global chunk id (as one index
    ///    breaks them), and cut to the path's depth: each shard's list is the whole index's
    ///    list restricted to that shard, so this is the whole index's list;
    /// 4. the rest of the search runs as on one index ([`Engine::finish`]), asking the
    ///    shards for the dense scores that dense feedback needs ([`ShardRequest::Dense`])
    ///    and reading the results' text and provenance from the stores.
    ///
    /// A shard that fails (its every path failing included) is left out and named in the
    /// outcome; when none answers the search fails.
    pub fn search(&self, req: &SearchRequest) -> Result<ShardedOutcome> {
        let start = Instant::now();
        let first = &self.router;
        first.check_request(req)?;
        if req.documents.as_ref().is_some_and(|d| d.len() != self.docs.len()) {
            return Err(Error::invalid("documents", format!("a set over the index's {} documents", self.docs.len())));
        }
        let t = Instant::now();
        let (prepared, query_truncated) = match &req.prepared {
            Some(p) => (p.clone(), first.query_truncated_by(&req.query)),
            None => {
                let (p, truncated) = first.prepare_request(req);
                (Arc::new(p), truncated)
            }
        };
        let encode_ms = t.elapsed().as_secs_f64() * 1e3;
        let t = Instant::now();
        let answers = self.retrieve_on_every_shard(req, &prepared, req.documents.as_deref());
        let shards_ms = t.elapsed().as_secs_f64() * 1e3;
        let t = Instant::now();
        let of = answers.len();
        let mut failed_shards = Vec::new();
        let mut answered = Vec::new();
        for (s, a) in answers.into_iter().enumerate() {
            match a {
                Ok(r) => answered.push((s, r)),
                Err(e @ Error::Cancelled(_)) => return Err(e),
                Err(e) => {
                    tracing::warn!(shard = s, error = %e, "index shard failed; left out of the search");
                    failed_shards.push((s, e.to_string()));
                }
            }
        }
        if answered.is_empty() {
            let why = failed_shards.iter().map(|(s, e)| format!("shard {s}: {e}")).collect::<Vec<_>>().join("; ");
            return Err(Error::NoShardAnswered(why));
        }
        let partial: Vec<(usize, Path, String)> = answered
            .iter()
            .flat_map(|(s, r)| r.failed_paths.iter().map(move |(p, why)| (*s, *p, why.clone())))
            .filter(|(_, p, _)| answered.iter().any(|(_, r)| r.used_paths.contains(p)))
            .collect();
        let mut merged = self.merge(req, answered);
        merged.dense_query = prepared.dense.clone();
        merged.query_truncated = query_truncated;
        merged.timings.encode_ms = encode_ms;
        let scope = SearchScope::new(self);
        let mut outcome = first.finish(&scope, self.newest_day, req, merged)?;
        let merge_ms = t.elapsed().as_secs_f64() * 1e3;
        let t = Instant::now();
        let fetched = self.fetch_results(&mut outcome, scope.into_fetched(), req.fetch_segments, &mut failed_shards)?;
        let fetch_ms = t.elapsed().as_secs_f64() * 1e3;
        let timings = StageTimings { total_ms: start.elapsed().as_secs_f64() * 1e3, ..outcome.timings.clone() };
        let answered = of - failed_shards.len();
        Ok(ShardedOutcome {
            outcome: SearchOutcome { timings, ..outcome },
            answered,
            of,
            failed_shards,
            partial,
            shards_ms,
            merge_ms,
            fetch_ms,
            fetched,
        })
    }

    /// The fetch phase: the text and place of `outcome`'s results (and with `segments` the
    /// segments each overlaps), asked of the shards that hold them, except the chunks the
    /// search fetched already (`prefetched`, for the reranker). A shard that does not answer is left
    /// out as one that failed to search is: its results are dropped and it joins
    /// `failed_shards`; when the search had results and none is left, it fails.
    fn fetch_results(
        &self,
        outcome: &mut SearchOutcome,
        mut prefetched: HashMap<u32, FetchedChunk>,
        segments: bool,
        failed_shards: &mut Vec<(usize, String)>,
    ) -> Result<Fetched> {
        let wanted: Vec<u32> =
            outcome.hits.iter().map(|h| h.chunk).filter(|c| segments || !prefetched.contains_key(c)).collect();
        let (mut got, failed) = self.fetch(&wanted, segments);
        let mut fetched = Fetched::default();
        for h in &outcome.hits {
            match got.remove(&h.chunk) {
                Some(f) => fetched.insert(h.chunk, f, segments),
                None if !segments => {
                    if let Some(f) = prefetched.remove(&h.chunk) {
                        fetched.insert(h.chunk, f, false);
                    }
                }
                None => {}
            }
        }
        if failed.is_empty() {
            return Ok(fetched);
        }
        let had = outcome.hits.len();
        outcome.hits.retain(|h| fetched.has(h.chunk, segments));
        let why = failed.iter().map(|(s, e)| format!("shard {s}: {e}")).collect::<Vec<_>>().join("; ");
        for (s, e) in failed {
            tracing::warn!(shard = s, error = %e, "index shard did not give its results' text; they are left out");
            if !failed_shards.iter().any(|(f, _)| *f == s) {
                failed_shards.push((s, format!("fetching the results' text: {e}")));
            }
        }
        if had > 0 && outcome.hits.is_empty() {
            return Err(Error::NoShardAnswered(format!("no shard gave its results' text: {why}")));
        }
        Ok(fetched)
    }

    /// The text and place of global chunks `chunks` (with `segments`, and the segments each
    /// overlaps), asked of the shards that hold them, one request each, all at once: what
    /// the shards gave, by global chunk id, and each shard that did not, with why.
    pub(super) fn fetch(&self, chunks: &[u32], segments: bool) -> (HashMap<u32, FetchedChunk>, Vec<(usize, String)>) {
        let mut by_shard: BTreeMap<usize, (Vec<u32>, Vec<u32>)> = BTreeMap::new();
        for &c in chunks {
            let (s, local) = self.locate(c);
            let (global, ids) = by_shard.entry(s).or_default();
            global.push(c);
            ids.push(local);
        }
        let requests = by_shard
            .iter()
            .map(|(&s, (_, ids))| (s, Arc::new(ShardRequest::Fetch(FetchQuery { chunks: ids.clone(), segments }))))
            .collect();
        let (mut got, mut failed) = (HashMap::with_capacity(chunks.len()), Vec::new());
        for (s, answer) in self.ask(requests) {
            let global = &by_shard[&s].0;
            match answer {
                Ok(ShardResponse::Fetch { chunks })
                    if chunks.len() == global.len()
                        && (!segments
                            || chunks.iter().all(|f| {
                                f.segments.len() == f.span.seg_end.saturating_sub(f.span.seg_start) as usize
                            })) =>
                {
                    got.extend(global.iter().copied().zip(chunks));
                }
                Ok(ShardResponse::Fetch { .. }) => failed.push((s, "an answer of the wrong size".to_string())),
                Ok(other) => failed.push((s, unexpected(&other).to_string())),
                Err(e) => failed.push((s, e.to_string())),
            }
        }
        (got, failed)
    }

    /// [`ShardSet::fetch`] of `chunks` without their segments, failing when a shard does not
    /// answer.
    pub(super) fn fetch_all(&self, chunks: &[u32]) -> Result<HashMap<u32, FetchedChunk>> {
        let (got, failed) = self.fetch(chunks, false);
        match failed.into_iter().next() {
            Some((s, why)) => Err(Error::Component { component: format!("index shard {s}"), reason: why }),
            None => Ok(got),
        }
    }

    /// Every shard's candidates for `req` encoded as `prepared`, restricted to the
    /// documents `documents` holds (ordinals in the whole index) when given, in shard
    /// order ([`ShardSet::ask`]).
    fn retrieve_on_every_shard(
        &self,
        req: &SearchRequest,
        prepared: &crate::pipeline::PreparedQuery,
        documents: Option<&Bitset>,
    ) -> Vec<Result<Retrieved>> {
        let requests: Vec<(usize, Arc<ShardRequest>)> = match documents {
            // One request, shared by every shard.
            None => {
                let one = Arc::new(ShardRequest::Retrieve(Box::new(ShardQuery::of(req, prepared, None))));
                (0..self.shards.len()).map(|s| (s, one.clone())).collect()
            }
            Some(all) => (0..self.shards.len())
                .map(|s| {
                    let mine = self.global_doc[s].iter().enumerate().filter(|(_, &g)| all.contains(g as usize));
                    let mine = Some(mine.map(|(d, _)| d as u32).collect());
                    (s, Arc::new(ShardRequest::Retrieve(Box::new(ShardQuery::of(req, prepared, mine)))))
                })
                .collect(),
        };
        self.ask(requests)
            .into_iter()
            .map(|(_, answer)| match answer? {
                ShardResponse::Retrieve(a) => Ok(a.into()),
                other => Err(unexpected(&other)),
            })
            .collect()
    }

    /// Asks each shard `s` of `requests` its request: all at once on the rayon pool, or,
    /// with a deadline, each on a thread of its own, a shard that has not answered by then
    /// counting as failed. Answers come in the order asked.
    fn ask(&self, requests: Vec<(usize, Arc<ShardRequest>)>) -> Vec<(usize, Result<ShardResponse>)> {
        let Some(deadline) = self.deadline else {
            return requests
                .into_par_iter()
                .with_max_len(1)
                .map(|(s, request)| (s, self.shards[s].ask(&request)))
                .collect();
        };
        let (tx, rx) = std::sync::mpsc::channel();
        for (i, (s, request)) in requests.iter().enumerate() {
            let (shard, request, tx) = (self.shards[*s].clone(), request.clone(), tx.clone());
            std::thread::spawn(move || {
                // The router may have stopped waiting: then nobody receives this.
                let _ = tx.send((i, shard.ask(&request)));
            });
        }
        drop(tx);
        let until = Instant::now() + deadline;
        let mut answers: Vec<Option<Result<ShardResponse>>> = requests.iter().map(|_| None).collect();
        while answers.iter().any(Option::is_none) {
            match rx.recv_timeout(until.saturating_duration_since(Instant::now())) {
                Ok((i, answer)) => answers[i] = Some(answer),
                Err(_) => break,
            }
        }
        let late = || Error::Component {
            component: "index shard".into(),
            reason: format!("no answer within its deadline of {} ms", deadline.as_millis()),
        };
        requests.iter().zip(answers).map(|((s, _), a)| (*s, a.unwrap_or_else(|| Err(late())))).collect()
    }

    /// Dense rows for global chunks `chunks`, asked of the shards that hold them in one
    /// batch each ([`ShardRequest::Dense`]): per query a score per chunk, or with
    /// `nearest` per chunk its nearest window. Fails when a shard does.
    fn dense_rows(&self, chunks: &[u32], queries: &[&[f32]], nearest: bool) -> Result<Vec<Vec<f32>>> {
        let mut by_shard: BTreeMap<usize, (Vec<usize>, Vec<u32>)> = BTreeMap::new();
        for (i, &c) in chunks.iter().enumerate() {
            let (s, local) = self.locate(c);
            let (at, ids) = by_shard.entry(s).or_default();
            at.push(i);
            ids.push(local);
        }
        let queries: Vec<Vec<f32>> = queries.iter().map(|q| q.to_vec()).collect();
        let requests = by_shard
            .iter()
            .map(|(&s, (_, ids))| {
                let q = DenseQuery { chunks: ids.clone(), queries: queries.clone(), nearest };
                (s, Arc::new(ShardRequest::Dense(q)))
            })
            .collect();
        let mut out = vec![Vec::new(); if nearest { chunks.len() } else { queries.len() }];
        if !nearest {
            out.iter_mut().for_each(|row| *row = vec![0.0; chunks.len()]);
        }
        for (s, answer) in self.ask(requests) {
            let rows = match answer
                .map_err(|e| Error::Component { component: format!("index shard {s}"), reason: e.to_string() })?
            {
                ShardResponse::Dense { rows } => rows,
                other => return Err(unexpected(&other)),
            };
            let at = &by_shard[&s].0;
            let expected = if nearest { at.len() } else { queries.len() };
            if rows.len() != expected || (!nearest && rows.iter().any(|r| r.len() != at.len())) {
                return Err(Error::Component {
                    component: format!("index shard {s}"),
                    reason: "an answer of the wrong size".into(),
                });
            }
            for (r, row) in rows.into_iter().enumerate() {
                if nearest {
                    out[at[r]] = row;
                } else {
                    at.iter().zip(row).for_each(|(&i, x)| out[r][i] = x);
                }
            }
        }
        Ok(out)
    }

    /// Each path's lists of the shards that answered, merged by score and cut to the
    /// path's depth, ids counted across the shards; what failed or is pending on any shard
    /// is reported; timings are the slowest shard's.
    fn merge(&self, req: &SearchRequest, answered: Vec<(usize, Retrieved)>) -> Retrieved {
        let default_k = req.per_path_k.max(req.top_k);
        let k = |p: Path| req.path_k.get(&p).copied().unwrap_or(default_k);
        let mut out = Retrieved::default();
        for &p in &req.paths {
            let mut list: Vec<PathHit> = Vec::new();
            let mut served = false;
            for (s, r) in &answered {
                if let Some(i) = r.used_paths.iter().position(|&u| u == p) {
                    served = true;
                    list.extend(r.lists[i].iter().map(|&(c, score)| (self.global(*s, c), score)));
                }
            }
            if served {
                top_by_score(&mut list, k(p));
                out.used_paths.push(p);
                out.lists.push(list);
            }
        }
        for (s, r) in &answered {
            out.candidates += r.candidates;
            for (p, why) in &r.failed_paths {
                if !out.failed_paths.iter().any(|(q, _)| q == p) {
                    out.failed_paths.push((*p, format!("shard {s}: {why}")));
                }
            }
            for p in &r.paths_pending {
                if !out.paths_pending.contains(p) {
                    out.paths_pending.push(*p);
                }
            }
            for (p, ms) in &r.timings.paths_ms {
                let slowest = out.timings.paths_ms.entry(*p).or_default();
                *slowest = slowest.max(*ms);
            }
        }
        // A path some shard served is served: its failure on the others is reported as a
        // partial answer (`ShardedOutcome::partial`), not as a failed path.
        out.failed_paths.retain(|(p, _)| !out.used_paths.contains(p));
        out
    }
}

/// A shard that answered a question with another's answer.
fn unexpected(answer: &ShardResponse) -> Error {
    let kind = match answer {
        ShardResponse::Retrieve(_) => "candidates",
        ShardResponse::Dense { .. } => "dense rows",
        ShardResponse::Fetch { .. } => "texts",
    };
    Error::Component { component: "index shard".into(), reason: format!("answered with {kind} to another question") }
}

impl ChunkSource for ShardSet {
    fn doc(&self, chunk: u32) -> u32 {
        (self.first_chunk.partition_point(|&f| f <= chunk) - 1) as u32
    }
    /// Fetched from the shards that hold them; fails when one does not answer.
    fn texts(&self, chunks: &[u32]) -> Result<Vec<Cow<'_, str>>> {
        let mut got = self.fetch_all(chunks)?;
        // Every chunk asked is in `got`: `fetch` counts a short answer as a failure.
        Ok(chunks.iter().map(|c| Cow::Owned(got.remove(c).map(|f| f.text).unwrap_or_default())).collect())
    }
    fn document(&self, chunk: u32) -> &Document {
        self.document_at(self.doc(chunk))
    }
    fn dense_scores(&self, chunks: &[u32], queries: &[&[f32]]) -> Result<Vec<Vec<f32>>> {
        self.dense_rows(chunks, queries, false)
    }
    fn nearest_windows(&self, chunks: &[u32], query: &[f32]) -> Result<Vec<Vec<f32>>> {
        self.dense_rows(chunks, &[query], true)
    }
}

impl IndexView for ShardSet {
    fn manifest(&self) -> &Manifest {
        &self.manifest
    }
    fn document_count(&self) -> usize {
        self.docs.len()
    }
    fn document_at(&self, d: u32) -> &Document {
        let (s, local) = self.docs[d as usize];
        &self.stores[s as usize].documents[local as usize]
    }
    fn is_withdrawn(&self, d: u32) -> bool {
        let (s, local) = self.docs[d as usize];
        self.stores[s as usize].is_withdrawn(local)
    }
    fn chunks_of(&self, d: u32) -> Range<u32> {
        let (s, local) = self.docs[d as usize];
        let first = self.first_chunk[d as usize];
        first..first + self.stores[s as usize].chunks_of(local).len() as u32
    }
    /// Empty: the router holds no text (read the results through [`Searcher::results`]).
    fn text(&self, _c: u32) -> &str {
        ""
    }
    /// The chunk's document and ordinal in it; its segments and characters are empty, since
    /// the router keeps nothing per chunk (read the results through [`Searcher::results`],
    /// which has them from the fetch phase).
    fn provenance(&self, c: u32) -> Provenance<'_> {
        let d = self.doc(c);
        Provenance {
            chunk: c,
            ordinal_in_document: c - self.first_chunk[d as usize],
            document: self.document_at(d),
            segments: 0..0,
            chars: 0..0,
        }
    }
    fn analyzer(&self) -> Analyzer {
        Analyzer::new(self.manifest.bm25.stemming)
    }
    /// `idf(N, df(term))` with the whole index's `N` and `df` (the root's statistics, the
    /// sums of the shards' own), as one index computes it.
    fn idf(&self, term: &str) -> f32 {
        let df = self.stats.df.get(term).copied().unwrap_or(0);
        crate::index::idf(self.stats.chunks.max(1) as f32, df as f32)
    }
    fn metadata_schema(&self) -> &MetadataSchema {
        self.schema.get_or_init(|| MetadataSchema::of(IndexView::documents(self).map(|d| &d.metadata)))
    }
}

/// What a search runs on: one engine, or the shards of a sharded index through their
/// router. Cheap to clone (both are shared).
#[derive(Clone)]
pub enum Searcher {
    /// One index.
    Single(Arc<Engine>),
    /// A sharded index.
    Sharded(Arc<ShardSet>),
}

impl Searcher {
    /// The engine whose models and settings every search runs with (of a sharded index,
    /// the router's).
    pub fn engine(&self) -> &Arc<Engine> {
        match self {
            Searcher::Single(e) => e,
            Searcher::Sharded(s) => &s.router,
        }
    }

    /// The index as requests read it around a search: its documents' metadata for filters
    /// before one, where each chunk sits. Of a sharded index, the router's, which holds no
    /// text: read a search's results through [`Searcher::results`].
    pub fn view(&self) -> &dyn IndexView {
        match self {
            Searcher::Single(e) => &**e.index(),
            Searcher::Sharded(s) => &**s,
        }
    }

    /// The index as a search's results are read from it, with the text its fetch phase
    /// brought (`fetched`, taken from the [`ShardedOutcome`]).
    pub fn results(&self, fetched: Fetched) -> ResultsView<'_> {
        ResultsView::new(self.view(), fetched)
    }

    /// Runs `req`: on one engine ([`Engine::search`], every shard count `None`), or over
    /// every shard ([`ShardSet::search`]).
    pub fn search(&self, req: &SearchRequest) -> Result<ShardedOutcome> {
        match self {
            Searcher::Single(e) => Ok(ShardedOutcome {
                outcome: e.search(req)?,
                answered: 1,
                of: 1,
                failed_shards: Vec::new(),
                partial: Vec::new(),
                shards_ms: 0.0,
                merge_ms: 0.0,
                fetch_ms: 0.0,
                fetched: Fetched::default(),
            }),
            Searcher::Sharded(s) => s.search(req),
        }
    }

    /// How many shards the index has (1: a single index).
    pub fn shard_count(&self) -> usize {
        match self {
            Searcher::Single(_) => 1,
            Searcher::Sharded(s) => s.shards.len(),
        }
    }
}
