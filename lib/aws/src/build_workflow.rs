//! Every build through the workflow: a corpus write (the S3 event) or the schedule asks for a
//! build ([`BuildWorkflow::request`]); the first request takes the index's build lease and
//! starts a Step Functions execution holding it, requests that arrive while it runs are only
//! counted. The execution's last step ([`BuildWorkflow::finish`]) hands the lease on: released
//! when no write arrived during the run, else to a new execution, started at once, that reads
//! them; released too after a failed run, so the next write starts the next build.
//!
//! ```text
//! S3 events ──► request ──► lease free? ── yes ─► StartExecution(build-<index>-<ms>, job + lease)
//!                                  └─ no ──► count the write (the running build runs again)
//! execution: Plan → Encode* → Merge → Finish ── writes since? ── yes ─► release, request again
//!                                                 └─ no ──► release
//! ```
//!
//! So writes that arrive together (an `aws s3 sync` of a folder) make one execution, and one
//! more for those that arrived during it; never a lone build outside the workflow, and never
//! two executions of one index at once (a lease outlives the workflow's timeout).

use aws_sdk_sfn::error::ProvideErrorMetadata;
use sextant_core::error::{Error, Result};

use crate::build_job::BuildJob;
use crate::build_lease::{BuildLease, LeaseHold};

/// The state machine of the build workflow.
#[derive(Clone)]
pub struct BuildWorkflow {
    client: aws_sdk_sfn::Client,
    arn: String,
}

/// What a request for a build did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Requested {
    /// It took the lease and started the execution of this name.
    Started(String),
    /// A build of the index is running; it runs again for this request.
    Queued,
}

/// How the last step of a run handed the lease on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Handed {
    /// Released: no write arrived during the run, or the run failed.
    Released,
    /// Writes arrived during the run: a new execution of this name reads them.
    Again(String),
    /// The run held no lease (started by hand): nothing to hand on.
    NoLease,
}

impl BuildWorkflow {
    /// The workflow `arn` (a state machine's ARN).
    pub fn new(config: &aws_config::SdkConfig, arn: impl Into<String>) -> Self {
        BuildWorkflow { client: aws_sdk_sfn::Client::new(config), arn: arn.into() }
    }

    /// The workflow the environment names (`SEXTANT_BUILD_WORKFLOW`); `None` when none is.
    pub fn from_env(config: &aws_config::SdkConfig) -> Option<Self> {
        let arn = std::env::var("SEXTANT_BUILD_WORKFLOW").ok().filter(|a| !a.trim().is_empty())?;
        Some(BuildWorkflow::new(config, arn))
    }

    /// The name of a new execution for `index`: `build-<index>-<unix ms>`, within the 80
    /// characters Step Functions allows (an index id is letters, digits, `-` and `_`).
    pub fn execution_name(index: &str) -> String {
        let ms = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_millis();
        let index: String = index.chars().take(56).collect();
        format!("build-{index}-{ms}")
    }

    /// Asks for a build of `job`: counts a write to its index, then takes the lease and
    /// starts an execution holding it, unless a build runs (it runs again when it ends). An
    /// execution that cannot be started lets the lease go and is the error.
    pub async fn request(&self, lease: &BuildLease, job: &BuildJob) -> Result<Requested> {
        lease.note_write(&job.index_id).await?;
        self.start_holding(lease, job).await
    }

    /// Takes the lease for a new execution and starts it (no write counted).
    async fn start_holding(&self, lease: &BuildLease, job: &BuildJob) -> Result<Requested> {
        let name = Self::execution_name(&job.index_id);
        let Some(seen) = lease.acquire(&job.index_id, &name).await? else {
            tracing::info!(index = %job.index_id, "a build of this index is running: it will run again for this request");
            return Ok(Requested::Queued);
        };
        let mut held = job.clone();
        held.lease = Some(LeaseHold { holder: name.clone(), seen });
        let started = self.start(&name, &serde_json::to_value(&held)?).await;
        if let Err(e) = started {
            if let Err(release) = lease.release(&job.index_id, &name).await {
                tracing::error!(index = %job.index_id, error = %release, "the build lease could not be released");
            }
            return Err(e);
        }
        tracing::info!(index = %job.index_id, execution = %name, "build workflow started");
        Ok(Requested::Started(name))
    }

    /// Starts an execution named `name` with `input`.
    pub async fn start(&self, name: &str, input: &serde_json::Value) -> Result<()> {
        self.client
            .start_execution()
            .state_machine_arn(&self.arn)
            .name(name)
            .input(input.to_string())
            .send()
            .await
            .map(|_| ())
            .map_err(|e| Error::Storage {
                location: self.arn.clone(),
                reason: format!(
                    "StartExecution {name}: {}",
                    e.message().map(str::to_string).unwrap_or_else(|| e.to_string())
                ),
            })
    }

    /// The last step of a run of `job` (`failed`: it failed): hands on the lease the job
    /// holds, released when no write arrived during the run or the run failed, else to a
    /// new execution started now.
    pub async fn finish(&self, lease: &BuildLease, job: &BuildJob, failed: bool) -> Result<Handed> {
        let Some(hold) = &job.lease else { return Ok(Handed::NoLease) };
        let index = &job.index_id;
        if failed {
            lease.release(index, &hold.holder).await?;
            return Ok(Handed::Released);
        }
        match lease.finish(index, &hold.holder, hold.seen).await? {
            None => Ok(Handed::Released),
            Some(now) => {
                tracing::info!(index = %index, writes = now.saturating_sub(hold.seen), "writes arrived during the build");
                lease.release(index, &hold.holder).await?;
                let mut next = job.clone();
                next.lease = None;
                match self.start_holding(lease, &next).await? {
                    Requested::Started(name) => Ok(Handed::Again(name)),
                    Requested::Queued => Ok(Handed::Released),
                }
            }
        }
    }
}
