//! Key records, plans, rate windows and the key stores.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};
use sextant_core::error::{Error, Result};
use sextant_core::index::format::sha256_hex;

/// What a plan allows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Plan {
    /// Plan name (`free`, `pro`, `enterprise`, or a custom one).
    pub name: String,
    /// Largest `top_k` served; larger requests are clamped.
    pub max_top_k: usize,
    /// Requests per minute.
    pub requests_per_minute: u64,
    /// Requests per day.
    pub requests_per_day: u64,
}

impl Plan {
    /// The built-in plans: Free (10 results, 60/min, 1,000/day), Pro (25, 600/min,
    /// 100,000/day), Enterprise (50, 6,000/min, 10,000,000/day).
    pub fn builtin() -> Vec<Plan> {
        let p = |name: &str, max_top_k, requests_per_minute, requests_per_day| Plan {
            name: name.into(),
            max_top_k,
            requests_per_minute,
            requests_per_day,
        };
        vec![p("free", 10, 60, 1_000), p("pro", 25, 600, 100_000), p("enterprise", 50, 6_000, 10_000_000)]
    }
}

/// Whether a key may be used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum KeyStatus {
    /// Usable.
    Active,
    /// Refused.
    Revoked,
}

/// A stored API key (never the key itself).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ApiKey {
    /// Lower-case hex SHA-256 of the key.
    pub hash: String,
    /// The key's first characters, for display.
    pub prefix: String,
    /// Who owns it.
    pub tenant: String,
    /// Plan name.
    pub plan: String,
    /// Active or revoked.
    pub status: KeyStatus,
    /// What it may do, per index: `id` or `id:read` reads index `id`, `id:write` also
    /// writes its documents, `id:admin` also compacts it; `*` stands for every index
    /// (`*:write`). A key holding several grants for one index has the widest.
    pub indexes: Vec<String>,
    /// Creation time, seconds since the Unix epoch.
    pub created_unix: u64,
    /// Revocation time, if revoked.
    #[serde(default)]
    pub revoked_unix: Option<u64>,
}

/// What a key may do with an index; each scope includes the ones before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Scope {
    /// Search it.
    Read,
    /// Also put and delete its documents.
    Write,
    /// Also compact it.
    Admin,
}

impl Scope {
    /// The scope's name in grants and messages.
    pub fn name(self) -> &'static str {
        match self {
            Scope::Read => "read",
            Scope::Write => "write",
            Scope::Admin => "admin",
        }
    }

    /// A grant `index[:scope]` split into its index and scope (`read` when none is given).
    pub fn parse_grant(grant: &str) -> Option<(&str, Scope)> {
        let (index, scope) = match grant.rsplit_once(':') {
            Some((i, s)) => (i, s),
            None => (grant, "read"),
        };
        let scope = match scope.to_ascii_lowercase().as_str() {
            "read" => Scope::Read,
            "write" => Scope::Write,
            "admin" => Scope::Admin,
            _ => return None,
        };
        (!index.is_empty()).then_some((index, scope))
    }
}

impl ApiKey {
    /// The widest scope the key holds on index `id`, if any.
    pub fn scope(&self, id: &str) -> Option<Scope> {
        self.indexes
            .iter()
            .filter_map(|g| Scope::parse_grant(g))
            .filter(|(i, _)| *i == "*" || *i == id)
            .map(|(_, s)| s)
            .max()
    }

    /// Whether the key may read index `id`.
    pub fn can_read(&self, id: &str) -> bool {
        self.scope(id).is_some()
    }

    /// Whether the key may do what `scope` allows on index `id`.
    pub fn allows(&self, id: &str, scope: Scope) -> bool {
        self.scope(id).is_some_and(|s| s >= scope)
    }
}

/// Hex SHA-256 of a presented key.
pub fn hash_key(key: &str) -> String {
    sha256_hex(key.as_bytes())
}

