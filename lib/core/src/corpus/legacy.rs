//! The layouts documents had in earlier formats, kept to read what those formats wrote
//! (bincode is not self-describing: a struct is read field by field, in order, so a new
//! field needs the old layout to read old bytes). Index files of formats 1 to 6 and live
//! logs written before pages are read through these.

use serde::{Deserialize, Serialize};

use super::document::Document;
use super::metadata::Metadata;
use super::values::{Date, DocumentType, Quarter};

/// A document as index formats 1 to 3 stored it: without metadata or pages.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DocumentV3 {
    document_id: String,
    title: String,
    document_type: DocumentType,
    ticker: Option<String>,
    year: Option<i32>,
    quarter: Option<Quarter>,
    filing_type: Option<String>,
    source_url: Option<String>,
    published_at: Option<Date>,
    segments: Vec<String>,
}

impl From<DocumentV3> for Document {
    fn from(d: DocumentV3) -> Self {
        Document {
            document_id: d.document_id,
            title: d.title,
            document_type: d.document_type,
            ticker: d.ticker,
            year: d.year,
            quarter: d.quarter,
            filing_type: d.filing_type,
            source_url: d.source_url,
            published_at: d.published_at,
            segments: d.segments,
            metadata: Metadata::default(),
            pages: Vec::new(),
        }
    }
}

/// A document as index formats 4 to 6 (and live logs before pages) stored it: format 3's
/// fields, then its metadata (bincode writes a nested struct's fields in line, so this
/// reads those bytes as they are).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DocumentV6 {
    v3: DocumentV3,
    metadata: Metadata,
}

impl From<DocumentV6> for Document {
    fn from(d: DocumentV6) -> Self {
        Document { metadata: d.metadata, ..d.v3.into() }
    }
}

impl From<&Document> for DocumentV6 {
    /// The document as the old layout holds it: its pages dropped (to write old bytes in
    /// tests of the readers).
    fn from(d: &Document) -> Self {
        DocumentV6 {
            v3: DocumentV3 {
                document_id: d.document_id.clone(),
                title: d.title.clone(),
                document_type: d.document_type.clone(),
                ticker: d.ticker.clone(),
                year: d.year,
                quarter: d.quarter,
                filing_type: d.filing_type.clone(),
                source_url: d.source_url.clone(),
                published_at: d.published_at,
                segments: d.segments.clone(),
            },
            metadata: d.metadata.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The old layout's bytes are today's document's bytes without the pages at the end,
    /// so the two layouts differ only there.
    #[test]
    fn the_format_6_layout_is_todays_without_pages() {
        let mut doc = Document {
            document_id: "d".into(),
            title: "T".into(),
            year: Some(2024),
            segments: vec!["a".into(), "b".into()],
            ..Default::default()
        };
        let old = bincode::serialize(&DocumentV6::from(&doc)).unwrap();
        let now = bincode::serialize(&doc).unwrap();
        assert_eq!(&now[..old.len()], &old[..]);
        assert_eq!(now.len(), old.len() + 8, "an empty Vec's length");
        doc.pages = vec![1, 2];
        let back: Document = bincode::deserialize::<DocumentV6>(&old).unwrap().into();
        assert_eq!(back, Document { pages: vec![], ..doc });
    }
}
