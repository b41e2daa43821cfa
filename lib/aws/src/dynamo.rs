//! Keys, plans and rate counters in DynamoDB.
//!
//! Keys table (partition key `pk`, a string):
//! - `key#<sha256>`: `prefix`, `tenant`, `plan`, `status`, `indexes` (list),
//!   `created_unix`, `revoked_unix`. The key itself is never stored.
//! - `plan#<name>`: `max_top_k`, `requests_per_minute`, `requests_per_day`.
//!
//! Rate table (partition key `pk`, TTL attribute `expires_at`): one item per key and
//! window, `rate#<sha256>#<window seconds>#<window start>`, holding the count `n`. A
//! request is counted with one `UpdateItem` per window, `ADD n :one` under the condition
//! `attribute_not_exists(n) OR n < :limit`, so concurrent requests can never push a
//! window past its limit. Window items expire through TTL a minute after the window
//! ends; since a window's key names its start, an expired item that DynamoDB has not yet
//! deleted is never read again.

use std::collections::HashMap;

use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use aws_sdk_dynamodb::types::{AttributeValue, ReturnValue};
use aws_sdk_dynamodb::Client;
use sextant_core::error::{Error, Result};
use sextant_keys::{
    check_plan, constant_time_eq, rate_windows, ApiKey, KeyStatus, KeyStore, Plan, RateDecision, StoreFuture,
};

use crate::sdk::storage_error;

/// Keys and plans in one DynamoDB table, rate counters in another.
pub struct DynamoKeyStore {
    client: Client,
    keys_table: String,
    rate_table: Option<String>,
}

type Item = HashMap<String, AttributeValue>;

fn s(v: impl Into<String>) -> AttributeValue {
    AttributeValue::S(v.into())
}

fn n(v: u64) -> AttributeValue {
    AttributeValue::N(v.to_string())
}

fn get_s(item: &Item, k: &str) -> Result<String> {
    item.get(k).and_then(|v| v.as_s().ok()).cloned().ok_or_else(|| corrupt(k))
}

fn get_n(item: &Item, k: &str) -> Result<u64> {
    item.get(k).and_then(|v| v.as_n().ok()).and_then(|v| v.parse().ok()).ok_or_else(|| corrupt(k))
}

fn corrupt(attr: &str) -> Error {
    Error::Storage { location: "dynamodb".into(), reason: format!("item without a valid `{attr}` attribute") }
}

fn key_item(k: &ApiKey) -> Item {
    let mut item: Item = [
        ("pk".to_string(), s(format!("key#{}", k.hash))),
        ("prefix".into(), s(&k.prefix)),
        ("tenant".into(), s(&k.tenant)),
        ("plan".into(), s(&k.plan)),
        ("status".into(), s(if k.status == KeyStatus::Active { "active" } else { "revoked" })),
        ("indexes".into(), AttributeValue::L(k.indexes.iter().map(s).collect())),
        ("created_unix".into(), n(k.created_unix)),
    ]
    .into_iter()
    .collect();
    if let Some(r) = k.revoked_unix {
        item.insert("revoked_unix".into(), n(r));
    }
    item
}

fn key_from(item: &Item) -> Result<ApiKey> {
    let pk = get_s(item, "pk")?;
    let hash = pk.strip_prefix("key#").ok_or_else(|| corrupt("pk"))?.to_string();
    let indexes = match item.get("indexes") {
        Some(AttributeValue::L(l)) => l.iter().filter_map(|v| v.as_s().ok().cloned()).collect(),
        Some(AttributeValue::Ss(l)) => l.clone(),
        _ => return Err(corrupt("indexes")),
    };
    Ok(ApiKey {
        hash,
        prefix: get_s(item, "prefix")?,
        tenant: get_s(item, "tenant")?,
        plan: get_s(item, "plan")?,
        status: match get_s(item, "status")?.as_str() {
            "active" => KeyStatus::Active,
            _ => KeyStatus::Revoked,
        },
        indexes,
        created_unix: get_n(item, "created_unix")?,
        revoked_unix: get_n(item, "revoked_unix").ok(),
    })
}

fn plan_item(p: &Plan) -> Item {
    [
        ("pk".to_string(), s(format!("plan#{}", p.name.to_ascii_lowercase()))),
        ("max_top_k".into(), n(p.max_top_k as u64)),
        ("requests_per_minute".into(), n(p.requests_per_minute)),
        ("requests_per_day".into(), n(p.requests_per_day)),
    ]
    .into_iter()
    .collect()
}

