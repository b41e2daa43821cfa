//! The built version a [`LiveIndex`](crate::LiveIndex) serves its writes beside: one index,
//! or the shards of one ([`sextant_core::shards`]), and what each serves once the writes
//! since are applied ([`Served`]).
//!
//! A sharded index takes writes as one index does. A document goes to its shard
//! ([`shard_of`] its id, the shard a build would give it), each shard serves its built part
//! with its own documents of the delta beside it, and the served shards answer as one index
//! holding the same writes would:
//! - **BM25 as one index weighs a delta.** Every shard's delta is weighed with the whole
//!   index's statistics, built chunks and every shard's delta together
//!   ([`Index::with_sharded_delta`]), so a written chunk scores what it would in one index;
//! - **ties as one index breaks them.** Written documents are numbered after every built
//!   one, in id order across the shards (one index appends its delta in id order), so the
//!   router's global numbering ([`LiveShards::order`]) is one index's.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, OnceLock};

use sextant_core::build::{
    build, build_shards, index_vectors, BuildOptions, EncodedChunk, EncodedDocument, InProcess, Previous,
};
use sextant_core::corpus::{Document, MetadataSchema};
use sextant_core::encode::{DenseEncoder, SparseEncoder};
use sextant_core::index::{Index, LexicalStats, Manifest};
use sextant_core::shards::{load_sharded, shard_of, Shards};
use sextant_core::storage::{LocalDir, Storage};

use crate::error::{Error, Result};

/// An index as a live index serves it, after each write: one index, or the shards of one.
#[derive(Clone)]
pub enum Served {
    /// One index: the built part and the delta beside it.
    Index(Arc<Index>),
    /// The shards of one index, each with its share of the delta.
    Shards(LiveShards),
}

/// A sharded index as a live index serves it: what a router
/// ([`ShardSet::new`](sextant_core::shards::ShardSet::new)) searches as one index.
#[derive(Clone)]
pub struct LiveShards {
    /// Each shard, its documents of the delta beside its built part.
    pub indexes: Vec<Arc<Index>>,
    /// Each shard's documents' ordinal among the whole index's (built documents as built;
    /// written ones after them, in id order).
    pub order: Vec<Vec<u32>>,
    /// BM25's statistics over every chunk of every shard, the delta's included.
    pub stats: LexicalStats,
}

impl Served {
    /// The chunks in the delta, over every shard.
    pub fn delta_chunks(&self) -> usize {
        match self {
            Served::Index(index) => index.delta_chunks(),
            Served::Shards(s) => s.indexes.iter().map(|i| i.delta_chunks()).sum(),
        }
    }

    /// The index served, when it is one index (not sharded).
    pub fn single(&self) -> Option<&Arc<Index>> {
        match self {
            Served::Index(index) => Some(index),
            Served::Shards(_) => None,
        }
    }
}

impl From<Arc<Index>> for Served {
    fn from(index: Arc<Index>) -> Self {
        Served::Index(index)
    }
}

impl From<Shards> for Served {
    fn from(shards: Shards) -> Self {
        Served::Shards(LiveShards {
            indexes: shards.indexes.into_iter().map(Arc::new).collect(),
            order: shards.order,
            stats: shards.stats,
        })
    }
}

/// Where a built document is: its shard (0 for one index) and its ordinal there.
pub(crate) type Place = (u32, u32);

/// The writes since the built version: each document put, by id, with the sequence of the
/// put; and each id deleted.
pub(crate) struct Writes<'a> {
    pub delta: &'a BTreeMap<String, (u64, EncodedDocument)>,
    pub deleted: &'a BTreeMap<String, u64>,
    /// The built documents by id.
    pub built: &'a BTreeMap<String, Place>,
}

impl Writes<'_> {
    /// The built documents the writes withdraw: those put again or deleted. Only the ids
    /// written since are looked at, so this costs the size of the delta.
    fn withdrawn(&self) -> impl Iterator<Item = Place> + '_ {
        self.delta.keys().chain(self.deleted.keys()).filter_map(|id| self.built.get(id).copied())
    }
}

/// The built version, loaded (see the module documentation), with the average length of
/// its built chunks' text over every shard, worked out when a sharded delta first needs it.
#[derive(Clone)]
pub(crate) struct Base(pub(crate) Served, Arc<OnceLock<f32>>);

impl Base {
    /// The built version `served`.
    pub(crate) fn new(served: Served) -> Base {
        Base(served, Arc::default())
    }

