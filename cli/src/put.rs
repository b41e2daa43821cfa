//! `sextant put`: a folder or a file of documents sent to a running Sextant (the embedded
//! server or the API on AWS) through the document API, in batches
//! (`POST .../documents:batch`), several requests at once, with a progress bar. A document the index already holds as it is (the same segments, title and
//! fields) is not sent again, so a second run after an interruption sends only what is
//! left. The folder is read as `build --docs` reads it
//! ([`sextant_core::corpus::load_folder`]).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Bytes;
use hyper::{Method, StatusCode};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};
use serde::Serialize;
use serde_json::Value;
use sextant_core::corpus::{load_file, load_folder, Document, SkippedFile};

use crate::progress::ProgressDisplay;

type HttpsClient = Client<hyper_rustls::HttpsConnector<HttpConnector>, Full<Bytes>>;

/// The environment variable that holds the API key.
pub const KEY_VARIABLE: &str = "SEXTANT_API_KEY";

/// Bytes of a path segment sent as they are (RFC 3986's unreserved); every other byte of a
/// document id, `/` included, is percent-encoded.
const SEGMENT: &AsciiSet = &NON_ALPHANUMERIC.remove(b'-').remove(b'.').remove(b'_').remove(b'~');

/// The largest answer read (a document's `GET` holds its text).
const MAX_ANSWER_BYTES: usize = 64 << 20;

/// Tries of one write when the server is busy or unreachable (429, 503, a transport error).
const ATTEMPTS: u32 = 4;

/// What `sextant put` is asked for.
pub struct PutArgs {
    /// A folder or one file.
    pub path: PathBuf,
    /// The index written to.
    pub index: String,
    /// The API's base URL.
    pub url: String,
    /// Requests in flight at once.
    pub concurrency: usize,
    /// Print the report as JSON on stdout.
    pub json: bool,
}

/// What happened to one document.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Outcome {
    /// Its id.
    pub document_id: String,
    /// `written`, `unchanged` (the index held it as it is) or `failed`.
    pub status: &'static str,
    /// Why it failed: the API's message, with the field it names.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// What a `put` did.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PutReport {
    /// The index written to.
    pub index: String,
    /// Documents written.
    pub written: usize,
    /// Documents the index held as they are.
    pub unchanged: usize,
    /// Documents refused or not reached.
    pub failed: usize,
    /// Every document, in the order read.
    pub documents: Vec<Outcome>,
    /// Files that were not read, with why.
    pub skipped_files: Vec<SkippedFile>,
}

/// Runs `sextant put`: an error when the files cannot be listed, the key or URL is missing
/// or wrong, or any document failed (after the report is printed).
pub fn run(args: PutArgs) -> Result<()> {
    if args.concurrency == 0 {
        bail!("--concurrency must be at least 1");
    }
    let api = Api::connect(&args.index, &args.url)?;
    let folder = match args.path.is_dir() {
        true => load_folder(&args.path),
        false => load_file(&args.path),
    }
    .with_context(|| format!("reading {}", args.path.display()))?;
    for s in &folder.skipped {
        eprintln!("skipped {}: {}", s.path, s.reason);
    }
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    let outcomes = runtime.block_on(put_all(Arc::new(api), folder.documents, args.concurrency));
    let count = |s: &str| outcomes.iter().filter(|o| o.status == s).count();
    let report = PutReport {
        index: args.index,
        written: count("written"),
        unchanged: count("unchanged"),
        failed: count("failed"),
        documents: outcomes,
        skipped_files: folder.skipped,
    };
    for o in report.documents.iter().filter(|o| o.status == "failed") {
        eprintln!("failed {}: {}", o.document_id, o.error.as_deref().unwrap_or(""));
    }
    eprintln!(
        "index {}: {} written, {} unchanged, {} failed, {} files skipped",
        report.index,
        report.written,
        report.unchanged,
        report.failed,
        report.skipped_files.len()
    );
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    }
    if report.failed > 0 {
        bail!("{} of {} documents were not written", report.failed, report.documents.len());
    }
    Ok(())
}

