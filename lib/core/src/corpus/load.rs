//! Loaders: the JSONL document format (optionally gzipped) and the BEIR layout.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;

use super::document::Document;
use super::sentences::split_sentences;
use crate::error::{Error, Result};

fn open(path: &Path) -> Result<Box<dyn BufRead>> {
    let f = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
    let r: Box<dyn Read> = if path.extension().is_some_and(|e| e == "gz") {
        Box::new(flate2::read::MultiGzDecoder::new(f))
    } else {
        Box::new(f)
    };
    Ok(Box::new(BufReader::with_capacity(1 << 20, r)))
}

fn lines(path: &Path) -> Result<impl Iterator<Item = (usize, Result<String>)>> {
    let p = path.to_path_buf();
    Ok(open(path)?.lines().enumerate().map(move |(i, l)| (i + 1, l.map_err(|e| Error::io(&p, e)))))
}

/// Reads documents, one JSON object a line (`.jsonl` or `.jsonl.gz`).
pub fn load_documents(path: &Path) -> Result<Vec<Document>> {
    let name = path.display().to_string();
    let mut docs = Vec::new();
    for (line, text) in lines(path)? {
        let text = text?;
        if text.trim().is_empty() {
            continue;
        }
        let doc: Document = serde_json::from_str(&text).map_err(|e| Error::Corpus {
            source_name: name.clone(),
            line,
            reason: e.to_string(),
        })?;
        docs.push(doc);
    }
    Ok(docs)
}

/// A BEIR data set: documents (text split into sentence segments), queries and the
/// relevance judgements of one split.
#[derive(Debug, Clone)]
pub struct BeirSet {
    /// The corpus.
    pub documents: Vec<Document>,
    /// Query id → text, in file order, restricted to queries judged in the split.
    pub queries: Vec<(String, String)>,
    /// Query id → (document id → grade).
    pub qrels: HashMap<String, HashMap<String, i32>>,
}

/// Loads `corpus.jsonl`, `queries.jsonl` and `qrels/{split}.tsv` from `dir`.
pub fn load_beir(dir: &Path, split: &str) -> Result<BeirSet> {
    let corpus = dir.join("corpus.jsonl");
    let name = corpus.display().to_string();
    let mut documents = Vec::new();
    for (line, text) in lines(&corpus)? {
        let text = text?;
        if text.trim().is_empty() {
            continue;
        }
        let v: serde_json::Value = serde_json::from_str(&text).map_err(|e| Error::Corpus {
            source_name: name.clone(),
            line,
            reason: e.to_string(),
        })?;
        let field = |k: &str| v.get(k).and_then(|x| x.as_str()).unwrap_or("").to_string();
        let id = field("_id");
        if id.is_empty() {
            return Err(Error::Corpus { source_name: name.clone(), line, reason: "missing _id".into() });
        }
        let body = field("text");
        let mut segments = split_sentences(&body);
        if segments.is_empty() {
            segments.push(body);
        }
        documents.push(Document {
            document_id: id,
            title: field("title"),
            document_type: "article".into(),
            segments,
            ..Default::default()
        });
    }
    let qrels_path = dir.join("qrels").join(format!("{split}.tsv"));
    let mut qrels: HashMap<String, HashMap<String, i32>> = HashMap::new();
    for (line, text) in lines(&qrels_path)? {
        let text = text?;
        let cols: Vec<&str> = text.split('\t').collect();
        if line == 1 && cols.first() == Some(&"query-id") || text.trim().is_empty() {
            continue;
        }
        if cols.len() < 3 {
            return Err(Error::Corpus {
                source_name: qrels_path.display().to_string(),
                line,
                reason: "expected 3 columns".into(),
            });
        }
        let grade: i32 = cols[2].trim().parse().map_err(|_| Error::Corpus {
            source_name: qrels_path.display().to_string(),
            line,
            reason: format!("bad grade {:?}", cols[2]),
        })?;
        qrels.entry(cols[0].to_string()).or_default().insert(cols[1].to_string(), grade);
    }
    let qpath = dir.join("queries.jsonl");
    let mut queries = Vec::new();
    for (line, text) in lines(&qpath)? {
        let text = text?;
        if text.trim().is_empty() {
            continue;
        }
        let v: serde_json::Value = serde_json::from_str(&text).map_err(|e| Error::Corpus {
            source_name: qpath.display().to_string(),
            line,
            reason: e.to_string(),
        })?;
        let id = v.get("_id").and_then(|x| x.as_str()).unwrap_or("").to_string();
        if qrels.contains_key(&id) {
            queries.push((id, v.get("text").and_then(|x| x.as_str()).unwrap_or("").to_string()));
        }
    }
    Ok(BeirSet { documents, queries, qrels })
}
