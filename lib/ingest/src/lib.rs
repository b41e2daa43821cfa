//! # sextant-ingest
//!
//! Turns a team's own document (plain text, Markdown or HTML) into ordered text blocks
//! (headings, paragraphs, list items, quotes, code, table rows) for the server to segment.
//!
//! [`MediaType::from_content_type`] picks the reader from a request's Content-Type (and
//! [`MediaType::from_extension`] from a file name). Every [`Block`]'s text is trimmed,
//! non-empty and free of blank lines, so blocks joined with `"\n\n"` keep exact offsets.
//!
//! This crate is a leaf: it depends on no other Sextant crate.

#![warn(missing_docs)]

mod block;
mod error;
mod media;

pub use block::{Block, BlockKind, Parsed};
pub use error::{Error, Result};
pub use media::MediaType;
