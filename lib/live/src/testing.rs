//! What the tests of this crate share: the real models and small build options.

use std::sync::{Arc, OnceLock};

use sextant_core::build::{BuildOptions, DEFAULT_SHARD_CHUNKS};
use sextant_core::encode::{DenseEncoder, ModelSet, SparseEncoder};
use sextant_core::index::format::ModelRef;
use sextant_core::index::Bm25Params;
use sextant_core::testutil::model_dir;

/// The converted models, loaded once per test process.
pub(crate) fn encoders() -> (Arc<DenseEncoder>, Arc<SparseEncoder>) {
    static E: OnceLock<(Arc<DenseEncoder>, Arc<SparseEncoder>)> = OnceLock::new();
    E.get_or_init(|| {
        let m = ModelSet::under(&model_dir());
        (Arc::new(DenseEncoder::load(&m.dense).unwrap()), Arc::new(SparseEncoder::load(&m.sparse).unwrap()))
    })
    .clone()
}

/// Options of a small index: 64-token chunks, 32-token dense windows.
pub(crate) fn options() -> BuildOptions {
    BuildOptions {
        index_id: "team".into(),
        chunk_tokens: 64,
        chunk_overlap: 0,
        dense_window: 32,
        bm25: Bm25Params::default(),
        dense_model: ModelRef { id: "d".into(), weights_sha256: "x".into() },
        sparse_model: ModelRef { id: "s".into(), weights_sha256: "y".into() },
        shard_chunks: DEFAULT_SHARD_CHUNKS,
    }
}
