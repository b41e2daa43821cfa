//! The root manifest of a sharded index: which version of every shard one published
//! version is made of, and BM25's statistics over all of them.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::index::format::{remove_index, sha256_hex, FileEntry, MANIFEST};
use crate::index::{Index, LexicalStats, Manifest, ShardStore, STORE_FILE};
use crate::storage::{Storage, Within};

/// The root manifest's object key. It is written last: an index whose root exists is
/// complete, and one without is a single index (`K` = 1).
pub const ROOT_MANIFEST: &str = "root.json";
/// BM25's statistics over every shard ([`LexicalStats`], bincode).
pub const STATS_FILE: &str = "lexical_stats.bin";
/// In each shard, where its documents stand among all the index's ([`Shards::order`]):
/// one little-endian `u32` per document, saved with the shard as an attachment.
pub const ORDER_FILE: &str = "documents.order";

/// An index as `K` shards, in memory.
pub struct Shards {
    /// The shards, in shard order.
    pub indexes: Vec<Index>,
    /// For each shard, each of its documents' ordinal among all the index's documents (the
    /// order of the single index built from the same documents): what a search over the
    /// shards breaks ties by, so that it answers as that index would.
    pub order: Vec<Vec<u32>>,
    /// BM25's statistics over every shard.
    pub stats: LexicalStats,
    /// The fingerprint of the build's inputs ([`inputs_sha256`](crate::build::inputs_sha256)):
    /// a build of the same inputs into the same shard count publishes nothing.
    pub inputs_sha256: String,
}
/// The format name written in every root manifest.
const ROOT_FORMAT: &str = "sextant-sharded-index";
/// The root format version this build writes and reads.
const ROOT_VERSION: u32 = 1;

/// The key prefix of shard `k`'s files: `shards/003/`.
pub fn shard_prefix(k: usize) -> String {
    format!("shards/{k:03}/")
}

/// One shard of a published version.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShardEntry {
    /// Where its files are (`shards/003/`).
    pub prefix: String,
    /// The SHA-256 of its `manifest.json`: a shard whose manifest differs is another
    /// build's, and is refused.
    pub manifest_sha256: String,
    /// Its documents.
    pub documents: usize,
    /// Its chunks.
    pub chunks: usize,
}

/// The root manifest of a sharded index.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RootManifest {
    /// Always `sextant-sharded-index`.
    pub format: String,
    /// The root format version.
    pub version: u32,
    /// Index id.
    pub index_id: String,
    /// The shards, in shard order ([`shard_of`](super::shard_of) counts into this list).
    pub shards: Vec<ShardEntry>,
    /// The statistics file, with its size and checksum.
    pub stats: FileEntry,
    /// The vector cache saved beside the shards (encoded files, each record with its own
    /// checksum), for the next build: not read by a search.
    #[serde(default)]
    pub encoded: Vec<String>,
    /// The fingerprint of the build's inputs ([`Shards::inputs_sha256`]).
    #[serde(default)]
    pub inputs_sha256: String,
}

/// Writes `shards` (shard `k` under [`shard_prefix`]`(k)`, with its documents' order),
/// BM25's statistics over all of them, then the root manifest, the commit point, naming
/// `encoded`, the vector cache files the caller saved beside them.
pub fn save_sharded(storage: &dyn Storage, shards: &Shards, encoded: &[String]) -> Result<RootManifest> {
    let Shards { indexes, order, stats, inputs_sha256 } = shards;
    if order.len() != indexes.len() || indexes.iter().zip(order).any(|(i, o)| i.documents.len() != o.len()) {
        return Err(Error::invalid("shards", "one document order per shard, one entry per document"));
    }
    let mut entries = Vec::with_capacity(indexes.len());
    for (k, (index, order)) in indexes.iter().zip(order).enumerate() {
        entries.push(save_shard(storage, k, index, order)?);
    }
    let bytes = bincode::serialize(stats)?;
    storage.write(STATS_FILE, &bytes)?;
    let index_id = indexes.first().map(|i| i.manifest.index_id.clone()).unwrap_or_default();
    let root = RootManifest::new(index_id, entries, &bytes, encoded.to_vec(), inputs_sha256.clone());
    storage.write(ROOT_MANIFEST, &serde_json::to_vec_pretty(&root)?)?;
    Ok(root)
}

