//! Encoded chunks keyed by content: what the encode step produces, what the merge step
//! reads, and what the next build reuses.
//!
//! A shard file is a bincode [`EncodedShard`]. Each record carries its own checksum, so a
//! damaged record is dropped (and its chunk encoded again) while the rest of the file is
//! still reused.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::encode::SparseVector;
use crate::error::{Error, Result};

/// What a shard file says it is.
const SHARD_FORMAT: &str = "sextant-encoded-1";

/// What a keys file says it is.
const KEYS_FORMAT: &str = "sextant-encoded-keys-1";

/// The content key of a chunk's vectors:
/// `SHA-256("sextant-chunk-v2" ‖ dense weights SHA-256 ‖ sparse weights SHA-256 ‖ chunk
/// tokens ‖ window ‖ dense window ‖ encoder input)`, so equal keys mean the same models read
/// the same text under the same chunking and dense windows. The dense window is the one the
/// plan names for the chunk ([`key_window`](super::key_window)): the build's own for a chunk
/// read in windows, and one name for a chunk read whole under any window.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ChunkKey(pub [u8; 32]);

impl ChunkKey {
    /// The key of `input` encoded by the models with these weight checksums, cut with this
    /// chunk budget and window, its dense vectors read in windows of `dense_window` tokens.
    pub fn new(
        dense_sha256: &str,
        sparse_sha256: &str,
        chunk_tokens: usize,
        window: usize,
        dense_window: usize,
        input: &str,
    ) -> Self {
        let mut h = Sha256::new();
        for part in [b"sextant-chunk-v2".as_slice(), dense_sha256.as_bytes(), sparse_sha256.as_bytes()] {
            h.update((part.len() as u64).to_le_bytes());
            h.update(part);
        }
        h.update((chunk_tokens as u64).to_le_bytes());
        h.update((window as u64).to_le_bytes());
        h.update((dense_window as u64).to_le_bytes());
        h.update(input.as_bytes());
        ChunkKey(h.finalize().into())
    }
}

/// One chunk's vectors, with the checksum that guards them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EncodedChunk {
    /// The content key.
    pub key: ChunkKey,
    /// The dense embedding: one row of the model's dimension per window of the chunk.
    pub dense: Vec<f32>,
    /// The SPLADE vector.
    pub sparse: SparseVector,
    /// The first 8 bytes of `SHA-256(key ‖ dense ‖ sparse ids ‖ sparse weights)`, all
    /// little-endian.
    pub check: [u8; 8],
}

impl EncodedChunk {
    /// A record of `key`'s vectors with its checksum.
    pub fn new(key: ChunkKey, dense: Vec<f32>, sparse: SparseVector) -> Self {
        let mut c = EncodedChunk { key, dense, sparse, check: [0; 8] };
        c.check = c.checksum();
        c
    }

    fn checksum(&self) -> [u8; 8] {
        let mut h = Sha256::new();
        h.update(self.key.0);
        self.dense.iter().for_each(|x| h.update(x.to_le_bytes()));
        self.sparse.ids.iter().for_each(|x| h.update(x.to_le_bytes()));
        self.sparse.weights.iter().for_each(|x| h.update(x.to_le_bytes()));
        let d = h.finalize();
        d[..8].try_into().expect("8 bytes")
    }

    /// Whether the record is whole: its checksum matches, and its vectors have the shapes
    /// an index accepts.
    pub fn is_intact(&self, dim: usize) -> bool {
        self.check == self.checksum()
            && dim > 0
            && !self.dense.is_empty()
            && self.dense.len().is_multiple_of(dim)
            && self.sparse.ids.len() == self.sparse.weights.len()
            && self.sparse.ids.windows(2).all(|w| w[0] < w[1])
    }
}

/// The encoded chunks of one shard, in the plan's chunk order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EncodedShard {
    /// Always `sextant-encoded-1`.
    pub format: String,
    /// The shard's number in its plan.
    pub shard: u32,
    /// Dense dimension of every record.
    pub dim: u32,
    /// One record per chunk of the shard.
    pub records: Vec<EncodedChunk>,
}

