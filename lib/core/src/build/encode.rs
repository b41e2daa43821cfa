//! The encode step: the chunks of each shard that no cache holds, encoded by both models.
//!
//! A task's output depends only on the task (its inputs, in order) and the models: a task
//! encoded in this process, in a worker process or in a Lambda invocation gives the same
//! bytes, which is what keeps a build with many workers identical to a build with one.

use std::collections::{HashMap, HashSet};

use serde::{Deserialize, Serialize};

use super::encoded::{ChunkKey, EncodedChunk, EncodedShard, VectorCache};
use super::plan::Plan;
use crate::encode::{join_encoders, DenseEncoder, SparseEncoder, SparseVector};
use crate::error::{Error, Result};

/// Inputs encoded between two progress reports (and per call to both encoders).
pub const ENCODE_STEP: usize = 256;

/// The chunks of one shard that the cache lacks: what one worker encodes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EncodeTask {
    /// The shard's number in the plan.
    pub shard: u32,
    /// The keys to encode, first occurrence in the build only.
    pub keys: Vec<ChunkKey>,
    /// Their encoder inputs.
    pub inputs: Vec<String>,
}

impl Plan {
    /// The encode tasks of the build: per shard, the keys `cache` lacks that no earlier
    /// shard encodes already. Shards with nothing to encode get no task.
    pub fn tasks(&self, cache: &VectorCache) -> Vec<EncodeTask> {
        let mut claimed = HashSet::new();
        let mut tasks = Vec::new();
        for (k, range) in self.shards.iter().enumerate() {
            let mut task = EncodeTask { shard: k as u32, keys: Vec::new(), inputs: Vec::new() };
            for i in range.clone() {
                let key = self.keys[i as usize];
                if cache.get(&key).is_none() && claimed.insert(key) {
                    task.keys.push(key);
                    task.inputs.push(self.inputs[i as usize].clone());
                }
            }
            if !task.keys.is_empty() {
                tasks.push(task);
            }
        }
        tasks
    }

    /// Puts each shard together from the cache and the encoded tasks, in chunk order.
    pub fn assemble(&self, cache: &VectorCache, encoded: Vec<EncodedShard>) -> Result<Vec<EncodedShard>> {
        let mut fresh: HashMap<ChunkKey, EncodedChunk> = HashMap::new();
        let mut dim = None;
        for shard in encoded {
            dim = Some(shard.dim as usize);
            fresh.extend(shard.records.into_iter().map(|r| (r.key, r)));
        }
        let mut shards = Vec::with_capacity(self.shards.len());
        for (k, range) in self.shards.iter().enumerate() {
            let mut records = Vec::with_capacity(range.len());
            for i in range.clone() {
                let key = &self.keys[i as usize];
                let record = match fresh.get(key) {
                    Some(r) => r.clone(),
                    None => cache.get(key).cloned().ok_or_else(|| Error::TaskFailed {
                        task: format!("assembling shard {k}"),
                        reason: format!("chunk {i} was neither cached nor encoded"),
                    })?,
                };
                dim = dim.or(Some(record.dense.len()));
                records.push(record);
            }
            shards.push(EncodedShard::new(k as u32, dim.unwrap_or(0), records));
        }
        Ok(shards)
    }
}

/// Encodes one task with both models, [`ENCODE_STEP`] inputs at a time, calling
/// `progress(done)` after each step.
pub fn encode_task(
    task: &EncodeTask,
    dense: &DenseEncoder,
    sparse: &SparseEncoder,
    progress: &(dyn Fn(usize) + Sync),
) -> Result<EncodedShard> {
    let mut records = Vec::with_capacity(task.keys.len());
    for (step, part) in task.inputs.chunks(ENCODE_STEP).enumerate() {
        let (dense_out, sparse_out) = encode_inputs(part, dense, sparse)?;
        let keys = &task.keys[step * ENCODE_STEP..];
        for ((key, d), s) in keys.iter().zip(dense_out).zip(sparse_out) {
            records.push(EncodedChunk::new(*key, d, s));
        }
        progress(step * ENCODE_STEP + part.len());
    }
    Ok(EncodedShard::new(task.shard, dense.dim(), records))
}

/// Encodes passages with both models, as a build does (what `sextant bench` times).
///
/// On tract both encoders run at once: each splits its batches across the thread pool,
/// and running them side by side keeps every core busy through the other's last batches.
/// ONNX Runtime already runs each batch on every core, so there they take turns
/// ([`join_encoders`]).
pub fn encode_inputs(
    inputs: &[String],
    dense: &DenseEncoder,
    sparse: &SparseEncoder,
) -> Result<(Vec<Vec<f32>>, Vec<SparseVector>)> {
    let refs: Vec<&str> = inputs.iter().map(|s| s.as_str()).collect();
    let (dense_out, sparse_out) =
        join_encoders((dense.backend(), sparse.backend()), || dense.embed_batch(&refs), || sparse.encode_batch(&refs));
    Ok((dense_out?, sparse_out?))
}
