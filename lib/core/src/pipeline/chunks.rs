//! What the stages after retrieval (fusion, dense feedback, rerank, recency, diversity)
//! read of the chunks they rank ([`ChunkSource`]), and what a reader of search results
//! reads of an index ([`IndexView`]): one index's, or every shard's of a sharded index,
//! whose documents and chunks are counted across the shards ([`crate::shards`]).

use std::ops::Range;

use crate::corpus::{Chunk, Document, MetadataSchema};
use crate::error::Result;
use crate::index::{Analyzer, Index, Manifest, Provenance};

/// The chunks a search ranks, by the ids its paths' lists carry.
pub trait ChunkSource: Sync {
    /// The ordinal of `chunk`'s document (what fusion by document groups by), unique
    /// across everything this source holds.
    fn doc(&self, chunk: u32) -> u32;
    /// `chunk`'s text (what a reranker reads).
    fn text(&self, chunk: u32) -> &str;
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
    fn text(&self, chunk: u32) -> &str {
        &self.chunks[chunk as usize].text
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
    /// Chunk `c` (its `doc` is its own index's or shard's: read its document with
    /// [`ChunkSource::document`]).
    fn chunk(&self, c: u32) -> &Chunk;
    /// Where chunk `c` comes from, `chunk` being `c`.
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
    fn chunk(&self, c: u32) -> &Chunk {
        &self.chunks[c as usize]
    }
    fn provenance(&self, c: u32) -> Provenance<'_> {
        Index::provenance(self, c)
    }
    fn analyzer(&self) -> Analyzer {
        self.bm25.analyzer()
    }
    fn idf(&self, term: &str) -> f32 {
        self.bm25.idf_of(term)
    }
    fn metadata_schema(&self) -> &MetadataSchema {
        Index::metadata_schema(self)
    }
    fn documents(&self) -> Box<dyn Iterator<Item = &Document> + '_> {
        Box::new(self.documents.iter())
    }
}