/// Runs `sextant delete`: each document deleted in turn (retried while the server is busy
/// or unreachable), one line each; an error when any could not be deleted (a document the
/// index does not hold is reported, not an error).
pub fn delete(ids: &[String], index: &str, url: &str) -> Result<()> {
    let api = Api::connect(index, url)?;
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let mut failed = 0;
    for id in ids {
        let said = runtime.block_on(api.with_retries(Method::DELETE, &api.document_url(id), None));
        match said {
            Ok((status, _)) if status.is_success() => println!("deleted {id}"),
            Ok((StatusCode::NOT_FOUND, answer)) if answer["error"]["code"] == "not_found" => {
                println!("not found {id}: {}", refusal(StatusCode::NOT_FOUND, &answer))
            }
            Ok((status, answer)) => {
                failed += 1;
                eprintln!("failed {id}: {}", refusal(status, &answer));
            }
            Err(e) => {
                failed += 1;
                eprintln!("failed {id}: {e}");
            }
        }
    }
    if failed > 0 {
        bail!("{failed} of {} documents were not deleted", ids.len());
    }
    Ok(())
}

/// An HTTP(S) client with the system's root certificates.
fn client() -> Result<HttpsClient> {
    let https = hyper_rustls::HttpsConnectorBuilder::new()
        .with_native_roots()
        .context("no TLS root certificates on this system")?
        .https_or_http()
        .enable_http1()
        .build();
    Ok(Client::builder(TokioExecutor::new()).build(https))
}

/// Where and as whom documents are written.
struct Api {
    client: HttpsClient,
    base: String,
    index: String,
    key: String,
}

impl Api {
    /// The API at `url`, as the key in [`KEY_VARIABLE`], writing to `index`.
    fn connect(index: &str, url: &str) -> Result<Api> {
        let key = std::env::var(KEY_VARIABLE)
            .with_context(|| format!("set {KEY_VARIABLE} to a key that may write to index {index}"))?;
        let base = url.trim_end_matches('/').to_string();
        let uri: hyper::Uri = base.parse().with_context(|| format!("--url {base:?} is not a URL"))?;
        if !matches!(uri.scheme_str(), Some("http" | "https")) || uri.host().is_none() {
            bail!("--url {base:?} is not an http(s) URL");
        }
        Ok(Api { client: client()?, base, index: index.to_string(), key })
    }

    /// [`Api::call`], tried again (up to [`ATTEMPTS`] in all, backing off) while the server
    /// answers 429 or 503 or cannot be reached; the last answer or error.
    async fn with_retries(
        &self,
        method: Method,
        url: &str,
        body: Option<&Value>,
    ) -> Result<(StatusCode, Value), String> {
        let mut last = Err(String::new());
        for attempt in 0..ATTEMPTS {
            if attempt > 0 {
                tokio::time::sleep(Duration::from_millis(250 << attempt)).await;
            }
            last = self.call(method.clone(), url, body).await;
            match &last {
                Ok((status, _))
                    if *status != StatusCode::TOO_MANY_REQUESTS && *status != StatusCode::SERVICE_UNAVAILABLE =>
                {
                    return last
                }
                _ => {}
            }
        }
        last
    }

    /// The URL of one document.
    fn document_url(&self, id: &str) -> String {
        let encode = |s: &str| utf8_percent_encode(s, SEGMENT).to_string();
        format!("{}/v1/indexes/{}/documents/{}", self.base, encode(&self.index), encode(id))
    }

    /// One call: the status and the JSON answer (`Null` when the body is not JSON).
    async fn call(&self, method: Method, url: &str, body: Option<&Value>) -> Result<(StatusCode, Value), String> {
        let mut request = hyper::Request::builder()
            .method(method)
            .uri(url)
            .header(hyper::header::AUTHORIZATION, format!("Bearer {}", self.key))
            .header(hyper::header::ACCEPT, "application/json");
        let bytes = match body {
            Some(b) => {
                request = request.header(hyper::header::CONTENT_TYPE, "application/json");
                Bytes::from(b.to_string())
            }
            None => Bytes::new(),
        };
        let request = request.body(Full::new(bytes)).map_err(|e| e.to_string())?;
        let answer = self.client.request(request).await.map_err(|e| sextant_rerank::describe_error(&e))?;
        let status = answer.status();
        let bytes = Limited::new(answer.into_body(), MAX_ANSWER_BYTES)
            .collect()
            .await
            .map_err(|e| format!("reading the answer: {e}"))?
            .to_bytes();
        Ok((status, serde_json::from_slice(&bytes).unwrap_or(Value::Null)))
    }
}

