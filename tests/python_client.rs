//! The Python client (`clients/python`) against the real server: `sextant serve` on a free
//! port (the demo corpus's three companies, built once and cached as in `api_e2e`; writes in
//! a directory of the test's own), then the client's pytest suite from the venv of
//! `scripts/client_venv.sh` with the server's address and key. The suite runs the sync and
//! async clients, the LangChain and LlamaIndex retrievers through those packages' own APIs,
//! retries against the server's real load shedding (`--max-in-flight 1`), and the models
//! against the served `/openapi.json`. No test may be skipped here: a skip means the suite
//! did not see what it checks.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The development key the server is started with (plan `enterprise`: the suite sends more
/// than the free plan's 60 requests a minute).
const KEY: &str = "sx_python_client_tests";
/// One request in flight at a time, so that the suite can see the server shed a second.
const MAX_IN_FLIGHT: &str = "1";

/// The server process, killed when dropped (also on a failed assertion).
struct Server {
    child: Child,
    addr: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The client venv's python (`scripts/client_venv.sh`, run by `scripts/test.sh`).
fn client_python() -> String {
    let python = std::env::var("SEXTANT_CLIENT_PYTHON").unwrap_or_else(|_| {
        let cache = std::env::var("SEXTANT_CACHE_DIR")
            .unwrap_or_else(|_| format!("{}/.cache/sextant", std::env::var("HOME").unwrap()));
        format!("{cache}/venv-client/bin/python")
    });
    assert!(
        Path::new(&python).is_file(),
        "no client venv at {python}: run scripts/client_venv.sh (scripts/test.sh does)"
    );
    python
}

/// `GET /health`: status and body.
fn health(addr: &str) -> (u16, String) {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    write!(s, "GET /health HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").unwrap();
    let mut raw = String::new();
    s.read_to_string(&mut raw).expect("read /health");
    let status = raw.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    let body = raw.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default();
    (status, body)
}

/// Starts `sextant serve` and returns once every retrieval path is served.
fn serve(data_dir: &Path) -> Server {
    let mut child = Command::new(env!("CARGO_BIN_EXE_sextant"))
        .current_dir(repo())
        .args(["serve", "--addr", "127.0.0.1:0", "--docs", "data/demo/documents.jsonl.gz"])
        .args(["--ticker", "MA", "--ticker", "XOM", "--ticker", "ORCL", "--facts", "data/demo/facts.jsonl.gz"])
        .args(["--dev-key", KEY, "--dev-plan", "enterprise", "--max-in-flight", MAX_IN_FLIGHT])
        .arg("--data-dir")
        .arg(data_dir)
        // Warnings only: no access line for each of the suite's requests.
        .env("SEXTANT_LOG", "warn")
        .stdout(Stdio::piped())
        .spawn()
        .expect("start sextant serve");
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    let addr = line
        .split("http://")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .unwrap_or_else(|| panic!("no address in {line:?}"))
        .to_string();
    std::thread::spawn(move || for _ in out.lines() {});
    let server = Server { child, addr };
    let t = Instant::now();
    loop {
        let (status, body) = health(&server.addr);
        if status == 200 && body.contains("\"degraded\":false") {
            return server;
        }
        assert!(status == 200 || status == 503, "health while loading: {status} {body}");
        assert!(t.elapsed() < Duration::from_secs(900), "index not ready after 15 minutes");
        std::thread::sleep(Duration::from_millis(500));
    }
}

#[test]
fn the_python_client_passes_its_suite_against_a_live_server() {
    let python = client_python();
    let data = tempfile::tempdir().unwrap();
    let server = serve(data.path());
    let started = Instant::now();
    let out = Command::new(&python)
        .current_dir(repo().join("clients/python"))
        .args(["-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", "tests"])
        .env("SEXTANT_BASE_URL", format!("http://{}", server.addr))
        .env("SEXTANT_API_KEY", KEY)
        .env("SEXTANT_TEST_INDEX", "demo")
        .env("SEXTANT_MAX_IN_FLIGHT", MAX_IN_FLIGHT)
        // The suite checks that the venv's package is this checkout's.
        .env("SEXTANT_CLIENT_SRC", repo().join("clients/python/src"))
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output()
        .expect("run pytest");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "the Python client's tests failed ({}):\n{stdout}\n{stderr}", out.status);
    let summary = stdout.lines().rev().find(|l| l.contains(" passed")).unwrap_or_default();
    println!("pytest ({python}, {:.1} s): {summary}", started.elapsed().as_secs_f64());
    assert!(!summary.contains("skipped"), "no test may be skipped against this server:\n{stdout}");
    let passed: u32 = summary.trim_start_matches('=').split_whitespace().next().unwrap_or("0").parse().unwrap_or(0);
    assert!(passed >= 100, "{passed} tests passed; the suite has more:\n{stdout}");
}
