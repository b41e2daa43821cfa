//! `sextant eval`: a BEIR set evaluated at the API's own settings (or `--exact`), one mode
//! or a plotted report of every mode, and the runs and per-question figures the fusion
//! studies read.

use std::path::{Path as FsPath, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use anyhow::{bail, Result};
use sextant_core::corpus::{load_beir, BeirSet};
use sextant_core::encode::ModelSet;
use sextant_core::pipeline::{
    open_engine, Engine, Path, RecallTail, SearchRequest, DEFAULT_PER_PATH_K, DEFAULT_RECALL_TAIL,
};
use sextant_kit::eval::{evaluate_per_query, Metrics};

use crate::cli::{BuildArgs, EvalArgs, FusionChoice};
use crate::indexes::beir_index;
use crate::jsonl::write_jsonl;
use crate::report::{command_line, EvalReport, ModeResult, ReportMode, SetResult};

/// Runs `sextant eval`.
pub fn run(args: EvalArgs, models: &ModelSet) -> Result<()> {
    let EvalArgs {
        beir,
        split,
        report,
        mode,
        json,
        exact,
        dump_runs,
        per_query,
        keep_instructions,
        paths,
        fusion,
        feedback,
        feedback_documents,
        agreement,
        recall_head,
        recall_dense_weight,
        late_interaction,
        shards,
        build,
    } = args;
    if let Some(dir) = report {
        return eval_report(models, &beir, &split, &dir, json, (exact, keep_instructions), &build);
    }
    let (Ok([beir]), Ok([split])) = (<[_; 1]>::try_from(beir), <[_; 1]>::try_from(split)) else {
        bail!("--beir and --split more than once need --report");
    };
    let set = load_beir(&beir, &split)?;
    let name = beir.file_name().and_then(|n| n.to_str()).unwrap_or("beir").to_string();
    let docs = set.documents.len();
    let index = beir_index(&beir, &set, models, &build)?;
    let engine = open_engine(Arc::new(index), models)?;
    if let Some(depth) = late_interaction {
        return crate::bench::late_interaction(engine, &set, mode.paths(), depth, &format!("{name} {split}"));
    }
    if let Some(path) = dump_runs {
        dump_path_runs(&engine, &set, &path, !keep_instructions, exact)?;
    }
    let paths = if paths.is_empty() { mode.paths() } else { paths.clone() };
    let mut req = eval_request(paths, fusion, models.reranker.is_some(), keep_instructions, exact);
    if let Some(c) = feedback {
        req.fusion.feedback = c;
    }
    if let Some(m) = feedback_documents {
        req.fusion.feedback_documents = m;
    }
    if let Some(b) = agreement {
        req.fusion.agreement = b;
    }
    if recall_head.is_some() || recall_dense_weight.is_some() {
        let tail = req.fusion.recall_tail.unwrap_or(DEFAULT_RECALL_TAIL);
        req.fusion.recall_tail = match recall_head.unwrap_or(tail.head) {
            0 => None,
            head => Some(RecallTail { head, dense_weight: recall_dense_weight.unwrap_or(tail.dense_weight), ..tail }),
        };
    }
    if !shards.is_empty() {
        return compare_shards(&engine, (&beir, &set), models, &build, &req, &shards, exact);
    }
    let t = Instant::now();
    let each = evaluate_per_query(&engine, &set, &req)?;
    if let Some(path) = &per_query {
        write_jsonl(path, &each)?;
    }
    let m = Metrics::mean(&each);
    let secs = t.elapsed().as_secs_f64();
    let ran: Vec<&str> = req.paths.iter().map(|p| p.name()).collect();
    let ran = ran.join("+");
    let fusion_name = format!("{fusion:?}").to_lowercase();
    if json {
        let v = serde_json::json!({
            "mode": mode.name(),
            "paths": ran,
            "fusion": fusion_name,
            "per_path_k": req.per_path_k,
            "dense_search": dense_search(exact),
            "feedback": req.fusion.feedback,
            "feedback_documents": req.fusion.feedback_documents,
            "split": split,
            "queries": m.queries,
            "docs": docs,
            "nDCG@10": m.ndcg_at_10,
            "Recall@10": m.recall_at_10,
            "Recall@100": m.recall_at_100,
            "MRR@10": m.mrr_at_10,
        });
        println!("{v}");
    } else {
        println!(
            "{name} {split} paths={ran} fusion={fusion_name} per_path_k={} dense={} queries={} docs={docs} ({secs:.1}s)",
            req.per_path_k,
            dense_search(exact),
            m.queries
        );
        println!(
            "  nDCG@10    {:.4}\n  Recall@10  {:.4}\n  Recall@100 {:.4}\n  MRR@10     {:.4}",
            m.ndcg_at_10, m.recall_at_10, m.recall_at_100, m.mrr_at_10
        );
    }
    Ok(())
}

/// Splits the index into each of `counts` index shards and searches every question of
/// `set` through the shard router with `req`, beside `engine` (the unsplit index): prints
/// one JSON line per count with how many questions' top 10 is identical to the unsplit
/// index's (documents, chunks and order, and every relevance and path score to the bit)
/// and the mean top-10 overlap (the share of the unsplit top 10's chunks that the split
/// one has).
fn compare_shards(
    engine: &Engine,
    (beir, set): (&FsPath, &BeirSet),
    models: &ModelSet,
    build: &BuildArgs,
    req: &SearchRequest,
    counts: &[usize],
    exact: bool,
) -> Result<()> {
    use sextant_core::pipeline::{IndexView, LoadedModels};
    use sextant_core::shards::{ResultsView, ShardSet};
    // Each hit: its document and text, then its relevance's and every path's score's bits.
    type Top = Vec<((String, String), Vec<u32>)>;
    let top = |hits: &[sextant_core::pipeline::Hit], chunks: &dyn IndexView| -> Top {
        hits.iter()
            .map(|h| {
                let key = (chunks.document(h.chunk).document_id.clone(), chunks.text(h.chunk).to_string());
                let bits = std::iter::once(h.score.to_bits())
                    .chain(h.diagnostics.paths.values().map(|r| r.score.to_bits()))
                    .collect();
                (key, bits)
            })
            .collect()
    };
    let request = |q: &str| SearchRequest { query: q.to_string(), top_k: 10, ..req.clone() };
    let single: Vec<Top> = set
        .queries
        .iter()
        .map(|(_, q)| Ok(top(&engine.search(&request(q))?.hits, &**engine.index())))
        .collect::<Result<_>>()?;
    let loaded = LoadedModels::load(models)?;
    for &k in counts {
        let shards = crate::indexes::beir_shards(
            beir,
            set,
            models,
            (engine.dense_encoder()?, engine.sparse_encoder()?),
            build,
            k,
        )?;
        let router = ShardSet::of_shards(shards, |i| loaded.engine(i))?;
        let (mut identical, mut overlap, mut degraded) = (0usize, 0.0f64, 0usize);
        for ((_, q), want) in set.queries.iter().zip(&single) {
            let out = router.search(&request(q))?;
            degraded += usize::from(out.degraded());
            let got = top(&out.outcome.hits, &ResultsView::new(&router, out.fetched));
            identical += usize::from(&got == want);
            let keys: Vec<&(String, String)> = got.iter().map(|g| &g.0).collect();
            overlap += want.iter().filter(|w| keys.contains(&&w.0)).count() as f64 / want.len().max(1) as f64;
        }
        let n = set.queries.len().max(1);
        println!(
            "{}",
            serde_json::json!({
                "shards": k,
                "queries": set.queries.len(),
                "identical_top10": identical,
                "top10_overlap": overlap / n as f64,
                "degraded": degraded,
                "per_path_k": req.per_path_k,
                "dense_search": dense_search(exact),
            })
        );
    }
    Ok(())
}

/// The request `eval` runs every query with (the query and `top_k` are set per query): the
/// API's own per-path depth ([`DEFAULT_PER_PATH_K`]) and so its HNSW search, unless
/// `exact`: then [`EXACT_PER_PATH_K`] candidates a path, at which the dense path scans
/// every chunk (the exhaustive figure).
fn eval_request(
    paths: Vec<Path>,
    fusion: FusionChoice,
    rerank: bool,
    keep_instructions: bool,
    exact: bool,
) -> SearchRequest {
    let mut req = SearchRequest::new("", 100);
    req.paths = paths;
    req.fusion = fusion.config();
    req.per_path_k = eval_depth(exact);
    req.rerank = rerank;
    req.strip_instructions = !keep_instructions;
    req
}

/// Candidates a path gives the fusion in an evaluation: the API's own, or
/// [`EXACT_PER_PATH_K`] with `exact`.
fn eval_depth(exact: bool) -> usize {
    if exact {
        EXACT_PER_PATH_K
    } else {
        DEFAULT_PER_PATH_K
    }
}

/// How the dense path searched in an evaluation, as its output names it.
fn dense_search(exact: bool) -> &'static str {
    if exact {
        "exact"
    } else {
        "hnsw"
    }
}

