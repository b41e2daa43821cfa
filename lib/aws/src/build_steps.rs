//! The index build as steps for a Step Functions workflow: one `plan` invocation, one
//! `encode` invocation per encode task (a Map state, run in parallel and retried), then
//! either one `merge` invocation that publishes a single index, or, for an index of `K`
//! index shards, one `merge_shard` invocation per index shard (a second Map: the Map of
//! merges) and one `publish` invocation. A sharded build is also planned in corpus parts:
//! `plan` cuts the corpus, one `plan_part` invocation per part plans it (the Map of plans)
//! and `gather` gathers them, so no invocation holds the whole plan. Each step reads and
//! writes S3 under the build's prefix, `{target}/builds/{build_id}/`:
//!
//! - `plan`, of a single index, reads the corpus and the current version's manifest and
//!   vector cache, and writes `plan.bin` (the plan and what it needs), one
//!   `task-NNNNN.bin` per encode task and `tasks.json`, their numbers; it answers with
//!   where that list is (the workflow's Distributed Map reads its items there), or
//!   `unchanged: true`. Of a sharded build it lists the corpus and cuts it into parts of
//!   at most `part_bytes` ([`corpus_parts`]): `part-PPPP.json` each, `parts.json` (the
//!   Map of plans' items) and `replaced.json` (the ids per-document objects hold);
//! - `plan_part` reads its part of the corpus and which of its chunks the current
//!   version's cache holds (the keys file beside each cache file, 32 bytes a chunk; the
//!   cache file itself where no keys file is whole), and writes its encode tasks,
//!   its piece of each index shard's plan (`part-PPPP-shard-KKK.bin`) and its summary
//!   ([`PartSummary`]);
//! - `gather` reads the summaries: the build's fingerprint (from every document's hash),
//!   BM25's statistics over the whole corpus (staged for the version,
//!   `version/lexical_stats.bin`), where each part starts (`offsets.json`). It answers
//!   `unchanged: true` when the current version has that fingerprint and shard count;
//!   otherwise it writes `tasks.json`, `merges.json` (the index shards, the Map of
//!   merges' items) and `sources.json` (every file a shard's vectors may be in: the encode
//!   tasks' and the current version's cache), and answers as `plan` does;
//! - `encode` reads `task-K.bin` and writes `encoded-K.bin` and `encode-K.json`, what it
//!   took (idempotent, so a retry is safe);
//! - `merge` reads the plan, every encoded file (checked: a missing or damaged one fails the
//!   build, naming it) and the cache, builds the single index and publishes the version:
//!   `CURRENT` moves only after every file is uploaded, and not at all if anything failed.
//!   On success it removes the build's prefix;
//! - `merge_shard` joins its index shard's pieces of every part ([`ShardPlan::gather`]),
//!   builds the shard from them and the vectors it picks out of the sources, one file at a
//!   time (it never holds another shard's vectors; a vector a keys file listed that its
//!   cache file no longer holds whole is encoded again), and stages it under
//!   `version/shards/NNN/` with its vectors as `version/encoded-NNNNN.bin` and their keys
//!   as `version/encoded-NNNNN.keys` (the next build's cache) and `merged-NNN.json`, what
//!   it made (idempotent);
//! - `publish` writes the root manifest of the staged shards, copies them server-side into
//!   a new version and moves `CURRENT`, as `merge` does; then removes the build's prefix;
//! - `clean` removes the build's prefix after a step failed: the workflow runs it on its
//!   failure path, so a failed build leaves nothing behind (and the bucket's lifecycle rule
//!   expires what a crash of the workflow itself could leave).
//!
//! The same [`sextant_core::build`] functions run in one process (`sextant build`), so a
//! distributed build and a local one make the same index from the same documents: a unit
//! test holds the parts' shard plans to the whole plan's, byte for byte.

use std::time::Instant;

use serde::{Deserialize, Serialize};
use sextant_core::build::{
    encode_task, keys_file, merge, merge_shard, plan_build, plan_part, shard_file, BuildReport as CoreReport, Built,
    CachedKeys, ChunkKey, EncodeTask, EncodedKeys, EncodedShard, Gather, Gathered, PartOffsets, PartSummary, Plan,
    Planned, Previous, ShardPlan, VectorCache, MAX_PARTS, REPORT_FILE,
};
use sextant_core::encode::{DenseEncoder, ModelSet, SparseEncoder, TextTokenizer};
use sextant_core::error::{Error, Result};
use sextant_core::index::LexicalStats;
use sextant_core::shards::{save_shard, shard_prefix, RootManifest, ShardEntry, STATS_FILE};
use sextant_core::storage::{Location, MemStore};
use sextant_finance::Financials;

use super::build_job::{
    answer_published, build_options, corpus_parts, previous_version, read_corpus_part, read_inputs, BuildJob,
    BuildReport, CorpusPart,
};
use super::versions::VersionedIndex;

