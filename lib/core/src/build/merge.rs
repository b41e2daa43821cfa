//! The merge step: the dense, BM25 and SPLADE indexes of a plan, from its encoded shards.

use serde::{Deserialize, Serialize};

use super::encode::EncodeTask;
use super::encoded::{ChunkKey, EncodedChunk, EncodedShard, VectorCache};
use super::plan::{chunk_windows, BuildOptions, Plan};
use super::Progress;
use crate::corpus::{Chunk, Document};
use crate::encode::{SparseVector, TextTokenizer};
use crate::error::{Error, Result};
use crate::index::format::{BuildRecord, Manifest, FORMAT_NAME, FORMAT_VERSION};
use crate::index::{Bm25Index, DenseIndex, Index, LexicalStats, SpladeIndex, EXACT_ONLY_BELOW};
use crate::shards::{shard_of, Shards};

/// Builds the index of `plan` from `shards` (one per shard of the plan, in order), after
/// checking that every shard holds exactly the plan's chunks: a shard that does not is
/// named in the error and nothing is built.
pub fn merge(plan: Plan, shards: &[EncodedShard], progress: Progress) -> Result<Index> {
    let dim = check_encoded(&plan, shards)?;
    let records = || shards.iter().flat_map(|s| &s.records);
    let sparse: Vec<_> = records().map(|r| r.sparse.clone()).collect();
    progress("bm25", 0, 1);
    let bm25 = Bm25Index::build(plan.inputs.iter().map(|s| s.as_str()), plan.options.bm25);
    let splade = SpladeIndex::build(plan.sparse_vocab, &sparse);
    drop(sparse);
    progress("hnsw", 0, 1);
    let dense = DenseIndex::build_chunks(dim, records().map(|r| &r.dense), EXACT_ONLY_BELOW).map_err(|expected| {
        Error::IndexCorrupted { file: "encoded shards".into(), expected, found: "other windows".into() }
    })?;
    progress("hnsw", 1, 1);
    let manifest = manifest_of(&plan, dim, true);
    let mut index = Index::from_parts(manifest, plan.documents, plan.chunks, dense, bm25, splade)?;
    index.manifest.resident_bytes = index.resident_bytes();
    Ok(index)
}

/// Builds the index of `plan` as `count` index shards ([`crate::shards`]) from its encoded
/// `shards` (checked as [`merge`] checks them): the plan is cut with [`Plan::split`] and
/// each part merged by [`merge_shard`], BM25 weighed with the whole plan's statistics
/// ([`Plan::lexical_stats`], returned beside the shards), so each chunk's BM25 impacts are
/// those of [`merge`]'s single index, bit for bit. The vectors are the plan's: sharding
/// encodes nothing. A build whose shards merge in separate processes (the build
/// workflow's Map of merges) runs the same two functions.
pub fn merge_shards(plan: Plan, shards: &[EncodedShard], count: usize, progress: Progress) -> Result<Shards> {
    let dim = check_encoded(&plan, shards)?;
    let records: Vec<&EncodedChunk> = shards.iter().flat_map(|s| &s.records).collect();
    progress("bm25", 0, 1);
    let stats = plan.lexical_stats();
    let inputs_sha256 = plan.inputs_sha256.clone();
    let parts = plan.split(count);
    let count = parts.len();
    let (mut indexes, mut order) = (Vec::with_capacity(count), Vec::with_capacity(count));
    for (s, part) in parts.into_iter().enumerate() {
        progress("shards", s, count);
        let mine: Vec<&EncodedChunk> = part.plan_chunks.iter().map(|&c| records[c as usize]).collect();
        let (index, documents) = merge_shard(part, &mine, dim, &stats)?;
        indexes.push(index);
        order.push(documents);
    }
    progress("shards", count, count);
    Ok(Shards { indexes, order, stats, inputs_sha256 })
}

/// One index shard's part of a plan ([`Plan::split`]): its documents and chunks, what
/// BM25 reads of each chunk and each chunk's content key. It is all that merging the shard
/// needs, and holds nothing of the other shards, so a shard merges in a process that
/// never sees the whole plan.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ShardPlan {
    /// The shard's number.
    pub shard: usize,
    /// The options planned with.
    pub options: BuildOptions,
    /// The shard's documents, in plan order.
    pub documents: Vec<Document>,
    /// Each document's ordinal in the whole plan ([`Shards::order`]).
    pub order: Vec<u32>,
    /// The shard's chunks, in plan order, their `doc` counted among the shard's documents.
    pub chunks: Vec<Chunk>,
    /// Each chunk's ordinal in the whole plan.
    pub plan_chunks: Vec<u32>,
    /// What the encoders read for each chunk (BM25 indexes it).
    pub inputs: Vec<String>,
    /// Each chunk's content key: which vectors it takes.
    pub keys: Vec<ChunkKey>,
    /// The SPLADE vocabulary size.
    pub sparse_vocab: usize,
    /// The whole build's [`inputs_sha256`](super::inputs_sha256).
    pub inputs_sha256: String,
}

