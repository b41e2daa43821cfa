//! The index-build job: read a corpus from S3 (or a local path), build the index,
//! publish it as a new version. The `index-build` Lambda function and
//! `sextant index-build` run this same code.

use std::path::{Path, PathBuf};
use std::time::Instant;

use serde::{Deserialize, Serialize};
use sextant_core::build::{
    BuildOptions, BuildReport as CoreReport, Built, BuiltShards, InProcess, Previous, DEFAULT_SHARD_CHUNKS,
};
use sextant_core::corpus::{document_object, load_documents, read_document_object, Document};
use sextant_core::encode::{DenseEncoder, ModelSet, SparseEncoder};
use sextant_core::error::{Error, Result};
use sextant_core::index::format::ModelRef;
use sextant_core::index::Bm25Params;
use sextant_core::storage::{Location, MemStore};
use sextant_finance::{FactStore, Financials};

use super::build_lease::LeaseHold;
use super::catalog::{Catalog, CreatedIndex};
use super::s3::S3Store;
use super::versions::{PointerState, Published, VersionedIndex};

/// What to build and where to publish it: the event of the `index-build` function.
///
/// ```json
/// {
///   "index_id": "demo",
///   "corpus": "s3://bucket/corpora/demo/",
///   "target": "s3://bucket/indexes/demo",
///   "keep_versions": 5
/// }
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BuildJob {
    /// The index id served (`demo`).
    pub index_id: String,
    /// The documents: an `s3://bucket/prefix/` whose `.jsonl` and `.jsonl.gz` objects are
    /// read, an `s3://bucket/key.json` manifest `{"documents": [keys or s3:// URIs]}`,
    /// or a local file or directory.
    pub corpus: String,
    /// The index prefix to publish to (`s3://bucket/indexes/demo`).
    pub target: String,
    /// Versions kept after publishing (default 5; the current one is always kept).
    #[serde(default = "default_keep")]
    pub keep_versions: usize,
    /// Tokens per chunk (default 200).
    #[serde(default = "default_chunk_tokens")]
    pub chunk_tokens: usize,
    /// Tokens a chunk may repeat from the one before it (default 0, at most half of
    /// `chunk_tokens`).
    #[serde(default)]
    pub chunk_overlap: usize,
    /// Token budget of a dense window (0: one dense vector per chunk; default 128, the
    /// window measured in docs/quality.md).
    #[serde(default = "default_dense_window")]
    pub dense_window: usize,
    /// BM25 parameters (default k1 0.9, b 0.4).
    #[serde(default = "default_bm25")]
    pub bm25: Bm25Params,
    /// Chunks per shard: the unit of work of one encode invocation in the build workflow
    /// (default 1,024; 16 to 1,000,000).
    #[serde(default = "default_shard_chunks")]
    pub shard_chunks: usize,
    /// XBRL facts saved with the index for `/v1/context`: an `s3://` object or prefix, or a
    /// local file or directory, of `.jsonl` / `.jsonl.gz` files (default: none; not saved
    /// with a sharded index).
    #[serde(default)]
    pub facts: Option<String>,
    /// Index shards to build (0 or 1: a single index; 2 to 64: that many shards under one
    /// root manifest, docs/shards.md). The template sets it to `ShardCount`.
    #[serde(default)]
    pub index_shards: usize,
    /// Corpus bytes a part of a sharded build's plan reads at most (default 64 MiB; at
    /// least 1): the build workflow plans each part in its own invocation
    /// ([`crate::build_steps`]), so no invocation holds the whole corpus's plan. An object
    /// larger than a part is a part of its own.
    #[serde(default = "default_part_bytes")]
    pub part_bytes: u64,
    /// Whether a corpus without documents builds an empty index (default `false`: it is
    /// refused, an emptied corpus prefix being more often a mistake than a wish). Set for
    /// the indexes created through the API ([`BuildJob::of_created`]), which are emptied by
    /// deleting their documents.
    #[serde(default)]
    pub allow_empty: bool,
    /// The build lease this run holds, when a corpus write or the schedule started it
    /// through [`BuildWorkflow::request`](crate::build_workflow::BuildWorkflow::request);
    /// its last step hands the lease on ([`BuildWorkflow::finish`](crate::build_workflow::BuildWorkflow::finish)).
    /// `None` for a run started by hand.
    #[serde(default)]
    pub lease: Option<LeaseHold>,
    /// The bucket (`s3://bucket/`) whose catalog created the index through the API, for
    /// the jobs [`BuildJob::of_created`] makes: a build that publishes after its index was
    /// deleted removes what it published ([`answer_published`]).
    #[serde(default)]
    pub catalog: Option<String>,
}

fn default_keep() -> usize {
    5
}
fn default_chunk_tokens() -> usize {
    200
}
fn default_dense_window() -> usize {
    sextant_core::build::DEFAULT_DENSE_WINDOW
}
fn default_shard_chunks() -> usize {
    DEFAULT_SHARD_CHUNKS
}
fn default_part_bytes() -> u64 {
    DEFAULT_PART_BYTES
}
/// Corpus bytes a part of a sharded build's plan reads at most, by default: about 90,000
/// chunks of filing text, which 2 cores plan in about a minute (tokenizing is most of it;
/// docs/shards.md, "A plan in corpus parts"), well inside one invocation's 900 s.
pub const DEFAULT_PART_BYTES: u64 = 64 << 20;
fn default_bm25() -> Bm25Params {
    Bm25Params::default()
}