/// One invocation of the workflow's function: which step, for which build.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "step", rename_all = "snake_case", deny_unknown_fields)]
pub enum StepEvent {
    /// Plan the build.
    Plan {
        /// The build job (as the one-shot function takes it).
        job: serde_json::Value,
        /// The build's id: the Step Functions execution name.
        build_id: String,
    },
    /// Plan one part of a sharded build's corpus.
    PlanPart {
        /// The job, as the plan step returned it.
        job: serde_json::Value,
        /// The build's id.
        build_id: String,
        /// The part.
        part: u32,
    },
    /// Gather a sharded build's planned parts: its encode tasks, index shards and BM25's
    /// statistics, or that nothing changed.
    Gather {
        /// The job, as the plan step returned it.
        job: serde_json::Value,
        /// The build's id.
        build_id: String,
    },
    /// Encode one shard.
    Encode {
        /// The job, as the plan step returned it.
        job: serde_json::Value,
        /// The build's id.
        build_id: String,
        /// The shard.
        shard: u32,
    },
    /// Merge and publish.
    Merge {
        /// The job, as the plan step returned it.
        job: serde_json::Value,
        /// The build's id.
        build_id: String,
        /// What each encode invocation returned (for the report); left out (as the
        /// workflow does), read from the reports the invocations wrote.
        #[serde(default)]
        encoded: Vec<EncodeOutput>,
    },
    /// Merge one index shard of a sharded build and stage it for publishing.
    MergeShard {
        /// The job, as the plan step returned it.
        job: serde_json::Value,
        /// The build's id.
        build_id: String,
        /// The index shard.
        shard: u32,
    },
    /// Publish a sharded build's staged shards as one version.
    Publish {
        /// The job, as the plan step returned it.
        job: serde_json::Value,
        /// The build's id.
        build_id: String,
    },
    /// Remove a failed build's files.
    Clean {
        /// The job (as the workflow was started with it).
        job: serde_json::Value,
        /// The build's id.
        build_id: String,
    },
    /// The run's last step: hand on the build lease its job holds
    /// ([`BuildWorkflow::finish`](crate::build_workflow::BuildWorkflow::finish)).
    Finish {
        /// The job (as the workflow was started with it, its lease included).
        job: serde_json::Value,
        /// Whether the run failed (the lease is then released whatever was written).
        #[serde(default)]
        failed: bool,
    },
}

/// What the clean step answers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CleanOutput {
    /// The build's id.
    pub build_id: String,
    /// Files removed from the build's prefix.
    pub removed: usize,
}

/// The clean step: removes every file under the build's prefix (none there is not an
/// error). The published versions and `CURRENT` are not touched.
pub async fn clean_step(job: &BuildJob, build_id: &str, config: &aws_config::SdkConfig) -> Result<CleanOutput> {
    let target = VersionedIndex::new(config, &Location::parse(&job.target)?)?;
    let dir = build_dir(&target, build_id)?;
    let removed = target.store().delete_prefix(&format!("{dir}/")).await?;
    Ok(CleanOutput { build_id: build_id.to_string(), removed })
}

/// What the plan step answers.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PlanOutput {
    /// The build's id.
    pub build_id: String,
    /// The job, with every default filled in (what the later steps receive).
    pub job: serde_json::Value,
    /// The inputs are the current version's: the workflow stops, nothing is published.
    pub unchanged: bool,
    /// How many shards have chunks to encode: one encode invocation each.
    pub task_count: usize,
    /// The bucket of [`PlanOutput::tasks_key`].
    pub tasks_bucket: String,
    /// Where the shards to encode are listed, a JSON array of their numbers
    /// (`{build}/tasks.json`): the workflow's encode Map reads its items there
    /// (`ItemReader`), so no list of shards passes through the workflow's state, whose
    /// payloads are limited to 256 KiB. Empty when unchanged.
    pub tasks_key: String,
    /// How many index shards the build makes: 0 for a single index (the workflow's
    /// `merge` step), else one `merge_shard` each, then `publish`.
    #[serde(default)]
    pub index_shards: usize,
    /// Where a sharded build's index shards are listed (`{build}/merges.json`, a JSON
    /// array of their numbers): the workflow's Map of merges reads its items there. Empty
    /// for a single index or when unchanged.
    #[serde(default)]
    pub merges_key: String,
    /// How many corpus parts a sharded build plans, one `plan_part` invocation each, then
    /// `gather`, which answers as the plan step does for a single index. 0 otherwise.
    #[serde(default)]
    pub part_count: usize,
    /// Where those parts are listed (`{build}/parts.json`, a JSON array of their
    /// numbers): the workflow's Map of plans reads its items there. Empty otherwise.
    #[serde(default)]
    pub parts_key: String,
    /// The plan's figures.
    pub report: CoreReport,
}

impl PlanOutput {
    /// The answer of a build of `job` whose inputs are unchanged: nothing to encode or
    /// merge, no list written (in `bucket`), an empty report. The steps fill in the rest.
    fn unchanged(build_id: &str, job: &BuildJob, bucket: &str) -> Result<Self> {
        Ok(PlanOutput {
            build_id: build_id.into(),
            job: serde_json::to_value(job)?,
            unchanged: true,
            task_count: 0,
            tasks_bucket: bucket.to_string(),
            tasks_key: String::new(),
            index_shards: 0,
            merges_key: String::new(),
            part_count: 0,
            parts_key: String::new(),
            report: CoreReport::default(),
        })
    }
}

/// What a `plan_part` invocation answers (the gather reads the summary it leaves).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlannedPartOutput {
    /// The part.
    pub part: u32,
    /// Its documents.
    pub documents: usize,
    /// Its chunks.
    pub chunks: usize,
    /// Its encode tasks.
    pub tasks: usize,
    /// Bytes read of the current version's vector cache to learn which chunks it holds:
    /// its keys files (32 bytes a chunk), and the cache files where no keys file is whole.
    pub cache_bytes_read: u64,
    /// Seconds spent reading, planning and writing it.
    pub seconds: f64,
}

