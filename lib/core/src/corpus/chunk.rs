//! Chunks: runs of whole segments up to a token budget.

use serde::{Deserialize, Serialize};

use super::document::{Document, SEGMENT_SEPARATOR};

/// A chunk's place in its document: segments `seg_start..seg_end` (end exclusive).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChunkSpan {
    /// First segment.
    pub seg_start: u32,
    /// One past the last segment.
    pub seg_end: u32,
}

/// A chunk as stored in an index.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Chunk {
    /// Ordinal of the document in the index's document table.
    pub doc: u32,
    /// The segments it covers.
    pub span: ChunkSpan,
    /// Its text: the covered segments joined by [`SEGMENT_SEPARATOR`].
    pub text: String,
}

/// Cuts a document into runs of whole segments whose token count (by `count_tokens`,
/// separators ignored) stays within `budget`. A segment longer than the budget forms a
/// chunk of its own (the encoders truncate it). Empty segments are kept inside runs but
/// never start a chunk of their own. A document without text gives no chunk.
pub fn chunk_document(doc: &Document, budget: usize, count_tokens: &dyn Fn(&str) -> usize) -> Vec<ChunkSpan> {
    let mut spans = Vec::new();
    let mut start = 0usize;
    let mut used = 0usize;
    for (i, seg) in doc.segments.iter().enumerate() {
        let n = count_tokens(seg);
        if i > start && used + n > budget && used > 0 {
            spans.push(ChunkSpan { seg_start: start as u32, seg_end: i as u32 });
            start = i;
            used = 0;
        }
        used += n;
    }
    if start < doc.segments.len() && doc.segments[start..].iter().any(|s| !s.trim().is_empty()) {
        spans.push(ChunkSpan { seg_start: start as u32, seg_end: doc.segments.len() as u32 });
    }
    spans.retain(|s| doc.segments[s.seg_start as usize..s.seg_end as usize].iter().any(|x| !x.trim().is_empty()));
    spans
}

impl Chunk {
    /// Builds the chunk text of `span` in `doc`.
    pub fn new(doc_ordinal: u32, doc: &Document, span: ChunkSpan) -> Self {
        let text = doc.segments[span.seg_start as usize..span.seg_end as usize].join(SEGMENT_SEPARATOR);
        Chunk { doc: doc_ordinal, span, text }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> usize {
        s.split_whitespace().count()
    }

    fn doc(segs: &[&str]) -> Document {
        Document { segments: segs.iter().map(|s| s.to_string()).collect(), ..Default::default() }
    }

    #[test]
    fn packs_whole_segments_up_to_the_budget() {
        let d = doc(&["a b c", "d e", "f g h i", "j"]);
        let spans = chunk_document(&d, 5, &words);
        assert_eq!(spans, vec![ChunkSpan { seg_start: 0, seg_end: 2 }, ChunkSpan { seg_start: 2, seg_end: 4 }]);
        assert_eq!(Chunk::new(0, &d, spans[0]).text, "a b c\n\nd e");
    }

    #[test]
    fn an_oversized_segment_is_a_chunk_of_its_own() {
        let d = doc(&["a", "b c d e f g h", "i"]);
        let spans = chunk_document(&d, 3, &words);
        assert_eq!(spans.len(), 3);
        assert_eq!(spans[1], ChunkSpan { seg_start: 1, seg_end: 2 });
    }

    #[test]
    fn empty_documents_give_no_chunk() {
        assert!(chunk_document(&doc(&[]), 10, &words).is_empty());
        assert!(chunk_document(&doc(&["", "  "]), 10, &words).is_empty());
    }
}
