//! HTML to blocks: the document is parsed as a browser would (html5ever), then its visible
//! text is walked in document order.
//!
//! - Not text: comments, and the contents of `head`, `title`, `script`, `style`, `noscript`,
//!   `template`, `svg`, `iframe`, `noembed` and `noframes`. The first `<title>` is the
//!   document's title; without one, the first `<h1>`'s text is.
//! - Block-level elements (`p`, `div`, `section`, `article`, `main`, `header`, `footer`,
//!   `aside`, `nav`, `h1`-`h6`, `li`, `dt`, `dd`, `blockquote`, `pre`, `figcaption`,
//!   `caption`, `tr`, `address`, and the containers `ul`, `ol`, `dl`, `table`, `figure`,
//!   `form`, `details` and the like) end the text before them and start a new block; text
//!   directly inside a `div` beside child blocks is a block of its own, so nothing is lost.
//! - A block's kind is that of its nearest enclosing `h1`-`h6` (Heading), `li` (ListItem),
//!   `blockquote` (Quote) or `pre` (Code), else Paragraph: a `<p>` in a `<blockquote>` is a
//!   Quote.
//! - Inline elements' text is concatenated, HTML whitespace collapsed to one space (a
//!   no-break space, `&nbsp;`, counts as a space); inside `pre` text is kept verbatim.
//!   `<br>` is a line break.
//! - A `tr` is one TableRow, its `td`/`th` cells' text joined by `" | "` (empty cells kept,
//!   so columns stay aligned). Inside a row, everything belongs to the row: a block or a
//!   nested table inside a cell is a line break within that cell.

use std::mem;

use html5ever::{ns, QualName};

use crate::block::{clean, BlockKind, Blocks, Parsed};
use crate::dom::{self, Data, Exceeded, Id, Tree};
use crate::error::{Error, Result};

/// Parses an HTML document.
pub(crate) fn parse(html: &str) -> Result<Parsed> {
    let mut blocks = Blocks::default();
    let title = blocks_into(html, &mut blocks)?;
    Ok(Parsed { title, blocks: blocks.0, front_matter: None })
}

/// Adds the blocks of the HTML document `html` to `blocks` and returns its title;
/// [`Error::TooDeep`] or [`Error::TooManyElements`] if it exceeds the parser's limits.
pub(crate) fn blocks_into(html: &str, blocks: &mut Blocks) -> Result<Option<String>> {
    let tree = dom::parse(html).map_err(|exceeded| match exceeded {
        Exceeded::Depth => Error::TooDeep { limit: dom::MAX_DEPTH },
        Exceeded::Nodes => Error::TooManyElements { bytes: html.len() },
    })?;
    let mut walker = Walker { blocks, text: Inline::default(), kinds: Vec::new(), pre: 0, row: None, first_h1: None };
    walker.walk(&tree);
    Ok(title_element(&tree).or(walker.first_h1))
}

/// What an element does to the text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    /// Nothing in it is visible text.
    Skip,
    /// `<br>`.
    Break,
    /// `td`, `th`.
    Cell,
    /// `tr`.
    Row,
    /// `pre` and its obsolete kin.
    Pre,
    /// A block-level element; with a kind if it gives one to the blocks inside it.
    Block(Option<BlockKind>),
    /// Anything else: its text runs on with its neighbours'.
    Inline,
}