/// What a `merge_shard` invocation answers, and leaves beside the staged shard
/// (`merged-NNN.json`) for the `publish` step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MergedShard {
    /// The index shard.
    pub shard: u32,
    /// Its documents.
    pub documents: usize,
    /// Its chunks.
    pub chunks: usize,
    /// The SHA-256 of its staged `manifest.json`, which the root manifest names.
    pub manifest_sha256: String,
    /// Its estimated resident size ([`sextant_core::index::Index::resident_bytes`]).
    pub resident_bytes: u64,
    /// Chunks encoded by the merge: those the plan took as cached (their keys file listed
    /// them) whose records its cache file no longer held whole.
    #[serde(default)]
    pub reencoded: usize,
    /// Seconds spent reading its vectors, merging and staging it.
    pub seconds: f64,
}

/// The files (S3 keys) a sharded build's vectors are in (`sources.json`).
#[derive(Serialize, Deserialize)]
struct Sources {
    /// What this build's encode tasks wrote.
    encoded: Vec<String>,
    /// The current version's vector cache.
    cache: Vec<String>,
}

impl Sources {
    /// The order in which index shard `shard`'s merge reads them: this build's encoded
    /// files, then the cache file of the same index shard (a version the Map of merges
    /// published keeps each index shard's vectors in a file of its number, so a rebuild
    /// at the same shard count usually needs no other), then the rest.
    fn for_shard(self, shard: u32) -> Vec<String> {
        let own = format!("/{}", shard_file(shard as usize));
        let (mine, rest): (Vec<String>, Vec<String>) = self.cache.into_iter().partition(|k| k.ends_with(&own));
        self.encoded.into_iter().chain(mine).chain(rest).collect()
    }
}

/// What a sharded build's plan leaves for the `publish` step (`sharded-plan.json`).
#[derive(Serialize, Deserialize)]
struct ShardedPlanFile {
    /// The plan's report.
    report: CoreReport,
    /// How many index shards.
    index_shards: usize,
    /// The index id.
    index_id: String,
    /// The build's inputs fingerprint.
    inputs_sha256: String,
}

/// What an encode invocation answers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EncodeOutput {
    /// The shard.
    pub shard: u32,
    /// Chunks encoded.
    pub chunks: usize,
    /// Seconds spent encoding.
    pub seconds: f64,
}

/// Files of other crates saved with the index (name, bytes).
type Attachments = Vec<(String, Vec<u8>)>;

/// What `plan.bin` holds: the plan, the files saved with the index, and the plan's report.
#[derive(Serialize, Deserialize)]
struct PlanFile {
    plan: Plan,
    attachments: Attachments,
    report: CoreReport,
}

/// The build's prefix in the target's bucket, after checking the id (letters, digits, `-`
/// and `_`, at most 80: a Step Functions execution name).
fn build_dir(target: &VersionedIndex, build_id: &str) -> Result<String> {
    let ok = !build_id.is_empty()
        && build_id.len() <= 80
        && build_id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if !ok {
        return Err(Error::invalid("build_id", format!("{build_id:?}: use 1 to 80 letters, digits, '-' and '_'")));
    }
    Ok(target.key(&format!("builds/{build_id}")))
}

fn task_file(k: u32) -> String {
    format!("task-{k:05}.bin")
}

/// What encoding shard `k` took ([`EncodeOutput`], JSON), beside its encoded file: the merge
/// step reads it for the report, as the encode Map's results stay in S3.
fn encode_report_file(k: u32) -> String {
    format!("encode-{k:05}.json")
}

/// The list of the shards to encode, in the build's prefix ([`PlanOutput::tasks_key`]).
pub const TASKS_FILE: &str = "tasks.json";
/// The list of a sharded build's index shards, the Map of merges' items
/// ([`PlanOutput::merges_key`]).
pub const MERGES_FILE: &str = "merges.json";
/// The files (S3 keys) a sharded build's vectors are in ([`Sources`]).
const SOURCES_FILE: &str = "sources.json";
/// What a sharded build's plan leaves for `publish`.
const SHARDED_PLAN_FILE: &str = "sharded-plan.json";
/// Under the build's prefix, the new version's files as the Map of merges stages them.
const STAGED: &str = "version/";

/// The list of a sharded build's corpus parts, the Map of plans' items
/// ([`PlanOutput::parts_key`]).
pub const PARTS_FILE: &str = "parts.json";
/// The ids that per-document objects hold, which replace JSONL lines of the same id.
const REPLACED_FILE: &str = "replaced.json";
/// Where each part starts, and the build's fingerprint ([`Gathered`]'s), for the merges.
const OFFSETS_FILE: &str = "offsets.json";

/// Part `p` of the corpus ([`CorpusPart`]).
fn part_file(p: u32) -> String {
    format!("part-{p:04}.json")
}

/// What planning part `p` hands the gather ([`PartSummary`]).
fn part_summary_file(p: u32) -> String {
    format!("part-{p:04}-summary.bin")
}

/// Part `p`'s piece of index shard `k`'s plan.
fn part_piece_file(p: u32, k: u32) -> String {
    format!("part-{p:04}-shard-{k:03}.bin")
}

/// What the merges need of the gather: the build's fingerprint and where each part starts.
#[derive(Serialize, Deserialize)]
struct Offsets {
    inputs_sha256: String,
    parts: Vec<PartOffsets>,
}

/// What merging index shard `k` made ([`MergedShard`]).
fn merged_file(k: u32) -> String {
    format!("merged-{k:03}.json")
}

