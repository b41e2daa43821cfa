//! Writable indexes for the embedded server (`sextant serve`).
//!
//! A [`LiveIndex`] serves a built index plus every write since: a document put or deleted
//! is appended to a write-ahead log and flushed to disk (`fsync`) before the call returns,
//! then applied at once to a delta searched exactly beside the built index, with the
//! documents it replaces or deletes withdrawn from every search before ranking. A
//! compaction folds the delta into a new index version (every vector reused: the built
//! version's cache and the delta's own), publishes it with an atomic rename, and drops the
//! log records it holds. After a crash at any point, [`LiveIndex::open`] serves exactly the
//! writes that were acknowledged: the version the pointer names and the log after it (a
//! record cut short by the crash was never acknowledged and is dropped).
//!
//! A sharded index takes writes the same way, each document in its shard, and answers as
//! one index holding the same writes would ([`Served::Shards`]).

mod base;
mod error;
mod store;
#[cfg(test)]
mod testing;
mod wal;

pub use base::{LiveShards, Served};
pub use error::{Error, Result};
pub use store::{CompactionReport, DocumentInfo, LiveIndex, LiveOptions, Page, WriteOutcome};
pub use wal::{Op, Record};
