//! Loading indexes from S3 at cold start, and swapping in newly published versions in
//! a warm function.
//!
//! A warm function checks each index's `CURRENT` pointer at most every `interval` (the
//! caller asks [`Refresher::due`] and runs [`Refresher::check_now`] in the background, so
//! no request waits for it). A new version is downloaded, verified and decoded beside the
//! one being served and handed back as a [`LoadedIndex`]; the caller swaps it in, and
//! requests in flight finish on the old one. A version that fails to download or verify is
//! logged as an error and remembered, so it is not fetched again until the pointer moves;
//! the old version keeps serving. Nothing here knows how the indexes are served.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sextant_core::error::{Error, Result};
use sextant_core::pipeline::{Engine, SharedModels};
use sextant_finance::Financials;

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
    /// Its engine (over the shared models).
    pub engine: Engine,
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
pub async fn open_from_s3(source: &VersionedIndex, models: &Arc<SharedModels>) -> Result<LoadedIndex> {
    let t = Instant::now();
    let pointer = source.current().await?;
    let pointer_ms = t.elapsed().as_millis() as u64;
    let loaded = open_version(source, &pointer, models).await?;
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

/// Downloads, verifies and decodes the version `pointer` names and assembles its engine.
async fn open_version(source: &VersionedIndex, pointer: &Pointer, models: &Arc<SharedModels>) -> Result<LoadedIndex> {
    let (index, financials, phases) = source.load(pointer).await?;
    let shared = models.clone();
    let id = index.manifest.index_id.clone();
    let (engine, took) = tokio::task::spawn_blocking(move || shared.engine(Arc::new(index)))
        .await
        .map_err(|e| Error::task_failed(format!("opening index {id}"), e))??;
    let timings = LoadTimings {
        pointer_ms: 0,
        download_ms: phases.download_ms,
        decode_ms: phases.decode_ms,
        models_ms: took.as_millis() as u64,
        bytes: phases.bytes,
    };
    Ok(LoadedIndex { engine, financials, pointer: pointer.clone(), timings })
}

/// One index served from S3.
struct Source {
    index: VersionedIndex,
    /// The version served.
    version: String,
    /// The last version refused, not to be fetched again.
    refused: Option<String>,
}

/// Watches the `CURRENT` pointers of the S3 indexes and loads new versions.
pub struct Refresher {
    models: Arc<SharedModels>,
    interval: Duration,
    sources: Mutex<HashMap<String, Source>>,
    last_check: Mutex<Option<Instant>>,
    running: AtomicBool,
}

impl Refresher {
    /// Checks at most every `interval`; new versions are opened with `models`.
    pub fn new(interval: Duration, models: Arc<SharedModels>) -> Arc<Self> {
        Arc::new(Refresher {
            models,
            interval,
            sources: Mutex::new(HashMap::new()),
            last_check: Mutex::new(Some(Instant::now())),
            running: AtomicBool::new(false),
        })
    }

    /// Watches index `id`, now serving `version` (empty when none could be loaded), at `index`.
    pub fn watch(&self, id: &str, index: VersionedIndex, version: String) {
        self.sources.lock().expect("sources lock").insert(id.to_string(), Source { index, version, refused: None });
    }

    /// Whether a check is due; marks it started (the caller runs [`Refresher::check_now`]).
    pub fn due(&self) -> bool {
        let mut last = self.last_check.lock().expect("refresh lock");
        if last.is_some_and(|t| t.elapsed() < self.interval) || self.running.swap(true, Ordering::SeqCst) {
            return false;
        }
        *last = Some(Instant::now());
        true
    }

    /// Checks every pointer now and hands each new version that loads to `swap_in`, with its
    /// index id, as soon as it is loaded (what the background task runs); a check marked
    /// started by [`Refresher::due`] ends here.
    pub async fn check_now(&self, swap_in: impl Fn(&str, LoadedIndex)) {
        self.check_pointers(&swap_in).await;
        self.running.store(false, Ordering::SeqCst);
    }

    async fn check_pointers(&self, swap_in: &impl Fn(&str, LoadedIndex)) {
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
            let t = Instant::now();
            match self.open(&id, &index, &pointer).await {
                Ok(loaded) => {
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
        let loaded = open_version(index, pointer, &self.models).await?;
        let found = &loaded.engine.index().manifest.index_id;
        if found != id {
            return Err(Error::IndexCorrupted {
                file: index.location(),
                expected: format!("index id {id:?}"),
                found: found.clone(),
            });
        }
        Ok(loaded)
    }
}