/// The plan step. Of a single index it plans the whole build; of a sharded one it only
/// cuts the corpus into parts ([`corpus_parts`]), which `plan_part` plans and `gather`
/// gathers, so that no invocation holds the whole corpus's plan.
pub async fn plan_step(
    job: &BuildJob,
    build_id: &str,
    models: &ModelSet,
    config: &aws_config::SdkConfig,
) -> Result<PlanOutput> {
    let t = Instant::now();
    let target = VersionedIndex::new(config, &Location::parse(&job.target)?)?;
    let dir = build_dir(&target, build_id)?;
    let store = target.store();
    let output = PlanOutput::unchanged(build_id, job, store.bucket())?;
    if let Some(count) = job.sharded() {
        super::build_job::warn_facts_left_out(job);
        let (parts, replaced) = corpus_parts(&job.corpus, job.part_bytes, config).await?;
        if parts.len() > MAX_PARTS {
            return Err(Error::invalid(
                "part_bytes",
                format!(
                    "{} parts of at most {} bytes: at most {MAX_PARTS}; use larger parts",
                    parts.len(),
                    job.part_bytes
                ),
            ));
        }
        for (p, part) in parts.iter().enumerate() {
            store.upload(&format!("{dir}/{}", part_file(p as u32)), serde_json::to_vec(part)?.into()).await?;
        }
        store.upload(&format!("{dir}/{REPLACED_FILE}"), serde_json::to_vec(&replaced)?.into()).await?;
        let numbers: Vec<u32> = (0..parts.len() as u32).collect();
        let parts_key = format!("{dir}/{PARTS_FILE}");
        store.upload(&parts_key, serde_json::to_vec(&numbers)?.into()).await?;
        let mut report = CoreReport { index_id: job.index_id.clone(), ..Default::default() };
        report.phases.plan = t.elapsed().as_secs_f64();
        return Ok(PlanOutput {
            unchanged: false,
            index_shards: count,
            part_count: parts.len(),
            parts_key,
            report,
            ..output
        });
    }
    let state = target.pointer().await?;
    let previous = previous_version(&target, &state).await;
    let (documents, facts) = read_inputs(job, config).await?;
    let read = t.elapsed().as_secs_f64();
    let (job2, models2) = (job.clone(), models.clone());
    let planned = tokio::task::spawn_blocking(move || -> Result<(Planned, Attachments)> {
        let attachments: Attachments = Financials::attachment(&facts)?.into_iter().collect();
        let options = build_options(&models2, &job2)?;
        let (dense, sparse) = (TextTokenizer::of_model(&models2.dense)?, TextTokenizer::of_model(&models2.sparse)?);
        let planned = plan_build(documents, &attachments, &options, (&dense, &sparse), &previous, None)?;
        Ok((planned, attachments))
    })
    .await
    .map_err(|e| Error::task_failed("planning the build", e))??;
    let (plan, tasks, mut report, attachments) = match planned {
        (Planned::Unchanged(report), _) => return Ok(PlanOutput { report, ..output }),
        (Planned::Ready { plan, tasks, report }, attachments) => (plan, tasks, report, attachments),
    };
    report.phases.read = read;
    for task in &tasks {
        store.upload(&format!("{dir}/{}", task_file(task.shard)), bincode::serialize(task)?.into()).await?;
    }
    let shards: Vec<u32> = tasks.iter().map(|t| t.shard).collect();
    let tasks_key = format!("{dir}/{TASKS_FILE}");
    store.upload(&tasks_key, serde_json::to_vec(&shards)?.into()).await?;
    let file = PlanFile { plan: *plan, attachments, report: report.clone() };
    store.upload(&format!("{dir}/plan.bin"), bincode::serialize(&file)?.into()).await?;
    Ok(PlanOutput { unchanged: false, task_count: shards.len(), tasks_key, report, ..output })
}

/// The `plan_part` step: part `part` of a sharded build's corpus, read
/// ([`read_corpus_part`]) and planned ([`plan_part`]) against the previous version's
/// vectors of its chunks (each cache file read in turn, keeping only those). It writes the
/// part's encode tasks, its piece of each index shard's plan and its summary for the
/// gather. Running it again writes the same files.
pub async fn plan_part_step(
    job: &BuildJob,
    build_id: &str,
    part: u32,
    models: &ModelSet,
    config: &aws_config::SdkConfig,
) -> Result<PlannedPartOutput> {
    let t = Instant::now();
    let count = sharded_count(job)?;
    let target = VersionedIndex::new(config, &Location::parse(&job.target)?)?;
    let dir = build_dir(&target, build_id)?;
    let store = target.store();
    let corpus_part: CorpusPart = fetch_json(store, &dir, &part_file(part)).await?;
    let replaced: std::collections::HashSet<String> = fetch_json(store, &dir, REPLACED_FILE).await?;
    let documents = read_corpus_part(&job.corpus, &corpus_part, &replaced, config).await?;
    let read = t.elapsed().as_secs_f64();
    let options = build_options(models, job)?;
    let (dense, sparse) = (TextTokenizer::of_model(&models.dense)?, TextTokenizer::of_model(&models.sparse)?);
    let planned = tokio::task::block_in_place(|| plan_part(part, documents, &options, (&dense, &sparse)))?;
    let wanted: std::collections::HashSet<ChunkKey> = planned.keys().iter().copied().collect();
    let (mut cache, mut cache_bytes_read) = (CachedKeys::new(), 0);
    if let Some(pointer) = target.pointer().await?.pointer {
        match target.cache_files(&pointer).await {
            Ok(files) => {
                for key in files {
                    let keys = keys_file(&key);
                    if let Some(o) = store.get(&keys).await? {
                        cache_bytes_read += o.bytes.len() as u64;
                        if cache.add_keys_file_where(&o.bytes, |k| wanted.contains(k)) {
                            continue;
                        }
                        tracing::warn!(file = %keys, "a keys file is damaged: reading its cache file");
                    }
                    if let Some(o) = store.get(&key).await? {
                        cache_bytes_read += o.bytes.len() as u64;
                        cache.add_file_where(&o.bytes, |k| wanted.contains(k));
                    }
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "the current version's vector cache could not be read: encoding the part")
            }
        }
    }
    let mut planned = tokio::task::block_in_place(|| planned.finish(&cache, count))?;
    planned.summary.report.phases.read = read;
    for task in &planned.tasks {
        store.upload(&format!("{dir}/{}", task_file(task.shard)), bincode::serialize(task)?.into()).await?;
    }
    for piece in &planned.pieces {
        let name = part_piece_file(part, piece.shard as u32);
        store.upload(&format!("{dir}/{name}"), bincode::serialize(piece)?.into()).await?;
    }
    let summary = &planned.summary;
    store.upload(&format!("{dir}/{}", part_summary_file(part)), bincode::serialize(summary)?.into()).await?;
    Ok(PlannedPartOutput {
        part,
        documents: summary.documents.len(),
        chunks: summary.chunks as usize,
        tasks: planned.tasks.len(),
        cache_bytes_read,
        seconds: t.elapsed().as_secs_f64(),
    })
}

