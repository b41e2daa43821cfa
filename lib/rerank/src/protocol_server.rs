//! A local server that speaks both hosted protocols, scoring with any local [`Reranker`]
//! (the tests use the stand-in cross-encoder).
//!
//! - `POST /v2/rerank`: the Cohere Rerank API v2. A bearer key is required when the server
//!   has one; errors are `{"message"}` with Cohere's statuses.
//! - `POST /rerank`: Bedrock's `Rerank`, as the AWS SDK sends it (restJson1, SigV4-signed:
//!   the signature's presence is checked, not its value). Errors carry the
//!   `x-amzn-ErrorType` header the SDK reads (`ValidationException`,
//!   `AccessDeniedException`, `ThrottlingException`, ...).
//!
//! A [`Fault`] makes it slow, failing or wrong on purpose, to test the clients' fallbacks.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use serde_json::{json, Value};
use sextant_core::pipeline::{Candidate, Reranker};

/// The most documents one request may carry (both services' limit).
pub const MAX_DOCUMENTS: usize = 1000;

/// How the server misbehaves; tests switch it between requests.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum Fault {
    /// Answers as the protocol says.
    #[default]
    None,
    /// Answers correctly, after this delay.
    Slow(Duration),
    /// Answers this status with the protocol's error body (429 and 503 are the throttling
    /// and unavailable answers of each service).
    Status(u16),
    /// Answers 200 with a body that is not a rerank result.
    Garbage,
    /// Answers 200 ranking a document that was not sent.
    UnknownIndex,
}

struct Shared {
    scorer: Arc<dyn Reranker>,
    api_key: Option<String>,
    fault: Mutex<Fault>,
    calls: AtomicUsize,
    last_model: Mutex<Option<String>>,
}

/// A running server (stopped when dropped).
pub struct ProtocolServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
}

impl ProtocolServer {
    /// Serves on `addr` (port 0 picks one), scoring with `scorer`; requires `api_key` as
    /// Cohere's bearer token when given.
    pub async fn start(addr: SocketAddr, scorer: Arc<dyn Reranker>, api_key: Option<String>) -> std::io::Result<Self> {
        let shared = Arc::new(Shared {
            scorer,
            api_key,
            fault: Mutex::new(Fault::None),
            calls: AtomicUsize::new(0),
            last_model: Mutex::new(None),
        });
        let listener = tokio::net::TcpListener::bind(addr).await?;
        let addr = listener.local_addr()?;
        let app = router(shared.clone());
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(ProtocolServer { addr, shared, task })
    }

    /// The base URL (`http://127.0.0.1:PORT`): Cohere's endpoint and Bedrock's alike.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Makes the next answers misbehave (or not, with [`Fault::None`]).
    pub fn set_fault(&self, fault: Fault) {
        *self.shared.fault.lock().unwrap_or_else(|p| p.into_inner()) = fault;
    }

    /// How many rerank requests arrived (valid or not).
    pub fn calls(&self) -> usize {
        self.shared.calls.load(Ordering::SeqCst)
    }

