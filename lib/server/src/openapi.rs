//! The OpenAPI 3.1 document of the API, generated from the request and response types
//! (their JSON Schemas are derived with `schemars`, so the document cannot drift from the
//! code), served at `GET /openapi.json`.

use schemars::generate::SchemaSettings;
use schemars::JsonSchema;
use serde_json::{json, Map, Value};

use crate::envelope::ErrorEnvelope;
use crate::routes::batch::{BatchResponse, MAX_BATCH_DOCUMENTS};
use crate::routes::context::{ContextBody, ContextResponse};
use crate::routes::documents::{CompactResponse, DocumentBody, DocumentPage, DocumentResponse, WriteResponse};
use crate::routes::indexes::{IndexList, IndexOptions, IndexResponse};
use crate::routes::knowledge_base::{KbRequest, KbResponse};
use crate::routes::retrieve::{RetrieveRequest, RetrieveResponse};
use crate::routes::search::{SearchBody, SearchResponse};

/// One operation: method, path, its `operationId`, tag, summary, request body (schema and
/// example, or none), success status and schema, and the error statuses it answers with.
struct Operation {
    method: &'static str,
    path: &'static str,
    id: &'static str,
    tag: &'static str,
    summary: &'static str,
    request: Option<(Value, Value)>,
    ok: (u16, Value),
    error: Value,
    statuses: &'static [u16],
    more: More,
}

/// What a few operations add to the common shape.
#[derive(Default)]
struct More {
    /// Media types taken besides JSON, as a plain string body.
    raw_bodies: &'static [&'static str],
    /// The meaning of a `202`, for an operation that may answer before its work is done.
    accepted: Option<&'static str>,
    /// Another success status with the same answer, and its meaning.
    also_ok: Option<(u16, &'static str)>,
    /// Header and query parameters (path parameters come from the path).
    parameters: Vec<Value>,
}

/// The tags, in the order a reader meets them.
const TAGS: [(&str, &str); 6] = [
    ("retrieval", "Cited passages for a question: the retrieval and search APIs"),
    ("context", "Structured, cited context for financial questions"),
    ("knowledge-base", "The knowledge-base Retrieve API (a cloud knowledge base's design)"),
    ("indexes", "The indexes: list, inspect, create, delete"),
    ("documents", "A team's own documents: write, read, list, delete, compact"),
    ("service", "Health and this document"),
];

