//! A Lambda Runtime API emulator for tests: the endpoints a function's runtime client
//! polls (`/2018-06-01/runtime/invocation/next`, `.../response`, `.../error`,
//! `/init/error`), fed by [`RuntimeApi::invoke`], which waits for the function's answer.
//! The real compiled function binaries run against it as they would on AWS Lambda.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use tokio::sync::{mpsc, oneshot};

/// What the function answered: its response, or its error (the runtime's JSON body).
pub type Outcome = Result<serde_json::Value, serde_json::Value>;

#[derive(Default)]
struct Shared {
    pending: Mutex<HashMap<String, oneshot::Sender<Outcome>>>,
    init_error: Mutex<Option<serde_json::Value>>,
    queue: tokio::sync::Mutex<Option<mpsc::UnboundedReceiver<(String, serde_json::Value)>>>,
}

/// A running emulator.
pub struct RuntimeApi {
    /// `127.0.0.1:PORT`, for `AWS_LAMBDA_RUNTIME_API`.
    pub addr: String,
    shared: Arc<Shared>,
    tx: mpsc::UnboundedSender<(String, serde_json::Value)>,
    counter: std::sync::atomic::AtomicU64,
}

impl RuntimeApi {
    /// Starts the emulator on a free loopback port (inside the current Tokio runtime).
    pub async fn start() -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        let shared = Arc::new(Shared { queue: tokio::sync::Mutex::new(Some(rx)), ..Default::default() });
        let app = Router::new()
            .route("/2018-06-01/runtime/invocation/next", get(next))
            .route("/2018-06-01/runtime/invocation/{id}/response", post(response))
            .route("/2018-06-01/runtime/invocation/{id}/error", post(error))
            .route("/2018-06-01/runtime/init/error", post(init_error))
            .with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        RuntimeApi { addr, shared, tx, counter: 0.into() }
    }

    /// Sends `event` to the function and waits up to `timeout` for its answer.
    pub async fn invoke(&self, event: serde_json::Value, timeout: Duration) -> Outcome {
        let id = format!("req-{}", self.counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst));
        let (done, wait) = oneshot::channel();
        self.shared.pending.lock().unwrap().insert(id.clone(), done);
        self.tx.send((id, event)).unwrap();
        match tokio::time::timeout(timeout, wait).await {
            Ok(Ok(outcome)) => outcome,
            Ok(Err(_)) => Err(serde_json::json!({"emulator": "the invocation was dropped"})),
            Err(_) => Err(serde_json::json!({
                "emulator": format!("no answer within {timeout:?}"),
                "init_error": self.init_error()
            })),
        }
    }

    /// The error the function reported at initialisation, if any.
    pub fn init_error(&self) -> Option<serde_json::Value> {
        self.shared.init_error.lock().unwrap().clone()
    }
}

async fn next(State(s): State<Arc<Shared>>) -> Response {
    let mut guard = s.queue.lock().await;
    let rx = guard.as_mut().expect("one poller at a time");
    let Some((id, event)) = rx.recv().await else { return StatusCode::GONE.into_response() };
    let deadline = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() + 900_000;
    let mut h = HeaderMap::new();
    h.insert("lambda-runtime-aws-request-id", id.parse().unwrap());
    h.insert("lambda-runtime-deadline-ms", deadline.to_string().parse().unwrap());
    h.insert(
        "lambda-runtime-invoked-function-arn",
        "arn:aws:lambda:us-east-1:000000000000:function:test".parse().unwrap(),
    );
    h.insert("lambda-runtime-trace-id", "Root=1-00000000-000000000000000000000000;Sampled=0".parse().unwrap());
    h.insert("content-type", "application/json".parse().unwrap());
    (h, event.to_string()).into_response()
}

fn finish(s: &Shared, id: &str, outcome: Outcome) -> StatusCode {
    match s.pending.lock().unwrap().remove(id) {
        Some(tx) => {
            let _ = tx.send(outcome);
            StatusCode::ACCEPTED
        }
        None => StatusCode::BAD_REQUEST,
    }
}

fn json(body: &Bytes) -> serde_json::Value {
    serde_json::from_slice(body)
        .unwrap_or_else(|_| serde_json::Value::String(String::from_utf8_lossy(body).into_owned()))
}

async fn response(State(s): State<Arc<Shared>>, Path(id): Path<String>, body: Bytes) -> StatusCode {
    finish(&s, &id, Ok(json(&body)))
}

async fn error(State(s): State<Arc<Shared>>, Path(id): Path<String>, body: Bytes) -> StatusCode {
    finish(&s, &id, Err(json(&body)))
}

async fn init_error(State(s): State<Arc<Shared>>, body: Bytes) -> StatusCode {
    *s.init_error.lock().unwrap() = Some(json(&body));
    let pending: Vec<_> = s.pending.lock().unwrap().drain().collect();
    for (_, tx) in pending {
        let _ = tx.send(Err(json(&body)));
    }
    StatusCode::ACCEPTED
}
