//! Index shards as Lambda functions: a router asks each shard function through the
//! official SDK's `Invoke` (`RequestResponse`), and every question names the published
//! version it is asked of, so a query never mixes two builds.
//!
//! The payload is a [`ShardInvocation`]: the version and its root manifest's SHA-256 (from
//! the router's `CURRENT` pointer) and the shard question of
//! [`sextant_core::shards::protocol`]. The function answers the protocol's
//! [`ShardResponse`] as JSON, or fails the invocation (Lambda's function error), which the
//! router counts as a shard that did not answer.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use aws_sdk_lambda::primitives::Blob;
use serde::{Deserialize, Serialize};
use sextant_core::error::{Error, Result};
use sextant_core::shards::{Shard, ShardRequest, ShardResponse};

use crate::versions::Pointer;

/// What a router sends a shard function.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ShardInvocation {
    /// The published version asked of (`CURRENT`'s `version` when the router loaded it);
    /// empty (or left out, as by hand with `sam local invoke`): the current one.
    #[serde(default)]
    pub version: String,
    /// That version's root manifest SHA-256, which the shard checks before loading it.
    #[serde(default)]
    pub root_sha256: String,
    /// The question.
    pub request: ShardRequest,
}

impl ShardInvocation {
    /// The pointer of the version asked of, as the shard loads it: the version and its root
    /// manifest's SHA-256 (the shard count and the rest are the root's, read with it).
    pub fn pointer(&self) -> Pointer {
        Pointer {
            version: self.version.clone(),
            manifest_sha256: self.root_sha256.clone(),
            published_unix: 0,
            previous: None,
            shards: 0,
        }
    }
}

/// The runtime every [`LambdaShard`] sends its invocations on: the router asks its shards
/// from rayon and plain threads, outside any runtime.
fn runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("shard-invoke")
            .enable_all()
            .build()
            .expect("a runtime for the shard invocations")
    })
}

/// One shard function, asked with `lambda:InvokeFunction` about one published version.
pub struct LambdaShard {
    client: aws_sdk_lambda::Client,
    function: String,
    version: String,
    root_sha256: String,
    timeout: Duration,
}

impl LambdaShard {
    /// Shard function `function` (a name or ARN), asked about the version `pointer`
    /// names; an invocation that takes longer than `timeout` fails. `sdk` gives the
    /// region, credentials and endpoint (`AWS_ENDPOINT_URL_LAMBDA` for an emulator).
    pub fn new(sdk: &aws_config::SdkConfig, function: &str, pointer: &Pointer, timeout: Duration) -> Self {
        LambdaShard {
            client: aws_sdk_lambda::Client::new(sdk),
            function: function.to_string(),
            version: pointer.version.clone(),
            root_sha256: pointer.manifest_sha256.clone(),
            timeout,
        }
    }

    async fn invoke(&self, payload: Vec<u8>) -> std::result::Result<ShardResponse, String> {
        let out = self
            .client
            .invoke()
            .function_name(&self.function)
            .payload(Blob::new(payload))
            .send()
            .await
            .map_err(|e| format!("could not be invoked: {}", aws_sdk_lambda::error::DisplayErrorContext(e)))?;
        let body = out.payload.map(Blob::into_inner).unwrap_or_default();
        if let Some(kind) = out.function_error {
            let message = serde_json::from_slice::<serde_json::Value>(&body)
                .ok()
                .and_then(|v| v["errorMessage"].as_str().map(str::to_string))
                .unwrap_or_else(|| String::from_utf8_lossy(&body).into_owned());
            return Err(format!("failed ({kind}): {message}"));
        }
        serde_json::from_slice(&body).map_err(|e| format!("answered what is not a shard answer: {e}"))
    }
}

impl Shard for LambdaShard {
    fn ask(&self, request: &ShardRequest) -> Result<ShardResponse> {
        let failed =
            |reason: String| Error::Component { component: format!("shard function {}", self.function), reason };
        let invocation = ShardInvocation {
            version: self.version.clone(),
            root_sha256: self.root_sha256.clone(),
            request: request.clone(),
        };
        let payload = serde_json::to_vec(&invocation).map_err(|e| failed(e.to_string()))?;
        runtime().block_on(async {
            match tokio::time::timeout(self.timeout, self.invoke(payload)).await {
                Ok(answer) => answer.map_err(failed),
                Err(_) => Err(failed(format!("no answer within {} ms", self.timeout.as_millis()))),
            }
        })
    }
}

