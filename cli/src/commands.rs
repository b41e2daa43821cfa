//! What each sub-command does.

use std::path::{Path as FsPath, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use sextant_core::corpus::{load_beir, load_corpus, BeirSet};
use sextant_core::encode::{choose_backend, default_model_dir, BackendChoice, CrossEncoder, ModelSet, ORT_LIBRARY};
use sextant_core::index::Filter;
use sextant_core::pipeline::{
    open_engine, CrossEncoderReranker, Engine, Path, RecallTail, SearchOutcome, SearchRequest, DEFAULT_PER_PATH_K,
    DEFAULT_RECALL_TAIL,
};
use sextant_finance::{FactStore, Financials};
use sextant_kit::eval::{evaluate_per_query, Metrics};

use crate::cli::{BuildArgs, Cli, Command, FusionChoice};
use crate::indexes::{beir_index, build_options, cache_dir, load_engine, load_with_financials};
use crate::jsonl::write_jsonl;
use crate::report::{BenchReport, EvalReport, ModeResult, PeerSamples, ReportMode, ScaleResult, SetResult};

/// Runs the command `cli` names.
pub fn run(cli: Cli) -> Result<()> {
    choose_backend_for(&cli)?;
    let mut models = ModelSet::under(&cli.models.clone().unwrap_or_else(default_model_dir));
    models.reranker = cli.reranker.clone();
    match cli.command {
        Command::Build { docs, out, id, ticker, document_type, build, facts, workers, shard_chunks, json, dry_run } => {
            let t = Instant::now();
            let subset = Filter {
                tickers: ticker.clone(),
                document_types: document_type.iter().map(|t| t.as_str().into()).collect(),
                ..Default::default()
            };
            let corpus = load_corpus(&docs).with_context(|| format!("reading {}", docs.display()))?;
            for s in &corpus.skipped {
                eprintln!("skipped {}: {}", s.path, s.reason);
            }
            let (mut documents, skipped_files) = (corpus.documents, corpus.skipped);
            documents.retain(|d| subset.matches(d));
            if documents.is_empty() {
                bail!("no documents to index in {}", docs.display());
            }
            let mut attachments = Vec::new();
            if !facts.is_empty() {
                let mut store = FactStore::open(&facts)?;
                store.retain_tickers(&ticker);
                attachments.extend(Financials::attachment(&store)?);
            }
            if workers == 0 {
                bail!("--workers must be at least 1");
            }
            let mut options = build_options(&models, &id, &build)?;
            options.shard_chunks = shard_chunks;
            if dry_run {
                let report = crate::build::dry_run(&models, documents, &attachments, &options, &out)?;
                println!("{}", serde_json::to_string_pretty(&report)?);
                return Ok(());
            }
            let command = crate::build::BuildCommand {
                documents,
                attachments,
                options,
                out: &out,
                workers,
                read_seconds: t.elapsed().as_secs_f64(),
                skipped_files,
            };
            let report = crate::build::run(&models, command)?;
            if json {
                println!("{}", serde_json::to_string_pretty(&report)?);
            }
            if report.unchanged {
                eprintln!("index {} at {} is up to date: nothing to encode or write", report.index_id, out.display());
            } else {
                let per_sec = |n: usize, secs: f64| n as f64 / secs.max(1e-9);
                eprintln!(
                    "index {} written to {}: {} documents, {} chunks ({} encoded, {} reused) in {:.1}s \
                     ({:.1} docs/s; encoding {:.1} chunks/s)",
                    report.index_id,
                    out.display(),
                    report.documents,
                    report.chunks,
                    report.chunks_encoded,
                    report.chunks_reused,
                    report.seconds,
                    per_sec(report.documents, report.seconds),
                    per_sec(report.chunks_encoded, report.phases.encode),
                );
            }
            Ok(())
        }
        Command::Put { path, index, url, concurrency, json } => {
            crate::put::run(crate::put::PutArgs { path, index, url, concurrency, json })
        }
        Command::EncodeWorker { task, out } => crate::build::encode_worker(&models, &task, &out),
        Command::Serve(args) => crate::serve::run(*args, models),
        Command::Context { index, question, top_k, route } => {
            let (engine, financials) = load_with_financials(&index, &models)?;
            let route = match route {
                Some(r) => Some(sextant_finance::Route::parse(&r).with_context(|| format!("unknown route {r:?}"))?),
                None => None,
            };
            let req = sextant_finance::ContextRequest {
                question,
                hints: sextant_finance::Hints { route, ..Default::default() },
                top_k,
                guardrails: Default::default(),
                cancel: None,
            };
            let context =
                sextant_finance::build_context(&financials.facts, financials.companies(), Some(&engine), &req)?;
            println!("{}", serde_json::to_string_pretty(&context)?);
            Ok(())
        }
        Command::Search { index, query, top_k, ticker, year, mode, json } => {
            let engine = load_engine(&index, &models)?;
            let mut req = SearchRequest::new(query, top_k);
            req.paths = mode.paths();
            req.filter = Filter { tickers: ticker, years: year, ..Default::default() };
            let out = engine.search(&req)?;
            print_hits(&engine, &out, json)
        }
        Command::Bench { beir, queries, scale, passages, json, export, report, peer, build } => {
            // Read first: a bad samples file should not cost a benchmark run.
            let peer = peer.as_deref().map(PeerSamples::read).transpose()?;
            let set = load_beir(&beir, "test")?;
            let engine = open_engine(Arc::new(beir_index(&beir, &set, &models, &build)?), &models)?;
            let qs: Vec<String> = set.queries.iter().take(queries).map(|q| q.1.clone()).collect();
            let texts = crate::bench::passages(engine.index(), passages);
            let throughput =
                if texts.is_empty() { None } else { Some(crate::bench::passage_throughput(&engine, &texts)?) };
            if let Some(dir) = &export {
                crate::bench::export_common(dir, &qs, &texts)?;
            }
            let measure = |engine: &Engine, label: &str| -> Result<ScaleResult> {
                let (mut figures, rows) = crate::bench::run(engine, &qs, label)?;
                if let Some((both, dense, sparse)) = throughput {
                    figures.build_chunks_per_s = both;
                    figures.build_dense_chunks_per_s = dense;
                    figures.build_sparse_chunks_per_s = sparse;
                    figures.build_passages = texts.len();
                }
                if let Some(dir) = &export {
                    crate::bench::export_index(dir, engine.index())?;
                }
                match json {
                    true => println!("{}", serde_json::to_string(&figures)?),
                    false => crate::bench::print_table(&figures, &rows),
                }
                Ok(ScaleResult { figures, stages: rows })
            };
            let mut scales = vec![measure(&engine, "real index")?];
            // The cross-encoder is timed for the table, and for a report's chart.
            if !json || report.is_some() {
                if let Some(dir) = &models.reranker {
                    let rr = CrossEncoderReranker::new(CrossEncoder::load(dir)?, "reranker");
                    let model = dir.file_name().and_then(|n| n.to_str()).unwrap_or("(unnamed)");
                    let row = crate::bench::rerank50(&engine, &qs, &rr, model)?;
                    if !json {
                        crate::bench::print_row(&row);
                    }
                    scales[0].stages.push(row);
                }
            }
            if !json {
                crate::bench::load_time(engine.index())?;
            }
            for n in scale {
                let big = crate::bench::scaled(&engine, n, &cache_dir().join("bench"))?;
                scales.push(measure(&big, &format!("synthetic {n}"))?);
                if !json {
                    crate::bench::load_time(big.index())?;
                }
            }
            if let Some(dir) = report {
                let set = beir.file_name().and_then(|n| n.to_str()).unwrap_or("beir").to_string();
                let report = BenchReport { set, scales, peer, command: command_line() };
                let page = crate::report::write_bench(&dir, &report)?;
                eprintln!("report written to {}", page.display());
            }
            Ok(())
        }
        Command::BenchCapacity { beir, scale, out, build } => {
            let set = load_beir(&beir, "test")?;
            let base = beir_index(&beir, &set, &models, &build)?;
            let root =
                out.unwrap_or_else(|| std::env::temp_dir().join(format!("sextant-capacity-{}", std::process::id())));
            println!(
                "| chunks | index files | merge | merge peak RSS | load, peak RSS | two loaded (warm swap), peak RSS |"
            );
            println!("|---:|---:|---:|---:|---:|---:|");
            for n in scale {
                let dir = root.join(format!("synthetic-{n}"));
                crate::capacity::run(&base, n, &dir)?;
                let _ = std::fs::remove_dir_all(&dir);
            }
            Ok(())
        }
        Command::BenchLoad { index } => crate::capacity::load(&index),
        Command::BenchColdStart { beir, scale, s3, build } => {
            let set = load_beir(&beir, "test")?;
            let engine = open_engine(Arc::new(beir_index(&beir, &set, &models, &build)?), &models)?;
            let name = beir.file_name().and_then(|n| n.to_str()).unwrap_or("beir").to_string();
            crate::bench::cold_start(engine.index(), &s3, &name, &models)?;
            for n in scale {
                let big = crate::bench::scaled(&engine, n, &cache_dir().join("bench"))?;
                crate::bench::cold_start(big.index(), &s3, &format!("synthetic-{n}"), &models)?;
            }
            Ok(())
        }
        Command::Openapi => {
            print!("{}", sextant_server::openapi::pretty());
            Ok(())
        }
        Command::Keys { store, command } => crate::admin::keys(&store.store, command),
        Command::Plans { store, json, command } => crate::admin::plans(&store.store, command, json),
        Command::Publish { index, to, keep_versions } => crate::admin::publish(&index, &to, keep_versions),
        Command::Versions { location } => crate::admin::versions(&location),
        Command::IndexBuild { event, index_id, corpus, target, keep_versions, facts } => {
            let mut fields = serde_json::Map::new();
            for (k, v) in [("index_id", index_id), ("corpus", corpus), ("target", target), ("facts", facts)] {
                if let Some(v) = v {
                    fields.insert(k.into(), v.into());
                }
            }
            if let Some(k) = keep_versions {
                fields.insert("keep_versions".into(), k.into());
            }
            crate::admin::index_build(event, fields, &models)
        }
        Command::Eval { beir, split, report: Some(dir), json, exact, keep_instructions, build, .. } => {
            eval_report(&models, &beir, &split, &dir, json, (exact, keep_instructions), &build)
        }
        Command::Eval {
            beir,
            split,
            report: None,
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
            build,
        } => {
            let (Ok([beir]), Ok([split])) = (<[_; 1]>::try_from(beir), <[_; 1]>::try_from(split)) else {
                bail!("--beir and --split more than once need --report");
            };
            let set = load_beir(&beir, &split)?;
            let name = beir.file_name().and_then(|n| n.to_str()).unwrap_or("beir").to_string();
            let docs = set.documents.len();
            let index = beir_index(&beir, &set, &models, &build)?;
            let engine = open_engine(Arc::new(index), &models)?;
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
                    head => Some(RecallTail {
                        head,
                        dense_weight: recall_dense_weight.unwrap_or(tail.dense_weight),
                        ..tail
                    }),
                };
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
    }
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

/// This process's command line as a user would type it: `sextant` and the arguments,
/// any with a space or a quote in single quotes.
fn command_line() -> String {
    let args = std::env::args().skip(1).map(|a| match a.contains([' ', '\'', '"']) || a.is_empty() {
        true => format!("'{}'", a.replace('\'', "'\\''")),
        false => a,
    });
    std::iter::once("sextant".to_string()).chain(args).collect::<Vec<_>>().join(" ")
}

fn print_hits(engine: &Engine, out: &SearchOutcome, json: bool) -> Result<()> {
    let index = engine.index();
    if json {
        let hits: Vec<_> = out
            .hits
            .iter()
            .map(|h| {
                let doc = index.document_of(h.chunk);
                serde_json::json!({"documentId": doc.document_id, "title": doc.title, "score": h.score,
                    "text": index.chunks[h.chunk as usize].text, "diagnostics": h.diagnostics})
            })
            .collect();
        println!("{}", serde_json::json!({"hits": hits, "rerank": out.rerank, "timings": out.timings}));
        return Ok(());
    }
    for (i, h) in out.hits.iter().enumerate() {
        let doc = index.document_of(h.chunk);
        let text: String = index.chunks[h.chunk as usize].text.chars().take(240).collect();
        let text = text.replace('\n', " ");
        println!("{:>2}. [{:.4}] {} — {}\n    {}", i + 1, h.score, doc.document_id, doc.title, text);
    }
    eprintln!("({:.1} ms)", out.timings.total_ms);
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

/// Fixes the process's inference backend from `--backend`. Also exported to the
/// environment (with the library under `--models`), so that the worker processes of
/// `build --workers` encode on the same backend.
fn choose_backend_for(cli: &Cli) -> Result<()> {
    let choice: BackendChoice = cli.backend.parse()?;
    std::env::set_var("SEXTANT_BACKEND", &cli.backend);
    if let Some(dir) = &cli.models {
        let lib = dir.join("onnxruntime").join(ORT_LIBRARY);
        if std::env::var_os("SEXTANT_ORT_LIB").is_none() && lib.is_file() {
            std::env::set_var("SEXTANT_ORT_LIB", lib);
        }
    }
    choose_backend(choice);
    Ok(())
}
