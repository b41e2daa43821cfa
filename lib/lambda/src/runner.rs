//! Running the router as a Lambda function: the whole `main` of the `retrieve`, `search`
//! and `index-build` functions but their logging set-up.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;
use lambda_http::{service_fn, LambdaEvent};
use sextant_aws::build_job::{run, BuildJob};
use sextant_aws::build_lease::{BuildLease, Debounced};
use sextant_aws::build_steps::{
    clean_step, encode_step, gather_step, merge_shard_step, merge_step, plan_part_step, plan_step, publish_step,
    StepEvent,
};
use sextant_aws::build_workflow::{BuildWorkflow, Handed, Requested};
use sextant_aws::{Catalog, Refresher};
use sextant_core::encode::{DenseEncoder, ModelSet, SparseEncoder};
use sextant_core::storage::Location;
use sextant_core::Error;
use sextant_server::{AppState, ServedIndex, UpstreamRequestId};

use crate::index_admin::S3IndexAdmin;
use crate::startup::{from_env, models_from_env};

/// Loads the context once (cold start, see [`from_env`]) and serves API Gateway events
/// with `lambda_http` until the runtime stops the process. Indexes served from S3 are
/// checked for new versions as requests arrive.
///
/// API Gateway REST APIs put the stage in the path (`/prod/v1/retrieve`); unless the
/// environment says otherwise, `lambda_http` is asked to drop it
/// (`AWS_LAMBDA_HTTP_IGNORE_STAGE_IN_PATH=true`) so the router sees `/v1/retrieve`.
/// Call it from `main` before any thread starts (it sets that variable).
pub fn serve() -> Result<(), lambda_http::Error> {
    if std::env::var_os("AWS_LAMBDA_HTTP_IGNORE_STAGE_IN_PATH").is_none() {
        std::env::set_var("AWS_LAMBDA_HTTP_IGNORE_STAGE_IN_PATH", "true");
    }
    tokio::runtime::Builder::new_multi_thread().enable_all().build()?.block_on(async {
        let context = from_env().await?;
        let mut app = sextant_server::router(context.state.clone());
        if let Some(refresher) = context.refresher {
            let watch = Watch { refresher, state: context.state, admin: context.admin };
            app = app.layer(axum::middleware::from_fn_with_state(watch, refresh));
        }
        lambda_http::run(app.layer(axum::middleware::from_fn(gateway_request_id))).await
    })
}

/// The `index-build` function: each invocation runs one [`BuildJob`] read from the event
/// (direct invoke, or the EventBridge schedule's input) and answers with its
/// [`BuildReport`](sextant_aws::build_job::BuildReport), or, for an event with a `step`
/// ([`StepEvent`]), one step of the Step Functions build workflow. Models are loaded as for
/// the API functions (`SEXTANT_MODEL_URI` / `SEXTANT_MODEL_DIR`), once per container, and
/// the encoders on the first encode step.
pub fn serve_index_build() -> Result<(), lambda_http::Error> {
    tokio::runtime::Builder::new_multi_thread().enable_all().build()?.block_on(async {
        let models = models_from_env().await?;
        let config = sextant_aws::sdk_config().await;
        let defaults = BuildJob::env_defaults();
        let encoders = tokio::sync::OnceCell::new();
        let lease = BuildLease::from_env(&config)?;
        let workflow = BuildWorkflow::from_env(&config);
        let catalog = crate::startup::catalog_from_env().await?;
        let builds = Builds { lease, workflow, catalog };
        let (models, config, defaults, encoders, builds) = (&models, &config, &defaults, &encoders, &builds);
        lambda_http::lambda_runtime::run(service_fn(move |event: LambdaEvent<serde_json::Value>| async move {
            let diagnose = |e: Error| {
                tracing::error!(error = %e, "index build failed");
                let kind = match &e {
                    Error::InvalidArgument { .. } => "InvalidEvent",
                    Error::Conflict { .. } => "PublishConflict",
                    Error::Corpus { .. } => "CorpusError",
                    _ => "BuildFailed",
                };
                lambda_http::lambda_runtime::Diagnostic { error_type: kind.into(), error_message: e.to_string() }
            };
            if event.payload.get("step").is_some() {
                return run_step(event.payload, models, config, defaults, encoders, builds).await.map_err(diagnose);
            }
            handle_build_event(event.payload, models, config, defaults, builds).await.map_err(diagnose)
        }))
        .await
    })
}