impl EncodedShard {
    /// A shard of `records`.
    pub fn new(shard: u32, dim: usize, records: Vec<EncodedChunk>) -> Self {
        EncodedShard { format: SHARD_FORMAT.into(), shard, dim: dim as u32, records }
    }

    /// Whether the shard holds exactly the chunks of `keys`, in that order.
    pub fn holds(&self, keys: &[ChunkKey]) -> bool {
        self.records.iter().map(|r| r.key).eq(keys.iter().copied())
    }

    /// The file's bytes.
    pub fn to_bytes(&self) -> Result<Vec<u8>> {
        Ok(bincode::serialize(self)?)
    }

    /// Reads a shard file named `name`, refusing one that is not whole (the merge step
    /// reads shards this way: a damaged shard is encoded again, never merged).
    pub fn from_bytes(name: &str, bytes: &[u8]) -> Result<Self> {
        let corrupt =
            |found: String| Error::IndexCorrupted { file: name.into(), expected: "an encoded shard".into(), found };
        let shard: EncodedShard = bincode::deserialize(bytes).map_err(|e| corrupt(e.to_string()))?;
        if shard.format != SHARD_FORMAT {
            return Err(corrupt(format!("format {:?}", shard.format)));
        }
        if let Some(i) = shard.records.iter().position(|r| !r.is_intact(shard.dim as usize)) {
            return Err(corrupt(format!("record {i} fails its checksum")));
        }
        Ok(shard)
    }
}

/// The name of the keys file beside the shard file `encoded` (`encoded-00003.bin` →
/// `encoded-00003.keys`, in the same directory).
pub fn keys_file(encoded: &str) -> String {
    format!("{}.keys", encoded.strip_suffix(".bin").unwrap_or(encoded))
}

/// The keys of a shard file, in its record order: what a plan needs of an earlier
/// build's vectors (whether a chunk's are there) in 32 bytes a chunk instead of the
/// record's some 4 KB. Written beside every shard file of a version ([`keys_file`]).
///
/// A keys file can say a record is there that its shard file no longer holds whole (the
/// shard file damaged after both were written): the merge that finds the record missing
/// encodes that chunk again ([`ShardPlan::lacking`](super::ShardPlan::lacking)).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EncodedKeys {
    /// Always `sextant-encoded-keys-1`.
    pub format: String,
    /// The shard file's keys, in its record order.
    pub keys: Vec<ChunkKey>,
    /// The first 8 bytes of `SHA-256(keys)`.
    pub check: [u8; 8],
}

impl EncodedKeys {
    /// The keys of `shard`.
    pub fn of(shard: &EncodedShard) -> Self {
        let keys: Vec<ChunkKey> = shard.records.iter().map(|r| r.key).collect();
        let check = Self::checksum(&keys);
        EncodedKeys { format: KEYS_FORMAT.into(), keys, check }
    }

    fn checksum(keys: &[ChunkKey]) -> [u8; 8] {
        let mut h = Sha256::new();
        keys.iter().for_each(|k| h.update(k.0));
        h.finalize()[..8].try_into().expect("8 bytes")
    }

    /// The file's bytes.
    pub fn to_bytes(&self) -> Result<Vec<u8>> {
        Ok(bincode::serialize(self)?)
    }

    /// The keys a keys file lists; `None` when it does not decode, is of another format or
    /// fails its checksum (then its shard file is read instead).
    pub fn read(bytes: &[u8]) -> Option<Vec<ChunkKey>> {
        let file: EncodedKeys = bincode::deserialize(bytes).ok()?;
        (file.format == KEYS_FORMAT && file.check == Self::checksum(&file.keys)).then_some(file.keys)
    }
}

/// What planning asks of the vectors earlier builds left: whether a chunk's are there
/// (then it is not encoded), and how many damaged records were dropped.
pub trait Cached {
    /// Whether the vectors of `key` are there.
    fn has(&self, key: &ChunkKey) -> bool;
    /// The SPLADE vector of the record of `key`, when the cache holds vectors (not only
    /// keys) and that record.
    fn sparse(&self, _key: &ChunkKey) -> Option<&SparseVector> {
        None
    }
    /// Records dropped as damaged (and files that could not be read at all, one each).
    fn rejected(&self) -> usize;
}

