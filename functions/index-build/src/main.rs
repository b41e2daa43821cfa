//! Lambda function `index-build`: builds an index from a corpus in S3 and publishes it as a
//! new version, on the reindex schedule or by direct invoke (see
//! `sextant::cloud::build_job` for the event and `sextant::api::lambda::serve_index_build`).

fn main() -> Result<(), lambda_http::Error> {
    tracing_subscriber::fmt().with_env_filter(tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into())).without_time().init();
    sextant::api::lambda::serve_index_build()
}
