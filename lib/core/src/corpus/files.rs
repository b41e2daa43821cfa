//! Documents as teams keep them, read into [`Document`]s: a folder of files
//! ([`load_folder`]), or the per-document objects of a corpus prefix in S3
//! ([`read_document_object`]).
//!
//! ```text
//! handbook/intro.md              Markdown    document "handbook/intro.md"
//! handbook/intro.md.meta.json    its fields  (a sidecar: NAME.meta.json beside NAME)
//! policies/leave.html            HTML        document "policies/leave.html"
//! notes.txt                      plain text  document "notes.txt"
//! filings.jsonl, filings.jsonl.gz            documents one a line, with their own ids
//! q3-report.json                 one Document in the API's JSON form
//! ```
//!
//! Raw files (Markdown, plain text, HTML) are read by `sextant-ingest` and cut into
//! segments by the rule the document API uses ([`segment_blocks`]); their title is the
//! parsed document's unless their fields name one.
//!
//! **Fields.** A file's fields come from Markdown front matter (`key: value` lines) and from
//! a sidecar `NAME.meta.json` (one JSON object), the sidecar winning field by field. A
//! field that names a built-in document field (compared without case and underscores:
//! `title`, `documentType`, `ticker`, `year`, `quarter`, `filingType`, `publishedAt`,
//! `sourceUrl`) sets it; every other field is the document's [`Metadata`] (its rules:
//! [`Metadata::from_json`]). A document's type is `article` unless a field names one.
//!
//! **Ids.** In a folder, a file's document id is its path relative to the folder, with `/`
//! between directories (`handbook/intro.md`). In a corpus prefix it is the object's file
//! name without its extension (`corpora/demo/q3-report.json` is `q3-report`), as the
//! document API writes them.
//!
//! A file that cannot be read (not UTF-8, no text, front matter or sidecar that is not
//! fields, a PDF that is encrypted, damaged or only images, too large) does not stop a folder: it is listed in [`Folder::skipped`]
//! with the reason, for the build to report.

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use sextant_ingest::MediaType;

use super::document::Document;
use super::load::load_documents;
use super::metadata::Metadata;
use super::segments::segment_blocks;
use crate::error::{Error, Result};

/// The extension of a document the API writes (one [`Document`] as JSON).
pub const DOCUMENT_EXTENSION: &str = "json";

/// The suffix of a sidecar: `NAME.meta.json` holds the fields of file `NAME`.
pub const SIDECAR_SUFFIX: &str = ".meta.json";

/// The largest file a folder's reader opens (64 MiB); a larger one is skipped.
pub const MAX_FILE_BYTES: u64 = 64 << 20;

/// How a per-document object is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DocumentObject {
    /// `.json`: one [`Document`] in its JSON form.
    Json,
    /// `.md`, `.markdown`, `.txt`, `.html`, `.htm`, `.pdf`: a raw file.
    Raw(MediaType),
}

/// The document id and kind of object `key` when it holds one document; `None` for any
/// other object (JSONL corpora, sidecars, files of other kinds, "directories").
pub fn document_object(key: &str) -> Option<(&str, DocumentObject)> {
    let name = key.rsplit('/').next().unwrap_or(key);
    if name.ends_with(SIDECAR_SUFFIX) {
        return None;
    }
    let (stem, extension) = name.rsplit_once('.')?;
    if stem.is_empty() {
        return None;
    }
    Some((stem, file_kind(name, extension)?))
}

/// What a file of this name and extension holds, when it is one document.
fn file_kind(name: &str, extension: &str) -> Option<DocumentObject> {
    match extension.to_ascii_lowercase().as_str() {
        DOCUMENT_EXTENSION => Some(DocumentObject::Json),
        "md" | "markdown" | "txt" | "html" | "htm" | "pdf" => {
            Some(DocumentObject::Raw(MediaType::from_extension(name)?))
        }
        _ => None,
    }
}

/// The document held by object `key` (named `source` in errors): a `.json` document, or a
/// raw file segmented as the document API segments it, with its front matter's fields.
/// Its id is the key's file name without the extension, whatever the JSON says.
pub fn read_document_object(key: &str, source: &str, bytes: &[u8]) -> Result<Document> {
    let Some((id, kind)) = document_object(key) else {
        return Err(Error::invalid("corpus", format!("{source} is not a document (.json, .md, .txt, .html, .pdf)")));
    };
    read_document(id, kind, source, bytes, None)
}

