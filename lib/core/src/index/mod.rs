//! The indexes of one corpus: chunk store and metadata, dense HNSW, BM25 and SPLADE,
//! and their versioned on-disk format.

mod analyzer;
mod bitset;
mod bm25;
mod dot;
mod filter;
pub mod format;
mod hnsw;
mod inverted;
mod le_bytes;
mod provenance;
mod rows;
mod splade;
mod store;
mod topk;
mod vector_store;

use std::ops::Range;
use std::sync::{Arc, OnceLock};

pub use analyzer::{Analyzer, Stemming, STOP_WORDS};
pub use bitset::Bitset;
pub use bm25::{idf, Bm25Index, Bm25Params, LexicalStats};
pub use dot::dot;
pub use filter::Filter;
pub use format::Manifest;
pub use hnsw::{beam, DenseIndex, VectorRows, EF_SEARCH, EXACT_ONLY_BELOW, EXACT_SCAN_FRACTION};
pub use inverted::InvertedIndex;
pub use provenance::Provenance;
pub use rows::Rows;
pub use splade::SpladeIndex;
pub use store::{ShardStore, STORE_FILE};
pub use topk::top_k;
pub use vector_store::VectorStore;

use crate::corpus::legacy::{DocumentV3, DocumentV6};
use crate::corpus::{Chunk, ChunkSpan, Document, MetadataSchema};
use crate::encode::SparseVector;
use crate::error::{Error, Result};
use crate::storage::Storage;

/// Everything one corpus needs to be searched, held in memory.
///
/// A served index may carry a delta: documents written since it was built, appended after
/// its own (document and chunk ordinals continue where the built index's end) and searched
/// exactly beside it ([`Index::with_delta`]); and withdrawn documents (deleted, or replaced
/// by a newer version in the delta), which no search returns: they are left out of every
/// candidate set before ranking ([`Index::allowed`]).
pub struct Index {
    /// The manifest it was loaded from or saved with.
    pub manifest: Manifest,
    /// Documents, by ordinal (the delta's after the built index's).
    pub documents: Rows<Document>,
    /// Chunks, by ordinal; a document's chunks are contiguous.
    pub chunks: Rows<Chunk>,
    /// Dense vectors and graph of the built index.
    pub dense: Arc<DenseIndex>,
    /// BM25 of the built index.
    pub bm25: Arc<Bm25Index>,
    /// SPLADE of the built index.
    pub splade: Arc<SpladeIndex>,
    doc_chunks: Rows<Range<u32>>,
    delta: Option<Arc<Delta>>,
    /// Withdrawn documents, by ordinal.
    withdrawn: Option<Arc<Bitset>>,
    /// The metadata fields of the documents and their types, read once when first asked.
    schema: OnceLock<MetadataSchema>,
    /// BM25's average chunk length in the built index, shared by every delta over it.
    base_avgdl: Arc<OnceLock<f32>>,
}

/// The search structures of a delta, over its own chunks (ordinal 0 is the first chunk
/// after the built index's).
struct Delta {
    /// The delta's vectors, searched exactly (no graph).
    dense: DenseIndex,
    bm25: Bm25Index,
    splade: SpladeIndex,
}

/// Documents to append to an index as its delta, cut and encoded: chunk `i` belongs to
/// `documents[chunks[i].doc]`, and its vectors are `dense[i]` (one row of the index's
/// dimension per window) and `sparse[i]`.
#[derive(Debug, Clone, Default)]
pub struct Appended {
    /// The documents, in order.
    pub documents: Vec<Document>,
    /// Their chunks, by document then position; `doc` counts from 0 in `documents`.
    pub chunks: Vec<Chunk>,
    /// Each chunk's dense vectors, its windows' rows one after the other.
    pub dense: Vec<Vec<f32>>,
    /// The chunks' SPLADE vectors.
    pub sparse: Vec<SparseVector>,
}

const DOCUMENTS: &str = "documents.bin";
const CHUNKS: &str = "chunks.bin";
const DENSE_VECTORS: &str = "dense.f32";
const DENSE_GRAPH: &str = "dense.graph";
/// Where each chunk's dense vectors start (format 6 on): `chunks + 1` little-endian `u32`.
const DENSE_WINDOWS: &str = "dense.windows";
const BM25: &str = "bm25.bin";
const SPLADE: &str = "splade.bin";
/// Every file an index reads itself.
const OWN_FILES: [&str; 7] = [DOCUMENTS, CHUNKS, DENSE_VECTORS, DENSE_GRAPH, DENSE_WINDOWS, BM25, SPLADE];
/// The first format with [`DENSE_WINDOWS`]; before it every chunk had one dense vector.
const WINDOWS_SINCE: u32 = 6;
/// The first format whose documents carry their pages ([`Document::pages`]).
const PAGES_SINCE: u32 = 7;

/// One verified and decoded file of an index ([`Index::decode_file`]).
pub struct DecodedFile(Part);

/// One decoded file of an index.
enum Part {
    Documents(Vec<Document>),
    Chunks(Vec<Chunk>),
    /// Chunks of formats 1 and 2, which cut only between segments and stored no
    /// character range: the range is their segments' ([`Index::assemble`] fills it in).
    ChunksV2(Vec<ChunkV2>),
    Vectors(VectorRows),
    Graph(DenseIndex),
    Windows(Vec<u32>),
    Bm25(Bm25Index),
    Splade(SpladeIndex),
    /// A file the index does not read itself (an attachment such as the facts of the
    /// financial routes, which their own crate loads beside the index).
    Other,
}

/// A chunk as formats 1 and 2 stored it.
#[derive(serde::Deserialize)]
struct ChunkV2 {
    doc: u32,
    seg_start: u32,
    seg_end: u32,
    text: String,
}

