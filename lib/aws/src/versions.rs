//! Published index versions in S3.
//!
//! ```text
//! s3://bucket/indexes/demo/CURRENT                          {"version": "20261122T230500Z-3f9a…", …}
//! s3://bucket/indexes/demo/versions/20261122T230500Z-3f9a…/manifest.json
//! s3://bucket/indexes/demo/versions/20261122T230500Z-3f9a…/dense.f32 …
//! ```
//!
//! A version is immutable: its files are uploaded (large ones in parallel parts), its
//! manifest last, and only then does `CURRENT` move, by a conditional write on the ETag
//! the publisher read when it started. Two builds racing cannot clobber each other: the
//! second to finish gets [`Error::Conflict`] and its version is never made current.
//! Readers fetch `CURRENT`, then the version's manifest (whose SHA-256 the pointer
//! carries), then every file with parallel ranged GETs into memory, but the `f32` vectors
//! and the SPLADE postings, which go to local disk ([`VersionedIndex::spill_to`]) and are
//! read in place from there;
//! [`sextant_core::index::Index::load`] then verifies each file's size and SHA-256 before
//! anything is served.

use std::time::Instant;

use serde::{Deserialize, Serialize};
use sextant_core::error::{Error, Result};
use sextant_core::index::format::{read_manifest, sha256_hex, Manifest, MANIFEST};
use sextant_core::index::{Index, LexicalStats, ShardStore};
use sextant_core::shards::{load_shard_store, read_root, RootManifest, ORDER_FILE, ROOT_MANIFEST, STATS_FILE};
use sextant_core::storage::{Location, MemStore, Storage};
use sextant_finance::Financials;

use super::s3::{Precondition, S3Store};

/// Opens shard `k` of a root from the files in a storage: the shard and its documents' order.
type OpenShard<T> = fn(&dyn Storage, &RootManifest, usize) -> Result<(T, Vec<u32>)>;

/// The pointer object's name under an index prefix.
pub const CURRENT: &str = "CURRENT";

/// What `CURRENT` holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pointer {
    /// The version served.
    pub version: String,
    /// SHA-256 of that version's `manifest.json`.
    pub manifest_sha256: String,
    /// When it was made current, seconds since the Unix epoch.
    pub published_unix: u64,
    /// The version it replaced.
    #[serde(default)]
    pub previous: Option<String>,
    /// How many index shards the version is made of: 0 for a single index, whose
    /// `manifest.json` the SHA-256 names; else the SHA-256 is its root manifest's
    /// (`root.json`, [`sextant_core::shards::RootManifest`]).
    #[serde(default)]
    pub shards: usize,
}

/// A version's head manifest (`manifest.json`, or `root.json` of a sharded index), what
/// [`VersionedIndex::commit`] writes last.
struct Head {
    name: &'static str,
    bytes: Vec<u8>,
    version: String,
    shards: usize,
}

/// A version's id: `YYYYMMDDTHHMMSSZ-` ([`compact_utc`]) then the first 12 hex digits of
/// its head manifest's SHA-256, so ids sort by time and name their content.
fn version_id(unix: u64, head: &[u8]) -> String {
    format!("{}-{}", compact_utc(unix), &sha256_hex(head)[..12])
}

/// An index prefix in a bucket.
#[derive(Clone)]
pub struct VersionedIndex {
    store: S3Store,
    prefix: String,
    /// Where a download's files read in place are written ([`spill_dir`] unless set).
    spill_dir: std::path::PathBuf,
}

/// `CURRENT` as read: the pointer (if any) and its ETag, the precondition a publisher
/// writes against.
#[derive(Debug, Clone)]
pub struct PointerState {
    /// The pointer, `None` before the first publication.
    pub pointer: Option<Pointer>,
    /// Its ETag.
    pub etag: Option<String>,
}

/// A downloaded version, ready to decode.
pub struct Download {
    /// The pointer it was reached from.
    pub pointer: Pointer,
    /// The files, in memory.
    pub files: MemStore,
    /// Milliseconds spent reading `CURRENT`.
    pub pointer_ms: u64,
    /// Milliseconds spent downloading the manifest and files.
    pub download_ms: u64,
}