impl BuildJob {
    /// Reads a job from an invocation event: the job itself (direct invoke, or an
    /// EventBridge schedule whose target input is the job), or an EventBridge event
    /// carrying it in `detail`. Fields left out are taken from `defaults` (the
    /// function's environment).
    pub fn from_event(event: serde_json::Value, defaults: &serde_json::Map<String, serde_json::Value>) -> Result<Self> {
        let mut body = match event {
            serde_json::Value::Object(mut o) if o.contains_key("detail-type") => match o.remove("detail") {
                Some(serde_json::Value::Object(d)) => d,
                _ => serde_json::Map::new(),
            },
            serde_json::Value::Object(o) => o,
            serde_json::Value::Null => serde_json::Map::new(),
            other => return Err(Error::invalid("event", format!("expected a JSON object, got {other}"))),
        };
        for (k, v) in defaults {
            body.entry(k.clone()).or_insert_with(|| v.clone());
        }
        let job: BuildJob = serde_path_to_error::deserialize(serde_json::Value::Object(body)).map_err(|e| {
            let reason = e.inner().to_string();
            // Missing and unknown fields are reported at the object: name the field itself.
            let named = ["missing field `", "unknown field `"]
                .iter()
                .find_map(|p| reason.strip_prefix(p)?.split('`').next().map(str::to_string));
            Error::invalid(named.unwrap_or_else(|| e.path().to_string()), reason)
        })?;
        if job.index_id.is_empty() || !job.index_id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') {
            return Err(Error::invalid("index_id", format!("{:?}: use letters, digits, '-' and '_'", job.index_id)));
        }
        let as_field = |field: &str| {
            let field = field.to_string();
            move |e: Error| match e {
                Error::InvalidArgument { reason, .. } => Error::invalid(field.clone(), reason),
                e => e,
            }
        };
        if !matches!(Location::parse(&job.target).map_err(as_field("target"))?, Location::S3 { .. }) {
            return Err(Error::invalid("target", "must be an s3:// location"));
        }
        Location::parse(&job.corpus).map_err(as_field("corpus"))?;
        if let Some(f) = &job.facts {
            Location::parse(f).map_err(as_field("facts"))?;
        }
        if !(16..=512).contains(&job.chunk_tokens) {
            return Err(Error::invalid("chunk_tokens", "must be between 16 and 512"));
        }
        if job.chunk_overlap > job.chunk_tokens / 2 {
            return Err(Error::invalid("chunk_overlap", "must be at most half of chunk_tokens"));
        }
        if !(16..=1_000_000).contains(&job.shard_chunks) {
            return Err(Error::invalid("shard_chunks", "must be between 16 and 1000000"));
        }
        if job.part_bytes == 0 {
            return Err(Error::invalid("part_bytes", "must be at least 1"));
        }
        if job.index_shards > MAX_INDEX_SHARDS {
            return Err(Error::invalid(
                "index_shards",
                format!("must be at most {MAX_INDEX_SHARDS} (0: a single index)"),
            ));
        }
        Ok(job)
    }

    /// The job of index `id`, created through the API with `created` ([`Catalog`]): its
    /// corpus and versions in the catalog's bucket, cut as it was created, a single index
    /// without facts; the rest (versions kept) from `defaults`.
    pub fn of_created(
        catalog: &Catalog,
        id: &str,
        created: &CreatedIndex,
        defaults: &serde_json::Map<String, serde_json::Value>,
    ) -> Result<Self> {
        let job = serde_json::json!({
            "index_id": id,
            "corpus": format!("{}/", catalog.corpus_location(id)),
            "target": catalog.index_location(id).to_string(),
            "chunk_tokens": created.chunk_tokens,
            "chunk_overlap": created.chunk_overlap,
            "facts": null,
            "index_shards": 0,
            "allow_empty": true,
            "catalog": format!("s3://{}/", catalog.bucket()),
        });
        let keep = defaults.get("keep_versions").map(|k| ("keep_versions".to_string(), k.clone()));
        BuildJob::from_event(job, &keep.into_iter().collect())
    }

    /// The index shards the job builds: `None` for a single index (`index_shards` 0 or 1).
    pub fn sharded(&self) -> Option<usize> {
        (self.index_shards > 1).then_some(self.index_shards)
    }

    /// The defaults the function's environment gives: `SEXTANT_BUILD_INDEX_ID`,
    /// `SEXTANT_BUILD_CORPUS`, `SEXTANT_BUILD_TARGET`, `SEXTANT_BUILD_FACTS`,
    /// `SEXTANT_KEEP_VERSIONS`, `SEXTANT_BUILD_INDEX_SHARDS`.
    pub fn env_defaults() -> serde_json::Map<String, serde_json::Value> {
        let mut m = serde_json::Map::new();
        for (var, field) in [
            ("SEXTANT_BUILD_INDEX_ID", "index_id"),
            ("SEXTANT_BUILD_CORPUS", "corpus"),
            ("SEXTANT_BUILD_TARGET", "target"),
            ("SEXTANT_BUILD_FACTS", "facts"),
        ] {
            if let Ok(v) = std::env::var(var) {
                m.insert(field.into(), v.into());
            }
        }
        for (var, field) in [("SEXTANT_KEEP_VERSIONS", "keep_versions"), ("SEXTANT_BUILD_INDEX_SHARDS", "index_shards")]
        {
            if let Some(k) = std::env::var(var).ok().and_then(|v| v.trim().parse::<u64>().ok()) {
                m.insert(field.into(), k.into());
            }
        }
        m
    }
}

