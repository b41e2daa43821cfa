//! The index build as three steps for a Step Functions workflow: one `plan` invocation, one
//! `encode` invocation per shard (a Map state, run in parallel and retried), one `merge`
//! invocation that publishes. Each step reads and writes S3 under the build's prefix,
//! `{target}/builds/{build_id}/`:
//!
//! - `plan` reads the corpus and the current version's manifest and vector cache, and
//!   writes `plan.bin` (the plan and what it needs), one `task-NNNNN.bin` per shard that
//!   has chunks to encode and `tasks.json`, their numbers; it answers with where that list
//!   is (the workflow's Distributed Map reads its items there), or `unchanged: true`;
//! - `encode` reads `task-K.bin` and writes `encoded-K.bin` and `encode-K.json`, what it
//!   took (idempotent, so a retry is safe);
//! - `merge` reads the plan, every encoded shard (checked: a missing or damaged one fails the
//!   build, naming it) and the cache, builds the indexes (a single index, or the job's
//!   `index_shards` index shards under one root manifest) and publishes the version: `CURRENT`
//!   moves only after every file is uploaded, and not at all if anything failed. On success
//!   it removes the build's prefix;
//! - `clean` removes the build's prefix after a step failed: the workflow runs it on its
//!   failure path, so a failed build leaves nothing behind (and the bucket's lifecycle rule
//!   expires what a crash of the workflow itself could leave).
//!
//! The same [`sextant_core::build`] functions run in one process (`sextant build`), so a
//! distributed build and a local one make the same index from the same plan.

use std::time::Instant;

use serde::{Deserialize, Serialize};
use sextant_core::build::{
    encode_task, merge, merge_shards, plan_build, shard_file, BuildReport as CoreReport, Built, BuiltShards,
    EncodeTask, EncodedShard, Plan, Planned, Previous,
};
use sextant_core::encode::{DenseEncoder, ModelSet, SparseEncoder, TextTokenizer};
use sextant_core::error::{Error, Result};
use sextant_core::storage::{Location, MemStore};
use sextant_finance::Financials;

use super::build_job::{build_options, previous_version, read_inputs, BuildJob, BuildReport};
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
    /// The plan's figures.
    pub report: CoreReport,
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

