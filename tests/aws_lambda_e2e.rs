//! The compiled Lambda functions end to end, each run as a real process against a Lambda
//! Runtime API emulator, with SeaweedFS as S3 and moto as DynamoDB (behind a proxy that
//! can take it down): index-build publishes, retrieve cold-starts from S3, a new version
//! is swapped in warm, a corrupt one is refused, a plan's limit gives 429, and a DynamoDB
//! outage gives 503 until it is back.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use aws_sdk_s3::primitives::ByteStream;
use serde_json::{json, Value};
use support::lambda_service::LambdaService;
use support::runtime_api::RuntimeApi;
use support::servers::{create_bucket, create_tables, s3_client, servers, unique, Servers};
use support::switch_proxy::SwitchProxy;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The workspace's built binaries (`cargo build --workspace` puts them beside `deps/`).
fn binary(name: &str) -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let dir = exe.parent().and_then(|d| d.parent()).unwrap();
    let p = dir.join(name);
    assert!(p.is_file(), "{} is missing: build the workspace binaries first (scripts/ci/test.sh does)", p.display());
    p
}

/// A function process attached to its own runtime API emulator, its output in a log file.
struct Function {
    api: Arc<RuntimeApi>,
    child: Child,
    log: PathBuf,
}

impl Function {
    async fn start(bin: &str, env: &[(String, String)], log_dir: &Path) -> Function {
        let api = Arc::new(RuntimeApi::start().await);
        // One log per process, several processes of one function apart.
        let log = (0..).map(|n| log_dir.join(format!("{bin}-{n}.log"))).find(|p| !p.exists()).unwrap();
        let out = std::fs::File::create(&log).unwrap();
        let mut cmd = Command::new(binary(bin));
        cmd.env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", std::env::var("HOME").unwrap_or_default())
            .env("AWS_LAMBDA_RUNTIME_API", &api.addr)
            .env("AWS_LAMBDA_FUNCTION_NAME", bin)
            .env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "3008")
            .env("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST")
            .env("AWS_LAMBDA_LOG_GROUP_NAME", format!("/aws/lambda/{bin}"))
            .env("AWS_LAMBDA_LOG_STREAM_NAME", "test")
            .env("SEXTANT_MODEL_DIR", sextant_core::encode::default_model_dir())
            .env("RUST_LOG", "info")
            .stdout(out.try_clone().unwrap())
            .stderr(out);
        for (k, v) in env {
            cmd.env(k, v);
        }
        let child = cmd.spawn().unwrap();
        Function { api, child, log }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    async fn invoke(&self, event: Value) -> Result<Value, Value> {
        self.api.invoke(event, Duration::from_secs(300)).await
    }

    /// Sends an API Gateway (HTTP API) event and returns (status, headers, body).
    async fn http(&self, method: &str, path: &str, key: Option<&str>, body: Option<Value>) -> (u16, Value, Value) {
        let event = http_event(method, path, key, body);
        let out = self.invoke(event).await.unwrap_or_else(|e| panic!("{path}: {e}\n{}", self.log()));
        let status = out["statusCode"].as_u64().unwrap() as u16;
        let body = out["body"]
            .as_str()
            .map(|b| serde_json::from_str(b).unwrap_or(Value::String(b.into())))
            .unwrap_or(Value::Null);
        (status, out["headers"].clone(), body)
    }
}

