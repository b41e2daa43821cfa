//! Hosted rerankers behind the engine's [`Reranker`] interface.
//!
//! On AWS no cross-encoder weights ship with the functions, so a search reranks through a
//! hosted service: the Cohere Rerank API v2 ([`CohereReranker`]) or Amazon Bedrock's
//! `Rerank` ([`BedrockReranker`]). Either is called once per search with the fused head's
//! passages, within a timeout; any failure falls back to the fused order, reported as
//! `meta.rerank: "failed"` (no reranker configured is `"unavailable"`).
//!
//! [`HostedConfig`] reads the choice from flags or the environment, and
//! [`protocol_server`] is a local server that speaks both protocols with any local
//! reranker (the tests run the clients against it, slow and failing answers included).

mod bedrock;
mod call;
mod cohere;
mod error;
pub mod protocol_server;

use std::sync::Arc;
use std::time::Duration;

pub use bedrock::BedrockReranker;
pub use cohere::{describe as describe_error, CohereReranker};
pub use error::{Error, Result};
use sextant_core::pipeline::Reranker;

/// The hosted services a search can rerank with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Service {
    /// The Cohere Rerank API, version 2.
    Cohere,
    /// Amazon Bedrock's `Rerank` (Agents for Amazon Bedrock Runtime).
    Bedrock,
}

impl Service {
    /// The names accepted, as they are written in flags and the environment.
    pub const NAMES: [&'static str; 3] = ["none", "cohere", "bedrock"];

    /// Parses a service name; `none` (or empty) is no hosted reranker.
    pub fn parse(field: &str, name: &str) -> Result<Option<Service>> {
        match name.trim().to_ascii_lowercase().as_str() {
            "" | "none" => Ok(None),
            "cohere" => Ok(Some(Service::Cohere)),
            "bedrock" => Ok(Some(Service::Bedrock)),
            other => {
                Err(Error::config(field, format!("{other:?} is not a reranking service: use one of {:?}", Self::NAMES)))
            }
        }
    }

    /// The model used when none is named: Cohere's `rerank-v3.5`, Bedrock's
    /// `amazon.rerank-v1:0`.
    pub fn default_model(self) -> &'static str {
        match self {
            Service::Cohere => "rerank-v3.5",
            Service::Bedrock => "amazon.rerank-v1:0",
        }
    }
}

/// Which hosted reranker to call, and how.
#[derive(Clone, PartialEq, Eq)]
pub struct HostedConfig {
    /// The service.
    pub service: Service,
    /// The model (the service's default when `None`).
    pub model: Option<String>,
    /// Another endpoint than the service's own (a proxy, a compatible server, a test
    /// server): Cohere's base URL, or Bedrock's endpoint URL.
    pub endpoint: Option<String>,
    /// How long a search waits for the service before keeping the fused order.
    pub timeout: Duration,
    /// Cohere's API key (Bedrock signs with the AWS credentials instead).
    pub api_key: Option<String>,
}

impl std::fmt::Debug for HostedConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostedConfig")
            .field("service", &self.service)
            .field("model", &self.model)
            .field("endpoint", &self.endpoint)
            .field("timeout", &self.timeout)
            .field("api_key", &self.api_key.as_ref().map(|_| "(set)"))
            .finish()
    }
}

/// The default wait for a hosted reranker: 2 s, after which the fused order is served.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_millis(2000);

/// Cohere's base URL.
pub const COHERE_ENDPOINT: &str = "https://api.cohere.com";

impl HostedConfig {
    /// Reads the choice from the environment, as the Lambda functions are configured:
    ///
    /// | variable | meaning |
    /// |---|---|
    /// | `SEXTANT_RERANK_SERVICE` | `cohere`, `bedrock` or `none` (unset: none) |
    /// | `SEXTANT_RERANK_MODEL` | the model (default: the service's, see [`Service::default_model`]) |
    /// | `SEXTANT_RERANK_ENDPOINT` | another endpoint (default: the service's) |
    /// | `SEXTANT_RERANK_TIMEOUT_MS` | the wait, in milliseconds (default 2000) |
    /// | `CO_API_KEY` | Cohere's API key (the variable Cohere's own SDKs read) |
    pub fn from_env() -> Result<Option<HostedConfig>> {
        let var = |k: &str| std::env::var(k).ok().map(|v| v.trim().to_string()).filter(|v| !v.is_empty());
        let Some(service) =
            Service::parse("SEXTANT_RERANK_SERVICE", &var("SEXTANT_RERANK_SERVICE").unwrap_or_default())?
        else {
            return Ok(None);
        };
        let timeout = match var("SEXTANT_RERANK_TIMEOUT_MS") {
            Some(ms) => timeout_from_ms("SEXTANT_RERANK_TIMEOUT_MS", &ms)?,
            None => DEFAULT_TIMEOUT,
        };
        Ok(Some(HostedConfig {
            service,
            model: var("SEXTANT_RERANK_MODEL"),
            endpoint: var("SEXTANT_RERANK_ENDPOINT"),
            timeout,
            api_key: var("CO_API_KEY"),
        }))
    }

    /// The model called.
    pub fn model(&self) -> &str {
        self.model.as_deref().unwrap_or(self.service.default_model())
    }

    /// Builds the reranker. Its requests run on the current Tokio runtime, so call this
    /// from inside one (the server's or the function's); the searches that use it may then
    /// run on any thread. Refused: Cohere's own endpoint without a key, a bad endpoint,
    /// Bedrock without a region.
    pub async fn connect(&self) -> Result<Arc<dyn Reranker>> {
        let runtime = tokio::runtime::Handle::try_current()
            .map_err(|_| Error::config("reranker", "a hosted reranker needs a Tokio runtime"))?;
        Ok(match self.service {
            Service::Cohere => {
                let endpoint = self.endpoint.as_deref().unwrap_or(COHERE_ENDPOINT);
                if self.api_key.is_none() && self.endpoint.is_none() {
                    return Err(Error::config("CO_API_KEY", "is not set: Cohere's API needs a key"));
                }
                Arc::new(CohereReranker::new(endpoint, self.model(), self.api_key.clone(), self.timeout, runtime)?)
            }
            Service::Bedrock => {
                let sdk = aws_config::defaults(aws_config::BehaviorVersion::latest()).load().await;
                Arc::new(BedrockReranker::new(&sdk, self.model(), self.endpoint.as_deref(), self.timeout, runtime)?)
            }
        })
    }

    /// A one-line description for logs (never the key).
    pub fn describe(&self) -> String {
        let mut out = format!("{:?} rerank, model {}", self.service, self.model());
        if let Some(e) = &self.endpoint {
            out.push_str(&format!(" at {e}"));
        }
        out.push_str(&format!(", timeout {} ms", self.timeout.as_millis()));
        out
    }
}

/// Parses a timeout in milliseconds: a whole number from 1 to 60,000.
pub fn timeout_from_ms(field: &str, ms: &str) -> Result<Duration> {
    match ms.trim().parse::<u64>() {
        Ok(n @ 1..=60_000) => Ok(Duration::from_millis(n)),
        _ => Err(Error::config(field, format!("{ms:?} is not a timeout in milliseconds from 1 to 60000"))),
    }
}

#[cfg(test)]
mod tests;
