//! The AWS SDK's configuration, shared by every client of the process: timeouts, retries,
//! endpoint overrides, and how SDK errors become [`Error::Storage`].

use std::time::Duration;

use aws_config::retry::RetryConfig;
use aws_config::timeout::TimeoutConfig;
use aws_config::{BehaviorVersion, SdkConfig};
use sextant_core::error::Error;

/// The retry policy of every AWS call: the SDK's standard mode (exponential backoff with
/// jitter; throttling and transient errors retried), 3 attempts in all.
pub fn retry_config() -> RetryConfig {
    RetryConfig::standard().with_max_attempts(3)
}

/// The process's SDK configuration, loaded from the environment on first use and shared
/// afterwards, with timeouts short enough that an unreachable store fails a request quickly
/// instead of hanging it: 2 s to connect, 10 s per attempt
/// (`SEXTANT_AWS_ATTEMPT_TIMEOUT_SECS` overrides), 3 attempts with the SDK's standard
/// backoff (throttling included).
///
/// Loaded once because a cold start needs it for the key store, the model download and
/// every S3 index: the environment, profile files and credential chain are read once, and
/// every client shares one credentials cache.
pub async fn sdk_config() -> SdkConfig {
    static CONFIG: tokio::sync::OnceCell<SdkConfig> = tokio::sync::OnceCell::const_new();
    CONFIG.get_or_init(load_sdk_config).await.clone()
}

/// Loads a new configuration from the environment, as a new process does: what
/// [`sdk_config`] loads once and shares, and what a cold-start benchmark measures.
pub async fn load_sdk_config() -> SdkConfig {
    let attempt =
        std::env::var("SEXTANT_AWS_ATTEMPT_TIMEOUT_SECS").ok().and_then(|v| v.parse::<f64>().ok()).unwrap_or(10.0);
    let timeouts = TimeoutConfig::builder()
        .connect_timeout(Duration::from_secs(2))
        .operation_attempt_timeout(Duration::from_secs_f64(attempt))
        .build();
    aws_config::defaults(BehaviorVersion::latest()).timeout_config(timeouts).retry_config(retry_config()).load().await
}

/// Whether an endpoint override is set for `service` (`S3`, `DYNAMODB`): then S3 is
/// addressed path-style, as S3-compatible servers expect.
pub(crate) fn endpoint_overridden(service: &str) -> bool {
    ["AWS_ENDPOINT_URL".to_string(), format!("AWS_ENDPOINT_URL_{service}")]
        .iter()
        .any(|k| std::env::var(k).is_ok_and(|v| !v.trim().is_empty()))
}

/// Turns an SDK error into [`Error::Storage`], keeping the whole cause chain.
pub(crate) fn storage_error(location: impl Into<String>, e: impl std::error::Error + Send + Sync + 'static) -> Error {
    Error::Storage { location: location.into(), reason: aws_sdk_s3::error::DisplayErrorContext(e).to_string() }
}