/// The index shards of a sharded job; an error naming the field for a single index.
fn sharded_count(job: &BuildJob) -> Result<usize> {
    job.sharded()
        .ok_or_else(|| Error::invalid("index_shards", "this step is a sharded build's (index_shards 2 or more)"))
}

/// The `gather` step: reads every part's summary (one missing fails the build, naming it)
/// and gathers them ([`Gather`]). When the fingerprint and the shard count are the
/// current version's, nothing changed: it removes the build's files and answers
/// `unchanged`. Otherwise it writes what the plan step writes for a single index (the
/// encode Map's items) and what the Map of merges and `publish` read: the index shards,
/// the files their vectors may be in, BM25's statistics over the whole corpus, where each
/// part starts, and the plan's report.
pub async fn gather_step(
    job: &BuildJob,
    build_id: &str,
    models: &ModelSet,
    config: &aws_config::SdkConfig,
) -> Result<PlanOutput> {
    let t = Instant::now();
    let count = sharded_count(job)?;
    let target = VersionedIndex::new(config, &Location::parse(&job.target)?)?;
    let dir = build_dir(&target, build_id)?;
    let store = target.store();
    let parts: Vec<u32> = fetch_json(store, &dir, PARTS_FILE).await?;
    let options = build_options(models, job)?;
    // One part's summary at a time beside the sums.
    let mut gather = Gather::new(&options);
    for p in parts {
        let summary: PartSummary = fetch_bincode(store, &dir, &part_summary_file(p)).await?;
        tokio::task::block_in_place(|| gather.add(summary))?;
    }
    let gathered = gather.finish(&[])?;
    let Gathered { inputs_sha256, offsets, stats, tasks, mut report } = gathered;
    report.phases.plan += t.elapsed().as_secs_f64();
    let output = PlanOutput {
        index_shards: count,
        part_count: offsets.len(),
        parts_key: format!("{dir}/{PARTS_FILE}"),
        ..PlanOutput::unchanged(build_id, job, store.bucket())?
    };
    let pointer = target.pointer().await?.pointer;
    if let Some(pointer) = pointer.as_ref().filter(|p| p.shards == count) {
        if target.root(pointer).await.is_ok_and(|(root, _)| root.inputs_sha256 == inputs_sha256) {
            if let Err(e) = store.delete_prefix(&format!("{dir}/")).await {
                tracing::warn!(error = %e, build_id, "could not remove the build's files");
            }
            let chunks = report.chunks;
            report = CoreReport { chunks_encoded: 0, chunks_reused: chunks, unchanged: true, ..report };
            report.seconds = report.phases.total();
            return Ok(PlanOutput { report, ..output });
        }
    }
    let mut sources = Sources {
        encoded: tasks.iter().map(|&k| format!("{dir}/{}", shard_file(k as usize))).collect(),
        cache: Vec::new(),
    };
    // The parts left to the cache what it holds: a merge must find it there, so a cache
    // that cannot be listed now fails the step (the workflow retries it).
    if let Some(pointer) = &pointer {
        sources.cache = target.cache_files(pointer).await?;
    }
    let upload = |name: String, bytes: Vec<u8>| {
        let key = format!("{dir}/{name}");
        async move { store.upload(&key, bytes.into()).await }
    };
    upload(TASKS_FILE.into(), serde_json::to_vec(&tasks)?).await?;
    upload(format!("{STAGED}{STATS_FILE}"), bincode::serialize(&stats)?).await?;
    upload(SOURCES_FILE.into(), serde_json::to_vec(&sources)?).await?;
    let sharded = ShardedPlanFile {
        report: report.clone(),
        index_shards: count,
        index_id: options.index_id.clone(),
        inputs_sha256: inputs_sha256.clone(),
    };
    upload(SHARDED_PLAN_FILE.into(), serde_json::to_vec(&sharded)?).await?;
    upload(OFFSETS_FILE.into(), serde_json::to_vec(&Offsets { inputs_sha256, parts: offsets })?).await?;
    let merges: Vec<u32> = (0..count as u32).collect();
    upload(MERGES_FILE.into(), serde_json::to_vec(&merges)?).await?;
    Ok(PlanOutput {
        unchanged: false,
        task_count: tasks.len(),
        tasks_key: format!("{dir}/{TASKS_FILE}"),
        merges_key: format!("{dir}/{MERGES_FILE}"),
        report,
        ..output
    })
}

