//! The router in process on a real index: the API Gateway events in `events/` (REST v1 and
//! HTTP API v2, good and bad), converted by `lambda_http` exactly as the `retrieve` and
//! `search` functions receive them; and a reranker that fails mid-request.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use axum::body::to_bytes;
use serde_json::Value;
use sextant_core::encode::{default_model_dir, ModelSet};
use sextant_core::index::format::sha256_hex;
use sextant_core::index::Index;
use sextant_core::pipeline::{open_engine, RerankStatus, Reranker, SearchRequest};
use sextant_core::storage::LocalDir;
use sextant_keys::LocalKeyStore;
use sextant_server::{router, ApiConfig, AppState, Indexes, ServedIndex};
use tower::ServiceExt;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The three-company index of the demo corpus that `sextant serve --ticker MA --ticker XOM
/// --ticker ORCL` caches (same cache key); built with `sextant build` when absent.
fn test_index() -> Index {
    let corpus = repo().join("data/demo/documents.jsonl.gz");
    let sum = sha256_hex(&std::fs::read(&corpus).unwrap());
    let cache = std::env::var_os("SEXTANT_CACHE_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").unwrap()).join(".cache/sextant"));
    let (format, window) = (sextant_core::index::format::FORMAT_VERSION, sextant_core::build::DEFAULT_DENSE_WINDOW);
    let dir = cache.join("indexes").join(format!("demo-{}-MA+ORCL+XOM-f{format}-c200-w{window}-k0.9-b0.4", &sum[..12]));
    if let Ok(index) = Index::load(&LocalDir::new(&dir)) {
        return index;
    }
    let status = Command::new(env!("CARGO_BIN_EXE_sextant"))
        .args(["build", "--id", "demo", "--ticker", "MA", "--ticker", "XOM", "--ticker", "ORCL", "--docs"])
        .arg(&corpus)
        .arg("--out")
        .arg(&dir)
        .status()
        .unwrap();
    assert!(status.success());
    Index::load(&LocalDir::new(&dir)).unwrap()
}

/// The router over `engine` as index `demo`, with the key `sx_dev` on `plan`.
fn app_with(engine: sextant_core::pipeline::Engine, plan: &str) -> axum::Router {
    let keys = LocalKeyStore::in_memory();
    keys.add("sx_dev", "tests", plan, vec!["*".into()]).unwrap();
    let state = AppState::new(Arc::new(keys), ApiConfig::default());
    let financials = sextant_finance::Financials::new(Default::default(), &**engine.index());
    state.set_indexes(Indexes::from([("demo".to_string(), ServedIndex::new(engine, financials))]));
    router(state)
}