/// What a build did, the function's response: the build's report
/// ([`sextant_core::build::BuildReport`], also saved as `build_report.json` in the
/// version) and what was published, nothing when the build was unchanged.
#[derive(Debug, Clone, Serialize)]
pub struct BuildReport {
    /// The build.
    #[serde(flatten)]
    pub build: sextant_core::build::BuildReport,
    /// The version published; `None` when nothing changed, or when what was published is
    /// removed again (`discarded`).
    #[serde(flatten)]
    pub published: Option<Published>,
    /// Seconds spent publishing.
    pub publish_seconds: f64,
    /// Why what the build published was removed again: its index was deleted through the
    /// API while it ran ([`answer_published`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub discarded: Option<String>,
}

/// The answer of a build of `job` that published `published` to `target` after building
/// what `build` reports, `publish_seconds` spent publishing: that report, unless `job`
/// builds an index created through the API ([`BuildJob::catalog`]) whose marker is gone.
///
/// A deletion removes the index's prefix, then its marker, then the prefix again
/// ([`Catalog::delete`]). A build that published after the first removal and looked at
/// the marker before it went is removed by the second; one that looks after finds no
/// marker and removes the index's prefix itself, answering `published: None` with why.
/// Either way no version of a deleted index stays behind, served by no function and
/// keeping the id from being created again.
pub async fn answer_published(
    job: &BuildJob,
    target: &VersionedIndex,
    config: &aws_config::SdkConfig,
    build: sextant_core::build::BuildReport,
    published: Published,
    publish_seconds: f64,
) -> Result<BuildReport> {
    let mut report = BuildReport { build, published: Some(published), publish_seconds, discarded: None };
    let Some(root) = &job.catalog else { return Ok(report) };
    let catalog = Catalog::new(config, &Location::parse(root)?)?;
    if catalog.get(&job.index_id).await?.is_some() {
        return Ok(report);
    }
    let prefix = target.key("");
    if prefix.is_empty() {
        return Ok(report);
    }
    let removed = target.store().delete_prefix(&prefix).await?;
    tracing::warn!(index = %job.index_id, removed, "the index was deleted while it was built: its version is removed");
    report.published = None;
    report.discarded = Some(format!(
        "index {} was deleted while it was built: the version this build published is removed",
        job.index_id
    ));
    Ok(report)
}

/// Runs `job`: reads the corpus and the current version's vector cache, builds (encoding
/// only what the cache lacks) and publishes a new version, unless the inputs are the
/// current version's: then nothing is published and warm functions keep what they have.
pub async fn run(job: &BuildJob, models: &ModelSet, config: &aws_config::SdkConfig) -> Result<BuildReport> {
    let target = VersionedIndex::new(config, &Location::parse(&job.target)?)?;
    // Read the pointer before anything else: a build that started earlier than one
    // published meanwhile must not replace it.
    let expected = target.pointer().await?;
    let t = Instant::now();
    let (documents, facts) = read_inputs(job, config).await?;
    let previous = previous_version(&target, &expected).await;
    let read_seconds = t.elapsed().as_secs_f64();
    let (job2, models2) = (job.clone(), models.clone());
    let (files, mut report) = tokio::task::spawn_blocking(move || -> Result<(MemStore, CoreReport)> {
        let files = MemStore::new(format!("build of {}", job2.index_id));
        if job2.sharded().is_some() {
            warn_facts_left_out(&job2);
            let mut built = build_shards(documents, &models2, &job2, &previous)?;
            built.report.phases.read = read_seconds;
            let report = built.save(&files, &Previous::none())?;
            return Ok((files, report));
        }
        let attachments = Financials::attachment(&facts)?.into_iter().collect();
        let mut built = build(documents, attachments, &models2, &job2, &previous)?;
        built.report.phases.read = read_seconds;
        let report = built.save(&files, &Previous::none())?.report;
        Ok((files, report))
    })
    .await
    .map_err(|e| Error::task_failed(format!("building index {}", job.index_id), e))??;
    report.seconds = report.phases.total();
    if report.unchanged {
        return Ok(BuildReport { build: report, published: None, publish_seconds: 0.0, discarded: None });
    }
    let t = Instant::now();
    let published = target.publish(&files, &expected, job.keep_versions).await?;
    answer_published(job, &target, config, report, published, t.elapsed().as_secs_f64()).await
}

