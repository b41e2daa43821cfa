//! The on-disk format: a manifest naming every file with its size and SHA-256.
//!
//! The manifest is written last, so an index whose manifest exists is complete; the
//! loader refuses a file whose size or checksum differs, or a manifest of another
//! format version, with an error naming the file.

use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::error::{Error, Result};
use crate::storage::{Blob, Storage};

/// The format name written in every manifest.
pub const FORMAT_NAME: &str = "sextant-index";
/// The format version this build writes.
///
/// Version 7 stores each document's pages (the page of each segment, for PDFs); version 6 stores a chunk's dense vectors as one or more windows (`dense.windows`); version 5 stores BM25's stemming in its parameters (earlier versions always stemmed, and
/// are read so); version 4 stores each document's own metadata; version 3 gives each chunk its character range in its document (chunks may cut a
/// segment); version 2 stores postings as flat little-endian arrays; version 1 (a list per
/// term) is still read, and so is version 2.
pub const FORMAT_VERSION: u32 = 7;
/// The oldest format version this build reads.
pub const OLDEST_READABLE_VERSION: u32 = 1;
/// The manifest's object key.
pub const MANIFEST: &str = "manifest.json";

/// One file of an index.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileEntry {
    /// Object key.
    pub name: String,
    /// Size in bytes.
    pub bytes: u64,
    /// Lower-case hex SHA-256.
    pub sha256: String,
}

/// A model an index was built with.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelRef {
    /// Model id.
    pub id: String,
    /// SHA-256 of its weights.
    pub weights_sha256: String,
}

impl ModelRef {
    /// The reference of the converted model in `dir` ([`ModelInfo::read`](crate::encode::ModelInfo::read)).
    pub fn read(dir: &std::path::Path) -> Result<Self> {
        let info = crate::encode::ModelInfo::read(dir)?;
        Ok(ModelRef { id: info.id, weights_sha256: info.weights_sha256 })
    }
}

/// The manifest of an index.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    /// Always [`FORMAT_NAME`].
    pub format: String,
    /// [`FORMAT_VERSION`] of the writer.
    pub version: u32,
    /// Index id (`demo`, `scifact`, ...).
    pub index_id: String,
    /// Seconds since the Unix epoch at build time.
    pub created_unix: u64,
    /// Documents indexed.
    pub documents: usize,
    /// Chunks indexed.
    pub chunks: usize,
    /// Token budget of a chunk.
    pub chunk_tokens: usize,
    /// Tokens a chunk may repeat from the one before it (0 before format 4).
    #[serde(default)]
    pub chunk_overlap: usize,
    /// Token budget of a dense window (0: one dense vector per chunk, as before format 6).
    #[serde(default)]
    pub dense_window: usize,
    /// Dense embedding dimension.
    pub dense_dim: usize,
    /// Dense model.
    pub dense_model: ModelRef,
    /// SPLADE model.
    pub sparse_model: ModelRef,
    /// BM25 parameters.
    pub bm25: super::Bm25Params,
    /// Every data file.
    pub files: Vec<FileEntry>,
    /// How the index was built, for the next build (absent before format 3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub build: Option<BuildRecord>,
    /// The bytes the index holds in memory once loaded, estimated when it was built
    /// ([`Index::resident_bytes`](super::Index::resident_bytes)); 0 when unknown (an index
    /// built before it was recorded).
    #[serde(default)]
    pub resident_bytes: u64,
}

/// What the next build of an index needs from this one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BuildRecord {
    /// The fingerprint of the build's inputs (`sextant_core::build::inputs_sha256`): a
    /// build with the same one is unchanged.
    pub inputs_sha256: String,
    /// The encoded shard files beside the index: the vector cache, not read by
    /// [`Index::load`](super::Index::load) and not listed in [`Manifest::files`] (each
    /// record carries its own checksum).
    pub encoded: Vec<String>,
}

/// Hex SHA-256 of bytes.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// Writes the data files, then the manifest (the commit point).
pub fn write_files(storage: &dyn Storage, files: Vec<(String, Vec<u8>)>, mut manifest: Manifest) -> Result<Manifest> {
    let entries: Vec<FileEntry> = files
        .par_iter()
        .map(|(name, bytes)| {
            storage.write(name, bytes)?;
            Ok(FileEntry { name: name.clone(), bytes: bytes.len() as u64, sha256: sha256_hex(bytes) })
        })
        .collect::<Result<_>>()?;
    manifest.files = entries;
    manifest.version = FORMAT_VERSION;
    storage.write(MANIFEST, &serde_json::to_vec_pretty(&manifest)?)?;
    Ok(manifest)
}