impl ChunkV2 {
    /// The chunk with its character range: from its first segment's start to its last
    /// one's end.
    fn upgrade(self, documents: &[Document]) -> Chunk {
        let (start, end) = documents
            .get(self.doc as usize)
            .map(|d| d.segment_spans())
            .and_then(|s| {
                Some((s.get(self.seg_start as usize)?.char_start, s.get(self.seg_end as usize - 1)?.char_end))
            })
            .unwrap_or((0, self.text.chars().count()));
        let span = ChunkSpan {
            seg_start: self.seg_start,
            seg_end: self.seg_end,
            char_start: start as u32,
            char_end: end as u32,
        };
        Chunk { doc: self.doc, span, text: self.text }
    }
}

/// The chunk range of each of `docs` documents, from `chunks` (whose `doc` counts from 0
/// in these documents), with chunk ordinals starting at `first_chunk` (documents from
/// `first_doc` only name the layer in errors).
fn chunk_ranges(chunks: &[Chunk], docs: usize, first_doc: usize, first_chunk: usize) -> Result<Vec<Range<u32>>> {
    let mut ranges = vec![0..0; docs];
    for (i, c) in chunks.iter().enumerate() {
        let r = ranges.get_mut(c.doc as usize).ok_or_else(|| Error::IndexCorrupted {
            file: CHUNKS.into(),
            expected: format!("document ordinals < {}", first_doc + docs),
            found: (first_doc + c.doc as usize).to_string(),
        })?;
        let at = (first_chunk + i) as u32;
        if r.start == r.end {
            *r = at..at + 1;
        } else {
            r.end = at + 1;
        }
    }
    Ok(ranges)
}

/// The bytes document `d` holds in memory, estimated ([`Index::resident_bytes`]):
///
/// ```text
/// document_bytes = 160 + |id| + |title| + |metadata as JSON| + Σ_segments (|s| + 24)
/// ```
fn document_bytes(d: &Document) -> u64 {
    160 + (d.document_id.len() + d.title.len()) as u64
        + d.metadata.to_json().to_string().len() as u64
        + d.segments.iter().map(|s| s.len() as u64 + 24).sum::<u64>()
}

/// The newest publication day of `documents` (days since the Unix epoch), if any has a date.
fn newest_day<'a>(documents: impl Iterator<Item = &'a Document>) -> Option<i64> {
    documents.filter_map(|d| d.published_at.map(crate::corpus::Date::days_since_epoch)).max()
}

/// The error for a manifest of the index at `location` that lists no file `name`.
fn missing_entry(location: &str, name: &str) -> Error {
    Error::IndexCorrupted {
        file: format!("{location}/{}", format::MANIFEST),
        expected: format!("an entry for {name}"),
        found: "none".into(),
    }
}

/// Decodes a raw file of little-endian values ([`crate::storage::read_le`]; `what` names
/// their type in the error), such as the `u32` window offsets.
fn decode_le<T: bytemuck::Pod>(location: &str, name: &str, what: &str, bytes: &[u8]) -> Result<Vec<T>> {
    crate::storage::read_le(bytes).ok_or_else(|| Error::IndexCorrupted {
        file: format!("{location}/{name}"),
        expected: format!("a whole number of {what}"),
        found: format!("{} bytes", bytes.len()),
    })
}

