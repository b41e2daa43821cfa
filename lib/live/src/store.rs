//! [`LiveIndex`]: a built index, the writes since, and their compaction.
//!
//! On disk, in the index's live directory:
//! - `wal.log`: the write-ahead log ([`crate::wal`]);
//! - `CURRENT`: which compacted version is the built index (`{"version": "v000003",
//!   "applied_seq": 41}`: the version holds every write up to sequence 41), written to a
//!   temporary file, flushed and renamed, so it names a whole version or the one before;
//! - `v000001/`, `v000002/`, ...: compacted versions, each a complete index with its
//!   vector cache, flushed to disk before `CURRENT` names it.
//!
//! Without `CURRENT`, the built index is the one the server started from.
//!
//! A built version is one index or the shards of one (a root manifest and `shards/NNN/`,
//! [`sextant_core::shards`]); a compaction writes the next version as the same number of
//! shards ([`crate::base`]).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use serde::{Deserialize, Serialize};
use sextant_core::build::{encode_documents, BuildOptions, EncodedDocument, Previous, VectorCache};
use sextant_core::corpus::{Document, MetadataSchema};
use sextant_core::encode::{DenseEncoder, SparseEncoder};
use sextant_core::storage::LocalDir;

use crate::base::{Base, Place, Served, Writes};
use crate::error::{Error, Result};
use crate::wal::{sync_dir, Op, Record, Wal};

const POINTER: &str = "CURRENT";
const LOG: &str = "wal.log";

/// When a compaction starts on its own.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LiveOptions {
    /// Compact once the delta holds this many chunks (0: only when asked).
    pub compact_at_chunks: usize,
}

impl Default for LiveOptions {
    /// Compact at 512 delta chunks: a delta scan of that size costs well under a
    /// millisecond per search.
    fn default() -> Self {
        LiveOptions { compact_at_chunks: 512 }
    }
}

/// What `CURRENT` says.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Pointer {
    version: String,
    applied_seq: u64,
}

/// What a write did.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WriteOutcome {
    /// The write's sequence number.
    pub seq: u64,
    /// Whether the document is new to the index (false: it replaced a version).
    pub created: bool,
    /// Chunks it was cut into.
    pub chunks: usize,
}

/// A document as the index holds it.
#[derive(Debug, Clone, PartialEq)]
pub struct DocumentInfo {
    /// The document.
    pub document: Document,
    /// Its chunks.
    pub chunks: usize,
    /// `live` in a built version, or `delta` (written since, searched beside it).
    pub layer: &'static str,
}

/// One page of a listing, in document-id order.
#[derive(Debug, Clone, PartialEq)]
pub struct Page {
    /// The documents.
    pub documents: Vec<DocumentInfo>,
    /// The id to continue after, when there are more.
    pub next_after: Option<String>,
}

/// What a compaction did.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CompactionReport {
    /// The version written.
    pub version: String,
    /// Documents and chunks in it.
    pub documents: usize,
    /// Chunks in it.
    pub chunks: usize,
    /// Chunks encoded (0 when every vector was reused).
    pub chunks_encoded: usize,
    /// Writes folded in.
    pub writes: usize,
    /// Seconds it took.
    pub seconds: f64,
}

/// The in-memory state: the built index and the writes since.
struct State {
    base: Base,
    base_dir: PathBuf,
    version: u64,
    applied_seq: u64,
    seq: u64,
    /// Documents put since the built index, by id, with the sequence of the put.
    delta: BTreeMap<String, (u64, EncodedDocument)>,
    /// Ids deleted since the built index, with the sequence of the delete.
    deleted: BTreeMap<String, u64>,
    /// The built index's documents by id (in id order, for listings), with their place.
    base_ids: BTreeMap<String, Place>,
    /// Metadata fields of every document served, with their types.
    schema: MetadataSchema,
    wal: Wal,
    current: Served,
}

/// Receives each new state of the index to serve.
pub type Publish = Box<dyn Fn(Served) + Send + Sync>;

