//! The context a Lambda function builds once at cold start, from its environment.
//!
//! - `SEXTANT_INDEXES`: index locations, separated by `,`: directories, or
//!   `s3://bucket/prefix` of published versions. `SEXTANT_INDEX_DIRS` (directories
//!   separated by `:`) is read when it is not set.
//! - `SEXTANT_DEFAULT_INDEX`: the index of `/v1/retrieve` and `/v1/search` (default: the
//!   first one named).
//! - `SEXTANT_MODEL_DIR` / `SEXTANT_CACHE_DIR`: where the converted models are (the
//!   template's `ModelsLayer` puts them in `/opt/models`); `SEXTANT_MODEL_URI`
//!   (`s3://bucket/models/`) downloads them there first instead (default directory
//!   `/tmp/sextant-models`).
//! - `SEXTANT_ORT_LIB`: ONNX Runtime's library (the layer's `/opt/lib/libonnxruntime.so`);
//!   `SEXTANT_BACKEND` chooses the inference backend (see `sextant_core::encode`).
//! - `SEXTANT_RERANKER_DIR`: a cross-encoder to rerank with (optional).
//! - `SEXTANT_RERANK_SERVICE` (`cohere`, `bedrock` or `none`), `SEXTANT_RERANK_MODEL`,
//!   `SEXTANT_RERANK_ENDPOINT`, `SEXTANT_RERANK_TIMEOUT_MS`, `CO_API_KEY`: a hosted
//!   reranker instead (see `sextant_rerank::HostedConfig::from_env`).
//! - `SEXTANT_COHERE_KEY_SECRET`: the name or ARN of the Secrets Manager secret whose
//!   `SecretString` is Cohere's API key, read once at cold start (the template's way: the
//!   key is then in no environment variable); `CO_API_KEY`, when set, is used instead. A
//!   secret that cannot be read fails the cold start, naming it.
//! - `SEXTANT_KEYS`: the key store, a JSON file or `dynamodb://KEYS_TABLE/RATE_TABLE`;
//!   `SEXTANT_KEYS_FILE` is read when it is not set.
//! - `SEXTANT_KEY_CACHE_SECS` (default 30): how long a DynamoDB key lookup is cached.
//! - `SEXTANT_KEYS_FAIL_OPEN` (default `false`): serve expired cached keys while DynamoDB
//!   is unreachable.
//! - `SEXTANT_REFRESH_SECS` (default 60): how often a warm function checks for a newly
//!   published version of its S3 indexes.
//! - `SEXTANT_CORPORA`: the indexes that take documents through the document API, and
//!   where: `index=s3://bucket/corpora/index/` pairs separated by `,`. Each write goes to
//!   that prefix ([`crate::documents::S3DocumentStore`]) and is answered `202`; its S3
//!   event starts the index build. Unset: no index is writable.
//! - `SEXTANT_SHARD_FUNCTION`: the shard functions of sharded S3 indexes, a function name
//!   in which `{k}` stands for the shard number (and `{index}` for the index id): this
//!   function is then their router, asking each with Lambda `Invoke`
//!   ([`sextant_aws::ShardFunctions`]); `SEXTANT_SHARD_DEADLINE_MS` (default 5,000) is how
//!   long a search waits for them, in each round trip (the candidates, then the results'
//!   text), before answering from those that did.
//! - `SEXTANT_SHARD`: in a shard function, the shard it serves ([`crate::shard`]).
//! - `SEXTANT_CATALOG`: the bucket (`s3://bucket/`) where `PUT /v1/indexes/{index}` creates
//!   indexes and `DELETE` deletes them ([`crate::index_admin`]); every function serves
//!   the indexes created there, and the index-build function builds them. Unset: indexes
//!   are not created through the API (`501`).
//!
//! An index that fails to load at cold start does not stop the function: the others are
//! served, `/health` and the endpoints answer 503 for it, and (from S3) it is tried again
//! at the next refresh.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use sextant_aws::{Catalog, Fit, KeyStoreSpec, MemoryBudget, Refresher, ShardFunctions, VersionedIndex};
use sextant_core::encode::{default_model_dir, ModelSet};
use sextant_core::error::{Error, Result};
use sextant_core::index::Index;
use sextant_core::pipeline::SharedModels;
use sextant_core::storage::{LocalDir, Location};
use sextant_finance::Financials;
use sextant_keys::{CachedKeyStore, KeyStore};
use sextant_rerank::HostedConfig;
use sextant_server::{ApiConfig, AppState, Indexes, ServedIndex};

