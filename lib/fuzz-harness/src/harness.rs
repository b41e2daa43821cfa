//! The shared harness: a small real index with the real models, the router over it, and
//! the index's files, built once per process.

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};

use axum::body::{to_bytes, Body};
use axum::http::{Request, StatusCode};
use axum::Router;
use serde_json::Value;
use sextant_core::build::{BuildOptions, DEFAULT_SHARD_CHUNKS};
use sextant_core::corpus::Document;
use sextant_core::encode::{default_model_dir, DenseEncoder, ModelSet, SparseEncoder};
use sextant_core::index::format::ModelRef;
use sextant_core::index::{Bm25Params, Index};
use sextant_core::pipeline::Engine;
use sextant_core::storage::MemStore;
use sextant_finance::Financials;
use sextant_keys::{KeyStore, LocalKeyStore, Plan};
use sextant_server::{router, ApiConfig, AppState, Indexes, ServedIndex};
use tower::ServiceExt;

/// The key the harness's requests carry.
pub const KEY: &str = "sx_fuzz_key";

/// The routes [`request_body`](crate::request_body) posts to; the first input byte picks one.
pub const ROUTES: [&str; 4] = ["/v1/retrieve", "/v1/search", "/v1/context", "/fuzz/index/retrieve"];

/// What the targets share, built once: a small real index (two companies, filings and a
/// call) with the real models, the router over it, and the index's files.
pub struct Harness {
    pub(crate) app: Router,
    pub(crate) rt: tokio::runtime::Runtime,
    pub(crate) manifest: sextant_core::index::Manifest,
    pub(crate) files: Vec<(String, Vec<u8>)>,
    pub(crate) documents: Vec<Document>,
    pub(crate) names: BTreeMap<String, String>,
}

fn doc(id: &str, ticker: &str, kind: &str, date: &str, quarter: Option<&str>, segments: &[&str]) -> Document {
    Document {
        document_id: id.into(),
        title: format!("{ticker} {kind} {date}"),
        document_type: kind.into(),
        ticker: Some(ticker.into()),
        year: date[..4].parse().ok(),
        quarter: quarter.map(|q| q.parse().expect("a quarter")),
        published_at: Some(date.parse().expect("a date")),
        segments: segments.iter().map(|s| s.to_string()).collect(),
        ..Default::default()
    }
}

/// The shared harness (models from `$SEXTANT_MODEL_DIR` or the default cache).
pub fn harness() -> &'static Harness {
    static H: OnceLock<Harness> = OnceLock::new();
    H.get_or_init(|| Harness::new(&ModelSet::under(&default_model_dir())).expect("fuzz harness: models and index"))
}

impl Harness {
    fn new(models: &ModelSet) -> sextant_core::Result<Self> {
        let dense = DenseEncoder::load(&models.dense)?;
        let sparse = SparseEncoder::load(&models.sparse)?;
        let docs = vec![
            doc(
                "ma-10k-2024",
                "MA",
                "10-K",
                "2024-02-13",
                None,
                &[
                    "Net revenue increased 13% driven by cross-border volume growth.",
                    "We face regulatory risk from interchange fee legislation.",
                ],
            ),
            doc(
                "xom-10q-2025q2",
                "XOM",
                "10-Q",
                "2025-08-04",
                Some("Q2"),
                &[
                    "Upstream production rose to 4.6 million oil-equivalent barrels per day.",
                    "Capital expenditures were $6.3 billion in the quarter.",
                ],
            ),
            doc(
                "xom-call-2025q2",
                "XOM",
                "earnings_call",
                "2025-08-01",
                Some("Q2"),
                &["We expect buybacks of $20 billion this year."],
            ),
        ];
        let opts = BuildOptions {
            index_id: "fuzz".into(),
            chunk_tokens: 32,
            chunk_overlap: 0,
            dense_window: 16,
            bm25: Bm25Params::default(),
            dense_model: ModelRef { id: "d".into(), weights_sha256: "d".into() },
            sparse_model: ModelRef { id: "s".into(), weights_sha256: "s".into() },
            shard_chunks: DEFAULT_SHARD_CHUNKS,
        };
        let index = Index::build(docs, &dense, &sparse, &opts, &|_, _, _| {})?;
        let store = MemStore::new("mem://fuzz");
        let manifest = index.save(&store)?;
        let files = store.objects().into_iter().map(|(k, v)| (k, v.as_ref().clone())).collect();
        let names = sextant_finance::classify::company_names(&index);
        let documents = index.documents.to_vec();
        let financials = Financials::new(Default::default(), &index);
        let engine = Engine::new(Arc::new(index), Arc::new(dense), Arc::new(sparse), None);
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| sextant_core::Error::task_failed("starting the fuzz runtime", e))?;
        let keys = LocalKeyStore::in_memory();
        let plan = Plan {
            name: "fuzz".into(),
            max_top_k: 20,
            requests_per_minute: u32::MAX as u64,
            requests_per_day: u32::MAX as u64,
        };
        rt.block_on(keys.put_plan(plan))?;
        keys.add(KEY, "fuzz", "fuzz", vec!["*".into()])?;
        let state = AppState::new(Arc::new(keys), ApiConfig { default_index: "fuzz".into(), ..Default::default() });
        state.set_indexes(Indexes::from([("fuzz".to_string(), ServedIndex::new(engine, financials))]));
        Ok(Harness { app: router(state), rt, manifest, files, documents, names })
    }

    /// Sends `request` through the router and checks the answer.
    pub(crate) fn send(&self, request: Request<Body>, input: &[u8]) {
        let kb = request.uri().path().ends_with("/index/retrieve");
        let (status, body) = self.rt.block_on(async {
            let resp = self.app.clone().oneshot(request).await.expect("the router is infallible");
            let status = resp.status();
            (status, to_bytes(resp.into_body(), usize::MAX).await.expect("a readable body"))
        });
        let shown = || String::from_utf8_lossy(input).chars().take(400).collect::<String>();
        assert!(!status.is_server_error(), "server error {status} for input {:?}", shown());
        if status == StatusCode::NO_CONTENT {
            return;
        }
        let v: Value = serde_json::from_slice(&body)
            .unwrap_or_else(|e| panic!("non-JSON body ({e}) with {status} for input {:?}", shown()));
        if status.is_client_error() {
            let ok = if kb {
                v["Success"] == false && v["Code"].is_string() && v["Message"].is_string()
            } else {
                v["success"] == false && v["error"]["code"].is_string() && v["error"]["message"].is_string()
            };
            assert!(ok, "{status} without the error envelope: {v} for input {:?}", shown());
        }
    }
}
