//! `sextant serve`: the embedded default. One process serves every endpoint on
//! 127.0.0.1 from a local index directory and a local key store; with no flags it serves
//! the bundled demo corpus, building its index on first start.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, Result};
use sextant_core::build::{lexical_only, plan_build, Planned, Previous};
use sextant_core::corpus::{load_documents, load_folder, Document};
use sextant_core::encode::{ModelInfo, ModelSet, TextTokenizer};
use sextant_core::index::format::sha256_hex;
use sextant_core::index::{Filter, Index};
use sextant_core::pipeline::{Path, SharedModels};
use sextant_core::shards::{load_sharded, read_root, Searcher, ShardSet};
use sextant_core::storage::LocalDir;
use sextant_finance::{FactStore, Financials};
use sextant_keys::{new_key, LocalKeyStore};
use sextant_live::{LiveShards, Served};
use sextant_server::{router, ApiConfig, AppState, Indexes, ServedIndex};

use crate::cli::{BuildArgs, ServeArgs};
use crate::index_admin::LocalIndexAdmin;
use crate::indexes::{build_into, build_options, cache_dir, cached_vectors};

/// The demo corpus, compiled into the binary so a fresh clone needs no data path.
const DEMO_CORPUS: &[u8] = include_bytes!("../../data/demo/documents.jsonl.gz");
/// The XBRL facts of the demo corpus's companies (`scripts/data/build_demo_facts.py`).
const DEMO_FACTS: &[u8] = include_bytes!("../../data/demo/facts.jsonl.gz");

/// Fetches and converts the models with `scripts/ci/fetch_models.sh` when their directory
/// lacks them (a fresh machine), so that `serve` alone starts the demo.
pub fn ensure_models(models: &ModelSet) -> Result<()> {
    if ModelInfo::read(&models.dense).is_ok() && ModelInfo::read(&models.sparse).is_ok() {
        return Ok(());
    }
    let root = models.dense.parent().unwrap_or(std::path::Path::new("."));
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/ci/fetch_models.sh");
    if !script.is_file() {
        anyhow::bail!(
            "no models in {} and no {} to fetch them: point --models or SEXTANT_MODEL_DIR at the converted models",
            root.display(),
            script.display()
        );
    }
    tracing::info!("no models in {}: fetching and converting them once (scripts/ci/fetch_models.sh)", root.display());
    let mut fetch = std::process::Command::new("bash");
    fetch.arg(&script);
    if let Some(dense) = models.other_dense_model() {
        fetch.arg("--with").arg(dense);
    }
    let status = fetch
        .env("SEXTANT_MODEL_DIR", root)
        .stdout(std::process::Stdio::null())
        .status()
        .with_context(|| format!("running {}", script.display()))?;
    if !status.success() {
        anyhow::bail!("{} failed ({status}); see its messages above", script.display());
    }
    Ok(())
}