/// Compares two strings in time independent of where they differ.
pub fn constant_time_eq(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// A new random key: `sx_` and 32 hex characters from the OS's random source.
pub fn new_key() -> Result<String> {
    use std::io::Read;
    let mut bytes = [0u8; 16];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .map_err(|e| Error::io("/dev/urandom", e))?;
    Ok(format!("sx_{}", hex::encode(bytes)))
}

/// The outcome of counting one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RateDecision {
    /// Counted; `remaining` requests are left in the tightest window, which resets in
    /// `reset_secs`.
    Allowed {
        /// The tightest window's limit.
        limit: u64,
        /// Requests left in it.
        remaining: u64,
        /// Seconds until it resets.
        reset_secs: u64,
    },
    /// Refused: the window of `limit` requests is full for `retry_after` more seconds.
    Limited {
        /// The window's limit.
        limit: u64,
        /// Seconds until it resets.
        retry_after: u64,
    },
}

/// The future a [`KeyStore`] method returns (boxed, so the trait stays object-safe).
pub type StoreFuture<'a, T> = std::pin::Pin<Box<dyn std::future::Future<Output = Result<T>> + Send + 'a>>;

/// Where keys, plans and rate counters live: a local file ([`LocalKeyStore`]) or
/// DynamoDB (`cloud::DynamoKeyStore`, feature `aws`).
///
/// An `Err` means the store itself failed (unreachable, throttled): the API answers 503,
/// it never guesses.
pub trait KeyStore: Send + Sync {
    /// The key with this hash, if any.
    fn find<'a>(&'a self, hash: &'a str) -> StoreFuture<'a, Option<ApiKey>>;
    /// A plan by name (custom plans first, then the built-in ones).
    fn plan<'a>(&'a self, name: &'a str) -> StoreFuture<'a, Option<Plan>>;
    /// Counts one request of `key` at `now_unix` against `plan`, unless a window is full.
    fn count<'a>(&'a self, key: &'a ApiKey, plan: &'a Plan, now_unix: u64) -> StoreFuture<'a, RateDecision>;
    /// Stores a key record (replacing one with the same hash).
    fn put_key(&self, record: ApiKey) -> StoreFuture<'_, ()>;
    /// Every key record.
    fn list_keys(&self) -> StoreFuture<'_, Vec<ApiKey>>;
    /// Revokes every key whose hash or display prefix is `id`, at `now_unix`; returns how many.
    fn revoke<'a>(&'a self, id: &'a str, now_unix: u64) -> StoreFuture<'a, usize>;
    /// Stores a custom plan (a built-in name overrides the built-in plan).
    fn put_plan(&self, plan: Plan) -> StoreFuture<'_, ()>;
    /// The custom plans stored (the built-in ones are [`Plan::builtin`]).
    fn custom_plans(&self) -> StoreFuture<'_, Vec<Plan>>;
}

/// A new key record for `tenant` on `plan`, readable on `indexes`: `key` is hashed and
/// only its first 7 characters (at most half of it) are kept, for display.
pub fn key_record(key: &str, tenant: &str, plan: &str, indexes: Vec<String>, now_unix: u64) -> ApiKey {
    ApiKey {
        hash: hash_key(key),
        // At most half the key, so a short key is never shown whole.
        prefix: key.chars().take(7.min(key.chars().count() / 2)).collect(),
        tenant: tenant.into(),
        plan: plan.to_ascii_lowercase(),
        status: KeyStatus::Active,
        indexes,
        created_unix: now_unix,
        revoked_unix: None,
    }
}

/// Checks a plan before it is stored: a name of letters, digits, `-` and `_`, and
/// limits of at least 1.
pub fn check_plan(plan: &Plan) -> Result<()> {
    if plan.name.is_empty() || !plan.name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') {
        return Err(Error::invalid("plan.name", format!("{:?}: use letters, digits, '-' and '_'", plan.name)));
    }
    for (field, v) in [
        ("plan.max_top_k", plan.max_top_k as u64),
        ("plan.requests_per_minute", plan.requests_per_minute),
        ("plan.requests_per_day", plan.requests_per_day),
    ] {
        if v == 0 {
            return Err(Error::invalid(field, "must be at least 1"));
        }
    }
    Ok(())
}

/// The two rate windows of a plan: (window length in seconds, limit).
pub fn rate_windows(plan: &Plan) -> [(u64, u64); 2] {
    [(60, plan.requests_per_minute), (86_400, plan.requests_per_day)]
}