/// What [`VersionedIndex::publish`] did.
#[derive(Debug, Clone, Serialize)]
pub struct Published {
    /// The new version, now current.
    pub version: String,
    /// The version it replaced.
    pub previous: Option<String>,
    /// Bytes uploaded.
    pub bytes: u64,
    /// Old versions deleted.
    pub pruned: Vec<String>,
}

/// `YYYYMMDDTHHMMSSZ` for seconds since the Unix epoch (UTC).
pub fn compact_utc(unix: u64) -> String {
    let days = (unix / 86_400) as i64;
    let secs = unix % 86_400;
    // Civil from days (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}{m:02}{d:02}T{:02}{:02}{:02}Z", secs / 3600, secs % 3600 / 60, secs % 60)
}

impl VersionedIndex {
    /// The index at `location` (`s3://bucket/prefix`).
    pub fn new(config: &aws_config::SdkConfig, location: &Location) -> Result<Self> {
        match location {
            Location::S3 { bucket, prefix } => Ok(VersionedIndex {
                store: S3Store::new(config, bucket),
                prefix: prefix.clone(),
                spill_dir: spill_dir(),
            }),
            Location::Local(p) => Err(Error::invalid("location", format!("{} is not an s3:// location", p.display()))),
        }
    }

    /// Writes the downloaded files an index reads in place under `dir` instead of
    /// [`spill_dir`]'s choice.
    pub fn spill_to(mut self, dir: impl Into<std::path::PathBuf>) -> Self {
        self.spill_dir = dir.into();
        self
    }

    /// The underlying bucket.
    pub fn store(&self) -> &S3Store {
        &self.store
    }

    /// The object key of `rest` under the index's prefix.
    pub fn key(&self, rest: &str) -> String {
        if self.prefix.is_empty() {
            rest.to_string()
        } else {
            format!("{}/{rest}", self.prefix)
        }
    }

    /// `s3://bucket/prefix`.
    pub fn location(&self) -> String {
        format!("s3://{}/{}", self.store.bucket(), self.prefix)
    }

    /// Reads `CURRENT`.
    pub async fn pointer(&self) -> Result<PointerState> {
        let key = self.key(CURRENT);
        match self.store.get(&key).await? {
            None => Ok(PointerState { pointer: None, etag: None }),
            Some(obj) => {
                let pointer = serde_json::from_slice(&obj.bytes).map_err(|e| Error::IndexCorrupted {
                    file: format!("s3://{}/{key}", self.store.bucket()),
                    expected: "a version pointer".into(),
                    found: e.to_string(),
                })?;
                Ok(PointerState { pointer: Some(pointer), etag: obj.etag })
            }
        }
    }

    /// The pointer of the current version; an error when nothing has been published yet.
    pub async fn current(&self) -> Result<Pointer> {
        self.pointer().await?.pointer.ok_or_else(|| Error::Storage {
            location: format!("s3://{}/{}", self.store.bucket(), self.key(CURRENT)),
            reason: "no version has been published here yet".into(),
        })
    }

    /// Uploads the index held in `files` (written by [`sextant_core::index::Index::save`], or
    /// a sharded index by [`sextant_core::shards::save_sharded`]: then its root manifest is
    /// the version's head) as a new version and makes it current, if `CURRENT` still is
    /// what `expected` says; then deletes all but the newest `keep` versions (never the
    /// current one).
    pub async fn publish(&self, files: &MemStore, expected: &PointerState, keep: usize) -> Result<Published> {
        let (head, created_unix, shards) = match read_root(files)? {
            Some((root, _)) => (ROOT_MANIFEST, sextant_keys::now_unix(), root.shards.len()),
            None => (MANIFEST, read_manifest(files)?.created_unix, 0),
        };
        let manifest_bytes = files.read(head)?;
        let version = version_id(created_unix, &manifest_bytes);
        let dir = self.key(&format!("versions/{version}"));
        // Data files first (in parallel), the head manifest last: a version with one is whole.
        let mut tasks = tokio::task::JoinSet::new();
        let mut bytes = 0;
        for (name, data) in files.objects() {
            if name == head {
                continue;
            }
            bytes += data.len() as u64;
            let (store, key) = (self.store.clone(), format!("{dir}/{name}"));
            tasks.spawn(async move { store.upload(&key, data).await });
        }
        while let Some(joined) = tasks.join_next().await {
            joined.map_err(|e| Error::task_failed(format!("transfer of {}", dir.clone()), e))??;
        }
        self.commit(Head { name: head, bytes: manifest_bytes, version, shards }, bytes, expected, keep).await
    }

