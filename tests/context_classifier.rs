//! The question classifier of `/v1/context` on a labelled set of financial questions
//! (`tests/data/context_questions.jsonl`, written by hand from the data, independently of
//! the rules): route, company and period accuracy. The route must be right for at least
//! 95% of the questions.

use std::collections::BTreeMap;
use std::path::Path;

use sextant_finance::{classify, Companies, FactStore, Hints};

#[derive(serde::Deserialize)]
struct Labelled {
    question: String,
    route: String,
    tickers: Vec<String>,
    years: Vec<i32>,
    quarters: Vec<u8>,
}

/// The dictionary of the demo corpus: companies of the facts, tickers of the documents.
fn companies() -> Companies {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let facts = FactStore::open(&[root.join("data/demo/facts.jsonl.gz")]).unwrap();
    let documents = sextant_core::corpus::load_documents(&root.join("data/demo/documents.jsonl.gz")).unwrap();
    Companies::new(&facts, documents.into_iter().filter_map(|d| d.ticker))
}

/// The set the rules were developed beside.
#[test]
fn classifier_accuracy_on_the_labelled_questions() {
    measure("context_questions.jsonl", 95.0);
}

/// A second set, written by someone else after the rules were fixed and never used to
/// change them.
#[test]
fn classifier_accuracy_on_the_held_out_questions() {
    measure("context_questions_heldout.jsonl", 90.0);
}

fn measure(file: &str, min_route: f64) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let companies = companies();
    let text = std::fs::read_to_string(root.join("tests/data").join(file)).unwrap();
    let labelled: Vec<Labelled> =
        text.lines().filter(|l| !l.trim().is_empty()).map(|l| serde_json::from_str(l).unwrap()).collect();
    assert!(labelled.len() >= 60, "a set must hold at least 60 questions");

    let (mut route_ok, mut ticker_ok, mut period_ok) = (0, 0, 0);
    let mut per_route: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    let mut misses = Vec::new();
    for q in &labelled {
        let c = classify(&q.question, &companies, &Hints::default());
        let route = c.route.name();
        let e = per_route.entry(q.route.clone()).or_default();
        e.1 += 1;
        if route == q.route {
            route_ok += 1;
            e.0 += 1;
        } else {
            misses.push(format!("route {route} (expected {}): {}", q.route, q.question));
        }
        if c.tickers == q.tickers {
            ticker_ok += 1;
        } else {
            misses.push(format!("tickers {:?} (expected {:?}): {}", c.tickers, q.tickers, q.question));
        }
        if c.years == q.years && c.quarters == q.quarters {
            period_ok += 1;
        } else {
            misses.push(format!(
                "period {:?} {:?} (expected {:?} {:?}): {}",
                c.years, c.quarters, q.years, q.quarters, q.question
            ));
        }
    }
    let n = labelled.len() as f64;
    let pct = |k: usize| 100.0 * k as f64 / n;
    println!("\n{file}\n\n| measure | correct | accuracy |\n|---|---:|---:|");
    println!("| route | {route_ok}/{} | {:.1}% |", labelled.len(), pct(route_ok));
    println!("| tickers (exact list) | {ticker_ok}/{} | {:.1}% |", labelled.len(), pct(ticker_ok));
    println!("| period (years and quarters exact) | {period_ok}/{} | {:.1}% |", labelled.len(), pct(period_ok));
    println!("\n| route | correct |\n|---|---:|");
    for (r, (ok, total)) in &per_route {
        println!("| {r} | {ok}/{total} |");
    }
    println!("\nmisses:\n{}", misses.join("\n"));
    assert!(pct(route_ok) >= min_route, "route accuracy {:.1}% < 95%:\n{}", pct(route_ok), misses.join("\n"));
    assert!(pct(ticker_ok) >= 90.0, "ticker accuracy {:.1}%:\n{}", pct(ticker_ok), misses.join("\n"));
    assert!(pct(period_ok) >= 90.0, "period accuracy {:.1}%:\n{}", pct(period_ok), misses.join("\n"));
}
