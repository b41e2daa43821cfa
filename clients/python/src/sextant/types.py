"""Typed requests and responses of the Sextant HTTP API.

Each model names the OpenAPI schema it mirrors in ``openapi_ref`` (a JSON pointer into the
server's ``/openapi.json``); the test suite checks every model against the live document, in
both directions, and real responses against both. Field names are Python's; the wire names
(camelCase, snake_case or PascalCase, exactly as the server spells them) are the aliases.
Unknown response fields are kept (``model_extra``), so a newer server never breaks an older
client.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel, to_pascal

__all__ = [
    "Chunk",
    "Claim",
    "Classification",
    "CompactResponse",
    "Comparison",
    "Confidence",
    "ConfidenceSignal",
    "ContextMeta",
    "ContextRequest",
    "ContextResponse",
    "Contradiction",
    "Document",
    "DocumentBody",
    "DocumentPage",
    "DocumentRef",
    "DocumentSegment",
    "DocumentSummary",
    "ErrorDetail",
    "ErrorEnvelope",
    "Fact",
    "FactSource",
    "FiscalPeriod",
    "Health",
    "KbData",
    "KbExtra",
    "KbHistoryMessage",
    "KbModelChoice",
    "KbNode",
    "KbRequest",
    "KbResponse",
    "KbTurn",
    "Passage",
    "PeriodMismatch",
    "Position",
    "RerankStatus",
    "RetrieveFilters",
    "RetrieveMeta",
    "RetrieveRequest",
    "RetrieveResponse",
    "RouteResult",
    "SearchMeta",
    "SearchRequest",
    "SearchResponse",
    "SearchResult",
    "Segment",
    "ShardsMeta",
    "Series",
    "Source",
    "StatementLine",
    "StatementTable",
    "UnitDiagnostics",
    "WriteResponse",
    "BatchError",
    "BatchResult",
    "BatchResponse",
    "IndexInfo",
    "IndexList",
    "IndexOptions",
    "IndexResponse",
    "IndexSettings",
    "MODELS",
]

_SCHEMAS = "#/components/schemas/"


class _Model(BaseModel):
    """Wire names as aliases; a field may also be set by its Python name."""

    model_config = ConfigDict(extra="allow", validate_by_name=True, validate_by_alias=True, serialize_by_alias=True)
    #: JSON pointer of the schema this model mirrors in ``/openapi.json``.
    openapi_ref: ClassVar[str]


class _Camel(_Model):
    model_config = ConfigDict(alias_generator=to_camel)


class _Pascal(_Model):
    model_config = ConfigDict(alias_generator=to_pascal)


# ---------------------------------------------------------------- errors


class ErrorDetail(_Camel):
    openapi_ref = _SCHEMAS + "ErrorDetail"
    code: str
    message: str
    #: The JSON path of the field at fault (``top_k``, ``filters.year``), when one is.
    field: str | None = None
    request_id: str


class ErrorEnvelope(_Model):
    openapi_ref = _SCHEMAS + "ErrorEnvelope"
    success: bool
    error: ErrorDetail


# ---------------------------------------------------------------- POST /v1/retrieve


class RetrieveFilters(_Model):
    openapi_ref = _SCHEMAS + "RetrieveFilters"
    tickers: list[str] | None = None
    year: int | None = None
    quarter: str | None = None
    source_types: list[str] | None = None
    #: One group of the knowledge-base ``SearchFilters`` grammar over any metadata field.
    metadata: dict[str, Any] | None = None


class RetrieveRequest(_Model):
    openapi_ref = _SCHEMAS + "RetrieveRequest"
    query: str
    #: The index to search (default: the server's default index).
    index: str | None = None
    filters: RetrieveFilters | None = None
    top_k: int | None = None
    rerank: bool | None = None
    include_segments: bool | None = None


class Segment(_Camel):
    openapi_ref = _SCHEMAS + "SegmentOut"
    id: str
    sequence: int
    content: str
    char_start: int
    char_end: int


class Source(_Camel):
    """Where a chunk comes from; ``char_start``/``char_end`` count characters (Unicode
    scalar values) in the document's text, end exclusive."""

    openapi_ref = _SCHEMAS + "SourceOut"
    document_id: str
    document_title: str
    document_type: str
    ticker: str | None = None
    year: int | None = None
    quarter: str | None = None
    filing_type: str | None = None
    source_url: str | None = None
    char_start: int
    char_end: int
    page_numbers: list[int] | None = None
    segments: list[Segment] | None = None
    metadata: dict[str, Any] | None = None


