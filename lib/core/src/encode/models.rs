//! Where the converted models live and which ones an engine uses.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// `model.json` written beside each converted model by `scripts/ci/fetch_models.sh`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ModelInfo {
    /// Model id (`minilm-l6-v2`, `splade-tiny`, ...).
    pub id: String,
    /// `dense`, `splade` or `cross`.
    pub kind: String,
    /// Hidden size of the encoder.
    pub hidden_size: usize,
    /// SHA-256 of the source weights.
    pub weights_sha256: String,
}

impl ModelInfo {
    /// Reads `dir/model.json`.
    pub fn read(dir: &Path) -> Result<Self> {
        let path = dir.join("model.json");
        let text = std::fs::read_to_string(&path).map_err(|e| Error::Model {
            path: path.clone(),
            reason: format!("{e} (run scripts/ci/fetch_models.sh or point SEXTANT_MODEL_DIR at the models)"),
        })?;
        serde_json::from_str(&text).map_err(|e| Error::Model { path, reason: e.to_string() })
    }
}

/// The model directories an engine uses.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelSet {
    /// Dense embedder directory.
    pub dense: PathBuf,
    /// SPLADE encoder directory.
    pub sparse: PathBuf,
    /// Optional cross-encoder directory (reranking is off without one).
    pub reranker: Option<PathBuf>,
}

/// The default dense embedder's directory name: all-MiniLM-L6-v2 (6 layers, 384-d).
pub const DEFAULT_DENSE_MODEL: &str = "minilm-l6-v2";

impl ModelSet {
    /// The default models under `root`: [`DEFAULT_DENSE_MODEL`] and `splade-tiny`, no
    /// reranker.
    pub fn under(root: &Path) -> Self {
        ModelSet { dense: root.join(DEFAULT_DENSE_MODEL), sparse: root.join("splade-tiny"), reranker: None }
    }

    /// The same set with the dense embedder converted as `name` beside the others (for
    /// example `mpnet-base-v2`, which `scripts/ci/fetch_models.sh` converts). `name` is one
    /// directory name, not a path.
    pub fn with_dense_model(mut self, name: &str) -> Result<Self> {
        let plain = !name.is_empty() && !name.starts_with('.') && !name.contains(['/', '\\']);
        let root = self.dense.parent().map(Path::to_path_buf).unwrap_or_default();
        if !plain {
            return Err(Error::Model {
                path: root,
                reason: format!("dense model {name:?}: give the name of a converted model directory, not a path"),
            });
        }
        self.dense = root.join(name);
        Ok(self)
    }

    /// The dense embedder's directory name when it is not [`DEFAULT_DENSE_MODEL`] (what
    /// cache keys add and what `fetch_models.sh --with` fetches), `None` for the default.
    pub fn other_dense_model(&self) -> Option<&str> {
        self.dense.file_name().and_then(|n| n.to_str()).filter(|n| *n != DEFAULT_DENSE_MODEL)
    }
}

/// `$SEXTANT_MODEL_DIR`, else `$SEXTANT_CACHE_DIR/models`, else `~/.cache/sextant/models`.
pub fn default_model_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("SEXTANT_MODEL_DIR") {
        return PathBuf::from(d);
    }
    if let Some(d) = std::env::var_os("SEXTANT_CACHE_DIR") {
        return PathBuf::from(d).join("models");
    }
    let home = std::env::var_os("HOME").map(PathBuf::from).unwrap_or_else(|| PathBuf::from("."));
    home.join(".cache/sextant/models")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dense_model_is_named_beside_the_others_never_by_a_path() {
        let set = ModelSet::under(Path::new("/m")).with_dense_model("mpnet-base-v2").unwrap();
        assert_eq!(set.dense, Path::new("/m/mpnet-base-v2"));
        assert_eq!(set.sparse, Path::new("/m/splade-tiny"));
        assert_eq!(set.other_dense_model(), Some("mpnet-base-v2"));
        assert_eq!(ModelSet::under(Path::new("/m")).other_dense_model(), None);
        for bad in ["", "../x", "a/b", ".hidden"] {
            let e = ModelSet::under(Path::new("/m")).with_dense_model(bad).unwrap_err().to_string();
            assert!(e.contains("not a path"), "{bad:?}: {e}");
        }
    }
}
