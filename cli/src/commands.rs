//! Dispatches each sub-command: the short ones here, the others to their own modules
//! (`build`, `eval`, `bench`, `serve`, `put`, `admin`, `capacity`).

use std::sync::Arc;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use sextant_core::corpus::{load_beir, load_corpus};
use sextant_core::encode::{choose_backend, default_model_dir, BackendChoice, ModelSet, ORT_LIBRARY};
use sextant_core::index::Filter;
use sextant_core::pipeline::{open_engine, IndexView, SearchOutcome, SearchRequest};
use sextant_core::shards::Searcher;
use sextant_finance::{FactStore, Financials};

use crate::cli::{Cli, Command};
use crate::indexes::{beir_index, build_options, cache_dir, load_searcher, load_with_financials};

/// Runs the command `cli` names.
pub fn run(cli: Cli) -> Result<()> {
    choose_backend_for(&cli)?;
    let mut models =
        ModelSet::under(&cli.models.clone().unwrap_or_else(default_model_dir)).with_dense_model(&cli.dense_model)?;
    models.reranker = cli.reranker.clone();
    match cli.command {
        Command::Build {
            docs,
            out,
            id,
            ticker,
            document_type,
            build,
            facts,
            workers,
            shard_chunks,
            shards,
            json,
            dry_run,
        } => {
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
            if shards == 0 {
                bail!("--shards must be at least 1");
            }
            if shards > 1 && !facts.is_empty() {
                bail!("--facts cannot be saved with a sharded index yet: build it with --shards 1");
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
                shards,
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
        Command::Delete { ids, index, url } => crate::put::delete(&ids, &index, &url),
        Command::EncodeWorker { task, out } => crate::build::encode_worker(&models, &task, &out),
        Command::Serve(args) => crate::serve::run(*args, models),
        Command::ShardWorker { index, shard, listen, fault, until_stdin_closes } => {
            crate::shard_workers::worker(&index, shard, listen, fault.is_some(), until_stdin_closes)
        }
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
            let searcher = Searcher::Single(Arc::new(engine));
            let context =
                sextant_finance::build_context(&financials.facts, financials.companies(), Some(&searcher), &req)?;
            println!("{}", serde_json::to_string_pretty(&context)?);
            Ok(())
        }
        Command::Search { index, query, top_k, ticker, year, mode, json } => {
            let mut req = SearchRequest::new(query, top_k);
            req.paths = mode.paths();
            req.filter = Filter { tickers: ticker, years: year, ..Default::default() };
            let searcher = load_searcher(&index, &models)?;
            let out = searcher.search(&req)?;
            for (shard, why) in &out.failed_shards {
                eprintln!("shard {shard} did not answer: {why}");
            }
            for (shard, path, why) in &out.partial {
                eprintln!("shard {shard} answered without its {path} path: {why}");
            }
            print_hits(&searcher.results(out.fetched), &out.outcome, json)
        }
        Command::Bench(args) => crate::bench::command(*args, &models),
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
        Command::BenchPlan { docs, chunks, shards, part_bytes, build } => {
            crate::plan_bench::run(&models, &docs, chunks, shards, part_bytes, &build)
        }
        Command::BenchShards { beir, scale, shards, queries, workers, build } => {
            let set = load_beir(&beir, "test")?;
            let engine = open_engine(Arc::new(beir_index(&beir, &set, &models, &build)?), &models)?;
            let texts: Vec<String> = set.queries.into_iter().map(|(_, q)| q).collect();
            let dir = cache_dir().join("bench");
            crate::shard_bench::run(&engine, &texts, queries, (scale, shards), &dir, workers)
        }
        Command::BenchMerge { shards, depth, paths, queries } => {
            crate::merge_bench::run(&shards, depth, paths, queries)
        }
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
        Command::Eval(args) => crate::eval::run(*args, &models),
    }
}

fn print_hits(chunks: &dyn IndexView, out: &SearchOutcome, json: bool) -> Result<()> {
    if json {
        let hits: Vec<_> = out
            .hits
            .iter()
            .map(|h| {
                let doc = chunks.document(h.chunk);
                serde_json::json!({"documentId": doc.document_id, "title": doc.title, "score": h.score,
                    "text": chunks.text(h.chunk), "diagnostics": h.diagnostics})
            })
            .collect();
        println!("{}", serde_json::json!({"hits": hits, "rerank": out.rerank, "timings": out.timings}));
        return Ok(());
    }
    for (i, h) in out.hits.iter().enumerate() {
        let doc = chunks.document(h.chunk);
        let text: String = chunks.text(h.chunk).chars().take(240).collect();
        let text = text.replace('\n', " ");
        println!("{:>2}. [{:.4}] {} — {}\n    {}", i + 1, h.score, doc.document_id, doc.title, text);
    }
    eprintln!("({:.1} ms)", out.timings.total_ms);
    Ok(())
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
