//! # sextant-fuzz-harness
//!
//! Entry points for fuzzing (a development crate: nothing deployed depends on it). Each
//! takes arbitrary bytes and checks what a client or an operator relies on: no panic, no
//! hang, and for the HTTP paths no server error: every answer is a success or a 4xx in the
//! error envelope.
//!
//! `fuzz/` runs them under libFuzzer (`cargo fuzz`, coverage-guided, for long runs) and
//! `tests/fuzz_bounded.rs` runs them on seed inputs and random mutations in every CI run.
//! A violation panics with the offending input, which is what both runners report.

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};

use axum::body::{to_bytes, Body};
use axum::http::{Request, StatusCode};
use axum::Router;
use serde_json::Value;
use sextant_core::corpus::Document;
use sextant_core::encode::{default_model_dir, DenseEncoder, ModelSet, SparseEncoder};
use sextant_core::index::format::{sha256_hex, FileEntry, ModelRef};
use sextant_core::index::{Bm25Params, BuildOptions, Index};
use sextant_core::pipeline::Engine;
use sextant_core::storage::{Blob, MemStore};
use sextant_finance::Financials;
use sextant_keys::{KeyStore, LocalKeyStore, Plan};
use sextant_server::{router, ApiConfig, AppState, Indexes, ServedIndex};
use tower::ServiceExt;

/// The key the harness's requests carry.
pub const KEY: &str = "sx_fuzz_key";

/// The routes [`request_body`] posts to; the first input byte picks one.
pub const ROUTES: [&str; 4] = ["/v1/retrieve", "/v1/search", "/v1/context", "/fuzz/index/retrieve"];

/// What the targets share, built once: a small real index (two companies, filings and a
/// call) with the real models, the router over it, and the index's files.
pub struct Harness {
    app: Router,
    rt: tokio::runtime::Runtime,
    manifest: sextant_core::index::Manifest,
    files: Vec<(String, Vec<u8>)>,
    documents: Vec<Document>,
    names: BTreeMap<String, String>,
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
            bm25: Bm25Params::default(),
            dense_model: ModelRef { id: "d".into(), weights_sha256: "d".into() },
            sparse_model: ModelRef { id: "s".into(), weights_sha256: "s".into() },
        };
        let index = Index::build(docs, &dense, &sparse, &opts, &|_, _, _| {})?;
        let store = MemStore::new("mem://fuzz");
        let manifest = index.save(&store)?;
        let files = store.objects().into_iter().map(|(k, v)| (k, v.as_ref().clone())).collect();
        let names = sextant_server::company_names(&index);
        let documents = index.documents.clone();
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
    fn send(&self, request: Request<Body>, input: &[u8]) {
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

/// A request body: the first byte picks a route of [`ROUTES`], the rest is the body.
pub fn request_body(data: &[u8]) {
    let Some((&pick, body)) = data.split_first() else { return };
    let route = ROUTES[pick as usize % ROUTES.len()];
    let request = Request::post(route)
        .header("authorization", format!("Bearer {KEY}"))
        .header("content-type", "application/json")
        .body(Body::from(body.to_vec()))
        .expect("a valid request");
    harness().send(request, body);
}

/// The `/v1/search` filter language: arbitrary JSON compiled, and when it compiles,
/// evaluated against the index's documents.
pub fn search_filters(data: &[u8]) {
    let Ok(v) = serde_json::from_slice::<Value>(data) else { return };
    if let Ok(cond) = sextant_server::search_filters::compile(&v, "filters") {
        for d in &harness().documents {
            let _ = cond.matches(d);
        }
    }
}

/// The conversation rewrite: lines are the history, the last line the new query.
pub fn rewrite(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let mut lines: Vec<String> = text.split('\n').map(str::to_string).collect();
    let query = lines.pop().unwrap_or_default();
    let _ = sextant_server::rewrite(&lines, &query, &harness().names);
}

/// The index loader on hostile files: the first byte picks a file of the index; the second
/// picks between replacing it with the remaining bytes and truncating the real file where
/// they say. The manifest entry is made to match, so the bytes reach the decoders (a
/// checksum mismatch is already refused before); loading must end in an index or an error.
pub fn index_file(data: &[u8]) {
    let h = harness();
    let [pick, mode, rest @ ..] = data else { return };
    let entries = &h.manifest.files;
    let target = &entries[*pick as usize % entries.len()];
    let real = &h.files.iter().find(|(k, _)| *k == target.name).expect("every manifest file is stored").1;
    let bytes: Vec<u8> = if mode % 2 == 0 {
        rest.to_vec()
    } else {
        let at = rest.iter().fold(0usize, |a, &b| a.wrapping_mul(257).wrapping_add(b as usize)) % (real.len() + 1);
        real[..at].to_vec()
    };
    let mut manifest = h.manifest.clone();
    for f in manifest.files.iter_mut().filter(|f| f.name == target.name) {
        *f = FileEntry { name: f.name.clone(), bytes: bytes.len() as u64, sha256: sha256_hex(&bytes) };
    }
    let mut parts = Vec::new();
    for f in &manifest.files {
        let blob = if f.name == target.name {
            Blob::Owned(bytes.clone())
        } else {
            Blob::Owned(h.files.iter().find(|(k, _)| *k == f.name).expect("every manifest file is stored").1.clone())
        };
        match Index::decode_file(&manifest, "mem://fuzz", f, blob) {
            Ok(p) => parts.push(p),
            Err(_) => return,
        }
    }
    if let Ok(index) = Index::assemble(manifest, parts, "mem://fuzz") {
        // A loaded index must also search without panicking.
        let _ = index.bm25.search("capital expenditures", None, 5);
        let q = vec![0.05f32; index.dense.dim];
        let _ = sextant_core::index::VectorStore::search(&index.dense, &q, None, 5);
    }
}

/// `lambda_http`'s conversion of `text`, or `None` when it refuses the event or panics.
/// The panic hook is silenced meanwhile: libFuzzer's hook aborts on any panic, even one
/// caught here (the targets run on one thread, so the swap is not raced).
fn convert_quietly(text: &str) -> Option<lambda_http::Request> {
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let converted = std::panic::catch_unwind(|| lambda_http::request::from_str(text));
    std::panic::set_hook(hook);
    converted.ok()?.ok()
}

/// An API Gateway event (REST v1 or HTTP v2 JSON) converted by `lambda_http`, as the
/// functions receive it, then routed; an event `lambda_http` refuses is fine.
///
/// `lambda_http` 1.3 itself panics converting an event whose `requestContext.domainName` is
/// not a valid host name (an IDNA error unwrapped in its `request.rs`). API Gateway never
/// sends one, and in a function `lambda_runtime`'s panic layer turns the panic into an
/// invocation error without stopping the process; so this target skips events whose
/// conversion panics and checks everything from the converted request on.
/// `lambda_http_panics_on_an_invalid_domain_name` (in `tests/lambda_events.rs`) keeps the
/// upstream behaviour in view.
pub fn apigw_event(data: &[u8]) {
    std::env::set_var("AWS_LAMBDA_HTTP_IGNORE_STAGE_IN_PATH", "true");
    let Ok(text) = std::str::from_utf8(data) else { return };
    let Some(request) = convert_quietly(text) else { return };
    harness().send(request.map(Body::new), data);
}
