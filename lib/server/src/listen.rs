//! Serving the router on a TCP listener with the limits a public endpoint needs (the
//! local `serve`; on Lambda, API Gateway holds the connections):
//!
//! - **a header read timeout** ([`ConnectionLimits::header_read`]): a request head must
//!   arrive in full within it. hyper starts it whenever the connection waits for a request
//!   head, the first one or the next one on a kept-alive connection, so it is also the
//!   **idle timeout**: a connection that sends nothing is closed when it runs out;
//! - **a body read timeout** (`ApiConfig::body_read_timeout`, enforced where the body is
//!   read, so on Lambda too): a 408 in the error envelope;
//! - **a connection cap** ([`ConnectionLimits::max_connections`]): one connection more is
//!   answered a 503 with `Retry-After` in the envelope and closed.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

/// Connection limits of [`serve`].
#[derive(Debug, Clone, Copy)]
pub struct ConnectionLimits {
    /// Time for a request head to arrive, and for an idle connection to send one.
    pub header_read: Duration,
    /// Connections open at once.
    pub max_connections: usize,
}

impl Default for ConnectionLimits {
    /// 10 s for a head (and idle), 1,024 connections.
    fn default() -> Self {
        ConnectionLimits { header_read: Duration::from_secs(10), max_connections: 1024 }
    }
}

/// The answer to a connection over the cap, in the error envelope.
const OVER_CAPACITY: &str = concat!(
    "HTTP/1.1 503 Service Unavailable\r\n",
    "Content-Type: application/json\r\n",
    "Retry-After: 1\r\n",
    "Connection: close\r\n",
    "Cache-Control: no-store\r\n",
    "X-Content-Type-Options: nosniff\r\n",
    "Content-Length: 125\r\n\r\n",
    r#"{"success":false,"error":{"code":"unavailable","message":"too many open connections; retry after 1 second","requestId":null}}"#,
);

/// Serves `app` on `listener` within `limits` until `shutdown` completes; connections open
/// then are left to finish.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    limits: ConnectionLimits,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    let open = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    tokio::pin!(shutdown);
    loop {
        let (mut stream, _) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                // Out of descriptors and the like: wait, and keep serving the others.
                Err(e) => {
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut shutdown => return Ok(()),
        };
        let Ok(permit) = open.clone().try_acquire_owned() else {
            tokio::spawn(async move {
                let _ = tokio::time::timeout(Duration::from_secs(1), stream.write_all(OVER_CAPACITY.as_bytes())).await;
                let _ = stream.shutdown().await;
            });
            continue;
        };
        let service = TowerToHyperService::new(app.clone());
        tokio::spawn(async move {
            let _permit = permit;
            let connection = http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(limits.header_read)
                .keep_alive(true)
                .serve_connection(TokioIo::new(stream), service);
            if let Err(e) = connection.await {
                tracing::debug!(error = %e, "connection closed");
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_over_capacity_answer_is_a_whole_response_in_the_envelope() {
        let (head, body) = OVER_CAPACITY.split_once("\r\n\r\n").unwrap();
        let declared: usize = head.lines().find_map(|l| l.strip_prefix("Content-Length: ")).unwrap().parse().unwrap();
        assert_eq!(declared, body.len());
        let v: serde_json::Value = serde_json::from_str(body).unwrap();
        assert_eq!(v["error"]["code"], "unavailable");
    }
}