    /// Publishes a sharded version whose files a build staged in this bucket: every object
    /// under `staged` (a build's prefix, ending in `/`) is copied server-side into the new
    /// version under the same relative name, then `root` (the root manifest, which must
    /// name them) is written, the commit point, and `CURRENT` moves as
    /// [`VersionedIndex::publish`] moves it. What the root names is checked first: a shard
    /// whose manifest is not among the staged objects, or is another one, fails the
    /// publication before anything is copied.
    pub async fn publish_staged(
        &self,
        staged: &str,
        root: &RootManifest,
        expected: &PointerState,
        keep: usize,
    ) -> Result<Published> {
        let objects = self.store.list(staged).await?;
        let relative = |key: &str| key.strip_prefix(staged).map(str::to_string);
        let names: Vec<(String, u64)> = objects.iter().filter_map(|(k, n)| Some((relative(k)?, *n))).collect();
        let staged_file = |name: &str| format!("{staged}{name}");
        for entry in &root.shards {
            let name = format!("{}{MANIFEST}", entry.prefix);
            let found = match self.store.get(&staged_file(&name)).await? {
                Some(o) => sha256_hex(&o.bytes),
                None => "no such file".into(),
            };
            if found != entry.manifest_sha256 {
                return Err(Error::IndexCorrupted {
                    file: format!("s3://{}/{}", self.store.bucket(), staged_file(&name)),
                    expected: format!("the manifest the root names ({})", entry.manifest_sha256),
                    found,
                });
            }
        }
        let head = serde_json::to_vec_pretty(root)?;
        let version = version_id(sextant_keys::now_unix(), &head);
        let dir = self.key(&format!("versions/{version}"));
        let mut tasks = tokio::task::JoinSet::new();
        let mut bytes = 0;
        for (name, size) in names {
            bytes += size;
            let (store, from, to) = (self.store.clone(), staged_file(&name), format!("{dir}/{name}"));
            tasks.spawn(async move { store.copy(&from, &to, size).await });
        }
        while let Some(joined) = tasks.join_next().await {
            joined.map_err(|e| Error::task_failed(format!("copy into {}", dir.clone()), e))??;
        }
        self.commit(
            Head { name: ROOT_MANIFEST, bytes: head, version, shards: root.shards.len() },
            bytes,
            expected,
            keep,
        )
        .await
    }

    /// Writes the head manifest of a version whose other files are in place, then moves
    /// `CURRENT` to it if `CURRENT` is still what `expected` read (else the version is
    /// removed and the answer is [`Error::Conflict`]), then prunes to `keep` versions.
    async fn commit(&self, head: Head, mut bytes: u64, expected: &PointerState, keep: usize) -> Result<Published> {
        let Head { name, bytes: manifest_bytes, version, shards } = head;
        let dir = self.key(&format!("versions/{version}"));
        let manifest_sha256 = sha256_hex(&manifest_bytes);
        bytes += manifest_bytes.len() as u64;
        self.store.put(&format!("{dir}/{name}"), manifest_bytes, &Precondition::None).await?;
        let previous = expected.pointer.as_ref().map(|p| p.version.clone());
        let pointer = Pointer {
            version: version.clone(),
            manifest_sha256,
            published_unix: sextant_keys::now_unix(),
            previous: previous.clone(),
            shards,
        };
        let pre = match &expected.etag {
            Some(t) => Precondition::ETag(t.clone()),
            None => Precondition::Absent,
        };
        match self.store.put(&self.key(CURRENT), serde_json::to_vec_pretty(&pointer)?, &pre).await {
            Ok(_) => {}
            Err(Error::Conflict { location, .. }) => {
                // The loser of the race removes what it uploaded; the winner is untouched.
                if let Err(e) = self.store.delete_prefix(&format!("{dir}/")).await {
                    tracing::warn!(error = %e, %version, "could not remove the version that lost the race");
                }
                return Err(Error::Conflict {
                    location,
                    reason: format!(
                        "another build made a version current after this one started (expected {}); \
                         version {version} was not made current and was removed",
                        previous.as_deref().unwrap_or("no version")
                    ),
                });
            }
            Err(e) => return Err(e),
        }
        tracing::info!(index = %self.location(), %version, bytes, "published");
        let pruned = self.prune(keep, &version).await?;
        Ok(Published { version, previous, bytes, pruned })
    }

