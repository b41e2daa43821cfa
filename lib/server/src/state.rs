//! What the handlers share: the loaded indexes, the key store and the API's limits; and
//! what each request carries once authenticated.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use sextant_core::pipeline::Engine;
use sextant_core::shards::{Searcher, ShardSet};
use sextant_finance::Financials;
use sextant_keys::{ApiKey, KeyStore, Plan};

use crate::envelope::ApiError;

/// Default bound on requests served at once: 16. A search takes about 10 ms of both cores
/// on the 2-core machines this runs on, so 16 in flight already means answers of about
/// 100 ms; beyond it a client is better told to come back than queued.
pub const DEFAULT_MAX_IN_FLIGHT: usize = 16;

/// Limits and defaults of the API.
#[derive(Debug, Clone)]
pub struct ApiConfig {
    /// Largest request body accepted (bytes); larger is a 413.
    pub max_body_bytes: usize,
    /// Longest query accepted (characters); longer is a 400. Queries longer than the
    /// model window but under this are truncated for the encoders and flagged in `meta`.
    pub max_query_chars: usize,
    /// `/v1/search`: dense candidates under this cosine similarity are dropped.
    pub min_dense_similarity: f32,
    /// The index served by `/v1/retrieve` and `/v1/search`.
    pub default_index: String,
    /// Origins browsers may call the API from (CORS); empty: none ([`crate::headers`]).
    pub cors_origins: Vec<String>,
    /// Requests to the search endpoints served at once; one more is a quick 503 with
    /// `Retry-After` (load shedding), instead of a queue that makes every answer slow.
    pub max_in_flight: usize,
    /// Time for a request body to arrive once its head has; later is a 408.
    pub body_read_timeout: std::time::Duration,
    /// Write each request as a CloudWatch Embedded Metric Format line on stdout
    /// ([`crate::access::emf_line`]); the Lambda functions do.
    pub metrics: bool,
    /// Largest document accepted by `PUT .../documents/{id}` (bytes); larger is a 413.
    pub max_document_bytes: usize,
    /// Whether `/` serves the playground page ([`crate::playground`]): `sextant serve` does.
    pub playground: bool,
}

impl Default for ApiConfig {
    /// 64 KiB bodies (8 MiB documents), 4,000-character queries, 0.3 minimum cosine, index `demo`, no CORS,
    /// [`DEFAULT_MAX_IN_FLIGHT`] requests at once, 30 s for a body, no playground.
    fn default() -> Self {
        ApiConfig {
            max_body_bytes: 64 * 1024,
            max_query_chars: 4_000,
            min_dense_similarity: 0.3,
            default_index: "demo".into(),
            cors_origins: Vec::new(),
            max_in_flight: DEFAULT_MAX_IN_FLIGHT,
            body_read_timeout: std::time::Duration::from_secs(30),
            metrics: false,
            max_document_bytes: 8 << 20,
            playground: false,
        }
    }
}

/// One index as the API serves it: what searches it (one engine, or the router over its
/// shards) and the facts of `/v1/context`.
#[derive(Clone)]
pub struct ServedIndex {
    /// What searches the index.
    pub searcher: Searcher,
    /// The index's facts and company dictionary (empty facts when it has none).
    pub financials: Arc<Financials>,
}

impl ServedIndex {
    /// Serves `engine` with `financials`.
    pub fn new(engine: Engine, financials: Financials) -> Self {
        ServedIndex { searcher: Searcher::Single(Arc::new(engine)), financials: Arc::new(financials) }
    }

    /// Serves what `searcher` searches (one engine or a router), with `financials`.
    pub fn of(searcher: Searcher, financials: Financials) -> Self {
        ServedIndex { searcher, financials: Arc::new(financials) }
    }

    /// Serves a sharded index through its router `shards`, with `financials`.
    pub fn sharded(shards: ShardSet, financials: Financials) -> Self {
        ServedIndex { searcher: Searcher::Sharded(Arc::new(shards)), financials: Arc::new(financials) }
    }

