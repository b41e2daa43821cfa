//! The router: one search over every shard of an index, answered as one index would.

use std::ops::Range;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use rayon::prelude::*;

use crate::corpus::{Chunk, Document, MetadataSchema};
use crate::error::{Error, Result};
use crate::index::{Analyzer, Bitset, Manifest, Provenance};
use crate::pipeline::{
    ChunkSource, Engine, IndexView, Path, PathHit, Retrieved, SearchOutcome, SearchRequest, StageTimings,
};

/// The shards of one index, each with its engine (the same models), searched as one
/// index. Chunk and document ids in its outcomes are those of the single index built from
/// the same documents (documents in the order [`Shards::order`](super::Shards::order)
/// gives, each document's chunks in order), so every tie between equal scores breaks as it
/// would there ([`ShardSet::locate`] finds a chunk's shard).
pub struct ShardSet {
    engines: Vec<Arc<Engine>>,
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
    /// of the search ([`Engine::finish`]).
    pub merge_ms: f64,
}

impl ShardedOutcome {
    /// Whether some shard did not answer, or answered without some path (the results come
    /// from the rest).
    pub fn degraded(&self) -> bool {
        self.answered < self.of || !self.partial.is_empty()
    }
}

impl ShardSet {
    /// The shards `engines`, in shard order (at least one), their documents in the global
    /// order `order` (`order[s][d]`: shard `s`'s document `d`'s ordinal among all; every
    /// ordinal once). Without an order the shards' documents follow each other.
    pub fn new(engines: Vec<Engine>, order: Option<Vec<Vec<u32>>>) -> Result<Self> {
        let wrong = |why: String| Error::invalid("shards", why);
        if engines.is_empty() {
            return Err(wrong("a sharded index needs at least one shard".into()));
        }
        let sizes: Vec<usize> = engines.iter().map(|e| e.index().documents.len()).collect();
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
        if global_doc.len() != engines.len() || global_doc.iter().zip(&sizes).any(|(o, &n)| o.len() != n) {
            return Err(wrong("one document order per shard, one entry per document".into()));
        }
        let chunks: u64 = engines.iter().map(|e| e.index().chunks.len() as u64).sum();
        if chunks > u32::MAX as u64 {
            return Err(wrong(format!("{chunks} chunks: at most {} across the shards", u32::MAX)));
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
            next += engines[s as usize].index().chunks_of(d).len() as u32;
        }
        let newest_day = engines.iter().filter_map(Engine::newest_day).max();
        let mut manifest = engines[0].index().manifest.clone();
        manifest.documents = total;
        manifest.chunks = chunks as usize;
        manifest.resident_bytes = engines.iter().map(|e| e.index().manifest.resident_bytes).sum();
        manifest.created_unix = engines.iter().map(|e| e.index().manifest.created_unix).max().unwrap_or(0);
        manifest.files = Vec::new();
        let engines = engines.into_iter().map(Arc::new).collect();
        Ok(ShardSet {
            engines,
            deadline: None,
            docs,
            first_chunk,
            global_doc,
            newest_day,
            manifest,
            schema: OnceLock::new(),
        })
    }

    /// Leaves out of a search any shard that has not answered within `deadline` (by
    /// default a search waits for every shard): its work goes on in the background and its
    /// answer is dropped.
    pub fn with_deadline(mut self, deadline: Duration) -> Self {
        self.deadline = Some(deadline);
        self
    }

    /// The shards' engines, in shard order.
    pub fn engines(&self) -> &[Arc<Engine>] {
        &self.engines
    }

    /// The shard of `chunk` (a global chunk id) and the shard's own id for it.
    pub fn locate(&self, chunk: u32) -> (usize, u32) {
        let g = self.first_chunk.partition_point(|&f| f <= chunk) - 1;
        let (s, d) = self.docs[g];
        (s as usize, self.engines[s as usize].index().chunks_of(d).start + (chunk - self.first_chunk[g]))
    }

    /// The global id of shard `s`'s chunk `c`.
    pub fn global(&self, s: usize, c: u32) -> u32 {
        let index = self.engines[s].index();
        let d = index.chunks[c as usize].doc;
        self.first_chunk[self.global_doc[s][d as usize] as usize] + (c - index.chunks_of(d).start)
    }

