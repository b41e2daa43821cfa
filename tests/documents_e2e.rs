//! End-to-end tests of the document API: the real `sextant serve` on a free port, real
//! HTTP over TCP, the index of three companies of the bundled demo corpus (built once and
//! cached, as in `api_e2e`), each test's writes in a directory of its own.
//!
//! - documents in (raw Markdown, HTML and text, JSON with metadata) are searchable when
//!   their `PUT` returns, filterable by any metadata field, and cited with exact offsets;
//! - keys' scopes: a read key cannot write;
//! - bad input is a 4xx in the envelope naming the problem, with nothing half-stored;
//! - a deleted document is never served after its `200`;
//! - SIGKILL at random points of a stream of writes: after a restart every acknowledged
//!   write is there and nothing half-written is served.

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{json, Value};
use sextant_keys::LocalKeyStore;
use support::local_server::{http, parse_answer, start_demo, start_serving, try_http, Resp, Server};

const ADMIN: &str = "sx_docs_admin_key";
const WRITER: &str = "sx_docs_writer_key";
const READER: &str = "sx_docs_reader_key";

fn key_store(dir: &Path) -> PathBuf {
    let path = dir.join("keys.json");
    let store = LocalKeyStore::open(&path).unwrap();
    store.add(ADMIN, "tests", "enterprise", vec!["*:admin".into()]).unwrap();
    store.add(WRITER, "tests", "enterprise", vec!["demo:write".into()]).unwrap();
    store.add(READER, "tests", "enterprise", vec!["demo".into()]).unwrap();
    path
}

/// `sextant serve` over the three-company demo index, its keys in `keys`, its writes in `data`.
fn start(keys: &Path, data: &Path, extra: &[&str]) -> Server {
    let mut args: Vec<&std::ffi::OsStr> =
        vec!["--keys".as_ref(), keys.as_os_str(), "--data-dir".as_ref(), data.as_os_str()];
    args.extend(extra.iter().map(|a| std::ffi::OsStr::new(*a)));
    start_demo(READER, &args)
}

/// A PDF of `tests/data/pdf` (made by `scripts/data/make_test_pdfs.sh`).
fn pdf(name: &str) -> Vec<u8> {
    std::fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/data/pdf").join(name)).unwrap()
}

fn bearer(key: &str) -> String {
    format!("Bearer {key}")
}

fn put_raw(a: &str, key: &str, id: &str, content_type: &str, extra: &[(&str, &str)], body: &[u8]) -> Resp {
    let auth = bearer(key);
    let mut h = vec![("Authorization", auth.as_str()), ("Content-Type", content_type)];
    h.extend_from_slice(extra);
    http(a, "PUT", &format!("/v1/indexes/demo/documents/{id}"), &h, body)
}

/// A PUT whose head declares a body of `len` bytes (over the limit: answered before any
/// is sent).
fn put_declaring(a: &str, id: &str, len: usize) -> Resp {
    let mut s = TcpStream::connect(a).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let head = format!(
        "PUT /v1/indexes/demo/documents/{id} HTTP/1.1\r\nHost: {a}\r\nAuthorization: Bearer {WRITER}\r\n\
         Content-Type: text/plain\r\nContent-Length: {len}\r\nConnection: close\r\n\r\n"
    );
    s.write_all(head.as_bytes()).unwrap();
    let mut raw = Vec::new();
    let _ = s.read_to_end(&mut raw);
    parse_answer(&raw).expect("an answer")
}

fn put_json(a: &str, key: &str, id: &str, body: &Value) -> Resp {
    put_raw(a, key, id, "application/json", &[], body.to_string().as_bytes())
}

fn call(a: &str, method: &str, path: &str, key: &str, body: Option<&Value>) -> Resp {
    let auth = bearer(key);
    let mut h = vec![("Authorization", auth.as_str())];
    let bytes = body.map(|b| b.to_string()).unwrap_or_default();
    if body.is_some() {
        h.push(("Content-Type", "application/json"));
    }
    http(a, method, path, &h, bytes.as_bytes())
}