/// A writable index: see the crate documentation. Cloning shares it.
#[derive(Clone)]
pub struct LiveIndex {
    inner: Arc<Inner>,
}

/// The state and settings a [`LiveIndex`] and its clones (a background compaction holds
/// one) share.
struct Inner {
    dir: PathBuf,
    options: BuildOptions,
    live: LiveOptions,
    dense: Arc<DenseEncoder>,
    sparse: Arc<SparseEncoder>,
    state: Mutex<State>,
    /// Held while a compaction runs (one at a time).
    compacting: Mutex<()>,
    /// Set while a background compaction is started and not finished.
    scheduled: std::sync::atomic::AtomicBool,
    publish: Publish,
}

fn version_name(n: u64) -> String {
    format!("v{n:06}")
}

fn read_pointer(dir: &Path) -> Result<Option<Pointer>> {
    let path = dir.join(POINTER);
    match std::fs::read(&path) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| Error::Format(format!("{}: not a version pointer: {e}", path.display()))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Error::io(path, e)),
    }
}

fn write_pointer(dir: &Path, p: &Pointer) -> Result<()> {
    let tmp = dir.join(format!("{POINTER}.tmp"));
    let bytes = serde_json::to_vec(p).map_err(|e| Error::Format(e.to_string()))?;
    std::fs::write(&tmp, bytes).and_then(|_| std::fs::File::open(&tmp)?.sync_all()).map_err(|e| Error::io(&tmp, e))?;
    std::fs::rename(&tmp, dir.join(POINTER)).map_err(|e| Error::io(dir.join(POINTER), e))?;
    sync_dir(dir)
}

/// Flushes every file under `dir` (a sharded version's shards are in directories of their
/// own) and every directory.
fn sync_tree(dir: &Path) -> Result<()> {
    for entry in std::fs::read_dir(dir).map_err(|e| Error::io(dir, e))? {
        let path = entry.map_err(|e| Error::io(dir, e))?.path();
        if path.is_dir() {
            sync_tree(&path)?;
        } else if path.is_file() {
            std::fs::File::open(&path).and_then(|f| f.sync_all()).map_err(|e| Error::io(&path, e))?;
        }
    }
    sync_dir(dir)
}

impl State {
    /// The index to serve: the built one, the delta beside it, the replaced and deleted
    /// documents withdrawn.
    fn serve(&self) -> Result<Served> {
        self.base.serve(&self.writes())
    }

    fn writes(&self) -> Writes<'_> {
        Writes { delta: &self.delta, deleted: &self.deleted, built: &self.base_ids }
    }

    fn apply(&mut self, record: Record) {
        self.seq = self.seq.max(record.seq);
        match record.op {
            Op::PutWithoutPages(old) => self.apply_put(record.seq, (*old).into()),
            Op::Put(doc) => self.apply_put(record.seq, *doc),
            Op::Delete(id) => {
                self.delta.remove(&id);
                self.deleted.insert(id, record.seq);
            }
        }
    }

    fn apply_put(&mut self, seq: u64, doc: EncodedDocument) {
        let id = doc.document.document_id.clone();
        self.schema.add(&doc.document.metadata);
        self.deleted.remove(&id);
        self.delta.insert(id, (seq, doc));
    }

    fn exists(&self, id: &str) -> bool {
        self.delta.contains_key(id) || (self.base_ids.contains_key(id) && !self.deleted.contains_key(id))
    }

    /// Document `id` as served: the delta's version, else the built one unless deleted.
    fn info(&self, id: &str) -> Option<DocumentInfo> {
        if let Some((_, d)) = self.delta.get(id) {
            return Some(DocumentInfo { document: d.document.clone(), chunks: d.chunks.len(), layer: "delta" });
        }
        if self.deleted.contains_key(id) {
            return None;
        }
        let &place = self.base_ids.get(id)?;
        Some(DocumentInfo {
            document: self.base.document(place).clone(),
            chunks: self.base.chunk_count(place),
            layer: "live",
        })
    }
}

