//! The errors of a writable index.

use std::path::PathBuf;

/// What went wrong in a writable index.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A document was refused (its metadata's types, or something the engine refused); the
    /// field and the reason are the API's.
    #[error("{field}: {reason}")]
    Invalid {
        /// The field at fault.
        field: String,
        /// Why.
        reason: String,
    },
    /// The log, a version or its pointer could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// The engine failed (encoding, building, loading a version).
    #[error(transparent)]
    Core(#[from] sextant_core::Error),
    /// A log record or pointer could not be encoded or decoded.
    #[error("{0}")]
    Format(String),
}

/// The result of a writable index's operations.
pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    /// [`Error::Io`] on `path`.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io { path: path.into(), source }
    }
}