class Chunk(_Camel):
    openapi_ref = _SCHEMAS + "ChunkOut"
    id: str
    text: str
    score: float
    #: The chunk's sentences with the query's rarest terms.
    evidence_text: str | None = None
    source: Source


class RerankStatus(_Model):
    """``not_requested``, ``unavailable``, ``applied`` or ``failed`` (with a reason)."""

    openapi_ref = _SCHEMAS + "RerankStatus"
    status: str
    reason: str | None = None


class PeriodMismatch(_Model):
    openapi_ref = _SCHEMAS + "PeriodMismatch"
    requested: str
    served: list[str]
    message: str


class ShardsMeta(_Model):
    """Of a sharded index, how many of its shards answered (the results come from these)."""

    openapi_ref = _SCHEMAS + "ShardsMeta"
    answered: int
    of: int


class RetrieveMeta(_Camel):
    openapi_ref = _SCHEMAS + "Meta"
    total: int
    request_id: str
    top_k: int
    query_truncated: bool
    rerank: RerankStatus
    paths_served: list[str]
    degraded: bool
    timings: dict[str, float]
    period_mismatch: PeriodMismatch | None = None
    #: Only from a sharded index.
    shards: ShardsMeta | None = None


class RetrieveResponse(_Model):
    openapi_ref = _SCHEMAS + "RetrieveResponse"
    chunks: list[Chunk]
    meta: RetrieveMeta


# ---------------------------------------------------------------- POST /v1/search


class SearchRequest(_Model):
    openapi_ref = _SCHEMAS + "SearchBody"
    query: str
    #: The index to search (default: the server's default index).
    index: str | None = None
    entity: str | list[str] | None = None
    theme: str | list[str] | None = None
    published_after: str | None = None
    published_before: str | None = None
    limit: int | None = None
    max_per_document: int | None = None
    rerank: bool | None = None
    recency_boost: bool | None = None
    min_similarity: float | None = None
    metadata: dict[str, Any] | None = None


class DocumentRef(_Model):
    openapi_ref = _SCHEMAS + "DocumentRef"
    document_id: str
    title: str
    document_type: str
    ticker: str | None = None
    year: int | None = None
    quarter: str | None = None
    published_at: str | None = None
    source_url: str | None = None
    metadata: dict[str, Any] | None = None


class PageSpan(_Model):
    """The pages a passage spans, from 1."""

    openapi_ref = _SCHEMAS + "PageSpan"
    first: int
    last: int


class Position(_Model):
    """The unit's place: its characters in the document (end exclusive) and the chunk it
    came from."""

    openapi_ref = _SCHEMAS + "Position"
    chunk_text: str
    segment_start: int
    segment_end: int
    char_start: int
    char_end: int
    #: The chunk's first and last page, when its document has pages (a PDF).
    page: PageSpan | None = None


class UnitDiagnostics(_Model):
    """The unit's rank in each retrieval path (1-based, absent when a path missed it)."""

    openapi_ref = _SCHEMAS + "UnitDiagnostics"
    dense_rank: int | None = None
    sparse_rank: int | None = None
    bm25_rank: int | None = None
    dense_score: float | None = None
    rrf_rank: int
    rrf_score: float
    rerank_rank: int | None = None
    rerank_score: float | None = None


class SearchResult(_Model):
    openapi_ref = _SCHEMAS + "Unit"
    #: ``documentId#n:start-end``: the chunk's citation id and the unit's character range.
    unit_id: str
    text: str
    score: float
    document: DocumentRef
    position: Position
    diagnostics: UnitDiagnostics


class SearchMeta(_Model):
    openapi_ref = _SCHEMAS + "SearchMeta"
    total: int
    candidates: int
    limit: int
    entities: list[str]
    rerank: RerankStatus
    failed_paths: dict[str, str]
    query_truncated: bool
    paths_served: list[str]
    degraded: bool
    request_id: str
    timings: dict[str, float]
    #: Only from a sharded index.
    shards: ShardsMeta | None = None


