//! The command line: every sub-command and its arguments.

use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};
use sextant_core::index::{Bm25Params, Stemming};
use sextant_core::pipeline::{FusionConfig, Path};

use crate::admin::{KeysCommand, PlansCommand};

/// Sextant: hybrid retrieval (dense + BM25 + SPLADE, fused, reranked).
#[derive(Parser)]
#[command(version, about)]
pub struct Cli {
    /// Directory of converted models (default: $SEXTANT_MODEL_DIR or ~/.cache/sextant/models).
    #[arg(long, global = true)]
    pub models: Option<PathBuf>,
    /// The dense embedder: the name of a converted model directory under `--models`
    /// (`minilm-l6-v2`, the default, or `mpnet-base-v2`). An index is served with the model
    /// it was built with.
    #[arg(long, global = true, env = "SEXTANT_DENSE_MODEL", default_value = sextant_core::encode::DEFAULT_DENSE_MODEL)]
    pub dense_model: String,
    /// A cross-encoder model directory to rerank with.
    #[arg(long, global = true)]
    pub reranker: Option<PathBuf>,
    /// Inference backend: auto (ONNX Runtime when its library loads, else tract),
    /// onnxruntime (falls back to tract, with a warning, when the library cannot load) or tract.
    #[arg(long, global = true, env = "SEXTANT_BACKEND", default_value = "auto",
          value_parser = ["auto", "onnxruntime", "tract"])]
    pub backend: String,
    /// Log lines as text or as one JSON object each (for log pipelines). Logs go to stderr;
    /// `SEXTANT_LOG` sets the levels (default: warnings, and `serve`'s access lines).
    #[arg(long, global = true, env = "SEXTANT_LOG_FORMAT", default_value = "text", value_parser = ["text", "json"])]
    pub log_format: String,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand)]
