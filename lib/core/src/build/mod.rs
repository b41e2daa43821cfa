//! Index builds in three steps that run in one process or spread over many:
//!
//! 1. [`plan()`]: cut every document into chunks that fit the encoders' window (no text is
//!    lost), give each chunk its encoder input and content key, and cut the chunks into
//!    shards;
//! 2. encode: per shard, the chunks whose key no cache holds ([`Plan::tasks`],
//!    [`encode_task`]), in this process ([`InProcess`]) or elsewhere (any [`EncodeRunner`]);
//! 3. [`merge()`]: the dense, BM25 and SPLADE indexes from the encoded shards.
//!
//! [`build`] runs the three with the cache of the previous version ([`Previous`]): every
//! vector whose key it holds is reused, and a build whose inputs are the previous version's
//! ([`inputs_sha256`]) stops before planning and publishes nothing. [`Built::save`] writes
//! the index, the encoded shards (the next build's cache, outside the manifest's checked
//! files so servers never download them) and `build_report.json`.

mod encode;
mod encoded;
mod merge;
mod parts;
mod plan;
mod report;

use std::time::Instant;

pub use encode::{encode_inputs, encode_task, EncodeTask, ENCODE_STEP};
pub use encoded::{keys_file, Cached, CachedKeys, ChunkKey, EncodedChunk, EncodedKeys, EncodedShard, VectorCache};
pub use merge::{lexical_only, merge, merge_shard, merge_shards, ShardPlan};
pub use parts::{
    gather_parts, plan_part, task_number, Gather, Gathered, PartOffsets, PartPlan, PartSummary, PlannedPart, MAX_PARTS,
};
pub use plan::{
    dense_windows, document_sha256, encoder_input, fingerprint, inputs_sha256, key_window, plan, shard_ranges,
    BuildOptions, Plan, DEFAULT_DENSE_WINDOW, DEFAULT_SHARD_CHUNKS, MEASURED_DENSE_WINDOW, TITLE_TOKENS, WINDOW,
};
pub use report::{BuildReport, Phases, REPORT_FILE};

use crate::corpus::{Chunk, Document};
use crate::encode::{Backend, DenseEncoder, SparseEncoder, TextTokenizer};
use crate::error::Result;
use crate::index::format::{read_manifest, Manifest};
use crate::index::Index;
use crate::shards::{RootManifest, Shards};
use crate::storage::Storage;

/// Receives `(stage, done, total)` while a build runs.
pub type Progress<'a> = &'a (dyn Fn(&str, usize, usize) + Sync);

/// Runs encode tasks somewhere: here, in worker processes, in Lambda invocations.
pub trait EncodeRunner {
    /// Encodes every task, returning one shard per task (any order). `progress` receives
    /// `("encode", done, total)` in chunks.
    fn run(&self, tasks: Vec<EncodeTask>, progress: Progress) -> Result<Vec<EncodedShard>>;
    /// How many tasks run at once.
    fn workers(&self) -> usize;
    /// The inference backend the tasks run on (the process's, unless the runner knows).
    fn backend(&self) -> Backend {
        crate::encode::backend()
    }
}

/// Encodes in this process, one task after the other (each uses every core).
pub struct InProcess<'a> {
    /// The dense encoder.
    pub dense: &'a DenseEncoder,
    /// The SPLADE encoder.
    pub sparse: &'a SparseEncoder,
}

impl EncodeRunner for InProcess<'_> {
    fn run(&self, tasks: Vec<EncodeTask>, progress: Progress) -> Result<Vec<EncodedShard>> {
        let total: usize = tasks.iter().map(|t| t.keys.len()).sum();
        let mut done = 0;
        let mut out = Vec::with_capacity(tasks.len());
        for task in &tasks {
            out.push(encode_task(task, self.dense, self.sparse, &|n| progress("encode", done + n, total))?);
            done += task.keys.len();
        }
        Ok(out)
    }
    fn backend(&self) -> Backend {
        self.dense.backend()
    }

    fn workers(&self) -> usize {
        1
    }
}

