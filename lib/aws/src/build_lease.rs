//! At most one running index build per index, for builds started by the corpus's S3
//! events: a lease item in DynamoDB (the rate table, whose TTL on `expires_at` removes
//! idle items), taken by conditional write.
//!
//! ```text
//! pk = build#<index>   writes: N (every event adds 1)   lease_until: N   holder: S   expires_at: N
//! ```
//!
//! Each event first counts itself (`ADD writes 1`), then tries to take the lease
//! (`lease_until` absent or past). The one that takes it notes `writes` as it was, builds,
//! and releases the lease only if `writes` is still that number; if events arrived
//! meanwhile it keeps the lease and builds once more (their objects were written before
//! their events, so the next read of the corpus sees them). An event that finds the lease
//! held returns at once: the holder's release will see its count. A holder that dies keeps
//! the lease until `lease_until` (the function's timeout), then the next event takes it.

use std::future::Future;

use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use aws_sdk_dynamodb::types::{AttributeValue, ReturnValue};
use aws_sdk_dynamodb::Client;
use sextant_core::error::{Error, Result};

use crate::sdk::storage_error;

/// Builds one holder runs back to back before it lets the lease go whatever arrives.
pub const MAX_ROUNDS: usize = 10;
/// Idle lease items are removed by the table's TTL after this long (seconds).
const ITEM_TTL_SECS: u64 = 7 * 86_400;

/// The build leases of a table.
#[derive(Clone)]
pub struct BuildLease {
    client: Client,
    table: String,
    /// How long a lease holds without being released (the build function's timeout).
    lease_secs: u64,
}

/// A lease held by a build run: its holder, and the writes counted when it took the lease
/// (carried in the workflow's job, so its last step can hand the lease on).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct LeaseHold {
    /// Who holds it (the workflow execution's name).
    pub holder: String,
    /// The index's writes counted when the lease was taken.
    pub seen: u64,
}

/// What a debounced build request did.
#[derive(Debug)]
pub enum Debounced<T> {
    /// It took the lease and ran the build, once or more (once more for each batch of
    /// writes that arrived while one ran).
    Ran(Vec<T>),
    /// Another build of the index holds the lease; that build runs again for this request.
    Queued,
}

fn now() -> u64 {
    sextant_keys::now_unix()
}

fn n(v: u64) -> AttributeValue {
    AttributeValue::N(v.to_string())
}

impl BuildLease {
    /// The leases kept in `table` (partition key `pk`), each held at most `lease_secs`.
    pub fn new(config: &aws_config::SdkConfig, table: impl Into<String>, lease_secs: u64) -> Self {
        BuildLease { client: Client::new(config), table: table.into(), lease_secs: lease_secs.max(1) }
    }

    /// The leases the environment names: `SEXTANT_BUILD_LEASE_TABLE`, held at most
    /// `SEXTANT_BUILD_LEASE_SECS` (default 960: the 900 s Lambda limit and a margin);
    /// `None` when no table is named.
    pub fn from_env(config: &aws_config::SdkConfig) -> Result<Option<Self>> {
        let Some(table) = std::env::var("SEXTANT_BUILD_LEASE_TABLE").ok().filter(|t| !t.trim().is_empty()) else {
            return Ok(None);
        };
        let secs = match std::env::var("SEXTANT_BUILD_LEASE_SECS") {
            Ok(v) => v.trim().parse::<u64>().ok().filter(|s| *s > 0).ok_or_else(|| {
                Error::invalid("SEXTANT_BUILD_LEASE_SECS", format!("{v:?} is not a positive number of seconds"))
            })?,
            Err(_) => 960,
        };
        Ok(Some(BuildLease::new(config, table, secs)))
    }

    fn key(index: &str) -> AttributeValue {
        AttributeValue::S(format!("build#{index}"))
    }

    fn location(&self, index: &str) -> String {
        format!("dynamodb://{}/build#{index}", self.table)
    }

    /// Counts one write to index `index`'s corpus.
    pub async fn note_write(&self, index: &str) -> Result<()> {
        self.client
            .update_item()
            .table_name(&self.table)
            .key("pk", Self::key(index))
            .update_expression("ADD writes :one SET expires_at = :exp")
            .expression_attribute_values(":one", n(1))
            .expression_attribute_values(":exp", n(now() + ITEM_TTL_SECS))
            .send()
            .await
            .map(|_| ())
            .map_err(|e| storage_error(self.location(index), e))
    }

