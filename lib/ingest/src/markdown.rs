//! Markdown to blocks, with pulldown-cmark (CommonMark, with tables and strikethrough).
//!
//! - Headings are Heading(level); the first level-1 heading's text is the title.
//! - Each list item is one ListItem block (its paragraphs joined by a line break); a nested
//!   list's items are blocks of their own, after the text of the item that holds them.
//! - A block quote's paragraphs are Quote blocks; code blocks (fenced or indented) are
//!   Code, verbatim; each table row (the header row too) is a TableRow, cells joined by
//!   `" | "`.
//! - Inline markup is removed: emphasis and strikethrough markers, links' URLs (their text
//!   stays), images (their alt text stays), inline code's backticks. A soft line break is a
//!   space, a hard one a line break, and so is an inline `<br>`; other inline HTML tags go
//!   (the text between them stays).
//! - An HTML block is read as HTML (see the HTML reader): its text, tags stripped, nothing
//!   if it is only tags or a comment.
//! - YAML front matter (a first line `---`, up to a closing `---` or `...`) is not text: it
//!   comes back verbatim as [`Parsed::front_matter`].

use std::mem;

use pulldown_cmark::{Event, Options, Parser, Tag, TagEnd};

use crate::block::{clean, BlockKind, Blocks, Parsed};
use crate::error::Result;
use crate::html;

/// Parses a Markdown document; [`Error::TooDeep`] if an HTML block in it nests too deep.
pub(crate) fn parse(text: &str) -> Result<Parsed> {
    let options = Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH | Options::ENABLE_YAML_STYLE_METADATA_BLOCKS;
    let mut walker = Walker::default();
    for event in Parser::new_ext(text, options) {
        walker.event(event)?;
    }
    walker.flush();
    Ok(Parsed { title: walker.title, blocks: walker.blocks.0, front_matter: walker.front_matter })
}

/// An open container that gives its kind to the text inside it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Container {
    Item,
    Quote,
}

#[derive(Debug, Default)]
struct Walker {
    blocks: Blocks,
    title: Option<String>,
    /// The open block's text.
    text: String,
    /// Open list items and block quotes, the innermost last.
    containers: Vec<Container>,
    /// The open table row's cells, when one is open.
    cells: Option<Vec<String>>,
    /// The open HTML block's source, when one is open.
    html: Option<String>,
    /// Inside front matter.
    metadata: bool,
    /// The front matter's text, once read.
    front_matter: Option<String>,
}

impl Walker {
    fn event(&mut self, event: Event<'_>) -> Result<()> {
        match event {
            Event::Start(tag) => self.start(tag),
            Event::End(tag) => self.end(tag)?,
            Event::Text(text) if self.metadata => self.front_matter.get_or_insert_with(String::new).push_str(&text),
            Event::Text(text) | Event::Code(text) | Event::InlineMath(text) | Event::DisplayMath(text) => {
                self.text.push_str(&text)
            }
            Event::Html(source) => match &mut self.html {
                Some(html) => html.push_str(&source),
                None => self.inline_html(&source),
            },
            Event::InlineHtml(source) => self.inline_html(&source),
            Event::SoftBreak => self.text.push(' '),
            Event::HardBreak => self.text.push('\n'),
            Event::Rule => self.flush(),
            // Not enabled (kept as literal text instead), but harmless.
            Event::FootnoteReference(label) => self.text.push_str(&label),
            Event::TaskListMarker(_) => {}
        }
        Ok(())
    }

    fn start(&mut self, tag: Tag<'_>) {
        match tag {
            Tag::Paragraph => {
                // An item's paragraphs are one block: a line break between them.
                if self.containers.last() == Some(&Container::Item) && !self.text.trim().is_empty() {
                    self.text.push('\n');
                } else {
                    self.flush();
                }
            }
            Tag::Item => {
                self.flush();
                self.containers.push(Container::Item);
            }
            Tag::BlockQuote(_) => {
                self.flush();
                self.containers.push(Container::Quote);
            }
            Tag::TableHead | Tag::TableRow => {
                self.flush();
                self.cells = Some(Vec::new());
            }
            Tag::TableCell => self.flush(),
            Tag::HtmlBlock => {
                self.flush();
                self.html = Some(String::new());
            }
            Tag::MetadataBlock(_) => {
                self.flush();
                self.metadata = true;
            }
            Tag::Emphasis
            | Tag::Strong
            | Tag::Strikethrough
            | Tag::Superscript
            | Tag::Subscript
            | Tag::Link { .. }
            | Tag::Image { .. } => {}
            // Headings, code blocks, lists, tables, footnotes, definition lists: a new block.
            _ => self.flush(),
        }
    }

