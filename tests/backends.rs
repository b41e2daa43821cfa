//! End-to-end: `sextant` encodes on ONNX Runtime or tract as `--backend` /
//! `SEXTANT_BACKEND` says, both give the same search results, and a missing or broken
//! ONNX Runtime library falls back to tract with one warning instead of failing.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn sextant(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_sextant"));
    cmd.args(args).env_remove("SEXTANT_BACKEND").env_remove("SEXTANT_ORT_LIB").env_remove("SEXTANT_LOG");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let o = cmd.output().expect("run sextant");
    assert!(o.status.success(), "sextant {args:?} failed:\n{}", String::from_utf8_lossy(&o.stderr));
    o
}

/// The first `n` documents of the bundled demo corpus.
fn write_docs(path: &Path, n: usize) {
    let f = std::fs::File::open(repo().join("data/demo/documents.jsonl.gz")).unwrap();
    let mut out = std::fs::File::create(path).unwrap();
    for line in BufReader::new(flate2::read::GzDecoder::new(f)).lines().take(n) {
        writeln!(out, "{}", line.unwrap()).unwrap();
    }
}

/// Builds `docs` into `out` and returns the build report.
fn build(docs: &Path, out: &Path, backend: &str, env: &[(&str, &str)]) -> (Value, String) {
    let args =
        ["--backend", backend, "build", "--docs", docs.to_str().unwrap(), "--out", out.to_str().unwrap(), "--json"];
    let o = sextant(&args, env);
    (serde_json::from_slice(&o.stdout).unwrap(), String::from_utf8_lossy(&o.stderr).into_owned())
}

fn top_ids(index: &Path, backend: &str, query: &str) -> Vec<String> {
    let o = sextant(
        &["--backend", backend, "search", "--index", index.to_str().unwrap(), "--json", "--top-k", "5", query],
        &[],
    );
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    v["hits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| format!("{} {}", h["documentId"], &h["text"].as_str().unwrap()[..40]))
        .collect()
}

#[test]
fn both_backends_build_and_search_alike() {
    let tmp = tempfile::tempdir().unwrap();
    let docs = tmp.path().join("docs.jsonl");
    write_docs(&docs, 6);
    let (ort_dir, tract_dir) = (tmp.path().join("ort"), tmp.path().join("tract"));
    let (ort, _) = build(&docs, &ort_dir, "onnxruntime", &[]);
    let (tract, _) = build(&docs, &tract_dir, "tract", &[]);
    assert_eq!(ort["backend"], "onnxruntime", "CI fetches ONNX Runtime's library: {ort}");
    assert_eq!(tract["backend"], "tract");
    assert_eq!(ort["chunks"], tract["chunks"]);
    for query in ["revenue recognition for subscriptions", "risks from foreign currency exchange rates"] {
        // Each index searched with its own backend: the same passages in the same order.
        assert_eq!(top_ids(&ort_dir, "onnxruntime", query), top_ids(&tract_dir, "tract", query), "{query}");
        // And an index built on one backend serves queries encoded on the other.
        assert_eq!(top_ids(&ort_dir, "tract", query), top_ids(&ort_dir, "onnxruntime", query), "{query}");
    }
}

#[test]
fn a_missing_or_broken_onnxruntime_library_falls_back_to_tract_with_one_warning() {
    let tmp = tempfile::tempdir().unwrap();
    let docs = tmp.path().join("docs.jsonl");
    write_docs(&docs, 2);
    let broken = tmp.path().join("libonnxruntime.so");
    std::fs::write(&broken, b"this is not a shared library").unwrap();
    let missing = tmp.path().join("nowhere/libonnxruntime.so");
    for (lib, why) in [(&broken, "cannot load"), (&missing, "no libonnxruntime.so")] {
        for choice in ["onnxruntime", "auto"] {
            let out = tmp.path().join(format!("index-{choice}-{}", why.len()));
            let (report, stderr) = build(&docs, &out, choice, &[("SEXTANT_ORT_LIB", lib.to_str().unwrap())]);
            assert_eq!(report["backend"], "tract", "{stderr}");
            let lines: Vec<&str> = stderr.lines().filter(|l| l.contains("ONNX Runtime")).collect();
            assert_eq!(lines.len(), 1, "one line about ONNX Runtime:\n{stderr}");
            assert!(
                lines[0].contains("WARN") && lines[0].contains(why) && lines[0].contains("encoding with tract"),
                "{}",
                lines[0]
            );
        }
    }
}

#[test]
fn an_unknown_backend_is_refused_with_the_choices() {
    let o = Command::new(env!("CARGO_BIN_EXE_sextant"))
        .args(["--backend", "cuda", "search", "--index", ".", "q"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("cuda") && err.contains("auto") && err.contains("onnxruntime") && err.contains("tract"),
        "{err}"
    );
}
