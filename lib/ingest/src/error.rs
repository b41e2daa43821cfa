//! The one error type of this crate. Its Display texts are written for an API client: they
//! say what was wrong with the request and what to send instead.

/// A result with this crate's [`enum@Error`].
pub type Result<T> = std::result::Result<T, Error>;

/// Why a document could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
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
}
