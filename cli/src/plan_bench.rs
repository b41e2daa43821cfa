//! `sextant bench-plan`: a sharded build's plan at sizes no bundled corpus reaches, planned
//! in corpus parts as the build workflow plans it ([`sextant_core::build::plan_part`], one
//! part after another in this process, as one `plan_part` invocation each would), then
//! gathered ([`Gather`]) and one index shard's plan joined from its pieces
//! ([`ShardPlan::gather`]), as its `merge_shard` invocation does.
//!
//! The corpus is a real JSONL corpus repeated: copy `j` of document `d` has the id
//! `d~j` and `Copy j.` in front of its first segment, so every chunk has a content key of
//! its own and the tokenizers read every copy in full. Parts are cut by the documents'
//! JSON bytes, as the workflow cuts a corpus by its objects' bytes.
//!
//! Per part it reports the seconds and the peak resident size of this process while the
//! part was planned (reset before each part: what one `plan_part` invocation would hold,
//! plus this process's models and base corpus), and the bytes of what the part writes.

use std::path::Path;
use std::time::Instant;

use anyhow::Result;
use sextant_core::build::{plan_part, Gather, PartOffsets, ShardPlan, VectorCache};
use sextant_core::corpus::{load_documents, Document};
use sextant_core::encode::{ModelSet, TextTokenizer};

use crate::capacity::{reset_peak, status_mib};
use crate::cli::BuildArgs;

/// One part's figures.
struct PartFigures {
    chunks: u32,
    seconds: f64,
    peak_mib: f64,
    written_bytes: u64,
}

/// Plans `chunks` chunks (at least) made from the documents of `docs`, in parts of at most
/// `part_bytes` JSON bytes, for `shards` index shards, and prints what it took.
pub fn run(
    models: &ModelSet,
    docs: &Path,
    chunks: usize,
    shards: usize,
    part_bytes: u64,
    args: &BuildArgs,
) -> Result<()> {
    let base = load_documents(docs)?;
    anyhow::ensure!(!base.is_empty(), "{} holds no documents", docs.display());
    let options = crate::indexes::build_options(models, "bench-plan", args)?;
    let (dense, sparse) = (TextTokenizer::of_model(&models.dense)?, TextTokenizer::of_model(&models.sparse)?);
    let cache = VectorCache::new();
    let start = Instant::now();
    let mut gather = Gather::new(&options);
    let (mut pieces, mut figures): (Vec<(ShardPlan, PartOffsets)>, Vec<PartFigures>) = (Vec::new(), Vec::new());
    let (mut planned, mut next, mut at) = (0usize, 0usize, PartOffsets::default());
    while planned < chunks {
        // The next part: copies of the base documents, in order, up to part_bytes.
        let (mut part, mut bytes) = (Vec::new(), 0u64);
        while part.is_empty() || bytes < part_bytes {
            let doc = copy_of(&base[next % base.len()], next / base.len());
            bytes += serde_json::to_vec(&doc)?.len() as u64;
            part.push(doc);
            next += 1;
        }
        reset_peak()?;
        let t = Instant::now();
        let p = figures.len() as u32;
        let done = plan_part(p, part, &options, (&dense, &sparse))?.finish(&cache, shards)?;
        let mut written = bincode::serialized_size(&done.summary)?;
        for piece in &done.pieces {
            written += bincode::serialized_size(piece)?;
        }
        for task in &done.tasks {
            written += bincode::serialized_size(task)?;
        }
        let (seconds, peak_mib) = (t.elapsed().as_secs_f64(), status_mib("VmHWM")?);
        let part_chunks = done.summary.chunks;
        let offsets = at;
        at.documents += done.summary.documents.len() as u32;
        at.chunks += part_chunks;
        gather.add(done.summary)?;
        pieces.extend(done.pieces.into_iter().filter(|piece| piece.shard == 0).map(|piece| (piece, offsets)));
        planned += part_chunks as usize;
        eprintln!(
            "part {p}: {part_chunks} chunks in {seconds:.1} s, peak {peak_mib:.0} MiB ({planned} chunks planned)"
        );
        figures.push(PartFigures { chunks: part_chunks, seconds, peak_mib, written_bytes: written });
    }
    let parts_seconds = start.elapsed().as_secs_f64();
    reset_peak()?;
    let t = Instant::now();
    let gathered = gather.finish(&[])?;
    let (gather_seconds, gather_peak) = (t.elapsed().as_secs_f64(), status_mib("VmHWM")?);
    let t = Instant::now();
    let shard0 = ShardPlan::gather(0, pieces, gathered.inputs_sha256.clone())?;
    let join_seconds = t.elapsed().as_secs_f64();
    let shard0_bytes = bincode::serialized_size(&shard0)?;

    let mut seconds: Vec<f64> = figures.iter().map(|f| f.seconds).collect();
    seconds.sort_by(f64::total_cmp);
    let max = |f: fn(&PartFigures) -> f64| figures.iter().map(f).fold(0.0, f64::max);
    println!("| figure | value |");
    println!("|---|---:|");
    println!("| chunks planned | {} |", gathered.report.chunks);
    println!("| documents | {} |", gathered.report.documents);
    println!("| parts (at most {part_bytes} JSON bytes each) | {} |", figures.len());
    println!(
        "| chunks per part, mean / max | {:.0} / {:.0} |",
        planned as f64 / figures.len() as f64,
        max(|f| f.chunks as f64)
    );
    println!("| seconds per part, p50 / max | {:.1} / {:.1} |", seconds[seconds.len() / 2], seconds[seconds.len() - 1]);
    println!("| peak resident size while planning a part, max | {:.0} MiB |", max(|f| f.peak_mib));
    println!(
        "| bytes a part writes (summary, pieces, tasks), max | {:.0} MiB |",
        max(|f| f.written_bytes as f64) / MIB
    );
    println!("| seconds, every part one after another | {parts_seconds:.0} |");
    println!("| gather: seconds / peak resident size | {gather_seconds:.2} / {gather_peak:.0} MiB |");
    println!("| BM25 terms over the corpus | {} |", gathered.stats.df.len());
    println!(
        "| index shard 0 of {shards}: its plan joined from {} pieces, seconds / bytes | {join_seconds:.2} / {:.0} MiB |",
        figures.len(),
        shard0_bytes as f64 / MIB
    );
    Ok(())
}

const MIB: f64 = 1024.0 * 1024.0;

/// Copy `j` of `doc`: its own id, and its first segment marked with the copy's number.
fn copy_of(doc: &Document, j: usize) -> Document {
    let mut d = doc.clone();
    d.document_id = format!("{}~{j}", doc.document_id);
    if let Some(first) = d.segments.first_mut() {
        *first = format!("Copy {j}. {first}");
    }
    d
}
