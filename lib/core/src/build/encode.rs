//! The encode step: the chunks of each shard that no cache holds, encoded by both models.
//!
//! A task's output depends only on the task (its inputs, in order) and the models: a task
//! encoded in this process, in a worker process or in a Lambda invocation gives the same
//! bytes, which is what keeps a build with many workers identical to a build with one.

use std::collections::{HashMap, HashSet};

use serde::{Deserialize, Serialize};

use super::encoded::{Cached, ChunkKey, EncodedChunk, EncodedShard, VectorCache};
use super::plan::{chunk_key, Plan, DEFAULT_DENSE_WINDOW};
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
    /// What the dense encoder reads of each, when not its input: its windows
    /// ([`Plan::windows`]). Empty (or shorter than `inputs`): the input itself.
    #[serde(default)]
    pub windows: Vec<Vec<String>>,
    /// The SPLADE vector of each, when a record of the same input under another dense
    /// window gave it ([`Plan::tasks`]): then only the dense encoder reads it. Empty (or
    /// shorter than `inputs`, or `None`): SPLADE encodes it.
    #[serde(default)]
    pub sparse: Vec<Option<SparseVector>>,
}

impl EncodeTask {
    /// A task of shard `shard` with nothing to encode yet.
    pub fn new(shard: u32) -> Self {
        EncodeTask { shard, keys: Vec::new(), inputs: Vec::new(), windows: Vec::new(), sparse: Vec::new() }
    }
}

impl Plan {
    /// The encode tasks of the build: per shard, the keys `cache` lacks that no earlier
    /// shard encodes already. Shards with nothing to encode get no task.
    ///
    /// SPLADE reads a chunk's input whole under any dense window, so a chunk that `cache`
    /// lacks under its key but holds under the key of another dense reading of the same
    /// input (window 0 or the default window, [`key_window`](super::key_window)'s two names
    /// of a chunk read whole, or the default window's windows) takes its SPLADE vector
    /// from that record, and only the dense encoder reads it.
    pub fn tasks(&self, cache: &dyn Cached) -> Vec<EncodeTask> {
        let mut claimed = HashSet::new();
        let mut tasks = Vec::new();
        for (k, range) in self.shards.iter().enumerate() {
            let mut task = EncodeTask::new(k as u32);
            for i in range.clone() {
                let key = self.keys[i as usize];
                if !cache.has(&key) && claimed.insert(key) {
                    task.keys.push(key);
                    task.inputs.push(self.inputs[i as usize].clone());
                    task.windows.push(self.windows.get(i as usize).cloned().unwrap_or_default());
                    task.sparse.push(self.sparse_elsewhere(i as usize, cache));
                }
            }
            if !task.keys.is_empty() {
                tasks.push(task);
            }
        }
        tasks
    }

    /// The SPLADE vector of chunk `i`'s input that `cache` holds under another dense window
    /// than the plan's (0 or [`DEFAULT_DENSE_WINDOW`]): every record of one input has the
    /// same SPLADE vector.
    fn sparse_elsewhere(&self, i: usize, cache: &dyn Cached) -> Option<SparseVector> {
        [0, DEFAULT_DENSE_WINDOW]
            .into_iter()
            .map(|window| chunk_key(&self.options, window, &self.inputs[i]))
            .filter(|other| *other != self.keys[i])
            .find_map(|other| cache.sparse(&other).cloned())
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
                // A cached record holds one vector per window of its chunk: the width of
                // one vector is its length over the plan's windows (one for a chunk read whole).
                let rows = self.windows.get(i as usize).map_or(1, |w| w.len().max(1));
                dim = dim.or(Some(record.dense.len() / rows));
                records.push(record);
            }
            shards.push(EncodedShard::new(k as u32, dim.unwrap_or(0), records));
        }
        Ok(shards)
    }
}

/// Encodes one task with both models, [`ENCODE_STEP`] inputs at a time, calling
/// `progress(done)` after each step. SPLADE reads each input whose vector the task does
/// not give ([`EncodeTask::sparse`]); the dense encoder reads each of its windows, and a
/// record's dense vector is its windows' vectors one after the other.
pub fn encode_task(
    task: &EncodeTask,
    dense: &DenseEncoder,
    sparse: &SparseEncoder,
    progress: &(dyn Fn(usize) + Sync),
) -> Result<EncodedShard> {
    let mut records = Vec::with_capacity(task.keys.len());
    for (step, part) in task.inputs.chunks(ENCODE_STEP).enumerate() {
        let first = step * ENCODE_STEP;
        let windows: Vec<&[String]> = (first..first + part.len())
            .map(|i| match task.windows.get(i) {
                Some(w) if !w.is_empty() => w.as_slice(),
                _ => std::slice::from_ref(&task.inputs[i]),
            })
            .collect();
        let dense_inputs: Vec<&str> = windows.iter().flat_map(|w| w.iter().map(|s| s.as_str())).collect();
        let given = |i: usize| task.sparse.get(i).and_then(Option::as_ref);
        let sparse_inputs: Vec<&str> =
            (first..first + part.len()).filter(|&i| given(i).is_none()).map(|i| task.inputs[i].as_str()).collect();
        let (dense_out, sparse_out) = join_encoders(
            (dense.backend(), sparse.backend()),
            || dense.embed_batch(&dense_inputs),
            || match sparse_inputs.is_empty() {
                true => Ok(Vec::new()),
                false => sparse.encode_batch(&sparse_inputs),
            },
        );
        let (mut dense_out, mut sparse_out) = (dense_out?.into_iter(), sparse_out?.into_iter());
        for (i, (key, w)) in task.keys[first..first + part.len()].iter().zip(&windows).enumerate() {
            let vectors: Vec<f32> = dense_out.by_ref().take(w.len()).flatten().collect();
            let s = match given(first + i) {
                Some(s) => s.clone(),
                None => sparse_out.next().ok_or_else(|| Error::TaskFailed {
                    task: format!("encoding shard {}", task.shard),
                    reason: "SPLADE gave fewer vectors than inputs".into(),
                })?,
            };
            records.push(EncodedChunk::new(*key, vectors, s));
        }
        progress(first + part.len());
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