/// What the previous version of an index offers a build: its manifest (to tell an
/// unchanged build), its root manifest when it was sharded, and its encoded vectors.
#[derive(Debug, Default)]
pub struct Previous {
    /// Its manifest, if it had a readable one.
    pub manifest: Option<Manifest>,
    /// Its root manifest, if it was a sharded index with a readable one ([`crate::shards`]):
    /// then it shadows any single index's manifest beside it.
    pub root: Option<RootManifest>,
    /// Its encoded vectors by content key.
    pub cache: VectorCache,
    /// The encoded files the cache was read from: a save removes those it does not write
    /// again.
    pub encoded: Vec<String>,
}

impl Previous {
    /// No previous version.
    pub fn none() -> Self {
        Self::default()
    }

    /// Reads the previous version in `storage`, a single index or a sharded one. Never
    /// fails: no index there, or an unreadable one, is no previous version, and an
    /// unreadable or damaged encoded file counts as rejected cache entries (encoded again).
    pub fn read(storage: &dyn Storage) -> Self {
        let mut previous = Self::none();
        previous.manifest = read_manifest(storage).ok();
        previous.root = storage
            .read(crate::shards::ROOT_MANIFEST)
            .ok()
            .and_then(|bytes| serde_json::from_slice::<RootManifest>(&bytes).ok());
        let single = previous.manifest.iter().flat_map(|m| m.build.iter()).flat_map(|b| &b.encoded);
        let mut names: Vec<String> = single.chain(previous.root.iter().flat_map(|r| &r.encoded)).cloned().collect();
        names.sort();
        names.dedup();
        previous.add_encoded(storage, &names);
        previous.encoded = names;
        previous
    }

    /// Adds to the cache the vectors of the encoded files `names` in `storage`; a file that
    /// cannot be read counts as rejected (its chunks are encoded again).
    pub fn add_encoded(&mut self, storage: &dyn Storage, names: &[String]) {
        for name in names {
            match storage.read_blob(name) {
                Ok(bytes) => self.cache.add_file(&bytes),
                Err(_) => self.cache.rejected += 1,
            }
        }
    }

    /// Removes the encoded files the previous version had and `kept` does not name, and
    /// their keys files.
    fn remove_stale(&self, storage: &dyn Storage, kept: &[String]) -> Result<()> {
        self.encoded
            .iter()
            .filter(|n| !kept.contains(n))
            .try_for_each(|n| storage.remove(n).and_then(|()| storage.remove(&keys_file(n))))
    }

    /// Whether a build of the inputs `fingerprint` as `shards` (`None`: a single index;
    /// `Some(k)`: `k` index shards under a root) would make what the previous version is: a
    /// single index of those inputs, or a sharded one of those inputs and as many shards.
    pub fn unchanged(&self, fingerprint: &str, shards: Option<usize>) -> bool {
        match (shards, &self.root) {
            (Some(k), Some(root)) => root.inputs_sha256 == fingerprint && root.shards.len() == k,
            (Some(_), None) => false,
            (None, _) => self.inputs_sha256() == Some(fingerprint),
        }
    }

    /// The fingerprint the previous single index was built from, if it records one and no
    /// sharded index shadows it.
    pub fn inputs_sha256(&self) -> Option<&str> {
        if self.root.is_some() {
            return None;
        }
        self.manifest.as_ref()?.build.as_ref().map(|b| b.inputs_sha256.as_str())
    }
}

/// A finished build: the index (none when unchanged), its encoded shards and report.
pub struct Built {
    /// What the build did.
    pub report: BuildReport,
    /// The index; `None` when the inputs were the previous version's.
    pub index: Option<Index>,
    /// The encoded shards, in plan order.
    pub shards: Vec<EncodedShard>,
    /// The files of other crates saved with the index.
    pub attachments: Vec<(String, Vec<u8>)>,
}

/// The name of encoded shard `k` in an index's storage.
pub fn shard_file(k: usize) -> String {
    format!("encoded-{k:05}.bin")
}

/// The first half of a build, shared by every way of running it: either the inputs are
/// the previous version's, or the plan with its encode tasks.
pub enum Planned {
    /// The inputs, options and models are the previous version's: nothing to plan, encode
    /// or write.
    Unchanged(BuildReport),
    /// The plan, its encode tasks (what no cache holds) and the report so far.
    Ready {
        /// The plan (boxed: it is large beside the unchanged report).
        plan: Box<Plan>,
        /// Its encode tasks.
        tasks: Vec<EncodeTask>,
        /// The report with the plan's figures.
        report: BuildReport,
    },
}

