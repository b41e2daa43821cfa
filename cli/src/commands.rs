//! The sub-commands.

use std::path::{Path as FsPath, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand, ValueEnum};
use indicatif::{ProgressBar, ProgressStyle};
use sextant::corpus::{load_beir, load_documents, Document};
use sextant::encode::{default_model_dir, DenseEncoder, ModelInfo, ModelSet, SparseEncoder};
use sextant::eval::{evaluate, Metrics};
use sextant::index::format::{sha256_hex, ModelRef};
use sextant::index::{Bm25Params, BuildOptions, Filter, Index};
use sextant::search::{open_engine, Engine, Path, SearchRequest};
use sextant::storage::LocalDir;
use sextant::finance::FactStore;

/// Sextant: hybrid retrieval (dense + BM25 + SPLADE, RRF, rerank).
#[derive(Parser)]
#[command(version, about)]
pub struct Cli {
    /// Directory of converted models (default: $SEXTANT_MODEL_DIR or ~/.cache/sextant/models).
    #[arg(long, global = true)]
    models: Option<PathBuf>,
    /// A cross-encoder model directory to rerank with.
    #[arg(long, global = true)]
    reranker: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Build an index from a JSONL (or .jsonl.gz) file of documents.
    Build {
        /// Documents, one JSON object a line.
        #[arg(long)]
        docs: PathBuf,
        /// Output index directory.
        #[arg(long)]
        out: PathBuf,
        /// XBRL facts (JSONL or .jsonl.gz, repeatable) saved with the index for `/v1/context`;
        /// restricted to `--ticker` when given.
        #[arg(long)]
        facts: Vec<PathBuf>,
        /// Index id.
        #[arg(long, default_value = "default")]
        id: String,
        /// Only documents of these tickers (repeatable).
        #[arg(long)]
        ticker: Vec<String>,
        /// Only documents of these types, e.g. 10-K, 10-Q, earnings_call (repeatable).
        #[arg(long)]
        document_type: Vec<String>,
        #[command(flatten)]
        build: BuildArgs,
    },
    /// Serve the HTTP API on 127.0.0.1 (the embedded default: the bundled demo corpus,
    /// its index built on first start, a printed development key).
    Serve {
        /// Listen address.
        #[arg(long, default_value = "127.0.0.1:8080")]
        addr: std::net::SocketAddr,
        /// Serve these prebuilt index directories instead (repeatable).
        #[arg(long)]
        index: Vec<PathBuf>,
        /// Index this corpus instead of the bundled demo corpus (cached after the first build).
        #[arg(long)]
        docs: Option<PathBuf>,
        /// Only documents of these tickers (repeatable).
        #[arg(long)]
        ticker: Vec<String>,
        /// XBRL facts for `/v1/context` (repeatable; default with the demo corpus: its facts).
        #[arg(long)]
        facts: Vec<PathBuf>,
        /// Id of the index built from the corpus.
        #[arg(long, default_value = "demo")]
        id: String,
        /// Use this development API key instead of a random one.
        #[arg(long)]
        dev_key: Option<String>,
        /// Plan of the development key: free, pro, enterprise.
        #[arg(long, default_value = "free")]
        dev_plan: String,
        /// Key store file (JSON; default: in memory).
        #[arg(long)]
        keys: Option<PathBuf>,
        /// Origins browsers may call the API from (CORS), comma-separated, or `*`
        /// (default: none).
        #[arg(long, env = "SEXTANT_CORS_ORIGINS", default_value = "")]
        cors_origins: String,
        #[command(flatten)]
        build: BuildArgs,
    },
    /// Search an index and print the results.
    Search {
        /// Index directory.
        #[arg(long)]
        index: PathBuf,
        /// The query.
        query: String,
        /// Results to print.
        #[arg(long, default_value_t = 10)]
        top_k: usize,
        /// Restrict to these tickers (repeatable).
        #[arg(long)]
        ticker: Vec<String>,
        /// Restrict to these fiscal years (repeatable).
        #[arg(long)]
        year: Vec<i32>,
        #[arg(long, value_enum, default_value_t = Mode::Hybrid)]
        mode: Mode,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Structured, cited context for a financial question (what `POST /v1/context` returns),
    /// printed as JSON.
    Context {
        /// Index directory (built with `--facts` for the relational routes).
        #[arg(long)]
        index: PathBuf,
        /// The question.
        question: String,
        /// Passages at most.
        #[arg(long, default_value_t = 10)]
        top_k: usize,
        /// Force a route: metric_lookup, timeseries, full_statement, narrative, hybrid.
        #[arg(long)]
        route: Option<String>,
    },
    /// Evaluate on a BEIR directory (corpus.jsonl, queries.jsonl, qrels/SPLIT.tsv).
    Eval {
        /// The BEIR directory.
        #[arg(long)]
        beir: PathBuf,
        /// The qrels split to evaluate.
        #[arg(long, default_value = "test")]
        split: String,
        #[arg(long, value_enum, default_value_t = Mode::Hybrid)]
        mode: Mode,
        /// Print one JSON object.
        #[arg(long)]
        json: bool,
        /// Also write every path's document ranking per query (JSONL) to this file, for
        /// studying fusion offline.
        #[arg(long, hide = true)]
        dump_runs: Option<PathBuf>,
        /// Instead, compare the mode's ranking (no cross-encoder) with MaxSim late
        /// interaction over the dense model's token vectors re-scoring its top N, alone and
        /// fused with it by RRF.
        #[arg(long, value_name = "N")]
        late_interaction: Option<usize>,
        #[command(flatten)]
        build: BuildArgs,
    },
    /// Benchmark per-stage latency, HNSW recall and index load time on a BEIR set, at its
    /// real size and at a synthetic larger size.
    Bench {
        /// The BEIR directory (its index is built or reused as by `eval`).
        #[arg(long)]
        beir: PathBuf,
        /// Queries to time.
        #[arg(long, default_value_t = 200)]
        queries: usize,
        /// Also measure at these synthetic sizes (chunks), e.g. 100000.
        #[arg(long)]
        scale: Vec<usize>,
        #[command(flatten)]
        build: BuildArgs,
    },
    /// Benchmark cold start from S3 (pointer, download, decode, models) on a BEIR set's
    /// index and synthetic larger ones, beside a local-directory load.
    BenchColdStart {
        /// The BEIR directory (its index is built or reused as by `eval`).
        #[arg(long)]
        beir: PathBuf,
        /// Also at these synthetic sizes (chunks).
        #[arg(long)]
        scale: Vec<usize>,
        /// Where to publish the benchmark indexes: s3://bucket/prefix.
        #[arg(long)]
        s3: String,
        #[command(flatten)]
        build: BuildArgs,
    },
    /// Manage API keys in a key file or DynamoDB.
    Keys {
        #[command(flatten)]
        store: StoreArg,
        #[command(subcommand)]
        command: crate::admin::KeysCommand,
    },
    /// List the plans (built-in and custom), or set a custom one.
    Plans {
        #[command(flatten)]
        store: StoreArg,
        /// Print JSON.
        #[arg(long)]
        json: bool,
        #[command(subcommand)]
        command: Option<crate::admin::PlansCommand>,
    },
    /// Publish a built index directory to S3 as a new version and make it current.
    Publish {
        /// The index directory (from `sextant build`).
        #[arg(long)]
        index: PathBuf,
        /// Where: s3://bucket/prefix (versions/ and CURRENT go under it).
        #[arg(long)]
        to: String,
        /// Versions to keep.
        #[arg(long, default_value_t = 5)]
        keep_versions: usize,
    },
    /// Show the current version and the versions kept of an index in S3.
    Versions {
        /// s3://bucket/prefix.
        location: String,
    },
    /// Run the index-build function's job here: read a corpus (S3 or local), build, publish to S3.
    IndexBuild {
        /// An event file as the function receives (events/index-build.json).
        #[arg(long)]
        event: Option<PathBuf>,
        /// Index id.
        #[arg(long)]
        index_id: Option<String>,
        /// Corpus: s3://bucket/prefix/, s3://bucket/manifest.json, or a local file or directory.
        #[arg(long)]
        corpus: Option<String>,
        /// Target: s3://bucket/indexes/ID.
        #[arg(long)]
        target: Option<String>,
        /// Versions to keep.
        #[arg(long)]
        keep_versions: Option<usize>,
        /// XBRL facts to publish with the index (s3:// object or prefix, or a local path).
        #[arg(long)]
        facts: Option<String>,
    },
}

#[derive(clap::Args, Clone)]
pub struct StoreArg {
    /// Key store: a JSON file, or dynamodb://KEYS_TABLE[/RATE_TABLE].
    #[arg(long, env = "SEXTANT_KEYS")]
    store: String,
}

#[derive(clap::Args, Clone)]
pub struct BuildArgs {
    /// Token budget of a chunk.
    #[arg(long, default_value_t = 200)]
    pub chunk_tokens: usize,
    /// BM25 k1.
    #[arg(long, default_value_t = 0.9)]
    pub k1: f32,
    /// BM25 b.
    #[arg(long, default_value_t = 0.4)]
    pub b: f32,
}

/// Which paths a search runs.
#[derive(Clone, Copy, ValueEnum, PartialEq, Eq, Debug)]
pub enum Mode {
    /// Every path, fused.
    Hybrid,
    /// Dense only.
    Dense,
    /// BM25 only.
    Bm25,
    /// SPLADE only.
    Splade,
}

impl Mode {
    fn paths(self) -> Vec<Path> {
        match self {
            Mode::Hybrid => Path::ALL.to_vec(),
            Mode::Dense => vec![Path::Dense],
            Mode::Bm25 => vec![Path::Bm25],
            Mode::Splade => vec![Path::Splade],
        }
    }
    fn name(self) -> &'static str {
        match self {
            Mode::Hybrid => "hybrid",
            Mode::Dense => "dense",
            Mode::Bm25 => "bm25",
            Mode::Splade => "splade",
        }
    }
}

