//! End-to-end: the real `sextant` binary writes plotted reports. `eval --report` on SciFact
//! train (over `scifact-half`, the half of its abstracts CI indexes, from
//! `scripts/data/build_devsets.py`) and the fin-filings dev set, `bench --report --peer` on
//! the same SciFact half: the page holds each chart and each mode's name, every chart is well-formed
//! SVG, and `report.json` holds the very numbers the same run printed with `--json`.

mod support;

use std::path::Path;

use serde_json::Value;
use support::cli::{build_devsets, ok};

fn json_lines(stdout: &str) -> Vec<Value> {
    stdout.lines().filter(|l| l.starts_with('{')).map(|l| serde_json::from_str(l).unwrap()).collect()
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Whether every `&` in `text` starts one of XML's entities.
fn entities_ok(text: &str) -> bool {
    text.split('&').skip(1).all(|rest| {
        let name = &rest[..rest.find(';').unwrap_or(0)];
        matches!(name, "amp" | "lt" | "gt" | "quot" | "apos")
            || name.strip_prefix('#').is_some_and(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_alphanumeric()))
    })
}

/// Asserts that `xml` is well-formed (xmlparser's tokens, entities, every element closed in
/// order) and returns how many elements of each name it has.
fn well_formed(xml: &str, what: &str) -> std::collections::HashMap<String, usize> {
    let mut open: Vec<String> = Vec::new();
    let mut count = std::collections::HashMap::new();
    for token in xmlparser::Tokenizer::from(xml) {
        match token.unwrap_or_else(|e| panic!("{what}: {e}")) {
            xmlparser::Token::Text { text } => assert!(entities_ok(text.as_str()), "{what}: bare & in {text:?}"),
            xmlparser::Token::Attribute { value, .. } => assert!(entities_ok(value.as_str()), "{what}: {value:?}"),
            xmlparser::Token::ElementStart { local, .. } => {
                open.push(local.to_string());
                *count.entry(local.to_string()).or_insert(0) += 1;
            }
            xmlparser::Token::ElementEnd { end: xmlparser::ElementEnd::Empty, .. } => {
                open.pop();
            }
            xmlparser::Token::ElementEnd { end: xmlparser::ElementEnd::Close(_, local), .. } => {
                assert_eq!(open.pop().as_deref(), Some(local.as_str()), "{what}: </{local}> out of order");
            }
            _ => {}
        }
    }
    assert!(open.is_empty(), "{what}: unclosed {open:?}");
    count
}

/// `report.json`'s entry without its per-query figures: what `--json` printed.
fn without(v: &Value, key: &str) -> Value {
    let mut v = v.clone();
    v.as_object_mut().unwrap().remove(key);
    v
}