    /// The engine whose models and settings the index's searches run with (of a sharded
    /// index, its first shard's).
    pub fn engine(&self) -> &Arc<Engine> {
        self.searcher.engine()
    }

    /// Each retrieval path's state: `ready`, or `building` while its index builds (what
    /// `/health` and `GET /v1/indexes/{index}` show).
    pub(crate) fn path_states(&self) -> BTreeMap<&'static str, &'static str> {
        let ready = self.engine().ready_paths();
        sextant_core::pipeline::Path::ALL
            .iter()
            .map(|p| (p.name(), if ready.contains(p) { "ready" } else { "building" }))
            .collect()
    }
}

/// Loaded indexes, by id.
pub type Indexes = BTreeMap<String, ServedIndex>;

/// What the handlers share: the engines once loaded, the key store, the limits.
pub struct AppState {
    indexes: RwLock<Option<Arc<Indexes>>>,
    pub(crate) versions: RwLock<BTreeMap<String, String>>,
    loading: RwLock<String>,
    pub(crate) keys: Arc<dyn KeyStore>,
    pub(crate) config: ApiConfig,
    counter: AtomicU64,
    /// One permit per request being served by a search endpoint ([`ApiConfig::max_in_flight`]).
    pub(crate) in_flight: Arc<tokio::sync::Semaphore>,
    /// Where each writable index's documents are written.
    stores: RwLock<BTreeMap<String, Arc<dyn crate::documents::DocumentStore>>>,
    /// What creates and deletes indexes, where the API may.
    admin: RwLock<Option<Arc<dyn crate::routes::indexes::IndexAdmin>>>,
    /// Indexes let go to load their new version in place: a 503 until it is in.
    reloading: RwLock<std::collections::BTreeSet<String>>,
}

impl AppState {
    /// State whose indexes arrive later through [`AppState::set_indexes`] (until then the
    /// endpoints answer 503 and `/health` says what is loading).
    pub fn new(keys: Arc<dyn KeyStore>, config: ApiConfig) -> Arc<Self> {
        Arc::new(AppState {
            indexes: RwLock::new(None),
            versions: RwLock::new(BTreeMap::new()),
            loading: RwLock::new("starting".into()),
            keys,
            in_flight: Arc::new(tokio::sync::Semaphore::new(config.max_in_flight.max(1))),
            config,
            counter: AtomicU64::new(0),
            stores: RwLock::new(BTreeMap::new()),
            admin: RwLock::new(None),
            reloading: RwLock::new(Default::default()),
        })
    }

    /// Stops serving index `id` so that its next version can be loaded in its place (the
    /// memory holds one copy): until [`AppState::replace_index`] serves it again, its
    /// requests are a 503 with `Retry-After`.
    pub fn unload_index(&self, id: &str) {
        self.mark_loading(id);
        self.stop_serving(id);
    }

    /// Says that index `id` is being loaded (at start, or in place of its old version):
    /// until [`AppState::replace_index`] serves it, its requests are a 503 with
    /// `Retry-After`, not a 404.
    pub fn mark_loading(&self, id: &str) {
        self.reloading.write().expect("reloading lock").insert(id.to_string());
    }

    /// Publishes the loaded indexes without `id` (requests already holding it finish on it).
    fn stop_serving(&self, id: &str) {
        let mut slot = self.indexes.write().expect("indexes lock");
        if let Some(now) = slot.as_deref() {
            let mut indexes: Indexes = now.clone();
            indexes.remove(id);
            *slot = Some(Arc::new(indexes));
        }
    }

    /// Lets `PUT` and `DELETE /v1/indexes/{index}` create and delete indexes, with `admin`.
    pub fn set_index_admin(&self, admin: Arc<dyn crate::routes::indexes::IndexAdmin>) {
        *self.admin.write().expect("admin lock") = Some(admin);
    }