impl Drop for Function {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An HTTP API (payload v2) event from the `events/` template.
fn http_event(method: &str, path: &str, key: Option<&str>, body: Option<Value>) -> Value {
    let mut e: Value =
        serde_json::from_slice(&std::fs::read(repo().join("events/retrieve-ok.http.json")).unwrap()).unwrap();
    e["rawPath"] = path.into();
    e["routeKey"] = format!("{method} {path}").into();
    e["requestContext"]["http"]["method"] = method.into();
    e["requestContext"]["http"]["path"] = path.into();
    e["requestContext"]["routeKey"] = e["routeKey"].clone();
    match key {
        Some(k) => e["headers"]["authorization"] = format!("Bearer {k}").into(),
        None => {
            e["headers"].as_object_mut().unwrap().remove("authorization");
        }
    }
    match body {
        Some(b) => e["body"] = b.to_string().into(),
        None => {
            e.as_object_mut().unwrap().remove("body");
        }
    }
    e
}

fn demo_documents(tickers: &[&str]) -> Vec<u8> {
    use std::io::Read;
    let mut text = String::new();
    flate2::read::GzDecoder::new(std::fs::File::open(repo().join("data/demo/documents.jsonl.gz")).unwrap())
        .read_to_string(&mut text)
        .unwrap();
    let mut out = Vec::new();
    for line in text.lines() {
        let d: Value = serde_json::from_str(line).unwrap();
        if tickers.contains(&d["ticker"].as_str().unwrap_or("")) {
            out.extend_from_slice(line.as_bytes());
            out.push(b'\n');
        }
    }
    out
}

/// Runs the CLI with the servers' environment.
fn cli(s: &Servers, dynamo: &str, args: &[&str]) -> String {
    let out = Command::new(binary("sextant"))
        .args(args)
        .envs(s.function_env(&s.seaweed, dynamo))
        .stderr(Stdio::inherit())
        .output()
        .unwrap();
    assert!(out.status.success(), "sextant {args:?} failed");
    String::from_utf8(out.stdout).unwrap()
}

async fn health_version(f: &Function) -> Option<String> {
    let (status, _, body) = f.http("GET", "/health", None, None).await;
    (status == 200).then(|| body["indexVersions"]["demo"].as_str().map(str::to_string)).flatten()
}

#[test]
fn functions_publish_cold_start_swap_refuse_limit_and_survive_a_store_outage() {
    let s = servers();
    let logs = tempfile::tempdir().unwrap();
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap().block_on(async {
        // --- Infrastructure: a bucket with the corpus, the tables, keys made with the CLI.
        let s3 = s.config(&s.seaweed).await;
        let bucket = unique("e2e");
        create_bucket(&s3, &bucket).await;
        let raw = s3_client(&s3);
        let put = |key: String, bytes: Vec<u8>| {
            raw.put_object().bucket(&bucket).key(key).body(ByteStream::from(bytes)).send()
        };
        put("corpora/demo/part-1.jsonl".into(), demo_documents(&["MA"])).await.unwrap();
        put("corpora/facts/facts.jsonl.gz".into(), std::fs::read(repo().join("data/demo/facts.jsonl.gz")).unwrap())
            .await
            .unwrap();
        let proxy = SwitchProxy::start(s.moto.strip_prefix("http://").unwrap().to_string()).await;
        let (keys_table, rate_table) = (unique("keys"), unique("rate"));
        create_tables(&s.config(&proxy.url).await, &keys_table, &rate_table).await;
        let store = format!("dynamodb://{keys_table}/{rate_table}");
        cli(
            &s,
            &proxy.url,
            &["plans", "--store", &store, "set", "tiny", "--max-top-k", "5", "--per-minute", "2", "--per-day", "100"],
        );
        cli(
            &s,
            &proxy.url,
            &["keys", "--store", &store, "create", "--tenant", "events", "--plan", "pro", "--key", "sx_dev"],
        );
        cli(
            &s,
            &proxy.url,
            &["keys", "--store", &store, "create", "--tenant", "limits", "--plan", "tiny", "--key", "sx_tiny_e2e"],
        );
        let created = cli(
            &s,
            &proxy.url,
            &["keys", "--store", &store, "create", "--tenant", "scoped", "--plan", "pro", "--index", "other"],
        );
        let scoped_key = created.trim().to_string();
        let listed: Value =
            serde_json::from_str(&cli(&s, &proxy.url, &["keys", "--store", &store, "list", "--json"])).unwrap();
        assert_eq!(listed.as_array().unwrap().len(), 3);
        assert!(
            !listed.to_string().contains(&scoped_key) && !listed.to_string().contains("sx_tiny_e2e"),
            "keys are never listed, only prefixes and hashes"
        );
        let plans = cli(&s, &proxy.url, &["plans", "--store", &store]);
        assert!(plans.contains("tiny") && plans.contains("enterprise"), "{plans}");

        // --- index-build: a bad event is refused with the field named; a good one publishes v1.
        let aws_env = s.function_env(&s.seaweed, &proxy.url);
        let builder = Function::start("sextant-index-build", &aws_env, logs.path()).await;
        let bad_job = json!({
            "index_id": "demo",
            "corpus": "ftp://nowhere",
            "target": format!("s3://{bucket}/indexes/demo")
        });
        let err = builder.invoke(bad_job).await.unwrap_err();
        assert_eq!(err["errorType"], "InvalidEvent", "{err}");
        assert!(err["errorMessage"].as_str().unwrap().contains("corpus"), "{err}");
        let job = json!({
            "index_id": "demo",
            "corpus": format!("s3://{bucket}/corpora/demo/"),
            "target": format!("s3://{bucket}/indexes/demo"),
            "keep_versions": 3,
            "facts": format!("s3://{bucket}/corpora/facts/")
        });
        let v1 = builder.invoke(job.clone()).await.unwrap_or_else(|e| panic!("{e}\n{}", builder.log()));
        let v1_version = v1["version"].as_str().unwrap().to_string();
        assert_eq!(v1["documents"], 16, "{v1}");

        // --- retrieve: cold start from S3, the events/ request served, phases logged.
        let mut env = aws_env.clone();
        env.extend([
            ("SEXTANT_INDEXES".to_string(), format!("s3://{bucket}/indexes/demo")),
            ("SEXTANT_KEYS".into(), store.clone()),
            ("SEXTANT_REFRESH_SECS".into(), "1".into()),
            ("SEXTANT_KEY_CACHE_SECS".into(), "1".into()),
            ("SEXTANT_AWS_ATTEMPT_TIMEOUT_SECS".into(), "2".into()),
        ]);
        let retrieve = Function::start("sextant-retrieve", &env, logs.path()).await;
        let event: Value =
            serde_json::from_slice(&std::fs::read(repo().join("events/retrieve-ok.http.json")).unwrap()).unwrap();
        let out = retrieve.invoke(event).await.unwrap_or_else(|e| panic!("{e}\n{}", retrieve.log()));
        assert_eq!(out["statusCode"], 200, "{out}\n{}", retrieve.log());
        let body: Value = serde_json::from_str(out["body"].as_str().unwrap_or_else(|| panic!("{out}"))).unwrap();
        let results = body["chunks"].as_array().unwrap();
        assert!(!results.is_empty() && results.iter().all(|r| r["source"]["ticker"] == "MA"), "{body}");
        let log = retrieve.log();
        for phase in ["pointer_ms", "download_ms", "decode_ms", "models_ms"] {
            assert!(log.contains(phase), "cold start phase {phase} not logged:\n{log}");
        }
        assert_eq!(health_version(&retrieve).await.as_deref(), Some(v1_version.as_str()));
        // The facts were built and published with the version: /v1/context answers from them.
        let revenue = json!({"question": "What was Mastercard's revenue in 2024?"});
        let (status, _, body) = retrieve.http("POST", "/v1/context", Some("sx_dev"), Some(revenue)).await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["result"]["facts"][0]["display"], "28,167 M USD", "{body}");
        let exxon = json!({
            "query": "Exxon Mobil upstream oil production",
            "filters": {"tickers": ["XOM"]},
            "top_k": 3
        });
        let (status, _, body) = retrieve.http("POST", "/v1/retrieve", Some("sx_dev"), Some(exxon.clone())).await;
        assert_eq!(status, 200, "{body}");
        assert!(body["chunks"].as_array().unwrap().is_empty(), "v1 holds no Exxon documents: {body}");

        // --- S3 unreachable at cold start: a 503 in the envelope, then service without a
        // restart once S3 is back (the refresher retries the failed index).
        let s3_proxy = SwitchProxy::start(s.seaweed.strip_prefix("http://").unwrap().to_string()).await;
        s3_proxy.set_up(false);
        let mut cold_env = s.function_env(&s3_proxy.url, &proxy.url);
        cold_env.extend(env.iter().filter(|(k, _)| k.starts_with("SEXTANT_")).cloned());
        let cold = Function::start("sextant-retrieve", &cold_env, logs.path()).await;
        let question = json!({"query": "cross-border volume growth", "top_k": 3});
        let (status, _, body) = cold.http("POST", "/v1/retrieve", Some("sx_dev"), Some(question.clone())).await;
        assert_eq!(status, 503, "S3 down at cold start: {body}\n{}", cold.log());
        assert_eq!(body["error"]["code"], "unavailable", "{body}");
        let (status, _, body) = cold.http("GET", "/health", None, None).await;
        assert_eq!(status, 503, "{body}");
        s3_proxy.set_up(true);
        let t = Instant::now();
        while health_version(&cold).await.as_deref() != Some(v1_version.as_str()) {
            assert!(
                t.elapsed() < Duration::from_secs(120),
                "the index was not loaded once S3 came back:\n{}",
                cold.log()
            );
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
        let (status, _, body) = cold.http("POST", "/v1/retrieve", Some("sx_dev"), Some(question)).await;
        assert_eq!(status, 200, "served after S3 came back, same process: {body}");
        drop(cold);

        // --- An index that cannot fit the function's memory (here 385 MB, 1 MiB beside the
        // models' reserve): refused at cold start before a byte of it is downloaded, with one
        // log line naming the memory to set and the IndexTooLarge metric; a 503, not a crash.
        let mut tight = env.clone();
        tight.push(("SEXTANT_MEMORY_MB".into(), "385".into()));
        let small = Function::start("sextant-retrieve", &tight, logs.path()).await;
        let ask = json!({"query": "cross-border volume growth", "top_k": 3});
        let (status, _, body) = small.http("POST", "/v1/retrieve", Some("sx_dev"), Some(ask)).await;
        assert_eq!(status, 503, "{body}\n{}", small.log());
        assert!(body["error"]["message"].as_str().unwrap().contains("does not fit this function's memory"), "{body}");
        let log = small.log();
        assert!(log.contains("set FunctionMemory to at least"), "{log}");
        assert!(log.contains("\"IndexTooLarge\":1"), "the metric line: {log}");
        assert!(!log.contains("download_ms"), "nothing was downloaded: {log}");
        drop(small);

        // A key scoped to another index cannot read this one.
        let (status, _, body) = retrieve.http("POST", "/v1/retrieve", Some(&scoped_key), Some(exxon.clone())).await;
        assert_eq!(status, 403, "{body}");

        // --- A new version (Exxon added) is swapped in while warm.
        put("corpora/demo/part-2.jsonl".into(), demo_documents(&["XOM"])).await.unwrap();
        let v2 = builder.invoke(job.clone()).await.unwrap_or_else(|e| panic!("{e}\n{}", builder.log()));
        let v2_version = v2["version"].as_str().unwrap().to_string();
        assert_eq!(v2["previous"].as_str(), Some(v1_version.as_str()));
        // v2 encoded only the new documents: v1's vectors came from its cache in S3.
        assert_eq!(v2["chunks_reused"], v1["chunks"], "{v2}");
        assert_eq!(v2["tokens_beyond_window"], 0, "{v2}");
        assert_eq!(
            v2["chunks_encoded"].as_u64().unwrap() + v2["chunks_reused"].as_u64().unwrap(),
            v2["chunks"].as_u64().unwrap()
        );
        // The same job again: nothing changed, nothing published.
        let v3 = builder.invoke(job.clone()).await.unwrap_or_else(|e| panic!("{e}\n{}", builder.log()));
        assert_eq!((v3["unchanged"].as_bool(), v3["chunks_encoded"].as_u64()), (Some(true), Some(0)), "{v3}");
        assert!(v3.get("version").is_none(), "an unchanged build publishes nothing: {v3}");
        let t = Instant::now();
        while health_version(&retrieve).await.as_deref() != Some(v2_version.as_str()) {
            assert!(t.elapsed() < Duration::from_secs(120), "v2 was not swapped in:\n{}", retrieve.log());
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
        let (status, _, body) = retrieve.http("POST", "/v1/retrieve", Some("sx_dev"), Some(exxon.clone())).await;
        assert_eq!(status, 200, "{body}");
        assert!(!body["chunks"].as_array().unwrap().is_empty(), "v2 answers about Exxon: {body}");

        // --- A corrupt version made current is refused; v2 keeps serving.
        let src = format!("indexes/demo/versions/{v2_version}");
        let bad = "29991231T000000Z-corrupt00000";
        let listing = raw.list_objects_v2().bucket(&bucket).prefix(format!("{src}/")).send().await.unwrap();
        for obj in listing.contents() {
            let key = obj.key().unwrap();
            let mut bytes =
                raw.get_object().bucket(&bucket).key(key).send().await.unwrap().body.collect().await.unwrap().to_vec();
            if key.ends_with("chunks.bin") {
                let mid = bytes.len() / 2;
                bytes[mid] ^= 0x55;
            }
            put(key.replace(&v2_version, bad), bytes).await.unwrap();
        }
        let current = raw.get_object().bucket(&bucket).key("indexes/demo/CURRENT").send().await.unwrap();
        let mut pointer: Value = serde_json::from_slice(&current.body.collect().await.unwrap().to_vec()).unwrap();
        pointer["version"] = bad.into();
        put("indexes/demo/CURRENT".into(), serde_json::to_vec(&pointer).unwrap()).await.unwrap();
        let t = Instant::now();
        while !retrieve.log().contains("refused a new index version") {
            assert!(t.elapsed() < Duration::from_secs(60), "the corrupt version was not refused:\n{}", retrieve.log());
            let (status, _, _) = retrieve.http("POST", "/v1/retrieve", Some("sx_dev"), Some(exxon.clone())).await;
            assert_eq!(status, 200, "requests keep being served meanwhile");
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
        assert!(retrieve.log().contains("chunks.bin"), "the refusal names the file:\n{}", retrieve.log());
        assert_eq!(health_version(&retrieve).await.as_deref(), Some(v2_version.as_str()));

        // --- Rate limit of the tiny plan (2 a minute): the third request is a 429.
        let now = sextant_keys::now_unix();
        if now % 60 > 50 {
            tokio::time::sleep(Duration::from_secs(61 - now % 60)).await;
        }
        let q = json!({"query": "Mastercard revenue", "top_k": 3});
        for remaining in ["1", "0"] {
            let (status, headers, body) =
                retrieve.http("POST", "/v1/retrieve", Some("sx_tiny_e2e"), Some(q.clone())).await;
            assert_eq!(status, 200, "{body}");
            assert_eq!(headers["x-ratelimit-remaining"], remaining, "{headers}");
        }
        let (status, headers, body) = retrieve.http("POST", "/v1/retrieve", Some("sx_tiny_e2e"), Some(q.clone())).await;
        assert_eq!(status, 429, "{body}");
        assert_eq!(body["error"]["code"], "rate_limited", "{body}");
        let retry: u64 = headers["retry-after"].as_str().unwrap().parse().unwrap();
        assert!((1..=60).contains(&retry), "{headers}");
        assert_eq!(headers["x-ratelimit-limit"], "2", "{headers}");

        // --- DynamoDB down: 503 with the envelope (fail closed); back: served again.
        proxy.set_up(false);
        let (status, headers, body) = retrieve.http("POST", "/v1/retrieve", Some("sx_dev"), Some(q.clone())).await;
        assert_eq!(status, 503, "{body}");
        assert_eq!(body["error"]["code"], "unavailable", "{body}");
        assert!(headers["retry-after"].is_string(), "{headers}");
        proxy.set_up(true);
        let (status, _, body) = retrieve.http("POST", "/v1/retrieve", Some("sx_dev"), Some(q.clone())).await;
        assert_eq!(status, 200, "{body}");

        // --- Nothing secret or private reached the logs: no key, no key hash, no request body.
        let logs = [retrieve.log(), builder.log()].concat();
        assert!(logs.len() > 1000, "the functions logged: {logs}");
        let hash = sextant_keys::hash_key;
        for secret in ["sx_dev", "sx_tiny_e2e", scoped_key.as_str()] {
            assert!(!logs.contains(secret) && !logs.contains(&hash(secret)), "a key or its hash is in the logs");
        }
        for body_text in
            ["Mastercard revenue", "Exxon Mobil upstream oil production", "What was Mastercard's revenue in 2024?"]
        {
            assert!(!logs.contains(body_text), "request text {body_text:?} is in the logs");
        }
    });
}

#[test]
fn the_cli_publishes_a_local_index_runs_the_build_job_and_lists_versions() {
    let s = servers();
    let work = tempfile::tempdir().unwrap();
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
        let bucket = unique("cli");
        create_bucket(&s.config(&s.seaweed).await, &bucket).await;
        let corpus = work.path().join("xom.jsonl");
        std::fs::write(&corpus, demo_documents(&["XOM"])).unwrap();
        let index = work.path().join("index");
        let (c, i) = (corpus.to_str().unwrap(), index.to_str().unwrap());
        cli(&s, &s.moto, &["build", "--docs", c, "--id", "demo", "--out", i]);
        let target = format!("s3://{bucket}/indexes/demo");
        let published: Value =
            serde_json::from_str(&cli(&s, &s.moto, &["publish", "--index", i, "--to", &target])).unwrap();
        // The same job the function runs, from the same local corpus: nothing changed, so
        // nothing is published.
        let job = ["index-build", "--index-id", "demo", "--corpus", c, "--target", &target];
        let same: Value = serde_json::from_str(&cli(&s, &s.moto, &job)).unwrap();
        assert_eq!((same["unchanged"].as_bool(), same["chunks_encoded"].as_u64()), (Some(true), Some(0)), "{same}");
        assert!(same.get("version").is_none(), "{same}");
        // One document fewer: a second version on top, every vector reused.
        let text = std::fs::read_to_string(&corpus).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        std::fs::write(&corpus, lines[..lines.len() - 1].join("\n") + "\n").unwrap();
        let built: Value = serde_json::from_str(&cli(&s, &s.moto, &job)).unwrap();
        assert_eq!(built["previous"], published["version"], "{built}");
        assert_eq!((built["documents"].as_u64(), built["chunks_encoded"].as_u64()), (Some(7), Some(0)), "{built}");
        let versions: Value = serde_json::from_str(&cli(&s, &s.moto, &["versions", &target])).unwrap();
        assert_eq!(versions["current"]["version"], built["version"], "{versions}");
        assert_eq!(versions["versions"].as_array().unwrap().len(), 2, "{versions}");
        // A corrupt local index is never published.
        let bm25 = index.join("bm25.bin");
        let mut bytes = std::fs::read(&bm25).unwrap();
        bytes[10] ^= 1;
        std::fs::write(&bm25, bytes).unwrap();
        let out = Command::new(binary("sextant"))
            .args(["publish", "--index", i, "--to", &target])
            .envs(s.function_env(&s.seaweed, &s.moto))
            .output()
            .unwrap();
        assert!(!out.status.success());
        assert!(String::from_utf8_lossy(&out.stderr).contains("bm25.bin"), "{}", String::from_utf8_lossy(&out.stderr));
    });
}

/// The build workflow's steps, as Step Functions runs them, against SeaweedFS: plan, one
/// encode invocation per shard (one of which fails once on a missing task and succeeds on
/// the retry), merge. `CURRENT` moves only at the merge; an identical run stops at the plan.
#[test]
fn the_build_workflow_plans_encodes_shards_with_a_retry_and_merges() {
    let s = servers();
    let logs = tempfile::tempdir().unwrap();
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap().block_on(async {
        let s3 = s.config(&s.seaweed).await;
        let bucket = unique("steps");
        create_bucket(&s3, &bucket).await;
        let raw = s3_client(&s3);
        raw.put_object()
            .bucket(&bucket)
            .key("corpora/xom/part-1.jsonl")
            .body(ByteStream::from(demo_documents(&["XOM"])))
            .send()
            .await
            .unwrap();
        let aws_env = s.function_env(&s.seaweed, &s.moto);
        let builder = Function::start("sextant-index-build", &aws_env, logs.path()).await;
        let target = format!("s3://{bucket}/indexes/xom");
        let job = json!({
            "index_id": "xom",
            "corpus": format!("s3://{bucket}/corpora/xom/"),
            "target": target,
            "shard_chunks": 64
        });
        let current = || {
            let raw = raw.clone();
            let bucket = bucket.clone();
            async move { raw.get_object().bucket(bucket).key("indexes/xom/CURRENT").send().await.is_ok() }
        };

        // Plan: shards with work, nothing published yet.
        let plan = builder
            .invoke(json!({"step": "plan", "job": job, "build_id": "run-1"}))
            .await
            .unwrap_or_else(|e| panic!("{e}\n{}", builder.log()));
        assert_eq!(plan["unchanged"], false, "{plan}");
        // The shards to encode are listed in S3, where the workflow's Distributed Map reads
        // its items, not in the answer (the workflow's state).
        assert_eq!(plan["tasks_key"], "indexes/xom/builds/run-1/tasks.json", "{plan}");
        let listed = raw.get_object().bucket(&bucket).key("indexes/xom/builds/run-1/tasks.json").send().await.unwrap();
        let tasks: Vec<u64> = serde_json::from_slice(&listed.body.collect().await.unwrap().into_bytes()).unwrap();
        assert!(tasks.len() >= 2, "one task per shard of 64 chunks: {plan}");
        assert_eq!((plan["task_count"].as_u64(), plan.get("tasks")), (Some(tasks.len() as u64), None), "{plan}");
        assert_eq!(plan["report"]["tokens_beyond_window"], 0, "{plan}");
        assert!(!current().await, "the plan publishes nothing");

        // Encode each shard; the first one's task is missing at first (a transient fault),
        // so that invocation fails and its retry succeeds.
        let task_key = format!("indexes/xom/builds/run-1/task-{:05}.bin", tasks[0]);
        let task_bytes = raw.get_object().bucket(&bucket).key(&task_key).send().await.unwrap();
        let task_bytes = task_bytes.body.collect().await.unwrap().into_bytes().to_vec();
        raw.delete_object().bucket(&bucket).key(&task_key).send().await.unwrap();
        let mut encoded = Vec::new();
        for (i, shard) in tasks.iter().enumerate() {
            let event = json!({"step": "encode", "job": plan["job"], "build_id": "run-1", "shard": shard});
            if i == 0 {
                let err = builder.invoke(event.clone()).await.unwrap_err();
                assert!(err["errorMessage"].as_str().unwrap().contains("no such task"), "{err}");
                raw.put_object()
                    .bucket(&bucket)
                    .key(&task_key)
                    .body(ByteStream::from(task_bytes.clone()))
                    .send()
                    .await
                    .unwrap();
            }
            let out = builder.invoke(event).await.unwrap_or_else(|e| panic!("{e}\n{}", builder.log()));
            assert_eq!(out["shard"], *shard, "{out}");
            encoded.push(out);
        }
        assert!(!current().await, "encoding publishes nothing");

        // Merge, as the workflow asks it (the encode results stay in S3): the version is
        // published with every chunk encoded once, the report counting every encode.
        let merged = builder
            .invoke(json!({"step": "merge", "job": plan["job"], "build_id": "run-1"}))
            .await
            .unwrap_or_else(|e| panic!("{e}\n{}", builder.log()));
        assert_eq!(merged["workers"], json!(encoded.len()), "{merged}");
        assert!(merged["version"].is_string(), "{merged}");
        assert_eq!(merged["chunks"], plan["report"]["chunks"], "{merged}");
        assert_eq!(merged["chunks_encoded"], plan["report"]["chunks_encoded"], "{merged}");
        assert!(current().await);
        let left = raw.list_objects_v2().bucket(&bucket).prefix("indexes/xom/builds/").send().await.unwrap();
        assert_eq!(left.key_count(), Some(0), "the build's files are removed after the merge");

        // The same job again: unchanged at the plan, no task.
        let again = builder
            .invoke(json!({"step": "plan", "job": job, "build_id": "run-2"}))
            .await
            .unwrap_or_else(|e| panic!("{e}\n{}", builder.log()));
        assert_eq!((again["unchanged"].as_bool(), again["task_count"].as_u64()), (Some(true), Some(0)));

        // A merge whose shards were never encoded fails, naming what is missing, and
        // publishes nothing.
        let err = builder.invoke(json!({"step": "merge", "job": plan["job"], "build_id": "never"})).await.unwrap_err();
        assert!(err["errorMessage"].as_str().unwrap().contains("plan.bin"), "{err}");

        // The workflow's failure path: the clean step removes a failed build's files, and
        // only its own (the published version stays served).
        for name in ["plan.bin", "task-00000.bin"] {
            raw.put_object()
                .bucket(&bucket)
                .key(format!("indexes/xom/builds/failed-1/{name}"))
                .body(ByteStream::from_static(b"left by a failed step"))
                .send()
                .await
                .unwrap();
        }
        let clean = json!({"step": "clean", "job": job, "build_id": "failed-1"});
        let out = builder.invoke(clean.clone()).await.unwrap_or_else(|e| panic!("{e}\n{}", builder.log()));
        assert_eq!((out["build_id"].as_str(), out["removed"].as_u64()), (Some("failed-1"), Some(2)), "{out}");
        let left = raw.list_objects_v2().bucket(&bucket).prefix("indexes/xom/builds/").send().await.unwrap();
        assert_eq!(left.key_count(), Some(0), "the failed build's files are gone");
        assert!(current().await, "the published version stays");
        let again = builder.invoke(clean).await.unwrap_or_else(|e| panic!("{e}\n{}", builder.log()));
        assert_eq!(again["removed"], 0, "cleaning twice is not an error: {again}");
    });
}

/// The template gives the search functions the name of the secret holding Cohere's key
/// (`SEXTANT_COHERE_KEY_SECRET`), not the key: cold start reads it from Secrets Manager
/// (here moto's), and the hosted reranker (the local Cohere protocol server, which refuses
/// any other key) reranks with it. A secret that cannot be read fails the cold start,
/// naming the secret and never a key.
#[test]
fn the_cohere_key_is_read_from_secrets_manager_at_cold_start() {
    use sextant_rerank::protocol_server::ProtocolServer;
    let s = servers();
    let tmp = tempfile::tempdir().unwrap();
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap().block_on(async {
        let secrets = aws_sdk_secretsmanager::Client::new(&s.config(&s.moto).await);
        let secret = unique("cohere-key");
        secrets.create_secret().name(&secret).secret_string("co-test-key").send().await.unwrap();
        let standin = Arc::new(sextant_core::pipeline::CrossEncoderReranker::new(
            sextant_core::encode::CrossEncoder::load(&sextant_core::encode::default_model_dir().join("ce-standin"))
                .unwrap(),
            "ce-standin",
        ));
        let service =
            ProtocolServer::start("127.0.0.1:0".parse().unwrap(), standin, Some("co-test-key".into())).await.unwrap();
        // A small local index: five of the demo corpus's filing sections.
        let docs = tmp.path().join("docs.jsonl");
        let five: Vec<u8> =
            demo_documents(&["MA"]).split(|&b| b == b'\n').take(5).flat_map(|l| [l, b"\n"].concat()).collect();
        std::fs::write(&docs, five).unwrap();
        let index = tmp.path().join("index");
        let built = Command::new(binary("sextant"))
            .args(["build", "--id", "demo", "--docs"])
            .arg(&docs)
            .arg("--out")
            .arg(&index)
            .output()
            .unwrap();
        assert!(built.status.success(), "{}", String::from_utf8_lossy(&built.stderr));
        let keys = tmp.path().join("keys.json");
        sextant_keys::LocalKeyStore::open(&keys).unwrap().add("sx_dev", "tests", "pro", vec!["*".into()]).unwrap();
        let env = |secret: &str| {
            let mut env = s.function_env(&s.seaweed, &s.moto);
            env.extend(
                [
                    ("AWS_ENDPOINT_URL_SECRETS_MANAGER", s.moto.as_str()),
                    ("SEXTANT_INDEXES", &index.display().to_string()),
                    ("SEXTANT_KEYS", &keys.display().to_string()),
                    ("SEXTANT_RERANK_SERVICE", "cohere"),
                    ("SEXTANT_RERANK_ENDPOINT", &service.url()),
                    ("SEXTANT_RERANK_TIMEOUT_MS", "30000"),
                    ("SEXTANT_COHERE_KEY_SECRET", secret),
                ]
                .map(|(k, v)| (k.to_string(), v.to_string())),
            );
            env
        };
        let retrieve = Function::start("sextant-retrieve", &env(&secret), tmp.path()).await;
        let ask = json!({"query": "cross-border volume growth", "top_k": 3});
        let (status, _, body) = retrieve.http("POST", "/v1/retrieve", Some("sx_dev"), Some(ask.clone())).await;
        assert_eq!(status, 200, "{body}\n{}", retrieve.log());
        assert_eq!(body["meta"]["rerank"]["status"], "applied", "{body}\n{}", retrieve.log());
        assert_eq!(service.last_model().as_deref(), Some("rerank-v3.5"));
        assert!(!retrieve.log().contains("co-test-key"), "the key is never logged");

        let missing = unique("no-such-secret");
        let mut broken = Function::start("sextant-retrieve", &env(&missing), tmp.path()).await;
        // The process ends during init, as Lambda reports a Runtime.ExitError, its log
        // saying why.
        let t = Instant::now();
        let status = loop {
            if let Some(status) = broken.child.try_wait().unwrap() {
                break status;
            }
            assert!(t.elapsed() < Duration::from_secs(120), "cold start did not fail\n{}", broken.log());
            tokio::time::sleep(Duration::from_millis(200)).await;
        };
        assert!(!status.success());
        let log = broken.log();
        assert!(log.contains(&missing) && log.contains("GetSecretValue"), "{log}");
    });
}

/// A sharded index on AWS: `sextant publish` puts it in S3 as one version of 3 shards; 3
/// `shard` functions, given no model, each load their shard, and a `search` function is their router,
/// asking them with the official SDK's Lambda `Invoke`. Every answer (retrieve, search,
/// the knowledge-base API, /v1/context) is the one a function serving the single index
/// gives, ids, scores and citations, before and after the index-build function makes it 2
/// shards from the published version's vectors (the router swaps to it warm; each shard
/// loads it when first asked about it). A shard function that dies is left out at the
/// deadline, one whose shard does not fit its memory fails at once: both answer 200 from the other
/// shards, `meta.shards` = `{2, 3}` and `degraded`; with none left, a 503.
#[test]
fn a_sharded_index_in_s3_is_served_by_a_router_function_over_shard_functions() {
    let s = servers();
    let logs = tempfile::tempdir().unwrap();
    let built = tempfile::tempdir().unwrap();
    let (single, sharded) = support::cli::apple_single_and_sharded(built.path());
    let key = "sx_shard_functions";
    let keys = built.path().join("keys.json");
    std::fs::write(&keys, "{}").unwrap();
    sextant_keys::LocalKeyStore::open(&keys).unwrap().add(key, "tests", "pro", vec!["*".into()]).unwrap();
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap().block_on(async {
        let bucket = unique("shards");
        create_bucket(&s.config(&s.seaweed).await, &bucket).await;
        let (one_at, three_at) = (format!("s3://{bucket}/one/apple"), format!("s3://{bucket}/three/apple"));
        cli(&s, &s.moto, &["publish", "--index", single.to_str().unwrap(), "--to", &one_at]);
        let published: Value = serde_json::from_str(&cli(
            &s,
            &s.moto,
            &["publish", "--index", sharded.to_str().unwrap(), "--to", &three_at],
        ))
        .unwrap();
        let version = published["version"].as_str().unwrap().to_string();
        let pointer: Value = serde_json::from_str(&cli(&s, &s.moto, &["versions", &three_at])).unwrap();
        assert_eq!(pointer["current"]["shards"], 3, "{pointer}");

        let mut env = s.function_env(&s.seaweed, &s.moto);
        env.push(("SEXTANT_KEYS".into(), keys.display().to_string()));
        let with = |extra: &[(&str, &str)]| {
            let mut e = env.clone();
            e.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
            e
        };
        // The shard functions ship without the models layer: their model directory is empty.
        let no_models = tempfile::tempdir().unwrap();
        let no_models = no_models.path().to_str().unwrap();
        let mut shards = Vec::new();
        for k in 0..3 {
            let shard = k.to_string();
            let e =
                with(&[("SEXTANT_INDEXES", &three_at), ("SEXTANT_SHARD", &shard), ("SEXTANT_MODEL_DIR", no_models)]);
            shards.push(Function::start("sextant-shard", &e, logs.path()).await);
        }
        // Shard 2's function is also deployed once more with too little memory for its
        // shard (97 MB, 1 MiB beside a shard function's reserve): it refuses to load it, so
        // every question to it fails.
        let e = with(&[("SEXTANT_INDEXES", &three_at), ("SEXTANT_SHARD", "2"), ("SEXTANT_MEMORY_MB", "97")]);
        let broken = Function::start("sextant-shard", &e, logs.path()).await;
        let mut named: Vec<(String, Arc<RuntimeApi>, Duration)> = shards
            .iter()
            .enumerate()
            .map(|(k, f)| (format!("apple-shard-{k}"), f.api.clone(), Duration::from_secs(60)))
            .collect();
        named.push(("broken-shard-2".into(), broken.api.clone(), Duration::from_secs(60)));
        for (k, f) in shards.iter().enumerate().take(2) {
            named.push((format!("broken-shard-{k}"), f.api.clone(), Duration::from_secs(60)));
        }
        let lambda = LambdaService::start(named).await;
        let router_env = |pattern: &str, deadline_ms: &str| {
            with(&[
                ("SEXTANT_INDEXES", &three_at),
                ("SEXTANT_SHARD_FUNCTION", pattern),
                ("SEXTANT_SHARD_DEADLINE_MS", deadline_ms),
                ("SEXTANT_REFRESH_SECS", "1"),
                ("AWS_ENDPOINT_URL_LAMBDA", &lambda.url),
            ])
        };
        let router = Function::start("sextant-search", &router_env("apple-shard-{k}", "4000"), logs.path()).await;
        let one = Function::start("sextant-search", &with(&[("SEXTANT_INDEXES", &one_at)]), logs.path()).await;
        for (path, body) in support::cli::apple_requests() {
            let (a, b) = (ask(&one, key, path, body.clone()).await, ask(&router, key, path, body.clone()).await);
            let results = if path == "/v1/retrieve" { "chunks" } else { "results" };
            assert!(!a[results].as_array().unwrap().is_empty(), "{path} {body}");
            assert_eq!(a[results], b[results], "{path} {body}: the same results, scores and citations");
            assert_eq!(b["meta"]["shards"], json!({"answered": 3, "of": 3}), "{path} {body}");
            assert_eq!(b["meta"]["degraded"], json!(false), "{path} {body}");
        }
        let kb = json!({"IndexId": "apple", "Query": "net sales by product", "SearchFilters": [{"year": 2024}]});
        let (a, b) =
            (ask(&one, key, "/ws/index/retrieve", kb.clone()).await, ask(&router, key, "/ws/index/retrieve", kb).await);
        assert!(!a["Data"]["Nodes"].as_array().unwrap().is_empty(), "{a}");
        assert_eq!(a["Data"]["Nodes"], b["Data"]["Nodes"]);
        let question = json!({"question": "What did Apple say about competition in its risk factors?"});
        let (a, b) =
            (ask(&one, key, "/v1/context", question.clone()).await, ask(&router, key, "/v1/context", question).await);
        assert!(!a["result"]["passages"].as_array().unwrap().is_empty(), "{a}");
        assert_eq!(a["result"]["passages"], b["result"]["passages"]);
        for (k, shard) in shards.iter().enumerate() {
            assert!(
                shard.log().contains("shard loaded") && shard.log().contains(&version),
                "shard {k}:\n{}",
                shard.log()
            );
            // Its whole process, at its peak and with its (small) shard, fits the reserve
            // a shard function keeps for itself: it loads no model.
            let status = std::fs::read_to_string(format!("/proc/{}/status", shard.child.id())).unwrap();
            let peak_kib: u64 = status
                .lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.split_whitespace().next()?.parse().ok())
                .unwrap();
            eprintln!("shard function {k}: peak {} MiB", peak_kib >> 10);
            assert!(peak_kib << 10 < sextant_aws::memory::SHARD_RESERVE_BYTES, "shard {k}: peak {peak_kib} KiB");
        }
        let (status, _, health) = router.http("GET", "/health", None, None).await;
        assert_eq!((status, &health["indexVersions"]["apple"]), (200, &json!(version)), "{health}");
        // The events/ question, sent to a shard function as by hand (no version: the
        // current one): each chunk's score is its dense similarity to the query, which
        // the shard's own vectors give.
        let event: Value =
            serde_json::from_slice(&std::fs::read(repo().join("events/shard/dense.json")).unwrap()).unwrap();
        let answer = shards[0].invoke(event.clone()).await.unwrap_or_else(|e| panic!("{e}\n{}", shards[0].log()));
        let local = sextant_core::storage::LocalDir::new(&sharded);
        let root = sextant_core::shards::read_root(&local).unwrap().unwrap().0;
        let shard0 = sextant_core::shards::load_shard(&local, &root, 0).unwrap().0;
        let query: Vec<f32> =
            event["request"]["queries"][0].as_array().unwrap().iter().map(|x| x.as_f64().unwrap() as f32).collect();
        let rows = answer["rows"][0].as_array().unwrap_or_else(|| panic!("{answer}"));
        assert_eq!((answer["op"].as_str(), rows.len()), (Some("dense"), 3), "{answer}");
        for (chunk, got) in rows.iter().enumerate() {
            let want = shard0.dense.score(chunk, &query);
            assert!((got.as_f64().unwrap() as f32 - want).abs() < 1e-4, "chunk {chunk}: {got} against {want}");
        }
        let err = shards[0].invoke(json!({"request": {"op": "sing"}})).await.unwrap_err();
        assert_eq!(err["errorType"], "InvalidEvent", "{err}");

        // A shard function that fails every question (here: its shard does not fit) is left out
        // as soon as it fails, long before the deadline (60 s); the answer comes from the
        // others and says so.
        let degraded = Function::start("sextant-search", &router_env("broken-shard-{k}", "60000"), logs.path()).await;
        let (path, body) = support::cli::apple_requests().remove(0);
        let t = Instant::now();
        let b = ask(&degraded, key, path, body.clone()).await;
        assert_eq!((&b["meta"]["shards"], &b["meta"]["degraded"]), (&json!({"answered": 2, "of": 3}), &json!(true)));
        assert!(!b["chunks"].as_array().unwrap().is_empty(), "the other shards answer");
        assert!(t.elapsed() < Duration::from_secs(60), "a failing shard is not waited for: {:?}", t.elapsed());
        let log = broken.log();
        assert!(log.contains("needs") && log.contains("\"IndexTooLarge\":1"), "{log}");
        assert!(!log.contains("shard loaded"), "{log}");
        drop(degraded);

        // The index-build function on the same documents: as 3 shards it is the version
        // published (unchanged, nothing published); the build workflow's steps then make it
        // 2 shards from the published version's vectors (nothing encoded). The router swaps
        // to that version warm and asks its 2 shards about it; shard functions 0 and 1 load
        // it at their first question, and the answers are the single index's.
        // The corpus in S3 is the same documents in the same order, in three JSONL files.
        let docs = std::fs::read_to_string(built.path().join("docs.jsonl")).unwrap();
        let lines: Vec<&str> = docs.lines().collect();
        for (i, part) in lines.chunks(lines.len().div_ceil(3)).enumerate() {
            s3_client(&s.config(&s.seaweed).await)
                .put_object()
                .bucket(&bucket)
                .key(format!("corpora/apple/docs-{i}.jsonl"))
                .body(ByteStream::from(format!("{}\n", part.join("\n")).into_bytes()))
                .send()
                .await
                .unwrap();
        }
        let builder = Function::start("sextant-index-build", &env, logs.path()).await;
        let job = json!({"index_id": "apple", "corpus": format!("s3://{bucket}/corpora/apple/"), "target": three_at});
        let mut three = job.clone();
        three["index_shards"] = json!(3);
        let same = builder.invoke(three).await.unwrap_or_else(|e| panic!("{e}\n{}", builder.log()));
        assert_eq!(same["unchanged"], json!(true), "{same}");
        let mut two = job.clone();
        two["index_shards"] = json!(2);
        // Parts of one file each (the smallest part_bytes): the Map of plans, then the gather.
        two["part_bytes"] = json!(1);
        let invoke = |event: Value| {
            let builder = &builder;
            async move { builder.invoke(event).await.unwrap_or_else(|e| panic!("{e}\n{}", builder.log())) }
        };
        let plan_in_parts = |build_id: &'static str| {
            let (invoke, two, raw) = (&invoke, two.clone(), &s);
            async move {
                let listed = invoke(json!({"step": "plan", "job": two, "build_id": build_id})).await;
                assert_eq!((listed["part_count"].as_u64(), listed["index_shards"].as_u64()), (Some(3), Some(2)));
                let parts = s3_client(&raw.config(&raw.seaweed).await)
                    .get_object()
                    .bucket(listed["tasks_bucket"].as_str().unwrap())
                    .key(listed["parts_key"].as_str().unwrap_or_else(|| panic!("{listed}")))
                    .send()
                    .await
                    .unwrap();
                let parts: Vec<u32> =
                    serde_json::from_slice(&parts.body.collect().await.unwrap().into_bytes()).unwrap();
                assert_eq!(parts, [0, 1, 2]);
                let mut documents = 0;
                for part in parts {
                    let event = json!({"step": "plan_part", "job": listed["job"], "build_id": build_id, "part": part});
                    let out = invoke(event).await;
                    assert_eq!((out["part"].as_u64(), out["tasks"].as_u64()), (Some(part as u64), Some(0)), "{out}");
                    documents += out["documents"].as_u64().unwrap();
                }
                let plan = invoke(json!({"step": "gather", "job": listed["job"], "build_id": build_id})).await;
                assert_eq!(plan["report"]["documents"].as_u64(), Some(documents), "{plan}");
                plan
            }
        };
        let plan = plan_in_parts("reshard").await;
        assert_eq!((plan["unchanged"].as_bool(), plan["task_count"].as_u64()), (Some(false), Some(0)), "{plan}");
        // The Map of merges: one merge_shard invocation per index shard listed in S3, then
        // publish. A whole-index merge of a sharded build is refused, naming the steps.
        assert_eq!(plan["index_shards"], 2, "{plan}");
        let listed = s3_client(&s.config(&s.seaweed).await)
            .get_object()
            .bucket(&bucket)
            .key(plan["merges_key"].as_str().unwrap_or_else(|| panic!("{plan}")))
            .send()
            .await
            .unwrap();
        let merges: Vec<u32> = serde_json::from_slice(&listed.body.collect().await.unwrap().into_bytes()).unwrap();
        assert_eq!(merges, [0, 1]);
        let step = |step: &str| json!({"step": step, "job": plan["job"], "build_id": "reshard"});
        let err = builder.invoke(step("merge")).await.unwrap_err();
        assert!(err["errorMessage"].as_str().unwrap().contains("merge_shard"), "{err}");
        let mut merged_chunks = 0;
        for shard in merges {
            let mut event = step("merge_shard");
            event["shard"] = json!(shard);
            let out = builder.invoke(event).await.unwrap_or_else(|e| panic!("{e}\n{}", builder.log()));
            assert_eq!(out["shard"], shard, "{out}");
            merged_chunks += out["chunks"].as_u64().unwrap();
            if shard == 0 {
                // Publishing before every shard is merged fails, naming the one missing,
                // and moves nothing.
                let err = builder.invoke(step("publish")).await.unwrap_err();
                assert!(err["errorMessage"].as_str().unwrap().contains("merged-001.json"), "{err}");
                let pointer: Value = serde_json::from_str(&cli(&s, &s.moto, &["versions", &three_at])).unwrap();
                assert_eq!(pointer["current"]["version"], json!(version), "{pointer}");
            }
        }
        // A staged shard that is not the one its merge made (here: its manifest changed
        // afterwards) fails the publication, naming it, and moves nothing.
        let raw = s3_client(&s.config(&s.seaweed).await);
        let staged = format!(
            "{}/builds/reshard/version/shards/001/manifest.json",
            three_at.split_once(&format!("{bucket}/")).unwrap().1
        );
        let good = raw.get_object().bucket(&bucket).key(&staged).send().await.unwrap();
        let good = good.body.collect().await.unwrap().into_bytes().to_vec();
        let mut bad = good.clone();
        bad.push(b' ');
        raw.put_object().bucket(&bucket).key(&staged).body(ByteStream::from(bad)).send().await.unwrap();
        let err = builder.invoke(step("publish")).await.unwrap_err();
        assert!(err["errorMessage"].as_str().unwrap().contains("the manifest the root names"), "{err}");
        let pointer: Value = serde_json::from_str(&cli(&s, &s.moto, &["versions", &three_at])).unwrap();
        assert_eq!(pointer["current"]["version"], json!(version), "{pointer}");
        raw.put_object().bucket(&bucket).key(&staged).body(ByteStream::from(good)).send().await.unwrap();
        let merged = builder.invoke(step("publish")).await.unwrap_or_else(|e| panic!("{e}\n{}", builder.log()));
        assert_eq!(
            (merged["chunks_encoded"].as_u64(), merged["chunks_reused"].as_u64()),
            (Some(0), merged["chunks"].as_u64())
        );
        assert_eq!(merged["chunks"].as_u64(), Some(merged_chunks), "{merged}");
        let v2 = merged["version"].as_str().unwrap_or_else(|| panic!("{merged}")).to_string();
        let left = s3_client(&s.config(&s.seaweed).await)
            .list_objects_v2()
            .bucket(&bucket)
            .prefix(format!("{}/builds/", three_at.trim_start_matches(&format!("s3://{bucket}/"))))
            .send()
            .await
            .unwrap();
        assert_eq!(left.key_count(), Some(0), "the build's files are removed after publishing");
        let pointer: Value = serde_json::from_str(&cli(&s, &s.moto, &["versions", &three_at])).unwrap();
        assert_eq!((&pointer["current"]["version"], &pointer["current"]["shards"]), (&json!(v2), &json!(2)));
        let t = Instant::now();
        loop {
            let (_, _, health) = router.http("GET", "/health", None, None).await;
            if health["indexVersions"]["apple"] == json!(v2) {
                break;
            }
            assert!(t.elapsed() < Duration::from_secs(120), "the router did not swap to {v2}:\n{}", router.log());
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
        for (path, body) in support::cli::apple_requests() {
            let (a, b) = (ask(&one, key, path, body.clone()).await, ask(&router, key, path, body.clone()).await);
            let results = if path == "/v1/retrieve" { "chunks" } else { "results" };
            assert_eq!(a[results], b[results], "{path} {body}: the same answer from version {v2}");
            assert_eq!(b["meta"]["shards"], json!({"answered": 2, "of": 2}), "{path} {body}");
        }
        for (k, shard) in shards.iter().enumerate().take(2) {
            assert!(shard.log().contains(&v2), "shard {k} loaded {v2}:\n{}", shard.log());
        }
        // Planned in parts again, the build is the version just published: unchanged, and
        // the build's files are gone.
        let again = plan_in_parts("again").await;
        assert_eq!((again["unchanged"].as_bool(), again["task_count"].as_u64()), (Some(true), Some(0)), "{again}");
        let pointer: Value = serde_json::from_str(&cli(&s, &s.moto, &["versions", &three_at])).unwrap();
        assert_eq!(pointer["current"]["version"], json!(v2), "{pointer}");
        let left = s3_client(&s.config(&s.seaweed).await)
            .list_objects_v2()
            .bucket(&bucket)
            .prefix(format!("{}/builds/again/", three_at.trim_start_matches(&format!("s3://{bucket}/"))))
            .send()
            .await
            .unwrap();
        assert_eq!(left.key_count(), Some(0), "an unchanged build leaves no files");

        // A shard function that died is left out at the deadline.
        let mut shards = shards;
        let mut dead = shards.remove(1);
        dead.child.kill().unwrap();
        dead.child.wait().unwrap();
        let t = Instant::now();
        let b = ask(&router, key, path, body.clone()).await;
        assert_eq!((&b["meta"]["shards"], &b["meta"]["degraded"]), (&json!({"answered": 1, "of": 2}), &json!(true)));
        assert!(t.elapsed() >= Duration::from_secs(4), "left out at the 4 s deadline: {:?}", t.elapsed());
        for mut f in shards {
            f.child.kill().unwrap();
            f.child.wait().unwrap();
        }
        let (status, _, answer) = router.http("POST", path, Some(key), Some(body)).await;
        assert_eq!(status, 503, "no shard answers: {answer}");
        assert_eq!(answer["error"]["code"], "unavailable", "{answer}");
    });
}

/// `body` posted to `path` of `f` with `key`: its answer, which must be a 200.
async fn ask(f: &Function, key: &str, path: &str, body: Value) -> Value {
    let (status, _, answer) = f.http("POST", path, Some(key), Some(body.clone())).await;
    assert_eq!(status, 200, "{path} {body}: {answer}\n{}", f.log());
    answer
}
