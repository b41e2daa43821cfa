//! AWS backends (feature `aws`): index versions in S3, keys, plans and rate counters in
//! DynamoDB, and the index-build job.
//!
//! Clients take their settings from the environment the way every AWS SDK does: region,
//! credentials, and `AWS_ENDPOINT_URL` / `AWS_ENDPOINT_URL_S3` /
//! `AWS_ENDPOINT_URL_DYNAMODB` for S3- and DynamoDB-compatible servers.

pub mod build_job;
mod dynamo;
pub mod refresh;
mod s3;
pub mod versions;

use std::sync::Arc;
use std::time::Duration;

use aws_config::retry::RetryConfig;
use aws_config::timeout::TimeoutConfig;
use aws_config::{BehaviorVersion, SdkConfig};

pub use dynamo::DynamoKeyStore;
pub use s3::S3Store;

use crate::api::keys::{KeyStore, LocalKeyStore};
use crate::error::{Error, Result};

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
    let attempt = std::env::var("SEXTANT_AWS_ATTEMPT_TIMEOUT_SECS").ok().and_then(|v| v.parse::<f64>().ok()).unwrap_or(10.0);
    let timeouts = TimeoutConfig::builder()
        .connect_timeout(Duration::from_secs(2))
        .operation_attempt_timeout(Duration::from_secs_f64(attempt))
        .build();
    aws_config::defaults(BehaviorVersion::latest()).timeout_config(timeouts).retry_config(retry_config()).load().await
}

/// Whether an endpoint override is set for `service` (`S3`, `DYNAMODB`): then S3 is
/// addressed path-style, as S3-compatible servers expect.
fn endpoint_overridden(service: &str) -> bool {
    ["AWS_ENDPOINT_URL".to_string(), format!("AWS_ENDPOINT_URL_{service}")].iter().any(|k| std::env::var(k).is_ok_and(|v| !v.trim().is_empty()))
}

/// Where keys live, parsed from a spec: a file path, or
/// `dynamodb://KEYS_TABLE[/RATE_TABLE]` (the rate table is needed only to serve requests).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyStoreSpec {
    /// A JSON file ([`LocalKeyStore`]).
    File(std::path::PathBuf),
    /// DynamoDB tables.
    Dynamo {
        /// Keys and plans.
        keys_table: String,
        /// Rate counters.
        rate_table: Option<String>,
    },
}

impl KeyStoreSpec {
    /// Parses a spec.
    pub fn parse(spec: &str) -> Result<Self> {
        let spec = spec.trim();
        let Some(rest) = spec.strip_prefix("dynamodb://") else {
            if spec.is_empty() || spec.contains("://") {
                return Err(Error::invalid("keys", format!("{spec:?}: give a file path or dynamodb://KEYS_TABLE/RATE_TABLE")));
            }
            return Ok(KeyStoreSpec::File(spec.into()));
        };
        let mut parts = rest.split('/');
        let table_ok = |t: &str| (3..=255).contains(&t.len()) && t.chars().all(|c| c.is_ascii_alphanumeric() || "_-.".contains(c));
        let keys_table = parts.next().unwrap_or_default().to_string();
        let rate_table = parts.next().filter(|t| !t.is_empty()).map(str::to_string);
        if !table_ok(&keys_table) || rate_table.as_deref().is_some_and(|t| !table_ok(t)) || parts.next().is_some() {
            return Err(Error::invalid("keys", format!("{spec:?}: expected dynamodb://KEYS_TABLE/RATE_TABLE with DynamoDB table names")));
        }
        Ok(KeyStoreSpec::Dynamo { keys_table, rate_table })
    }

    /// Opens the store.
    pub async fn open(&self) -> Result<Arc<dyn KeyStore>> {
        Ok(match self {
            KeyStoreSpec::File(p) => Arc::new(LocalKeyStore::open(p)?),
            KeyStoreSpec::Dynamo { keys_table, rate_table } => {
                Arc::new(DynamoKeyStore::new(&sdk_config().await, keys_table.clone(), rate_table.clone()))
            }
        })
    }
}

/// Turns an SDK error into [`Error::Storage`], keeping the whole cause chain.
fn storage_error(location: impl Into<String>, e: impl std::error::Error + Send + Sync + 'static) -> Error {
    Error::Storage { location: location.into(), reason: aws_sdk_s3::error::DisplayErrorContext(e).to_string() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_store_specs_parse_files_and_tables() {
        assert_eq!(KeyStoreSpec::parse("keys.json").unwrap(), KeyStoreSpec::File("keys.json".into()));
        assert_eq!(
            KeyStoreSpec::parse("dynamodb://sextant-keys/sextant-rate").unwrap(),
            KeyStoreSpec::Dynamo { keys_table: "sextant-keys".into(), rate_table: Some("sextant-rate".into()) }
        );
        assert_eq!(KeyStoreSpec::parse("dynamodb://sextant-keys").unwrap(), KeyStoreSpec::Dynamo { keys_table: "sextant-keys".into(), rate_table: None });
        for bad in ["", "dynamodb://", "dynamodb://a", "dynamodb://k/r/x", "dynamodb://bad table", "redis://x"] {
            assert!(matches!(KeyStoreSpec::parse(bad), Err(Error::InvalidArgument { .. })), "{bad}");
        }
    }

    #[test]
    fn every_variable_template_yaml_sets_is_read_by_the_code() {
        let template = include_str!("../../../template.yaml");
        let code = [include_str!("../api/context.rs"), include_str!("build_job.rs"), include_str!("mod.rs")].concat();
        let mut vars: Vec<&str> = template
            .match_indices("SEXTANT_")
            .map(|(i, _)| {
                let rest = &template[i..];
                &rest[..rest.find(|c: char| !(c.is_ascii_uppercase() || c == '_')).unwrap_or(rest.len())]
            })
            .collect();
        vars.sort();
        vars.dedup();
        assert!(vars.len() >= 8, "{vars:?}");
        for v in vars {
            assert!(code.contains(&format!("\"{v}\"")), "template.yaml sets {v}, which no code reads");
        }
    }
}