/// The index of no documents that `job` builds, cut as it says: what a created index
/// serves until its first version is published (its writes are built by the workflow).
pub fn empty_index(models: &ModelSet, job: &BuildJob) -> Result<sextant_core::index::Index> {
    use sextant_core::build::{lexical_only, plan_build, Planned};
    use sextant_core::encode::{ModelInfo, TextTokenizer};
    let options = build_options(models, job)?;
    let tokenizers = (TextTokenizer::of_model(&models.dense)?, TextTokenizer::of_model(&models.sparse)?);
    let dim = ModelInfo::read(&models.dense)?.hidden_size;
    match plan_build(Vec::new(), &[], &options, (&tokenizers.0, &tokenizers.1), &Previous::none(), None)? {
        Planned::Ready { plan, .. } => lexical_only(*plan, dim),
        Planned::Unchanged(_) => {
            Err(Error::invalid("corpus", "an empty plan is never unchanged without a previous build"))
        }
    }
}

/// The build options of `job` with these models' checksums.
pub fn build_options(models: &ModelSet, job: &BuildJob) -> Result<BuildOptions> {
    Ok(BuildOptions {
        index_id: job.index_id.clone(),
        chunk_tokens: job.chunk_tokens,
        chunk_overlap: job.chunk_overlap,
        dense_window: job.dense_window,
        bm25: job.bm25,
        dense_model: ModelRef::read(&models.dense)?,
        sparse_model: ModelRef::read(&models.sparse)?,
        shard_chunks: job.shard_chunks,
    })
}

/// Reads a job's documents (refusing a corpus without any, unless the job allows it) and its facts (none when the
/// job names none; a bad location is reported as the `facts` field).
pub async fn read_inputs(job: &BuildJob, config: &aws_config::SdkConfig) -> Result<(Vec<Document>, FactStore)> {
    let documents = match read_corpus(&job.corpus, config).await {
        // An emptied prefix: an index that allows it (created through the API, its last
        // document deleted) is built empty.
        Err(Error::InvalidArgument { field, reason })
            if job.allow_empty && field == "corpus" && reason.ends_with(NO_DOCUMENTS) =>
        {
            Vec::new()
        }
        read => read?,
    };
    if documents.is_empty() && !job.allow_empty {
        return Err(Error::invalid("corpus", format!("{} holds no documents", job.corpus)));
    }
    let facts = match &job.facts {
        Some(location) => read_facts(location, config).await.map_err(|e| match e {
            Error::InvalidArgument { reason, .. } => Error::invalid("facts", reason),
            e => e,
        })?,
        None => FactStore::default(),
    };
    Ok((documents, facts))
}

/// What the version `state` points at offers the next build (its manifest and vector
/// cache); no previous version when there is none or it cannot be read (then everything
/// is encoded).
pub async fn previous_version(target: &VersionedIndex, state: &PointerState) -> Previous {
    let Some(pointer) = &state.pointer else {
        return Previous::none();
    };
    match target.build_cache(pointer).await {
        Ok(files) => Previous::read(&files),
        Err(e) => {
            tracing::warn!(error = %e, "the current version's vector cache could not be read: encoding everything");
            Previous::none()
        }
    }
}

/// Builds the index of `documents` for `job` in this process, reusing `previous`'s vectors.
pub fn build(
    documents: Vec<Document>,
    attachments: Vec<(String, Vec<u8>)>,
    models: &ModelSet,
    job: &BuildJob,
    previous: &Previous,
) -> Result<Built> {
    let options = build_options(models, job)?;
    let (dense, sparse) = (DenseEncoder::load(&models.dense)?, SparseEncoder::load(&models.sparse)?);
    let t = Instant::now();
    let runner = InProcess { dense: &dense, sparse: &sparse };
    let tokenizers = (dense.tokenizer(), sparse.tokenizer());
    sextant_core::build::build(
        documents,
        attachments,
        &options,
        tokenizers,
        previous,
        &runner,
        &|stage, done, total| {
            if done == total || done % 4096 == 0 {
                tracing::info!(stage, done, total, secs = t.elapsed().as_secs(), "building");
            }
        },
    )
}

/// Builds the index of `documents` for `job` in this process as `job.index_shards` index
/// shards, reusing `previous`'s vectors.
pub fn build_shards(
    documents: Vec<Document>,
    models: &ModelSet,
    job: &BuildJob,
    previous: &Previous,
) -> Result<BuiltShards> {
    let options = build_options(models, job)?;
    let (dense, sparse) = (DenseEncoder::load(&models.dense)?, SparseEncoder::load(&models.sparse)?);
    let runner = InProcess { dense: &dense, sparse: &sparse };
    let tokenizers = (dense.tokenizer(), sparse.tokenizer());
    sextant_core::build::build_shards(
        documents,
        &options,
        tokenizers,
        previous,
        &runner,
        job.index_shards,
        &|_, _, _| {},
    )
}

