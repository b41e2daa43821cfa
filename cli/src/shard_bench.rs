//! `sextant bench-shards`: one synthetic index searched whole and as `K` index shards, in
//! the same process on the same queries, alternating which goes first.
//!
//! Per query it measures, each query encoded once for both:
//! - the whole index's search (`K` = 1, the baseline);
//! - the sharded search in this process (every shard on the same cores);
//! - each shard's retrieval alone, as a shard function answers it (its own cores);
//! - the router's part after the shards answer: merging each path's lists, the rest of
//!   the search, and the fetch phase that asks the shards for the results' text
//!   ([`ShardedOutcome::merge_ms`](sextant_core::shards::ShardedOutcome) and `fetch_ms`);
//! - a distributed query, `encode + max over shards of the shard alone + merge`, which is
//!   what a router whose shards run in functions of their own waits for, before the network;
//! - with `--workers`, the sharded search over the shard protocol, each shard a worker
//!   process on loopback (`sextant shard-worker`), the router holding only the shards'
//!   stores (no text): the network and serialisation included.
//!
//! And the memory a search holds resident (the indexes' own estimate,
//! [`Index::resident_bytes`]): of the whole index, and of each shard, per chunk.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, Result};
use sextant_core::build::{merge, merge_shards};
use sextant_core::index::Index;
use sextant_core::pipeline::{Engine, SearchRequest};
use sextant_core::shards::protocol::ShardQuery;
use sextant_core::shards::{load_sharded, read_root, save_sharded, ShardRequest, ShardSet};
use sextant_core::storage::LocalDir;

use crate::capacity::synthetic_plan;
use crate::shard_workers::router_over_workers;

/// The synthetic index of `target` chunks made from `engine`'s index, whole and as `k`
/// shards, under `dir` (built once, then reused), each searched with `engine`'s models;
/// each shard's estimated resident bytes ([`Index::resident_bytes`]); and the sharded
/// index's directory.
fn indexes(engine: &Engine, target: usize, k: usize, dir: &Path) -> Result<(Engine, ShardSet, Vec<f64>, PathBuf)> {
    let (whole_dir, shards_dir) = (dir.join(format!("whole-{target}")), dir.join(format!("shards-{target}-{k}")));
    let (whole_store, shards_store) = (LocalDir::new(&whole_dir), LocalDir::new(&shards_dir));
    if Index::load(&whole_store).is_err() || !matches!(load_sharded(&shards_store), Ok(Some(_))) {
        let t = Instant::now();
        let (plan, encoded) = synthetic_plan(engine.index(), target);
        let whole = merge(plan.clone(), &encoded, &|_, _, _| {})?;
        whole.save(&whole_store)?;
        drop(whole);
        eprintln!("merged {target} chunks as one index in {:.0} s", t.elapsed().as_secs_f64());
        let t = Instant::now();
        let shards = merge_shards(plan, &encoded, k, &|_, _, _| {})?;
        save_sharded(&shards_store, &shards, &[])?;
        eprintln!("merged them as {k} shards in {:.0} s", t.elapsed().as_secs_f64());
    }
    let with_models = |index: Arc<Index>| Ok::<_, anyhow::Error>(engine.sharing_encoders(index, None));
    let whole = with_models(Arc::new(Index::load(&whole_store)?))?;
    let (_, shards) = load_sharded(&shards_store)?.context("the sharded index was just saved")?;
    let shard_bytes = shards.indexes.iter().map(|i| i.resident_bytes() as f64).collect();
    let set = ShardSet::of_shards(shards, with_models)?;
    Ok((whole, set, shard_bytes, shards_dir))
}

/// The sharded index in `dir` served by one worker process per shard, routed from this
/// process with `engine`'s models over the shards' stores.
fn over_workers(engine: &Engine, dir: &Path) -> Result<ShardSet> {
    let (root, stats) = read_root(&LocalDir::new(dir))?.context("the sharded index was just saved")?;
    let timeout = std::time::Duration::from_secs(30);
    router_over_workers(dir, (&root, stats), (timeout, None), |store| Ok(engine.sharing_encoders(store, None)))
}

/// The `p`-quantile of `xs` (nearest rank).
pub(crate) fn quantile(xs: &mut [f64], p: f64) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[((p * xs.len() as f64).ceil() as usize).clamp(1, xs.len()) - 1]
}