    /// Searches every shard as one index:
    /// 1. the query is encoded once, as [`Engine::search`] encodes it;
    /// 2. every shard retrieves each path's candidates within the filter, with their scores
    ///    ([`Engine::retrieve_paths`]), in parallel;
    /// 3. each path's lists are merged by score, ties by global chunk id (as one index
    ///    breaks them), and cut to the path's depth: each shard's list is the whole index's
    ///    list restricted to that shard, so this is the whole index's list;
    /// 4. the rest of the search runs as on one index ([`Engine::finish`]), reading the
    ///    chunks of every shard.
    ///
    /// A shard that fails (its every path failing included) is left out and named in the
    /// outcome; when none answers the search fails.
    pub fn search(&self, req: &SearchRequest) -> Result<ShardedOutcome> {
        let start = Instant::now();
        let first = &self.engines[0];
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
        let shard_req = SearchRequest { prepared: Some(prepared.clone()), documents: None, ..req.clone() };
        let t = Instant::now();
        let answers = self.ask_every_shard(&shard_req, req.documents.as_deref());
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
        let outcome = first.finish(self, self.newest_day, req, merged)?;
        let merge_ms = t.elapsed().as_secs_f64() * 1e3;
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
        })
    }

    /// Every shard's [`Engine::retrieve_paths`] for `req`, restricted to the documents
    /// `documents` holds (ordinals in the whole index) when given, in shard order: all at
    /// once on the rayon pool, or, with a deadline, each on a thread of its own, a shard
    /// that has not answered by then counting as failed.
    fn ask_every_shard(&self, req: &SearchRequest, documents: Option<&Bitset>) -> Vec<Result<Retrieved>> {
        let request = |s: usize| match documents {
            None => req.clone(),
            Some(all) => {
                let mine = &self.global_doc[s];
                let mut set = Bitset::empty(mine.len());
                mine.iter().enumerate().filter(|(_, &g)| all.contains(g as usize)).for_each(|(d, _)| set.insert(d));
                SearchRequest { documents: Some(Arc::new(set)), ..req.clone() }
            }
        };
        let Some(deadline) = self.deadline else {
            return self
                .engines
                .par_iter()
                .with_max_len(1)
                .enumerate()
                .map(|(s, e)| e.retrieve_paths(&request(s)))
                .collect();
        };
        let (tx, rx) = std::sync::mpsc::channel();
        for (s, engine) in self.engines.iter().enumerate() {
            let (engine, req, tx) = (engine.clone(), request(s), tx.clone());
            std::thread::spawn(move || {
                // The router may have stopped waiting: then nobody receives this.
                let _ = tx.send((s, engine.retrieve_paths(&req)));
            });
        }
        drop(tx);
        let until = Instant::now() + deadline;
        let mut answers: Vec<Option<Result<Retrieved>>> = (0..self.engines.len()).map(|_| None).collect();
        while answers.iter().any(Option::is_none) {
            match rx.recv_timeout(until.saturating_duration_since(Instant::now())) {
                Ok((s, answer)) => answers[s] = Some(answer),
                Err(_) => break,
            }
        }
        let late = || Error::Component {
            component: "index shard".into(),
            reason: format!("no answer within its deadline of {} ms", deadline.as_millis()),
        };
        answers.into_iter().map(|a| a.unwrap_or_else(|| Err(late()))).collect()
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
                list.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
                list.truncate(k(p));
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

    fn index_of(&self, chunk: u32) -> (&crate::index::Index, u32) {
        let (s, c) = self.locate(chunk);
        (self.engines[s].index(), c)
    }
}

impl ChunkSource for ShardSet {
    fn doc(&self, chunk: u32) -> u32 {
        (self.first_chunk.partition_point(|&f| f <= chunk) - 1) as u32
    }
    fn text(&self, chunk: u32) -> &str {
        let (index, c) = self.index_of(chunk);
        &index.chunks[c as usize].text
    }
    fn document(&self, chunk: u32) -> &Document {
        let (index, c) = self.index_of(chunk);
        index.document_of(c)
    }
    fn dense_score(&self, chunk: u32, query: &[f32]) -> f32 {
        let (index, c) = self.index_of(chunk);
        index.dense_score(c, query)
    }
    fn dense_nearest(&self, chunk: u32, query: &[f32]) -> &[f32] {
        let (index, c) = self.index_of(chunk);
        index.dense_nearest(c, query)
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
        &self.engines[s as usize].index().documents[local as usize]
    }
    fn is_withdrawn(&self, d: u32) -> bool {
        let (s, local) = self.docs[d as usize];
        self.engines[s as usize].index().is_withdrawn(local)
    }
    fn chunks_of(&self, d: u32) -> Range<u32> {
        let (s, local) = self.docs[d as usize];
        let first = self.first_chunk[d as usize];
        first..first + self.engines[s as usize].index().chunks_of(local).len() as u32
    }
    fn chunk(&self, c: u32) -> &Chunk {
        let (index, local) = self.index_of(c);
        &index.chunks[local as usize]
    }
    fn provenance(&self, c: u32) -> Provenance<'_> {
        let (index, local) = self.index_of(c);
        Provenance { chunk: c, ..index.provenance(local) }
    }
    fn analyzer(&self) -> Analyzer {
        self.engines[0].index().bm25.analyzer()
    }
    /// `idf(Σ N_s, Σ df_s(term))`: the shards hold disjoint chunks, so the sums are the
    /// whole index's `N` and `df`.
    fn idf(&self, term: &str) -> f32 {
        let bm25 = || self.engines.iter().map(|e| &e.index().bm25);
        let n: usize = bm25().map(|b| b.inverted.num_chunks as usize).sum();
        let df: usize = bm25().map(|b| b.df_of(term)).sum();
        crate::index::idf(n.max(1) as f32, df as f32)
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
    /// the first shard's: every shard's are the same).
    pub fn engine(&self) -> &Arc<Engine> {
        match self {
            Searcher::Single(e) => e,
            Searcher::Sharded(s) => &s.engines[0],
        }
    }

    /// The index as the results are read from it.
    pub fn view(&self) -> &dyn IndexView {
        match self {
            Searcher::Single(e) => &**e.index(),
            Searcher::Sharded(s) => &**s,
        }
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
            }),
            Searcher::Sharded(s) => s.search(req),
        }
    }

    /// How many shards the index has (1: a single index).
    pub fn shard_count(&self) -> usize {
        match self {
            Searcher::Single(_) => 1,
            Searcher::Sharded(s) => s.engines.len(),
        }
    }
}
