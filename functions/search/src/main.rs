//! Lambda function `search` (`POST /v1/search`): the API router run by `lambda_http`, with the
//! indexes, models and key store loaded once at cold start (see `sextant::api::lambda`).

fn main() -> Result<(), lambda_http::Error> {
    tracing_subscriber::fmt().with_env_filter(tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into())).without_time().init();
    sextant::api::lambda::serve()
}