#[test]
fn eval_report_on_two_sets_matches_its_json_lines() {
    let tmp = tempfile::tempdir().unwrap();
    build_devsets(tmp.path());
    let scifact = tmp.path().join("scifact-half");
    let filings = tmp.path().join("fin-filings");
    let dir = tmp.path().join("report");
    let stdout = ok(&[
        "eval",
        "--beir",
        scifact.to_str().unwrap(),
        "--beir",
        filings.to_str().unwrap(),
        "--split",
        "train",
        "--split",
        "dev",
        "--report",
        dir.to_str().unwrap(),
        "--json",
    ]);
    let lines = json_lines(&stdout);
    let modes = ["dense", "bm25", "splade", "plain RRF", "hybrid"];
    assert_eq!(lines.len(), 2 * modes.len(), "{stdout}");

    let report: Value = serde_json::from_str(&read(&dir.join("report.json"))).unwrap();
    let sets = report["sets"].as_array().unwrap();
    assert_eq!(sets.len(), 2);
    for (i, (set, (name, split))) in sets.iter().zip([("scifact-half", "train"), ("fin-filings", "dev")]).enumerate() {
        assert_eq!((set["set"].as_str(), set["split"].as_str()), (Some(name), Some(split)));
        let entries = set["modes"].as_array().unwrap();
        let labels: Vec<&str> = entries.iter().map(|m| m["label"].as_str().unwrap()).collect();
        assert_eq!(labels, modes);
        for (j, entry) in entries.iter().enumerate() {
            let line = &lines[i * modes.len() + j];
            assert_eq!(without(entry, "per_query"), *line, "report.json and --json disagree");
            // The mean of the per-query figures is the figure printed.
            let per: Vec<f64> =
                entry["per_query"].as_array().unwrap().iter().map(|q| q["nDCG@10"].as_f64().unwrap()).collect();
            assert_eq!(per.len() as u64, line["queries"].as_u64().unwrap());
            let mean = per.iter().sum::<f64>() / per.len() as f64;
            assert!((mean - line["nDCG@10"].as_f64().unwrap()).abs() < 1e-12, "{name}: {mean} against {line}");
        }
        // The best single path is the single path with the best nDCG@10, and every query is
        // a win, a tie or a loss against it.
        let best =
            entries[..3]
                .iter()
                .fold(&entries[0], |b, m| if m["nDCG@10"].as_f64() > b["nDCG@10"].as_f64() { m } else { b });
        let wl = &set["hybrid_vs_best_single"];
        assert_eq!(wl["best_single"], best["label"]);
        let counted = ["wins", "ties", "losses"].map(|k| wl[k].as_u64().unwrap());
        assert_eq!(counted.iter().sum::<u64>(), entries[4]["queries"].as_u64().unwrap());
        let deltas: Vec<f64> = wl["deltas"].as_array().unwrap().iter().map(|d| d["delta"].as_f64().unwrap()).collect();
        assert!(deltas.windows(2).all(|w| w[0] >= w[1]), "sorted from the largest win");
        assert_eq!(deltas.iter().filter(|d| **d > 1e-9).count() as u64, counted[0]);
        let mean_delta = entries[4]["nDCG@10"].as_f64().unwrap() - best["nDCG@10"].as_f64().unwrap();
        assert!((wl["mean_delta"].as_f64().unwrap() - mean_delta).abs() < 1e-9);
    }
    // The report evaluates as `sextant eval` alone does.
    let alone: Value = serde_json::from_str(&ok(&[
        "eval",
        "--beir",
        filings.to_str().unwrap(),
        "--split",
        "dev",
        "--mode",
        "bm25",
        "--json",
    ]))
    .unwrap();
    assert_eq!(alone["nDCG@10"], sets[1]["modes"][1]["nDCG@10"]);
    assert_eq!(alone["Recall@100"], sets[1]["modes"][1]["Recall@100"]);

    let html = read(&dir.join("index.html"));
    well_formed(&html, "index.html");
    assert!(!html.to_lowercase().contains("<script"));
    let ndcg = read(&dir.join("ndcg.svg"));
    let svgs =
        [&ndcg, &read(&dir.join("winloss-scifact-half-train.svg")), &read(&dir.join("winloss-fin-filings-dev.svg"))];
    for svg in svgs {
        let elements = well_formed(svg, "a chart");
        assert!(elements["rect"] > 10 && elements["text"] > 10);
        assert!(html.contains(svg.trim()), "index.html has every chart inline");
    }
    for mode in modes {
        assert!(html.contains(&format!("<tr><td>{mode}</td>")), "the table has {mode}");
        assert!(ndcg.contains(&format!(">\n{mode}\n</text>")), "the chart's legend has {mode}");
    }
    for line in &lines {
        let v = format!("{:.3}", line["nDCG@10"].as_f64().unwrap());
        assert!(ndcg.contains(&format!(">\n{v}\n</text>")), "the bar of {line} is labelled {v}");
        let r100 = format!("{:.4}", line["Recall@100"].as_f64().unwrap());
        assert!(html.contains(&r100), "the table has Recall@100 {r100}");
    }
    for set in sets {
        let wl = &set["hybrid_vs_best_single"];
        let counts = format!("{} wins · {} ties · {} losses", wl["wins"], wl["ties"], wl["losses"]);
        assert!(svgs.iter().any(|s| s.contains(&counts)), "a chart says {counts}");
    }
}

