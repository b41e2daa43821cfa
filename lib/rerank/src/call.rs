//! What every hosted reranker does around its request: wait for it from the engine's
//! synchronous rerank stage with a deadline, and check the answer before it reorders
//! anything.

use std::future::Future;
use std::time::Duration;

use sextant_core::pipeline::{Candidate, Reranked};
use tokio::runtime::Handle;

use crate::error::{Error, Result};

/// Runs `work` on `runtime` and waits for its answer from synchronous code (the engine's
/// rerank stage runs on a blocking thread), at most `deadline`.
///
/// The wait is a channel, not `Handle::block_on`: it neither panics on a runtime's own
/// thread nor needs one, and a request that misses the deadline is aborted, not left
/// running.
pub(crate) fn with_deadline<T: Send + 'static>(
    runtime: &Handle,
    service: &'static str,
    deadline: Duration,
    work: impl Future<Output = Result<T>> + Send + 'static,
) -> Result<T> {
    let (tx, rx) = std::sync::mpsc::sync_channel(1);
    let task = runtime.spawn(async move {
        let out = tokio::time::timeout(deadline, work).await;
        let _ = tx.send(out);
    });
    // The task keeps its own deadline; this one is the backstop for a runtime too busy to
    // run it at all.
    match rx.recv_timeout(deadline + Duration::from_millis(200)) {
        Ok(Ok(answer)) => answer,
        Ok(Err(_)) => Err(Error::Timeout { service, after: deadline }),
        Err(_) => {
            task.abort();
            Err(Error::Timeout { service, after: deadline })
        }
    }
}

/// One rerank through a hosted service, as the engine's rerank stage asks for it: the
/// candidates' texts go to `call` (one request), whose answer is waited for at most
/// `timeout` on `runtime`, checked ([`verdicts`]) and returned best first. Any failure is
/// the engine's error for component `name`, so the fused order stays.
pub(crate) fn rerank_through<Fut>(
    runtime: &Handle,
    service: &'static str,
    name: &str,
    timeout: Duration,
    query: &str,
    candidates: &[Candidate<'_>],
    call: impl FnOnce(String, Vec<String>) -> Fut,
) -> sextant_core::Result<Vec<Reranked>>
where
    Fut: Future<Output = Result<Vec<(i64, f64)>>> + Send + 'static,
{
    if candidates.is_empty() {
        return Ok(Vec::new());
    }
    let documents = candidates.iter().map(|c| c.text.to_string()).collect();
    with_deadline(runtime, service, timeout, call(query.to_string(), documents))
        // A client's own timeout (the AWS SDK's) is this same deadline.
        .map_err(|e| match e {
            Error::Timeout { service, .. } => Error::Timeout { service, after: timeout },
            e => e,
        })
        .and_then(|scored| verdicts(service, candidates, scored))
        .map_err(|e| sextant_core::Error::Component { component: name.to_string(), reason: e.to_string() })
}

/// Turns a service's `(index into the documents sent, relevance)` pairs into the engine's
/// verdicts, best first (ties keep the service's order).
///
/// Refused, so the fused order stays: an index outside the documents sent, a document
/// ranked twice, a relevance that is not a finite number. A document the service left out
/// is allowed (the engine keeps it below the reranked ones).
pub(crate) fn verdicts(
    service: &'static str,
    candidates: &[Candidate<'_>],
    scored: impl IntoIterator<Item = (i64, f64)>,
) -> Result<Vec<Reranked>> {
    let protocol = |reason: String| Error::Protocol { service, reason };
    let mut seen = vec![false; candidates.len()];
    let mut out = Vec::with_capacity(candidates.len());
    for (index, score) in scored {
        let i = usize::try_from(index)
            .ok()
            .filter(|&i| i < candidates.len())
            .ok_or_else(|| protocol(format!("index {index} is not one of the {} documents sent", candidates.len())))?;
        if std::mem::replace(&mut seen[i], true) {
            return Err(protocol(format!("document {index} is ranked twice")));
        }
        if !score.is_finite() {
            return Err(protocol(format!("document {index} has relevance {score}")));
        }
        out.push(Reranked { chunk: candidates[i].chunk, score: score as f32 });
    }
    out.sort_by(|a, b| b.score.total_cmp(&a.score));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn candidates() -> Vec<Candidate<'static>> {
        [(10, "a"), (20, "b"), (30, "c")]
            .into_iter()
            .map(|(chunk, text)| Candidate { chunk, text, fused_score: 0.0 })
            .collect()
    }

    #[test]
    fn verdicts_map_indexes_to_chunks_best_first() {
        let v = verdicts("svc", &candidates(), [(2, 0.1), (0, 0.9)]).unwrap();
        assert_eq!(v, vec![Reranked { chunk: 10, score: 0.9 }, Reranked { chunk: 30, score: 0.1 }]);
    }

    #[test]
    fn verdicts_refuse_what_the_protocol_forbids() {
        for (bad, why) in [
            (vec![(3, 0.5)], "not one of the 3"),
            (vec![(-1, 0.5)], "not one of the 3"),
            (vec![(1, 0.5), (1, 0.4)], "ranked twice"),
            (vec![(0, f64::NAN)], "relevance NaN"),
        ] {
            let e = verdicts("svc", &candidates(), bad).unwrap_err().to_string();
            assert!(e.contains(why), "{e}");
        }
    }

    #[test]
    fn a_late_answer_is_a_timeout_and_its_task_is_stopped() {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
        let finished = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = finished.clone();
        let t = std::time::Instant::now();
        let out = with_deadline(rt.handle(), "svc", Duration::from_millis(100), async move {
            tokio::time::sleep(Duration::from_secs(5)).await;
            flag.store(true, std::sync::atomic::Ordering::SeqCst);
            Ok(())
        });
        assert!(matches!(out, Err(Error::Timeout { .. })), "{out:?}");
        assert!(t.elapsed() < Duration::from_secs(2));
        let on_time = with_deadline(rt.handle(), "svc", Duration::from_secs(5), async { Ok(7) });
        assert_eq!(on_time.unwrap(), 7);
        assert!(!finished.load(std::sync::atomic::Ordering::SeqCst));
    }
}
