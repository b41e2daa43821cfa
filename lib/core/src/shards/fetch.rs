//! The fetch phase of a sharded search: a router holds no text and nothing per chunk (its
//! stores are the shards' documents, [`ShardStore`](crate::index::ShardStore)), so it asks
//! the shards for the text and place of the chunks a search returns, and of the
//! reranker's candidates, only ([`ShardRequest::Fetch`](super::ShardRequest::Fetch)).
//! [`Fetched`] holds what came back, and [`ResultsView`] reads the results through it.

use std::borrow::Cow;
use std::collections::HashMap;
use std::ops::Range;
use std::sync::Mutex;

use super::protocol::FetchedChunk;
use super::router::ShardSet;
use crate::corpus::{Document, MetadataSchema};
use crate::error::Result;
use crate::index::{Analyzer, Manifest, Provenance};
use crate::pipeline::{ChunkSegment, ChunkSource, IndexView};

/// What a search's fetch phase brought of its results, by global chunk id: each chunk's
/// text and place in its document and, when asked for, the segments it overlaps. Empty
/// for a search of one index, whose results are read from the index itself.
#[derive(Debug, Clone, Default)]
pub struct Fetched {
    /// Each chunk as its shard gave it, and whether its segments were asked for.
    chunks: HashMap<u32, (FetchedChunk, bool)>,
}

impl Fetched {
    /// Keeps `chunk` as its shard gave it (`with_segments`: its segments were asked for).
    pub(super) fn insert(&mut self, chunk: u32, fetched: FetchedChunk, with_segments: bool) {
        self.chunks.insert(chunk, (fetched, with_segments));
    }

    /// Whether chunk `chunk` was fetched (with its segments, when `segments`).
    pub fn has(&self, chunk: u32, segments: bool) -> bool {
        self.chunks.get(&chunk).is_some_and(|(_, s)| !segments || *s)
    }

    /// How many chunks were fetched.
    pub fn len(&self) -> usize {
        self.chunks.len()
    }

    /// Whether nothing was fetched.
    pub fn is_empty(&self) -> bool {
        self.chunks.is_empty()
    }
}

/// An index as a search's results are read from it: the index itself, with what the
/// search's fetch phase brought ([`Fetched`]) in place of the text a router lacks.
/// Everything else is the index's ([`Searcher::results`](super::Searcher::results)).
pub struct ResultsView<'a> {
    base: &'a dyn IndexView,
    fetched: Fetched,
}

impl<'a> ResultsView<'a> {
    /// `base` with `fetched`'s chunks read in place of its own.
    pub fn new(base: &'a dyn IndexView, fetched: Fetched) -> Self {
        ResultsView { base, fetched }
    }
}

impl ChunkSource for ResultsView<'_> {
    fn doc(&self, chunk: u32) -> u32 {
        self.base.doc(chunk)
    }
    fn texts(&self, chunks: &[u32]) -> Result<Vec<Cow<'_, str>>> {
        if chunks.iter().all(|c| self.fetched.chunks.contains_key(c)) {
            return Ok(chunks.iter().map(|c| Cow::Borrowed(self.fetched.chunks[c].0.text.as_str())).collect());
        }
        self.base.texts(chunks)
    }
    fn document(&self, chunk: u32) -> &Document {
        self.base.document(chunk)
    }
    fn dense_scores(&self, chunks: &[u32], queries: &[&[f32]]) -> Result<Vec<Vec<f32>>> {
        self.base.dense_scores(chunks, queries)
    }
    fn nearest_windows(&self, chunks: &[u32], query: &[f32]) -> Result<Vec<Vec<f32>>> {
        self.base.nearest_windows(chunks, query)
    }
}

impl IndexView for ResultsView<'_> {
    fn manifest(&self) -> &Manifest {
        self.base.manifest()
    }
    fn document_count(&self) -> usize {
        self.base.document_count()
    }
    fn document_at(&self, d: u32) -> &Document {
        self.base.document_at(d)
    }
    fn is_withdrawn(&self, d: u32) -> bool {
        self.base.is_withdrawn(d)
    }
    fn chunks_of(&self, d: u32) -> Range<u32> {
        self.base.chunks_of(d)
    }
    fn text(&self, c: u32) -> &str {
        self.fetched.chunks.get(&c).map_or_else(|| self.base.text(c), |(f, _)| f.text.as_str())
    }
    fn segments_of(&self, c: u32) -> Vec<ChunkSegment> {
        match self.fetched.chunks.get(&c) {
            Some((f, true)) => f.segments.clone(),
            _ => self.base.segments_of(c),
        }
    }
    fn provenance(&self, c: u32) -> Provenance<'_> {
        let p = self.base.provenance(c);
        match self.fetched.chunks.get(&c) {
            Some((f, _)) => Provenance {
                segments: f.span.seg_start..f.span.seg_end,
                chars: f.span.char_start as usize..f.span.char_end as usize,
                ..p
            },
            None => p,
        }
    }
    fn analyzer(&self) -> Analyzer {
        self.base.analyzer()
    }
    fn idf(&self, term: &str) -> f32 {
        self.base.idf(term)
    }
    fn metadata_schema(&self) -> &MetadataSchema {
        self.base.metadata_schema()
    }
    fn documents(&self) -> Box<dyn Iterator<Item = &Document> + '_> {
        self.base.documents()
    }
}

/// The shards as one search's later stages read them ([`Engine::finish`](crate::pipeline::Engine::finish)):
/// the chunks the reranker reads are fetched once and kept, so the results among them
/// need no second fetch.
pub(super) struct SearchScope<'a> {
    set: &'a ShardSet,
    fetched: Mutex<HashMap<u32, FetchedChunk>>,
}

impl<'a> SearchScope<'a> {
    pub(super) fn new(set: &'a ShardSet) -> Self {
        SearchScope { set, fetched: Mutex::new(HashMap::new()) }
    }

    /// The chunks fetched while the search ran, by global chunk id.
    pub(super) fn into_fetched(self) -> HashMap<u32, FetchedChunk> {
        self.fetched.into_inner().unwrap_or_else(|e| e.into_inner())
    }
}

impl ChunkSource for SearchScope<'_> {
    fn doc(&self, chunk: u32) -> u32 {
        self.set.doc(chunk)
    }
    /// Fetched from the shards that hold them, those not fetched before; fails when a
    /// shard does not answer.
    fn texts(&self, chunks: &[u32]) -> Result<Vec<Cow<'_, str>>> {
        let mut held = self.fetched.lock().unwrap_or_else(|e| e.into_inner());
        let missing: Vec<u32> = chunks.iter().copied().filter(|c| !held.contains_key(c)).collect();
        held.extend(self.set.fetch_all(&missing)?);
        Ok(chunks.iter().map(|c| Cow::Owned(held[c].text.clone())).collect())
    }
    fn document(&self, chunk: u32) -> &Document {
        self.set.document(chunk)
    }
    fn dense_scores(&self, chunks: &[u32], queries: &[&[f32]]) -> Result<Vec<Vec<f32>>> {
        self.set.dense_scores(chunks, queries)
    }
    fn nearest_windows(&self, chunks: &[u32], query: &[f32]) -> Result<Vec<Vec<f32>>> {
        self.set.nearest_windows(chunks, query)
    }
}
