//! `sextant bench-merge`: what a router does with the answers of 4, 40 and 400 index
//! shards before fusion: decode each shard's answer from the shard protocol's JSON, then
//! merge each path's lists by a selection ([`top_by_score`], what the router runs) beside
//! a full sort and a cut ([`top_by_full_sort`], what it ran before), the two alternated
//! in this process so that both see the same machine. The decode is timed the same way:
//! the protocol's packed lists ([`sextant_core::shards::packed`]) beside the same answer
//! with each hit a JSON pair of numbers, the form the protocol had before, alternated query
//! by query and checked to decode to the same hits.
//!
//! Each shard answers each path with its best `depth` candidates, sorted, as a shard does
//! ([`ShardAnswer`]); a query's merge concatenates the `K` lists of a path and keeps the
//! best `depth`. The synthetic scores are a Weyl sequence (`frac((j + o)·φ)` for global
//! chunk `j`, with chunk `j` in shard `j mod K` as its `j div K`-th chunk, and `o` an
//! offset of each query and path), scaled to each path's range: distinct, evenly spread
//! and deterministic, so every run merges the same lists and no two queries the same.
//! Both methods' outputs are compared for every query.

use std::time::Instant;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use sextant_core::pipeline::{top_by_full_sort, top_by_score, Path, PathHit};
use sextant_core::shards::protocol::ShardAnswer;
use sextant_core::shards::ShardResponse;

use crate::shard_bench::quantile;

/// The golden ratio's fractional part: the step of the Weyl sequence of scores.
const PHI_FRACTION: f64 = 0.618_033_988_749_894_9;

/// Chunks a shard scores a path before it keeps its best `depth`, per `depth`.
const SCORED_PER_KEPT: usize = 4;

/// A path's synthetic score range: cosines for dense, BM25's and SPLADE's raw scores.
fn scale(path: Path) -> f64 {
    match path {
        Path::Dense => 1.0,
        Path::Bm25 => 30.0,
        Path::Splade => 20.0,
    }
}

/// A shard's answer with each hit a JSON pair `[chunk, score]`, as the protocol sent it
/// before its lists were packed: the baseline the packed decode is timed beside. The
/// same internally tagged shape as [`ShardResponse`].
#[derive(Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
enum PairsResponse {
    /// [`ShardResponse::Retrieve`]'s counterpart.
    Retrieve(PairsAnswer),
}

/// [`ShardAnswer`] with its lists as JSON pairs (the fields the bench fills).
#[derive(Serialize, Deserialize)]
struct PairsAnswer {
    lists: Vec<Vec<PathHit>>,
    used_paths: Vec<Path>,
    candidates: usize,
}

/// Shard `s`'s answer (of `shards`) to query `query`: each of `paths`, its best `depth`
/// chunks by score, sorted, with shard-local ids, as the protocol's JSON (packed lists)
/// and with each hit a JSON pair.
fn shard_answer(shards: usize, s: usize, depth: usize, paths: &[Path], query: usize) -> Result<[Vec<u8>; 2]> {
    let lists = paths
        .iter()
        .enumerate()
        .map(|(p, &path)| {
            let offset = ((query * paths.len() + p) as f64) * 0.37;
            let mut own: Vec<PathHit> = (0..SCORED_PER_KEPT * depth)
                .map(|i| {
                    let j = (i * shards + s) as f64;
                    (i as u32, (((j + offset) * PHI_FRACTION).fract() * scale(path)) as f32)
                })
                .collect();
            top_by_full_sort(&mut own, depth);
            own
        })
        .collect();
    let answer =
        ShardAnswer { lists, used_paths: paths.to_vec(), candidates: SCORED_PER_KEPT * depth, ..Default::default() };
    let pairs = PairsResponse::Retrieve(PairsAnswer {
        lists: answer.lists.clone(),
        used_paths: answer.used_paths.clone(),
        candidates: answer.candidates,
    });
    Ok([serde_json::to_vec(&ShardResponse::Retrieve(answer))?, serde_json::to_vec(&pairs)?])
}

/// Every shard's answer of `wire` in its form `form` (0: packed, 1: JSON pairs), decoded.
fn decode_all<T: serde::de::DeserializeOwned>(wire: &[[Vec<u8>; 2]], form: usize) -> Result<Vec<T>> {
    wire.iter().map(|w| serde_json::from_slice(&w[form])).collect::<Result<_, _>>().context("decoding")
}

/// Each path's hits of every shard of `answers`, with global ids, as the router gathers
/// them.
fn gather<'a>(answers: impl Iterator<Item = &'a Vec<Vec<PathHit>>>, shards: usize, paths: usize) -> Vec<Vec<PathHit>> {
    let mut lists: Vec<Vec<PathHit>> = vec![Vec::new(); paths];
    for (s, answer) in answers.enumerate() {
        for (list, hits) in lists.iter_mut().zip(answer) {
            list.extend(hits.iter().map(|&(c, score)| (c * shards as u32 + s as u32, score)));
        }
    }
    lists
}

/// The `p`-quantile of `seconds`, in milliseconds.
fn quantile_ms(seconds: &mut [f64], p: f64) -> f64 {
    quantile(seconds, p) * 1e3
}