    /// The version saved in `dir`: a sharded index when a root manifest is there, else one
    /// index.
    pub(crate) fn load(dir: &Path) -> Result<Base> {
        let storage = LocalDir::new(dir);
        Ok(match load_sharded(&storage)? {
            Some((_, shards)) => Base::new(shards.into()),
            None => Base::new(Served::Index(Arc::new(Index::load(&storage)?))),
        })
    }

    /// Every built document by id, with its place.
    pub(crate) fn ids(&self) -> BTreeMap<String, Place> {
        let mut ids = BTreeMap::new();
        for (s, index) in self.indexes().iter().enumerate() {
            for (d, doc) in index.documents.iter().enumerate() {
                ids.insert(doc.document_id.clone(), (s as u32, d as u32));
            }
        }
        ids
    }

    /// The built indexes: the one index, or every shard.
    fn indexes(&self) -> &[Arc<Index>] {
        match &self.0 {
            Served::Index(index) => std::slice::from_ref(index),
            Served::Shards(s) => &s.indexes,
        }
    }

    /// The built documents and chunks, over every shard.
    pub(crate) fn sizes(&self) -> (usize, usize) {
        let indexes = self.indexes();
        (indexes.iter().map(|i| i.documents.len()).sum(), indexes.iter().map(|i| i.chunks.len()).sum())
    }

    /// The built document at `place`.
    pub(crate) fn document(&self, (s, d): Place) -> &Document {
        &self.indexes()[s as usize].documents[d as usize]
    }

    /// The built document at `place`'s chunk count.
    pub(crate) fn chunk_count(&self, (s, d): Place) -> usize {
        self.indexes()[s as usize].chunks_of(d).len()
    }

    /// The metadata fields of every built document, with their types.
    pub(crate) fn schema(&self) -> MetadataSchema {
        match &self.0 {
            Served::Index(index) => index.metadata_schema().clone(),
            Served::Shards(s) => {
                MetadataSchema::of(s.indexes.iter().flat_map(|i| i.documents.iter()).map(|d| &d.metadata))
            }
        }
    }

    /// The manifest the build options are read from (a sharded index's first shard's).
    pub(crate) fn manifest(&self) -> &Manifest {
        &self.indexes()[0].manifest
    }

    /// The built documents still served (neither put again nor deleted), in the built
    /// order (a sharded index's: the one index's built from the same documents).
    pub(crate) fn kept_documents(&self, writes: &Writes) -> Vec<Document> {
        let kept =
            |d: &&Document| !writes.delta.contains_key(&d.document_id) && !writes.deleted.contains_key(&d.document_id);
        match &self.0 {
            Served::Index(index) => index.documents.iter().filter(kept).cloned().collect(),
            Served::Shards(s) => {
                let mut ordered: Vec<Option<&Document>> = vec![None; s.order.iter().map(Vec::len).sum()];
                for (index, order) in s.indexes.iter().zip(&s.order) {
                    for (doc, &g) in index.documents.iter().zip(order) {
                        ordered[g as usize] = Some(doc);
                    }
                }
                ordered.into_iter().flatten().filter(kept).cloned().collect()
            }
        }
    }

    /// The built version's vectors, read back from its indexes (for a version saved
    /// without its vector cache).
    pub(crate) fn vectors(
        &self,
        options: &BuildOptions,
        encoders: (&DenseEncoder, &SparseEncoder),
    ) -> Result<Vec<EncodedChunk>> {
        let tokenizers = (encoders.0.tokenizer(), encoders.1.tokenizer());
        let mut all = Vec::new();
        for index in self.indexes() {
            all.extend(index_vectors(index, options, tokenizers)?);
        }
        Ok(all)
    }

    /// Files of other crates saved with a single built version (the financial facts),
    /// which its next version keeps. A sharded index keeps none.
    pub(crate) fn attachments(&self, storage: &dyn Storage) -> Result<Vec<(String, Vec<u8>)>> {
        let Served::Index(index) = &self.0 else {
            return Ok(Vec::new());
        };
        Ok(index
            .manifest
            .files
            .iter()
            .filter(|f| !Index::owns(&f.name))
            .map(|f| storage.read(&f.name).map(|b| (f.name.clone(), b.to_vec())))
            .collect::<std::result::Result<_, _>>()?)
    }