/// Logs that `job`'s facts are not saved, when it names some: a sharded index keeps none.
pub fn warn_facts_left_out(job: &BuildJob) {
    if let Some(facts) = &job.facts {
        tracing::warn!(facts, index = %job.index_id, "a sharded index keeps no facts: these are not saved with it");
    }
}

/// The most index shards a build makes.
pub const MAX_INDEX_SHARDS: usize = 64;

/// A JSONL object to read: its key, size and bytes when already fetched.
type Fetched = (String, u64, Option<Vec<u8>>);

/// What a corpus location holds when it holds nothing the build reads.
const NO_DOCUMENTS: &str = "no .jsonl or .jsonl.gz corpus and no document (.json, .md, .markdown, .txt, .html, .htm)";

/// Per-document objects fetched at once.
const DOCUMENT_FETCHES: usize = 16;

/// Reads every document of a corpus location: JSONL corpora (`.jsonl`, `.jsonl.gz`) and
/// per-document objects or files (`.json` documents, raw `.md`, `.markdown`, `.txt`,
/// `.html`, `.htm`; see [`read_document_object`]). A document id held twice is read from the
/// per-document object last modified (which also replaces a JSONL line).
pub async fn read_corpus(corpus: &str, config: &aws_config::SdkConfig) -> Result<Vec<Document>> {
    match Location::parse(corpus)? {
        Location::Local(p) => tokio::task::spawn_blocking(move || read_local(&p))
            .await
            .map_err(|e| Error::task_failed("reading the corpus", e))?,
        Location::S3 { bucket, prefix } => {
            let store = S3Store::new(config, &bucket);
            // Objects to read, with their bytes when already fetched (manifest entries are
            // fetched whole to check they exist; listed ones are read by ranges below).
            let (keys, per_document): (Vec<Fetched>, Vec<Document>) =
                if prefix.ends_with(".json") && !corpus.ends_with('/') {
                    let manifest = store
                        .get(&prefix)
                        .await?
                        .ok_or_else(|| Error::Storage { location: corpus.into(), reason: "no such object".into() })?;
                    #[derive(Deserialize)]
                    struct CorpusManifest {
                        documents: Vec<String>,
                    }
                    let m: CorpusManifest = serde_json::from_slice(&manifest.bytes).map_err(|e| Error::Corpus {
                        source_name: corpus.into(),
                        line: 1,
                        reason: e.to_string(),
                    })?;
                    let mut keys = Vec::new();
                    for d in m.documents {
                        let key = match Location::parse(&d)? {
                            Location::S3 { bucket: b, prefix: k } if b == bucket => k,
                            Location::S3 { .. } => {
                                return Err(Error::invalid(
                                    "corpus",
                                    format!("{d}: corpus files must be in bucket {bucket}"),
                                ))
                            }
                            Location::Local(_) => d.trim_start_matches('/').to_string(),
                        };
                        let bytes = store.get(&key).await?.map(|o| o.bytes).ok_or_else(|| Error::Storage {
                            location: format!("s3://{bucket}/{key}"),
                            reason: "listed in the corpus manifest but missing".into(),
                        })?;
                        keys.push((key, bytes.len() as u64, Some(bytes)));
                    }
                    (keys, Vec::new())
                } else {
                    let dir = if prefix.is_empty() { String::new() } else { format!("{prefix}/") };
                    let listed = store.list(&dir).await?;
                    let per_document: Vec<String> =
                        listed.iter().filter(|(k, _)| document_object(k).is_some()).map(|(k, _)| k.clone()).collect();
                    let documents = read_document_objects(&store, per_document).await?;
                    let keys: Vec<_> =
                        listed.into_iter().filter(|(k, _)| is_jsonl(k)).map(|(k, size)| (k, size, None)).collect();
                    if keys.is_empty() && documents.is_empty() {
                        return Err(Error::invalid("corpus", format!("{corpus}: {NO_DOCUMENTS}")));
                    }
                    (keys, documents)
                };
            let mut docs = read_jsonl_objects(&store, keys).await?;
            docs.extend(per_document);
            Ok(unique_ids(docs))
        }
    }
}

/// Reads the JSONL objects `keys` of `store`, in order (a line that is not a document fails,
/// naming the object and the line).
async fn read_jsonl_objects(store: &S3Store, keys: Vec<Fetched>) -> Result<Vec<Document>> {
    let scratch = scratch_dir()?;
    let scratch = scratch.path();
    let mut docs = Vec::new();
    for (key, size, fetched) in keys {
        let bytes = match fetched {
            Some(b) => b,
            None => store.get_ranged(&key, size).await?,
        };
        let name = key.rsplit('/').next().unwrap_or("corpus.jsonl").to_string();
        let path = scratch.join(&name);
        std::fs::write(&path, &bytes).map_err(|e| Error::io(&path, e))?;
        let loaded = load_documents(&path).map_err(|e| match e {
            Error::Corpus { line, reason, .. } => {
                Error::Corpus { source_name: format!("s3://{}/{key}", store.bucket()), line, reason }
            }
            e => e,
        });
        let _ = std::fs::remove_file(&path);
        docs.extend(loaded?);
    }
    Ok(docs)
}