    /// The index admin, where the API may create and delete indexes.
    pub(crate) fn index_admin(&self) -> Option<Arc<dyn crate::routes::indexes::IndexAdmin>> {
        self.admin.read().expect("admin lock").clone()
    }

    /// Stops serving index `id` and writing its documents (its files are the caller's).
    pub fn remove_index(&self, id: &str) {
        self.stores.write().expect("stores lock").remove(id);
        self.versions.write().expect("versions lock").remove(id);
        self.reloading.write().expect("reloading lock").remove(id);
        self.stop_serving(id);
    }

    /// Makes index `id` writable through the document API, with `store`.
    pub fn set_document_store(&self, id: &str, store: Arc<dyn crate::documents::DocumentStore>) {
        self.stores.write().expect("stores lock").insert(id.to_string(), store);
    }

    /// The document store of index `id`, if it is writable here.
    pub(crate) fn document_store(&self, id: &str) -> Option<Arc<dyn crate::documents::DocumentStore>> {
        self.stores.read().expect("stores lock").get(id).cloned()
    }

    /// The ids of the writable indexes.
    pub(crate) fn writable(&self) -> Vec<String> {
        self.stores.read().expect("stores lock").keys().cloned().collect()
    }

    /// Publishes the loaded indexes: from now on requests are served.
    pub fn set_indexes(&self, indexes: Indexes) {
        *self.indexes.write().expect("indexes lock") = Some(Arc::new(indexes));
    }

    /// Swaps in a new version of index `id` (a newly published version): requests already
    /// holding the old one finish on it, later ones get the new one. `version` is shown
    /// by `/health`.
    pub fn replace_index(&self, id: &str, index: ServedIndex, version: Option<String>) {
        self.reloading.write().expect("reloading lock").remove(id);
        let mut slot = self.indexes.write().expect("indexes lock");
        let mut indexes: Indexes = slot.as_deref().cloned().unwrap_or_default();
        indexes.insert(id.to_string(), index);
        *slot = Some(Arc::new(indexes));
        drop(slot);
        self.set_version(id, version);
    }

    /// Records which published version of index `id` is served (shown by `/health`).
    pub fn set_version(&self, id: &str, version: Option<String>) {
        let mut versions = self.versions.write().expect("versions lock");
        match version {
            Some(v) => versions.insert(id.to_string(), v),
            None => versions.remove(id),
        };
    }

    /// The published version served for index `id`, when it came from an object store.
    pub fn version(&self, id: &str) -> Option<String> {
        self.versions.read().expect("versions lock").get(id).cloned()
    }

    /// Index `id`, if loaded.
    pub fn loaded_index(&self, id: &str) -> Option<ServedIndex> {
        self.indexes.read().expect("indexes lock").as_ref()?.get(id).cloned()
    }

    /// Tells `/health` what is being loaded.
    pub fn set_loading(&self, what: impl Into<String>) {
        *self.loading.write().expect("loading lock") = what.into();
    }

    /// The indexes, or a 503 while loading.
    pub(crate) fn indexes(&self) -> Result<Arc<Indexes>, ApiError> {
        self.indexes.read().expect("indexes lock").clone().ok_or_else(|| {
            ApiError::unavailable(
                format!("the service is loading ({}); retry shortly", self.loading.read().expect("loading lock")),
                5,
            )
        })
    }

    /// Index `id` for `caller`: 403 when the key may not read it; 404 when it is not loaded,
    /// naming only the loaded indexes this key may read. The id is echoed cut to 64
    /// characters.
    pub(crate) fn index_for(&self, caller: &Caller, id: &str) -> Result<ServedIndex, ApiError> {
        let shown = crate::envelope::echoed(id, 64);
        if !caller.key.can_read(id) {
            return Err(ApiError::forbidden(format!("this API key may not read index {shown}")));
        }
        let indexes = self.indexes()?;
        if !indexes.contains_key(id) && self.reloading.read().expect("reloading lock").contains(id) {
            return Err(ApiError::unavailable(
                format!(
                    "index {shown} is loading (at start, or its new version in place of the old one); retry shortly"
                ),
                5,
            ));
        }
        let served = indexes.get(id).cloned().ok_or_else(|| {
            let readable: Vec<&str> = indexes.keys().filter(|k| caller.key.can_read(k)).map(String::as_str).collect();
            ApiError::not_found(format!("no index {shown} is loaded (this key may read: {})", readable.join(", ")))
        })?;
        let built = served.searcher.view().manifest().created_unix;
        crate::access::record(|r| {
            r.index = Some(id.to_string());
            r.index_built_unix = Some(built);
        });
        Ok(served)
    }

