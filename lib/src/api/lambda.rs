//! Running the router as a Lambda function (feature `lambda`): the whole `main` of the
//! `retrieve` and `search` functions but their logging set-up.

/// Loads the context once (cold start, see [`super::context`]) and serves API Gateway
/// events with `lambda_http` until the runtime stops the process. With feature `aws`,
/// indexes served from S3 are checked for new versions as requests arrive.
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
        let context = super::context::from_env().await?;
        #[allow(unused_mut)]
        let mut app = super::router(context.state);
        #[cfg(feature = "aws")]
        if let Some(r) = context.refresher {
            app = app.layer(axum::middleware::from_fn_with_state(r, crate::cloud::refresh::middleware));
        }
        lambda_http::run(app).await
    })
}

/// The `index-build` function (features `lambda` and `aws`): each invocation runs one
/// [`crate::cloud::build_job::BuildJob`] read from the event (direct invoke, or the
/// EventBridge schedule's input) and answers with its
/// [`crate::cloud::build_job::BuildReport`]. Models are loaded as for the API functions
/// (`SEXTANT_MODEL_URI` / `SEXTANT_MODEL_DIR`), once per container.
#[cfg(feature = "aws")]
pub fn serve_index_build() -> Result<(), lambda_http::Error> {
    use crate::cloud::build_job::{run, BuildJob};
    use lambda_http::{service_fn, LambdaEvent};
    tokio::runtime::Builder::new_multi_thread().enable_all().build()?.block_on(async {
        let models = super::context::models_from_env().await?;
        let config = crate::cloud::sdk_config().await;
        let defaults = BuildJob::env_defaults();
        let (models, config, defaults) = (&models, &config, &defaults);
        lambda_http::lambda_runtime::run(service_fn(move |event: LambdaEvent<serde_json::Value>| async move {
            let diagnose = |e: crate::Error| {
                tracing::error!(error = %e, "index build failed");
                let kind = match &e {
                    crate::Error::InvalidArgument { .. } => "InvalidEvent",
                    crate::Error::Conflict { .. } => "PublishConflict",
                    crate::Error::Corpus { .. } => "CorpusError",
                    _ => "BuildFailed",
                };
                lambda_http::lambda_runtime::Diagnostic { error_type: kind.into(), error_message: e.to_string() }
            };
            let job = BuildJob::from_event(event.payload, defaults).map_err(diagnose)?;
            tracing::info!(index = %job.index_id, corpus = %job.corpus, target = %job.target, "index build started");
            let report = run(&job, models, config).await.map_err(diagnose)?;
            tracing::info!(index = %report.index_id, version = %report.published.version, documents = report.documents, chunks = report.chunks,
                read_ms = report.read_ms, build_ms = report.build_ms, publish_ms = report.publish_ms, "index build published");
            Ok::<_, lambda_http::lambda_runtime::Diagnostic>(report)
        }))
        .await
    })
}