fn plan_from(item: &Item) -> Result<Plan> {
    let pk = get_s(item, "pk")?;
    Ok(Plan {
        name: pk.strip_prefix("plan#").ok_or_else(|| corrupt("pk"))?.to_string(),
        max_top_k: get_n(item, "max_top_k")? as usize,
        requests_per_minute: get_n(item, "requests_per_minute")?,
        requests_per_day: get_n(item, "requests_per_day")?,
    })
}

impl DynamoKeyStore {
    /// A store over `keys_table` (and `rate_table`, needed to count requests).
    pub fn new(config: &aws_config::SdkConfig, keys_table: String, rate_table: Option<String>) -> Self {
        DynamoKeyStore { client: Client::new(config), keys_table, rate_table }
    }

    fn loc(&self, table: &str) -> String {
        format!("dynamodb://{table}")
    }

    async fn get(&self, pk: String) -> Result<Option<Item>> {
        let out = self
            .client
            .get_item()
            .table_name(&self.keys_table)
            .key("pk", s(pk))
            .send()
            .await
            .map_err(|e| storage_error(self.loc(&self.keys_table), e))?;
        Ok(out.item)
    }

    /// Every item whose `pk` starts with `prefix` (a paginated scan).
    async fn scan(&self, prefix: &str) -> Result<Vec<Item>> {
        let mut items = Vec::new();
        let mut start = None;
        loop {
            let out = self
                .client
                .scan()
                .table_name(&self.keys_table)
                .filter_expression("begins_with(pk, :p)")
                .expression_attribute_values(":p", s(prefix))
                .set_exclusive_start_key(start)
                .send()
                .await
                .map_err(|e| storage_error(self.loc(&self.keys_table), e))?;
            items.extend(out.items.unwrap_or_default());
            start = out.last_evaluated_key.filter(|k| !k.is_empty());
            if start.is_none() {
                return Ok(items);
            }
        }
    }

    async fn put(&self, item: Item) -> Result<()> {
        self.client
            .put_item()
            .table_name(&self.keys_table)
            .set_item(Some(item))
            .send()
            .await
            .map_err(|e| storage_error(self.loc(&self.keys_table), e))?;
        Ok(())
    }

    /// Adds `delta` to one window's count: `Ok(Some(new count))`, or `Ok(None)` when the
    /// condition `n < limit` refused it.
    async fn add(&self, table: &str, pk: &str, delta: i64, limit: Option<u64>, expires_at: u64) -> Result<Option<u64>> {
        let mut req = self
            .client
            .update_item()
            .table_name(table)
            .key("pk", s(pk))
            .update_expression("SET expires_at = if_not_exists(expires_at, :exp) ADD #n :d")
            .expression_attribute_names("#n", "n")
            .expression_attribute_values(":d", AttributeValue::N(delta.to_string()))
            .expression_attribute_values(":exp", n(expires_at))
            .return_values(ReturnValue::UpdatedNew);
        if let Some(limit) = limit {
            req = req
                .condition_expression("attribute_not_exists(#n) OR #n < :limit")
                .expression_attribute_values(":limit", n(limit));
        }
        match req.send().await {
            Ok(out) => Ok(Some(out.attributes.as_ref().map(|a| get_n(a, "n")).transpose()?.unwrap_or(0))),
            Err(e) if matches!(e.as_service_error(), Some(UpdateItemError::ConditionalCheckFailedException(_))) => {
                Ok(None)
            }
            Err(e) => Err(storage_error(self.loc(table), e)),
        }
    }

    async fn count_request(&self, key: &ApiKey, plan: &Plan, now: u64) -> Result<RateDecision> {
        let table = self
            .rate_table
            .as_deref()
            .ok_or_else(|| Error::invalid("keys", "no rate table configured: use dynamodb://KEYS_TABLE/RATE_TABLE"))?;
        let mut tightest = (u64::MAX, u64::MAX, 0u64);
        let mut counted: Vec<(String, u64)> = Vec::new();
        for (len, limit) in rate_windows(plan) {
            let start = now - now % len;
            let pk = format!("rate#{}#{len}#{start}", key.hash);
            match self.add(table, &pk, 1, Some(limit), start + len + 60).await {
                Ok(Some(used)) => {
                    let remaining = limit.saturating_sub(used);
                    if remaining < tightest.1 {
                        tightest = (limit, remaining, start + len - now);
                    }
                    counted.push((pk, start + len + 60));
                }
                outcome => {
                    // Give back what the narrower windows counted: a refused request is not counted.
                    for (pk, exp) in counted {
                        if let Err(e) = self.add(table, &pk, -1, None, exp).await {
                            tracing::warn!(error = %e, "could not give back a refused request's count");
                        }
                    }
                    outcome?;
                    return Ok(RateDecision::Limited { limit, retry_after: (start + len - now).max(1) });
                }
            }
        }
        Ok(RateDecision::Allowed { limit: tightest.0, remaining: tightest.1, reset_secs: tightest.2 })
    }
}

