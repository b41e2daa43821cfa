"""The server's error envelope, raised as one exception hierarchy, never retried (4xx)."""

from __future__ import annotations

import os
from typing import Any

import pytest

from sextant import (
    APIError,
    AuthenticationError,
    BadRequestError,
    RequestTooLargeError,
    Sextant,
    SextantError,
)

from support import Recorder


@pytest.mark.parametrize(
    ("kwargs", "field", "says"),
    [
        ({"top_k": 0}, "top_k", "must be between 1 and 50, got 0"),
        ({"top_k": "ten"}, "top_k", "expected an integer"),
        ({"filters": {"year": "2023"}}, "filters.year", "expected an integer"),
        ({"filters": {"tikers": ["MA"]}}, "filters.tikers", "is not a known field"),
    ],
)
def test_a_bad_field_is_raised_naming_it(recorder: Recorder, kwargs: dict[str, Any], field: str, says: str) -> None:
    with Sextant(http_client=recorder.http_client()) as client:
        with pytest.raises(BadRequestError) as e:
            client.retrieve("share repurchases", **kwargs)
    err = e.value
    assert isinstance(err, APIError) and isinstance(err, SextantError)
    assert (err.status, err.code, err.field) == (400, "invalid_request", field)
    assert err.message.startswith(f"{field}: ") and says in err.message
    assert err.request_id == err.response.headers["x-request-id"] and err.request_id.startswith("req_")
    assert str(err).startswith("400 invalid_request: ") and err.request_id in str(err)
    assert recorder.statuses == [400], "a 400 is not retried"


def test_a_date_that_is_not_a_calendar_day(client: Sextant) -> None:
    with pytest.raises(BadRequestError) as e:
        client.search("revenue", published_after="2024-02-31")
    assert e.value.field == "published_after" and "2024-02-31" in e.value.message


def test_a_document_body_field(client: Sextant, index: str) -> None:
    with pytest.raises(BadRequestError) as e:
        client.put_document(index, "never-stored", text="x", content_type="image/png")
    assert e.value.field == "contentType" and "text/markdown" in e.value.message
    with pytest.raises(BadRequestError) as e:
        client.put_document(index, "never-stored", text="x", content_type="application/pdf")
    assert e.value.field == "contentType" and "put the pdf itself" in e.value.message.lower()


def test_the_knowledge_base_envelope(client: Sextant, index: str) -> None:
    with pytest.raises(BadRequestError) as e:
        client.knowledge_base_retrieve("x", workspace_id="ws", index_id=index, rerank_top_n=99)
    err = e.value
    assert (err.status, err.code, err.field) == (400, "Index.InvalidParameter", None)
    assert err.message == "RerankTopN: must be between 1 and 20, got 99"
    assert err.request_id == err.response.headers["x-request-id"]


@pytest.mark.parametrize("key", ["sx_not_a_key", ""])
def test_a_wrong_or_missing_key(key: str) -> None:
    with Sextant(api_key=key) as client:
        with pytest.raises(AuthenticationError) as e:
            client.retrieve("revenue")
    assert (e.value.status, e.value.code) == (401, "unauthorized")
    # /health needs no key.
    with Sextant(api_key=key) as client:
        assert client.health().status == "ok"


def test_a_body_over_the_limit(client: Sextant) -> None:
    with pytest.raises(RequestTooLargeError) as e:
        client.retrieve("x" * 70_000)
    assert (e.value.status, e.value.code) == (413, "payload_too_large")


def test_settings_come_from_the_environment() -> None:
    with Sextant() as client:
        assert client.base_url == os.environ["SEXTANT_BASE_URL"]
        assert client.api_key == os.environ["SEXTANT_API_KEY"]
    with Sextant(base_url="http://example.invalid:1", api_key="k") as client:
        assert (client.base_url, client.api_key) == ("http://example.invalid:1", "k")