/// Creates a key in `store` after checking its plan exists; returns the record.
pub async fn create_key(
    store: &dyn KeyStore,
    key: &str,
    tenant: &str,
    plan: &str,
    indexes: Vec<String>,
) -> Result<ApiKey> {
    if store.plan(plan).await?.is_none() {
        return Err(Error::invalid("plan", format!("unknown plan {plan:?}")));
    }
    if tenant.trim().is_empty() {
        return Err(Error::invalid("tenant", "is empty"));
    }
    if indexes.is_empty() {
        return Err(Error::invalid("indexes", "name at least one index id, or `*`"));
    }
    let record = key_record(key, tenant, plan, indexes, now_unix());
    store.put_key(record.clone()).await?;
    Ok(record)
}

/// Keys and plans in a JSON file; rate counters in memory.
pub struct LocalKeyStore {
    path: Option<PathBuf>,
    data: Mutex<KeyFile>,
    counters: Mutex<HashMap<(String, u64, u64), u64>>,
}

/// The JSON file of a [`LocalKeyStore`].
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct KeyFile {
    /// Keys.
    #[serde(default)]
    pub keys: Vec<ApiKey>,
    /// Custom plans (the built-in ones always exist).
    #[serde(default)]
    pub plans: Vec<Plan>,
}

impl LocalKeyStore {
    /// A store kept only in memory.
    pub fn in_memory() -> Self {
        LocalKeyStore { path: None, data: Mutex::new(KeyFile::default()), counters: Mutex::new(HashMap::new()) }
    }

    /// Opens (or starts) the store in `path`.
    pub fn open(path: &Path) -> Result<Self> {
        let data = if path.exists() {
            let bytes = std::fs::read(path).map_err(|e| Error::io(path, e))?;
            serde_json::from_slice(&bytes)
                .map_err(|e| Error::invalid("keys file", format!("{}: {e}", path.display())))?
        } else {
            KeyFile::default()
        };
        Ok(LocalKeyStore {
            path: Some(path.to_path_buf()),
            data: Mutex::new(data),
            counters: Mutex::new(HashMap::new()),
        })
    }

    /// Stores a new key for `tenant` on `plan`, readable on `indexes`; returns the record.
    /// `key` is hashed; only its first 7 characters are kept.
    pub fn add(&self, key: &str, tenant: &str, plan: &str, indexes: Vec<String>) -> Result<ApiKey> {
        if self.plan_sync(plan).is_none() {
            return Err(Error::invalid("plan", format!("unknown plan {plan:?}")));
        }
        if let Some(bad) = indexes.iter().find(|g| Scope::parse_grant(g).is_none()) {
            return Err(Error::invalid(
                "indexes",
                format!("{bad:?} is not a grant: write INDEX or INDEX:read|write|admin"),
            ));
        }
        let record = key_record(key, tenant, plan, indexes, now_unix());
        self.store_key(record.clone())?;
        Ok(record)
    }

    fn store_key(&self, record: ApiKey) -> Result<()> {
        let mut data = self.data.lock().expect("key store lock");
        data.keys.retain(|k| k.hash != record.hash);
        data.keys.push(record);
        self.save(&data)
    }

    /// Revokes every key whose hash or display prefix is `id`; returns how many.
    pub fn revoke_now(&self, id: &str, now: u64) -> Result<usize> {
        let mut data = self.data.lock().expect("key store lock");
        let mut n = 0;
        for k in data.keys.iter_mut().filter(|k| k.hash == id || k.prefix == id) {
            k.status = KeyStatus::Revoked;
            k.revoked_unix = Some(now);
            n += 1;
        }
        self.save(&data)?;
        Ok(n)
    }

    fn find_sync(&self, hash: &str) -> Option<ApiKey> {
        let data = self.data.lock().expect("key store lock");
        // Every stored hash is compared, in constant time, so timing tells nothing.
        let mut found = None;
        for k in &data.keys {
            if constant_time_eq(&k.hash, hash) {
                found = Some(k.clone());
            }
        }
        found
    }

    fn plan_sync(&self, name: &str) -> Option<Plan> {
        let data = self.data.lock().expect("key store lock");
        data.plans.iter().cloned().chain(Plan::builtin()).find(|p| p.name.eq_ignore_ascii_case(name))
    }

