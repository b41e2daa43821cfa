//! The S3 and DynamoDB servers the tests run against, started by `scripts/ci/aws_servers.sh`
//! (SeaweedFS for S3 with signature checks, moto for DynamoDB and as a second S3), found
//! through the environment file it writes.

use aws_config::{BehaviorVersion, Region, SdkConfig};
use aws_sdk_dynamodb::types::{
    AttributeDefinition, BillingMode, KeySchemaElement, KeyType, ScalarAttributeType, TimeToLiveSpecification,
};

/// Endpoints and credentials of the test servers.
#[derive(Debug, Clone)]
pub struct Servers {
    /// SeaweedFS S3 (`http://127.0.0.1:PORT`).
    pub seaweed: String,
    /// moto (S3 and DynamoDB).
    pub moto: String,
    /// Access key id.
    pub key_id: String,
    /// Secret.
    pub secret: String,
    /// Region.
    pub region: String,
}

/// The servers, or a panic that says how to start them.
pub fn servers() -> Servers {
    let get = |k: &str| {
        std::env::var(k).unwrap_or_else(|_| {
            panic!(
                "{k} is not set: start the test servers with `bash scripts/ci/aws_servers.sh start` \
                 and source the env file it prints (scripts/ci/test.sh does both)"
            )
        })
    };
    Servers {
        seaweed: get("SEXTANT_TEST_S3_ENDPOINT"),
        moto: get("SEXTANT_TEST_MOTO_ENDPOINT"),
        key_id: get("SEXTANT_TEST_AWS_ACCESS_KEY_ID"),
        secret: get("SEXTANT_TEST_AWS_SECRET_ACCESS_KEY"),
        region: get("SEXTANT_TEST_AWS_REGION"),
    }
}

impl Servers {
    /// An SDK configuration talking to `endpoint` with the test credentials.
    pub async fn config(&self, endpoint: &str) -> SdkConfig {
        aws_config::defaults(BehaviorVersion::latest())
            .endpoint_url(endpoint)
            .region(Region::new(self.region.clone()))
            .credentials_provider(aws_sdk_s3::config::Credentials::new(&self.key_id, &self.secret, None, None, "tests"))
            .load()
            .await
    }

    /// The environment a function process needs to reach S3 at `s3` and DynamoDB at `dynamo`.
    pub fn function_env(&self, s3: &str, dynamo: &str) -> Vec<(String, String)> {
        [
            ("AWS_ENDPOINT_URL_S3", s3),
            ("AWS_ENDPOINT_URL_DYNAMODB", dynamo),
            ("AWS_ACCESS_KEY_ID", &self.key_id),
            ("AWS_SECRET_ACCESS_KEY", &self.secret),
            ("AWS_REGION", &self.region),
            ("AWS_EC2_METADATA_DISABLED", "true"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
    }
}

/// A name unique to this test run (buckets and tables): the process, a count of the names
/// this process gave out, and the clock, so two tests of one binary never share one.
pub fn unique(prefix: &str) -> String {
    static GIVEN: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = GIVEN.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().subsec_nanos();
    format!("{prefix}-{}-{n}-{nanos:x}", std::process::id())
}

/// Creates a bucket.
pub async fn create_bucket(config: &SdkConfig, bucket: &str) {
    let s3 = aws_sdk_s3::Client::from_conf(aws_sdk_s3::config::Builder::from(config).force_path_style(true).build());
    s3.create_bucket()
        .bucket(bucket)
        .send()
        .await
        .unwrap_or_else(|e| panic!("creating bucket {bucket}: {}", aws_sdk_s3::error::DisplayErrorContext(e)));
}

/// A raw S3 client (path-style), for tampering with objects behind the code under test.
pub fn s3_client(config: &SdkConfig) -> aws_sdk_s3::Client {
    aws_sdk_s3::Client::from_conf(aws_sdk_s3::config::Builder::from(config).force_path_style(true).build())
}

/// Creates the keys and rate tables as `template.yaml` does (partition key `pk`; TTL on
/// `expires_at` for the rate table).
pub async fn create_tables(config: &SdkConfig, keys: &str, rate: &str) {
    let db = aws_sdk_dynamodb::Client::new(config);
    for table in [keys, rate] {
        let created = db
            .create_table()
            .table_name(table)
            .billing_mode(BillingMode::PayPerRequest)
            .attribute_definitions(
                AttributeDefinition::builder()
                    .attribute_name("pk")
                    .attribute_type(ScalarAttributeType::S)
                    .build()
                    .unwrap(),
            )
            .key_schema(KeySchemaElement::builder().attribute_name("pk").key_type(KeyType::Hash).build().unwrap())
            .send()
            .await;
        match created {
            Ok(_) => {}
            // The SDK retries a create whose answer a loaded server was slow to send; the
            // retry then finds the table its first attempt made (the name is this call's own).
            Err(e) if e.as_service_error().is_some_and(|e| e.is_resource_in_use_exception()) => {}
            Err(e) => panic!("creating table {table}: {}", aws_sdk_dynamodb::error::DisplayErrorContext(e)),
        }
    }
    db.update_time_to_live()
        .table_name(rate)
        .time_to_live_specification(
            TimeToLiveSpecification::builder().attribute_name("expires_at").enabled(true).build().unwrap(),
        )
        .send()
        .await
        .unwrap();
}
