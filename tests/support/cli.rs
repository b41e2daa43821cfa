//! The `sextant` binary as a command, and the shared data beside the repository: the
//! end-to-end tests of the command line share these.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::{json, Value};

use super::local_server::repo;

/// The shared data (`../shared`, or `$SEXTANT_SHARED_DIR`).
pub fn shared() -> PathBuf {
    std::env::var_os("SEXTANT_SHARED_DIR").map(PathBuf::from).unwrap_or_else(|| repo().join("../shared"))
}

/// Runs `sextant` with `args`.
pub fn sextant(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_sextant")).args(args).output().expect("run sextant")
}

/// Runs `sextant` and returns its stdout; fails the test when it fails.
pub fn ok(args: &[&str]) -> String {
    let out = sextant(args);
    assert!(out.status.success(), "sextant {args:?} failed:\n{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

/// Makes the financial dev sets (`scripts/data/build_devsets.py`, from the shared data) in `out`:
/// `out/fin-filings`, `out/fin-calls`.
pub fn build_devsets(out: &Path) {
    let made = Command::new("python3")
        .arg(repo().join("scripts/data/build_devsets.py"))
        .args(["--data", shared().join("data").to_str().unwrap(), "--out", out.to_str().unwrap()])
        .output()
        .expect("run python3");
    assert!(made.status.success(), "build_devsets.py failed:\n{}", String::from_utf8_lossy(&made.stderr));
}

/// The first 30 filing sections of the demo corpus (Apple's 10-K and 10-Q, FY2024 and
/// FY2025) written to `dir/docs.jsonl` and built under `dir` as one index and as 3 shards
/// (the sharded build reusing the single one's vectors): their directories.
pub fn apple_single_and_sharded(dir: &Path) -> (PathBuf, PathBuf) {
    use std::io::{BufRead, BufReader};
    let docs = dir.join("docs.jsonl");
    let lines = BufReader::new(flate2::read::GzDecoder::new(
        std::fs::File::open(repo().join("data/demo/documents.jsonl.gz")).unwrap(),
    ))
    .lines()
    .take(30)
    .map(|l| l.unwrap() + "\n")
    .collect::<String>();
    std::fs::write(&docs, lines).unwrap();
    let (single, sharded) = (dir.join("single"), dir.join("sharded"));
    let build = |out: &Path, extra: &[&str]| {
        let o = Command::new(env!("CARGO_BIN_EXE_sextant"))
            .args(["build", "--id", "apple", "--docs"])
            .arg(&docs)
            .arg("--out")
            .arg(out)
            .args(extra)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    };
    build(&single, &[]);
    // The single index's vectors, reused: the sharded build encodes nothing.
    std::fs::create_dir(&sharded).unwrap();
    for f in std::fs::read_dir(&single).unwrap().map(|e| e.unwrap().path()) {
        std::fs::copy(&f, sharded.join(f.file_name().unwrap())).unwrap();
    }
    build(&sharded, &["--shards", "3"]);
    assert!(sharded.join("root.json").is_file());
    (single, sharded)
}

/// Searches that every way of serving the Apple index must answer alike: filters, a
/// metadata `like`, rerank off.
pub fn apple_requests() -> Vec<(&'static str, Value)> {
    vec![
        ("/v1/retrieve", json!({"query": "How much did iPhone net sales change?", "top_k": 8})),
        ("/v1/retrieve", json!({"query": "legal proceedings", "filters": {"year": 2025}, "include_segments": true})),
        ("/v1/retrieve", json!({"query": "risk factors", "rerank": false})),
        ("/v1/search", json!({"query": "share repurchase program", "limit": 10})),
        (
            "/v1/search",
            json!({"query": "cybersecurity risk management", "metadata": {"title": {"like": "Apple Inc. 10-K%"}}}),
        ),
    ]
    .into_iter()
    .map(|(path, mut body)| {
        body["index"] = json!("apple");
        (path, body)
    })
    .collect()
}