impl KeyStore for DynamoKeyStore {
    fn find<'a>(&'a self, hash: &'a str) -> StoreFuture<'a, Option<ApiKey>> {
        Box::pin(async move {
            let Some(item) = self.get(format!("key#{hash}")).await? else { return Ok(None) };
            let key = key_from(&item)?;
            // The item was found by its hash; compare once more in constant time.
            Ok(constant_time_eq(&key.hash, hash).then_some(key))
        })
    }

    fn plan<'a>(&'a self, name: &'a str) -> StoreFuture<'a, Option<Plan>> {
        Box::pin(async move {
            match self.get(format!("plan#{}", name.to_ascii_lowercase())).await? {
                Some(item) => plan_from(&item).map(Some),
                None => Ok(Plan::builtin().into_iter().find(|p| p.name.eq_ignore_ascii_case(name))),
            }
        })
    }

    fn count<'a>(&'a self, key: &'a ApiKey, plan: &'a Plan, now: u64) -> StoreFuture<'a, RateDecision> {
        Box::pin(self.count_request(key, plan, now))
    }

    fn put_key(&self, record: ApiKey) -> StoreFuture<'_, ()> {
        Box::pin(self.put(key_item(&record)))
    }

    fn list_keys(&self) -> StoreFuture<'_, Vec<ApiKey>> {
        Box::pin(async move {
            let mut keys = self.scan("key#").await?.iter().map(key_from).collect::<Result<Vec<_>>>()?;
            keys.sort_by(|a, b| a.created_unix.cmp(&b.created_unix).then(a.prefix.cmp(&b.prefix)));
            Ok(keys)
        })
    }

    fn revoke<'a>(&'a self, id: &'a str, now: u64) -> StoreFuture<'a, usize> {
        Box::pin(async move {
            let mut n_revoked = 0;
            for mut key in self.list_keys().await?.into_iter().filter(|k| k.hash == id || k.prefix == id) {
                key.status = KeyStatus::Revoked;
                key.revoked_unix = Some(now);
                self.put(key_item(&key)).await?;
                n_revoked += 1;
            }
            Ok(n_revoked)
        })
    }

    fn put_plan(&self, plan: Plan) -> StoreFuture<'_, ()> {
        Box::pin(async move {
            check_plan(&plan)?;
            self.put(plan_item(&plan)).await
        })
    }

    fn custom_plans(&self) -> StoreFuture<'_, Vec<Plan>> {
        Box::pin(async move {
            let mut plans = self.scan("plan#").await?.iter().map(plan_from).collect::<Result<Vec<_>>>()?;
            plans.sort_by(|a, b| a.name.cmp(&b.name));
            Ok(plans)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn items_round_trip_keys_and_plans() {
        let mut k =
            sextant_keys::key_record("sx_0123456789", "acme", "Pro", vec!["demo".into(), "*".into()], 1_700_000_000);
        assert_eq!(key_from(&key_item(&k)).unwrap(), k);
        k.status = KeyStatus::Revoked;
        k.revoked_unix = Some(1_700_000_100);
        assert_eq!(key_from(&key_item(&k)).unwrap(), k);
        assert!(
            !key_item(&k).values().any(|v| v.as_s().is_ok_and(|s| s.contains("sx_0123456789"))),
            "the key is never stored"
        );
        let p = Plan { name: "team".into(), max_top_k: 20, requests_per_minute: 100, requests_per_day: 10_000 };
        assert_eq!(plan_from(&plan_item(&p)).unwrap(), p);
        let mut broken = plan_item(&p);
        broken.remove("requests_per_day");
        assert!(plan_from(&broken).unwrap_err().to_string().contains("requests_per_day"));
    }
}
