//! Lambda function `retrieve` (`POST /v1/retrieve`): the API router run by `lambda_http`, with the
//! indexes, models and key store loaded once at cold start (see `sextant::api::context`).
//!
//! API Gateway REST APIs put the stage in the path (`/prod/v1/retrieve`); unless told
//! otherwise, the function asks `lambda_http` to drop it
//! (`AWS_LAMBDA_HTTP_IGNORE_STAGE_IN_PATH=true`) so the router sees `/v1/retrieve`.

fn main() -> Result<(), lambda_http::Error> {
    if std::env::var_os("AWS_LAMBDA_HTTP_IGNORE_STAGE_IN_PATH").is_none() {
        // Before any thread starts.
        std::env::set_var("AWS_LAMBDA_HTTP_IGNORE_STAGE_IN_PATH", "true");
    }
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()))
        .without_time()
        .init();
    tokio::runtime::Builder::new_multi_thread().enable_all().build()?.block_on(async {
        let state = tokio::task::spawn_blocking(sextant::api::context::state_from_env).await??;
        lambda_http::run(sextant::api::router(state)).await
    })
}