/// Candidates a path gives the fusion in `eval --exact`: at least HNSW's beam
/// ([`EF_SEARCH`](sextant_core::index::EF_SEARCH)), so the dense path scans every chunk instead of searching the graph,
/// and about 100 documents a path (a document is 1 to 3 chunks in the evaluation sets).
const EXACT_PER_PATH_K: usize = 300;

/// `sextant eval --report DIR`: every [`ReportMode`] on every set (`splits`: one for all
/// sets, or one per set), each query's metrics kept; writes the report and prints, with
/// `json`, one [`ModeResult::summary`] a line as each mode finishes. `exact` and
/// `keep_instructions` are [`eval_request`]'s.
fn eval_report(
    models: &ModelSet,
    beir: &[PathBuf],
    splits: &[String],
    dir: &FsPath,
    json: bool,
    (exact, keep_instructions): (bool, bool),
    build: &BuildArgs,
) -> Result<()> {
    if splits.len() != 1 && splits.len() != beir.len() {
        bail!("--split: give it once, or once per --beir ({} sets, {} splits)", beir.len(), splits.len());
    }
    let mut report = EvalReport { sets: Vec::new(), command: command_line() };
    for (i, path) in beir.iter().enumerate() {
        let split = &splits[if splits.len() == 1 { 0 } else { i }];
        let set = load_beir(path, split)?;
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("beir").to_string();
        let engine = open_engine(Arc::new(beir_index(path, &set, models, build)?), models)?;
        let mut result = SetResult { name, split: split.clone(), docs: set.documents.len(), modes: Vec::new() };
        for mode in ReportMode::ALL {
            let req =
                eval_request(mode.mode().paths(), mode.fusion(), models.reranker.is_some(), keep_instructions, exact);
            let t = Instant::now();
            let per_query = evaluate_per_query(&engine, &set, &req)?;
            let ran: Vec<&str> = req.paths.iter().map(|p| p.name()).collect();
            let r = ModeResult { mode, paths: ran.join("+"), metrics: Metrics::mean(&per_query), per_query };
            match json {
                true => println!("{}", r.summary(&result)),
                false => println!(
                    "{} {}: nDCG@10 {:.4}  Recall@100 {:.4}  ({} queries, {:.1}s)",
                    result.title(),
                    mode.label(),
                    r.metrics.ndcg_at_10,
                    r.metrics.recall_at_100,
                    r.metrics.queries,
                    t.elapsed().as_secs_f64()
                ),
            }
            result.modes.push(r);
        }
        if let (Some(w), false) = (result.win_loss(), json) {
            println!(
                "{}: hybrid against {} per question: {} wins, {} ties, {} losses (mean Δ nDCG@10 {:+.4})",
                result.title(),
                w.best_single.label(),
                w.wins,
                w.ties,
                w.losses,
                w.mean
            );
        }
        report.sets.push(result);
    }
    let page = crate::report::write_eval(dir, &report)?;
    eprintln!("report written to {}", page.display());
    Ok(())
}