/// POSTs `body` to `path` with the key `sx_dev`; asserts a 200 and returns the JSON body.
async fn post_ok(app: &axum::Router, path: &str, body: Value) -> Value {
    let req = axum::http::Request::post(path)
        .header("content-type", "application/json")
        .header("authorization", "Bearer sx_dev")
        .body(axum::body::Body::from(body.to_string()))
        .unwrap();
    let resp = app.clone().oneshot(req).await.unwrap();
    assert_eq!(resp.status().as_u16(), 200, "{path}");
    serde_json::from_slice::<Value>(&to_bytes(resp.into_body(), 1 << 24).await.unwrap()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_gateway_events_go_through_lambda_http_and_the_router() {
    let models = ModelSet::under(&default_model_dir());
    let engine = open_engine(Arc::new(test_index()), &models).unwrap();
    // As `sextant_lambda::serve` does: the gateway's request id is the request's id.
    let app = app_with(engine, "free").layer(axum::middleware::from_fn(sextant_lambda::gateway_request_id));
    // As `sextant_lambda::serve` does: REST API paths carry the stage (`/prod/v1/...`).
    std::env::set_var("AWS_LAMBDA_HTTP_IGNORE_STAGE_IN_PATH", "true");

    // (event, status, error field)
    let expected: &[(&str, u16, Option<&str>)] = &[
        ("retrieve-ok", 200, None),
        ("retrieve-missing-query", 400, Some("query")),
        ("retrieve-no-key", 401, None),
        ("search-ok", 200, None),
        ("search-bad-date", 400, Some("published_after")),
    ];
    let mut seen = 0;
    for (name, status, field) in expected {
        for kind in ["rest", "http"] {
            let file = repo().join("events").join(format!("{name}.{kind}.json"));
            let text = std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
            let request = lambda_http::request::from_str(&text).unwrap_or_else(|e| panic!("{name}.{kind}: {e}"));
            assert!(
                request.uri().path().ends_with(&format!("/v1/{}", name.split('-').next().unwrap())),
                "{name}.{kind}: {}",
                request.uri()
            );
            let resp = app.clone().oneshot(request.map(axum::body::Body::new)).await.unwrap();
            assert_eq!(resp.status().as_u16(), *status, "{name}.{kind}");
            let id = resp.headers().get("x-request-id").unwrap().to_str().unwrap().to_string();
            let event: Value = serde_json::from_str(&text).unwrap();
            assert_eq!(
                Some(id.as_str()),
                event["requestContext"]["requestId"].as_str(),
                "{name}.{kind}: the gateway's id"
            );
            let body: Value = serde_json::from_slice(&to_bytes(resp.into_body(), 1 << 24).await.unwrap()).unwrap();
            if *status == 200 {
                let items = body.get("chunks").or_else(|| body.get("results")).and_then(|v| v.as_array()).unwrap();
                assert!(!items.is_empty(), "{name}.{kind}: {body}");
            } else {
                assert_eq!(body["success"], false);
                assert_eq!(body["error"]["field"].as_str(), *field, "{name}.{kind}: {body}");
                assert_eq!(body["error"]["requestId"].as_str(), Some(id.as_str()));
            }
            seen += 1;
        }
    }
    let on_disk = std::fs::read_dir(repo().join("events"))
        .unwrap()
        .filter(|e| e.as_ref().unwrap().path().extension().is_some_and(|x| x == "json"))
        .count();
    assert_eq!(seen, on_disk, "every event in events/ is exercised");
}

/// A reranker that always fails, as a hosted reranking service would when it is down.
struct DownReranker;

impl sextant_kit::Reranker for DownReranker {
    fn rerank(
        &self,
        _q: &sextant_kit::Query,
        _items: Vec<sextant_kit::ContextItem>,
        _k: usize,
    ) -> sextant_core::Result<Vec<sextant_kit::ContextItem>> {
        Err(sextant_core::Error::Component { component: "reranker".into(), reason: "connection refused".into() })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_reranker_leaves_the_fused_order_and_says_so() {
    let models = ModelSet::under(&default_model_dir());
    let index = Arc::new(test_index());
    let healthy = open_engine(index.clone(), &models).unwrap();
    let down = open_engine(index, &models)
        .unwrap()
        .with_reranker(Some(Arc::new(sextant_kit::EngineReranker::new(DownReranker))));
    let body = serde_json::json!({"query": "share repurchase program", "limit": 10, "recency_boost": false});
    let fused = post_ok(&app_with(healthy, "pro"), "/v1/search", body.clone()).await;
    let fallback = post_ok(&app_with(down, "pro"), "/v1/search", body).await;
    assert_eq!(fused["meta"]["rerank"]["status"], "unavailable");
    assert_eq!(fallback["meta"]["rerank"]["status"], "failed");
    assert!(fallback["meta"]["rerank"]["reason"].as_str().unwrap().contains("connection refused"));
    let ids = |v: &Value| {
        v["results"].as_array().unwrap().iter().map(|u| u["unit_id"].as_str().unwrap().to_string()).collect::<Vec<_>>()
    };
    assert!(!ids(&fused).is_empty());
    assert_eq!(ids(&fallback), ids(&fused), "the fused order is served when the reranker fails");
    for u in fallback["results"].as_array().unwrap() {
        assert!(u["diagnostics"]["rerank_rank"].is_null());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_configured_cross_encoder_reranks_and_reports_its_ranks() {
    let mut models = ModelSet::under(&default_model_dir());
    // The golden stand-in cross-encoder (MiniLM + a classification head): not a trained
    // reranker, but the real cross-encoder path end to end.
    models.reranker = Some(default_model_dir().join("ce-standin"));
    let engine = open_engine(Arc::new(test_index()), &models).unwrap();
    assert!(engine.has_reranker());
    let app = app_with(engine, "pro");
    let r = post_ok(&app, "/v1/retrieve", serde_json::json!({"query": "share repurchase program", "top_k": 5})).await;
    assert_eq!(r["meta"]["rerank"]["status"], "applied", "{}", r["meta"]);
    assert_eq!(r["chunks"].as_array().unwrap().len(), 5);
    // The knowledge-base endpoint keeps only nodes whose rerank score reaches RerankMinScore.
    let all = post_ok(
        &app,
        "/ws/index/retrieve",
        serde_json::json!({"IndexId": "demo", "Query": "share repurchase program", "RerankTopN": 20}),
    )
    .await;
    let scores: Vec<f64> =
        all["Data"]["Nodes"].as_array().unwrap().iter().map(|n| n["Score"].as_f64().unwrap()).collect();
    assert_eq!(scores.len(), 20);
    assert!(all["Data"]["Nodes"][0]["Metadata"]["rerank"]["status"] == "applied");
    let mut sorted = scores.clone();
    sorted.sort_by(|a, b| b.total_cmp(a));
    let threshold = sorted[sorted.len() / 2];
    if threshold > 0.01 && threshold <= 1.0 {
        let body = serde_json::json!({
            "IndexId": "demo",
            "Query": "share repurchase program",
            "RerankTopN": 20,
            "RerankMinScore": threshold
        });
        let some = post_ok(&app, "/ws/index/retrieve", body).await;
        let kept = some["Data"]["Nodes"].as_array().unwrap();
        assert!(!kept.is_empty() && kept.len() < 20, "{} of 20 kept at {threshold}", kept.len());
    }
}

/// Found by fuzzing (`fuzz_bounded`, target `apigw_event`): `lambda_http` panics while
/// converting an event whose `requestContext.domainName` is not a valid host. API Gateway
/// never sends one and the runtime's panic layer answers such an invocation with an error,
/// so the fuzz target skips these events; when this test fails, upstream has fixed the
/// conversion and the skip in `sextant_fuzz_harness::apigw_event` can go.
#[test]
fn lambda_http_panics_on_an_invalid_domain_name() {
    let text = std::fs::read_to_string(repo().join("events/search-ok.http.json")).unwrap();
    let mut event: Value = serde_json::from_str(&text).unwrap();
    event["requestContext"]["domainName"] = Value::from("api-id.execute-api.us-ea[st-1.amazonaws.com");
    let bad = event.to_string();
    assert!(std::panic::catch_unwind(|| lambda_http::request::from_str(&bad)).is_err());
    assert!(lambda_http::request::from_str(&text).is_ok(), "the untouched event converts");
}

/// The dense path, held at a gate: it says when a search reached it and waits to be let go.
struct GatedDense {
    inner: sextant_core::pipeline::DensePath,
    reached: std::sync::mpsc::SyncSender<()>,
    gate: std::sync::Mutex<std::sync::mpsc::Receiver<()>>,
}

impl sextant_core::pipeline::PathRetriever for GatedDense {
    fn path(&self) -> sextant_core::pipeline::Path {
        sextant_core::pipeline::Path::Dense
    }
    fn retrieve(
        &self,
        q: &sextant_core::pipeline::PreparedQuery,
        allowed: Option<&sextant_core::index::Bitset>,
        k: usize,
    ) -> sextant_core::Result<Vec<sextant_core::pipeline::PathHit>> {
        self.reached.send(()).unwrap();
        self.gate.lock().unwrap().recv().unwrap();
        self.inner.retrieve(q, allowed, k)
    }
}

/// Counts its calls; keeps the fused order.
struct CountingReranker(Arc<std::sync::atomic::AtomicUsize>);

impl sextant_kit::Reranker for CountingReranker {
    fn rerank(
        &self,
        _q: &sextant_kit::Query,
        items: Vec<sextant_kit::ContextItem>,
        k: usize,
    ) -> sextant_core::Result<Vec<sextant_kit::ContextItem>> {
        self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Ok(items.into_iter().take(k).collect())
    }
}

/// A request whose client goes away mid-search stops its search at the next stage: the
/// rerank (the costliest stage) never runs. The same request left alone is reranked. For
/// `/v1/search` and for the narrative searches of `/v1/context`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_cancelled_mid_flight_leaves_no_work_behind() {
    use sextant_core::pipeline::PathRetriever as _;
    let models = ModelSet::under(&default_model_dir());
    let index = Arc::new(test_index());
    let requests = [
        ("/v1/search", serde_json::json!({"query": "share repurchase program", "limit": 5})),
        (
            "/v1/context",
            serde_json::json!({
                "question": "What risks do the filings describe about competition?",
                "route": "narrative"
            }),
        ),
    ];
    for (path, body) in requests {
        for cancel in [false, true] {
            let (reached_tx, reached_rx) = std::sync::mpsc::sync_channel(16);
            let (gate_tx, gate_rx) = std::sync::mpsc::channel();
            let reranks = Arc::new(std::sync::atomic::AtomicUsize::new(0));
            let gated = GatedDense {
                inner: sextant_core::pipeline::DensePath(index.clone()),
                reached: reached_tx,
                gate: std::sync::Mutex::new(gate_rx),
            };
            let _ = gated.path();
            let engine = open_engine(index.clone(), &models)
                .unwrap()
                .with_retriever(Box::new(gated))
                .with_reranker(Some(Arc::new(sextant_kit::EngineReranker::new(CountingReranker(reranks.clone())))));
            let app = app_with(engine, "pro");
            let req = axum::http::Request::post(path)
                .header("content-type", "application/json")
                .header("authorization", "Bearer sx_dev")
                .body(axum::body::Body::from(body.to_string()))
                .unwrap();
            let call = tokio::spawn(app.oneshot(req));
            let reached = tokio::task::spawn_blocking(move || {
                reached_rx.recv().unwrap();
                reached_rx
            })
            .await
            .unwrap();
            if cancel {
                // The client disconnects: the server drops the request's future.
                call.abort();
                assert!(call.await.unwrap_err().is_cancelled());
                gate_tx.send(()).unwrap();
                // The search thread resumes, sees the cancellation before fusion and stops;
                // no further search starts.
                tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
                assert_eq!(
                    reranks.load(std::sync::atomic::Ordering::SeqCst),
                    0,
                    "{path}: no rerank after the client left"
                );
                assert!(reached.try_recv().is_err(), "{path}: no search started after the client left");
            } else {
                // Let every search through (the narrative runs one per company and year).
                for _ in 0..16 {
                    let _ = gate_tx.send(());
                }
                let resp = call.await.unwrap().unwrap();
                assert_eq!(resp.status().as_u16(), 200, "{path}");
                assert!(
                    reranks.load(std::sync::atomic::Ordering::SeqCst) >= 1,
                    "{path}: the request left alone is reranked"
                );
            }
        }
    }
}

/// A function serving two indexes (the way `from_env` reads its environment) loads the
/// models once: both engines hold the same encoders, not two copies of the weights. And the
/// hosted reranker the template configures (`SEXTANT_RERANK_SERVICE=bedrock`, here against
/// the local protocol server) reranks both indexes' searches.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_function_shares_its_models_between_indexes_and_reranks_with_the_configured_service() {
    let tmp = tempfile::tempdir().unwrap();
    let mut dirs = Vec::new();
    for id in ["filings-a", "filings-b"] {
        let mut index = test_index();
        index.manifest.index_id = id.into();
        let dir = tmp.path().join(id);
        index.save(&LocalDir::new(&dir)).unwrap();
        dirs.push(dir.display().to_string());
    }
    let keys = tmp.path().join("keys.json");
    LocalKeyStore::open(&keys).unwrap().add("sx_dev", "tests", "pro", vec!["*".into()]).unwrap();
    // Only this test reads these variables.
    std::env::set_var("SEXTANT_INDEXES", dirs.join(","));
    std::env::set_var("SEXTANT_KEYS", &keys);
    std::env::set_var("SEXTANT_MODEL_DIR", default_model_dir());
    let standin = Arc::new(sextant_core::pipeline::CrossEncoderReranker::new(
        sextant_core::encode::CrossEncoder::load(&default_model_dir().join("ce-standin")).unwrap(),
        "ce-standin",
    ));
    let scorer: Arc<dyn Reranker> = standin.clone();
    let service = sextant_rerank::protocol_server::ProtocolServer::start("127.0.0.1:0".parse().unwrap(), scorer, None)
        .await
        .unwrap();
    for (k, v) in [
        ("SEXTANT_RERANK_SERVICE", "bedrock"),
        ("SEXTANT_RERANK_ENDPOINT", service.url().as_str()),
        // The stand-in scores 50 passages beside the other tests of this binary.
        ("SEXTANT_RERANK_TIMEOUT_MS", "30000"),
        ("AWS_REGION", "us-east-1"),
        ("AWS_ACCESS_KEY_ID", "AKIDTEST"),
        ("AWS_SECRET_ACCESS_KEY", "secret"),
    ] {
        std::env::set_var(k, v);
    }
    let context = sextant_lambda::from_env().await.unwrap();
    let (a, b) = (
        context.state.loaded_index("filings-a").unwrap().engine().clone(),
        context.state.loaded_index("filings-b").unwrap().engine().clone(),
    );
    assert!(Arc::ptr_eq(a.dense_encoder().unwrap(), b.dense_encoder().unwrap()), "one dense encoder for both indexes");
    assert!(
        Arc::ptr_eq(a.sparse_encoder().unwrap(), b.sparse_encoder().unwrap()),
        "one SPLADE encoder for both indexes"
    );
    for engine in [a, b] {
        let out = tokio::task::spawn_blocking(move || {
            let out = engine.search(&SearchRequest::new("capital expenditure", 5)).unwrap();
            assert_eq!(out.rerank, RerankStatus::Applied);
            let texts: Vec<(String, f32)> = out
                .hits
                .iter()
                .map(|h| (engine.index().chunks[h.chunk as usize].text.clone(), h.diagnostics.rerank_score.unwrap()))
                .collect();
            texts
        })
        .await
        .unwrap();
        for (text, score) in out {
            let want = standin.score("capital expenditure", &[text.as_str()]).unwrap()[0];
            assert!((score - want).abs() < 1e-4, "the service's score {score}, the stand-in's {want}");
        }
    }
    assert!(service.last_model().unwrap().ends_with("foundation-model/amazon.rerank-v1:0"));
}
