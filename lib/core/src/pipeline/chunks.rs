//! What the stages after retrieval (fusion, dense feedback, rerank, recency, diversity)
//! read of the chunks they rank ([`ChunkSource`]), and what a reader of search results
//! reads of an index ([`IndexView`]): one index's, or every shard's of a sharded index,
//! whose documents and chunks are counted across the shards ([`crate::shards`]).

use std::borrow::Cow;
use std::ops::Range;

use serde::{Deserialize, Serialize};

use crate::corpus::{Document, MetadataSchema};
use crate::error::Result;
use crate::index::{Analyzer, Index, Manifest, Provenance};

/// One document segment a chunk overlaps, whole ([`IndexView::segments_of`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChunkSegment {
    /// The segment's ordinal in its document, from 0.
    pub sequence: u32,
    /// Its text.
    pub content: String,
    /// Where it starts in its document's text, in `char`s.
    pub char_start: usize,
    /// Where it ends (exclusive).
    pub char_end: usize,
}

/// The chunks a search ranks, by the ids its paths' lists carry.
pub trait ChunkSource: Sync {
    /// The ordinal of `chunk`'s document (what fusion by document groups by), unique
    /// across everything this source holds.
    fn doc(&self, chunk: u32) -> u32;
    /// The texts of `chunks`, in order (what a reranker reads): borrowed from an index that
    /// holds them, fetched from the shards that hold them by a sharded index's router, which
    /// keeps no text ([`crate::shards::ShardSet`]). Fails when they cannot be read.
    fn texts(&self, chunks: &[u32]) -> Result<Vec<Cow<'_, str>>>;
    /// `chunk`'s document (its date is what a recency boost reads).
    fn document(&self, chunk: u32) -> &Document;
    /// The dense scores of `chunks` for each unit query vector of `queries` (a chunk's
    /// score is its best window's cosine): `scores[q][i]` is `chunks[i]`'s for
    /// `queries[q]`. Asked in one batch, as a shard behind a protocol answers it
    /// ([`crate::shards::Shard`]); fails when the vectors cannot be read.
    fn dense_scores(&self, chunks: &[u32], queries: &[&[f32]]) -> Result<Vec<Vec<f32>>>;
    /// The dense window of each of `chunks` nearest to the unit query vector `query`.
    fn nearest_windows(&self, chunks: &[u32], query: &[f32]) -> Result<Vec<Vec<f32>>>;
}

impl ChunkSource for Index {
    fn doc(&self, chunk: u32) -> u32 {
        self.chunks[chunk as usize].doc
    }
    fn texts(&self, chunks: &[u32]) -> Result<Vec<Cow<'_, str>>> {
        Ok(chunks.iter().map(|&c| Cow::Borrowed(self.chunks[c as usize].text.as_str())).collect())
    }
    fn document(&self, chunk: u32) -> &Document {
        self.document_of(chunk)
    }
    fn dense_scores(&self, chunks: &[u32], queries: &[&[f32]]) -> Result<Vec<Vec<f32>>> {
        Ok(queries.iter().map(|q| chunks.iter().map(|&c| self.dense_score(c, q)).collect()).collect())
    }
    fn nearest_windows(&self, chunks: &[u32], query: &[f32]) -> Result<Vec<Vec<f32>>> {
        Ok(chunks.iter().map(|&c| self.dense_nearest(c, query).to_vec()).collect())
    }
}

/// An index as the API reads it around a search (filters before, results after): one
/// index, or every shard of a sharded one, documents and chunks by their ids in the whole
/// index (those a search's hits carry).
pub trait IndexView: ChunkSource + Send {
    /// The manifest; of a sharded index, the first shard's with the whole index's counts,
    /// resident size and newest build time.
    fn manifest(&self) -> &Manifest;
    /// How many documents, withdrawn ones included.
    fn document_count(&self) -> usize;
    /// Document `d`.
    fn document_at(&self, d: u32) -> &Document;
    /// Whether document `d` is withdrawn (deleted from a writable index, not compacted yet).
    fn is_withdrawn(&self, d: u32) -> bool;
    /// The chunks of document `d`.
    fn chunks_of(&self, d: u32) -> Range<u32>;
    /// Chunk `c`'s text. A sharded index's router holds no text (empty here): the
    /// results' comes from the search's fetch phase ([`crate::shards::ShardedOutcome::fetched`],
    /// read through [`crate::shards::Searcher::results`]).
    fn text(&self, c: u32) -> &str;
    /// The document segments chunk `c` overlaps, in order, each whole with its place in
    /// the document's text (a router's: see [`IndexView::provenance`]).
    fn segments_of(&self, c: u32) -> Vec<ChunkSegment> {
        let p = self.provenance(c);
        let spans = p.document.segment_spans();
        p.segments
            .filter_map(|s| {
                let (content, span) = (p.document.segments.get(s as usize)?, spans.get(s as usize)?);
                Some(ChunkSegment {
                    sequence: s,
                    content: content.clone(),
                    char_start: span.char_start,
                    char_end: span.char_end,
                })
            })
            .collect()
    }
    /// Where chunk `c` comes from, `chunk` being `c`. A sharded index's router knows a
    /// chunk's document and ordinal there, not its segments and characters (empty here):
    /// the results' come from the fetch phase, as their text does (see [`IndexView::text`]).
    fn provenance(&self, c: u32) -> Provenance<'_>;
    /// The analyzer BM25 reads text with.
    fn analyzer(&self) -> Analyzer;
    /// BM25's [`idf`](crate::index::idf) of `term` (an analysed term) over every chunk
    /// the BM25 index holds (of a sharded index, every shard's: the same as one index's).
    fn idf(&self, term: &str) -> f32;
    /// The metadata fields of the documents, with their types.
    fn metadata_schema(&self) -> &MetadataSchema;
    /// Every document, in order.
    fn documents(&self) -> Box<dyn Iterator<Item = &Document> + '_> {
        Box::new((0..self.document_count() as u32).map(|d| self.document_at(d)))
    }
}

impl IndexView for Index {
    fn manifest(&self) -> &Manifest {
        &self.manifest
    }
    fn document_count(&self) -> usize {
        self.documents.len()
    }
    fn document_at(&self, d: u32) -> &Document {
        &self.documents[d as usize]
    }
    fn is_withdrawn(&self, d: u32) -> bool {
        Index::is_withdrawn(self, d)
    }
    fn chunks_of(&self, d: u32) -> Range<u32> {
        Index::chunks_of(self, d)
    }
    fn text(&self, c: u32) -> &str {
        &self.chunks[c as usize].text
    }
    fn provenance(&self, c: u32) -> Provenance<'_> {
        Index::provenance(self, c)
    }
    fn analyzer(&self) -> Analyzer {
        self.bm25.analyzer()
    }
    fn idf(&self, term: &str) -> f32 {
        self.term_idf(term)
    }
    fn metadata_schema(&self) -> &MetadataSchema {
        Index::metadata_schema(self)
    }
    fn documents(&self) -> Box<dyn Iterator<Item = &Document> + '_> {
        Box::new(self.documents.iter())
    }
}