    fn end(&mut self, tag: TagEnd) -> Result<()> {
        match tag {
            TagEnd::Paragraph => {
                if self.containers.last() != Some(&Container::Item) {
                    self.flush();
                }
            }
            TagEnd::Heading(level) => {
                let level = level as u8;
                if level == 1 && self.title.is_none() {
                    self.title = clean(&self.text).map(|title| title.replace('\n', " "));
                }
                self.push(BlockKind::Heading(level));
            }
            TagEnd::CodeBlock => self.push(BlockKind::Code),
            TagEnd::Item => {
                self.flush();
                self.pop(Container::Item);
            }
            TagEnd::BlockQuote(_) => {
                self.flush();
                self.pop(Container::Quote);
            }
            TagEnd::TableCell => {
                let cell = clean(&mem::take(&mut self.text)).unwrap_or_default();
                if let Some(cells) = &mut self.cells {
                    cells.push(cell);
                }
            }
            TagEnd::TableHead | TagEnd::TableRow => {
                let cells = self.cells.take().unwrap_or_default();
                if cells.iter().any(|cell| !cell.is_empty()) {
                    self.blocks.push(BlockKind::TableRow, &cells.join(" | "));
                }
            }
            TagEnd::HtmlBlock => {
                let source = self.html.take().unwrap_or_default();
                html::blocks_into(&source, &mut self.blocks)?;
            }
            TagEnd::MetadataBlock(_) => {
                self.text.clear();
                self.metadata = false;
            }
            TagEnd::Emphasis
            | TagEnd::Strong
            | TagEnd::Strikethrough
            | TagEnd::Superscript
            | TagEnd::Subscript
            | TagEnd::Link
            | TagEnd::Image => {}
            _ => self.flush(),
        }
        Ok(())
    }

    /// Inline HTML: a `<br>` is a line break; other tags are dropped (text between them
    /// comes as text events).
    fn inline_html(&mut self, source: &str) {
        let tag = source.trim().to_ascii_lowercase();
        let tag = tag.trim_start_matches('<').trim_end_matches('>').trim_end_matches('/');
        if tag.split_whitespace().next() == Some("br") {
            self.text.push('\n');
        }
    }

    fn pop(&mut self, container: Container) {
        if self.containers.last() == Some(&container) {
            self.containers.pop();
        }
    }

    /// Ends the open block, its kind that of the innermost item or quote around it.
    fn flush(&mut self) {
        let kind = match self.containers.last() {
            Some(Container::Item) => BlockKind::ListItem,
            Some(Container::Quote) => BlockKind::Quote,
            None => BlockKind::Paragraph,
        };
        self.push(kind);
    }

