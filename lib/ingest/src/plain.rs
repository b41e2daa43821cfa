//! Plain text to blocks, line by line.
//!
//! - Blank lines (empty or only whitespace) separate paragraphs; the lines of a paragraph
//!   are kept as written, joined by `"\n"`.
//! - A line starting a list item (`- `, `* `, `• `, `1. `, `1) `, after any indentation) is
//!   a ListItem block of its own, marker included (the text stays as written). The
//!   indented lines right after it continue it (their indentation dropped); a line that is
//!   not indented ends it.
//! - Headings, kept simple:
//!   - a line underlined by a line of only `=` (Heading 1) or only `-` (Heading 2), three or
//!     more, is a heading; the underline is decoration and is dropped;
//!   - the first line of a paragraph is a Heading 2 when it is short (at most 60 characters)
//!     and in capitals (two capital letters or more, no lower-case one), does not end like a sentence
//!     (`.` `,` `;` `!` `?`), and the line after it is not in capitals too (which would make
//!     it a shouted paragraph, as licence disclaimers are).
//! - Any other line of only `=` or only `-` (a separator) ends the block and is dropped.

use std::borrow::Cow;

use crate::block::{BlockKind, Blocks, Parsed};

/// Parses plain text.
pub(crate) fn parse(text: &str) -> Parsed {
    let text =
        if text.contains('\r') { Cow::Owned(text.replace("\r\n", "\n").replace('\r', "\n")) } else { text.into() };
    let mut reader = Reader::default();
    for line in text.split('\n') {
        reader.line(line);
    }
    reader.flush();
    Parsed { title: None, blocks: reader.blocks.0, front_matter: None }
}

#[derive(Debug, Default)]
struct Reader<'a> {
    blocks: Blocks,
    /// The open block's lines.
    lines: Vec<&'a str>,
    /// Whether the open block is a list item.
    item: bool,
}

impl<'a> Reader<'a> {
    fn line(&mut self, line: &'a str) {
        let trimmed = line.trim();
        if trimmed.is_empty() {
            self.flush();
        } else if let Some(level) = underline(trimmed) {
            match (self.item, self.lines.pop()) {
                (false, Some(heading)) => {
                    self.flush();
                    self.blocks.push(BlockKind::Heading(level), heading);
                }
                (_, last) => {
                    self.lines.extend(last);
                    self.flush();
                }
            }
        } else if starts_item(trimmed) {
            self.flush();
            self.lines.push(line);
            self.item = true;
        } else if self.item && line.starts_with([' ', '\t']) {
            self.lines.push(trimmed);
        } else {
            if self.item {
                self.flush();
            }
            self.lines.push(line);
        }
    }

    /// Ends the open block.
    fn flush(&mut self) {
        let lines = std::mem::take(&mut self.lines);
        if std::mem::take(&mut self.item) {
            self.blocks.push(BlockKind::ListItem, &lines.join("\n"));
            return;
        }
        let Some((first, rest)) = lines.split_first() else { return };
        if caps_heading(first) && !rest.first().is_some_and(|next| in_capitals(next)) {
            self.blocks.push(BlockKind::Heading(2), first);
            self.blocks.push(BlockKind::Paragraph, &rest.join("\n"));
        } else {
            self.blocks.push(BlockKind::Paragraph, &lines.join("\n"));
        }
    }
}

/// The heading level a (trimmed) underline line gives: three or more `=` (1) or `-` (2).
fn underline(line: &str) -> Option<u8> {
    if line.len() < 3 {
        None
    } else if line.bytes().all(|b| b == b'=') {
        Some(1)
    } else if line.bytes().all(|b| b == b'-') {
        Some(2)
    } else {
        None
    }
}