/// Runs the benchmark on `queries` (cycled to `count`), prints a Markdown table and one
/// JSON line of the same figures.
/// With `workers`, the sharded index is also searched over worker processes.
pub fn run(
    engine: &Engine,
    queries: &[String],
    count: usize,
    (target, k): (usize, usize),
    dir: &Path,
    workers: bool,
) -> Result<()> {
    anyhow::ensure!(!queries.is_empty() && k > 1, "bench-shards needs queries and at least 2 shards");
    let (whole, set, shard_bytes, shards_dir) = indexes(engine, target, k, dir)?;
    let remote = workers.then(|| over_workers(engine, &shards_dir)).transpose()?;
    let mut rows: [Vec<f64>; 8] = Default::default();
    let [whole_ms, sharded_ms, alone_ms, merge_ms, distributed_ms, encode_ms, remote_ms, remote_merge_ms] = &mut rows;
    let mut overlap = 0.0;
    for (i, q) in queries.iter().cycle().take(count).enumerate() {
        // The API's own depth per path, so the dense path is the HNSW search it serves.
        let mut req = SearchRequest::new(q.as_str(), 10);
        let t = Instant::now();
        let (prepared, _) = whole.prepare_request(&req);
        let encode = t.elapsed().as_secs_f64() * 1e3;
        req.prepared = Some(Arc::new(prepared));
        let time_whole = || -> Result<(f64, Vec<u32>)> {
            let t = Instant::now();
            let out = whole.search(&req)?;
            Ok((t.elapsed().as_secs_f64() * 1e3, out.hits.iter().map(|h| h.chunk).collect()))
        };
        let time_sharded = || -> Result<(f64, f64, Vec<u32>)> {
            let t = Instant::now();
            let out = set.search(&req)?;
            let router = out.merge_ms + out.fetch_ms;
            Ok((t.elapsed().as_secs_f64() * 1e3, router, out.outcome.hits.iter().map(|h| h.chunk).collect()))
        };
        let time_remote = || -> Result<Option<(f64, f64, Vec<u32>)>> {
            let Some(remote) = &remote else { return Ok(None) };
            let t = Instant::now();
            let out = remote.search(&req)?;
            anyhow::ensure!(out.answered == out.of, "a worker did not answer: {:?}", out.failed_shards);
            let hits = out.outcome.hits.iter().map(|h| h.chunk).collect();
            Ok(Some((t.elapsed().as_secs_f64() * 1e3, out.merge_ms + out.fetch_ms, hits)))
        };
        // Each goes first, second and third in turn.
        let ((w, w_hits), (s, m, s_hits), r) = match i % 3 {
            0 => {
                let w = time_whole()?;
                let s = time_sharded()?;
                (w, s, time_remote()?)
            }
            1 => {
                let s = time_sharded()?;
                let r = time_remote()?;
                (time_whole()?, s, r)
            }
            _ => {
                let r = time_remote()?;
                let w = time_whole()?;
                (w, time_sharded()?, r)
            }
        };
        overlap += s_hits.iter().filter(|c| w_hits.contains(c)).count() as f64 / w_hits.len().max(1) as f64;
        if let Some((r, rm, r_hits)) = r {
            anyhow::ensure!(r_hits == s_hits, "over workers, another answer than in this process: {q}");
            remote_ms.push(encode + r);
            remote_merge_ms.push(rm);
        }
        let mut slowest: f64 = 0.0;
        let prepared = req.prepared.as_deref().context("the query was encoded above")?;
        let ask = ShardRequest::Retrieve(Box::new(ShardQuery::of(&req, prepared, None)));
        for shard in set.shards() {
            let t = Instant::now();
            shard.ask(&ask)?;
            let ms = t.elapsed().as_secs_f64() * 1e3;
            alone_ms.push(ms);
            slowest = slowest.max(ms);
        }
        whole_ms.push(encode + w);
        sharded_ms.push(encode + s);
        merge_ms.push(m);
        distributed_ms.push(encode + slowest + m);
        encode_ms.push(encode);
    }
    let whole_bytes = whole.index().resident_bytes() as f64;
    let chunks: Vec<usize> = set.stores().iter().map(|i| i.chunk_count()).collect();
    let mib = |b: f64| b / (1 << 20) as f64;
    println!("| {target} chunks, {count} queries | p50 (ms) | p99 (ms) | p99.9 (ms) |");
    println!("|---|---:|---:|---:|");
    let names = [
        "whole index, K = 1 (encode + search)",
        &format!("K = {k} in this process (encode + search)"),
        "one shard's retrieval alone",
        "router: merge + fusion, rerank, recency, fetch",
        &format!("distributed, K = {k}: encode + slowest shard alone + router"),
        "encode (both)",
        &format!("K = {k} over loopback workers (encode + search)"),
        "router over workers: merge + fusion, rerank, recency, fetch",
    ];
    let mut json = serde_json::Map::new();
    for (name, xs) in names.iter().zip(rows.iter_mut()).filter(|(_, xs)| !xs.is_empty()) {
        let (p50, p99, p999) = (quantile(xs, 0.5), quantile(xs, 0.99), quantile(xs, 0.999));
        println!("| {name} | {p50:.2} | {p99:.2} | {p999:.2} |");
        json.insert(name.to_string(), serde_json::json!({"p50": p50, "p99": p99, "p999": p999}));
    }
    println!();
    println!(
        "memory resident: whole {:.0} MiB ({:.0} B/chunk); shards {} MiB ({:.0} B/chunk); shards' chunks {:?}; top-10 overlap {:.3}",
        mib(whole_bytes),
        whole_bytes / target as f64,
        shard_bytes.iter().map(|b| format!("{:.0}", mib(*b))).collect::<Vec<_>>().join(" / "),
        shard_bytes.iter().sum::<f64>() / target as f64,
        chunks,
        overlap / count as f64,
    );
    json.insert("chunks".into(), target.into());
    json.insert("shards".into(), k.into());
    json.insert("queries".into(), count.into());
    json.insert("whole_bytes".into(), whole_bytes.into());
    json.insert("shard_bytes".into(), shard_bytes.into());
    json.insert("shard_chunks".into(), chunks.into());
    json.insert("top10_overlap".into(), (overlap / count as f64).into());
    if let Some(remote) = &remote {
        let store: f64 = remote.stores().iter().map(|i| i.resident_bytes() as f64).sum();
        println!("router over workers: shards' stores {:.0} MiB ({:.0} B/chunk)", mib(store), store / target as f64);
        json.insert("router_store_bytes".into(), store.into());
    }
    println!("{}", serde_json::Value::Object(json));
    Ok(())
}
