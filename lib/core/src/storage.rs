//! Where index files live, behind a trait so that object stores can sit beside the
//! local directory.

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// The bytes of one object: owned, or a read-only memory map of a local file.
pub enum Blob {
    /// Bytes in memory (downloaded, or read).
    Owned(Vec<u8>),
    /// A mapped local file: no copy into a buffer, pages come straight from the page cache.
    Mapped(memmap2::Mmap),
}

impl std::ops::Deref for Blob {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            Blob::Owned(v) => v,
            Blob::Mapped(m) => m,
        }
    }
}

impl Blob {
    /// Hands the pages of `range` of a mapped blob back to the page cache
    /// (`MADV_DONTNEED`): the process stops counting them as resident, and the next read of
    /// them pages them in again from the file. Nothing for an owned blob.
    pub fn release(&self, range: std::ops::Range<usize>) {
        #[cfg(unix)]
        if let Blob::Mapped(map) = self {
            let (start, end) = (range.start.min(map.len()), range.end.min(map.len()));
            // Whole pages only: madvise takes a page-aligned start.
            let page = 4096;
            let start = start.div_ceil(page) * page;
            if end > start {
                // SAFETY: the map is a read-only shared map of a file that is never written in
                // place (see `LocalDir::read_blob`): dropping its pages loses nothing, the next
                // read faults them in from the page cache or the file with the same bytes.
                let _ = unsafe { map.unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, start, end - start) };
            }
        }
    }
}

/// Little-endian numbers of a mapped file (`f32` vectors, `u32` chunk ids of postings),
/// read in place: a search pages in the values it reads, and the kernel may reclaim them
/// like any page cache, so they cost the process no memory of its own. Several arrays may
/// share one map.
pub struct MappedArray<T> {
    blob: std::sync::Arc<Blob>,
    /// The byte range of the values in the map.
    bytes: std::ops::Range<usize>,
    of: std::marker::PhantomData<T>,
}

impl<T: bytemuck::Pod> MappedArray<T> {
    /// The values in `bytes` of the mapped `blob`, when they can be read in place: a
    /// whole number of them, aligned, on a little-endian machine, in a map (not an owned
    /// blob). `None` otherwise: the caller decodes them.
    pub fn new(blob: &std::sync::Arc<Blob>, bytes: std::ops::Range<usize>) -> Option<Self> {
        let Blob::Mapped(map) = &**blob else { return None };
        let values = map.get(bytes.clone())?;
        (cfg!(target_endian = "little") && bytemuck::try_cast_slice::<u8, T>(values).is_ok()).then(|| MappedArray {
            blob: blob.clone(),
            bytes,
            of: std::marker::PhantomData,
        })
    }

    /// Releases the values' pages ([`Blob::release`]), after a pass that read them all.
    pub fn release(&self) {
        self.blob.release(self.bytes.clone());
    }
}

impl<T: bytemuck::Pod> std::ops::Deref for MappedArray<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        bytemuck::cast_slice(&self.blob[self.bytes.clone()])
    }
}

impl<T> Clone for MappedArray<T> {
    fn clone(&self) -> Self {
        MappedArray { blob: self.blob.clone(), bytes: self.bytes.clone(), of: std::marker::PhantomData }
    }
}

/// A mapped blob prepared to be read in place by [`MappedArray`]s: read-ahead turned off
/// (a search reads a few values here and there). Its pages are the caller's to release
/// (the loader's verification releases each part it hashes). An owned blob is returned as
/// it is.
pub fn map_in_place(blob: Blob) -> std::sync::Arc<Blob> {
    #[cfg(unix)]
    if let Blob::Mapped(map) = &blob {
        let _ = map.advise(memmap2::Advice::Random);
    }
    std::sync::Arc::new(blob)
}

/// An array held in memory or read in place from a mapped file ([`MappedArray`]); both
/// read as one slice.
#[derive(Clone)]
pub enum Flat<T> {
    /// In this process's memory.
    Held(Vec<T>),
    /// In a mapped file.
    Mapped(MappedArray<T>),
}

impl<T> Default for Flat<T> {
    fn default() -> Self {
        Flat::Held(Vec::new())
    }
}

impl<T> From<Vec<T>> for Flat<T> {
    fn from(v: Vec<T>) -> Self {
        Flat::Held(v)
    }
}

impl<T: bytemuck::Pod> std::ops::Deref for Flat<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        match self {
            Flat::Held(v) => v,
            Flat::Mapped(m) => m,
        }
    }
}

