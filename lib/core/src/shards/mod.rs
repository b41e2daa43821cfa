//! Index shards: one index split into `K` by document and searched as one.
//!
//! A document belongs to exactly one shard, [`shard_of`] its id (whole documents per
//! shard, so grouping by document stays within a shard). Each shard is a normal index
//! with its own manifest, under `shards/NNN/` beside a small root manifest
//! ([`RootManifest`]) that names, for one published version, every shard's manifest by
//! checksum and BM25's statistics over all of them ([`LexicalStats`](crate::index::LexicalStats)).
//! Every shard's BM25 is weighed with those global statistics, never its own, so a chunk
//! scores the same at any `K`. An index without a root is today's layout, `K` = 1.
//!
//! A search on a sharded index ([`ShardSet::search`]) encodes the query once, asks every
//! shard through the shard protocol ([`protocol`]: in this process, or over loopback HTTP
//! to worker processes) for each path's candidates with their scores ([`Engine::retrieve_paths`](crate::pipeline::Engine::retrieve_paths)),
//! merges each path's lists by score and runs the rest of the search (fusion, dense
//! feedback, relevance, rerank, recency, diversity) with the same code one engine runs
//! ([`Engine::finish`](crate::pipeline::Engine::finish)), over the chunks of every shard.
//! The router holds no text: the text of the results, and of a reranker's candidates, is
//! asked of their shards once the search has them (the fetch phase:
//! [`ShardedOutcome::fetched`], read through [`ResultsView`]). A shard that fails is left
//! out, and the outcome says how many answered.

mod assign;
mod fetch;
pub mod packed;
pub mod protocol;
mod root;
mod router;

pub use assign::shard_of;
pub use fetch::{Fetched, ResultsView};
pub use protocol::{FetchQuery, FetchedChunk, Shard, ShardRequest, ShardResponse};
pub use root::{
    load_shard, load_shard_store, load_sharded, read_root, remove_sharded, save_shard, save_sharded, shard_prefix,
    RootManifest, ShardEntry, Shards, ORDER_FILE, ROOT_MANIFEST, STATS_FILE,
};
pub use router::{LocalShards, Searcher, ShardSet, ShardedOutcome};

#[cfg(test)]
mod tests;
