//! `sextant bench-capacity`: what the merge step and a search function's memory cost at
//! sizes no bundled corpus reaches, on synthetic chunks made from a real index
//! ([`crate::bench::synthetic_parts`]): the merge's time and peak memory, and the peak
//! memory of loading the index as a function does (files downloaded into memory, the `f32`
//! vectors to local disk, then decoded), once and then a second time beside the first (a warm swap holds both).

use std::path::Path;
use std::time::Instant;

use anyhow::{Context, Result};
use sextant_core::build::{
    merge, shard_ranges, BuildOptions, ChunkKey, EncodedChunk, EncodedShard, Plan, DEFAULT_SHARD_CHUNKS,
};
use sextant_core::index::format::{read_manifest, MANIFEST};
use sextant_core::index::Index;
use sextant_core::storage::{LocalDir, MemStore, Storage};

use crate::bench::{synthetic_parts, SyntheticParts};

/// A field of `/proc/self/status` (`VmRSS`, `VmHWM`) in MiB.
fn status_mib(field: &str) -> Result<f64> {
    let status = std::fs::read_to_string("/proc/self/status")?;
    let line =
        status.lines().find(|l| l.starts_with(field)).with_context(|| format!("no {field} in /proc/self/status"))?;
    let kib: f64 = line.split_whitespace().nth(1).context("a value")?.parse()?;
    Ok(kib / 1024.0)
}

/// Resets the peak resident size (`VmHWM`) to the current one (Linux: `5` to
/// `/proc/self/clear_refs`).
fn reset_peak() -> Result<()> {
    std::fs::write("/proc/self/clear_refs", "5").context("resetting the peak resident size")
}

/// The index in `dir` as a function holds it after its download
/// (`sextant_aws::VersionedIndex::load`): every file in memory, but the `f32` vectors in an
/// unnamed temporary file on local disk, which the index reads in place.
fn downloaded(dir: &Path) -> Result<MemStore> {
    let local = LocalDir::new(dir);
    let manifest = read_manifest(&local)?;
    let files = MemStore::new(dir.display().to_string());
    for f in manifest.files.iter().map(|f| f.name.as_str()).chain([MANIFEST]) {
        if f == Index::VECTOR_FILE {
            let mut spill =
                tempfile::tempfile_in(sextant_aws::versions::spill_dir()).context("a file for the vectors")?;
            std::io::copy(&mut std::fs::File::open(dir.join(f))?, &mut spill)?;
            files.insert_file(f, spill);
        } else {
            files.insert(f, local.read(f)?);
        }
    }
    Ok(files)
}

/// Dense searches `bench-load` runs to see what searching pages in of the mapped vectors.
const PAGING_SEARCHES: usize = 1_000;

/// `sextant bench-load`: the resident size of this process at start, after loading the
/// index in `dir` as a function does, and after loading it a second time beside the first;
/// then the file pages ([`sextant_core::index::VectorRows::Mapped`] vectors among them)
/// that [`PAGING_SEARCHES`] dense searches of 200 (each chunk's first vector as the query)
/// make resident. Printed as JSON.
pub fn load(dir: &Path) -> Result<()> {
    let idle = status_mib("VmRSS")?;
    let first = Index::load(&downloaded(dir)?)?;
    let once = status_mib("VmHWM")?;
    let resident = status_mib("VmRSS")? - idle;
    let estimate = first.resident_bytes() as f64 / (1 << 20) as f64;
    let mapped = first.dense.mapped_bytes() as f64 / (1 << 20) as f64;
    let second = Index::load(&downloaded(dir)?)?;
    let twice = status_mib("VmHWM")?;
    drop(second);
    let file_before = status_mib("RssFile")?;
    let (n, dim) = (first.chunks.len().max(1), first.dense.dim);
    for i in 0..PAGING_SEARCHES {
        let query = first.dense_vectors((i * 7919 % n) as u32)[..dim].to_vec();
        std::hint::black_box(first.dense.search(&query, None, 200));
    }
    let paged_in = status_mib("RssFile")? - file_before;
    drop(first);
    println!(
        "{}",
        serde_json::json!({"idle_mib": idle, "once_mib": once, "twice_mib": twice,
                           "resident_mib": resident, "estimate_mib": estimate, "mapped_mib": mapped,
                           "searches": PAGING_SEARCHES, "paged_in_mib": paged_in})
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
