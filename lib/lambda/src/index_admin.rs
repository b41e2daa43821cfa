//! Indexes created and deleted through the API on AWS (`PUT` and `DELETE
//! /v1/indexes/{index}`), in the bucket `SEXTANT_CATALOG` names ([`Catalog`]).
//!
//! - **Create** writes the index's marker (only into prefixes that hold nothing), then serves
//!   it here at once, empty, with its documents written to `corpora/<id>/`. Each write's S3
//!   event starts the build workflow for that index (`handle_build_event`), cut as created.
//! - **Every function** serves every created index: [`S3IndexAdmin::sync`] runs at cold start
//!   and with each refresh, serving the indexes created since (their published version, or
//!   empty before their first build) and letting go of those deleted; the refresher then
//!   swaps in their new versions as for the deployment's own index.
//! - **Delete** stops serving the index here, removes its versions and documents, then its
//!   marker; the other functions let it go at their next refresh.
//!
//! The deployment's own index (`SEXTANT_INDEXES`) is neither created nor deleted here: both
//! answer `409`.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, Weak};

use sextant_aws::build_job::{empty_index, BuildJob};
use sextant_aws::{Catalog, CreatedIndex, Refresher, VersionedIndex};
use sextant_core::error::{Error, Result};
use sextant_core::pipeline::SharedModels;
use sextant_finance::{FactStore, Financials};
use sextant_server::{AdminError, AppState, IndexAdmin, IndexOptions, ServedIndex};

use crate::documents::S3DocumentStore;

/// Tokens per chunk of an index created without options: the index build's default.
pub const DEFAULT_CHUNK_TOKENS: usize = 200;

/// The [`IndexAdmin`] of a Lambda function: created indexes live in a [`Catalog`].
pub struct S3IndexAdmin {
    catalog: Catalog,
    config: aws_config::SdkConfig,
    models: Arc<SharedModels>,
    state: Weak<AppState>,
    refresher: Arc<Refresher>,
    /// The created indexes this function serves (or is loading).
    known: Mutex<BTreeSet<String>>,
    /// One creation, deletion or sync at a time in this function.
    lock: tokio::sync::Mutex<()>,
    runtime: tokio::runtime::Handle,
}

fn unavailable(e: Error) -> AdminError {
    AdminError::Unavailable(e.to_string())
}

impl S3IndexAdmin {
    /// The admin of the indexes `catalog` holds, served into `state` with `models` and
    /// watched for new versions by `refresher`. Call it inside the Tokio runtime the router
    /// runs on.
    pub fn new(
        catalog: Catalog,
        config: aws_config::SdkConfig,
        models: Arc<SharedModels>,
        state: &Arc<AppState>,
        refresher: Arc<Refresher>,
    ) -> Arc<Self> {
        Arc::new(S3IndexAdmin {
            catalog,
            config,
            models,
            state: Arc::downgrade(state),
            refresher,
            known: Mutex::new(BTreeSet::new()),
            lock: tokio::sync::Mutex::new(()),
            runtime: tokio::runtime::Handle::current(),
        })
    }

    fn state(&self) -> Result<Arc<AppState>> {
        self.state.upgrade().ok_or_else(|| Error::invalid("state", "the router has stopped"))
    }

    fn is_known(&self, id: &str) -> bool {
        self.known.lock().expect("known lock").contains(id)
    }

    /// Serves every created index this function does not serve yet and lets go of those
    /// deleted since; a catalog that cannot be read changes nothing (logged).
    pub async fn sync(&self) {
        let listed = match self.catalog.list().await {
            Ok(listed) => listed,
            Err(e) => {
                tracing::warn!(bucket = %self.catalog.bucket(), error = %e, "could not list the created indexes");
                return;
            }
        };
        let _one = self.lock.lock().await;
        let known = self.known.lock().expect("known lock").clone();
        for (id, created) in &listed {
            if known.contains(id) {
                continue;
            }
            if let Err(e) = self.open(id, created).await {
                tracing::warn!(index = %id, error = %e, "a created index could not be served; tried again at the next refresh");
                continue;
            }
            tracing::info!(index = %id, "serving an index created through the API");
        }
        for id in known.iter().filter(|id| !listed.contains_key(*id)) {
            self.forget(id);
            tracing::info!(index = %id, "an index deleted through the API is no longer served");
        }
    }

