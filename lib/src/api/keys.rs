//! API keys, plans and rate limits.
//!
//! Keys are kept only as SHA-256 hashes with a short display prefix. A [`KeyStore`] finds
//! a key by its hash and counts requests per key and window; [`LocalKeyStore`] is the
//! embedded default (a JSON file, counters in memory). The AWS issue adds DynamoDB.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::index::format::sha256_hex;

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
    /// Index ids it may read (`*` for all).
    pub indexes: Vec<String>,
    /// Creation time, seconds since the Unix epoch.
    pub created_unix: u64,
    /// Revocation time, if revoked.
    #[serde(default)]
    pub revoked_unix: Option<u64>,
}

impl ApiKey {
    /// Whether the key may read index `id`.
    pub fn can_read(&self, id: &str) -> bool {
        self.indexes.iter().any(|i| i == "*" || i == id)
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

/// Where keys, plans and rate counters live.
pub trait KeyStore: Send + Sync {
    /// The key with this hash, if any.
    fn find(&self, hash: &str) -> Result<Option<ApiKey>>;
    /// A plan by name.
    fn plan(&self, name: &str) -> Result<Option<Plan>>;
    /// Counts one request of `key` at `now_unix` against `plan`, unless a window is full.
    fn count(&self, key: &ApiKey, plan: &Plan, now_unix: u64) -> Result<RateDecision>;
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
            serde_json::from_slice(&bytes).map_err(|e| Error::invalid("keys file", format!("{}: {e}", path.display())))?
        } else {
            KeyFile::default()
        };
        Ok(LocalKeyStore { path: Some(path.to_path_buf()), data: Mutex::new(data), counters: Mutex::new(HashMap::new()) })
    }

    /// Stores a new key for `tenant` on `plan`, readable on `indexes`; returns the record.
    /// `key` is hashed; only its first 7 characters are kept.
    pub fn add(&self, key: &str, tenant: &str, plan: &str, indexes: Vec<String>) -> Result<ApiKey> {
        if self.plan(plan)?.is_none() {
            return Err(Error::invalid("plan", format!("unknown plan {plan:?}")));
        }
        let record = ApiKey {
            hash: hash_key(key),
            prefix: key.chars().take(7).collect(),
            tenant: tenant.into(),
            plan: plan.to_ascii_lowercase(),
            status: KeyStatus::Active,
            indexes,
            created_unix: now_unix(),
            revoked_unix: None,
        };
        let mut data = self.data.lock().expect("key store lock");
        data.keys.retain(|k| k.hash != record.hash);
        data.keys.push(record.clone());
        self.save(&data)?;
        Ok(record)
    }

    /// Revokes every key whose hash or display prefix is `id`; returns how many.
    pub fn revoke(&self, id: &str) -> Result<usize> {
        let mut data = self.data.lock().expect("key store lock");
        let mut n = 0;
        for k in data.keys.iter_mut().filter(|k| k.hash == id || k.prefix == id) {
            k.status = KeyStatus::Revoked;
            k.revoked_unix = Some(now_unix());
            n += 1;
        }
        self.save(&data)?;
        Ok(n)
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
    fn find(&self, hash: &str) -> Result<Option<ApiKey>> {
        let data = self.data.lock().expect("key store lock");
        // Every stored hash is compared, in constant time, so timing tells nothing.
        let mut found = None;
        for k in &data.keys {
            if constant_time_eq(&k.hash, hash) {
                found = Some(k.clone());
            }
        }
        Ok(found)
    }

    fn plan(&self, name: &str) -> Result<Option<Plan>> {
        let data = self.data.lock().expect("key store lock");
        Ok(data.plans.iter().cloned().chain(Plan::builtin()).find(|p| p.name.eq_ignore_ascii_case(name)))
    }

    fn count(&self, key: &ApiKey, plan: &Plan, now: u64) -> Result<RateDecision> {
        let mut counters = self.counters.lock().expect("counter lock");
        counters.retain(|(_, len, start), _| start + len > now);
        let windows = [(60u64, plan.requests_per_minute), (86_400u64, plan.requests_per_day)];
        for &(len, limit) in &windows {
            let start = now - now % len;
            let used = counters.get(&(key.hash.clone(), len, start)).copied().unwrap_or(0);
            if used >= limit {
                return Ok(RateDecision::Limited { limit, retry_after: start + len - now });
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
        Ok(RateDecision::Allowed { limit: tightest.0, remaining: tightest.1, reset_secs: tightest.2 })
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
        assert_eq!(reopened.find(&hash_key(&key)).unwrap(), Some(rec.clone()));
        assert_eq!(reopened.find(&hash_key("sx_other")).unwrap(), None);
        assert_eq!(reopened.revoke(&rec.prefix).unwrap(), 1);
        assert_eq!(reopened.find(&hash_key(&key)).unwrap().unwrap().status, KeyStatus::Revoked);
        assert!(store.add("k", "t", "platinum", vec![]).is_err(), "unknown plan");
    }

    #[test]
    fn rate_windows_refuse_the_request_over_the_limit_and_reset() {
        let store = LocalKeyStore::in_memory();
        let key = store.add("sx_a", "t", "free", vec!["*".into()]).unwrap();
        let plan = Plan { name: "tiny".into(), max_top_k: 5, requests_per_minute: 2, requests_per_day: 3 };
        let t0 = 1_000_040; // 20 s into a minute window
        assert!(matches!(store.count(&key, &plan, t0).unwrap(), RateDecision::Allowed { remaining: 1, .. }));
        assert!(matches!(store.count(&key, &plan, t0 + 1).unwrap(), RateDecision::Allowed { remaining: 0, .. }));
        assert_eq!(store.count(&key, &plan, t0 + 2).unwrap(), RateDecision::Limited { limit: 2, retry_after: 38 });
        // Next minute: the day window (3) still has one left, then it is full.
        assert!(matches!(store.count(&key, &plan, t0 + 60).unwrap(), RateDecision::Allowed { remaining: 0, .. }));
        assert!(matches!(store.count(&key, &plan, t0 + 61).unwrap(), RateDecision::Limited { limit: 3, .. }));
        assert!(matches!(store.count(&key, &plan, t0 + 125).unwrap(), RateDecision::Limited { limit: 3, .. }));
        // Another key has its own counters.
        let other = store.add("sx_b", "t", "free", vec!["*".into()]).unwrap();
        assert!(matches!(store.count(&other, &plan, t0 + 2).unwrap(), RateDecision::Allowed { .. }));
    }

    #[test]
    fn constant_time_eq_is_equality() {
        assert!(constant_time_eq("abc", "abc"));
        assert!(!constant_time_eq("abc", "abd"));
        assert!(!constant_time_eq("abc", "ab"));
    }
}