#[test]
fn bench_report_draws_every_stage_beside_the_peers() {
    let tmp = tempfile::tempdir().unwrap();
    // The SciFact abstracts CI indexes anyway (engine_e2e's), so no other index is built.
    build_devsets(tmp.path());
    let scifact = tmp.path().join("scifact-half");
    // The peer file a run of scripts/bench/peer_bench.py --samples writes, with made-up samples:
    // this test is of the plumbing, not of the peer. The peer searched only the 3,000-chunk
    // index, so the real index's chart has no peer box for the search.
    let peer = tmp.path().join("peer.json");
    let samples: Vec<f64> = (1..=20).map(|i| i as f64 * 0.5).collect();
    let peer_json = serde_json::json!({
        "peer": "ONNX Runtime <test> & LanceDB",
        "queries": 20,
        "stages": {"encode_dense": samples, "encode_sparse": samples},
        "search_total": {"3000": {"vector_search": "exact", "samples_ms": samples}},
    });
    std::fs::write(&peer, peer_json.to_string()).unwrap();
    let dir = tmp.path().join("report");
    let stdout = ok(&[
        "bench",
        "--beir",
        scifact.to_str().unwrap(),
        "--queries",
        "20",
        "--passages",
        "8",
        "--scale",
        "3000",
        "--report",
        dir.to_str().unwrap(),
        "--peer",
        peer.to_str().unwrap(),
        "--json",
    ]);
    let lines = json_lines(&stdout);
    assert_eq!(lines.len(), 2, "{stdout}");
    let report: Value = serde_json::from_str(&read(&dir.join("report.json"))).unwrap();
    assert_eq!(report["peer"], "ONNX Runtime <test> & LanceDB");
    let scales = report["scales"].as_array().unwrap();
    assert_eq!(scales.len(), 2);
    let html = read(&dir.join("index.html"));
    well_formed(&html, "index.html");
    assert!(!html.to_lowercase().contains("<script"));
    assert!(html.contains("ONNX Runtime &lt;test&gt; &amp; LanceDB") && !html.contains("No peer samples"));
    for (scale, line) in scales.iter().zip(&lines) {
        assert_eq!(scale["figures"], *line, "report.json and --json disagree");
        let stages = scale["stages"].as_array().unwrap();
        let stage = |key: &str| stages.iter().find(|s| s["key"] == key).unwrap_or_else(|| panic!("no {key}"));
        for s in stages {
            assert_eq!(s["samples_ms"].as_array().unwrap().len(), 20, "{}: every query's sample", s["key"]);
        }
        assert_eq!(stage("search_total")["p50_ms"], line["search_p50_ms"]);
        assert_eq!(stage("search_total")["p99_ms"], line["search_p99_ms"]);
        assert_eq!(stage("encode_dense")["p50_ms"], line["encode_dense_p50_ms"]);
        assert_eq!(stage("path_bm25")["p50_ms"], line["bm25_path_p50_ms"]);
        assert_eq!(stage("fuse")["p50_ms"], line["fuse_p50_ms"]);
        assert_eq!(stage("search_total_50")["p50_ms"], line["search_50_p50_ms"]);
        assert_eq!(stage("search_total_no_feedback")["p50_ms"], line["search_no_feedback_p50_ms"]);
        let peer_keys: Vec<&str> =
            scale["peer_stages"].as_array().unwrap().iter().map(|p| p["key"].as_str().unwrap()).collect();
        let chunks = line["chunks"].as_u64().unwrap();
        match chunks {
            3000 => assert_eq!(peer_keys, ["encode_dense", "encode_sparse", "search_total"]),
            _ => assert_eq!(peer_keys, ["encode_dense", "encode_sparse"]),
        }
        // The nearest-rank median of 0.5, 1.0, …, 10.0 is the 11th sample.
        assert_eq!(scale["peer_stages"][0]["p50_ms"], 5.5);
        let name = match line["scale"].as_str().unwrap() {
            "real index" => "latency-real-index.svg",
            _ => "latency-synthetic-3000.svg",
        };
        let svg = read(&dir.join(name));
        let elements = well_formed(&svg, name);
        assert!(html.contains(svg.trim()), "index.html has the chart of {chunks} chunks inline");
        for s in stages {
            let label = s["name"].as_str().unwrap();
            assert!(svg.contains(&label.chars().take(40).collect::<String>()), "{name} names {label}");
            assert!(html.contains(&format!("<td>{label}</td>")), "the table has {label}");
        }
        // One box per stage and one per peer stage: each box is a filled and an outlined rectangle.
        let boxes = stages.len() + peer_keys.len();
        assert!(elements["rect"] >= 2 * boxes, "{name}: {} rectangles for {boxes} boxes", elements["rect"]);
        assert!(svg.contains("peer: query embed, MiniLM-L6"));
    }
}
