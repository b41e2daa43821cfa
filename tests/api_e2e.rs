//! End-to-end tests of the HTTP API: the real `sextant serve` binary on a free port, real
//! HTTP over TCP, a real index (three companies of the bundled demo corpus, built once and
//! cached), a key store file with keys on every plan.

mod support;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use sextant_core::corpus::{load_documents, Document};
use sextant_keys::LocalKeyStore;
use support::local_server::{http, repo, try_http, Resp, Server};

fn post(addr: &str, path: &str, key: Option<&str>, body: &Value) -> Resp {
    let auth = key.map(|k| format!("Bearer {k}"));
    let mut h = vec![("Content-Type", "application/json")];
    if let Some(a) = &auth {
        h.push(("Authorization", a.as_str()));
    }
    http(addr, "POST", path, &h, body.to_string().as_bytes())
}

/// The one origin the test server lets browsers call from.
const APP_ORIGIN: &str = "https://app.example.com";
const FREE: &str = "sx_free_key_for_tests";
const PRO: &str = "sx_pro_key_for_tests";
const ENTERPRISE: &str = "sx_enterprise_key_for_tests";
const REVOKED: &str = "sx_revoked_key_for_tests";
const SCOPED: &str = "sx_scoped_key_for_tests";
const TINY: &str = "sx_tiny_key_for_tests";

fn key_store(dir: &Path) -> PathBuf {
    let path = dir.join("keys.json");
    std::fs::write(
        &path,
        json!({"plans": [{"name": "tiny", "maxTopK": 5, "requestsPerMinute": 2, "requestsPerDay": 100}]}).to_string(),
    )
    .unwrap();
    let store = LocalKeyStore::open(&path).unwrap();
    for (key, plan) in [(FREE, "free"), (PRO, "pro"), (ENTERPRISE, "enterprise"), (REVOKED, "free"), (TINY, "tiny")] {
        store.add(key, "tests", plan, vec!["*".into()]).unwrap();
    }
    store.add(SCOPED, "tests", "pro", vec!["another-index".into()]).unwrap();
    store.revoke_now(&sextant_keys::hash_key(REVOKED), sextant_keys::now_unix()).unwrap();
    path
}

/// Starts `cmd` (a `sextant serve`) and returns it once it prints the address it listens on.
fn listen(mut cmd: Command) -> Server {
    // stderr: inherited, unless the caller sends it elsewhere.
    let mut child = cmd.stdout(Stdio::piped()).spawn().expect("start sextant serve");
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    let addr = line
        .split("http://")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .unwrap_or_else(|| panic!("no address in {line:?}"))
        .to_string();
    std::thread::spawn(move || for _ in out.lines() {});
    Server { child, addr }
}

fn start(keys: &Path) -> Server {
    start_with(keys, &[])
}

fn start_with(keys: &Path, extra: &[&str]) -> Server {
    start_with_env(keys, extra, &[])
}

fn start_with_env(keys: &Path, extra: &[&str], env: &[(&str, &str)]) -> Server {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_sextant"));
    cmd.current_dir(repo())
        .envs(env.iter().copied())
        .args([
            "serve",
            "--addr",
            "127.0.0.1:0",
            "--docs",
            "data/demo/documents.jsonl.gz",
            "--ticker",
            "MA",
            "--ticker",
            "XOM",
            "--ticker",
            "ORCL",
            "--facts",
            "data/demo/facts.jsonl.gz",
            "--cors-origins",
            APP_ORIGIN,
            "--keys",
        ])
        .arg(keys)
        .args(extra);
    let server = listen(cmd);
    let t = Instant::now();
    loop {
        let r = http(&server.addr, "GET", "/health", &[], b"");
        // A first start serves BM25 within seconds (`degraded`); these tests need every path.
        if r.status == 200 && r.body["degraded"] == false {
            break;
        }
        if r.status == 200 {
            std::thread::sleep(Duration::from_millis(500));
            continue;
        }
        assert_eq!(r.status, 503, "health while loading: {:?}", r.body);
        assert_eq!(r.body["error"]["code"], "unavailable");
        assert!(t.elapsed() < Duration::from_secs(900), "index not ready after 15 minutes");
        std::thread::sleep(Duration::from_millis(500));
    }
    server
}

/// A connection to `addr` that gives up reading after 30 s.
fn open_connection(addr: &str) -> TcpStream {
    let s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    s
}

/// What the server sends on `s` before it closes it, and how long that took.
fn until_closed(mut s: TcpStream) -> (Duration, String) {
    let t = Instant::now();
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    (t.elapsed(), String::from_utf8_lossy(&out).to_string())
}

/// Slow and idle clients are cut off: a partial head and an idle connection are closed
/// after `--header-timeout-secs`, and a partial body gets a 408 in the envelope after
/// `--body-timeout-secs`.
#[test]
fn slow_and_idle_clients_are_cut_off() {
    let dir = tempfile::tempdir().unwrap();
    let limits = ["--header-timeout-secs", "2", "--body-timeout-secs", "2"];
    let server = start_with(&key_store(dir.path()), &limits);
    let a = server.addr.as_str();
    let open = || open_connection(a);
    let mut partial_head = open();
    partial_head.write_all(b"POST /v1/retrieve HTTP/1.1\r\nHost: t\r\nContent-Ty").unwrap();
    let (took, _) = until_closed(partial_head);
    assert!(took < Duration::from_secs(20), "a partial head was held {took:?}");
    let (took, _) = until_closed(open());
    assert!(took < Duration::from_secs(20), "an idle connection was held {took:?}");
    let mut partial_body = open();
    let head = format!(
        "POST /v1/retrieve HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer {PRO}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{{\"query\""
    );
    partial_body.write_all(head.as_bytes()).unwrap();
    let (_, answer) = until_closed(partial_body);
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(answer.contains("\"code\":\"request_timeout\""), "{answer}");
}

