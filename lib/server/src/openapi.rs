//! The OpenAPI 3.1 document of the API, generated from the request and response types
//! (their JSON Schemas are derived with `schemars`, so the document cannot drift from the
//! code), served at `GET /openapi.json`.

use schemars::generate::SchemaSettings;
use schemars::JsonSchema;
use serde_json::{json, Map, Value};

use crate::envelope::ErrorEnvelope;
use crate::routes::context::{ContextBody, ContextResponse};
use crate::routes::knowledge_base::{KbRequest, KbResponse};
use crate::routes::retrieve::{RetrieveRequest, RetrieveResponse};
use crate::routes::search::{SearchBody, SearchResponse};

/// One POST endpoint: path, summary, request type, success type, error type, error statuses.
struct Endpoint {
    path: &'static str,
    summary: &'static str,
    request: Value,
    ok: Value,
    error: Value,
    statuses: &'static [u16],
}

/// The document.
pub fn document() -> Value {
    let mut settings = SchemaSettings::draft2020_12();
    settings.definitions_path = "/components/schemas".into();
    let mut generator = settings.into_generator();
    let mut schema = |f: fn(&mut schemars::SchemaGenerator) -> schemars::Schema| f(&mut generator).to_value();
    fn of<T: JsonSchema>(g: &mut schemars::SchemaGenerator) -> schemars::Schema {
        g.subschema_for::<T>()
    }
    let v1_errors: &[u16] = &[400, 401, 403, 404, 405, 413, 415, 429, 500, 503];
    let endpoints = [
        Endpoint {
            path: "/v1/retrieve",
            summary: "Cited chunks for a query (filters, plan-clamped top_k, period fallback, \
                      segments with character offsets)",
            request: schema(of::<RetrieveRequest>),
            ok: schema(of::<RetrieveResponse>),
            error: schema(of::<ErrorEnvelope>),
            statuses: v1_errors,
        },
        Endpoint {
            path: "/v1/search",
            summary: "Sentence units from dense + SPLADE + BM25 retrieval, fused, reranked where configured, \
                      with diagnostics",
            request: schema(of::<SearchBody>),
            ok: schema(of::<SearchResponse>),
            error: schema(of::<ErrorEnvelope>),
            statuses: v1_errors,
        },
        Endpoint {
            path: "/v1/context",
            summary: "Structured, cited context for a financial question: route (metric_lookup, timeseries, \
                      full_statement, narrative, hybrid), facts with YoY changes, statements, passages, \
                      contradictions, confidence",
            request: schema(of::<ContextBody>),
            ok: schema(of::<ContextResponse>),
            error: schema(of::<ErrorEnvelope>),
            statuses: v1_errors,
        },
        Endpoint {
            path: "/{WorkspaceId}/index/retrieve",
            summary: "Knowledge-base Retrieve: SearchFilters, rerank thresholds, conversation rewrite",
            request: schema(of::<KbRequest>),
            ok: schema(of::<KbResponse>),
            error: schema(of::<KbResponse>),
            statuses: v1_errors,
        },
    ];
    let mut paths = Map::new();
    for e in endpoints {
        let mut responses = Map::new();
        responses
            .insert("200".into(), json!({"description": "Success", "content": {"application/json": {"schema": e.ok}}}));
        for s in e.statuses {
            responses.insert(
                s.to_string(),
                json!({"description": reason(*s), "content": {"application/json": {"schema": e.error}}}),
            );
        }
        let mut op = json!({
            "summary": e.summary,
            "security": [{"bearer": []}, {"apiKey": []}],
            "requestBody": {"required": true, "content": {"application/json": {"schema": e.request}}},
            "responses": responses,
        });
        if e.path.contains("{WorkspaceId}") {
            op["parameters"] =
                json!([{"name": "WorkspaceId", "in": "path", "required": true, "schema": {"type": "string"}}]);
        }
        paths.insert(e.path.into(), json!({ "post": op }));
    }
    paths.insert(
        "/health".into(),
        json!({"get": {"summary": "200 once models and indexes are loaded, 503 while loading", "responses": {
            "200": {"description": "Ready", "content": {"application/json": {"schema": {
                "type": "object",
                "required": ["status", "indexes", "version"],
                "properties": {
                    "status": {"const": "ok"},
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
                    "version": {"type": "string"}
                }
            }}}},
            "503": {
                "description": "Loading",
                "content": {"application/json": {"schema": schema(of::<ErrorEnvelope>)}}
            }
        }}}),
    );
    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "Sextant",
            "version": sextant_core::VERSION,
            "description": "Hybrid retrieval API: cited passages, never generated answers."
        },
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

fn reason(status: u16) -> &'static str {
    match status {
        400 => "Invalid request: the field and the reason",
        401 => "Missing, unknown or revoked API key",
        403 => "The key may not read this index",
        404 => "No such route or index",
        405 => "Method not allowed",
        413 => "Body too large",
        415 => "Body is not JSON",
        429 => "Rate limited (Retry-After)",
        503 => "Loading, or a dependency is down (Retry-After)",
        _ => "Internal error (no internals disclosed)",
    }
}

#[cfg(test)]
mod tests {
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
