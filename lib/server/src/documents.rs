//! Where an index's documents are written: the [`DocumentStore`] behind the document API,
//! and the turning of a request (a raw file, or JSON with text and metadata) into a
//! [`Document`].
//!
//! The embedded server writes through a [`sextant_live::LiveIndex`] (durable and
//! searchable when the call returns: `200`, status `live`); on AWS the documents go to the
//! corpus in S3 and an incremental build serves them later (`202`, status `pending`).

use serde::Serialize;
use sextant_core::corpus::{Document, Metadata};

use crate::envelope::ApiError;

/// A document's id: 1-256 characters, no `/`, no `..`, no control character (it names
/// an object in S3 and a path segment in the API).
pub const MAX_DOCUMENT_ID_CHARS: usize = 256;

/// A write as the store took it.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Written {
    /// `live`: durable and searchable now; `pending`: stored, searchable once the index
    /// build that it started is published.
    pub status: &'static str,
    /// Whether the document is new (false: it replaced one), when the store knows.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub created: Option<bool>,
    /// The chunks it was cut into, when it is live.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub chunks: Option<usize>,
    /// The write's sequence number in the index's log, when it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seq: Option<u64>,
}

/// A document as the store holds it.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredDocument {
    /// The document.
    pub document: Document,
    /// Its chunks (when indexed).
    pub chunks: Option<usize>,
    /// `live` (searched) or `pending` (stored, not yet indexed).
    pub status: &'static str,
    /// For a live document of a writable index: whether it is in a built (compacted)
    /// version, or in the delta written since.
    pub compacted: Option<bool>,
}

/// One page of a listing.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredPage {
    /// The documents, in id order.
    pub documents: Vec<StoredDocument>,
    /// Where the next page starts, when there is one.
    pub next_cursor: Option<String>,
}

/// Why a store refused or failed a call.
#[derive(Debug, Clone, PartialEq)]
pub enum StoreError {
    /// The document was refused: a 400 naming the field.
    Invalid {
        /// The field at fault.
        field: String,
        /// Why, in the API's words.
        reason: String,
    },
    /// The store cannot take the call now (a 503; the cause is logged).
    Unavailable(String),
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::Invalid { field, reason } => ApiError::invalid(field, reason),
            StoreError::Unavailable(why) => {
                tracing::error!("document store: {why}");
                ApiError::unavailable("the document store could not take the write; retry shortly", 2)
            }
        }
    }
}

/// The documents of one index, written and read through the API. Calls block (they write
/// to disk or to S3): handlers run them off the async threads.
pub trait DocumentStore: Send + Sync {
    /// Puts `document`, replacing any with its id.
    fn put(&self, document: Document) -> Result<Written, StoreError>;
    /// Puts `documents`, each as [`DocumentStore::put`] would, with an outcome per document
    /// in the order given. An `Err` means none of them was written. By default each is put
    /// in turn; a store that can write them together does.
    fn put_many(&self, documents: Vec<Document>) -> Result<Vec<Result<Written, StoreError>>, StoreError> {
        Ok(documents.into_iter().map(|d| self.put(d)).collect())
    }
    /// Deletes document `id`; `None` when there is none.
    fn delete(&self, id: &str) -> Result<Option<Written>, StoreError>;
    /// Document `id`.
    fn get(&self, id: &str) -> Result<Option<StoredDocument>, StoreError>;
    /// Up to `limit` documents after `cursor`, in id order.
    fn list(&self, cursor: Option<&str>, limit: usize) -> Result<StoredPage, StoreError>;
    /// Folds the writes into a new index version now (an admin's call); `None` when there
    /// was nothing to fold, else what it did.
    fn compact(&self) -> Result<Option<serde_json::Value>, StoreError>;
}

fn live_error(e: sextant_live::Error) -> StoreError {
    match e {
        sextant_live::Error::Invalid { field, reason } => StoreError::Invalid { field, reason },
        other => StoreError::Unavailable(other.to_string()),
    }
}

impl DocumentStore for sextant_live::LiveIndex {
    fn put(&self, document: Document) -> Result<Written, StoreError> {
        let out = sextant_live::LiveIndex::put(self, document).map_err(live_error)?;
        Ok(Written { status: "live", created: Some(out.created), chunks: Some(out.chunks), seq: Some(out.seq) })
    }

    fn put_many(&self, documents: Vec<Document>) -> Result<Vec<Result<Written, StoreError>>, StoreError> {
        let outcomes = sextant_live::LiveIndex::put_many(self, documents).map_err(live_error)?;
        Ok(outcomes
            .into_iter()
            .map(|o| {
                let out = o.map_err(live_error)?;
                Ok(Written { status: "live", created: Some(out.created), chunks: Some(out.chunks), seq: Some(out.seq) })
            })
            .collect())
    }

    fn delete(&self, id: &str) -> Result<Option<Written>, StoreError> {
        let seq = sextant_live::LiveIndex::delete(self, id).map_err(live_error)?;
        Ok(seq.map(|seq| Written { status: "live", created: None, chunks: None, seq: Some(seq) }))
    }