impl BuildReport {
    /// The report of a build whose inputs are the previous version's: `chunks` all reused,
    /// nothing written, planning since `start`.
    fn unchanged(options: &BuildOptions, documents: usize, chunks: usize, start: Instant) -> Self {
        BuildReport {
            index_id: options.index_id.clone(),
            documents,
            chunks,
            chunks_reused: chunks,
            unchanged: true,
            phases: Phases { plan: start.elapsed().as_secs_f64(), ..Default::default() },
            ..Default::default()
        }
    }

    /// The report of a plan whose encode tasks are `tasks`: every chunk they do not encode
    /// is reused (from the cache, or as a repeat of a chunk encoded in this build).
    fn planned(plan: &Plan, tasks: &[EncodeTask], cache_rejected: usize) -> Self {
        let chunks_encoded = tasks.iter().map(|t| t.keys.len()).sum();
        BuildReport {
            index_id: plan.options.index_id.clone(),
            documents: plan.documents.len(),
            chunks: plan.chunks.len(),
            chunks_encoded,
            chunks_reused: plan.chunks.len() - chunks_encoded,
            cache_rejected,
            tokens_beyond_window: plan.tokens_beyond_window,
            shards: plan.shards.len(),
            ..Default::default()
        }
    }
}

/// Plans a build of `documents` (with `attachments`, files of other crates saved with it)
/// as `shards` (`None`: a single index; `Some(k)`: `k` index shards) against `previous`:
/// [`Planned::Unchanged`] when the previous version is that build of the same inputs
/// ([`Previous::unchanged`]), else the plan and the tasks of what `previous`'s cache lacks.
pub fn plan_build(
    documents: Vec<Document>,
    attachments: &[(String, Vec<u8>)],
    options: &BuildOptions,
    tokenizers: (&TextTokenizer, &TextTokenizer),
    previous: &Previous,
    shards: Option<usize>,
) -> Result<Planned> {
    let t = Instant::now();
    let fingerprint = inputs_sha256(&documents, options, attachments)?;
    if previous.unchanged(&fingerprint, shards) {
        let chunks = match (&previous.root, shards) {
            (Some(root), Some(_)) => root.shards.iter().map(|s| s.chunks).sum(),
            _ => previous.manifest.as_ref().map_or(0, |m| m.chunks),
        };
        return Ok(Planned::Unchanged(BuildReport::unchanged(options, documents.len(), chunks, t)));
    }
    let plan = plan(documents, options, fingerprint, tokenizers.0, tokenizers.1)?;
    let tasks = plan.tasks(&previous.cache);
    let mut report = BuildReport::planned(&plan, &tasks, previous.cache.rejected);
    report.phases.plan = t.elapsed().as_secs_f64();
    Ok(Planned::Ready { plan: Box::new(plan), tasks, report })
}

/// Builds the index of `documents` (with `attachments`, files of other crates saved with
/// it) reusing `previous`'s vectors, encoding the rest with `runner`.
pub fn build(
    documents: Vec<Document>,
    attachments: Vec<(String, Vec<u8>)>,
    options: &BuildOptions,
    tokenizers: (&TextTokenizer, &TextTokenizer),
    previous: &Previous,
    runner: &dyn EncodeRunner,
    progress: Progress,
) -> Result<Built> {
    progress("plan", 0, 1);
    let (plan, tasks, mut report) = match plan_build(documents, &attachments, options, tokenizers, previous, None)? {
        Planned::Unchanged(report) => {
            return Ok(Built { report: unchanged_by(report, runner), index: None, shards: Vec::new(), attachments });
        }
        Planned::Ready { plan, tasks, report } => (plan, tasks, report),
    };
    let shards = encode_plan(&plan, tasks, previous, runner, progress, &mut report)?;

    let t = Instant::now();
    let index = merge(*plan, &shards, progress)?;
    report.resident_bytes = index.manifest.resident_bytes;
    report.phases.merge = t.elapsed().as_secs_f64();
    report.seconds = report.phases.total();
    Ok(Built { report, index: Some(index), shards, attachments })
}

/// The report of an unchanged build, with the runner it would have encoded with.
fn unchanged_by(mut report: BuildReport, runner: &dyn EncodeRunner) -> BuildReport {
    report.workers = runner.workers();
    report.backend = runner.backend().to_string();
    report.seconds = report.phases.total();
    report
}

