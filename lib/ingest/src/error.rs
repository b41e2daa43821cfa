//! The one error type of this crate. Its Display texts are written for an API client: they
//! say what was wrong with the request and what to send instead.

/// A result with this crate's [`enum@Error`].
pub type Result<T> = std::result::Result<T, Error>;

/// Why a document could not be read.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Error {
    /// The Content-Type is not one of the media types this crate reads (HTTP 415).
    #[error("unsupported Content-Type {given:?}: send one of {}", accepted.join(", "))]
    UnsupportedMediaType {
        /// The Content-Type as the client sent it.
        given: String,
        /// The media types accepted ([`crate::MediaType::ACCEPTED`]).
        accepted: &'static [&'static str],
    },
    /// The Content-Type names a charset other than UTF-8 (HTTP 415).
    #[error(
        "unsupported charset {charset:?} in Content-Type {given:?}: send the body as UTF-8 (charset=utf-8), \
         as one of {}",
        accepted.join(", ")
    )]
    UnsupportedCharset {
        /// The Content-Type as the client sent it.
        given: String,
        /// The charset parameter's value.
        charset: String,
        /// The media types accepted ([`crate::MediaType::ACCEPTED`]).
        accepted: &'static [&'static str],
    },
    /// The body is not UTF-8 (HTTP 400).
    #[error("the body is not valid UTF-8 (first invalid byte at offset {byte_offset})")]
    InvalidUtf8 {
        /// The offset in the body, counted in bytes from 0, of the first byte that is not
        /// part of a valid UTF-8 sequence.
        byte_offset: usize,
    },
    /// HTML whose elements nest deeper than browsers nest them (HTTP 422). Parsing time
    /// grows with the square of the depth, so such a body is refused, not read.
    #[error(
        "the HTML nests elements more than {limit} levels deep (browsers stop nesting there too): \
         flatten it, or send its text as text/plain"
    )]
    TooDeep {
        /// The deepest nesting read.
        limit: usize,
    },
    /// HTML that leaves formatting tags (`<b>`, `<font>`…) open so that the parser, which
    /// re-opens them in every later paragraph as a browser does, would build far more
    /// elements than the body has bytes (HTTP 422).
    #[error(
        "the HTML builds more than 2 elements per byte of its {bytes} bytes, because the formatting tags \
         it leaves open (such as <b> or <font>) are re-opened in every later paragraph: close them, \
         or send its text as text/plain"
    )]
    TooManyElements {
        /// The HTML's size in bytes.
        bytes: usize,
    },
    /// The body is larger than the HTML parser can hold (HTTP 413).
    #[error("the body is {size} bytes: a document must be smaller than 4 GiB")]
    TooLarge {
        /// The body's size in bytes.
        size: usize,
    },
    /// A PDF arrived and this process has no PDF engine (PDFium's library is missing or
    /// does not load; HTTP 415: send the document's text instead).
    #[error(
        "this server cannot read PDF ({reason}): send the document's text as text/plain, text/markdown or text/html"
    )]
    PdfUnavailable {
        /// Why the library could not be loaded.
        reason: String,
    },
    /// The PDF is encrypted with a password (HTTP 422).
    #[error("the PDF is encrypted with a password: send it decrypted")]
    PdfEncrypted,
    /// PDFium could not open the PDF (HTTP 422).
    #[error("not a readable PDF: {reason}")]
    PdfDamaged {
        /// What was wrong with it.
        reason: String,
    },
    /// No page of the PDF has a text layer: a scan, or pages of images (HTTP 422).
    #[error(
        "none of the PDF's {pages} pages has text (pages of images, such as a scan): run OCR on it and send \
         the text"
    )]
    PdfNoText {
        /// The PDF's pages.
        pages: usize,
    },
    /// The PDF has more pages than are read (HTTP 413).
    #[error("the PDF has {pages} pages: at most {limit} are read; split it")]
    PdfTooManyPages {
        /// The PDF's pages.
        pages: usize,
        /// The most pages read ([`crate::PdfLimits::max_pages`]).
        limit: usize,
    },
    /// Reading the PDF's text took longer than allowed (HTTP 422).
    #[error("reading the PDF's text took more than {seconds} s (stopped after page {pages_read}): split it")]
    PdfTimeout {
        /// The time allowed ([`crate::PdfLimits::max_time`]), in seconds.
        seconds: f64,
        /// The pages read when it stopped.
        pages_read: usize,
    },
}