/// Decodes one bincode file of an index, naming it in the error.
fn decode_file<T: serde::de::DeserializeOwned>(location: &str, name: &str, bytes: Result<&[u8]>) -> Result<T> {
    format::decode_bincode(location, name, bytes?)
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
                Err(Error::IndexCorrupted {
                    file: what.into(),
                    expected: format!("{n} chunks"),
                    found: format!("{got}"),
                })
            } else {
                Ok(())
            }
        };
        check(BM25, bm25.inverted.num_chunks as usize)?;
        check(DENSE_VECTORS, dense.len())?;
        check(SPLADE, splade.inverted.num_chunks as usize)?;
        for (file, inverted) in [(BM25, &bm25.inverted), (SPLADE, &splade.inverted)] {
            inverted.validate().map_err(|found| Error::IndexCorrupted {
                file: file.into(),
                expected: "consistent postings".into(),
                found,
            })?;
        }
        let doc_chunks = chunk_ranges(&chunks, documents.len(), 0, 0)?;
        Ok(Index {
            manifest,
            documents: Rows::new(documents),
            chunks: Rows::new(chunks),
            dense: Arc::new(dense),
            bm25: Arc::new(bm25),
            splade: Arc::new(splade),
            doc_chunks: Rows::new(doc_chunks),
            delta: None,
            withdrawn: None,
            schema: OnceLock::new(),
            base_avgdl: Arc::new(OnceLock::new()),
        })
    }

    /// This index's built part with `appended` as its delta (replacing any delta it had)
    /// and the built documents `withdrawn` (ordinals below the built index's document
    /// count) left out of every search. The built part is shared, not copied; the delta's
    /// BM25 is weighed with the statistics of both ([`Bm25Index::build_beside`]).
    pub fn with_delta(&self, appended: Appended, withdrawn: &[u32]) -> Result<Index> {
        self.with_delta_weighed(appended, withdrawn, None)
    }

    /// [`with_delta`](Self::with_delta) for an index that is one shard of several: the
    /// delta's BM25 is weighed with `whole`, the statistics of every chunk of every shard
    /// and of every shard's delta, and `avgdl`, the built chunks' average length over
    /// every shard ([`Bm25Index::build_with_stats_at`]):
    ///
    /// ```text
    /// N = N_built + N_delta,  df(t) = df_built(t) + df_delta(t)   (over every shard)
    /// ```
    ///
    /// which is how one index weighs a delta of the same documents, so a delta chunk
    /// scores the same at any shard count.
    pub fn with_sharded_delta(
        &self,
        appended: Appended,
        withdrawn: &[u32],
        whole: &LexicalStats,
        avgdl: f32,
    ) -> Result<Index> {
        self.with_delta_weighed(appended, withdrawn, Some((whole, avgdl)))
    }

    fn with_delta_weighed(
        &self,
        appended: Appended,
        withdrawn: &[u32],
        weighed_with: Option<(&LexicalStats, f32)>,
    ) -> Result<Index> {
        let Appended { documents, chunks, dense, sparse } = appended;
        let (base_docs, base_chunks) = (self.documents.base().len(), self.chunks.base().len());
        let dim = self.dense.dim;
        let whole = |v: &Vec<f32>| !v.is_empty() && v.len().is_multiple_of(dim);
        if dense.len() != chunks.len() || !dense.iter().all(whole) || sparse.len() != chunks.len() {
            return Err(Error::invalid(
                "delta",
                format!(
                    "{} chunks but {} dense vectors ({dim} values per window) and {} SPLADE vectors",
                    chunks.len(),
                    dense.len(),
                    sparse.len()
                ),
            ));
        }
        let delta_dense = DenseIndex::build_chunks(dim, &dense, usize::MAX).map_err(|e| Error::invalid("delta", e))?;
        let tail_ranges = chunk_ranges(&chunks, documents.len(), base_docs, base_chunks)?;
        let mut gone = Bitset::empty(base_docs + documents.len());
        for &d in withdrawn {
            if d as usize >= base_docs {
                return Err(Error::invalid("delta", format!("withdrawn document {d} is not in the built index")));
            }
            gone.insert(d as usize);
        }
        let texts = chunks.iter().map(|c| c.text.as_str());
        let bm25 = match weighed_with {
            Some((stats, avgdl)) => Bm25Index::build_with_stats_at(texts, self.bm25.params, stats, avgdl),
            None => {
                let avgdl = *self
                    .base_avgdl
                    .get_or_init(|| self.bm25.average_length(self.chunks.base().iter().map(|c| c.text.as_str())));
                Bm25Index::build_beside(texts, &self.bm25, avgdl)
            }
        };
        let splade = SpladeIndex::build(self.splade.inverted.num_terms(), &sparse);
        let chunks: Vec<Chunk> = chunks.into_iter().map(|c| Chunk { doc: c.doc + base_docs as u32, ..c }).collect();
        Ok(Index {
            manifest: self.manifest.clone(),
            documents: self.documents.with_tail(documents),
            chunks: self.chunks.with_tail(chunks),
            dense: self.dense.clone(),
            bm25: self.bm25.clone(),
            splade: self.splade.clone(),
            doc_chunks: self.doc_chunks.with_tail(tail_ranges),
            delta: Some(Arc::new(Delta { dense: delta_dense, bm25, splade })),
            withdrawn: (gone.count() > 0).then(|| Arc::new(gone)),
            schema: OnceLock::new(),
            base_avgdl: self.base_avgdl.clone(),
        })
    }

    /// BM25's [`idf`] of `term` (an analysed term) over every chunk this index holds, its
    /// delta's included:
    ///
    /// ```text
    /// idf(t) = idf(N_built + N_delta, df_built(t) + df_delta(t))
    /// ```
    ///
    /// the statistics the delta's own chunks are weighed with.
    pub fn term_idf(&self, term: &str) -> f32 {
        match &self.delta {
            None => self.bm25.idf_of(term),
            Some(d) => {
                let n = self.bm25.inverted.num_chunks as u64 + d.bm25.inverted.num_chunks as u64;
                idf(n.max(1) as f32, (self.bm25.df_of(term) + d.bm25.df_of(term)) as f32)
            }
        }
    }

    /// The bytes this index holds in memory once loaded, estimated from its sizes (what a
    /// function must fit beside the models, and twice over to swap in a new version):
    ///
    /// ```text
    /// bytes = Σ_documents (160 + |id| + |title| + |metadata as JSON| + Σ_segments (|s| + 24))
    ///       + Σ_chunks (48 + |text|)
    ///       + dense + BM25 + SPLADE                  (each one's own resident_bytes)
    /// ```
    ///
    /// A delta's own documents and vectors are not counted: compaction folds them in.
    pub fn resident_bytes(&self) -> u64 {
        let documents: u64 = self.documents.base().iter().map(document_bytes).sum();
        let chunks: u64 = self.chunks.base().iter().map(|c| 48 + c.text.len() as u64).sum();
        documents + chunks + self.dense.resident_bytes() + self.bm25.resident_bytes() + self.splade.resident_bytes()
    }

    /// Chunks in the delta (0 without one).
    pub fn delta_chunks(&self) -> usize {
        self.chunks.tail().len()
    }

    /// The newest document's publication day (days since the Unix epoch), if any document
    /// has a date: what a recency boost counts from when the request names no day.
    pub fn newest_day(&self) -> Option<i64> {
        newest_day(self.documents.iter())
    }

    /// Whether document `doc` is withdrawn (deleted, or replaced by a newer version).
    pub fn is_withdrawn(&self, doc: u32) -> bool {
        self.withdrawn.as_ref().is_some_and(|w| w.contains(doc as usize))
    }

    /// The dense index holding chunk `chunk` (built or appended) and its ordinal there.
    fn dense_of(&self, chunk: u32) -> (&DenseIndex, usize) {
        let base = self.chunks.base().len();
        match (chunk as usize).checked_sub(base) {
            None => (&self.dense, chunk as usize),
            Some(j) => (&self.delta.as_ref().expect("a chunk past the built ones is the delta's").dense, j),
        }
    }

    /// The dense vectors of chunk `chunk`, built or appended: one row of `dim` per window
    /// ([`DenseIndex`]).
    pub fn dense_vectors(&self, chunk: u32) -> &[f32] {
        let (dense, c) = self.dense_of(chunk);
        dense.chunk_vectors(c)
    }

    /// Chunk `chunk`'s dense vector nearest to `query` (its only one without windows).
    pub fn dense_nearest(&self, chunk: u32, query: &[f32]) -> &[f32] {
        let (dense, c) = self.dense_of(chunk);
        dense.nearest_vector(c, query)
    }

    /// The dense score of chunk `chunk` for `query`: the cosine of its best window.
    pub fn dense_score(&self, chunk: u32, query: &[f32]) -> f32 {
        let (dense, c) = self.dense_of(chunk);
        dense.score(c, query)
    }

    /// The `k` chunks most similar to `query` (a unit vector) among `allowed`: HNSW over the
    /// built chunks, an exact scan of the delta's, merged by cosine.
    pub fn dense_search(&self, query: &[f32], allowed: Option<&Bitset>, k: usize) -> Vec<(u32, f32)> {
        self.layered(allowed, k, |a| self.dense.search(query, a, k), |d, a| d.dense.exact(query, a, k))
    }

    /// The `k` best BM25 chunks for `query` among `allowed`, built and appended.
    pub fn bm25_search(&self, query: &str, allowed: Option<&Bitset>, k: usize) -> Vec<(u32, f32)> {
        self.layered(allowed, k, |a| self.bm25.search(query, a, k), |d, a| d.bm25.search(query, a, k))
    }

    /// The `k` best SPLADE chunks for `query` among `allowed`, built and appended.
    pub fn splade_search(&self, query: &SparseVector, allowed: Option<&Bitset>, k: usize) -> Vec<(u32, f32)> {
        self.layered(allowed, k, |a| self.splade.search(query, a, k), |d, a| d.splade.search(query, a, k))
    }

    /// One path's search over both layers: `built` on the built chunks and `appended` on
    /// the delta's (each given its part of `allowed`, renumbered from 0), merged by score.
    fn layered(
        &self,
        allowed: Option<&Bitset>,
        k: usize,
        built: impl FnOnce(Option<&Bitset>) -> Vec<(u32, f32)>,
        appended: impl FnOnce(&Delta, Option<&Bitset>) -> Vec<(u32, f32)>,
    ) -> Vec<(u32, f32)> {
        let Some(delta) = &self.delta else { return built(allowed) };
        let base = self.chunks.base().len();
        let (main_allowed, delta_allowed) = match allowed {
            Some(a) => (Some(a.window(0, base)), Some(a.window(base, self.chunks.tail().len()))),
            None => (None, None),
        };
        let mut hits = built(main_allowed.as_ref());
        hits.extend(appended(delta, delta_allowed.as_ref()).into_iter().map(|(c, s)| (c + base as u32, s)));
        top_k(hits.into_iter(), k)
    }

    /// The metadata fields of the index's documents, with their types.
    pub fn metadata_schema(&self) -> &MetadataSchema {
        self.schema.get_or_init(|| MetadataSchema::of(self.documents.iter().map(|d| &d.metadata)))
    }

    /// The document a chunk belongs to.
    pub fn document_of(&self, chunk: u32) -> &Document {
        &self.documents[self.chunks[chunk as usize].doc as usize]
    }

    /// Where chunk `chunk` comes from: its document, its ordinal there, the segments it
    /// overlaps and its range of the document's text.
    pub fn provenance(&self, chunk: u32) -> Provenance<'_> {
        let c = &self.chunks[chunk as usize];
        Provenance {
            chunk,
            ordinal_in_document: chunk - self.doc_chunks[c.doc as usize].start,
            document: &self.documents[c.doc as usize],
            segments: c.span.seg_start..c.span.seg_end,
            chars: c.span.char_start as usize..c.span.char_end as usize,
        }
    }

    /// The citation id of chunk `chunk` (see [`Provenance::chunk_id`]).
    pub fn chunk_id(&self, chunk: u32) -> String {
        self.provenance(chunk).chunk_id()
    }

    /// The chunks of document `doc`.
    pub fn chunks_of(&self, doc: u32) -> Range<u32> {
        self.doc_chunks[doc as usize].clone()
    }

    /// The chunks whose document passes `filter` and is not withdrawn (`None`: every
    /// chunk, when the filter is empty and nothing is withdrawn).
    pub fn allowed(&self, filter: &Filter) -> Option<Bitset> {
        self.allowed_by(|_, d| filter.matches(d), filter.is_empty())
    }

    /// The chunks whose document passes `pred` (given the document's ordinal and the
    /// document) and is not withdrawn; `None` when `match_all` (no filter) and nothing is
    /// withdrawn.
    pub fn allowed_by(&self, pred: impl Fn(usize, &Document) -> bool, match_all: bool) -> Option<Bitset> {
        if match_all && self.withdrawn.is_none() {
            return None;
        }
        let mut set = Bitset::empty(self.chunks.len());
        for (d, doc) in self.documents.iter().enumerate() {
            if !self.is_withdrawn(d as u32) && (match_all || pred(d, doc)) {
                self.doc_chunks[d].clone().for_each(|c| set.insert(c as usize));
            }
        }
        Some(set)
    }

    /// Writes the index to `storage` (data files first, the manifest last).
    pub fn save(&self, storage: &dyn Storage) -> Result<Manifest> {
        self.save_with(storage, Vec::new())
    }

    /// Writes the index and `attachments` (files of other crates that belong to this
    /// version, such as the financial facts: listed and checksummed in the same manifest,
    /// ignored by [`Index::load`]) to `storage`, data files first, the manifest last.
    pub fn save_with(&self, storage: &dyn Storage, attachments: Vec<(String, Vec<u8>)>) -> Result<Manifest> {
        if self.delta.is_some() || self.withdrawn.is_some() {
            return Err(Error::invalid(
                "index",
                "an index with a delta is saved by compacting it into a new build, not as it is",
            ));
        }
        let mut vec_bytes = Vec::with_capacity(self.dense.vectors.len() * 4);
        for x in self.dense.vectors.iter() {
            vec_bytes.extend_from_slice(&x.to_le_bytes());
        }
        let window_bytes: Vec<u8> = self.dense.window_offsets().iter().flat_map(|w| w.to_le_bytes()).collect();
        let files = vec![
            (DOCUMENTS.to_string(), bincode::serialize(&self.documents)?),
            (CHUNKS.to_string(), bincode::serialize(&self.chunks)?),
            (DENSE_VECTORS.to_string(), vec_bytes),
            (DENSE_GRAPH.to_string(), bincode::serialize(&*self.dense)?),
            (DENSE_WINDOWS.to_string(), window_bytes),
            (BM25.to_string(), bincode::serialize(&*self.bm25)?),
            (SPLADE.to_string(), bincode::serialize(&*self.splade)?),
        ];
        let mut files = files;
        for (name, bytes) in attachments {
            if files.iter().any(|(n, _)| *n == name) || name == format::MANIFEST {
                return Err(Error::invalid("attachments", format!("{name:?} is a file of the index itself")));
            }
            files.push((name, bytes));
        }
        format::write_files(storage, files, self.manifest.clone())
    }

    /// Loads and verifies an index from `storage`.
    ///
    /// Each file is verified and decoded in its own task, largest first, so checksums and
    /// decoding of different files overlap on all cores. Local files are memory-mapped.
    pub fn load(storage: &dyn Storage) -> Result<Self> {
        use rayon::prelude::*;
        let manifest = format::read_manifest(storage)?;
        let loc = storage.location();
        Self::check_manifest(&manifest, &loc)?;
        let mut files: Vec<&format::FileEntry> = manifest.files.iter().filter(|f| Self::owns(&f.name)).collect();
        files.sort_by_key(|f| std::cmp::Reverse(f.bytes));
        let parts: Vec<DecodedFile> = files
            .par_iter()
            .with_max_len(1)
            .map(|f| Self::decode_file(&manifest, &loc, f, storage.read_blob(&f.name)?))
            .collect::<Result<_>>()?;
        Self::assemble(manifest, parts, &loc)
    }

    /// The files a loaded index reads in place from a local file when it can, instead of
    /// copying them into memory: the exact `f32` dense vectors ([`VectorRows`]) and the
    /// SPLADE postings ([`InvertedIndex`]). A download puts them on local disk.
    pub const IN_PLACE_FILES: [&'static str; 2] = [DENSE_VECTORS, SPLADE];

    /// Whether `name` is one of the index's own files (others are attachments, which
    /// [`Index::load`] leaves to their own readers).
    pub fn owns(name: &str) -> bool {
        OWN_FILES.contains(&name)
    }

    /// Refuses a manifest that does not list every file an index needs, before anything
    /// is read.
    pub fn check_manifest(manifest: &Manifest, location: &str) -> Result<()> {
        for name in OWN_FILES {
            let needed = name != DENSE_WINDOWS || manifest.version >= WINDOWS_SINCE;
            if needed && !manifest.files.iter().any(|f| f.name == name) {
                return Err(Error::IndexCorrupted {
                    file: format!("{location}/{}", format::MANIFEST),
                    expected: format!("an entry for {name}"),
                    found: "none".into(),
                });
            }
        }
        Ok(())
    }

    /// Verifies one file of `manifest` (size and SHA-256) and decodes it, so files can be
    /// decoded as they arrive; [`Index::assemble`] puts them together.
    pub fn decode_file(
        manifest: &Manifest,
        location: &str,
        f: &format::FileEntry,
        blob: crate::storage::Blob,
    ) -> Result<DecodedFile> {
        let loc = location;
        // The files a loaded index reads in place from a mapped local file.
        let postings_error = |name: &str, found: String| Error::IndexCorrupted {
            file: format!("{loc}/{name}"),
            expected: "postings of whole 4-byte values".into(),
            found,
        };
        match f.name.as_str() {
            DENSE_VECTORS => return Ok(DecodedFile(Part::Vectors(Self::decode_rows(loc, f, blob)?))),
            SPLADE if manifest.version > 1 => {
                let blob = Self::verify_in_place(loc, f, blob)?;
                let file: splade::SpladeInPlace = format::decode_bincode(loc, SPLADE, &blob)?;
                let inverted = file.inverted.in_place(&blob).map_err(|e| postings_error(SPLADE, e))?;
                // Decoding the term offsets read their pages: hand them back.
                blob.release(0..blob.len());
                return Ok(DecodedFile(Part::Splade(SpladeIndex { inverted })));
            }
            _ => {}
        }
        format::verify(loc, f, &blob)?;
        let bytes: Result<&[u8]> = Ok(&blob);
        Ok(DecodedFile(match f.name.as_str() {
            DOCUMENTS if manifest.version < 4 => Part::Documents(
                decode_file::<Vec<DocumentV3>>(loc, DOCUMENTS, bytes)?.into_iter().map(Into::into).collect(),
            ),
            DOCUMENTS if manifest.version < PAGES_SINCE => Part::Documents(
                decode_file::<Vec<DocumentV6>>(loc, DOCUMENTS, bytes)?.into_iter().map(Into::into).collect(),
            ),
            DOCUMENTS => Part::Documents(decode_file(loc, DOCUMENTS, bytes)?),
            CHUNKS if manifest.version < 3 => Part::ChunksV2(decode_file(loc, CHUNKS, bytes)?),
            CHUNKS => Part::Chunks(decode_file(loc, CHUNKS, bytes)?),
            DENSE_GRAPH => Part::Graph(decode_file(loc, DENSE_GRAPH, bytes)?),
            DENSE_WINDOWS => Part::Windows(decode_le(loc, DENSE_WINDOWS, "u32", &blob)?),
            BM25 if manifest.version == 1 => Part::Bm25(decode_file::<bm25::Bm25IndexV1>(loc, BM25, bytes)?.into()),
            BM25 if manifest.version < 5 => Part::Bm25(decode_file::<bm25::Bm25IndexV4>(loc, BM25, bytes)?.into()),
            BM25 => Part::Bm25(decode_file(loc, BM25, bytes)?),
            SPLADE if manifest.version == 1 => {
                Part::Splade(decode_file::<splade::SpladeIndexV1>(loc, SPLADE, bytes)?.into())
            }
            SPLADE => Part::Splade(decode_file(loc, SPLADE, bytes)?),
            _ => Part::Other,
        }))
    }

    /// Verifies a file that is read in place when it is a mapped local file (`dense.f32`,
    /// the postings of `splade.bin`): the checksum is taken 64 MiB at a time, each part's
    /// pages released after it ([`Blob::release`](crate::storage::Blob::release)), so
    /// verifying never makes the whole file resident; the blob is then ready to be read in
    /// place ([`crate::storage::map_in_place`]).
    fn verify_in_place(
        loc: &str,
        f: &format::FileEntry,
        blob: crate::storage::Blob,
    ) -> Result<Arc<crate::storage::Blob>> {
        const PART: usize = 64 << 20;
        if let crate::storage::Blob::Mapped(_) = blob {
            format::verify_with(loc, f, &blob, |hash| {
                for start in (0..blob.len()).step_by(PART) {
                    let end = (start + PART).min(blob.len());
                    hash(&blob[start..end]);
                    blob.release(start..end);
                }
            })?;
        } else {
            format::verify(loc, f, &blob)?;
        }
        Ok(crate::storage::map_in_place(blob))
    }

    /// Verifies `dense.f32` and reads it in place when it is a mapped local file
    /// ([`VectorRows`]), else decodes it into memory.
    fn decode_rows(loc: &str, f: &format::FileEntry, blob: crate::storage::Blob) -> Result<VectorRows> {
        let blob = Self::verify_in_place(loc, f, blob)?;
        VectorRows::of(&blob, 0..blob.len()).ok_or_else(|| Error::IndexCorrupted {
            file: format!("{loc}/{DENSE_VECTORS}"),
            expected: "a whole number of f32".into(),
            found: format!("{} bytes", blob.len()),
        })
    }

    /// Puts decoded files together into an index, checking that they agree.
    pub fn assemble(manifest: Manifest, parts: Vec<DecodedFile>, location: &str) -> Result<Self> {
        let loc = location;
        let missing = |name: &str| missing_entry(loc, name);
        let parts: Vec<Part> = parts.into_iter().map(|d| d.0).collect();
        let (mut documents, mut chunks, mut vectors, mut graph, mut bm25, mut splade) =
            (None, None, None, None, None, None);
        let mut windows = None;
        let mut old_chunks = None;
        for part in parts {
            match part {
                Part::Documents(d) => documents = Some(d),
                Part::Chunks(c) => chunks = Some(c),
                Part::ChunksV2(c) => old_chunks = Some(c),
                Part::Vectors(v) => vectors = Some(v),
                Part::Graph(g) => graph = Some(g),
                Part::Windows(w) => windows = Some(w),
                Part::Bm25(b) => bm25 = Some(b),
                Part::Splade(s) => splade = Some(s),
                Part::Other => {}
            }
        }
        let documents: Vec<Document> = documents.ok_or_else(|| missing(DOCUMENTS))?;
        let chunks: Vec<Chunk> = match (chunks, old_chunks) {
            (Some(c), _) => c,
            (None, Some(old)) => old.into_iter().map(|c| c.upgrade(&documents)).collect(),
            (None, None) => return Err(missing(CHUNKS)),
        };
        let bm25: Bm25Index = bm25.ok_or_else(|| missing(BM25))?;
        let mut dense: DenseIndex = graph.ok_or_else(|| missing(DENSE_GRAPH))?;
        let splade: SpladeIndex = splade.ok_or_else(|| missing(SPLADE))?;
        dense.vectors = vectors.ok_or_else(|| missing(DENSE_VECTORS))?;
        if let Some(windows) = windows {
            dense.set_windows(windows).map_err(|expected| Error::IndexCorrupted {
                file: format!("{loc}/{DENSE_WINDOWS}"),
                expected,
                found: "other offsets".into(),
            })?;
        }
        if dense.dim != manifest.dense_dim {
            return Err(Error::IndexCorrupted {
                file: format!("{loc}/{DENSE_GRAPH}"),
                expected: format!("dimension {}", manifest.dense_dim),
                found: dense.dim.to_string(),
            });
        }
        Index::from_parts(manifest, documents, chunks, dense, bm25, splade)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::MemStore;
    use crate::testutil::small_engine;

    /// A build records its resident estimate in the manifest, saved and loaded with it; the
    /// estimate holds at least every text, not the `f32` rows a loaded index maps, and each
    /// component adds to it.
    #[test]
    fn a_build_records_what_its_index_holds_in_memory() {
        let index = small_engine().index();
        let estimate = index.resident_bytes();
        assert_eq!(index.manifest.resident_bytes, estimate, "recorded at build");
        let texts: u64 = index.chunks.iter().map(|c| c.text.len() as u64).sum::<u64>()
            + index.documents.iter().flat_map(|d| &d.segments).map(|s| s.len() as u64).sum::<u64>();
        assert!(estimate > texts, "{estimate} <= {texts}");
        assert_eq!(index.dense.mapped_bytes(), 4 * index.dense.vectors.len() as u64);
        let mut dense_only = DenseIndex::build(index.dense.dim, index.dense.vectors.to_vec());
        dense_only.vectors = Vec::new().into();
        assert_eq!(index.dense.resident_bytes(), dense_only.resident_bytes(), "the f32 rows are not counted");
        assert!(index.bm25.resident_bytes() > 0 && index.splade.resident_bytes() > 0);
        assert!(index.splade.inverted.postings_bytes() > 0, "the SPLADE postings are not counted");
        let store = MemStore::new("mem://resident");
        index.save(&store).unwrap();
        assert_eq!(Index::load(&store).unwrap().manifest.resident_bytes, estimate, "saved with the index");
    }

    /// An index loaded from a local directory reads its `f32` rows and its SPLADE postings
    /// in place from `dense.f32` and `splade.bin` (mapped, not copied into the process's
    /// memory), and searches and scores exactly as the index it was saved from, to the
    /// bit; a corrupted file is still refused with the file named.
    #[test]
    fn a_loaded_index_reads_its_vectors_and_postings_in_place() {
        let index = small_engine().index();
        assert!(!index.dense.vectors.is_mapped(), "built in memory");
        let dir = tempfile::tempdir().unwrap();
        let local = crate::storage::LocalDir::new(dir.path());
        index.save(&local).unwrap();
        let loaded = Index::load(&local).unwrap();
        assert!(loaded.dense.vectors.is_mapped(), "{:?}", loaded.dense.vectors);
        assert!(loaded.splade.inverted.is_mapped(), "{:?}", loaded.splade.inverted);
        assert_eq!(loaded.dense.vectors, index.dense.vectors);
        assert_eq!(*loaded.splade, *index.splade);
        let same = |a: Vec<(u32, f32)>, b: Vec<(u32, f32)>| {
            assert!(!a.is_empty());
            assert!(a.iter().zip(&b).all(|(x, y)| x.0 == y.0 && x.1.to_bits() == y.1.to_bits()), "{a:?} != {b:?}");
        };
        let query = index.dense_vectors(2)[..index.dense.dim].to_vec();
        same(index.dense.search(&query, None, 5), loaded.dense.search(&query, None, 5));
        let splade = &index.splade.inverted;
        let ids: Vec<u32> = (0..splade.num_terms() as u32).filter(|&t| splade.df(t) > 0).step_by(7).take(4).collect();
        let sparse = crate::encode::SparseVector { weights: vec![0.5, 1.0, 0.25, 2.0][..ids.len()].to_vec(), ids };
        same(index.splade.search(&sparse, None, 5), loaded.splade.search(&sparse, None, 5));
        // The rows of a store without files are decoded into memory, with the same values.
        let mem = MemStore::new("mem://rows");
        index.save(&mem).unwrap();
        let held = Index::load(&mem).unwrap();
        assert!(!held.dense.vectors.is_mapped() && !held.splade.inverted.is_mapped());
        assert_eq!(held.dense.vectors, loaded.dense.vectors);
        assert_eq!(*held.splade, *loaded.splade);
        // One flipped byte in the mapped file: refused, naming it.
        let good = local.read(DENSE_VECTORS).unwrap();
        let mut bytes = good.clone();
        bytes[5] ^= 0x40;
        local.write(DENSE_VECTORS, &bytes).unwrap();
        let err = Index::load(&local).err().expect("a corrupted dense.f32 is refused").to_string();
        assert!(err.contains(DENSE_VECTORS) && err.contains("sha256"), "{err}");
        // The same for the postings.
        let mut bytes = local.read(SPLADE).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 0x01;
        local.write(SPLADE, &bytes).unwrap();
        local.write(DENSE_VECTORS, &good).unwrap();
        let err = Index::load(&local).err().expect("a corrupted splade.bin is refused").to_string();
        assert!(err.contains(SPLADE) && err.contains("sha256"), "{err}");
        // The index loaded before still reads its own rows and postings: a store's write
        // replaces a file (a new inode), it never writes into the one a map reads.
        assert_eq!(loaded.dense.vectors, index.dense.vectors);
        assert_eq!(*loaded.splade, *index.splade);
    }

    #[test]
    fn attachments_are_listed_and_checked_but_left_to_their_readers() {
        let index = small_engine().index();
        let store = MemStore::new("mem://attached");
        let manifest = index.save_with(&store, vec![("facts.bin".into(), b"facts of another crate".to_vec())]).unwrap();
        let entry = manifest.files.iter().find(|f| f.name == "facts.bin").expect("the attachment is in the manifest");
        assert_eq!(entry.bytes, 22);
        assert!(!Index::owns("facts.bin") && Index::owns(DOCUMENTS));
        // The index loads without reading it, and reads the same as before.
        let loaded = Index::load(&store).unwrap();
        assert_eq!((loaded.documents.len(), loaded.chunks.len()), (index.documents.len(), index.chunks.len()));
        assert_eq!(loaded.provenance(0).chunk_id(), index.chunk_id(0));
        // An attachment may not replace a file of the index.
        let err = index.save_with(&MemStore::new("mem://clash"), vec![(BM25.into(), Vec::new())]).unwrap_err();
        assert!(err.to_string().contains("bm25.bin"), "{err}");
    }

    /// Replaces file `name` of the index in `store`, and its size and checksum in the
    /// manifest (`None`: drops the file from the manifest), then applies `edit` to the
    /// manifest.
    fn rewrite(store: &MemStore, name: &str, bytes: Option<Vec<u8>>, edit: impl FnOnce(&mut serde_json::Value)) {
        let mut manifest: serde_json::Value = serde_json::from_slice(&store.read(format::MANIFEST).unwrap()).unwrap();
        let files = manifest["files"].as_array_mut().unwrap();
        match bytes {
            Some(bytes) => {
                for f in files.iter_mut().filter(|f| f["name"] == name) {
                    f["bytes"] = bytes.len().into();
                    f["sha256"] = format::sha256_hex(&bytes).into();
                }
                store.write(name, &bytes).unwrap();
            }
            None => files.retain(|f| f["name"] != name),
        }
        edit(&mut manifest);
        store.write(format::MANIFEST, &serde_json::to_vec(&manifest).unwrap()).unwrap();
    }

    /// `index`'s documents as formats 4 to 6 wrote them (without pages).
    fn documents_v6(index: &Index) -> Vec<u8> {
        bincode::serialize(&index.documents.iter().map(DocumentV6::from).collect::<Vec<_>>()).unwrap()
    }

    #[test]
    fn a_chunk_read_in_windows_is_saved_loaded_and_scored_by_its_best_window() {
        let index = small_engine().index();
        let dim = index.dense.dim;
        let store = MemStore::new("mem://windows");
        index.save(&store).unwrap();
        // Give chunk 0 a second window: chunk 1's vector.
        let (v0, v1) = (index.dense_vectors(0).to_vec(), index.dense_vectors(1).to_vec());
        let rows: Vec<f32> = v0.iter().chain(&v1).chain(&index.dense.vectors[dim..]).copied().collect();
        let n = index.chunks.len() as u32;
        let offsets: Vec<u32> = std::iter::once(0).chain(2..=n + 1).collect();
        let f32s = |v: &[f32]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
        let u32s = |v: &[u32]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
        rewrite(&store, DENSE_VECTORS, Some(f32s(&rows)), |_| {});
        rewrite(&store, DENSE_WINDOWS, Some(u32s(&offsets)), |_| {});
        let loaded = Index::load(&store).unwrap();
        assert_eq!(loaded.dense_vectors(0).len(), 2 * dim);
        assert_eq!(loaded.dense_vectors(1), &v1[..]);
        // Chunk 0 now scores as well as chunk 1 for chunk 1's own vector, and its nearest
        // window to it is that window.
        assert!((loaded.dense_score(0, &v1) - 1.0).abs() < 1e-5);
        assert_eq!(loaded.dense_nearest(0, &v1), &v1[..]);
        assert!((loaded.dense_score(0, &v0) - 1.0).abs() < 1e-5);
        let found: Vec<u32> = loaded.dense_search(&v1, None, 2).into_iter().map(|h| h.0).collect();
        assert_eq!(found.len(), 2);
        assert!(found.contains(&0) && found.contains(&1), "{found:?}");
        // Saved again, it reads the same.
        let again = MemStore::new("mem://windows-again");
        loaded.save(&again).unwrap();
        assert_eq!(Index::load(&again).unwrap().dense.window_offsets(), offsets);

        // Offsets that leave a chunk without a vector are refused, naming the file.
        let mut bad = offsets.clone();
        bad[1] = 0;
        let store = MemStore::new("mem://bad-windows");
        index.save(&store).unwrap();
        rewrite(&store, DENSE_VECTORS, Some(f32s(&rows)), |_| {});
        rewrite(&store, DENSE_WINDOWS, Some(u32s(&bad)), |_| {});
        let err = Index::load(&store).err().expect("refused").to_string();
        assert!(err.contains("dense.windows") && err.contains("chunk 0"), "{err}");
    }

    #[test]
    fn a_format_5_index_without_windows_loads_with_one_vector_per_chunk() {
        let index = small_engine().index();
        let store = MemStore::new("mem://format-5");
        index.save(&store).unwrap();
        rewrite(&store, DOCUMENTS, Some(documents_v6(index)), |_| {});
        rewrite(&store, DENSE_WINDOWS, None, |m| {
            m["version"] = 5.into();
            m.as_object_mut().unwrap().remove("dense_window");
        });
        let loaded = Index::load(&store).unwrap();
        assert_eq!(loaded.manifest.dense_window, 0);
        assert_eq!(loaded.dense.vector_count(), loaded.chunks.len());
        let q = index.dense_vectors(3).to_vec();
        assert_eq!(loaded.dense_search(&q, None, 5), index.dense_search(&q, None, 5));
        // A format 6 manifest without the file is refused before anything is read.
        let store = MemStore::new("mem://format-6-without-windows");
        index.save(&store).unwrap();
        rewrite(&store, DENSE_WINDOWS, None, |_| {});
        let err = Index::load(&store).err().expect("refused").to_string();
        assert!(err.contains("dense.windows"), "{err}");
    }

    /// A format 6 index (documents without pages) loads, each document without pages; a
    /// document's pages are saved and loaded with it since format 7.
    #[test]
    fn a_format_6_index_loads_with_documents_without_pages() {
        let index = small_engine().index();
        let store = MemStore::new("mem://format-6");
        index.save(&store).unwrap();
        rewrite(&store, DOCUMENTS, Some(documents_v6(index)), |m| m["version"] = 6.into());
        let loaded = Index::load(&store).unwrap();
        assert_eq!(
            loaded.documents.iter().cloned().collect::<Vec<_>>(),
            index.documents.iter().cloned().collect::<Vec<_>>()
        );
        assert!(loaded.documents.iter().all(|d| d.pages.is_empty()));

        let mut documents: Vec<Document> = index.documents.iter().cloned().collect();
        documents[0].pages = (1..=documents[0].segments.len() as u32).collect();
        let bytes = bincode::serialize(&documents).unwrap();
        let store = MemStore::new("mem://format-7");
        index.save(&store).unwrap();
        rewrite(&store, DOCUMENTS, Some(bytes), |_| {});
        let loaded = Index::load(&store).unwrap();
        assert_eq!(loaded.documents[0].pages, documents[0].pages);
        assert_eq!(loaded.manifest.version, format::FORMAT_VERSION);
    }

    #[test]
    fn a_format_4_index_loads_as_stemmed_and_stems_its_queries() {
        let index = small_engine().index();
        assert_eq!(index.bm25.params.stemming, Stemming::None, "new indexes do not stem");
        let store = MemStore::new("mem://format-4");
        index.save(&store).unwrap();
        rewrite(&store, DOCUMENTS, Some(documents_v6(index)), |_| {});
        // Rewrite the BM25 file as format 4 wrote it (stemmed, parameters without the
        // stemming) and the manifest as format 4's, checksums included.
        let texts: Vec<&str> = (0..index.chunks.len()).map(|i| index.chunks[i].text.as_str()).collect();
        let stemmed = Bm25Index::build(texts, Bm25Params { stemming: Stemming::English, ..Default::default() });
        let (k1, b) = (stemmed.params.k1, stemmed.params.b);
        let bytes = stemmed.format_4_bytes();
        store.write(BM25, &bytes).unwrap();
        let mut manifest: serde_json::Value = serde_json::from_slice(&store.read(format::MANIFEST).unwrap()).unwrap();
        manifest["version"] = 4.into();
        manifest["bm25"] = serde_json::json!({"k1": k1, "b": b});
        for f in manifest["files"].as_array_mut().unwrap() {
            if f["name"] == BM25 {
                f["bytes"] = bytes.len().into();
                f["sha256"] = format::sha256_hex(&bytes).into();
            }
        }
        store.write(format::MANIFEST, &serde_json::to_vec(&manifest).unwrap()).unwrap();

        let loaded = Index::load(&store).unwrap();
        assert_eq!(loaded.manifest.bm25.stemming, Stemming::English);
        assert_eq!(*loaded.bm25, stemmed);
        // Queries are read with the index's analyzer: stemmed, "sale" finds what "sales"
        // finds; in the new, unstemmed index it finds nothing.
        let ids = |q: &str| loaded.bm25_search(q, None, 50).into_iter().map(|h| h.0).collect::<Vec<_>>();
        assert!(!ids("sales").is_empty());
        assert_eq!(ids("sale"), ids("sales"));
        assert!(index.bm25_search("sale", None, 50).is_empty());
        assert!(!index.bm25_search("sales", None, 50).is_empty());
    }
}
