//! Helpers shared by the unit tests: where the models and the shared data are.

use std::path::PathBuf;

/// The converted models (`scripts/fetch_models.sh` must have run).
pub fn model_dir() -> PathBuf {
    let d = crate::encode::default_model_dir();
    assert!(d.join("minilm-l6-v2/model.onnx").is_file(), "models missing in {}: run scripts/fetch_models.sh", d.display());
    d
}

/// `$SEXTANT_SHARED_DIR`, else `../shared` beside the repository.
pub fn shared_dir() -> PathBuf {
    std::env::var_os("SEXTANT_SHARED_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared"))
}

/// Reads a JSONL file of the golden directory.
pub fn golden(name: &str) -> Vec<serde_json::Value> {
    let path = shared_dir().join("golden").join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines().filter(|l| !l.trim().is_empty()).map(|l| serde_json::from_str(l).unwrap()).collect()
}