impl LiveIndex {
    /// Opens the writable index whose live directory is `dir`, over `original` (the index
    /// the server built or loaded, in `original_dir`: one index or the shards of one)
    /// unless a compacted version is named by `dir/CURRENT`; replays the log, and hands
    /// the index to serve to `publish` now and after every write.
    pub fn open(
        dir: &Path,
        original: Served,
        original_dir: &Path,
        encoders: (Arc<DenseEncoder>, Arc<SparseEncoder>),
        live: LiveOptions,
        publish: Publish,
    ) -> Result<LiveIndex> {
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        let pointer = read_pointer(dir)?;
        let (base, base_dir, version, applied_seq) = match &pointer {
            Some(p) => {
                let vdir = dir.join(&p.version);
                let base = Base::load(&vdir)?;
                let n = p.version.trim_start_matches('v').parse().unwrap_or(0);
                (base, vdir, n, p.applied_seq)
            }
            None => (Base::new(original), original_dir.to_path_buf(), 0, 0),
        };
        // Versions a crash left half-written, or that a later one replaced.
        if let Ok(entries) = std::fs::read_dir(dir) {
            for e in entries.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                if name.starts_with('v') && e.path().is_dir() && name != version_name(version) {
                    let _ = std::fs::remove_dir_all(e.path());
                }
            }
        }
        let (wal, records, dropped) = Wal::open(&dir.join(LOG))?;
        if dropped > 0 {
            tracing::warn!("{}: dropped {dropped} bytes of a log record cut short (never acknowledged)", dir.display());
        }
        let schema = base.schema();
        let mut state = State {
            base_ids: base.ids(),
            current: base.0.clone(),
            base,
            base_dir,
            version,
            applied_seq,
            seq: applied_seq,
            delta: BTreeMap::new(),
            deleted: BTreeMap::new(),
            schema,
            wal,
        };
        let replayed = records.iter().filter(|r| r.seq > applied_seq).count();
        for r in records.into_iter().filter(|r| r.seq > applied_seq) {
            state.apply(r);
        }
        state.current = state.serve()?;
        tracing::info!(
            "{}: serving {} with {replayed} writes replayed from the log",
            dir.display(),
            if version == 0 { "the index built at start".to_string() } else { version_name(version) }
        );
        publish(state.current.clone());
        let (dense, sparse) = encoders;
        let options = BuildOptions::of_manifest(state.base.manifest());
        let inner = Inner {
            dir: dir.to_path_buf(),
            options,
            live,
            dense,
            sparse,
            state: Mutex::new(state),
            compacting: Mutex::new(()),
            scheduled: Default::default(),
            publish,
        };
        Ok(LiveIndex { inner: Arc::new(inner) })
    }

    /// The index served now.
    pub fn current(&self) -> Served {
        self.inner.state.lock().expect("live state").current.clone()
    }

    /// Puts `document` (replacing any document with its id): cut and encoded, logged and
    /// flushed, then served. When this returns, the write is durable and searchable. A
    /// delta grown to [`LiveOptions::compact_at_chunks`] starts a compaction in the
    /// background (one at a time; writes go on meanwhile).
    pub fn put(&self, document: Document) -> Result<WriteOutcome> {
        self.put_many(vec![document])?.pop().expect("one document in, one outcome out")
    }

    /// Puts `documents` as [`LiveIndex::put`] puts one, in order, for the cost of fewer
    /// calls: the documents are encoded together, logged in one write with one flush, and
    /// served by one new state. Each gets its own outcome, in the order given: written, or
    /// refused ([`Error::Invalid`]: its id is an earlier document's of the batch, or its
    /// metadata's types clash with the index's or an earlier document's); a refused
    /// document writes nothing and the others go on. When this returns, every written
    /// document is durable and searchable. An `Err` (encoding, the disk) acknowledges
    /// none of them.
    pub fn put_many(&self, documents: Vec<Document>) -> Result<Vec<Result<WriteOutcome>>> {
        let invalid = |e: sextant_core::corpus::MetadataError| Error::Invalid { field: e.field, reason: e.reason };
        // Checked in order against the index's fields and the earlier documents' (the first
        // to give a field its type decides it, as sequential writes would).
        let mut outcomes: Vec<Option<Result<WriteOutcome>>> = Vec::with_capacity(documents.len());
        let mut accepted = Vec::with_capacity(documents.len());
        {
            let mut schema = self.inner.state.lock().expect("live state").schema.clone();
            let mut ids = std::collections::HashSet::new();
            for document in documents {
                if !ids.insert(document.document_id.clone()) {
                    outcomes.push(Some(Err(Error::Invalid {
                        field: "documentId".into(),
                        reason: "is an earlier document's of this batch (send one version of a document per batch)"
                            .into(),
                    })));
                    continue;
                }
                match schema.check(&document.metadata) {
                    Ok(()) => {
                        schema.add(&document.metadata);
                        outcomes.push(None);
                        accepted.push(document);
                    }
                    Err(e) => outcomes.push(Some(Err(invalid(e)))),
                }
            }
        }
        let encoded = encode_documents(
            accepted,
            &self.inner.options,
            &self.inner.dense,
            &self.inner.sparse,
            &VectorCache::new(),
        )?;
        let mut state = self.inner.state.lock().expect("live state");
        // Checked again under the lock: another write may have given a field its type.
        let mut schema = state.schema.clone();
        let mut records = Vec::with_capacity(encoded.len());
        let mut written = Vec::with_capacity(encoded.len());
        for doc in encoded {
            if let Err(e) = schema.check(&doc.document.metadata) {
                written.push(Err(invalid(e)));
                continue;
            }
            schema.add(&doc.document.metadata);
            let id = doc.document.document_id.clone();
            let created = !state.exists(&id);
            let seq = state.seq + 1 + records.len() as u64;
            written.push(Ok(WriteOutcome { seq, created, chunks: doc.chunks.len() }));
            records.push(Record { seq, op: Op::Put(Box::new(doc)) });
        }
        if !records.is_empty() {
            state.wal.append_all(&records)?;
            for record in records {
                state.apply(record);
            }
            self.republish(&mut state)?;
        }
        drop(state);
        self.compact_if_due();
        let mut written = written.into_iter();
        Ok(outcomes
            .into_iter()
            .map(|o| o.unwrap_or_else(|| written.next().expect("an outcome per document")))
            .collect())
    }

    /// Deletes document `id`: `None` when there is none, else the sequence of the delete.
    /// When this returns, no search serves the document, now or after a restart.
    pub fn delete(&self, id: &str) -> Result<Option<u64>> {
        let mut state = self.inner.state.lock().expect("live state");
        if !state.exists(id) {
            return Ok(None);
        }
        let record = Record { seq: state.seq + 1, op: Op::Delete(id.to_string()) };
        state.wal.append(&record)?;
        let seq = record.seq;
        state.apply(record);
        self.republish(&mut state)?;
        Ok(Some(seq))
    }

    fn republish(&self, state: &mut State) -> Result<()> {
        state.current = state.serve()?;
        (self.inner.publish)(state.current.clone());
        Ok(())
    }

    /// Document `id`, if the index holds it.
    pub fn get(&self, id: &str) -> Option<DocumentInfo> {
        self.inner.state.lock().expect("live state").info(id)
    }

    /// Up to `limit` documents with ids after `after`, in id order.
    pub fn list(&self, after: Option<&str>, limit: usize) -> Page {
        use std::ops::Bound::{Excluded, Unbounded};
        let state = self.inner.state.lock().expect("live state");
        let from = after.map_or(Unbounded, |a| Excluded(a.to_string()));
        // The first `limit + 1` ids are among the first `limit + 1` of each layer, both
        // kept in id order.
        let built = state
            .base_ids
            .range::<String, _>((from.clone(), Unbounded))
            .map(|(id, _)| id)
            .filter(|id| !state.deleted.contains_key(*id) && !state.delta.contains_key(*id))
            .take(limit + 1);
        let written = state.delta.range::<String, _>((from, Unbounded)).map(|(id, _)| id).take(limit + 1);
        let mut ids: Vec<&String> = built.chain(written).collect();
        ids.sort_unstable();
        let more = ids.len() > limit;
        ids.truncate(limit);
        let documents: Vec<DocumentInfo> = ids.iter().filter_map(|id| state.info(id)).collect();
        let next_after = if more { documents.last().map(|d| d.document.document_id.clone()) } else { None };
        Page { documents, next_after }
    }

    /// Writes in the delta and chunks in it.
    pub fn delta_size(&self) -> (usize, usize) {
        let state = self.inner.state.lock().expect("live state");
        (state.delta.len() + state.deleted.len(), state.current.delta_chunks())
    }

    /// Folds the delta into a new version: the built documents still served and the
    /// delta's, indexed with every vector reused (the built version's cache and the
    /// delta's), written and flushed, then named by `CURRENT`; the log keeps only the
    /// writes that arrived meanwhile. Writes go on while it runs. `None` when there is
    /// nothing to fold.
    pub fn compact(&self) -> Result<Option<CompactionReport>> {
        let _one = self.inner.compacting.lock().expect("compaction lock");
        let t = Instant::now();
        let (base, base_dir, version, upto, delta, deleted) = {
            let s = self.inner.state.lock().expect("live state");
            if s.delta.is_empty() && s.deleted.is_empty() {
                return Ok(None);
            }
            (s.base.clone(), s.base_dir.clone(), s.version, s.seq, s.delta.clone(), s.deleted.clone())
        };
        let writes = delta.len() + deleted.len();
        let base_ids = base.ids();
        let mut documents = base.kept_documents(&Writes { delta: &delta, deleted: &deleted, built: &base_ids });
        documents.extend(delta.values().map(|(_, d)| d.document.clone()));
        let base_storage = LocalDir::new(&base_dir);
        let mut previous = Previous::read(&base_storage);
        let encoders = (&*self.inner.dense, &*self.inner.sparse);
        // The built version's own vectors, for an index saved without its shard cache (every
        // compacted version has one: reading them back would plan the whole corpus again).
        if previous.cache.is_empty() {
            previous.cache.insert(base.vectors(&self.inner.options, encoders)?);
        }
        previous.cache.insert(delta.values().flat_map(|(_, d)| d.vectors.iter().cloned()));
        // Files of other crates saved with the built version (the financial facts) go on.
        let attachments = base.attachments(&base_storage)?;
        // A previous fingerprint would make a build of the same inputs "unchanged": this
        // build always writes its version.
        previous.manifest = None;
        previous.root = None;
        let next = version + 1;
        let vdir = self.inner.dir.join(version_name(next));
        let _ = std::fs::remove_dir_all(&vdir);
        let vstore = LocalDir::new(&vdir);
        let chunks_encoded = base.rebuild(documents, attachments, &self.inner.options, encoders, &previous, &vstore)?;
        sync_tree(&vdir)?;
        let new_base = Base::load(&vdir)?;
        write_pointer(&self.inner.dir, &Pointer { version: version_name(next), applied_seq: upto })?;
        let (documents, chunks) = new_base.sizes();
        {
            let mut s = self.inner.state.lock().expect("live state");
            s.delta.retain(|_, (seq, _)| *seq > upto);
            s.deleted.retain(|_, seq| *seq > upto);
            s.base_ids = new_base.ids();
            s.base = new_base;
            s.base_dir = vdir;
            s.version = next;
            s.applied_seq = upto;
            let keep: Vec<Record> = s.wal.records()?.into_iter().filter(|r| r.seq > upto).collect();
            s.wal.rewrite(&keep)?;
            self.republish(&mut s)?;
        }
        if version > 0 {
            let _ = std::fs::remove_dir_all(self.inner.dir.join(version_name(version)));
        }
        let report = CompactionReport {
            version: version_name(next),
            documents,
            chunks,
            chunks_encoded,
            writes,
            seconds: t.elapsed().as_secs_f64(),
        };
        tracing::info!(
            "{}: compacted {writes} writes into {} in {:.2}s",
            self.inner.dir.display(),
            report.version,
            report.seconds
        );
        Ok(Some(report))
    }

    /// Starts a background compaction when the delta is due for one and none is running.
    fn compact_if_due(&self) {
        use std::sync::atomic::Ordering;
        let at = self.inner.live.compact_at_chunks;
        if at == 0 || self.delta_size().1 < at {
            return;
        }
        if self.inner.scheduled.compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire).is_err() {
            return;
        }
        let me = self.clone();
        std::thread::spawn(move || {
            if let Err(e) = me.compact() {
                tracing::error!("{}: compaction failed, the delta keeps serving: {e}", me.inner.dir.display());
            }
            me.inner.scheduled.store(false, Ordering::Release);
        });
    }
}