fn role(name: &QualName) -> Role {
    if &*name.local == "svg" {
        return Role::Skip;
    }
    if name.ns != ns!(html) {
        return Role::Inline;
    }
    match &*name.local {
        "head" | "title" | "script" | "style" | "noscript" | "template" | "iframe" | "noembed" | "noframes" => {
            Role::Skip
        }
        "br" => Role::Break,
        "td" | "th" => Role::Cell,
        "tr" => Role::Row,
        "pre" | "listing" | "xmp" | "plaintext" => Role::Pre,
        "h1" => Role::Block(Some(BlockKind::Heading(1))),
        "h2" => Role::Block(Some(BlockKind::Heading(2))),
        "h3" => Role::Block(Some(BlockKind::Heading(3))),
        "h4" => Role::Block(Some(BlockKind::Heading(4))),
        "h5" => Role::Block(Some(BlockKind::Heading(5))),
        "h6" => Role::Block(Some(BlockKind::Heading(6))),
        "li" => Role::Block(Some(BlockKind::ListItem)),
        "blockquote" => Role::Block(Some(BlockKind::Quote)),
        "p" | "div" | "section" | "article" | "main" | "header" | "footer" | "aside" | "nav" | "address" | "dt"
        | "dd" | "figcaption" | "caption" | "figure" | "ul" | "ol" | "dl" | "menu" | "dir" | "table" | "thead"
        | "tbody" | "tfoot" | "colgroup" | "form" | "fieldset" | "legend" | "details" | "summary" | "dialog"
        | "hgroup" | "center" | "hr" | "search" | "option" | "optgroup" | "body" | "html" | "frameset" => {
            Role::Block(None)
        }
        _ => Role::Inline,
    }
}

/// Text being gathered for one block (or one table cell).
#[derive(Debug, Default)]
struct Inline {
    out: String,
    /// Whitespace seen since the last character written, to be written as one space before
    /// the next (not at the start of a line).
    space: bool,
}

impl Inline {
    fn push(&mut self, text: &str, pre: bool) {
        if pre {
            self.space = false;
            self.out.push_str(text);
            return;
        }
        for c in text.chars() {
            if matches!(c, ' ' | '\t' | '\n' | '\r' | '\x0C' | '\u{A0}') {
                self.space = true;
                continue;
            }
            if self.space && !self.out.is_empty() && !self.out.ends_with('\n') {
                self.out.push(' ');
            }
            self.space = false;
            self.out.push(c);
        }
    }

    fn line_break(&mut self) {
        self.out.push('\n');
        self.space = false;
    }

    fn take(&mut self) -> String {
        self.space = false;
        mem::take(&mut self.out)
    }
}

/// The table row being gathered.
#[derive(Debug, Default)]
struct Row {
    cells: Vec<String>,
    cell: Inline,
    in_cell: bool,
    /// How many `tr` of nested tables are open inside this row.
    nested: usize,
}

impl Row {
    fn start_cell(&mut self) {
        if self.in_cell || !self.cell.out.is_empty() {
            self.end_cell();
        }
        self.in_cell = true;
    }

    fn end_cell(&mut self) {
        self.cells.push(clean(&self.cell.take()).unwrap_or_default());
        self.in_cell = false;
    }
}

struct Walker<'b> {
    blocks: &'b mut Blocks,
    /// The open block's text (outside table rows).
    text: Inline,
    /// The kinds given by the open kinded elements (headings, `li`, `blockquote`, `pre`).
    kinds: Vec<BlockKind>,
    /// How many `pre` are open.
    pre: usize,
    row: Option<Row>,
    first_h1: Option<String>,
}

