//! The entry point: bytes to text, text to blocks by media type.

use crate::block::Parsed;
use crate::error::{Error, Result};
use crate::media::MediaType;
use crate::pdf::{self, PdfLimits};
use crate::{html, markdown, plain};

/// Decodes `bytes` as UTF-8 and parses them as `media`; a PDF is read by [`crate::pdf`]
/// within the default [`PdfLimits`] (no UTF-8 decoding: it is binary).
///
/// Invalid UTF-8 is [`Error::InvalidUtf8`], naming the offset of the first bad byte; a
/// leading byte-order mark is dropped. A body of 4 GiB or more is [`Error::TooLarge`] (the
/// HTML parser's limit, applied to every type); HTML (a document, or a block of it in
/// Markdown) whose elements nest more than 512 deep is [`Error::TooDeep`]. Any other input
/// parses: malformed Markdown and HTML are read as a CommonMark renderer or a browser
/// would. This never panics.
pub fn parse(media: MediaType, bytes: &[u8]) -> Result<Parsed> {
    parse_with(media, bytes, PdfLimits::default())
}

/// [`parse`], a PDF within `limits`.
pub fn parse_with(media: MediaType, bytes: &[u8], limits: PdfLimits) -> Result<Parsed> {
    if bytes.len() >= u32::MAX as usize {
        return Err(Error::TooLarge { size: bytes.len() });
    }
    match media {
        MediaType::PlainText => Ok(plain::parse(utf8(bytes)?)),
        MediaType::Markdown => markdown::parse(utf8(bytes)?),
        MediaType::Html => html::parse(utf8(bytes)?),
        MediaType::Pdf => pdf::parse(bytes, limits),
    }
}

