"""The clients: :class:`Sextant` (blocking) and :class:`AsyncSextant` (asyncio), on httpx.

Both build the same requests (the ``_*_call`` functions below) and differ only in how they
send them. Requests are sent as given: the server validates them and its error envelope is
raised as an :class:`~sextant.APIError` naming the field at fault.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import time
from collections.abc import AsyncIterator, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import date
from typing import (
    Any,
    Generic,
    TypeVar,
)
from urllib.parse import quote

import httpx
import pydantic

from . import _errors
from ._version import __version__
from .types import (
    BatchResponse,
    CompactResponse,
    ContextRequest,
    ContextResponse,
    Document,
    DocumentBody,
    DocumentPage,
    DocumentSummary,
    Health,
    IndexList,
    IndexOptions,
    IndexResponse,
    KbExtra,
    KbHistoryMessage,
    KbModelChoice,
    KbRequest,
    KbResponse,
    KbTurn,
    RetrieveFilters,
    RetrieveRequest,
    RetrieveResponse,
    SearchRequest,
    SearchResponse,
    WriteResponse,
)

__all__ = ["Sextant", "AsyncSextant", "DEFAULT_BASE_URL", "DEFAULT_TIMEOUT", "DEFAULT_MAX_RETRIES"]

#: ``sextant serve``'s default address.
DEFAULT_BASE_URL = "http://127.0.0.1:8080"
DEFAULT_TIMEOUT = 60.0
#: Retries after the first attempt, on 429, 503 and connection errors.
DEFAULT_MAX_RETRIES = 2
#: The longest wait between two attempts, in seconds. A ``Retry-After`` asking for more is
#: raised at once (with ``retry_after`` on the error) rather than retried early.
DEFAULT_MAX_RETRY_WAIT = 30.0

_RETRY_STATUSES = frozenset({429, 503})

T = TypeVar("T", bound=pydantic.BaseModel)
Json = dict[str, Any]


@dataclass(frozen=True)
class _Call(Generic[T]):
    """One API call: what to send and what the answer is."""

    method: str
    path: str
    cast_to: type[T]
    json: Json | list[Json] | None = None
    params: dict[str, Any] | None = None
    #: Safe to send twice (read-only or idempotent): retried on a broken connection too.
    idempotent: bool = True
    #: A raw body (a file), sent instead of ``json``.
    content: bytes | None = None
    #: Headers of this call (a raw body's ``Content-Type``, title and metadata).
    headers: dict[str, str] | None = None


def _wire(value: Any) -> Any:
    """A value as JSON: models by their wire names, dates as ``YYYY-MM-DD``."""
    if isinstance(value, pydantic.BaseModel):
        return value.model_dump(mode="json", by_alias=True, exclude_none=True)
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, Mapping):
        return {k: _wire(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_wire(v) for v in value]
    return value


def _body(model: type[pydantic.BaseModel], **fields: Any) -> Json:
    """The JSON body of ``model``'s request from its Python field names; ``None`` is left
    out. Nothing is validated here: the server does, and says which field is wrong."""
    out: Json = {}
    for name, value in fields.items():
        if value is not None:
            info = model.model_fields[name]
            out[info.alias or name] = _wire(value)
    return out


def _seg(part: str) -> str:
    """A path segment, percent-encoded (a ``/`` in an id stays inside its segment)."""
    return quote(part, safe="")


# The calls, shared by both clients. ------------------------------------------------------


def _retrieve_call(
    query: str,
    filters: RetrieveFilters | Mapping[str, Any] | None,
    top_k: int | None,
    rerank: bool | None,
    include_segments: bool | None,
    index: str | None = None,
) -> _Call[RetrieveResponse]:
    body = _body(
        RetrieveRequest,
        query=query,
        index=index,
        filters=filters,
        top_k=top_k,
        rerank=rerank,
        include_segments=include_segments,
    )
    return _Call("POST", "/v1/retrieve", RetrieveResponse, json=body)


def _search_call(query: str, **fields: Any) -> _Call[SearchResponse]:
    return _Call("POST", "/v1/search", SearchResponse, json=_body(SearchRequest, query=query, **fields))


def _context_call(question: str, **fields: Any) -> _Call[ContextResponse]:
    body = _body(ContextRequest, question=question, **fields)
    return _Call("POST", "/v1/context", ContextResponse, json=body)


def _kb_call(workspace_id: str, index_id: str, query: str | None, **fields: Any) -> _Call[KbResponse]:
    body = _body(KbRequest, index_id=index_id, query=query, **fields)
    return _Call("POST", f"/{_seg(workspace_id)}/index/retrieve", KbResponse, json=body)


def _document_path(index: str, document_id: str) -> str:
    return f"/v1/indexes/{_seg(index)}/documents/{_seg(document_id)}"


def _put_document_call(index: str, document_id: str, **fields: Any) -> _Call[WriteResponse]:
    return _Call("PUT", _document_path(index, document_id), WriteResponse, json=_body(DocumentBody, **fields))


#: The media type of a file by its extension (what ``put_file`` sends).
FILE_TYPES = {
    ".pdf": "application/pdf",
    ".md": "text/markdown",
    ".markdown": "text/markdown",
    ".html": "text/html",
    ".htm": "text/html",
    ".txt": "text/plain",
}


def _put_file_call(
    index: str,
    document_id: str,
    file: str | os.PathLike[str] | bytes,
    content_type: str | None,
    title: str | None,
    metadata: Mapping[str, Any] | None,
) -> _Call[WriteResponse]:
    if isinstance(file, bytes):
        content = file
        if content_type is None:
            raise ValueError("content_type is required when the file is given as bytes")
    else:
        path = os.fspath(file)
        with open(path, "rb") as f:
            content = f.read()
        if content_type is None:
            content_type = FILE_TYPES.get(os.path.splitext(path)[1].lower())
            if content_type is None:
                raise ValueError(f"cannot tell the type of {path!r} by its extension: pass content_type")
    headers = {"Content-Type": content_type}
    if title is not None:
        headers["Sextant-Title"] = title
    if metadata is not None:
        # ASCII JSON: a header carries no other bytes.
        headers["Sextant-Metadata"] = json.dumps(_wire(metadata), ensure_ascii=True)
    return _Call("PUT", _document_path(index, document_id), WriteResponse, content=content, headers=headers)


#: Documents one batch may hold (the server's limit).
MAX_BATCH_DOCUMENTS = 1000


def _put_documents_call(index: str, documents: Iterable[DocumentBody | Mapping[str, Any]]) -> _Call[BatchResponse]:
    # A mapping is read by Python or wire names; a field the server does not know is sent
    # as it is, for the server to name in its error.
    body = [_wire(d if isinstance(d, DocumentBody) else DocumentBody.model_validate(dict(d))) for d in documents]
    return _Call("POST", f"/v1/indexes/{_seg(index)}/documents:batch", BatchResponse, json=body)


def _index_path(index: str) -> str:
    return f"/v1/indexes/{_seg(index)}"


def _create_index_call(index: str, chunk_tokens: int | None, chunk_overlap: int | None) -> _Call[IndexResponse]:
    body = _body(IndexOptions, chunk_tokens=chunk_tokens, chunk_overlap=chunk_overlap)
    return _Call("PUT", _index_path(index), IndexResponse, json=body)


def _list_documents_call(index: str, limit: int | None, cursor: str | None) -> _Call[DocumentPage]:
    params = {k: v for k, v in (("limit", limit), ("cursor", cursor)) if v is not None}
    return _Call("GET", f"/v1/indexes/{_seg(index)}/documents", DocumentPage, params=params)


def _compact_call(index: str) -> _Call[CompactResponse]:
    return _Call("POST", f"/v1/indexes/{_seg(index)}/compact", CompactResponse, idempotent=False)


# The clients. -----------------------------------------------------------------------------


class _BaseClient:
    def __init__(
        self,
        *,
        api_key: str | None,
        base_url: str | None,
        max_retries: int,
        max_retry_wait: float,
    ) -> None:
        self.api_key = api_key if api_key is not None else os.environ.get("SEXTANT_API_KEY")
        self.base_url = base_url or os.environ.get("SEXTANT_BASE_URL") or DEFAULT_BASE_URL
        self.max_retries = max_retries
        self.max_retry_wait = max_retry_wait

    def _headers(self) -> dict[str, str]:
        headers = {"Accept": "application/json", "User-Agent": f"sextant-python/{__version__}"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        return headers

    def _url(self, path: str) -> str:
        """The URL of ``path`` under the base URL (which may have a path of its own, such as
        an API Gateway stage)."""
        return self.base_url.rstrip("/") + path

    def _backoff(self, attempt: int) -> float:
        """Exponential backoff with jitter, when the server gave no ``Retry-After``."""
        return min(0.5 * 2.0**attempt * (0.75 + random.random() / 2), self.max_retry_wait)

    def _wait_after_status(self, response: httpx.Response, attempt: int) -> float | None:
        """Seconds to wait before retrying this answer, or ``None``: raise it."""
        if response.status_code not in _RETRY_STATUSES or attempt >= self.max_retries:
            return None
        asked = _errors.retry_after_seconds(response)
        if asked is None:
            return self._backoff(attempt)
        if asked > self.max_retry_wait:
            return None
        # Never earlier than asked; a little later, so that clients shed together do not
        # all come back at the same instant.
        return min(asked + random.uniform(0, min(0.25, asked / 4)), self.max_retry_wait)

    def _wait_after_error(self, exc: httpx.TransportError, call: _Call[Any], attempt: int) -> float | None:
        """Seconds to wait before retrying after a transport error, or ``None``. A request
        that never reached the server is always retried; one that may have, only when it is
        idempotent."""
        if attempt >= self.max_retries:
            return None
        unsent = isinstance(exc, (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout))
        return self._backoff(attempt) if unsent or call.idempotent else None

    @staticmethod
    def _connection_error(exc: httpx.TransportError, request: httpx.Request) -> _errors.APIConnectionError:
        if isinstance(exc, httpx.TimeoutException):
            return _errors.APITimeoutError(f"request timed out: {exc}", request=request)
        return _errors.APIConnectionError(f"connection error: {exc}", request=request)

    @staticmethod
    def _error(response: httpx.Response) -> _errors.APIError:
        try:
            body: Any = response.json()
        except ValueError:
            body = response.text
        return _errors.error_for(response, body)

    @staticmethod
    def _parse(call: _Call[T], response: httpx.Response) -> T:
        try:
            body = response.json()
        except ValueError as exc:
            raise _errors.APIResponseValidationError(
                f"{call.method} {call.path}: the answer is not JSON", response=response, body=response.text
            ) from exc
        try:
            return call.cast_to.model_validate(body)
        except pydantic.ValidationError as exc:
            raise _errors.APIResponseValidationError(
                f"{call.method} {call.path}: unexpected answer: {exc}", response=response, body=body
            ) from exc


class Sextant(_BaseClient):
    """A client of a Sextant server.

    ``api_key`` and ``base_url`` default to ``$SEXTANT_API_KEY`` and ``$SEXTANT_BASE_URL``
    (then ``http://127.0.0.1:8080``). 429 and 503 answers are retried up to ``max_retries``
    times, after the ``Retry-After`` the server sends (at most ``max_retry_wait`` seconds;
    longer is raised at once); so are connection errors of idempotent requests.

    >>> client = Sextant(api_key="sx_dev")
    >>> for chunk in client.retrieve("Where is Mastercard headquartered?", top_k=3).chunks:
    ...     print(chunk.source.document_id, chunk.source.char_start, chunk.evidence_text)
    """

    def __init__(
        self,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: float | httpx.Timeout = DEFAULT_TIMEOUT,
        max_retries: int = DEFAULT_MAX_RETRIES,
        max_retry_wait: float = DEFAULT_MAX_RETRY_WAIT,
        http_client: httpx.Client | None = None,
    ) -> None:
        super().__init__(api_key=api_key, base_url=base_url, max_retries=max_retries, max_retry_wait=max_retry_wait)
        self._owns_client = http_client is None
        self._client = http_client or httpx.Client(timeout=timeout)

    def close(self) -> None:
        """Close the connections (only those of an ``http_client`` this client made)."""
        if self._owns_client:
            self._client.close()

    def __enter__(self) -> Sextant:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _send(self, call: _Call[T]) -> T:
        request = self._client.build_request(
            call.method,
            self._url(call.path),
            json=call.json,
            content=call.content,
            params=call.params,
            headers={**self._headers(), **(call.headers or {})},
        )
        attempt = 0
        while True:
            try:
                response = self._client.send(request)
            except httpx.TransportError as exc:
                wait = self._wait_after_error(exc, call, attempt)
                if wait is None:
                    raise self._connection_error(exc, request) from exc
            else:
                if response.is_success:
                    return self._parse(call, response)
                wait = self._wait_after_status(response, attempt)
                if wait is None:
                    raise self._error(response)
            attempt += 1
            time.sleep(wait)

    def retrieve(
        self,
        query: str,
        *,
        filters: RetrieveFilters | Mapping[str, Any] | None = None,
        top_k: int | None = None,
        rerank: bool | None = None,
        include_segments: bool | None = None,
        index: str | None = None,
    ) -> RetrieveResponse:
        """``POST /v1/retrieve``: cited chunks (``tickers``, ``year``, ``quarter``,
        ``source_types`` and ``metadata`` filters; ``top_k`` 1-50, clamped to the plan) from
        ``index`` (default: the server's default index)."""
        return self._send(_retrieve_call(query, filters, top_k, rerank, include_segments, index))

    def search(
        self,
        query: str,
        *,
        entity: str | Sequence[str] | None = None,
        theme: str | Sequence[str] | None = None,
        published_after: str | date | None = None,
        published_before: str | date | None = None,
        limit: int | None = None,
        max_per_document: int | None = None,
        rerank: bool | None = None,
        recency_boost: bool | None = None,
        min_similarity: float | None = None,
        metadata: Mapping[str, Any] | None = None,
        index: str | None = None,
    ) -> SearchResponse:
        """``POST /v1/search``: sentence units with document offsets and each one's rank in
        every retrieval path."""
        return self._send(
            _search_call(
                query,
                entity=entity,
                theme=theme,
                published_after=published_after,
                published_before=published_before,
                limit=limit,
                max_per_document=max_per_document,
                rerank=rerank,
                recency_boost=recency_boost,
                min_similarity=min_similarity,
                metadata=metadata,
                index=index,
            )
        )

    def context(
        self,
        question: str,
        *,
        tickers: Sequence[str] | None = None,
        years: Sequence[int] | None = None,
        quarters: Sequence[int | str] | None = None,
        route: str | None = None,
        top_k: int | None = None,
    ) -> ContextResponse:
        """``POST /v1/context``: structured, cited context for a financial question (facts,
        comparisons, series, statements, passages), never a generated answer."""
        return self._send(
            _context_call(question, tickers=tickers, years=years, quarters=quarters, route=route, top_k=top_k)
        )

    def knowledge_base_retrieve(
        self,
        query: str | None,
        *,
        workspace_id: str,
        index_id: str,
        dense_similarity_top_k: int | None = None,
        sparse_similarity_top_k: int | None = None,
        enable_reranking: bool | None = None,
        rerank_min_score: float | None = None,
        rerank_top_n: int | None = None,
        enable_rewrite: bool | None = None,
        history: Sequence[KbTurn | Mapping[str, Any]] | None = None,
        query_history: Sequence[KbHistoryMessage | Mapping[str, Any]] | None = None,
        search_filters: Sequence[Mapping[str, Any]] | None = None,
        rerank: Sequence[KbModelChoice | Mapping[str, Any]] | None = None,
        rewrite: Sequence[KbModelChoice | Mapping[str, Any]] | None = None,
        extra: KbExtra | Mapping[str, Any] | None = None,
        save_retriever_history: bool | None = None,
    ) -> KbResponse:
        """``POST /{WorkspaceId}/index/retrieve``: the knowledge-base ``Retrieve`` API
        (``Data.Nodes`` with ``Text``, ``Score`` and ``Metadata``)."""
        return self._send(
            _kb_call(
                workspace_id,
                index_id,
                query,
                dense_similarity_top_k=dense_similarity_top_k,
                sparse_similarity_top_k=sparse_similarity_top_k,
                enable_reranking=enable_reranking,
                rerank_min_score=rerank_min_score,
                rerank_top_n=rerank_top_n,
                enable_rewrite=enable_rewrite,
                history=history,
                query_history=query_history,
                search_filters=search_filters,
                rerank=rerank,
                rewrite=rewrite,
                extra=extra,
                save_retriever_history=save_retriever_history,
            )
        )

    def put_document(
        self,
        index: str,
        document_id: str,
        *,
        text: str | None = None,
        content_type: str | None = None,
        segments: Sequence[str] | None = None,
        title: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        document_type: str | None = None,
        ticker: str | None = None,
        year: int | None = None,
        quarter: str | None = None,
        filing_type: str | None = None,
        source_url: str | None = None,
        published_at: str | date | None = None,
    ) -> WriteResponse:
        """``PUT /v1/indexes/{index}/documents/{documentId}``: insert or replace a document
        (``text`` read as ``content_type`` says: ``text/plain``, ``text/markdown`` or
        ``text/html``; or ready-made ``segments``; a PDF goes through :meth:`put_file`).
        Searchable when it returns (``status`` ``live``; ``pending`` on AWS)."""
        return self._send(
            _put_document_call(
                index,
                document_id,
                text=text,
                content_type=content_type,
                segments=segments,
                title=title,
                metadata=metadata,
                document_type=document_type,
                ticker=ticker,
                year=year,
                quarter=quarter,
                filing_type=filing_type,
                source_url=source_url,
                published_at=published_at,
            )
        )

    def put_file(
        self,
        index: str,
        document_id: str,
        file: str | os.PathLike[str] | bytes,
        *,
        content_type: str | None = None,
        title: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> WriteResponse:
        """``PUT /v1/indexes/{index}/documents/{documentId}`` with a file as the body: a PDF,
        Markdown, HTML or plain text, read and segmented by the server (a PDF's segments
        keep their pages, and its passages are cited with them). ``file`` is a path (its
        type told by its extension unless ``content_type`` says) or the file's bytes (with
        ``content_type``). ``title`` (ASCII) and ``metadata`` go in the
        ``Sextant-Title``/``Sextant-Metadata`` headers."""
        return self._send(_put_file_call(index, document_id, file, content_type, title, metadata))

    def list_indexes(self) -> IndexList:
        """``GET /v1/indexes``: the indexes this key may read, in id order."""
        return self._send(_Call("GET", "/v1/indexes", IndexList))

    def get_index(self, index: str) -> IndexResponse:
        """``GET /v1/indexes/{index}``: documents, chunks, version, paths ready, settings."""
        return self._send(_Call("GET", _index_path(index), IndexResponse))

    def create_index(
        self, index: str, *, chunk_tokens: int | None = None, chunk_overlap: int | None = None
    ) -> IndexResponse:
        """``PUT /v1/indexes/{index}``: an empty index that takes documents (admin scope);
        nothing to do when it exists with these options, a :class:`~sextant.ConflictError`
        when it exists with others."""
        return self._send(_create_index_call(index, chunk_tokens, chunk_overlap))

    def delete_index(self, index: str) -> IndexResponse:
        """``DELETE /v1/indexes/{index}``: an index created through the API, with its
        documents (admin scope)."""
        return self._send(_Call("DELETE", _index_path(index), IndexResponse))

    def put_documents(self, index: str, documents: Iterable[DocumentBody | Mapping[str, Any]]) -> BatchResponse:
        """``POST /v1/indexes/{index}/documents:batch``: up to 1,000 documents in one call,
        each a :class:`~sextant.types.DocumentBody` or a mapping of its fields (Python or
        wire names) with its ``document_id``. The server encodes them together; the answer
        has one result per document, in order: written, or its ``error`` naming the field
        (``failed`` counts them; nothing is raised for a refused document). Searchable when
        it returns (``live``; ``pending`` on AWS)."""
        return self._send(_put_documents_call(index, documents))

    def get_document(self, index: str, document_id: str) -> Document:
        """``GET /v1/indexes/{index}/documents/{documentId}``: fields, text and segments."""
        return self._send(_Call("GET", _document_path(index, document_id), Document))

    def delete_document(self, index: str, document_id: str) -> WriteResponse:
        """``DELETE /v1/indexes/{index}/documents/{documentId}`` (a 404 when there is none)."""
        return self._send(_Call("DELETE", _document_path(index, document_id), WriteResponse))

    def list_documents(self, index: str, *, limit: int | None = None, cursor: str | None = None) -> DocumentPage:
        """``GET /v1/indexes/{index}/documents``: one page, in id order; pass its
        ``next_cursor`` as ``cursor`` for the next (or use :meth:`iter_documents`)."""
        return self._send(_list_documents_call(index, limit, cursor))

    def iter_documents(self, index: str, *, page_size: int | None = None) -> Iterator[DocumentSummary]:
        """Every document of ``index``, page after page."""
        cursor: str | None = None
        while True:
            page = self.list_documents(index, limit=page_size, cursor=cursor)
            yield from page.documents
            if not page.next_cursor:
                return
            cursor = page.next_cursor

    def compact(self, index: str) -> CompactResponse:
        """``POST /v1/indexes/{index}/compact`` (admin scope): fold the writes into a new
        index version now."""
        return self._send(_compact_call(index))

    def health(self) -> Health:
        """``GET /health`` (no key needed): 200 once loaded; a 503 while loading is retried."""
        return self._send(_Call("GET", "/health", Health))

    def openapi(self) -> dict[str, Any]:
        """``GET /openapi.json``: the server's OpenAPI 3.1 document."""
        response = self._client.get(self._url("/openapi.json"), headers=self._headers())
        if not response.is_success:
            raise self._error(response)
        document: dict[str, Any] = response.json()
        return document


class AsyncSextant(_BaseClient):
    """The asyncio twin of :class:`Sextant`: the same methods, awaited.

    >>> async with AsyncSextant(api_key="sx_dev") as client:
    ...     results = await client.search("cross-border volume growth", entity="MA")
    """

    def __init__(
        self,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: float | httpx.Timeout = DEFAULT_TIMEOUT,
        max_retries: int = DEFAULT_MAX_RETRIES,
        max_retry_wait: float = DEFAULT_MAX_RETRY_WAIT,
        http_client: httpx.AsyncClient | None = None,
    ) -> None:
        super().__init__(api_key=api_key, base_url=base_url, max_retries=max_retries, max_retry_wait=max_retry_wait)
        self._owns_client = http_client is None
        self._client = http_client or httpx.AsyncClient(timeout=timeout)

    async def close(self) -> None:
        """Close the connections (only those of an ``http_client`` this client made)."""
        if self._owns_client:
            await self._client.aclose()

    async def __aenter__(self) -> AsyncSextant:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _send(self, call: _Call[T]) -> T:
        request = self._client.build_request(
            call.method,
            self._url(call.path),
            json=call.json,
            content=call.content,
            params=call.params,
            headers={**self._headers(), **(call.headers or {})},
        )
        attempt = 0
        while True:
            try:
                response = await self._client.send(request)
            except httpx.TransportError as exc:
                wait = self._wait_after_error(exc, call, attempt)
                if wait is None:
                    raise self._connection_error(exc, request) from exc
            else:
                if response.is_success:
                    return self._parse(call, response)
                wait = self._wait_after_status(response, attempt)
                if wait is None:
                    raise self._error(response)
            attempt += 1
            await asyncio.sleep(wait)

    async def retrieve(
        self,
        query: str,
        *,
        filters: RetrieveFilters | Mapping[str, Any] | None = None,
        top_k: int | None = None,
        rerank: bool | None = None,
        include_segments: bool | None = None,
        index: str | None = None,
    ) -> RetrieveResponse:
        """See :meth:`Sextant.retrieve`."""
        return await self._send(_retrieve_call(query, filters, top_k, rerank, include_segments, index))

    async def search(
        self,
        query: str,
        *,
        entity: str | Sequence[str] | None = None,
        theme: str | Sequence[str] | None = None,
        published_after: str | date | None = None,
        published_before: str | date | None = None,
        limit: int | None = None,
        max_per_document: int | None = None,
        rerank: bool | None = None,
        recency_boost: bool | None = None,
        min_similarity: float | None = None,
        metadata: Mapping[str, Any] | None = None,
        index: str | None = None,
    ) -> SearchResponse:
        """See :meth:`Sextant.search`."""
        return await self._send(
            _search_call(
                query,
                entity=entity,
                theme=theme,
                published_after=published_after,
                published_before=published_before,
                limit=limit,
                max_per_document=max_per_document,
                rerank=rerank,
                recency_boost=recency_boost,
                min_similarity=min_similarity,
                metadata=metadata,
                index=index,
            )
        )

    async def context(
        self,
        question: str,
        *,
        tickers: Sequence[str] | None = None,
        years: Sequence[int] | None = None,
        quarters: Sequence[int | str] | None = None,
        route: str | None = None,
        top_k: int | None = None,
    ) -> ContextResponse:
        """See :meth:`Sextant.context`."""
        return await self._send(
            _context_call(question, tickers=tickers, years=years, quarters=quarters, route=route, top_k=top_k)
        )

    async def knowledge_base_retrieve(
        self,
        query: str | None,
        *,
        workspace_id: str,
        index_id: str,
        dense_similarity_top_k: int | None = None,
        sparse_similarity_top_k: int | None = None,
        enable_reranking: bool | None = None,
        rerank_min_score: float | None = None,
        rerank_top_n: int | None = None,
        enable_rewrite: bool | None = None,
        history: Sequence[KbTurn | Mapping[str, Any]] | None = None,
        query_history: Sequence[KbHistoryMessage | Mapping[str, Any]] | None = None,
        search_filters: Sequence[Mapping[str, Any]] | None = None,
        rerank: Sequence[KbModelChoice | Mapping[str, Any]] | None = None,
        rewrite: Sequence[KbModelChoice | Mapping[str, Any]] | None = None,
        extra: KbExtra | Mapping[str, Any] | None = None,
        save_retriever_history: bool | None = None,
    ) -> KbResponse:
        """See :meth:`Sextant.knowledge_base_retrieve`."""
        return await self._send(
            _kb_call(
                workspace_id,
                index_id,
                query,
                dense_similarity_top_k=dense_similarity_top_k,
                sparse_similarity_top_k=sparse_similarity_top_k,
                enable_reranking=enable_reranking,
                rerank_min_score=rerank_min_score,
                rerank_top_n=rerank_top_n,
                enable_rewrite=enable_rewrite,
                history=history,
                query_history=query_history,
                search_filters=search_filters,
                rerank=rerank,
                rewrite=rewrite,
                extra=extra,
                save_retriever_history=save_retriever_history,
            )
        )

    async def put_document(
        self,
        index: str,
        document_id: str,
        *,
        text: str | None = None,
        content_type: str | None = None,
        segments: Sequence[str] | None = None,
        title: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        document_type: str | None = None,
        ticker: str | None = None,
        year: int | None = None,
        quarter: str | None = None,
        filing_type: str | None = None,
        source_url: str | None = None,
        published_at: str | date | None = None,
    ) -> WriteResponse:
        """See :meth:`Sextant.put_document`."""
        return await self._send(
            _put_document_call(
                index,
                document_id,
                text=text,
                content_type=content_type,
                segments=segments,
                title=title,
                metadata=metadata,
                document_type=document_type,
                ticker=ticker,
                year=year,
                quarter=quarter,
                filing_type=filing_type,
                source_url=source_url,
                published_at=published_at,
            )
        )

    async def put_file(
        self,
        index: str,
        document_id: str,
        file: str | os.PathLike[str] | bytes,
        *,
        content_type: str | None = None,
        title: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> WriteResponse:
        """See :meth:`Sextant.put_file`."""
        return await self._send(_put_file_call(index, document_id, file, content_type, title, metadata))

    async def list_indexes(self) -> IndexList:
        """See :meth:`Sextant.list_indexes`."""
        return await self._send(_Call("GET", "/v1/indexes", IndexList))

    async def get_index(self, index: str) -> IndexResponse:
        """See :meth:`Sextant.get_index`."""
        return await self._send(_Call("GET", _index_path(index), IndexResponse))

    async def create_index(
        self, index: str, *, chunk_tokens: int | None = None, chunk_overlap: int | None = None
    ) -> IndexResponse:
        """See :meth:`Sextant.create_index`."""
        return await self._send(_create_index_call(index, chunk_tokens, chunk_overlap))

    async def delete_index(self, index: str) -> IndexResponse:
        """See :meth:`Sextant.delete_index`."""
        return await self._send(_Call("DELETE", _index_path(index), IndexResponse))

    async def put_documents(self, index: str, documents: Iterable[DocumentBody | Mapping[str, Any]]) -> BatchResponse:
        """See :meth:`Sextant.put_documents`."""
        return await self._send(_put_documents_call(index, documents))

    async def get_document(self, index: str, document_id: str) -> Document:
        """See :meth:`Sextant.get_document`."""
        return await self._send(_Call("GET", _document_path(index, document_id), Document))

    async def delete_document(self, index: str, document_id: str) -> WriteResponse:
        """See :meth:`Sextant.delete_document`."""
        return await self._send(_Call("DELETE", _document_path(index, document_id), WriteResponse))

    async def list_documents(self, index: str, *, limit: int | None = None, cursor: str | None = None) -> DocumentPage:
        """See :meth:`Sextant.list_documents`."""
        return await self._send(_list_documents_call(index, limit, cursor))

    async def iter_documents(self, index: str, *, page_size: int | None = None) -> AsyncIterator[DocumentSummary]:
        """Every document of ``index``, page after page (``async for``)."""
        cursor: str | None = None
        while True:
            page = await self.list_documents(index, limit=page_size, cursor=cursor)
            for document in page.documents:
                yield document
            if not page.next_cursor:
                return
            cursor = page.next_cursor

    async def compact(self, index: str) -> CompactResponse:
        """See :meth:`Sextant.compact`."""
        return await self._send(_compact_call(index))

    async def health(self) -> Health:
        """See :meth:`Sextant.health`."""
        return await self._send(_Call("GET", "/health", Health))

    async def openapi(self) -> dict[str, Any]:
        """See :meth:`Sextant.openapi`."""
        response = await self._client.get(self._url("/openapi.json"), headers=self._headers())
        if not response.is_success:
            raise self._error(response)
        document: dict[str, Any] = response.json()
        return document