use crate::documents::S3DocumentStore;
use crate::index_admin::S3IndexAdmin;

/// What cold start produces: the router's state, and the watcher of S3 indexes.
pub struct Context {
    /// The handlers' state.
    pub state: Arc<AppState>,
    /// Checks S3 indexes for new versions (none when every index is local).
    pub refresher: Option<Arc<Refresher>>,
    /// Creates and deletes indexes, and serves those created (with `SEXTANT_CATALOG`).
    pub admin: Option<Arc<S3IndexAdmin>>,
}

/// The bucket of indexes created through the API, from `SEXTANT_CATALOG`.
pub async fn catalog_from_env() -> Result<Option<Catalog>> {
    let Some(uri) = var("SEXTANT_CATALOG") else { return Ok(None) };
    let root = Location::parse(&uri)
        .map_err(|_| Error::invalid("SEXTANT_CATALOG", format!("{uri:?}: name a bucket, as s3://bucket/")))?;
    Ok(Some(Catalog::new(&sextant_aws::sdk_config().await, &root)?))
}

fn var(k: &str) -> Option<String> {
    std::env::var(k).ok().filter(|v| !v.trim().is_empty())
}

/// `k` as a number of seconds (default `default`).
fn secs(k: &str, default: u64) -> Result<std::time::Duration> {
    match var(k) {
        None => Ok(std::time::Duration::from_secs(default)),
        Some(v) => v
            .trim()
            .parse::<f64>()
            .ok()
            .filter(|s| *s >= 0.0)
            .map(std::time::Duration::from_secs_f64)
            .ok_or_else(|| Error::invalid(k, format!("{v:?} is not a number of seconds"))),
    }
}

/// The index locations named by the environment.
pub fn index_locations() -> Result<Vec<Location>> {
    let list: Vec<String> = match (var("SEXTANT_INDEXES"), var("SEXTANT_INDEX_DIRS")) {
        (Some(v), _) => v.split(',').map(str::to_string).collect(),
        (None, Some(v)) => v.split(':').map(str::to_string).collect(),
        (None, None) => {
            return Err(Error::invalid(
                "SEXTANT_INDEXES",
                "is not set: name the indexes to serve (directories or s3:// URIs, separated by commas)",
            ))
        }
    };
    let locations: Vec<Location> =
        list.iter().filter(|s| !s.trim().is_empty()).map(|s| Location::parse(s)).collect::<Result<_>>()?;
    if locations.is_empty() {
        return Err(Error::invalid("SEXTANT_INDEXES", "names no index"));
    }
    Ok(locations)
}

/// The models named by the environment, downloaded first when `SEXTANT_MODEL_URI` is set.
pub async fn models_from_env() -> Result<ModelSet> {
    let mut root = var("SEXTANT_MODEL_DIR").map(PathBuf::from);
    if let Some(uri) = var("SEXTANT_MODEL_URI") {
        let Location::S3 { bucket, prefix } = Location::parse(&uri)? else {
            return Err(Error::invalid("SEXTANT_MODEL_URI", "must be an s3:// URI"));
        };
        let dir = root.clone().unwrap_or_else(|| PathBuf::from("/tmp/sextant-models"));
        let t = Instant::now();
        let store = sextant_aws::S3Store::new(&sextant_aws::sdk_config().await, bucket);
        let bytes = store.download_prefix(&prefix, &dir).await?;
        tracing::info!(
            uri,
            dir = %dir.display(),
            bytes,
            ms = t.elapsed().as_millis() as u64,
            "cold start: models downloaded"
        );
        root = Some(dir);
    }
    let mut models = ModelSet::under(&root.unwrap_or_else(default_model_dir));
    models.reranker = var("SEXTANT_RERANKER_DIR").map(PathBuf::from);
    Ok(models)
}

/// The models of `set`, reranking with the hosted service the environment names, if any.
async fn shared_models(set: ModelSet) -> Result<SharedModels> {
    let shared = SharedModels::new(set);
    let hosted = HostedConfig::from_env().map_err(rerank_error)?;
    let Some(mut hosted) = hosted else { return Ok(shared) };
    if let (None, Some(secret)) = (&hosted.api_key, var("SEXTANT_COHERE_KEY_SECRET")) {
        let t = Instant::now();
        hosted.api_key = Some(sextant_aws::secret_string(&sextant_aws::sdk_config().await, &secret).await?);
        tracing::info!(secret = %secret, ms = t.elapsed().as_millis() as u64, "read the Cohere key from Secrets Manager");
    }
    if shared.set().reranker.is_some() {
        tracing::warn!("SEXTANT_RERANKER_DIR is ignored: SEXTANT_RERANK_SERVICE names a hosted reranker");
    }
    let reranker = hosted.connect().await.map_err(rerank_error)?;
    tracing::info!(reranker = %hosted.describe(), "reranking with a hosted service");
    Ok(shared.with_reranker(reranker))
}

