//! The merge step: the dense, BM25 and SPLADE indexes of a plan, from its encoded shards.

use super::encoded::EncodedShard;
use super::plan::Plan;
use super::Progress;
use crate::encode::SparseVector;
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
    let manifest = manifest(&plan, dim, true);
    let mut index = Index::from_parts(manifest, plan.documents, plan.chunks, dense, bm25, splade)?;
    index.manifest.resident_bytes = index.resident_bytes();
    Ok(index)
}

/// Builds the index of `plan` as `count` index shards ([`crate::shards`]) from its encoded
/// `shards` (checked as [`merge`] checks them): document `d` goes to shard
/// [`shard_of`]`(d's id, count)`, with its chunks and their vectors, in plan order. Every
/// shard's BM25 is weighed with the whole plan's statistics, returned beside the shards,
/// so each chunk's BM25 impacts are those of [`merge`]'s single index, bit for bit, and
/// each shard records where its documents stand in the plan ([`Shards::order`]), so that a
/// search over the shards breaks ties as the single index does. The vectors are the
/// plan's: sharding encodes nothing.
pub fn merge_shards(plan: Plan, shards: &[EncodedShard], count: usize, progress: Progress) -> Result<Shards> {
    let dim = check_encoded(&plan, shards)?;
    let count = count.max(1);
    let records: Vec<&super::encoded::EncodedChunk> = shards.iter().flat_map(|s| &s.records).collect();
    progress("bm25", 0, 1);
    let stats = LexicalStats::of(plan.inputs.iter().map(String::as_str), plan.options.bm25);
    let home: Vec<usize> = plan.documents.iter().map(|d| shard_of(&d.document_id, count)).collect();
    let (mut out, mut order) = (Vec::with_capacity(count), Vec::with_capacity(count));
    for s in 0..count {
        progress("shards", s, count);
        // The shard's documents in plan order, renumbered from 0.
        let mut ordinal = vec![u32::MAX; plan.documents.len()];
        let mine_docs: Vec<usize> = (0..plan.documents.len()).filter(|&d| home[d] == s).collect();
        let documents: Vec<_> = mine_docs
            .iter()
            .enumerate()
            .map(|(i, &d)| {
                ordinal[d] = i as u32;
                plan.documents[d].clone()
            })
            .collect();
        order.push(mine_docs.iter().map(|&d| d as u32).collect());
        let mine: Vec<usize> = (0..plan.chunks.len()).filter(|&c| home[plan.chunks[c].doc as usize] == s).collect();
        let chunks: Vec<_> = mine
            .iter()
            .map(|&c| {
                let chunk = &plan.chunks[c];
                crate::corpus::Chunk { doc: ordinal[chunk.doc as usize], ..chunk.clone() }
            })
            .collect();
        let bm25 =
            Bm25Index::build_with_stats(mine.iter().map(|&c| plan.inputs[c].as_str()), plan.options.bm25, &stats);
        let sparse: Vec<_> = mine.iter().map(|&c| records[c].sparse.clone()).collect();
        let splade = SpladeIndex::build(plan.sparse_vocab, &sparse);
        drop(sparse);
        let dense = DenseIndex::build_chunks(dim, mine.iter().map(|&c| &records[c].dense), EXACT_ONLY_BELOW).map_err(
            |expected| Error::IndexCorrupted { file: "encoded shards".into(), expected, found: "other windows".into() },
        )?;
        let mut manifest = manifest(&plan, dim, false);
        manifest.documents = documents.len();
        manifest.chunks = chunks.len();
        let mut index = Index::from_parts(manifest, documents, chunks, dense, bm25, splade)?;
        index.manifest.resident_bytes = index.resident_bytes();
        out.push(index);
    }
    progress("shards", count, count);
    Ok(Shards { indexes: out, order, stats, inputs_sha256: plan.inputs_sha256.clone() })
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
    let manifest = manifest(&plan, dim, false);
    Index::from_parts(manifest, plan.documents, plan.chunks, dense, bm25, splade)
}

/// The manifest of an index of `plan` (`built`: with the plan's build record).
fn manifest(plan: &Plan, dim: usize, built: bool) -> Manifest {
    let options = &plan.options;
    Manifest {
        format: FORMAT_NAME.into(),
        version: FORMAT_VERSION,
        index_id: options.index_id.clone(),
        created_unix: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0),
        documents: plan.documents.len(),
        chunks: plan.chunks.len(),
        chunk_tokens: options.chunk_tokens,
        chunk_overlap: options.chunk_overlap,
        dense_window: options.dense_window,
        dense_dim: dim,
        dense_model: options.dense_model.clone(),
        sparse_model: options.sparse_model.clone(),
        bm25: options.bm25,
        files: Vec::new(),
        build: built.then(|| BuildRecord { inputs_sha256: plan.inputs_sha256.clone(), encoded: Vec::new() }),
        resident_bytes: 0,
    }
}