/// How the `index-build` function starts builds: the build lease of its indexes
/// (`SEXTANT_BUILD_LEASE_TABLE`), the build workflow (`SEXTANT_BUILD_WORKFLOW`) and the
/// indexes created through the API (`SEXTANT_CATALOG`), each when the environment names
/// one.
#[derive(Clone, Default)]
pub struct Builds {
    /// The build leases.
    pub lease: Option<BuildLease>,
    /// The build workflow.
    pub workflow: Option<BuildWorkflow>,
    /// The created indexes, whose corpus events build them.
    pub catalog: Option<Catalog>,
}

/// The `source` of an event that asks for a build of the function's index through the
/// workflow: the schedule's, and `aws lambda invoke --payload '{"source": "sextant.build"}'`.
pub const BUILD_REQUEST_SOURCE: &str = "sextant.build";

/// One invocation of the `index-build` function without a `step`.
///
/// An S3 event from EventBridge (`"source": "aws.s3"`, `Object Created` or
/// `Object Deleted` under the corpus prefix), or a request for a build
/// (`"source": "sextant.build"`: the schedule, or by hand), builds the job the environment
/// names. With a workflow and a lease (as deployed) it asks the workflow for the build
/// ([`BuildWorkflow::request`]) and answers at once: `{"started": execution}`, or
/// `{"queued": true}` when a build of the index runs (it runs again). Without a workflow it
/// builds here, debounced by the lease ([`BuildLease::debounced`]): `{"queued": true}`, or
/// `{"builds": [reports]}` once no write arrived during the last build; without a lease
/// every event builds.
///
/// With a catalog ([`Builds::catalog`]), an S3 event under `corpora/<id>/` of an index
/// created through the API builds that index instead, cut as it was created
/// ([`BuildJob::of_created`]); an event under neither corpus (the facts' prefix, an index
/// deleted meanwhile) is answered `{"ignored": key}`.
///
/// Any other event is a [`BuildJob`] (a direct invoke): one whole build here, answered with
/// its [`BuildReport`](sextant_aws::build_job::BuildReport).
pub async fn handle_build_event(
    event: serde_json::Value,
    models: &ModelSet,
    config: &aws_config::SdkConfig,
    defaults: &serde_json::Map<String, serde_json::Value>,
    builds: &Builds,
) -> Result<serde_json::Value, Error> {
    let source = event.get("source").and_then(|s| s.as_str());
    if source == Some("aws.s3") || source == Some(BUILD_REQUEST_SOURCE) {
        let key = event.pointer("/detail/object/key").and_then(|k| k.as_str()).unwrap_or_default();
        let Some(job) = job_of_key(key, defaults, builds.catalog.as_ref()).await? else {
            tracing::info!(key, "an object of no index's corpus changed: nothing to build");
            return Ok(serde_json::json!({"ignored": key}));
        };
        let change = event.get("detail-type").and_then(|k| k.as_str()).unwrap_or("build requested");
        tracing::info!(index = %job.index_id, key, change, "corpus changed");
        if let (Some(workflow), Some(lease)) = (&builds.workflow, &builds.lease) {
            return match workflow.request(lease, &job).await? {
                Requested::Started(name) => Ok(serde_json::json!({"index_id": job.index_id, "started": name})),
                Requested::Queued => Ok(serde_json::json!({"index_id": job.index_id, "queued": true})),
            };
        }
        let Some(lease) = &builds.lease else {
            tracing::warn!("SEXTANT_BUILD_LEASE_TABLE is not set: builds started by S3 events are not debounced");
            let report = build_once(&job, models, config).await?;
            return Ok(serde_json::json!({"index_id": job.index_id, "builds": [report]}));
        };
        let holder = format!(
            "{}-{:x}",
            std::process::id(),
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_nanos()
        );
        return match lease.debounced(&job.index_id, &holder, || build_once(&job, models, config)).await? {
            Debounced::Ran(reports) => Ok(serde_json::json!({"index_id": job.index_id, "builds": reports})),
            Debounced::Queued => Ok(serde_json::json!({"index_id": job.index_id, "queued": true})),
        };
    }
    let job = BuildJob::from_event(event, defaults)?;
    build_once(&job, models, config).await
}