    /// Builds `documents` as this version is built (one index, or as many shards), every
    /// vector `previous` holds reused, and saves the build in `storage`; returns the chunks
    /// it encoded.
    pub(crate) fn rebuild(
        &self,
        documents: Vec<Document>,
        attachments: Vec<(String, Vec<u8>)>,
        options: &BuildOptions,
        encoders: (&DenseEncoder, &SparseEncoder),
        previous: &Previous,
        storage: &dyn Storage,
    ) -> Result<usize> {
        let runner = InProcess { dense: encoders.0, sparse: encoders.1 };
        let tokenizers = (encoders.0.tokenizer(), encoders.1.tokenizer());
        let nothing = || Error::Format("the compaction built nothing".into());
        match &self.0 {
            Served::Index(_) => {
                let built = build(documents, attachments, options, tokenizers, previous, &runner, &|_, _, _| {})?;
                if built.index.is_none() {
                    return Err(nothing());
                }
                let encoded = built.report.chunks_encoded;
                built.save(storage, &Previous::none())?;
                Ok(encoded)
            }
            Served::Shards(s) => {
                let k = s.indexes.len();
                let built = build_shards(documents, options, tokenizers, previous, &runner, k, &|_, _, _| {})?;
                if built.shards.is_none() {
                    return Err(nothing());
                }
                let encoded = built.report.chunks_encoded;
                built.save(storage, &Previous::none())?;
                Ok(encoded)
            }
        }
    }

    /// What to serve: the built version with `writes` applied.
    pub(crate) fn serve(&self, writes: &Writes) -> Result<Served> {
        if writes.delta.is_empty() && writes.deleted.is_empty() {
            return Ok(self.0.clone());
        }
        match &self.0 {
            Served::Index(index) => {
                let withdrawn: Vec<u32> = writes.withdrawn().map(|(_, d)| d).collect();
                let appended = EncodedDocument::appended(writes.delta.values().map(|(_, d)| d));
                Ok(Served::Index(Arc::new(index.with_delta(appended, &withdrawn)?)))
            }
            Served::Shards(built) => {
                let avgdl = *self.1.get_or_init(|| built_avgdl(built));
                serve_shards(built, writes, avgdl).map(Served::Shards)
            }
        }
    }
}

/// The average length, in BM25's analysed terms, of the built chunks' text over every
/// shard, at least 1: the `avgdl` one index weighs its delta with
/// ([`Index::with_delta`]), which reads each chunk's text (not BM25's own input of the
/// build, whose average the root's statistics hold).
///
/// ```text
/// avgdl = max(1, Σ_shards Σ_chunks |terms(text)| / Σ_shards chunks)
/// ```
fn built_avgdl(built: &LiveShards) -> f32 {
    let texts = built.indexes.iter().flat_map(|i| i.chunks.base().iter().map(|c| c.text.as_str()));
    built.indexes[0].bm25.average_length(texts)
}