/// One part of a corpus, as a sharded build's workflow plans it ([`corpus_parts`]): the
/// parts, read one after the other ([`read_corpus_part`]), hold the documents
/// [`read_corpus`] reads, in its order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum CorpusPart {
    /// The whole corpus (a corpus manifest, or a local file or directory).
    Whole,
    /// JSONL objects of the corpus prefix, in listing order, with their sizes.
    Files {
        /// Keys and sizes.
        objects: Vec<(String, u64)>,
    },
    /// Per-document objects of the corpus prefix: every object of an id in one part.
    Documents {
        /// Keys.
        objects: Vec<String>,
    },
}

/// The parts of `corpus`, each of at most `part_bytes` (an object larger is a part of its
/// own), in corpus order: the JSONL objects in listing order, then the per-document
/// objects by id. Also the ids the per-document objects hold, which replace a JSONL
/// line of the same id. A corpus manifest or a local path is one part.
pub async fn corpus_parts(
    corpus: &str,
    part_bytes: u64,
    config: &aws_config::SdkConfig,
) -> Result<(Vec<CorpusPart>, Vec<String>)> {
    let (bucket, prefix) = match Location::parse(corpus)? {
        // Not a corpus manifest (`s3://bucket/key.json`).
        Location::S3 { bucket, prefix } if !prefix.ends_with(".json") || corpus.ends_with('/') => (bucket, prefix),
        _ => return Ok((vec![CorpusPart::Whole], Vec::new())),
    };
    let store = S3Store::new(config, &bucket);
    let dir = if prefix.is_empty() { String::new() } else { format!("{prefix}/") };
    let listed = store.list(&dir).await?;
    let mut documents: Vec<(String, String, u64)> = listed
        .iter()
        .filter_map(|(k, size)| document_object(k).map(|(id, _)| (id.to_string(), k.clone(), *size)))
        .collect();
    documents.sort();
    let files: Vec<(String, u64)> = listed.into_iter().filter(|(k, _)| is_jsonl(k)).collect();
    if files.is_empty() && documents.is_empty() {
        return Err(Error::invalid("corpus", format!("{corpus}: {NO_DOCUMENTS}")));
    }
    let mut parts = Vec::new();
    for group in cut_by_bytes(&files, |f| f.1, part_bytes, |_, _| true) {
        parts.push(CorpusPart::Files { objects: group.to_vec() });
    }
    // Never between two objects of one id: the newer replaces the older within the part.
    for group in cut_by_bytes(&documents, |d| d.2, part_bytes, |a, b| a.0 != b.0) {
        parts.push(CorpusPart::Documents { objects: group.iter().map(|(_, k, _)| k.clone()).collect() });
    }
    let mut ids: Vec<String> = documents.into_iter().map(|(id, _, _)| id).collect();
    ids.dedup();
    Ok((parts, ids))
}

/// `items` cut into runs of at most `limit` bytes by `size` (an item larger is a run of its
/// own), cutting only between two items `may_cut` allows.
fn cut_by_bytes<T>(items: &[T], size: impl Fn(&T) -> u64, limit: u64, may_cut: impl Fn(&T, &T) -> bool) -> Vec<&[T]> {
    let (mut runs, mut start, mut bytes) = (Vec::new(), 0, 0u64);
    for i in 0..items.len() {
        if i > start && bytes + size(&items[i]) > limit && may_cut(&items[i - 1], &items[i]) {
            runs.push(&items[start..i]);
            (start, bytes) = (i, 0);
        }
        bytes += size(&items[i]);
    }
    if start < items.len() {
        runs.push(&items[start..]);
    }
    runs
}

/// The documents of one part of `corpus` ([`corpus_parts`]): a JSONL line whose id a
/// per-document object holds (`replaced`) is left out, and of two entries of one id in
/// the part the later is kept, as [`read_corpus`] does.
pub async fn read_corpus_part(
    corpus: &str,
    part: &CorpusPart,
    replaced: &std::collections::HashSet<String>,
    config: &aws_config::SdkConfig,
) -> Result<Vec<Document>> {
    let bucket = match (part, Location::parse(corpus)?) {
        (CorpusPart::Whole, _) => return read_corpus(corpus, config).await,
        (_, Location::S3 { bucket, .. }) => bucket,
        (_, Location::Local(_)) => return Err(Error::invalid("corpus", "a local corpus is read whole")),
    };
    let store = S3Store::new(config, &bucket);
    let documents = match part {
        CorpusPart::Files { objects } => {
            let keys = objects.iter().map(|(k, size)| (k.clone(), *size, None)).collect();
            let mut docs = read_jsonl_objects(&store, keys).await?;
            docs.retain(|d| !replaced.contains(&d.document_id));
            docs
        }
        CorpusPart::Documents { objects } => read_document_objects(&store, objects.clone()).await?,
        CorpusPart::Whole => unreachable!("read above"),
    };
    Ok(unique_ids(documents))
}

