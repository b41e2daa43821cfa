//! Where index files live, behind a trait so that object stores can sit beside the
//! local directory.

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// A flat key → bytes store for the files of one index.
pub trait Storage: Send + Sync {
    /// Reads a whole object.
    fn read(&self, key: &str) -> Result<Vec<u8>>;
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