/// The encode step: shard `shard` of build `build_id`.
pub async fn encode_step(
    job: &BuildJob,
    build_id: &str,
    shard: u32,
    encoders: &(DenseEncoder, SparseEncoder),
    config: &aws_config::SdkConfig,
) -> Result<EncodeOutput> {
    let target = VersionedIndex::new(config, &Location::parse(&job.target)?)?;
    let dir = build_dir(&target, build_id)?;
    let key = format!("{dir}/{}", task_file(shard));
    let bytes = target.store().get(&key).await?.ok_or_else(|| Error::Storage {
        location: format!("s3://{}/{key}", target.store().bucket()),
        reason: "no such task (was the plan step run for this build?)".into(),
    })?;
    let task: EncodeTask = sextant_core::index::format::decode_bincode(&dir, &task_file(shard), &bytes.bytes)?;
    let t = Instant::now();
    let encoded = tokio::task::block_in_place(|| encode_task(&task, &encoders.0, &encoders.1, &|_| {}))?;
    let seconds = t.elapsed().as_secs_f64();
    target.store().upload(&format!("{dir}/{}", shard_file(shard as usize)), encoded.to_bytes()?.into()).await?;
    let output = EncodeOutput { shard, chunks: task.keys.len(), seconds };
    target.store().upload(&format!("{dir}/{}", encode_report_file(shard)), serde_json::to_vec(&output)?.into()).await?;
    Ok(output)
}

/// The merge step of a single index: checks every encoded file, builds the index,
/// publishes the version and removes the build's prefix. A sharded build merges per index
/// shard instead ([`merge_shard_step`], then [`publish_step`]).
pub async fn merge_step(
    job: &BuildJob,
    build_id: &str,
    encoded: &[EncodeOutput],
    config: &aws_config::SdkConfig,
) -> Result<BuildReport> {
    if let Some(count) = job.sharded() {
        return Err(Error::invalid(
            "step",
            format!("a build of {count} index shards merges each shard (merge_shard), then publishes (publish)"),
        ));
    }
    let target = VersionedIndex::new(config, &Location::parse(&job.target)?)?;
    let expected = target.pointer().await?;
    let previous = previous_version(&target, &expected).await;
    let dir = build_dir(&target, build_id)?;
    let store = target.store();
    let file: PlanFile = fetch_bincode(store, &dir, "plan.bin").await?;
    let tasks = file.plan.tasks(&previous.cache);
    let mut shards = Vec::with_capacity(tasks.len());
    for task in &tasks {
        let name = shard_file(task.shard as usize);
        let location = format!("s3://{}/{dir}/{name}", store.bucket());
        let shard = EncodedShard::from_bytes(&location, &fetch(store, &dir, &name).await?)?;
        if !shard.holds(&task.keys) {
            return Err(Error::IndexCorrupted {
                file: location,
                expected: "the chunks of its task".into(),
                found: format!("{} other records", shard.records.len()),
            });
        }
        shards.push(shard);
    }
    // What each encode invocation took: from the event when the caller passes it, else from
    // the reports the invocations left beside their files.
    let mut reports = encoded.to_vec();
    if reports.is_empty() {
        let numbers: Vec<u32> = tasks.iter().map(|t| t.shard).collect();
        reports = encode_reports(store, &dir, &numbers).await?;
    }
    let (encode_seconds, workers) = (reports.iter().map(|e| e.seconds).sum(), reports.len());
    let (files, report) = tokio::task::spawn_blocking(move || -> Result<(MemStore, CoreReport)> {
        let t = Instant::now();
        let PlanFile { plan, attachments, mut report } = file;
        report.phases.encode = encode_seconds;
        report.workers = workers;
        let assembled = plan.assemble(&previous.cache, shards)?;
        let files = MemStore::new("merged build");
        let index = merge(plan, &assembled, &|_, _, _| {})?;
        report.resident_bytes = index.manifest.resident_bytes;
        report.phases.merge = t.elapsed().as_secs_f64();
        let built = Built { report, index: Some(index), shards: assembled, attachments };
        let report = built.save(&files, &Previous::none())?.report;
        Ok((files, report))
    })
    .await
    .map_err(|e| Error::task_failed("merging the build", e))??;
    let t = Instant::now();
    let published = target.publish(&files, &expected, job.keep_versions).await?;
    if let Err(e) = store.delete_prefix(&format!("{dir}/")).await {
        tracing::warn!(error = %e, build_id, "could not remove the build's files");
    }
    answer_published(job, &target, config, report, published, t.elapsed().as_secs_f64()).await
}

/// The file `name` of the build under `dir`: an error naming it when it is missing.
async fn fetch(store: &crate::s3::S3Store, dir: &str, name: &str) -> Result<Vec<u8>> {
    let key = format!("{dir}/{name}");
    let object = store.get(&key).await?;
    object.map(|o| o.bytes).ok_or_else(|| Error::Storage {
        location: format!("s3://{}/{key}", store.bucket()),
        reason: "missing: the build's step that writes it did not finish".into(),
    })
}

