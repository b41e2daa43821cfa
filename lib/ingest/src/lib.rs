//! # sextant-ingest
//!
//! Turns a team's own document (plain text, Markdown, HTML or PDF) into ordered text blocks
//! (headings, paragraphs, list items, quotes, code, table rows; a PDF's blocks carry their
//! page) for the server to segment.
//!
//! [`MediaType::from_content_type`] picks the reader from a request's Content-Type (and
//! [`MediaType::from_extension`] from a file name); [`parse()`] decodes the body and returns
//! its [`Parsed`] blocks. Every block's text is trimmed, non-empty and free of blank lines,
//! so blocks joined with `"\n\n"` keep exact offsets; every word of the visible text is in
//! exactly one block, in document order.
//!
//! This crate is a leaf: it depends on no other Sextant crate.

#![warn(missing_docs)]

mod block;
mod dom;
mod error;
mod html;
mod markdown;
mod media;
mod parse;
pub mod pdf;
mod plain;

pub use block::{Block, BlockKind, Parsed};
pub use error::{Error, Result};
pub use media::MediaType;
pub use parse::{parse, parse_with};
pub use pdf::PdfLimits;