/// The build an S3 event for object `key` asks for (a build request has no key): the
/// function's own index (`defaults`), when the key is under its corpus or no catalog is
/// set (EventBridge's rule then filters the keys); else the created index whose corpus
/// holds it; else none.
async fn job_of_key(
    key: &str,
    defaults: &serde_json::Map<String, serde_json::Value>,
    catalog: Option<&Catalog>,
) -> Result<Option<BuildJob>, Error> {
    let own = BuildJob::from_event(serde_json::Value::Null, defaults)?;
    let Some(catalog) = catalog.filter(|_| !key.is_empty()) else { return Ok(Some(own)) };
    if let Location::S3 { prefix, .. } = Location::parse(&own.corpus)? {
        if prefix.is_empty() || key.starts_with(&format!("{prefix}/")) {
            return Ok(Some(own));
        }
    }
    match catalog.of_corpus_key(key).await? {
        Some((id, created)) => Ok(Some(BuildJob::of_created(catalog, &id, &created, defaults)?)),
        None => Ok(None),
    }
}

/// Runs `job` once, logging its start and report.
async fn build_once(
    job: &BuildJob,
    models: &ModelSet,
    config: &aws_config::SdkConfig,
) -> Result<serde_json::Value, Error> {
    tracing::info!(index = %job.index_id, corpus = %job.corpus, target = %job.target, "index build started");
    let report = run(job, models, config).await?;
    let version = report.published.as_ref().map(|p| p.version.as_str()).unwrap_or("none (unchanged)");
    tracing::info!(
        index = %report.build.index_id,
        version,
        report = %serde_json::to_string(&report).unwrap_or_default(),
        "index build finished"
    );
    Ok(serde_json::to_value(report)?)
}

/// Runs one step of the build workflow.
async fn run_step(
    event: serde_json::Value,
    models: &ModelSet,
    config: &aws_config::SdkConfig,
    defaults: &serde_json::Map<String, serde_json::Value>,
    encoders: &tokio::sync::OnceCell<(DenseEncoder, SparseEncoder)>,
    builds: &Builds,
) -> Result<serde_json::Value, Error> {
    let step: StepEvent = serde_path_to_error::deserialize(event)
        .map_err(|e| Error::invalid(e.path().to_string(), e.inner().to_string()))?;
    tracing::info!(?step, "build step started");
    let out = match step {
        StepEvent::Plan { job, build_id } => {
            let job = BuildJob::from_event(job, defaults)?;
            serde_json::to_value(plan_step(&job, &build_id, models, config).await?)?
        }
        StepEvent::PlanPart { job, build_id, part } => {
            let job = BuildJob::from_event(job, defaults)?;
            serde_json::to_value(plan_part_step(&job, &build_id, part, models, config).await?)?
        }
        StepEvent::Gather { job, build_id } => {
            let job = BuildJob::from_event(job, defaults)?;
            serde_json::to_value(gather_step(&job, &build_id, models, config).await?)?
        }
        StepEvent::Encode { job, build_id, shard } => {
            let job = BuildJob::from_event(job, defaults)?;
            let encoders = encoders
                .get_or_try_init(|| async {
                    let (d, s) = (models.dense.clone(), models.sparse.clone());
                    tokio::task::spawn_blocking(move || {
                        Ok::<_, Error>((DenseEncoder::load(&d)?, SparseEncoder::load(&s)?))
                    })
                    .await
                    .map_err(|e| Error::task_failed("loading the encoders", e))?
                })
                .await?;
            serde_json::to_value(encode_step(&job, &build_id, shard, encoders, config).await?)?
        }
        StepEvent::Merge { job, build_id, encoded } => {
            let job = BuildJob::from_event(job, defaults)?;
            serde_json::to_value(merge_step(&job, &build_id, &encoded, config).await?)?
        }
        StepEvent::MergeShard { job, build_id, shard } => {
            let job = BuildJob::from_event(job, defaults)?;
            serde_json::to_value(merge_shard_step(&job, &build_id, shard, models, config).await?)?
        }
        StepEvent::Publish { job, build_id } => {
            let job = BuildJob::from_event(job, defaults)?;
            serde_json::to_value(publish_step(&job, &build_id, config).await?)?
        }
        StepEvent::Clean { job, build_id } => {
            let job = BuildJob::from_event(job, defaults)?;
            serde_json::to_value(clean_step(&job, &build_id, config).await?)?
        }
        StepEvent::Finish { job, failed } => finish_step(BuildJob::from_event(job, defaults)?, failed, builds).await?,
    };
    tracing::info!(output = %out, "build step finished");
    Ok(out)
}

