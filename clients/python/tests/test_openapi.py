"""The client's models against the live server's ``/openapi.json``, both ways, and real
answers against both: a change on either side fails here.

- every model matches the schema its ``openapi_ref`` names (``schema_check``);
- every object schema an operation of the client sends or receives has a model, and every
  operation of the server is one the client calls;
- real answers, successes and errors, validate against the operation's JSON Schema for
  their status (jsonschema, draft 2020-12) and into the models with no field left over.

A model whose schema this server does not publish yet is skipped, not passed.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from jsonschema import Draft202012Validator
from openapi_spec_validator import validate
from pydantic import BaseModel
from referencing import Registry
from referencing.jsonschema import DRAFT202012

from sextant import Sextant
from sextant.types import (
    MODELS,
    BatchResponse,
    CompactResponse,
    ContextResponse,
    Document,
    DocumentPage,
    ErrorEnvelope,
    Health,
    IndexList,
    IndexResponse,
    KbResponse,
    RetrieveResponse,
    SearchResponse,
    WriteResponse,
    _Model,
)

from schema_check import model_problems, pointer

DOCUMENT = "/v1/indexes/{index}/documents/{documentId}"
#: Each operation of the server, and the client method that calls it.
OPERATIONS: dict[tuple[str, str], str] = {
    ("post", "/v1/retrieve"): "retrieve",
    ("post", "/v1/search"): "search",
    ("post", "/v1/context"): "context",
    ("post", "/{WorkspaceId}/index/retrieve"): "knowledge_base_retrieve",
    ("put", DOCUMENT): "put_document",
    ("post", "/v1/indexes/{index}/documents:batch"): "put_documents",
    ("get", "/v1/indexes"): "list_indexes",
    ("get", "/v1/indexes/{index}"): "get_index",
    ("put", "/v1/indexes/{index}"): "create_index",
    ("delete", "/v1/indexes/{index}"): "delete_index",
    ("get", DOCUMENT): "get_document",
    ("delete", DOCUMENT): "delete_document",
    ("get", "/v1/indexes/{index}/documents"): "list_documents",
    ("post", "/v1/indexes/{index}/compact"): "compact",
    ("get", "/health"): "health",
    ("get", "/openapi.json"): "openapi",
}
URN = "urn:sextant:openapi"


@pytest.fixture(scope="session")
def openapi(client: Sextant) -> dict[str, Any]:
    return client.openapi()


def _escape(path: str) -> str:
    return path.replace("~", "~0").replace("/", "~1")


def _json_schemas(doc: dict[str, Any], method: str, path: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """(JSON pointer, schema) of an operation's JSON request body and answers."""
    op = f"#/paths/{_escape(path)}/{method}"
    body = pointer(doc, f"{op}/requestBody/content/application~1json/schema")
    if body is not None:
        yield f"{op}/requestBody/content/application~1json/schema", body
    for status in pointer(doc, f"{op}/responses") or {}:
        at = f"{op}/responses/{status}/content/application~1json/schema"
        schema = pointer(doc, at)
        if schema is not None:
            yield at, schema


def _object_schemas(doc: dict[str, Any], at: str, schema: Any, seen: set[str]) -> Iterator[str]:
    """The pointers of every object schema reachable from ``schema`` (found at ``at``)."""
    if isinstance(schema, list):
        for i, s in enumerate(schema):
            yield from _object_schemas(doc, f"{at}/{i}", s, seen)
        return
    if not isinstance(schema, dict):
        return
    if "$ref" in schema:
        ref = schema["$ref"]
        if ref not in seen:
            seen.add(ref)
            yield from _object_schemas(doc, ref, pointer(doc, ref), seen)
        return
    alts = schema.get("oneOf") or schema.get("anyOf") or []
    if "properties" in schema or (alts and all(isinstance(a, dict) and "properties" in a for a in alts)):
        yield at
    for key in ("properties", "additionalProperties", "items", "anyOf", "oneOf", "allOf"):
        if key in schema:
            yield from _object_schemas(doc, f"{at}/{key}", schema[key], seen)


def test_the_served_document_is_valid_openapi_3_1(openapi: dict[str, Any]) -> None:
    # A standard validator, not ours: every client generator reads the document this way.
    validate(openapi)
    assert openapi["openapi"] == "3.1.0"
    ids = [op["operationId"] for item in openapi["paths"].values() for op in item.values()]
    assert len(ids) == len(set(ids)), ids


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.__name__)
def test_each_model_matches_its_schema(model: type[_Model], openapi: dict[str, Any]) -> None:
    schema = pointer(openapi, model.openapi_ref)
    if schema is None:
        pytest.skip(f"this server's /openapi.json has no {model.openapi_ref}")
    assert model_problems(model, schema, openapi) == []


