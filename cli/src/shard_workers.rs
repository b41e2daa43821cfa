//! Index shards as worker processes on loopback: `sextant shard-worker` serves one shard of
//! a sharded index over the shard protocol ([`sextant_server::shard_worker`]), and
//! `sextant serve --shard-workers` starts one per shard and routes every search to them
//! through [`HttpShard`], the protocol's client. The fan-out, merge and failure handling
//! are the router's, as on AWS with a function per shard (`sextant_lambda::shard`); here a
//! shard that is killed, stopped or failing is a process of its own.

use std::io::{BufRead, BufReader, Write};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Bytes;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use sextant_core::index::{Index, LexicalStats};
use sextant_core::pipeline::Engine;
use sextant_core::shards::{
    load_shard, load_shard_store, read_root, RootManifest, Shard, ShardRequest, ShardResponse, ShardSet,
};
use sextant_core::storage::LocalDir;
use sextant_core::Error;
use sextant_server::shard_worker::{shard_router, SHARD_PATH};

/// The largest answer a shard may send (each path's candidates, or dense rows).
const MAX_ANSWER_BYTES: usize = 64 << 20;

/// `sextant shard-worker`: serves shard `shard` of the sharded index in `index` on
/// `listen` until Ctrl-C, or, with `until_stdin_closes`, until its standard input closes
/// (its parent went away). Prints `shard K listening on http://ADDR` once it answers. It
/// loads no model: its router sends every query encoded ([`Engine::without_encoders`]).
pub fn worker(index: &Path, shard: usize, listen: SocketAddr, failing: bool, until_stdin_closes: bool) -> Result<()> {
    let storage = LocalDir::new(index);
    let (root, _) = read_root(&storage)?.with_context(|| format!("{} is not a sharded index", index.display()))?;
    let (shard_index, _) = load_shard(&storage, &root, shard)?;
    let engine = Arc::new(Engine::without_encoders(Arc::new(shard_index)));
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind(listen).await.with_context(|| format!("binding {listen}"))?;
        println!("shard {shard} listening on http://{}", listener.local_addr()?);
        std::io::stdout().flush()?;
        let stop = async move {
            if until_stdin_closes {
                // EOF (or an error) on stdin: the parent that held its other end is gone.
                let _ =
                    tokio::task::spawn_blocking(|| std::io::copy(&mut std::io::stdin(), &mut std::io::sink())).await;
            } else {
                let _ = tokio::signal::ctrl_c().await;
            }
        };
        let limits = sextant_server::listen::ConnectionLimits::default();
        sextant_server::listen::serve(listener, shard_router(engine, failing), limits, stop).await?;
        Ok(())
    })
}

/// The runtime every [`HttpShard`] sends its requests on (the router asks its shards from
/// rayon and plain threads, outside any runtime).
fn runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("shard-client")
            .enable_all()
            .build()
            .expect("a runtime for the shard clients")
    })
}

/// A shard behind the protocol on HTTP: `POST {url}/v1/shard`, JSON both ways. Owns its
/// worker process when it started one (killed when the shard is dropped).
pub struct HttpShard {
    url: hyper::Uri,
    client: Client<HttpConnector, Full<Bytes>>,
    timeout: Duration,
    worker: Option<Mutex<Child>>,
}

impl HttpShard {
    /// The shard at `base` (`http://127.0.0.1:PORT`); a request that takes longer than
    /// `timeout` fails.
    pub fn new(base: &str, timeout: Duration) -> Result<Self> {
        let url = format!("{}{SHARD_PATH}", base.trim_end_matches('/'));
        let url: hyper::Uri = url.parse().with_context(|| format!("{url:?} is not a URL"))?;
        Ok(HttpShard { url, client: Client::builder(TokioExecutor::new()).build_http(), timeout, worker: None })
    }

    async fn send(&self, body: Vec<u8>) -> Result<ShardResponse, String> {
        let request = hyper::Request::post(self.url.clone())
            .header("content-type", "application/json")
            .body(Full::new(Bytes::from(body)))
            .map_err(|e| e.to_string())?;
        let response = self.client.request(request).await.map_err(|e| format!("unreachable: {e}"))?;
        let status = response.status();
        let bytes = Limited::new(response.into_body(), MAX_ANSWER_BYTES)
            .collect()
            .await
            .map_err(|e| format!("reading its answer: {e}"))?
            .to_bytes();
        if !status.is_success() {
            return Err(format!("answered {status}: {}", String::from_utf8_lossy(&bytes)));
        }
        serde_json::from_slice(&bytes).map_err(|e| format!("answered what is not a shard answer: {e}"))
    }
}

