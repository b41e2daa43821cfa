//! Documents, their segments, and the chunks cut from their text.
//!
//! A document's text is its segments joined by [`SEGMENT_SEPARATOR`]; every offset the
//! engine reports (`charStart`, `charEnd`, end exclusive) counts Unicode scalar values
//! (Rust `char`s) into that text, not bytes.

mod chunk;
mod document;
mod files;
pub mod legacy;
mod load;
mod metadata;
mod segments;
mod sentences;
mod values;

pub use chunk::{chunk_document, chunk_document_with_overlap, Chunk, ChunkSpan, TokenMeasure};
pub use document::{Document, SegmentSpan, SEGMENT_SEPARATOR};
pub use files::{
    document_object, front_matter_fields, load_corpus, load_file, load_folder, read_document_object, DocumentObject,
    Folder, SkippedFile, DOCUMENT_EXTENSION, MAX_FILE_BYTES, SIDECAR_SUFFIX,
};
pub use load::{load_beir, load_documents, BeirSet};
pub use metadata::{
    MetaType, MetaValue, Metadata, MetadataError, MetadataSchema, BUILT_IN_FIELDS, MAX_BYTES as MAX_METADATA_BYTES,
    MAX_DEPTH as MAX_METADATA_DEPTH,
};
pub use segments::{segment_blocks, Segmented, LONG_BLOCK_CHARS};
pub use sentences::{sentence_ranges, split_sentences};
pub use values::{Date, DocumentType, Quarter};
