//! The targets: each takes arbitrary bytes and panics, with the input, on a violation.

use axum::body::Body;
use axum::http::Request;
use serde_json::Value;
use sextant_core::index::format::{sha256_hex, FileEntry};
use sextant_core::index::Index;
use sextant_core::storage::Blob;

use crate::harness::{harness, KEY, ROUTES};

/// A request body: the first byte picks a route of [`ROUTES`], the rest is the body.
pub fn request_body(data: &[u8]) {
    let Some((&pick, body)) = data.split_first() else { return };
    let route = ROUTES[pick as usize % ROUTES.len()];
    let request = Request::post(route)
        .header("authorization", format!("Bearer {KEY}"))
        .header("content-type", "application/json")
        .body(Body::from(body.to_vec()))
        .expect("a valid request");
    harness().send(request, body);
}

/// The `/v1/search` filter language: arbitrary JSON compiled, and when it compiles,
/// evaluated against the index's documents.
pub fn search_filters(data: &[u8]) {
    let Ok(v) = serde_json::from_slice::<Value>(data) else { return };
    if let Ok(cond) = sextant_server::search_filters::compile(&v, "filters", &Default::default()) {
        for d in &harness().documents {
            let _ = cond.matches(d);
        }
    }
}

/// The conversation rewrite: lines are the history, the last line the new query.
pub fn rewrite(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let mut lines: Vec<String> = text.split('\n').map(str::to_string).collect();
    let query = lines.pop().unwrap_or_default();
    let _ = sextant_finance::rewrite::rewrite(&lines, &query, &harness().names);
}

/// The index loader on hostile files: the first byte picks a file of the index; the second
/// picks between replacing it with the remaining bytes and truncating the real file where
/// they say. The manifest entry is made to match, so the bytes reach the decoders (a
/// checksum mismatch is already refused before); loading must end in an index or an error.
pub fn index_file(data: &[u8]) {
    let h = harness();
    let [pick, mode, rest @ ..] = data else { return };
    let entries = &h.manifest.files;
    let target = &entries[*pick as usize % entries.len()];
    let real = &h.files.iter().find(|(k, _)| *k == target.name).expect("every manifest file is stored").1;
    let bytes: Vec<u8> = if mode % 2 == 0 {
        rest.to_vec()
    } else {
        let at = rest.iter().fold(0usize, |a, &b| a.wrapping_mul(257).wrapping_add(b as usize)) % (real.len() + 1);
        real[..at].to_vec()
    };
    let mut manifest = h.manifest.clone();
    for f in manifest.files.iter_mut().filter(|f| f.name == target.name) {
        *f = FileEntry { name: f.name.clone(), bytes: bytes.len() as u64, sha256: sha256_hex(&bytes) };
    }
    let mut parts = Vec::new();
    for f in &manifest.files {
        let blob = if f.name == target.name {
            Blob::Owned(bytes.clone())
        } else {
            Blob::Owned(h.files.iter().find(|(k, _)| *k == f.name).expect("every manifest file is stored").1.clone())
        };
        match Index::decode_file(&manifest, "mem://fuzz", f, blob) {
            Ok(p) => parts.push(p),
            Err(_) => return,
        }
    }
    if let Ok(index) = Index::assemble(manifest, parts, "mem://fuzz") {
        // A loaded index must also search without panicking.
        let _ = index.bm25.search("capital expenditures", None, 5);
        let q = vec![0.05f32; index.dense.dim];
        let _ = sextant_core::index::VectorStore::search(&*index.dense, &q, None, 5);
    }
}

/// `lambda_http`'s conversion of `text`, or `None` when it refuses the event or panics.
/// The panic hook is silenced meanwhile: libFuzzer's hook aborts on any panic, even one
/// caught here (the targets run on one thread, so the swap is not raced).
fn convert_quietly(text: &str) -> Option<lambda_http::Request> {
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let converted = std::panic::catch_unwind(|| lambda_http::request::from_str(text));
    std::panic::set_hook(hook);
    converted.ok()?.ok()
}

/// An API Gateway event (REST v1 or HTTP v2 JSON) converted by `lambda_http`, as the
/// functions receive it, then routed; an event `lambda_http` refuses is fine.
///
/// `lambda_http` 1.3 itself panics converting an event whose `requestContext.domainName` is
/// not a valid host name (an IDNA error unwrapped in its `request.rs`). API Gateway never
/// sends one, and in a function `lambda_runtime`'s panic layer turns the panic into an
/// invocation error without stopping the process; so this target skips events whose
/// conversion panics and checks everything from the converted request on.
/// `lambda_http_panics_on_an_invalid_domain_name` (in `tests/lambda_events.rs`) keeps the
/// upstream behaviour in view.
pub fn apigw_event(data: &[u8]) {
    std::env::set_var("AWS_LAMBDA_HTTP_IGNORE_STAGE_IN_PATH", "true");
    let Ok(text) = std::str::from_utf8(data) else { return };
    let Some(request) = convert_quietly(text) else { return };
    harness().send(request.map(Body::new), data);
}

/// The PDF reader on hostile bytes: any input is read or refused with one of the PDF
/// errors, within the time limit plus one page's worth (the limit is checked after each
/// page), never a panic or a hang. A crash inside PDFium would end the process, which the
/// runner reports as a failure too.
pub fn pdf(data: &[u8]) {
    let limits = sextant_ingest::PdfLimits { max_pages: 50, max_time: std::time::Duration::from_secs(2) };
    let started = std::time::Instant::now();
    let read = sextant_ingest::parse_with(sextant_ingest::MediaType::Pdf, data, limits);
    assert!(started.elapsed() < std::time::Duration::from_secs(10), "reading took {:?}", started.elapsed());
    match read {
        Ok(parsed) => assert!(parsed.blocks.iter().all(|b| b.page.is_some() && !b.text.is_empty()), "{parsed:?}"),
        Err(e) => assert!(!e.to_string().is_empty()),
    }
}
