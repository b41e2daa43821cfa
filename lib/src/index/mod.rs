//! The indexes of one corpus: chunk store and metadata, dense HNSW, BM25 and SPLADE,
//! and their versioned on-disk format.

mod analyzer;
mod bitset;
mod bm25;
mod build;
mod dense;
mod filter;
pub mod format;
mod inverted;
mod splade;
mod topk;

use std::ops::Range;

pub use analyzer::{Analyzer, STOP_WORDS};
pub use bitset::Bitset;
pub use bm25::{Bm25Index, Bm25Params};
pub use build::{BuildOptions, Progress};
pub use dense::{dot, DenseIndex, EF_SEARCH, EXACT_ONLY_BELOW, EXACT_SCAN_FRACTION};
pub use filter::Filter;
pub use format::Manifest;
pub use inverted::InvertedIndex;
pub use splade::SpladeIndex;
pub use topk::top_k;

use crate::corpus::{Chunk, Document};
use crate::error::{Error, Result};
use crate::storage::Storage;

/// Everything one corpus needs to be searched, held in memory.
pub struct Index {
    /// The manifest it was loaded from or saved with.
    pub manifest: Manifest,
    /// Documents, by ordinal.
    pub documents: Vec<Document>,
    /// Chunks, by ordinal; a document's chunks are contiguous.
    pub chunks: Vec<Chunk>,
    /// Dense vectors and graph.
    pub dense: DenseIndex,
    /// BM25.
    pub bm25: Bm25Index,
    /// SPLADE.
    pub splade: SpladeIndex,
    doc_chunks: Vec<Range<u32>>,
}

const DOCUMENTS: &str = "documents.bin";
const CHUNKS: &str = "chunks.bin";
const DENSE_VECTORS: &str = "dense.f32";
const DENSE_GRAPH: &str = "dense.graph";
const BM25: &str = "bm25.bin";
const SPLADE: &str = "splade.bin";

/// Decodes one bincode file of an index, naming it in the error.
fn decode_file<T: serde::de::DeserializeOwned>(location: &str, name: &str, bytes: Result<&[u8]>) -> Result<T> {
    bincode::deserialize(bytes?).map_err(|e| Error::IndexCorrupted {
        file: format!("{location}/{name}"),
        expected: "a decodable file".into(),
        found: e.to_string(),
    })
}

impl Index {
    /// Assembles an index from its parts (checks that the parts agree).
    pub fn from_parts(
        manifest: Manifest,
        documents: Vec<Document>,
        chunks: Vec<Chunk>,
        dense: DenseIndex,
        bm25: Bm25Index,
        splade: SpladeIndex,
    ) -> Result<Self> {
        let n = chunks.len();
        let check = |what: &str, got: usize| {
            if got != n {
                Err(Error::IndexCorrupted { file: what.into(), expected: format!("{n} chunks"), found: format!("{got}") })
            } else {
                Ok(())
            }
        };
        check(DENSE_VECTORS, dense.len())?;
        check(BM25, bm25.inverted.num_chunks as usize)?;
        check(SPLADE, splade.inverted.num_chunks as usize)?;
        let mut doc_chunks = vec![0..0; documents.len()];
        for (i, c) in chunks.iter().enumerate() {
            let r = doc_chunks.get_mut(c.doc as usize).ok_or_else(|| Error::IndexCorrupted {
                file: CHUNKS.into(),
                expected: format!("document ordinals < {}", documents.len()),
                found: c.doc.to_string(),
            })?;
            if r.start == r.end {
                *r = i as u32..i as u32 + 1;
            } else {
                r.end = i as u32 + 1;
            }
        }
        Ok(Index { manifest, documents, chunks, dense, bm25, splade, doc_chunks })
    }

    /// The document a chunk belongs to.
    pub fn document_of(&self, chunk: u32) -> &Document {
        &self.documents[self.chunks[chunk as usize].doc as usize]
    }

    /// The chunks of document `doc`.
    pub fn chunks_of(&self, doc: u32) -> Range<u32> {
        self.doc_chunks[doc as usize].clone()
    }

    /// The chunks whose document passes `filter` (`None` when the filter is empty).
    pub fn allowed(&self, filter: &Filter) -> Option<Bitset> {
        self.allowed_by(|d| filter.matches(d), filter.is_empty())
    }

    /// The chunks whose document passes `pred`; `None` when `match_all` (no filter).
    pub fn allowed_by(&self, pred: impl Fn(&Document) -> bool, match_all: bool) -> Option<Bitset> {
        if match_all {
            return None;
        }
        let mut set = Bitset::empty(self.chunks.len());
        for (d, doc) in self.documents.iter().enumerate() {
            if pred(doc) {
                self.doc_chunks[d].clone().for_each(|c| set.insert(c as usize));
            }
        }
        Some(set)
    }

    /// Writes the index to `storage` (data files first, the manifest last).
    pub fn save(&self, storage: &dyn Storage) -> Result<Manifest> {
        let mut vec_bytes = Vec::with_capacity(self.dense.vectors.len() * 4);
        for x in &self.dense.vectors {
            vec_bytes.extend_from_slice(&x.to_le_bytes());
        }
        let files = vec![
            (DOCUMENTS.to_string(), bincode::serialize(&self.documents)?),
            (CHUNKS.to_string(), bincode::serialize(&self.chunks)?),
            (DENSE_VECTORS.to_string(), vec_bytes),
            (DENSE_GRAPH.to_string(), bincode::serialize(&self.dense)?),
            (BM25.to_string(), bincode::serialize(&self.bm25)?),
            (SPLADE.to_string(), bincode::serialize(&self.splade)?),
        ];
        format::write_files(storage, files, self.manifest.clone())
    }

    /// Loads and verifies an index from `storage`.
    pub fn load(storage: &dyn Storage) -> Result<Self> {
        let manifest = format::read_manifest(storage)?;
        let bytes = format::read_files(storage, &manifest)?;
        let get = |name: &str| -> Result<&[u8]> {
            manifest.files.iter().position(|f| f.name == name).map(|i| bytes[i].as_slice()).ok_or_else(|| Error::IndexCorrupted {
                file: format!("{}/{}", storage.location(), format::MANIFEST),
                expected: format!("an entry for {name}"),
                found: "none".into(),
            })
        };
        let loc = storage.location();
        let ((documents, chunks), (dense, (bm25, splade))) = rayon::join(
            || rayon::join(|| decode_file(&loc, DOCUMENTS, get(DOCUMENTS)), || decode_file(&loc, CHUNKS, get(CHUNKS))),
            || {
                rayon::join(
                    || decode_file::<DenseIndex>(&loc, DENSE_GRAPH, get(DENSE_GRAPH)),
                    || rayon::join(|| decode_file(&loc, BM25, get(BM25)), || decode_file(&loc, SPLADE, get(SPLADE))),
                )
            },
        );
        let (documents, chunks, mut dense, bm25, splade): (Vec<Document>, Vec<Chunk>, DenseIndex, Bm25Index, SpladeIndex) =
            (documents?, chunks?, dense?, bm25?, splade?);
        let raw = get(DENSE_VECTORS)?;
        dense.vectors = raw.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect();
        if dense.dim != manifest.dense_dim {
            return Err(Error::IndexCorrupted {
                file: format!("{}/{DENSE_GRAPH}", storage.location()),
                expected: format!("dimension {}", manifest.dense_dim),
                found: dense.dim.to_string(),
            });
        }
        Index::from_parts(manifest, documents, chunks, dense, bm25, splade)
    }
}
