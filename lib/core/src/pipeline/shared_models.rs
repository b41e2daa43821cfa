//! One copy of the models per process, shared by every index it serves.
//!
//! A process serving several indexes (or opening one that failed at cold start, later)
//! loads the encoders and the reranker once: each further index costs no model load and
//! no second copy of the weights in memory.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::{Engine, LoadedModels, Reranker};
use crate::encode::ModelSet;
use crate::error::Result;
use crate::index::Index;

/// The models of [`ModelSet`], loaded on first use and shared afterwards.
///
/// A failed load is not remembered: the next call tries again (a model file restored
/// in the meantime is picked up).
pub struct SharedModels {
    set: ModelSet,
    reranker: Option<Arc<dyn Reranker>>,
    loaded: Mutex<Option<Arc<LoadedModels>>>,
}

impl SharedModels {
    /// Models of `set`, not loaded yet.
    pub fn new(set: ModelSet) -> Self {
        SharedModels { set, reranker: None, loaded: Mutex::new(None) }
    }

    /// Reranks with `reranker` (a hosted service, say) instead of a cross-encoder of the
    /// model set: the set's `reranker` directory is then not loaded.
    pub fn with_reranker(mut self, reranker: Arc<dyn Reranker>) -> Self {
        self.set.reranker = None;
        self.reranker = Some(reranker);
        self
    }

    /// The model directories.
    pub fn set(&self) -> &ModelSet {
        &self.set
    }

    /// The loaded models, loading them first if no call has yet; also returns how long
    /// this call spent loading (zero when they were already loaded). Blocking: callers
    /// wait for one load rather than run a second.
    pub fn get(&self) -> Result<(Arc<LoadedModels>, Duration)> {
        let mut slot = self.loaded.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(models) = slot.as_ref() {
            return Ok((models.clone(), Duration::ZERO));
        }
        let t = Instant::now();
        let mut models = LoadedModels::load(&self.set)?;
        if let Some(r) = &self.reranker {
            models = models.with_reranker(r.clone());
        }
        let models = Arc::new(models);
        *slot = Some(models.clone());
        Ok((models, t.elapsed()))
    }

    /// An engine over `index` with the shared models, refused unless the index was built
    /// with these dense and SPLADE weights; also returns the time spent loading models.
    pub fn engine(&self, index: Arc<Index>) -> Result<(Engine, Duration)> {
        let (models, took) = self.get()?;
        Ok((models.engine(index)?, took))
    }

    /// Whether the models have been loaded.
    pub fn is_loaded(&self) -> bool {
        self.loaded.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::encode::ModelSet;

    #[test]
    fn a_failed_load_is_an_error_and_is_tried_again() {
        let dir = tempfile::tempdir().unwrap();
        let shared = SharedModels::new(ModelSet::under(dir.path()));
        assert!(shared.get().is_err());
        assert!(!shared.is_loaded());
        assert!(shared.get().is_err(), "a second call tries again and fails the same way");
    }

    #[test]
    fn models_load_once_and_every_caller_shares_them() {
        let shared = SharedModels::new(ModelSet::under(&crate::testutil::model_dir()));
        assert!(!shared.is_loaded());
        let (first, took) = shared.get().unwrap();
        assert!(took > Duration::ZERO);
        let (second, again) = shared.get().unwrap();
        assert_eq!(again, Duration::ZERO);
        assert!(Arc::ptr_eq(&first, &second), "one copy of the weights");
    }
}
