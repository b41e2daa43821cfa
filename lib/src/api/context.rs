//! The context a Lambda function builds once at cold start, from its environment.
//!
//! - `SEXTANT_INDEX_DIRS`: index directories, separated by `:` (required).
//! - `SEXTANT_DEFAULT_INDEX`: the index of `/v1/retrieve` and `/v1/search` (default: the
//!   first one loaded).
//! - `SEXTANT_MODEL_DIR` / `SEXTANT_CACHE_DIR`: where the converted models are.
//! - `SEXTANT_RERANKER_DIR`: a cross-encoder to rerank with (optional).
//! - `SEXTANT_KEYS_FILE`: the local key store (JSON; the AWS issue adds DynamoDB).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use super::keys::LocalKeyStore;
use super::{ApiConfig, AppState, Engines};
use crate::encode::{default_model_dir, ModelSet};
use crate::error::{Error, Result};
use crate::index::Index;
use crate::search::open_engine;
use crate::storage::LocalDir;

/// Loads indexes, models and the key store named by the environment, logging how long
/// each phase took.
pub fn state_from_env() -> Result<Arc<AppState>> {
    let var = |k: &str| std::env::var(k).ok().filter(|v| !v.trim().is_empty());
    let dirs = var("SEXTANT_INDEX_DIRS").ok_or_else(|| Error::invalid("SEXTANT_INDEX_DIRS", "is not set: name the index directories to serve"))?;
    let keys_file = var("SEXTANT_KEYS_FILE").ok_or_else(|| Error::invalid("SEXTANT_KEYS_FILE", "is not set: name the key store file"))?;
    let mut models = ModelSet::under(&var("SEXTANT_MODEL_DIR").map(PathBuf::from).unwrap_or_else(default_model_dir));
    models.reranker = var("SEXTANT_RERANKER_DIR").map(PathBuf::from);
    let mut engines = Engines::new();
    let mut first = None;
    for dir in dirs.split(':').filter(|d| !d.is_empty()) {
        let t = Instant::now();
        let index = Index::load(&LocalDir::new(dir))?;
        let load_ms = t.elapsed().as_millis();
        let t = Instant::now();
        let engine = open_engine(Arc::new(index), &models)?;
        let id = engine.index().manifest.index_id.clone();
        tracing::info!(index = %id, dir, load_ms, models_ms = t.elapsed().as_millis() as u64, "cold start: index ready");
        first.get_or_insert_with(|| id.clone());
        engines.insert(id, Arc::new(engine));
    }
    let default_index = var("SEXTANT_DEFAULT_INDEX").or(first).ok_or_else(|| Error::invalid("SEXTANT_INDEX_DIRS", "names no directory"))?;
    let keys = LocalKeyStore::open(std::path::Path::new(&keys_file))?;
    let state = AppState::new(Arc::new(keys), ApiConfig { default_index, ..Default::default() });
    state.set_engines(engines);
    Ok(state)
}
