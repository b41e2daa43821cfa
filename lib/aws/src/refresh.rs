//! Loading indexes from S3 at cold start, and swapping in newly published versions in
//! a warm function.
//!
//! A warm function checks each index's `CURRENT` pointer at most every `interval` (the
//! caller asks [`Refresher::begin`] for a [`CheckPermit`] and runs [`Refresher::check_now`]
//! with it in the background, so no request waits for it). The permit ends the check when
//! dropped, even by a panic or a cancelled task; and a check that has run for
//! [`STALE_CHECK`] (a Lambda container frozen between invocations mid-check) no longer
//! blocks the next one. A new version is downloaded, verified and decoded beside the
//! one being served and handed back as a [`LoadedIndex`]; the caller swaps it in, and
//! requests in flight finish on the old one. A version that fails to download or verify is
//! logged as an error and remembered, so it is not fetched again until the pointer moves;
//! the old version keeps serving. Nothing here knows how the indexes are served.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sextant_core::error::{Error, Result};
use sextant_core::index::Index;
use sextant_core::pipeline::{Engine, SharedModels};
use sextant_core::shards::{Searcher, ShardSet};
use sextant_finance::{FactStore, Financials};

use super::memory::{Fit, MemoryBudget};
use super::shard_function::ShardFunctions;
use super::versions::{Pointer, VersionedIndex};

/// Phase timings of one load, in milliseconds.
#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
pub struct LoadTimings {
    /// Reading `CURRENT`.
    pub pointer_ms: u64,
    /// Downloading the manifest and files.
    pub download_ms: u64,
    /// Verifying checksums and decoding.
    pub decode_ms: u64,
    /// Loading the models: zero when the process had loaded them already (they are
    /// shared by every index it serves).
    pub models_ms: u64,
    /// Bytes downloaded.
    pub bytes: u64,
}

/// One index version, loaded and ready to serve.
pub struct LoadedIndex {
    /// Its engine (over the shared models), or of a sharded version the router over its
    /// shard functions.
    pub searcher: Searcher,
    /// Its facts and company dictionary.
    pub financials: Financials,
    /// The pointer it was published under.
    pub pointer: Pointer,
    /// How long each phase took.
    pub timings: LoadTimings,
}

/// Cold start of one S3 index: download, verify and decode the current version, then load
/// the models (unless another index of the process loaded them already) and assemble the
/// engine (checking the index was built with these models).
///
/// The phases run one after the other. Loading the models alongside the download was
/// measured slower on a 2-core machine (the model load and the decode compete for the
/// same cores as the transfer): 2.1–2.3 s instead of 1.6 s for a 100k-chunk index.
///
/// A sharded version ([`Pointer::shards`]) is opened as its router: each shard's store
/// (its documents, [`VersionedIndex::load_shard_store`]), BM25's statistics from the root,
/// and a client of each shard
/// function that `shards` names, asked about this version only.
pub async fn open_from_s3(
    source: &VersionedIndex,
    models: &Arc<SharedModels>,
    shards: Option<&ShardFunctions>,
) -> Result<LoadedIndex> {
    let t = Instant::now();
    let pointer = source.current().await?;
    let pointer_ms = t.elapsed().as_millis() as u64;
    let loaded = open_version(source, &pointer, models, shards).await?;
    let timings = LoadTimings { pointer_ms, ..loaded.timings };
    tracing::info!(
        index = %source.location(),
        version = %pointer.version,
        pointer_ms = timings.pointer_ms,
        download_ms = timings.download_ms,
        decode_ms = timings.decode_ms,
        models_ms = timings.models_ms,
        bytes = timings.bytes,
        "cold start: index loaded from S3"
    );
    Ok(LoadedIndex { timings, ..loaded })
}

/// The engine of `index` over the shared `models` (loading them first unless the process
/// has), off the async threads, and how long the models took to load.
pub async fn open_engine(models: &Arc<SharedModels>, index: Arc<Index>) -> Result<(Engine, Duration)> {
    let (shared, id) = (models.clone(), index.manifest.index_id.clone());
    tokio::task::spawn_blocking(move || shared.engine(index))
        .await
        .map_err(|e| Error::task_failed(format!("opening index {id}"), e))?
}

