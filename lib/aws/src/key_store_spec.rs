//! Where keys live: a file or DynamoDB tables, named by one string.

use std::sync::Arc;

use sextant_core::error::{Error, Result};
use sextant_keys::{KeyStore, LocalKeyStore};

use crate::dynamo::DynamoKeyStore;
use crate::sdk::sdk_config;

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
                return Err(Error::invalid(
                    "keys",
                    format!("{spec:?}: give a file path or dynamodb://KEYS_TABLE/RATE_TABLE"),
                ));
            }
            return Ok(KeyStoreSpec::File(spec.into()));
        };
        let mut parts = rest.split('/');
        let table_ok =
            |t: &str| (3..=255).contains(&t.len()) && t.chars().all(|c| c.is_ascii_alphanumeric() || "_-.".contains(c));
        let keys_table = parts.next().unwrap_or_default().to_string();
        let rate_table = parts.next().filter(|t| !t.is_empty()).map(str::to_string);
        if !table_ok(&keys_table) || rate_table.as_deref().is_some_and(|t| !table_ok(t)) || parts.next().is_some() {
            return Err(Error::invalid(
                "keys",
                format!("{spec:?}: expected dynamodb://KEYS_TABLE/RATE_TABLE with DynamoDB table names"),
            ));
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
        assert_eq!(
            KeyStoreSpec::parse("dynamodb://sextant-keys").unwrap(),
            KeyStoreSpec::Dynamo { keys_table: "sextant-keys".into(), rate_table: None }
        );
        for bad in ["", "dynamodb://", "dynamodb://a", "dynamodb://k/r/x", "dynamodb://bad table", "redis://x"] {
            assert!(matches!(KeyStoreSpec::parse(bad), Err(Error::InvalidArgument { .. })), "{bad}");
        }
    }
}
