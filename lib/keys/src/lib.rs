//! # sextant-keys
//!
//! API keys, plans and rate limits.
//!
//! Keys are kept only as SHA-256 hashes with a short display prefix. A [`KeyStore`] finds
//! a key by its hash and counts requests per key and window; [`LocalKeyStore`] is the
//! embedded default (a JSON file, counters in memory); `DynamoKeyStore` (crate
//! `sextant-aws`) keeps them in DynamoDB. [`CachedKeyStore`] sits in front of either.
//!
//! Nothing here speaks HTTP: the server authenticates with these types, the AWS crate
//! implements [`KeyStore`] on DynamoDB.

#![warn(missing_docs)]

mod store;

pub use store::{
    check_plan, constant_time_eq, create_key, hash_key, key_record, new_key, now_unix, rate_windows, ApiKey,
    CachedKeyStore, KeyFile, KeyStatus, KeyStore, LocalKeyStore, Plan, RateDecision, Scope, StoreFuture,
    MAX_CACHED_MISSES,
};