fn rerank_error(e: sextant_rerank::Error) -> Error {
    match e {
        sextant_rerank::Error::Config { field, reason } => Error::invalid(&field, reason),
        e => Error::Component { component: "reranker".into(), reason: e.to_string() },
    }
}

/// The key store named by the environment.
pub async fn key_store_from_env() -> Result<Arc<dyn KeyStore>> {
    let spec = var("SEXTANT_KEYS").or_else(|| var("SEXTANT_KEYS_FILE")).ok_or_else(|| {
        Error::invalid("SEXTANT_KEYS", "is not set: name the key store (a file, or dynamodb://KEYS_TABLE/RATE_TABLE)")
    })?;
    let parsed = KeyStoreSpec::parse(&spec)?;
    let store = parsed.open().await?;
    if matches!(parsed, KeyStoreSpec::Dynamo { rate_table: None, .. }) {
        return Err(Error::invalid(
            "SEXTANT_KEYS",
            "serving needs the rate table too: dynamodb://KEYS_TABLE/RATE_TABLE",
        ));
    }
    if matches!(parsed, KeyStoreSpec::File(_)) {
        return Ok(store);
    }
    let fail_open = matches!(
        var("SEXTANT_KEYS_FAIL_OPEN").as_deref().map(str::to_ascii_lowercase).as_deref(),
        Some("true" | "1" | "yes")
    );
    Ok(Arc::new(CachedKeyStore::new(store, secs("SEXTANT_KEY_CACHE_SECS", 30)?, fail_open)))
}

