//! `sextant bench-capacity`: what the merge step and a search function's memory cost at
//! sizes no bundled corpus reaches, on synthetic chunks made from a real index
//! ([`crate::bench::synthetic_parts`]): the merge's time and peak memory, and the peak
//! memory of loading the index as a function does (files downloaded into memory, the `f32`
//! vectors and SPLADE postings to local disk, then decoded), once and then a second time beside the first (a warm swap holds both).

use std::path::Path;
use std::time::Instant;

use anyhow::{Context, Result};
use sextant_aws::MemoryBudget;
use sextant_core::build::{
    merge, shard_ranges, BuildOptions, ChunkKey, EncodedChunk, EncodedShard, Plan, DEFAULT_SHARD_CHUNKS,
};
use sextant_core::index::Index;
use sextant_core::storage::LocalDir;

use crate::bench::{synthetic_parts, SyntheticParts};
use crate::indexes::downloaded_files;

/// A field of `/proc/self/status` (`VmRSS`, `VmHWM`) in MiB.
pub(crate) fn status_mib(field: &str) -> Result<f64> {
    let status = std::fs::read_to_string("/proc/self/status")?;
    let line =
        status.lines().find(|l| l.starts_with(field)).with_context(|| format!("no {field} in /proc/self/status"))?;
    let kib: f64 = line.split_whitespace().nth(1).context("a value")?.parse()?;
    Ok(kib / 1024.0)
}

/// Resets the peak resident size (`VmHWM`) to the current one (Linux: `5` to
/// `/proc/self/clear_refs`).
pub(crate) fn reset_peak() -> Result<()> {
    std::fs::write("/proc/self/clear_refs", "5").context("resetting the peak resident size")
}

/// Searches of each path `bench-load` runs to see what searching pages in of the files
/// read in place.
const PAGING_SEARCHES: usize = 1_000;

/// Terms of a SPLADE query in `bench-load`'s paging searches (a real query has 20 to 60).
const PAGING_TERMS: usize = 32;

/// `sextant bench-load`: the resident size of this process at start, after loading the
/// index in `dir` as a function does, and after loading it a second time beside the first;
/// then the file pages (of the files read in place, `Index::IN_PLACE_FILES`, among others)
/// that [`PAGING_SEARCHES`] dense searches of 200 (each chunk's first vector as the query),
/// then as many SPLADE searches of 200 ([`PAGING_TERMS`] terms that have postings, spread
/// over the vocabulary), make resident. Printed as JSON, beside what the functions' memory
/// rule allows for one load and for a second beside a served one (`rule_once_mib`,
/// `rule_twice_mib`, [`MemoryBudget`]), to be compared with the peaks less `idle_mib`.
pub fn load(dir: &Path) -> Result<()> {
    let idle = status_mib("VmRSS")?;
    let first = Index::load(&downloaded_files(dir)?)?;
    let once = status_mib("VmHWM")?;
    let resident = status_mib("VmRSS")? - idle;
    let mib = |bytes: u64| bytes as f64 / (1 << 20) as f64;
    let estimate_bytes = first.resident_bytes();
    let estimate = mib(estimate_bytes);
    let in_place = mib(first.dense.mapped_bytes() + first.splade.inverted.postings_bytes());
    let second = Index::load(&downloaded_files(dir)?)?;
    let twice = status_mib("VmHWM")?;
    drop(second);
    let file_before = status_mib("RssFile")?;
    let (n, dim) = (first.chunks.len().max(1), first.dense.dim);
    for i in 0..PAGING_SEARCHES {
        let query = first.dense_vectors((i * 7919 % n) as u32)[..dim].to_vec();
        std::hint::black_box(first.dense.search(&query, None, 200));
    }
    let dense_paged_in = status_mib("RssFile")? - file_before;
    let splade = &first.splade.inverted;
    let terms: Vec<u32> = (0..splade.num_terms() as u32).filter(|&t| splade.df(t) > 0).collect();
    for i in 0..PAGING_SEARCHES {
        let mut ids: Vec<u32> = (0..PAGING_TERMS).map(|j| terms[(i * 7919 + j * 104_729) % terms.len()]).collect();
        ids.sort_unstable();
        ids.dedup();
        let query = sextant_core::encode::SparseVector { weights: vec![1.0; ids.len()], ids };
        std::hint::black_box(first.splade.search(&query, None, 200));
    }
    let splade_paged_in = status_mib("RssFile")? - file_before - dense_paged_in;
    let rule_once = mib(MemoryBudget::load_bytes(estimate_bytes));
    let rule_twice = mib(MemoryBudget::swap_bytes(estimate_bytes, estimate_bytes));
    drop(first);
    println!(
        "{}",
        serde_json::json!({"idle_mib": idle, "once_mib": once, "twice_mib": twice,
                           "rule_once_mib": rule_once, "rule_twice_mib": rule_twice,
                           "resident_mib": resident, "estimate_mib": estimate, "in_place_mib": in_place,
                           "searches": PAGING_SEARCHES, "dense_paged_in_mib": dense_paged_in,
                           "splade_paged_in_mib": splade_paged_in})
    );
    Ok(())
}