impl Plan {
    /// BM25's statistics over every chunk of the plan: what each shard's BM25 is weighed
    /// with, so that a sharded index scores as the single one.
    pub fn lexical_stats(&self) -> LexicalStats {
        LexicalStats::of(self.inputs.iter().map(String::as_str), self.options.bm25)
    }

    /// Cuts the plan into `count` (at least 1) index shards: document `d` and its chunks
    /// go to shard [`shard_of`]`(d's id, count)`, each in plan order.
    pub fn split(self, count: usize) -> Vec<ShardPlan> {
        let count = count.max(1);
        let part = |shard| ShardPlan::empty(shard, &self.options, self.sparse_vocab, self.inputs_sha256.clone());
        let mut parts: Vec<ShardPlan> = (0..count).map(part).collect();
        let home: Vec<usize> = self.documents.iter().map(|d| shard_of(&d.document_id, count)).collect();
        let mut ordinal = vec![0u32; self.documents.len()];
        for (d, document) in self.documents.into_iter().enumerate() {
            let part = &mut parts[home[d]];
            ordinal[d] = part.documents.len() as u32;
            part.documents.push(document);
            part.order.push(d as u32);
        }
        let chunks = self.chunks.into_iter().zip(self.inputs).zip(self.keys);
        for (c, ((chunk, input), key)) in chunks.enumerate() {
            let doc = chunk.doc as usize;
            let part = &mut parts[home[doc]];
            part.chunks.push(Chunk { doc: ordinal[doc], ..chunk });
            part.plan_chunks.push(c as u32);
            part.inputs.push(input);
            part.keys.push(key);
        }
        parts
    }
}

impl ShardPlan {
    /// Index shard `shard`'s plan with no document yet.
    pub(super) fn empty(shard: usize, options: &BuildOptions, sparse_vocab: usize, inputs_sha256: String) -> Self {
        ShardPlan {
            shard,
            options: options.clone(),
            documents: Vec::new(),
            order: Vec::new(),
            chunks: Vec::new(),
            plan_chunks: Vec::new(),
            inputs: Vec::new(),
            keys: Vec::new(),
            sparse_vocab,
            inputs_sha256,
        }
    }

    /// The vectors of each of the shard's chunks, in chunk order, from `cache` (which
    /// holds the build's fresh vectors and the previous version's): a chunk it lacks is an
    /// error naming the shard and the chunk.
    pub fn records<'a>(&self, cache: &'a VectorCache) -> Result<Vec<&'a EncodedChunk>> {
        self.keys
            .iter()
            .enumerate()
            .map(|(i, key)| {
                cache.get(key).ok_or_else(|| Error::TaskFailed {
                    task: format!("merging index shard {}", self.shard),
                    reason: format!("chunk {i} (plan chunk {}) was neither cached nor encoded", self.plan_chunks[i]),
                })
            })
            .collect()
    }

    /// The encode task of the shard's chunks whose vectors `cache` lacks, each once, read
    /// as the plan read them (input and dense windows, with the models' `tokenizers`);
    /// `None` when it lacks none. What a merge runs when a record its plan was told is
    /// cached (by a keys file, [`EncodedKeys`](super::EncodedKeys)) turns out damaged or
    /// gone: the chunk is encoded again instead of failing every build from then on.
    pub fn lacking(&self, cache: &VectorCache, tokenizers: (&TextTokenizer, &TextTokenizer)) -> Option<EncodeTask> {
        let mut seen = std::collections::HashSet::new();
        let mut task = EncodeTask::new(self.shard as u32);
        for (i, (chunk, key)) in self.chunks.iter().zip(&self.keys).enumerate() {
            if cache.get(key).is_some() || !seen.insert(*key) {
                continue;
            }
            let title = &self.documents[chunk.doc as usize].title;
            task.keys.push(*key);
            task.inputs.push(self.inputs[i].clone());
            task.windows.push(chunk_windows(title, chunk, self.options.dense_window, tokenizers));
        }
        (!task.keys.is_empty()).then_some(task)
    }
}

