//! Lambda function `index-build`: builds an index from a corpus in S3 and publishes it as a
//! new version, on the reindex schedule or by direct invoke (see
//! `sextant_aws::build_job` for the event and `sextant_lambda::serve_index_build`).

fn main() -> Result<(), lambda_http::Error> {
    sextant_lambda::init_logging();
    sextant_lambda::serve_index_build()
}
