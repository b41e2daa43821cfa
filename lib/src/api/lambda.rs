//! Running the router as a Lambda function (feature `lambda`): the whole `main` of the
//! `retrieve` and `search` functions but their logging set-up.

/// Loads the context once (cold start, see [`super::context`]) and serves API Gateway
/// events with `lambda_http` until the runtime stops the process.
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
        let state = tokio::task::spawn_blocking(super::context::state_from_env).await??;
        lambda_http::run(super::router(state)).await
    })
}