/// Open connections are capped: with `--max-connections 4` and four connections held open
/// mid-request, a fifth gets a 503 with `Retry-After` in the envelope at once, not a
/// connection held until the header timeout (60 s here, so that the four are still open
/// however slowly a loaded machine runs the test).
#[test]
fn a_connection_over_the_cap_gets_a_503_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let limits = ["--header-timeout-secs", "60", "--max-connections", "4"];
    let server = start_with(&key_store(dir.path()), &limits);
    let a = server.addr.as_str();
    // The server accepts in the order the connections were made, so the four take the four
    // places before the fifth is accepted.
    let held: Vec<TcpStream> = (0..4)
        .map(|_| {
            let mut s = open_connection(a);
            s.write_all(b"GET /health HTTP/1.1\r\nHost: t\r\n").unwrap();
            s
        })
        .collect();
    let (took, answer) = until_closed(open_connection(a));
    assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
    assert!(answer.contains("\"code\":\"unavailable\"") && answer.contains("Retry-After: 1"), "{answer}");
    assert!(took < Duration::from_secs(20), "refused at once, not held until the header timeout: {took:?}");
    drop(held);
    // The places are given back when the four close: a request is served again.
    let t = Instant::now();
    while try_http(a, "GET", "/health", &[], b"").is_none_or(|r| r.status != 200) {
        assert!(t.elapsed() < Duration::from_secs(30), "no place was given back");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Operators can see: with `--log-format json`, every request writes one access line (a
/// JSON object: method, path, status, latency, key prefix, index, result count) carrying
/// the request's id, the id the response returns in `x-request-id`; and every response
/// says where its time went in `Server-Timing` (and `meta.timings`).
#[test]
fn every_request_writes_one_json_access_line_and_a_server_timing_header() {
    let dir = tempfile::tempdir().unwrap();
    let log_path = dir.path().join("serve.log");
    let log = std::fs::File::create(&log_path).unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_sextant"));
    cmd.current_dir(repo())
        .args(["--log-format", "json", "serve", "--addr", "127.0.0.1:0", "--docs", "data/demo/documents.jsonl.gz"])
        .args(["--ticker", "MA", "--ticker", "XOM", "--ticker", "ORCL", "--facts", "data/demo/facts.jsonl.gz"])
        .arg("--keys")
        .arg(key_store(dir.path()))
        .env_remove("SEXTANT_LOG")
        .stderr(log);
    let server = listen(cmd);
    let a = server.addr.as_str();
    let t = Instant::now();
    while http(a, "GET", "/health", &[], b"").body["degraded"] != false {
        assert!(t.elapsed() < Duration::from_secs(900));
        std::thread::sleep(Duration::from_millis(500));
    }
    let ok = post(a, "/v1/retrieve", Some(PRO), &json!({"query": "share repurchases", "top_k": 3}));
    assert_eq!(ok.status, 200);
    let timing = ok.header("server-timing").expect("Server-Timing").to_string();
    for stage in ["encode;dur=", "dense;dur=", "bm25;dur=", "splade;dur=", "fuse;dur=", "total;dur="] {
        assert!(timing.contains(stage), "{timing}");
    }
    let timings = &ok.body["meta"]["timings"];
    for stage in ["encode", "dense", "bm25", "splade", "fuse", "rerank", "search"] {
        assert!(timings[stage].is_number(), "meta.timings.{stage}: {timings}");
    }
    let bad = post(a, "/v1/retrieve", Some(PRO), &json!({"query": ""}));
    assert_eq!(bad.status, 400);
    drop(server);
    let lines: Vec<Value> = std::fs::read_to_string(&log_path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not a JSON log line ({e}): {l}")))
        .collect();
    let access = |id: &str| -> Value {
        let found: Vec<&Value> = lines.iter().filter(|l| l["target"] == "access" && l["span"]["id"] == id).collect();
        assert_eq!(found.len(), 1, "one access line for {id}: {lines:?}");
        found[0].clone()
    };
    let line = access(ok.header("x-request-id").unwrap());
    assert_eq!(
        (line["method"].as_str(), line["path"].as_str(), line["status"].as_u64()),
        (Some("POST"), Some("/v1/retrieve"), Some(200))
    );
    assert_eq!(
        (line["key_prefix"].as_str(), line["index"].as_str(), line["results"].as_i64()),
        (Some(&PRO[..7]), Some("demo"), Some(3))
    );
    assert!(line["latency_ms"].as_f64().unwrap() > 0.0);
    let line = access(bad.header("x-request-id").unwrap());
    assert_eq!((line["status"].as_u64(), line["results"].as_i64()), (Some(400), Some(-1)));
}

/// Beyond `--max-in-flight` requests at once, a search endpoint answers 503 with
/// `Retry-After` in the error envelope at once, and the requests within the bound are served.
#[test]
fn requests_beyond_the_in_flight_bound_are_shed_with_retry_after() {
    let dir = tempfile::tempdir().unwrap();
    let server = start_with(&key_store(dir.path()), &["--max-in-flight", "1"]);
    let a = server.addr.clone();
    let answers: Vec<Resp> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..16)
            .map(|i| {
                let a = a.as_str();
                s.spawn(move || {
                    let q = format!("capital expenditure and free cash flow outlook {i}");
                    post(a, "/v1/retrieve", Some(ENTERPRISE), &json!({"query": q, "top_k": 10}))
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let shed: Vec<&Resp> = answers.iter().filter(|r| r.status == 503).collect();
    assert!(
        !shed.is_empty(),
        "16 at once against a bound of 1: {:?}",
        answers.iter().map(|r| r.status).collect::<Vec<_>>()
    );
    assert!(answers.iter().any(|r| r.status == 200), "the bound still serves");
    assert!(answers.iter().all(|r| r.status == 200 || r.status == 503));
    for r in shed {
        assert_eq!(r.header("retry-after"), Some("1"));
        assert_eq!(r.body["error"]["code"], "unavailable");
        assert!(r.body["error"]["message"].as_str().unwrap().contains("at capacity"), "{:?}", r.body);
    }
    // /health is never shed.
    assert_eq!(http(&a, "GET", "/health", &[], b"").status, 200);
}

/// The venv's python with the official SDKs (`scripts/ci/sdk_venv.sh`, run by `scripts/ci/test.sh`).
fn sdk_python() -> String {
    let python = std::env::var("SEXTANT_SDK_PYTHON").unwrap_or_else(|_| {
        let cache = std::env::var("SEXTANT_CACHE_DIR")
            .unwrap_or_else(|_| format!("{}/.cache/sextant", std::env::var("HOME").unwrap()));
        format!("{cache}/venv-sdk/bin/python")
    });
    assert!(
        Path::new(&python).is_file(),
        "no SDK venv at {python}: run scripts/ci/sdk_venv.sh (scripts/ci/test.sh does)"
    );
    python
}

/// Runs `script` (under `scripts/ci/`) with the SDK venv's python, `input` on its stdin, and
/// returns what it prints, as JSON.
fn run_sdk_script(script: &str, input: &Value) -> Value {
    let mut child = Command::new(sdk_python())
        .arg(repo().join("scripts/ci").join(script))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(input.to_string().as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{script} failed");
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{script} printed no JSON ({e})"))
}

/// `serve --rerank-service cohere|bedrock` reranks through the hosted service: the local
/// protocol server scores with the stand-in cross-encoder, and each result's rerank score is
/// the stand-in's on that passage. A slow, failing or throttled service costs at most the
/// timeout, and the answer is the fused order with `meta.rerank.status: "failed"`.
#[test]
fn a_hosted_reranker_reranks_and_its_failures_keep_the_fused_order() {
    use sextant_rerank::protocol_server::{Fault, ProtocolServer};
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let standin = std::sync::Arc::new(sextant_core::pipeline::CrossEncoderReranker::new(
        sextant_core::encode::CrossEncoder::load(&sextant_core::encode::default_model_dir().join("ce-standin"))
            .unwrap(),
        "ce-standin",
    ));
    let scorer: std::sync::Arc<dyn sextant_core::pipeline::Reranker> = standin.clone();
    let service =
        rt.block_on(ProtocolServer::start("127.0.0.1:0".parse().unwrap(), scorer, Some("co-test-key".into()))).unwrap();
    // The protocol server answers Cohere's own SDK as the service does: Sextant's client is
    // tested against what Cohere's client accepts.
    let documents = ["Cross-border volume grew 24% on travel.", "The weather was mild.", "Cross-border fees rose."];
    let ask = |key: &str| {
        json!({"base_url": service.url(), "api_key": key, "model": "rerank-v3.5",
               "query": "cross-border growth", "documents": documents, "top_n": 2})
    };
    let answer = run_sdk_script("cohere_rerank.py", &ask("co-test-key"));
    let candidates: Vec<sextant_core::pipeline::Candidate<'_>> = documents
        .iter()
        .enumerate()
        .map(|(i, text)| sextant_core::pipeline::Candidate { chunk: i as u32, text, fused_score: 0.0 })
        .collect();
    let want = sextant_core::pipeline::Reranker::rerank(&*standin, "cross-border growth", &candidates).unwrap();
    let got = answer["results"].as_array().unwrap_or_else(|| panic!("{answer}"));
    assert_eq!(got.len(), 2, "top_n");
    for (g, w) in got.iter().zip(&want) {
        assert_eq!(g["index"], w.chunk);
        assert!((g["relevance_score"].as_f64().unwrap() - f64::from(w.score)).abs() < 1e-5);
    }
    assert_eq!(service.last_model().as_deref(), Some("rerank-v3.5"));
    assert_eq!(run_sdk_script("cohere_rerank.py", &ask("wrong"))["error"]["status"], 401);

    let dir = tempfile::tempdir().unwrap();
    let keys = key_store(dir.path());
    let query = "How did cross-border volumes grow?";
    let search = |a: &str, rerank: bool| {
        let r =
            post(a, "/v1/search", Some(PRO), &json!({"query": query, "entity": ["MA"], "limit": 6, "rerank": rerank}));
        assert_eq!(r.status, 200, "{:?}", r.body);
        r
    };
    let units = |r: &Resp| -> Vec<String> {
        r.body["results"]
            .as_array()
            .unwrap()
            .iter()
            .map(|u| u["position"]["chunk_text"].as_str().unwrap().to_string())
            .collect()
    };
    // Each service is asked through two servers. A patient one (a timeout far past what the
    // stand-in needs to score /v1/search's fused top 150, which takes a few seconds on 2 cores
    // beside the server and more than 10 on a loaded CI machine) checks the scores; a quick one
    // (2 s) checks that every failure, the slow one included, costs at most its timeout.
    let patient = ["--rerank-timeout-ms", "60000"];
    let quick = ["--rerank-timeout-ms", "2000"];
    let start_service = |name: &str, timeout: &[&str]| match name {
        "cohere" => start_with_env(
            &keys,
            &[&["--rerank-service", "cohere", "--rerank-endpoint", &service.url()][..], timeout].concat(),
            &[("CO_API_KEY", "co-test-key")],
        ),
        _ => start_with_env(
            &keys,
            &[&["--rerank-service", "bedrock", "--rerank-endpoint", &service.url()][..], timeout].concat(),
            &[("AWS_REGION", "eu-west-1"), ("AWS_ACCESS_KEY_ID", "AKIDTEST"), ("AWS_SECRET_ACCESS_KEY", "secret")],
        ),
    };
    for (name, model) in
        [("cohere", "rerank-v3.5"), ("bedrock", "arn:aws:bedrock:eu-west-1::foundation-model/amazon.rerank-v1:0")]
    {
        let server = start_service(name, &patient);
        let a = server.addr.as_str();
        service.set_fault(Fault::None);
        let calls = service.calls();
        let r = search(a, true);
        assert_eq!(r.body["meta"]["rerank"]["status"], "applied", "{name}: {:?}", r.body["meta"]);
        assert_eq!(service.calls(), calls + 1, "{name}: one call per search");
        assert_eq!(service.last_model().as_deref(), Some(model));
        let mut last = f64::INFINITY;
        for u in r.body["results"].as_array().unwrap() {
            let got = u["diagnostics"]["rerank_score"].as_f64().unwrap();
            let want = standin.score(query, &[u["position"]["chunk_text"].as_str().unwrap()]).unwrap()[0];
            assert!((got - f64::from(want)).abs() < 1e-3, "{name}: the service's score {got}, the stand-in's {want}");
            assert!(got <= last + 1e-6, "{name}: best first");
            last = got;
        }
        drop(server);
        let server = start_service(name, &quick);
        let a = server.addr.as_str();
        let fused = units(&search(a, false));
        for fault in [Fault::Slow(Duration::from_secs(30)), Fault::Status(503), Fault::Status(429), Fault::Garbage] {
            service.set_fault(fault);
            let t = Instant::now();
            let r = search(a, true);
            let took = t.elapsed();
            let meta = &r.body["meta"]["rerank"];
            assert_eq!(meta["status"], "failed", "{name} {fault:?}: {meta:?}");
            assert_eq!(units(&r), fused, "{name} {fault:?}: the fused order is served");
            assert!(took < Duration::from_secs(12), "{name} {fault:?}: {took:?} (timeout 2 s)");
        }
    }
    // Without the key, Cohere's protocol says 401, and the search still answers.
    let no_key =
        start_with(&keys, &[&["--rerank-service", "cohere", "--rerank-endpoint", &service.url()][..], &quick].concat());
    service.set_fault(Fault::None);
    let r = search(&no_key.addr, true);
    assert_eq!(r.body["meta"]["rerank"]["status"], "failed");
    assert!(r.body["meta"]["rerank"].to_string().contains("401"), "{:?}", r.body["meta"]["rerank"]);
}

/// `sextant serve` on one company of the demo corpus with an empty cache and no models:
/// it fetches the models itself, answers from BM25 within seconds of having them, says so,
/// then swaps in every path and keeps the index for the next start.
#[test]
fn a_first_start_answers_from_bm25_at_once_then_from_every_path() {
    let cache = tempfile::tempdir().unwrap();
    // The downloaded wheels and the conversion venv are shared with the usual cache (no
    // download twice); the models and the indexes start empty.
    let shared_cache = std::env::var_os("SEXTANT_CACHE_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").unwrap()).join(".cache/sextant"));
    for dir in ["wheels", "venv-convert"] {
        if shared_cache.join(dir).is_dir() {
            std::os::unix::fs::symlink(shared_cache.join(dir), cache.path().join(dir)).unwrap();
        }
    }
    let models = cache.path().join("models");
    let key = "sx_first_start_key";
    let start = || {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_sextant"));
        cmd.current_dir(repo())
            .args(["serve", "--addr", "127.0.0.1:0", "--ticker", "MA", "--dev-key", key, "--dev-plan", "pro"])
            .env("SEXTANT_CACHE_DIR", cache.path())
            .env_remove("SEXTANT_MODEL_DIR")
            .env_remove("SEXTANT_ORT_LIB");
        listen(cmd)
    };
    let wait_for = |server: &Server, what: &str, done: &dyn Fn(&Resp) -> bool, limit: Duration| -> Resp {
        let t = Instant::now();
        loop {
            let r = http(&server.addr, "GET", "/health", &[], b"");
            if done(&r) {
                return r;
            }
            assert!(t.elapsed() < limit, "{what} not within {limit:?}: {:?}", r.body);
            std::thread::sleep(Duration::from_millis(200));
        }
    };
    let retrieve = |server: &Server, rerank: bool| {
        let body = json!({"query": "What drove net revenue growth?", "rerank": rerank});
        post(&server.addr, "/v1/retrieve", Some(key), &body)
    };

    let server = start();
    let t = Instant::now();
    // Converting the models takes most of this (`scripts/bench/first_answer.py` times the demo).
    let health = wait_for(&server, "a first answer", &|r| r.status == 200, Duration::from_secs(300));
    let first_answer = t.elapsed();
    for m in ["minilm-l6-v2", "splade-tiny"] {
        assert!(models.join(m).join("model.json").is_file(), "serve fetched {m} into {}", models.display());
    }
    assert!(models.join("onnxruntime/libonnxruntime.so").is_file());
    assert_eq!(health.body["degraded"], true, "{:?}", health.body);
    assert_eq!(health.body["paths"]["demo"], json!({"bm25": "ready", "dense": "building", "splade": "building"}));
    let r = retrieve(&server, true);
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(r.body["meta"]["degraded"], true);
    assert_eq!(r.body["meta"]["pathsServed"], json!(["bm25"]));
    assert!(!r.body["chunks"].as_array().unwrap().is_empty(), "BM25 finds passages: {:?}", r.body);
    // A request for the dense path alone cannot be served yet: 503, retry later.
    let dense_only = retrieve(&server, false);
    assert_eq!(dense_only.status, 503, "{:?}", dense_only.body);
    assert_eq!(dense_only.body["error"]["code"], "unavailable");
    assert!(dense_only.body["error"]["message"].as_str().unwrap().contains("dense"), "{:?}", dense_only.body);
    assert!(dense_only.headers.iter().any(|(k, _)| k == "retry-after"), "{:?}", dense_only.headers);
    eprintln!("first answer after {first_answer:?}");

    let health = wait_for(&server, "every path", &|r| r.body["degraded"] == false, Duration::from_secs(900));
    assert_eq!(health.body["paths"]["demo"], json!({"bm25": "ready", "dense": "ready", "splade": "ready"}));
    let r = retrieve(&server, true);
    assert_eq!(r.body["meta"]["degraded"], false, "{:?}", r.body);
    assert_eq!(r.body["meta"]["pathsServed"], json!(["dense", "bm25", "splade"]));
    assert_eq!(retrieve(&server, false).status, 200);
    drop(server);

    // The next start reuses the cached index: every path from the first answer.
    let server = start();
    let health = wait_for(&server, "a cached start", &|r| r.status == 200, Duration::from_secs(60));
    assert_eq!(health.body["degraded"], false, "{:?}", health.body);
}

fn corpus() -> Vec<Document> {
    load_documents(&repo().join("data/demo/documents.jsonl.gz")).unwrap()
}

fn doc_text(docs: &[Document], id: &str) -> Vec<char> {
    docs.iter().find(|d| d.document_id == id).unwrap_or_else(|| panic!("document {id}")).text().chars().collect()
}

/// `sextant serve --index` on a directory: returned once `/health` answers 200.
fn serve_index(dir: &Path, key: &str, extra: &[&str]) -> Server {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_sextant"));
    cmd.current_dir(repo()).args(["serve", "--addr", "127.0.0.1:0", "--dev-key", key, "--dev-plan", "pro", "--index"]);
    cmd.arg(dir).args(extra);
    let server = listen(cmd);
    let t = Instant::now();
    while try_http(&server.addr, "GET", "/health", &[], b"").is_none_or(|r| r.status != 200) {
        assert!(t.elapsed() < Duration::from_secs(300), "{} not served within 5 minutes", dir.display());
        std::thread::sleep(Duration::from_millis(200));
    }
    server
}

/// Apple's first 30 filing sections of the demo corpus as one index and as 3 shards
/// ([`support::cli::apple_single_and_sharded`]), built once per test process.
fn apple_single_and_sharded() -> &'static (PathBuf, PathBuf) {
    static BUILT: std::sync::OnceLock<(PathBuf, PathBuf)> = std::sync::OnceLock::new();
    BUILT.get_or_init(|| {
        // Kept for the whole test process.
        let tmp = Box::leak(Box::new(tempfile::tempdir().unwrap())).path();
        support::cli::apple_single_and_sharded(tmp)
    })
}

#[test]
fn a_sharded_index_is_served_as_the_single_index_it_was_split_from() {
    let (single, sharded) = apple_single_and_sharded();
    let key = "sx_shards_key";
    let extra = ["--id", "apple"];
    let (one, three) = (serve_index(single, key, &extra), serve_index(sharded, key, &extra));
    let ask = |server: &Server, path: &str, body: &Value| {
        let r = post(&server.addr, path, Some(key), body);
        assert_eq!(r.status, 200, "{path} {body}: {}", r.body);
        r.body
    };
    let requests = support::cli::apple_requests();
    for (path, body) in &requests {
        let (a, b) = (ask(&one, path, body), ask(&three, path, body));
        let results = if *path == "/v1/retrieve" { "chunks" } else { "results" };
        assert!(!a[results].as_array().unwrap().is_empty(), "{path} {body}");
        assert_eq!(a[results], b[results], "{path} {body}: the same results, scores and citations");
        assert_eq!(b["meta"]["shards"], json!({"answered": 3, "of": 3}), "{path} {body}");
        assert_eq!(b["meta"]["degraded"], json!(false), "{path} {body}");
        assert!(a["meta"].get("shards").is_none(), "a single index says nothing of shards");
    }
    // The router holds no text: each result's text and whole segments came from its shard.
    let with_segments = ask(&three, "/v1/retrieve", &requests[1].1);
    for c in with_segments["chunks"].as_array().unwrap() {
        let segments = c["source"]["segments"].as_array().unwrap();
        assert!(!c["text"].as_str().unwrap().is_empty() && !segments.is_empty(), "{c}");
        assert!(segments.iter().all(|s| !s["content"].as_str().unwrap().is_empty()), "{c}");
    }
    let filtered = ask(&three, "/v1/search", &requests[4].1);
    for r in filtered["results"].as_array().unwrap() {
        assert!(r["document"]["title"].as_str().unwrap().starts_with("Apple Inc. 10-K"), "{r}");
    }
    // The knowledge-base API with its metadata filter, and /v1/context's passages.
    let kb = json!({"IndexId": "apple", "Query": "net sales by product", "SearchFilters": [{"year": 2024}]});
    let (a, b) = (ask(&one, "/ws/index/retrieve", &kb), ask(&three, "/ws/index/retrieve", &kb));
    assert!(!a["Data"]["Nodes"].as_array().unwrap().is_empty(), "{a}");
    assert_eq!(a["Data"]["Nodes"], b["Data"]["Nodes"]);
    let question = json!({"question": "What did Apple say about competition in its risk factors?"});
    let (a, b) = (ask(&one, "/v1/context", &question), ask(&three, "/v1/context", &question));
    assert!(!a["result"]["passages"].as_array().unwrap().is_empty(), "{a}");
    assert_eq!(a["result"]["passages"], b["result"]["passages"]);
    // What the index holds, as a key sees it.
    let info = |server: &Server| {
        let r = http(&server.addr, "GET", "/v1/indexes/apple", &[("Authorization", &format!("Bearer {key}"))], b"");
        assert_eq!(r.status, 200, "{}", r.body);
        (r.body["documents"].clone(), r.body["chunks"].clone())
    };
    assert_eq!(info(&one), info(&three));
}

/// Writes to a sharded index through the document API: each document is searchable when
/// its answer comes, and the sharded index answers as the single index given the same
/// writes does (results, scores, citations), after a restart and after a compaction into
/// a new sharded version that encodes nothing.
#[test]
fn a_sharded_index_takes_writes_and_answers_as_the_single_index_given_the_same_writes() {
    let (single, sharded) = apple_single_and_sharded();
    let key = "sx_shard_writes_key";
    // The writes live in a directory of their own, not beside the shared indexes.
    let data = tempfile::tempdir().unwrap();
    let serve = |dir: &Path, name: &str| {
        let data = data.path().join(name);
        serve_index(dir, key, &["--id", "apple", "--data-dir", data.to_str().unwrap()])
    };
    let auth = format!("Bearer {key}");
    let call = |server: &Server, method: &str, path: &str, body: Option<Value>| {
        let mut h = vec![("Authorization", auth.as_str())];
        if body.is_some() {
            h.push(("Content-Type", "application/json"));
        }
        let bytes = body.map(|b| b.to_string()).unwrap_or_default();
        http(&server.addr, method, path, &h, bytes.as_bytes())
    };
    let ask = |server: &Server, path: &str, body: &Value| {
        let r = call(server, "POST", path, Some(body.clone()));
        assert_eq!(r.status, 200, "{path} {body}: {}", r.body);
        r.body
    };
    let mut requests = support::cli::apple_requests();
    requests.push(("/v1/search", json!({"index": "apple", "query": "Vision Pro headset shipments", "limit": 10})));
    requests.push(("/v1/retrieve", json!({"index": "apple", "query": "services revenue App Store", "top_k": 8})));
    let same = |one: &Server, three: &Server, when: &str| {
        for (path, body) in &requests {
            let (a, b) = (ask(one, path, body), ask(three, path, body));
            let results = if *path == "/v1/retrieve" { "chunks" } else { "results" };
            assert!(!a[results].as_array().unwrap().is_empty(), "{when}: {path} {body}");
            assert_eq!(a[results], b[results], "{when}: {path} {body}: the same results, scores and citations");
            assert_eq!(b["meta"]["shards"], json!({"answered": 3, "of": 3}), "{when}: {path} {body}");
        }
    };
    let (one, three) = (serve(single, "one"), serve(sharded, "three"));
    // Two built sections: one to replace, one to delete.
    let built = ask(&one, "/v1/search", &requests[3].1);
    let ids: Vec<String> = built["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["document"]["document_id"].as_str().unwrap().into())
        .collect();
    let (replaced, deleted) = (&ids[0], &ids[1]);
    let batch = json!([
        {"documentId": "notes/vision-pro.md", "title": "Vision Pro notes", "contentType": "text/markdown",
         "text": "# Vision Pro\n\nHeadset shipments grew in the quarter as enterprise buyers ordered units."},
        {"documentId": "notes/services.txt", "title": "Services notes",
         "text": "Services revenue set a record on the App Store, advertising and cloud subscriptions."},
        {"documentId": replaced, "title": "Share repurchases",
         "text": "The board authorised a further share repurchase program and raised the dividend."},
    ]);
    for server in [&one, &three] {
        let r = call(server, "POST", "/v1/indexes/apple/documents:batch", Some(batch.clone()));
        assert_eq!((r.status, r.body["written"].as_u64()), (200, Some(3)), "{}", r.body);
        let r = call(server, "DELETE", &format!("/v1/indexes/apple/documents/{}", urlencode(deleted)), None);
        assert_eq!((r.status, r.body["deleted"].as_bool()), (200, Some(true)), "{}", r.body);
    }
    let found = ask(&three, "/v1/search", &requests[5].1);
    assert_eq!(found["results"][0]["document"]["document_id"], json!("notes/vision-pro.md"), "{found}");
    let after = ask(&three, "/v1/search", &requests[3].1);
    let after: Vec<&str> =
        after["results"].as_array().unwrap().iter().map(|r| r["document"]["document_id"].as_str().unwrap()).collect();
    assert!(!after.contains(&deleted.as_str()), "a deleted document is never served: {after:?}");
    same(&one, &three, "after the writes");
    drop((one, three));

    let (one, three) = (serve(single, "one"), serve(sharded, "three"));
    same(&one, &three, "after a restart");
    for server in [&one, &three] {
        let r = call(server, "POST", "/v1/indexes/apple/compact", None);
        assert_eq!((r.status, r.body["compacted"].as_bool()), (200, Some(true)), "{}", r.body);
        assert_eq!(r.body["report"]["chunks_encoded"], 0, "every vector reused: {}", r.body);
    }
    assert!(data.path().join("three/apple/v000001/root.json").is_file(), "compacted into shards");
    same(&one, &three, "after a compaction");
}

/// `s` with every byte outside the unreserved set percent-encoded (a document id in a path).
fn urlencode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The shard workers a `sextant serve --shard-workers` (process `server`) started, each
/// worker's pid in shard order.
fn shard_workers(server: u32) -> Vec<u32> {
    let mut found: Vec<(usize, u32)> = Vec::new();
    for task in std::fs::read_dir(format!("/proc/{server}/task")).unwrap() {
        let children = std::fs::read_to_string(task.unwrap().path().join("children")).unwrap_or_default();
        for pid in children.split_whitespace().map(|p| p.parse::<u32>().unwrap()) {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let args: Vec<String> =
                cmdline.split(|&b| b == 0).map(|a| String::from_utf8_lossy(a).into_owned()).collect();
            let shard = args.iter().position(|a| a == "--shard").and_then(|i| args.get(i + 1)?.parse().ok());
            if let (true, Some(shard)) = (args.iter().any(|a| a == "shard-worker"), shard) {
                found.push((shard, pid));
            }
        }
    }
    found.sort();
    found.into_iter().map(|(_, pid)| pid).collect()
}

fn signal(pid: u32, signal: &str) {
    assert!(Command::new("kill").args([&format!("-{signal}"), &pid.to_string()]).status().unwrap().success());
}

/// Whether process `pid` is gone (or a zombie nobody waited for yet).
fn gone(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).map_or(true, |s| s.contains(") Z "))
}

#[test]
fn shard_workers_answer_as_one_index_and_a_shard_that_stops_fails_or_dies_is_left_out() {
    let (single, sharded) = apple_single_and_sharded();
    let key = "sx_workers_key";
    let one = serve_index(single, key, &["--id", "apple"]);
    let with_workers = ["--id", "apple", "--shard-workers", "--shard-deadline-ms", "4000"];
    let three = serve_index(sharded, key, &with_workers);
    let workers = shard_workers(three.child.id());
    assert_eq!(workers.len(), 3, "one worker process per shard");
    let ask = |server: &Server, path: &str, body: &Value| post(&server.addr, path, Some(key), body);
    // Over the shard protocol on loopback, every answer is the single index's.
    let requests = support::cli::apple_requests();
    for (path, body) in &requests {
        let (a, b) = (ask(&one, path, body), ask(&three, path, body));
        assert_eq!((a.status, b.status), (200, 200), "{path} {body}: {} / {}", a.body, b.body);
        let results = if *path == "/v1/retrieve" { "chunks" } else { "results" };
        assert!(!a.body[results].as_array().unwrap().is_empty(), "{path} {body}");
        assert_eq!(a.body[results], b.body[results], "{path} {body}: the same results, scores and citations");
        assert_eq!(b.body["meta"]["shards"], json!({"answered": 3, "of": 3}), "{path} {body}");
    }
    let question = json!({"question": "What did Apple say about competition in its risk factors?"});
    let (a, b) = (ask(&one, "/v1/context", &question), ask(&three, "/v1/context", &question));
    assert_eq!(a.body["result"]["passages"], b.body["result"]["passages"]);
    assert_eq!(
        (&b.body["meta"]["shards"], &b.body["meta"]["degraded"]),
        (&json!({"answered": 3, "of": 3}), &json!(false))
    );
    assert!(a.body["meta"].get("shards").is_none(), "a single index says nothing of shards");

    let (path, body) = &requests[0];
    let left_out = |server: &Server, why: &str| {
        let r = ask(server, path, body);
        assert_eq!(r.status, 200, "{why}: {}", r.body);
        assert_eq!(r.body["meta"]["shards"], json!({"answered": 2, "of": 3}), "{why}");
        assert_eq!(r.body["meta"]["degraded"], json!(true), "{why}");
        assert!(!r.body["chunks"].as_array().unwrap().is_empty(), "{why}: the other shards answer");
    };
    // A stopped worker (alive, never answering) is left out at the deadline, and counts
    // again once it answers.
    signal(workers[1], "STOP");
    left_out(&three, "a stopped shard");
    signal(workers[1], "CONT");
    assert_eq!(ask(&three, path, body).body["meta"]["shards"], json!({"answered": 3, "of": 3}));
    // A killed worker is left out at once (nothing listens on its port any more).
    signal(workers[2], "KILL");
    left_out(&three, "a killed shard");
    // /v1/context's passages come from the shards that answered, and its metadata says so.
    let c = ask(&three, "/v1/context", &question);
    assert_eq!(c.status, 200, "{}", c.body);
    assert!(!c.body["result"]["passages"].as_array().unwrap().is_empty(), "{}", c.body);
    assert_eq!(
        (&c.body["meta"]["shards"], &c.body["meta"]["degraded"]),
        (&json!({"answered": 2, "of": 3}), &json!(true))
    );
    // With no shard left, a 503 in the error envelope.
    signal(workers[0], "KILL");
    signal(workers[1], "KILL");
    let r = ask(&three, path, body);
    assert_eq!(r.status, 503, "{}", r.body);
    assert_eq!(r.body["error"]["code"], json!("unavailable"), "{}", r.body);

    // A worker that answers every request with an error is left out too.
    let failing = serve_index(sharded, key, &[&with_workers[..], &["--shard-fault", "1"]].concat());
    let failing_workers = shard_workers(failing.child.id());
    left_out(&failing, "a failing shard");
    // The workers end with the server that started them.
    drop(failing);
    let t = Instant::now();
    while !failing_workers.iter().all(|&pid| gone(pid)) {
        assert!(t.elapsed() < Duration::from_secs(30), "shard workers outlived their server");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn the_http_api_end_to_end() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(&key_store(dir.path()));
    let a = server.addr.as_str();
    let docs = corpus();

    let health = http(a, "GET", "/health", &[], b"");
    assert_eq!(health.body["indexes"]["demo"].as_u64().map(|n| n > 100), Some(true), "{:?}", health.body);
    context_endpoint(a);

    retrieve_returns_cited_chunks_with_exact_segment_offsets(a, &docs);
    retrieve_filters_and_period_fallback(a);
    retrieve_clamps_top_k_to_the_plan(a);
    retrieve_without_rerank_is_dense_similarity_order(a);
    every_error_status_uses_the_envelope(a);
    search_returns_units_with_offsets_and_diagnostics(a, &docs);
    knowledge_base_retrieve_with_search_filters_and_rewrite(a);
    knowledge_base_through_the_official_sdk(a);
    openapi_document_describes_real_responses(a);
    security_headers_and_cors(a);
    rate_limit_answers_429_with_retry_after(a);
}

/// Every answer, errors included, carries the security headers; CORS answers only the
/// listed origin, and its preflight needs no key.
fn security_headers_and_cors(a: &str) {
    let body = json!({"query": "operating margin", "top_k": 1}).to_string();
    let with_origin = |origin: &str, key: Option<&str>| {
        let auth = key.map(|k| format!("Bearer {k}"));
        let mut h = vec![("Content-Type", "application/json"), ("Origin", origin)];
        if let Some(auth) = &auth {
            h.push(("Authorization", auth.as_str()));
        }
        http(a, "POST", "/v1/retrieve", &h, body.as_bytes())
    };
    let checks = [
        http(a, "GET", "/health", &[], b""),
        with_origin(APP_ORIGIN, Some(FREE)),
        with_origin(APP_ORIGIN, None),
        post(a, "/nope", Some(FREE), &json!({})),
    ];
    for r in &checks {
        assert_eq!(r.header("x-content-type-options"), Some("nosniff"), "status {}", r.status);
        assert_eq!(r.header("cache-control"), Some("no-store"));
        assert_eq!(r.header("x-frame-options"), Some("DENY"));
        assert!(r.header("content-security-policy").is_some_and(|v| v.contains("default-src 'none'")));
        assert!(r.header("strict-transport-security").is_some());
    }
    assert_eq!(checks[0].header("access-control-allow-origin"), None, "no Origin, no CORS headers");
    let ok = &checks[1];
    assert_eq!(ok.status, 200);
    assert_eq!(ok.header("access-control-allow-origin"), Some(APP_ORIGIN));
    assert!(ok
        .header("access-control-expose-headers")
        .is_some_and(|v| v.contains("x-request-id") && v.contains("retry-after")));
    assert!(ok.header("vary").is_some_and(|v| v.to_ascii_lowercase().contains("origin")));
    assert_eq!(checks[2].status, 401);
    assert_eq!(checks[2].header("access-control-allow-origin"), Some(APP_ORIGIN), "the browser may read the error");

    // Another origin: served (non-browser clients are not CORS's business) but never allowed.
    let other = with_origin("https://evil.example.net", Some(FREE));
    assert_eq!(other.status, 200);
    assert_eq!(other.header("access-control-allow-origin"), None);

    let preflight = |origin: &str| {
        http(
            a,
            "OPTIONS",
            "/v1/retrieve",
            &[
                ("Origin", origin),
                ("Access-Control-Request-Method", "POST"),
                ("Access-Control-Request-Headers", "authorization, content-type"),
            ],
            b"",
        )
    };
    let yes = preflight(APP_ORIGIN);
    assert_eq!(yes.status, 204, "{:?}", yes.body);
    assert_eq!(yes.header("access-control-allow-origin"), Some(APP_ORIGIN));
    assert!(yes.header("access-control-allow-methods").is_some_and(|v| v.contains("POST")));
    assert!(yes
        .header("access-control-allow-headers")
        .is_some_and(|v| v.contains("authorization") && v.contains("content-type")));
    let no = preflight("https://evil.example.net");
    assert_eq!(no.status, 403);
    assert_eq!(no.body["error"]["code"], "forbidden");
    assert!(no.body["error"]["message"].as_str().unwrap().contains("https://evil.example.net"));
    assert_eq!(no.header("access-control-allow-origin"), None);
}

fn knowledge_base_retrieve_with_search_filters_and_rewrite(a: &str) {
    let kb = |key: Option<&str>, body: Value| post(a, "/ws_test/index/retrieve", key, &body);
    let r = kb(
        Some(PRO),
        json!({
            "IndexId": "demo",
            "Query": "production and earnings",
            "SearchFilters": [{"ticker": "XOM", "year": {"gte": 2025}}]
        }),
    );
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(
        (r.body["Code"].as_str(), r.body["Status"].as_str(), r.body["Success"].as_bool()),
        (Some("Success"), Some("200"), Some(true))
    );
    assert_eq!(r.body["RequestId"].as_str(), r.header("x-request-id"));
    let nodes = r.body["Data"]["Nodes"].as_array().unwrap();
    assert_eq!(nodes.len(), 5, "RerankTopN defaults to 5");
    for n in nodes {
        assert_eq!(n["Metadata"]["ticker"], "XOM");
        assert!(n["Metadata"]["year"].as_i64().unwrap() >= 2025);
        assert!(!n["Text"].as_str().unwrap().is_empty());
    }
    // Nested: MA anything, or XOM earnings calls.
    let f = json!([{
        "_operator": "OR",
        "ticker": "MA",
        "_conditions": [{"ticker": "XOM", "documentType": "earnings_call"}],
        "_conditions_operator": "AND"
    }]);
    let r =
        kb(Some(PRO), json!({"IndexId": "demo", "Query": "oil and gas prices", "SearchFilters": f, "RerankTopN": 20}));
    assert_eq!(r.status, 200, "{:?}", r.body);
    let nodes = r.body["Data"]["Nodes"].as_array().unwrap();
    assert_eq!(nodes.len(), 20);
    assert!(nodes.iter().any(|n| n["Metadata"]["ticker"] == "XOM"), "the query is about oil: XOM calls qualify");
    for n in nodes {
        let m = &n["Metadata"];
        assert!(m["ticker"] == "MA" || (m["ticker"] == "XOM" && m["documentType"] == "earnings_call"), "{m}");
    }
    // Only the sparse paths, only the dense path.
    for (d, s) in [(0, 50), (50, 0)] {
        let r = kb(
            Some(PRO),
            json!({
                "IndexId": "demo",
                "Query": "share repurchases",
                "DenseSimilarityTopK": d,
                "SparseSimilarityTopK": s
            }),
        );
        assert_eq!(r.status, 200, "{:?}", r.body);
    }
    // Rewrite across turns.
    let history = json!([
        {"Role": "user", "Content": "What was Mastercard's revenue in 2024?"},
        {"Role": "assistant", "Content": "It was ..."},
        {"Role": "user", "Content": "and in 2023?"}
    ]);
    let r = kb(
        Some(PRO),
        json!({"IndexId": "demo", "Query": "what about Exxon Mobil?", "EnableRewrite": true, "History": history}),
    );
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(r.body["Data"]["RewrittenQuery"], "What was Exxon Mobil revenue in 2023?");
    let r = kb(
        Some(PRO),
        json!({
            "IndexId": "demo",
            "Query": "and in 2023?",
            "EnableRewrite": true,
            "History": [{"Role": "user", "Content": "What were Mastercard's main risk factors in 2024?"}]
        }),
    );
    assert_eq!(r.body["Data"]["RewrittenQuery"], "What were Mastercard's main risk factors in 2023?");
    let r = kb(Some(PRO), json!({"IndexId": "demo", "Query": "and in 2023?"}));
    assert!(r.body["Data"].get("RewrittenQuery").is_none(), "no rewrite unless enabled");
    // Errors in this API's envelope.
    let check = |r: Resp, status: u16, code: &str, mentions: &str| {
        assert_eq!(r.status, status, "{:?}", r.body);
        assert_eq!((r.body["Code"].as_str(), r.body["Success"].as_bool()), (Some(code), Some(false)), "{:?}", r.body);
        assert_eq!(r.body["Status"].as_str(), Some(status.to_string().as_str()));
        assert!(r.body["Message"].as_str().unwrap().contains(mentions), "{:?}", r.body);
        assert_eq!(r.body["RequestId"].as_str(), r.header("x-request-id"));
    };
    check(
        kb(Some(PRO), json!({"IndexId": "demo", "Query": "x", "SearchFilters": [{"year": {"between": 1}}]})),
        400,
        "Index.InvalidParameter",
        "SearchFilters[0].year.between",
    );
    check(
        kb(
            Some(PRO),
            json!({"IndexId": "demo", "Query": "x", "SearchFilters": [{"_conditions": [{"colour": "red"}]}]}),
        ),
        400,
        "Index.InvalidParameter",
        "SearchFilters[0]._conditions[0].colour",
    );
    // A model choice given by position inside its list: refused, not matched.
    check(
        kb(Some(PRO), json!({"IndexId": "demo", "Query": "x", "Rerank": [["gte-rerank-v2"]]})),
        400,
        "Index.InvalidParameter",
        "Rerank[0]",
    );
    check(
        kb(Some(PRO), json!({"IndexId": "demo", "Query": "x", "RerankTopN": 25})),
        400,
        "Index.InvalidParameter",
        "RerankTopN",
    );
    check(
        kb(Some(PRO), json!({"IndexId": "demo", "Query": "x", "RerankMinScore": 2.0})),
        400,
        "Index.InvalidParameter",
        "RerankMinScore",
    );
    check(
        kb(Some(PRO), json!({"IndexId": "demo", "Query": "x", "DenseSimilarityTopK": 0, "SparseSimilarityTopK": 0})),
        400,
        "Index.InvalidParameter",
        "DenseSimilarityTopK",
    );
    check(
        kb(Some(PRO), json!({"IndexId": "demo", "Query": "x", "DenseSimilarityTopK": 101})),
        400,
        "Index.InvalidParameter",
        "DenseSimilarityTopK",
    );
    check(kb(Some(PRO), json!({"Query": "x"})), 400, "Index.InvalidParameter", "IndexId");
    check(kb(Some(PRO), json!({"IndexId": "demo"})), 400, "Index.InvalidParameter", "Query");
    check(kb(Some(PRO), json!({"IndexId": "nope", "Query": "x"})), 404, "Index.NotFound", "nope");
    // An unknown id is echoed cut short, and only indexes the key may read are named.
    let long = kb(Some(PRO), json!({"IndexId": "z".repeat(10_000), "Query": "x"}));
    assert_eq!(long.status, 404);
    assert!(long.body["Message"].as_str().unwrap().len() < 300, "{:?}", long.body);
    let scoped = kb(Some(SCOPED), json!({"IndexId": "another-index", "Query": "x"}));
    assert_eq!(scoped.status, 404, "{:?}", scoped.body);
    assert!(!scoped.body["Message"].as_str().unwrap().contains("demo"), "{:?}", scoped.body);
    check(kb(None, json!({"IndexId": "demo", "Query": "x"})), 401, "Index.Unauthorized", "API key");
    check(kb(Some(SCOPED), json!({"IndexId": "demo", "Query": "x"})), 403, "Index.AccessDenied", "demo");
}

/// The official Alibaba Cloud Model Studio SDK (`alibabacloud-bailian20231229`, unmodified,
/// in the venv of `scripts/ci/sdk_venv.sh`) calls Retrieve with every parameter of the
/// operation. It sends them in the query string, with an empty body, no Content-Type and its
/// own signature in `Authorization`; the key travels in `X-API-Key`.
fn knowledge_base_through_the_official_sdk(a: &str) {
    let python = sdk_python();
    let calls = json!([
        // 0: the least a client sends.
        {"IndexId": "demo", "Query": "share repurchases"},
        // 1: every parameter of the operation.
        {
            "IndexId": "demo", "Query": "what about Exxon Mobil?",
            "DenseSimilarityTopK": 50, "SparseSimilarityTopK": 40,
            "EnableReranking": true, "EnableRewrite": true,
            "QueryHistory": [
                {"role": "user", "content": "What was Mastercard's revenue in 2024?"},
                {"role": "assistant", "content": "It was ..."}
            ],
            "Rerank": [{"ModelName": "gte-rerank-hybrid", "RerankMode": "hybrid", "RerankInstruct": "filings first"}],
            "RerankMinScore": 0.2, "RerankTopN": 3,
            "Rewrite": [{"ModelName": "conv-rewrite-qwen-1.8b"}],
            "SaveRetrieverHistory": false,
            "SearchFilters": [{"ticker": "XOM", "year": {"gte": 2024}}],
            "Extra": {"uniqueId": "call-1"}
        },
        // 2: booleans false, the dense path off.
        {"IndexId": "demo", "Query": "oil and gas prices", "EnableReranking": false, "DenseSimilarityTopK": 0,
         "SparseSimilarityTopK": 20, "RerankTopN": 20},
        // 3-7: errors, with the codes of the JSON encoding.
        {"Query": "x"},
        {"IndexId": "nope", "Query": "x"},
        {"IndexId": "demo", "Query": "x", "RerankTopN": 25},
        {"IndexId": "demo", "Query": "x", "SearchFilters": [{"year": {"between": 1}}]},
        {"IndexId": "demo", "Query": "x", "Images": ["https://example.com/chart.png"]}
    ]);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("calls.json");
    std::fs::write(&file, calls.to_string()).unwrap();
    let out = Command::new(&python)
        .arg(repo().join("scripts/ci/sdk_retrieve.py"))
        .args(["--endpoint", a, "--key", PRO, "--workspace", "ws_sdk"])
        .arg(&file)
        .output()
        .expect("run the SDK");
    assert!(out.status.success(), "sdk_retrieve.py failed:\n{}", String::from_utf8_lossy(&out.stderr));
    let lines: Vec<Value> =
        String::from_utf8(out.stdout).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines.len(), 8);
    let nodes = |i: usize| -> Vec<Value> {
        assert_eq!(lines[i]["ok"], true, "call {i}: {}", lines[i]);
        assert_eq!(lines[i]["body"]["Code"], "Success");
        lines[i]["body"]["Data"]["Nodes"].as_array().unwrap().clone()
    };
    // The same request as a JSON body gives the same nodes.
    let texts = |n: &[Value]| n.iter().map(|x| x["Text"].as_str().unwrap().to_string()).collect::<Vec<_>>();
    let body = post(a, "/ws_sdk/index/retrieve", Some(PRO), &json!({"IndexId": "demo", "Query": "share repurchases"}));
    assert_eq!(texts(&nodes(0)), texts(body.body["Data"]["Nodes"].as_array().unwrap()));
    assert_eq!(nodes(0).len(), 5);
    // Score is a relevance in [0, 1] that never rises down the list, as the API documents
    // it (RerankMinScore 0.01-1.00): for every call that answered, fused or reranked, with
    // the dense path or without it.
    for i in 0..3 {
        let scores: Vec<f64> = nodes(i).iter().map(|n| n["Score"].as_f64().unwrap()).collect();
        assert!(scores.iter().all(|s| (0.0..=1.0).contains(s)), "call {i}: {scores:?}");
        assert!(scores.windows(2).all(|w| w[0] >= w[1]), "call {i}: {scores:?}");
    }
    // A document's nodes score their own evidence: of the 20 fused nodes, those of one
    // filing do not all carry one score, and a filing's best node leads its others.
    let mut by_doc: std::collections::HashMap<String, Vec<f64>> = Default::default();
    for n in nodes(2) {
        let doc = n["Metadata"]["doc_id"].as_str().expect("doc_id").to_string();
        by_doc.entry(doc).or_default().push(n["Score"].as_f64().unwrap());
    }
    let shared: Vec<&Vec<f64>> = by_doc.values().filter(|s| s.len() > 1).collect();
    assert!(!shared.is_empty(), "no filing gave two nodes: {by_doc:?}");
    for scores in shared {
        assert!(scores[1..].iter().all(|s| *s < scores[0]), "a filing's nodes tie with its lead: {by_doc:?}");
    }
    // Every parameter took effect: the filter, the top N, the rewrite from QueryHistory
    // (Exxon's revenue, not "what about"), and RerankMinScore said it was not applied.
    let all = nodes(1);
    assert_eq!(all.len(), 3);
    assert!(all.iter().all(|n| n["Metadata"]["ticker"] == "XOM" && n["Metadata"]["year"].as_i64() >= Some(2024)));
    let json_twin = post(
        a,
        "/ws_sdk/index/retrieve",
        Some(PRO),
        &json!({"IndexId": "demo", "Query": "what about Exxon Mobil?", "EnableRewrite": true,
                "History": [{"Role": "user", "Content": "What was Mastercard's revenue in 2024?"}],
                "SearchFilters": [{"ticker": "XOM", "year": {"gte": 2024}}], "RerankTopN": 3,
                "DenseSimilarityTopK": 50, "SparseSimilarityTopK": 40}),
    );
    assert_eq!(json_twin.body["Data"]["RewrittenQuery"], "What was Exxon Mobil revenue in 2024?");
    assert_eq!(
        texts(&all),
        texts(json_twin.body["Data"]["Nodes"].as_array().unwrap()),
        "QueryHistory rewrites as History"
    );
    let message = lines[1]["body"]["Message"].as_str().unwrap();
    assert!(message.contains("RerankMinScore was not applied") && message.contains("no reranker"), "{message}");
    assert_eq!(nodes(2).len(), 20);
    let error = |i: usize, status: u64, code: &str, mentions: &str| {
        let l = &lines[i];
        assert_eq!(
            (l["ok"].as_bool(), l["statusCode"].as_u64(), l["code"].as_str()),
            (Some(false), Some(status), Some(code)),
            "call {i}: {l}"
        );
        assert!(l["message"].as_str().unwrap().contains(mentions), "call {i}: {l}");
    };
    error(3, 400, "Index.InvalidParameter", "IndexId");
    error(4, 404, "Index.NotFound", "nope");
    error(5, 400, "Index.InvalidParameter", "RerankTopN");
    error(6, 400, "Index.InvalidParameter", "SearchFilters[0].year.between");
    error(7, 400, "Index.InvalidParameter", "Images");
    // A JSON body still needs its media type; an empty body reads the query string.
    let r = http(
        a,
        "POST",
        "/ws_sdk/index/retrieve?IndexId=demo&Query=x&EnableReranking=maybe",
        &[("X-API-Key", PRO)],
        b"",
    );
    assert_eq!((r.status, r.body["Code"].as_str()), (400, Some("Index.InvalidParameter")), "{:?}", r.body);
    assert!(
        r.body["Message"].as_str().unwrap().contains("EnableReranking: must be true or false, got \"maybe\""),
        "{:?}",
        r.body
    );
    let r = http(a, "POST", "/ws_sdk/index/retrieve", &[("X-API-Key", PRO), ("Content-Type", "text/plain")], b"{}");
    assert_eq!(r.status, 415, "{:?}", r.body);
}

fn retrieve_returns_cited_chunks_with_exact_segment_offsets(a: &str, docs: &[Document]) {
    let r = post(
        a,
        "/v1/retrieve",
        Some(FREE),
        &json!({
            "query": "Where are Mastercard's corporate headquarters and technology operations center?",
            "filters": {"tickers": ["MA"]},
            "top_k": 5,
            "include_segments": true
        }),
    );
    assert_eq!(r.status, 200, "{:?}", r.body);
    let chunks = r.body["chunks"].as_array().unwrap();
    assert_eq!(chunks.len(), 5);
    assert_eq!(r.body["meta"]["total"], 5);
    assert_eq!(r.body["meta"]["requestId"].as_str(), r.header("x-request-id"));
    assert!(r.body["meta"]["periodMismatch"].is_null());
    for (i, c) in chunks.iter().enumerate() {
        assert_eq!(c["id"], format!("chunk_{:02}", i + 1));
        let src = &c["source"];
        assert_eq!(src["ticker"], "MA");
        let text = c["text"].as_str().unwrap();
        let evidence = c["evidenceText"].as_str().unwrap();
        assert!(text.contains(evidence), "evidence {evidence:?} is not from the chunk");
        let full = doc_text(docs, src["documentId"].as_str().unwrap());
        let segs = src["segments"].as_array().unwrap();
        assert!(!segs.is_empty());
        for s in segs {
            let (s0, s1) = (s["charStart"].as_u64().unwrap() as usize, s["charEnd"].as_u64().unwrap() as usize);
            assert_eq!(
                full[s0..s1].iter().collect::<String>(),
                s["content"].as_str().unwrap(),
                "segment offsets of {}",
                src["documentId"]
            );
        }
        // The passage is exactly its range of the document's text, and lies within the
        // segments listed (a passage cut from a long segment covers part of it).
        let (c0, c1) = (src["charStart"].as_u64().unwrap() as usize, src["charEnd"].as_u64().unwrap() as usize);
        assert_eq!(full[c0..c1].iter().collect::<String>(), text, "passage offsets of {}", src["documentId"]);
        let first = segs[0]["charStart"].as_u64().unwrap() as usize;
        let last = segs[segs.len() - 1]["charEnd"].as_u64().unwrap() as usize;
        assert!(first <= c0 && c1 <= last, "the segments hold the passage");
    }
    let answer = chunks.iter().take(3).position(|c| c["text"].as_str().unwrap().contains("Purchase, New York"));
    assert!(
        answer.is_some(),
        "the Properties section is not in the top 3: {:?}",
        chunks.iter().map(|c| &c["source"]["documentTitle"]).collect::<Vec<_>>()
    );
    // Without include_segments there are none.
    let r = post(a, "/v1/retrieve", Some(FREE), &json!({"query": "payment network revenue"}));
    assert!(r.body["chunks"][0]["source"].get("segments").is_none());
}

fn retrieve_filters_and_period_fallback(a: &str) {
    let r = post(
        a,
        "/v1/retrieve",
        Some(FREE),
        &json!({
            "query": "production volumes and earnings",
            "filters": {"tickers": ["xom"], "year": 2025, "quarter": "q2", "source_types": ["10-Q"]}
        }),
    );
    assert_eq!(r.status, 200, "{:?}", r.body);
    let chunks = r.body["chunks"].as_array().unwrap();
    assert!(!chunks.is_empty());
    for c in chunks {
        let s = &c["source"];
        assert_eq!(
            (s["ticker"].as_str(), s["year"].as_i64(), s["quarter"].as_str(), s["documentType"].as_str()),
            (Some("XOM"), Some(2025), Some("Q2"), Some("10-Q"))
        );
    }
    assert!(r.body["meta"]["periodMismatch"].is_null());
    // No XOM call for Q4 2015: the nearest prior one (Q2 2015) is served and flagged.
    let r = post(
        a,
        "/v1/retrieve",
        Some(FREE),
        &json!({
            "query": "outlook for the next quarter",
            "filters": {"tickers": ["XOM"], "year": 2015, "quarter": "Q4", "source_types": ["earnings_call"]}
        }),
    );
    assert_eq!(r.status, 200, "{:?}", r.body);
    let m = &r.body["meta"]["periodMismatch"];
    assert_eq!(m["requested"], "Q4 2015");
    assert_eq!(m["served"], json!(["XOM Q2 2015"]));
    assert!(m["message"].as_str().unwrap().contains("nearest prior period"));
    let chunks = r.body["chunks"].as_array().unwrap();
    assert!(!chunks.is_empty());
    for c in chunks {
        assert_eq!((c["source"]["year"].as_i64(), c["source"]["quarter"].as_str()), (Some(2015), Some("Q2")));
    }
}

fn retrieve_clamps_top_k_to_the_plan(a: &str) {
    for (key, max) in [(FREE, 10), (PRO, 25), (ENTERPRISE, 50)] {
        let r = post(a, "/v1/retrieve", Some(key), &json!({"query": "risk factors", "top_k": 50}));
        assert_eq!(r.status, 200, "{:?}", r.body);
        assert_eq!(r.body["meta"]["topK"], max);
        assert_eq!(r.body["chunks"].as_array().unwrap().len(), max);
    }
    // Over 50 is capped too, never rejected.
    let r = post(a, "/v1/retrieve", Some(PRO), &json!({"query": "risk factors", "top_k": 500}));
    assert_eq!((r.status, r.body["meta"]["topK"].as_u64()), (200, Some(25)));
}

fn retrieve_without_rerank_is_dense_similarity_order(a: &str) {
    let r = post(a, "/v1/retrieve", Some(FREE), &json!({"query": "cloud infrastructure growth", "rerank": false}));
    assert_eq!(r.status, 200, "{:?}", r.body);
    let scores: Vec<f64> = r.body["chunks"].as_array().unwrap().iter().map(|c| c["score"].as_f64().unwrap()).collect();
    assert!(scores.windows(2).all(|w| w[0] >= w[1]), "{scores:?}");
    assert!(scores.iter().all(|s| (-1.0..=1.0001).contains(s)), "cosine similarities: {scores:?}");
    assert_eq!(r.body["meta"]["rerank"]["status"], "not_requested");
    assert_eq!(r.body["meta"]["queryTruncated"], false);
    // Longer than the 256-token model window (but under the 4,000-character limit): served,
    // and flagged.
    let long = "What did management say about cloud infrastructure capacity and demand? ".repeat(30);
    let r = post(a, "/v1/retrieve", Some(FREE), &json!({"query": long}));
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(r.body["meta"]["queryTruncated"], true);
    assert!(!r.body["chunks"].as_array().unwrap().is_empty());
}

fn every_error_status_uses_the_envelope(a: &str) {
    let check = |r: Resp, status: u16, code: &str, field: Option<&str>| {
        assert_eq!(r.status, status, "{:?}", r.body);
        assert_eq!(r.body["success"], false);
        assert_eq!(r.body["error"]["code"], code, "{:?}", r.body);
        assert_eq!(r.body["error"]["field"].as_str(), field, "{:?}", r.body);
        assert_eq!(r.body["error"]["requestId"].as_str(), r.header("x-request-id"));
        assert!(!r.body["error"]["message"].as_str().unwrap().is_empty());
    };
    let p = |body: Value| post(a, "/v1/retrieve", Some(FREE), &body);
    check(p(json!({"top_k": 5})), 400, "invalid_request", Some("query"));
    check(p(json!({"query": "   "})), 400, "invalid_request", Some("query"));
    check(p(json!({"query": "x", "top_k": 0})), 400, "invalid_request", Some("top_k"));
    check(p(json!({"query": "x", "top_k": "ten"})), 400, "invalid_request", Some("top_k"));
    check(p(json!({"query": "x", "filters": {"quarter": "Q5"}})), 400, "invalid_request", Some("filters.quarter"));
    check(p(json!({"query": "x", "filters": {"year": 20240}})), 400, "invalid_request", Some("filters.year"));
    check(
        p(json!({"query": "x", "filters": {"source_types": ["tweet"]}})),
        400,
        "invalid_request",
        Some("filters.source_types[0]"),
    );
    check(p(json!({"query": "x", "filters": {"tickers": [""]}})), 400, "invalid_request", Some("filters.tickers[0]"));
    check(p(json!({"query": "x", "topk": 5})), 400, "invalid_request", Some("topk"));
    // An object's fields given by position, at any depth: refused, not matched.
    check(p(json!({"query": "x", "filters": [["MA"], 2023]})), 400, "invalid_request", Some("filters"));
    check(p(json!({"query": "x".repeat(5000)})), 400, "invalid_request", Some("query"));
    check(
        http(
            a,
            "POST",
            "/v1/retrieve",
            &[("Content-Type", "application/json"), ("Authorization", &format!("Bearer {FREE}"))],
            b"{\"query\": ",
        ),
        400,
        "invalid_request",
        None,
    );
    check(
        http(
            a,
            "POST",
            "/v1/retrieve",
            &[("Content-Type", "text/plain"), ("Authorization", &format!("Bearer {FREE}"))],
            b"{}",
        ),
        415,
        "unsupported_media_type",
        None,
    );
    let big = json!({"query": "x", "pad": "y".repeat(70_000)});
    check(p(big), 413, "payload_too_large", None);
    // A Content-Length over the limit is refused before the body is read: the client that
    // announces 10 GB and sends 64 KiB gets its 413 at once, not after a timeout.
    let raw = |head: &str, body: &[u8]| -> (u16, Value) {
        let mut s = TcpStream::connect(a).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        let _ = s.write_all(head.as_bytes());
        let _ = s.write_all(body);
        let mut out = Vec::new();
        let _ = s.read_to_end(&mut out);
        let text = String::from_utf8_lossy(&out).to_string();
        let (h, payload) = text.split_once("\r\n\r\n").unwrap_or_else(|| panic!("no answer: {text:?}"));
        let status = h.split(' ').nth(1).unwrap().parse().unwrap();
        let payload = payload.rsplit("\r\n\r\n").next().unwrap_or(payload);
        let json_start = payload.find('{').unwrap_or(0);
        let json_end = payload.rfind('}').map_or(payload.len(), |e| e + 1);
        (status, serde_json::from_str(&payload[json_start..json_end]).unwrap_or(Value::Null))
    };
    let auth = format!("Authorization: Bearer {FREE}\r\nContent-Type: application/json\r\n");
    let (status, body) = raw(
        &format!("POST /v1/retrieve HTTP/1.1\r\nHost: t\r\n{auth}Content-Length: 10000000000\r\n\r\n"),
        &vec![b' '; 64 * 1024],
    );
    assert_eq!((status, body["error"]["code"].as_str()), (413, Some("payload_too_large")), "{body}");
    // Without a Content-Length (chunked), the body is counted as it streams: 3 MB is a 413 in
    // the envelope too, not the HTTP layer's text/plain.
    let mut chunked = Vec::new();
    for _ in 0..48 {
        chunked.extend_from_slice(format!("{:x}\r\n", 64 * 1024).as_bytes());
        chunked.extend_from_slice(&vec![b' '; 64 * 1024]);
        chunked.extend_from_slice(b"\r\n");
    }
    chunked.extend_from_slice(b"0\r\n\r\n");
    let (status, body) =
        raw(&format!("POST /v1/search HTTP/1.1\r\nHost: t\r\n{auth}Transfer-Encoding: chunked\r\n\r\n"), &chunked);
    assert_eq!((status, body["error"]["code"].as_str()), (413, Some("payload_too_large")), "{body}");
    check(
        http(a, "GET", "/v1/retrieve", &[("Authorization", &format!("Bearer {FREE}"))], b""),
        405,
        "method_not_allowed",
        None,
    );
    check(http(a, "GET", "/v1/nothing", &[], b""), 404, "not_found", None);
    check(post(a, "/v1/retrieve", None, &json!({"query": "x"})), 401, "unauthorized", None);
    check(post(a, "/v1/retrieve", Some("sx_not_a_key"), &json!({"query": "x"})), 401, "unauthorized", None);
    let revoked = post(a, "/v1/retrieve", Some(REVOKED), &json!({"query": "x"}));
    assert!(revoked.body["error"]["message"].as_str().unwrap().contains("revoked"));
    check(revoked, 401, "unauthorized", None);
    check(post(a, "/v1/retrieve", Some(SCOPED), &json!({"query": "x"})), 403, "forbidden", None);
    // X-API-Key works like Authorization: Bearer.
    let r = http(
        a,
        "POST",
        "/v1/search",
        &[("Content-Type", "application/json"), ("X-API-Key", FREE)],
        json!({"query": "dividends"}).to_string().as_bytes(),
    );
    assert_eq!(r.status, 200, "{:?}", r.body);
    let s = |body: Value| post(a, "/v1/search", Some(FREE), &body);
    check(s(json!({"query": "x", "entity": "Nonexistent Corp"})), 400, "invalid_request", Some("entity[0]"));
    check(s(json!({"query": "x", "theme": ["podcast"]})), 400, "invalid_request", Some("theme[0]"));
    check(s(json!({"query": "x", "published_after": "2024-13-01"})), 400, "invalid_request", Some("published_after"));
    check(
        s(json!({"query": "x", "published_after": "2025-01-01", "published_before": "2024-01-01"})),
        400,
        "invalid_request",
        Some("published_before"),
    );
    check(s(json!({"query": "x", "limit": -1})), 400, "invalid_request", Some("limit"));
    check(s(json!({"query": "x", "max_per_document": 0})), 400, "invalid_request", Some("max_per_document"));
}

fn search_returns_units_with_offsets_and_diagnostics(a: &str, docs: &[Document]) {
    let r = post(
        a,
        "/v1/search",
        Some(PRO),
        &json!({
            "query": "cross-border transaction volume growth",
            "entity": ["Mastercard"],
            "limit": 8,
            "max_per_document": 2
        }),
    );
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(r.body["meta"]["entities"], json!(["MA"]));
    assert_eq!(r.body["meta"]["rerank"]["status"], "unavailable", "no reranker is configured");
    let results = r.body["results"].as_array().unwrap();
    assert!(!results.is_empty() && results.len() <= 8);
    let mut per_doc = std::collections::HashMap::new();
    for u in results {
        let d = &u["document"];
        assert_eq!(d["ticker"], "MA");
        *per_doc.entry(d["document_id"].as_str().unwrap().to_string()).or_insert(0) += 1;
        let text = u["text"].as_str().unwrap();
        let one_sentence = sextant_core::corpus::split_sentences(text).len() == 1;
        assert!(
            one_sentence || text.split_whitespace().count() <= 30,
            "a unit is one sentence or at most 30 words: {text:?}"
        );
        let p = &u["position"];
        assert!(p["chunk_text"].as_str().unwrap().contains(text));
        let full = doc_text(docs, d["document_id"].as_str().unwrap());
        let (c0, c1) = (p["char_start"].as_u64().unwrap() as usize, p["char_end"].as_u64().unwrap() as usize);
        assert_eq!(full[c0..c1].iter().collect::<String>(), text, "unit offsets");
        let diag = &u["diagnostics"];
        assert!(diag["rrf_rank"].as_u64().unwrap() >= 1);
        assert!(diag["dense_rank"].is_u64() || diag["sparse_rank"].is_u64() || diag["bm25_rank"].is_u64());
        if let Some(cos) = diag["dense_score"].as_f64() {
            assert!(cos >= 0.3, "dense candidates under the 0.3 cosine floor are dropped");
        }
    }
    assert!(per_doc.values().all(|&n| n <= 2), "max_per_document: {per_doc:?}");
    // Dates filter before ranking.
    let r = post(a, "/v1/search", Some(PRO), &json!({"query": "earnings", "published_before": "2016-12-31"}));
    for u in r.body["results"].as_array().unwrap() {
        assert!(u["document"]["published_at"].as_str().unwrap() <= "2016-12-31");
    }
}

fn rate_limit_answers_429_with_retry_after(a: &str) {
    // The "tiny" plan allows 2 requests a minute. The first two may straddle a minute
    // boundary, so keep asking until refused (at most 5).
    let mut refused = None;
    for _ in 0..5 {
        let r = post(a, "/v1/retrieve", Some(TINY), &json!({"query": "dividends", "top_k": 3}));
        if r.status == 429 {
            refused = Some(r);
            break;
        }
        assert_eq!(r.status, 200, "{:?}", r.body);
        assert!(r.header("x-ratelimit-remaining").is_some());
    }
    let r = refused.expect("the third request in a minute is refused");
    assert_eq!(r.body["error"]["code"], "rate_limited");
    let retry: u64 = r.header("retry-after").unwrap().parse().unwrap();
    assert!((1..=60).contains(&retry));
    assert_eq!(r.header("x-ratelimit-remaining"), Some("0"));
}

/// Checks `v` against `schema` (the JSON Schema subset `schemars` emits: `$ref`, `type`,
/// `properties`, `required`, `additionalProperties`, `items`, `anyOf`/`oneOf`/`allOf`,
/// `enum`, `const`). Returns the first mismatch as `path: reason`.
fn validate(v: &Value, schema: &Value, doc: &Value, path: &str) -> Result<(), String> {
    if schema == &Value::Bool(true) {
        return Ok(());
    }
    if schema == &Value::Bool(false) {
        return Err(format!("{path}: no value allowed"));
    }
    if let Some(r) = schema.get("$ref").and_then(|r| r.as_str()) {
        let name = r.strip_prefix("#/components/schemas/").ok_or(format!("{path}: unsupported $ref {r}"))?;
        validate(v, &doc["components"]["schemas"][name], doc, path)?;
    }
    if let Some(t) = schema.get("type") {
        let types: Vec<&str> = match t {
            Value::String(s) => vec![s.as_str()],
            Value::Array(a) => a.iter().filter_map(|x| x.as_str()).collect(),
            _ => vec![],
        };
        let ok = types.iter().any(|t| match *t {
            "null" => v.is_null(),
            "boolean" => v.is_boolean(),
            "integer" => v.is_i64() || v.is_u64(),
            "number" => v.is_number(),
            "string" => v.is_string(),
            "array" => v.is_array(),
            "object" => v.is_object(),
            _ => false,
        });
        if !ok {
            return Err(format!("{path}: {v} is not of type {t}"));
        }
    }
    if let Some(c) = schema.get("const") {
        if c != v {
            return Err(format!("{path}: {v} is not {c}"));
        }
    }
    if let Some(e) = schema.get("enum").and_then(|e| e.as_array()) {
        if !e.contains(v) {
            return Err(format!("{path}: {v} is not one of {e:?}"));
        }
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(alts) = schema.get(key).and_then(|a| a.as_array()) {
            let passing = alts.iter().filter(|s| validate(v, s, doc, path).is_ok()).count();
            if passing == 0 || (key == "oneOf" && passing > 1) {
                return Err(format!("{path}: {v} matches {passing} of the {key} alternatives"));
            }
        }
    }
    if let Some(all) = schema.get("allOf").and_then(|a| a.as_array()) {
        for s in all {
            validate(v, s, doc, path)?;
        }
    }
    if let Some(obj) = v.as_object() {
        let props = schema.get("properties").and_then(|p| p.as_object());
        for r in schema.get("required").and_then(|r| r.as_array()).into_iter().flatten() {
            let r = r.as_str().unwrap();
            if !obj.contains_key(r) {
                return Err(format!("{path}: required field {r} is missing"));
            }
        }
        for (k, x) in obj {
            match (props.and_then(|p| p.get(k)), schema.get("additionalProperties")) {
                (Some(s), _) => validate(x, s, doc, &format!("{path}.{k}"))?,
                (None, Some(Value::Bool(false))) => return Err(format!("{path}: field {k} is not in the schema")),
                (None, Some(s)) if s.is_object() => validate(x, s, doc, &format!("{path}.{k}"))?,
                _ => {}
            }
        }
    }
    if let (Some(items), Some(arr)) = (schema.get("items"), v.as_array()) {
        for (i, x) in arr.iter().enumerate() {
            validate(x, items, doc, &format!("{path}[{i}]"))?;
        }
    }
    Ok(())
}

fn openapi_document_describes_real_responses(a: &str) {
    let doc = http(a, "GET", "/openapi.json", &[], b"").body;
    assert_eq!(doc["openapi"], "3.1.0");
    let schema_of = |path: &str, status: u16| {
        doc["paths"][path]["post"]["responses"][status.to_string()]["content"]["application/json"]["schema"].clone()
    };
    let request_schema =
        |path: &str| doc["paths"][path]["post"]["requestBody"]["content"]["application/json"]["schema"].clone();
    let cases: Vec<(&str, &str, Option<&str>, Value)> = vec![
        (
            "/v1/retrieve",
            "/v1/retrieve",
            Some(FREE),
            json!({"query": "dividends", "include_segments": true, "filters": {"tickers": ["MA"], "year": 2024}}),
        ),
        (
            "/v1/retrieve",
            "/v1/retrieve",
            Some(FREE),
            json!({"query": "outlook", "filters": {"tickers": ["XOM"], "year": 2015, "quarter": "Q4"}}),
        ),
        ("/v1/retrieve", "/v1/retrieve", Some(FREE), json!({"top_k": 3})),
        ("/v1/retrieve", "/v1/retrieve", None, json!({"query": "x"})),
        ("/v1/search", "/v1/search", Some(FREE), json!({"query": "dividends", "entity": "MA"})),
        ("/v1/search", "/v1/search", Some(FREE), json!({"query": "x", "theme": "blog"})),
        (
            "/{WorkspaceId}/index/retrieve",
            "/ws/index/retrieve",
            Some(FREE),
            json!({
                "IndexId": "demo",
                "Query": "and in 2023?",
                "EnableRewrite": true,
                "History": [{"Role": "user", "Content": "MA revenue in 2024"}]
            }),
        ),
        (
            "/{WorkspaceId}/index/retrieve",
            "/ws/index/retrieve",
            Some(FREE),
            json!({"IndexId": "demo", "Query": "x", "SearchFilters": [{"year": {"from": 1}}]}),
        ),
    ];
    for (spec_path, url, key, body) in cases {
        let r = post(a, url, key, &body);
        let schema = schema_of(spec_path, r.status);
        assert!(!schema.is_null(), "{spec_path} documents no {} response", r.status);
        validate(&r.body, &schema, &doc, "$").unwrap_or_else(|e| {
            panic!("{spec_path} {} response does not match the document: {e}\n{}", r.status, r.body)
        });
        if r.status == 200 {
            validate(&body, &request_schema(spec_path), &doc, "$")
                .unwrap_or_else(|e| panic!("{spec_path} request: {e}"));
        }
    }
    // The validator is not a rubber stamp.
    let retrieve_ok = schema_of("/v1/retrieve", 200);
    assert!(validate(&json!({"chunks": []}), &retrieve_ok, &doc, "$").is_err(), "meta is required");
    assert!(validate(&json!({"chunks": [{"id": 1}], "meta": {}}), &retrieve_ok, &doc, "$").is_err());
}

/// `POST /v1/context` on the served index (its facts restricted to MA, XOM and ORCL).
fn context_endpoint(a: &str) {
    let ask = |body: Value| {
        let r = post(a, "/v1/context", Some(PRO), &body);
        assert_eq!(r.status, 200, "{body} → {}", r.body);
        r.body
    };
    // metric_lookup: the value, the year before, the change, each with its source.
    let r = ask(json!({"question": "What was Mastercard's revenue in 2024?"}));
    assert_eq!(r["route"], "metric_lookup", "{r}");
    assert_eq!(r["classification"]["tickers"], json!(["MA"]));
    assert_eq!(r["classification"]["years"], json!([2024]));
    let fact = &r["result"]["facts"][0];
    assert_eq!(
        (fact["display"].as_str(), fact["concept"].as_str()),
        (Some("28,167 M USD"), Some("us-gaap:Revenues")),
        "{r}"
    );
    assert_eq!(fact["source"]["form"], "10-K");
    assert_eq!(r["result"]["comparisons"][0]["priorValue"], json!(25_098_000_000.0));
    assert_eq!(r["result"]["comparisons"][0]["pctChange"], json!(12.2));
    assert_eq!(r["confidence"]["tier"], "high", "{r}");
    assert_eq!(r["confidence"]["signals"].as_array().map(Vec::len), Some(4));
    assert!(r["meta"]["factsHeld"][0].as_u64().unwrap() > 100);
    // A quarter, compared with the same quarter a year earlier.
    let r = ask(json!({"question": "Exxon Mobil revenue in Q2 2025"}));
    assert_eq!(r["result"]["facts"][0]["value"], json!(81_506_000_000.0), "{r}");
    assert_eq!(r["result"]["comparisons"][0]["pctChange"], json!(-12.4));
    // full_statement: a markdown table built from facts.
    let r = ask(json!({"question": "Mastercard balance sheet 2024"}));
    assert_eq!(r["route"], "full_statement");
    let md = r["result"]["statements"][0]["markdown"].as_str().unwrap();
    assert!(md.contains("| Total assets |"), "{md}");
    // narrative: passages of the company's filings and calls, guarded and cited.
    let r = ask(json!({"question": "What are Mastercard's main risk factors?", "top_k": 5}));
    assert_eq!(r["route"], "narrative", "{r}");
    let passages = r["result"]["passages"].as_array().unwrap();
    assert!(!passages.is_empty() && passages.len() <= 5, "{r}");
    for p in passages {
        assert_eq!(p["ticker"], "MA");
        assert!(p["chunkId"].as_str().unwrap().contains('#'));
        assert!(p["similarity"].as_f64().unwrap() >= 0.25);
    }
    assert!(passages.iter().any(|p| p["title"].as_str().unwrap().contains("Risk")), "{r}");
    // Two companies: each gets its fair share of the passages.
    let r = ask(json!({"question": "How do Mastercard's and Exxon Mobil's risk factors compare?", "top_k": 6}));
    assert_eq!(r["route"], "narrative");
    let passages = r["result"]["passages"].as_array().unwrap();
    for t in ["MA", "XOM"] {
        assert!(passages.iter().filter(|p| p["ticker"] == t).count() >= 2, "{t} under-represented: {r}");
    }
    assert!(
        r["guardrails"].as_array().unwrap().iter().any(|g| g.as_str().unwrap().starts_with("fair allocation")),
        "{r}"
    );
    // A two-company numeric comparison: hybrid, facts per company, passages shared fairly.
    let r = ask(json!({"question": "Compare Mastercard and Exxon Mobil revenue in Q2 2025", "top_k": 6}));
    assert_eq!(
        (r["route"].as_str(), r["classification"]["intent"].as_str()),
        (Some("hybrid"), Some("comparison")),
        "{r}"
    );
    assert!(
        r["result"]["facts"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["ticker"] == "XOM" && f["value"] == json!(81_506_000_000.0)),
        "{r}"
    );
    assert!(
        r["warnings"].as_array().unwrap().iter().any(|w| w.as_str().unwrap().contains("MA")),
        "MA filed no Q2 2025 report here: {r}"
    );
    let passages = r["result"]["passages"].as_array().unwrap();
    assert!(passages.iter().any(|p| p["ticker"] == "MA") && passages.iter().any(|p| p["ticker"] == "XOM"), "{r}");
    let actions = r["guardrails"].as_array().unwrap();
    assert!(actions.iter().any(|g| g.as_str().unwrap().starts_with("fair allocation")), "{r}");
    assert!(
        actions.iter().any(|g| g.as_str().unwrap().starts_with("no MA passage for FY2025")),
        "the period fallback is said: {r}"
    );
    // hybrid: relational and narrative together; what is not held is said.
    let r = ask(json!({"question": "Why did Mastercard's revenue grow in 2024?", "top_k": 4}));
    assert_eq!(r["route"], "hybrid", "{r}");
    assert_eq!(r["result"]["facts"][0]["value"], json!(28_167_000_000.0));
    assert!(!r["result"]["passages"].as_array().unwrap().is_empty());
    // A forced route and caller-given periods are obeyed and reported.
    let r = ask(json!({"question": "Mastercard revenue", "route": "timeseries", "years": [2022, 2023, 2024]}));
    assert_eq!((r["route"].as_str(), r["classification"]["forced"].as_bool()), (Some("timeseries"), Some(true)));
    assert_eq!(r["result"]["timeseries"][0]["coverage"], json!(1.0), "{r}");
    // Bad input: 4xx in the envelope, naming the field.
    for (body, field) in [
        (json!({"question": ""}), "question"),
        (json!({"question": "revenue", "tickers": ["NOPE1"]}), "tickers[0]"),
        (json!({"question": "revenue", "quarters": ["Q7"]}), "quarters[0]"),
        (json!({"question": "revenue", "route": "guess"}), "route"),
        (json!({"question": "revenue", "answer": true}), "answer"),
    ] {
        let r = post(a, "/v1/context", Some(PRO), &body);
        assert_eq!(r.status, 400, "{body}: {}", r.body);
        assert_eq!(r.body["error"]["field"], field, "{body}: {}", r.body);
    }
    assert_eq!(post(a, "/v1/context", None, &json!({"question": "revenue"})).status, 401);
}
