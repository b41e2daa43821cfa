//! The per-document objects of a corpus prefix: what the document API writes on AWS and
//! what `aws s3 cp` uploads, read by the index build beside JSONL corpora.
//!
//! ```text
//! s3://bucket/corpora/demo/q3-report.json   one Document (the API's form: text segments, metadata)
//! s3://bucket/corpora/demo/handbook.md      a raw file: Markdown, plain text (.txt) or HTML (.html, .htm)
//! s3://bucket/corpora/demo/filings.jsonl.gz many documents, one a line (as before)
//! ```
//!
//! A per-document object's document id is its file name without the extension. Raw files
//! are read by `sextant-ingest` and cut into segments by the rule the document API uses
//! ([`sextant_core::corpus::segment_blocks`]); their title is the parsed document's.

use sextant_core::corpus::{segment_blocks, Document, TextBlock};
use sextant_core::error::{Error, Result};
use sextant_ingest::{BlockKind, MediaType};

/// The extension of a document the API writes (one [`Document`] as JSON).
pub const DOCUMENT_EXTENSION: &str = "json";

/// How a per-document object is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DocumentObject {
    /// `.json`: one [`Document`] in its JSON form.
    Json,
    /// `.md`, `.markdown`, `.txt`, `.html`, `.htm`: a raw file.
    Raw(MediaType),
}

/// The document id and kind of object `key` when it holds one document; `None` for any
/// other object (JSONL corpora, files of other kinds, "directories").
pub fn document_object(key: &str) -> Option<(&str, DocumentObject)> {
    let name = key.rsplit('/').next().unwrap_or(key);
    let (stem, extension) = name.rsplit_once('.')?;
    if stem.is_empty() {
        return None;
    }
    let kind = match extension.to_ascii_lowercase().as_str() {
        DOCUMENT_EXTENSION => DocumentObject::Json,
        "md" | "markdown" | "txt" | "html" | "htm" => DocumentObject::Raw(MediaType::from_extension(name)?),
        _ => return None,
    };
    Some((stem, kind))
}

/// The document held by object `key` (named `source` in errors): a `.json` document, or a
/// raw file segmented as the document API segments it. Its id is the key's file name
/// without the extension, whatever the JSON says.
pub fn read_document_object(key: &str, source: &str, bytes: &[u8]) -> Result<Document> {
    let Some((id, kind)) = document_object(key) else {
        return Err(Error::invalid("corpus", format!("{source} is not a document (.json, .md, .txt, .html)")));
    };
    let corpus_error = |reason: String| Error::Corpus { source_name: source.to_string(), line: 1, reason };
    let mut document = match kind {
        DocumentObject::Json => serde_json::from_slice::<Document>(bytes).map_err(|e| corpus_error(e.to_string()))?,
        DocumentObject::Raw(media) => {
            let parsed = sextant_ingest::parse(media, bytes).map_err(|e| corpus_error(e.to_string()))?;
            let segments = segment_blocks(
                parsed
                    .blocks
                    .into_iter()
                    .map(|b| TextBlock { keep_whole: matches!(b.kind, BlockKind::Code), text: b.text }),
            );
            Document {
                title: parsed.title.unwrap_or_default(),
                document_type: "article".into(),
                segments,
                ..Default::default()
            }
        }
    };
    if document.segments.iter().all(|s| s.trim().is_empty()) {
        return Err(corpus_error("holds no text to index".into()));
    }
    document.document_id = id.to_string();
    Ok(document)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn objects_name_their_document_by_file_name() {
        assert_eq!(document_object("corpora/demo/q3.json"), Some(("q3", DocumentObject::Json)));
        assert_eq!(document_object("corpora/demo/a.b.md"), Some(("a.b", DocumentObject::Raw(MediaType::Markdown))));
        assert_eq!(document_object("x/Guide.HTM"), Some(("Guide", DocumentObject::Raw(MediaType::Html))));
        assert_eq!(document_object("x/notes.txt"), Some(("notes", DocumentObject::Raw(MediaType::PlainText))));
        for other in ["x/filings.jsonl", "x/filings.jsonl.gz", "x/report.pdf", "x/.json", "x/README", "x/"] {
            assert_eq!(document_object(other), None, "{other}");
        }
    }

    #[test]
    fn raw_files_take_the_file_name_as_id_and_the_heading_as_title() {
        let md = b"# Travel policy\n\nBook flights two weeks ahead.\n\n- Economy under 6 hours\n- Business above";
        let d = read_document_object("c/travel.md", "s3://b/c/travel.md", md).unwrap();
        assert_eq!((d.document_id.as_str(), d.title.as_str()), ("travel", "Travel policy"));
        assert_eq!(
            d.segments,
            ["Travel policy", "Book flights two weeks ahead.", "Economy under 6 hours", "Business above"]
        );
        let json = serde_json::to_vec(&Document {
            document_id: "elsewhere".into(),
            title: "T".into(),
            segments: vec!["one".into()],
            ..Default::default()
        })
        .unwrap();
        assert_eq!(read_document_object("c/mine.json", "s", &json).unwrap().document_id, "mine");
    }

    #[test]
    fn unreadable_objects_name_themselves() {
        for (key, bytes) in [("c/bad.txt", &b"\xff\xfe\xfa"[..]), ("c/bad.json", b"{"), ("c/empty.md", b"  \n")] {
            let e = read_document_object(key, &format!("s3://b/{key}"), bytes).unwrap_err();
            assert!(e.to_string().contains(&format!("s3://b/{key}")), "{e}");
        }
    }
}