class SearchResponse(_Model):
    openapi_ref = _SCHEMAS + "SearchResponse"
    results: list[SearchResult]
    meta: SearchMeta


# ---------------------------------------------------------------- POST /{WorkspaceId}/index/retrieve


class KbTurn(_Pascal):
    openapi_ref = _SCHEMAS + "Turn"
    role: str
    content: str


class KbHistoryMessage(_Model):
    openapi_ref = _SCHEMAS + "HistoryMessage"
    role: str
    content: str


class KbModelChoice(_Pascal):
    openapi_ref = _SCHEMAS + "ModelChoice"
    model_name: str | None = None
    rerank_instruct: str | None = None
    rerank_mode: str | None = None


class KbExtra(_Camel):
    openapi_ref = _SCHEMAS + "Extra"
    unique_id: str | None = None


class KbRequest(_Pascal):
    openapi_ref = _SCHEMAS + "KbRequest"
    index_id: str
    query: str | None = None
    dense_similarity_top_k: int | None = None
    sparse_similarity_top_k: int | None = None
    enable_reranking: bool | None = None
    rerank_min_score: float | None = None
    rerank_top_n: int | None = None
    enable_rewrite: bool | None = None
    history: list[KbTurn] | None = None
    query_history: list[KbHistoryMessage] | None = None
    rerank: list[KbModelChoice] | None = None
    rewrite: list[KbModelChoice] | None = None
    extra: KbExtra | None = None
    save_retriever_history: bool | None = None
    images: list[str] | None = None
    #: Groups ANDed; see docs/api.md (the knowledge-base Retrieve) for the grammar.
    search_filters: list[dict[str, Any]] | None = None


class KbNode(_Pascal):
    openapi_ref = _SCHEMAS + "Node"
    text: str
    score: float
    #: ``doc_id``, ``title``, ``charStart``/``charEnd``, ``ticker``, ``year``, ... as sent.
    metadata: dict[str, Any]


class KbData(_Pascal):
    openapi_ref = _SCHEMAS + "KbData"
    nodes: list[KbNode]
    rewritten_query: str | None = None


class KbResponse(_Pascal):
    openapi_ref = _SCHEMAS + "KbResponse"
    code: str
    message: str
    request_id: str
    status: str
    success: bool
    data: KbData | None = None
    rerank_min_score_applied: bool | None = None


# ---------------------------------------------------------------- POST /v1/context


class ContextRequest(_Model):
    openapi_ref = _SCHEMAS + "ContextBody"
    question: str
    tickers: list[str] | None = None
    years: list[int] | None = None
    #: 1-4 or ``"Q1"``-``"Q4"``.
    quarters: list[int | str] | None = None
    route: str | None = None
    top_k: int | None = None


class Classification(_Model):
    openapi_ref = _SCHEMAS + "Classification"
    route: str
    forced: bool
    intent: str
    granularity: str
    tickers: list[str]
    years: list[int]
    quarters: list[int]
    metrics: list[str]
    concepts: list[str]
    statements: list[str]
    explain: bool
    signals: list[str]


class FiscalPeriod(_Camel):
    openapi_ref = _SCHEMAS + "Period"
    fiscal_year: int
    quarter: int | None = None


class FactSource(_Model):
    openapi_ref = _SCHEMAS + "FactSource"
    form: str
    filing: str
    file: str
    derived: str | None = None


class Fact(_Camel):
    """One reported (or derived) value with its concept, period and filing."""

    openapi_ref = _SCHEMAS + "Value"
    ticker: str
    metric: str
    label: str
    concept: str
    period: FiscalPeriod
    period_label: str
    start: str | None = None
    end: str
    value: float
    unit: str
    display: str
    source: FactSource


class Comparison(_Camel):
    openapi_ref = _SCHEMAS + "Comparison"
    ticker: str
    metric: str
    period: str
    prior_period: str
    value: float
    prior_value: float
    delta: float
    pct_change: float | None = None
    display: str


class Series(_Model):
    openapi_ref = _SCHEMAS + "Series"
    ticker: str
    metric: str
    points: list[Fact]
    missing: list[str]
    coverage: float
    changes: list[Comparison]


class StatementLine(_Model):
    openapi_ref = _SCHEMAS + "StatementLine"
    metric: str
    value: Fact
    prior: Fact | None = None


