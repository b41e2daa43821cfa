//! What one request did, for the operators: filled in as the request is served (the key's
//! prefix by authentication, the index and the results by the handler, the stages' times by
//! the searches), then written as **one access log line** (`target: "access"`: method,
//! route, status, latency, key prefix, index, result count) and as the response's
//! **`Server-Timing`** header (`encode`, `dense`, `bm25`, `splade`, `fuse`, `rerank`,
//! `total`, each summed over the request's searches, in milliseconds).
//!
//! On Lambda it is also written as **CloudWatch metrics** in the Embedded Metric Format
//! ([`emf_line`]), one JSON line per request on stdout, which CloudWatch turns into metrics
//! of namespace `Sextant` (dimension `Service`) that the template's alarms watch.
//!
//! The record lives in a task-local for the request's task ([`scope`]); outside one (a unit
//! test calling a handler directly), recording does nothing.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::future::Future;

use sextant_core::pipeline::StageTimings;

/// What a request did.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct AccessRecord {
    /// The API key's public prefix, once authenticated.
    pub key_prefix: Option<String>,
    /// The index served.
    pub index: Option<String>,
    /// Results returned.
    pub results: Option<usize>,
    /// Milliseconds per stage, summed over the request's searches (`encode`, `dense`,
    /// `bm25`, `splade`, `fuse`, `rerank`, `search`).
    pub stages: BTreeMap<&'static str, f64>,
    /// What the reranker did on the request's last search (`applied`, `unavailable`,
    /// `failed`, `not_requested`).
    pub rerank: Option<&'static str>,
    /// When the index served was built (Unix seconds, from its manifest).
    pub index_built_unix: Option<u64>,
    /// Of a sharded index, the shards that did not answer the request's last search, out
    /// of how many (`None` for a single index).
    pub shards_missing: Option<(usize, usize)>,
}

tokio::task_local! {
    static RECORD: RefCell<AccessRecord>;
}

/// Runs `f` (a request) with a fresh record, and returns the record with its output.
pub async fn scope<F: Future>(f: F) -> (F::Output, AccessRecord) {
    RECORD
        .scope(RefCell::new(AccessRecord::default()), async move {
            let out = f.await;
            let record = RECORD.with(|r| r.borrow().clone());
            (out, record)
        })
        .await
}

/// Changes the current request's record (nothing outside a request).
pub fn record(change: impl FnOnce(&mut AccessRecord)) {
    let _ = RECORD.try_with(|r| change(&mut r.borrow_mut()));
}

/// The current request's stage times so far, in ms rounded to 0.1 (empty outside a
/// request): what responses show as `meta.timings`.
pub fn stages() -> BTreeMap<String, f64> {
    RECORD
        .try_with(|r| r.borrow().stages.iter().map(|(k, v)| (k.to_string(), (v * 10.0).round() / 10.0)).collect())
        .unwrap_or_default()
}

/// Adds one search's stage times to the current request's record.
pub fn add_timings(t: &StageTimings) {
    record(|r| {
        let mut add = |k: &'static str, v: f64| *r.stages.entry(k).or_insert(0.0) += v;
        add("encode", t.encode_ms);
        for (p, ms) in &t.paths_ms {
            add(p.name(), *ms);
        }
        add("fuse", t.fuse_ms);
        add("rerank", t.rerank_ms);
        add("search", t.total_ms);
    });
}

/// The request as one CloudWatch Embedded Metric Format line: namespace `Sextant`,
/// dimension `Service` = `service`; metrics `Latency` and each stage's time (ms), `Results`,
/// and 0/1 counts `ClientError` (4xx), `ServerError` (5xx), `RateLimited` (429), `Shed`
/// (503) and `RerankFailed`, so that an average is a rate; for a search on a sharded index,
/// `ShardsDegraded` (0/1: some shard did not answer) and `ShardsMissing` (how many).
pub fn emf_line(record: &AccessRecord, service: &str, status: u16, total_ms: f64, now_ms: u128) -> String {
    let mut metrics = vec![serde_json::json!({"Name": "Latency", "Unit": "Milliseconds"})];
    let mut values = serde_json::Map::new();
    values.insert("Service".into(), service.into());
    values.insert("Latency".into(), total_ms.into());
    for (stage, ms) in &record.stages {
        let name = format!("{}Ms", stage[..1].to_uppercase() + &stage[1..]);
        metrics.push(serde_json::json!({"Name": name, "Unit": "Milliseconds"}));
        values.insert(name, (*ms).into());
    }
    let counts = [
        ("ClientError", (400..500).contains(&status) && status != 429),
        ("ServerError", status >= 500 && status != 503),
        ("RateLimited", status == 429),
        ("Shed", status == 503),
        ("RerankFailed", record.rerank == Some("failed")),
    ];
    for (name, hit) in counts {
        metrics.push(serde_json::json!({"Name": name, "Unit": "Count"}));
        values.insert(name.into(), u8::from(hit).into());
    }
    if let Some(n) = record.results {
        metrics.push(serde_json::json!({"Name": "Results", "Unit": "Count"}));
        values.insert("Results".into(), n.into());
    }
    if let Some(r) = record.rerank {
        values.insert("rerank".into(), r.into());
    }
    if let Some((missing, of)) = record.shards_missing {
        for (name, value) in [("ShardsDegraded", usize::from(missing > 0)), ("ShardsMissing", missing)] {
            metrics.push(serde_json::json!({"Name": name, "Unit": "Count"}));
            values.insert(name.into(), value.into());
        }
        values.insert("shards".into(), of.into());
    }
    // How stale the answer's index is: now − its build time, so an alarm can say when
    // builds stopped arriving (a failed schedule, a stuck workflow).
    if let Some(built) = record.index_built_unix {
        let age = (now_ms / 1000).saturating_sub(u128::from(built)) as u64;
        metrics.push(serde_json::json!({"Name": "IndexAge", "Unit": "Seconds"}));
        values.insert("IndexAge".into(), age.into());
    }
    values.insert(
        "_aws".into(),
        serde_json::json!({
            "Timestamp": now_ms as u64,
            "CloudWatchMetrics": [{"Namespace": "Sextant", "Dimensions": [["Service"]], "Metrics": metrics}]
        }),
    );
    serde_json::Value::Object(values).to_string()
}