/// The workflow's last step: hands on the lease `job` holds ([`BuildWorkflow::finish`]),
/// answered with `{"lease": "released" | "none", "again": execution | null}`.
pub async fn finish_step(job: BuildJob, failed: bool, builds: &Builds) -> Result<serde_json::Value, Error> {
    let (Some(workflow), Some(lease)) = (&builds.workflow, &builds.lease) else {
        if job.lease.is_some() {
            return Err(Error::invalid(
                "SEXTANT_BUILD_WORKFLOW",
                "a run holding a build lease finished where no workflow and lease table are set",
            ));
        }
        return Ok(serde_json::json!({"lease": "none", "again": null}));
    };
    Ok(match workflow.finish(lease, &job, failed).await? {
        Handed::Released => serde_json::json!({"lease": "released", "again": null}),
        Handed::Again(name) => serde_json::json!({"lease": "released", "again": name}),
        Handed::NoLease => serde_json::json!({"lease": "none", "again": null}),
    })
}

/// Hands API Gateway's request id to the router ([`UpstreamRequestId`]), which answers
/// and logs under it: one id finds a request in the gateway's access logs and the
/// function's.
pub async fn gateway_request_id(mut req: Request, next: Next) -> Response {
    use lambda_http::request::RequestContext;
    use lambda_http::RequestExt;
    let id = match req.request_context_ref() {
        Some(RequestContext::ApiGatewayV1(c)) => c.request_id.clone(),
        Some(RequestContext::ApiGatewayV2(c)) => c.request_id.clone(),
        _ => None,
    };
    if let Some(id) = id {
        req.extensions_mut().insert(UpstreamRequestId(id));
    }
    next.run(req).await
}

/// What the refresh middleware watches: the S3 indexes' pointers, the router's state they
/// are swapped into, and the created indexes, when the API creates them.
#[derive(Clone)]
pub struct Watch {
    /// Checks the pointers.
    pub refresher: Arc<Refresher>,
    /// The router's state.
    pub state: Arc<AppState>,
    /// Serves the indexes created since and lets go of those deleted ([`S3IndexAdmin::sync`]).
    pub admin: Option<Arc<S3IndexAdmin>>,
}

/// The refresh middleware: when a check is due, starts one in the background (the created
/// indexes first, then the S3 indexes' pointers), swaps each newly loaded version into the
/// router's state, then serves the request (which never waits for the check).
pub async fn refresh(State(Watch { refresher, state, admin }): State<Watch>, req: Request, next: Next) -> Response {
    if let Some(permit) = refresher.begin() {
        tokio::spawn(async move {
            if let Some(admin) = admin {
                admin.sync().await;
            }
            refresher
                .check_now(
                    permit,
                    |id, loaded| {
                        let version = loaded.pointer.version.clone();
                        state.replace_index(id, ServedIndex::of(loaded.searcher, loaded.financials), Some(version));
                    },
                    |id| state.unload_index(id),
                )
                .await;
        });
    }
    next.run(req).await
}

/// Logs to stdout (CloudWatch) at `RUST_LOG`'s level (default `info`), without timestamps
/// (CloudWatch adds its own): one JSON object a line when the function's `LoggingConfig`
/// says `LogFormat: JSON` (Lambda sets `AWS_LAMBDA_LOG_FORMAT=JSON`), else text. Each line
/// inside a request carries its request id (the `request` span).
pub fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into());
    let logs = tracing_subscriber::fmt().with_env_filter(filter).without_time();
    if std::env::var("AWS_LAMBDA_LOG_FORMAT").is_ok_and(|f| f.eq_ignore_ascii_case("json")) {
        logs.json().flatten_event(true).with_current_span(true).with_span_list(false).init();
    } else {
        logs.init();
    }
}
