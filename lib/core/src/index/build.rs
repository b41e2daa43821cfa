//! Building an index from documents with the encoders.

use std::time::{SystemTime, UNIX_EPOCH};

use super::format::{Manifest, ModelRef, FORMAT_NAME, FORMAT_VERSION};
use super::{Bm25Index, Bm25Params, DenseIndex, Index, SpladeIndex};
use crate::corpus::{chunk_document, Chunk, Document};
use crate::encode::{DenseEncoder, SparseEncoder};
use crate::error::{Error, Result};

/// Chunks encoded between two progress reports.
const PROGRESS_STEP: usize = 256;

/// What an index build does.
#[derive(Debug, Clone)]
pub struct BuildOptions {
    /// Index id written in the manifest.
    pub index_id: String,
    /// Token budget of a chunk (segments are never split).
    pub chunk_tokens: usize,
    /// BM25 parameters.
    pub bm25: Bm25Params,
    /// Dense model reference for the manifest.
    pub dense_model: ModelRef,
    /// SPLADE model reference for the manifest.
    pub sparse_model: ModelRef,
}

/// Receives `(stage, done, total)` while a build runs.
pub type Progress<'a> = &'a (dyn Fn(&str, usize, usize) + Sync);

/// The text the encoders see for a chunk: the document title, then the chunk.
pub fn encoder_input(doc: &Document, chunk: &Chunk) -> String {
    if doc.title.trim().is_empty() {
        chunk.text.clone()
    } else {
        format!("{}\n{}", doc.title.trim(), chunk.text)
    }
}

impl Index {
    /// Chunks, encodes and indexes `documents`.
    pub fn build(
        documents: Vec<Document>,
        dense: &DenseEncoder,
        sparse: &SparseEncoder,
        options: &BuildOptions,
        progress: Progress,
    ) -> Result<Index> {
        if options.chunk_tokens == 0 {
            return Err(Error::invalid("chunk_tokens", "must be positive"));
        }
        let mut seen = std::collections::HashSet::new();
        for d in &documents {
            if !seen.insert(d.document_id.as_str()) {
                return Err(Error::invalid("documentId", format!("duplicate document id {:?}", d.document_id)));
            }
        }
        let count = |s: &str| dense.tokenizer().count_tokens(s);
        let mut chunks = Vec::new();
        for (i, doc) in documents.iter().enumerate() {
            for span in chunk_document(doc, options.chunk_tokens, &count) {
                chunks.push(Chunk::new(i as u32, doc, span));
            }
        }
        let inputs: Vec<String> = chunks.iter().map(|c| encoder_input(&documents[c.doc as usize], c)).collect();
        let total = inputs.len();
        let mut vectors = Vec::with_capacity(total * dense.dim());
        let mut sparse_vecs = Vec::with_capacity(total);
        for (step, part) in inputs.chunks(PROGRESS_STEP).enumerate() {
            let refs: Vec<&str> = part.iter().map(|s| s.as_str()).collect();
            // Both encoders at once: each splits its batches across the thread pool, and
            // running them side by side keeps every core busy through the other's last
            // batches instead of waiting at each step's end.
            let (dense_out, sparse_out) = rayon::join(|| dense.embed_batch(&refs), || sparse.encode_batch(&refs));
            for v in dense_out? {
                vectors.extend(v);
            }
            sparse_vecs.extend(sparse_out?);
            progress("encode", (step * PROGRESS_STEP + part.len()).min(total), total);
        }
        progress("bm25", 0, 1);
        let bm25 = Bm25Index::build(inputs.iter().map(|s| s.as_str()), options.bm25);
        let splade = SpladeIndex::build(sparse.tokenizer().vocab_size(), &sparse_vecs);
        progress("hnsw", 0, 1);
        let dense_index = DenseIndex::build(dense.dim(), vectors);
        progress("hnsw", 1, 1);
        let manifest = Manifest {
            format: FORMAT_NAME.into(),
            version: FORMAT_VERSION,
            index_id: options.index_id.clone(),
            created_unix: SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0),
            documents: documents.len(),
            chunks: chunks.len(),
            chunk_tokens: options.chunk_tokens,
            dense_dim: dense.dim(),
            dense_model: options.dense_model.clone(),
            sparse_model: options.sparse_model.clone(),
            bm25: options.bm25,
            files: Vec::new(),
        };
        Index::from_parts(manifest, documents, chunks, dense_index, bm25, splade)
    }
}