impl Walker<'_> {
    /// Visits the tree in document order, without recursion (documents nest deeply).
    fn walk(&mut self, tree: &Tree) {
        // In a tree every node is opened once and closed once, and climbs past it once: the
        // bound only guards against looping should the parser ever link a cycle.
        let mut budget = 4 * tree.nodes.len();
        let mut next = tree.node(0).first_child;
        while let Some(id) = next {
            budget = budget.saturating_sub(1);
            if budget == 0 {
                break;
            }
            let entered = self.open(tree, id);
            if entered {
                if let Some(child) = tree.node(id).first_child {
                    next = Some(child);
                    continue;
                }
                self.close(tree, id);
            }
            let mut at = id;
            next = loop {
                budget = budget.saturating_sub(1);
                if budget == 0 {
                    break None;
                }
                if let Some(sibling) = tree.node(at).next {
                    break Some(sibling);
                }
                match tree.parent(at) {
                    Some(parent) if parent != 0 => {
                        self.close(tree, parent);
                        at = parent;
                    }
                    _ => break None,
                }
            };
        }
        if let Some(row) = self.row.take() {
            self.emit_row(row);
        }
        self.flush();
    }

    /// Takes in node `id`; true if its children are to be visited.
    fn open(&mut self, tree: &Tree, id: Id) -> bool {
        match &tree.node(id).data {
            Data::Text(text) => {
                let pre = self.pre > 0;
                self.buffer().push(text, pre);
                false
            }
            Data::Element { name, .. } => match role(name) {
                Role::Skip => false,
                Role::Break => {
                    self.buffer().line_break();
                    false
                }
                role => {
                    self.enter(role);
                    true
                }
            },
            Data::Document | Data::Other => false,
        }
    }

    /// Leaves node `id`, which [`Self::open`] entered.
    fn close(&mut self, tree: &Tree, id: Id) {
        if let Data::Element { name, .. } = &tree.node(id).data {
            self.leave(role(name));
        }
    }

    fn buffer(&mut self) -> &mut Inline {
        match &mut self.row {
            Some(row) => &mut row.cell,
            None => &mut self.text,
        }
    }

    fn enter(&mut self, role: Role) {
        if let Some(row) = &mut self.row {
            match role {
                Role::Cell if row.nested == 0 => row.start_cell(),
                Role::Row => {
                    row.nested += 1;
                    row.cell.line_break();
                }
                Role::Pre => {
                    self.pre += 1;
                    row.cell.line_break();
                }
                Role::Cell | Role::Block(_) => row.cell.line_break(),
                Role::Inline | Role::Skip | Role::Break => {}
            }
            return;
        }
        match role {
            Role::Row => {
                self.flush();
                self.row = Some(Row::default());
            }
            Role::Pre => {
                self.flush();
                self.kinds.push(BlockKind::Code);
                self.pre += 1;
            }
            Role::Block(Some(kind)) => {
                self.flush();
                self.kinds.push(kind);
            }
            Role::Block(None) | Role::Cell => self.flush(),
            Role::Inline | Role::Skip | Role::Break => {}
        }
    }

    fn leave(&mut self, role: Role) {
        if let Some(row) = &mut self.row {
            match role {
                Role::Row if row.nested == 0 => {
                    if let Some(row) = self.row.take() {
                        self.emit_row(row);
                    }
                }
                Role::Row => {
                    row.nested -= 1;
                    row.cell.line_break();
                }
                Role::Cell if row.nested == 0 => row.end_cell(),
                Role::Pre => {
                    self.pre = self.pre.saturating_sub(1);
                    row.cell.line_break();
                }
                Role::Cell | Role::Block(_) => row.cell.line_break(),
                Role::Inline | Role::Skip | Role::Break => {}
            }
            return;
        }
        match role {
            Role::Pre | Role::Block(Some(_)) => {
                self.flush();
                self.kinds.pop();
                if role == Role::Pre {
                    self.pre = self.pre.saturating_sub(1);
                }
            }
            Role::Block(None) | Role::Cell | Role::Row => self.flush(),
            Role::Inline | Role::Skip | Role::Break => {}
        }
    }

    /// Ends the open block.
    fn flush(&mut self) {
        let kind = self.kinds.last().copied().unwrap_or(BlockKind::Paragraph);
        let text = self.text.take();
        let count = self.blocks.0.len();
        self.blocks.push(kind, &text);
        if kind == BlockKind::Heading(1) && self.first_h1.is_none() && self.blocks.0.len() > count {
            self.first_h1 = self.blocks.0.last().map(|block| block.text.replace('\n', " "));
        }
    }

    fn emit_row(&mut self, mut row: Row) {
        if row.in_cell || !row.cell.out.is_empty() {
            row.end_cell();
        }
        if row.cells.iter().any(|cell| !cell.is_empty()) {
            self.blocks.push(BlockKind::TableRow, &row.cells.join(" | "));
        }
    }
}