/// Reads the per-document objects `keys`, 16 at a time, ordered by document id, and of two
/// objects holding one id the newer (by last modification, then key) last.
async fn read_document_objects(store: &S3Store, keys: Vec<String>) -> Result<Vec<Document>> {
    let permits = std::sync::Arc::new(tokio::sync::Semaphore::new(DOCUMENT_FETCHES));
    let mut tasks = tokio::task::JoinSet::new();
    for key in keys {
        let (store, permits) = (store.clone(), permits.clone());
        tasks.spawn(async move {
            let _permit = permits.acquire_owned().await.expect("semaphore open");
            let source = format!("s3://{}/{key}", store.bucket());
            // An object deleted between the listing and the read is simply gone.
            let Some(object) = store.get(&key).await? else { return Ok(None) };
            let document = read_document_object(&key, &source, &object.bytes)?;
            Ok::<_, Error>(Some((object.modified_unix.unwrap_or(0), key, document)))
        });
    }
    let mut read = Vec::new();
    while let Some(joined) = tasks.join_next().await {
        read.extend(joined.map_err(|e| Error::task_failed("reading the corpus's documents", e))??);
    }
    read.sort_by(|a, b| (&a.2.document_id, a.0, &a.1).cmp(&(&b.2.document_id, b.0, &b.1)));
    Ok(read.into_iter().map(|(_, _, d)| d).collect())
}

/// `documents` with one document per id: the last read wins (logged).
fn unique_ids(documents: Vec<Document>) -> Vec<Document> {
    let mut at: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    let mut out: Vec<Option<Document>> = Vec::with_capacity(documents.len());
    for d in documents {
        if let Some(&i) = at.get(&d.document_id) {
            tracing::warn!(document = %d.document_id, "two corpus entries hold this document id: keeping the later");
            out[i] = None;
        }
        at.insert(d.document_id.clone(), out.len());
        out.push(Some(d));
    }
    out.into_iter().flatten().collect()
}

/// Reads the facts at `location` (an `s3://` object or prefix, or a local file or
/// directory of `.jsonl` / `.jsonl.gz` files).
pub async fn read_facts(location: &str, config: &aws_config::SdkConfig) -> Result<FactStore> {
    let blobs: Vec<(String, Vec<u8>)> = match Location::parse(location)? {
        Location::Local(p) => {
            let files = if p.is_file() { vec![p.clone()] } else { jsonl_files(&p)? };
            files
                .into_iter()
                .map(|f| Ok((f.display().to_string(), std::fs::read(&f).map_err(|e| Error::io(&f, e))?)))
                .collect::<Result<_>>()?
        }
        Location::S3 { bucket, prefix } => {
            let store = S3Store::new(config, &bucket);
            if is_jsonl(&prefix) {
                let o = store
                    .get(&prefix)
                    .await?
                    .ok_or_else(|| Error::Storage { location: location.into(), reason: "no such object".into() })?;
                vec![(location.to_string(), o.bytes)]
            } else {
                let dir = if prefix.is_empty() { String::new() } else { format!("{}/", prefix.trim_end_matches('/')) };
                let mut blobs = Vec::new();
                for (key, size) in store.list(&dir).await?.into_iter().filter(|(k, _)| is_jsonl(k)) {
                    blobs.push((format!("s3://{bucket}/{key}"), store.get_ranged(&key, size).await?));
                }
                blobs
            }
        }
    };
    if blobs.is_empty() {
        // An empty prefix is a corpus without facts yet (the scheduled build names one
        // by default): build without them rather than fail.
        tracing::warn!(facts = location, "no .jsonl or .jsonl.gz facts found: building without facts");
        return Ok(FactStore::default());
    }
    tokio::task::spawn_blocking(move || FactStore::from_bytes(blobs))
        .await
        .map_err(|e| Error::task_failed("reading facts", e))?
}

/// Whether a file or object name is a corpus or facts file (`.jsonl`, `.jsonl.gz`).
fn is_jsonl(name: &str) -> bool {
    name.ends_with(".jsonl") || name.ends_with(".jsonl.gz")
}

/// The `.jsonl` / `.jsonl.gz` files of a directory, sorted.
fn jsonl_files(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| Error::io(dir, e))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|f| is_jsonl(&f.to_string_lossy()))
        .collect();
    files.sort();
    Ok(files)
}

fn read_local(p: &Path) -> Result<Vec<Document>> {
    if p.is_file() {
        return load_documents(p);
    }
    let mut docs = Vec::new();
    for f in jsonl_files(p)? {
        docs.extend(load_documents(&f)?);
    }
    let mut files: Vec<PathBuf> = std::fs::read_dir(p)
        .map_err(|e| Error::io(p, e))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|f| f.is_file() && document_object(&f.to_string_lossy()).is_some())
        .collect();
    files.sort();
    for f in files {
        let bytes = std::fs::read(&f).map_err(|e| Error::io(&f, e))?;
        let name = f.to_string_lossy();
        docs.push(read_document_object(&name, &name, &bytes)?);
    }
    Ok(unique_ids(docs))
}

