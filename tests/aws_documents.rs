//! The document API on AWS, against SeaweedFS (S3 with signatures checked), started by
//! `scripts/ci/aws_servers.sh` (`scripts/ci/test.sh` starts it): documents written through the
//! router land in the index's corpus prefix as JSON and are answered `202 pending`; the
//! build reads that prefix (documents written by the API and raw files uploaded as
//! `aws s3 cp` would) and the next version serves them (`live`); a deleted document leaves
//! the next version; bad input is refused as it is by the embedded server.

mod support;

use std::sync::Arc;

use aws_sdk_s3::primitives::ByteStream;
use axum::body::{to_bytes, Body};
use serde_json::{json, Value};
use sextant_aws::build_job::{self, BuildJob};
use sextant_aws::build_lease::{BuildLease, Debounced};
use sextant_aws::build_workflow::BuildWorkflow;
use sextant_aws::VersionedIndex;
use sextant_core::corpus::Document;
use sextant_core::encode::{default_model_dir, ModelSet};
use sextant_core::pipeline::SharedModels;
use sextant_core::storage::Location;
use sextant_keys::LocalKeyStore;
use sextant_lambda::documents::S3DocumentStore;
use sextant_lambda::{finish_step, handle_build_event, Builds};
use sextant_server::{router, ApiConfig, AppState, Indexes, ServedIndex};
use support::servers::{create_bucket, s3_client, servers, unique};
use tower::ServiceExt;

const WRITER: &str = "sx_aws_docs_writer";
const READER: &str = "sx_aws_docs_reader";
const ADMIN: &str = "sx_aws_docs_admin";

const HANDBOOK: &str = "# Travel handbook\n\nBook flights at least two weeks ahead of the trip.\n\n\
    - Economy class for flights under six hours\n- Business class above six hours\n\n\
    Hotel nights are reimbursed up to the city's published rate.";