/// What the encode invocations of tasks `numbers` took, from the reports they left beside
/// their files (a missing one counts nothing).
async fn encode_reports(store: &crate::s3::S3Store, dir: &str, numbers: &[u32]) -> Result<Vec<EncodeOutput>> {
    let mut reports = Vec::with_capacity(numbers.len());
    for &k in numbers {
        let key = format!("{dir}/{}", encode_report_file(k));
        if let Some(o) = store.get(&key).await? {
            reports.push(serde_json::from_slice(&o.bytes).map_err(|e| Error::IndexCorrupted {
                file: format!("s3://{}/{key}", store.bucket()),
                expected: "an encode step's report".into(),
                found: e.to_string(),
            })?);
        }
    }
    Ok(reports)
}

/// A bincode file of the build, decoded; an error naming it when it is missing or damaged.
async fn fetch_bincode<T: serde::de::DeserializeOwned>(store: &crate::s3::S3Store, dir: &str, name: &str) -> Result<T> {
    sextant_core::index::format::decode_bincode(dir, name, &fetch(store, dir, name).await?)
}

/// A JSON file of the build, decoded; an error naming it when it is missing or not `T`.
async fn fetch_json<T: serde::de::DeserializeOwned>(store: &crate::s3::S3Store, dir: &str, name: &str) -> Result<T> {
    let bytes = fetch(store, dir, name).await?;
    serde_json::from_slice(&bytes).map_err(|e| Error::IndexCorrupted {
        file: format!("s3://{}/{dir}/{name}", store.bucket()),
        expected: "what the build's earlier steps write".into(),
        found: e.to_string(),
    })
}

/// The `merge_shard` step: index shard `shard` of a sharded build, from its part of the
/// plan and the vectors it picks out of the build's sources (read one file at a time, this
/// build's encoded files first, then the cache file of its own number, until every vector
/// it needs is found), weighed with the whole plan's BM25 statistics, staged under the
/// build's `version/` prefix with its vectors and their keys file (the next build's cache)
/// and what it made (`merged-NNN.json`). Running it again writes the same files.
///
/// The plan took as cached what the keys files list. A vector they list that no source
/// holds whole any more (its cache file damaged since) is encoded here with `models`
/// ([`ShardPlan::lacking`]), so a damaged cache costs encoding, never a failed build.
pub async fn merge_shard_step(
    job: &BuildJob,
    build_id: &str,
    shard: u32,
    models: &ModelSet,
    config: &aws_config::SdkConfig,
) -> Result<MergedShard> {
    let t = Instant::now();
    let target = VersionedIndex::new(config, &Location::parse(&job.target)?)?;
    let dir = build_dir(&target, build_id)?;
    let store = target.store();
    let offsets: Offsets = fetch_json(store, &dir, OFFSETS_FILE).await?;
    let mut pieces = Vec::with_capacity(offsets.parts.len());
    for (p, at) in offsets.parts.iter().enumerate() {
        let name = part_piece_file(p as u32, shard);
        let piece: ShardPlan = fetch_bincode(store, &dir, &name).await?;
        pieces.push((piece, *at));
    }
    let part = tokio::task::block_in_place(|| ShardPlan::gather(shard as usize, pieces, offsets.inputs_sha256))?;
    let stats_name = format!("{STAGED}{STATS_FILE}");
    let stats: LexicalStats = fetch_bincode(store, &dir, &stats_name).await?;
    let sources = fetch_json::<Sources>(store, &dir, SOURCES_FILE).await?;
    let encoded_here: std::collections::HashSet<String> = sources.encoded.iter().cloned().collect();
    let sources = sources.for_shard(shard);
    let wanted: std::collections::HashSet<ChunkKey> = part.keys.iter().copied().collect();
    let (mut cache, mut missing) = (VectorCache::new(), Vec::new());
    for key in &sources {
        if cache.len() == wanted.len() && cache.dim().is_some() {
            break;
        }
        match store.get(key).await? {
            Some(o) => cache.add_file_where(&o.bytes, |k| wanted.contains(k)),
            // What this build's encode steps wrote must be there.
            None if encoded_here.contains(key) => missing.push(format!("s3://{}/{key}", store.bucket())),
            // A cache file gone since its keys file was read: its vectors are encoded below.
            None => tracing::warn!(file = %key, "a cache file is gone: its chunks are encoded again"),
        }
    }
    if cache.len() < wanted.len() && !missing.is_empty() {
        return Err(Error::Storage {
            location: missing.join(", "),
            reason: format!("missing: index shard {shard} needs vectors that only these files could hold"),
        });
    }
    let models = models.clone();
    let (files, merged) = tokio::task::spawn_blocking(move || -> Result<(MemStore, MergedShard)> {
        let reencoded = encode_lacking(&part, &mut cache, &models)?;
        let records = part.records(&cache)?;
        let dim = cache.dim().unwrap_or(0);
        let mut seen = std::collections::HashSet::new();
        let own: Vec<_> = records.iter().filter(|r| seen.insert(r.key)).map(|r| (*r).clone()).collect();
        let (index, order) = merge_shard(part, &records, dim, &stats)?;
        let files = MemStore::new(format!("index shard {shard}"));
        let entry = save_shard(&files, shard as usize, &index, &order)?;
        let encoded = EncodedShard::new(shard, dim, own);
        files.insert(keys_file(&shard_file(shard as usize)), EncodedKeys::of(&encoded).to_bytes()?);
        files.insert(shard_file(shard as usize), encoded.to_bytes()?);
        let merged = MergedShard {
            shard,
            documents: entry.documents,
            chunks: entry.chunks,
            manifest_sha256: entry.manifest_sha256,
            resident_bytes: index.manifest.resident_bytes,
            reencoded,
            seconds: 0.0,
        };
        Ok((files, merged))
    })
    .await
    .map_err(|e| Error::task_failed(format!("merging index shard {shard}"), e))??;
    let mut tasks = tokio::task::JoinSet::new();
    for (name, bytes) in files.objects() {
        let (store, key) = (store.clone(), format!("{dir}/{STAGED}{name}"));
        tasks.spawn(async move { store.upload(&key, bytes).await });
    }
    while let Some(joined) = tasks.join_next().await {
        joined.map_err(|e| Error::task_failed(format!("staging index shard {shard}"), e))??;
    }
    let merged = MergedShard { seconds: t.elapsed().as_secs_f64(), ..merged };
    store.upload(&format!("{dir}/{}", merged_file(shard)), serde_json::to_vec(&merged)?.into()).await?;
    Ok(merged)
}