impl<T: bytemuck::Pod + PartialEq> PartialEq for Flat<T> {
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

impl<T: bytemuck::Pod> std::fmt::Debug for Flat<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let form = if self.is_mapped() { "mapped" } else { "held" };
        write!(f, "{} {form} {}", self.len(), std::any::type_name::<T>())
    }
}

impl<T: bytemuck::Pod> Flat<T> {
    /// Whether the values are read in place from a file.
    pub fn is_mapped(&self) -> bool {
        matches!(self, Flat::Mapped(_))
    }

    /// The values in `bytes` of `blob`: read in place when [`MappedArray::new`] can,
    /// decoded from little-endian into memory otherwise (`None` when the range is outside
    /// the blob or not a whole number of values).
    pub fn of(blob: &std::sync::Arc<Blob>, bytes: std::ops::Range<usize>) -> Option<Self> {
        if let Some(m) = MappedArray::new(blob, bytes.clone()) {
            return Some(Flat::Mapped(m));
        }
        read_le(blob.get(bytes)?).map(Flat::Held)
    }

    /// The values, to change: copied into memory first when mapped.
    pub fn to_mut(&mut self) -> &mut Vec<T> {
        if let Flat::Mapped(m) = self {
            *self = Flat::Held(m.to_vec());
        }
        match self {
            Flat::Held(v) => v,
            Flat::Mapped(_) => unreachable!("copied above"),
        }
    }

    /// Releases the pages of mapped values ([`MappedArray::release`]); nothing when held.
    pub fn release(&self) {
        if let Flat::Mapped(m) = self {
            m.release();
        }
    }
}

/// The little-endian values `raw` holds, decoded into memory at any alignment; `None` when
/// it is not a whole number of them.
pub fn read_le<T: bytemuck::Pod>(raw: &[u8]) -> Option<Vec<T>> {
    let size = std::mem::size_of::<T>();
    if !raw.len().is_multiple_of(size) {
        return None;
    }
    Some(raw.chunks_exact(size).map(bytemuck::pod_read_unaligned::<T>).map(from_le).collect())
}

/// A value read from little-endian bytes as a native one (the identity on little-endian
/// machines, which are the only ones that map; a big-endian one swaps its bytes).
fn from_le<T: bytemuck::Pod>(v: T) -> T {
    if cfg!(target_endian = "little") {
        v
    } else {
        let mut v = v;
        bytemuck::bytes_of_mut(&mut v).reverse();
        v
    }
}

/// A flat key → bytes store for the files of one index.
pub trait Storage: Send + Sync {
    /// Reads a whole object.
    fn read(&self, key: &str) -> Result<Vec<u8>>;
    /// Reads a whole object without copying it where the store allows (a local file is
    /// memory-mapped). Defaults to [`Storage::read`].
    fn read_blob(&self, key: &str) -> Result<Blob> {
        self.read(key).map(Blob::Owned)
    }
    /// Writes a whole object; a reader never sees a partial object.
    fn write(&self, key: &str, bytes: &[u8]) -> Result<()>;
    /// Removes an object; removing one that does not exist is not an error.
    fn remove(&self, key: &str) -> Result<()>;
    /// Whether an object exists.
    fn exists(&self, key: &str) -> Result<bool>;
    /// A human-readable location for messages (`/path/to/index`, `s3://...`).
    fn location(&self) -> String;
}

/// A directory on the local file system.
#[derive(Debug, Clone)]
pub struct LocalDir {
    root: PathBuf,
}

impl LocalDir {
    /// Uses `root` (created on first write).
    pub fn new(root: impl Into<PathBuf>) -> Self {
        LocalDir { root: root.into() }
    }

    /// The directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    fn path(&self, key: &str) -> Result<PathBuf> {
        if key.is_empty() || key.split('/').any(|p| p.is_empty() || p == "." || p == "..") {
            return Err(Error::invalid("key", format!("{key:?} is not a relative object key")));
        }
        Ok(self.root.join(key))
    }
}

impl Storage for LocalDir {
    fn read(&self, key: &str) -> Result<Vec<u8>> {
        let p = self.path(key)?;
        std::fs::read(&p).map_err(|e| Error::io(p, e))
    }