/// One document from a file's bytes: `id` becomes its id, `sidecar` (a JSON object's
/// text) adds fields over its front matter's.
fn read_document(
    id: &str,
    kind: DocumentObject,
    source: &str,
    bytes: &[u8],
    sidecar: Option<&str>,
) -> Result<Document> {
    let corpus_error = |reason: String| Error::Corpus { source_name: source.to_string(), line: 1, reason };
    let mut document = match kind {
        DocumentObject::Json => {
            let document = serde_json::from_slice::<Document>(bytes).map_err(|e| corpus_error(e.to_string()))?;
            if let Some(problem) = document.pages_problem() {
                return Err(corpus_error(format!("pages {problem}")));
            }
            document
        }
        DocumentObject::Raw(media) => {
            let parsed = sextant_ingest::parse(media, bytes).map_err(|e| corpus_error(e.to_string()))?;
            let mut fields = match &parsed.front_matter {
                Some(text) => front_matter_fields(text).map_err(|e| corpus_error(format!("front matter: {e}")))?,
                None => Map::new(),
            };
            if let Some(text) = sidecar {
                match serde_json::from_str::<Value>(text) {
                    Ok(Value::Object(extra)) => fields.extend(extra),
                    Ok(_) => return Err(corpus_error(format!("its sidecar {SIDECAR_SUFFIX} is not a JSON object"))),
                    Err(e) => return Err(corpus_error(format!("its sidecar {SIDECAR_SUFFIX}: {e}"))),
                }
            }
            let segmented = segment_blocks(parsed.blocks);
            let mut document = with_fields(fields).map_err(corpus_error)?;
            if document.title.is_empty() {
                document.title = parsed.title.unwrap_or_default();
            }
            (document.segments, document.pages) = (segmented.segments, segmented.pages);
            document
        }
    };
    if document.segments.iter().all(|s| s.trim().is_empty()) {
        return Err(corpus_error("holds no text to index".into()));
    }
    document.document_id = id.to_string();
    Ok(document)
}

/// A document (without id or text) with `fields`: built-in fields at the top level
/// (module documentation), the rest as metadata; `article` when no type is given.
fn with_fields(fields: Map<String, Value>) -> std::result::Result<Document, String> {
    let mut top = Map::new();
    let mut metadata = Map::new();
    for (key, value) in fields {
        let name = match key.to_ascii_lowercase().replace('_', "").as_str() {
            "documentid" => return Err(format!("field {key}: a file's document id is its path, not a field")),
            "sourcetype" => return Err(format!("field {key}: Sextant sets it from the document type")),
            "title" => "title",
            "ticker" => "ticker",
            "year" => "year",
            "quarter" => "quarter",
            "documenttype" => "documentType",
            "filingtype" => "filingType",
            "publishedat" => "publishedAt",
            "sourceurl" => "sourceUrl",
            _ => {
                metadata.insert(key, value);
                continue;
            }
        };
        // Each field alone, so that an error names it.
        let alone = serde_json::json!({"documentId": "", "segments": [], name: value});
        serde_json::from_value::<Document>(alone).map_err(|e| format!("field {key}: {e}"))?;
        top.insert(name.to_string(), value);
    }
    let metadata = Metadata::from_json(&Value::Object(metadata)).map_err(|e| format!("{}: {}", e.field, e.reason))?;
    top.insert("documentId".into(), Value::String(String::new()));
    top.insert("segments".into(), Value::Array(Vec::new()));
    top.entry("documentType").or_insert_with(|| Value::String("article".into()));
    let mut document: Document = serde_json::from_value(Value::Object(top)).map_err(|e| e.to_string())?;
    document.metadata = metadata;
    Ok(document)
}