    fn count_sync(&self, key: &ApiKey, plan: &Plan, now: u64) -> RateDecision {
        let mut counters = self.counters.lock().expect("counter lock");
        counters.retain(|(_, len, start), _| start + len > now);
        let windows = rate_windows(plan);
        for &(len, limit) in &windows {
            let start = now - now % len;
            let used = counters.get(&(key.hash.clone(), len, start)).copied().unwrap_or(0);
            if used >= limit {
                return RateDecision::Limited { limit, retry_after: start + len - now };
            }
        }
        let mut tightest = (u64::MAX, u64::MAX, 0u64);
        for &(len, limit) in &windows {
            let start = now - now % len;
            let used = counters.entry((key.hash.clone(), len, start)).or_insert(0);
            *used += 1;
            let remaining = limit - *used;
            if remaining < tightest.1 {
                tightest = (limit, remaining, start + len - now);
            }
        }
        RateDecision::Allowed { limit: tightest.0, remaining: tightest.1, reset_secs: tightest.2 }
    }

    /// Every key record.
    pub fn list(&self) -> Vec<ApiKey> {
        self.data.lock().expect("key store lock").keys.clone()
    }

    fn save(&self, data: &KeyFile) -> Result<()> {
        let Some(path) = &self.path else { return Ok(()) };
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        }
        let tmp = path.with_extension("tmp");
        std::fs::write(&tmp, serde_json::to_vec_pretty(data)?).map_err(|e| Error::io(&tmp, e))?;
        std::fs::rename(&tmp, path).map_err(|e| Error::io(path, e))
    }
}

impl KeyStore for LocalKeyStore {
    fn find<'a>(&'a self, hash: &'a str) -> StoreFuture<'a, Option<ApiKey>> {
        Box::pin(std::future::ready(Ok(self.find_sync(hash))))
    }

    fn plan<'a>(&'a self, name: &'a str) -> StoreFuture<'a, Option<Plan>> {
        Box::pin(std::future::ready(Ok(self.plan_sync(name))))
    }

    fn count<'a>(&'a self, key: &'a ApiKey, plan: &'a Plan, now: u64) -> StoreFuture<'a, RateDecision> {
        Box::pin(std::future::ready(Ok(self.count_sync(key, plan, now))))
    }

    fn put_key(&self, record: ApiKey) -> StoreFuture<'_, ()> {
        Box::pin(std::future::ready(self.store_key(record)))
    }

    fn list_keys(&self) -> StoreFuture<'_, Vec<ApiKey>> {
        Box::pin(std::future::ready(Ok(self.list())))
    }

    fn revoke<'a>(&'a self, id: &'a str, now: u64) -> StoreFuture<'a, usize> {
        Box::pin(std::future::ready(self.revoke_now(id, now)))
    }

    fn put_plan(&self, plan: Plan) -> StoreFuture<'_, ()> {
        Box::pin(std::future::ready((|| {
            check_plan(&plan)?;
            let mut data = self.data.lock().expect("key store lock");
            data.plans.retain(|p| !p.name.eq_ignore_ascii_case(&plan.name));
            data.plans.push(plan);
            self.save(&data)
        })()))
    }

    fn custom_plans(&self) -> StoreFuture<'_, Vec<Plan>> {
        Box::pin(std::future::ready(Ok(self.data.lock().expect("key store lock").plans.clone())))
    }
}

/// A [`KeyStore`] in front of another that keeps found keys and plans in memory for a
/// short time (warm Lambda containers skip a DynamoDB read per request).
///
/// A revoked key is refused at the latest `ttl` after its revocation. Rate counting
/// always goes to the inner store. With `fail_open`, a key or plan whose cache entry has
/// expired is still served from the cache while the inner store fails, and a failing
/// counter lets the request through uncounted (both logged); otherwise (the default)
/// store failures are errors, which the API turns into 503.
///
/// Found and unknown keys are kept apart: unknown ones (a store read saved per repeated bad
/// key) in a map of at most [`MAX_CACHED_MISSES`] that is emptied when full, found ones in
/// their own map, so a flood of random keys never evicts a good one.
pub struct CachedKeyStore {
    inner: Arc<dyn KeyStore>,
    ttl: std::time::Duration,
    fail_open: bool,
    keys: Mutex<Cache<ApiKey>>,
    plans: Mutex<Cache<Plan>>,
}