/// Downloads, verifies and decodes the version `pointer` names and assembles its engine,
/// or its router over `shards` when the version is sharded.
async fn open_version(
    source: &VersionedIndex,
    pointer: &Pointer,
    models: &Arc<SharedModels>,
    shards: Option<&ShardFunctions>,
) -> Result<LoadedIndex> {
    if pointer.shards > 0 {
        return open_router(source, pointer, models, shards).await;
    }
    let (index, financials, phases) = source.load(pointer).await?;
    let (engine, took) = open_engine(models, Arc::new(index)).await?;
    let timings = LoadTimings {
        pointer_ms: 0,
        download_ms: phases.download_ms,
        decode_ms: phases.decode_ms,
        models_ms: took.as_millis() as u64,
        bytes: phases.bytes,
    };
    Ok(LoadedIndex { searcher: Searcher::Single(Arc::new(engine)), financials, pointer: pointer.clone(), timings })
}

/// The router of the sharded version `pointer` names: every shard's store, loaded one
/// after the other (so no more than one shard's files are in memory beside the stores),
/// the router's engine over the shared models, and the shard functions `shards` names,
/// with their deadline. A sharded build keeps no facts.
async fn open_router(
    source: &VersionedIndex,
    pointer: &Pointer,
    models: &Arc<SharedModels>,
    shards: Option<&ShardFunctions>,
) -> Result<LoadedIndex> {
    let (root, stats) = source.root(pointer).await?;
    let Some(functions) = shards else {
        return Err(Error::invalid(
            "SEXTANT_SHARD_FUNCTION",
            format!(
                "is not set, and version {} of {} is an index of {} shards: name the shard functions",
                pointer.version,
                source.location(),
                root.shards.len()
            ),
        ));
    };
    let (mut stores, mut order) = (Vec::new(), Vec::new());
    let (mut download_ms, mut decode_ms, mut bytes) = (0, 0, 0);
    for k in 0..root.shards.len() {
        let (store, o, phases) = source.load_shard_store(pointer, &root, k).await?;
        (download_ms, decode_ms, bytes) =
            (download_ms + phases.download_ms, decode_ms + phases.decode_ms, bytes + phases.bytes);
        stores.push(Arc::new(store));
        order.push(o);
    }
    let (engine, took) = open_engine(models, Arc::new(stores[0].router_index())).await?;
    let clients = functions.shards(&root.index_id, pointer);
    let router = ShardSet::with_shards(Arc::new(engine), stores, clients, Some(order), stats)?
        .with_deadline(functions.deadline());
    let financials = Financials::new(FactStore::default(), &router);
    let timings = LoadTimings { pointer_ms: 0, download_ms, decode_ms, models_ms: took.as_millis() as u64, bytes };
    Ok(LoadedIndex { searcher: Searcher::Sharded(Arc::new(router)), financials, pointer: pointer.clone(), timings })
}

impl LoadedIndex {
    /// The index id it serves.
    pub fn index_id(&self) -> &str {
        &self.searcher.engine().index().manifest.index_id
    }

    /// The bytes it holds in memory, as far as known: the manifest's estimate for one
    /// index; for a router, the bytes of its shards' stores as downloaded.
    pub fn resident_bytes(&self) -> u64 {
        match &self.searcher {
            Searcher::Single(engine) => engine.index().manifest.resident_bytes,
            Searcher::Sharded(_) => self.timings.bytes,
        }
    }
}

/// One index served from S3.
struct Source {
    index: VersionedIndex,
    /// The version served.
    version: String,
    /// The last version refused, not to be fetched again.
    refused: Option<String>,
    /// The resident bytes its manifest estimates for the version served (0: unknown).
    resident: u64,
}

/// Watches the `CURRENT` pointers of the S3 indexes and loads new versions.
pub struct Refresher {
    models: Arc<SharedModels>,
    /// The shard functions of sharded indexes.
    shards: Option<ShardFunctions>,
    /// The memory this function has for its indexes, when known ([`MemoryBudget`]).
    budget: Option<MemoryBudget>,
    interval: Duration,
    sources: Mutex<HashMap<String, Source>>,
    last_check: Mutex<Option<Instant>>,
    running: Arc<Mutex<Option<Instant>>>,
}

/// A check started longer ago than this is presumed lost (its container was frozen or its
/// task died): the next one may start.
pub const STALE_CHECK: Duration = Duration::from_secs(600);

/// A check in progress ([`Refresher::begin`]); dropping it ends the check.
pub struct CheckPermit {
    running: Arc<Mutex<Option<Instant>>>,
    started: Instant,
}

impl Drop for CheckPermit {
    fn drop(&mut self) {
        let mut running = self.running.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        // A later check may have taken over from this one (it went stale): leave it be.
        if *running == Some(self.started) {
            *running = None;
        }
    }
}

