//! End-to-end: `sextant build` on real filings cuts long sections without losing text,
//! gives the same index files with worker processes as without (a worker that fails is
//! retried), reuses every vector it has, publishes nothing when nothing changed, and
//! refuses a corpus with a bad line without touching the index; and a built index loads
//! within the memory rule the functions size their loads by.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn sextant(args: &[&str], env: &[(&str, &Path)]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_sextant"));
    cmd.args(args).env_remove("RUST_BACKTRACE");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("run sextant")
}

/// Runs a build with `--json` and returns its report.
fn build(docs: &Path, out: &Path, extra: &[&str], env: &[(&str, &Path)]) -> Value {
    let mut args = vec!["build", "--docs", docs.to_str().unwrap(), "--out", out.to_str().unwrap(), "--json"];
    args.extend(["--shard-chunks", "12"]);
    args.extend(extra);
    let o = sextant(&args, env);
    assert!(o.status.success(), "sextant {args:?} failed:\n{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).unwrap()
}

/// The first 40 characters of each of the top 10 passages of `query` in `index`.
fn top_passages(index: &Path, query: &str) -> Vec<String> {
    let o = sextant(&["search", "--index", index.to_str().unwrap(), "--json", query], &[]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    v["hits"].as_array().unwrap().iter().map(|h| h["text"].as_str().unwrap().chars().take(40).collect()).collect()
}

/// The first `n` documents of the bundled demo corpus (10-K sections, many far longer than
/// a chunk).
fn write_docs(path: &Path, skip: usize, n: usize) {
    let f = std::fs::File::open(repo().join("data/demo/documents.jsonl.gz")).unwrap();
    let lines = BufReader::new(flate2::read::GzDecoder::new(f)).lines().skip(skip).take(n);
    let mut out = std::fs::File::create(path).unwrap();
    for line in lines {
        writeln!(out, "{}", line.unwrap()).unwrap();
    }
}

/// Every file of an index directory but the report and the manifest's timestamp.
fn files(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().unwrap() != "build_report.json")
        .map(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            let mut bytes = std::fs::read(&p).unwrap();
            if name == "manifest.json" {
                let mut m: Value = serde_json::from_slice(&bytes).unwrap();
                m["created_unix"] = Value::Null;
                bytes = serde_json::to_vec(&m).unwrap();
            }
            (name, bytes)
        })
        .collect();
    out.sort();
    out
}