class StatementTable(_Model):
    openapi_ref = _SCHEMAS + "StatementTable"
    ticker: str
    statement: str
    period: str
    lines: list[StatementLine]
    missing: list[str]
    markdown: str


class Passage(_Camel):
    openapi_ref = _SCHEMAS + "Passage"
    chunk_id: str
    document_id: str
    title: str
    document_type: str
    ticker: str | None = None
    year: int | None = None
    quarter: str | None = None
    text: str
    similarity: float
    rerank_score: float | None = None
    score: float


class RouteResult(_Camel):
    """Only the parts the route produces are sent; the others are empty."""

    openapi_ref = _SCHEMAS + "RouteResult"
    facts: list[Fact] = []
    comparisons: list[Comparison] = []
    timeseries: list[Series] = []
    statements: list[StatementTable] = []
    statement_fallback: bool = False
    passages: list[Passage] = []


class Claim(_Camel):
    openapi_ref = _SCHEMAS + "Claim"
    text: str
    metric: str
    direction: str
    pct: float
    fiscal_year: int
    quarter: int | None = None


class Contradiction(_Camel):
    openapi_ref = _SCHEMAS + "Contradiction"
    kind: str
    ticker: str
    claim: Claim
    chunk_id: str
    facts: Comparison
    concept: str
    explanation: str


class ConfidenceSignal(_Model):
    openapi_ref = _SCHEMAS + "Signal"
    name: str
    value: float
    weight: float
    detail: str


class Confidence(_Model):
    openapi_ref = _SCHEMAS + "Confidence"
    score: float
    tier: str
    signals: list[ConfidenceSignal]


class ContextMeta(_Camel):
    openapi_ref = _SCHEMAS + "ContextMeta"
    request_id: str
    index: str
    top_k: int
    facts_held: list[int]
    took_ms: int
    paths_served: list[str]
    degraded: bool
    shards: ShardsMeta | None = None


class ContextResponse(_Model):
    openapi_ref = _SCHEMAS + "ContextResponse"
    route: str
    classification: Classification
    result: RouteResult
    guardrails: list[str]
    contradictions: list[Contradiction]
    confidence: Confidence
    warnings: list[str]
    meta: ContextMeta


# ---------------------------------------------------------------- documents


class DocumentBody(_Camel):
    """A document to write as JSON: ``text`` (read as ``content_type`` says) or
    ``segments``, with a title, metadata and the financial fields."""

    openapi_ref = _SCHEMAS + "DocumentBody"
    #: Required in a batch (:meth:`Sextant.put_documents`); a ``PUT`` names it in its path.
    document_id: str | None = None
    text: str | None = None
    content_type: str | None = None
    segments: list[str] | None = None
    #: The page of each of ``segments``, from 1 (a document with pages).
    pages: list[int] | None = None
    title: str | None = None
    metadata: dict[str, Any] | None = None
    document_type: str | None = None
    ticker: str | None = None
    year: int | None = None
    quarter: str | None = None
    filing_type: str | None = None
    source_url: str | None = None
    published_at: str | None = None


class WriteResponse(_Camel):
    openapi_ref = _SCHEMAS + "WriteResponse"
    document_id: str
    index: str
    #: ``live`` (searchable now) or ``pending`` (on AWS, until the next build).
    status: str
    request_id: str
    created: bool | None = None
    deleted: bool | None = None
    chunks: int | None = None
    segments: int | None = None
    seq: int | None = None


class BatchError(_Camel):
    """Why one document of a batch was not written."""

    openapi_ref = _SCHEMAS + "BatchError"
    #: ``invalid_request`` (``field`` names what) or ``unavailable`` (send it again).
    code: str
    message: str
    field: str | None = None


class BatchResult(_Camel):
    """One document of a batch: written (``status``, ``created``, ``chunks``, ``seq``) or
    not (``error``)."""

    openapi_ref = _SCHEMAS + "BatchResult"
    document_id: str | None = None
    #: ``live`` (searchable now) or ``pending`` (on AWS, until the next build), when written.
    status: str | None = None
    created: bool | None = None
    chunks: int | None = None
    segments: int | None = None
    seq: int | None = None
    error: BatchError | None = None


