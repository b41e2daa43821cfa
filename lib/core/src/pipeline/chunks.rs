//! What the stages after retrieval (fusion, dense feedback, rerank, recency, diversity)
//! read of the chunks they rank: one index's, or every shard's of a sharded index, whose
//! chunks are counted across the shards ([`crate::shards`]).

use crate::corpus::Document;
use crate::index::Index;

/// The chunks a search ranks, by the ids its paths' lists carry.
pub trait ChunkSource: Sync {
    /// The ordinal of `chunk`'s document (what fusion by document groups by), unique
    /// across everything this source holds.
    fn doc(&self, chunk: u32) -> u32;
    /// `chunk`'s text (what a reranker reads).
    fn text(&self, chunk: u32) -> &str;
    /// `chunk`'s document (its date is what a recency boost reads).
    fn document(&self, chunk: u32) -> &Document;
    /// `chunk`'s dense score for a unit query vector: its best window's cosine.
    fn dense_score(&self, chunk: u32, query: &[f32]) -> f32;
    /// `chunk`'s dense window nearest to `query`.
    fn dense_nearest(&self, chunk: u32, query: &[f32]) -> &[f32];
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
    fn dense_score(&self, chunk: u32, query: &[f32]) -> f32 {
        Index::dense_score(self, chunk, query)
    }
    fn dense_nearest(&self, chunk: u32, query: &[f32]) -> &[f32] {
        Index::dense_nearest(self, chunk, query)
    }
}
