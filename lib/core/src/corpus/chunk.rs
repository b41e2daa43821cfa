//! Chunks: contiguous runs of a document's text up to a token budget, cut between segments
//! where they fit and inside a segment (between sentences, else between tokens) where one
//! segment alone is over the budget. No text is left out: every token of every segment is
//! in exactly one chunk.

use std::ops::Range;

use serde::{Deserialize, Serialize};

use super::document::{Document, SEGMENT_SEPARATOR};
use super::sentences::sentence_ranges;

/// A chunk's place in its document: the segments it overlaps and its exact range of the
/// document's text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChunkSpan {
    /// First segment it overlaps.
    pub seg_start: u32,
    /// One past the last segment it overlaps.
    pub seg_end: u32,
    /// First `char` of the chunk in [`Document::text`].
    pub char_start: u32,
    /// One past its last `char` (end exclusive).
    pub char_end: u32,
}

/// A chunk as stored in an index.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Chunk {
    /// Ordinal of the document in the index's document table.
    pub doc: u32,
    /// Where it sits in its document.
    pub span: ChunkSpan,
    /// Its text: `Document::text()[char_start..char_end]` (in `char`s).
    pub text: String,
}

/// How the chunker measures text: the encoders' tokenizer, or words in tests.
pub trait TokenMeasure {
    /// The number of tokens of `text` (no special tokens, no truncation).
    fn count(&self, text: &str) -> usize;
    /// The byte range of each token of `text`, in order.
    fn token_ranges(&self, text: &str) -> Vec<Range<usize>>;
}

/// One atomic piece of a document for packing: part or all of one segment.
struct Piece {
    seg: usize,
    bytes: Range<usize>,
    tokens: usize,
}

/// Cuts a document into chunks of at most `budget` tokens (by `measure`; separators hold
/// no token).
///
/// Whole segments are packed in order while the next one fits. A segment over the budget
/// is first cut between sentences (packed the same way), and a sentence over the budget
/// between tokens, preferring a word boundary in the window's second half. Empty segments
/// are kept inside runs but never make a chunk of their own; a document without text gives
/// no chunk. A document whose segments all fit is cut exactly as by whole segments alone.
pub fn chunk_document(doc: &Document, budget: usize, measure: &dyn TokenMeasure) -> Vec<ChunkSpan> {
    chunk_document_with_overlap(doc, budget, 0, measure)
}

/// [`chunk_document`] with each chunk after the first starting up to `overlap` tokens
/// before the end of the one before it: the whole pieces (segments, sentences of a long
/// segment, windows of a long sentence) at the end of the previous chunk that hold at most
/// `overlap` tokens together and leave room in the budget for the chunk's next piece. So a
/// passage that straddles a cut is whole in one chunk more often. With `overlap` 0 every
/// token is in exactly one chunk; with more, in one or two.
pub fn chunk_document_with_overlap(
    doc: &Document,
    budget: usize,
    overlap: usize,
    measure: &dyn TokenMeasure,
) -> Vec<ChunkSpan> {
    let budget = budget.max(1);
    let mut pieces = Vec::new();
    for (i, seg) in doc.segments.iter().enumerate() {
        let n = measure.count(seg);
        if n <= budget {
            pieces.push(Piece { seg: i, bytes: 0..seg.len(), tokens: n });
        } else {
            // With an overlap, sentences stay pieces of their own, so that the end of a
            // chunk can be carried into the next one sentence by sentence.
            let parts =
                if overlap > 0 { sentence_pieces(seg, budget, measure) } else { split_segment(seg, budget, measure) };
            for bytes in parts {
                let tokens = measure.count(&seg[bytes.clone()]);
                pieces.push(Piece { seg: i, bytes, tokens });
            }
        }
    }
    let seg_chars = doc.segment_spans();
    let char_at = |seg: usize, byte: usize| seg_chars[seg].char_start + doc.segments[seg][..byte].chars().count();
    let mut spans = Vec::new();
    let mut emit = |run: &[Piece]| {
        let has_text = run.iter().any(|p| !doc.segments[p.seg][p.bytes.clone()].trim().is_empty());
        if let (true, Some(first), Some(last)) = (has_text, run.first(), run.last()) {
            spans.push(ChunkSpan {
                seg_start: first.seg as u32,
                seg_end: last.seg as u32 + 1,
                char_start: char_at(first.seg, first.bytes.start) as u32,
                char_end: char_at(last.seg, last.bytes.end) as u32,
            });
        }
    };
    let mut start = 0usize;
    let mut used = 0usize;
    for (k, p) in pieces.iter().enumerate() {
        if k > start && used + p.tokens > budget && used > 0 {
            emit(&pieces[start..k]);
            // The next chunk takes the last pieces of this one back, within the overlap.
            let mut from = k;
            let mut carried = 0;
            while from > start + 1 {
                let t = pieces[from - 1].tokens;
                if carried + t > overlap || carried + t + p.tokens > budget {
                    break;
                }
                carried += t;
                from -= 1;
            }
            start = from;
            used = carried;
        }
        used += p.tokens;
    }
    emit(&pieces[start..]);
    spans
}