    fn push(&mut self, kind: BlockKind) {
        let text = mem::take(&mut self.text);
        self.blocks.push(kind, &text);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::block::Block;
    use crate::BlockKind::{Code, Heading, ListItem, Paragraph, Quote, TableRow};

    fn blocks(markdown: &str) -> Vec<(BlockKind, String)> {
        parse(markdown).unwrap().blocks.into_iter().map(|Block { kind, text, .. }| (kind, text)).collect()
    }

    const README: &str = "---
title: not text
tags: [a, b]
---

# Sextant *retrieval*

A **fast** retrieval API. See [the docs](https://example.com/docs) and
the `serve` command.  
Second line after a hard break.

![architecture diagram](arch.png)

## Install

1. Download the binary
2. Run it:
   - on Linux: `./sextant serve`
   - on macOS
     (Apple silicon only)

     after allowing it in Settings.
3. Done

> Retrieval is *search* with a purpose.
>
> Another quoted paragraph.

```rust
fn main() {


    println!(\"hi\");
}
```

    indented code

| Plan | Requests / day |
|------|---------------:|
| Free | 1,000 |
| Team | ~~50,000~~ 100,000 |

<p align=\"center\"><img src=\"logo.png\"></p>

<details>
<summary>More &amp; more</summary>

Hidden *details*.

</details>

Press <kbd>Ctrl</kbd>+<kbd>C</kbd> to stop.<br>Then restart.

***

Setext title
============
";

    #[test]
    fn a_readme_becomes_headings_paragraphs_items_quotes_code_and_rows() {
        let expected = vec![
            (Heading(1), "Sextant retrieval"),
            (Paragraph, "A fast retrieval API. See the docs and the serve command.\nSecond line after a hard break."),
            (Paragraph, "architecture diagram"),
            (Heading(2), "Install"),
            (ListItem, "Download the binary"),
            (ListItem, "Run it:"),
            (ListItem, "on Linux: ./sextant serve"),
            (ListItem, "on macOS (Apple silicon only)\nafter allowing it in Settings."),
            (ListItem, "Done"),
            (Quote, "Retrieval is search with a purpose."),
            (Quote, "Another quoted paragraph."),
            (Code, "fn main() {\n    println!(\"hi\");\n}"),
            (Code, "indented code"),
            (TableRow, "Plan | Requests / day"),
            (TableRow, "Free | 1,000"),
            (TableRow, "Team | 50,000 100,000"),
            (Paragraph, "More & more"),
            (Paragraph, "Hidden details."),
            (Paragraph, "Press Ctrl+C to stop.\nThen restart."),
            (Heading(1), "Setext title"),
        ];
        let got = blocks(README);
        let got: Vec<(BlockKind, &str)> = got.iter().map(|(k, t)| (*k, t.as_str())).collect();
        assert_eq!(got, expected);
    }

    #[test]
    fn the_title_is_the_first_level_one_heading() {
        assert_eq!(parse(README).unwrap().title.as_deref(), Some("Sextant retrieval"));
        assert_eq!(
            parse("## Only a subsection\n\ntext\n\n# Later title\n").unwrap().title.as_deref(),
            Some("Later title")
        );
        assert_eq!(parse("## Only a subsection\n\ntext").unwrap().title, None);
    }

    #[test]
    fn front_matter_is_not_text_but_a_later_rule_is_not_front_matter() {
        let got = blocks("---\nlayout: post\n---\nBody.\n");
        assert_eq!(got, vec![(Paragraph, "Body.".to_owned())]);
        let parsed = parse("---\nlayout: post\ntags: [a, b]\n---\nBody.\n").unwrap();
        assert_eq!(parsed.front_matter.as_deref(), Some("layout: post\ntags: [a, b]\n"));
        assert_eq!(parse("Intro.\n\n---\n\nkey: value\n").unwrap().front_matter, None);
        let got = blocks("Intro.\n\n---\n\nkey: value\n\n---\n");
        assert_eq!(got, vec![(Paragraph, "Intro.".to_owned()), (Paragraph, "key: value".to_owned())]);
    }

    #[test]
    fn a_nested_list_item_is_its_own_block_after_its_parents_text() {
        let got = blocks("- parent\n  - child\n    - grandchild\n  - sibling\n- next\n");
        let texts: Vec<&str> = got.iter().map(|(_, t)| t.as_str()).collect();
        assert_eq!(texts, ["parent", "child", "grandchild", "sibling", "next"]);
        assert!(got.iter().all(|(k, _)| *k == ListItem));
    }

    #[test]
    fn the_shared_data_readme_yields_its_headings_paragraphs_and_table() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data/README.md");
        let Ok(text) = std::fs::read_to_string(&path) else {
            println!("skipped: {} is absent", path.display());
            return;
        };
        let parsed = parse(&text).unwrap();
        let count = |kind: BlockKind| parsed.blocks.iter().filter(|block| block.kind == kind).count();
        assert!(count(Paragraph) >= 2, "{:#?}", parsed.blocks);
        let headings: Vec<&str> = text
            .lines()
            .filter_map(|line| line.strip_prefix('#'))
            .map(|heading| heading.trim_start_matches('#').trim())
            .collect();
        assert!(!headings.is_empty(), "{} has no heading line", path.display());
        for heading in &headings {
            let plain: String = heading.chars().filter(|c| !"*_`".contains(*c)).collect();
            assert!(
                parsed.blocks.iter().any(|block| matches!(block.kind, Heading(_)) && block.text == plain),
                "no Heading block {plain:?} in {:#?}",
                parsed.blocks
            );
        }
        assert_eq!(parsed.title.as_deref(), headings.first().copied());
        // Its table: a header row and one row per folder, cells joined.
        let table_lines = text.lines().filter(|line| line.starts_with('|') && !line.starts_with("|---")).count();
        assert_eq!(count(TableRow), table_lines);
        assert!(parsed.blocks.iter().any(|b| b.kind == TableRow && b.text.starts_with("folder | what | counts")));
        // Inline code lost its backticks, and no block is a blank line apart.
        assert!(
            parsed.blocks.iter().any(|b| b.text.contains("corpus.jsonl (_id, title, text)")),
            "{:#?}",
            parsed.blocks
        );
    }

    #[test]
    fn html_that_is_only_tags_or_comments_gives_no_block() {
        assert_eq!(blocks("<div align=\"center\">\n<img src=\"x.png\">\n</div>\n\n<!-- a note -->\n"), vec![]);
        assert_eq!(
            blocks("<script>alert(1)</script>\n\n<table><tr><td>a</td><td>b</td></tr></table>\n"),
            vec![(TableRow, "a | b".to_owned())]
        );
    }
}