/// Encodes into `cache` the vectors of `part`'s chunks that it lacks (none: nothing is
/// loaded), with the encoders of `models`, and answers how many chunks that was.
fn encode_lacking(part: &ShardPlan, cache: &mut VectorCache, models: &ModelSet) -> Result<usize> {
    if part.keys.iter().all(|k| cache.get(k).is_some()) {
        return Ok(0);
    }
    let tokenizers = (TextTokenizer::of_model(&models.dense)?, TextTokenizer::of_model(&models.sparse)?);
    let Some(task) = part.lacking(cache, (&tokenizers.0, &tokenizers.1)) else {
        return Ok(0);
    };
    tracing::warn!(
        shard = part.shard,
        chunks = task.keys.len(),
        "vectors the keys files listed are damaged or gone: encoding them again"
    );
    let (dense, sparse) = (DenseEncoder::load(&models.dense)?, SparseEncoder::load(&models.sparse)?);
    cache.insert_encoded(encode_task(&task, &dense, &sparse, &|_| {})?);
    Ok(task.keys.len())
}

/// The `publish` step of a sharded build: reads what every index shard's merge made
/// (one missing fails the build, naming it), writes the root manifest naming the staged
/// shards, their vectors and BM25's statistics, publishes them as one version
/// ([`VersionedIndex::publish_staged`]: copied server-side, the root last, `CURRENT` moved
/// only if no other build moved it since) and removes the build's prefix.
pub async fn publish_step(job: &BuildJob, build_id: &str, config: &aws_config::SdkConfig) -> Result<BuildReport> {
    let target = VersionedIndex::new(config, &Location::parse(&job.target)?)?;
    let expected = target.pointer().await?;
    let dir = build_dir(&target, build_id)?;
    let store = target.store();
    let plan: ShardedPlanFile = fetch_json(store, &dir, SHARDED_PLAN_FILE).await?;
    let mut merged = Vec::with_capacity(plan.index_shards);
    for k in 0..plan.index_shards as u32 {
        let shard: MergedShard = fetch_json(store, &dir, &merged_file(k)).await?;
        merged.push(shard);
    }
    let stats = fetch(store, &dir, &format!("{STAGED}{STATS_FILE}")).await?;
    let entries = merged
        .iter()
        .map(|m| ShardEntry {
            prefix: shard_prefix(m.shard as usize),
            manifest_sha256: m.manifest_sha256.clone(),
            documents: m.documents,
            chunks: m.chunks,
        })
        .collect();
    let encoded = merged.iter().map(|m| shard_file(m.shard as usize)).collect();
    let root = RootManifest::new(plan.index_id, entries, &stats, encoded, plan.inputs_sha256);
    let tasks: Vec<u32> = fetch_json(store, &dir, TASKS_FILE).await?;
    let reports = encode_reports(store, &dir, &tasks).await?;
    let mut report = plan.report;
    // What the merges encoded again was planned as reused.
    let reencoded: usize = merged.iter().map(|m| m.reencoded).sum();
    report.chunks_encoded += reencoded;
    report.chunks_reused = report.chunks_reused.saturating_sub(reencoded);
    report.phases.encode = reports.iter().map(|e| e.seconds).sum();
    report.workers = reports.len();
    // The merges ran side by side: the phase took as long as the slowest.
    report.phases.merge = merged.iter().map(|m| m.seconds).fold(0.0, f64::max);
    report.resident_bytes = merged.iter().map(|m| m.resident_bytes).sum();
    report.seconds = report.phases.total();
    let staged = format!("{dir}/{STAGED}");
    store.upload(&format!("{staged}{REPORT_FILE}"), serde_json::to_vec_pretty(&report)?.into()).await?;
    let t = Instant::now();
    let published = target.publish_staged(&staged, &root, &expected, job.keep_versions).await?;
    if let Err(e) = store.delete_prefix(&format!("{dir}/")).await {
        tracing::warn!(error = %e, build_id, "could not remove the build's files");
    }
    answer_published(job, &target, config, report, published, t.elapsed().as_secs_f64()).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shard_reads_this_builds_vectors_then_its_own_cache_file_first() {
        let sources = Sources {
            encoded: vec!["b/encoded-00004.bin".into(), "b/encoded-00001.bin".into()],
            cache: (0..3).map(|k| format!("v/{}", shard_file(k))).collect(),
        };
        assert_eq!(
            sources.for_shard(1),
            [
                "b/encoded-00004.bin",
                "b/encoded-00001.bin",
                "v/encoded-00001.bin",
                "v/encoded-00000.bin",
                "v/encoded-00002.bin"
            ]
        );
    }
}