/// Runs the server until Ctrl-C.
pub fn run(args: ServeArgs, models: ModelSet) -> Result<()> {
    ensure_models(&models)?;
    let store = match &args.keys {
        Some(p) => LocalKeyStore::open(p).with_context(|| format!("opening key store {}", p.display()))?,
        None => LocalKeyStore::in_memory(),
    };
    let key = match &args.dev_key {
        Some(k) => k.clone(),
        None => new_key()?,
    };
    store.add(&key, "dev", &args.dev_plan, vec!["*:admin".into()]).context("registering the development key")?;
    let cors_origins = sextant_server::headers::parse_origins(&args.cors_origins)
        .map_err(|e| anyhow::anyhow!("--cors-origins: {e}"))?;
    let connection_limits = sextant_server::listen::ConnectionLimits {
        header_read: std::time::Duration::from_secs(args.header_timeout_secs.max(1)),
        max_connections: args.max_connections.max(1),
    };
    let state = AppState::new(
        Arc::new(store),
        ApiConfig {
            default_index: args.id.clone(),
            cors_origins,
            max_in_flight: args.max_in_flight,
            body_read_timeout: std::time::Duration::from_secs(args.body_timeout_secs.max(1)),
            playground: !args.no_playground,
            ..Default::default()
        },
    );
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    runtime.block_on(async move {
        let listener =
            tokio::net::TcpListener::bind(args.addr).await.with_context(|| format!("binding {}", args.addr))?;
        let addr = listener.local_addr()?;
        println!(
            "sextant listening on http://{addr} (GET /health answers 200 once a first index is served, \
             \"degraded\": true until every retrieval path is in)"
        );
        println!("development API key ({} plan): {key}", args.dev_plan);
        if !args.no_playground {
            println!("playground: http://{addr}/ (type the key above into the page)");
        }
        println!(
            "try: curl -s http://{addr}/v1/retrieve -H 'Authorization: Bearer {key}' \
             -H 'Content-Type: application/json' -d '{{\"query\": \"What drove revenue growth?\"}}'"
        );
        let mut shared = SharedModels::new(models.clone());
        if let Some(hosted) = args.rerank.config()? {
            if models.reranker.is_some() {
                anyhow::bail!("--reranker and --rerank-service both name a reranker: choose one");
            }
            shared = shared.with_reranker(hosted.connect().await?);
            println!("reranking with {}", hosted.describe());
        }
        let loader_state = state.clone();
        let loader = tokio::task::spawn_blocking(move || load_indexes(&args, shared, &loader_state));
        // A server without its index is of no use: a failed load stops the process.
        tokio::spawn(async move {
            match loader.await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => {
                    tracing::error!("loading the index failed: {e:#}");
                    std::process::exit(1);
                }
                Err(e) => {
                    tracing::error!("the loader stopped: {e}");
                    std::process::exit(1);
                }
            }
        });
        let limits = connection_limits;
        sextant_server::listen::serve(listener, router(state), limits, async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await
        .context("server failed")?;
        Ok::<(), anyhow::Error>(())
    })
}

