//! Indexes the commands build, cache and open: the build with its progress bar, the cache
//! of built indexes under `$SEXTANT_CACHE_DIR`, BEIR sets' indexes, opening an engine.

use std::path::{Path as FsPath, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use sextant_core::build::{build_shards, BuildOptions, Built, InProcess, Previous, DEFAULT_SHARD_CHUNKS};
use sextant_core::corpus::{BeirSet, Document};
use sextant_core::encode::{DenseEncoder, ModelSet, SparseEncoder};
use sextant_core::index::format::{read_manifest, sha256_hex, Manifest, ModelRef, FORMAT_VERSION, MANIFEST};
use sextant_core::index::Index;
use sextant_core::pipeline::{open_engine, Engine, LoadedModels};
use sextant_core::shards::{load_sharded, Searcher, ShardSet, Shards};
use sextant_core::storage::{LocalDir, MemStore, Storage};
use sextant_finance::Financials;

use crate::cli::BuildArgs;

/// Bumped when the same settings build a different index without a new format (the cached
/// ones are rebuilt, from their saved vectors): 2, the HNSW beam sized by the windows a
/// chunk really has ([`sextant_core::index::DenseIndex::build_windows_with`]).
pub const GRAPH_RECIPE: u32 = 2;

/// The index of a BEIR corpus, built once and cached under the cache directory (keyed
/// by the corpus checksum and the build settings). A build saves its encoded vectors
/// beside the index and reuses those the corpus's other cached indexes saved: an index
/// that differs from one of them only in BM25's settings (`--k1`, `--b`,
/// `--bm25-stemming`) takes seconds, because no chunk is encoded again.
pub fn beir_index(beir: &FsPath, set: &BeirSet, models: &ModelSet, build: &BuildArgs) -> Result<Index> {
    let (name, corpus_key) = corpus_key(beir)?;
    let root = cache_dir().join("indexes");
    let dir = root.join(format!("{corpus_key}f{FORMAT_VERSION}-{}{}", build.index_key(), dense_model_key(models)));
    let (index, _) = cached_index(&dir, |dir| {
        build_into(dir, set.documents.clone(), models, &name, build, &cached_vectors(&root, &corpus_key))
    })?;
    Ok(index)
}

/// The part of a cached index's directory name the dense model adds: nothing for the
/// default model (so existing caches stay valid), `-` and its directory name otherwise.
pub fn dense_model_key(models: &ModelSet) -> String {
    models.other_dense_model().map(|name| format!("-{name}")).unwrap_or_default()
}

/// A BEIR set's name (its directory's) and the prefix of its cached indexes' directories,
/// keyed by the corpus's checksum. Vectors are keyed by content, so those of any cached
/// index of the corpus are reused, whatever its format version or settings.
fn corpus_key(beir: &FsPath) -> Result<(String, String)> {
    let name = beir.file_name().and_then(|n| n.to_str()).unwrap_or("beir").to_string();
    let corpus_sum = sha256_hex(&std::fs::read(beir.join("corpus.jsonl"))?);
    let key = format!("beir-{name}-{}-", &corpus_sum[..12]);
    Ok((name, key))
}

/// The index of a BEIR corpus as `count` index shards ([`sextant_core::shards`]), built
/// in memory from the vectors of the corpus's cached indexes ([`beir_index`] first: then
/// nothing is encoded; what is missing is encoded with `encoders`).
pub fn beir_shards(
    beir: &FsPath,
    set: &BeirSet,
    models: &ModelSet,
    encoders: (&DenseEncoder, &SparseEncoder),
    build: &BuildArgs,
    count: usize,
) -> Result<Shards> {
    let (name, corpus_key) = corpus_key(beir)?;
    let previous = cached_vectors(&cache_dir().join("indexes"), &corpus_key);
    let (dense, sparse) = encoders;
    let options = build_options(models, &name, build)?;
    let runner = InProcess { dense, sparse };
    let tokenizers = (dense.tokenizer(), sparse.tokenizer());
    let built = build_shards(set.documents.clone(), &options, tokenizers, &previous, &runner, count, &|_, _, _| {})?;
    tracing::info!(
        "{count} shards: {} chunks encoded, {} reused",
        built.report.chunks_encoded,
        built.report.chunks_reused
    );
    built.shards.context("a sharded build without a previous root is never unchanged")
}

/// The encoded vectors saved beside the cached indexes in `root` whose directory names
/// start with `prefix` (one corpus's). A missing or damaged file is only a vector less to
/// reuse: the build encodes that chunk again.
pub(crate) fn cached_vectors(root: &FsPath, prefix: &str) -> Previous {
    let mut previous = Previous::none();
    let Ok(entries) = std::fs::read_dir(root) else {
        return previous;
    };
    for entry in
        entries.flatten().filter(|e| e.file_name().to_str().is_some_and(|n| n.starts_with(prefix)) && e.path().is_dir())
    {
        let local = LocalDir::new(entry.path());
        let Ok(manifest) = read_manifest(&local) else { continue };
        if let Some(build) = &manifest.build {
            previous.add_encoded(&local, &build.encoded);
        }
    }
    previous
}

/// The index cached in `dir` when one loads from there; else the one `build` makes and
/// saves in `dir` (with whatever else it keeps there) for the next run. Tells whether the
/// cached one was reused.
///
/// One process builds a directory at a time: a build holds an exclusive lock on the file
/// `<dir>.lock` beside it, and another process that finds no index waits for that lock,
/// then loads what the first one saved instead of encoding the same corpus again beside
/// it (two evaluations started together on one set, as the tests run them, used to build
/// it twice, each at half the speed).
pub fn cached_index(dir: &FsPath, build: impl FnOnce(&FsPath) -> Result<Index>) -> Result<(Index, bool)> {
    if let Ok(index) = Index::load(&LocalDir::new(dir)) {
        return Ok((index, true));
    }
    let _lock = build_lock(dir)?;
    if let Ok(index) = Index::load(&LocalDir::new(dir)) {
        return Ok((index, true));
    }
    Ok((build(dir)?, false))
}

/// The exclusive lock on `<dir>.lock`, waited for (with one log line) while another
/// process holds it. The operating system lets it go when the file is closed or the
/// process ends, so a build that crashes leaves no stale lock.
fn build_lock(dir: &FsPath) -> Result<std::fs::File> {
    let mut name = dir.as_os_str().to_owned();
    name.push(".lock");
    if let Some(parent) = dir.parent() {
        std::fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
    }
    let path = PathBuf::from(name);
    let file = std::fs::File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .with_context(|| format!("opening {}", path.display()))?;
    match file.try_lock() {
        Ok(()) => {}
        Err(std::fs::TryLockError::WouldBlock) => {
            tracing::info!("another process is building {}: waiting for it", dir.display());
            file.lock().with_context(|| format!("locking {}", path.display()))?;
        }
        Err(std::fs::TryLockError::Error(e)) => return Err(e).with_context(|| format!("locking {}", path.display())),
    }
    Ok(file)
}

/// The manifest of the index in `dir` and, in memory, the manifest and every file it
/// lists: the index as `publish` uploads it.
pub fn index_files(dir: &FsPath) -> Result<(MemStore, Manifest)> {
    read_index_files(dir, |_| false)
}

/// The index in `dir` as a function holds it after its download
/// (`sextant_aws::VersionedIndex::load`): every file in memory, but those the index reads
/// in place (`Index::IN_PLACE_FILES`: the `f32` vectors, the SPLADE postings), each in an
/// unnamed temporary file on local disk.
pub fn downloaded_files(dir: &FsPath) -> Result<MemStore> {
    Ok(read_index_files(dir, |f| Index::IN_PLACE_FILES.contains(&f))?.0)
}

/// The manifest and the files of the index in `dir`, those `on_disk` names copied into
/// unnamed temporary files (in `sextant_aws::versions::spill_dir`), the others into memory.
fn read_index_files(dir: &FsPath, on_disk: impl Fn(&str) -> bool) -> Result<(MemStore, Manifest)> {
    let local = LocalDir::new(dir);
    let manifest = read_manifest(&local)?;
    let files = MemStore::new(dir.display().to_string());
    for f in manifest.files.iter().map(|f| f.name.as_str()).chain([MANIFEST]) {
        if on_disk(f) {
            let mut spill =
                tempfile::tempfile_in(sextant_aws::versions::spill_dir()).context("a file on local disk")?;
            std::io::copy(&mut std::fs::File::open(dir.join(f))?, &mut spill)?;
            files.insert_file(f, spill);
        } else {
            files.insert(f, local.read(f)?);
        }
    }
    Ok((files, manifest))
}

/// `$SEXTANT_CACHE_DIR`, else `~/.cache/sextant`.
pub fn cache_dir() -> PathBuf {
    std::env::var_os("SEXTANT_CACHE_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/sextant"))
}