/// How a router reaches the shard functions of its sharded indexes: a function name in
/// which `{k}` stands for the shard number (and `{index}`, if present, for the index id),
/// the deadline of a search's fan-out, and the SDK configuration to invoke with.
#[derive(Clone)]
pub struct ShardFunctions {
    pattern: String,
    deadline: Duration,
    sdk: aws_config::SdkConfig,
}

impl ShardFunctions {
    /// The shard functions `pattern` names (`sextant-prod-shard-{k}`), asked with a
    /// deadline of `deadline` per search; refuses a pattern without `{k}` (every shard
    /// would be the same function).
    pub fn new(pattern: &str, deadline: Duration, sdk: aws_config::SdkConfig) -> Result<Self> {
        let pattern = pattern.trim();
        if !pattern.contains("{k}") {
            return Err(Error::invalid(
                "SEXTANT_SHARD_FUNCTION",
                format!("{pattern:?} has no {{k}}: name the shard functions with {{k}} where the shard number goes"),
            ));
        }
        if deadline.is_zero() {
            return Err(Error::invalid("SEXTANT_SHARD_DEADLINE_MS", "a deadline of 0 ms leaves out every shard"));
        }
        Ok(ShardFunctions { pattern: pattern.to_string(), deadline, sdk })
    }

    /// The function of shard `k` of index `index`.
    pub fn name(&self, index: &str, k: usize) -> String {
        self.pattern.replace("{index}", index).replace("{k}", &k.to_string())
    }

    /// How long a search waits for its shards: one that has not answered by then is left out.
    pub fn deadline(&self) -> Duration {
        self.deadline
    }

    /// A client of each of the `pointer.shards` shard functions of `index`, in shard order,
    /// asked about the version `pointer` names.
    pub fn shards(&self, index: &str, pointer: &Pointer) -> Vec<Arc<dyn Shard>> {
        (0..pointer.shards)
            .map(|k| {
                Arc::new(LambdaShard::new(&self.sdk, &self.name(index, k), pointer, self.deadline)) as Arc<dyn Shard>
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The payload keeps the question unchanged and names the version, so that a shard
    /// can refuse or load the build the router asks about.
    #[test]
    fn an_invocation_names_its_version_and_crosses_json_unchanged() {
        let request: ShardRequest = serde_json::from_value(serde_json::json!({
            "op": "dense", "chunks": [3, 1], "queries": [[0.5, -0.25]], "nearest": false
        }))
        .unwrap_or_else(|_| panic!("a dense question"));
        let sent = ShardInvocation { version: "v1".into(), root_sha256: "ab".into(), request };
        let got: ShardInvocation = serde_json::from_slice(&serde_json::to_vec(&sent).unwrap()).unwrap();
        assert_eq!(serde_json::to_value(&got).unwrap(), serde_json::to_value(&sent).unwrap());
        let p = got.pointer();
        assert_eq!((p.version.as_str(), p.manifest_sha256.as_str()), ("v1", "ab"));
    }

    #[tokio::test]
    async fn shard_functions_are_named_by_number_and_index() {
        let sdk = aws_config::SdkConfig::builder().build();
        let f = ShardFunctions::new("prod-{index}-shard-{k}", Duration::from_secs(2), sdk.clone()).unwrap();
        assert_eq!(f.name("demo", 3), "prod-demo-shard-3");
        for (pattern, ms, field) in
            [("prod-shard", 2000, "SEXTANT_SHARD_FUNCTION"), ("s-{k}", 0, "SEXTANT_SHARD_DEADLINE_MS")]
        {
            let e = ShardFunctions::new(pattern, Duration::from_millis(ms), sdk.clone()).err().unwrap().to_string();
            assert!(e.contains(field), "{e}");
        }
    }
}