/// The document.
pub fn document() -> Value {
    let mut settings = SchemaSettings::draft2020_12();
    settings.definitions_path = "/components/schemas".into();
    let mut generator = settings.into_generator();
    let mut schema = |f: fn(&mut schemars::SchemaGenerator) -> schemars::Schema| f(&mut generator).to_value();
    fn of<T: JsonSchema>(g: &mut schemars::SchemaGenerator) -> schemars::Schema {
        g.subschema_for::<T>()
    }
    let error = schema(of::<ErrorEnvelope>);
    let v1_errors: &[u16] = &[400, 401, 403, 404, 405, 413, 415, 429, 500, 503];
    let read_errors: &[u16] = &[400, 401, 403, 404, 429, 500, 503];
    let operations = [
        Operation {
            method: "post",
            path: "/v1/retrieve",
            id: "retrieve",
            tag: "retrieval",
            summary: "Cited chunks for a query (filters, plan-clamped top_k, period fallback, \
                      segments with character offsets)",
            request: Some((
                schema(of::<RetrieveRequest>),
                json!({"query": "Where is Mastercard headquartered?", "filters": {"tickers": ["MA"]},
                       "top_k": 3, "include_segments": true}),
            )),
            ok: (200, schema(of::<RetrieveResponse>)),
            error: error.clone(),
            statuses: v1_errors,
            more: More::default(),
        },
        Operation {
            method: "post",
            path: "/v1/search",
            id: "search",
            tag: "retrieval",
            summary: "Sentence units from dense + SPLADE + BM25 retrieval, fused, reranked where configured, \
                      with diagnostics",
            request: Some((
                schema(of::<SearchBody>),
                json!({"query": "cross-border transaction volume growth", "entity": "Mastercard", "limit": 5}),
            )),
            ok: (200, schema(of::<SearchResponse>)),
            error: error.clone(),
            statuses: v1_errors,
            more: More::default(),
        },
        Operation {
            method: "post",
            path: "/v1/context",
            id: "context",
            tag: "context",
            summary: "Structured, cited context for a financial question: route (metric_lookup, timeseries, \
                      full_statement, narrative, hybrid), facts with YoY changes, statements, passages, \
                      contradictions, confidence",
            request: Some((
                schema(of::<ContextBody>),
                json!({"question": "What was Mastercard's net revenue in 2023?", "top_k": 5}),
            )),
            ok: (200, schema(of::<ContextResponse>)),
            error: error.clone(),
            statuses: v1_errors,
            more: More::default(),
        },
        Operation {
            method: "post",
            path: "/{WorkspaceId}/index/retrieve",
            id: "kbRetrieve",
            tag: "knowledge-base",
            summary: "Knowledge-base Retrieve: SearchFilters, rerank thresholds, conversation rewrite",
            request: Some((
                schema(of::<KbRequest>),
                json!({"IndexId": "demo", "Query": "cross-border volume growth", "DenseSimilarityTopK": 20,
                       "SearchFilters": [{"ticker": "MA"}]}),
            )),
            ok: (200, schema(of::<KbResponse>)),
            error: schema(of::<KbResponse>),
            statuses: v1_errors,
            more: More::default(),
        },
        Operation {
            method: "put",
            path: "/v1/indexes/{index}/documents/{documentId}",
            id: "putDocument",
            tag: "documents",
            summary: "Write a document (JSON, or a raw text/plain, text/markdown or text/html body with the \
                      Sextant-Title and Sextant-Metadata headers); 200 when live, 202 when pending",
            request: Some((
                schema(of::<DocumentBody>),
                json!({"text": "# Travel\n\nCross-border volume grew 24% on travel.", "contentType": "text/markdown",
                       "title": "Travel note", "metadata": {"team": "payments", "reviewed": "2024-05-01"}}),
            )),
            ok: (200, schema(of::<WriteResponse>)),
            error: error.clone(),
            statuses: v1_errors,
            more: More {
                raw_bodies: &["text/plain", "text/markdown", "text/html"],
                accepted: Some("Stored, searchable once the build it started is published"),
                parameters: vec![
                    json!({"name": "Sextant-Title", "in": "header", "required": false,
                        "description": "The title of a raw body (ASCII)", "schema": {"type": "string"}}),
                    json!({"name": "Sextant-Metadata", "in": "header", "required": false,
                        "description": "The metadata of a raw body: a JSON object (ASCII; escape others as \\u)",
                        "schema": {"type": "string"}}),
                ],
                ..More::default()
            },
        },
        Operation {
            method: "get",
            path: "/v1/indexes",
            id: "listIndexes",
            tag: "indexes",
            summary: "The indexes this key may read: documents, chunks, version, paths ready, settings",
            request: None,
            ok: (200, schema(of::<IndexList>)),
            error: error.clone(),
            statuses: &[401, 429, 500, 503],
            more: More::default(),
        },
        Operation {
            method: "get",
            path: "/v1/indexes/{index}",
            id: "getIndex",
            tag: "indexes",
            summary: "One index: documents, chunks, version, paths ready (state), settings",
            request: None,
            ok: (200, schema(of::<IndexResponse>)),
            error: error.clone(),
            statuses: read_errors,
            more: More::default(),
        },
        Operation {
            method: "put",
            path: "/v1/indexes/{index}",
            id: "createIndex",
            tag: "indexes",
            summary: "Create an empty index that takes documents (admin scope; an empty body takes the server's \
                      options): 201 when created, 200 when it exists with these options, 409 with others or when the \
                      id is the deployment's own index; 501 where the deployment creates no index (on AWS: \
                      without SEXTANT_CATALOG)",
            request: Some((schema(of::<IndexOptions>), json!({"chunkTokens": 200, "chunkOverlap": 0}))),
            ok: (201, schema(of::<IndexResponse>)),
            error: error.clone(),
            statuses: &[400, 401, 403, 409, 413, 415, 429, 500, 501, 503],
            more: More { also_ok: Some((200, "The index exists with these options")), ..More::default() },
        },
        Operation {
            method: "delete",
            path: "/v1/indexes/{index}",
            id: "deleteIndex",
            tag: "indexes",
            summary: "Delete an index created through the API, with its documents (admin scope)",
            request: None,
            ok: (200, schema(of::<IndexResponse>)),
            error: error.clone(),
            statuses: &[400, 401, 403, 404, 409, 429, 500, 501, 503],
            more: More::default(),
        },
        Operation {
            method: "post",
            path: "/v1/indexes/{index}/documents:batch",
            id: "putDocuments",
            tag: "documents",
            summary: "Write up to 1,000 documents at once (a JSON array, or application/x-ndjson: one per line), \
                      each a PUT's JSON body with its documentId; one result per document, in order (written, or \
                      the error naming the field); 200 when live, 202 when pending",
            request: Some((
                json!({"type": "array", "minItems": 1, "maxItems": MAX_BATCH_DOCUMENTS, "items": schema(of::<DocumentBody>)}),
                json!([{"documentId": "travel-note", "text": "Cross-border volume grew 24% on travel.",
                        "metadata": {"team": "payments"}},
                       {"documentId": "handbook/intro.md", "text": "# Intro\n\nWelcome.", "contentType": "text/markdown"}]),
            )),
            ok: (200, schema(of::<BatchResponse>)),
            error: error.clone(),
            statuses: v1_errors,
            more: More {
                raw_bodies: &["application/x-ndjson"],
                accepted: Some("Stored, searchable once the build it started is published"),
                ..More::default()
            },
        },
        Operation {
            method: "get",
            path: "/v1/indexes/{index}/documents/{documentId}",
            id: "getDocument",
            tag: "documents",
            summary: "A document: its fields, text, segments with character offsets, and status",
            request: None,
            ok: (200, schema(of::<DocumentResponse>)),
            error: error.clone(),
            statuses: read_errors,
            more: More::default(),
        },
        Operation {
            method: "delete",
            path: "/v1/indexes/{index}/documents/{documentId}",
            id: "deleteDocument",
            tag: "documents",
            summary: "Delete a document: it is never served again once this returns",
            request: None,
            ok: (200, schema(of::<WriteResponse>)),
            error: error.clone(),
            statuses: read_errors,
            more: More::default(),
        },
        Operation {
            method: "get",
            path: "/v1/indexes/{index}/documents",
            id: "listDocuments",
            tag: "documents",
            summary: "A page of the index's documents, in id order (limit 1-1000, default 100; cursor)",
            request: None,
            ok: (200, schema(of::<DocumentPage>)),
            error: error.clone(),
            statuses: read_errors,
            more: More {
                parameters: vec![
                    json!({"name": "limit", "in": "query", "required": false,
                        "schema": {"type": "integer", "minimum": 1, "maximum": 1000, "default": 100}}),
                    json!({"name": "cursor", "in": "query", "required": false,
                        "description": "The nextCursor of the page before", "schema": {"type": "string"}}),
                ],
                ..More::default()
            },
        },
        Operation {
            method: "post",
            path: "/v1/indexes/{index}/compact",
            id: "compactIndex",
            tag: "documents",
            summary: "Fold the writes into a new index version now (admin scope)",
            request: None,
            ok: (200, schema(of::<CompactResponse>)),
            error: error.clone(),
            statuses: read_errors,
            more: More::default(),
        },
    ];
    let mut paths = Map::new();
    for op in operations {
        let mut responses = Map::new();
        let (ok_status, ok_schema) = op.ok;
        responses.insert(
            ok_status.to_string(),
            json!({"description": "Success", "content": {"application/json": {"schema": ok_schema.clone()}}}),
        );
        if let Some((status, description)) = op.more.also_ok {
            responses.insert(
                status.to_string(),
                json!({"description": description, "content": {"application/json": {"schema": ok_schema.clone()}}}),
            );
        }
        if let Some(description) = op.more.accepted {
            responses.insert(
                "202".into(),
                json!({"description": description, "content": {"application/json": {"schema": ok_schema.clone()}}}),
            );
        }
        for s in op.statuses {
            responses.insert(
                s.to_string(),
                json!({"description": reason(*s), "content": {"application/json": {"schema": op.error}}}),
            );
        }
        let mut operation = json!({
            "operationId": op.id,
            "tags": [op.tag],
            "summary": op.summary,
            "security": [{"bearer": []}, {"apiKey": []}],
            "responses": responses,
        });
        if let Some((body, example)) = op.request {
            let mut content = Map::new();
            content.insert("application/json".into(), json!({"schema": body, "example": example}));
            for raw in op.more.raw_bodies {
                content.insert(raw.to_string(), json!({"schema": {"type": "string"}}));
            }
            operation["requestBody"] = json!({"required": true, "content": content});
        }
        let mut parameters = Vec::new();
        for name in ["WorkspaceId", "index", "documentId"] {
            if op.path.contains(&format!("{{{name}}}")) {
                parameters.push(json!({"name": name, "in": "path", "required": true, "schema": {"type": "string"}}));
            }
        }
        parameters.extend(op.more.parameters);
        if !parameters.is_empty() {
            operation["parameters"] = Value::Array(parameters);
        }
        let entry = paths.entry(op.path.to_string()).or_insert_with(|| json!({}));
        entry[op.method] = operation;
    }
    paths.insert(
        "/health".into(),
        json!({"get": {
            "operationId": "health",
            "tags": ["service"],
            "summary": "200 once models and indexes are loaded, 503 while loading",
            "responses": {
            "200": {"description": "Ready", "content": {"application/json": {"schema": {
                "type": "object",
                "required": ["status", "indexes", "version"],
                "properties": {
                    "status": {"const": "ok"},
                    "degraded": {"type": "boolean", "description": "Whether a path or model is unavailable"},
                    "paths": {
                        "type": "object",
                        "description": "Per index, each path's state: ready, or building while its index builds",
                        "additionalProperties": {"type": "object", "additionalProperties": {"type": "string"}}
                    },
                    "indexes": {
                        "type": "object",
                        "description": "Chunks per loaded index",
                        "additionalProperties": {"type": "integer"}
                    },
                    "indexVersions": {
                        "type": "object",
                        "description": "The published version served, for indexes loaded from S3",
                        "additionalProperties": {"type": "string"}
                    },
                    "defaultIndex": {
                        "type": "string",
                        "description": "The index /v1/retrieve, /v1/search and /v1/context read"
                    },
                    "version": {"type": "string"}
                }
            }}}},
            "503": {
                "description": "Loading",
                "content": {"application/json": {"schema": error}}
            }
        }}}),
    );
    paths.insert(
        "/openapi.json".into(),
        json!({"get": {
            "operationId": "openapi",
            "tags": ["service"],
            "summary": "This document",
            "responses": {"200": {"description": "The OpenAPI 3.1 document",
                "content": {"application/json": {"schema": {"type": "object"}}}}}
        }}),
    );
    let tags: Vec<Value> =
        TAGS.iter().map(|(name, description)| json!({"name": name, "description": description})).collect();
    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "Sextant",
            "version": sextant_core::VERSION,
            "description": "Hybrid retrieval API: cited passages, never generated answers."
        },
        "tags": tags,
        "paths": paths,
        "components": {
            "schemas": generator.take_definitions(true),
            "securitySchemes": {
                "bearer": {"type": "http", "scheme": "bearer"},
                "apiKey": {"type": "apiKey", "in": "header", "name": "X-API-Key"}
            }
        }
    })
}