    /// Every version under `versions/` that holds objects, oldest first (ids sort by
    /// time). Listed from the objects themselves: some S3-compatible stores keep an emptied
    /// "directory" visible as a common prefix.
    pub async fn versions(&self) -> Result<Vec<String>> {
        let root = format!("{}/", self.key("versions"));
        let mut v: Vec<String> = self
            .store
            .list(&root)
            .await?
            .into_iter()
            .filter_map(|(k, _)| Some(k.strip_prefix(&root)?.split('/').next()?.to_string()))
            .collect();
        v.sort();
        v.dedup();
        Ok(v)
    }

    /// Deletes all but the newest `keep` versions (at least 1), never `current`.
    pub async fn prune(&self, keep: usize, current: &str) -> Result<Vec<String>> {
        let versions = self.versions().await?;
        let keep = keep.max(1);
        let old: Vec<String> = versions.iter().rev().skip(keep).filter(|v| v.as_str() != current).cloned().collect();
        for v in &old {
            self.store.delete_prefix(&format!("{}/", self.key(&format!("versions/{v}")))).await?;
        }
        Ok(old)
    }

    /// Downloads the current version into memory: the manifest first, checked against the pointer's
    /// SHA-256, then every file it lists with parallel ranged GETs.
    pub async fn download_current(&self) -> Result<Download> {
        let t = Instant::now();
        let pointer = self.current().await?;
        let pointer_ms = t.elapsed().as_millis() as u64;
        let t = Instant::now();
        let files = self.download(&pointer).await?;
        Ok(Download { pointer, files, pointer_ms, download_ms: t.elapsed().as_millis() as u64 })
    }

    /// Fetches the manifest of the version `pointer` names and checks it against the
    /// pointer's SHA-256; returns the version's label (`s3://…/versions/v`), key prefix and
    /// manifest.
    async fn manifest(&self, pointer: &Pointer) -> Result<(String, String, Manifest)> {
        if pointer.shards > 0 {
            return Err(Error::invalid(
                "index",
                format!(
                    "version {} of {} is an index of {} shards: its router loads each shard's store, its shard \
                     functions one shard each",
                    pointer.version,
                    self.location(),
                    pointer.shards
                ),
            ));
        }
        let dir = self.key(&format!("versions/{}", pointer.version));
        let label = format!("s3://{}/{dir}", self.store.bucket());
        let files = MemStore::new(label.clone());
        files.insert(MANIFEST, self.head(pointer, MANIFEST).await?);
        Ok((label, dir, read_manifest(&files)?))
    }

    /// The head file `name` of the version `pointer` names (its `manifest.json`, or a sharded
    /// version's `root.json`), checked against the pointer's SHA-256.
    async fn head(&self, pointer: &Pointer, name: &str) -> Result<Vec<u8>> {
        let bytes = self.version_file(pointer, name).await?;
        let sum = sha256_hex(&bytes);
        if sum != pointer.manifest_sha256 {
            return Err(Error::IndexCorrupted {
                file: format!(
                    "s3://{}/{}",
                    self.store.bucket(),
                    self.key(&format!("versions/{}/{name}", pointer.version))
                ),
                expected: format!("sha256 {}", pointer.manifest_sha256),
                found: format!("sha256 {sum}"),
            });
        }
        Ok(bytes)
    }

    /// The bytes the version `pointer` names holds in memory once loaded, as its manifest
    /// estimates them (0: not recorded); only the manifest is fetched. Of a sharded
    /// version, 0: its router holds the shards' stores, its functions one shard each.
    pub async fn resident_estimate(&self, pointer: &Pointer) -> Result<u64> {
        if pointer.shards > 0 {
            return Ok(0);
        }
        Ok(self.manifest(pointer).await?.2.resident_bytes)
    }