impl RootManifest {
    /// The root manifest of index `index_id` made of `shards`, with `stats` the bytes of
    /// its [`STATS_FILE`] (checksummed here), naming the vector cache files `encoded`
    /// and the build's `inputs_sha256`.
    pub fn new(
        index_id: String,
        shards: Vec<ShardEntry>,
        stats: &[u8],
        encoded: Vec<String>,
        inputs_sha256: String,
    ) -> Self {
        RootManifest {
            format: ROOT_FORMAT.into(),
            version: ROOT_VERSION,
            index_id,
            shards,
            stats: FileEntry { name: STATS_FILE.into(), bytes: stats.len() as u64, sha256: sha256_hex(stats) },
            encoded,
            inputs_sha256,
        }
    }
}

/// Writes shard `k` (`index`, with its documents' `order` and its router's store,
/// [`STORE_FILE`]) under [`shard_prefix`]`(k)` and
/// returns the root manifest's entry for it: what [`save_sharded`] writes for each shard,
/// and what a build that merges its shards apart writes for one.
pub fn save_shard(storage: &dyn Storage, k: usize, index: &Index, order: &[u32]) -> Result<ShardEntry> {
    let prefix = shard_prefix(k);
    let within = Within::new(storage, prefix.clone());
    let order_bytes: Vec<u8> = order.iter().flat_map(|d| d.to_le_bytes()).collect();
    let store = ShardStore::file_of(index)?;
    index.save_with(&within, vec![(ORDER_FILE.to_string(), order_bytes), (STORE_FILE.to_string(), store)])?;
    let manifest_sha256 = sha256_hex(&within.read(MANIFEST)?);
    Ok(ShardEntry { prefix, manifest_sha256, documents: index.documents.len(), chunks: index.chunks.len() })
}

/// Loads a sharded index: `None` when `storage` holds no root manifest (a single index);
/// else the root and the shards (each verified as [`Index::load`] does, and refused unless
/// its manifest is the one the root names), their documents' order and the statistics.
pub fn load_sharded(storage: &dyn Storage) -> Result<Option<(RootManifest, Shards)>> {
    use rayon::prelude::*;
    let Some((root, stats)) = read_root(storage)? else {
        return Ok(None);
    };
    let loaded = (0..root.shards.len())
        .into_par_iter()
        .with_max_len(1)
        .map(|k| load_shard(storage, &root, k))
        .collect::<Result<Vec<(Index, Vec<u32>)>>>()?;
    let (indexes, order) = loaded.into_iter().unzip();
    let inputs_sha256 = root.inputs_sha256.clone();
    Ok(Some((root, Shards { indexes, order, stats, inputs_sha256 })))
}

fn corrupted(storage: &dyn Storage, file: &str, expected: &str, found: String) -> Error {
    Error::IndexCorrupted { file: format!("{}/{file}", storage.location()), expected: expected.into(), found }
}