/// The build options of index `id` with `args` and the models' checksums.
pub fn build_options(models: &ModelSet, id: &str, args: &BuildArgs) -> Result<BuildOptions> {
    if args.chunk_overlap > args.chunk_tokens / 2 {
        bail!("--chunk-overlap {} is over half of --chunk-tokens {}", args.chunk_overlap, args.chunk_tokens);
    }
    Ok(BuildOptions {
        index_id: id.to_string(),
        chunk_tokens: args.chunk_tokens,
        chunk_overlap: args.chunk_overlap,
        dense_window: args.dense_window,
        bm25: args.bm25(),
        dense_model: ModelRef::read(&models.dense)?,
        sparse_model: ModelRef::read(&models.sparse)?,
        shard_chunks: DEFAULT_SHARD_CHUNKS,
    })
}

/// Builds the index of `documents` into `dir`, reusing the vectors `previous` holds, and
/// returns it: the index with its encoded shards (which later builds of the same corpus
/// reuse, see [`beir_index`]) and `build_report.json`, written by [`Built::save`].
pub fn build_into(
    dir: &FsPath,
    documents: Vec<Document>,
    models: &ModelSet,
    id: &str,
    args: &BuildArgs,
    previous: &Previous,
) -> Result<Index> {
    let built = build_with(documents, models, id, args, previous)?;
    let saved = built.save(&LocalDir::new(dir), &Previous::none())?;
    tracing::info!(
        "saved {}: {} chunks encoded, {} reused",
        dir.display(),
        saved.report.chunks_encoded,
        saved.report.chunks_reused
    );
    saved.index.context("a build without a previous manifest is never unchanged")
}