/// The fields of Markdown front matter: one `key: value` a line, where a value is a
/// number, `true`/`false`, a string (quoted or not) or a list (`[a, b]`, or `- item` lines
/// under a key with no value). Blank lines and `#` comments are skipped; anything else
/// (nested maps, multi-line strings) is an error naming the line.
pub fn front_matter_fields(text: &str) -> std::result::Result<Map<String, Value>, String> {
    let mut fields = Map::new();
    let mut open_list: Option<String> = None;
    for (n, raw) in text.lines().enumerate() {
        let line = raw.trim_end();
        let trimmed = line.trim_start();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        if let (Some(key), Some(item)) = (&open_list, trimmed.strip_prefix("- ").or((trimmed == "-").then_some(""))) {
            if let Some(Value::Array(items)) = fields.get_mut(key) {
                items.push(scalar(item.trim()));
                continue;
            }
        }
        if line.starts_with([' ', '\t']) {
            return Err(format!("line {}: only `key: value` lines and `- item` lists are read", n + 1));
        }
        let Some((key, value)) = line.split_once(':') else {
            return Err(format!("line {}: expected `key: value`", n + 1));
        };
        let key = key.trim().trim_matches(['"', '\'']).to_string();
        let value = value.trim();
        open_list = None;
        let value = if value.is_empty() {
            open_list = Some(key.clone());
            Value::Array(Vec::new())
        } else if let Some(inner) = value.strip_prefix('[').and_then(|v| v.strip_suffix(']')) {
            Value::Array(inner.split(',').map(str::trim).filter(|s| !s.is_empty()).map(scalar).collect())
        } else if value.starts_with(['{', '|', '>']) {
            return Err(format!("line {}: nested maps and multi-line strings are not read", n + 1));
        } else {
            scalar(value)
        };
        fields.insert(key, value);
    }
    Ok(fields)
}

/// One front-matter scalar: a quoted string, `true`/`false`, a number, or the text as is.
fn scalar(text: &str) -> Value {
    let quoted = |q: char| text.len() >= 2 && text.starts_with(q) && text.ends_with(q);
    if quoted('"') || quoted('\'') {
        return Value::String(text[1..text.len() - 1].to_string());
    }
    match text {
        "true" => return Value::Bool(true),
        "false" => return Value::Bool(false),
        _ => {}
    }
    if let Ok(i) = text.parse::<i64>() {
        return Value::from(i);
    }
    match text.parse::<f64>() {
        Ok(x) if x.is_finite() => Value::from(x),
        _ => Value::String(text.to_string()),
    }
}

/// The documents of a folder, and the files it could not read.
#[derive(Debug, Clone, Default)]
pub struct Folder {
    /// Every document read, files in path order.
    pub documents: Vec<Document>,
    /// Files left out, with why.
    pub skipped: Vec<SkippedFile>,
}

/// A file a folder's reader left out.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SkippedFile {
    /// Its path relative to the folder, `/` between directories.
    pub path: String,
    /// Why, in a user's words.
    pub reason: String,
}

/// Reads a corpus: a JSONL file ([`load_documents`]) or a folder ([`load_folder`]).
pub fn load_corpus(path: &Path) -> Result<Folder> {
    match path.is_dir() {
        true => load_folder(path),
        false => Ok(Folder { documents: load_documents(path)?, skipped: Vec::new() }),
    }
}

/// Reads one file as a folder of one: a JSONL file's documents, or the document of a raw or
/// `.json` file (its id its file name, its sidecar `NAME.meta.json` beside it read as in a
/// folder). A file that cannot be read is [`Folder::skipped`], not an error; a path that
/// is not a file is one.
pub fn load_file(path: &Path) -> Result<Folder> {
    let meta = std::fs::metadata(path).map_err(|e| Error::io(path, e))?;
    if !meta.is_file() {
        return Err(Error::invalid("path", format!("{} is not a file", path.display())));
    }
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let lower = name.to_ascii_lowercase();
    if lower.ends_with(".jsonl") || lower.ends_with(".jsonl.gz") {
        return Ok(Folder { documents: load_documents(path)?, skipped: Vec::new() });
    }
    let mut folder = Folder::default();
    let kind = name.rsplit_once('.').and_then(|(_, ext)| file_kind(&name, ext));
    let sidecar = path.with_file_name(format!("{name}{SIDECAR_SUFFIX}"));
    let sidecar = sidecar.is_file().then_some(sidecar);
    match kind.map(|kind| read_file(&name, path, kind, sidecar.as_ref())) {
        Some(Ok(d)) => folder.documents.push(d),
        Some(Err(reason)) => folder.skipped.push(SkippedFile { path: name, reason }),
        None => folder.skipped.push(SkippedFile { path: name, reason: UNREADABLE_KIND.to_string() }),
    }
    Ok(folder)
}

