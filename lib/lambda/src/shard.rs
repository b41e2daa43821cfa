//! The shard function: one shard of a sharded index in S3, answering its routers' shard
//! questions ([`sextant_aws::ShardInvocation`], sent with Lambda `Invoke`).
//!
//! - `SEXTANT_INDEXES`: the index, one `s3://bucket/prefix` of published versions.
//! - `SEXTANT_SHARD`: the shard this function serves (0 to K − 1).
//! - No model: every question carries its query already encoded by the router
//!   ([`Engine::without_encoders`]), so a shard function loads none and needs no models layer.
//!
//! Cold start loads the shard of the current version. Every question names the version it
//! is asked about, so a query never mixes two builds: a question about another version
//! loads that version's shard first (versions are immutable, and its root manifest is
//! checked against the SHA-256 the router sends) and keeps it beside the one held, so
//! that routers still on the old version and routers already on the new one are both
//! answered while they refresh. At most two versions are held, the newest two; a question
//! about an older one fails, and its router leaves the shard out until it refreshes. A
//! shard that cannot be loaded fails the questions (Lambda's function error, which the
//! router counts as a shard that did not answer), and is tried again at the next one.

use std::sync::Arc;
use std::time::Instant;

use lambda_http::lambda_runtime::{self, Diagnostic};
use lambda_http::{service_fn, LambdaEvent};
use sextant_aws::versions::Pointer;
use sextant_aws::{Fit, MemoryBudget, ShardInvocation, VersionedIndex};
use sextant_core::error::{Error, Result};
use sextant_core::pipeline::Engine;
use sextant_core::shards::{protocol, RootManifest, ShardResponse};
use sextant_core::storage::Location;

use crate::startup::index_locations;

/// How many versions of its shard a shard function holds at most.
const HELD_VERSIONS: usize = 2;

/// One shard of the index in S3, by version.
pub struct ShardServer {
    source: VersionedIndex,
    shard: usize,
    /// The versions held, oldest first (version ids sort by time).
    held: tokio::sync::Mutex<Vec<(String, Arc<Engine>)>>,
}

impl ShardServer {
    /// Shard `shard` of the index at `source`; nothing loaded yet.
    pub fn new(source: VersionedIndex, shard: usize) -> Self {
        ShardServer { source, shard, held: tokio::sync::Mutex::new(Vec::new()) }
    }

    /// The engine of this shard in the version `pointer` names, loaded first if it is not
    /// held; a version older than every one held (when as many as can be are) is refused.
    pub async fn engine(&self, pointer: &Pointer) -> Result<Arc<Engine>> {
        // One question at a time reaches a Lambda instance: holding the lock through a
        // load keeps a second load of the same version from starting beside it.
        let mut held = self.held.lock().await;
        if let Some((_, engine)) = held.iter().find(|(v, _)| *v == pointer.version) {
            return Ok(engine.clone());
        }
        if held.len() >= HELD_VERSIONS && held.iter().all(|(v, _)| *v > pointer.version) {
            return Err(Error::invalid(
                "version",
                format!(
                    "version {} of {} is older than the versions this shard holds ({}): refresh the router",
                    pointer.version,
                    self.source.location(),
                    held.iter().map(|(v, _)| v.as_str()).collect::<Vec<_>>().join(", ")
                ),
            ));
        }
        let t = Instant::now();
        let (root, _) = self.source.root(pointer).await?;
        // The oldest version goes first when as many as can be are held, so that at most
        // two copies are ever in memory.
        if held.len() >= HELD_VERSIONS {
            let (gone, _) = held.remove(0);
            tracing::info!(shard = self.shard, version = %gone, "an older version of the shard let go");
        }
        self.make_room(&mut held, pointer, &root).await?;
        let (index, _, phases) = self.source.load_shard(pointer, &root, self.shard).await?;
        let engine = Engine::without_encoders(Arc::new(index));
        tracing::info!(
            index = %self.source.location(),
            shard = self.shard,
            version = %pointer.version,
            download_ms = phases.download_ms,
            decode_ms = phases.decode_ms,
            bytes = phases.bytes,
            ms = t.elapsed().as_millis() as u64,
            "shard loaded"
        );
        let engine = Arc::new(engine);
        held.push((pointer.version.clone(), engine.clone()));
        held.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(engine)
    }