/// An index built as shards ([`build_shards`]): the shards, BM25's statistics over all of
/// them, the encoded vectors (the cache of the next build) and what the build did.
pub struct BuiltShards {
    /// The index shards, where their documents stand, and BM25's statistics; `None` when
    /// the inputs and the shard count were the previous version's.
    pub shards: Option<Shards>,
    /// The encoded vectors, in plan order.
    pub encoded: Vec<EncodedShard>,
    /// What the build did (`chunks_encoded` counts only what `previous` lacked).
    pub report: BuildReport,
}

/// Builds the index of `documents` as `count` index shards ([`merge_shards`]), reusing
/// `previous`'s vectors and encoding the rest with `runner`. The vectors are keyed by
/// content, not by shard, so building the same documents with another `count` from the
/// vectors of a build with any count encodes nothing. When `previous` is a sharded index
/// of the same inputs and count, nothing is planned, encoded or written.
pub fn build_shards(
    documents: Vec<Document>,
    options: &BuildOptions,
    tokenizers: (&TextTokenizer, &TextTokenizer),
    previous: &Previous,
    runner: &dyn EncodeRunner,
    count: usize,
    progress: Progress,
) -> Result<BuiltShards> {
    progress("plan", 0, 1);
    let (plan, tasks, mut report) = match plan_build(documents, &[], options, tokenizers, previous, Some(count))? {
        Planned::Unchanged(report) => {
            return Ok(BuiltShards { shards: None, encoded: Vec::new(), report: unchanged_by(report, runner) })
        }
        Planned::Ready { plan, tasks, report } => (plan, tasks, report),
    };
    let encoded = encode_plan(&plan, tasks, previous, runner, progress, &mut report)?;
    let t = Instant::now();
    let shards = merge_shards(*plan, &encoded, count, progress)?;
    report.resident_bytes = shards.indexes.iter().map(|s| s.manifest.resident_bytes).sum();
    report.phases.merge = t.elapsed().as_secs_f64();
    report.seconds = report.phases.total();
    Ok(BuiltShards { shards: Some(shards), encoded, report })
}

impl BuiltShards {
    /// Writes the build to `storage`: the encoded vectors, the shards and their root
    /// manifest (the commit point, [`save_sharded`](crate::shards::save_sharded)), then
    /// `build_report.json`. An unchanged build writes nothing. After the commit, what the
    /// previous version had and this one does not is removed: shards past the new count, a
    /// single index that was there, encoded files no longer written. Returns the report
    /// with the write phase filled in.
    pub fn save(self, storage: &dyn Storage, previous: &Previous) -> Result<BuildReport> {
        let mut report = self.report;
        let Some(shards) = self.shards else {
            return Ok(report);
        };
        let t = Instant::now();
        let names = write_encoded(storage, &self.encoded)?;
        crate::shards::save_sharded(storage, &shards, &names)?;
        if let Some(root) = &previous.root {
            crate::shards::remove_sharded(storage, root, shards.indexes.len())?;
        }
        if previous.manifest.is_some() {
            crate::index::format::remove_index(storage)?;
        }
        previous.remove_stale(storage, &names)?;
        report.phases.write = t.elapsed().as_secs_f64();
        report.seconds = report.phases.total();
        storage.write(REPORT_FILE, &serde_json::to_vec_pretty(&report)?)?;
        Ok(report)
    }
}

/// Writes `encoded` to `storage` as [`shard_file`]`(0..)`, each with its keys file
/// beside it ([`EncodedKeys`], what the next build's plan in corpus parts reads), in
/// parallel, and returns the shard files' names.
fn write_encoded(storage: &dyn Storage, encoded: &[EncodedShard]) -> Result<Vec<String>> {
    use rayon::prelude::*;
    let names: Vec<String> = (0..encoded.len()).map(shard_file).collect();
    encoded.par_iter().zip(&names).try_for_each(|(shard, name)| {
        storage.write(name, &shard.to_bytes()?)?;
        storage.write(&keys_file(name), &EncodedKeys::of(shard).to_bytes()?)
    })?;
    Ok(names)
}

