//! Which parser a body goes to: from its Content-Type, or from a file name's extension.

use crate::error::{Error, Result};

/// The kinds of document this crate reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MediaType {
    /// Plain text: paragraphs separated by blank lines.
    PlainText,
    /// Markdown (CommonMark with tables).
    Markdown,
    /// HTML, parsed as a browser would (HTML5).
    Html,
    /// PDF: the text layer of its pages, read by PDFium (see [`crate::pdf`]).
    Pdf,
}

impl MediaType {
    /// The media types accepted, as a client would write them, for a 415's message.
    pub const ACCEPTED: &'static [&'static str] = &["text/plain", "text/markdown", "text/html", "application/pdf"];

    /// Parses a Content-Type header value: `text/plain`, `text/markdown` (also
    /// `text/x-markdown`), `text/html` (also `application/xhtml+xml`), case-insensitive,
    /// parameters allowed (`text/html; charset=UTF-8`).
    ///
    /// A `charset` parameter other than `utf-8` (or `utf8`) and `us-ascii` is
    /// [`Error::UnsupportedCharset`]; any other type (`image/png`,
    /// `application/octet-stream`, an empty value) is [`Error::UnsupportedMediaType`]. Both
    /// name the accepted types in their message.
    pub fn from_content_type(value: &str) -> Result<MediaType> {
        let mut parts = value.split(';');
        let essence = parts.next().unwrap_or_default().trim().to_ascii_lowercase();
        let media = match essence.as_str() {
            "text/plain" => MediaType::PlainText,
            "text/markdown" | "text/x-markdown" => MediaType::Markdown,
            "text/html" | "application/xhtml+xml" => MediaType::Html,
            "application/pdf" => MediaType::Pdf,
            _ => return Err(Error::UnsupportedMediaType { given: value.trim().to_owned(), accepted: Self::ACCEPTED }),
        };
        for parameter in parts {
            let Some((name, charset)) = parameter.split_once('=') else { continue };
            if !name.trim().eq_ignore_ascii_case("charset") {
                continue;
            }
            let charset = charset.trim().trim_matches('"');
            if !["utf-8", "utf8", "us-ascii"].iter().any(|ok| charset.eq_ignore_ascii_case(ok)) {
                return Err(Error::UnsupportedCharset {
                    given: value.trim().to_owned(),
                    charset: charset.to_owned(),
                    accepted: Self::ACCEPTED,
                });
            }
        }
        Ok(media)
    }

    /// The media type a file name's extension stands for (`.txt` `.text` `.md` `.markdown`
    /// `.html` `.htm` `.pdf`, case-insensitive), for files uploaded by path (S3 keys); `None` for
    /// any other extension or none.
    pub fn from_extension(name: &str) -> Option<MediaType> {
        let file = name.rsplit('/').next().unwrap_or(name);
        let (_, extension) = file.rsplit_once('.')?;
        match extension.to_ascii_lowercase().as_str() {
            "txt" | "text" => Some(MediaType::PlainText),
            "md" | "markdown" => Some(MediaType::Markdown),
            "html" | "htm" => Some(MediaType::Html),
            "pdf" => Some(MediaType::Pdf),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_types_a_client_sends_are_accepted_whatever_their_case_and_parameters() {
        assert_eq!(MediaType::from_content_type("Text/HTML; charset=UTF-8"), Ok(MediaType::Html));
        assert_eq!(MediaType::from_content_type("text/plain"), Ok(MediaType::PlainText));
        assert_eq!(MediaType::from_content_type(" text/plain ;charset=\"us-ascii\""), Ok(MediaType::PlainText));
        assert_eq!(MediaType::from_content_type("text/markdown; charset=utf-8; variant=GFM"), Ok(MediaType::Markdown));
        assert_eq!(MediaType::from_content_type("text/x-markdown"), Ok(MediaType::Markdown));
        assert_eq!(MediaType::from_content_type("application/xhtml+xml"), Ok(MediaType::Html));
    }

    #[test]
    fn other_types_are_refused_with_a_message_naming_the_accepted_ones() {
        for given in ["image/png", "application/octet-stream", "", "   ", "text", "text/csv"] {
            let error = MediaType::from_content_type(given).unwrap_err();
            assert!(matches!(error, Error::UnsupportedMediaType { .. }), "{given:?}: {error:?}");
            let message = error.to_string();
            assert!(message.contains("text/plain, text/markdown, text/html, application/pdf"), "{message}");
        }
        assert_eq!(
            MediaType::from_content_type("image/png").unwrap_err().to_string(),
            "unsupported Content-Type \"image/png\": send one of text/plain, text/markdown, text/html, application/pdf"
        );
        assert_eq!(MediaType::from_content_type("Application/PDF"), Ok(MediaType::Pdf));
    }

    #[test]
    fn a_charset_other_than_utf8_is_refused() {
        let error = MediaType::from_content_type("text/html; charset=latin1").unwrap_err();
        assert_eq!(
            error,
            Error::UnsupportedCharset {
                given: "text/html; charset=latin1".into(),
                charset: "latin1".into(),
                accepted: MediaType::ACCEPTED
            }
        );
        let message = error.to_string();
        assert!(message.contains("\"latin1\"") && message.contains("UTF-8"), "{message}");
        assert!(message.contains("text/plain, text/markdown, text/html, application/pdf"), "{message}");
        assert!(MediaType::from_content_type("text/plain; CHARSET=windows-1252").is_err());
    }

    #[test]
    fn extensions_of_uploaded_files() {
        assert_eq!(MediaType::from_extension("notes.txt"), Some(MediaType::PlainText));
        assert_eq!(MediaType::from_extension("a/b/LICENSE.TEXT"), Some(MediaType::PlainText));
        assert_eq!(MediaType::from_extension("docs/README.md"), Some(MediaType::Markdown));
        assert_eq!(MediaType::from_extension("guide.markdown"), Some(MediaType::Markdown));
        assert_eq!(MediaType::from_extension("site/index.HTML"), Some(MediaType::Html));
        assert_eq!(MediaType::from_extension("old.htm"), Some(MediaType::Html));
        assert_eq!(MediaType::from_extension("annual/Report.PDF"), Some(MediaType::Pdf));
        for other in ["report.docx", "README", "archive.md.gz", "dir.md/file", "", "."] {
            assert_eq!(MediaType::from_extension(other), None, "{other:?}");
        }
    }
}