    /// Whether the shard of version `pointer` may be loaded beside the versions `held`, as
    /// the API functions decide ([`sextant_aws::memory`], from the function's memory less
    /// a shard function's smaller reserve, since it holds no model, and the shard
    /// manifest's estimate): beside them (a swap), in their place (they are let go first),
    /// or not at all (refused with one log line and the `IndexTooLarge` metric).
    async fn make_room(
        &self,
        held: &mut Vec<(String, Arc<Engine>)>,
        pointer: &Pointer,
        root: &RootManifest,
    ) -> Result<()> {
        let Some(function) = MemoryBudget::shard_from_env() else { return Ok(()) };
        let incoming = self.source.shard_resident_estimate(pointer, root, self.shard).await?;
        let serving = held.iter().map(|(_, e)| e.index().manifest.resident_bytes).sum();
        match function.fit(serving, incoming) {
            Fit::Swap => Ok(()),
            Fit::InPlace => {
                tracing::warn!(
                    shard = self.shard,
                    version = %pointer.version,
                    "two versions of the shard do not fit this function's memory: letting the held ones go first"
                );
                held.clear();
                Ok(())
            }
            Fit::TooLarge { needed, budget } => {
                sextant_aws::memory::report_too_large(&root.index_id, &pointer.version, incoming, needed, &function);
                Err(Error::invalid(
                    "ShardMemory",
                    format!(
                        "shard {} of version {} needs {} MiB to load and this function has {} MiB for it: set \
                         ShardMemory to at least {} MB",
                        self.shard,
                        pointer.version,
                        needed.div_ceil(1 << 20),
                        budget >> 20,
                        function.needed_mb(incoming)
                    ),
                ))
            }
        }
    }

    /// Answers one invocation, about the version it names (the current one when it names
    /// none).
    pub async fn answer(&self, invocation: ShardInvocation) -> Result<ShardResponse> {
        let pointer = if invocation.version.is_empty() { self.source.current().await? } else { invocation.pointer() };
        let engine = self.engine(&pointer).await?;
        let request = invocation.request;
        tokio::task::spawn_blocking(move || protocol::answer(&engine, &request))
            .await
            .map_err(|e| Error::task_failed("answering a shard question", e))?
    }
}

/// The shard this function serves and its index, from `SEXTANT_SHARD` and `SEXTANT_INDEXES`.
fn shard_from_env() -> Result<(usize, Location)> {
    let raw = std::env::var("SEXTANT_SHARD").unwrap_or_default();
    let shard = raw.trim().parse::<usize>().map_err(|_| {
        Error::invalid("SEXTANT_SHARD", format!("{raw:?} is not a shard number: name the shard this function serves"))
    })?;
    let mut locations = index_locations()?;
    match (locations.len(), locations.pop()) {
        (1, Some(location @ Location::S3 { .. })) => Ok((shard, location)),
        _ => Err(Error::invalid("SEXTANT_INDEXES", "a shard function serves one index: name one s3:// location")),
    }
}

/// The `shard` function: loads its shard of the current version (cold start; a shard that
/// fails to load is logged and loaded again at the first question), then answers each
/// invocation with the shard protocol's answer, or a function error (`InvalidEvent` for a
/// payload that is not a shard question, `ShardFailed` otherwise).
pub fn serve_shard() -> std::result::Result<(), lambda_http::Error> {
    tokio::runtime::Builder::new_multi_thread().enable_all().build()?.block_on(async {
        let t = Instant::now();
        let (shard, location) = shard_from_env()?;
        let source = VersionedIndex::new(&sextant_aws::sdk_config().await, &location)?;
        let server = ShardServer::new(source, shard);
        match server.source.current().await {
            Ok(pointer) => match server.engine(&pointer).await {
                Ok(_) => tracing::info!(shard, ms = t.elapsed().as_millis() as u64, "cold start: done"),
                Err(e) => {
                    tracing::error!(shard, error = %e, "cold start: shard not loaded; will load at the first question")
                }
            },
            Err(e) => {
                tracing::error!(shard, error = %e, "cold start: no version to load; will load at the first question")
            }
        }
        let server = &server;
        lambda_runtime::run(service_fn(move |event: LambdaEvent<serde_json::Value>| async move {
            let invocation: ShardInvocation = serde_path_to_error::deserialize(event.payload).map_err(|e| {
                let path = e.path().to_string();
                Diagnostic {
                    error_type: "InvalidEvent".into(),
                    error_message: format!("not a shard question: {path}: {}", e.into_inner()),
                }
            })?;
            server.answer(invocation).await.map_err(|e| {
                tracing::error!(shard = server.shard, error = %e, "shard question failed");
                Diagnostic { error_type: "ShardFailed".into(), error_message: e.to_string() }
            })
        }))
        .await
    })
}
