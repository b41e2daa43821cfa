//! Cutting a parsed raw document (blocks of text in order) into segments: the rule the
//! document API and the index build share, so a file written through the API and the
//! same file uploaded to a corpus prefix are segmented alike.

use super::split_sentences;

/// A block of text longer than this (characters) is cut into its sentences, one segment
/// each, so a long paragraph is cited by sentence.
pub const LONG_BLOCK_CHARS: usize = 600;

/// One block of a parsed document, as segmentation sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TextBlock {
    /// The block's text (trimmed, non-empty).
    pub text: String,
    /// Kept as one segment however long (code, preformatted text).
    pub keep_whole: bool,
}

/// The segments of `blocks`: each block one segment, a block longer than
/// [`LONG_BLOCK_CHARS`] (and not [`TextBlock::keep_whole`]) cut into its sentences.
pub fn segment_blocks(blocks: impl IntoIterator<Item = TextBlock>) -> Vec<String> {
    let mut out = Vec::new();
    for b in blocks {
        if !b.keep_whole && b.text.chars().count() > LONG_BLOCK_CHARS {
            let sentences = split_sentences(&b.text);
            if sentences.len() > 1 {
                out.extend(sentences.into_iter().filter(|s| !s.trim().is_empty()));
                continue;
            }
        }
        out.push(b.text);
    }
    out
}