/// Unknown keys (or plans) remembered at most; one more empties that map (found ones stay).
pub const MAX_CACHED_MISSES: usize = 10_000;

/// Found entries and misses, apart.
struct Cache<T> {
    found: HashMap<String, (std::time::Instant, T)>,
    missing: HashMap<String, std::time::Instant>,
}

impl<T: Clone> Cache<T> {
    fn new() -> Self {
        Cache { found: HashMap::new(), missing: HashMap::new() }
    }

    /// The entry: `Ok` when fresh, `Err` with the stale value otherwise.
    fn get(&self, k: &str, ttl: std::time::Duration) -> Option<std::result::Result<Option<T>, Option<T>>> {
        let (at, v) = match (self.found.get(k), self.missing.get(k)) {
            (Some((at, v)), _) => (at, Some(v.clone())),
            (None, Some(at)) => (at, None),
            (None, None) => return None,
        };
        Some(if at.elapsed() < ttl { Ok(v) } else { Err(v) })
    }

    fn put(&mut self, k: &str, v: Option<T>, ttl: std::time::Duration) {
        let now = std::time::Instant::now();
        match v {
            Some(v) => {
                self.missing.remove(k);
                if self.found.len() >= MAX_CACHED_FOUND {
                    self.found.retain(|_, (at, _)| at.elapsed() < ttl);
                }
                if self.found.len() < MAX_CACHED_FOUND {
                    self.found.insert(k.to_string(), (now, v));
                }
            }
            None => {
                self.found.remove(k);
                if self.missing.len() >= MAX_CACHED_MISSES {
                    self.missing.clear();
                }
                self.missing.insert(k.to_string(), now);
            }
        }
    }

    fn remove(&mut self, k: &str) {
        self.found.remove(k);
        self.missing.remove(k);
    }

    fn clear(&mut self) {
        self.found.clear();
        self.missing.clear();
    }
}

/// Found keys (or plans) remembered at most; beyond, expired ones are dropped first, and a
/// new one is not remembered while every slot is fresh.
const MAX_CACHED_FOUND: usize = 100_000;

impl CachedKeyStore {
    /// Caches `inner`'s answers for `ttl`.
    pub fn new(inner: Arc<dyn KeyStore>, ttl: std::time::Duration, fail_open: bool) -> Self {
        CachedKeyStore { inner, ttl, fail_open, keys: Mutex::new(Cache::new()), plans: Mutex::new(Cache::new()) }
    }

    async fn cached<T: Clone + Send>(
        &self,
        cache: &Mutex<Cache<T>>,
        k: &str,
        fetch: StoreFuture<'_, Option<T>>,
    ) -> Result<Option<T>> {
        let entry = cache.lock().expect("key cache lock").get(k, self.ttl);
        let stale = match entry {
            Some(Ok(v)) => return Ok(v),
            Some(Err(v)) => Some(v),
            None => None,
        };
        match fetch.await {
            Ok(v) => {
                cache.lock().expect("key cache lock").put(k, v.clone(), self.ttl);
                Ok(v)
            }
            Err(e) => match stale {
                Some(v) if self.fail_open => {
                    tracing::warn!(error = %e, "key store unavailable: serving an expired cache entry (fail-open)");
                    Ok(v)
                }
                _ => Err(e),
            },
        }
    }
}

impl KeyStore for CachedKeyStore {
    fn find<'a>(&'a self, hash: &'a str) -> StoreFuture<'a, Option<ApiKey>> {
        Box::pin(self.cached(&self.keys, hash, self.inner.find(hash)))
    }

    fn plan<'a>(&'a self, name: &'a str) -> StoreFuture<'a, Option<Plan>> {
        Box::pin(self.cached(&self.plans, name, self.inner.plan(name)))
    }