/// Cuts one over-budget segment into byte ranges of at most `budget` tokens: runs of whole
/// sentences, and token windows of a sentence over the budget. White space between two
/// ranges belongs to neither.
fn split_segment(seg: &str, budget: usize, measure: &dyn TokenMeasure) -> Vec<Range<usize>> {
    let mut out = Vec::new();
    let mut run: Option<(Range<usize>, usize)> = None;
    for sentence in sentence_ranges(seg) {
        let n = measure.count(&seg[sentence.clone()]);
        if n > budget {
            out.extend(run.take().map(|(r, _)| r));
            out.extend(token_windows(seg, sentence, budget, measure));
            continue;
        }
        run = match run.take() {
            Some((r, used)) if used + n <= budget => Some((r.start..sentence.end, used + n)),
            Some((r, _)) => {
                out.push(r);
                Some((sentence, n))
            }
            None => Some((sentence, n)),
        };
    }
    out.extend(run.map(|(r, _)| r));
    out
}

/// Cuts one over-budget segment into its sentences, and a sentence over the budget into
/// token windows ([`token_windows`]); unlike [`split_segment`] it packs nothing.
fn sentence_pieces(seg: &str, budget: usize, measure: &dyn TokenMeasure) -> Vec<Range<usize>> {
    let mut out = Vec::new();
    for sentence in sentence_ranges(seg) {
        if measure.count(&seg[sentence.clone()]) > budget {
            out.extend(token_windows(seg, sentence, budget, measure));
        } else {
            out.push(sentence);
        }
    }
    out
}

/// Cuts `seg[range]` into windows of at most `budget` tokens. A window ends at the last
/// word boundary (a token after white space) in its second half when there is one, else
/// after exactly `budget` tokens.
fn token_windows(seg: &str, range: Range<usize>, budget: usize, measure: &dyn TokenMeasure) -> Vec<Range<usize>> {
    let base = range.start;
    let tokens = measure.token_ranges(&seg[range.clone()]);
    if tokens.is_empty() {
        return vec![range];
    }
    let mut out = Vec::new();
    let mut a = 0;
    while a < tokens.len() {
        let mut b = (a + budget).min(tokens.len());
        if b < tokens.len() {
            let word_start = (a + budget / 2 + 1..=b).rev().find(|&c| tokens[c].start > tokens[c - 1].end);
            b = word_start.unwrap_or(b);
        }
        out.push(base + tokens[a].start..base + tokens[b - 1].end);
        a = b;
    }
    out
}