    fn read_blob(&self, key: &str) -> Result<Blob> {
        let p = self.path(key)?;
        let file = std::fs::File::open(&p).map_err(|e| Error::io(&p, e))?;
        let len = file.metadata().map_err(|e| Error::io(&p, e))?.len();
        if len == 0 {
            return Ok(Blob::Owned(Vec::new()));
        }
        // SAFETY: the map is read-only and lives only while the index is decoded. Index
        // files are never modified in place: `write` replaces them by rename, which leaves
        // an existing map on the old inode. (A third party truncating the file meanwhile
        // could fault the process; that is the documented caveat of any file map.)
        let map = unsafe { memmap2::Mmap::map(&file) }.map_err(|e| Error::io(&p, e))?;
        Ok(Blob::Mapped(map))
    }

    fn write(&self, key: &str, bytes: &[u8]) -> Result<()> {
        let p = self.path(key)?;
        if let Some(dir) = p.parent() {
            std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        }
        // A temporary name of its own per write: the file's whole name (`dense.f32` and
        // `dense.graph` must not share `dense.tmp-*` while written in parallel), the
        // process and a counter (two threads writing the same key).
        static WRITES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = WRITES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let name = p.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default();
        let tmp = p.with_file_name(format!("{name}.tmp-{}-{n}", std::process::id()));
        std::fs::write(&tmp, bytes).map_err(|e| Error::io(&tmp, e))?;
        std::fs::rename(&tmp, &p).map_err(|e| Error::io(&p, e))
    }

    fn remove(&self, key: &str) -> Result<()> {
        let p = self.path(key)?;
        match std::fs::remove_file(&p) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(Error::io(p, e)),
            _ => Ok(()),
        }
    }

    fn exists(&self, key: &str) -> Result<bool> {
        Ok(self.path(key)?.is_file())
    }

    fn location(&self) -> String {
        self.root.display().to_string()
    }
}

/// The objects of another store under a key prefix, as a store of their own: an index
/// shard's files (`shards/003/manifest.json` read as `manifest.json`).
pub struct Within<'a> {
    inner: &'a dyn Storage,
    prefix: String,
}

impl<'a> Within<'a> {
    /// The objects of `inner` whose keys start with `prefix` (which ends with `/`).
    pub fn new(inner: &'a dyn Storage, prefix: impl Into<String>) -> Self {
        Within { inner, prefix: prefix.into() }
    }

    fn key(&self, key: &str) -> String {
        format!("{}{key}", self.prefix)
    }
}

impl Storage for Within<'_> {
    fn read(&self, key: &str) -> Result<Vec<u8>> {
        self.inner.read(&self.key(key))
    }
    fn read_blob(&self, key: &str) -> Result<Blob> {
        self.inner.read_blob(&self.key(key))
    }
    fn write(&self, key: &str, bytes: &[u8]) -> Result<()> {
        self.inner.write(&self.key(key), bytes)
    }
    fn remove(&self, key: &str) -> Result<()> {
        self.inner.remove(&self.key(key))
    }
    fn exists(&self, key: &str) -> Result<bool> {
        self.inner.exists(&self.key(key))
    }
    fn location(&self) -> String {
        format!("{}/{}", self.inner.location().trim_end_matches('/'), self.prefix.trim_end_matches('/'))
    }
}

/// Objects held in memory: what an object-store download is decoded from, and what a
/// build is written to before it is published.
///
/// [`Storage::read_blob`] hands out the object itself when nothing else holds it and
/// removes it from the store, so decoding a download never holds two copies.
///
/// An object may also be a local file ([`MemStore::insert_file`]): a download too large to
/// hold in memory, such as the `f32` vectors an index reads in place. It is read by mapping.
#[derive(Debug, Default)]
pub struct MemStore {
    label: String,
    objects: std::sync::RwLock<std::collections::BTreeMap<String, std::sync::Arc<Vec<u8>>>>,
    files: std::sync::RwLock<std::collections::BTreeMap<String, std::sync::Arc<std::fs::File>>>,
}

impl MemStore {
    /// An empty store; `label` is its [`Storage::location`] in messages (`s3://b/p/versions/v`).
    pub fn new(label: impl Into<String>) -> Self {
        MemStore { label: label.into(), objects: Default::default(), files: Default::default() }
    }

    /// Adds or replaces an object held in the local file `file` (typically an unnamed
    /// temporary file, which the system removes once nothing holds it): it is read in place
    /// ([`Storage::read_blob`] maps it) and never copied into memory.
    pub fn insert_file(&self, key: impl Into<String>, file: std::fs::File) {
        let key = key.into();
        self.objects.write().expect("mem store lock").remove(&key);
        self.files.write().expect("mem store lock").insert(key, std::sync::Arc::new(file));
    }

