"""Results as citable hits, for the LangChain and LlamaIndex retrievers.

A hit's ``text`` is exactly the document's characters ``char_start:char_end`` (Unicode
scalar values, end exclusive, in the text ``get_document`` returns): the chunk's text for
``/v1/retrieve``, the sentence unit's for ``/v1/search``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from ._client import AsyncSextant, Sextant
from .types import RetrieveResponse, SearchResponse

Endpoint = Literal["retrieve", "search"]

#: Metadata that ranks and locates a hit rather than describes it: kept out of the text a
#: LlamaIndex node shows a language model or an embedder.
DIAGNOSTIC_KEYS = (
    "endpoint",
    "request_id",
    "score",
    "char_start",
    "char_end",
    "segment_start",
    "segment_end",
    "evidence_text",
    "dense_rank",
    "dense_score",
    "sparse_rank",
    "bm25_rank",
    "rrf_rank",
    "rrf_score",
    "rerank_rank",
    "rerank_score",
)


@dataclass
class Hit:
    id: str
    text: str
    score: float
    document_id: str
    char_start: int
    char_end: int
    metadata: dict[str, Any]


def _compact(metadata: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in metadata.items() if v is not None and v != {}}


def from_retrieve(response: RetrieveResponse) -> list[Hit]:
    hits = []
    for chunk in response.chunks:
        s = chunk.source
        metadata = {
            "endpoint": "retrieve",
            "chunk_id": chunk.id,
            "document_id": s.document_id,
            "title": s.document_title,
            "document_type": s.document_type,
            "ticker": s.ticker,
            "year": s.year,
            "quarter": s.quarter,
            "filing_type": s.filing_type,
            "source_url": s.source_url,
            "page_numbers": s.page_numbers,
            "char_start": s.char_start,
            "char_end": s.char_end,
            "score": chunk.score,
            "evidence_text": chunk.evidence_text,
            "metadata": s.metadata,
            "request_id": response.meta.request_id,
        }
        hits.append(
            Hit(
                f"{s.document_id}#{chunk.id}",
                chunk.text,
                chunk.score,
                s.document_id,
                s.char_start,
                s.char_end,
                _compact(metadata),
            )
        )
    return hits


def from_search(response: SearchResponse) -> list[Hit]:
    hits = []
    for unit in response.results:
        d, p, g = unit.document, unit.position, unit.diagnostics
        metadata = {
            "endpoint": "search",
            "unit_id": unit.unit_id,
            "document_id": d.document_id,
            "title": d.title,
            "document_type": d.document_type,
            "ticker": d.ticker,
            "year": d.year,
            "quarter": d.quarter,
            "published_at": d.published_at,
            "source_url": d.source_url,
            "char_start": p.char_start,
            "char_end": p.char_end,
            "segment_start": p.segment_start,
            "segment_end": p.segment_end,
            "score": unit.score,
            "dense_rank": g.dense_rank,
            "dense_score": g.dense_score,
            "sparse_rank": g.sparse_rank,
            "bm25_rank": g.bm25_rank,
            "rrf_rank": g.rrf_rank,
            "rrf_score": g.rrf_score,
            "rerank_rank": g.rerank_rank,
            "rerank_score": g.rerank_score,
            "metadata": d.metadata,
            "request_id": response.meta.request_id,
        }
        hits.append(
            Hit(unit.unit_id, unit.text, unit.score, d.document_id, p.char_start, p.char_end, _compact(metadata))
        )
    return hits


def _check_endpoint(endpoint: str) -> None:
    if endpoint not in ("retrieve", "search"):
        raise ValueError(f"endpoint must be 'retrieve' or 'search', not {endpoint!r}")


def fetch(
    client: Sextant,
    endpoint: Endpoint,
    query: str,
    top_k: int,
    filters: Mapping[str, Any] | None,
    rerank: bool | None,
) -> list[Hit]:
    """Runs the query on ``endpoint``: for ``retrieve``, ``filters`` is the request's
    ``filters`` object; for ``search``, its filter fields (``entity``, ``theme``,
    ``published_after``, ``published_before``, ``metadata``, ...)."""
    _check_endpoint(endpoint)
    if endpoint == "retrieve":
        return from_retrieve(client.retrieve(query, filters=filters, top_k=top_k, rerank=rerank))
    return from_search(client.search(query, limit=top_k, rerank=rerank, **dict(filters or {})))


async def afetch(
    client: AsyncSextant,
    endpoint: Endpoint,
    query: str,
    top_k: int,
    filters: Mapping[str, Any] | None,
    rerank: bool | None,
) -> list[Hit]:
    """The asyncio twin of :func:`fetch`."""
    _check_endpoint(endpoint)
    if endpoint == "retrieve":
        return from_retrieve(await client.retrieve(query, filters=filters, top_k=top_k, rerank=rerank))
    return from_search(await client.search(query, limit=top_k, rerank=rerank, **dict(filters or {})))


def async_twin(client: Sextant) -> AsyncSextant:
    """An :class:`AsyncSextant` configured as ``client``."""
    return AsyncSextant(
        api_key=client.api_key,
        base_url=client.base_url,
        max_retries=client.max_retries,
        max_retry_wait=client.max_retry_wait,
    )