/// Each shard of `built` with its documents of the delta beside it (see the module
/// documentation):
///
/// ```text
/// stats  = built.stats + LexicalStats(every delta chunk)        (N, total length, df)
/// avgdl  = the built chunks' text's average length             (built_avgdl)
/// order  = a built document's own; the i-th written id (in id order) → D_built + i
/// ```
fn serve_shards(built: &LiveShards, writes: &Writes, avgdl: f32) -> Result<LiveShards> {
    let k = built.indexes.len();
    let params = built.indexes[0].bm25.params;
    let delta_texts = writes.delta.values().flat_map(|(_, d)| d.chunks.iter().map(|c| c.text.as_str()));
    let mut stats = built.stats.clone();
    stats.add(&LexicalStats::of(delta_texts, params));
    let built_documents: usize = built.order.iter().map(Vec::len).sum();
    let mut withdrawn = vec![Vec::new(); k];
    for (s, d) in writes.withdrawn() {
        withdrawn[s as usize].push(d);
    }
    let mut mine: Vec<Vec<&EncodedDocument>> = vec![Vec::new(); k];
    let mut order = built.order.clone();
    for (i, (id, (_, doc))) in writes.delta.iter().enumerate() {
        let s = shard_of(id, k);
        mine[s].push(doc);
        order[s].push((built_documents + i) as u32);
    }
    let indexes = built
        .indexes
        .iter()
        .zip(mine.into_iter().zip(withdrawn))
        .map(|(index, (docs, gone))| {
            if docs.is_empty() && gone.is_empty() {
                return Ok(index.clone());
            }
            let appended = EncodedDocument::appended(docs);
            Ok(Arc::new(index.with_sharded_delta(appended, &gone, &stats, avgdl)?))
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(LiveShards { indexes, order, stats })
}

#[cfg(test)]
mod tests {
    use sextant_core::pipeline::{ChunkSource, Engine, Path as SearchPath, SearchRequest};
    use sextant_core::shards::ShardSet;
    use sextant_core::testutil::test_document;

    use super::*;
    use crate::testing::{encoders, options};
    use crate::{LiveIndex, LiveOptions};

    /// Twelve short filings: what both indexes are built from.
    fn documents() -> Vec<Document> {
        [
            ("ko-2024", "KO", "Concentrate sales rose as unit case volume grew in Latin America."),
            ("ko-2023", "KO", "Price and product mix drove net revenue growth despite currency headwinds."),
            ("aapl-fx", "AAPL", "Foreign currency exchange rates weighed on gross margin in the quarter."),
            ("aapl-svc", "AAPL", "Services revenue reached a record on App Store and advertising growth."),
            ("msft-azure", "MSFT", "Azure and other cloud services revenue grew 29 percent."),
            ("msft-xbox", "MSFT", "Gaming revenue increased on Xbox content and services growth."),
            ("nvda-dc", "NVDA", "Data center revenue rose on demand for accelerated computing platforms."),
            ("nvda-gaming", "NVDA", "Gaming revenue fell as channel inventory normalised."),
            ("jpm-nii", "JPM", "Net interest income grew on higher rates and deposit margins."),
            ("jpm-credit", "JPM", "Credit costs rose with net charge-offs in card services."),
            ("xom-upstream", "XOM", "Upstream earnings declined on lower crude realisations."),
            ("xom-chem", "XOM", "Chemical margins weakened as new industry capacity came online."),
        ]
        .into_iter()
        .map(|(id, ticker, text)| test_document(id, ticker, "2024-02-01", &[text]))
        .collect()
    }

    const QUERIES: [&str; 6] = [
        "cloud services revenue growth",
        "gaming revenue Xbox content",
        "currency headwinds on margin",
        "interest income and deposit rates",
        "data center accelerated computing demand",
        "turbine orders backlog",
    ];

    /// The documents built as one index in `root/one` and as three shards in
    /// `root/three` (from the first build's vectors), each opened for writes.
    fn open_both(root: &Path) -> (LiveIndex, LiveIndex) {
        let (dense, sparse) = encoders();
        let runner = InProcess { dense: &dense, sparse: &sparse };
        let tokenizers = (dense.tokenizer(), sparse.tokenizer());
        let one = LocalDir::new(root.join("one"));
        let built = build(documents(), Vec::new(), &options(), tokenizers, &Previous::none(), &runner, &|_, _, _| {});
        built.unwrap().save(&one, &Previous::none()).unwrap();
        let three = LocalDir::new(root.join("three"));
        let sharded =
            build_shards(documents(), &options(), tokenizers, &Previous::read(&one), &runner, 3, &|_, _, _| {})
                .unwrap();
        assert_eq!(sharded.report.chunks_encoded, 0);
        sharded.save(&three, &Previous::none()).unwrap();
        (reopen(root, "one"), reopen(root, "three"))
    }

    /// The writable index over `root/name`, its writes in `root/name-live`.
    fn reopen(root: &Path, name: &str) -> LiveIndex {
        let base = Base::load(&root.join(name)).unwrap();
        let live = root.join(format!("{name}-live"));
        let options = LiveOptions { compact_at_chunks: 0 };
        LiveIndex::open(&live, base.0, &root.join(name), encoders(), options, Box::new(|_| {})).unwrap()
    }

    /// A hit as (document id, score bits, each path's score bits).
    type Seen = (String, u32, Vec<(SearchPath, u32)>);

    /// Each hit of `q` as [`Seen`], searched
    /// exactly (300 candidates a path is above the HNSW beam) through one engine or
    /// through a router over the shards.
    fn answers(served: &Served, q: &str) -> Vec<Seen> {
        let (dense, sparse) = encoders();
        let engine = |i: &Arc<Index>| Engine::new(i.clone(), dense.clone(), sparse.clone(), None);
        let mut req = SearchRequest::new(q, 10);
        req.per_path_k = 300;
        let seen = |hits: &[sextant_core::pipeline::Hit], source: &dyn ChunkSource| {
            hits.iter()
                .map(|h| {
                    let paths = h.diagnostics.paths.iter().map(|(p, r)| (*p, r.score.to_bits())).collect();
                    (source.document(h.chunk).document_id.clone(), h.score.to_bits(), paths)
                })
                .collect()
        };
        match served {
            Served::Index(index) => seen(&engine(index).search(&req).unwrap().hits, &**index),
            Served::Shards(s) => {
                let set = ShardSet::new(s.indexes.iter().map(engine).collect(), Some(s.order.clone()), s.stats.clone())
                    .unwrap();
                let out = set.search(&req).unwrap();
                assert_eq!((out.answered, out.of), (3, 3));
                seen(&out.outcome.hits, &set)
            }
        }
    }

    fn assert_same(one: &LiveIndex, three: &LiveIndex, when: &str) {
        assert!(matches!(three.current(), Served::Shards(_)), "{when}: the sharded index stays sharded");
        for q in QUERIES {
            let (a, b) = (answers(&one.current(), q), answers(&three.current(), q));
            assert!(!a.is_empty());
            assert_eq!(a, b, "{when}: {q:?}");
        }
        let ids =
            |l: &LiveIndex| l.list(None, 100).documents.into_iter().map(|d| d.document.document_id).collect::<Vec<_>>();
        assert_eq!(ids(one), ids(three), "{when}: the same documents");
        assert_eq!(one.delta_size(), three.delta_size(), "{when}: the same delta");
    }

    /// Writes to a sharded index answer as the same writes to one index: the documents
    /// put (new ones, and built ones replaced) and deleted, ranked and scored to the bit
    /// as one index ranks them (BM25 weighed with the whole index's statistics, ties
    /// broken in one index's order), after a restart and after a compaction into a new
    /// sharded version that encodes nothing.
    #[test]
    fn writes_to_a_sharded_index_answer_as_the_same_writes_to_one_index() {
        let root = tempfile::tempdir().unwrap();
        let (one, three) = open_both(root.path());
        assert_same(&one, &three, "as built");
        let writes = || {
            vec![
                test_document(
                    "ge-orders",
                    "GE",
                    "2024-04-23",
                    &["Turbine orders doubled and backlog reached a record."],
                ),
                test_document("msft-ai", "MSFT", "2024-07-30", &["Azure AI services drove cloud revenue growth."]),
                test_document(
                    "ko-2024",
                    "KO",
                    "2024-02-10",
                    &["Unit case volume fell; currency headwinds hit revenue."],
                ),
                test_document("amzn-aws", "AMZN", "2024-08-01", &["AWS cloud revenue grew on AI demand."]),
            ]
        };
        for live in [&one, &three] {
            let outcomes = live.put_many(writes()).unwrap();
            assert!(outcomes.iter().all(|o| o.is_ok()), "{outcomes:?}");
            assert_eq!(live.delete("jpm-credit").unwrap(), Some(5));
            assert_eq!(live.delete("amzn-aws").unwrap(), Some(6));
            live.put(test_document("xom-chem", "XOM", "2024-05-02", &["Chemical margins recovered on gaming demand."]))
                .unwrap();
        }
        assert_eq!(three.get("ko-2024").unwrap().layer, "delta");
        assert!(three.get("jpm-credit").is_none());
        assert_same(&one, &three, "after the writes");
        drop((one, three));

        let (one, three) = (reopen(root.path(), "one"), reopen(root.path(), "three"));
        assert_same(&one, &three, "after a restart");

        let (a, b) = (one.compact().unwrap().unwrap(), three.compact().unwrap().unwrap());
        assert_eq!((a.documents, a.chunks, a.chunks_encoded), (b.documents, b.chunks, b.chunks_encoded));
        assert_eq!(b.chunks_encoded, 0, "every vector reused");
        assert!(root.path().join("three-live/v000001/root.json").is_file(), "compacted as shards");
        assert_eq!(three.current().delta_chunks(), 0);
        assert_same(&one, &three, "after a compaction");
        for live in [&one, &three] {
            live.put(test_document("nvda-dc", "NVDA", "2024-05-22", &["Data center revenue tripled on AI demand."]))
                .unwrap();
        }
        assert_same(&one, &three, "after a write to the compacted version");
        drop((one, three));
        let (one, three) = (reopen(root.path(), "one"), reopen(root.path(), "three"));
        assert_same(&one, &three, "after a restart on the compacted version");
    }
}