/// Why a file of another kind is not read.
const UNREADABLE_KIND: &str = "not a kind of file Sextant reads (.md, .txt, .html, .pdf, .json, .jsonl)";

/// Reads every document under `dir`, recursively (module documentation). Hidden files and
/// directories (a name starting with `.`) are not read. Errors only when the folder itself
/// cannot be listed; a file that cannot be read is skipped with its reason.
pub fn load_folder(dir: &Path) -> Result<Folder> {
    let mut files = BTreeMap::new();
    list_files(dir, dir, &mut files)?;
    let mut folder = Folder::default();
    let mut ids = HashSet::new();
    let skip = |folder: &mut Folder, path: &str, reason: String| {
        folder.skipped.push(SkippedFile { path: path.to_string(), reason });
    };
    for (rel, path) in &files {
        let name = rel.rsplit('/').next().unwrap_or(rel);
        let lower = name.to_ascii_lowercase();
        if let Some(of) = rel.strip_suffix(SIDECAR_SUFFIX) {
            if !files.contains_key(of) {
                skip(&mut folder, rel, format!("a sidecar of {of}, which is not in the folder"));
            }
            continue;
        }
        if lower.ends_with(".jsonl") || lower.ends_with(".jsonl.gz") {
            match load_documents(path) {
                Ok(documents) => {
                    for d in documents {
                        match ids.insert(d.document_id.clone()) {
                            true => folder.documents.push(d),
                            false => skip(&mut folder, rel, format!("document {} is named twice", d.document_id)),
                        }
                    }
                }
                Err(e) => skip(&mut folder, rel, e.to_string()),
            }
            continue;
        }
        let kind = name.rsplit_once('.').and_then(|(_, ext)| file_kind(name, ext));
        let Some(kind) = kind else {
            skip(&mut folder, rel, UNREADABLE_KIND.to_string());
            continue;
        };
        match read_file(rel, path, kind, files.get(&format!("{rel}{SIDECAR_SUFFIX}"))) {
            Ok(d) if ids.insert(d.document_id.clone()) => folder.documents.push(d),
            Ok(d) => skip(&mut folder, rel, format!("document {} is named twice", d.document_id)),
            Err(e) => skip(&mut folder, rel, e),
        }
    }
    Ok(folder)
}

/// One file of a folder as a document, its id `rel`; the error in a user's words.
fn read_file(
    rel: &str,
    path: &Path,
    kind: DocumentObject,
    sidecar: Option<&PathBuf>,
) -> std::result::Result<Document, String> {
    let too_big = |p: &Path| std::fs::metadata(p).map(|m| m.len() > MAX_FILE_BYTES).unwrap_or(false);
    if too_big(path) {
        return Err(format!("larger than {} MiB", MAX_FILE_BYTES >> 20));
    }
    let bytes = std::fs::read(path).map_err(|e| e.to_string())?;
    let sidecar = match sidecar {
        Some(p) if too_big(p) => return Err(format!("its sidecar is larger than {} MiB", MAX_FILE_BYTES >> 20)),
        Some(p) => Some(std::fs::read_to_string(p).map_err(|e| format!("its sidecar: {e}"))?),
        None => None,
    };
    let document = read_document(rel, kind, rel, &bytes, sidecar.as_deref()).map_err(|e| match e {
        Error::Corpus { reason, .. } => reason,
        other => other.to_string(),
    })?;
    Ok(document)
}

