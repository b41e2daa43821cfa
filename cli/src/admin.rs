//! Operating a deployment: API keys and plans (in a key file or DynamoDB), publishing
//! indexes to S3, and running the index-build job locally.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use clap::Subcommand;
use sextant_aws::build_job::{self, BuildJob};
use sextant_aws::versions::VersionedIndex;
use sextant_aws::{sdk_config, KeyStoreSpec};
use sextant_core::encode::ModelSet;
use sextant_core::index::format::MANIFEST;
use sextant_core::index::Index;
use sextant_core::storage::{LocalDir, Location, MemStore, Storage};
use sextant_keys::{create_key, new_key, now_unix, KeyStore, Plan};

/// `sextant keys ...`.
#[derive(Subcommand)]
pub enum KeysCommand {
    /// Create a key and print it (the only time it is shown; only its hash is stored).
    Create {
        /// Who owns the key.
        #[arg(long)]
        tenant: String,
        /// Plan: free, pro, enterprise, or a custom plan.
        #[arg(long, default_value = "free")]
        plan: String,
        /// What the key may do, per index (repeatable; default: read every index):
        /// INDEX or INDEX:read searches it, INDEX:write also writes its documents,
        /// INDEX:admin also compacts it; `*` is every index (`*:write`).
        #[arg(long = "index", default_values_t = vec!["*".to_string()])]
        indexes: Vec<String>,
        /// Use this key instead of a random one.
        #[arg(long, hide = true)]
        key: Option<String>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// List keys (prefix, tenant, plan, status; never the key).
    List {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Revoke the keys with this display prefix or hash.
    Revoke {
        /// Prefix (as `list` shows) or SHA-256.
        id: String,
    },
}

/// `sextant plans ...`.
#[derive(Subcommand)]
pub enum PlansCommand {
    /// Create or change a custom plan.
    Set {
        /// Plan name.
        name: String,
        /// Largest top_k served.
        #[arg(long)]
        max_top_k: usize,
        /// Requests per minute.
        #[arg(long)]
        per_minute: u64,
        /// Requests per day.
        #[arg(long)]
        per_day: u64,
    },
}

fn runtime() -> Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread().enable_all().build()?)
}

async fn open_store(spec: &str) -> Result<Arc<dyn KeyStore>> {
    let spec = KeyStoreSpec::parse(spec)?;
    Ok(spec.open().await?)
}

/// Runs a `keys` subcommand against the store `spec`.
pub fn keys(spec: &str, cmd: KeysCommand) -> Result<()> {
    runtime()?.block_on(async {
        let store = open_store(spec).await?;
        match cmd {
            KeysCommand::Create { tenant, plan, indexes, key, json } => {
                let key = match key {
                    Some(k) => k,
                    None => new_key()?,
                };
                let rec = create_key(store.as_ref(), &key, &tenant, &plan, indexes).await?;
                if json {
                    println!("{}", serde_json::json!({ "key": key, "record": rec }));
                } else {
                    println!("{key}");
                    eprintln!(
                        "created key {}… for {} on plan {} (indexes: {}); store it now, it is not shown again",
                        rec.prefix,
                        rec.tenant,
                        rec.plan,
                        rec.indexes.join(",")
                    );
                }
            }
            KeysCommand::List { json } => {
                let keys = store.list_keys().await?;
                if json {
                    println!("{}", serde_json::to_string_pretty(&keys)?);
                } else {
                    println!(
                        "{:<9} {:<16} {:<12} {:<8} {:<20} created",
                        "prefix", "tenant", "plan", "status", "indexes"
                    );
                    for k in keys {
                        println!(
                            "{:<9} {:<16} {:<12} {:<8} {:<20} {}",
                            k.prefix,
                            k.tenant,
                            k.plan,
                            format!("{:?}", k.status).to_lowercase(),
                            k.indexes.join(","),
                            k.created_unix
                        );
                    }
                }
            }
            KeysCommand::Revoke { id } => {
                let n = store.revoke(&id, now_unix()).await?;
                if n == 0 {
                    bail!("no key has the prefix or hash {id:?}");
                }
                eprintln!("revoked {n} key(s)");
            }
        }
        Ok(())
    })
}