/// Builds index shard `plan` from `records` (one per chunk, in the shard's chunk order),
/// `dim` wide, its BM25 weighed with `stats`, the whole index's statistics; returns the
/// shard and where its documents stand among the whole index's ([`Shards::order`]).
pub fn merge_shard(
    plan: ShardPlan,
    records: &[&EncodedChunk],
    dim: usize,
    stats: &LexicalStats,
) -> Result<(Index, Vec<u32>)> {
    if records.len() != plan.keys.len() || records.iter().zip(&plan.keys).any(|(r, k)| r.key != *k) {
        return Err(Error::IndexCorrupted {
            file: format!("the vectors of index shard {}", plan.shard),
            expected: format!("the shard's {} chunks, in order", plan.keys.len()),
            found: format!("{} records with other keys", records.len()),
        });
    }
    let bm25 = Bm25Index::build_with_stats(plan.inputs.iter().map(String::as_str), plan.options.bm25, stats);
    let sparse: Vec<_> = records.iter().map(|r| r.sparse.clone()).collect();
    let splade = SpladeIndex::build(plan.sparse_vocab, &sparse);
    drop(sparse);
    let dense =
        DenseIndex::build_chunks(dim, records.iter().map(|r| &r.dense), EXACT_ONLY_BELOW).map_err(|expected| {
            Error::IndexCorrupted { file: "encoded shards".into(), expected, found: "other windows".into() }
        })?;
    let mut manifest = manifest(&plan.options, &plan.inputs_sha256, dim, false);
    manifest.documents = plan.documents.len();
    manifest.chunks = plan.chunks.len();
    let mut index = Index::from_parts(manifest, plan.documents, plan.chunks, dense, bm25, splade)?;
    index.manifest.resident_bytes = index.resident_bytes();
    Ok((index, plan.order))
}

/// Checks that `shards` hold exactly `plan`'s chunks, each record intact, and returns
/// their dense dimension; a shard that does not is named in the error.
fn check_encoded(plan: &Plan, shards: &[EncodedShard]) -> Result<usize> {
    let wrong = |k: usize, found: String| Error::IndexCorrupted {
        file: format!("encoded shard {k}"),
        expected: "the plan's chunks, in order".into(),
        found,
    };
    if shards.len() != plan.shards.len() {
        return Err(Error::IndexCorrupted {
            file: "encoded shards".into(),
            expected: format!("{} shards", plan.shards.len()),
            found: shards.len().to_string(),
        });
    }
    let dim = shards.iter().find(|s| !s.records.is_empty()).map_or(0, |s| s.dim as usize);
    for (k, (shard, range)) in shards.iter().zip(&plan.shards).enumerate() {
        let keys = &plan.keys[range.start as usize..range.end as usize];
        if !shard.holds(keys) {
            return Err(wrong(k, format!("{} records with other keys", shard.records.len())));
        }
        if let Some(i) = shard.records.iter().position(|r| !r.is_intact(dim)) {
            return Err(wrong(k, format!("record {i} fails its checksum or is not {dim}-dimensional")));
        }
    }
    Ok(dim)
}

/// The index of `plan` with BM25 only, before anything is encoded (seconds, not minutes):
/// its dense vectors are zeros (`dim` wide, searched exactly, no graph) and its SPLADE
/// postings empty, so only the BM25 path may be searched
/// ([`Engine::with_ready_paths`](crate::pipeline::Engine::with_ready_paths)). Its manifest
/// records no build, and it is meant to be served from memory while the full index
/// builds, never saved in place of one.
pub fn lexical_only(plan: Plan, dim: usize) -> Result<Index> {
    let n = plan.chunks.len();
    let bm25 = Bm25Index::build(plan.inputs.iter().map(|s| s.as_str()), plan.options.bm25);
    let splade = SpladeIndex::build(plan.sparse_vocab, &vec![SparseVector::default(); n]);
    let dense = DenseIndex::build_with(dim, vec![0.0; n * dim], usize::MAX);
    let manifest = manifest_of(&plan, dim, false);
    Index::from_parts(manifest, plan.documents, plan.chunks, dense, bm25, splade)
}

/// The manifest of an index planned with `options` from inputs whose fingerprint is
/// `inputs_sha256`, counting `plan`'s documents and chunks (`built`: with a build record).
fn manifest_of(plan: &Plan, dim: usize, built: bool) -> Manifest {
    let mut m = manifest(&plan.options, &plan.inputs_sha256, dim, built);
    m.documents = plan.documents.len();
    m.chunks = plan.chunks.len();
    m
}

/// The manifest of an index planned with `options` from inputs whose fingerprint is
/// `inputs_sha256` (`built`: with a build record), counting no document or chunk yet.
fn manifest(options: &BuildOptions, inputs_sha256: &str, dim: usize, built: bool) -> Manifest {
    Manifest {
        format: FORMAT_NAME.into(),
        version: FORMAT_VERSION,
        index_id: options.index_id.clone(),
        created_unix: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0),
        documents: 0,
        chunks: 0,
        chunk_tokens: options.chunk_tokens,
        chunk_overlap: options.chunk_overlap,
        dense_window: options.dense_window,
        dense_dim: dim,
        dense_model: options.dense_model.clone(),
        sparse_model: options.sparse_model.clone(),
        bm25: options.bm25,
        files: Vec::new(),
        build: built.then(|| BuildRecord { inputs_sha256: inputs_sha256.to_string(), encoded: Vec::new() }),
        resident_bytes: 0,
    }
}
