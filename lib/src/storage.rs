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
        let tmp = p.with_extension(format!("tmp-{}", std::process::id()));
        std::fs::write(&tmp, bytes).map_err(|e| Error::io(&tmp, e))?;
        std::fs::rename(&tmp, &p).map_err(|e| Error::io(&p, e))
    }

    fn exists(&self, key: &str) -> Result<bool> {
        Ok(self.path(key)?.is_file())
    }

    fn location(&self) -> String {
        self.root.display().to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
