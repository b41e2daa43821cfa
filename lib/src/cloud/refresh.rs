//! Loading indexes from S3 at cold start, and swapping in newly published versions in
//! a warm function.
//!
//! A warm function checks each index's `CURRENT` pointer at most every `interval`, from
//! a middleware, in a background task (no request waits for it). A new version is
//! downloaded, verified and decoded beside the one being served, then swapped in with
//! [`AppState::replace_engine`]: requests in flight finish on the old engine. A version
//! that fails to download or verify is logged as an error and remembered, so it is not
//! fetched again until the pointer moves; the old version keeps serving.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;

use super::versions::{Pointer, VersionedIndex};
use crate::api::AppState;
use crate::error::{Error, Result};
use crate::index::Index;
use crate::search::{Engine, SharedModels};

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

/// Downloads and decodes the current version of `source`; returns the index, the
/// pointer it came from, and timings (without models).
pub async fn load_current(source: &VersionedIndex) -> Result<(Index, Pointer, LoadTimings)> {
    let t = Instant::now();
    let pointer = source.current().await?;
    let pointer_ms = t.elapsed().as_millis() as u64;
    let (index, phases) = source.load(&pointer).await?;
    Ok((index, pointer, LoadTimings { pointer_ms, download_ms: phases.download_ms, decode_ms: phases.decode_ms, models_ms: 0, bytes: phases.bytes }))
}

/// Cold start of one S3 index: download, verify and decode it, then load the models
/// (unless another index of the process loaded them already) and assemble the engine
/// (checking the index was built with these models).
///
/// The phases run one after the other. Loading the models alongside the download was
/// measured slower on a 2-core machine (the model load and the decode compete for the
/// same cores as the transfer): 2.1–2.3 s instead of 1.6 s for a 100k-chunk index.
pub async fn open_from_s3(source: &VersionedIndex, models: &Arc<SharedModels>) -> Result<(Engine, Pointer, LoadTimings)> {
    let (index, pointer, mut timings) = load_current(source).await?;
    let shared = models.clone();
    let (engine, took) = tokio::task::spawn_blocking(move || shared.engine(Arc::new(index))).await.map_err(|e| Error::Inference(e.to_string()))??;
    timings.models_ms = took.as_millis() as u64;
    tracing::info!(
        index = %source.location(), version = %pointer.version, pointer_ms = timings.pointer_ms, download_ms = timings.download_ms,
        decode_ms = timings.decode_ms, models_ms = timings.models_ms, bytes = timings.bytes, "cold start: index loaded from S3"
    );
    Ok((engine, pointer, timings))
}

/// One index served from S3.
struct Source {
    index: VersionedIndex,
    /// The version served.
    version: String,
    /// The last version refused, not to be fetched again.
    refused: Option<String>,
}

/// Watches the `CURRENT` pointers of the S3 indexes and swaps new versions in.
pub struct Refresher {
    state: Arc<AppState>,
    models: Arc<SharedModels>,
    interval: Duration,
    sources: Mutex<HashMap<String, Source>>,
    last_check: Mutex<Option<Instant>>,
    running: AtomicBool,
}

impl Refresher {
    /// Checks at most every `interval`; `models` open an index that failed at cold start.
    pub fn new(state: Arc<AppState>, interval: Duration, models: Arc<SharedModels>) -> Arc<Self> {
        Arc::new(Refresher { state, models, interval, sources: Mutex::new(HashMap::new()), last_check: Mutex::new(Some(Instant::now())), running: AtomicBool::new(false) })
    }

    /// Watches index `id`, now serving `version` (empty when none could be loaded), at `index`.
    pub fn watch(&self, id: &str, index: VersionedIndex, version: String) {
        self.sources.lock().expect("sources lock").insert(id.to_string(), Source { index, version, refused: None });
    }

    /// Whether a check is due; marks it started.
    fn due(&self) -> bool {
        let mut last = self.last_check.lock().expect("refresh lock");
        if last.is_some_and(|t| t.elapsed() < self.interval) || self.running.swap(true, Ordering::SeqCst) {
            return false;
        }
        *last = Some(Instant::now());
        true
    }

    /// Checks every pointer now and swaps in what changed (what the background task runs).
    pub async fn check_now(&self) {
        let ids: Vec<(String, VersionedIndex, String, Option<String>)> =
            self.sources.lock().expect("sources lock").iter().map(|(id, s)| (id.clone(), s.index.clone(), s.version.clone(), s.refused.clone())).collect();
        for (id, index, serving, refused) in ids {
            let pointer = match index.pointer().await {
                Ok(p) => p.pointer,
                Err(e) => {
                    tracing::warn!(index = %id, error = %e, "could not read the version pointer; still serving {serving}");
                    continue;
                }
            };
            let Some(pointer) = pointer else { continue };
            if pointer.version == serving || refused.as_deref() == Some(pointer.version.as_str()) {
                continue;
            }
            let t = Instant::now();
            match self.swap(&id, &index, &pointer).await {
                Ok(()) => {
                    tracing::info!(index = %id, from = %serving, to = %pointer.version, ms = t.elapsed().as_millis() as u64, "swapped to a new index version");
                    if let Some(s) = self.sources.lock().expect("sources lock").get_mut(&id) {
                        s.version = pointer.version.clone();
                    }
                }
                Err(e) => {
                    let serving = if serving.is_empty() { "nothing (503)" } else { serving.as_str() };
                    tracing::error!(index = %id, version = %pointer.version, error = %e, "refused a new index version; still serving {serving}");
                    // A version that is itself bad is not fetched again; a store that
                    // failed to answer is asked again at the next check.
                    if matches!(e, Error::IndexCorrupted { .. } | Error::UnsupportedFormat { .. } | Error::Model { .. }) {
                        if let Some(s) = self.sources.lock().expect("sources lock").get_mut(&id) {
                            s.refused = Some(pointer.version.clone());
                        }
                    }
                }
            }
        }
    }

    async fn swap(&self, id: &str, index: &VersionedIndex, pointer: &Pointer) -> Result<()> {
        let (loaded, _) = index.load(pointer).await?;
        if loaded.manifest.index_id != id {
            return Err(Error::IndexCorrupted { file: index.location(), expected: format!("index id {id:?}"), found: loaded.manifest.index_id.clone() });
        }
        let engine = match self.state.loaded_engine(id) {
            Some(current) => current.with_index(Arc::new(loaded))?,
            None => {
                let models = self.models.clone();
                tokio::task::spawn_blocking(move || models.engine(Arc::new(loaded))).await.map_err(|e| Error::Inference(e.to_string()))??.0
            }
        };
        self.state.replace_engine(id, Arc::new(engine), Some(pointer.version.clone()));
        Ok(())
    }
}

/// The middleware: starts a background check when one is due, then serves the request.
pub async fn middleware(State(refresher): State<Arc<Refresher>>, req: Request, next: Next) -> Response {
    if refresher.due() {
        let r = refresher.clone();
        tokio::spawn(async move {
            r.check_now().await;
            r.running.store(false, Ordering::SeqCst);
        });
    }
    next.run(req).await
}