/// Loads indexes, models and the key store named by the environment, logging how long
/// each phase took.
pub async fn from_env() -> Result<Context> {
    let t0 = Instant::now();
    let locations = index_locations()?;
    let keys = key_store_from_env().await?;
    // Loaded once, by the first index that needs them, and shared by all.
    let models = Arc::new(shared_models(models_from_env().await?).await?);
    // Only S3 indexes have versions to report or can fail to load and be retried.
    let mut versions: Vec<(String, String)> = Vec::new();
    let mut indexes = Indexes::new();
    let mut first = None;
    let mut failures: Vec<String> = Vec::new();
    let mut watched: Vec<Watched> = Vec::new();
    let budget = MemoryBudget::from_env();
    let shard_functions = shard_functions_from_env().await?;
    for location in &locations {
        match location {
            Location::Local(dir) => {
                let t = Instant::now();
                let storage = LocalDir::new(dir);
                let index = Index::load(&storage)?;
                let financials = Financials::load(&storage, &index)?;
                let load_ms = t.elapsed().as_millis() as u64;
                let id = index.manifest.index_id.clone();
                let (engine, models_took) = sextant_aws::open_engine(&models, Arc::new(index)).await?;
                tracing::info!(
                    index = %id,
                    dir = %dir.display(),
                    load_ms,
                    models_ms = models_took.as_millis() as u64,
                    "cold start: index ready"
                );
                first.get_or_insert_with(|| id.clone());
                indexes.insert(id, ServedIndex::new(engine, financials));
            }
            Location::S3 { .. } => {
                let source = VersionedIndex::new(&sextant_aws::sdk_config().await, location)?;
                let id = location_id(location);
                first.get_or_insert_with(|| id.clone());
                if let Some(version) = too_large(&source, &id, budget).await {
                    failures.push(format!("{id}: version {version} does not fit this function's memory"));
                    watched.push(Watched { id, source, version: String::new(), resident: 0, refused: Some(version) });
                    continue;
                }
                match sextant_aws::open_from_s3(&source, &models, shard_functions.as_ref()).await {
                    Ok(loaded) => {
                        let served = loaded.index_id().to_string();
                        if served != id {
                            tracing::warn!(
                                location = %location,
                                index = %served,
                                "the index id differs from the location's last path part; serving it as {served}"
                            );
                        }
                        versions.push((served.clone(), loaded.pointer.version.clone()));
                        watched.push(Watched {
                            id: served.clone(),
                            resident: loaded.resident_bytes(),
                            source,
                            version: loaded.pointer.version,
                            refused: None,
                        });
                        indexes.insert(served, ServedIndex::of(loaded.searcher, loaded.financials));
                    }
                    Err(e) => {
                        tracing::error!(
                            location = %location,
                            error = %e,
                            "cold start: index not loaded; will retry at the next refresh"
                        );
                        failures.push(format!("{id}: {e}"));
                        watched.push(Watched { id, source, version: String::new(), resident: 0, refused: None });
                    }
                }
            }
        }
    }
    let default_index =
        var("SEXTANT_DEFAULT_INDEX").or(first).ok_or_else(|| Error::invalid("SEXTANT_INDEXES", "names no index"))?;
    let cors_origins = sextant_server::headers::parse_origins(&var("SEXTANT_CORS_ORIGINS").unwrap_or_default())
        .map_err(|e| Error::invalid("SEXTANT_CORS_ORIGINS", e))?;
    let max_in_flight = match var("SEXTANT_MAX_IN_FLIGHT") {
        Some(v) => v.trim().parse::<usize>().ok().filter(|n| *n > 0).ok_or_else(|| {
            Error::invalid("SEXTANT_MAX_IN_FLIGHT", format!("{v:?} is not a positive number of requests"))
        })?,
        None => sextant_server::DEFAULT_MAX_IN_FLIGHT,
    };
    let config = ApiConfig { default_index, cors_origins, max_in_flight, metrics: true, ..Default::default() };
    let state = AppState::new(keys, config);
    for (id, v) in versions {
        state.set_version(&id, Some(v));
    }
    if indexes.is_empty() {
        state.set_loading(format!("no index could be loaded ({}); retrying", failures.join("; ")));
    } else {
        state.set_indexes(indexes);
    }
    for (id, corpus) in corpora_from_env()? {
        let store = S3DocumentStore::new(&sextant_aws::sdk_config().await, &id, &corpus, &state)?;
        tracing::info!(index = %id, corpus = %corpus, "documents written to the corpus in S3");
        state.set_document_store(&id, Arc::new(store));
    }
    let catalog = catalog_from_env().await?;
    let refresher = if watched.is_empty() && catalog.is_none() {
        None
    } else {
        let r = Refresher::within(secs("SEXTANT_REFRESH_SECS", 60)?, models.clone(), budget, shard_functions);
        for w in watched {
            r.watch(&w.id, w.source, w.version, w.resident, w.refused);
        }
        Some(r)
    };
    let admin = match (catalog, &refresher) {
        (Some(catalog), Some(refresher)) => {
            let config = sextant_aws::sdk_config().await;
            let admin = S3IndexAdmin::new(catalog, config, models.clone(), &state, refresher.clone());
            // An own index that failed to load stays a 503, beside the created ones served.
            for w in refresher.watched_without_version() {
                state.mark_loading(&w);
            }
            admin.sync().await;
            state.set_index_admin(admin.clone());
            Some(admin)
        }
        _ => None,
    };
    tracing::info!(total_ms = t0.elapsed().as_millis() as u64, "cold start: done");
    Ok(Context { state, refresher, admin })
}

/// An S3 index the refresher watches: the version served (empty: none), its estimated
/// resident bytes, and a version refused for its size.
struct Watched {
    id: String,
    source: VersionedIndex,
    version: String,
    resident: u64,
    refused: Option<String>,
}

/// The version `source` serves now, when it cannot fit this function's memory (`budget`)
/// at all: reported (a log line and the `IndexTooLarge` metric) and not loaded.
async fn too_large(source: &VersionedIndex, id: &str, budget: Option<MemoryBudget>) -> Option<String> {
    let budget = budget?;
    let pointer = source.current().await.ok()?;
    let estimate = source.resident_estimate(&pointer).await.ok()?;
    match budget.fit(0, estimate) {
        Fit::TooLarge { needed, .. } => {
            sextant_aws::memory::report_too_large(id, &pointer.version, estimate, needed, &budget);
            Some(pointer.version)
        }
        Fit::Swap | Fit::InPlace => None,
    }
}