pub fn run(cli: Cli) -> Result<()> {
    let mut models = ModelSet::under(&cli.models.clone().unwrap_or_else(default_model_dir));
    models.reranker = cli.reranker.clone();
    match cli.command {
        Command::Build { docs, out, id, ticker, document_type, build, facts } => {
            let subset = Filter { tickers: ticker.clone(), document_types: document_type, ..Default::default() };
            let mut documents = load_documents(&docs).with_context(|| format!("reading {}", docs.display()))?;
            documents.retain(|d| subset.matches(d));
            let mut index = build_index(documents, &models, &id, &build)?;
            if !facts.is_empty() {
                let mut store = FactStore::open(&facts)?;
                store.retain_tickers(&ticker);
                index = index.with_facts(store);
            }
            let m = index.save(&LocalDir::new(&out))?;
            eprintln!("index {} written to {} ({} documents, {} chunks)", m.index_id, out.display(), m.documents, m.chunks);
            Ok(())
        }
        Command::Serve { addr, index, docs, ticker, facts, id, dev_key, dev_plan, keys, cors_origins, build } => crate::serve::run(
            crate::serve::ServeArgs { addr, indexes: index, docs, tickers: ticker, facts, id, dev_key, dev_plan, keys, cors_origins, build },
            models,
        ),
        Command::Context { index, question, top_k, route } => {
            let engine = load_engine(&index, &models)?;
            let route = match route {
                Some(r) => Some(sextant::finance::Route::parse(&r).with_context(|| format!("unknown route {r:?}"))?),
                None => None,
            };
            let req = sextant::finance::ContextRequest {
                question,
                hints: sextant::finance::Hints { route, ..Default::default() },
                top_k,
                guardrails: Default::default(),
                cancel: None,
            };
            let index = engine.index();
            let context = sextant::finance::build_context(&index.facts, index.companies(), Some(&engine), &req)?;
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
        Command::Bench { beir, queries, scale, build } => {
            let set = load_beir(&beir, "test")?;
            let engine = open_engine(Arc::new(beir_index(&beir, &set, &models, &build)?), &models)?;
            let qs: Vec<String> = set.queries.iter().take(queries).map(|q| q.1.clone()).collect();
            crate::bench::run(&engine, &qs, "real index")?;
            if let Some(dir) = &models.reranker {
                let rr = sextant::retrieval::CrossEncoderReranker::new(sextant::encode::CrossEncoder::load(dir)?, "reranker");
                crate::bench::rerank50(&engine, &qs, &rr)?;
            }
            crate::bench::load_time(engine.index())?;
            for n in scale {
                let big = crate::bench::scaled(&engine, n, &cache_dir().join("bench"))?;
                crate::bench::run(&big, &qs, &format!("synthetic {n}"))?;
                crate::bench::load_time(big.index())?;
            }
            Ok(())
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
        Command::Eval { beir, split, mode, json, dump_runs, late_interaction, build } => {
            let set = load_beir(&beir, &split)?;
            let name = beir.file_name().and_then(|n| n.to_str()).unwrap_or("beir").to_string();
            let docs = set.documents.len();
            let index = beir_index(&beir, &set, &models, &build)?;
            let engine = open_engine(Arc::new(index), &models)?;
            if let Some(depth) = late_interaction {
                return crate::bench::late_interaction(engine, &set, mode.paths(), depth, &format!("{name} {split}"));
            }
            if let Some(path) = dump_runs {
                dump_path_runs(&engine, &set, &path)?;
            }
            let mut req = SearchRequest::new("", 100);
            req.paths = mode.paths();
            req.per_path_k = 100;
            req.rerank = models.reranker.is_some();
            let t = Instant::now();
            let m: Metrics = evaluate(&engine, &set, &req)?;
            let secs = t.elapsed().as_secs_f64();
            if json {
                let v = serde_json::json!({
                    "mode": mode.name(), "split": split, "queries": m.queries, "docs": docs,
                    "nDCG@10": m.ndcg_at_10, "Recall@10": m.recall_at_10, "Recall@100": m.recall_at_100, "MRR@10": m.mrr_at_10,
                });
                println!("{v}");
            } else {
                println!("{name} {split} mode={} queries={} docs={docs} ({secs:.1}s)", mode.name(), m.queries);
                println!("  nDCG@10    {:.4}\n  Recall@10  {:.4}\n  Recall@100 {:.4}\n  MRR@10     {:.4}", m.ndcg_at_10, m.recall_at_10, m.recall_at_100, m.mrr_at_10);
            }
            Ok(())
        }
    }
}

/// The index of a BEIR corpus, built once and cached under the cache directory (keyed
/// by the corpus checksum and the build settings).
fn beir_index(beir: &FsPath, set: &sextant::corpus::BeirSet, models: &ModelSet, build: &BuildArgs) -> Result<Index> {
    let name = beir.file_name().and_then(|n| n.to_str()).unwrap_or("beir").to_string();
    let corpus_sum = sha256_hex(&std::fs::read(beir.join("corpus.jsonl"))?);
    let key = format!("beir-{name}-{}-c{}-k{}-b{}", &corpus_sum[..12], build.chunk_tokens, build.k1, build.b);
    let dir = cache_dir().join("indexes").join(key);
    Ok(cached_index(&dir, || build_index(set.documents.clone(), models, &name, build))?.0)
}

/// The index cached in `dir` when one loads from there; else the one `build` makes, saved
/// in `dir` for the next run. Tells whether the cached one was reused.
pub fn cached_index(dir: &FsPath, build: impl FnOnce() -> Result<Index>) -> Result<(Index, bool)> {
    if let Ok(index) = Index::load(&LocalDir::new(dir)) {
        return Ok((index, true));
    }
    let index = build()?;
    index.save(&LocalDir::new(dir))?;
    Ok((index, false))
}

/// `$SEXTANT_CACHE_DIR`, else `~/.cache/sextant`.
pub fn cache_dir() -> PathBuf {
    std::env::var_os("SEXTANT_CACHE_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/sextant"))
}

fn model_ref(dir: &FsPath) -> Result<ModelRef> {
    let info = ModelInfo::read(dir)?;
    Ok(ModelRef { id: info.id, weights_sha256: info.weights_sha256 })
}

/// Builds an index with a progress bar that shows chunks/s.
pub fn build_index(documents: Vec<Document>, models: &ModelSet, id: &str, args: &BuildArgs) -> Result<Index> {
    if documents.is_empty() {
        bail!("no documents to index");
    }
    let (dense, sparse) = (DenseEncoder::load(&models.dense)?, SparseEncoder::load(&models.sparse)?);
    let options = BuildOptions {
        index_id: id.to_string(),
        chunk_tokens: args.chunk_tokens,
        bm25: Bm25Params { k1: args.k1, b: args.b },
        dense_model: model_ref(&models.dense)?,
        sparse_model: model_ref(&models.sparse)?,
    };
    let bar = ProgressBar::new(0);
    bar.set_style(ProgressStyle::with_template("{msg:8} [{bar:40}] {pos}/{len} chunks {per_sec} eta {eta}").unwrap().progress_chars("=> "));
    let ndocs = documents.len();
    let t = Instant::now();
    let tty = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let index = Index::build(documents, &dense, &sparse, &options, &|stage, done, total| {
        if !tty && (done % 2048 == 0 || done == total) && total > 1 {
            eprintln!("{stage}: {done}/{total} chunks ({:.1}/s)", done as f64 / t.elapsed().as_secs_f64());
        }
        bar.set_message(stage.to_string());
        bar.set_length(total as u64);
        bar.set_position(done as u64);
    })?;
    bar.finish_and_clear();
    let secs = t.elapsed().as_secs_f64();
    let nchunks = index.chunks.len();
    eprintln!("built {ndocs} documents, {nchunks} chunks in {secs:.1}s ({:.1} docs/s, {:.1} chunks/s)", ndocs as f64 / secs, nchunks as f64 / secs);
    Ok(index)
}

fn load_engine(dir: &FsPath, models: &ModelSet) -> Result<Engine> {
    let index = Index::load(&LocalDir::new(dir)).with_context(|| format!("loading index {}", dir.display()))?;
    Ok(open_engine(Arc::new(index), models)?)
}

fn print_hits(engine: &Engine, out: &sextant::search::SearchOutcome, json: bool) -> Result<()> {
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
        println!("{:>2}. [{:.4}] {} — {}\n    {}", i + 1, h.score, doc.document_id, doc.title, text.replace('\n', " "));
    }
    eprintln!("({:.1} ms)", out.timings.total_ms);
    Ok(())
}

/// Writes, per query, each path's top-100 documents (best chunk per document) with scores.
fn dump_path_runs(engine: &Engine, set: &sextant::corpus::BeirSet, out: &FsPath) -> Result<()> {
    use rayon::prelude::*;
    let lines: Vec<String> = set
        .queries
        .par_iter()
        .map(|(qid, text)| -> Result<String> {
            let mut paths = serde_json::Map::new();
            for p in Path::ALL {
                let mut req = SearchRequest::new(text.clone(), 100);
                req.paths = vec![p];
                req.per_path_k = 300;
                req.rerank = false;
                req.max_per_document = Some(1);
                let o = engine.search(&req)?;
                let list: Vec<_> = o
                    .hits
                    .iter()
                    .map(|h| serde_json::json!([engine.index().document_of(h.chunk).document_id, h.diagnostics.paths[&p].score]))
                    .collect();
                paths.insert(p.name().to_string(), list.into());
            }
            Ok(serde_json::json!({"qid": qid, "query": text, "paths": paths}).to_string())
        })
        .collect::<Result<_>>()?;
    std::fs::write(out, lines.join("\n") + "\n")?;
    Ok(())
}
