//! Amazon Bedrock's `Rerank` operation (Agents for Amazon Bedrock Runtime) as a
//! [`Reranker`], through the official AWS SDK: its SigV4 signing, credentials from the
//! function's role, and its error parsing.
//!
//! One call per search: the query as a `TEXT` query, each passage as an `INLINE` `TEXT`
//! source, and a `BEDROCK_RERANKING_MODEL` configuration naming the model's ARN and
//! `numberOfResults` = every passage sent. The answer's `results: [{index, relevanceScore}]`
//! reorders the fused head. No retries (a throttled or slow call falls back to the fused
//! order within the timeout instead of waiting).

use std::time::Duration;

use aws_config::SdkConfig;
use aws_sdk_bedrockagentruntime::config::retry::RetryConfig;
use aws_sdk_bedrockagentruntime::config::timeout::TimeoutConfig;
use aws_sdk_bedrockagentruntime::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};
use aws_sdk_bedrockagentruntime::types::{
    BedrockRerankingConfiguration, BedrockRerankingModelConfiguration, RerankDocument, RerankDocumentType, RerankQuery,
    RerankQueryContentType, RerankSource, RerankSourceType, RerankTextDocument, RerankingConfiguration,
    RerankingConfigurationType,
};
use sextant_core::pipeline::{Candidate, Reranked, Reranker};
use tokio::runtime::Handle;

use crate::call::rerank_through;
use crate::error::{cut, Error, Result};

const SERVICE: &str = "Bedrock Rerank";

/// At most this many pages of one answer are followed (`nextToken`).
const MAX_PAGES: usize = 10;

/// A reranker that calls Bedrock's `Rerank`.
#[derive(Clone)]
pub struct BedrockReranker {
    client: aws_sdk_bedrockagentruntime::Client,
    model_arn: String,
    timeout: Duration,
    runtime: Handle,
}

impl BedrockReranker {
    /// A client of Bedrock in `sdk`'s region (or of `endpoint` when given, e.g. a local
    /// server), ranking with `model`: a foundation model id such as `amazon.rerank-v1:0`
    /// (its ARN is built for the region) or a whole model ARN. Gives up after `timeout`.
    pub fn new(
        sdk: &SdkConfig,
        model: &str,
        endpoint: Option<&str>,
        timeout: Duration,
        runtime: Handle,
    ) -> Result<Self> {
        let region = sdk
            .region()
            .map(|r| r.to_string())
            .ok_or_else(|| Error::config("AWS_REGION", "is not set: Bedrock is called in one region"))?;
        let model_arn = if model.starts_with("arn:") {
            model.to_string()
        } else {
            format!("arn:aws:bedrock:{region}::foundation-model/{model}")
        };
        let mut config = aws_sdk_bedrockagentruntime::config::Builder::from(sdk)
            .retry_config(RetryConfig::disabled())
            .timeout_config(TimeoutConfig::builder().operation_timeout(timeout).build());
        if let Some(url) = endpoint {
            config = config.endpoint_url(url);
        }
        let client = aws_sdk_bedrockagentruntime::Client::from_conf(config.build());
        Ok(BedrockReranker { client, model_arn, timeout, runtime })
    }

    /// The model's ARN.
    pub fn model_arn(&self) -> &str {
        &self.model_arn
    }

    /// One call (following `nextToken`): the relevance of each document, as
    /// `(index, relevance)` pairs.
    async fn call(self, query: String, documents: Vec<String>) -> Result<Vec<(i64, f64)>> {
        let built = |e: aws_sdk_bedrockagentruntime::error::BuildError| Error::Transport {
            service: SERVICE,
            reason: format!("building the request: {e}"),
        };
        let text = |t: String| RerankTextDocument::builder().text(t).build();
        let query = RerankQuery::builder()
            .r#type(RerankQueryContentType::Text)
            .text_query(text(query))
            .build()
            .map_err(built)?;
        let count = documents.len();
        let mut sources = Vec::with_capacity(count);
        for d in documents {
            let document = RerankDocument::builder()
                .r#type(RerankDocumentType::Text)
                .text_document(text(d))
                .build()
                .map_err(built)?;
            sources.push(
                RerankSource::builder()
                    .r#type(RerankSourceType::Inline)
                    .inline_document_source(document)
                    .build()
                    .map_err(built)?,
            );
        }
        let configuration = RerankingConfiguration::builder()
            .r#type(RerankingConfigurationType::BedrockRerankingModel)
            .bedrock_reranking_configuration(
                BedrockRerankingConfiguration::builder()
                    .number_of_results(count as i32)
                    .model_configuration(
                        BedrockRerankingModelConfiguration::builder()
                            .model_arn(&self.model_arn)
                            .build()
                            .map_err(built)?,
                    )
                    .build(),
            )
            .build()
            .map_err(built)?;
        let mut scored = Vec::with_capacity(count);
        let mut next: Option<String> = None;
        for _ in 0..MAX_PAGES {
            let page = self
                .client
                .rerank()
                .queries(query.clone())
                .set_sources(Some(sources.clone()))
                .reranking_configuration(configuration.clone())
                .set_next_token(next.take())
                .send()
                .await
                .map_err(refused)?;
            scored.extend(page.results().iter().map(|r| (i64::from(r.index()), f64::from(r.relevance_score()))));
            match page.next_token() {
                Some(token) if !token.is_empty() => next = Some(token.to_string()),
                _ => break,
            }
        }
        Ok(scored)
    }
}

/// An SDK error as ours: the service's code and message when it answered, else the cause.
fn refused<E: ProvideErrorMetadata + std::error::Error + 'static>(
    e: SdkError<E, aws_sdk_bedrockagentruntime::config::http::HttpResponse>,
) -> Error {
    match &e {
        SdkError::ServiceError(s) => match s.err().code() {
            Some(code) => Error::Status {
                service: SERVICE,
                status: code.to_string(),
                message: cut(s.err().message().unwrap_or("")),
            },
            // No error code: the answer was not one of the service's (e.g. a proxy's page).
            None => Error::Protocol {
                service: SERVICE,
                reason: format!("the answer is not a rerank result (HTTP {})", s.raw().status().as_u16()),
            },
        },
        SdkError::TimeoutError(_) => Error::Timeout { service: SERVICE, after: Duration::ZERO },
        SdkError::ResponseError(_) => Error::Protocol {
            service: SERVICE,
            reason: format!("the answer is not a rerank result ({})", cut(&DisplayErrorContext(&e).to_string())),
        },
        _ => Error::Transport { service: SERVICE, reason: cut(&DisplayErrorContext(&e).to_string()) },
    }
}

impl Reranker for BedrockReranker {
    fn rerank(&self, query: &str, candidates: &[Candidate<'_>]) -> sextant_core::Result<Vec<Reranked>> {
        let name = format!("{SERVICE} ({})", self.model_arn);
        let client = self.clone();
        rerank_through(&self.runtime, SERVICE, &name, self.timeout, query, candidates, |q, d| client.call(q, d))
    }
}