impl Chunk {
    /// Builds the chunk of `span` in `doc`: its text is the span's range of the document's
    /// text.
    pub fn new(doc_ordinal: u32, doc: &Document, span: ChunkSpan) -> Self {
        let spans = doc.segment_spans();
        let mut text = String::new();
        let covered = span.seg_start as usize..span.seg_end as usize;
        for (i, (seg, at)) in doc.segments[covered.clone()].iter().zip(&spans[covered]).enumerate() {
            let lo = (span.char_start as usize).max(at.char_start) - at.char_start;
            let hi = (span.char_end as usize).min(at.char_end).saturating_sub(at.char_start);
            if i > 0 {
                text.push_str(SEGMENT_SEPARATOR);
            }
            text.extend(seg.chars().skip(lo).take(hi.saturating_sub(lo)));
        }
        Chunk { doc: doc_ordinal, span, text }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::Words;

    #[test]
    fn overlapping_chunks_repeat_the_last_pieces_of_the_chunk_before() {
        let d = doc(&["a b", "c d", "e f", "g h", "i j"]);
        let cut = |overlap| texts(&d, &chunk_document_with_overlap(&d, 4, overlap, &Words));
        assert_eq!(cut(0), vec!["a b\n\nc d", "e f\n\ng h", "i j"]);
        assert_eq!(cut(2), vec!["a b\n\nc d", "c d\n\ne f", "e f\n\ng h", "g h\n\ni j"]);
        assert_eq!(cut(1), cut(0), "a piece of 2 tokens does not fit an overlap of 1");
        // Never the whole previous chunk again, never over the budget.
        let d = doc(&["a b c", "d e f", "g"]);
        for overlap in 0..8 {
            let spans = chunk_document_with_overlap(&d, 4, overlap, &Words);
            for w in spans.windows(2) {
                assert!(w[1].char_start > w[0].char_start && w[1].char_end > w[0].char_end, "{overlap}: {spans:?}");
            }
            for t in texts(&d, &spans) {
                assert!(Words.count(&t) <= 4, "{overlap}: {t:?}");
            }
        }
    }

    /// Characters as tokens, with no white space between them: no word boundary at all.
    struct Chars;

    impl TokenMeasure for Chars {
        fn count(&self, s: &str) -> usize {
            s.chars().filter(|c| !c.is_whitespace()).count()
        }
        fn token_ranges(&self, s: &str) -> Vec<Range<usize>> {
            s.char_indices().filter(|(_, c)| !c.is_whitespace()).map(|(i, c)| i..i + c.len_utf8()).collect()
        }
    }

    fn doc(segs: &[&str]) -> Document {
        Document { segments: segs.iter().map(|s| s.to_string()).collect(), ..Default::default() }
    }

    fn texts(d: &Document, spans: &[ChunkSpan]) -> Vec<String> {
        spans.iter().map(|s| Chunk::new(0, d, *s).text).collect()
    }

    #[test]
    fn packs_whole_segments_up_to_the_budget() {
        let d = doc(&["a b c", "d e", "f g h i", "j"]);
        let spans = chunk_document(&d, 5, &Words);
        assert_eq!(
            spans,
            vec![
                ChunkSpan { seg_start: 0, seg_end: 2, char_start: 0, char_end: 10 },
                ChunkSpan { seg_start: 2, seg_end: 4, char_start: 12, char_end: 22 }
            ]
        );
        assert_eq!(texts(&d, &spans), vec!["a b c\n\nd e", "f g h i\n\nj"]);
    }

    #[test]
    fn an_oversized_segment_is_cut_between_sentences_and_nothing_is_lost() {
        let d = doc(&["Intro.", "One two three. Four five. Six seven eight nine. Ten.", "End."]);
        let spans = chunk_document(&d, 4, &Words);
        assert_eq!(
            texts(&d, &spans),
            vec!["Intro.\n\nOne two three.", "Four five.", "Six seven eight nine.", "Ten.\n\nEnd."]
        );
        // The partial chunks name the segments they overlap and their exact range of the text.
        assert_eq!((spans[0].seg_start, spans[0].seg_end), (0, 2));
        assert_eq!((spans[1].seg_start, spans[1].seg_end, spans[1].char_start, spans[1].char_end), (1, 2, 23, 33));
        assert_eq!((spans[3].seg_start, spans[3].seg_end), (1, 3));
        let text: Vec<char> = d.text().chars().collect();
        for s in &spans {
            let slice: String = text[s.char_start as usize..s.char_end as usize].iter().collect();
            assert_eq!(slice, Chunk::new(0, &d, *s).text);
        }
    }

    #[test]
    fn a_sentence_over_the_budget_is_cut_at_word_boundaries() {
        let d = doc(&["a b c d e f g h i j k"]);
        assert_eq!(texts(&d, &chunk_document(&d, 4, &Words)), vec!["a b c d", "e f g h", "i j k"]);
        // Without any word boundary, windows of exactly the budget.
        let d = doc(&["abcdefghij"]);
        assert_eq!(texts(&d, &chunk_document(&d, 4, &Chars)), vec!["abcd", "efgh", "ij"]);
        // With one, the window ends at the last one of its second half.
        let d = doc(&["abcdef ghij"]);
        assert_eq!(texts(&d, &chunk_document(&d, 8, &Chars)), vec!["abcdef", "ghij"]);
    }

    #[test]
    fn empty_documents_give_no_chunk() {
        assert!(chunk_document(&doc(&[]), 10, &Words).is_empty());
        assert!(chunk_document(&doc(&["", "  "]), 10, &Words).is_empty());
    }

    /// Property: for any document of any text, the chunks are within the budget, in order,
    /// slice the document's text exactly, and together hold every token of it.
    #[test]
    fn every_token_lands_in_exactly_one_chunk_within_the_budget() {
        const WORDS: &[&str] =
            &["Revenue", "rose", "8%.", "Marge", "—", "日本での売上.", "🙂", "e.g.", "Dr.", "Q3", "", "\n", "ﬁn."];
        let mut rng = crate::testutil::Rng(0xc4_4c5);
        for case in 0..400 {
            let segments: Vec<String> = (0..rng.below(5))
                .map(|_| {
                    let n = rng.below(40);
                    (0..n).map(|_| WORDS[rng.below(WORDS.len())]).collect::<Vec<_>>().join(" ")
                })
                .collect();
            let d = Document { segments, ..Default::default() };
            let budget = 1 + rng.below(9);
            let spans = chunk_document(&d, budget, &Words);
            let text: Vec<char> = d.text().chars().collect();
            let mut covered = 0;
            let mut last_end = 0;
            for s in &spans {
                let chunk = Chunk::new(0, &d, *s);
                let slice: String = text[s.char_start as usize..s.char_end as usize].iter().collect();
                assert_eq!(slice, chunk.text, "case {case}");
                assert!(Words.count(&chunk.text) <= budget, "case {case}: {:?} over {budget}", chunk.text);
                assert!(s.char_start as usize >= last_end, "case {case}: chunks overlap");
                last_end = s.char_end as usize;
                covered += Words.count(&chunk.text);
            }
            assert_eq!(covered, Words.count(&d.text()), "case {case}: {:?}", d.segments);
        }
    }
}