class BatchResponse(_Camel):
    """The answer to :meth:`Sextant.put_documents`: one result per document, in order."""

    openapi_ref = _SCHEMAS + "BatchResponse"
    index: str
    written: int
    failed: int
    results: list[BatchResult]
    request_id: str


class DocumentSegment(_Camel):
    openapi_ref = _SCHEMAS + "DocumentSegment"
    text: str
    char_start: int
    char_end: int
    #: The page it is on, from 1, in a document with pages (a PDF).
    page: int | None = None


class DocumentSummary(_Camel):
    openapi_ref = _SCHEMAS + "DocumentSummary"
    document_id: str
    title: str
    document_type: str
    metadata: dict[str, Any]
    status: str
    ticker: str | None = None
    year: int | None = None
    quarter: str | None = None
    filing_type: str | None = None
    source_url: str | None = None
    published_at: str | None = None
    chunks: int | None = None
    compacted: bool | None = None


class Document(DocumentSummary):
    """A stored document: its text (segments joined by ``"\\n\\n"``), which every
    ``char_start``/``char_end`` of a result indexes."""

    openapi_ref = _SCHEMAS + "DocumentResponse"
    index: str
    text: str
    segments: list[DocumentSegment]
    request_id: str


class DocumentPage(_Camel):
    openapi_ref = _SCHEMAS + "DocumentPage"
    index: str
    documents: list[DocumentSummary]
    next_cursor: str | None = None
    request_id: str


class CompactResponse(_Camel):
    openapi_ref = _SCHEMAS + "CompactResponse"
    index: str
    compacted: bool
    request_id: str
    #: documents, chunks, ``chunks_encoded``, seconds, version, writes.
    report: dict[str, Any] | None = None


# ---------------------------------------------------------------- /v1/indexes


class IndexOptions(_Camel):
    """How a new index cuts its documents (``None``: the server's setting)."""

    openapi_ref = _SCHEMAS + "IndexOptions"
    chunk_tokens: int | None = None
    chunk_overlap: int | None = None


class IndexSettings(_Camel):
    openapi_ref = _SCHEMAS + "IndexSettings"
    chunk_tokens: int
    chunk_overlap: int
    dense_window: int
    dense_model: str
    sparse_model: str


class IndexInfo(_Camel):
    """An index as a key sees it."""

    openapi_ref = _SCHEMAS + "IndexInfo"
    index: str
    documents: int
    chunks: int
    built_unix: int
    writable: bool
    default: bool
    #: ``ready`` when every retrieval path serves, else ``building``.
    state: str
    paths: dict[str, str]
    settings: IndexSettings
    #: Bytes it holds in memory once loaded, estimated at build (0: not recorded).
    resident_bytes: int
    version: str | None = None


class IndexList(_Camel):
    openapi_ref = _SCHEMAS + "IndexList"
    indexes: list[IndexInfo]
    request_id: str


class IndexResponse(_Camel):
    """``GET`` or ``PUT /v1/indexes/{index}``: the fields of :class:`IndexInfo`; a
    ``DELETE``: ``deleted`` and none of them."""

    openapi_ref = _SCHEMAS + "IndexResponse"
    request_id: str
    index: str | None = None
    documents: int | None = None
    chunks: int | None = None
    version: str | None = None
    built_unix: int | None = None
    writable: bool | None = None
    default: bool | None = None
    state: str | None = None
    paths: dict[str, str] | None = None
    settings: IndexSettings | None = None
    resident_bytes: int | None = None
    deleted: bool | None = None


# ---------------------------------------------------------------- GET /health


class Health(_Camel):
    openapi_ref = "#/paths/~1health/get/responses/200/content/application~1json/schema"
    status: str
    #: Chunks served per index.
    indexes: dict[str, int]
    version: str
    degraded: bool | None = None
    index_versions: dict[str, str] | None = None
    #: Per index, each retrieval path's state (``ready`` or ``building``).
    paths: dict[str, dict[str, str]] | None = None
    #: The index ``/v1/retrieve``, ``/v1/search`` and ``/v1/context`` read.
    default_index: str | None = None


#: Every model, for the OpenAPI check.
MODELS: list[type[_Model]] = [
    obj
    for name, obj in sorted(globals().items())
    if isinstance(obj, type) and issubclass(obj, _Model) and not name.startswith("_")
]