impl Refresher {
    /// Checks at most every `interval`; new versions are opened with `models`.
    pub fn new(interval: Duration, models: Arc<SharedModels>) -> Arc<Self> {
        Self::within(interval, models, None, None)
    }

    /// [`Refresher::new`], loading only the versions that fit `budget` (see
    /// [`crate::memory`]): beside the one served, or in its place; a sharded version is
    /// opened as the router over the shard functions `shards` names.
    pub fn within(
        interval: Duration,
        models: Arc<SharedModels>,
        budget: Option<MemoryBudget>,
        shards: Option<ShardFunctions>,
    ) -> Arc<Self> {
        Arc::new(Refresher {
            models,
            shards,
            budget,
            interval,
            sources: Mutex::new(HashMap::new()),
            last_check: Mutex::new(Some(Instant::now())),
            running: Arc::new(Mutex::new(None)),
        })
    }

    /// Watches index `id`, now serving `version` (empty when none could be loaded) whose
    /// manifest estimates `resident` bytes, at `index`; `refused` names a version not to
    /// fetch again (one too large for this function).
    pub fn watch(&self, id: &str, index: VersionedIndex, version: String, resident: u64, refused: Option<String>) {
        let source = Source { index, version, refused, resident };
        self.sources.lock().expect("sources lock").insert(id.to_string(), source);
    }

    /// The ids of the indexes watched that serve no version yet (they failed to load).
    pub fn watched_without_version(&self) -> Vec<String> {
        let sources = self.sources.lock().expect("sources lock");
        sources.iter().filter(|(_, s)| s.version.is_empty()).map(|(id, _)| id.clone()).collect()
    }

    /// Stops watching index `id` (it was deleted): a check no longer loads its versions.
    pub fn unwatch(&self, id: &str) {
        self.sources.lock().expect("sources lock").remove(id);
    }

    /// A permit to check now, when a check is due and none is running (or the running one is
    /// older than [`STALE_CHECK`]); `None` otherwise.
    pub fn begin(&self) -> Option<CheckPermit> {
        let mut last = self.last_check.lock().unwrap_or_else(|p| p.into_inner());
        if last.is_some_and(|t| t.elapsed() < self.interval) {
            return None;
        }
        let mut running = self.running.lock().unwrap_or_else(|p| p.into_inner());
        if running.is_some_and(|t| t.elapsed() < STALE_CHECK) {
            return None;
        }
        let started = Instant::now();
        *running = Some(started);
        *last = Some(started);
        Some(CheckPermit { running: self.running.clone(), started })
    }

    /// Checks every pointer now and hands each new version that loads to `swap_in`, with its
    /// index id, as soon as it is loaded (what the background task runs); the check ends
    /// with `permit`.
    ///
    /// A version that does not fit beside the one served ([`Fit::InPlace`]) is loaded after
    /// `unload` lets the served one go; one that does not fit at all is refused (a log line
    /// and the `IndexTooLarge` metric) and not fetched again.
    pub async fn check_now(&self, permit: CheckPermit, swap_in: impl Fn(&str, LoadedIndex), unload: impl Fn(&str)) {
        self.check_pointers(&swap_in, &unload).await;
        drop(permit);
    }

    /// Whether version `pointer` of `id` may be loaded now: `false` when it was refused
    /// for its size (and marked so); `unload` is called first when it must replace the
    /// served one in place.
    async fn make_room(&self, id: &str, index: &VersionedIndex, pointer: &Pointer, unload: &impl Fn(&str)) -> bool {
        let Some(budget) = self.budget else { return true };
        let incoming = match index.resident_estimate(pointer).await {
            Ok(n) => n,
            // The load reads the manifest again and reports what is wrong with it.
            Err(_) => return true,
        };
        let serving = self.sources.lock().expect("sources lock").get(id).map_or(0, |s| s.resident);
        match budget.fit(serving, incoming) {
            Fit::Swap => true,
            Fit::InPlace => {
                tracing::warn!(
                    index = %id,
                    version = %pointer.version,
                    "two copies of the index do not fit this function's memory: letting the served one go \
                     and loading the new one in its place (503 meanwhile)"
                );
                unload(id);
                true
            }
            Fit::TooLarge { needed, .. } => {
                crate::memory::report_too_large(id, &pointer.version, incoming, needed, &budget);
                if let Some(s) = self.sources.lock().expect("sources lock").get_mut(id) {
                    s.refused = Some(pointer.version.clone());
                }
                false
            }
        }
    }