/// A directory of its own for one build's downloaded corpus files, removed when dropped
/// (also when the build fails). Each call gets a fresh random name, so two builds running
/// at once in one process (a warm function's retry, tests) never share or delete each
/// other's files.
fn scratch_dir() -> Result<tempfile::TempDir> {
    tempfile::Builder::new().prefix("sextant-build-").tempdir().map_err(|e| Error::io(std::env::temp_dir(), e))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn defaults() -> serde_json::Map<String, serde_json::Value> {
        serde_json::json!({"target": "s3://bucket/indexes/demo", "keep_versions": 3}).as_object().unwrap().clone()
    }

    #[test]
    fn corpus_parts_hold_at_most_their_bytes_and_never_split_one_documents_objects() {
        let sizes = [40u64, 50, 30, 200, 10];
        let cut: Vec<usize> = cut_by_bytes(&sizes, |s| *s, 100, |_, _| true).iter().map(|r| r.len()).collect();
        assert_eq!(cut, [2, 1, 1, 1], "40+50, 30, 200 alone (larger than a part), 10");
        // Objects of one id (here: a, a) stay in one part, even past the limit.
        let ids = [("a", 60u64), ("a", 60), ("b", 10), ("c", 95)];
        let cut: Vec<usize> = cut_by_bytes(&ids, |d| d.1, 100, |x, y| x.0 != y.0).iter().map(|r| r.len()).collect();
        assert_eq!(cut, [2, 1, 1]);
        assert!(cut_by_bytes(&[] as &[u64], |s| *s, 1, |_, _| true).is_empty());
    }

    #[test]
    fn two_builds_at_once_never_share_a_scratch_directory() {
        let (a, b) = (scratch_dir().unwrap(), scratch_dir().unwrap());
        assert_ne!(a.path(), b.path());
        std::fs::write(a.path().join("seed.jsonl"), "{}").unwrap();
        let kept = a.path().to_path_buf();
        drop(b);
        assert!(kept.join("seed.jsonl").exists(), "the other build's cleanup left this one's files alone");
        drop(a);
        assert!(!kept.exists(), "a finished build leaves no scratch directory behind");
    }

    #[test]
    fn jobs_come_from_direct_events_and_eventbridge_with_env_defaults() {
        let direct = BuildJob::from_event(
            serde_json::json!({"index_id": "demo", "corpus": "s3://bucket/corpora/demo/"}),
            &defaults(),
        )
        .unwrap();
        assert_eq!(direct.target, "s3://bucket/indexes/demo");
        assert_eq!(direct.keep_versions, 3);
        assert_eq!(direct.chunk_tokens, 200);
        let scheduled = serde_json::json!({
            "detail-type": "Scheduled Event",
            "source": "aws.events",
            "detail": {"index_id": "demo", "corpus": "s3://bucket/c/", "keep_versions": 9}
        });
        let job = BuildJob::from_event(scheduled, &defaults()).unwrap();
        assert_eq!((job.index_id.as_str(), job.keep_versions), ("demo", 9));
    }

    #[test]
    fn bad_jobs_name_the_field() {
        for (event, field) in [
            (serde_json::json!({"corpus": "s3://bucket/c/"}), "index_id"),
            (serde_json::json!({"index_id": "a b", "corpus": "s3://bucket/c/"}), "index_id"),
            (serde_json::json!({"index_id": "demo", "corpus": "s3://bucket/c/", "target": "/local/dir"}), "target"),
            (serde_json::json!({"index_id": "demo", "corpus": "ftp://x"}), "corpus"),
            (serde_json::json!({"index_id": "demo", "corpus": "s3://bucket/c/", "target": "s3://B/x"}), "target"),
            (serde_json::json!({"index_id": "demo", "corpus": "s3://bucket/c/", "chunk_tokens": 4}), "chunk_tokens"),
            (serde_json::json!({"index_id": "demo", "corpus": "s3://bucket/c/", "keep_version": 4}), "keep_version"),
            (
                serde_json::json!({"index_id": "demo", "corpus": "s3://bucket/c/", "keep_versions": "x"}),
                "keep_versions",
            ),
            (serde_json::json!([1]), "event"),
        ] {
            let e = BuildJob::from_event(event.clone(), &defaults()).unwrap_err();
            assert!(matches!(&e, Error::InvalidArgument { field: f, .. } if f == field), "{event}: {e}");
        }
    }

    #[test]
    fn the_index_build_events_in_events_parse() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../events/index-build");
        let read =
            |name: &str| serde_json::from_slice::<serde_json::Value>(&std::fs::read(dir.join(name)).unwrap()).unwrap();
        let direct = BuildJob::from_event(read("direct.json"), &serde_json::Map::new()).unwrap();
        assert_eq!((direct.index_id.as_str(), direct.keep_versions), ("demo", 5));
        // A schedule without input carries nothing: the function's environment names the job.
        let env = serde_json::json!({
            "index_id": "demo",
            "corpus": "s3://bucket/corpora/demo/",
            "target": "s3://bucket/indexes/demo"
        });
        let scheduled = BuildJob::from_event(read("scheduled.json"), env.as_object().unwrap()).unwrap();
        assert_eq!(scheduled.target, "s3://bucket/indexes/demo");
        assert!(
            BuildJob::from_event(read("scheduled.json"), &serde_json::Map::new()).is_err(),
            "no job named anywhere"
        );
    }
}
