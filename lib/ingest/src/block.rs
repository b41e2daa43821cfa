//! What a parsed document is: an optional title and ordered text blocks.

/// What a block was in the document.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BlockKind {
    /// A heading, with its level from 1 (the top) to 6.
    Heading(u8),
    /// A paragraph, or text that is no other kind of block.
    Paragraph,
    /// One list item (the items of a nested list are blocks of their own).
    ListItem,
    /// A paragraph of a quotation (a Markdown `>` block, an HTML `blockquote`).
    Quote,
    /// A block of code or preformatted text.
    Code,
    /// One table row, its cells joined by `" | "`.
    TableRow,
}

/// One block of text, in document order.
///
/// Its text is never empty, has no whitespace at either end and never contains a blank line
/// (`"\n\n"`): a caller may join blocks with `"\n\n"` and find each one again at exact
/// character offsets.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Block {
    /// What the block was in the document.
    pub kind: BlockKind,
    /// The block's visible text, markup removed.
    pub text: String,
    /// The page it is on, from 1, in a document that has pages (a PDF); `None` otherwise.
    pub page: Option<u32>,
}

/// A parsed document.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Parsed {
    /// The document's title: Markdown's first level-1 heading; HTML's `<title>`, else its
    /// first `<h1>`; `None` for plain text and when there is none.
    pub title: Option<String>,
    /// The document's text, block by block, in order.
    pub blocks: Vec<Block>,
    /// Markdown's YAML front matter, verbatim without its `---` fences (not text: no block
    /// holds it); `None` for other formats and when there is none.
    pub front_matter: Option<String>,
}

/// Normalises a block's text to the invariants [`Block`] promises: line endings become
/// `"\n"`, whitespace at the end of each line and at the start of the text goes, and lines
/// that are empty or only whitespace are dropped (so no `"\n\n"` is left). `None` when
/// nothing is left.
pub(crate) fn clean(text: &str) -> Option<String> {
    let mut out = String::with_capacity(text.len());
    for line in text.split(['\n', '\r']) {
        let line = line.trim_end();
        if line.trim_start().is_empty() {
            continue;
        }
        if out.is_empty() {
            out.push_str(line.trim_start());
        } else {
            out.push('\n');
            out.push_str(line);
        }
    }
    (!out.is_empty()).then_some(out)
}

/// Blocks as a parser finds them: each text is [`clean`]ed, and empty ones are dropped.
#[derive(Debug, Default)]
pub(crate) struct Blocks(pub(crate) Vec<Block>);

impl Blocks {
    /// Adds a block of `kind` with `text`, unless nothing visible is left of it.
    pub(crate) fn push(&mut self, kind: BlockKind, text: &str) {
        if let Some(text) = clean(text) {
            self.0.push(Block { kind, text, page: None });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clean_keeps_single_newlines_and_drops_blank_lines_and_end_whitespace() {
        assert_eq!(
            clean("  first line  \n\n \t \n  indented\r\nlast\r\r\n"),
            Some("first line\n  indented\nlast".into())
        );
        assert_eq!(clean(" \n\t\r\n "), None);
        assert_eq!(clean(""), None);
        assert_eq!(clean("word"), Some("word".into()));
    }
}