    /// Serves created index `id`: its published version, or before its first build an
    /// empty one; its documents written to its corpus; its new versions swapped in by the
    /// refresher.
    async fn open(&self, id: &str, created: &CreatedIndex) -> Result<()> {
        let state = self.state()?;
        if state.loaded_index(id).is_some() && !self.is_known(id) {
            return Err(Error::invalid(
                "index",
                format!(
                    "{id} is served from this deployment's own index location; the created index of that id is not"
                ),
            ));
        }
        let source = VersionedIndex::new(&self.config, &self.catalog.index_location(id))?;
        let pointer = source.pointer().await?.pointer;
        let store = S3DocumentStore::new(&self.config, id, &self.catalog.corpus_location(id), &state)?;
        match pointer {
            Some(_) => {
                let loaded = sextant_aws::open_from_s3(&source, &self.models, None).await?;
                let (version, resident) = (loaded.pointer.version.clone(), loaded.resident_bytes());
                state.replace_index(id, ServedIndex::of(loaded.searcher, loaded.financials), Some(version.clone()));
                self.refresher.watch(id, source, version, resident, None);
            }
            None => {
                let job = BuildJob::of_created(&self.catalog, id, created, &Default::default())?;
                let set = self.models.set().clone();
                let index = tokio::task::spawn_blocking(move || empty_index(&set, &job))
                    .await
                    .map_err(|e| Error::task_failed(format!("creating index {id}"), e))??;
                let index = Arc::new(index);
                let financials = Financials::new(FactStore::default(), index.as_ref());
                let (engine, _) = sextant_aws::open_engine(&self.models, index).await?;
                state.replace_index(id, ServedIndex::new(engine, financials), None);
                self.refresher.watch(id, source, String::new(), 0, None);
            }
        }
        state.set_document_store(id, Arc::new(store));
        self.known.lock().expect("known lock").insert(id.to_string());
        Ok(())
    }

    /// Stops serving, watching and writing index `id`.
    fn forget(&self, id: &str) {
        self.refresher.unwatch(id);
        if let Ok(state) = self.state() {
            state.remove_index(id);
        }
        self.known.lock().expect("known lock").remove(id);
    }

    async fn create_async(&self, id: &str, options: IndexOptions) -> std::result::Result<bool, AdminError> {
        let (chunk_tokens, chunk_overlap) = options.resolve((DEFAULT_CHUNK_TOKENS, 0))?;
        let wanted = CreatedIndex { chunk_tokens, chunk_overlap };
        if id.ends_with("-facts") {
            return Err(AdminError::Invalid {
                field: "index".into(),
                reason: format!("{id}: an id ending in -facts names an index's XBRL facts (corpora/<index>-facts/)"),
            });
        }
        let _one = self.lock.lock().await;
        let state = self.state().map_err(unavailable)?;
        let same = |existing: CreatedIndex| {
            if existing == wanted {
                Ok(())
            } else {
                Err(AdminError::Conflict(format!(
                    "index {id} exists with chunkTokens {} and chunkOverlap {}: delete it first to change them",
                    existing.chunk_tokens, existing.chunk_overlap
                )))
            }
        };
        match self.catalog.get(id).await.map_err(unavailable)? {
            Some(existing) => {
                same(existing)?;
                if !self.is_known(id) {
                    self.open(id, &existing).await.map_err(unavailable)?;
                }
                return Ok(false);
            }
            None if state.loaded_index(id).is_some() => {
                return Err(AdminError::Conflict(format!(
                    "index {id} is this deployment's own index, built by the index-build workflow, not created through \
                     the API"
                )))
            }
            None => {}
        }
        if self.catalog.in_use(id).await.map_err(unavailable)? {
            return Err(AdminError::Conflict(format!(
                "s3://{}/indexes/{id}/ or s3://{}/corpora/{id}/ holds objects that no index creation wrote: choose \
                 another id, or remove them first",
                self.catalog.bucket(),
                self.catalog.bucket()
            )));
        }
        if !self.catalog.create(id, &wanted).await.map_err(unavailable)? {
            // Another function created it meanwhile.
            let existing = self.catalog.get(id).await.map_err(unavailable)?.ok_or_else(|| {
                AdminError::Unavailable(format!("index {id} was created and deleted while this creation ran"))
            })?;
            same(existing)?;
            self.open(id, &existing).await.map_err(unavailable)?;
            return Ok(false);
        }
        if let Err(e) = self.open(id, &wanted).await {
            self.forget(id);
            if let Err(undo) = self.catalog.delete(id).await {
                tracing::error!(index = %id, error = %undo, "a creation that failed could not be undone");
            }
            return Err(unavailable(e));
        }
        tracing::info!(index = %id, bucket = %self.catalog.bucket(), "created index");
        Ok(true)
    }

    async fn delete_async(&self, id: &str) -> std::result::Result<bool, AdminError> {
        let _one = self.lock.lock().await;
        match self.catalog.get(id).await {
            Ok(Some(_)) | Err(Error::IndexCorrupted { .. }) => {}
            Ok(None) => {
                let own = self.state().is_ok_and(|s| s.loaded_index(id).is_some());
                if own && !self.is_known(id) {
                    return Err(AdminError::Conflict(format!(
                        "index {id} is this deployment's own index, not created through the API: it is deleted with \
                         the stack"
                    )));
                }
                self.forget(id);
                return Ok(false);
            }
            Err(e) => return Err(unavailable(e)),
        }
        self.forget(id);
        let removed = self.catalog.delete(id).await.map_err(unavailable)?;
        tracing::info!(index = %id, objects = removed, "deleted index");
        Ok(true)
    }
}

impl IndexAdmin for S3IndexAdmin {
    fn create(&self, id: &str, options: IndexOptions) -> std::result::Result<bool, AdminError> {
        self.runtime.block_on(self.create_async(id, options))
    }

    fn delete(&self, id: &str) -> std::result::Result<bool, AdminError> {
        self.runtime.block_on(self.delete_async(id))
    }
}
