//! The document model.

use serde::{Deserialize, Serialize};

use super::metadata::Metadata;
use super::values::{Date, DocumentType, Quarter};

/// What joins two segments in a document's rebuilt text.
pub const SEGMENT_SEPARATOR: &str = "\n\n";

/// A source document: metadata plus ordered segments (sentences or paragraphs).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct Document {
    /// Stable identifier, unique in a corpus.
    pub document_id: String,
    /// Human-readable title.
    #[serde(default)]
    pub title: String,
    /// `earnings_call`, `10-K`, `10-Q`, `article`, ...
    #[serde(default)]
    pub document_type: DocumentType,
    /// Company ticker, when the document is about one company.
    #[serde(default)]
    pub ticker: Option<String>,
    /// Fiscal year discussed.
    #[serde(default)]
    pub year: Option<i32>,
    /// Fiscal quarter discussed (`Q1`..`Q4`).
    #[serde(default)]
    pub quarter: Option<Quarter>,
    /// Filing form (`10-K`, `10-Q`, ...).
    #[serde(default)]
    pub filing_type: Option<String>,
    /// Where the original can be read.
    #[serde(default)]
    pub source_url: Option<String>,
    /// Publication date, `YYYY-MM-DD`.
    #[serde(default)]
    pub published_at: Option<Date>,
    /// Ordered segments; the text is their join with [`SEGMENT_SEPARATOR`].
    pub segments: Vec<String>,
    /// The team's own fields (see [`Metadata`]); empty when none.
    #[serde(default)]
    pub metadata: Metadata,
    /// The page of each segment, from 1, for a document that has pages (a PDF): as many
    /// as [`Document::segments`], never decreasing. Empty for a document without pages.
    #[serde(default)]
    pub pages: Vec<u32>,
}

/// Where a segment sits in its document's rebuilt text, in `char`s, end exclusive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegmentSpan {
    /// First char of the segment.
    pub char_start: usize,
    /// One past its last char.
    pub char_end: usize,
}

impl Document {
    /// The document text: segments joined by [`SEGMENT_SEPARATOR`].
    pub fn text(&self) -> String {
        self.segments.join(SEGMENT_SEPARATOR)
    }

    /// The first and last page that segments `segments` (end exclusive) are on; `None` for
    /// a document without pages or an empty range.
    pub fn page_range(&self, segments: std::ops::Range<u32>) -> Option<(u32, u32)> {
        let first = *self.pages.get(segments.start as usize)?;
        let last = *self.pages.get((segments.end as usize).checked_sub(1)?)?;
        (segments.start < segments.end).then_some((first, last.max(first)))
    }

    /// Why `pages` cannot be this document's (its field's reason, in the API's words), or
    /// `None` when it can: empty, or one page from 1 per segment, never decreasing.
    pub fn pages_problem(&self) -> Option<String> {
        if self.pages.is_empty() {
            return None;
        }
        if self.pages.len() != self.segments.len() {
            return Some(format!(
                "must give one page per segment: {} pages for {} segments",
                self.pages.len(),
                self.segments.len()
            ));
        }
        if self.pages.contains(&0) {
            return Some("counts pages from 1, got 0".into());
        }
        if self.pages.windows(2).any(|w| w[1] < w[0]) {
            return Some("must never decrease (a segment is on its page or a later one)".into());
        }
        None
    }

    /// The char span of every segment in [`Document::text`].
    pub fn segment_spans(&self) -> Vec<SegmentSpan> {
        let sep = SEGMENT_SEPARATOR.chars().count();
        let mut at = 0;
        self.segments
            .iter()
            .map(|s| {
                let len = s.chars().count();
                let span = SegmentSpan { char_start: at, char_end: at + len };
                at += len + sep;
                span
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slice(text: &str, span: SegmentSpan) -> String {
        text.chars().skip(span.char_start).take(span.char_end - span.char_start).collect()
    }

    #[test]
    fn spans_slice_the_rebuilt_text_to_each_segment_in_chars() {
        let doc = Document {
            segments: vec![
                "Revenue rose 8% — a record.".into(),
                "Marge brute: 46,2 %".into(),
                "".into(),
                "日本での売上".into(),
                "🙂 end".into(),
            ],
            ..Default::default()
        };
        let text = doc.text();
        let spans = doc.segment_spans();
        for (seg, span) in doc.segments.iter().zip(spans) {
            assert_eq!(&slice(&text, span), seg);
        }
    }

    /// Property: for any segments of any Unicode text (multi-byte letters, emoji, combining
    /// marks, empty segments, segments holding the separator itself), every span slices the
    /// rebuilt text to exactly its segment.
    #[test]
    fn spans_slice_any_unicode_text_to_its_segments() {
        const PIECES: &[&str] = &[
            "a",
            "Z",
            " ",
            "\n",
            "\n\n",
            "é",
            "e\u{301}",
            "ß",
            "日本",
            "🙂",
            "👩‍💻",
            "\u{200d}",
            "%",
            "—",
            "\t",
            "\r\n",
            "ﬁ",
        ];
        let mut rng = crate::testutil::Rng(0x5e97_a47d);
        for case in 0..500 {
            let segments: Vec<String> = (0..rng.below(6))
                .map(|_| (0..rng.below(12)).map(|_| PIECES[rng.below(PIECES.len())]).collect())
                .collect();
            let doc = Document { segments, ..Default::default() };
            let text = doc.text();
            let spans = doc.segment_spans();
            assert_eq!(spans.len(), doc.segments.len());
            for (seg, span) in doc.segments.iter().zip(spans) {
                assert_eq!(&slice(&text, span), seg, "case {case}: {:?}", doc.segments);
            }
        }
    }

    #[test]
    fn a_range_of_segments_spans_the_pages_of_its_first_and_last() {
        let doc = Document {
            segments: vec!["a".into(), "b".into(), "c".into(), "d".into()],
            pages: vec![1, 1, 2, 4],
            ..Default::default()
        };
        assert_eq!(doc.page_range(0..2), Some((1, 1)));
        assert_eq!(doc.page_range(1..4), Some((1, 4)));
        assert_eq!(doc.page_range(3..4), Some((4, 4)));
        assert_eq!(doc.page_range(2..2), None);
        assert_eq!(doc.page_range(3..9), None);
        assert_eq!(Document { pages: vec![], ..doc.clone() }.page_range(0..1), None);
        assert_eq!(doc.pages_problem(), None);
        assert!(Document { pages: vec![1, 2], ..doc.clone() }
            .pages_problem()
            .unwrap()
            .contains("one page per segment"));
        assert!(Document { pages: vec![0, 1, 1, 1], ..doc.clone() }.pages_problem().unwrap().contains("from 1"));
        assert!(Document { pages: vec![2, 1, 1, 1], ..doc }.pages_problem().unwrap().contains("never decrease"));
    }

    #[test]
    fn document_json_uses_the_public_field_names() {
        let doc: Document = serde_json::from_str(concat!(
            r#"{"documentId":"d1","title":"T","documentType":"10-K","ticker":"AAPL","year":2024,"quarter":null,"#,
            r#""filingType":"10-K","sourceUrl":null,"publishedAt":"2024-11-01","segments":["a","b"]}"#
        ))
        .unwrap();
        assert_eq!(doc.document_id, "d1");
        assert_eq!(doc.year, Some(2024));
        assert_eq!(doc.text(), "a\n\nb");
    }
}