/// The document ids `/v1/search` returns for `query` with `extra` fields.
fn search_ids(a: &str, query: &str, extra: Value) -> Vec<String> {
    let mut body = json!({"query": query, "limit": 10, "rerank": false, "min_similarity": -1.0});
    body.as_object_mut().unwrap().extend(extra.as_object().cloned().unwrap_or_default());
    let r = call(a, "POST", "/v1/search", READER, Some(&body));
    assert_eq!(r.status, 200, "{:?}", r.body);
    r.body["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| u["document"]["document_id"].as_str().unwrap().to_string())
        .collect()
}

const HANDBOOK: &str = "# Travel policy\n\nEmployees book flights through the **Concur** portal.\n\n\
- Economy class for flights under six hours\n- Business class above six hours, with approval\n\n\
## Per diem\n\nThe daily meal allowance in Zurich is 95 Swiss francs.\n";

#[test]
fn teams_write_their_own_documents_and_search_them_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(&key_store(dir.path()), &dir.path().join("data"), &[]);
    let a = server.addr.as_str();

    // A raw Markdown file with metadata in a header: searchable when the PUT returns.
    let meta = r#"{"department": "people-ops", "pages": 2, "reviewed": "2024-05-01", "groups": ["acl-all", "acl-hr"], "author": {"team": "travel"}}"#;
    let r = put_raw(
        a,
        WRITER,
        "travel-policy",
        "text/markdown; charset=utf-8",
        &[("Sextant-Metadata", meta)],
        HANDBOOK.as_bytes(),
    );
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!((r.body["status"].as_str(), r.body["created"].as_bool()), (Some("live"), Some(true)));
    assert!(r.body["chunks"].as_u64().unwrap() >= 1);
    assert_eq!(search_ids(a, "meal allowance per diem in Zurich", json!({}))[0], "travel-policy");

    // An HTML page and a JSON document with their own fields.
    let html = "<html><head><title>Expense FAQ</title><script>var x=1</script></head><body><nav>Home</nav>\
        <h1>Expenses</h1><p>Receipts over 50 francs must be scanned within 30 days.</p>\
        <table><tr><td>Taxi</td><td>allowed</td></tr></table></body></html>";
    let r = put_raw(
        a,
        WRITER,
        "expense-faq",
        "text/html",
        &[("Sextant-Metadata", r#"{"department": "finance", "pages": 1}"#)],
        html.as_bytes(),
    );
    assert_eq!(r.status, 200, "{:?}", r.body);
    let r = put_json(
        a,
        WRITER,
        "security-note",
        &json!({
            "text": "Laptops must use full-disk encryption.\n\nReport a lost badge to security within one hour.",
            "title": "Security basics", "metadata": {"department": "security", "pages": 7, "reviewed": "2023-01-15", "groups": ["acl-all"]}
        }),
    );
    assert_eq!(r.status, 200, "{:?}", r.body);

    // GET: the text rebuilt from the segments, each segment's offsets exact in it.
    let r = call(a, "GET", "/v1/indexes/demo/documents/expense-faq", READER, None);
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(r.body["title"], "Expense FAQ");
    assert_eq!((r.body["status"].as_str(), r.body["compacted"].as_bool()), (Some("live"), Some(false)), "in the delta");
    assert_eq!(r.body["metadata"], json!({"department": "finance", "pages": 1}));
    let text: Vec<char> = r.body["text"].as_str().unwrap().chars().collect();
    assert!(!r.body["text"].as_str().unwrap().contains("var x"), "script is not text");
    for s in r.body["segments"].as_array().unwrap() {
        let (c0, c1) = (s["charStart"].as_u64().unwrap() as usize, s["charEnd"].as_u64().unwrap() as usize);
        assert_eq!(text[c0..c1].iter().collect::<String>(), s["text"].as_str().unwrap());
    }

    // A PDF: its text read page by page, each passage cited with the pages it spans, in
    // every API; the document reads back with each segment's page.
    let r = put_raw(
        a,
        WRITER,
        "turbines-q3.pdf",
        "application/pdf",
        &[("Sextant-Metadata", r#"{"department": "operations"}"#)],
        &pdf("report.pdf"),
    );
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert!(r.body["chunks"].as_u64().unwrap() >= 2, "three pages of text: {:?}", r.body);
    let r = call(a, "GET", "/v1/indexes/demo/documents/turbines-q3.pdf", READER, None);
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(r.body["title"], "Quarterly operating review", "the PDF's own title");
    let segments = r.body["segments"].as_array().unwrap();
    let page_of = |marker: &str| {
        let s = segments.iter().find(|s| s["text"].as_str().unwrap().contains(marker)).expect(marker);
        s["page"].as_u64().unwrap()
    };
    assert_eq!((page_of("page-1-marker"), page_of("page-2-marker"), page_of("page-3-marker")), (1, 2, 3));
    let text: Vec<char> = r.body["text"].as_str().unwrap().chars().collect();
    for s in segments {
        let (c0, c1) = (s["charStart"].as_u64().unwrap() as usize, s["charEnd"].as_u64().unwrap() as usize);
        assert_eq!(text[c0..c1].iter().collect::<String>(), s["text"].as_str().unwrap());
    }
    let pdf_only = json!({"metadata": {"department": "operations"}});
    let body = json!({"query": "rare earth magnet suppliers could delay turbine deliveries", "limit": 10,
                      "rerank": false, "metadata": pdf_only["metadata"]});
    let r = call(a, "POST", "/v1/search", READER, Some(&body));
    assert_eq!(r.status, 200, "{:?}", r.body);
    let results = r.body["results"].as_array().unwrap();
    assert!(!results.is_empty(), "{:?}", r.body);
    for u in results {
        let (first, last) =
            (u["position"]["page"]["first"].as_u64().unwrap(), u["position"]["page"]["last"].as_u64().unwrap());
        assert!(1 <= first && first <= last && last <= 3, "{u}");
        let chunk = u["position"]["chunk_text"].as_str().unwrap();
        for (marker, page) in [("page-1-marker", 1), ("page-2-marker", 2), ("page-3-marker", 3)] {
            if chunk.contains(marker) {
                assert!(first <= page && page <= last, "{marker} in a chunk of pages {first}-{last}");
            }
        }
    }
    assert_eq!(results[0]["position"]["page"]["last"], 3, "the risk factors are on page 3: {}", results[0]);
    let r = call(
        a,
        "POST",
        "/v1/retrieve",
        READER,
        Some(&json!({"query": "rare earth magnet suppliers", "filters": {"metadata": {"department": ["operations"]}}})),
    );
    assert_eq!(r.status, 200, "{:?}", r.body);
    let source = &r.body["chunks"][0]["source"];
    assert_eq!(source["documentId"], "turbines-q3.pdf");
    let pages: Vec<u64> = source["pageNumbers"].as_array().unwrap().iter().map(|p| p.as_u64().unwrap()).collect();
    assert!(pages.contains(&3) && pages.windows(2).all(|w| w[1] == w[0] + 1), "every page spanned: {pages:?}");
    let r = call(
        a,
        "POST",
        "/ws/index/retrieve",
        READER,
        Some(
            &json!({"IndexId": "demo", "Query": "rare earth magnet suppliers", "SearchFilters": [{"department": "operations"}]}),
        ),
    );
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(r.body["Data"]["Nodes"][0]["Metadata"]["page"]["last"], 3, "{:?}", r.body);
    // A document without pages says none.
    let r = call(
        a,
        "POST",
        "/v1/retrieve",
        READER,
        Some(&json!({"query": "receipts scanned within 30 days",
        "filters": {"metadata": {"department": ["finance"]}}})),
    );
    assert!(r.body["chunks"][0]["source"].get("pageNumbers").is_none(), "{:?}", r.body);

    // Any metadata field filters before ranking: all four query kinds, nested groups.
    let q = "company policy rules for employees";
    assert_eq!(search_ids(a, q, json!({"metadata": {"department": "finance"}})), vec!["expense-faq"]);
    let mut got = search_ids(a, q, json!({"metadata": {"pages": {"gte": 2}}}));
    got.sort();
    assert_eq!(got, vec!["security-note", "travel-policy"]);
    assert_eq!(search_ids(a, q, json!({"metadata": {"groups": "acl-hr"}})), vec!["travel-policy"]);
    assert_eq!(search_ids(a, q, json!({"metadata": {"author.team": {"like": "trav%"}}})), vec!["travel-policy"]);
    let mut got = search_ids(
        a,
        q,
        json!({"metadata": {"_operator": "or", "department": "finance",
        "_conditions": [{"reviewed": {"lt": "2024-01-01"}}]}}),
    );
    got.sort();
    assert_eq!(got, vec!["expense-faq", "security-note"]);
    // In /v1/retrieve and the knowledge-base API too, with the metadata in each result.
    let r = call(
        a,
        "POST",
        "/v1/retrieve",
        READER,
        Some(&json!({"query": q, "filters": {"metadata": {"department": ["security"]}}})),
    );
    assert_eq!(r.status, 200, "{:?}", r.body);
    let chunks = r.body["chunks"].as_array().unwrap();
    assert!(!chunks.is_empty() && chunks.iter().all(|c| c["source"]["documentId"] == "security-note"), "{chunks:?}");
    assert_eq!(r.body["chunks"][0]["source"]["metadata"]["pages"], 7);
    let r = call(
        a,
        "POST",
        "/ws/index/retrieve",
        READER,
        Some(&json!({"IndexId": "demo", "Query": q,
        "SearchFilters": [{"groups": ["acl-hr", "acl-none"]}]})),
    );
    assert_eq!(r.status, 200, "{:?}", r.body);
    let nodes = r.body["Data"]["Nodes"].as_array().unwrap();
    assert!(!nodes.is_empty() && nodes.iter().all(|n| n["Metadata"]["doc_id"] == "travel-policy"), "{nodes:?}");
    assert_eq!(nodes[0]["Metadata"]["metadata"]["author"]["team"], "travel");
    // Types are checked: a range on a string, an unknown field.
    for (filter, field) in [
        (json!({"department": {"gt": "a"}}), "metadata.department.gt"),
        (json!({"colour": "red"}), "metadata.colour"),
        (json!({"pages": "seven"}), "metadata.pages"),
    ] {
        let r = call(a, "POST", "/v1/search", READER, Some(&json!({"query": q, "metadata": filter})));
        assert_eq!((r.status, r.body["error"]["field"].as_str()), (400, Some(field)), "{:?}", r.body);
    }

    // Scopes: a read key cannot write; a write key cannot compact.
    let r = put_json(a, READER, "x", &json!({"text": "no"}));
    assert_eq!((r.status, r.body["error"]["code"].as_str()), (403, Some("forbidden")), "{:?}", r.body);
    assert!(r.body["error"]["message"].as_str().unwrap().contains("write"), "{:?}", r.body);
    assert_eq!(call(a, "POST", "/v1/indexes/demo/compact", WRITER, None).status, 403);
    assert_eq!(call(a, "DELETE", "/v1/indexes/demo/documents/travel-policy", READER, None).status, 403);

    // Bad input: each a 4xx in the envelope naming the problem, nothing stored.
    let bad: Vec<(Resp, u16, &str)> = vec![
        (put_raw(a, WRITER, "pdf", "application/pdf", &[], b"%PDF-1.7"), 400, "not a readable PDF"),
        (put_raw(a, WRITER, "locked", "application/pdf", &[], &pdf("encrypted.pdf")), 400, "encrypted"),
        (put_raw(a, WRITER, "scan", "application/pdf", &[], &pdf("scanned.pdf")), 400, "run OCR"),
        (put_raw(a, WRITER, "cut", "application/pdf", &[], &pdf("truncated.pdf")), 400, "not a readable PDF"),
        (put_raw(a, WRITER, "docx", "application/msword", &[], b"PK"), 415, "application/pdf"),
        (
            put_json(a, WRITER, "pdf-text", &json!({"text": "%PDF", "contentType": "application/pdf"})),
            400,
            "contentType",
        ),
        (put_json(a, WRITER, "pages", &json!({"segments": ["a", "b"], "pages": [1]})), 400, "one page per segment"),
        (put_json(a, WRITER, "pages-text", &json!({"text": "a", "pages": [1]})), 400, "pages"),
        (put_raw(a, WRITER, "latin", "text/plain; charset=latin1", &[], b"caf\xe9"), 415, "charset"),
        (put_raw(a, WRITER, "utf", "text/plain", &[], b"ok \xff\xfe bad"), 400, "UTF-8"),
        (put_raw(a, WRITER, "a%2F%2Fb", "text/plain", &[], b"slash"), 400, "'//'"),
        (put_raw(a, WRITER, "a..b", "text/plain", &[], b"dots"), 400, "'..'"),
        (put_raw(a, WRITER, "a%0Ab", "text/plain", &[], b"newline"), 400, "control"),
        (
            put_json(a, WRITER, "deep", &json!({"text": "t", "metadata": {"a": {"b": {"c": {"d": 1}}}}})),
            400,
            "metadata.a.b.c",
        ),
        (
            put_json(a, WRITER, "huge-meta", &json!({"text": "t", "metadata": {"note": "x".repeat(20_000)}})),
            400,
            "bytes of JSON",
        ),
        (put_json(a, WRITER, "retyped", &json!({"text": "t", "metadata": {"pages": "many"}})), 400, "metadata.pages"),
        (put_json(a, WRITER, "both", &json!({"text": "t", "segments": ["s"]})), 400, "segments"),
        (put_json(a, WRITER, "empty", &json!({"text": "   "})), 400, "no text"),
        (put_declaring(a, "big", 9 << 20), 413, "limit"),
    ];
    for (r, status, says) in bad {
        assert_eq!(r.status, status, "{:?}", r.body);
        let e = &r.body["error"];
        let words = format!("{} {}", e["message"].as_str().unwrap_or(""), e["field"].as_str().unwrap_or(""));
        assert!(words.contains(says), "{status}: {words}");
    }
    for id in [
        "pdf",
        "locked",
        "scan",
        "cut",
        "docx",
        "pdf-text",
        "pages",
        "pages-text",
        "latin",
        "utf",
        "deep",
        "huge-meta",
        "retyped",
        "both",
        "empty",
        "big",
    ] {
        assert_eq!(
            call(a, "GET", &format!("/v1/indexes/demo/documents/{id}"), READER, None).status,
            404,
            "{id} half-stored"
        );
    }

    // A listing pages through every document in id order.
    let mut ids = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let path = match &cursor {
            Some(c) => format!("/v1/indexes/demo/documents?limit=50&cursor={c}"),
            None => "/v1/indexes/demo/documents?limit=50".to_string(),
        };
        let r = call(a, "GET", &path, READER, None);
        assert_eq!(r.status, 200, "{:?}", r.body);
        ids.extend(
            r.body["documents"].as_array().unwrap().iter().map(|d| d["documentId"].as_str().unwrap().to_string()),
        );
        match r.body["nextCursor"].as_str() {
            Some(c) => cursor = Some(c.to_string()),
            None => break,
        }
    }
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "id order, no repeats");
    for id in ["travel-policy", "expense-faq", "security-note"] {
        assert!(ids.iter().any(|i| i == id), "{id} listed");
    }
    assert_eq!(call(a, "GET", "/v1/indexes/demo/documents?limit=0", READER, None).body["error"]["field"], "limit");

    // A replaced document serves only its new text; a deleted one is never served again.
    let r = put_json(
        a,
        WRITER,
        "security-note",
        &json!({"text": "Badges are renewed every year at the front desk.",
        "metadata": {"department": "security", "pages": 1}}),
    );
    assert_eq!((r.status, r.body["created"].as_bool()), (200, Some(false)));
    assert!(
        !search_ids(a, "full-disk encryption on laptops", json!({"metadata": {"department": "security"}})).is_empty()
    );
    let r =
        call(a, "POST", "/v1/retrieve", READER, Some(&json!({"query": "laptops full-disk encryption", "top_k": 50})));
    assert!(r.body["chunks"].as_array().unwrap().iter().all(|c| !c["text"].as_str().unwrap().contains("encryption")));
    let r = call(a, "DELETE", "/v1/indexes/demo/documents/travel-policy", WRITER, None);
    assert_eq!((r.status, r.body["deleted"].as_bool()), (200, Some(true)), "{:?}", r.body);
    assert!(!search_ids(a, "meal allowance per diem in Zurich", json!({})).contains(&"travel-policy".to_string()));
    assert_eq!(call(a, "GET", "/v1/indexes/demo/documents/travel-policy", READER, None).status, 404);
    assert_eq!(call(a, "DELETE", "/v1/indexes/demo/documents/travel-policy", WRITER, None).status, 404);

    // A compaction folds the writes into a new version; the answers stay the same.
    let r = call(a, "POST", "/v1/indexes/demo/compact", ADMIN, None);
    assert_eq!((r.status, r.body["compacted"].as_bool()), (200, Some(true)), "{:?}", r.body);
    assert_eq!(r.body["report"]["chunks_encoded"], 0, "every vector reused: {:?}", r.body);
    assert_eq!(search_ids(a, "scanned receipts over 50 francs", json!({}))[0], "expense-faq");
    let r = call(a, "GET", "/v1/indexes/demo/documents/expense-faq", READER, None);
    assert_eq!((r.body["status"].as_str(), r.body["compacted"].as_bool()), (Some("live"), Some(true)));
    drop(server);

    // After a restart: the same documents.
    let server = start(&key_store(dir.path()), &dir.path().join("data"), &[]);
    let a = server.addr.as_str();
    assert_eq!(search_ids(a, "scanned receipts over 50 francs", json!({}))[0], "expense-faq");
    assert_eq!(call(a, "GET", "/v1/indexes/demo/documents/travel-policy", READER, None).status, 404);
}

/// SIGKILL at random points of a stream of writes (compactions included, one every few
/// writes): after each restart every acknowledged write is served as acknowledged, the
/// one write in flight either whole or not at all, and nothing else.
#[test]
fn a_folder_is_served_with_paths_as_ids_fields_from_front_matter_and_sidecars_and_pdfs_with_their_pages() {
    // A team's folder as it is: Markdown with front matter, HTML with a sidecar of fields,
    // plain text in a subfolder, a PDF, and a damaged PDF that cannot be read.
    let tmp = tempfile::tempdir().unwrap();
    let docs = tmp.path().join("docs");
    let write = |rel: &str, text: &str| {
        let p = docs.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    };
    write("handbook/travel.md", &format!("---\nteam: people ops\nyear: 2025\n---\n{HANDBOOK}"));
    write(
        "policies/security.html",
        "<html><head><title>Security basics</title></head><body><p>Laptops must use full-disk \
         encryption, and lost laptops are reported within one hour.</p></body></html>",
    );
    write("policies/security.html.meta.json", r#"{"team": "infosec", "reviewed": "2023-01-15"}"#);
    write("notes/cafeteria.txt", "The cafeteria serves lunch from noon until two o'clock.");
    write("scans/contract.pdf", "%PDF-1.7 not read");
    std::fs::create_dir_all(docs.join("reports")).unwrap();
    std::fs::write(docs.join("reports/q3.pdf"), pdf("report.pdf")).unwrap();
    let (keys, data) = (key_store(tmp.path()), tmp.path().join("data"));
    let args: Vec<&std::ffi::OsStr> = vec![
        "--docs".as_ref(),
        docs.as_os_str(),
        "--id".as_ref(),
        "team".as_ref(),
        "--keys".as_ref(),
        keys.as_os_str(),
        "--data-dir".as_ref(),
        data.as_os_str(),
    ];
    let server = start_serving(&args, &[], ADMIN, "team");
    let a = &server.addr;
    // Every readable file is a document named by its path; the damaged PDF is not one.
    let listed = call(a, "GET", "/v1/indexes/team/documents?limit=10", ADMIN, None);
    let ids: Vec<&str> =
        listed.body["documents"].as_array().unwrap().iter().map(|d| d["documentId"].as_str().unwrap()).collect();
    assert_eq!(
        ids,
        ["handbook/travel.md", "notes/cafeteria.txt", "policies/security.html", "reports/q3.pdf"],
        "{:?}",
        listed.body
    );
    // The PDF is cited with its pages.
    let body = json!({"query": "revolving credit facility undrawn", "limit": 1, "rerank": false});
    let r = call(a, "POST", "/v1/search", ADMIN, Some(&body));
    assert_eq!(r.body["results"][0]["document"]["document_id"], "reports/q3.pdf", "{:?}", r.body);
    let page = &r.body["results"][0]["position"]["page"];
    assert!(page["first"].as_u64().unwrap() <= 2 && page["last"].as_u64().unwrap() >= 2, "{:?}", r.body);
    // Cited by its path, with the title the file gave and the fields of its front matter.
    let body = json!({"query": "daily meal allowance in Zurich", "limit": 3, "rerank": false});
    let r = call(a, "POST", "/v1/search", ADMIN, Some(&body));
    assert_eq!(r.status, 200, "{:?}", r.body);
    let top = &r.body["results"][0]["document"];
    assert_eq!(
        (top["document_id"].as_str(), top["title"].as_str()),
        (Some("handbook/travel.md"), Some("Travel policy"))
    );
    assert_eq!(top["year"], 2025, "a built-in field of the front matter sets the document's: {top}");
    // Fields from a sidecar and from front matter filter like any metadata.
    let only = |team: &str| {
        let body = json!({"query": "laptops encryption meal allowance", "limit": 10, "rerank": false,
                          "metadata": {"team": team}});
        let r = call(a, "POST", "/v1/search", ADMIN, Some(&body));
        assert_eq!(r.status, 200, "{:?}", r.body);
        let ids: Vec<String> = r.body["results"]
            .as_array()
            .unwrap()
            .iter()
            .map(|u| u["document"]["document_id"].as_str().unwrap().to_string())
            .collect();
        ids
    };
    let infosec = only("infosec");
    assert!(!infosec.is_empty() && infosec.iter().all(|d| d == "policies/security.html"), "{infosec:?}");
    let people = only("people ops");
    assert!(!people.is_empty() && people.iter().all(|d| d == "handbook/travel.md"), "{people:?}");
    // The document reads back by its path (the slash encoded in the URL).
    let got = call(a, "GET", "/v1/indexes/team/documents/policies%2Fsecurity.html", ADMIN, None);
    assert_eq!(got.status, 200, "{:?}", got.body);
    assert_eq!(got.body["metadata"]["reviewed"], "2023-01-15");
    // And is written by it: the file's new text is searched when the PUT returns.
    let auth = bearer(ADMIN);
    let h = [("Authorization", auth.as_str()), ("Content-Type", "text/plain")];
    let text = b"Lost laptops are reported to the service desk within fifteen minutes.";
    let put = http(a, "PUT", "/v1/indexes/team/documents/policies%2Fsecurity.html", &h, text);
    assert_eq!(put.status, 200, "{:?}", put.body);
    let body = json!({"query": "lost laptops reported within fifteen minutes", "limit": 1, "rerank": false});
    let r = call(a, "POST", "/v1/search", ADMIN, Some(&body));
    assert_eq!(r.body["results"][0]["document"]["document_id"], "policies/security.html", "{:?}", r.body);
    assert!(r.body["results"][0]["text"].as_str().unwrap().contains("fifteen minutes"), "{:?}", r.body);

    // `sextant put` sends the folder back: what the index holds as it is stays, the file the
    // PUT above changed is written again, a new file is added, and a document the server
    // refuses fails the command with the API's reason.
    let put = |extra: &[&str], key: Option<&str>| {
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_sextant"));
        cmd.args(["put", docs.to_str().unwrap(), "--index", "team", "--json", "--url"])
            .arg(format!("http://{a}"))
            .args(extra)
            .env_remove("SEXTANT_API_KEY");
        if let Some(key) = key {
            cmd.env("SEXTANT_API_KEY", key);
        }
        let out = cmd.output().unwrap();
        let report: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
        (out.status.success(), report, String::from_utf8_lossy(&out.stderr).into_owned())
    };
    write("notes/parking.md", "# Parking\n\nVisitors park on level two of the garage.");
    let (ok, report, stderr) = put(&[], Some(ADMIN));
    assert!(ok, "{stderr}");
    let status = |report: &Value, id: &str| {
        let doc = report["documents"].as_array().unwrap().iter().find(|d| d["documentId"] == id);
        doc.map(|d| d["status"].as_str().unwrap().to_string()).unwrap_or_default()
    };
    assert_eq!(status(&report, "policies/security.html"), "written", "{report}");
    assert_eq!(status(&report, "notes/parking.md"), "written", "{report}");
    assert_eq!(status(&report, "handbook/travel.md"), "unchanged", "{report}");
    assert_eq!(status(&report, "notes/cafeteria.txt"), "unchanged", "{report}");
    assert_eq!(report["skippedFiles"][0]["path"], "scans/contract.pdf", "{report}");
    assert!(report["skippedFiles"][0]["reason"].as_str().unwrap().contains("not a readable PDF"), "{report}");
    assert_eq!(status(&report, "reports/q3.pdf"), "unchanged", "held with its pages: {report}");
    let got = call(a, "GET", "/v1/indexes/team/documents/policies%2Fsecurity.html", ADMIN, None);
    assert!(got.body["text"].as_str().unwrap().contains("one hour"), "the folder's version is back: {:?}", got.body);
    let body = json!({"query": "where do visitors park", "limit": 1, "rerank": false});
    let r = call(a, "POST", "/v1/search", ADMIN, Some(&body));
    assert_eq!(r.body["results"][0]["document"]["document_id"], "notes/parking.md", "{:?}", r.body);
    // Run again: nothing left to send.
    let (ok, report, stderr) = put(&[], Some(ADMIN));
    assert!(ok && report["written"] == 0 && report["unchanged"] == 5, "{report} {stderr}");
    // A field retyped (a number where the index holds dates) is refused by the server: the
    // command names the document and the field, and fails.
    write("notes/parking.md.meta.json", r#"{"reviewed": 5}"#);
    let (ok, report, stderr) = put(&[], Some(ADMIN));
    assert!(!ok, "{report}");
    assert_eq!(status(&report, "notes/parking.md"), "failed", "{report}");
    assert!(stderr.contains("notes/parking.md") && stderr.contains("metadata.reviewed"), "{stderr}");
    // Without a key, or with a read-only key, nothing is written.
    let (ok, _, stderr) = put(&[], None);
    assert!(!ok && stderr.contains("SEXTANT_API_KEY"), "{stderr}");
    let (ok, report, _) = put(&[], Some(READER));
    assert!(!ok && report["written"] == 0, "{report}");

    // `sextant delete`: a document with folders goes; one the index does not hold is said,
    // not an error; a read-only key deletes nothing and fails the command.
    let delete = |ids: &[&str], key: &str| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_sextant"))
            .args(["delete", "--index", "team", "--url"])
            .arg(format!("http://{a}"))
            .args(ids)
            .env("SEXTANT_API_KEY", key)
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
        (out.status.success(), said)
    };
    let (ok, said) = delete(&["notes/parking.md", "no-such-note"], READER);
    assert!(!ok && said.contains("failed notes/parking.md: 403"), "{said}");
    let (ok, said) = delete(&["notes/parking.md", "no-such-note"], ADMIN);
    assert!(ok, "{said}");
    assert!(said.contains("deleted notes/parking.md") && said.contains("not found no-such-note"), "{said}");
    assert_eq!(call(a, "GET", "/v1/indexes/team/documents/notes%2Fparking.md", ADMIN, None).status, 404);
}

/// A batch: many documents in one call, each answered in order (written, or the error
/// naming its field), the written ones searchable when the answer comes and kept across a
/// restart; a body that is no batch is a 4xx in the envelope.
#[test]
fn a_batch_writes_many_documents_and_answers_for_each() {
    let dir = tempfile::tempdir().unwrap();
    let keys = key_store(dir.path());
    let data = dir.path().join("data");
    let server = start(&keys, &data, &[]);
    let a = server.addr.as_str();
    let batch = |key: &str, content_type: &str, body: &[u8]| {
        let auth = bearer(key);
        let h = [("Authorization", auth.as_str()), ("Content-Type", content_type)];
        http(a, "POST", "/v1/indexes/demo/documents:batch", &h, body)
    };
    let docs = json!([
        {"documentId": "handbook/travel.md", "text": HANDBOOK, "contentType": "text/markdown",
         "metadata": {"department": "people-ops", "pages": 2}},
        {"documentId": "no-text", "title": "Empty"},
        {"documentId": "../escape", "text": "Not written."},
        {"documentId": "clash", "text": "Pages as words.", "metadata": {"pages": "two"}},
        {"documentId": "badge-note", "text": "Report a lost badge to security within one hour.",
         "metadata": {"department": "security"}},
        {"text": "No id at all."},
        {"documentId": "typo", "text": "x", "titel": "misspelt"},
    ]);
    let r = batch(WRITER, "application/json", docs.to_string().as_bytes());
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!((r.body["written"].as_u64(), r.body["failed"].as_u64()), (Some(2), Some(5)), "{:?}", r.body);
    let results = r.body["results"].as_array().unwrap();
    let shown: Vec<String> = results
        .iter()
        .map(|x| match x.get("error") {
            Some(e) => format!("{} {} {}", x["documentId"], e["field"], e["code"]),
            None => format!("{} {} {}", x["documentId"], x["status"], x["created"]),
        })
        .collect();
    assert_eq!(
        shown,
        [
            "\"handbook/travel.md\" \"live\" true",
            "\"no-text\" \"text\" \"invalid_request\"",
            "\"../escape\" \"documentId\" \"invalid_request\"",
            "\"clash\" \"metadata.pages\" \"invalid_request\"",
            "\"badge-note\" \"live\" true",
            "null \"documentId\" \"invalid_request\"",
            "\"typo\" \"titel\" \"invalid_request\"",
        ]
    );
    assert!(results[3]["error"]["message"].as_str().unwrap().contains("is a number"), "{:?}", results[3]);
    assert!(results[0]["chunks"].as_u64().unwrap() >= 1 && results[0]["seq"].as_u64().is_some());
    // Searchable when the answer comes, filterable by the fields sent.
    assert_eq!(search_ids(a, "meal allowance per diem in Zurich", json!({}))[0], "handbook/travel.md");
    assert_eq!(search_ids(a, "lost badge", json!({"metadata": {"department": "security"}})), vec!["badge-note"]);
    assert_eq!(call(a, "GET", "/v1/indexes/demo/documents/clash", READER, None).status, 404, "refused, not stored");

    // NDJSON: one document per line; a line that is not JSON is that document's error.
    let ndjson = format!(
        "{}\n{{not json\n\n{}\n",
        json!({"documentId": "nd-1", "text": "Quarterly offsite in Lisbon."}),
        json!({"documentId": "handbook/travel.md", "text": HANDBOOK, "contentType": "text/markdown",
               "metadata": {"department": "people-ops", "pages": 3}})
    );
    let r = batch(WRITER, "application/x-ndjson", ndjson.as_bytes());
    assert_eq!(r.status, 200, "{:?}", r.body);
    let results = r.body["results"].as_array().unwrap();
    assert_eq!(results.len(), 3);
    assert_eq!((results[0]["status"].as_str(), results[0]["created"].as_bool()), (Some("live"), Some(true)));
    assert!(results[1]["error"]["message"].as_str().unwrap().starts_with("line 2 is not a JSON document"));
    assert_eq!(results[2]["created"].as_bool(), Some(false), "a replacement");

    // Not a batch: the envelope, naming what is wrong.
    for (key, ct, body, status, says) in [
        (WRITER, "application/json", &b"{\"documentId\": \"x\"}"[..], 400, "JSON array"),
        (WRITER, "application/json", b"[]", 400, "no documents"),
        (WRITER, "application/json", b"[{\"documentId\": ", 400, "not valid JSON"),
        (WRITER, "text/plain", b"hello", 415, "application/x-ndjson"),
        (READER, "application/json", b"[{\"documentId\": \"r\", \"text\": \"x\"}]", 403, "write"),
    ] {
        let r = batch(key, ct, body);
        assert_eq!(r.status, status, "{:?}", r.body);
        assert_eq!(r.body["success"], false);
        assert!(r.body["error"]["message"].as_str().unwrap().contains(says), "{:?}", r.body);
    }
    let many: Vec<Value> = (0..1001).map(|i| json!({"documentId": format!("m{i}"), "text": "x"})).collect();
    let r = batch(WRITER, "application/json", Value::Array(many).to_string().as_bytes());
    assert_eq!(r.status, 400);
    assert!(r.body["error"]["message"].as_str().unwrap().contains("at most 1000 documents"), "{:?}", r.body);
    assert_eq!(call(a, "GET", "/v1/indexes/demo/documents:batch", WRITER, None).status, 405);

    // Kept across a restart.
    drop(server);
    let server = start(&keys, &data, &[]);
    let r = call(&server.addr, "GET", "/v1/indexes/demo/documents/handbook%2Ftravel.md", READER, None);
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(r.body["metadata"]["pages"], 3);
    assert_eq!(call(&server.addr, "GET", "/v1/indexes/demo/documents/nd-1", READER, None).status, 200);
}

#[test]
fn a_server_killed_during_writes_keeps_every_acknowledged_write_and_serves_nothing_half_written() {
    use std::collections::BTreeMap;
    use std::sync::{Arc, Mutex};

    /// A document's state: `Some(version)` or `None` (absent).
    type State = Option<u64>;
    let dir = tempfile::tempdir().unwrap();
    let keys = key_store(dir.path());
    let data = dir.path().join("data");
    // What the index must hold, as acknowledged, and the one write sent but not answered.
    let acked: Arc<Mutex<BTreeMap<String, State>>> = Arc::default();
    let in_flight: Arc<Mutex<Option<(String, State)>>> = Arc::default();
    let mut rng = 0x5eed_u64;
    let mut next = || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let text =
        |id: &str, v: u64| format!("Note {id} version {v}: the quarterly review of item {id} found code zx{v}q{id}.");
    let served_state = |a: &str, id: &str| -> State {
        let r = call(a, "GET", &format!("/v1/indexes/demo/documents/{id}"), READER, None);
        if r.status == 404 {
            return None;
        }
        assert_eq!(r.status, 200, "{:?}", r.body);
        let got = r.body["text"].as_str().unwrap();
        let v: u64 = got
            .split(" version ")
            .nth(1)
            .and_then(|r| r.split(':').next())
            .and_then(|v| v.parse().ok())
            .expect("a version");
        assert_eq!(got, text(id, v), "{id} serves a text that is no whole version");
        Some(v)
    };
    let mut version = 0u64;
    let mut kills = 0;
    for round in 0..5 {
        let server = start(&keys, &data, &["--compact-at-chunks", "6"]);
        let a = server.addr.clone();
        // Every acknowledged write is served; the one in flight, whole or not at all.
        let pending = in_flight.lock().unwrap().take();
        let mut known = acked.lock().unwrap();
        let ids: Vec<String> = known.keys().cloned().chain(pending.iter().map(|p| p.0.clone())).collect();
        for id in ids {
            let got = served_state(&a, &id);
            let want = known.get(&id).copied().flatten();
            let maybe = pending.as_ref().filter(|p| p.0 == id).map(|p| p.1);
            assert!(
                got == want || maybe == Some(got),
                "round {round}: {id} is {got:?}, acknowledged {want:?}, in flight {maybe:?}"
            );
            known.insert(id, got);
        }
        drop(known);
        // Searches serve only whole documents.
        let r = call(
            &a,
            "POST",
            "/v1/retrieve",
            READER,
            Some(&json!({"query": "quarterly review of item code", "top_k": 50})),
        );
        for c in r.body["chunks"].as_array().unwrap() {
            let t = c["text"].as_str().unwrap();
            if t.starts_with("Note ") {
                assert!(t.contains("the quarterly review of item") && t.ends_with('.'), "half-written: {t:?}");
            }
        }
        if round == 4 {
            break;
        }
        // Write until killed at a random moment.
        let ops: Vec<(String, State)> = (0..400)
            .map(|_| {
                let id = format!("n{}", next() % 12);
                if next() % 5 == 0 {
                    (id, None)
                } else {
                    version += 1;
                    (id, Some(version))
                }
            })
            .collect();
        let writer = {
            let (a, acked, in_flight) = (a.clone(), acked.clone(), in_flight.clone());
            std::thread::spawn(move || {
                for (id, op) in ops {
                    *in_flight.lock().unwrap() = Some((id.clone(), op));
                    let path = format!("/v1/indexes/demo/documents/{id}");
                    let auth = bearer(WRITER);
                    let r = match op {
                        Some(v) => {
                            let h = [("Authorization", auth.as_str()), ("Content-Type", "text/plain")];
                            try_http(&a, "PUT", &path, &h, text(&id, v).as_bytes())
                        }
                        None => try_http(&a, "DELETE", &path, &[("Authorization", &auth)], b""),
                    };
                    match r {
                        Some(r) if r.status == 200 || (r.status == 404 && op.is_none()) => {
                            acked.lock().unwrap().insert(id, op);
                            *in_flight.lock().unwrap() = None;
                        }
                        Some(r) => panic!("{id}: {} {:?}", r.status, r.body),
                        None => return,
                    }
                }
            })
        };
        std::thread::sleep(Duration::from_millis(400 + next() % 3000));
        let mut server = server;
        let _ = std::process::Command::new("kill").args(["-9", &server.child.id().to_string()]).status();
        let _ = server.child.wait();
        kills += 1;
        writer.join().expect("the writer stops when the server is gone");
    }
    assert_eq!(kills, 4);
    let live = acked.lock().unwrap().values().filter(|s| s.is_some()).count();
    assert!(live > 0, "some writes were acknowledged and checked");
}

/// Indexes through the API: listed as the key may read them, created empty with their
/// options by an admin key, written and searched by name, kept across a restart, deleted
/// with their documents; bad ids, options and scopes are a 4xx naming the problem.
#[test]
fn indexes_are_created_listed_written_searched_and_deleted_through_the_api() {
    let dir = tempfile::tempdir().unwrap();
    let keys = key_store(dir.path());
    let data = dir.path().join("data");
    let server = start(&keys, &data, &[]);
    let a = server.addr.as_str();

    // The list: what the key may read, with what a client needs to choose.
    let r = call(a, "GET", "/v1/indexes", READER, None);
    assert_eq!(r.status, 200, "{:?}", r.body);
    let demo = &r.body["indexes"][0];
    assert_eq!(r.body["indexes"].as_array().unwrap().len(), 1, "{:?}", r.body);
    assert_eq!(
        (demo["index"].as_str(), demo["default"].as_bool(), demo["writable"].as_bool()),
        (Some("demo"), Some(true), Some(true))
    );
    assert!(
        demo["documents"].as_u64().unwrap() > 0
            && demo["chunks"].as_u64().unwrap() >= demo["documents"].as_u64().unwrap()
    );
    assert_eq!((demo["state"].as_str(), demo["paths"]["dense"].as_str()), (Some("ready"), Some("ready")));
    assert_eq!(demo["settings"]["chunkTokens"], 200);

    // Creating needs the admin scope on the index; ids, options and clashes are checked.
    let put = |key: &str, id: &str, body: Option<&Value>| call(a, "PUT", &format!("/v1/indexes/{id}"), key, body);
    for (key, id, body, status, field_or_words) in [
        (WRITER, "notes", None, 403, "admin scope"),
        (ADMIN, "Notes", None, 400, "index"),
        (ADMIN, "notes", Some(json!({"chunkTokens": 8})), 400, "chunkTokens"),
        (ADMIN, "notes", Some(json!({"chunkTokens": 64, "chunkOverlap": 40})), 400, "chunkOverlap"),
        (ADMIN, "notes", Some(json!({"chunkSize": 64})), 400, "chunkSize"),
        (ADMIN, "demo", None, 409, "not created through the API"),
    ] {
        let r = put(key, id, body.as_ref());
        assert_eq!(r.status, status, "{id} {body:?}: {:?}", r.body);
        let e = &r.body["error"];
        assert!(
            e["field"] == field_or_words || e["message"].as_str().unwrap().contains(field_or_words),
            "{:?}",
            r.body
        );
    }
    let r = put(ADMIN, "notes", Some(&json!({"chunkTokens": 64})));
    assert_eq!(r.status, 201, "{:?}", r.body);
    assert_eq!((r.body["index"].as_str(), r.body["documents"].as_u64()), (Some("notes"), Some(0)));
    assert_eq!((r.body["settings"]["chunkTokens"].as_u64(), r.body["writable"].as_bool()), (Some(64), Some(true)));
    assert_eq!(put(ADMIN, "notes", Some(&json!({"chunkTokens": 64}))).status, 200, "the same again: nothing to do");
    assert_eq!(put(ADMIN, "notes", None).status, 409, "other options");
    // An empty index is searched (nothing found), then written in a batch and searched by name.
    let search = |key: &str, query: &str| {
        call(
            a,
            "POST",
            "/v1/search",
            key,
            Some(&json!({"query": query, "index": "notes", "limit": 3, "rerank": false})),
        )
    };
    let r = search(ADMIN, "parking garage");
    assert_eq!((r.status, r.body["results"].as_array().map(Vec::len)), (200, Some(0)), "{:?}", r.body);
    let batch = json!([
        {"documentId": "parking", "text": "Visitors park on level two of the garage."},
        {"documentId": "cafeteria", "text": "The cafeteria serves lunch from noon to two."},
    ]);
    let auth = bearer(ADMIN);
    let h = [("Authorization", auth.as_str()), ("Content-Type", "application/json")];
    let r = http(a, "POST", "/v1/indexes/notes/documents:batch", &h, batch.to_string().as_bytes());
    assert_eq!((r.status, r.body["written"].as_u64()), (200, Some(2)), "{:?}", r.body);
    let r = search(ADMIN, "where do visitors park");
    assert_eq!(r.body["results"][0]["document"]["document_id"], "parking", "{:?}", r.body);
    let r = call(a, "POST", "/v1/retrieve", ADMIN, Some(&json!({"query": "lunch hours", "index": "notes"})));
    assert_eq!(r.body["chunks"][0]["source"]["documentId"], "cafeteria", "{:?}", r.body);
    // A key that may not read it neither sees it listed nor reads it.
    assert_eq!(search(READER, "parking").status, 403);
    assert_eq!(call(a, "GET", "/v1/indexes/notes", READER, None).status, 403);
    let listed = call(a, "GET", "/v1/indexes", READER, None);
    assert_eq!(listed.body["indexes"].as_array().unwrap().len(), 1, "{:?}", listed.body);
    let r = call(a, "GET", "/v1/indexes/notes", ADMIN, None);
    assert_eq!((r.body["documents"].as_u64(), r.body["default"].as_bool()), (Some(2), Some(false)), "{:?}", r.body);

    // Kept across a restart, with its documents.
    drop(server);
    let server = start(&keys, &data, &[]);
    let a = server.addr.as_str();
    let r = call(a, "GET", "/v1/indexes/notes", ADMIN, None);
    assert_eq!((r.status, r.body["documents"].as_u64()), (200, Some(2)), "{:?}", r.body);

    // Deleted with its documents; the server's own index cannot be.
    assert_eq!(call(a, "DELETE", "/v1/indexes/notes", WRITER, None).status, 403);
    assert_eq!(call(a, "DELETE", "/v1/indexes/demo", ADMIN, None).status, 409);
    let r = call(a, "DELETE", "/v1/indexes/notes", ADMIN, None);
    assert_eq!((r.status, r.body["deleted"].as_bool()), (200, Some(true)), "{:?}", r.body);
    assert_eq!(call(a, "GET", "/v1/indexes/notes", ADMIN, None).status, 404);
    assert_eq!(call(a, "GET", "/v1/indexes/notes/documents/parking", ADMIN, None).status, 404);
    assert_eq!(call(a, "DELETE", "/v1/indexes/notes", ADMIN, None).status, 404);
    assert!(!data.join("notes").exists(), "its files are gone");
    let r = call(a, "GET", "/v1/indexes", ADMIN, None);
    assert_eq!(r.body["indexes"].as_array().unwrap().len(), 1, "{:?}", r.body);
}