/// The plan and encoded vectors of `target` synthetic chunks made from `base`
/// ([`synthetic_parts`]), as a build would hand them to its merge: `base`'s documents,
/// each holding a contiguous run of the chunks.
pub fn synthetic_plan(base: &Index, target: usize) -> (Plan, Vec<EncodedShard>) {
    let SyntheticParts { texts, vectors, sparse, mut chunks } = synthetic_parts(base, target);
    let dim = base.dense.dim;
    let ndocs = base.documents.len();
    for (i, (c, t)) in chunks.iter_mut().zip(&texts).enumerate() {
        // Contiguous runs of chunks per document, as a real plan has.
        c.doc = (i * ndocs / target) as u32;
        c.text = t.clone();
    }
    let keys: Vec<ChunkKey> =
        (0..target).map(|i| ChunkKey::new("synthetic", "synthetic", 200, 256, 128, &i.to_string())).collect();
    let step = DEFAULT_SHARD_CHUNKS;
    let mut shards = Vec::new();
    let mut records = keys.iter().zip(vectors).zip(sparse);
    for k in 0..target.div_ceil(step) {
        let part: Vec<EncodedChunk> =
            records.by_ref().take(step).map(|((key, v), s)| EncodedChunk::new(*key, v, s)).collect();
        shards.push(EncodedShard::new(k as u32, dim, part));
    }
    let m = &base.manifest;
    let plan = Plan {
        options: BuildOptions {
            index_id: format!("synthetic-{target}"),
            chunk_tokens: m.chunk_tokens,
            chunk_overlap: m.chunk_overlap,
            dense_window: m.dense_window,
            bm25: m.bm25,
            dense_model: m.dense_model.clone(),
            sparse_model: m.sparse_model.clone(),
            shard_chunks: step,
        },
        documents: base.documents.to_vec(),
        chunks,
        inputs: texts,
        windows: Vec::new(),
        keys,
        shards: shard_ranges(target, step),
        tokens_beyond_window: 0,
        inputs_sha256: "synthetic".into(),
        sparse_vocab: base.splade.inverted.num_terms(),
    };
    (plan, shards)
}

/// Merges `target` synthetic chunks, saves the index under `dir`, then loads it once and
/// twice; prints one Markdown row.
pub fn run(base: &Index, target: usize, dir: &Path) -> Result<()> {
    let (plan, shards) = synthetic_plan(base, target);
    let inputs_mib = status_mib("VmRSS")?;
    reset_peak()?;
    let t = Instant::now();
    let index = merge(plan, &shards, &|_, _, _| {})?;
    let merge_s = t.elapsed().as_secs_f64();
    let merge_peak = status_mib("VmHWM")?;
    drop(shards);
    let manifest = index.save(&LocalDir::new(dir))?;
    drop(index);
    let bytes: u64 = manifest.files.iter().map(|f| f.bytes).sum();

    // The loads run in a fresh process, as in a cold function: memory freed by the merge
    // would otherwise be reused and hide part of the load's cost.
    let out = std::process::Command::new(std::env::current_exe()?).args(["bench-load", "--index"]).arg(dir).output()?;
    anyhow::ensure!(out.status.success(), "bench-load failed: {}", String::from_utf8_lossy(&out.stderr));
    let loads: serde_json::Value = serde_json::from_slice(&out.stdout)?;
    let (one, two) = (loads["once_mib"].as_f64().unwrap_or(0.0), loads["twice_mib"].as_f64().unwrap_or(0.0));
    println!(
        "| {target} | {:.0} MiB | {merge_s:.1} s | {merge_peak:.0} MiB ({inputs_mib:.0} MiB of inputs) | {:.0} MiB | {:.0} MiB |",
        bytes as f64 / (1 << 20) as f64,
        one,
        two,
    );
    Ok(())
}