#[test]
fn builds_are_lossless_identical_across_workers_incremental_and_refuse_bad_input() {
    let tmp = std::env::temp_dir().join(format!("sextant-build-e2e-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp).unwrap();
    let docs = tmp.join("docs.jsonl");
    write_docs(&docs, 0, 2);

    // One process.
    let one = tmp.join("one");
    let r1 = build(&docs, &one, &[], &[]);
    let chunks = r1["chunks"].as_u64().unwrap();
    assert_eq!(r1["tokens_beyond_window"], 0, "{r1}");
    assert_eq!((r1["chunks_encoded"].as_u64(), r1["chunks_reused"].as_u64()), (Some(chunks), Some(0)));
    assert!(r1["shards"].as_u64().unwrap() >= 3, "{r1}");
    let on_disk: Value = serde_json::from_slice(&std::fs::read(one.join("build_report.json")).unwrap()).unwrap();
    assert_eq!(
        (&on_disk["chunks"], &on_disk["chunks_encoded"], &on_disk["shards"]),
        (&r1["chunks"], &r1["chunks_encoded"], &r1["shards"])
    );

    // Three worker processes, the first of which fails once: the same files, byte for byte,
    // on tract. (ONNX Runtime's outputs can move in their last bits with the thread count,
    // which the workers split between them: a SPLADE weight at the 1e-3 cut then comes or
    // goes. There the same passages must rank the same, checked next.)
    let tract_one = tmp.join("tract-one");
    build(&docs, &tract_one, &["--backend", "tract"], &[]);
    let three = tmp.join("three");
    let marker = tmp.join("failed-once");
    let r3 = build(&docs, &three, &["--workers", "3", "--backend", "tract"], &[("SEXTANT_FAIL_ONCE", &marker)]);
    assert!(marker.exists(), "a worker failed once");
    assert_eq!((r3["workers"].as_u64(), r3["chunks"].as_u64()), (Some(3), Some(chunks)));
    assert_eq!(r3["backend"], "tract");
    let (a, b) = (files(&tract_one), files(&three));
    assert_eq!(a.iter().map(|f| &f.0).collect::<Vec<_>>(), b.iter().map(|f| &f.0).collect::<Vec<_>>());
    for ((name, x), (_, y)) in a.iter().zip(&b) {
        assert!(x == y, "{name} differs between --workers 1 and --workers 3");
    }
    let ort_three = tmp.join("ort-three");
    let r = build(&docs, &ort_three, &["--workers", "3"], &[]);
    assert_eq!(r["backend"], r1["backend"]);
    for query in ["revenue growth drivers", "risk factors about competition"] {
        assert_eq!(top_passages(&one, query), top_passages(&ort_three, query), "{query}");
    }

    // One document more: only its chunks are encoded.
    let more = tmp.join("more.jsonl");
    write_docs(&more, 0, 3);
    // A dry run tells what the build would encode, and writes nothing.
    let before = files(&one);
    let dry = build(&more, &one, &["--dry-run"], &[]);
    assert_eq!(files(&one), before);
    let r = build(&more, &one, &[], &[]);
    let added = r["chunks"].as_u64().unwrap() - chunks;
    assert_eq!((dry["chunks"].as_u64(), dry["chunks_encoded"].as_u64()), (Some(chunks + added), Some(added)), "{dry}");
    assert_eq!(dry["tokens_beyond_window"], 0);
    assert!(added > 0);
    assert_eq!((r["chunks_encoded"].as_u64(), r["chunks_reused"].as_u64()), (Some(added), Some(chunks)), "{r}");

    // Nothing changed: nothing encoded, nothing written.
    let manifest = std::fs::read(one.join("manifest.json")).unwrap();
    let r = build(&more, &one, &["--workers", "2"], &[]);
    assert_eq!(r["unchanged"], true, "{r}");
    assert_eq!(r["chunks_encoded"], 0);
    assert_eq!(std::fs::read(one.join("manifest.json")).unwrap(), manifest);

    // A bad line fails the build with its file and line, and the index stays as it was.
    let mut f = std::fs::OpenOptions::new().append(true).open(&more).unwrap();
    writeln!(f, r#"{{"documentId": "bad", "segments": [1]}}"#).unwrap();
    let o = sextant(&["build", "--docs", more.to_str().unwrap(), "--out", one.to_str().unwrap()], &[]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(err.contains("more.jsonl line 4"), "{err}");
    assert_eq!(std::fs::read(one.join("manifest.json")).unwrap(), manifest);
    let _ = std::fs::remove_dir_all(&tmp);
}

#[test]
fn a_folder_builds_every_file_it_reads_and_reports_every_file_it_does_not() {
    let tmp = tempfile::tempdir().unwrap();
    let docs = tmp.path().join("docs");
    for (rel, text) in [
        ("guides/setup.md", "---\nteam: platform\n---\n# Setup\n\nInstall the agent, then run it once as root."),
        ("guides/setup.md.meta.json", r#"{"audience": "operators"}"#),
        ("faq.html", "<h1>FAQ</h1><p>Backups run nightly at two in the morning.</p>"),
        ("scan.pdf", "%PDF-1.7"),
        ("empty.txt", "  "),
    ] {
        let path = docs.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    let out = tmp.path().join("index");
    let report = build(&docs, &out, &[], &[]);
    assert_eq!(report["documents"], 2, "{report}");
    let skipped: Vec<(&str, &str)> = report["skipped_files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["path"].as_str().unwrap(), s["reason"].as_str().unwrap()))
        .collect();
    assert_eq!(skipped.iter().map(|s| s.0).collect::<Vec<_>>(), ["empty.txt", "scan.pdf"], "{report}");
    assert!(skipped[1].1.contains("PDF"), "{skipped:?}");
    // The report on disk says the same, and the files are searched under their paths.
    let on_disk: Value = serde_json::from_slice(&std::fs::read(out.join("build_report.json")).unwrap()).unwrap();
    assert_eq!(on_disk["skipped_files"], report["skipped_files"]);
    let o = sextant(&["search", "--index", out.to_str().unwrap(), "--json", "when do backups run"], &[]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["hits"][0]["documentId"], "faq.html", "{v}");
}

/// Each hit of `query` in `index` as `sextant search --json` prints it: document, text,
/// score and every path's rank and score.
fn hits(index: &Path, query: &str) -> Value {
    let o = sextant(&["search", "--index", index.to_str().unwrap(), "--json", query], &[]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice::<Value>(&o.stdout).unwrap()["hits"].clone()
}

#[test]
fn a_sharded_build_answers_as_the_single_index_and_changing_the_shard_count_encodes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let docs = tmp.path().join("docs.jsonl");
    write_docs(&docs, 0, 30);
    let (single, sharded) = (tmp.path().join("single"), tmp.path().join("sharded"));
    build(&docs, &single, &[], &[]);
    let first = build(&docs, &sharded, &["--shards", "3"], &[]);
    assert!(first["chunks_encoded"].as_u64().unwrap() > 0);
    assert!(sharded.join("root.json").is_file());
    for k in 0..3 {
        assert!(sharded.join(format!("shards/{k:03}/manifest.json")).is_file(), "shard {k}");
    }
    let queries = ["revenue growth in the quarter", "risk factors and interest rates", "cash dividends paid"];
    let want: Vec<Value> = queries.iter().map(|q| hits(&single, q)).collect();
    for (q, w) in queries.iter().zip(&want) {
        assert!(!w.as_array().unwrap().is_empty(), "{q}");
        assert_eq!(&hits(&sharded, q), w, "3 shards: {q}");
    }
    // The vectors are keyed by content: another shard count, then a single index, in the
    // same directory encode nothing and answer the same.
    let two = build(&docs, &sharded, &["--shards", "2"], &[]);
    assert_eq!(two["chunks_encoded"], 0, "{two}");
    let again = build(&docs, &sharded, &[], &[]);
    assert_eq!(again["chunks_encoded"], 0, "{again}");
    assert!(!sharded.join("root.json").exists(), "a single index is not shadowed by the old root");
    for (q, w) in queries.iter().zip(&want) {
        assert_eq!(&hits(&sharded, q), w, "single again: {q}");
    }
}

/// A function sizes its loads by a rule over the estimate a build records
/// (`sextant_aws::MemoryBudget`): a load of a small index, where fixed costs weigh most,
/// and a second load beside it must peak within what the rule allows, measured in a fresh
/// process by `sextant bench-load` (the process's own memory before loading left out).
#[test]
fn a_built_index_loads_once_and_twice_within_the_memory_rule() {
    let tmp = tempfile::tempdir().unwrap();
    let docs = tmp.path().join("docs.jsonl");
    write_docs(&docs, 0, 12);
    let out = tmp.path().join("index");
    build(&docs, &out, &[], &[]);
    let o = sextant(&["bench-load", "--index", out.to_str().unwrap()], &[]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    let f = |k: &str| v[k].as_f64().unwrap_or_else(|| panic!("no {k} in {v}"));
    assert!(f("estimate_mib") > 0.0, "{v}");
    assert!(f("once_mib") - f("idle_mib") <= f("rule_once_mib"), "one load over the rule: {v}");
    assert!(f("twice_mib") - f("idle_mib") <= f("rule_twice_mib"), "two loads over the rule: {v}");
}
