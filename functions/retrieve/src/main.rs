//! Lambda function `retrieve` (`POST /v1/retrieve`): the API router run by `lambda_http`, with the
//! indexes, models and key store loaded once at cold start (see `sextant_lambda`).

fn main() -> Result<(), lambda_http::Error> {
    sextant_lambda::init_logging();
    sextant_lambda::serve()
}