    /// Fetches `name` of the version `pointer` names, or says it is missing.
    async fn version_file(&self, pointer: &Pointer, name: &str) -> Result<Vec<u8>> {
        let key = self.key(&format!("versions/{}/{name}", pointer.version));
        let found = self.store.get(&key).await?;
        found.map(|o| o.bytes).ok_or_else(|| Error::IndexCorrupted {
            file: format!("s3://{}/{key}", self.store.bucket()),
            expected: format!("{name} of the version CURRENT names"),
            found: "no such object".into(),
        })
    }

    /// The root manifest of the sharded version `pointer` names (checked against the
    /// pointer's SHA-256) and BM25's statistics over its shards, verified.
    pub async fn root(&self, pointer: &Pointer) -> Result<(RootManifest, LexicalStats)> {
        let label = format!("s3://{}/{}", self.store.bucket(), self.key(&format!("versions/{}", pointer.version)));
        let files = MemStore::new(label.clone());
        files.insert(ROOT_MANIFEST, self.head(pointer, ROOT_MANIFEST).await?);
        files.insert(STATS_FILE, self.version_file(pointer, STATS_FILE).await?);
        read_root(&files)?.ok_or_else(|| Error::IndexCorrupted {
            file: format!("{label}/{ROOT_MANIFEST}"),
            expected: "a root manifest".into(),
            found: "none".into(),
        })
    }

    /// The bytes shard `k` of the sharded version `pointer` names (`root`) holds in memory
    /// once loaded, as its manifest estimates them (0: not recorded); only the manifest is
    /// fetched.
    pub async fn shard_resident_estimate(&self, pointer: &Pointer, root: &RootManifest, k: usize) -> Result<u64> {
        Ok(self.shard_manifest(pointer, root, k).await?.2.resident_bytes)
    }

    /// Shard `k`'s key prefix in the sharded version `pointer` names (`root`), its
    /// `manifest.json` as stored (what the root's checksum covers) and as read.
    async fn shard_manifest(
        &self,
        pointer: &Pointer,
        root: &RootManifest,
        k: usize,
    ) -> Result<(String, Vec<u8>, Manifest)> {
        let Some(entry) = root.shards.get(k) else {
            return Err(Error::invalid("shard", format!("shard {k} of an index of {} shards", root.shards.len())));
        };
        let bytes = self.version_file(pointer, &format!("{}{MANIFEST}", entry.prefix)).await?;
        let files = MemStore::new(self.location());
        files.insert(MANIFEST, bytes.clone());
        Ok((entry.prefix.clone(), bytes, read_manifest(&files)?))
    }

    /// Downloads shard `k` of the sharded version `pointer` names (`root`, from
    /// [`VersionedIndex::root`]), verifies it against the root and decodes it whole (what a
    /// shard function searches). Returns the index, its documents' order and the timings.
    pub async fn load_shard(
        &self,
        pointer: &Pointer,
        root: &RootManifest,
        k: usize,
    ) -> Result<(Index, Vec<u32>, LoadPhases)> {
        self.open_shard(pointer, root, k, |_, _| true, sextant_core::shards::load_shard).await
    }

    /// [`VersionedIndex::load_shard`] of only what a router keeps of the shard
    /// ([`sextant_core::shards::load_shard_store`]: its documents and where their chunks
    /// start: its [`sextant_core::index::STORE_FILE`], or of a shard written before it, its
    /// documents and chunks; no postings or vector is downloaded).
    pub async fn load_shard_store(
        &self,
        pointer: &Pointer,
        root: &RootManifest,
        k: usize,
    ) -> Result<(ShardStore, Vec<u32>, LoadPhases)> {
        let wanted = |manifest: &Manifest, name: &str| ShardStore::reads(manifest, name) || name == ORDER_FILE;
        self.open_shard(pointer, root, k, wanted, load_shard_store).await
    }

