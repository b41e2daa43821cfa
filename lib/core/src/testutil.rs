//! Helpers shared by the unit tests: where the models and the shared data are.

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use crate::build::{BuildOptions, DEFAULT_SHARD_CHUNKS};
use crate::corpus::Document;
use crate::encode::{DenseEncoder, ModelSet, SparseEncoder};
use crate::index::format::ModelRef;
use crate::index::{Bm25Params, Index};
use crate::pipeline::Engine;

/// The converted models (`scripts/ci/fetch_models.sh` must have run).
pub fn model_dir() -> PathBuf {
    let d = crate::encode::default_model_dir();
    assert!(
        d.join("minilm-l6-v2/model.onnx").is_file(),
        "models missing in {}: run scripts/ci/fetch_models.sh",
        d.display()
    );
    d
}

/// The nodes of the ONNX graph in the file `path`, read with tract's parser.
pub fn onnx_nodes(path: &Path) -> Vec<tract_onnx::pb::NodeProto> {
    use tract_onnx::prelude::Framework;
    let model = tract_onnx::onnx().proto_model_for_path(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    model.graph.map(|g| g.node).unwrap_or_default()
}

/// `$SEXTANT_SHARED_DIR`, else `../shared` beside the repository.
pub fn shared_dir() -> PathBuf {
    std::env::var_os("SEXTANT_SHARED_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared"))
}

/// Reads a JSONL file of the golden directory.
pub fn golden(name: &str) -> Vec<serde_json::Value> {
    read_jsonl(&shared_dir().join("golden").join(name))
}

/// Reads a JSONL file of the repository's own golden directory, `tests/golden` (reference
/// outputs of the optional models, written by `scripts/data/golden_*.py`).
pub fn repo_golden(name: &str) -> Vec<serde_json::Value> {
    read_jsonl(&PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/golden").join(name))
}

fn read_jsonl(path: &std::path::Path) -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines().filter(|l| !l.trim().is_empty()).map(|l| serde_json::from_str(l).unwrap()).collect()
}

/// A deterministic xorshift generator for randomised (property) tests: the same seed, the
/// same cases, so a failure can be replayed.
pub struct Rng(pub u64);

impl Rng {
    /// The next raw value.
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// A value in `0..n` (`n > 0`).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    /// Shuffles `items` in place (Fisher-Yates).
    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            items.swap(i, self.below(i + 1));
        }
    }
}

/// Runs a future to completion on the current thread (no runtime needed by the library's
/// async types).
pub fn block_on<F: std::future::Future>(f: F) -> F::Output {
    use std::sync::Arc;
    use std::task::{Context, Poll, Wake, Waker};
    struct Unpark(std::thread::Thread);
    impl Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut f = std::pin::pin!(f);
    loop {
        if let Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return v;
        }
        std::thread::park();
    }
}

/// A filing of `ticker` published on `date` (`YYYY-MM-DD`) with `segments`.
pub fn test_document(id: &str, ticker: &str, date: &str, segments: &[&str]) -> Document {
    Document {
        document_id: id.into(),
        title: format!("{ticker} filing"),
        document_type: "10-K".into(),
        ticker: Some(ticker.into()),
        year: Some(date[..4].parse().unwrap()),
        published_at: Some(date.parse().expect("a YYYY-MM-DD date")),
        segments: segments.iter().map(|s| s.to_string()).collect(),
        ..Default::default()
    }
}

/// An engine over four small filings (KO 2015 and 2024 near-duplicates, two AAPL filings),
/// built once per test process with the real models and 16-token chunks.
pub fn small_engine() -> &'static Engine {
    static ENGINE: OnceLock<Engine> = OnceLock::new();
    ENGINE.get_or_init(|| {
        let models = ModelSet::under(&model_dir());
        let dense = DenseEncoder::load(&models.dense).unwrap();
        let sparse = SparseEncoder::load(&models.sparse).unwrap();
        let docs = vec![
            test_document(
                "old",
                "KO",
                "2015-02-10",
                &["Concentrate sales to bottlers rose as unit case volume grew in Latin America."],
            ),
            test_document(
                "new",
                "KO",
                "2024-02-10",
                &["Concentrate sales to bottlers rose as unit case volume grew in Latin America and Asia."],
            ),
            test_document(
                "long",
                "AAPL",
                "2024-11-01",
                &[
                    "iPhone net sales increased due to higher sales of Pro models.",
                    "Services net sales grew on advertising, the App Store and cloud services.",
                    "Mac net sales were flat compared with the prior year.",
                    "Wearables, home and accessories net sales declined.",
                ],
            ),
            test_document("fx", "AAPL", "2024-11-01", &["Foreign currency exchange rates weighed on gross margin."]),
        ];
        let opts = BuildOptions {
            index_id: "t".into(),
            chunk_tokens: 16,
            chunk_overlap: 0,
            dense_window: crate::build::DEFAULT_DENSE_WINDOW,
            bm25: Bm25Params::default(),
            dense_model: ModelRef { id: "d".into(), weights_sha256: "x".into() },
            sparse_model: ModelRef { id: "s".into(), weights_sha256: "y".into() },
            shard_chunks: DEFAULT_SHARD_CHUNKS,
        };
        let index = Index::build(docs, &dense, &sparse, &opts, &|_, _, _| {}).unwrap();
        Engine::new(Arc::new(index), Arc::new(dense), Arc::new(sparse), None)
    })
}

/// Words as tokens: a [`TokenMeasure`](crate::corpus::TokenMeasure) for chunking tests
/// that reads like the text.
pub struct Words;

impl crate::corpus::TokenMeasure for Words {
    fn count(&self, s: &str) -> usize {
        s.split_whitespace().count()
    }
    fn token_ranges(&self, s: &str) -> Vec<std::ops::Range<usize>> {
        let mut out = Vec::new();
        let mut start = None;
        for (i, c) in s.char_indices().chain([(s.len(), ' ')]) {
            match (c.is_whitespace(), start) {
                (true, Some(a)) => {
                    out.push(a..i);
                    start = None;
                }
                (false, None) => start = Some(i),
                _ => {}
            }
        }
        out
    }
}