/// Loads and serves the indexes: the corpus index (reused from the cache, or built) with
/// the facts of `--facts` or the bundled ones, or each `--index` directory with the facts
/// saved in it (or those of `--facts`).
///
/// A corpus index that is not cached yet is served in two steps: its BM25 index first
/// (seconds after the start, `degraded` in `/health` and in each answer), then the full
/// hybrid index when its build is done, swapped in and saved in the cache.
///
/// `shared` holds one copy of the models (and the reranker) for every index served.
fn load_indexes(args: &ServeArgs, shared: SharedModels, state: &Arc<AppState>) -> Result<()> {
    let shared = Arc::new(shared);
    let models = shared.set();
    // Each index with the directory it was loaded from or saved in (its writes live beside
    // it, once every path is served).
    let serve = |loaded: Vec<(Index, FactStore, PathBuf)>,
                 sharded: Vec<(ServedIndex, PathBuf)>,
                 ready: &[Path]|
     -> Result<()> {
        state.set_loading("loading models");
        let mut indexes = Indexes::new();
        let mut dirs = Vec::new();
        for (served, dir) in sharded {
            let id = served.searcher.view().manifest().index_id.clone();
            dirs.push((id.clone(), dir));
            indexes.insert(id, served);
        }
        for (index, facts, dir) in loaded {
            let financials = Financials::new(facts, &index);
            let (engine, _) = shared.engine(Arc::new(index))?;
            let id = engine.index().manifest.index_id.clone();
            dirs.push((id.clone(), dir));
            indexes.insert(id, ServedIndex::new(engine.with_ready_paths(ready), financials));
        }
        let summary: Vec<String> = indexes.iter().map(|(id, s)| format!("{id} ({})", describe(&s.searcher))).collect();
        // Indexes created through the API live in the data directory (or the cache's); with
        // every path ready they are served again, and until then they answer 503, not 404.
        let root = args.data_dir.clone().unwrap_or_else(|| cache_dir().join("created"));
        for id in crate::index_admin::created_under(&root) {
            state.mark_loading(&id);
        }
        let admin = (ready.len() == Path::ALL.len()).then(|| {
            LocalIndexAdmin::new(
                root.clone(),
                shared.clone(),
                state.clone(),
                args.build.clone(),
                args.compact_at_chunks,
            )
        });
        state.set_indexes(indexes);
        let paths: Vec<&str> = ready.iter().map(|p| p.name()).collect();
        if let Some(admin) = admin {
            let reopened = admin.reopen()?;
            if !reopened.is_empty() {
                println!("serving the indexes created through the API: {}", reopened.join(", "));
            }
            state.set_index_admin(Arc::new(admin));
            println!("indexes may be created: PUT /v1/indexes/{{index}} (kept in {})", root.display());
            for (id, dir) in dirs {
                let live_dir = args.data_dir.as_ref().map_or_else(|| dir.join("live"), |d| d.join(&id));
                open_live(state, &id, &dir, &live_dir, args.compact_at_chunks)?;
            }
        }
        println!("ready: serving {} with {}", summary.join(", "), paths.join(", "));
        Ok(())
    };
    if !args.indexes.is_empty() {
        let (mut loaded, mut sharded) = (Vec::new(), Vec::new());
        for dir in &args.indexes {
            state.set_loading(format!("loading index {}", dir.display()));
            let storage = LocalDir::new(dir);
            if let Some(served) = load_sharded_index(&storage, &shared, args)? {
                sharded.push((served, dir.clone()));
                continue;
            }
            let index = Index::load(&storage).with_context(|| format!("loading index {}", dir.display()))?;
            let facts = if args.facts.is_empty() {
                Financials::load(&storage, &index)?.facts
            } else {
                FactStore::open(&args.facts)?
            };
            loaded.push((index, facts, dir.clone()));
        }
        return serve(loaded, sharded, &Path::ALL);
    }
    // Facts are read at each start (under a second): the cached index holds the documents.
    let facts = || -> Result<FactStore> {
        let mut facts = if !args.facts.is_empty() {
            FactStore::open(&args.facts)?
        } else if args.docs.is_none() {
            FactStore::from_bytes(vec![("bundled facts.jsonl.gz".into(), DEMO_FACTS.to_vec())])?
        } else {
            FactStore::default()
        };
        facts.retain_tickers(&args.tickers);
        Ok(facts)
    };
    match corpus_index(args.docs.as_deref(), &args.tickers, &args.id, &args.build, models, state)? {
        CorpusIndex::Cached(index, dir) => {
            tracing::info!("reusing index {}", dir.display());
            serve(vec![(*index, facts()?, dir)], Vec::new(), &Path::ALL)
        }
        CorpusIndex::ToBuild { documents, dir, vectors_from } => {
            state.set_loading(format!("indexing {} documents for BM25 (first start only)", documents.len()));
            let t = Instant::now();
            let lexical = lexical_index(documents.clone(), models, &args.id, &args.build)?;
            tracing::info!(
                "BM25 index of {} chunks in {:.1}s; serving it while the rest builds",
                lexical.chunks.len(),
                t.elapsed().as_secs_f64()
            );
            serve(vec![(lexical, facts()?, dir.clone())], Vec::new(), &[Path::Bm25])?;
            tracing::info!(
                "building index {}: {} documents (first start only; cached in {})",
                args.id,
                documents.len(),
                dir.display()
            );
            // A failed build leaves the BM25 index serving (still `degraded`), not nothing.
            // `corpus_index` found no index in `dir`: build, then save there for the next start.
            let previous = cached_vectors(&cache_dir().join("indexes"), &vectors_from);
            let built = build_into(&dir, documents, models, &args.id, &args.build, &previous);
            match built {
                Ok(index) => serve(vec![(index, facts()?, dir)], Vec::new(), &Path::ALL),
                Err(e) => {
                    tracing::error!("building the full index failed: {e:#}; serving BM25 only");
                    Ok(())
                }
            }
        }
    }
}