/// The `Server-Timing` value of a record and the request's total time (RFC-compliant
/// metric names, durations in milliseconds with one decimal).
pub fn server_timing(record: &AccessRecord, total_ms: f64) -> String {
    let mut parts: Vec<String> = record.stages.iter().map(|(k, v)| format!("{k};dur={v:.1}")).collect();
    parts.push(format!("total;dur={total_ms:.1}"));
    parts.join(", ")
}

#[cfg(test)]
mod tests {
    use sextant_core::pipeline::Path;

    use super::*;

    #[tokio::test]
    async fn a_requests_record_gathers_what_its_parts_report() {
        let t = StageTimings {
            encode_ms: 2.0,
            paths_ms: BTreeMap::from([(Path::Dense, 1.5), (Path::Bm25, 0.5)]),
            fuse_ms: 0.25,
            rerank_ms: 0.0,
            total_ms: 4.0,
        };
        let ((), rec) = scope(async {
            record(|r| r.key_prefix = Some("sx_abc".into()));
            add_timings(&t);
            add_timings(&t);
            record(|r| r.results = Some(3));
        })
        .await;
        assert_eq!(rec.key_prefix.as_deref(), Some("sx_abc"));
        assert_eq!(rec.results, Some(3));
        assert_eq!(rec.stages["encode"], 4.0);
        assert_eq!(rec.stages["dense"], 3.0);
        assert_eq!(
            server_timing(&rec, 9.0),
            "bm25;dur=1.0, dense;dur=3.0, encode;dur=4.0, fuse;dur=0.5, rerank;dur=0.0, search;dur=8.0, total;dur=9.0"
        );
        // Outside a request nothing is recorded, and nothing fails.
        record(|r| r.results = Some(1));
    }

    #[test]
    fn a_request_is_one_emf_line_cloudwatch_can_read() {
        let rec = AccessRecord {
            key_prefix: Some("sx_abc".into()),
            index: Some("demo".into()),
            results: Some(5),
            stages: BTreeMap::from([("encode", 2.0), ("bm25", 0.5)]),
            rerank: Some("failed"),
            index_built_unix: Some(1_700_000_000 - 7200),
            shards_missing: Some((1, 4)),
        };
        let line: serde_json::Value =
            serde_json::from_str(&emf_line(&rec, "api", 503, 12.5, 1_700_000_000_000)).unwrap();
        let spec = &line["_aws"]["CloudWatchMetrics"][0];
        assert_eq!(line["_aws"]["Timestamp"], 1_700_000_000_000u64);
        assert_eq!(spec["Namespace"], "Sextant");
        assert_eq!(spec["Dimensions"], serde_json::json!([["Service"]]));
        assert_eq!(line["Service"], "api");
        // Every declared metric has its value at the top level.
        for m in spec["Metrics"].as_array().unwrap() {
            let name = m["Name"].as_str().unwrap();
            assert!(line[name].is_number(), "{name} has no value: {line}");
        }
        assert_eq!(
            (line["Latency"].as_f64(), line["EncodeMs"].as_f64(), line["Bm25Ms"].as_f64()),
            (Some(12.5), Some(2.0), Some(0.5))
        );
        assert_eq!(
            (line["Shed"].as_u64(), line["ServerError"].as_u64(), line["RerankFailed"].as_u64()),
            (Some(1), Some(0), Some(1))
        );
        assert_eq!(line["Results"], 5);
        assert_eq!(line["IndexAge"], 7200, "seconds since the index was built");
        assert_eq!((line["ShardsDegraded"].as_u64(), line["ShardsMissing"].as_u64()), (Some(1), Some(1)));
        // A single index declares no shard metrics.
        let single = AccessRecord { shards_missing: None, ..rec };
        let line: serde_json::Value = serde_json::from_str(&emf_line(&single, "api", 200, 1.0, 0)).unwrap();
        assert!(line.get("ShardsDegraded").is_none() && line.get("shards").is_none(), "{line}");
    }
}