/// One request through the router; the status and the JSON body.
async fn call(app: &axum::Router, method: &str, path: &str, key: &str, ct: &str, body: &[u8]) -> (u16, Value) {
    let req = axum::http::Request::builder()
        .method(method)
        .uri(path)
        .header("authorization", format!("Bearer {key}"))
        .header("content-type", ct)
        .body(Body::from(body.to_vec()))
        .unwrap();
    let resp = app.clone().oneshot(req).await.unwrap();
    let status = resp.status().as_u16();
    let bytes = to_bytes(resp.into_body(), 1 << 24).await.unwrap();
    (status, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
}

/// The keys of the corpus prefix, sorted.
async fn corpus_keys(s3: &aws_sdk_s3::Client, bucket: &str) -> Vec<String> {
    let out = s3.list_objects_v2().bucket(bucket).prefix("corpora/kb/").send().await.unwrap();
    let mut keys: Vec<String> = out.contents().iter().filter_map(|o| o.key().map(str::to_string)).collect();
    keys.sort();
    keys
}

struct Fixture {
    bucket: String,
    config: aws_config::SdkConfig,
    models: Arc<SharedModels>,
    state: Arc<AppState>,
    app: axum::Router,
}

impl Fixture {
    fn job(&self) -> BuildJob {
        BuildJob::from_event(
            json!({
                "index_id": "kb",
                "corpus": format!("s3://{}/corpora/kb/", self.bucket),
                "target": format!("s3://{}/indexes/kb", self.bucket),
            }),
            &Default::default(),
        )
        .unwrap()
    }

    /// Runs the index build of the corpus prefix and swaps the published version in, as a
    /// warm function's refresh does.
    async fn build_and_refresh(&self) -> build_job::BuildReport {
        let report = build_job::run(&self.job(), self.models.set(), &self.config).await.unwrap();
        self.refresh().await;
        report
    }

    async fn refresh(&self) {
        let source = VersionedIndex::new(&self.config, &Location::parse(&self.job().target).unwrap()).unwrap();
        let loaded = sextant_aws::open_from_s3(&source, &self.models, None).await.unwrap();
        let version = loaded.pointer.version.clone();
        self.state.replace_index("kb", ServedIndex::of(loaded.searcher, loaded.financials), Some(version));
    }

    fn served_ids(&self) -> Vec<String> {
        let served = self.state.loaded_index("kb").unwrap();
        let mut ids: Vec<String> = served.engine().index().documents.iter().map(|d| d.document_id.clone()).collect();
        ids.sort();
        ids
    }
}

/// A bucket whose corpus prefix holds one JSONL corpus of two documents, built and
/// published; the router serving it with the S3 document store.
async fn fixture() -> Fixture {
    let s = servers();
    let config = s.config(&s.seaweed).await;
    let bucket = unique("docs");
    create_bucket(&config, &bucket).await;
    let seed: Vec<String> = [
        ("seed-1", "Quarterly revenue grew on strong card volumes in Europe."),
        ("seed-2", "The refinery outage lowered production in the second quarter."),
    ]
    .iter()
    .map(|(id, text)| {
        serde_json::to_string(&Document {
            document_id: id.to_string(),
            title: id.to_string(),
            document_type: "article".into(),
            segments: vec![text.to_string()],
            ..Default::default()
        })
        .unwrap()
    })
    .collect();
    s3_client(&config)
        .put_object()
        .bucket(&bucket)
        .key("corpora/kb/seed.jsonl")
        .body(ByteStream::from(seed.join("\n").into_bytes()))
        .send()
        .await
        .unwrap();
    let keys = LocalKeyStore::in_memory();
    keys.add(WRITER, "tests", "enterprise", vec!["kb:write".into()]).unwrap();
    keys.add(READER, "tests", "enterprise", vec!["kb".into()]).unwrap();
    keys.add(ADMIN, "tests", "enterprise", vec!["*:admin".into()]).unwrap();
    let state = AppState::new(Arc::new(keys), ApiConfig { default_index: "kb".into(), ..Default::default() });
    state.set_indexes(Indexes::new());
    let models = Arc::new(SharedModels::new(ModelSet::under(&default_model_dir())));
    let corpus = Location::parse(&format!("s3://{bucket}/corpora/kb/")).unwrap();
    state.set_document_store("kb", Arc::new(S3DocumentStore::new(&config, "kb", &corpus, &state).unwrap()));
    let app = router(state.clone());
    let f = Fixture { bucket, config, models, state, app };
    let first = f.build_and_refresh().await;
    assert!(first.published.is_some());
    assert_eq!(f.served_ids(), ["seed-1", "seed-2"]);
    f
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_land_in_the_corpus_prefix_pending_and_the_next_build_serves_them() {
    let f = fixture().await;
    let s3 = s3_client(&f.config);
    let doc = "/v1/indexes/kb/documents";

    // A raw Markdown file through the API: 202, pending, the JSON document in S3.
    let (status, body) =
        call(&f.app, "PUT", &format!("{doc}/travel"), WRITER, "text/markdown", HANDBOOK.as_bytes()).await;
    assert_eq!(status, 202, "{body}");
    assert_eq!((body["status"].as_str(), body["created"].as_bool()), (Some("pending"), Some(true)), "{body}");
    let object = s3.get_object().bucket(&f.bucket).key("corpora/kb/travel.json").send().await.unwrap();
    let stored: Document = serde_json::from_slice(&object.body.collect().await.unwrap().into_bytes()).unwrap();
    assert_eq!((stored.document_id.as_str(), stored.title.as_str()), ("travel", "Travel handbook"));

    // JSON with metadata; replacing it says created: false.
    let policy = json!({"text": "Remote work needs a manager's approval.", "metadata": {"department": "hr"}});
    let (status, _) =
        call(&f.app, "PUT", &format!("{doc}/policy"), WRITER, "application/json", policy.to_string().as_bytes()).await;
    assert_eq!(status, 202);
    let (status, body) =
        call(&f.app, "PUT", &format!("{doc}/policy"), WRITER, "application/json", policy.to_string().as_bytes()).await;
    assert_eq!((status, body["created"].as_bool()), (202, Some(false)), "{body}");

    // The same file uploaded straight into the prefix, as `aws s3 cp handbook.md` does.
    s3.put_object()
        .bucket(&f.bucket)
        .key("corpora/kb/handbook.md")
        .body(ByteStream::from(HANDBOOK.as_bytes().to_vec()))
        .send()
        .await
        .unwrap();

    for id in ["travel", "policy", "handbook"] {
        let (status, body) = call(&f.app, "GET", &format!("{doc}/{id}"), READER, "text/plain", b"").await;
        assert_eq!((status, body["status"].as_str()), (200, Some("pending")), "{id}: {body}");
    }

    // Bad input: the same 4xx as the embedded server, and nothing written.
    let before = corpus_keys(&s3, &f.bucket).await;
    for (path, key, ct, body, want) in [
        (format!("{doc}/a..b"), WRITER, "text/plain", &b"text"[..], 400),
        // Folders in an id: a corpus prefix names documents by file name, so it is refused.
        (format!("{doc}/a%2Fb"), WRITER, "text/plain", b"text", 400),
        (format!("{doc}/x"), WRITER, "application/pdf", b"%PDF-1.4", 400),
        (format!("{doc}/x"), WRITER, "image/png", b"\x89PNG", 415),
        (format!("{doc}/x"), WRITER, "text/plain", b"\xff\xfe bad utf-8", 400),
        (format!("{doc}/x"), WRITER, "application/json", br#"{"text": "a", "segments": ["b"]}"#, 400),
        (
            format!("{doc}/x"),
            WRITER,
            "application/json",
            br#"{"text": "a", "metadata": {"n": {"n": {"n": {"n": {"n": {"n": {"n": {"n": {"n": 1}}}}}}}}}}"#,
            400,
        ),
        (format!("{doc}/x"), READER, "text/plain", b"text", 403),
    ] {
        let (status, body) = call(&f.app, "PUT", &path, key, ct, body).await;
        assert_eq!(status, want, "{path} {ct}: {body}");
        assert!(body["error"]["message"].as_str().is_some_and(|m| !m.is_empty()), "{body}");
    }
    assert_eq!(corpus_keys(&s3, &f.bucket).await, before, "nothing half-stored");

    // The build reads the prefix: the JSONL corpus, the API's documents and the raw file.
    let report = f.build_and_refresh().await;
    assert!(report.published.is_some());
    assert_eq!(f.served_ids(), ["handbook", "policy", "seed-1", "seed-2", "travel"]);
    for id in ["travel", "policy", "handbook"] {
        let (status, body) = call(&f.app, "GET", &format!("{doc}/{id}"), READER, "text/plain", b"").await;
        assert_eq!((status, body["status"].as_str()), (200, Some("live")), "{id}: {body}");
    }
    // Uploaded or written through the API, a file is segmented the same way.
    let served = f.state.loaded_index("kb").unwrap();
    let segments_of =
        |id: &str| served.engine().index().documents.iter().find(|d| d.document_id == id).unwrap().segments.clone();
    assert_eq!(segments_of("handbook"), segments_of("travel"));
    assert_eq!(segments_of("handbook").len(), 5);
    let (_, body) = call(&f.app, "GET", &format!("{doc}/policy"), READER, "text/plain", b"").await;
    assert_eq!(body["metadata"]["department"], "hr", "{body}");

    // A listing pages through the prefix's documents in id order (not the JSONL corpus).
    let (status, page) = call(&f.app, "GET", &format!("{doc}?limit=2"), READER, "text/plain", b"").await;
    assert_eq!(status, 200, "{page}");
    let ids =
        |p: &Value| p["documents"].as_array().unwrap().iter().map(|d| d["documentId"].clone()).collect::<Vec<_>>();
    assert_eq!(ids(&page), [json!("handbook"), json!("policy")]);
    let cursor = page["nextCursor"].as_str().unwrap().to_string();
    let (_, page) = call(&f.app, "GET", &format!("{doc}?limit=2&cursor={cursor}"), READER, "text/plain", b"").await;
    assert_eq!((ids(&page), page["nextCursor"].clone()), (vec![json!("travel")], Value::Null), "{page}");

    // Unchanged inputs publish nothing.
    assert!(f.build_and_refresh().await.published.is_none());

    // DELETE: 202, gone at once from the store, gone from the next version.
    let (status, body) = call(&f.app, "DELETE", &format!("{doc}/travel"), WRITER, "text/plain", b"").await;
    assert_eq!((status, body["status"].as_str()), (202, Some("pending")), "{body}");
    let (status, _) = call(&f.app, "GET", &format!("{doc}/travel"), READER, "text/plain", b"").await;
    assert_eq!(status, 404);
    let (status, _) = call(&f.app, "DELETE", &format!("{doc}/travel"), WRITER, "text/plain", b"").await;
    assert_eq!(status, 404);
    f.build_and_refresh().await;
    assert_eq!(f.served_ids(), ["handbook", "policy", "seed-1", "seed-2"]);

    // A batch: each document its own object, pending; an id with a folder refused alone.
    let batch = json!([
        {"documentId": "faq", "text": "Expenses are filed in Concur within 30 days."},
        {"documentId": "a/b", "text": "Not an object name here."},
        {"documentId": "memo", "segments": ["The offsite moves to Lisbon."], "metadata": {"department": "ops"}},
    ]);
    let batch_path = "/v1/indexes/kb/documents:batch";
    let (status, body) =
        call(&f.app, "POST", batch_path, WRITER, "application/json", batch.to_string().as_bytes()).await;
    assert_eq!(status, 202, "{body}");
    assert_eq!((body["written"].as_u64(), body["failed"].as_u64()), (Some(2), Some(1)), "{body}");
    assert_eq!(
        (body["results"][0]["status"].as_str(), body["results"][0]["created"].as_bool()),
        (Some("pending"), Some(true))
    );
    assert_eq!(body["results"][1]["error"]["field"], "documentId", "{body}");
    let keys = corpus_keys(&s3, &f.bucket).await;
    assert!(keys.contains(&"corpora/kb/faq.json".to_string()) && keys.contains(&"corpora/kb/memo.json".to_string()));
    f.build_and_refresh().await;
    assert_eq!(f.served_ids(), ["faq", "handbook", "memo", "policy", "seed-1", "seed-2"]);

    // The index as a key sees it: the published version served; indexes are the build
    // workflow's to create here, which the API says.
    let (status, body) = call(&f.app, "GET", "/v1/indexes/kb", READER, "text/plain", b"").await;
    assert_eq!((status, body["documents"].as_u64(), body["writable"].as_bool()), (200, Some(6), Some(true)), "{body}");
    assert_eq!(body["version"].as_str(), f.state.version("kb").as_deref(), "{body}");
    let (status, body) = call(&f.app, "GET", "/v1/indexes", READER, "text/plain", b"").await;
    assert_eq!((status, body["indexes"][0]["index"].as_str()), (200, Some("kb")), "{body}");
    let (status, body) = call(&f.app, "PUT", "/v1/indexes/other", ADMIN, "application/json", b"{}").await;
    assert_eq!((status, body["error"]["code"].as_str()), (501, Some("not_implemented")), "{body}");

    // A PDF through the API and the same PDF uploaded into the prefix: both read by the
    // same code, each segment on its page, cited with its pages once built.
    let report_pdf = std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/data/pdf/report.pdf")).unwrap();
    let (status, body) = call(&f.app, "PUT", &format!("{doc}/turbines"), WRITER, "application/pdf", &report_pdf).await;
    assert_eq!(status, 202, "{body}");
    let object = s3.get_object().bucket(&f.bucket).key("corpora/kb/turbines.json").send().await.unwrap();
    let stored: Document = serde_json::from_slice(&object.body.collect().await.unwrap().into_bytes()).unwrap();
    assert_eq!(stored.pages.len(), stored.segments.len(), "the JSON document keeps the pages");
    s3.put_object()
        .bucket(&f.bucket)
        .key("corpora/kb/annual.pdf")
        .body(ByteStream::from(report_pdf.clone()))
        .send()
        .await
        .unwrap();
    f.build_and_refresh().await;
    assert_eq!(f.served_ids(), ["annual", "faq", "handbook", "memo", "policy", "seed-1", "seed-2", "turbines"]);
    let served = f.state.loaded_index("kb").unwrap();
    let document = |id: &str| served.engine().index().documents.iter().find(|d| d.document_id == id).unwrap().clone();
    let (annual, turbines) = (document("annual"), document("turbines"));
    assert_eq!((&annual.segments, &annual.pages), (&turbines.segments, &turbines.pages));
    assert_eq!((annual.pages[0], *annual.pages.last().unwrap()), (1, 3));
    let (status, body) = call(&f.app, "GET", &format!("{doc}/annual"), READER, "text/plain", b"").await;
    assert_eq!((status, body["title"].as_str()), (200, Some("Quarterly operating review")), "{body}");
    assert_eq!(body["segments"][0]["page"], 1, "{body}");
    let query = json!({"query": "rare earth magnet suppliers", "index": "kb", "top_k": 3});
    let (status, body) =
        call(&f.app, "POST", "/v1/retrieve", READER, "application/json", query.to_string().as_bytes()).await;
    assert_eq!(status, 200, "{body}");
    let source = &body["chunks"][0]["source"];
    assert!(["annual", "turbines"].contains(&source["documentId"].as_str().unwrap()), "{body}");
    assert!(source["pageNumbers"].as_array().unwrap().contains(&json!(3)), "{body}");
}

/// The lease table (the rate table of `template.yaml`) on moto.
async fn lease_table() -> (aws_config::SdkConfig, String) {
    let s = servers();
    let config = s.config(&s.moto).await;
    let (keys, rate) = (unique("keys"), unique("rate"));
    support::servers::create_tables(&config, &keys, &rate).await;
    (config, rate)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_build_lease_runs_one_build_at_a_time_and_once_more_for_writes_during_it() {
    let (config, table) = lease_table().await;
    let lease = BuildLease::new(&config, &table, 60);
    let runs = std::sync::atomic::AtomicUsize::new(0);
    // While the first build runs, a second write's event arrives: it is queued, not run,
    // and the holder builds once more for it.
    let outcome = lease
        .debounced("kb", "first", || async {
            if runs.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 0 {
                let second = lease.debounced("kb", "second", || async { Ok("second built") }).await.unwrap();
                assert!(matches!(second, Debounced::Queued), "{second:?}");
            }
            Ok("first built")
        })
        .await
        .unwrap();
    assert!(matches!(&outcome, Debounced::Ran(r) if r.len() == 2), "{outcome:?}");
    // Released: the next event builds at once, once.
    let next = lease.debounced("kb", "third", || async { Ok(()) }).await.unwrap();
    assert!(matches!(&next, Debounced::Ran(r) if r.len() == 1), "{next:?}");
    // A failed build lets the lease go and reports the failure.
    let failed = lease
        .debounced("kb", "fourth", || async { Err::<(), _>(sextant_core::Error::invalid("corpus", "broken")) })
        .await;
    assert!(failed.is_err());
    assert!(matches!(lease.debounced("kb", "fifth", || async { Ok(()) }).await.unwrap(), Debounced::Ran(_)));
    // Another index has its own lease.
    assert!(lease.acquire("kb", "holder").await.unwrap().is_some());
    assert!(lease.acquire("kb", "other").await.unwrap().is_none());
    assert!(lease.acquire("other-index", "other").await.unwrap().is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s3_events_start_one_build_at_a_time_that_serves_an_uploaded_file() {
    let f = fixture().await;
    let (dynamo, table) = lease_table().await;
    let lease = BuildLease::new(&dynamo, &table, 60);
    // No workflow: the function builds itself, debounced by the lease.
    let starts = Builds { lease: Some(lease), ..Default::default() };
    s3_client(&f.config)
        .put_object()
        .bucket(&f.bucket)
        .key("corpora/kb/q3-report.txt")
        .body(ByteStream::from(b"Operating margin widened to 58 percent in the third quarter.".to_vec()))
        .send()
        .await
        .unwrap();
    let event_file =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../events/index-build/s3-object-created.json");
    let event: Value = serde_json::from_slice(&std::fs::read(event_file).unwrap()).unwrap();
    let job = f.job();
    // The function's environment names the job (SEXTANT_BUILD_INDEX_ID, _CORPUS, _TARGET).
    let defaults = json!({"index_id": job.index_id, "corpus": job.corpus, "target": job.target});
    let defaults = defaults.as_object().unwrap();
    let models = f.models.set();
    // Two events at once (two writes): one builds, the other is queued behind it.
    let (a, b) = tokio::join!(
        handle_build_event(event.clone(), models, &f.config, defaults, &starts),
        handle_build_event(event.clone(), models, &f.config, defaults, &starts),
    );
    let (a, b) = (a.unwrap(), b.unwrap());
    let (queued, built): (Vec<&Value>, Vec<&Value>) = [&a, &b].into_iter().partition(|r| r["queued"] == true);
    assert_eq!((queued.len(), built.len()), (1, 1), "{a}\n{b}");
    let builds = built[0]["builds"].as_array().unwrap();
    assert!(!builds.is_empty() && builds[0]["version"].is_string(), "{}", built[0]);
    f.refresh().await;
    assert!(f.served_ids().contains(&"q3-report".to_string()), "{:?}", f.served_ids());
    let (status, body) = call(&f.app, "GET", "/v1/indexes/kb/documents/q3-report", READER, "text/plain", b"").await;
    assert_eq!((status, body["status"].as_str()), (200, Some("live")), "{body}");
    // The deletion's event: the next version no longer holds it.
    s3_client(&f.config).delete_object().bucket(&f.bucket).key("corpora/kb/q3-report.txt").send().await.unwrap();
    let event_file =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../events/index-build/s3-object-deleted.json");
    let deleted: Value = serde_json::from_slice(&std::fs::read(event_file).unwrap()).unwrap();
    let out = handle_build_event(deleted, models, &f.config, defaults, &starts).await.unwrap();
    assert_eq!(out["builds"].as_array().map(Vec::len), Some(1), "{out}");
    f.refresh().await;
    assert_eq!(f.served_ids(), ["seed-1", "seed-2"]);
}

/// As deployed, builds go through the workflow: S3 events that arrive together start one
/// execution holding the index's lease (on moto's Step Functions), the others are counted;
/// the execution's last step starts one more for the writes that arrived during it, then
/// releases the lease; a failed run releases it whatever was written; the schedule asks the
/// same way. No build runs in the function itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corpus_events_and_the_schedule_start_the_workflow_one_execution_at_a_time() {
    let (config, table) = lease_table().await;
    let sfn = aws_sdk_sfn::Client::new(&config);
    let machine = sfn
        .create_state_machine()
        .name(unique("index-build"))
        .role_arn("arn:aws:iam::123456789012:role/sextant-build")
        .definition(r#"{"StartAt": "Done", "States": {"Done": {"Type": "Succeed"}}}"#)
        .send()
        .await
        .unwrap();
    let arn = machine.state_machine_arn().to_string();
    let executions = || async {
        let listed = sfn.list_executions().state_machine_arn(&arn).send().await.unwrap();
        let mut names: Vec<String> = listed.executions().iter().map(|e| e.name().to_string()).collect();
        names.sort();
        names
    };
    let builds = Builds {
        lease: Some(BuildLease::new(&config, &table, 3600)),
        workflow: Some(BuildWorkflow::new(&config, &arn)),
        catalog: None,
    };
    let defaults =
        json!({"index_id": "kb", "corpus": "s3://sextant-kb/corpora/kb/", "target": "s3://sextant-kb/indexes/kb"});
    let defaults = defaults.as_object().unwrap();
    let models = ModelSet::under(&default_model_dir());
    let event_file =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../events/index-build/s3-object-created.json");
    let event: Value = serde_json::from_slice(&std::fs::read(event_file).unwrap()).unwrap();

    // Three writes at once: one execution, the other two counted (those counted before
    // it took the lease are read by it; those after, by one more execution).
    let (a, b, c) = tokio::join!(
        handle_build_event(event.clone(), &models, &config, defaults, &builds),
        handle_build_event(event.clone(), &models, &config, defaults, &builds),
        handle_build_event(event.clone(), &models, &config, defaults, &builds),
    );
    let answers = [a.unwrap(), b.unwrap(), c.unwrap()];
    let started: Vec<&Value> = answers.iter().filter(|r| r["started"].is_string()).collect();
    assert_eq!(started.len(), 1, "{answers:?}");
    assert_eq!(answers.iter().filter(|r| r["queued"] == true).count(), 2, "{answers:?}");
    // One more write while it runs.
    let queued = handle_build_event(event.clone(), &models, &config, defaults, &builds).await.unwrap();
    assert_eq!(queued["queued"], true, "{queued}");
    let first = started[0]["started"].as_str().unwrap().to_string();
    assert_eq!(executions().await, std::slice::from_ref(&first));
    // The execution's input is the job with the lease it holds.
    let described = sfn.list_executions().state_machine_arn(&arn).send().await.unwrap();
    let execution_arn = described.executions()[0].execution_arn().to_string();
    let input = sfn.describe_execution().execution_arn(&execution_arn).send().await.unwrap();
    let job: Value = serde_json::from_str(input.input().unwrap()).unwrap();
    assert_eq!((job["index_id"].as_str(), job["lease"]["holder"].as_str()), (Some("kb"), Some(first.as_str())));

    // Its last step: writes arrived during it, so one more execution reads them.
    let finish = |job: &Value, failed: bool| {
        let job = sextant_aws::build_job::BuildJob::from_event(job.clone(), defaults).unwrap();
        let builds = builds.clone();
        async move { finish_step(job, failed, &builds).await.unwrap() }
    };
    let out = finish(&job, false).await;
    let again = out["again"].as_str().expect("a new execution").to_string();
    assert_ne!(again, first);
    let names = executions().await;
    assert_eq!(names.len(), 2, "{names:?}");
    // A write while the second runs is counted; the second's last step starts a third.
    let queued = handle_build_event(event.clone(), &models, &config, defaults, &builds).await.unwrap();
    assert_eq!(queued["queued"], true, "{queued}");
    let second = executions_input(&sfn, &arn, &again).await;
    let out = finish(&second, false).await;
    let third = out["again"].as_str().expect("one more for the write").to_string();
    // The third saw every write: its end releases the lease, and starts nothing.
    let third_job = executions_input(&sfn, &arn, &third).await;
    assert_eq!(finish(&third_job, false).await, json!({"lease": "released", "again": null}));
    assert_eq!(executions().await.len(), 3);

    // The schedule asks the same way; a failed run lets the lease go whatever was written.
    let request_file =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../events/index-build/build-request.json");
    let scheduled: Value = serde_json::from_slice(&std::fs::read(request_file).unwrap()).unwrap();
    let out = handle_build_event(scheduled.clone(), &models, &config, defaults, &builds).await.unwrap();
    let fourth = out["started"].as_str().expect("started").to_string();
    assert_eq!(handle_build_event(event.clone(), &models, &config, defaults, &builds).await.unwrap()["queued"], true);
    let fourth_job = executions_input(&sfn, &arn, &fourth).await;
    assert_eq!(finish(&fourth_job, true).await, json!({"lease": "released", "again": null}));
    let out = handle_build_event(scheduled, &models, &config, defaults, &builds).await.unwrap();
    assert!(out["started"].is_string(), "released: the next request starts at once: {out}");
    // A run started by hand holds no lease: its last step hands nothing on.
    let by_hand =
        json!({"index_id": "kb", "corpus": "s3://sextant-kb/corpora/kb/", "target": "s3://sextant-kb/indexes/kb"});
    assert_eq!(finish(&by_hand, false).await, json!({"lease": "none", "again": null}));
}

/// The input of the execution `name` of state machine `arn`.
async fn executions_input(sfn: &aws_sdk_sfn::Client, arn: &str, name: &str) -> Value {
    let listed = sfn.list_executions().state_machine_arn(arn).send().await.unwrap();
    let e = listed.executions().iter().find(|e| e.name() == name).unwrap_or_else(|| panic!("no execution {name}"));
    let described = sfn.describe_execution().execution_arn(e.execution_arn()).send().await.unwrap();
    serde_json::from_str(described.input().unwrap()).unwrap()
}

/// A sharded build in the workflow's steps, planned in corpus parts (JSONL files, and
/// per-document objects that replace a JSONL line or each other), is the build one process
/// makes of the same prefix: the gather finds the version the one-process build published
/// unchanged, and after a write the version the steps publish is unchanged for one process.
/// The parts learn what the previous version holds from its keys files alone, and a
/// vector a keys file lists that its cache file lost is encoded again by the merge.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sharded_build_planned_in_corpus_parts_is_the_one_process_build() {
    use sextant_aws::build_steps::{
        encode_step, gather_step, merge_shard_step, plan_part_step, plan_step, publish_step, PlanOutput,
    };
    use sextant_core::build::{EncodedKeys, EncodedShard};
    let s = servers();
    let config = s.config(&s.seaweed).await;
    let bucket = unique("parts");
    create_bucket(&config, &bucket).await;
    let s3 = s3_client(&config);
    let put = |key: String, body: String| {
        let s3 = s3.clone();
        let bucket = bucket.clone();
        async move {
            s3.put_object().bucket(bucket).key(key).body(ByteStream::from(body.into_bytes())).send().await.unwrap()
        }
    };
    let line = |id: &str, text: &str| {
        let d = Document {
            document_id: id.into(),
            title: id.into(),
            document_type: "article".into(),
            segments: vec![text.into()],
            ..Default::default()
        };
        serde_json::to_string(&d).unwrap()
    };
    put(
        "corpora/kb/a.jsonl".into(),
        [line("seed-1", "Quarterly revenue grew on card volumes."), line("memo", "The offsite is in Porto.")]
            .join("\n"),
    )
    .await;
    put("corpora/kb/b.jsonl".into(), line("seed-2", "The refinery outage lowered production.")).await;
    // `memo` replaces the JSONL line; of the two `notes` objects the later is kept.
    put("corpora/kb/memo.json".into(), line("memo", "The offsite moves to Lisbon.")).await;
    put("corpora/kb/notes.md".into(), "# Notes\n\nDraft notes on travel.".into()).await;
    put("corpora/kb/notes.txt".into(), "Final notes on travel budgets.".into()).await;
    put("corpora/kb/travel.md".into(), HANDBOOK.into()).await;

    let models = ModelSet::under(&default_model_dir());
    let target = format!("s3://{bucket}/indexes/kb");
    let job = |part_bytes: u64| {
        let event = json!({"index_id": "kb", "corpus": format!("s3://{bucket}/corpora/kb/"), "target": target,
            "index_shards": 2, "part_bytes": part_bytes});
        BuildJob::from_event(event, &Default::default()).unwrap()
    };
    let one = build_job::run(&job(1), &models, &config).await.unwrap();
    // seed-1, memo (the object's), seed-2, notes (the .txt), travel.
    assert!(one.published.is_some() && one.build.documents == 5, "{one:?}");

    // The steps, as the workflow runs them: parts of one object each. Each part reads the
    // current version's keys files only, 32 bytes a chunk, never its cache files.
    let parts = |id: &'static str, count: usize| {
        let (job, models, config) = (job(1), models.clone(), config.clone());
        async move {
            let listed = plan_step(&job, id, &models, &config).await.unwrap();
            assert_eq!((listed.part_count, listed.index_shards), (count, 2), "{listed:?}");
            let mut read = Vec::new();
            for part in 0..listed.part_count as u32 {
                read.push(plan_part_step(&job, id, part, &models, &config).await.unwrap().cache_bytes_read);
            }
            (gather_step(&job, id, &models, &config).await.unwrap(), read)
        }
    };
    // a.jsonl, b.jsonl, memo, notes (both objects in one part), travel.
    let (gathered, read): (PlanOutput, _) = parts("same", 5).await;
    assert!(gathered.unchanged, "planned in parts, the same documents in the same order: {gathered:?}");
    assert_eq!(gathered.report.documents, 5);

    // Each part read the keys file beside each of the version's cache files, and no cache
    // file: 32 bytes a chunk instead of the vectors.
    let keys_read = || async {
        let listed = version_objects(&config, &target, ".keys").await;
        let cache_files = version_objects(&config, &target, ".bin").await;
        assert_eq!(listed.len(), cache_files.iter().filter(|(k, _)| k.contains("/encoded-")).count(), "{listed:?}");
        assert!(!listed.is_empty());
        listed.iter().map(|(_, n)| n).sum::<u64>()
    };
    let one_process_keys = keys_read().await;
    assert!(read.iter().all(|&r| r == one_process_keys), "{read:?} against {one_process_keys} bytes of keys");

    // A new document: the steps encode it alone, merge each index shard and publish.
    put("corpora/kb/faq.md".into(), "Expenses are filed within 30 days.".into()).await;
    let (plan, read) = parts("write", 6).await;
    assert!(read.iter().all(|&r| r == one_process_keys), "{read:?}");
    assert!(!plan.unchanged && plan.task_count == 1, "{plan:?}");
    assert_eq!((plan.report.chunks_encoded, plan.report.documents), (1, 6), "{plan:?}");
    let encoders = (
        sextant_core::encode::DenseEncoder::load(&models.dense).unwrap(),
        sextant_core::encode::SparseEncoder::load(&models.sparse).unwrap(),
    );
    let job = job(1);
    let steps = |id: &'static str, plan: PlanOutput| {
        let (job, models, config, s3, bucket, encoders) = (&job, &models, &config, &s3, &bucket, &encoders);
        async move {
            let o = s3.get_object().bucket(bucket).key(&plan.tasks_key).send().await.unwrap();
            let tasks: Vec<u32> = serde_json::from_slice(&o.body.collect().await.unwrap().into_bytes()).unwrap();
            for task in tasks {
                encode_step(job, id, task, encoders, config).await.unwrap();
            }
            let mut merged = Vec::new();
            for shard in 0..2 {
                merged.push(merge_shard_step(job, id, shard, models, config).await.unwrap().reencoded);
            }
            (merged, publish_step(job, id, config).await.unwrap())
        }
    };
    let (reencoded, published) = steps("write", plan).await;
    assert_eq!(reencoded, [0, 0]);
    assert_eq!((published.build.documents, published.build.chunks_encoded), (6, 1), "{published:?}");
    assert!(published.published.is_some());
    let again = build_job::run(&job, &models, &config).await.unwrap();
    assert!(again.build.unchanged, "one process finds the parts' version its own: {again:?}");
    let pointer = VersionedIndex::new(&config, &Location::parse(&target).unwrap()).unwrap().current().await.unwrap();
    assert_eq!(pointer.shards, 2);

    // One record of index shard 0's cache file damaged after its keys file was written: the
    // plan, reading the keys, takes it as cached; the merge finds it damaged and encodes
    // it again, to the vectors it had.
    let steps_keys = keys_read().await;
    let (cache_file, _) = version_objects(&config, &target, "/encoded-00000.bin").await.remove(0);
    let get = |key: String| {
        let (s3, bucket) = (s3.clone(), bucket.clone());
        async move {
            let o = s3.get_object().bucket(bucket).key(key).send().await.unwrap();
            o.body.collect().await.unwrap().into_bytes().to_vec()
        }
    };
    let mut bytes = get(cache_file.clone()).await;
    let before = EncodedShard::from_bytes("shard 0", &bytes).unwrap().records[0].clone();
    let at = bytes.windows(4).position(|w| w == before.dense[0].to_le_bytes()).unwrap();
    bytes[at] ^= 0x40;
    s3.put_object().bucket(&bucket).key(&cache_file).body(ByteStream::from(bytes)).send().await.unwrap();
    put("corpora/kb/mileage.md".into(), "Mileage is paid at the federal rate.".into()).await;
    let (plan, read) = parts("heal", 7).await;
    assert!(read.iter().all(|&r| r == steps_keys), "{read:?} against {steps_keys} bytes of keys");
    assert_eq!((plan.task_count, plan.report.chunks_encoded), (1, 1), "the plan saw the keys only: {plan:?}");
    let (reencoded, published) = steps("heal", plan).await;
    assert_eq!(reencoded, [1, 0], "the damaged record is encoded again by its shard's merge");
    assert_eq!((published.build.documents, published.build.chunks_encoded), (7, 2), "{published:?}");
    let (cache_file, _) = version_objects(&config, &target, "/encoded-00000.bin").await.remove(0);
    let healed = EncodedShard::from_bytes("shard 0", &get(cache_file).await).unwrap();
    let after = healed.records.iter().find(|r| r.key == before.key).expect("the chunk's vectors are kept");
    let windows = before.dense.len() as f32 / healed.dim as f32;
    let dot: f32 = after.dense.iter().zip(&before.dense).map(|(a, b)| a * b).sum();
    assert!(dot / windows > 0.9999, "the vectors the first build made: {dot} over {windows} windows");

    // Index shard 1's cache file gone, its keys file left: its merge encodes every chunk
    // the file held, and the build does not fail.
    let (gone, _) = version_objects(&config, &target, "/encoded-00001.bin").await.remove(0);
    let listed = EncodedKeys::read(&get(gone.replace(".bin", ".keys")).await).unwrap().len();
    s3.delete_object().bucket(&bucket).key(&gone).send().await.unwrap();
    put("corpora/kb/parking.md".into(), "Parking at the airport is reimbursed for trips of two days.".into()).await;
    let (plan, _) = parts("gone", 8).await;
    assert_eq!(plan.report.chunks_encoded, 1, "{plan:?}");
    let (reencoded, published) = steps("gone", plan).await;
    assert_eq!(reencoded, [0, listed], "shard 1's vectors, all encoded again");
    assert_eq!(published.build.chunks_encoded, 1 + listed, "{published:?}");
    let (cache_file, _) = version_objects(&config, &target, "/encoded-00001.bin").await.remove(0);
    EncodedShard::from_bytes("shard 1", &get(cache_file).await).expect("a whole cache file again");
}

/// The objects of the current version of the index at `target` (in `bucket`) whose names
/// end with `suffix`, with their sizes, sorted.
async fn version_objects(config: &aws_config::SdkConfig, target: &str, suffix: &str) -> Vec<(String, u64)> {
    let pointer = VersionedIndex::new(config, &Location::parse(target).unwrap()).unwrap().current().await.unwrap();
    let (bucket, prefix) = target.strip_prefix("s3://").unwrap().split_once('/').unwrap();
    let out = s3_client(config)
        .list_objects_v2()
        .bucket(bucket)
        .prefix(format!("{prefix}/versions/{}/", pointer.version))
        .send()
        .await
        .unwrap();
    let mut found: Vec<(String, u64)> = out
        .contents()
        .iter()
        .filter_map(|o| Some((o.key()?.to_string(), o.size()? as u64)))
        .filter(|(k, _)| k.ends_with(suffix))
        .collect();
    found.sort();
    found
}

/// The keys under `prefix` of `bucket`, sorted.
async fn keys_under(s3: &aws_sdk_s3::Client, bucket: &str, prefix: &str) -> Vec<String> {
    let out = s3.list_objects_v2().bucket(bucket).prefix(prefix).send().await.unwrap();
    let mut keys: Vec<String> = out.contents().iter().filter_map(|o| o.key().map(str::to_string)).collect();
    keys.sort();
    keys
}

/// A warm function's refresh: every new version `refresher` finds, swapped into `state`.
async fn refresh_into(refresher: &sextant_aws::Refresher, state: &Arc<AppState>) {
    refresher
        .check_now(
            refresher.begin().expect("due"),
            |id, loaded| {
                let version = loaded.pointer.version.clone();
                state.replace_index(id, ServedIndex::of(loaded.searcher, loaded.financials), Some(version));
            },
            |id| state.unload_index(id),
        )
        .await;
}

/// The S3 event of a write to `key`, as EventBridge delivers it.
fn object_created(key: &str) -> Value {
    let file = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../events/index-build/s3-object-created.json");
    let mut event: Value = serde_json::from_slice(&std::fs::read(file).unwrap()).unwrap();
    event["detail"]["object"]["key"] = json!(key);
    event
}

/// Indexes managed through the API on AWS (`SEXTANT_CATALOG`): a creation writes only its
/// marker, into prefixes that hold nothing, and serves the index at once, empty; a write's
/// S3 event builds that index, cut as it was created; a function started later serves it
/// at its published version; a deletion removes its versions, documents and marker, and
/// the other functions let it go at their next refresh. The deployment's own index is
/// neither created nor deleted, and bad input is refused naming the field.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn indexes_created_through_the_api_take_documents_are_built_served_everywhere_and_deleted() {
    use sextant_aws::{Catalog, Refresher};
    use sextant_lambda::index_admin::S3IndexAdmin;

    let f = fixture().await;
    let s3 = s3_client(&f.config);
    let catalog = Catalog::new(&f.config, &Location::parse(&format!("s3://{}/", f.bucket)).unwrap()).unwrap();
    // A refresh is due at every call, as after `SEXTANT_REFRESH_SECS`.
    let refresher = Refresher::new(std::time::Duration::ZERO, f.models.clone());
    let admin = S3IndexAdmin::new(catalog.clone(), f.config.clone(), f.models.clone(), &f.state, refresher.clone());
    f.state.set_index_admin(admin.clone());
    let put = |path: &str, key: &'static str, body: &'static str| {
        let (app, path) = (f.app.clone(), path.to_string());
        async move { call(&app, "PUT", &path, key, "application/json", body.as_bytes()).await }
    };

    // Refused, naming the field, and nothing written.
    let s3_before = keys_under(&s3, &f.bucket, "").await;
    for (path, key, body, status, field) in [
        ("/v1/indexes/Notes", ADMIN, "{}", 400, Some("index")),
        ("/v1/indexes/kb-facts", ADMIN, "{}", 400, Some("index")),
        ("/v1/indexes/notes", ADMIN, r#"{"chunkTokens": 8}"#, 400, Some("chunkTokens")),
        ("/v1/indexes/notes", ADMIN, r#"{"chunkTokens": 64, "chunkOverlap": 40}"#, 400, Some("chunkOverlap")),
        ("/v1/indexes/notes", ADMIN, r#"{"chunk_tokens": 64}"#, 400, None),
        ("/v1/indexes/notes", WRITER, "{}", 403, None),
        ("/v1/indexes/kb", ADMIN, "{}", 409, None),
    ] {
        let (got, body) = put(path, key, body).await;
        assert_eq!(got, status, "{path} {body}");
        if let Some(field) = field {
            assert_eq!(body["error"]["field"], field, "{path} {body}");
        }
    }
    assert_eq!(keys_under(&s3, &f.bucket, "").await, s3_before);
    // A prefix holding objects no creation wrote is not taken over.
    s3.put_object()
        .bucket(&f.bucket)
        .key("corpora/stale/left.md")
        .body(ByteStream::from(b"left over".to_vec()))
        .send()
        .await
        .unwrap();
    let (status, body) = put("/v1/indexes/stale", ADMIN, "{}").await;
    assert_eq!((status, body["error"]["code"].as_str()), (409, Some("conflict")), "{body}");
    assert!(body["error"]["message"].as_str().unwrap().contains("corpora/stale/"), "{body}");

    // Created: served at once, empty, writable; the same call again is a 200, other options a 409.
    let (status, body) = put("/v1/indexes/notes", ADMIN, r#"{"chunkTokens": 64}"#).await;
    assert_eq!(status, 201, "{body}");
    assert_eq!((body["documents"].as_u64(), body["writable"].as_bool()), (Some(0), Some(true)), "{body}");
    assert_eq!(body["settings"]["chunkTokens"], 64, "{body}");
    assert_eq!(keys_under(&s3, &f.bucket, "indexes/.created/").await, ["indexes/.created/notes.json"]);
    assert_eq!(put("/v1/indexes/notes", ADMIN, r#"{"chunkTokens": 64}"#).await.0, 200);
    assert_eq!(put("/v1/indexes/notes", ADMIN, r#"{"chunkTokens": 128}"#).await.0, 409);
    let (status, body) = call(&f.app, "GET", "/v1/indexes", ADMIN, "text/plain", b"").await;
    let ids: Vec<&str> = body["indexes"].as_array().unwrap().iter().map(|i| i["index"].as_str().unwrap()).collect();
    assert_eq!((status, ids), (200, vec!["kb", "notes"]), "{body}");

    // A write lands in its corpus prefix; its S3 event builds the index, cut as created.
    let memo = "Quarterly planning memo. The wind turbine programme moves to the northern site in May, \
        after the grid connection is approved by the regional operator. Blade deliveries are rescheduled \
        to June, and the crane contract is extended by eight weeks at the same daily rate. The finance \
        team expects the capital expenditure to land within the approved budget, with a contingency of \
        four percent kept for weather delays during installation of the nacelles.";
    let (status, body) =
        call(&f.app, "PUT", "/v1/indexes/notes/documents/memo", ADMIN, "text/plain", memo.as_bytes()).await;
    assert_eq!(status, 202, "{body}");
    assert_eq!(keys_under(&s3, &f.bucket, "corpora/notes/").await, ["corpora/notes/memo.json"]);
    let builds = Builds { catalog: Some(catalog.clone()), ..Default::default() };
    // The deployment's own job, as the function's environment gives it.
    let own = f.job();
    let defaults = json!({"index_id": own.index_id, "corpus": own.corpus, "target": own.target, "keep_versions": 2});
    let defaults = defaults.as_object().unwrap();
    let out =
        handle_build_event(object_created("corpora/notes/memo.json"), f.models.set(), &f.config, defaults, &builds)
            .await
            .unwrap();
    assert_eq!(out["index_id"], "notes", "{out}");
    assert!(out["builds"][0]["version"].is_string(), "{out}");
    // The own corpus still builds the own index; the facts' prefix and unknown ones build nothing.
    let out = handle_build_event(object_created("corpora/kb/seed.jsonl"), f.models.set(), &f.config, defaults, &builds)
        .await
        .unwrap();
    assert_eq!(out["index_id"], "kb", "{out}");
    for key in ["corpora/kb-facts/facts.jsonl", "corpora/stale/left.md", "elsewhere/x.md"] {
        let out = handle_build_event(object_created(key), f.models.set(), &f.config, defaults, &builds).await.unwrap();
        assert_eq!(out, json!({"ignored": key}));
    }

    // The refresh swaps the built version in.
    refresh_into(&refresher, &f.state).await;
    let (status, body) = call(&f.app, "GET", "/v1/indexes/notes", ADMIN, "text/plain", b"").await;
    assert_eq!((status, body["documents"].as_u64()), (200, Some(1)), "{body}");
    assert!(body["chunks"].as_u64().unwrap() >= 2, "cut at 64 tokens: {body}");
    let version = body["version"].as_str().expect("a published version").to_string();
    let query = json!({"query": "when do blade deliveries arrive", "index": "notes", "top_k": 3}).to_string();
    let (status, body) = call(&f.app, "POST", "/v1/retrieve", ADMIN, "application/json", query.as_bytes()).await;
    assert_eq!((status, body["chunks"][0]["source"]["documentId"].as_str()), (200, Some("memo")), "{body}");
    let (status, body) = call(&f.app, "GET", "/v1/indexes/notes/documents/memo", ADMIN, "text/plain", b"").await;
    assert_eq!((status, body["status"].as_str()), (200, Some("live")), "{body}");

    // Another function, started now, serves it at that version.
    let keys = LocalKeyStore::in_memory();
    keys.add(ADMIN, "tests", "enterprise", vec!["*:admin".into()]).unwrap();
    let other = AppState::new(Arc::new(keys), ApiConfig { default_index: "kb".into(), ..Default::default() });
    other.set_indexes(Indexes::new());
    let other_refresher = Refresher::new(std::time::Duration::ZERO, f.models.clone());
    let other_admin = S3IndexAdmin::new(catalog.clone(), f.config.clone(), f.models.clone(), &other, other_refresher);
    other_admin.sync().await;
    assert_eq!(other.version("notes").as_deref(), Some(version.as_str()));
    let (status, body) =
        call(&router(other.clone()), "POST", "/v1/retrieve", ADMIN, "application/json", query.as_bytes()).await;
    assert_eq!((status, body["chunks"][0]["source"]["documentId"].as_str()), (200, Some("memo")), "{body}");

    // Its last document deleted, the next build empties it (a created index may be empty).
    let (status, body) = call(&f.app, "DELETE", "/v1/indexes/notes/documents/memo", ADMIN, "text/plain", b"").await;
    assert_eq!(status, 202, "{body}");
    let out =
        handle_build_event(object_created("corpora/notes/memo.json"), f.models.set(), &f.config, defaults, &builds)
            .await
            .unwrap();
    assert!(out["builds"][0]["version"].is_string(), "{out}");
    refresh_into(&refresher, &f.state).await;
    let (status, body) = call(&f.app, "GET", "/v1/indexes/notes", ADMIN, "text/plain", b"").await;
    assert_eq!((status, body["documents"].as_u64(), body["chunks"].as_u64()), (200, Some(0), Some(0)), "{body}");
    assert_ne!(body["version"].as_str(), Some(version.as_str()), "{body}");
    let (status, body) = call(&f.app, "POST", "/v1/retrieve", ADMIN, "application/json", query.as_bytes()).await;
    assert_eq!((status, body["chunks"].as_array().map(Vec::len)), (200, Some(0)), "{body}");

    // A build of it that was already running when it is deleted (its job made before).
    let created = sextant_aws::CreatedIndex { chunk_tokens: 64, chunk_overlap: 0 };
    let running = BuildJob::of_created(&catalog, "notes", &created, defaults).unwrap();

    // Deleted: versions, documents and marker gone; a 404 after; the own index is not deleted.
    let delete = |path: &'static str, key: &'static str| {
        let app = f.app.clone();
        async move { call(&app, "DELETE", path, key, "text/plain", b"").await }
    };
    assert_eq!(delete("/v1/indexes/notes", WRITER).await.0, 403);
    assert_eq!(delete("/v1/indexes/kb", ADMIN).await.0, 409);
    let (status, body) = delete("/v1/indexes/notes", ADMIN).await;
    assert_eq!((status, body["deleted"].as_bool()), (200, Some(true)), "{body}");
    for prefix in ["indexes/notes/", "corpora/notes/", "indexes/.created/"] {
        assert_eq!(keys_under(&s3, &f.bucket, prefix).await, Vec::<String>::new(), "{prefix}");
    }
    assert_eq!(call(&f.app, "GET", "/v1/indexes/notes", ADMIN, "text/plain", b"").await.0, 404);
    assert_eq!(delete("/v1/indexes/notes", ADMIN).await.0, 404);
    assert!(f.state.loaded_index("kb").is_some(), "the own index is still served");
    // The other function lets it go at its next refresh; its writes' events build nothing.
    other_admin.sync().await;
    assert!(other.loaded_index("notes").is_none());
    let out =
        handle_build_event(object_created("corpora/notes/memo.json"), f.models.set(), &f.config, defaults, &builds)
            .await
            .unwrap();
    assert_eq!(out, json!({"ignored": "corpora/notes/memo.json"}));
    // The build that was running publishes after the deletion, finds the index gone and
    // removes what it published: no version of a deleted index stays behind.
    let late = build_job::run(&running, f.models.set(), &f.config).await.unwrap();
    assert!(late.published.is_none(), "{late:?}");
    assert!(late.discarded.as_deref().is_some_and(|why| why.contains("deleted")), "{late:?}");
    assert_eq!(keys_under(&s3, &f.bucket, "indexes/notes/").await, Vec::<String>::new());
    // Created again under the same id: a new, empty index.
    let (status, body) = put("/v1/indexes/notes", ADMIN, "{}").await;
    assert_eq!(
        (status, body["documents"].as_u64(), body["settings"]["chunkTokens"].as_u64()),
        (201, Some(0), Some(200)),
        "{body}"
    );
}
