//! What a router keeps of one index shard ([`ShardStore`]): its documents and where each
//! one's chunks start, nothing per chunk; and the file a shard carries it in ([`STORE_FILE`]).

use std::ops::Range;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::{
    format, missing_entry, newest_day, Bitset, Bm25Index, ChunkV2, DenseIndex, Index, Manifest, Part, Rows,
    SpladeIndex, CHUNKS, DOCUMENTS,
};
use crate::corpus::{ChunkSpan, Document};
use crate::error::{Error, Result};
use crate::storage::Storage;

/// A router's view of one index shard: the shard's documents (their metadata, for filters
/// and citations, without their text) and the chunk ordinals each one holds. It keeps
/// nothing per chunk: a chunk's document is found from the documents' chunk ranges, and a
/// chunk's text and place in its document (its segments, its characters) come from the
/// shard with the search's results ([`crate::shards::ShardRequest::Fetch`]). So a router
/// holds bytes per document, not per chunk.
#[derive(Clone)]
pub struct ShardStore {
    /// The shard's manifest.
    pub manifest: Manifest,
    /// The shard's documents, by ordinal (loaded: without their segments).
    pub documents: Rows<Document>,
    /// `ends[d]`: one past document `d`'s last chunk (its first is `ends[d - 1]`, or 0).
    ends: Vec<u32>,
    /// Withdrawn documents, by ordinal.
    withdrawn: Option<Arc<Bitset>>,
}

/// The file each index shard carries for its router (written by
/// [`crate::shards::save_shard`] beside the shard's own files): its [`ShardStore`], so that a
/// router reads neither the documents' text (`documents.bin`) nor the chunk records
/// (`chunks.bin`), and downloads bytes per document only.
pub const STORE_FILE: &str = "store.bin";

/// What [`STORE_FILE`] holds: the documents without their segments, and each one's chunk
/// end.
#[derive(Serialize, Deserialize)]
struct StoreFile {
    documents: Vec<Document>,
    ends: Vec<u32>,
}

/// A chunk record as `chunks.bin` holds it (formats 3 on), its text borrowed from the file
/// and dropped: only `doc` is kept.
#[derive(Deserialize)]
struct ChunkRecord<'a> {
    doc: u32,
    #[serde(rename = "span")]
    _span: ChunkSpan,
    #[serde(borrow, rename = "text")]
    _text: &'a str,
}