/// The plan step.
pub async fn plan_step(
    job: &BuildJob,
    build_id: &str,
    models: &ModelSet,
    config: &aws_config::SdkConfig,
) -> Result<PlanOutput> {
    let t = Instant::now();
    let target = VersionedIndex::new(config, &Location::parse(&job.target)?)?;
    let dir = build_dir(&target, build_id)?;
    let previous = previous_version(&target, &target.pointer().await?).await;
    let (documents, facts) = read_inputs(job, config).await?;
    let read = t.elapsed().as_secs_f64();
    let (job2, models2) = (job.clone(), models.clone());
    let planned = tokio::task::spawn_blocking(move || -> Result<(Planned, Attachments)> {
        let attachments: Attachments = Financials::attachment(&facts)?.into_iter().collect();
        let options = build_options(&models2, &job2)?;
        let (dense, sparse) = (TextTokenizer::of_model(&models2.dense)?, TextTokenizer::of_model(&models2.sparse)?);
        // A sharded index keeps no facts (its fingerprint is of the documents alone).
        let attachments = if job2.sharded().is_some() {
            super::build_job::warn_facts_left_out(&job2);
            Attachments::new()
        } else {
            attachments
        };
        let planned = plan_build(documents, &attachments, &options, (&dense, &sparse), &previous, job2.sharded())?;
        Ok((planned, attachments))
    })
    .await
    .map_err(|e| Error::task_failed("planning the build", e))??;
    let job_value = serde_json::to_value(job)?;
    let bucket = target.store().bucket().to_string();
    let output = |unchanged, task_count, tasks_key, report| PlanOutput {
        build_id: build_id.into(),
        job: job_value,
        unchanged,
        task_count,
        tasks_bucket: bucket,
        tasks_key,
        report,
    };
    let (plan, tasks, mut report, attachments) = match planned {
        (Planned::Unchanged(report), _) => return Ok(output(true, 0, String::new(), report)),
        (Planned::Ready { plan, tasks, report }, attachments) => (plan, tasks, report, attachments),
    };
    report.phases.read = read;
    let store = target.store();
    for task in &tasks {
        store.upload(&format!("{dir}/{}", task_file(task.shard)), bincode::serialize(task)?.into()).await?;
    }
    let file = PlanFile { plan: *plan, attachments, report };
    store.upload(&format!("{dir}/plan.bin"), bincode::serialize(&file)?.into()).await?;
    let shards: Vec<u32> = tasks.iter().map(|t| t.shard).collect();
    let tasks_key = format!("{dir}/{TASKS_FILE}");
    store.upload(&tasks_key, serde_json::to_vec(&shards)?.into()).await?;
    Ok(output(false, shards.len(), tasks_key, file.report))
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

/// The merge step: checks every encoded shard, builds the indexes, publishes the version
/// and removes the build's prefix.
pub async fn merge_step(
    job: &BuildJob,
    build_id: &str,
    encoded: &[EncodeOutput],
    config: &aws_config::SdkConfig,
) -> Result<BuildReport> {
    let target = VersionedIndex::new(config, &Location::parse(&job.target)?)?;
    let expected = target.pointer().await?;
    let previous = previous_version(&target, &expected).await;
    let dir = build_dir(&target, build_id)?;
    let store = target.store();
    let get = |name: String| {
        let key = format!("{dir}/{name}");
        async move {
            let object = store.get(&key).await?;
            object.map(|o| o.bytes).ok_or_else(|| Error::Storage {
                location: format!("s3://{}/{key}", store.bucket()),
                reason: "missing: the build's step that writes it did not finish".into(),
            })
        }
    };
    let file: PlanFile = sextant_core::index::format::decode_bincode(&dir, "plan.bin", &get("plan.bin".into()).await?)?;
    let tasks = file.plan.tasks(&previous.cache);
    let mut shards = Vec::with_capacity(tasks.len());
    for task in &tasks {
        let name = shard_file(task.shard as usize);
        let location = format!("s3://{}/{dir}/{name}", store.bucket());
        let shard = EncodedShard::from_bytes(&location, &get(name).await?)?;
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
    // the reports the invocations left beside their files (a missing one counts nothing).
    let mut reports = encoded.to_vec();
    if reports.is_empty() {
        for task in &tasks {
            let key = format!("{dir}/{}", encode_report_file(task.shard));
            if let Some(o) = store.get(&key).await? {
                reports.push(serde_json::from_slice(&o.bytes).map_err(|e| Error::IndexCorrupted {
                    file: format!("s3://{}/{key}", store.bucket()),
                    expected: "an encode step's report".into(),
                    found: e.to_string(),
                })?);
            }
        }
    }
    let (encode_seconds, workers) = (reports.iter().map(|e| e.seconds).sum(), reports.len());
    let sharded = job.sharded();
    let (files, report) = tokio::task::spawn_blocking(move || -> Result<(MemStore, CoreReport)> {
        let t = Instant::now();
        let PlanFile { plan, attachments, mut report } = file;
        report.phases.encode = encode_seconds;
        report.workers = workers;
        let assembled = plan.assemble(&previous.cache, shards)?;
        let files = MemStore::new("merged build");
        if let Some(count) = sharded {
            let shards = merge_shards(plan, &assembled, count, &|_, _, _| {})?;
            report.resident_bytes = shards.indexes.iter().map(|i| i.manifest.resident_bytes).sum();
            report.phases.merge = t.elapsed().as_secs_f64();
            let built = BuiltShards { shards: Some(shards), encoded: assembled, report };
            let report = built.save(&files, &Previous::none())?;
            return Ok((files, report));
        }
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
    Ok(BuildReport { build: report, published: Some(published), publish_seconds: t.elapsed().as_secs_f64() })
}