    async fn check_pointers(&self, swap_in: &impl Fn(&str, LoadedIndex), unload: &impl Fn(&str)) {
        let ids: Vec<(String, VersionedIndex, String, Option<String>)> = self
            .sources
            .lock()
            .expect("sources lock")
            .iter()
            .map(|(id, s)| (id.clone(), s.index.clone(), s.version.clone(), s.refused.clone()))
            .collect();
        for (id, index, serving, refused) in ids {
            let pointer = match index.pointer().await {
                Ok(p) => p.pointer,
                Err(e) => {
                    tracing::warn!(
                        index = %id,
                        error = %e,
                        "could not read the version pointer; still serving {serving}"
                    );
                    continue;
                }
            };
            let Some(pointer) = pointer else { continue };
            if pointer.version == serving || refused.as_deref() == Some(pointer.version.as_str()) {
                continue;
            }
            if !self.make_room(&id, &index, &pointer, unload).await {
                continue;
            }
            let t = Instant::now();
            match self.open(&id, &index, &pointer).await {
                Ok(loaded) => {
                    if !self.sources.lock().expect("sources lock").contains_key(&id) {
                        // Deleted while it loaded ([`Refresher::unwatch`]): not served again.
                        continue;
                    }
                    let resident = loaded.resident_bytes();
                    swap_in(&id, loaded);
                    tracing::info!(
                        index = %id,
                        from = %serving,
                        to = %pointer.version,
                        ms = t.elapsed().as_millis() as u64,
                        "swapped to a new index version"
                    );
                    if let Some(s) = self.sources.lock().expect("sources lock").get_mut(&id) {
                        s.version = pointer.version.clone();
                        s.resident = resident;
                    }
                }
                Err(e) => {
                    let serving = if serving.is_empty() { "nothing (503)" } else { serving.as_str() };
                    tracing::error!(
                        index = %id,
                        version = %pointer.version,
                        error = %e,
                        "refused a new index version; still serving {serving}"
                    );
                    // A version that is itself bad is not fetched again; a store that
                    // failed to answer is asked again at the next check.
                    if matches!(e, Error::IndexCorrupted { .. } | Error::UnsupportedFormat { .. } | Error::Model { .. })
                    {
                        if let Some(s) = self.sources.lock().expect("sources lock").get_mut(&id) {
                            s.refused = Some(pointer.version.clone());
                        }
                    }
                }
            }
        }
    }

    async fn open(&self, id: &str, index: &VersionedIndex, pointer: &Pointer) -> Result<LoadedIndex> {
        let loaded = open_version(index, pointer, &self.models, self.shards.as_ref()).await?;
        let found = loaded.index_id();
        if found != id {
            return Err(Error::IndexCorrupted {
                file: index.location(),
                expected: format!("index id {id:?}"),
                found: found.to_string(),
            });
        }
        Ok(loaded)
    }
}

#[cfg(test)]
mod tests {
    use sextant_core::encode::ModelSet;

    use super::*;

    fn refresher(interval: Duration) -> Arc<Refresher> {
        Refresher::new(interval, Arc::new(SharedModels::new(ModelSet::under(std::path::Path::new("/nonexistent")))))
    }

    #[test]
    fn a_check_that_panics_or_is_dropped_does_not_stop_later_ones() {
        let r = refresher(Duration::from_millis(5));
        assert!(r.begin().is_none(), "not due right after start");
        std::thread::sleep(Duration::from_millis(10));
        let permit = r.begin().expect("due");
        assert!(r.begin().is_none(), "one check at a time");
        // The task running the check panics: its permit is dropped while unwinding.
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
            let _held = permit;
            panic!("a check went wrong");
        }));
        assert!(outcome.is_err());
        std::thread::sleep(Duration::from_millis(10));
        assert!(r.begin().is_some(), "the next check starts");
    }

    #[test]
    fn a_check_frozen_past_the_stale_limit_no_longer_blocks() {
        let r = refresher(Duration::from_millis(1));
        std::thread::sleep(Duration::from_millis(5));
        let frozen = r.begin().expect("due");
        // Pretend it started long ago (a container frozen between invocations).
        let long_ago = Instant::now().checked_sub(STALE_CHECK + Duration::from_secs(1)).unwrap();
        *r.running.lock().unwrap() = Some(long_ago);
        std::thread::sleep(Duration::from_millis(5));
        let next = r.begin().expect("a stale check does not block");
        // The old permit, thawed and finished, leaves the new check running.
        drop(frozen);
        assert!(r.running.lock().unwrap().is_some());
        drop(next);
        assert!(r.running.lock().unwrap().is_none());
    }
}