/// Every document put: first checked against the index, `concurrency` at once, then the
/// ones it does not hold as they are sent in batches ([`batches`]), `concurrency` batches at
/// once. Outcomes in the order of `documents`.
async fn put_all(api: Arc<Api>, documents: Vec<Document>, concurrency: usize) -> Vec<Outcome> {
    let total = documents.len();
    let bar = Arc::new(ProgressDisplay::of("documents"));
    let permits = Arc::new(tokio::sync::Semaphore::new(concurrency));
    let mut outcomes: Vec<Option<Outcome>> = vec![None; total];
    let mut checks = tokio::task::JoinSet::new();
    for (i, document) in documents.into_iter().enumerate() {
        let permit = permits.clone().acquire_owned().await.expect("the semaphore is never closed");
        let api = api.clone();
        checks.spawn(async move {
            let checked = check_one(&api, &document).await;
            drop(permit);
            (i, document, checked)
        });
    }
    let mut to_write = Vec::new();
    let mut done = 0;
    while let Some(joined) = checks.join_next().await {
        let (i, document, checked) = joined.expect("a check does not panic");
        match checked {
            Some(outcome) => outcomes[i] = Some(outcome),
            None => to_write.push((i, document)),
        }
        done += 1;
        bar.update("check", done, total);
    }
    to_write.sort_by_key(|(i, _)| *i);
    let mut writes = tokio::task::JoinSet::new();
    let mut done = 0;
    let to_send = to_write.len();
    for batch in batches(to_write) {
        let permit = permits.clone().acquire_owned().await.expect("the semaphore is never closed");
        let api = api.clone();
        writes.spawn(async move {
            let written = put_batch(&api, batch).await;
            drop(permit);
            written
        });
    }
    while let Some(joined) = writes.join_next().await {
        let written = joined.expect("a batch does not panic");
        done += written.len();
        for (i, outcome) in written {
            outcomes[i] = Some(outcome);
        }
        bar.update("put", done, to_send);
    }
    bar.finish();
    outcomes.into_iter().map(|o| o.expect("every document has an outcome")).collect()
}

/// Documents per batch, at most (the API takes up to 1,000).
const BATCH_DOCUMENTS: usize = 64;

/// A batch's body, at most: under the 6 MB that a Lambda function takes (the API on AWS).
const BATCH_BYTES: usize = 4 << 20;

/// `documents` (with their places) as batch bodies: in order, each at most
/// [`BATCH_DOCUMENTS`] documents and [`BATCH_BYTES`] of JSON (a larger document goes alone).
fn batches(documents: Vec<(usize, Document)>) -> Vec<Vec<(usize, String, Value)>> {
    let mut out: Vec<Vec<(usize, String, Value)>> = Vec::new();
    let mut bytes = 0;
    for (i, document) in documents {
        let mut body = body_of(&document);
        body["documentId"] = Value::String(document.document_id.clone());
        let size = body.to_string().len();
        match out.last_mut() {
            Some(last) if last.len() < BATCH_DOCUMENTS && bytes + size <= BATCH_BYTES => {
                bytes += size;
                last.push((i, document.document_id, body));
            }
            _ => {
                bytes = size;
                out.push(vec![(i, document.document_id, body)]);
            }
        }
    }
    out
}

/// The outcome of a document the index holds as it is (`unchanged`) or that could not be
/// checked (`failed`); `None` when it is to be written.
async fn check_one(api: &Api, document: &Document) -> Option<Outcome> {
    let outcome = |status, error| Some(Outcome { document_id: document.document_id.clone(), status, error });
    match api.with_retries(Method::GET, &api.document_url(&document.document_id), None).await {
        Ok((StatusCode::OK, held)) if holds(&held, document) => outcome("unchanged", None),
        Ok((StatusCode::OK | StatusCode::NOT_FOUND, _)) => None,
        Ok((status, answer)) => outcome("failed", Some(refusal(status, &answer))),
        Err(e) => outcome("failed", Some(e)),
    }
}

/// One batch written (retried while the server is busy or unreachable): each document's
/// outcome from its result in the answer.
async fn put_batch(api: &Api, batch: Vec<(usize, String, Value)>) -> Vec<(usize, Outcome)> {
    let url = format!("{}/v1/indexes/{}/documents:batch", api.base, utf8_percent_encode(&api.index, SEGMENT));
    let body = Value::Array(batch.iter().map(|(_, _, body)| body.clone()).collect());
    let all = |status, error: Option<String>| {
        batch.iter().map(|(i, id, _)| (*i, Outcome { document_id: id.clone(), status, error: error.clone() })).collect()
    };
    match api.with_retries(Method::POST, &url, Some(&body)).await {
        Ok((status, answer)) if status.is_success() => {
            let results = answer["results"].as_array().map(Vec::as_slice).unwrap_or_default();
            if results.len() != batch.len() {
                return all("failed", Some(format!("the answer holds {} results for {}", results.len(), batch.len())));
            }
            batch
                .iter()
                .zip(results)
                .map(|((i, id, _), result)| {
                    let error = result
                        .get("error")
                        .map(|e| e["message"].as_str().map_or_else(|| e.to_string(), str::to_string));
                    let status = if error.is_some() { "failed" } else { "written" };
                    (*i, Outcome { document_id: id.clone(), status, error })
                })
                .collect()
        }
        Ok((status, answer)) => all("failed", Some(refusal(status, &answer))),
        Err(e) => all("failed", Some(e)),
    }
}