impl ShardStore {
    /// The files [`ShardStore::load`] reads of a shard without a [`STORE_FILE`]: documents
    /// and chunks.
    pub const FILES: [&'static str; 2] = [DOCUMENTS, CHUNKS];

    /// The bytes of [`STORE_FILE`] for the index shard `index`: its documents without their
    /// segments and where each one's chunks end.
    pub fn file_of(index: &Index) -> Result<Vec<u8>> {
        let store = Self::of(index);
        let documents = store.documents.iter().map(|d| Document { segments: Vec::new(), ..d.clone() }).collect();
        Ok(bincode::serialize(&StoreFile { documents, ends: store.ends })?)
    }

    /// Whether [`ShardStore::load`] reads file `name` of the shard whose manifest is
    /// `manifest`: [`STORE_FILE`] alone when the shard has one in the current format, else
    /// [`ShardStore::FILES`].
    pub fn reads(manifest: &Manifest, name: &str) -> bool {
        if Self::has_file(manifest) {
            name == STORE_FILE
        } else {
            Self::FILES.contains(&name)
        }
    }

    /// Whether the shard whose manifest is `manifest` carries a [`STORE_FILE`] this build
    /// reads (one written in another format is not read: its documents' layout may differ).
    fn has_file(manifest: &Manifest) -> bool {
        manifest.version == format::FORMAT_VERSION && manifest.files.iter().any(|f| f.name == STORE_FILE)
    }

    /// The store of `index` (an index shard loaded whole, in this process): its documents
    /// shared, not copied.
    pub fn of(index: &Index) -> Self {
        let mut ends = Vec::with_capacity(index.documents.len());
        let mut end = 0;
        for d in 0..index.documents.len() as u32 {
            let r = index.chunks_of(d);
            // A document without chunks ends where the one before it does.
            end = if r.is_empty() { end } else { r.end };
            ends.push(end);
        }
        ShardStore {
            manifest: index.manifest.clone(),
            documents: index.documents.clone(),
            ends,
            withdrawn: index.withdrawn.clone(),
        }
    }

    /// Loads the store of the index in `storage`, verified as [`Index::load`] verifies its
    /// files: its [`STORE_FILE`] when it has one ([`ShardStore::reads`]), else
    /// [`ShardStore::FILES`], whose documents are kept without their segments and whose
    /// chunk records are read for their documents only (their text is never copied). The
    /// postings and vector files are neither read nor needed, and the BM25 statistics a
    /// router reads come from the root manifest.
    pub fn load(storage: &dyn Storage) -> Result<Self> {
        let manifest = format::read_manifest(storage)?;
        let loc = storage.location();
        Index::check_manifest(&manifest, &loc)?;
        let entry =
            |name: &str| manifest.files.iter().find(|f| f.name == name).ok_or_else(|| missing_entry(&loc, name));
        if Self::has_file(&manifest) {
            let blob = storage.read_blob(STORE_FILE)?;
            format::verify(&loc, entry(STORE_FILE)?, &blob)?;
            let StoreFile { documents, ends } = format::decode_bincode(&loc, STORE_FILE, &blob)?;
            let ordered = ends.len() == documents.len() && ends.windows(2).all(|w| w[0] <= w[1]);
            let chunks = ends.last().copied().unwrap_or(0) as usize;
            if !ordered || chunks != manifest.chunks {
                return Err(Error::IndexCorrupted {
                    file: format!("{loc}/{STORE_FILE}"),
                    expected: format!("{} chunk ends in order, the last {}", documents.len(), manifest.chunks),
                    found: format!("{} ends, the last {chunks}", ends.len()),
                });
            }
            return Ok(ShardStore { manifest, documents: Rows::new(documents), ends, withdrawn: None });
        }
        let documents = match Index::decode_file(&manifest, &loc, entry(DOCUMENTS)?, storage.read_blob(DOCUMENTS)?)?.0 {
            Part::Documents(d) => d,
            _ => unreachable!("documents.bin decodes to documents"),
        };
        let f = entry(CHUNKS)?;
        let blob = storage.read_blob(CHUNKS)?;
        format::verify(&loc, f, &blob)?;
        let docs: Vec<u32> = if manifest.version < 3 {
            let old: Vec<ChunkV2> = format::decode_bincode(&loc, CHUNKS, &blob)?;
            old.into_iter().map(|c| c.doc).collect()
        } else {
            let records: Vec<ChunkRecord<'_>> = format::decode_bincode(&loc, CHUNKS, &blob)?;
            records.into_iter().map(|c| c.doc).collect()
        };
        drop(blob);
        let ends = Self::ends_of(&docs, documents.len()).map_err(|found| Error::IndexCorrupted {
            file: format!("{loc}/{CHUNKS}"),
            expected: format!("chunks in document order, of documents < {}", documents.len()),
            found,
        })?;
        // A router reads the text of the results only, in its search's fetch phase.
        let documents: Vec<Document> = documents.into_iter().map(|d| Document { segments: Vec::new(), ..d }).collect();
        Ok(ShardStore { manifest, documents: Rows::new(documents), ends, withdrawn: None })
    }

    /// Each document's chunk end from the chunks' documents in order (`docs[c]`: chunk `c`'s
    /// document), or what breaks the order.
    fn ends_of(docs: &[u32], documents: usize) -> std::result::Result<Vec<u32>, String> {
        let mut ends = vec![0u32; documents];
        let mut last = 0usize;
        for (c, &d) in docs.iter().enumerate() {
            let d = d as usize;
            if d >= documents || d < last {
                return Err(format!("chunk {c} of document {d} after one of document {last}"));
            }
            // Documents without chunks between the last one and this end where it did.
            let end = ends[last];
            ends[last + 1..=d].iter_mut().for_each(|e| *e = end);
            ends[d] = c as u32 + 1;
            last = d;
        }
        let end = ends.get(last).copied().unwrap_or(0);
        ends.iter_mut().skip(last + 1).for_each(|e| *e = end);
        Ok(ends)
    }

    /// An index with this store's manifest and nothing in it: what a router's engine is
    /// made of, whose models and settings are checked against the manifest and which
    /// searches nothing itself (the router reads its shards through [`ShardStore`]s).
    pub fn router_index(&self) -> Index {
        let (dim, params) = (self.manifest.dense_dim, self.manifest.bm25);
        let (dense, bm25) = (DenseIndex::build(dim, Vec::new()), Bm25Index::build(std::iter::empty(), params));
        Index::from_parts(self.manifest.clone(), Vec::new(), Vec::new(), dense, bm25, SpladeIndex::default())
            .expect("an empty index's parts agree")
    }

    /// How many chunks the shard holds.
    pub fn chunk_count(&self) -> usize {
        self.ends.last().copied().unwrap_or(0) as usize
    }

    /// The chunks of document `doc`.
    pub fn chunks_of(&self, doc: u32) -> Range<u32> {
        let d = doc as usize;
        let start = if d == 0 { 0 } else { self.ends[d - 1] };
        start..self.ends[d]
    }

    /// The document of chunk `chunk` (< [`ShardStore::chunk_count`]): the first whose
    /// chunks end after it, by binary search (`O(log documents)`).
    pub fn doc_of(&self, chunk: u32) -> u32 {
        self.ends.partition_point(|&e| e <= chunk) as u32
    }

    /// Whether document `doc` is withdrawn.
    pub fn is_withdrawn(&self, doc: u32) -> bool {
        self.withdrawn.as_ref().is_some_and(|w| w.contains(doc as usize))
    }

    /// The newest document's publication day (days since the Unix epoch), if any has a date.
    pub fn newest_day(&self) -> Option<i64> {
        newest_day(self.documents.iter())
    }

    /// The bytes the store holds in memory, estimated as [`Index::resident_bytes`] counts
    /// documents, plus 4 a document for where its chunks end:
    ///
    /// ```text
    /// bytes = Σ_documents (document_bytes + 4)
    /// ```
    pub fn resident_bytes(&self) -> u64 {
        self.documents.iter().map(|d| super::document_bytes(d) + 4).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::MemStore;
    use crate::testutil::small_engine;

    /// A router's store loads from the documents and chunks alone, verified, and knows
    /// every document's metadata and chunks, with no text and nothing per chunk.
    #[test]
    fn a_store_loads_from_its_two_files_alone() {
        let index = small_engine().index();
        // (A memory store hands its files over as they load: each load gets its own.)
        let whole = || {
            let store = MemStore::new("mem://whole");
            index.save(&store).unwrap();
            store
        };
        let two = |damaged: Option<&str>| {
            let (from, store) = (whole(), MemStore::new("mem://two"));
            for name in ShardStore::FILES.iter().chain([&format::MANIFEST]) {
                let mut bytes = from.read(name).unwrap();
                if damaged == Some(*name) {
                    bytes[10] ^= 1;
                }
                store.insert(*name, bytes);
            }
            store
        };
        assert!(Index::load(&two(None)).is_err(), "a whole index needs its postings and vectors");
        let store = ShardStore::load(&two(None)).unwrap();
        let whole = Index::load(&whole()).unwrap();
        assert_eq!(store.documents.len(), whole.documents.len());
        assert_eq!(store.chunk_count(), whole.chunks.len());
        for d in 0..whole.documents.len() as u32 {
            assert_eq!(store.chunks_of(d), whole.chunks_of(d), "document {d}");
        }
        for c in 0..whole.chunks.len() as u32 {
            assert_eq!(store.doc_of(c), whole.chunks[c as usize].doc, "chunk {c}");
        }
        for (s, w) in store.documents.iter().zip(whole.documents.iter()) {
            assert!(s.segments.is_empty() && !w.segments.is_empty());
            assert_eq!(&Document { segments: w.segments.clone(), ..s.clone() }, w, "everything but the text");
        }
        let of = ShardStore::of(&whole);
        assert_eq!((of.chunk_count(), of.ends.clone()), (store.chunk_count(), store.ends.clone()));
        // Bytes per document, none per chunk: less than the chunks' records alone.
        assert!(store.resident_bytes() < 48 * whole.chunks.len() as u64 + whole.resident_bytes() / 4);
        assert_eq!(
            store.resident_bytes(),
            store.documents.iter().map(|d| crate::index::document_bytes(d) + 4).sum::<u64>()
        );
        // Each of the two is verified as a whole load verifies it.
        for name in ShardStore::FILES {
            let err = ShardStore::load(&two(Some(name))).err().expect("a damaged file is refused").to_string();
            assert!(err.contains(name), "{name}: {err}");
        }
    }

    /// A shard with its store file gives its router the same store from that file alone as
    /// from its documents and chunks; a damaged or inconsistent one is refused, naming it.
    #[test]
    fn a_store_file_alone_gives_the_router_its_store() {
        let index = small_engine().index();
        let file = ShardStore::file_of(index).unwrap();
        let whole = MemStore::new("mem://whole");
        let manifest = index.save_with(&whole, vec![(STORE_FILE.into(), file.clone())]).unwrap();
        assert!(!Index::owns(STORE_FILE) && Index::load(&whole).is_ok(), "an attachment the index leaves alone");
        assert!(ShardStore::reads(&manifest, STORE_FILE) && !ShardStore::reads(&manifest, CHUNKS));
        let only = |bytes: Vec<u8>| {
            let store = MemStore::new("mem://router");
            store.insert(format::MANIFEST, whole.read(format::MANIFEST).unwrap());
            store.insert(STORE_FILE, bytes);
            store
        };
        let (from_file, from_records) = (ShardStore::load(&only(file.clone())).unwrap(), ShardStore::of(index));
        assert_eq!(from_file.ends, from_records.ends);
        assert_eq!(from_file.chunk_count(), index.chunks.len());
        for (f, d) in from_file.documents.iter().zip(index.documents.iter()) {
            assert_eq!(f, &Document { segments: Vec::new(), ..d.clone() });
        }
        let mut damaged = file.clone();
        damaged[12] ^= 1;
        let err = ShardStore::load(&only(damaged)).err().expect("a damaged store file is refused").to_string();
        assert!(err.contains(STORE_FILE), "{err}");
        // A store file that does not add up to the manifest's chunks, listed with its own
        // checksum, is refused too.
        let mut short = from_records.clone();
        short.ends.pop();
        let documents = short.documents.iter().map(|d| Document { segments: Vec::new(), ..d.clone() }).collect();
        let bytes = bincode::serialize(&StoreFile { documents, ends: short.ends }).unwrap();
        let inconsistent = MemStore::new("mem://inconsistent");
        index.save_with(&inconsistent, vec![(STORE_FILE.into(), bytes)]).unwrap();
        let err = ShardStore::load(&inconsistent).err().expect("an inconsistent store file is refused").to_string();
        assert!(err.contains(STORE_FILE) && err.contains("chunk ends"), "{err}");
    }

    /// Documents without chunks, first, between and last, keep every chunk's document and
    /// every document's range; chunks out of document order are refused.
    #[test]
    fn documents_without_chunks_keep_the_ranges_and_disorder_is_refused() {
        let ends = ShardStore::ends_of(&[1, 1, 3, 3, 3, 4], 6).unwrap();
        assert_eq!(ends, vec![0, 2, 2, 5, 6, 6]);
        let store = ShardStore {
            manifest: small_engine().index().manifest.clone(),
            documents: Rows::new(Vec::new()),
            ends,
            withdrawn: None,
        };
        let ranges: Vec<Range<u32>> = (0..6).map(|d| store.chunks_of(d)).collect();
        assert_eq!(ranges, vec![0..0, 0..2, 2..2, 2..5, 5..6, 6..6]);
        let docs: Vec<u32> = (0..6).map(|c| store.doc_of(c)).collect();
        assert_eq!(docs, vec![1, 1, 3, 3, 3, 4]);
        assert_eq!(store.chunk_count(), 6);
        assert_eq!(ShardStore::ends_of(&[], 2).unwrap(), vec![0, 0]);
        let err = ShardStore::ends_of(&[0, 2, 1], 3).unwrap_err();
        assert!(err.contains("chunk 2 of document 1 after one of document 2"), "{err}");
        assert!(ShardStore::ends_of(&[0, 3], 3).is_err(), "a document past the table");
    }
}
