//! Where a chunk comes from: its document and its place in it. The one provenance type of
//! Sextant; each API maps it to its own wire shape at the edge.

use std::ops::Range;

use crate::corpus::Document;

/// The provenance of one chunk of an index ([`Index::provenance`](super::Index::provenance)).
#[derive(Debug, Clone)]
pub struct Provenance<'a> {
    /// The chunk's ordinal in the index.
    pub chunk: u32,
    /// The chunk's ordinal among its document's chunks, from 0.
    pub ordinal_in_document: u32,
    /// The chunk's document.
    pub document: &'a Document,
    /// The document segments the chunk overlaps (end exclusive); a chunk cut from a long
    /// segment covers only part of it.
    pub segments: Range<u32>,
    /// The chunk's range of its document's text, in `char`s (end exclusive).
    pub chars: Range<usize>,
}

impl Provenance<'_> {
    /// The first and last page the chunk is on (its first and last segment's pages), for a
    /// document with pages (a PDF); `None` otherwise.
    pub fn pages(&self) -> Option<(u32, u32)> {
        self.document.page_range(self.segments.clone())
    }

    /// The chunk's citation id, `documentId#n` with `n` its ordinal within the document:
    /// stable when other documents are added to or removed from the index.
    pub fn chunk_id(&self) -> String {
        format!("{}#{}", self.document.document_id, self.ordinal_in_document)
    }
}