def test_each_schema_the_client_meets_has_a_model(openapi: dict[str, Any]) -> None:
    modelled = {m.openapi_ref for m in MODELS}
    missing = []
    for method, path in OPERATIONS:
        if path == "/openapi.json":
            continue
        seen: set[str] = set()
        for at, schema in _json_schemas(openapi, method, path):
            for obj in _object_schemas(openapi, at, schema, seen):
                if obj not in modelled and "/properties/" not in obj.split("/schema", 1)[-1]:
                    missing.append(f"{method.upper()} {path}: {obj}")
    assert sorted(set(missing)) == []


def test_each_operation_of_the_server_has_a_client_method(openapi: dict[str, Any]) -> None:
    served = {
        (m, p) for p, ops in openapi["paths"].items() for m in ops if m in ("get", "post", "put", "delete", "patch")
    }
    assert sorted(served - set(OPERATIONS)) == [], "operations the client does not call"
    for (method, path), name in OPERATIONS.items():
        assert callable(getattr(Sextant, name))
        op = openapi["paths"].get(path, {}).get(method)
        if op is None and path.startswith("/v1/indexes/"):
            continue  # a server from before the document routes were in the document
        assert op is not None, f"the server no longer has {method.upper()} {path}"


# Real answers. ---------------------------------------------------------------------------


def _extras(value: Any, where: str = "$") -> list[str]:
    """Fields of a parsed answer that no model declares."""
    if isinstance(value, BaseModel):
        out = [f"{where}.{k}" for k in (value.model_extra or {})]
        for name in type(value).model_fields:
            out += _extras(getattr(value, name), f"{where}.{name}")
        return out
    if isinstance(value, list):
        return [e for i, v in enumerate(value) for e in _extras(v, f"{where}[{i}]")]
    if isinstance(value, dict):
        return [e for k, v in value.items() for e in _extras(v, f"{where}.{k}")]
    return []


