//! Cutting a parsed raw document (blocks of text in order) into segments: the rule the
//! document API and the index build share, so a file written through the API and the
//! same file uploaded to a corpus prefix are segmented alike.

use sextant_ingest::{Block, BlockKind};

use super::split_sentences;

/// A block of text longer than this (characters) is cut into its sentences, one segment
/// each, so a long paragraph is cited by sentence.
pub const LONG_BLOCK_CHARS: usize = 600;

/// A parsed document's segments and, when its blocks have pages (a PDF), the page of each
/// ([`Document::pages`](super::Document::pages)).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Segmented {
    /// The segments, in order.
    pub segments: Vec<String>,
    /// The page of each segment; empty when no block has a page.
    pub pages: Vec<u32>,
}

/// The segments of `blocks`: each block one segment, a block longer than
/// [`LONG_BLOCK_CHARS`] cut into its sentences (code kept whole however long), each on its
/// block's page.
pub fn segment_blocks(blocks: impl IntoIterator<Item = Block>) -> Segmented {
    let mut out = Segmented::default();
    let mut paged = false;
    let mut page = 1;
    let push = |out: &mut Segmented, text: String, page: u32| {
        out.segments.push(text);
        out.pages.push(page);
    };
    for b in blocks {
        paged |= b.page.is_some();
        page = b.page.unwrap_or(page).max(page);
        if b.kind != BlockKind::Code && b.text.chars().count() > LONG_BLOCK_CHARS {
            let sentences = split_sentences(&b.text);
            if sentences.len() > 1 {
                sentences.into_iter().filter(|s| !s.trim().is_empty()).for_each(|s| push(&mut out, s, page));
                continue;
            }
        }
        push(&mut out, b.text, page);
    }
    if !paged {
        out.pages.clear();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block(kind: BlockKind, text: &str, page: Option<u32>) -> Block {
        Block { kind, text: text.into(), page }
    }

    #[test]
    fn long_blocks_are_cut_into_sentences_and_code_is_kept_whole() {
        let long = "Revenue rose on pricing. ".repeat(30);
        let blocks = vec![
            block(BlockKind::Heading(1), "Results", None),
            block(BlockKind::Paragraph, long.trim(), None),
            block(BlockKind::Code, &"x = 1; ".repeat(100), None),
        ];
        let out = segment_blocks(blocks);
        assert_eq!(out.segments[0], "Results");
        assert_eq!(out.segments.len(), 1 + 30 + 1);
        assert!(out.segments[1..31].iter().all(|s| s == "Revenue rose on pricing."));
        assert!(out.segments[31].len() > LONG_BLOCK_CHARS, "code stays one segment");
        assert!(out.pages.is_empty(), "no block has a page");
    }

    #[test]
    fn every_segment_of_a_paged_document_is_on_its_blocks_page() {
        let long = "Cash was ample. ".repeat(50);
        let blocks = vec![
            block(BlockKind::Paragraph, "Cover", Some(1)),
            block(BlockKind::Paragraph, long.trim(), Some(2)),
            block(BlockKind::Paragraph, "Notes", Some(5)),
        ];
        let out = segment_blocks(blocks);
        assert_eq!(out.segments.len(), 1 + 50 + 1);
        assert_eq!(out.pages.len(), out.segments.len());
        assert_eq!(out.pages[0], 1);
        assert!(out.pages[1..51].iter().all(|&p| p == 2));
        assert_eq!(out.pages[51], 5);
    }
}