pub enum Command {
    /// Send a folder or a file of documents to a running Sextant (`serve`, or the API on
    /// AWS) through the document API, several at once; documents the index already holds as
    /// they are are not sent again, so a run that stopped can be run again. The key is read
    /// from SEXTANT_API_KEY.
    Put {
        /// A folder (read as `build --docs` reads it) or one file.
        path: PathBuf,
        /// The index to write to.
        #[arg(long)]
        index: String,
        /// The API's base URL.
        #[arg(long, env = "SEXTANT_URL", default_value = "http://127.0.0.1:8080")]
        url: String,
        /// Requests in flight at once.
        #[arg(long, default_value_t = 4)]
        concurrency: usize,
        /// Print the report (every document's outcome, the files skipped) as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Delete documents from an index of a running Sextant (`serve`, or the API on AWS)
    /// through the document API. A document the index does not hold is reported, not an
    /// error. The key is read from SEXTANT_API_KEY.
    Delete {
        /// The documents' ids (with folders, as a folder build names them: `handbook/travel.md`).
        #[arg(required = true)]
        ids: Vec<String>,
        /// The index to delete from.
        #[arg(long)]
        index: String,
        /// The API's base URL.
        #[arg(long, env = "SEXTANT_URL", default_value = "http://127.0.0.1:8080")]
        url: String,
    },
    /// Build an index from a folder of documents or a JSONL (or .jsonl.gz) file.
    Build {
        /// A folder (every .md, .txt, .html, .json and .jsonl under it, recursively; a
        /// file's document id is its relative path, its fields from front matter or a
        /// sidecar NAME.meta.json), or a JSONL file of documents, one JSON object a line.
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
        /// Encode worker processes (each encodes whole shards; the index is byte-identical
        /// for any number).
        #[arg(long, default_value_t = 1)]
        workers: usize,
        /// Chunks per shard: the unit of encode work and of the vector cache.
        #[arg(long, default_value_t = sextant_core::build::DEFAULT_SHARD_CHUNKS)]
        shard_chunks: usize,
        /// Index shards: split the index by document into this many indexes under
        /// `shards/NNN/` with a root manifest (`root.json`), searched as one index
        /// (docs/shards.md). 1: a single index. The vectors are keyed by content, so
        /// changing the count encodes nothing.
        #[arg(long, default_value_t = 1)]
        shards: usize,
        /// Print the build report (build_report.json) on stdout.
        #[arg(long)]
        json: bool,
        /// Plan only: print what the build would encode and reuse (chunks, shards, tokens
        /// beyond the window), encode and write nothing.
        #[arg(long)]
        dry_run: bool,
    },
    /// Encode one task of a build (run by `sextant build --workers N`, not by hand).
    #[command(hide = true)]
    EncodeWorker {
        /// The task (bincode).
        #[arg(long)]
        task: PathBuf,
        /// Where to write the encoded shard.
        #[arg(long)]
        out: PathBuf,
    },
    /// Serve one shard of a sharded index over the shard protocol (`POST /v1/shard`), as
    /// `serve --shard-workers` starts one per shard.
    ShardWorker {
        /// The sharded index's directory (where its root.json is).
        #[arg(long)]
        index: PathBuf,
        /// Which shard (from 0).
        #[arg(long)]
        shard: usize,
        /// Address to listen on.
        #[arg(long, default_value = "127.0.0.1:0")]
        listen: std::net::SocketAddr,
        /// Fault injection for tests: `error` answers every request a 500.
        #[arg(long, hide = true, value_parser = ["error"])]
        fault: Option<String>,
        /// Stop when standard input closes (the parent that started the worker is gone).
        #[arg(long, hide = true)]
        until_stdin_closes: bool,
    },
    /// Serve the HTTP API on 127.0.0.1 (the embedded default: the bundled demo corpus,
    /// its index built on first start, a printed development key).
    Serve(Box<ServeArgs>),
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
    Eval(Box<EvalArgs>),
    /// Benchmark per-stage latency, HNSW recall and index load time on a BEIR set, at its
    /// real size and at a synthetic larger size.
    Bench(Box<BenchArgs>),
    /// Capacity at synthetic sizes: the merge step's time and peak memory, and the memory
    /// of loading the index once and twice (a warm swap), as a function does.
    BenchCapacity {
        /// The BEIR directory whose index the synthetic chunks are made from.
        #[arg(long)]
        beir: PathBuf,
        /// Sizes in chunks, e.g. --scale 100000 --scale 1000000.
        #[arg(long, required = true)]
        scale: Vec<usize>,
        /// Where the merged indexes go (one directory per size; default: a temporary one).
        #[arg(long)]
        out: Option<PathBuf>,
        #[command(flatten)]
        build: BuildArgs,
    },
    /// Index shards at a synthetic size: the index searched whole and as `--shards` shards
    /// in one process, alternating, with each shard alone, the router's merge and the
    /// memory per shard and per chunk.
    BenchShards {
        /// The BEIR directory whose index the synthetic chunks and queries come from.
        #[arg(long)]
        beir: PathBuf,
        /// The synthetic index's size in chunks.
        #[arg(long)]
        scale: usize,
        /// Shards.
        #[arg(long, default_value_t = 4)]
        shards: usize,
        /// Searches (the set's test queries, cycled).
        #[arg(long, default_value_t = 1000)]
        queries: usize,
        /// Also search the shards as worker processes on loopback, over the shard protocol.
        #[arg(long)]
        workers: bool,
        #[command(flatten)]
        build: BuildArgs,
    },
    /// What a router does with 4, 40 and 400 (by default) index shards' answers before
    /// fusion: decoding them from the shard protocol's JSON, then merging each path's
    /// lists, by the selection it runs beside a full sort and a cut, alternated in one
    /// process, on synthetic lists.
    BenchMerge {
        /// Shard counts to merge from.
        #[arg(long, value_delimiter = ',', default_values_t = [4, 40, 400])]
        shards: Vec<usize>,
        /// Candidates a shard returns a path, and the merged list's length.
        #[arg(long, default_value_t = 200)]
        depth: usize,
        /// Retrieval paths a query merges.
        #[arg(long, default_value_t = 3)]
        paths: usize,
        /// Queries (each its own synthetic lists).
        #[arg(long, default_value_t = 300)]
        queries: usize,
    },
    /// A sharded build's plan at a synthetic size, planned in corpus parts as the build
    /// workflow plans it (one part after another), then gathered: each part's seconds and
    /// peak memory, the gather's, and one index shard's plan joined from its pieces.
    BenchPlan {
        /// A JSONL corpus whose documents are repeated (each copy with an id and a first
        /// line of its own) up to `--chunks`.
        #[arg(long)]
        docs: PathBuf,
        /// Chunks to plan, at least.
        #[arg(long)]
        chunks: usize,
        /// Index shards.
        #[arg(long, default_value_t = 40)]
        shards: usize,
        /// JSON bytes of a part, at most (the build job's `part_bytes`).
        #[arg(long, default_value_t = sextant_aws::build_job::DEFAULT_PART_BYTES)]
        part_bytes: u64,
        #[command(flatten)]
        build: BuildArgs,
    },
    /// Load an index as a function does, once and twice, and print the peak resident sizes
    /// (run by `bench-capacity` in a fresh process).
    #[command(hide = true)]
    BenchLoad {
        /// The index directory.
        #[arg(long)]
        index: PathBuf,
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
    /// Print the API's OpenAPI 3.1 document (as `GET /openapi.json` serves it); the
    /// repository keeps a copy: `sextant openapi > openapi.json`.
    Openapi,
    /// Manage API keys in a key file or DynamoDB.
    Keys {
        #[command(flatten)]
        store: StoreArg,
        #[command(subcommand)]
        command: KeysCommand,
    },
    /// List the plans (built-in and custom), or set a custom one.
    Plans {
        #[command(flatten)]
        store: StoreArg,
        /// Print JSON.
        #[arg(long)]
        json: bool,
        #[command(subcommand)]
        command: Option<PlansCommand>,
    },
    /// Publish a built index directory to S3 as a new version and make it current (a
    /// sharded index as one version of all its shards, for a router and its shard functions).
    Publish {
        /// The index directory (from `sextant build`, with or without `--shards`).
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
    pub store: String,
}

/// What `serve` serves, and its limits.
#[derive(clap::Args)]
pub struct ServeArgs {
    /// Listen address.
    #[arg(long, default_value = "127.0.0.1:8080")]
    pub addr: std::net::SocketAddr,
    /// Serve these prebuilt index directories instead (repeatable): single indexes, or
    /// sharded ones (`build --shards`), served through their router.
    #[arg(long = "index", value_name = "INDEX")]
    pub indexes: Vec<PathBuf>,
    /// On a sharded index, how long a search waits for each shard, in each round trip
    /// (the candidates, then the results' text), before answering from the others
    /// (`degraded`, with `meta.shards`); by default it waits for every shard.
    #[arg(long, value_name = "MS")]
    pub shard_deadline_ms: Option<u64>,
    /// On a sharded index, run each shard as a worker process on loopback
    /// (`sextant shard-worker`), asked over the shard protocol as the Lambda shard
    /// functions are; this process keeps only the shards' documents, without their text,
    /// and where each one's chunks start.
    #[arg(long)]
    pub shard_workers: bool,
    /// Fault injection for tests: with `--shard-workers`, this shard's worker answers
    /// every request a 500.
    #[arg(long, hide = true, value_name = "SHARD")]
    pub shard_fault: Option<usize>,
    /// Index this corpus instead of the bundled demo corpus (cached after the first build):
    /// a folder of documents or a JSONL file, as `build --docs` reads them.
    #[arg(long)]
    pub docs: Option<PathBuf>,
    /// Only documents of these tickers (repeatable).
    #[arg(long = "ticker", value_name = "TICKER")]
    pub tickers: Vec<String>,
    /// XBRL facts for `/v1/context` (repeatable; default with the demo corpus: its facts).
    #[arg(long)]
    pub facts: Vec<PathBuf>,
    /// Id of the index built from the corpus.
    #[arg(long, default_value = "demo")]
    pub id: String,
    /// Use this development API key instead of a random one.
    #[arg(long)]
    pub dev_key: Option<String>,
    /// Plan of the development key: free, pro, enterprise.
    #[arg(long, default_value = "free")]
    pub dev_plan: String,
    /// Key store file (JSON; default: in memory).
    #[arg(long)]
    pub keys: Option<PathBuf>,
    /// Origins browsers may call the API from (CORS), comma-separated, or `*`
    /// (default: none).
    #[arg(long, env = "SEXTANT_CORS_ORIGINS", default_value = "")]
    pub cors_origins: String,
    /// Requests served at once; one more gets a quick 503 with Retry-After.
    #[arg(long, env = "SEXTANT_MAX_IN_FLIGHT", default_value_t = sextant_server::DEFAULT_MAX_IN_FLIGHT)]
    pub max_in_flight: usize,
    /// Seconds for a request head to arrive, and for an idle connection to send one;
    /// then the connection is closed.
    #[arg(long, default_value_t = 10)]
    pub header_timeout_secs: u64,
    /// Seconds for a request body to arrive; then a 408.
    #[arg(long, default_value_t = 30)]
    pub body_timeout_secs: u64,
    /// Connections open at once; one more gets a 503 and is closed.
    #[arg(long, default_value_t = 1024)]
    pub max_connections: usize,
    /// Keep each index's written documents (log and compacted versions) in DIR/<index>
    /// (default: beside the index, in its `live` directory).
    #[arg(long, env = "SEXTANT_DATA_DIR")]
    pub data_dir: Option<PathBuf>,
    /// Fold written documents into a new index version once the delta holds this many
    /// chunks (0: only on POST /v1/indexes/{index}/compact).
    #[arg(long, env = "SEXTANT_COMPACT_AT_CHUNKS", default_value_t = 512)]
    pub compact_at_chunks: usize,
    /// Do not serve the playground page at `/` (its three files are in the binary).
    #[arg(long)]
    pub no_playground: bool,
    #[command(flatten)]
    pub rerank: HostedRerankArgs,
    #[command(flatten)]
    pub build: BuildArgs,
}

/// A hosted reranker instead of a local cross-encoder (the same variables configure the
/// Lambda functions).
#[derive(clap::Args, Clone)]
pub struct HostedRerankArgs {
    /// Rerank with a hosted service: cohere (the Cohere Rerank API v2, its key in
    /// CO_API_KEY) or bedrock (Amazon Bedrock's Rerank, with the environment's AWS
    /// credentials and region). A failed or late call serves the fused order.
    #[arg(long, env = "SEXTANT_RERANK_SERVICE", default_value = "none", value_parser = sextant_rerank::Service::NAMES)]
    pub rerank_service: String,
    /// The hosted reranker's model (default: rerank-v3.5 on Cohere, amazon.rerank-v1:0 on
    /// Bedrock; a whole model ARN on Bedrock).
    #[arg(long, env = "SEXTANT_RERANK_MODEL")]
    pub rerank_model: Option<String>,
    /// Another endpoint for the hosted reranker (a proxy, or a server speaking its protocol).
    #[arg(long, env = "SEXTANT_RERANK_ENDPOINT")]
    pub rerank_endpoint: Option<String>,
    /// Milliseconds a search waits for the hosted reranker before serving the fused order.
    #[arg(long, env = "SEXTANT_RERANK_TIMEOUT_MS", default_value_t = 2000)]
    pub rerank_timeout_ms: u64,
}

impl BuildArgs {
    /// The part of a cache key the chunking adds: `-c{tokens}`, `-o{overlap}` when there is
    /// one, and `-w{dense window}`.
    pub fn chunking_key(&self) -> String {
        let chunks = match self.chunk_overlap {
            0 => format!("c{}", self.chunk_tokens),
            o => format!("c{}-o{o}", self.chunk_tokens),
        };
        format!("{chunks}-w{}", self.dense_window)
    }

    /// What names a cached index built with these settings beside its corpus: the
    /// chunking, the graph recipe ([`GRAPH_RECIPE`](crate::indexes::GRAPH_RECIPE)) and
    /// BM25's parameters.
    pub fn index_key(&self) -> String {
        format!("{}-g{}-{}", self.chunking_key(), crate::indexes::GRAPH_RECIPE, self.bm25_key())
    }

    /// The BM25 parameters asked for.
    pub fn bm25(&self) -> Bm25Params {
        let stemming = match self.bm25_stemming {
            StemmingArg::None => Stemming::None,
            StemmingArg::English => Stemming::English,
        };
        Bm25Params { k1: self.k1, b: self.b, stemming }
    }

    /// The part of a cache key BM25 adds: `k{k1}-b{b}`, and `-english` when it stems.
    pub fn bm25_key(&self) -> String {
        match self.bm25_stemming {
            StemmingArg::None => format!("k{}-b{}", self.k1, self.b),
            StemmingArg::English => format!("k{}-b{}-english", self.k1, self.b),
        }
    }
}

/// How BM25 reduces words to terms.
#[derive(Clone, Copy, ValueEnum, PartialEq, Eq, Debug)]
pub enum StemmingArg {
    /// Words as written, lowercased (the default)
    None,
    /// Snowball English stemming (every index before format 5)
    English,
}

impl HostedRerankArgs {
    /// The hosted reranker asked for, if any (Cohere's key is read from `CO_API_KEY`, never
    /// from a flag, so it does not show in the process list).
    pub fn config(&self) -> Result<Option<sextant_rerank::HostedConfig>, sextant_rerank::Error> {
        let Some(service) = sextant_rerank::Service::parse("--rerank-service", &self.rerank_service)? else {
            return Ok(None);
        };
        let timeout = sextant_rerank::timeout_from_ms("--rerank-timeout-ms", &self.rerank_timeout_ms.to_string())?;
        Ok(Some(sextant_rerank::HostedConfig {
            service,
            model: self.rerank_model.clone(),
            endpoint: self.rerank_endpoint.clone(),
            timeout,
            api_key: std::env::var("CO_API_KEY").ok().filter(|k| !k.trim().is_empty()),
        }))
    }
}

#[derive(clap::Args, Clone)]
pub struct BuildArgs {
    /// Token budget of a chunk.
    #[arg(long, default_value_t = 200)]
    pub chunk_tokens: usize,
    /// Tokens a chunk may repeat from the end of the one before it, in whole segments or
    /// sentences (0: none). Writes to the index are cut the same way.
    #[arg(long, default_value_t = 0)]
    pub chunk_overlap: usize,
    /// Token budget of a dense window: a longer chunk is read by the dense encoder in
    /// windows of at most this many tokens, and scored by its best (0: one vector per
    /// chunk; 128, the default, is the window measured in docs/quality.md).
    #[arg(long, default_value_t = sextant_core::build::DEFAULT_DENSE_WINDOW)]
    pub dense_window: usize,
    /// BM25 k1.
    #[arg(long, default_value_t = 0.9)]
    pub k1: f32,
    /// BM25 b.
    #[arg(long, default_value_t = 0.4)]
    pub b: f32,
    /// How BM25 reduces words to terms.
    #[arg(long, value_enum, default_value_t = StemmingArg::None)]
    pub bm25_stemming: StemmingArg,
}

/// A fusion to evaluate.
#[derive(Clone, Copy, ValueEnum, PartialEq, Eq, Debug)]
pub enum FusionChoice {
    /// The engine's default.
    Default,
    /// Plain RRF of chunks: k = 60, equal weights.
    Plain,
}

impl FusionChoice {
    /// The fusion settings.
    pub fn config(self) -> FusionConfig {
        match self {
            FusionChoice::Default => FusionConfig::default(),
            FusionChoice::Plain => FusionConfig::plain(),
        }
    }
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
    /// The paths this mode runs.
    pub fn paths(self) -> Vec<Path> {
        match self {
            Mode::Hybrid => Path::ALL.to_vec(),
            Mode::Dense => vec![Path::Dense],
            Mode::Bm25 => vec![Path::Bm25],
            Mode::Splade => vec![Path::Splade],
        }
    }
    /// The mode's name in output.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Hybrid => "hybrid",
            Mode::Dense => "dense",
            Mode::Bm25 => "bm25",
            Mode::Splade => "splade",
        }
    }
}

/// What `sextant eval` is asked for.
#[derive(clap::Args)]
pub struct EvalArgs {
    /// The BEIR directory (with `--report`, repeatable: one set each).
    #[arg(long, required = true)]
    pub beir: Vec<PathBuf>,
    /// The qrels split to evaluate (with `--report`: once for every set, or once per
    /// `--beir`, in the same order).
    #[arg(long, default_value = "test")]
    pub split: Vec<String>,
    /// Write a plotted report to this directory instead: every mode (dense, bm25,
    /// splade, plain RRF, the default hybrid) on every set, `index.html` with SVG charts
    /// (nDCG@10 per mode and set; per question, hybrid against the best single path),
    /// the charts as `.svg` files, and `report.json`.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["mode", "paths", "fusion", "feedback", "feedback_documents", "agreement", "recall_head", "recall_dense_weight", "dump_runs", "per_query", "late_interaction"])]
    pub report: Option<PathBuf>,
    #[arg(long, value_enum, default_value_t = Mode::Hybrid)]
    pub mode: Mode,
    /// Print one JSON object.
    #[arg(long)]
    pub json: bool,
    /// Measure the exhaustive figure instead of what the API serves: 300 candidates a
    /// path, at which the dense path scans every chunk. By default each path gives the
    /// API's own depth (200), and the dense path searches the HNSW graph as
    /// `/v1/retrieve` does.
    #[arg(long)]
    pub exact: bool,
    /// Also write every path's ranking per query (JSONL) to this file, for studying
    /// fusion offline (`scripts/studies/choose_fusion.py`): `paths` holds each path's
    /// documents (at their best chunk), `chunks` its candidates (as many as the
    /// evaluation's depth) as [document, score, chunk].
    #[arg(long, hide = true)]
    pub dump_runs: Option<PathBuf>,
    /// Also write each question's metrics (JSONL: qid, ndcg_at_10, recall_at_10,
    /// recall_at_100, mrr_at_10) to this file, for paired comparisons of two runs
    /// (`scripts/studies/paired.py`).
    #[arg(long, value_name = "FILE")]
    pub per_query: Option<PathBuf>,
    /// Also split the index into these numbers of index shards (comma-separated, e.g.
    /// 2,3,7), from its own vectors, and search each split through the shard router
    /// exactly as the index is searched: prints, per shard count, how many questions' top
    /// 10 is identical to the unsplit index's (ids, order and every score to the bit) and
    /// the mean top-10 overlap.
    #[arg(long, value_delimiter = ',', value_name = "K", conflicts_with_all = ["report", "dump_runs", "per_query", "late_interaction"])]
    pub shards: Vec<usize>,
    /// Let the lexical paths read each question whole, a role in front of it included
    /// (by default BM25 and SPLADE read it without: "You are an analyst." and the like).
    #[arg(long)]
    pub keep_instructions: bool,
    /// Only these paths (comma-separated: dense,bm25,splade), instead of the mode's.
    #[arg(long, value_delimiter = ',')]
    pub paths: Vec<Path>,
    /// The fusion: the default (z-scores of documents), or plain RRF (chunks, k = 60,
    /// equal weights). Earlier releases' defaults are in git.
    #[arg(long, value_enum, default_value_t = FusionChoice::Default)]
    pub fusion: FusionChoice,
    /// Dense feedback's strength `c` in the fusion, instead of its own: after a first
    /// fusion the dense path rescores every candidate for its query moved towards the fused top
    /// documents by `min(1, c · ids(q))` (0: none).
    #[arg(long, value_name = "C")]
    pub feedback: Option<f32>,
    /// How many of the first fusion's top documents dense feedback reads, instead of the
    /// fusion's own.
    #[arg(long, value_name = "M")]
    pub feedback_documents: Option<usize>,
    /// The agreement term `β` of every path's weight, instead of the fusion's own.
    #[arg(long, value_name = "BETA")]
    pub agreement: Option<f32>,
    /// The recall tail's head `H`: the fused top H documents are kept, and the rest
    /// ordered by the tail's RRF, instead of the fusion's own (0: no tail, the fused order
    /// all the way down).
    #[arg(long, value_name = "H")]
    pub recall_head: Option<usize>,
    /// The recall tail's dense weight (each lexical path's is 1), instead of the default
    /// tail's (with `--recall-head`, or alone on the default tail).
    #[arg(long, value_name = "W")]
    pub recall_dense_weight: Option<f32>,
    /// Instead, compare the mode's ranking (no cross-encoder) with MaxSim late
    /// interaction over the dense model's token vectors re-scoring its top N, alone and
    /// fused with it by RRF.
    #[arg(long, value_name = "N")]
    pub late_interaction: Option<usize>,
    #[command(flatten)]
    pub build: BuildArgs,
}

/// What `sextant bench` is asked for.
#[derive(clap::Args)]
pub struct BenchArgs {
    /// The BEIR directory (its index is built or reused as by `eval`).
    #[arg(long)]
    pub beir: PathBuf,
    /// Queries to time.
    #[arg(long, default_value_t = 200)]
    pub queries: usize,
    /// Also measure at these synthetic sizes (chunks), e.g. 100000.
    #[arg(long)]
    pub scale: Vec<usize>,
    /// Passages (the index's first chunks, as a build encodes them) for the encoding
    /// throughput figures; 0 skips them.
    #[arg(long, default_value_t = 256)]
    pub passages: usize,
    /// Print one JSON object per scale (one per line) instead of tables.
    #[arg(long)]
    pub json: bool,
    /// Write what was measured for a peer to measure the same (`scripts/bench/peer_bench.py`):
    /// queries.jsonl, passages.jsonl and, per scale, its chunks' texts and dense vectors.
    #[arg(long, value_name = "DIR")]
    pub export: Option<PathBuf>,
    /// Also write a plotted report to this directory: `index.html` with each scale's
    /// latency distribution per stage (SVG box plots, beside the peer's with `--peer`),
    /// the charts as `.svg` files, and `report.json` with every sample.
    #[arg(long, value_name = "DIR")]
    pub report: Option<PathBuf>,
    /// A peer's samples on the same queries (`scripts/bench/peer_bench.py --samples FILE`),
    /// drawn beside Sextant's stages in the report.
    #[arg(long, value_name = "FILE", requires = "report")]
    pub peer: Option<PathBuf>,
    #[command(flatten)]
    pub build: BuildArgs,
}