class Answers:
    """Sends requests with plain httpx and checks each answer against the document."""

    def __init__(self, doc: dict[str, Any], base_url: str, api_key: str) -> None:
        self.doc = doc
        self.registry = Registry().with_resource(URN, DRAFT202012.create_resource(doc))
        self.http = httpx.Client(base_url=base_url, headers={"Authorization": f"Bearer {api_key}"}, timeout=60)
        self.checked = 0

    def check(
        self,
        method: str,
        template: str,
        model: type[BaseModel],
        status: int = 200,
        path: str | None = None,
        body: dict[str, Any] | list[Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> Any:
        if pointer(self.doc, f"#/paths/{_escape(template)}/{method}") is None:
            pytest.skip(f"this server's /openapi.json has no {method.upper()} {template}")
        r = self.http.request(method, path or template, json=body, headers=headers)
        assert r.status_code == status, r.text
        at = f"#/paths/{_escape(template)}/{method}/responses/{status}/content/application~1json/schema"
        assert pointer(self.doc, at) is not None, f"{method.upper()} {template} answered {status}, not in the document"
        validator = Draft202012Validator({"$ref": URN + at}, registry=self.registry)
        errors = [f"{'/'.join(map(str, e.absolute_path)) or '$'}: {e.message}" for e in validator.iter_errors(r.json())]
        assert errors == [], f"{method.upper()} {template} {status}: the answer does not match its schema"
        parsed = model.model_validate(r.json())
        assert _extras(parsed) == [], f"{method.upper()} {template}: fields the client's models lack"
        self.checked += 1
        return parsed


@pytest.fixture
def answers(openapi: dict[str, Any], client: Sextant) -> Iterator[Answers]:
    a = Answers(openapi, client.base_url, client.api_key or "")
    yield a
    a.http.close()


def test_retrieval_answers(answers: Answers, index: str) -> None:
    r = answers.check(
        "post",
        "/v1/retrieve",
        RetrieveResponse,
        body={"query": "Where is Mastercard headquartered?", "top_k": 3, "include_segments": True},
    )
    assert r.chunks[0].source.segments
    r = answers.check(
        "post",
        "/v1/retrieve",
        RetrieveResponse,
        body={"query": "outlook", "filters": {"tickers": ["XOM"], "year": 2030, "quarter": "Q4"}, "top_k": 2},
    )
    assert r.meta.period_mismatch is not None
    answers.check("post", "/v1/retrieve", ErrorEnvelope, 400, body={"query": "x", "top_k": 0})
    answers.check(
        "post", "/v1/retrieve", ErrorEnvelope, 401, body={"query": "x"}, headers={"Authorization": "Bearer no"}
    )
    answers.check(
        "post", "/v1/search", SearchResponse, body={"query": "cross-border growth", "entity": "MA", "limit": 3}
    )
    answers.check("post", "/v1/search", ErrorEnvelope, 400, body={"query": "x", "published_after": "2024-02-31"})
    kb = "/{WorkspaceId}/index/retrieve"
    body = {
        "IndexId": index,
        "Query": "and in 2023?",
        "EnableRewrite": True,
        "RerankTopN": 2,
        "History": [{"Role": "user", "Content": "What were Mastercard's main risk factors in 2024?"}],
        "SearchFilters": [{"ticker": "MA"}],
    }
    r = answers.check("post", kb, KbResponse, path="/ws_demo/index/retrieve", body=body)
    assert r.data.rewritten_query
    answers.check("post", kb, KbResponse, 400, path="/ws/index/retrieve", body={"IndexId": index, "RerankTopN": 0})
    answers.check("post", kb, KbResponse, 404, path="/ws/index/retrieve", body={"IndexId": "nope", "Query": "x"})
    answers.check("get", "/health", Health)
    assert answers.checked == 10


@pytest.mark.parametrize(
    "question",
    [
        "What was Mastercard's net revenue in 2023?",
        "Mastercard revenue each year since 2021",
        "Show Oracle's balance sheet for 2024",
        "What did Exxon say about refining margins?",
        "Why did Mastercard net income grow in 2023?",
    ],
)
def test_context_answers(answers: Answers, question: str) -> None:
    answers.check("post", "/v1/context", ContextResponse, body={"question": question, "top_k": 3})


def test_document_answers(answers: Answers, index: str) -> None:
    document_id = f"client-openapi-{uuid.uuid4().hex[:12]}"
    at = f"/v1/indexes/{index}/documents/{document_id}"
    body = {"text": "# Note\n\nSchemas are checked.", "contentType": "text/markdown", "metadata": {"team": "qa"}}
    answers.check("put", DOCUMENT, WriteResponse, path=at, body=body)
    answers.check("get", DOCUMENT, Document, path=at)
    answers.check("get", "/v1/indexes/{index}/documents", DocumentPage, path=f"/v1/indexes/{index}/documents?limit=3")
    answers.check("post", "/v1/indexes/{index}/compact", CompactResponse, path=f"/v1/indexes/{index}/compact")
    answers.check("delete", DOCUMENT, WriteResponse, path=at)
    answers.check("get", DOCUMENT, ErrorEnvelope, 404, path=at)
    answers.check("put", DOCUMENT, ErrorEnvelope, 400, path=at, body={"text": "x", "year": "soon"})
    batch = "/v1/indexes/{index}/documents:batch"
    written = answers.check(
        "post",
        batch,
        BatchResponse,
        path=f"/v1/indexes/{index}/documents:batch",
        body=[{"documentId": document_id, **body}, {"documentId": f"{document_id}-2", "year": "soon"}],
    )
    assert (written.written, written.failed) == (1, 1) and written.results[1].error.field == "year"
    answers.check("post", batch, ErrorEnvelope, 400, path=f"/v1/indexes/{index}/documents:batch", body=[])
    answers.check("get", "/v1/indexes", IndexList)
    answers.check("get", "/v1/indexes/{index}", IndexResponse, path=f"/v1/indexes/{index}")
    name = f"client-openapi-{uuid.uuid4().hex[:8]}"
    one = "/v1/indexes/{index}"
    answers.check("put", one, IndexResponse, 201, path=f"/v1/indexes/{name}", body={"chunkTokens": 64})
    answers.check("put", one, IndexResponse, path=f"/v1/indexes/{name}", body={"chunkTokens": 64})
    answers.check("put", one, ErrorEnvelope, 409, path=f"/v1/indexes/{name}", body={"chunkTokens": 128})
    answers.check("put", one, ErrorEnvelope, 400, path="/v1/indexes/Bad", body={})
    answers.check("delete", one, IndexResponse, path=f"/v1/indexes/{name}")
    answers.check("delete", one, ErrorEnvelope, 404, path=f"/v1/indexes/{name}")
    answers.check("delete", DOCUMENT, WriteResponse, path=at)


def test_unknown_fields_are_kept_not_refused(client: Sextant) -> None:
    body = client._client.post(
        f"{client.base_url}/v1/retrieve",
        json={"query": "Mastercard headquarters", "top_k": 1},
        headers={"Authorization": f"Bearer {client.api_key}"},
    ).json()
    body["servedBy"] = "a newer server"
    body["meta"]["cacheHit"] = False
    body["chunks"][0]["source"]["language"] = "en"
    r = RetrieveResponse.model_validate(body)
    assert r.model_extra == {"servedBy": "a newer server"} and r.meta.model_extra == {"cacheHit": False}
    assert r.chunks[0].source.model_extra == {"language": "en"}
    assert sorted(_extras(r)) == ["$.chunks[0].source.language", "$.meta.cacheHit", "$.servedBy"]
