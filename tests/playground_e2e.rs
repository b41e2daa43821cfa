//! The playground page in a real browser: Debian's Chromium, headless, driven through
//! chromedriver, against the real `sextant serve` on the demo index of three companies.
//!
//! A user loads `/`, types the key and a question, and reads the answer: the evidence span
//! highlighted in its document must be exactly the text the API cites at those offsets; the
//! rank of each path, the stage timings, the period-mismatch and contradiction banners, the
//! `/v1/context` tables and series chart must be on the page; the key must be stored nowhere;
//! the Content-Security-Policy must stop inline script. A screenshot of each view is saved
//! for CI to keep (`$SEXTANT_ARTIFACT_DIR`, default `target/artifacts` beside the cargo
//! target).

mod support;

use std::path::PathBuf;
use std::time::Duration;

use serde_json::{json, Value};
use support::local_server::{http, start_demo};
use support::webdriver::{self, Browser};

const KEY: &str = "sx_playground_test_key";

/// Where screenshots go.
fn artifacts() -> PathBuf {
    let dir = std::env::var_os("SEXTANT_ARTIFACT_DIR").map(PathBuf::from).unwrap_or_else(|| {
        let target = std::env::var_os("CARGO_TARGET_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| support::local_server::repo().join("target"));
        target.join("artifacts")
    });
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn save_screenshot(browser: &Browser, name: &str) {
    let png = browser.screenshot();
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n") && png.len() > 10_000, "not a screenshot of a page");
    let path = artifacts().join(name);
    std::fs::write(&path, png).unwrap();
    eprintln!("screenshot: {}", path.display());
}

/// Fills the form and sends it: `endpoint`, the question, then `more` (CSS id, text).
fn ask(browser: &Browser, endpoint: &str, question: &str, more: &[(&str, &str)]) {
    browser.script(
        "const s = document.getElementById('endpoint'); s.value = arguments[0]; \
         s.dispatchEvent(new Event('change'));",
        json!([endpoint]),
    );
    browser.type_into("#query", question);
    for (id, text) in more {
        browser.type_into(id, text);
    }
    browser.script("document.body.dataset.state = 'asking';", json!([]));
    browser.click("#run");
    browser.wait_for("return document.body.dataset.state === 'done';", Duration::from_secs(60));
}

/// Every result card once its document view is drawn: the cited text, the highlighted
/// span with its offsets, and the document it belongs to.
fn cards(browser: &Browser) -> Vec<Value> {
    let script = "const cards = Array.from(document.querySelectorAll('article.result'));\
        if (!cards.length || cards.some(c => !c.querySelector('mark.evidence'))) return null;\
        return cards.map(c => { const m = c.querySelector('mark.evidence'); return {\
          documentId: c.dataset.documentId, cited: c.querySelector('blockquote.cited').textContent,\
          mark: m.textContent, start: Number(m.dataset.charStart), end: Number(m.dataset.charEnd),\
          ranks: Array.from(c.querySelectorAll('table.ranks td')).map(td => td.textContent) }; });";
    browser.wait_for(script, Duration::from_secs(30)).as_array().unwrap().clone()
}

fn chars(text: &str, start: usize, end: usize) -> String {
    text.chars().skip(start).take(end - start).collect()
}

#[test]
fn the_playground_shows_cited_evidence_ranks_timings_warnings_and_context() {
    assert!(
        webdriver::available(),
        "the playground test needs Debian's chromium and chromium-driver (scripts/ci/test.sh installs them)"
    );
    let data = tempfile::tempdir().unwrap();
    let server = start_demo(KEY, &["--dev-key".as_ref(), KEY.as_ref(), "--data-dir".as_ref(), data.path().as_os_str()]);
    let addr = server.addr.clone();
    let auth = format!("Bearer {KEY}");
    let post = |path: &str, body: &Value| {
        let headers = [("Authorization", auth.as_str()), ("Content-Type", "application/json")];
        http(&addr, "POST", path, &headers, body.to_string().as_bytes())
    };

    let profile = tempfile::tempdir().unwrap();
    let browser = Browser::start(profile.path(), 1280, 1800);
    browser.goto(&format!("http://{addr}/"));
    browser.wait_for("return document.body.dataset.state === 'ready';", Duration::from_secs(30));
    let indexes =
        browser.script("return Array.from(document.querySelectorAll('#index option')).map(o => o.value);", json!([]));
    assert_eq!(indexes, json!(["demo"]), "the index picker lists the served indexes");
    browser.type_into("#key", KEY);

    // /v1/search: each highlighted span is the cited unit, at the API's own offsets.
    let question = "cross-border volume growth from travel";
    ask(&browser, "search", question, &[("#tickers", "MA")]);
    let shown = cards(&browser);
    let api = post("/v1/search", &json!({"query": question, "limit": 5, "entity": ["MA"]}));
    assert_eq!(api.status, 200, "{:?}", api.body);
    let results = api.body["results"].as_array().unwrap();
    assert_eq!(shown.len(), results.len(), "one card per result");
    for (card, result) in shown.iter().zip(results) {
        assert_eq!(card["cited"], result["text"], "the card cites the result");
        assert_eq!(card["mark"], result["text"], "the highlighted span is the cited text");
        let (start, end) =
            (result["position"]["char_start"].as_u64().unwrap(), result["position"]["char_end"].as_u64().unwrap());
        assert_eq!((card["start"].as_u64().unwrap(), card["end"].as_u64().unwrap()), (start, end));
        let id = result["document"]["document_id"].as_str().unwrap();
        let doc = http(&addr, "GET", &format!("/v1/indexes/demo/documents/{id}"), &[("Authorization", &auth)], b"");
        let text = doc.body["text"].as_str().unwrap();
        assert_eq!(
            chars(text, start as usize, end as usize),
            result["text"].as_str().unwrap(),
            "the offsets cite the text"
        );
        // Ranks in each path, as the API reports them (`—` where a path did not find it).
        let d = &result["diagnostics"];
        let rank = |v: &Value| v.as_u64().map_or("—".to_string(), |r| r.to_string());
        let expect = [rank(&d["dense_rank"]), rank(&d["sparse_rank"]), rank(&d["bm25_rank"]), rank(&d["rrf_rank"])];
        let got: Vec<String> =
            card["ranks"].as_array().unwrap()[..4].iter().map(|v| v.as_str().unwrap().to_string()).collect();
        assert_eq!(got, expect, "path ranks of {id}");
    }
    let stages = browser
        .script("return Array.from(document.querySelectorAll('table.timings th')).map(t => t.textContent);", json!([]));
    for stage in ["encode", "dense", "splade", "bm25", "fuse", "search"] {
        assert!(stages.as_array().unwrap().iter().any(|s| s == stage), "stage {stage} in {stages}");
    }
    save_screenshot(&browser, "playground-search.png");

    // /v1/retrieve over a year the corpus does not hold: the mismatch banner, and the
    // evidence highlighted inside the chunk's span of its document.
    browser.script("document.getElementById('year').value = '2030';", json!([]));
    ask(&browser, "retrieve", "revenue outlook", &[]);
    let banner = browser.wait_for(
        "const b = Array.from(document.querySelectorAll('.banner.warn')).map(b => b.textContent).find(t => t.startsWith('Period mismatch')); return b || null;",
        Duration::from_secs(10),
    );
    assert!(banner.as_str().unwrap().contains("2030"), "{banner}");
    let shown = cards(&browser);
    assert!(!shown.is_empty());
    for card in &shown {
        assert_eq!(card["mark"], card["cited"], "the evidence text is what is highlighted");
    }
    browser.script("document.getElementById('year').value = '';", json!([]));

    // /v1/context: a series as a chart and a table; then a passage written through the API
    // that the facts contradict, shown as a banner.
    ask(&browser, "context", "How did Mastercard net revenue change from 2022 to 2024?", &[]);
    let chart = browser.wait_for(
        "const s = document.querySelector('svg.series'); return s && { dots: s.querySelectorAll('circle').length, rows: document.querySelectorAll('.seriesbox table tr').length };",
        Duration::from_secs(10),
    );
    assert_eq!(chart, json!({"dots": 3, "rows": 4}), "three years: three points and a header plus three rows");
    save_screenshot(&browser, "playground-context-series.png");
    let put = http(
        &addr,
        "PUT",
        "/v1/indexes/demo/documents/playground-contradiction",
        &[("Authorization", &auth), ("Content-Type", "application/json")],
        json!({"text": "Net revenue decreased 30% in 2023 compared to 2022, as cross-border volumes fell sharply.",
               "title": "Mastercard 10-K FY2023 excerpt", "documentType": "10-K", "ticker": "MA", "year": 2023})
        .to_string()
        .as_bytes(),
    );
    assert_eq!(put.status, 200, "{:?}", put.body);
    ask(&browser, "context", "Why did Mastercard net revenue change in 2023?", &[]);
    let contradiction = browser.wait_for(
        "const b = document.querySelector('.banner.contradiction'); return b && b.textContent;",
        Duration::from_secs(10),
    );
    assert!(contradiction.as_str().unwrap().contains("30%"), "{contradiction}");
    save_screenshot(&browser, "playground-context-contradiction.png");

    // An error names the field, as the API does.
    ask(&browser, "search", "anything", &[("#metadata", "{\"pages\": {\"gte\": \"many\"}}")]);
    let error = browser.wait_for(
        "const b = document.querySelector('.banner.error'); return b && b.textContent;",
        Duration::from_secs(10),
    );
    assert!(error.as_str().unwrap().contains("400") && error.as_str().unwrap().contains("metadata"), "{error}");

    // The picker lists what the key may read, an index created through the API among them;
    // a search of the one picked cites its documents.
    let created = http(&addr, "PUT", "/v1/indexes/pg-notes", &[("Authorization", &auth)], b"");
    assert_eq!(created.status, 201, "{:?}", created.body);
    let written = post(
        "/v1/indexes/pg-notes/documents:batch",
        &json!([{"documentId": "garage", "text": "Visitors park on level two of the garage."}]),
    );
    assert_eq!(written.status, 200, "{:?}", written.body);
    browser.script("document.getElementById('key').dispatchEvent(new Event('change'));", json!([]));
    let listed = browser.wait_for(
        "const o = Array.from(document.querySelectorAll('#index option')).map(o => o.value);          return o.length === 2 ? o : null;",
        Duration::from_secs(10),
    );
    assert_eq!(listed, json!(["demo", "pg-notes"]));
    browser.script("document.getElementById('index').value = 'pg-notes';", json!([]));
    browser.script(
        "document.getElementById('metadata').value = ''; document.getElementById('tickers').value = '';",
        json!([]),
    );
    ask(&browser, "search", "where do visitors park", &[]);
    let shown = cards(&browser);
    assert_eq!(shown[0]["documentId"], "garage", "{shown:?}");
    assert_eq!(shown[0]["mark"], "Visitors park on level two of the garage.");

    // The key lives only in the page: nothing stored, no cookie.
    let stored = browser.script("return [localStorage.length, sessionStorage.length, document.cookie];", json!([]));
    assert_eq!(stored, json!([0, 0, ""]));
    // The policy holds: an injected inline script does not run, and the page itself
    // caused no violation.
    let before = browser.console();
    assert!(
        !before.iter().any(|e| e["message"].as_str().unwrap_or("").contains("Content Security Policy")),
        "the page broke its own policy: {before:?}"
    );
    let ran = browser.script(
        "const s = document.createElement('script'); s.textContent = 'window.injected = 1;'; \
         document.body.append(s); return window.injected === 1;",
        json!([]),
    );
    assert_eq!(ran, false, "an inline script ran under the page's policy");
    let after = browser.console();
    assert!(
        after.iter().any(|e| e["message"].as_str().unwrap_or("").contains("Content Security Policy")),
        "the blocked script is reported: {after:?}"
    );
}
