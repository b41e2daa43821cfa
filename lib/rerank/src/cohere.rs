//! The Cohere Rerank API, version 2, as a [`Reranker`].
//!
//! One call per search: `POST {endpoint}/v2/rerank` with a bearer key and
//! `{"model", "query", "documents": [text, ...], "top_n"}`; the answer's
//! `results: [{"index", "relevance_score"}]` (relevance in [0, 1]) reorders the fused head.
//! Any failure (no answer within the timeout, an error status, an answer outside the
//! protocol) is a failed rerank: the engine keeps the fused order and says `"failed"`.

use std::time::Duration;

use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Bytes;
use hyper_util::client::legacy::{connect::HttpConnector, Client};
use hyper_util::rt::TokioExecutor;
use serde::Deserialize;
use sextant_core::pipeline::{Candidate, Reranked, Reranker};
use tokio::runtime::Handle;

use crate::call::rerank_through;
use crate::error::{cut, Error, Result};

const SERVICE: &str = "Cohere Rerank";

/// The most of an answer read (a rerank of a few hundred passages is a few kilobytes).
const MAX_ANSWER_BYTES: usize = 4 << 20;

type HttpsClient = Client<hyper_rustls::HttpsConnector<HttpConnector>, Full<Bytes>>;

/// A reranker that calls the Cohere Rerank API v2 (or any server that speaks it).
#[derive(Clone)]
pub struct CohereReranker {
    client: HttpsClient,
    url: hyper::Uri,
    model: String,
    api_key: Option<String>,
    timeout: Duration,
    runtime: Handle,
}

#[derive(Deserialize)]
struct Answer {
    results: Vec<Scored>,
}

#[derive(Deserialize)]
struct Scored {
    index: i64,
    relevance_score: f64,
}

#[derive(Deserialize)]
struct Refusal {
    message: Option<String>,
}

impl CohereReranker {
    /// A client of `endpoint` (its base URL, e.g. `https://api.cohere.com`) that ranks with
    /// `model`, sends `api_key` as a bearer token when given, and gives up after `timeout`.
    /// Requests run on `runtime` (the engine's rerank stage waits for them from a blocking
    /// thread).
    pub fn new(
        endpoint: &str,
        model: &str,
        api_key: Option<String>,
        timeout: Duration,
        runtime: Handle,
    ) -> Result<Self> {
        let url: hyper::Uri = format!("{}/v2/rerank", endpoint.trim_end_matches('/'))
            .parse()
            .map_err(|e| Error::config("endpoint", format!("{endpoint:?} is not a URL ({e})")))?;
        if !matches!(url.scheme_str(), Some("https" | "http")) || url.host().is_none() {
            return Err(Error::config("endpoint", format!("{endpoint:?} is not an http(s) URL")));
        }
        let https = hyper_rustls::HttpsConnectorBuilder::new()
            .with_native_roots()
            .map_err(|e| Error::config("endpoint", format!("no TLS root certificates on this system ({e})")))?
            .https_or_http()
            .enable_http1()
            .build();
        let client = Client::builder(TokioExecutor::new()).pool_idle_timeout(Duration::from_secs(50)).build(https);
        Ok(CohereReranker { client, url, model: model.to_string(), api_key, timeout, runtime })
    }

    /// The URL called.
    pub fn url(&self) -> String {
        self.url.to_string()
    }

    /// One call: the relevance of each document, as `(index, relevance)` pairs.
    async fn call(self, query: String, documents: Vec<String>) -> Result<Vec<(i64, f64)>> {
        let transport = |reason: String| Error::Transport { service: SERVICE, reason };
        let body = serde_json::json!({
            "model": self.model,
            "query": query,
            "top_n": documents.len(),
            "documents": documents,
        });
        let mut request = hyper::Request::post(&self.url)
            .header(hyper::header::CONTENT_TYPE, "application/json")
            .header(hyper::header::ACCEPT, "application/json")
            .header("X-Client-Name", "sextant");
        if let Some(key) = &self.api_key {
            request = request.header(hyper::header::AUTHORIZATION, format!("Bearer {key}"));
        }
        let request = request.body(Full::new(Bytes::from(body.to_string()))).map_err(|e| transport(e.to_string()))?;
        let answer = self.client.request(request).await.map_err(|e| transport(describe(&e)))?;
        let status = answer.status();
        let bytes = Limited::new(answer.into_body(), MAX_ANSWER_BYTES)
            .collect()
            .await
            .map_err(|e| transport(format!("reading the answer: {e}")))?
            .to_bytes();
        if !status.is_success() {
            let message = serde_json::from_slice::<Refusal>(&bytes)
                .ok()
                .and_then(|r| r.message)
                .unwrap_or_else(|| String::from_utf8_lossy(&bytes).into_owned());
            return Err(Error::Status {
                service: SERVICE,
                status: status.as_u16().to_string(),
                message: cut(&message),
            });
        }
        let answer: Answer = serde_json::from_slice(&bytes).map_err(|e| Error::Protocol {
            service: SERVICE,
            reason: format!("the answer is not a rerank result ({e})"),
        })?;
        Ok(answer.results.into_iter().map(|r| (r.index, r.relevance_score)).collect())
    }
}

/// An error with its causes, each after a colon: a client error's own message is only
/// "client error (Connect)", its cause says what failed. Used wherever this workspace makes
/// HTTP calls with hyper's client (the hosted rerankers, `sextant put`).
pub fn describe(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        out.push_str(": ");
        out.push_str(&s.to_string());
        source = s.source();
    }
    out
}

impl Reranker for CohereReranker {
    fn rerank(&self, query: &str, candidates: &[Candidate<'_>]) -> sextant_core::Result<Vec<Reranked>> {
        let name = format!("{SERVICE} ({})", self.model);
        let client = self.clone();
        rerank_through(&self.runtime, SERVICE, &name, self.timeout, query, candidates, |q, d| client.call(q, d))
    }
}
