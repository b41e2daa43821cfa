//! Secrets Manager: a secret read once at cold start (`GetSecretValue`), so that a key
//! never sits in a function's environment, where anyone allowed
//! `lambda:GetFunctionConfiguration` reads it.

use aws_config::SdkConfig;
use sextant_core::error::{Error, Result};

/// The `SecretString` of the secret `id` (its name or ARN), read with `sdk`'s region,
/// credentials and endpoint (`AWS_ENDPOINT_URL_SECRETS_MANAGER` for a compatible server).
/// Fails, naming the secret but never its value, when it cannot be read, holds only
/// binary data, or is empty.
pub async fn secret_string(sdk: &SdkConfig, id: &str) -> Result<String> {
    let failed = |reason: String| Error::Component { component: format!("secret {id}"), reason };
    let client = aws_sdk_secretsmanager::Client::new(sdk);
    let out = client.get_secret_value().secret_id(id).send().await.map_err(|e| {
        let e = aws_sdk_secretsmanager::error::DisplayErrorContext(e);
        failed(format!("could not be read (secretsmanager:GetSecretValue): {e}"))
    })?;
    match out.secret_string.map(|s| s.trim().to_string()) {
        Some(s) if !s.is_empty() => Ok(s),
        Some(_) => Err(failed("is empty".into())),
        None => Err(failed("holds no SecretString (binary secrets are not read)".into())),
    }
}
