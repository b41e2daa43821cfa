//! # sextant-aws
//!
//! Sextant on AWS: index versions in S3 (published, loaded and refreshed), keys, plans and
//! rate counters in DynamoDB, the index-build job, secrets read from Secrets Manager, and
//! the shard functions of a sharded index, asked with Lambda `Invoke`.
//!
//! Clients take their settings from the environment the way every AWS SDK does: region,
//! credentials, and `AWS_ENDPOINT_URL` / `AWS_ENDPOINT_URL_S3` /
//! `AWS_ENDPOINT_URL_DYNAMODB` for S3- and DynamoDB-compatible servers.

#![warn(missing_docs)]

pub mod build_job;
pub mod build_lease;
pub mod build_steps;
pub mod build_workflow;
pub mod catalog;
mod dynamo;
mod key_store_spec;
pub mod memory;
pub mod refresh;
mod s3;
mod sdk;
mod secrets;
pub mod shard_function;
pub mod versions;

pub use catalog::{Catalog, CreatedIndex};
pub use dynamo::DynamoKeyStore;
pub use key_store_spec::KeyStoreSpec;
pub use memory::{Fit, MemoryBudget};
pub use refresh::{open_engine, open_from_s3, CheckPermit, LoadTimings, LoadedIndex, Refresher, STALE_CHECK};
pub use s3::{Listed, Object, Precondition, S3Store};
pub use sdk::{load_sdk_config, retry_config, sdk_config};
pub use secrets::secret_string;
pub use shard_function::{LambdaShard, ShardFunctions, ShardInvocation};
pub use versions::VersionedIndex;