/// The text of the document's first `<title>`, whitespace collapsed; `None` if it has
/// none or it is empty.
fn title_element(tree: &Tree) -> Option<String> {
    let id = (0..tree.nodes.len()).find(|&id| match &tree.node(id).data {
        Data::Element { name, .. } => name.ns == ns!(html) && &*name.local == "title" && in_document(tree, id),
        _ => false,
    })?;
    let title = tree.child_text(id).split_whitespace().collect::<Vec<_>>().join(" ");
    (!title.is_empty()).then_some(title)
}

/// Whether `id` is in the document (not detached, not in a template's contents).
fn in_document(tree: &Tree, mut id: Id) -> bool {
    for _ in 0..tree.nodes.len() {
        match tree.parent(id) {
            Some(0) => return true,
            Some(parent) => id = parent,
            None => return false,
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::block::Block;
    use crate::BlockKind::{Code, Heading, ListItem, Paragraph, Quote, TableRow};

    fn blocks(html: &str) -> Vec<(BlockKind, String)> {
        parse(html).unwrap().blocks.into_iter().map(|Block { kind, text, .. }| (kind, text)).collect()
    }

    const PAGE: &str = r#"<!DOCTYPE html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <title>  Quarterly   report &amp; outlook </title>
  <style>body { color: red }</style>
  <script>var hidden = "never shown";</script>
</head>
<body>
  <nav><ul><li><a href="/">Home</a></li><li><a href="/about">About us</a></li></ul></nav>
  <!-- a comment that is not text -->
  <main>
    <h1>Results for <em>Q3</em></h1>
    <div class="intro">
      Revenue&nbsp;grew   in
      the quarter.
      <div><p>Costs &amp; margins were flat.</p></div>
      Text after the inner block.
    </div>
    <p>First line<br>second line<br><br>third line</p>
    <blockquote><p>We are pleased.</p><p>Very pleased.</p></blockquote>
    <ul>
      <li>Item one
        <ol><li>Nested item</li></ol>
      </li>
      <li><p>Item two</p></li>
    </ul>
    <table>
      <caption>Figures</caption>
      <thead><tr><th></th><th>2024</th><th>2023</th></tr></thead>
      <tbody>
        <tr><td>Revenue</td><td>1,200</td><td>1,000</td></tr>
        <tr><td>Net <b>income</b></td><td>300</td><td></td></tr>
      </tbody>
    </table>
    <pre><code>fn main() {
    let x = 1 &lt; 2;


    println!("{x}");
}
</code></pre>
    <noscript>Enable JavaScript</noscript>
    <template><p>Template text</p></template>
    <svg><text>Chart label</text></svg>
  </main>
  <footer><address>1 Main St<br>Springfield</address></footer>
  <script>document.write("also hidden")</script>
</body>
</html>"#;

    #[test]
    fn a_page_becomes_blocks_without_head_scripts_styles_or_comments() {
        let expected = vec![
            (ListItem, "Home"),
            (ListItem, "About us"),
            (Heading(1), "Results for Q3"),
            (Paragraph, "Revenue grew in the quarter."),
            (Paragraph, "Costs & margins were flat."),
            (Paragraph, "Text after the inner block."),
            (Paragraph, "First line\nsecond line\nthird line"),
            (Quote, "We are pleased."),
            (Quote, "Very pleased."),
            (ListItem, "Item one"),
            (ListItem, "Nested item"),
            (ListItem, "Item two"),
            (Paragraph, "Figures"),
            (TableRow, "| 2024 | 2023"),
            (TableRow, "Revenue | 1,200 | 1,000"),
            (TableRow, "Net income | 300 |"),
            (Code, "fn main() {\n    let x = 1 < 2;\n    println!(\"{x}\");\n}"),
            (Paragraph, "1 Main St\nSpringfield"),
        ];
        let got = blocks(PAGE);
        let got: Vec<(BlockKind, &str)> = got.iter().map(|(k, t)| (*k, t.as_str())).collect();
        assert_eq!(got, expected);
    }

    #[test]
    fn the_title_is_the_title_element_else_the_first_h1() {
        assert_eq!(parse(PAGE).unwrap().title.as_deref(), Some("Quarterly report & outlook"));
        assert_eq!(
            parse("<h2>Sub</h2><h1>Main <i>title</i></h1><h1>Second</h1>").unwrap().title.as_deref(),
            Some("Main title")
        );
        assert_eq!(parse("<title> </title><h1>Fallback</h1>").unwrap().title.as_deref(), Some("Fallback"));
        assert_eq!(parse("<p>No heading</p>").unwrap().title, None);
        assert_eq!(parse("<svg><title>Icon</title></svg><p>x</p>").unwrap().title, None);
    }

    #[test]
    fn inline_elements_run_together_and_whitespace_collapses() {
        assert_eq!(
            blocks("<p>un<b>believ</b>able  <i>and</i>\n\t spaced</p>"),
            vec![(Paragraph, "unbelievable and spaced".into())]
        );
        assert_eq!(
            blocks("<p>a&nbsp;&nbsp;b &lt;c&gt; &#x263A; &eacute;</p>"),
            vec![(Paragraph, "a b <c> ☺ é".into())]
        );
        assert_eq!(
            blocks("<span>loose text</span> <b>no block element</b>"),
            vec![(Paragraph, "loose text no block element".into())]
        );
    }

    #[test]
    fn pre_keeps_its_spacing_but_not_blank_lines() {
        assert_eq!(
            blocks("<pre>\n  indented\n\n\n      more  spaced   words\n</pre>"),
            vec![(Code, "indented\n      more  spaced   words".into())]
        );
    }

    #[test]
    fn a_cell_holding_blocks_or_a_nested_table_stays_in_its_row() {
        let html =
            "<table><tr><td><p>a</p><p>b</p></td><td><table><tr><td>x</td><td>y</td></tr></table></td></tr></table>";
        assert_eq!(blocks(html), vec![(TableRow, "a\nb | x\ny".into())]);
        assert_eq!(blocks("<table><tr><td> </td><td></td></tr></table>"), vec![]);
    }

    #[test]
    fn misnested_and_unclosed_tags_lose_no_text() {
        let got = blocks("<p>one <b>two <i>three</b> four</i> five<div>six<p>seven");
        let words: Vec<&str> = got.iter().flat_map(|(_, t)| t.split_whitespace()).collect();
        assert_eq!(words, ["one", "two", "three", "four", "five", "six", "seven"]);
        let got = blocks("<table><tr><td>cell</td>stray text<td>next</td></tr></table>");
        let words: Vec<&str> = got.iter().flat_map(|(_, t)| t.split_whitespace()).collect();
        assert_eq!(
            words,
            ["stray", "text", "cell", "|", "next"],
            "foster-parented text goes before the table, as a browser shows it"
        );
    }

    /// xorshift64*, for the random documents below.
    struct Rng(u64);

    impl Rng {
        fn below(&mut self, n: usize) -> usize {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) % n as u64) as usize
        }
    }

    /// Writes a random tree of elements holding words to `html`, the words to `words`.
    fn random_tree(rng: &mut Rng, depth: usize, html: &mut String, words: &mut Vec<&'static str>) {
        const TAGS: &str =
            "p div span b i a li ul ol blockquote pre h1 h3 section nav dl dt dd code figure figcaption address";
        const WORDS: &[(&str, &str)] = &[
            ("word", "word"),
            ("h&eacute;llo", "héllo"),
            ("日本語", "日本語"),
            ("🦀", "🦀"),
            ("&amp;", "&"),
            ("x1", "x1"),
        ];
        for _ in 0..rng.below(4) {
            match rng.below(if depth > 5 { 1 } else { 4 }) {
                0 => {
                    let (source, word) = WORDS[rng.below(WORDS.len())];
                    html.push_str(&format!(" {source} "));
                    words.push(word);
                }
                1 => {
                    let tags: Vec<&str> = TAGS.split(' ').collect();
                    let tag = tags[rng.below(tags.len())];
                    html.push_str(&format!("<{tag}>"));
                    random_tree(rng, depth + 1, html, words);
                    html.push_str(&format!("</{tag}>"));
                }
                2 => {
                    html.push_str("<table><tr><td>");
                    random_tree(rng, depth + 1, html, words);
                    html.push_str("</td><td>");
                    random_tree(rng, depth + 1, html, words);
                    html.push_str("</td></tr></table>");
                }
                _ => html.push_str("<br>"),
            }
        }
    }

    #[test]
    fn every_visible_word_is_in_exactly_one_block_in_document_order() {
        let mut rng = Rng(0x0123_4567_89AB_CDEF);
        for _ in 0..2000 {
            let (mut html, mut expected) = (String::new(), Vec::new());
            random_tree(&mut rng, 0, &mut html, &mut expected);
            let got = blocks(&html);
            let words: Vec<&str> =
                got.iter().flat_map(|(_, text)| text.split_whitespace()).filter(|word| *word != "|").collect();
            assert_eq!(words, expected, "{html}\n{got:#?}");
        }
    }

    #[test]
    fn nesting_as_deep_as_browsers_allow_is_read_and_deeper_is_refused_quickly() {
        // 2 levels for html and body.
        let depth = dom::MAX_DEPTH - 2;
        let html = format!("{}deep{}", "<div>".repeat(depth), "</div>".repeat(depth));
        assert_eq!(blocks(&html), vec![(Paragraph, "deep".into())]);
        let html = format!("{}deeper{}", "<div>".repeat(depth + 1), "</div>".repeat(depth + 1));
        assert_eq!(parse(&html), Err(Error::TooDeep { limit: 512 }));
        // Megabytes of nesting whose parse time would grow with the square of the depth
        // (minutes), and formatting elements the parser re-opens for every piece of text.
        let start = std::time::Instant::now();
        for html in [
            "<ul><li>".repeat(200_000),
            "<div><span>".repeat(100_000),
            (0..2000).map(|i| format!("<b {i}><i {i}>")).collect::<String>() + &"x</b>".repeat(2000),
        ] {
            assert_eq!(parse(&html), Err(Error::TooDeep { limit: 512 }));
        }
        assert!(start.elapsed() < std::time::Duration::from_secs(10), "{:?}", start.elapsed());
    }

    #[test]
    fn formatting_tags_left_open_are_rebuilt_per_paragraph_but_not_without_bound() {
        // Three unclosed formatting elements, re-opened in each paragraph, as a browser does.
        let html = format!("<p><b><i><u>{}", "<p>x".repeat(10_000));
        let got = parse(&html).unwrap();
        assert_eq!(got.blocks.len(), 10_000);
        assert!(got.blocks.iter().all(|block| block == &Block { kind: Paragraph, text: "x".into(), page: None }));
        // 400 distinct ones (the parser merges only identical ones) would be rebuilt 400 at a
        // time for every 8 bytes.
        let open: String = (0..400).map(|i| format!("<b id={i}>")).collect();
        let html = format!("<p>{open}</p>{}", "<p>x</p>".repeat(100_000));
        let start = std::time::Instant::now();
        assert_eq!(parse(&html), Err(Error::TooManyElements { bytes: html.len() }));
        assert!(start.elapsed() < std::time::Duration::from_secs(10), "{:?}", start.elapsed());
        let message = Error::TooManyElements { bytes: html.len() }.to_string();
        assert!(message.starts_with("the HTML builds more than 2 elements per byte"), "{message}");
    }
}