    /// Takes the lease of `index` for `holder` when it is free; the writes counted so far.
    pub async fn acquire(&self, index: &str, holder: &str) -> Result<Option<u64>> {
        let t = now();
        let out = self
            .client
            .update_item()
            .table_name(&self.table)
            .key("pk", Self::key(index))
            .update_expression("SET lease_until = :until, holder = :me, expires_at = :exp")
            .condition_expression("attribute_not_exists(lease_until) OR lease_until < :now")
            .expression_attribute_values(":until", n(t + self.lease_secs))
            .expression_attribute_values(":me", AttributeValue::S(holder.into()))
            .expression_attribute_values(":exp", n(t + self.lease_secs + ITEM_TTL_SECS))
            .expression_attribute_values(":now", n(t))
            .return_values(ReturnValue::AllNew)
            .send()
            .await;
        match out {
            Ok(out) => Ok(Some(writes_of(out.attributes()))),
            Err(e) if matches!(e.as_service_error(), Some(UpdateItemError::ConditionalCheckFailedException(_))) => {
                Ok(None)
            }
            Err(e) => Err(storage_error(self.location(index), e)),
        }
    }

    /// Ends `holder`'s build having seen `seen` writes: releases the lease when no write
    /// arrived since (`None`), else renews it and returns the writes counted now (build
    /// again). `None` too when the lease is no longer `holder`'s.
    pub async fn finish(&self, index: &str, holder: &str, seen: u64) -> Result<Option<u64>> {
        let released = self
            .client
            .update_item()
            .table_name(&self.table)
            .key("pk", Self::key(index))
            .update_expression("REMOVE lease_until, holder")
            .condition_expression("holder = :me AND writes = :seen")
            .expression_attribute_values(":me", AttributeValue::S(holder.into()))
            .expression_attribute_values(":seen", n(seen))
            .send()
            .await;
        match released {
            Ok(_) => return Ok(None),
            Err(e) if matches!(e.as_service_error(), Some(UpdateItemError::ConditionalCheckFailedException(_))) => {}
            Err(e) => return Err(storage_error(self.location(index), e)),
        }
        let t = now();
        let renewed = self
            .client
            .update_item()
            .table_name(&self.table)
            .key("pk", Self::key(index))
            .update_expression("SET lease_until = :until")
            .condition_expression("holder = :me")
            .expression_attribute_values(":until", n(t + self.lease_secs))
            .expression_attribute_values(":me", AttributeValue::S(holder.into()))
            .return_values(ReturnValue::AllNew)
            .send()
            .await;
        match renewed {
            Ok(out) => Ok(Some(writes_of(out.attributes()))),
            Err(e) if matches!(e.as_service_error(), Some(UpdateItemError::ConditionalCheckFailedException(_))) => {
                tracing::warn!(index, holder, "the build lease expired while building; another build holds it now");
                Ok(None)
            }
            Err(e) => Err(storage_error(self.location(index), e)),
        }
    }

    /// Lets the lease go whatever was written (after [`MAX_ROUNDS`], or a failed build:
    /// the next write's event starts the next build).
    pub async fn release(&self, index: &str, holder: &str) -> Result<()> {
        let out = self
            .client
            .update_item()
            .table_name(&self.table)
            .key("pk", Self::key(index))
            .update_expression("REMOVE lease_until, holder")
            .condition_expression("holder = :me")
            .expression_attribute_values(":me", AttributeValue::S(holder.into()))
            .send()
            .await;
        match out {
            Ok(_) => Ok(()),
            Err(e) if matches!(e.as_service_error(), Some(UpdateItemError::ConditionalCheckFailedException(_))) => {
                Ok(())
            }
            Err(e) => Err(storage_error(self.location(index), e)),
        }
    }

    /// Counts a write to `index`, then runs `build` unless a build of `index` is running:
    /// while holding the lease, once, and again as long as writes arrived during the last
    /// run (at most [`MAX_ROUNDS`] runs). A failed run lets the lease go and is returned.
    pub async fn debounced<T, F, Fut>(&self, index: &str, holder: &str, mut build: F) -> Result<Debounced<T>>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T>>,
    {
        self.note_write(index).await?;
        let Some(mut seen) = self.acquire(index, holder).await? else {
            tracing::info!(index, "a build of this index is running: it will run again for this write");
            return Ok(Debounced::Queued);
        };
        let mut runs = Vec::new();
        loop {
            let run = build().await;
            let run = match run {
                Ok(r) => r,
                Err(e) => {
                    if let Err(release) = self.release(index, holder).await {
                        tracing::error!(index, error = %release, "the build lease could not be released");
                    }
                    return Err(e);
                }
            };
            runs.push(run);
            if runs.len() >= MAX_ROUNDS {
                tracing::warn!(index, rounds = MAX_ROUNDS, "writes keep arriving: letting the build lease go");
                self.release(index, holder).await?;
                return Ok(Debounced::Ran(runs));
            }
            match self.finish(index, holder, seen).await? {
                None => return Ok(Debounced::Ran(runs)),
                Some(now_seen) => {
                    tracing::info!(
                        index,
                        writes = now_seen.saturating_sub(seen),
                        "writes arrived during the build: building again"
                    );
                    seen = now_seen;
                }
            }
        }
    }
}

fn writes_of(attributes: Option<&std::collections::HashMap<String, AttributeValue>>) -> u64 {
    attributes.and_then(|a| a.get("writes")).and_then(|v| v.as_n().ok()).and_then(|v| v.parse().ok()).unwrap_or(0)
}