    /// The model (Cohere) or model ARN (Bedrock) the last valid request named.
    pub fn last_model(&self) -> Option<String> {
        self.shared.last_model.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

impl Drop for ProtocolServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn router(shared: Arc<Shared>) -> Router {
    Router::new().route("/v2/rerank", post(cohere)).route("/rerank", post(bedrock)).with_state(shared)
}

/// Which protocol's error shape an answer takes.
#[derive(Clone, Copy)]
enum Protocol {
    Cohere,
    Bedrock,
}

fn refuse(protocol: Protocol, status: u16, message: &str) -> Response {
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    match protocol {
        Protocol::Cohere => (status, Json(json!({ "message": message }))).into_response(),
        Protocol::Bedrock => {
            let kind = match status.as_u16() {
                400 => "ValidationException",
                403 => "AccessDeniedException",
                404 => "ResourceNotFoundException",
                429 => "ThrottlingException",
                502 => "BadGatewayException",
                503 => "ServiceUnavailableException",
                _ => "InternalServerException",
            };
            (status, [("x-amzn-ErrorType", kind)], Json(json!({ "message": message }))).into_response()
        }
    }
}

/// A valid request, whichever protocol it came in.
struct Ask {
    model: String,
    query: String,
    documents: Vec<String>,
    top_n: usize,
}

/// Scores `ask` and answers `(index, relevance)` best first, or the fault's answer.
async fn answer(shared: &Shared, protocol: Protocol, ask: Ask) -> Result<Vec<(usize, f32)>, Response> {
    *shared.last_model.lock().unwrap_or_else(|p| p.into_inner()) = Some(ask.model.clone());
    let fault = *shared.fault.lock().unwrap_or_else(|p| p.into_inner());
    match fault {
        Fault::Slow(d) => tokio::time::sleep(d).await,
        Fault::Status(code) => return Err(refuse(protocol, code, "the stand-in service is failing on purpose")),
        Fault::Garbage => return Err((StatusCode::OK, "<html>not a rerank result</html>").into_response()),
        Fault::UnknownIndex => return Ok(vec![(ask.documents.len() + 7, 0.9)]),
        Fault::None => {}
    }
    let scorer = shared.scorer.clone();
    let Ask { query, documents, top_n, .. } = ask;
    let scored = tokio::task::spawn_blocking(move || {
        let candidates: Vec<Candidate<'_>> = documents
            .iter()
            .enumerate()
            .map(|(i, text)| Candidate { chunk: i as u32, text, fused_score: 0.0 })
            .collect();
        scorer.rerank(&query, &candidates)
    })
    .await;
    match scored {
        Ok(Ok(ranked)) => Ok(ranked.into_iter().take(top_n).map(|r| (r.chunk as usize, r.score)).collect()),
        Ok(Err(e)) => Err(refuse(protocol, 500, &format!("scoring failed: {e}"))),
        Err(_) => Err(refuse(protocol, 500, "scoring stopped")),
    }
}

fn text_list(
    value: Option<&Value>,
    field: &str,
    text_of: impl Fn(&Value) -> Option<&str>,
) -> Result<Vec<String>, String> {
    let Some(Value::Array(items)) = value else { return Err(format!("{field} must be a list")) };
    if items.is_empty() || items.len() > MAX_DOCUMENTS {
        return Err(format!("{field} must hold from 1 to {MAX_DOCUMENTS} items, not {}", items.len()));
    }
    items
        .iter()
        .enumerate()
        .map(|(i, v)| text_of(v).map(str::to_string).ok_or_else(|| format!("{field}[{i}] must be a text")))
        .collect()
}

/// `POST /v2/rerank`: `{"model", "query", "documents": [string], "top_n"?}` →
/// `{"id", "results": [{"index", "relevance_score"}], "meta"}`.
async fn cohere(State(shared): State<Arc<Shared>>, headers: HeaderMap, body: Bytes) -> Response {
    let p = Protocol::Cohere;
    let n = shared.calls.fetch_add(1, Ordering::SeqCst);
    if let Some(key) = &shared.api_key {
        let sent = headers.get("authorization").and_then(|v| v.to_str().ok()).and_then(|v| v.strip_prefix("Bearer "));
        if sent != Some(key.as_str()) {
            return refuse(p, 401, "invalid api token");
        }
    }
    let Ok(Value::Object(req)) = serde_json::from_slice::<Value>(&body) else {
        return refuse(p, 400, "invalid request: the body must be a JSON object");
    };
    let parsed = (|| {
        let model = req.get("model").and_then(Value::as_str).ok_or("model must be a text")?.to_string();
        let query = req.get("query").and_then(Value::as_str).filter(|q| !q.trim().is_empty());
        let query = query.ok_or("query must be a text that is not empty")?.to_string();
        let documents = text_list(req.get("documents"), "documents", Value::as_str)?;
        let top_n = match req.get("top_n") {
            None | Some(Value::Null) => documents.len(),
            Some(v) => v.as_u64().filter(|&n| n >= 1).ok_or("top_n must be a whole number from 1")? as usize,
        };
        Ok::<_, String>(Ask { model, query, documents, top_n })
    })();
    let ask = match parsed {
        Ok(a) => a,
        Err(why) => return refuse(p, 400, &format!("invalid request: {why}")),
    };
    match answer(&shared, p, ask).await {
        Ok(ranked) => Json(json!({
            "id": format!("standin-{n}"),
            "results": ranked.iter().map(|&(index, score)| json!({"index": index, "relevance_score": score})).collect::<Vec<_>>(),
            "meta": {"api_version": {"version": "2"}, "billed_units": {"search_units": 1}},
        }))
        .into_response(),
        Err(r) => r,
    }
}

/// `POST /rerank`: Bedrock's request (`queries`, `sources`, `rerankingConfiguration`) →
/// `{"results": [{"index", "relevanceScore"}]}`.
async fn bedrock(State(shared): State<Arc<Shared>>, headers: HeaderMap, body: Bytes) -> Response {
    let p = Protocol::Bedrock;
    shared.calls.fetch_add(1, Ordering::SeqCst);
    let signed = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("AWS4-HMAC-SHA256 Credential="));
    if !signed {
        return refuse(p, 403, "the request is not signed with AWS Signature Version 4");
    }
    let Ok(Value::Object(req)) = serde_json::from_slice::<Value>(&body) else {
        return refuse(p, 400, "the body must be a JSON object");
    };
    let parsed = (|| {
        let queries = text_list(req.get("queries"), "queries", |q| {
            (q.get("type")?.as_str()? == "TEXT").then_some(())?;
            q.get("textQuery")?.get("text")?.as_str()
        })?;
        let [query] = <[String; 1]>::try_from(queries).map_err(|_| "queries must hold exactly one query")?;
        let documents = text_list(req.get("sources"), "sources", |s| {
            (s.get("type")?.as_str()? == "INLINE").then_some(())?;
            let doc = s.get("inlineDocumentSource")?;
            (doc.get("type")?.as_str()? == "TEXT").then_some(())?;
            doc.get("textDocument")?.get("text")?.as_str()
        })?;
        let config = req.get("rerankingConfiguration").filter(|c| c["type"] == "BEDROCK_RERANKING_MODEL");
        let config = config.ok_or("rerankingConfiguration.type must be BEDROCK_RERANKING_MODEL")?;
        let bedrock = &config["bedrockRerankingConfiguration"];
        let model = bedrock["modelConfiguration"]["modelArn"].as_str().filter(|a| a.starts_with("arn:"));
        let model = model.ok_or("modelConfiguration.modelArn must be a model ARN")?.to_string();
        let top_n = match bedrock.get("numberOfResults") {
            None => documents.len(),
            Some(v) => v
                .as_u64()
                .filter(|&n| (1..=MAX_DOCUMENTS as u64).contains(&n))
                .ok_or("numberOfResults must be from 1 to 1000")? as usize,
        };
        Ok::<_, String>(Ask { model, query, documents, top_n })
    })();
    let ask = match parsed {
        Ok(a) => a,
        Err(why) => return refuse(p, 400, &why),
    };
    match answer(&shared, p, ask).await {
        Ok(ranked) => Json(json!({
            "results": ranked.iter().map(|&(index, score)| json!({"index": index, "relevanceScore": score})).collect::<Vec<_>>(),
        }))
        .into_response(),
        Err(r) => r,
    }
}