/// Runs `tasks` with `runner` and assembles every encoded shard of `plan` (what the tasks
/// did not encode comes from `previous`'s cache), recording the runner and the encode
/// phase in `report`.
fn encode_plan(
    plan: &Plan,
    tasks: Vec<EncodeTask>,
    previous: &Previous,
    runner: &dyn EncodeRunner,
    progress: Progress,
    report: &mut BuildReport,
) -> Result<Vec<EncodedShard>> {
    report.workers = runner.workers();
    report.backend = runner.backend().to_string();
    let t = Instant::now();
    let encoded = if tasks.is_empty() { Vec::new() } else { runner.run(tasks, progress)? };
    let shards = plan.assemble(&previous.cache, encoded)?;
    report.phases.encode = t.elapsed().as_secs_f64();
    Ok(shards)
}

/// What [`build`] would do, without encoding or writing anything: the plan's figures
/// (chunks, shards, `tokens_beyond_window`), as `chunks_encoded` how many chunks the cache
/// lacks, and whether the inputs are unchanged. Unlike a build, it plans even then.
pub fn dry_run(
    documents: Vec<Document>,
    attachments: &[(String, Vec<u8>)],
    options: &BuildOptions,
    tokenizers: (&TextTokenizer, &TextTokenizer),
    previous: &Previous,
) -> Result<BuildReport> {
    let t = Instant::now();
    let fingerprint = inputs_sha256(&documents, options, attachments)?;
    let unchanged = previous.inputs_sha256() == Some(fingerprint.as_str());
    let plan = plan(documents, options, fingerprint, tokenizers.0, tokenizers.1)?;
    let mut report = BuildReport::planned(&plan, &plan.tasks(&previous.cache), previous.cache.rejected);
    report.unchanged = unchanged;
    report.phases.plan = t.elapsed().as_secs_f64();
    report.seconds = report.phases.total();
    Ok(report)
}

impl Built {
    /// Writes the build to `storage`: the encoded shards, then the index and attachments
    /// (the manifest last, the commit point), then `build_report.json`. An unchanged build
    /// writes nothing. After the commit, encoded files of the previous version that this
    /// one no longer has are removed, and so is a sharded index that was there (its root
    /// first, so the new index is what loads). Returns the report with the write phase
    /// filled in and the index as saved (its manifest lists the shards), so a caller that
    /// serves it need not read it back.
    pub fn save(self, storage: &dyn Storage, previous: &Previous) -> Result<Saved> {
        let mut report = self.report;
        let Some(mut index) = self.index else {
            return Ok(Saved { report, index: None });
        };
        let t = Instant::now();
        let names = write_encoded(storage, &self.shards)?;
        if let Some(b) = index.manifest.build.as_mut() {
            b.encoded = names.clone();
        }
        index.manifest = index.save_with(storage, self.attachments)?;
        if let Some(root) = &previous.root {
            // A single index now: the sharded one's root would shadow it.
            crate::shards::remove_sharded(storage, root, 0)?;
        }
        previous.remove_stale(storage, &names)?;
        report.phases.write = t.elapsed().as_secs_f64();
        report.seconds = report.phases.total();
        storage.write(REPORT_FILE, &serde_json::to_vec_pretty(&report)?)?;
        Ok(Saved { report, index: Some(index) })
    }
}

/// A build written to storage by [`Built::save`].
pub struct Saved {
    /// What the build did, the write phase included.
    pub report: BuildReport,
    /// The index as saved; `None` when the build was unchanged (nothing was written).
    pub index: Option<Index>,
}

/// One document cut and encoded as a build of `options` would (the unit a delta holds):
/// its chunks (`doc` 0) and each chunk's vectors, with their content keys.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct EncodedDocument {
    /// The document.
    pub document: Document,
    /// Its chunks, in order, each with `doc == 0`.
    pub chunks: Vec<Chunk>,
    /// The vectors of each chunk.
    pub vectors: Vec<EncodedChunk>,
}

/// Cuts and encodes `documents` as a build with `options` would, reusing the vectors
/// `cache` holds; one [`EncodedDocument`] per document, in order.
pub fn encode_documents(
    documents: Vec<Document>,
    options: &BuildOptions,
    dense: &DenseEncoder,
    sparse: &SparseEncoder,
    cache: &VectorCache,
) -> Result<Vec<EncodedDocument>> {
    let plan = plan(documents, options, String::new(), dense.tokenizer(), sparse.tokenizer())?;
    let encoded = plan.tasks(cache).iter().map(|t| encode_task(t, dense, sparse, &|_| {})).collect::<Result<_>>()?;
    let records: Vec<EncodedChunk> = plan.assemble(cache, encoded)?.into_iter().flat_map(|s| s.records).collect();
    let mut out: Vec<EncodedDocument> = plan
        .documents
        .into_iter()
        .map(|document| EncodedDocument { document, chunks: Vec::new(), vectors: Vec::new() })
        .collect();
    for (chunk, record) in plan.chunks.into_iter().zip(records) {
        let d = &mut out[chunk.doc as usize];
        d.chunks.push(Chunk { doc: 0, ..chunk });
        d.vectors.push(record);
    }
    Ok(out)
}