    fn file(&self, key: &str) -> Option<std::sync::Arc<std::fs::File>> {
        self.files.read().expect("mem store lock").get(key).cloned()
    }

    fn file_error(&self, key: &str, e: std::io::Error) -> Error {
        Error::Storage { location: format!("{}/{key}", self.label), reason: e.to_string() }
    }

    /// Adds or replaces an object without copying it.
    pub fn insert(&self, key: impl Into<String>, bytes: Vec<u8>) {
        let key = key.into();
        self.files.write().expect("mem store lock").remove(&key);
        self.objects.write().expect("mem store lock").insert(key, std::sync::Arc::new(bytes));
    }

    /// Every object held in memory, in key order (not those in files).
    pub fn objects(&self) -> Vec<(String, std::sync::Arc<Vec<u8>>)> {
        self.objects.read().expect("mem store lock").iter().map(|(k, v)| (k.clone(), v.clone())).collect()
    }

    /// Total bytes held, in memory and in files.
    pub fn total_bytes(&self) -> u64 {
        let files: u64 = self
            .files
            .read()
            .expect("mem store lock")
            .values()
            .filter_map(|f| f.metadata().ok())
            .map(|m| m.len())
            .sum();
        files + self.objects.read().expect("mem store lock").values().map(|v| v.len() as u64).sum::<u64>()
    }

    fn get(&self, key: &str) -> Result<std::sync::Arc<Vec<u8>>> {
        self.objects.read().expect("mem store lock").get(key).cloned().ok_or_else(|| Error::Storage {
            location: format!("{}/{key}", self.label),
            reason: "no such object".into(),
        })
    }
}

impl Storage for MemStore {
    fn read(&self, key: &str) -> Result<Vec<u8>> {
        if self.file(key).is_some() {
            return Ok(self.read_blob(key)?.to_vec());
        }
        Ok(self.get(key)?.as_ref().clone())
    }

    fn read_blob(&self, key: &str) -> Result<Blob> {
        if let Some(file) = self.file(key) {
            if file.metadata().map_err(|e| self.file_error(key, e))?.len() == 0 {
                return Ok(Blob::Owned(Vec::new()));
            }
            // SAFETY: the file is this store's own (an unnamed temporary file the download
            // wrote before inserting it), and nothing writes to it once inserted.
            let map = unsafe { memmap2::Mmap::map(&*file) }.map_err(|e| self.file_error(key, e))?;
            return Ok(Blob::Mapped(map));
        }
        // Take the bytes out when this is the only holder (a download decoded once).
        let arc = self.get(key)?;
        let mut objects = self.objects.write().expect("mem store lock");
        drop(arc);
        match objects.remove(key).map(std::sync::Arc::try_unwrap) {
            Some(Ok(bytes)) => Ok(Blob::Owned(bytes)),
            Some(Err(shared)) => {
                let copy = shared.as_ref().clone();
                objects.insert(key.to_string(), shared);
                Ok(Blob::Owned(copy))
            }
            None => Err(Error::Storage { location: format!("{}/{key}", self.label), reason: "no such object".into() }),
        }
    }

    fn write(&self, key: &str, bytes: &[u8]) -> Result<()> {
        self.insert(key, bytes.to_vec());
        Ok(())
    }

    fn remove(&self, key: &str) -> Result<()> {
        self.objects.write().expect("mem store lock").remove(key);
        self.files.write().expect("mem store lock").remove(key);
        Ok(())
    }

    fn exists(&self, key: &str) -> Result<bool> {
        Ok(self.objects.read().expect("mem store lock").contains_key(key)
            || self.files.read().expect("mem store lock").contains_key(key))
    }

    fn location(&self) -> String {
        self.label.clone()
    }
}

/// Where an index lives: a local directory or an object-store prefix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    /// A directory.
    Local(PathBuf),
    /// `s3://bucket/prefix`: versions under `prefix/versions/`, the `prefix/CURRENT` pointer.
    S3 {
        /// Bucket name.
        bucket: String,
        /// Key prefix, without leading or trailing `/` (may be empty).
        prefix: String,
    },
}