impl Shard for HttpShard {
    fn ask(&self, request: &ShardRequest) -> sextant_core::Result<ShardResponse> {
        let failed = |reason: String| Error::Component { component: format!("index shard at {}", self.url), reason };
        let body = serde_json::to_vec(request).map_err(|e| failed(e.to_string()))?;
        runtime().block_on(async {
            match tokio::time::timeout(self.timeout, self.send(body)).await {
                Ok(answer) => answer.map_err(failed),
                Err(_) => Err(failed(format!("no answer within {} ms", self.timeout.as_millis()))),
            }
        })
    }
}

impl Drop for HttpShard {
    fn drop(&mut self) {
        if let Some(worker) = &self.worker {
            if let Ok(mut child) = worker.lock() {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
    }
}

/// Starts `sextant shard-worker` for each shard of the sharded index in `index` (`count`
/// shards) on an ephemeral loopback port, with the models under `models_dir`, and returns
/// a client of each in shard order, owning its process. Shard `failing`, if any, fails
/// every request (fault injection). Each worker exits when this process does (its stdin
/// closes).
pub fn start_workers(index: &Path, count: usize, timeout: Duration, failing: Option<usize>) -> Result<Vec<HttpShard>> {
    let exe = std::env::current_exe().context("finding the sextant binary to start shard workers")?;
    let threads = (std::thread::available_parallelism().map_or(1, |n| n.get()) / count).max(1);
    let mut started = Vec::with_capacity(count);
    for k in 0..count {
        let mut cmd = Command::new(&exe);
        cmd.arg("shard-worker").arg("--index").arg(index);
        cmd.args(["--shard", &k.to_string(), "--listen", "127.0.0.1:0", "--until-stdin-closes"]);
        if failing == Some(k) {
            cmd.args(["--fault", "error"]);
        }
        cmd.env("RAYON_NUM_THREADS", threads.to_string()).stdin(Stdio::piped()).stdout(Stdio::piped());
        let mut child = cmd.spawn().with_context(|| format!("starting shard worker {k}"))?;
        started.push((k, child.stdout.take(), child));
    }
    let mut shards = Vec::with_capacity(count);
    for (k, stdout, mut child) in started {
        let mut line = String::new();
        let read = stdout.map(|out| BufReader::new(out).read_line(&mut line));
        let Some(base) = line.split_whitespace().find(|w| w.starts_with("http://")) else {
            let _ = child.kill();
            bail!("shard worker {k} did not start ({read:?}, {:?}); see its messages above", child.wait());
        };
        tracing::info!("shard worker {k}: pid {}, {base}", child.id());
        println!("shard {k}: worker pid {} on {base}", child.id());
        let mut shard = HttpShard::new(base, timeout)?;
        shard.worker = Some(Mutex::new(child));
        shards.push(shard);
    }
    Ok(shards)
}

/// The sharded index in `dir` (its root `root` and BM25 statistics `stats`, as
/// [`read_root`] reads them) served by one worker process per shard ([`start_workers`],
/// each request timing out after `timeout`, shard `failing` failing on purpose), routed
/// from this process over the shards' stores (their documents alone, [`load_shard_store`])
/// with the engine `engine` makes of the first store's empty index ([`sextant_core::index::ShardStore::router_index`]).
pub fn router_over_workers(
    dir: &Path,
    (root, stats): (&RootManifest, LexicalStats),
    (timeout, failing): (Duration, Option<usize>),
    engine: impl FnOnce(Arc<Index>) -> Result<Engine>,
) -> Result<ShardSet> {
    let storage = LocalDir::new(dir);
    let count = root.shards.len();
    let workers = start_workers(dir, count, timeout, failing)?;
    let (mut stores, mut order) = (Vec::with_capacity(count), Vec::with_capacity(count));
    for k in 0..count {
        let (store, o) =
            load_shard_store(&storage, root, k).with_context(|| format!("loading index {}", dir.display()))?;
        stores.push(Arc::new(store));
        order.push(o);
    }
    let router = Arc::new(engine(Arc::new(stores[0].router_index()))?);
    let workers = workers.into_iter().map(|w| Arc::new(w) as Arc<dyn Shard>).collect();
    Ok(ShardSet::with_shards(router, stores, workers, Some(order), stats)?)
}