/// Lists plans, or runs a `plans` subcommand, against the store `spec`.
pub fn plans(spec: &str, cmd: Option<PlansCommand>, json: bool) -> Result<()> {
    runtime()?.block_on(async {
        let store = open_store(spec).await?;
        if let Some(PlansCommand::Set { name, max_top_k, per_minute, per_day }) = cmd {
            store
                .put_plan(Plan {
                    name: name.to_ascii_lowercase(),
                    max_top_k,
                    requests_per_minute: per_minute,
                    requests_per_day: per_day,
                })
                .await?;
        }
        let custom = store.custom_plans().await?;
        let mut all: Vec<Plan> = Plan::builtin()
            .into_iter()
            .filter(|b| !custom.iter().any(|c| c.name.eq_ignore_ascii_case(&b.name)))
            .collect();
        all.extend(custom);
        if json {
            println!("{}", serde_json::to_string_pretty(&all)?);
        } else {
            println!("{:<14} {:>9} {:>10} {:>12}", "plan", "max_top_k", "per_minute", "per_day");
            for p in all {
                println!("{:<14} {:>9} {:>10} {:>12}", p.name, p.max_top_k, p.requests_per_minute, p.requests_per_day);
            }
        }
        Ok(())
    })
}

/// Publishes the index in `dir` to `to` (`s3://bucket/prefix`) as a new version.
pub fn publish(dir: &std::path::Path, to: &str, keep: usize) -> Result<()> {
    let target = Location::parse(to)?;
    // Verify before uploading: a corrupt local index is never published.
    let local = LocalDir::new(dir);
    let files = if sextant_core::shards::read_root(&local)?.is_some() {
        sharded_files(&local).with_context(|| format!("checking {}", dir.display()))?
    } else {
        Index::load(&local).with_context(|| format!("checking {}", dir.display()))?;
        single_files(dir, &local)?
    };
    runtime()?.block_on(async {
        let index = VersionedIndex::new(&sdk_config().await, &target)?;
        let expected = index.pointer().await?;
        let p = index.publish(&files, &expected, keep).await?;
        println!("{}", serde_json::to_string_pretty(&p)?);
        Ok(())
    })
}

/// The files of the sharded index in `local`, each shard loaded and verified first: the
/// root manifest, BM25's statistics, every shard's manifest and files, and the vector
/// cache the root names (for the next build in S3).
fn sharded_files(local: &LocalDir) -> Result<MemStore> {
    use sextant_core::shards::{load_shard, read_root, ROOT_MANIFEST, STATS_FILE};
    let (root, _) = read_root(local)?.context("a root manifest")?;
    let files = MemStore::new(local.root().display().to_string());
    for name in [ROOT_MANIFEST, STATS_FILE].into_iter().map(str::to_string).chain(root.encoded.iter().cloned()) {
        files.insert(name.clone(), local.read(&name)?);
    }
    for (k, entry) in root.shards.iter().enumerate() {
        let (index, _) = load_shard(local, &root, k)?;
        for name in index.manifest.files.iter().map(|f| f.name.as_str()).chain([MANIFEST]) {
            let key = format!("{}{name}", entry.prefix);
            files.insert(key.clone(), local.read(&key)?);
        }
    }
    Ok(files)
}

/// The files of the single index in `dir`, with the build's vector cache and report.
fn single_files(dir: &std::path::Path, local: &LocalDir) -> Result<MemStore> {
    let (files, manifest) = crate::indexes::index_files(dir)?;
    // The build's vector cache and report go with it when present, so the next build in S3
    // reuses the vectors (a missing shard file only means its chunks are encoded again).
    let extras = manifest.build.iter().flat_map(|b| b.encoded.iter().map(String::as_str));
    for f in extras.chain([sextant_core::build::REPORT_FILE]) {
        if local.exists(f)? {
            files.insert(f, local.read(f)?);
        }
    }
    Ok(files)
}

/// Shows the current version and the versions kept at `location`.
pub fn versions(location: &str) -> Result<()> {
    runtime()?.block_on(async {
        let index = VersionedIndex::new(&sdk_config().await, &Location::parse(location)?)?;
        let pointer = index.pointer().await?.pointer;
        let versions = index.versions().await?;
        println!("{}", serde_json::to_string_pretty(&serde_json::json!({ "current": pointer, "versions": versions }))?);
        Ok(())
    })
}

/// Runs the index-build job (the `index-build` function's code) from an event file or flags.
pub fn index_build(
    event: Option<PathBuf>,
    fields: serde_json::Map<String, serde_json::Value>,
    models: &ModelSet,
) -> Result<()> {
    let payload = match event {
        Some(p) => serde_json::from_slice(&std::fs::read(&p).with_context(|| format!("reading {}", p.display()))?)?,
        None => serde_json::Value::Object(Default::default()),
    };
    // Flags override the event file; the environment fills in what both leave out.
    let payload = match payload {
        serde_json::Value::Object(mut o) => {
            o.extend(fields);
            serde_json::Value::Object(o)
        }
        other => other,
    };
    let job = BuildJob::from_event(payload, &BuildJob::env_defaults())?;
    runtime()?.block_on(async {
        let report = build_job::run(&job, models, &sdk_config().await).await?;
        println!("{}", serde_json::to_string_pretty(&report)?);
        Ok(())
    })
}