    fn count<'a>(&'a self, key: &'a ApiKey, plan: &'a Plan, now: u64) -> StoreFuture<'a, RateDecision> {
        Box::pin(async move {
            match self.inner.count(key, plan, now).await {
                Err(e) if self.fail_open => {
                    tracing::warn!(error = %e, "rate counter unavailable: request let through uncounted (fail-open)");
                    Ok(RateDecision::Allowed {
                        limit: plan.requests_per_minute,
                        remaining: plan.requests_per_minute,
                        reset_secs: 60 - now % 60,
                    })
                }
                r => r,
            }
        })
    }

    fn put_key(&self, record: ApiKey) -> StoreFuture<'_, ()> {
        self.keys.lock().expect("key cache lock").remove(&record.hash);
        self.inner.put_key(record)
    }

    fn list_keys(&self) -> StoreFuture<'_, Vec<ApiKey>> {
        self.inner.list_keys()
    }

    fn revoke<'a>(&'a self, id: &'a str, now: u64) -> StoreFuture<'a, usize> {
        self.keys.lock().expect("key cache lock").clear();
        self.inner.revoke(id, now)
    }

    fn put_plan(&self, plan: Plan) -> StoreFuture<'_, ()> {
        self.plans.lock().expect("key cache lock").clear();
        self.inner.put_plan(plan)
    }

    fn custom_plans(&self) -> StoreFuture<'_, Vec<Plan>> {
        self.inner.custom_plans()
    }
}