#[cfg(test)]
mod tests {
    use sextant_core::build::{build, InProcess};
    use sextant_core::index::Index;
    use sextant_core::pipeline::{Engine, SearchRequest};
    use sextant_core::testutil::test_document;

    use super::*;
    use crate::testing::{encoders, options};

    /// The original index, built and saved in `dir` as `serve` does.
    fn original(dir: &Path) -> Arc<Index> {
        let (dense, sparse) = encoders();
        let options = options();
        let docs = vec![
            test_document("ko", "KO", "2024-02-10", &["Concentrate sales rose as unit case volume grew."]),
            test_document("fx", "AAPL", "2024-11-01", &["Foreign currency exchange rates weighed on gross margin."]),
        ];
        let runner = InProcess { dense: &dense, sparse: &sparse };
        let built = build(
            docs,
            Vec::new(),
            &options,
            (dense.tokenizer(), sparse.tokenizer()),
            &Previous::none(),
            &runner,
            &|_, _, _| {},
        )
        .unwrap();
        built.save(&LocalDir::new(dir), &Previous::none()).unwrap();
        Arc::new(Index::load(&LocalDir::new(dir)).unwrap())
    }

    fn open(root: &Path, served: Arc<Mutex<Option<Served>>>) -> LiveIndex {
        open_with(root, LiveOptions { compact_at_chunks: 0 }, Box::new(move |i| *served.lock().unwrap() = Some(i)))
    }