impl Cached for VectorCache {
    fn has(&self, key: &ChunkKey) -> bool {
        self.entries.contains_key(key)
    }
    fn sparse(&self, key: &ChunkKey) -> Option<&SparseVector> {
        self.entries.get(key).map(|r| &r.sparse)
    }
    fn rejected(&self) -> usize {
        self.rejected
    }
}

/// The keys of earlier builds' vectors without the vectors: what a plan in corpus parts
/// reads of the previous version ([`EncodedKeys`] files, or a shard file's intact records
/// where no keys file is whole).
#[derive(Debug, Default)]
pub struct CachedKeys {
    keys: std::collections::HashSet<ChunkKey>,
    /// Records dropped because they were damaged, and files that could not be read.
    pub rejected: usize,
}

impl CachedKeys {
    /// None yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds the keys `wanted` accepts of a keys file; `false` (and nothing added) when the
    /// file is not whole, so that the caller reads the shard file instead.
    pub fn add_keys_file_where(&mut self, bytes: &[u8], wanted: impl Fn(&ChunkKey) -> bool) -> bool {
        match EncodedKeys::read(bytes) {
            Some(keys) => {
                self.keys.extend(keys.into_iter().filter(|k| wanted(k)));
                true
            }
            None => false,
        }
    }

    /// Adds the keys `wanted` accepts of a shard file's intact records
    /// ([`VectorCache::add_file_where`]).
    pub fn add_file_where(&mut self, bytes: &[u8], wanted: impl Fn(&ChunkKey) -> bool) {
        let mut cache = VectorCache::new();
        cache.add_file_where(bytes, wanted);
        self.rejected += cache.rejected;
        self.keys.extend(cache.entries.into_keys());
    }

    /// Distinct keys held.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// Whether none is held.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }
}

impl Cached for CachedKeys {
    fn has(&self, key: &ChunkKey) -> bool {
        self.keys.contains(key)
    }
    fn rejected(&self) -> usize {
        self.rejected
    }
}

/// Vectors by content key, gathered from earlier builds' shard files.
#[derive(Debug, Default)]
pub struct VectorCache {
    entries: HashMap<ChunkKey, EncodedChunk>,
    dim: Option<usize>,
    /// Records dropped because their checksum or shape was wrong, or whose file could not
    /// be read at all (counted as one).
    pub rejected: usize,
}

impl VectorCache {
    /// An empty cache.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds the intact records of a shard file; a damaged record is dropped and counted,
    /// and a file that does not decode at all adds nothing and counts as one rejection.
    pub fn add_file(&mut self, bytes: &[u8]) {
        self.add_file_where(bytes, |_| true);
    }

    /// Adds the intact records of a shard file whose key `wanted` accepts, as
    /// [`VectorCache::add_file`] adds them all: what merging one index shard keeps of each
    /// file it reads, so that it never holds the vectors of the other shards.
    pub fn add_file_where(&mut self, bytes: &[u8], wanted: impl Fn(&ChunkKey) -> bool) {
        let shard: EncodedShard = match bincode::deserialize::<EncodedShard>(bytes) {
            Ok(s) if s.format == SHARD_FORMAT => s,
            _ => {
                self.rejected += 1;
                return;
            }
        };
        let dim = shard.dim as usize;
        if self.dim.is_some_and(|d| d != dim) {
            self.rejected += shard.records.len();
            return;
        }
        self.dim = Some(dim);
        for r in shard.records.into_iter().filter(|r| wanted(&r.key)) {
            if r.is_intact(dim) {
                self.entries.entry(r.key).or_insert(r);
            } else {
                self.rejected += 1;
            }
        }
    }

    /// Adds records already checked (a delta's vectors, kept beside the index).
    pub fn insert(&mut self, records: impl IntoIterator<Item = EncodedChunk>) {
        for r in records {
            self.entries.entry(r.key).or_insert(r);
        }
    }

    /// Adds the records of a shard just encoded, taking its dimension when no file gave
    /// one.
    pub fn insert_encoded(&mut self, shard: EncodedShard) {
        self.dim.get_or_insert(shard.dim as usize);
        self.insert(shard.records);
    }