/// The sharded index in `storage` (a root manifest there), served through its router
/// with the facts of `--facts` (a sharded build keeps none); `None` for a single index.
fn load_sharded_index(storage: &LocalDir, shared: &SharedModels, args: &ServeArgs) -> Result<Option<ServedIndex>> {
    let location = storage.root().display().to_string();
    let Some((root, stats)) = read_root(storage).with_context(|| format!("loading index {location}"))? else {
        return Ok(None);
    };
    let mut router = if args.shard_workers {
        // The workers hold the search structures; this process keeps what results read,
        // loading one shard at a time.
        let timeout = std::time::Duration::from_millis(args.shard_deadline_ms.unwrap_or(30_000));
        let root = (&root, stats);
        crate::shard_workers::router_over_workers(storage.root(), root, (timeout, args.shard_fault), |store| {
            Ok(shared.engine(store)?.0)
        })?
    } else {
        let (_, shards) =
            load_sharded(storage).with_context(|| format!("loading index {location}"))?.context("a root")?;
        ShardSet::of_shards(shards, |i| Ok::<_, anyhow::Error>(shared.engine(i)?.0))?
    };
    if let Some(ms) = args.shard_deadline_ms {
        router = router.with_deadline(std::time::Duration::from_millis(ms));
    }
    let facts = if args.facts.is_empty() { FactStore::default() } else { FactStore::open(&args.facts)? };
    let financials = Financials::new(facts, &router);
    let how = if args.shard_workers { "each in a worker process" } else { "in this process" };
    tracing::info!("index {} is sharded: {} shards {how}", root.index_id, root.shards.len());
    Ok(Some(ServedIndex::sharded(router, financials)))
}

/// What `serve` prints of a served index: its chunks, and its shards when it has more
/// than one.
fn describe(searcher: &Searcher) -> String {
    let chunks = searcher.view().manifest().chunks;
    match searcher.shard_count() {
        1 => format!("{chunks} chunks"),
        k => format!("{chunks} chunks in {k} shards"),
    }
}

/// Makes index `id` (served, built in `dir`) writable: its writes are logged and
/// compacted in `live_dir`, and each new state is swapped in for the one served. A sharded
/// index takes writes when its shards are in this process, each document in its shard
/// ([`sextant_live::Served::Shards`]); one served by worker processes stays read-only.
pub(crate) fn open_live(
    state: &Arc<AppState>,
    id: &str,
    dir: &std::path::Path,
    live_dir: &std::path::Path,
    compact_at_chunks: usize,
) -> Result<()> {
    let served = state.loaded_index(id).context("the index was just served")?;
    let original = match &served.searcher {
        Searcher::Single(engine) => Served::Index(engine.index().clone()),
        Searcher::Sharded(set) => match set.local_shards() {
            Some(local) => Served::Shards(LiveShards {
                indexes: local.indexes.to_vec(),
                order: local.order.to_vec(),
                stats: local.stats.clone(),
            }),
            None => {
                println!("index {id} is served by shard worker processes: read-only (serve it without --shard-workers to write)");
                return Ok(());
            }
        },
    };
    let engine = served.engine();
    let encoders = (engine.dense_encoder()?.clone(), engine.sparse_encoder()?.clone());
    let publish_state = state.clone();
    let index_id = id.to_string();
    let publish = Box::new(move |next: Served| {
        let Some(now) = publish_state.loaded_index(&index_id) else { return };
        match searcher_of(&now.searcher, next) {
            Ok(searcher) => publish_state.replace_index(
                &index_id,
                ServedIndex { searcher, financials: now.financials.clone() },
                None,
            ),
            Err(e) => tracing::error!("index {index_id}: a new state could not be served: {e}"),
        }
    });
    let options = sextant_live::LiveOptions { compact_at_chunks };
    match sextant_live::LiveIndex::open(live_dir, original, dir, encoders, options, publish) {
        Ok(live) => {
            state.set_document_store(id, Arc::new(live));
            println!(
                "index {id} takes documents: PUT /v1/indexes/{id}/documents/{{documentId}} (log in {})",
                live_dir.display()
            );
        }
        // A directory this process may not write keeps the index read-only, not down.
        Err(e) => {
            tracing::warn!("index {id} stays read-only: its writes could not be opened in {}: {e}", live_dir.display())
        }
    }
    Ok(())
}

/// What searches `next`, a new state of a writable index, with the models and settings
/// of `now`, what searches it today (a sharded index's router keeps its deadline).
fn searcher_of(now: &Searcher, next: Served) -> sextant_core::Result<Searcher> {
    let engine = now.engine();
    Ok(match next {
        Served::Index(index) => Searcher::Single(Arc::new(engine.with_index(index)?)),
        Served::Shards(s) => {
            let engines = s.indexes.into_iter().map(|i| engine.with_index(i)).collect::<sextant_core::Result<_>>()?;
            let mut set = ShardSet::new(engines, Some(s.order), s.stats)?;
            if let Searcher::Sharded(old) = now {
                if let Some(deadline) = old.deadline() {
                    set = set.with_deadline(deadline);
                }
            }
            Searcher::Sharded(Arc::new(set))
        }
    })
}

