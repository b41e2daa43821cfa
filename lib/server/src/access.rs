//! What one request did, for the operators: filled in as the request is served (the key's
//! prefix by authentication, the index and the results by the handler, the stages' times by
//! the searches), then written as **one access log line** (`target: "access"`: method,
//! route, status, latency, key prefix, index, result count) and as the response's
//! **`Server-Timing`** header (`encode`, `dense`, `bm25`, `splade`, `fuse`, `rerank`,
//! `total`, each summed over the request's searches, in milliseconds).
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
}