/// Seconds since the Unix epoch.
pub fn now_unix() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_stored_hashed_found_by_hash_and_revocable() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("keys.json");
        let store = LocalKeyStore::open(&path).unwrap();
        let key = new_key().unwrap();
        let rec = store.add(&key, "acme", "pro", vec!["*".into()]).unwrap();
        let file = std::fs::read_to_string(&path).unwrap();
        assert!(!file.contains(&key), "the key itself is never stored");
        assert!(file.contains(&hash_key(&key)));
        let reopened = LocalKeyStore::open(&path).unwrap();
        assert_eq!(reopened.find_sync(&hash_key(&key)), Some(rec.clone()));
        assert_eq!(reopened.find_sync(&hash_key("sx_other")), None);
        assert_eq!(reopened.revoke_now(&rec.prefix, 7).unwrap(), 1);
        assert_eq!(reopened.find_sync(&hash_key(&key)).unwrap().status, KeyStatus::Revoked);
        assert!(store.add("k", "t", "platinum", vec![]).is_err(), "unknown plan");
    }

    #[test]
    fn rate_windows_refuse_the_request_over_the_limit_and_reset() {
        let store = LocalKeyStore::in_memory();
        let key = store.add("sx_a", "t", "free", vec!["*".into()]).unwrap();
        let plan = Plan { name: "tiny".into(), max_top_k: 5, requests_per_minute: 2, requests_per_day: 3 };
        let t0 = 1_000_040; // 20 s into a minute window
        assert!(matches!(store.count_sync(&key, &plan, t0), RateDecision::Allowed { remaining: 1, .. }));
        assert!(matches!(store.count_sync(&key, &plan, t0 + 1), RateDecision::Allowed { remaining: 0, .. }));
        assert_eq!(store.count_sync(&key, &plan, t0 + 2), RateDecision::Limited { limit: 2, retry_after: 38 });
        // Next minute: the day window (3) still has one left, then it is full.
        assert!(matches!(store.count_sync(&key, &plan, t0 + 60), RateDecision::Allowed { remaining: 0, .. }));
        assert!(matches!(store.count_sync(&key, &plan, t0 + 61), RateDecision::Limited { limit: 3, .. }));
        assert!(matches!(store.count_sync(&key, &plan, t0 + 125), RateDecision::Limited { limit: 3, .. }));
        // Another key has its own counters.
        let other = store.add("sx_b", "t", "free", vec!["*".into()]).unwrap();
        assert!(matches!(store.count_sync(&other, &plan, t0 + 2), RateDecision::Allowed { .. }));
    }

    #[test]
    fn constant_time_eq_is_equality() {
        assert!(constant_time_eq("abc", "abc"));
        assert!(!constant_time_eq("abc", "abd"));
        assert!(!constant_time_eq("abc", "ab"));
    }

    /// A store that fails every call while `down` is set.
    struct Flaky {
        inner: LocalKeyStore,
        down: std::sync::atomic::AtomicBool,
        reads: std::sync::atomic::AtomicUsize,
    }

    impl Flaky {
        fn gate(&self) -> Result<()> {
            self.reads.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            if self.down.load(std::sync::atomic::Ordering::SeqCst) {
                Err(Error::Storage { location: "flaky".into(), reason: "unreachable".into() })
            } else {
                Ok(())
            }
        }
    }

    impl KeyStore for Flaky {
        fn find<'a>(&'a self, hash: &'a str) -> StoreFuture<'a, Option<ApiKey>> {
            Box::pin(async move { self.gate().map(|_| self.inner.find_sync(hash)) })
        }
        fn plan<'a>(&'a self, name: &'a str) -> StoreFuture<'a, Option<Plan>> {
            Box::pin(async move { self.gate().map(|_| self.inner.plan_sync(name)) })
        }
        fn count<'a>(&'a self, key: &'a ApiKey, plan: &'a Plan, now: u64) -> StoreFuture<'a, RateDecision> {
            Box::pin(async move { self.gate().map(|_| self.inner.count_sync(key, plan, now)) })
        }
        fn put_key(&self, record: ApiKey) -> StoreFuture<'_, ()> {
            self.inner.put_key(record)
        }
        fn list_keys(&self) -> StoreFuture<'_, Vec<ApiKey>> {
            self.inner.list_keys()
        }
        fn revoke<'a>(&'a self, id: &'a str, now: u64) -> StoreFuture<'a, usize> {
            self.inner.revoke(id, now)
        }
        fn put_plan(&self, plan: Plan) -> StoreFuture<'_, ()> {
            self.inner.put_plan(plan)
        }
        fn custom_plans(&self) -> StoreFuture<'_, Vec<Plan>> {
            self.inner.custom_plans()
        }
    }

    fn block_on<T>(f: impl std::future::Future<Output = T>) -> T {
        tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(f)
    }

    fn flaky_with_key() -> (Arc<Flaky>, ApiKey) {
        let flaky = Arc::new(Flaky { inner: LocalKeyStore::in_memory(), down: false.into(), reads: 0.into() });
        let rec = flaky.inner.add("sx_cached", "t", "free", vec!["*".into()]).unwrap();
        (flaky, rec)
    }

    #[test]
    fn the_cache_answers_within_its_ttl_and_asks_again_after_it() {
        let (flaky, rec) = flaky_with_key();
        let cache = CachedKeyStore::new(flaky.clone(), std::time::Duration::from_millis(200), false);
        let reads = || flaky.reads.load(std::sync::atomic::Ordering::SeqCst);
        assert_eq!(block_on(cache.find(&rec.hash)).unwrap(), Some(rec.clone()));
        assert_eq!(block_on(cache.find(&rec.hash)).unwrap(), Some(rec.clone()));
        assert_eq!(reads(), 1, "the second lookup is served from memory");
        // A revocation made elsewhere shows once the entry expires.
        flaky.inner.revoke_now(&rec.prefix, 9).unwrap();
        assert_eq!(block_on(cache.find(&rec.hash)).unwrap().unwrap().status, KeyStatus::Active);
        std::thread::sleep(std::time::Duration::from_millis(250));
        assert_eq!(block_on(cache.find(&rec.hash)).unwrap().unwrap().status, KeyStatus::Revoked);
        assert_eq!(reads(), 2);
        // Unknown keys are cached too (no store read per bad key within the TTL).
        assert_eq!(block_on(cache.find("nope")).unwrap(), None);
        assert_eq!(block_on(cache.find("nope")).unwrap(), None);
        assert_eq!(reads(), 3);
    }

    #[test]
    fn a_flood_of_unknown_keys_never_evicts_a_good_one() {
        let (flaky, rec) = flaky_with_key();
        let cache = CachedKeyStore::new(flaky.clone(), std::time::Duration::from_secs(600), false);
        assert!(block_on(cache.find(&rec.hash)).unwrap().is_some());
        let reads = || flaky.reads.load(std::sync::atomic::Ordering::SeqCst);
        block_on(async {
            for i in 0..(MAX_CACHED_MISSES * 12) {
                assert_eq!(cache.find(&format!("random-{i}")).await.unwrap(), None);
            }
        });
        // The good key is still served from memory: no store read, even with the store down.
        let before = reads();
        flaky.down.store(true, std::sync::atomic::Ordering::SeqCst);
        assert_eq!(block_on(cache.find(&rec.hash)).unwrap(), Some(rec.clone()));
        assert_eq!(reads(), before);
        // The misses stayed bounded.
        assert!(cache.keys.lock().unwrap().missing.len() <= MAX_CACHED_MISSES);
        // A key that was unknown and is then added is found once its miss expires, and a
        // found entry replaces the miss.
        let mut c = Cache::new();
        c.put("k", None, std::time::Duration::from_secs(1));
        c.put("k", Some(1), std::time::Duration::from_secs(1));
        assert_eq!(c.get("k", std::time::Duration::from_secs(1)), Some(Ok(Some(1))));
        assert!(c.missing.is_empty());
    }

    #[test]
    fn a_failing_store_fails_closed_by_default_and_serves_stale_entries_when_fail_open() {
        let (flaky, rec) = flaky_with_key();
        let plan = Plan::builtin().remove(0);
        for fail_open in [false, true] {
            let cache = CachedKeyStore::new(flaky.clone(), std::time::Duration::from_millis(50), fail_open);
            flaky.down.store(false, std::sync::atomic::Ordering::SeqCst);
            assert!(block_on(cache.find(&rec.hash)).unwrap().is_some());
            std::thread::sleep(std::time::Duration::from_millis(80));
            flaky.down.store(true, std::sync::atomic::Ordering::SeqCst);
            let found = block_on(cache.find(&rec.hash));
            let counted = block_on(cache.count(&rec, &plan, 1_000));
            if fail_open {
                assert_eq!(found.unwrap(), Some(rec.clone()), "stale entry served");
                assert!(matches!(counted.unwrap(), RateDecision::Allowed { .. }));
            } else {
                assert!(matches!(found, Err(Error::Storage { .. })), "fail closed");
                assert!(counted.is_err());
            }
            // A key never seen is an error either way: nothing to fall back on.
            assert!(block_on(cache.find("never-seen")).is_err());
        }
    }

    #[test]
    fn plans_are_checked_before_they_are_stored() {
        let store = LocalKeyStore::in_memory();
        let ok = Plan { name: "team-2".into(), max_top_k: 20, requests_per_minute: 100, requests_per_day: 5_000 };
        block_on(store.put_plan(ok.clone())).unwrap();
        assert_eq!(block_on(store.plan("TEAM-2")).unwrap(), Some(ok));
        for (bad, field) in [
            (Plan { name: "a b".into(), ..Plan::builtin().remove(0) }, "plan.name"),
            (Plan { max_top_k: 0, ..Plan::builtin().remove(0) }, "plan.max_top_k"),
            (Plan { requests_per_day: 0, ..Plan::builtin().remove(0) }, "plan.requests_per_day"),
        ] {
            let e = block_on(store.put_plan(bad)).unwrap_err();
            assert!(matches!(e, Error::InvalidArgument { field: ref f, .. } if f == field), "{e}");
        }
        let e = block_on(create_key(&store, "sx_x", "t", "platinum", vec!["*".into()])).unwrap_err();
        assert!(e.to_string().contains("unknown plan"), "{e}");
        let e = block_on(create_key(&store, "sx_x", "t", "free", vec![])).unwrap_err();
        assert!(e.to_string().contains("indexes"), "{e}");
    }

    #[test]
    fn grants_give_the_widest_scope_per_index() {
        let key = |grants: &[&str]| ApiKey {
            hash: String::new(),
            prefix: String::new(),
            tenant: "t".into(),
            plan: "free".into(),
            status: KeyStatus::Active,
            indexes: grants.iter().map(|g| g.to_string()).collect(),
            created_unix: 0,
            revoked_unix: None,
        };
        let k = key(&["demo", "team:write", "*:read", "ops:admin"]);
        assert_eq!(
            (k.scope("demo"), k.scope("team"), k.scope("other")),
            (Some(Scope::Read), Some(Scope::Write), Some(Scope::Read))
        );
        assert!(k.allows("team", Scope::Read) && k.allows("team", Scope::Write) && !k.allows("team", Scope::Admin));
        assert!(!k.allows("demo", Scope::Write), "a read key cannot write");
        assert!(k.allows("ops", Scope::Admin));
        assert!(key(&["*:admin"]).allows("anything", Scope::Write));
        assert_eq!(key(&["team"]).scope("demo"), None);
        assert_eq!(Scope::parse_grant("x:owner"), None);
        assert_eq!(Scope::parse_grant(":write"), None);
    }
}
