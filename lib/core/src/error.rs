//! The engine's one error type, shared by the crates built on it.

use std::path::PathBuf;

/// Everything that can go wrong in the engine, named for what went wrong in the domain.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A caller passed a value the engine cannot use (`field` names it).
    #[error("invalid argument `{field}`: {reason}")]
    InvalidArgument {
        /// The offending field or parameter.
        field: String,
        /// Why it was refused.
        reason: String,
    },
    /// A model directory is missing a file or holds something unusable.
    #[error("model error in {path}: {reason}")]
    Model {
        /// The file or directory at fault.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// Running a model failed.
    #[error("inference failed: {0}")]
    Inference(String),
    /// A tokenizer could not be loaded or failed on an input.
    #[error("tokenizer error: {0}")]
    Tokenizer(String),
    /// An index file does not match its manifest (checksum, size, version).
    #[error("index corrupted: {file}: expected {expected}, found {found}")]
    IndexCorrupted {
        /// The file that failed verification.
        file: String,
        /// What the manifest says.
        expected: String,
        /// What was found.
        found: String,
    },
    /// The index on disk was written by an incompatible version of the format.
    #[error(
        "index format version {found} is not supported (this build reads versions 1 to {expected}): rebuild the index"
    )]
    UnsupportedFormat {
        /// The newest version this build reads.
        expected: u32,
        /// The version on disk.
        found: u32,
    },
    /// A corpus file could not be parsed.
    #[error("corpus error in {source_name} line {line}: {reason}")]
    Corpus {
        /// The file being read.
        source_name: String,
        /// 1-based line number.
        line: usize,
        /// What could not be parsed.
        reason: String,
    },
    /// None of the paths a search asked for is ready yet (their index is still building).
    #[error("the {0} path is still being built; retry shortly")]
    PathsNotReady(String),
    /// Every retrieval path failed for a query.
    #[error("all retrieval paths failed: {0}")]
    AllPathsFailed(String),
    /// No shard of a sharded index answered a search.
    #[error("no index shard answered: {0}")]
    NoShardAnswered(String),
    /// The caller went away; the work stopped before this stage.
    #[error("cancelled before {0}: the caller went away")]
    Cancelled(Stage),
    /// A retrieval path or reranker failed.
    #[error("{component} failed: {reason}")]
    Component {
        /// The failing component (`dense`, `bm25`, `reranker`, ...).
        component: String,
        /// Why.
        reason: String,
    },
    /// A storage backend failed to read or write an object.
    #[error("storage error at {location}: {reason}")]
    Storage {
        /// The object or path.
        location: String,
        /// Why.
        reason: String,
    },
    /// A conditional write lost a race: someone else changed the object first.
    #[error("conflict at {location}: {reason}")]
    Conflict {
        /// The object.
        location: String,
        /// What changed.
        reason: String,
    },
    /// An I/O error with the path it happened on.
    #[error("i/o error on {path}: {source}")]
    Io {
        /// The path being read or written.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// Work handed to a background task (a blocking thread, a spawned future) did not finish:
    /// it panicked or was cancelled.
    #[error("{task} did not finish: {reason}")]
    TaskFailed {
        /// What the task was doing (`loading index demo`, `search`, ...).
        task: String,
        /// Why it stopped (the panic message or the cancellation).
        reason: String,
    },
    /// JSON (de)serialisation failed.
    #[error("json: {0}")]
    Json(#[from] serde_json::Error),
    /// Binary (de)serialisation failed.
    #[error("binary encoding: {0}")]
    Bincode(#[from] bincode::Error),
}

/// A stage of a search, where a cancelled search stops ([`Error::Cancelled`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// Retrieving on every path.
    Retrieval,
    /// Fusing the paths' lists.
    Fusion,
    /// Reranking the fused head.
    Rerank,
}

impl std::fmt::Display for Stage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Stage::Retrieval => "retrieval",
            Stage::Fusion => "fusion",
            Stage::Rerank => "rerank",
        })
    }
}

/// The crate's result type.
pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    /// Shorthand for [`Error::InvalidArgument`].
    pub fn invalid(field: impl Into<String>, reason: impl Into<String>) -> Self {
        Error::InvalidArgument { field: field.into(), reason: reason.into() }
    }

    /// Shorthand for [`Error::TaskFailed`]: `task` did not finish because of `reason` (a
    /// runtime's join error, for instance).
    pub fn task_failed(task: impl Into<String>, reason: impl std::fmt::Display) -> Self {
        Error::TaskFailed { task: task.into(), reason: reason.to_string() }
    }

    /// Shorthand for [`Error::Io`].
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io { path: path.into(), source }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_task_that_did_not_finish_names_the_task_not_inference() {
        let e = Error::task_failed("reading the corpus", "task 7 panicked");
        assert!(matches!(e, Error::TaskFailed { ref task, .. } if task == "reading the corpus"));
        assert_eq!(e.to_string(), "reading the corpus did not finish: task 7 panicked");
    }
}