/// Writes, per query, each path's candidates at the evaluation's depth ([`eval_request`]):
/// its chunks with scores, and its top-100 documents (best chunk per document).
fn dump_path_runs(engine: &Engine, set: &BeirSet, out: &FsPath, strip_instructions: bool, exact: bool) -> Result<()> {
    use rayon::prelude::*;
    let lines: Vec<serde_json::Value> = set
        .queries
        .par_iter()
        .map(|(qid, text)| -> Result<serde_json::Value> {
            let mut paths = serde_json::Map::new();
            let mut chunks = serde_json::Map::new();
            for p in Path::ALL {
                let depth = eval_depth(exact);
                let mut req = SearchRequest::new(text.clone(), depth);
                req.paths = vec![p];
                req.per_path_k = depth;
                req.rerank = false;
                req.strip_instructions = strip_instructions;
                let o = engine.search(&req)?;
                // In the path's own order (the search returns them fused, a document's
                // chunks together).
                let mut ranked: Vec<_> = o.hits.iter().map(|h| (h.diagnostics.paths[&p], h.chunk)).collect();
                ranked.sort_by_key(|(r, _)| r.rank);
                let list: Vec<(String, f32, u32)> = ranked
                    .into_iter()
                    .map(|(r, chunk)| (engine.index().document_of(chunk).document_id.clone(), r.score, chunk))
                    .collect();
                let mut seen = std::collections::HashSet::new();
                let docs: Vec<_> =
                    list.iter().filter(|(d, ..)| seen.insert(d.clone())).take(100).map(|(d, s, _)| (d, s)).collect();
                paths.insert(p.name().to_string(), serde_json::json!(docs));
                chunks.insert(p.name().to_string(), serde_json::json!(list));
            }
            Ok(serde_json::json!({"qid": qid, "query": text, "paths": paths, "chunks": chunks}))
        })
        .collect::<Result<_>>()?;
    write_jsonl(out, lines)
}