    fn get(&self, id: &str) -> Result<Option<StoredDocument>, StoreError> {
        Ok(sextant_live::LiveIndex::get(self, id).map(stored))
    }

    fn list(&self, cursor: Option<&str>, limit: usize) -> Result<StoredPage, StoreError> {
        let page = sextant_live::LiveIndex::list(self, cursor, limit);
        Ok(StoredPage { documents: page.documents.into_iter().map(stored).collect(), next_cursor: page.next_after })
    }

    fn compact(&self) -> Result<Option<serde_json::Value>, StoreError> {
        let report = sextant_live::LiveIndex::compact(self).map_err(live_error)?;
        Ok(report.map(|r| serde_json::to_value(r).unwrap_or_default()))
    }
}

/// A document of a writable index as the API shows it: live, in a compacted version or in
/// the delta.
fn stored(d: sextant_live::DocumentInfo) -> StoredDocument {
    StoredDocument { document: d.document, chunks: Some(d.chunks), status: "live", compacted: Some(d.layer == "live") }
}

/// Checks a document id (see [`MAX_DOCUMENT_ID_CHARS`]); `at` names it in the error.
pub fn check_document_id(id: &str, at: &str) -> Result<(), ApiError> {
    check_id_length(id, at)?;
    let shown = crate::envelope::echoed(id, 64);
    if id.contains('/') || id.contains('\\') {
        return Err(ApiError::invalid(at, format!("may not contain '/' or '\\', got {shown}")));
    }
    if id == "." || id.contains("..") {
        return Err(ApiError::invalid(at, format!("may not contain '..' or be '.', got {shown}")));
    }
    if id.chars().any(char::is_control) {
        return Err(ApiError::invalid(at, "may not contain control characters"));
    }
    Ok(())
}

/// An id of 1 to [`MAX_DOCUMENT_ID_CHARS`] characters, folders included.
fn check_id_length(id: &str, at: &str) -> Result<(), ApiError> {
    let n = id.chars().count();
    if n == 0 || n > MAX_DOCUMENT_ID_CHARS {
        return Err(ApiError::invalid(at, format!("must be 1 to {MAX_DOCUMENT_ID_CHARS} characters, got {n}")));
    }
    Ok(())
}

/// Checks a document id named in a request's path: a [`check_document_id`] id, or one with
/// folders, as a folder build names its files (`handbook/intro.md`): segments between `/`
/// that are each a valid id (none empty, `.` or `..`), at most [`MAX_DOCUMENT_ID_CHARS`]
/// in all. A store may refuse folders on a write ([`DocumentStore::put`]).
pub fn check_document_path(id: &str, at: &str) -> Result<(), ApiError> {
    if !id.contains('/') {
        return check_document_id(id, at);
    }
    check_id_length(id, at)?;
    if id.split('/').any(str::is_empty) {
        let shown = crate::envelope::echoed(id, 64);
        return Err(ApiError::invalid(at, format!("may not start or end with '/' or hold '//', got {shown}")));
    }
    id.split('/').try_for_each(|segment| check_document_id(segment, at))
}

/// The metadata of a document sent as JSON (`at` names the field).
pub fn metadata_of(value: Option<&serde_json::Value>) -> Result<Metadata, ApiError> {
    match value {
        None => Ok(Metadata::new()),
        Some(v) => Metadata::from_json(v).map_err(|e| ApiError::invalid(e.field, e.reason)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn document_ids_that_could_name_another_object_are_refused() {
        for ok in ["q3-report", "Report 2024.pdf", "日本語", "a.b", &"x".repeat(256)] {
            assert!(check_document_id(ok, "documentId").is_ok(), "{ok}");
        }
        for (bad, why) in [
            ("", "1 to 256"),
            ("a/b", "'/'"),
            ("a\\b", "'/'"),
            ("..", "'..'"),
            ("a..b", "'..'"),
            (".", "'..'"),
            ("a\nb", "control"),
            ("a\u{0}", "control"),
            (&"x".repeat(257), "1 to 256"),
        ] {
            let e = check_document_id(bad, "documentId").unwrap_err();
            assert_eq!(e.field.as_deref(), Some("documentId"));
            assert!(e.message.contains(why), "{bad:?}: {}", e.message);
            assert!(!e.message.contains("\"\\\""), "the id is quoted once: {}", e.message);
        }
    }

    #[test]
    fn ids_in_a_path_may_have_folders_but_no_empty_or_dot_segments() {
        for ok in ["handbook/intro.md", "a/b/c", "q3-report", "日本/語.md"] {
            assert!(check_document_path(ok, "documentId").is_ok(), "{ok}");
        }
        for (bad, why) in [
            ("/a", "'//'"),
            ("a/", "'//'"),
            ("a//b", "'//'"),
            ("a/../b", "'..'"),
            ("./a", "'..'"),
            ("a/b\\c", "'/'"),
            (&format!("a/{}", "x".repeat(255)), "1 to 256"),
        ] {
            let e = check_document_path(bad, "documentId").unwrap_err();
            assert!(e.message.contains(why), "{bad:?}: {}", e.message);
        }
    }
}