    /// The writable index over `root/built`, its writes in `root/live`.
    fn open_with(root: &Path, live: LiveOptions, publish: Publish) -> LiveIndex {
        let base = Index::load(&LocalDir::new(root.join("built"))).unwrap();
        let base = Served::Index(Arc::new(base));
        LiveIndex::open(&root.join("live"), base, &root.join("built"), encoders(), live, publish).unwrap()
    }

    fn top(served: &Served, q: &str) -> Vec<String> {
        let (dense, sparse) = encoders();
        let engine = Engine::new(served.single().expect("one index").clone(), dense, sparse, None);
        let mut req = SearchRequest::new(q, 5);
        req.rerank = false;
        let out = engine.search(&req).unwrap();
        out.hits.iter().map(|h| engine.index().document_of(h.chunk).document_id.clone()).collect()
    }

    fn doc(id: &str, text: &str, meta: serde_json::Value) -> Document {
        let mut d = test_document(id, "MSFT", "2024-07-30", &[text]);
        d.metadata = sextant_core::corpus::Metadata::from_json(&meta).unwrap();
        d
    }

    /// A delta grown to the threshold is compacted in the background: the put that crossed
    /// it returns before the compaction is done, and the delta is folded soon after.
    #[test]
    fn a_full_delta_is_compacted_in_the_background() {
        let root = tempfile::tempdir().unwrap();
        original(&root.path().join("built"));
        let live = open_with(root.path(), LiveOptions { compact_at_chunks: 2 }, Box::new(|_| {}));
        live.put(doc("a", "Azure revenue grew.", serde_json::json!({}))).unwrap();
        live.put(doc("b", "Gaming revenue rose.", serde_json::json!({}))).unwrap();
        let t = std::time::Instant::now();
        while live.delta_size().1 > 0 {
            assert!(t.elapsed() < std::time::Duration::from_secs(60), "no compaction started");
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        assert!(root.path().join("live/v000001/manifest.json").is_file());
        assert_eq!(live.get("a").unwrap().layer, "live");
        assert_eq!(top(&live.current(), "Gaming revenue")[0], "b");
    }

    #[test]
    fn writes_are_served_at_once_survive_a_restart_and_a_compaction() {
        let root = tempfile::tempdir().unwrap();
        original(&root.path().join("built"));
        let served = Arc::new(Mutex::new(None));
        let live = open(root.path(), served.clone());
        let azure = doc("azure", "Azure cloud services revenue grew 29 percent.", serde_json::json!({"team": "cloud"}));
        let out = live.put(azure.clone()).unwrap();
        assert_eq!((out.seq, out.created, out.chunks), (1, true, 1));
        let now = served.lock().unwrap().clone().unwrap();
        assert_eq!(top(&now, "Azure cloud revenue")[0], "azure", "searchable as soon as put returns");
        // Replace fx, delete ko.
        assert!(
            !live.put(doc("fx", "A stronger dollar cut services revenue.", serde_json::json!({}))).unwrap().created
        );
        assert_eq!(live.delete("ko").unwrap(), Some(3));
        assert_eq!(live.delete("ko").unwrap(), None, "deleting twice finds nothing");
        let now = live.current();
        assert!(!top(&now, "concentrate unit case volume").contains(&"ko".to_string()));
        assert_eq!(live.get("fx").unwrap().layer, "delta");
        assert!(live.get("ko").is_none());
        // A field keeps its type.
        let err = live.put(doc("bad", "x", serde_json::json!({"team": 7}))).unwrap_err();
        assert_eq!(err.to_string(), "metadata.team: is a string in the other documents of this index, got a number");
        let ids = |p: Page| p.documents.into_iter().map(|d| d.document.document_id).collect::<Vec<_>>();
        assert_eq!(ids(live.list(None, 10)), vec!["azure", "fx"]);
        let first = live.list(None, 1);
        assert_eq!(first.next_after.as_deref(), Some("azure"));
        assert_eq!(ids(live.list(first.next_after.as_deref(), 1)), vec!["fx"]);
        drop(live);

        // A restart replays the log.
        let live = open(root.path(), Arc::new(Mutex::new(None)));
        assert_eq!(ids(live.list(None, 10)), vec!["azure", "fx"]);
        assert_eq!(top(&live.current(), "Azure cloud revenue")[0], "azure");
        // Compaction: a version with every vector reused, the log emptied.
        let report = live.compact().unwrap().unwrap();
        assert_eq!(
            (report.version.as_str(), report.documents, report.chunks_encoded, report.writes),
            ("v000001", 2, 0, 3)
        );
        assert_eq!(live.current().delta_chunks(), 0);
        assert!(live.compact().unwrap().is_none(), "nothing left to fold");
        assert_eq!(std::fs::metadata(root.path().join("live/wal.log")).unwrap().len(), 0);
        live.put(doc("late", "Gaming revenue rose on Xbox content.", serde_json::json!({"team": "games"}))).unwrap();
        drop(live);
        let live = open(root.path(), Arc::new(Mutex::new(None)));
        assert_eq!(ids(live.list(None, 10)), vec!["azure", "fx", "late"]);
        assert_eq!(live.get("azure").unwrap().layer, "live");
        assert_eq!(live.get("azure").unwrap().document.metadata, azure.metadata);
        assert_eq!(top(&live.current(), "Xbox gaming content")[0], "late");
    }

    /// A log written before documents had pages replays: its documents are served, without
    /// pages; and a document's pages written now survive a restart.
    #[test]
    fn a_log_written_before_pages_replays_and_pages_are_kept() {
        let root = tempfile::tempdir().unwrap();
        original(&root.path().join("built"));
        let live = open(root.path(), Arc::new(Mutex::new(None)));
        live.put(doc("azure", "Azure cloud services revenue grew 29 percent.", serde_json::json!({"team": "cloud"})))
            .unwrap();
        live.delete("ko").unwrap();
        drop(live);
        let path = root.path().join("live/wal.log");
        let (mut wal, records, _) = Wal::open(&path).unwrap();
        let old: Vec<Record> = records
            .into_iter()
            .map(|r| match r.op {
                Op::Put(d) => Record { seq: r.seq, op: Op::PutWithoutPages(Box::new((&*d).into())) },
                op => Record { seq: r.seq, op },
            })
            .collect();
        assert!(matches!(old[0].op, Op::PutWithoutPages(_)));
        wal.rewrite(&old).unwrap();
        drop(wal);

        let live = open(root.path(), Arc::new(Mutex::new(None)));
        assert_eq!(top(&live.current(), "Azure cloud revenue")[0], "azure");
        assert!(live.get("azure").unwrap().document.metadata.get("team").is_some());
        assert!(live.get("ko").is_none());
        let mut paged = doc("pdf", "Turbine orders doubled.", serde_json::json!({}));
        paged.segments.push("Backlog reached a record.".into());
        paged.pages = vec![2, 3];
        live.put(paged).unwrap();
        drop(live);
        let live = open(root.path(), Arc::new(Mutex::new(None)));
        assert_eq!(live.get("pdf").unwrap().document.pages, [2, 3]);
        assert_eq!(live.get("azure").unwrap().layer, "delta");
    }

    /// A batch is written as its documents would be one by one: in order, each with its own
    /// outcome, a refused one leaving the others written, one publish, and all of it kept
    /// across a restart.
    #[test]
    fn a_batch_writes_each_document_in_order_with_its_own_outcome() {
        let root = tempfile::tempdir().unwrap();
        original(&root.path().join("built"));
        let publishes = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counter = publishes.clone();
        let publish: Publish = Box::new(move |_| {
            counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        });
        let live = open_with(root.path(), LiveOptions { compact_at_chunks: 0 }, publish);
        let before = publishes.load(std::sync::atomic::Ordering::Relaxed);
        let outcomes = live
            .put_many(vec![
                doc("azure", "Azure cloud services revenue grew 29 percent.", serde_json::json!({"team": "cloud"})),
                // Clashes with the type the document before gave `team`.
                doc("bad", "Nothing here.", serde_json::json!({"team": 7})),
                doc("fx", "A stronger dollar cut services revenue.", serde_json::json!({})),
                doc("xbox", "Gaming revenue rose on Xbox content.", serde_json::json!({"team": "games"})),
                // An id twice: the second is refused, the first is the document.
                doc("azure", "Azure AI services drove cloud growth.", serde_json::json!({"team": "cloud"})),
                doc("ko", "Concentrate sales fell.", serde_json::json!({})),
            ])
            .unwrap();
        assert_eq!(publishes.load(std::sync::atomic::Ordering::Relaxed) - before, 1, "one new state for the batch");
        let shown: Vec<String> = outcomes
            .iter()
            .map(|o| match o {
                Ok(w) => format!("{} {}", w.seq, w.created),
                Err(e) => e.to_string(),
            })
            .collect();
        assert_eq!(
            shown,
            [
                "1 true",
                "metadata.team: is a string in the other documents of this index, got a number",
                "2 false",
                "3 true",
                "documentId: is an earlier document's of this batch (send one version of a document per batch)",
                "4 false",
            ]
        );
        assert!(live.get("bad").is_none());
        assert_eq!(top(&live.current(), "Xbox gaming content")[0], "xbox");
        drop(live);
        let live = open(root.path(), Arc::new(Mutex::new(None)));
        let ids: Vec<String> = live.list(None, 10).documents.into_iter().map(|d| d.document.document_id).collect();
        assert_eq!(ids, ["azure", "fx", "ko", "xbox"]);
        assert_eq!(live.get("azure").unwrap().document.text(), "Azure cloud services revenue grew 29 percent.");
        assert_eq!(live.put_many(Vec::new()).unwrap().len(), 0);
    }
}