/// Removes the index in `storage`, if one is there: its manifest first (from then on no
/// index is there), then every file it listed.
pub fn remove_index(storage: &dyn Storage) -> Result<()> {
    let Ok(manifest) = read_manifest(storage) else { return Ok(()) };
    storage.remove(MANIFEST)?;
    manifest.files.iter().try_for_each(|f| storage.remove(&f.name))
}

/// Reads and checks the manifest.
pub fn read_manifest(storage: &dyn Storage) -> Result<Manifest> {
    let bytes = storage.read(MANIFEST)?;
    let value: serde_json::Value = serde_json::from_slice(&bytes).map_err(|e| Error::IndexCorrupted {
        file: format!("{}/{MANIFEST}", storage.location()),
        expected: "a JSON manifest".into(),
        found: e.to_string(),
    })?;
    if value.get("format").and_then(|f| f.as_str()) != Some(FORMAT_NAME) {
        return Err(Error::IndexCorrupted {
            file: format!("{}/{MANIFEST}", storage.location()),
            expected: format!("format {FORMAT_NAME:?}"),
            found: format!("{}", value.get("format").unwrap_or(&serde_json::Value::Null)),
        });
    }
    let version = value.get("version").and_then(|v| v.as_u64()).unwrap_or(0) as u32;
    if !(OLDEST_READABLE_VERSION..=FORMAT_VERSION).contains(&version) {
        return Err(Error::UnsupportedFormat { expected: FORMAT_VERSION, found: version });
    }
    let mut manifest: Manifest = serde_json::from_value(value).map_err(|e| Error::IndexCorrupted {
        file: format!("{}/{MANIFEST}", storage.location()),
        expected: "a complete manifest".into(),
        found: e.to_string(),
    })?;
    if version < 5 {
        // Before format 5 BM25 always stemmed, and its parameters did not say so.
        manifest.bm25.stemming = super::Stemming::English;
    }
    Ok(manifest)
}

/// Reads one file of the manifest, verifying its size and checksum.
pub fn read_verified(storage: &dyn Storage, f: &FileEntry) -> Result<Blob> {
    let bytes = storage.read_blob(&f.name)?;
    verify(&storage.location(), f, &bytes)?;
    Ok(bytes)
}

/// Decodes `bytes`, the bincode file `name` of the index at `location`; an error names the
/// file (verify it first: [`verify`], [`read_verified`]).
pub fn decode_bincode<'a, T: serde::Deserialize<'a>>(location: &str, name: &str, bytes: &'a [u8]) -> Result<T> {
    bincode::deserialize(bytes).map_err(|e| Error::IndexCorrupted {
        file: format!("{location}/{name}"),
        expected: "a decodable file".into(),
        found: e.to_string(),
    })
}

/// Checks that `bytes` are the file `f` of the manifest (size, then SHA-256);
/// `location` names the index in the error.
pub fn verify(location: &str, f: &FileEntry, bytes: &[u8]) -> Result<()> {
    verify_with(location, f, bytes, |hash| hash(bytes))
}

/// [`verify`] of `bytes`, whose checksum `feed` computes by handing `hash` the bytes in
/// order, in parts of its choosing (so a caller can release each part as it goes).
pub fn verify_with(
    location: &str,
    f: &FileEntry,
    bytes: &[u8],
    feed: impl FnOnce(&mut dyn FnMut(&[u8])),
) -> Result<()> {
    let file = || format!("{location}/{}", f.name);
    if bytes.len() as u64 != f.bytes {
        return Err(Error::IndexCorrupted {
            file: file(),
            expected: format!("{} bytes", f.bytes),
            found: format!("{} bytes", bytes.len()),
        });
    }
    let mut hasher = Sha256::new();
    feed(&mut |part| hasher.update(part));
    let sum = hex::encode(hasher.finalize());
    if sum != f.sha256 {
        return Err(Error::IndexCorrupted {
            file: file(),
            expected: format!("sha256 {}", f.sha256),
            found: format!("sha256 {sum}"),
        });
    }
    Ok(())
}