impl Location {
    /// Parses `s3://bucket/prefix` or a path.
    pub fn parse(s: &str) -> Result<Location> {
        let s = s.trim();
        if s.is_empty() {
            return Err(Error::invalid("location", "is empty"));
        }
        let Some(rest) = s.strip_prefix("s3://") else {
            if s.contains("://") {
                return Err(Error::invalid("location", format!("{s:?}: only s3:// URIs and paths are supported")));
            }
            return Ok(Location::Local(PathBuf::from(s)));
        };
        let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        let valid_bucket = (3..=63).contains(&bucket.len())
            && bucket.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.');
        if !valid_bucket {
            return Err(Error::invalid("location", format!("{s:?}: {bucket:?} is not an S3 bucket name")));
        }
        let prefix = prefix.trim_matches('/');
        if prefix.split('/').any(|p| p == "." || p == "..") || prefix.contains("//") {
            return Err(Error::invalid("location", format!("{s:?}: the prefix has an empty, `.` or `..` part")));
        }
        Ok(Location::S3 { bucket: bucket.to_string(), prefix: prefix.to_string() })
    }
}

impl std::fmt::Display for Location {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Location::Local(p) => write!(f, "{}", p.display()),
            Location::S3 { bucket, prefix } if prefix.is_empty() => write!(f, "s3://{bucket}"),
            Location::S3 { bucket, prefix } => write!(f, "s3://{bucket}/{prefix}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parallel_writes_of_files_sharing_a_stem_keep_their_own_bytes() {
        // `dense.f32` and `dense.graph` are written at the same time by an index save.
        use rayon::prelude::*;
        let tmp = tempfile::tempdir().unwrap();
        let dir = LocalDir::new(tmp.path());
        (0..200).into_par_iter().for_each(|i| {
            let key = if i % 2 == 0 { "dense.f32" } else { "dense.graph" };
            dir.write(key, key.as_bytes()).unwrap();
        });
        assert_eq!(std::fs::read(tmp.path().join("dense.f32")).unwrap(), b"dense.f32");
        assert_eq!(std::fs::read(tmp.path().join("dense.graph")).unwrap(), b"dense.graph");
        let left: Vec<_> = std::fs::read_dir(tmp.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(left.len(), 2, "no temporary file left: {left:?}");
    }

    #[test]
    fn round_trip_and_key_validation() {
        let dir = tempfile::tempdir().unwrap();
        let s = LocalDir::new(dir.path().join("idx"));
        assert!(!s.exists("a.bin").unwrap());
        s.write("a.bin", b"hello").unwrap();
        assert_eq!(s.read("a.bin").unwrap(), b"hello");
        s.write("a.bin", b"bye").unwrap();
        assert_eq!(s.read("a.bin").unwrap(), b"bye");
        for bad in ["", "../x", "/abs", "a//b", "./a"] {
            assert!(matches!(s.read(bad), Err(Error::InvalidArgument { .. })), "{bad}");
        }
        assert!(matches!(s.read("missing"), Err(Error::Io { .. })));
    }

    #[test]
    fn mem_store_hands_out_a_sole_copy_without_cloning_and_reports_missing_keys() {
        let m = MemStore::new("mem://x");
        m.write("a", b"abc").unwrap();
        assert!(m.exists("a").unwrap());
        assert_eq!(m.read("a").unwrap(), b"abc");
        assert_eq!(&*m.read_blob("a").unwrap(), b"abc");
        // The blob took the only copy out.
        assert!(!m.exists("a").unwrap());
        let e = m.read("a").unwrap_err().to_string();
        assert!(e.contains("mem://x/a") && e.contains("no such object"), "{e}");
    }

    #[test]
    fn locations_parse_s3_uris_and_paths_and_refuse_the_rest() {
        assert_eq!(
            Location::parse("s3://my-bucket/indexes/demo/").unwrap(),
            Location::S3 { bucket: "my-bucket".into(), prefix: "indexes/demo".into() }
        );
        assert_eq!(
            Location::parse("s3://my-bucket").unwrap(),
            Location::S3 { bucket: "my-bucket".into(), prefix: String::new() }
        );
        assert_eq!(Location::parse("s3://my-bucket/indexes/demo").unwrap().to_string(), "s3://my-bucket/indexes/demo");
        assert_eq!(Location::parse("/data/idx").unwrap(), Location::Local("/data/idx".into()));
        for bad in ["", "s3://", "s3://UPPER/x", "s3://b/x", "s3://bucket/a//b", "s3://bucket/../x", "gs://bucket/x"] {
            let e = Location::parse(bad).unwrap_err();
            assert!(matches!(e, Error::InvalidArgument { ref field, .. } if field == "location"), "{bad}: {e}");
        }
    }
}
