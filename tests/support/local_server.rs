//! The real `sextant serve` on a free port of loopback, and plain HTTP/1.1 to it: the
//! end-to-end tests of the local server share these.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// A running `sextant serve`, killed on drop.
pub struct Server {
    /// The process.
    pub child: Child,
    /// Its address, `127.0.0.1:PORT`.
    pub addr: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The repository's root.
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// An answer: its status, its headers (names in lower case) and its body as JSON (`null`
/// when empty, a string when it is not JSON).
#[derive(Debug)]
pub struct Resp {
    /// The HTTP status.
    pub status: u16,
    /// The headers, names in lower case.
    pub headers: Vec<(String, String)>,
    /// The body.
    pub body: Value,
}

impl Resp {
    /// Header `name` (lower case), when the answer has it.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }
}

/// Reads an answer's bytes into a [`Resp`]; `None` when they hold no status line.
pub fn parse_answer(raw: &[u8]) -> Option<Resp> {
    let text = String::from_utf8_lossy(raw).to_string();
    let (head, payload) = text.split_once("\r\n\r\n")?;
    let mut lines = head.lines();
    let status: u16 = lines.next()?.split(' ').nth(1)?.parse().ok()?;
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let body = if payload.trim().is_empty() {
        Value::Null
    } else {
        serde_json::from_str(payload).unwrap_or(Value::String(payload.to_string()))
    };
    Some(Resp { status, headers, body })
}

/// One HTTP/1.1 request over a fresh connection; `None` when the server is gone.
pub fn try_http(addr: &str, method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> Option<Resp> {
    let mut s = TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(120))).unwrap();
    let mut req =
        format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Length: {}\r\n", body.len());
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    s.write_all(req.as_bytes()).ok()?;
    s.write_all(body).ok()?;
    parse_answer(&read_answer(&mut s)?)
}

/// An answer's bytes: up to the end of its `Content-Length` body, or to the end of the
/// connection, whichever comes first (chromedriver says `Connection: close` but keeps the
/// connection open; a server killed mid-answer leaves what it sent). `None` on a read
/// error or timeout.
fn read_answer(s: &mut TcpStream) -> Option<Vec<u8>> {
    let mut raw = Vec::new();
    let mut buf = [0u8; 64 * 1024];
    let mut want: Option<usize> = None;
    loop {
        if want.is_none() {
            if let Some(i) = raw.windows(4).position(|w| w == b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&raw[..i]).to_string();
                // Written with or without a space after the colon, in any case.
                let length = head
                    .lines()
                    .filter_map(|l| l.split_once(':'))
                    .find(|(k, _)| k.trim().eq_ignore_ascii_case("content-length"))
                    .and_then(|(_, v)| v.trim().parse::<usize>().ok());
                want = Some(length.map_or(usize::MAX, |n| i + 4 + n));
            }
        }
        if want.is_some_and(|w| raw.len() >= w) {
            return Some(raw);
        }
        match s.read(&mut buf) {
            Ok(0) => return Some(raw),
            Ok(n) => raw.extend_from_slice(&buf[..n]),
            Err(_) => return None,
        }
    }
}

/// [`try_http`], panicking when there is no answer.
pub fn http(addr: &str, method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> Resp {
    try_http(addr, method, path, headers, body).unwrap_or_else(|| panic!("{method} {path}: no answer"))
}

/// `sextant serve` over the index of three companies of the bundled demo corpus (MA, XOM,
/// ORCL, with their facts), built once and cached, with `extra` arguments; returned once
/// every retrieval path serves and the documents of index `demo` can be read with `key`.
pub fn start_demo(key: &str, extra: &[&std::ffi::OsStr]) -> Server {
    start_demo_with_env(key, extra, &[])
}

/// [`start_demo`] with these environment variables set for the server (`SEXTANT_LOG`, ...).
pub fn start_demo_with_env(key: &str, extra: &[&std::ffi::OsStr], env: &[(&str, &str)]) -> Server {
    let mut args: Vec<&std::ffi::OsStr> =
        ["--docs", "data/demo/documents.jsonl.gz", "--ticker", "MA", "--ticker", "XOM"]
            .iter()
            .chain(&["--ticker", "ORCL", "--facts", "data/demo/facts.jsonl.gz"])
            .map(std::ffi::OsStr::new)
            .collect();
    args.extend_from_slice(extra);
    start_serving(&args, env, key, "demo")
}

/// `sextant serve --addr 127.0.0.1:0` with `args`, run from the repository; returned once
/// every retrieval path serves and the documents of `index` can be read with `key`.
pub fn start_serving(args: &[&std::ffi::OsStr], env: &[(&str, &str)], key: &str, index: &str) -> Server {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_sextant"));
    cmd.current_dir(repo())
        .envs(env.iter().copied())
        .args(["serve", "--addr", "127.0.0.1:0"])
        .args(args)
        .stdout(Stdio::piped());
    let mut child = cmd.spawn().expect("start sextant serve");
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    let addr = line.split("http://").nth(1).and_then(|r| r.split_whitespace().next()).expect("an address").to_string();
    std::thread::spawn(move || for _ in out.lines() {});
    let server = Server { child, addr };
    let t = Instant::now();
    let auth = format!("Bearer {key}");
    let ready = format!("/v1/indexes/{index}/documents?limit=1");
    loop {
        // Writable once every path is served (the document store opens then).
        let r = try_http(&server.addr, "GET", &ready, &[("Authorization", &auth)], b"");
        if r.as_ref().is_some_and(|r| r.status == 200) {
            return server;
        }
        assert!(t.elapsed() < Duration::from_secs(900), "not serving after 15 minutes: {r:?}");
        std::thread::sleep(Duration::from_millis(300));
    }
}
