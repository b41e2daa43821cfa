//! Lambda function `shard`: one shard of a sharded index in S3, asked by the `retrieve`
//! and `search` functions (its routers) with Lambda `Invoke` (see `sextant_lambda::shard`).

fn main() -> Result<(), lambda_http::Error> {
    sextant_lambda::init_logging();
    sextant_lambda::serve_shard()
}