/// The root manifest in `storage` and BM25's statistics over every shard, verified:
/// `None` when there is no root (a single index).
pub fn read_root(storage: &dyn Storage) -> Result<Option<(RootManifest, LexicalStats)>> {
    if !storage.exists(ROOT_MANIFEST)? {
        return Ok(None);
    }
    let root: RootManifest = serde_json::from_slice(&storage.read(ROOT_MANIFEST)?)
        .map_err(|e| corrupted(storage, ROOT_MANIFEST, "a root manifest", e.to_string()))?;
    if root.format != ROOT_FORMAT || root.version != ROOT_VERSION {
        return Err(corrupted(
            storage,
            ROOT_MANIFEST,
            &format!("{ROOT_FORMAT} version {ROOT_VERSION}"),
            format!("{} version {}", root.format, root.version),
        ));
    }
    if root.shards.is_empty() {
        return Err(corrupted(storage, ROOT_MANIFEST, "at least one shard", "none".into()));
    }
    let bytes = storage.read(STATS_FILE)?;
    if sha256_hex(&bytes) != root.stats.sha256 {
        return Err(corrupted(storage, STATS_FILE, &format!("SHA-256 {}", root.stats.sha256), sha256_hex(&bytes)));
    }
    let stats: LexicalStats =
        bincode::deserialize(&bytes).map_err(|e| corrupted(storage, STATS_FILE, "BM25 statistics", e.to_string()))?;
    Ok(Some((root, stats)))
}

/// Shard `k` of the sharded index `root` describes, and its documents' order: verified as
/// [`Index::load`] does, and refused unless its manifest is the one the root names (what a
/// shard worker loads).
pub fn load_shard(storage: &dyn Storage, root: &RootManifest, k: usize) -> Result<(Index, Vec<u32>)> {
    open_shard(storage, root, k, Index::load, |i| (&i.manifest, i.documents.len()))
}

/// What a router keeps of shard `k` ([`ShardStore::load`]: its documents and where their
/// chunks start, no postings, vectors or chunk records), and its documents' order, verified
/// as [`load_shard`] verifies the whole shard; only those files need be in `storage`.
pub fn load_shard_store(storage: &dyn Storage, root: &RootManifest, k: usize) -> Result<(ShardStore, Vec<u32>)> {
    open_shard(storage, root, k, ShardStore::load, |s| (&s.manifest, s.documents.len()))
}

/// Shard `k` of `root` loaded by `load`, with its documents' order; `facts` reads what was
/// loaded's manifest and document count.
fn open_shard<T>(
    storage: &dyn Storage,
    root: &RootManifest,
    k: usize,
    load: fn(&dyn Storage) -> Result<T>,
    facts: fn(&T) -> (&Manifest, usize),
) -> Result<(T, Vec<u32>)> {
    let Some(entry) = root.shards.get(k) else {
        return Err(Error::invalid("shard", format!("shard {k} of an index of {} shards", root.shards.len())));
    };
    let within = Within::new(storage, entry.prefix.clone());
    let found = sha256_hex(&within.read(MANIFEST)?);
    if found != entry.manifest_sha256 {
        let file = format!("{}{MANIFEST}", entry.prefix);
        let expected = format!("the manifest the root names ({})", entry.manifest_sha256);
        return Err(corrupted(storage, &file, &expected, found));
    }
    let index = load(&within)?;
    let (manifest, documents) = facts(&index);
    let file = format!("{}{ORDER_FILE}", entry.prefix);
    let listed = manifest.files.iter().find(|f| f.name == ORDER_FILE);
    let bytes = within.read(ORDER_FILE)?;
    if listed.is_none_or(|f| f.sha256 != sha256_hex(&bytes)) || bytes.len() != 4 * documents {
        let expected = format!("{documents} documents' order, as the manifest lists it");
        return Err(corrupted(storage, &file, &expected, format!("{} bytes", bytes.len())));
    }
    let order = bytes.chunks_exact(4).map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect();
    Ok((index, order))
}

/// Removes from `storage` the shards of the sharded index `root` describes from shard
/// `keep` on; with `keep` = 0, the whole sharded index, its root manifest first (from then
/// on no sharded index is there).
pub fn remove_sharded(storage: &dyn Storage, root: &RootManifest, keep: usize) -> Result<()> {
    if keep == 0 {
        storage.remove(ROOT_MANIFEST)?;
        storage.remove(STATS_FILE)?;
    }
    for entry in root.shards.iter().skip(keep) {
        remove_index(&Within::new(storage, entry.prefix.clone()))?;
    }
    Ok(())
}