/// The BM25-only index of `documents` (see [`lexical_only`]): chunked and indexed as the
/// full build will, nothing encoded.
fn lexical_index(documents: Vec<Document>, models: &ModelSet, id: &str, build: &BuildArgs) -> Result<Index> {
    let options = build_options(models, id, build)?;
    let (dense, sparse) = (TextTokenizer::of_model(&models.dense)?, TextTokenizer::of_model(&models.sparse)?);
    let dim = ModelInfo::read(&models.dense)?.hidden_size;
    match plan_build(documents, &[], &options, (&dense, &sparse), &Previous::none(), None)? {
        Planned::Ready { plan, .. } => Ok(lexical_only(*plan, dim)?),
        Planned::Unchanged(_) => anyhow::bail!("nothing to index"),
    }
}

/// The corpus index: cached (with its directory), or its documents to build it from.
enum CorpusIndex {
    Cached(Box<Index>, PathBuf),
    /// To build in `dir`, reusing the vectors of the cached indexes whose directory names
    /// start with `vectors_from` (the same corpus, any subset, settings or format).
    ToBuild {
        documents: Vec<Document>,
        dir: PathBuf,
        vectors_from: String,
    },
}

/// The index of `docs` (or the demo corpus), restricted to `tickers`: from the cache when
/// the same corpus and settings were built before, else the documents to build it from.
fn corpus_index(
    docs: Option<&std::path::Path>,
    tickers: &[String],
    id: &str,
    build: &BuildArgs,
    models: &ModelSet,
    state: &AppState,
) -> Result<CorpusIndex> {
    // A folder is read first (its files are small to read beside an index build) and keyed
    // by the documents read; a JSONL file by its bytes, before it is parsed.
    let mut folder = None;
    let (path, bytes_sum) = match docs {
        Some(p) if p.is_dir() => {
            let read = load_folder(p).with_context(|| format!("reading {}", p.display()))?;
            for s in &read.skipped {
                tracing::warn!(file = %s.path, reason = %s.reason, "skipped a file of the folder");
            }
            let sum = sha256_hex(&serde_json::to_vec(&read.documents)?);
            folder = Some(read.documents);
            (p.to_path_buf(), sum)
        }
        Some(p) => {
            (p.to_path_buf(), sha256_hex(&std::fs::read(p).with_context(|| format!("reading {}", p.display()))?))
        }
        None => {
            let sum = sha256_hex(DEMO_CORPUS);
            let p = cache_dir().join("demo").join(format!("documents-{}.jsonl.gz", &sum[..12]));
            if !p.exists() {
                std::fs::create_dir_all(p.parent().expect("has a parent"))?;
                std::fs::write(&p, DEMO_CORPUS)?;
            }
            (p, sum)
        }
    };
    let mut sorted = tickers.iter().map(|t| t.to_ascii_uppercase()).collect::<Vec<_>>();
    sorted.sort();
    let key = format!(
        "{id}-{}-{}-f{}-{}{}",
        &bytes_sum[..12],
        if sorted.is_empty() { "all".into() } else { sorted.join("+") },
        sextant_core::index::format::FORMAT_VERSION,
        build.index_key(),
        crate::indexes::dense_model_key(models),
    );
    let dir = cache_dir().join("indexes").join(key);
    state.set_loading(format!("loading index {}", dir.display()));
    if let Ok(index) = Index::load(&LocalDir::new(&dir)) {
        return Ok(CorpusIndex::Cached(Box::new(index), dir));
    }
    let mut documents = match folder {
        Some(documents) => documents,
        None => load_documents(&path)?,
    };
    let subset = Filter { tickers: sorted, ..Default::default() };
    documents.retain(|d| subset.matches(d));
    if documents.is_empty() {
        anyhow::bail!("no documents to index in {}", path.display());
    }
    Ok(CorpusIndex::ToBuild { documents, dir, vectors_from: format!("{id}-{}-", &bytes_sum[..12]) })
}
