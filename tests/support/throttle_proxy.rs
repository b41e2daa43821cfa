//! An HTTP proxy in front of a DynamoDB server that can answer requests with DynamoDB's
//! throttling error (HTTP 400, `ThrottlingException`), as DynamoDB does when a table's
//! throughput is exceeded; other requests go through to the server. One request per
//! connection (`Connection: close`), so attempts are counted exactly.

use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const THROTTLED: &str = concat!(
    r#"{"__type":"com.amazonaws.dynamodb.v20120810#ThrottlingException","#,
    r#""message":"Rate of requests exceeds the allowed throughput."}"#
);

/// A running proxy.
pub struct ThrottleProxy {
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    /// Requests still to throttle (negative: all).
    budget: Arc<AtomicI64>,
    throttled: Arc<AtomicUsize>,
}

/// Reads one HTTP message (head and a `Content-Length` body); `None` at end of stream.
async fn read_message(s: &mut TcpStream) -> Option<(String, Vec<u8>)> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        let n = s.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
    let len = head
        .lines()
        .find_map(|l| {
            l.split_once(':')
                .filter(|(k, _)| k.trim().eq_ignore_ascii_case("content-length"))
                .map(|(_, v)| v.trim().parse::<usize>().unwrap_or(0))
        })
        .unwrap_or(0);
    let mut body = buf[head_end..].to_vec();
    while body.len() < len {
        let n = s.read(&mut chunk).await.ok()?;
        if n == 0 {
            break;
        }
        body.extend_from_slice(&chunk[..n]);
    }
    Some((head, body))
}

/// `head` with any `Connection` header replaced by `Connection: close`.
fn closing(head: &str) -> String {
    let mut lines: Vec<&str> =
        head.trim_end().lines().filter(|l| !l.to_ascii_lowercase().starts_with("connection:")).collect();
    lines.push("Connection: close");
    format!("{}\r\n\r\n", lines.join("\r\n"))
}

impl ThrottleProxy {
    /// Forwards a free loopback port to `target` (`host:port`), throttling nothing yet.
    pub async fn start(target: String) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let budget = Arc::new(AtomicI64::new(0));
        let throttled = Arc::new(AtomicUsize::new(0));
        let (b, t) = (budget.clone(), throttled.clone());
        tokio::spawn(async move {
            while let Ok((mut client, _)) = listener.accept().await {
                let (b, t, target) = (b.clone(), t.clone(), target.clone());
                tokio::spawn(async move {
                    let Some((head, body)) = read_message(&mut client).await else { return };
                    let throttle = b.load(Ordering::SeqCst) < 0
                        || b.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| (n > 0).then(|| n - 1)).is_ok();
                    if throttle {
                        t.fetch_add(1, Ordering::SeqCst);
                        let resp = format!(
                            "HTTP/1.1 400 Bad Request\r\nContent-Type: application/x-amz-json-1.0\r\n\
                             x-amzn-RequestId: throttled\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{THROTTLED}",
                            THROTTLED.len()
                        );
                        let _ = client.write_all(resp.as_bytes()).await;
                        return;
                    }
                    let Ok(mut server) = TcpStream::connect(&target).await else { return };
                    let _ = server.write_all(closing(&head).as_bytes()).await;
                    let _ = server.write_all(&body).await;
                    if let Some((rhead, rbody)) = read_message(&mut server).await {
                        let _ = client.write_all(closing(&rhead).as_bytes()).await;
                        let _ = client.write_all(&rbody).await;
                    }
                });
            }
        });
        ThrottleProxy { url, budget, throttled }
    }

    /// Throttles the next `n` requests.
    pub fn throttle_next(&self, n: i64) {
        self.budget.store(n, Ordering::SeqCst);
    }

    /// Throttles every request until [`ThrottleProxy::throttle_next`] says otherwise.
    pub fn throttle_all(&self) {
        self.budget.store(-1, Ordering::SeqCst);
    }

    /// How many requests were throttled so far.
    pub fn throttled(&self) -> usize {
        self.throttled.load(Ordering::SeqCst)
    }
}
