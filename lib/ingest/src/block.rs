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
}

/// A parsed document.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Parsed {
    /// The document's title: Markdown's first level-1 heading; HTML's `<title>`, else its
    /// first `<h1>`; `None` for plain text and when there is none.
    pub title: Option<String>,
    /// The document's text, block by block, in order.
    pub blocks: Vec<Block>,
}