/// The text of `bytes`, a leading byte-order mark dropped.
fn utf8(bytes: &[u8]) -> Result<&str> {
    let text = std::str::from_utf8(bytes).map_err(|e| Error::InvalidUtf8 { byte_offset: e.valid_up_to() })?;
    Ok(text.strip_prefix('\u{FEFF}').unwrap_or(text))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::block::{Block, BlockKind};

    /// xorshift64*: a few lines of deterministic randomness, no dependency.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
        }

        fn below(&mut self, n: usize) -> usize {
            (self.next() % n as u64) as usize
        }

        fn document(&mut self, fragments: &[&str], max: usize) -> String {
            let count = self.below(max + 1);
            (0..count).map(|_| fragments[self.below(fragments.len())]).collect()
        }
    }

    const WORDS: &[&str] = &[
        "word",
        "Sextant",
        "héllo",
        "naïve café",
        "日本語の文書",
        "🦀",
        "👩‍👩‍👧 family",
        "x",
        "1,234.5",
        "ÄÖÜ",
        "\u{A0}",
        "\u{200B}",
        "\u{2028}",
        "TITLE",
    ];

    const MARKDOWN: &[&str] = &[
        "# ",
        "## ",
        "###### ",
        "####### ",
        "- ",
        "  - ",
        "    - ",
        "* ",
        "1. ",
        "2) ",
        "> ",
        ">> ",
        "```\n",
        "```rust\n",
        "~~~\n",
        "    ",
        "| a | b |\n|---|:-:|\n",
        "| c |",
        "|",
        "*",
        "**",
        "_",
        "__",
        "`",
        "``",
        "~~",
        "[",
        "]",
        "](https://example.com \"t\")",
        "![",
        "[^1]",
        "[x]: /url\n",
        "<div>",
        "</div>",
        "<b>",
        "</b>",
        "<!-- ",
        " -->",
        "<script>",
        "</script>",
        "<br>",
        "<table><tr><td>",
        "<",
        ">",
        "&amp;",
        "&",
        "&#0;",
        "\\",
        "---\n",
        "===\n",
        "***\n",
        "\n",
        "\n\n",
        "  \n",
        "\t",
        "\r\n",
        "\r",
        "- [ ] ",
        "$",
        "\u{FEFF}",
        "\0",
    ];

    const HTML: &[&str] = &[
        "<p>",
        "</p>",
        "<div>",
        "</div>",
        "<b>",
        "</b>",
        "<i>",
        "</i>",
        "<ul>",
        "<ol>",
        "</ul>",
        "<li>",
        "</li>",
        "<table>",
        "</table>",
        "<tr>",
        "</tr>",
        "<td>",
        "</td>",
        "<th>",
        "<caption>",
        "<pre>",
        "</pre>",
        "<br>",
        "<br/>",
        "<script>",
        "</script>",
        "<style>",
        "</style>",
        "<!--",
        "-->",
        "<title>",
        "</title>",
        "<h1>",
        "</h1>",
        "<h3>",
        "<svg>",
        "</svg>",
        "<template>",
        "</template>",
        "<noscript>",
        "<blockquote>",
        "</blockquote>",
        "<a href='x'>",
        "</a>",
        "<img alt=x>",
        "<textarea>",
        "<select><option>",
        "<math>",
        "<foreignObject>",
        "<frameset>",
        "<head>",
        "<body>",
        "<html>",
        "<p",
        "</",
        "<!DOCTYPE html>",
        "<plaintext>",
        "<xmp>",
        "<iframe>",
        "<dl><dt>",
        "<dd>",
        "<nav>",
        "<section>",
        "&amp;",
        "&nbsp;",
        "&#128512;",
        "&bogus;",
        "&#xD800;",
        "&",
        "<",
        ">",
        "\"",
        "'",
        "\n",
        " ",
        "\t",
        "\r",
        "\r\n",
        "\0",
        "\u{FEFF}",
    ];

    const PLAIN: &[&str] = &[
        "- ", "* ", "• ", "1. ", "2) ", "===", "---", "==", "-", "  ", "\t", "\n", "\n", "\n\n", "\r\n", "\r", " ",
        "WARNING", "A.", "\u{A0}", "\u{85}",
    ];

    /// Every block's text is non-empty, trimmed, and has no blank line or carriage return.
    fn assert_well_formed(parsed: &Parsed, input: &str) {
        for Block { kind, text, .. } in &parsed.blocks {
            assert!(!text.trim().is_empty(), "empty {kind:?} block from {input:?}");
            assert_eq!(text.trim(), text, "untrimmed {kind:?} block from {input:?}");
            assert!(!text.contains("\n\n") && !text.contains('\r'), "blank line in {text:?} from {input:?}");
            if let BlockKind::Heading(level) = kind {
                assert!((1..=6).contains(level), "{kind:?} from {input:?}");
            }
        }
        if let Some(title) = &parsed.title {
            assert!(!title.is_empty() && title.trim() == title && !title.contains('\n'), "{title:?} from {input:?}");
        }
    }

    /// The words of `text`, except rules and underlines (only `=` or only `-`), which plain
    /// text drops when they underline a heading or stand alone.
    fn words(text: &str) -> Vec<&str> {
        text.split_whitespace().filter(|w| !w.bytes().all(|b| b == b'=') && !w.bytes().all(|b| b == b'-')).collect()
    }

    #[test]
    fn random_markdown_and_html_parse_into_well_formed_blocks() {
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
        for round in 0..3000 {
            let mut fragments: Vec<&str> = WORDS.to_vec();
            fragments.extend(if round % 2 == 0 { MARKDOWN } else { HTML });
            let document = rng.document(&fragments, 60);
            let media = if round % 2 == 0 { MediaType::Markdown } else { MediaType::Html };
            let parsed = parse(media, document.as_bytes()).unwrap();
            assert_well_formed(&parsed, &document);
        }
    }

    #[test]
    fn random_plain_text_keeps_every_word_in_order() {
        let mut rng = Rng(0xD1B5_4A32_D192_ED03);
        let fragments: Vec<&str> = WORDS.iter().chain(PLAIN).copied().collect();
        for _ in 0..3000 {
            let document = rng.document(&fragments, 60);
            let parsed = parse(MediaType::PlainText, document.as_bytes()).unwrap();
            assert_well_formed(&parsed, &document);
            let got: Vec<&str> = parsed.blocks.iter().flat_map(|block| words(&block.text)).collect();
            assert_eq!(got, words(document.trim_start_matches('\u{FEFF}')), "from {document:?}");
        }
    }

    #[test]
    fn random_bytes_never_panic() {
        let mut rng = Rng(0x2545_F491_4F6C_DD1D);
        for round in 0..3000 {
            let len = rng.below(300);
            // Half the rounds mostly markup bytes and ASCII, so more of them are valid UTF-8.
            let bytes: Vec<u8> = (0..len)
                .map(|_| if round % 2 == 0 { rng.next() as u8 } else { b"<>/&;#-*|`\n ab"[rng.below(14)] })
                .collect();
            let text = String::from_utf8_lossy(&bytes);
            for media in [MediaType::PlainText, MediaType::Markdown, MediaType::Html] {
                if let Ok(parsed) = parse(media, &bytes) {
                    assert_well_formed(&parsed, &text);
                }
                assert_well_formed(&parse(media, text.as_bytes()).unwrap(), &text);
            }
        }
    }

    #[test]
    fn invalid_utf8_names_the_first_bad_byte() {
        // "é" is two bytes: the 0xFF is byte 23.
        let body = b"Revenue in caf\xc3\xa9s grew \xff\xfe by 3%";
        let error = parse(MediaType::PlainText, body).unwrap_err();
        assert_eq!(error, Error::InvalidUtf8 { byte_offset: 23 });
        assert_eq!(error.to_string(), "the body is not valid UTF-8 (first invalid byte at offset 23)");
        // A sequence cut short at the end, and Latin-1 sent as if it were UTF-8.
        assert_eq!(parse(MediaType::Html, b"abc\xe2\x82"), Err(Error::InvalidUtf8 { byte_offset: 3 }));
        assert_eq!(parse(MediaType::Markdown, b"caf\xe9"), Err(Error::InvalidUtf8 { byte_offset: 3 }));
    }

    #[test]
    fn a_leading_byte_order_mark_is_dropped() {
        let plain = parse(MediaType::PlainText, "\u{FEFF}Hello".as_bytes()).unwrap();
        assert_eq!(plain.blocks, [Block { kind: BlockKind::Paragraph, text: "Hello".into(), page: None }]);
        let markdown = parse(MediaType::Markdown, "\u{FEFF}# Title\n".as_bytes()).unwrap();
        assert_eq!(markdown.title.as_deref(), Some("Title"));
        assert_eq!(markdown.blocks, [Block { kind: BlockKind::Heading(1), text: "Title".into(), page: None }]);
        let html = parse(MediaType::Html, "\u{FEFF}<p>Hi</p>".as_bytes()).unwrap();
        assert_eq!(html.blocks, [Block { kind: BlockKind::Paragraph, text: "Hi".into(), page: None }]);
    }

    #[test]
    fn an_empty_body_has_no_blocks() {
        for media in [MediaType::PlainText, MediaType::Markdown, MediaType::Html] {
            assert_eq!(parse(media, b"").unwrap(), Parsed::default());
        }
    }
}