/// Decodes and merges `queries` queries' answers of `paths` paths at each shard count of
/// `shard_counts`, the merge both ways, and prints a Markdown table and one JSON line of
/// the same figures.
pub fn run(shard_counts: &[usize], depth: usize, paths: usize, queries: usize) -> Result<()> {
    anyhow::ensure!(depth > 0 && queries > 0, "bench-merge needs a depth and queries");
    anyhow::ensure!((1..=3).contains(&paths), "--paths takes 1 to 3");
    let paths = &Path::ALL[..paths];
    println!(
        "| shards | hits a query | kB a query, packed / pairs | decode p50 / p99 (ms), packed | pairs | packed ÷ pairs, p50 / p99 \
         | merge p50 / p99 (ms) | full sort p50 / p99 (ms) | merge ÷ full sort, p50 / p99 |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    let mut json = Vec::new();
    for &shards in shard_counts {
        anyhow::ensure!(shards > 0, "--shards takes counts of at least 1");
        let (mut decode, mut decode_pairs, mut fast, mut full) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        let mut bytes = [0usize; 2];
        for q in 0..queries {
            let wire: Vec<[Vec<u8>; 2]> =
                (0..shards).map(|s| shard_answer(shards, s, depth, paths, q)).collect::<Result<_>>()?;
            bytes[0] += wire.iter().map(|w| w[0].len()).sum::<usize>();
            bytes[1] += wire.iter().map(|w| w[1].len()).sum::<usize>();
            // The two decodes, alternated as the merges are below.
            let mut packed: Vec<ShardResponse> = Vec::new();
            let mut pairs: Vec<PairsResponse> = Vec::new();
            for turn in 0..2 {
                let start = Instant::now();
                if (q + turn) % 2 == 0 {
                    packed = decode_all(&wire, 0)?;
                    decode.push(start.elapsed().as_secs_f64());
                } else {
                    pairs = decode_all(&wire, 1)?;
                    decode_pairs.push(start.elapsed().as_secs_f64());
                }
            }
            let packed_lists = packed.iter().map(|a| match a {
                ShardResponse::Retrieve(a) => Ok(&a.lists),
                _ => anyhow::bail!("not a retrieval answer"),
            });
            let packed_lists: Vec<&Vec<Vec<PathHit>>> = packed_lists.collect::<Result<_>>()?;
            let lists = gather(packed_lists.into_iter(), shards, paths.len());
            let pair_lists = gather(pairs.iter().map(|PairsResponse::Retrieve(a)| &a.lists), shards, paths.len());
            anyhow::ensure!(lists == pair_lists, "the packed and the paired answers decoded to other hits (query {q})");
            // Alternate which goes first, so neither always runs on a warmer cache.
            let mut times = [0.0f64; 2];
            let mut kept: [Vec<Vec<PathHit>>; 2] = Default::default();
            for turn in 0..2 {
                let which = (q + turn) % 2;
                let mut copies = lists.clone();
                let start = Instant::now();
                for list in &mut copies {
                    if which == 0 {
                        top_by_score(list, depth);
                    } else {
                        top_by_full_sort(list, depth);
                    }
                }
                times[which] = start.elapsed().as_secs_f64();
                kept[which] = copies;
            }
            anyhow::ensure!(kept[0] == kept[1], "the selection and the full sort kept different lists (query {q})");
            fast.push(times[0]);
            full.push(times[1]);
        }
        let (d50, d99) = (quantile_ms(&mut decode, 0.5), quantile_ms(&mut decode, 0.99));
        let (p50, p99) = (quantile_ms(&mut decode_pairs, 0.5), quantile_ms(&mut decode_pairs, 0.99));
        let (kb, kb_pairs) = (bytes[0] as f64 / queries as f64 / 1e3, bytes[1] as f64 / queries as f64 / 1e3);
        let (f50, f99) = (quantile_ms(&mut fast, 0.5), quantile_ms(&mut fast, 0.99));
        let (s50, s99) = (quantile_ms(&mut full, 0.5), quantile_ms(&mut full, 0.99));
        let hits = shards * depth * paths.len();
        println!(
            "| {shards} | {hits} | {kb:.0} / {kb_pairs:.0} | {d50:.3} / {d99:.3} | {p50:.3} / {p99:.3} | {:.2} / {:.2} \
             | {f50:.3} / {f99:.3} | {s50:.3} / {s99:.3} | {:.2} / {:.2} |",
            d50 / p50,
            d99 / p99,
            f50 / s50,
            f99 / s99
        );
        json.push(serde_json::json!({
            "shards": shards, "hits_per_query": hits, "paths": paths.len(), "depth": depth, "queries": queries,
            "kb_per_query": {"packed": kb, "pairs": kb_pairs},
            "decode_ms": {"p50": d50, "p99": d99}, "decode_pairs_ms": {"p50": p50, "p99": p99},
            "merge_ms": {"p50": f50, "p99": f99}, "full_sort_ms": {"p50": s50, "p99": s99},
        }));
    }
    println!();
    println!("{}", serde_json::Value::Array(json));
    Ok(())
}