/// Every file under `dir` (not hidden), by its path relative to `root`.
fn list_files(root: &Path, dir: &Path, out: &mut BTreeMap<String, PathBuf>) -> Result<()> {
    let entries = std::fs::read_dir(dir).map_err(|e| Error::io(dir, e))?;
    for entry in entries {
        let entry = entry.map_err(|e| Error::io(dir, e))?;
        let path = entry.path();
        if entry.file_name().to_string_lossy().starts_with('.') {
            continue;
        }
        let kind = entry.file_type().map_err(|e| Error::io(&path, e))?;
        if kind.is_dir() {
            list_files(root, &path, out)?;
        } else if kind.is_file() || path.is_file() {
            let rel = path.strip_prefix(root).unwrap_or(&path);
            let rel: Vec<String> = rel.components().map(|c| c.as_os_str().to_string_lossy().into_owned()).collect();
            out.insert(rel.join("/"), path);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::corpus::MetaValue;

    #[test]
    fn objects_name_their_document_by_file_name() {
        assert_eq!(document_object("corpora/demo/q3.json"), Some(("q3", DocumentObject::Json)));
        assert_eq!(document_object("corpora/demo/a.b.md"), Some(("a.b", DocumentObject::Raw(MediaType::Markdown))));
        assert_eq!(document_object("x/Guide.HTM"), Some(("Guide", DocumentObject::Raw(MediaType::Html))));
        assert_eq!(document_object("x/notes.txt"), Some(("notes", DocumentObject::Raw(MediaType::PlainText))));
        assert_eq!(
            document_object("x/Annual Report.pdf"),
            Some(("Annual Report", DocumentObject::Raw(MediaType::Pdf)))
        );
        for other in
            ["x/filings.jsonl", "x/filings.jsonl.gz", "x/report.docx", "x/.json", "x/README", "x/", "x/a.md.meta.json"]
        {
            assert_eq!(document_object(other), None, "{other}");
        }
    }

    #[test]
    fn raw_files_take_the_file_name_as_id_and_the_heading_as_title() {
        let md = b"# Travel policy\n\nBook flights two weeks ahead.\n\n- Economy under 6 hours\n- Business above";
        let d = read_document_object("c/travel.md", "s3://b/c/travel.md", md).unwrap();
        assert_eq!((d.document_id.as_str(), d.title.as_str()), ("travel", "Travel policy"));
        assert_eq!(d.document_type.as_str(), "article");
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

    #[test]
    fn front_matter_reads_scalars_and_lists_and_names_the_line_it_cannot_read() {
        let f = front_matter_fields(
            "title: \"Leave policy: 2025\"\nyear: 2025\nrate: 0.5\ndraft: false\n# a comment\n\
             tags: [hr, leave]\nowners:\n  - ana\n  - 'li wei'\nteam: people ops\n",
        )
        .unwrap();
        assert_eq!(f["title"], "Leave policy: 2025");
        assert_eq!(
            (f["year"].as_i64(), f["rate"].as_f64(), f["draft"].as_bool()),
            (Some(2025), Some(0.5), Some(false))
        );
        assert_eq!(f["tags"], serde_json::json!(["hr", "leave"]));
        assert_eq!(f["owners"], serde_json::json!(["ana", "li wei"]));
        assert_eq!(f["team"], "people ops");
        assert!(front_matter_fields("a: 1\nnested:\n  key: value\n").unwrap_err().contains("line 3"));
        assert!(front_matter_fields("just words\n").unwrap_err().contains("line 1"));
        assert!(front_matter_fields("a: |\n  text\n").unwrap_err().contains("line 1"));
    }

    fn write(dir: &Path, rel: &str, bytes: &[u8]) {
        let path = dir.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, bytes).unwrap();
    }

    #[test]
    fn a_folder_names_documents_by_relative_path_with_fields_from_front_matter_and_sidecars() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        write(d, "handbook/intro.md", b"---\nteam: people ops\nyear: 2024\n---\n# Welcome\n\nStart here.\n");
        write(d, "handbook/intro.md.meta.json", br#"{"year": 2025, "region": "EU", "document_type": "policy"}"#);
        write(d, "policies/leave.html", b"<html><head><title>Leave</title></head><body><p>Ten days.</p></body></html>");
        write(d, "notes.txt", b"Plain notes.\n\nSecond paragraph.");
        write(d, "more/docs.jsonl", br#"{"documentId": "j1", "segments": ["From JSONL."]}"#);
        write(d, "report.pdf", b"%PDF-1.7");
        let pdfs = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/pdf");
        write(d, "annual/review.pdf", &std::fs::read(pdfs.join("report.pdf")).unwrap());
        write(d, "annual/review.pdf.meta.json", br#"{"ticker": "TURB"}"#);
        write(d, "annual/locked.pdf", &std::fs::read(pdfs.join("encrypted.pdf")).unwrap());
        write(d, "image.png", b"\x89PNG");
        write(d, "empty.md", b"   \n");
        write(d, "bad.md", b"---\nnested:\n  key: v\n---\nText.\n");
        write(d, "orphan.txt.meta.json", b"{}");
        write(d, ".hidden/secret.md", b"Not read.");
        write(d, "dup.json", br#"{"documentId": "x", "segments": ["A JSON document."]}"#);
        let mut folder = load_folder(d).unwrap();
        let ids: Vec<&str> = folder.documents.iter().map(|d| d.document_id.as_str()).collect();
        assert_eq!(
            ids,
            ["annual/review.pdf", "dup.json", "handbook/intro.md", "j1", "notes.txt", "policies/leave.html"]
        );
        let review = folder.documents.remove(0);
        assert_eq!((review.title.as_str(), review.ticker.as_deref()), ("Quarterly operating review", Some("TURB")));
        assert_eq!(review.pages.len(), review.segments.len(), "a PDF's segments each have a page");
        assert_eq!((review.pages[0], review.pages[review.pages.len() - 1]), (1, 3));
        let on_page_2: Vec<&String> =
            review.segments.iter().zip(&review.pages).filter(|p| *p.1 == 2).map(|p| p.0).collect();
        assert!(on_page_2.iter().any(|s| s.contains("page-2-marker")), "{on_page_2:?}");
        let intro = &folder.documents[1];
        assert_eq!((intro.title.as_str(), intro.year, intro.document_type.as_str()), ("Welcome", Some(2025), "policy"));
        assert_eq!(intro.metadata.get("team"), Some(&MetaValue::Str("people ops".into())));
        assert_eq!(intro.metadata.get("region"), Some(&MetaValue::Str("EU".into())), "the sidecar adds fields");
        assert_eq!(folder.documents[4].title, "Leave");
        assert_eq!(folder.documents[3].segments, ["Plain notes.", "Second paragraph."]);
        let skipped: Vec<(&str, &str)> = folder.skipped.iter().map(|s| (s.path.as_str(), s.reason.as_str())).collect();
        let reason =
            |p: &str| skipped.iter().find(|s| s.0 == p).map(|s| s.1).unwrap_or_else(|| panic!("{p}: {skipped:?}"));
        assert!(reason("report.pdf").contains("not a readable PDF"), "{}", reason("report.pdf"));
        assert!(reason("annual/locked.pdf").contains("encrypted"), "{}", reason("annual/locked.pdf"));
        assert!(reason("image.png").contains("not a kind of file"));
        assert!(reason("empty.md").contains("no text"));
        assert!(reason("bad.md").contains("front matter: line 2"), "{}", reason("bad.md"));
        assert!(reason("orphan.txt.meta.json").contains("not in the folder"));
        assert_eq!(skipped.len(), 6, "{skipped:?}");
        // One file reads as a folder of one, named by its file name, with its sidecar.
        let one = load_file(&d.join("policies/leave.html")).unwrap();
        assert_eq!(one.documents[0].document_id, "leave.html");
        let with_sidecar = load_file(&d.join("handbook/intro.md")).unwrap();
        assert_eq!(with_sidecar.documents[0].metadata.get("region"), Some(&MetaValue::Str("EU".into())));
        assert_eq!(load_file(&d.join("report.pdf")).unwrap().skipped[0].path, "report.pdf");
        assert_eq!(load_file(&d.join("more/docs.jsonl")).unwrap().documents[0].document_id, "j1");
        assert!(load_file(&d.join("handbook")).is_err(), "a folder is not a file");
        // A corpus is a folder or a JSONL file.
        assert_eq!(load_corpus(d).unwrap().documents.len(), 6);
        assert_eq!(load_corpus(&d.join("more/docs.jsonl")).unwrap().documents[0].document_id, "j1");
        assert!(load_folder(&d.join("absent")).is_err());
    }

    #[test]
    fn a_field_that_names_the_document_id_or_breaks_metadata_rules_skips_its_file() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "a.md", b"Text.");
        write(dir.path(), "a.md.meta.json", br#"{"documentId": "other"}"#);
        write(dir.path(), "b.md", b"Text.");
        write(dir.path(), "b.md.meta.json", b"[1, 2]");
        write(dir.path(), "c.md", b"---\nyear: soon\n---\nText.");
        let folder = load_folder(dir.path()).unwrap();
        assert!(folder.documents.is_empty(), "{:?}", folder.documents);
        let reasons: Vec<&str> = folder.skipped.iter().map(|s| s.reason.as_str()).collect();
        assert!(reasons[0].contains("document id is its path"), "{reasons:?}");
        assert!(reasons[1].contains("not a JSON object"), "{reasons:?}");
        assert!(reasons[2].contains("year"), "{reasons:?}");
    }
}