/// Whether a (trimmed) line starts a list item: a bullet or a number, then whitespace.
fn starts_item(line: &str) -> bool {
    let rest = if let Some(rest) = line.strip_prefix(['-', '*', '•']) {
        rest
    } else {
        let digits = line.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 || digits > 9 {
            return false;
        }
        match line[digits..].strip_prefix(['.', ')']) {
            Some(rest) => rest,
            None => return false,
        }
    };
    rest.starts_with(char::is_whitespace)
}

/// Whether a line has capital letters and no lower-case ones (scripts without case, such
/// as Chinese, have neither).
fn in_capitals(line: &str) -> bool {
    line.chars().any(char::is_uppercase) && !line.chars().any(char::is_lowercase)
}

/// Whether a line is short, in capitals and not a sentence: a heading in plain text.
fn caps_heading(line: &str) -> bool {
    let line = line.trim();
    line.chars().count() <= 60
        && line.chars().filter(|c| c.is_uppercase()).count() >= 2
        && in_capitals(line)
        && !line.ends_with(['.', ',', ';', '!', '?'])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::block::Block;
    use crate::BlockKind::{Heading, ListItem, Paragraph};

    fn blocks(text: &str) -> Vec<(BlockKind, String)> {
        parse(text).blocks.into_iter().map(|Block { kind, text, .. }| (kind, text)).collect()
    }

    fn owned(expected: &[(BlockKind, &str)]) -> Vec<(BlockKind, String)> {
        expected.iter().map(|(kind, text)| (*kind, text.to_string())).collect()
    }

    #[test]
    fn meeting_notes_become_headings_paragraphs_and_items() {
        let notes = "Quarterly planning\r\n==================\r\n\r\nAttendees met on Monday.\r\nThe agenda was short.\r\n\r\n\r\n\
            DECISIONS\nWe ship in May.\n\n- Hire two engineers\n  for the search team\n* Move the index to S3\n• Keep the API stable\n\
            1. First step\n2) Second step\nBack to prose.\n\nRisks\n-----\nNone so far.\n\n---\n\nTHE SOFTWARE IS PROVIDED \"AS IS\",\n\
            WITHOUT WARRANTY OF ANY KIND.\n";
        assert_eq!(
            blocks(notes),
            owned(&[
                (Heading(1), "Quarterly planning"),
                (Paragraph, "Attendees met on Monday.\nThe agenda was short."),
                (Heading(2), "DECISIONS"),
                (Paragraph, "We ship in May."),
                (ListItem, "- Hire two engineers\nfor the search team"),
                (ListItem, "* Move the index to S3"),
                (ListItem, "• Keep the API stable"),
                (ListItem, "1. First step"),
                (ListItem, "2) Second step"),
                (Paragraph, "Back to prose."),
                (Heading(2), "Risks"),
                (Paragraph, "None so far."),
                (Paragraph, "THE SOFTWARE IS PROVIDED \"AS IS\",\nWITHOUT WARRANTY OF ANY KIND."),
            ])
        );
    }

    #[test]
    fn what_is_not_a_heading_or_an_item() {
        // A sentence in capitals, a caseless script, a number that is not a marker.
        assert_eq!(
            blocks("HELLO WORLD.\n\n第一章\n\n1.5 million users\n-5 degrees"),
            owned(&[(Paragraph, "HELLO WORLD."), (Paragraph, "第一章"), (Paragraph, "1.5 million users\n-5 degrees"),])
        );
        // A paragraph's later line underlined: the lines before it stay a paragraph.
        assert_eq!(
            blocks("Some text\nTitle\n=====\nBody"),
            owned(&[(Paragraph, "Some text"), (Heading(1), "Title"), (Paragraph, "Body")])
        );
    }

    #[test]
    fn indentation_inside_a_paragraph_is_kept_but_blank_lines_never_are() {
        assert_eq!(
            blocks("  Roses are red,\n    violets are blue.\n \t \n\n"),
            owned(&[(Paragraph, "Roses are red,\n    violets are blue.")])
        );
        assert_eq!(blocks(" \n\t\n"), vec![]);
        assert_eq!(blocks(""), vec![]);
    }
}