    /// The cached vectors of `key`.
    pub fn get(&self, key: &ChunkKey) -> Option<&EncodedChunk> {
        self.entries.get(key)
    }

    /// The width of one dense vector, once a file was added (whatever it held).
    pub fn dim(&self) -> Option<usize> {
        self.dim
    }

    /// Distinct keys held.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(i: u32) -> EncodedChunk {
        let key = ChunkKey::new("d", "s", 200, 256, 128, &format!("chunk {i}"));
        EncodedChunk::new(key, vec![i as f32, 0.5], SparseVector { ids: vec![1, i + 2], weights: vec![0.25, 1.5] })
    }

    #[test]
    fn keys_change_with_models_options_and_text() {
        let k = ChunkKey::new("d", "s", 200, 256, 128, "text");
        assert_eq!(k, ChunkKey::new("d", "s", 200, 256, 128, "text"));
        for other in [
            ChunkKey::new("d2", "s", 200, 256, 128, "text"),
            ChunkKey::new("d", "s2", 200, 256, 128, "text"),
            ChunkKey::new("d", "s", 100, 256, 128, "text"),
            ChunkKey::new("d", "s", 200, 128, 128, "text"),
            ChunkKey::new("d", "s", 200, 256, 128, "text "),
            ChunkKey::new("d", "s", 200, 256, 0, "text"),
            // The length prefix keeps the boundaries between checksums.
            ChunkKey::new("ds", "", 200, 256, 128, "text"),
        ] {
            assert_ne!(k, other);
        }
    }

    #[test]
    fn a_damaged_record_is_dropped_and_the_rest_reused() {
        let shard = EncodedShard::new(0, 2, (0..3).map(record).collect());
        let mut bytes = shard.to_bytes().unwrap();
        assert_eq!(EncodedShard::from_bytes("s", &bytes).unwrap(), shard);
        // Flip one bit of the second record's first dense value.
        let value = 1f32.to_le_bytes();
        let at = bytes.windows(4).position(|w| w == value).expect("record 1's vector is in the file");
        bytes[at] ^= 1;
        let mut cache = VectorCache::new();
        cache.add_file(&bytes);
        assert_eq!((cache.len(), cache.rejected), (2, 1));
        assert!(cache.get(&record(1).key).is_none());
        assert_eq!(cache.get(&record(2).key), Some(&record(2)));
        let err = EncodedShard::from_bytes("shard-1.bin", &bytes).unwrap_err().to_string();
        assert!(err.contains("shard-1.bin") && err.contains("record 1"), "{err}");
        // A file that is not a shard at all adds nothing.
        cache.add_file(b"not a shard");
        assert_eq!((cache.len(), cache.rejected), (2, 2));
    }

    #[test]
    fn a_keys_file_lists_its_shard_files_records_and_a_damaged_one_is_not_read() {
        assert_eq!(keys_file("versions/v1/encoded-00003.bin"), "versions/v1/encoded-00003.keys");
        let shard = EncodedShard::new(0, 2, (0..3).map(record).collect());
        let bytes = EncodedKeys::of(&shard).to_bytes().unwrap();
        assert_eq!(bytes.len(), 8 + 22 + 8 + 3 * 32 + 8, "32 bytes a chunk beside a header");
        let keys = EncodedKeys::read(&bytes).unwrap();
        assert!(shard.holds(&keys));
        let mut listed = CachedKeys::new();
        assert!(listed.add_keys_file_where(&bytes, |k| *k != record(1).key));
        assert!(listed.has(&record(0).key) && !listed.has(&record(1).key) && listed.has(&record(2).key));
        let mut damaged = bytes.clone();
        let last = damaged.len() - 9;
        damaged[last] ^= 1;
        assert_eq!(EncodedKeys::read(&damaged), None);
        assert!(!CachedKeys::new().add_keys_file_where(&damaged, |_| true));
        assert_eq!(EncodedKeys::read(b"not a keys file"), None);
        // Without a whole keys file, the shard file's intact records are listed.
        let mut from_shard = CachedKeys::new();
        from_shard.add_file_where(&shard.to_bytes().unwrap(), |_| true);
        assert_eq!((from_shard.len(), from_shard.rejected()), (3, 0));
    }
}