    /// Downloads the files of shard `k` that `wanted` names (given the shard's manifest) and
    /// opens them with `open`.
    async fn open_shard<T: Send + 'static>(
        &self,
        pointer: &Pointer,
        root: &RootManifest,
        k: usize,
        wanted: fn(&Manifest, &str) -> bool,
        open: OpenShard<T>,
    ) -> Result<(T, Vec<u32>, LoadPhases)> {
        let t = Instant::now();
        let (prefix, manifest_bytes, manifest) = self.shard_manifest(pointer, root, k).await?;
        let dir = self.key(&format!("versions/{}", pointer.version));
        let files = MemStore::new(format!("s3://{}/{dir}", self.store.bucket()));
        files.insert(format!("{prefix}{MANIFEST}"), manifest_bytes);
        let mut tasks = tokio::task::JoinSet::new();
        for f in manifest.files.iter().filter(|f| wanted(&manifest, &f.name)).cloned() {
            let name = format!("{prefix}{}", f.name);
            let (s3, key) = (self.store.clone(), format!("{dir}/{name}"));
            tasks.spawn(async move { s3.get_ranged(&key, f.bytes).await.map(|b| (name, b)) });
        }
        while let Some(joined) = tasks.join_next().await {
            let (name, bytes) =
                joined.map_err(|e| Error::task_failed(format!("transfer of {}", files.location()), e))??;
            files.insert(name, bytes);
        }
        let download_ms = t.elapsed().as_millis() as u64;
        let bytes = files.total_bytes();
        let t = Instant::now();
        let (root, location) = (root.clone(), files.location());
        let (opened, order) = tokio::task::spawn_blocking(move || open(&files, &root, k))
            .await
            .map_err(|e| Error::task_failed(format!("decoding shard {k} of {location}"), e))??;
        Ok((opened, order, LoadPhases { download_ms, decode_ms: t.elapsed().as_millis() as u64, bytes }))
    }

    /// The keys of the encoded files (the vector cache) of the version `pointer` names, as
    /// its manifest or root manifest lists them, for a build that reads them one at a time.
    pub async fn cache_files(&self, pointer: &Pointer) -> Result<Vec<String>> {
        let dir = self.key(&format!("versions/{}", pointer.version));
        let names = if pointer.shards > 0 {
            self.root(pointer).await?.0.encoded
        } else {
            let (_, _, manifest) = self.manifest(pointer).await?;
            manifest.build.into_iter().flat_map(|b| b.encoded).collect()
        };
        Ok(names.into_iter().map(|name| format!("{dir}/{name}")).collect())
    }

    /// Downloads what the next build needs of the version `pointer` names: its manifest
    /// and its encoded shards (the vector cache). A shard file that is gone is left out
    /// (its chunks are encoded again).
    ///
    /// Of a sharded version, its root manifest and the encoded files it names.
    pub async fn build_cache(&self, pointer: &Pointer) -> Result<MemStore> {
        let (files, dir, encoded) = if pointer.shards > 0 {
            let dir = self.key(&format!("versions/{}", pointer.version));
            let files = MemStore::new(format!("s3://{}/{dir}", self.store.bucket()));
            let (root, _) = self.root(pointer).await?;
            files.insert(ROOT_MANIFEST, serde_json::to_vec(&root)?);
            (files, dir, root.encoded)
        } else {
            let (label, dir, manifest) = self.manifest(pointer).await?;
            let files = MemStore::new(label);
            files.insert(MANIFEST, serde_json::to_vec(&manifest)?);
            (files, dir, manifest.build.into_iter().flat_map(|b| b.encoded).collect())
        };
        let mut tasks = tokio::task::JoinSet::new();
        for name in encoded {
            let (store, key) = (self.store.clone(), format!("{dir}/{name}"));
            tasks.spawn(async move { store.get(&key).await.map(|o| (name, o)) });
        }
        while let Some(joined) = tasks.join_next().await {
            let (name, object) =
                joined.map_err(|e| Error::task_failed(format!("transfer of {}", files.location()), e))??;
            if let Some(o) = object {
                files.insert(name, o.bytes);
            }
        }
        Ok(files)
    }

    /// Downloads the version `pointer` names into memory, every file at once.
    pub async fn download(&self, pointer: &Pointer) -> Result<MemStore> {
        let (label, dir, manifest) = self.manifest(pointer).await?;
        let files = MemStore::new(label);
        files.insert(MANIFEST, serde_json::to_vec(&manifest)?);
        let picked = manifest.files.iter().map(|f| (f.name.clone(), f.bytes)).collect();
        self.fetch_into(&files, &dir, picked).await?;
        Ok(files)
    }

    /// Downloads the files `picked` (name under `dir`, size) into `files`, all at once:
    /// each into memory, but those an index reads in place ([`Index::IN_PLACE_FILES`]: the
    /// `f32` vectors and the SPLADE postings) each into an unnamed temporary file under
    /// [`VersionedIndex::spill_to`]'s directory, which the system frees once nothing maps
    /// it or the process ends. When no such file can be made or written (no space left),
    /// that file is held in memory like the rest, with a warning.
    async fn fetch_into(&self, files: &MemStore, dir: &str, picked: Vec<(String, u64)>) -> Result<()> {
        enum Fetched {
            Bytes(Vec<u8>),
            File(std::fs::File),
        }
        let mut tasks = tokio::task::JoinSet::new();
        for (name, size) in picked {
            let (s3, key, spill) = (self.store.clone(), format!("{dir}/{name}"), self.spill_dir.clone());
            tasks.spawn(async move {
                if name.rsplit('/').next().is_some_and(|file| Index::IN_PLACE_FILES.contains(&file)) {
                    let spilled = match tempfile::tempfile_in(&spill) {
                        Ok(file) => s3.get_ranged_to_file(&key, size, &file).await.map(|()| file),
                        Err(e) => Err(Error::io(&spill, e)),
                    };
                    match spilled {
                        Ok(file) => return Ok((name, Fetched::File(file))),
                        Err(e) => tracing::warn!(error = %e, %key, "held in memory: no room on local disk"),
                    }
                }
                s3.get_ranged(&key, size).await.map(|b| (name, Fetched::Bytes(b)))
            });
        }
        while let Some(joined) = tasks.join_next().await {
            match joined.map_err(|e| Error::task_failed(format!("transfer of {}", files.location()), e))?? {
                (name, Fetched::Bytes(bytes)) => files.insert(name, bytes),
                (name, Fetched::File(file)) => files.insert_file(name, file),
            }
        }
        Ok(())
    }

    /// Downloads, verifies and decodes the version `pointer` names: every file at once
    /// with parallel ranged GETs into memory, then each file verified and decoded in its
    /// own task ([`Index::load`]), and the version's facts beside it ([`Financials::load`]).
    /// Returns the index, its financials and the phase timings.
    ///
    /// Decoding each file as soon as it arrives was tried and measured slower on a
    /// 2-core machine with the S3 server on the same cores (1.9–2.3 s instead of 1.6 s
    /// at 100k chunks): the decode competes with the transfer for the CPU.
    pub async fn load(&self, pointer: &Pointer) -> Result<(Index, Financials, LoadPhases)> {
        let t = Instant::now();
        let files = self.download(pointer).await?;
        let download_ms = t.elapsed().as_millis() as u64;
        let bytes = files.total_bytes();
        let t = Instant::now();
        let location = self.location();
        let (index, financials) = tokio::task::spawn_blocking(move || -> Result<(Index, Financials)> {
            let index = Index::load(&files)?;
            let financials = Financials::load(&files, &index)?;
            Ok((index, financials))
        })
        .await
        .map_err(|e| Error::task_failed(format!("decoding index {location}"), e))??;
        Ok((index, financials, LoadPhases { download_ms, decode_ms: t.elapsed().as_millis() as u64, bytes }))
    }
}

/// Where downloaded files read in place ([`Index::IN_PLACE_FILES`]) go by default:
/// `SEXTANT_SPILL_DIR`, else the system's temporary directory (`/tmp`; on Lambda, the
/// function's ephemeral storage).
pub fn spill_dir() -> std::path::PathBuf {
    std::env::var_os("SEXTANT_SPILL_DIR").map(std::path::PathBuf::from).unwrap_or_else(std::env::temp_dir)
}

/// Timings of [`VersionedIndex::load`].
#[derive(Debug, Clone, Copy)]
pub struct LoadPhases {
    /// Downloading the manifest and every file.
    pub download_ms: u64,
    /// Verifying and decoding them.
    pub decode_ms: u64,
    /// Bytes downloaded.
    pub bytes: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compact_utc_formats_known_instants() {
        assert_eq!(compact_utc(0), "19700101T000000Z");
        assert_eq!(compact_utc(951_782_400), "20000229T000000Z");
        assert_eq!(compact_utc(1_795_388_705), "20261122T230505Z");
        // Ids sort by time.
        assert!(compact_utc(1_795_388_705) < compact_utc(1_795_388_706));
    }
}