/// The vectors of the chunks of `index`'s built part, read back from the index itself
/// (dense vectors as stored, SPLADE vectors by transposing its postings) and keyed as a
/// build with `options` keys them: a build over these documents reuses them all, even
/// when the index was saved without its encoded shards. Chunks whose plan differs from
/// the index's (other options) are left out. When the index's dense window is not
/// `options`', only the chunks that both read whole are kept: a chunk read whole is one
/// vector of its input under any window ([`key_window`]), the others' vectors are of other
/// windows.
pub fn index_vectors(
    index: &Index,
    options: &BuildOptions,
    tokenizers: (&TextTokenizer, &TextTokenizer),
) -> Result<Vec<EncodedChunk>> {
    let same_windows = index.manifest.dense_window == options.dense_window;
    let documents = index.documents.base().to_vec();
    let plan = plan(documents, options, String::new(), tokenizers.0, tokenizers.1)?;
    let base = index.chunks.base();
    if plan.chunks.len() != base.len() {
        return Ok(Vec::new());
    }
    let mut sparse: Vec<crate::encode::SparseVector> = vec![Default::default(); base.len()];
    let inverted = &index.splade.inverted;
    for term in 0..inverted.num_terms() as u32 {
        let (chunks, weights) = inverted.postings(term);
        for (&c, &w) in chunks.iter().zip(weights) {
            let v = &mut sparse[c as usize];
            v.ids.push(term);
            v.weights.push(w);
        }
    }
    Ok(plan
        .chunks
        .iter()
        .zip(base)
        .zip(plan.keys)
        .zip(sparse)
        .enumerate()
        .filter(|(i, (((planned, stored), _), _))| {
            let read_whole = || {
                plan.windows.get(*i).is_none_or(|w| w.is_empty())
                    && index.dense.chunk_vectors(*i).len() == index.dense.dim
            };
            planned.text == stored.text && (same_windows || read_whole())
        })
        .map(|(i, ((_, key), s))| EncodedChunk::new(key, index.dense.chunk_vectors(i).to_vec(), s))
        .collect())
}

impl EncodedDocument {
    /// The delta of `documents`, in order, for [`Index::with_delta`].
    pub fn appended<'a>(documents: impl IntoIterator<Item = &'a EncodedDocument>) -> crate::index::Appended {
        let mut a = crate::index::Appended::default();
        for (i, d) in documents.into_iter().enumerate() {
            a.documents.push(d.document.clone());
            a.chunks.extend(d.chunks.iter().map(|c| Chunk { doc: i as u32, ..c.clone() }));
            for v in &d.vectors {
                a.dense.push(v.dense.clone());
                a.sparse.push(v.sparse.clone());
            }
        }
        a
    }
}

impl Previous {
    /// A previous build known only by its encoded vectors (in memory, without a manifest).
    pub fn with_vectors(encoded: &[EncodedShard]) -> Self {
        let mut cache = VectorCache::new();
        for shard in encoded {
            cache.insert(shard.records.iter().cloned());
        }
        Previous { cache, ..Previous::none() }
    }
}

impl Index {
    /// Chunks, encodes and indexes `documents` in this process, without a cache.
    pub fn build(
        documents: Vec<Document>,
        dense: &DenseEncoder,
        sparse: &SparseEncoder,
        options: &BuildOptions,
        progress: Progress,
    ) -> Result<Index> {
        let runner = InProcess { dense, sparse };
        let tokenizers = (dense.tokenizer(), sparse.tokenizer());
        let built = build(documents, Vec::new(), options, tokenizers, &Previous::none(), &runner, progress)?;
        Ok(built.index.expect("a build without a previous version is never unchanged"))
    }
}

#[cfg(test)]
mod tests;