/// Builds an index with a progress bar that shows chunks/s, reusing the vectors `previous`
/// holds.
fn build_with(
    documents: Vec<Document>,
    models: &ModelSet,
    id: &str,
    args: &BuildArgs,
    previous: &Previous,
) -> Result<Built> {
    if documents.is_empty() {
        bail!("no documents to index");
    }
    let (dense, sparse) = (DenseEncoder::load(&models.dense)?, SparseEncoder::load(&models.sparse)?);
    let options = build_options(models, id, args)?;
    let bar = crate::progress::ProgressDisplay::new();
    let ndocs = documents.len();
    let t = Instant::now();
    let progress = |stage: &str, done: usize, total: usize| bar.update(stage, done, total);
    let runner = InProcess { dense: &dense, sparse: &sparse };
    let tokenizers = (dense.tokenizer(), sparse.tokenizer());
    let built = sextant_core::build::build(documents, Vec::new(), &options, tokenizers, previous, &runner, &progress)?;
    bar.finish();
    let secs = t.elapsed().as_secs_f64();
    let nchunks = built.report.chunks;
    tracing::info!(
        "built {ndocs} documents, {nchunks} chunks in {secs:.1}s ({:.1} docs/s, {:.1} chunks/s)",
        ndocs as f64 / secs,
        nchunks as f64 / secs
    );
    Ok(built)
}

/// What searches the index in `dir`: its engine, or, for a sharded index (a root manifest
/// there), the router over its shards' engines.
pub fn load_searcher(dir: &FsPath, models: &ModelSet) -> Result<Searcher> {
    let storage = LocalDir::new(dir);
    let location = || format!("loading index {}", dir.display());
    if let Some((_, shards)) = load_sharded(&storage).with_context(location)? {
        let loaded = LoadedModels::load(models)?;
        return Ok(Searcher::Sharded(Arc::new(ShardSet::of_shards(shards, |i| loaded.engine(i))?)));
    }
    let index = Index::load(&storage).with_context(location)?;
    Ok(Searcher::Single(Arc::new(open_engine(Arc::new(index), models)?)))
}

/// The engine and the financials of the index in `dir`.
pub fn load_with_financials(dir: &FsPath, models: &ModelSet) -> Result<(Engine, Financials)> {
    let storage = LocalDir::new(dir);
    let index = Index::load(&storage).with_context(|| format!("loading index {}", dir.display()))?;
    let financials = Financials::load(&storage, &index)?;
    Ok((open_engine(Arc::new(index), models)?, financials))
}