/// The document as the API's JSON body takes it (`segments`, title and fields).
fn body_of(document: &Document) -> Value {
    let mut body = serde_json::to_value(document).unwrap_or(Value::Null);
    if let Some(fields) = body.as_object_mut() {
        fields.remove("documentId");
        fields.retain(|_, v| !v.is_null());
        if document.pages.is_empty() {
            fields.remove("pages");
        }
    }
    body
}

/// Whether `held` (a document's `GET` answer) is `document` as it is: the same segments on
/// the same pages, and every field of the body a `PUT` would send equal (an absent field
/// equal to none).
fn holds(held: &Value, document: &Document) -> bool {
    let Some(segments) = held["segments"].as_array() else { return false };
    let texts: Vec<&str> = segments.iter().filter_map(|s| s["text"].as_str()).collect();
    let pages: Vec<u32> = segments.iter().filter_map(|s| s["page"].as_u64()).map(|p| p as u32).collect();
    if texts != document.segments || pages != document.pages {
        return false;
    }
    let mut mine = serde_json::to_value(document).unwrap_or(Value::Null);
    let Some(fields) = mine.as_object_mut() else { return false };
    fields.remove("documentId");
    fields.remove("segments");
    fields.remove("pages");
    fields.iter().all(|(k, v)| held.get(k).unwrap_or(&Value::Null) == v)
}

/// A refusal in the API's words: its status and the envelope's message (which names the
/// field at fault).
fn refusal(status: StatusCode, answer: &Value) -> String {
    match answer["error"]["message"].as_str() {
        Some(message) => format!("{} {message}", status.as_u16()),
        None => status.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_with_folders_and_any_character_are_one_path_segment() {
        let api =
            Api { client: client().unwrap(), base: "http://h:1".into(), index: "team".into(), key: String::new() };
        assert_eq!(
            api.document_url("handbook/travel policy.md"),
            "http://h:1/v1/indexes/team/documents/handbook%2Ftravel%20policy.md"
        );
        assert_eq!(api.document_url("日本.md"), "http://h:1/v1/indexes/team/documents/%E6%97%A5%E6%9C%AC.md");
    }

    #[test]
    fn a_document_is_held_when_its_segments_and_every_field_sent_are_the_same() {
        let document: Document = serde_json::from_value(serde_json::json!({
            "documentId": "a.md", "title": "A", "segments": ["one", "two"], "year": 2024,
            "metadata": {"team": "ops"}
        }))
        .unwrap();
        let held = serde_json::json!({
            "documentId": "a.md", "title": "A", "documentType": "article", "year": 2024, "ticker": null,
            "metadata": {"team": "ops"}, "status": "live", "chunks": 1,
            "segments": [{"text": "one", "charStart": 0, "charEnd": 3}, {"text": "two", "charStart": 5, "charEnd": 8}]
        });
        let mut document = document;
        document.document_type = "article".into();
        assert!(holds(&held, &document));
        let mut changed = held.clone();
        changed["metadata"]["team"] = "infra".into();
        assert!(!holds(&changed, &document), "a field changed");
        let mut changed = held.clone();
        changed["segments"][1]["text"] = "three".into();
        assert!(!holds(&changed, &document), "the text changed");
        let body = body_of(&document);
        assert!(body.get("documentId").is_none() && body.get("ticker").is_none(), "{body}");
        assert!(body.get("pages").is_none(), "no pages to send: {body}");
        assert_eq!(body["segments"], serde_json::json!(["one", "two"]));
        // A PDF's segments are held on their pages.
        document.pages = vec![1, 2];
        assert!(!holds(&held, &document), "the held copy has no pages");
        let mut paged = held.clone();
        paged["segments"][0]["page"] = 1.into();
        paged["segments"][1]["page"] = 2.into();
        assert!(holds(&paged, &document));
        paged["segments"][1]["page"] = 1.into();
        assert!(!holds(&paged, &document), "a page changed");
        assert_eq!(body_of(&document)["pages"], serde_json::json!([1, 2]));
    }
}