    /// What searches index `id` for `caller` (see [`AppState::index_for`]).
    pub(crate) fn searcher_for(&self, caller: &Caller, id: &str) -> Result<Searcher, ApiError> {
        Ok(self.index_for(caller, id)?.searcher)
    }

    /// A new request id: `req_` and 16 hex digits (time and a counter, mixed).
    pub(crate) fn request_id(&self) -> String {
        let n = self.counter.fetch_add(1, Ordering::Relaxed);
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0);
        let mut x = t ^ n.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ (std::process::id() as u64).rotate_left(32);
        x ^= x >> 33;
        x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
        x ^= x >> 33;
        format!("req_{x:016x}")
    }
}

/// The caller, once authenticated: their key record and plan.
#[derive(Debug, Clone)]
pub struct Caller {
    /// The key record.
    pub key: ApiKey,
    /// Its plan.
    pub plan: Plan,
}

/// The request id, as a request extension.
#[derive(Debug, Clone)]
pub struct RequestId(pub String);

/// The id a front door gave the request (API Gateway's `requestContext.requestId`), set
/// as a request extension by whoever runs the router: the router then uses it as the
/// request's id (`x-request-id`, the error envelope, every log line), so one id finds a
/// request in the gateway's logs and in ours. Used only when it is 1-128 characters of
/// letters, digits and `-_=+/.` (REST APIs send UUIDs, HTTP APIs base64).
#[derive(Debug, Clone)]
pub struct UpstreamRequestId(pub String);

impl UpstreamRequestId {
    /// The id, when it is one the router may echo.
    pub(crate) fn usable(&self) -> Option<&str> {
        let id = self.0.as_str();
        let ok =
            (1..=128).contains(&id.len()) && id.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_=+/.".contains(&b));
        ok.then_some(id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An index being loaded (at start, or in place of its old version) answers 503 with
    /// a retry, not 404 as an index that does not exist does.
    #[test]
    fn an_index_still_loading_answers_503_and_one_unknown_404() {
        let state = AppState::new(Arc::new(sextant_keys::LocalKeyStore::in_memory()), ApiConfig::default());
        state.set_indexes(Indexes::new());
        let key = ApiKey {
            hash: "h".into(),
            prefix: "sx_test".into(),
            tenant: "t".into(),
            plan: "free".into(),
            status: sextant_keys::KeyStatus::Active,
            indexes: vec!["*".into()],
            created_unix: 0,
            revoked_unix: None,
        };
        let caller = Caller { key, plan: Plan::builtin().remove(0) };
        let status = |id: &str| state.index_for(&caller, id).err().map(|e| e.status.as_u16());
        assert_eq!(status("notes"), Some(404));
        state.mark_loading("notes");
        assert_eq!(status("notes"), Some(503));
        assert_eq!(status("other"), Some(404));
    }

    #[test]
    fn only_a_plain_upstream_id_is_echoed() {
        for ok in ["c6af9ac6-7b61-11e6-9a41-93e8deadbeef", "JKJaXmPLvHcESHA="] {
            assert_eq!(UpstreamRequestId(ok.into()).usable(), Some(ok));
        }
        for bad in ["", "a b", "x\r\nSet-Cookie: y", &"a".repeat(129), "<script>"] {
            assert_eq!(UpstreamRequestId(bad.into()).usable(), None, "{bad:?}");
        }
    }
}