/// The document as `sextant openapi` prints it: pretty, with a final newline.
pub fn pretty() -> String {
    let mut text = serde_json::to_string_pretty(&document()).expect("a JSON value serializes");
    text.push('\n');
    text
}

fn reason(status: u16) -> &'static str {
    match status {
        400 => "Invalid request: the field and the reason",
        401 => "Missing, unknown or revoked API key",
        403 => "The key may not read (or change) this index",
        404 => "No such route or index",
        405 => "Method not allowed",
        413 => "Body too large",
        415 => "Body is not JSON",
        409 => "The index exists otherwise, or is not one the API created",
        429 => "Rate limited (Retry-After)",
        501 => "Not offered by this deployment",
        503 => "Loading, or a dependency is down (Retry-After)",
        _ => "Internal error (no internals disclosed)",
    }
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    /// Every operation: a unique `operationId`, one tag the document declares, and a request
    /// example that the server itself accepts as the operation's body.
    #[test]
    fn operations_are_named_tagged_and_their_examples_parse() {
        let doc = super::document();
        let tags: Vec<&str> = doc["tags"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
        let mut ids = Vec::new();
        for (path, item) in doc["paths"].as_object().unwrap() {
            for (method, op) in item.as_object().unwrap() {
                let id = op["operationId"].as_str().unwrap_or_else(|| panic!("{method} {path} has no operationId"));
                ids.push(id.to_string());
                let op_tags = op["tags"].as_array().unwrap();
                assert!(op_tags.len() == 1 && tags.contains(&op_tags[0].as_str().unwrap()), "{id}: {op_tags:?}");
                let Some(example) = op.pointer("/requestBody/content/application~1json/example") else {
                    assert!(!["post", "put"].contains(&method.as_str()) || id == "compactIndex", "{id} has no example");
                    continue;
                };
                let parsed = match id {
                    "retrieve" => {
                        serde_json::from_value::<crate::routes::retrieve::RetrieveRequest>(example.clone()).map(|_| ())
                    }
                    "search" => {
                        serde_json::from_value::<crate::routes::search::SearchBody>(example.clone()).map(|_| ())
                    }
                    "context" => {
                        serde_json::from_value::<crate::routes::context::ContextBody>(example.clone()).map(|_| ())
                    }
                    "kbRetrieve" => {
                        serde_json::from_value::<crate::routes::knowledge_base::KbRequest>(example.clone()).map(|_| ())
                    }
                    "putDocument" => {
                        serde_json::from_value::<crate::routes::documents::DocumentBody>(example.clone()).map(|_| ())
                    }
                    "createIndex" => {
                        serde_json::from_value::<crate::routes::indexes::IndexOptions>(example.clone()).map(|_| ())
                    }
                    "putDocuments" => {
                        serde_json::from_value::<Vec<crate::routes::documents::DocumentBody>>(example.clone())
                            .map(|_| ())
                    }
                    other => panic!("an example for {other}, which takes no body"),
                };
                parsed.unwrap_or_else(|e| panic!("{id}'s example is refused: {e}"));
            }
        }
        let count = ids.len();
        ids.sort();
        ids.dedup();
        assert_eq!(ids.len(), count, "operationIds repeat: {ids:?}");
        assert_eq!(count, 16, "{ids:?}");
    }

    /// The copy in the repository (`openapi.json`, which clients are generated and checked
    /// from) is the document the server serves: `sextant openapi > openapi.json` after a change.
    #[test]
    fn the_repository_copy_has_not_drifted() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../openapi.json");
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let committed: Value = serde_json::from_str(&text).unwrap();
        assert!(
            committed == super::document(),
            "openapi.json differs from the served document: run `sextant openapi > openapi.json`"
        );
        assert_eq!(text, super::pretty(), "openapi.json is not as `sextant openapi` prints it");
    }

    #[test]
    fn every_reference_resolves() {
        let doc = super::document();
        let text = doc.to_string();
        let schemas = doc["components"]["schemas"].as_object().unwrap();
        for piece in text.split("\"$ref\":\"#/components/schemas/").skip(1) {
            let name = piece.split('"').next().unwrap();
            assert!(schemas.contains_key(name), "dangling $ref {name}");
        }
        for name in [
            "RetrieveRequest",
            "RetrieveResponse",
            "SearchBody",
            "SearchResponse",
            "KbRequest",
            "KbResponse",
            "ErrorEnvelope",
            "RerankStatus",
            "ContextBody",
            "ContextResponse",
        ] {
            assert!(schemas.contains_key(name), "{name} missing");
        }
    }
}
