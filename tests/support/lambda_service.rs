//! The Lambda service's `Invoke` for tests: `POST /2015-03-31/functions/{name}/invocations`
//! hands the payload to the named function's Runtime API emulator ([`RuntimeApi`]) and
//! answers as the service does: `200` with the function's response, or `200` with
//! `X-Amz-Function-Error: Unhandled` and its error; `404` (`ResourceNotFoundException`) for a
//! function it does not know. The official SDK's client (`aws-sdk-lambda`) talks to it
//! through `AWS_ENDPOINT_URL_LAMBDA`.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::Router;

use super::runtime_api::RuntimeApi;

/// A running `Invoke` endpoint.
pub struct LambdaService {
    /// `http://127.0.0.1:PORT`, for `AWS_ENDPOINT_URL_LAMBDA`.
    pub url: String,
}

type Functions = Arc<HashMap<String, (Arc<RuntimeApi>, Duration)>>;

impl LambdaService {
    /// Serves `functions` (name, its emulator, how long an invocation may run before the
    /// service gives up on it) on a free loopback port, inside the current Tokio runtime.
    pub async fn start(functions: Vec<(String, Arc<RuntimeApi>, Duration)>) -> Self {
        let functions: Functions = Arc::new(functions.into_iter().map(|(n, api, t)| (n, (api, t))).collect());
        let app = Router::new().route("/2015-03-31/functions/{name}/invocations", post(invoke)).with_state(functions);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        LambdaService { url }
    }
}

async fn invoke(State(functions): State<Functions>, Path(name): Path<String>, body: Bytes) -> Response {
    let Some((api, timeout)) = functions.get(&name) else {
        let message = format!("Function not found: arn:aws:lambda:us-east-1:000000000000:function:{name}");
        return (
            StatusCode::NOT_FOUND,
            [("x-amzn-errortype", "ResourceNotFoundException"), ("content-type", "application/json")],
            serde_json::json!({"Type": "User", "Message": message}).to_string(),
        )
            .into_response();
    };
    let event: serde_json::Value = serde_json::from_slice(&body).unwrap_or(serde_json::Value::Null);
    match api.invoke(event, *timeout).await {
        Ok(answer) => ([("content-type", "application/json")], answer.to_string()).into_response(),
        Err(error) => {
            ([("x-amz-function-error", "Unhandled"), ("content-type", "application/json")], error.to_string())
                .into_response()
        }
    }
}