/// The shard functions of sharded S3 indexes, from `SEXTANT_SHARD_FUNCTION` (a function
/// name with `{k}` for the shard number) and `SEXTANT_SHARD_DEADLINE_MS` (default 5,000);
/// `None` when no shard function is named.
pub async fn shard_functions_from_env() -> Result<Option<ShardFunctions>> {
    let Some(pattern) = var("SEXTANT_SHARD_FUNCTION") else { return Ok(None) };
    let deadline = match var("SEXTANT_SHARD_DEADLINE_MS") {
        None => DEFAULT_SHARD_DEADLINE,
        Some(v) => v.trim().parse::<u64>().map(std::time::Duration::from_millis).map_err(|_| {
            Error::invalid("SEXTANT_SHARD_DEADLINE_MS", format!("{v:?} is not a number of milliseconds"))
        })?,
    };
    Ok(Some(ShardFunctions::new(&pattern, deadline, sextant_aws::sdk_config().await)?))
}

/// How long a router waits for its shard functions by default: past a warm shard's answer
/// by far, short of API Gateway's 29 s so that a missing shard degrades the answer rather
/// than failing it.
pub const DEFAULT_SHARD_DEADLINE: std::time::Duration = std::time::Duration::from_millis(5_000);

/// The writable indexes and their corpus prefixes, from `SEXTANT_CORPORA`
/// (`index=s3://bucket/prefix/,...`).
pub fn corpora_from_env() -> Result<Vec<(String, Location)>> {
    let Some(list) = var("SEXTANT_CORPORA") else { return Ok(Vec::new()) };
    parse_corpora(&list)
}

fn parse_corpora(list: &str) -> Result<Vec<(String, Location)>> {
    let mut out: Vec<(String, Location)> = Vec::new();
    for entry in list.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let bad = |why: &str| Error::invalid("SEXTANT_CORPORA", format!("{entry:?}: {why}"));
        let (id, uri) = entry.split_once('=').ok_or_else(|| bad("expected index=s3://bucket/prefix/"))?;
        let id = id.trim();
        if id.is_empty() || !id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') {
            return Err(bad("the index id takes letters, digits, '-' and '_'"));
        }
        let location = Location::parse(uri.trim()).map_err(|_| bad("the corpus must be an s3:// prefix"))?;
        if !matches!(location, Location::S3 { .. }) {
            return Err(bad("the corpus must be an s3:// prefix"));
        }
        if out.iter().any(|(seen, _)| seen == id) {
            return Err(bad("this index is named twice"));
        }
        out.push((id.to_string(), location));
    }
    Ok(out)
}

/// The index id a location names: its last path part.
fn location_id(location: &Location) -> String {
    match location {
        Location::S3 { prefix, bucket } => {
            prefix.rsplit('/').next().filter(|s| !s.is_empty()).unwrap_or(bucket).to_string()
        }
        Location::Local(p) => p.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default(),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn corpora_name_each_writable_index_once_with_an_s3_prefix() {
        let ok = super::parse_corpora(" demo=s3://bucket/corpora/demo/ , kb_2=s3://bucket/kb/").unwrap();
        assert_eq!(ok.iter().map(|(id, _)| id.as_str()).collect::<Vec<_>>(), ["demo", "kb_2"]);
        assert!(super::parse_corpora("").unwrap().is_empty());
        for bad in
            ["demo", "demo=/tmp/corpus", "a b=s3://bucket/x/", "d=s3://bucket/x/,d=s3://bucket/y/", "=s3://bucket/x/"]
        {
            let e = super::parse_corpora(bad).unwrap_err().to_string();
            assert!(e.contains("SEXTANT_CORPORA"), "{bad}: {e}");
        }
    }

    #[test]
    fn every_variable_template_yaml_sets_is_read_by_the_code() {
        let template = include_str!("../../../template.yaml");
        let code = [
            include_str!("startup.rs"),
            include_str!("shard.rs"),
            include_str!("../../aws/src/build_lease.rs"),
            include_str!("../../aws/src/build_job.rs"),
            include_str!("../../aws/src/build_workflow.rs"),
            include_str!("../../aws/src/sdk.rs"),
            include_str!("../../core/src/encode/runtime/onnxruntime.rs"),
            include_str!("../../core/src/encode/models.rs"),
            include_str!("../../rerank/src/lib.rs"),
        ]
        .concat();
        let mut vars: Vec<&str> = template
            .match_indices("SEXTANT_")
            .map(|(i, _)| {
                let rest = &template[i..];
                &rest[..rest.find(|c: char| !(c.is_ascii_uppercase() || c == '_')).unwrap_or(rest.len())]
            })
            .collect();
        vars.sort();
        vars.dedup();
        assert!(vars.len() >= 8, "{vars:?}");
        for v in vars {
            assert!(code.contains(&format!("\"{v}\"")), "template.yaml sets {v}, which no code reads");
        }
    }
}
