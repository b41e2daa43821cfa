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

impl ModelSet {
    /// The default models under `root`: `minilm-l6-v2` and `splade-tiny`, no reranker.
    pub fn under(root: &Path) -> Self {
        ModelSet { dense: root.join("minilm-l6-v2"), sparse: root.join("splade-tiny"), reranker: None }
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
