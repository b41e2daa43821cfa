"""Typed requests and responses of the Sextant HTTP API.

Each model names the OpenAPI schema it mirrors in ``openapi_ref`` (a JSON pointer into the
server's ``/openapi.json``); the test suite checks every model against the live document, in
both directions, and real responses against both. Field names are Python's; the wire names
(camelCase, snake_case or PascalCase, exactly as the server spells them) are the aliases.
Unknown response fields are kept (``model_extra``), so a newer server never breaks an older
client.
"""

from __future__ import annotations

from typing import Any, ClassVar, Dict, List, Optional, Type, Union

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
    "Series",
    "Source",
    "StatementLine",
    "StatementTable",
    "UnitDiagnostics",
    "WriteResponse",
    "MODELS",
]

_SCHEMAS = "#/components/schemas/"


class _Model(BaseModel):
    """Wire names as aliases; a field may also be set by its Python name."""

    model_config = ConfigDict(
        extra="allow", validate_by_name=True, validate_by_alias=True, serialize_by_alias=True
    )
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
    field: Optional[str] = None
    request_id: str


class ErrorEnvelope(_Model):
    openapi_ref = _SCHEMAS + "ErrorEnvelope"
    success: bool
    error: ErrorDetail


# ---------------------------------------------------------------- POST /v1/retrieve


class RetrieveFilters(_Model):
    openapi_ref = _SCHEMAS + "RetrieveFilters"
    tickers: Optional[List[str]] = None
    year: Optional[int] = None
    quarter: Optional[str] = None
    source_types: Optional[List[str]] = None
    #: One group of the knowledge-base ``SearchFilters`` grammar over any metadata field.
    metadata: Optional[Dict[str, Any]] = None


class RetrieveRequest(_Model):
    openapi_ref = _SCHEMAS + "RetrieveRequest"
    query: str
    filters: Optional[RetrieveFilters] = None
    top_k: Optional[int] = None
    rerank: Optional[bool] = None
    include_segments: Optional[bool] = None


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
    ticker: Optional[str] = None
    year: Optional[int] = None
    quarter: Optional[str] = None
    filing_type: Optional[str] = None
    source_url: Optional[str] = None
    char_start: int
    char_end: int
    page_numbers: Optional[List[int]] = None
    segments: Optional[List[Segment]] = None
    metadata: Optional[Dict[str, Any]] = None


class Chunk(_Camel):
    openapi_ref = _SCHEMAS + "ChunkOut"
    id: str
    text: str
    score: float
    #: The chunk's sentences with the query's rarest terms.
    evidence_text: Optional[str] = None
    source: Source


class RerankStatus(_Model):
    """``not_requested``, ``unavailable``, ``applied`` or ``failed`` (with a reason)."""

    openapi_ref = _SCHEMAS + "RerankStatus"
    status: str
    reason: Optional[str] = None


class PeriodMismatch(_Model):
    openapi_ref = _SCHEMAS + "PeriodMismatch"
    requested: str
    served: List[str]
    message: str


class RetrieveMeta(_Camel):
    openapi_ref = _SCHEMAS + "Meta"
    total: int
    request_id: str
    top_k: int
    query_truncated: bool
    rerank: RerankStatus
    paths_served: List[str]
    degraded: bool
    timings: Dict[str, float]
    period_mismatch: Optional[PeriodMismatch] = None


class RetrieveResponse(_Model):
    openapi_ref = _SCHEMAS + "RetrieveResponse"
    chunks: List[Chunk]
    meta: RetrieveMeta


# ---------------------------------------------------------------- POST /v1/search


class SearchRequest(_Model):
    openapi_ref = _SCHEMAS + "SearchBody"
    query: str
    entity: Optional[Union[str, List[str]]] = None
    theme: Optional[Union[str, List[str]]] = None
    published_after: Optional[str] = None
    published_before: Optional[str] = None
    limit: Optional[int] = None
    max_per_document: Optional[int] = None
    rerank: Optional[bool] = None
    recency_boost: Optional[bool] = None
    min_similarity: Optional[float] = None
    metadata: Optional[Dict[str, Any]] = None


class DocumentRef(_Model):
    openapi_ref = _SCHEMAS + "DocumentRef"
    document_id: str
    title: str
    document_type: str
    ticker: Optional[str] = None
    year: Optional[int] = None
    quarter: Optional[str] = None
    published_at: Optional[str] = None
    source_url: Optional[str] = None
    metadata: Optional[Dict[str, Any]] = None


class Position(_Model):
    """The unit's place: its characters in the document (end exclusive) and the chunk it
    came from."""

    openapi_ref = _SCHEMAS + "Position"
    chunk_text: str
    segment_start: int
    segment_end: int
    char_start: int
    char_end: int


class UnitDiagnostics(_Model):
    """The unit's rank in each retrieval path (1-based, absent when a path missed it)."""

    openapi_ref = _SCHEMAS + "UnitDiagnostics"
    dense_rank: Optional[int] = None
    sparse_rank: Optional[int] = None
    bm25_rank: Optional[int] = None
    dense_score: Optional[float] = None
    rrf_rank: int
    rrf_score: float
    rerank_rank: Optional[int] = None
    rerank_score: Optional[float] = None


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
    entities: List[str]
    rerank: RerankStatus
    failed_paths: Dict[str, str]
    query_truncated: bool
    paths_served: List[str]
    degraded: bool
    request_id: str
    timings: Dict[str, float]


class SearchResponse(_Model):
    openapi_ref = _SCHEMAS + "SearchResponse"
    results: List[SearchResult]
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
    model_name: Optional[str] = None
    rerank_instruct: Optional[str] = None
    rerank_mode: Optional[str] = None


class KbExtra(_Camel):
    openapi_ref = _SCHEMAS + "Extra"
    unique_id: Optional[str] = None


class KbRequest(_Pascal):
    openapi_ref = _SCHEMAS + "KbRequest"
    index_id: str
    query: Optional[str] = None
    dense_similarity_top_k: Optional[int] = None
    sparse_similarity_top_k: Optional[int] = None
    enable_reranking: Optional[bool] = None
    rerank_min_score: Optional[float] = None
    rerank_top_n: Optional[int] = None
    enable_rewrite: Optional[bool] = None
    history: Optional[List[KbTurn]] = None
    query_history: Optional[List[KbHistoryMessage]] = None
    rerank: Optional[List[KbModelChoice]] = None
    rewrite: Optional[List[KbModelChoice]] = None
    extra: Optional[KbExtra] = None
    save_retriever_history: Optional[bool] = None
    images: Optional[List[str]] = None
    #: Groups ANDed; see the README's knowledge-base section for the grammar.
    search_filters: Optional[List[Dict[str, Any]]] = None


class KbNode(_Pascal):
    openapi_ref = _SCHEMAS + "Node"
    text: str
    score: float
    #: ``doc_id``, ``title``, ``charStart``/``charEnd``, ``ticker``, ``year``, ... as sent.
    metadata: Dict[str, Any]


class KbData(_Pascal):
    openapi_ref = _SCHEMAS + "KbData"
    nodes: List[KbNode]
    rewritten_query: Optional[str] = None


class KbResponse(_Pascal):
    openapi_ref = _SCHEMAS + "KbResponse"
    code: str
    message: str
    request_id: str
    status: str
    success: bool
    data: Optional[KbData] = None
    rerank_min_score_applied: Optional[bool] = None


# ---------------------------------------------------------------- POST /v1/context


class ContextRequest(_Model):
    openapi_ref = _SCHEMAS + "ContextBody"
    question: str
    tickers: Optional[List[str]] = None
    years: Optional[List[int]] = None
    #: 1-4 or ``"Q1"``-``"Q4"``.
    quarters: Optional[List[Union[int, str]]] = None
    route: Optional[str] = None
    top_k: Optional[int] = None


class Classification(_Model):
    openapi_ref = _SCHEMAS + "Classification"
    route: str
    forced: bool
    intent: str
    granularity: str
    tickers: List[str]
    years: List[int]
    quarters: List[int]
    metrics: List[str]
    concepts: List[str]
    statements: List[str]
    explain: bool
    signals: List[str]


class FiscalPeriod(_Camel):
    openapi_ref = _SCHEMAS + "Period"
    fiscal_year: int
    quarter: Optional[int] = None


class FactSource(_Model):
    openapi_ref = _SCHEMAS + "FactSource"
    form: str
    filing: str
    file: str
    derived: Optional[str] = None


class Fact(_Camel):
    """One reported (or derived) value with its concept, period and filing."""

    openapi_ref = _SCHEMAS + "Value"
    ticker: str
    metric: str
    label: str
    concept: str
    period: FiscalPeriod
    period_label: str
    start: Optional[str] = None
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
    pct_change: Optional[float] = None
    display: str


class Series(_Model):
    openapi_ref = _SCHEMAS + "Series"
    ticker: str
    metric: str
    points: List[Fact]
    missing: List[str]
    coverage: float
    changes: List[Comparison]


class StatementLine(_Model):
    openapi_ref = _SCHEMAS + "StatementLine"
    metric: str
    value: Fact
    prior: Optional[Fact] = None


class StatementTable(_Model):
    openapi_ref = _SCHEMAS + "StatementTable"
    ticker: str
    statement: str
    period: str
    lines: List[StatementLine]
    missing: List[str]
    markdown: str


class Passage(_Camel):
    openapi_ref = _SCHEMAS + "Passage"
    chunk_id: str
    document_id: str
    title: str
    document_type: str
    ticker: Optional[str] = None
    year: Optional[int] = None
    quarter: Optional[str] = None
    text: str
    similarity: float
    rerank_score: Optional[float] = None
    score: float


class RouteResult(_Camel):
    """Only the parts the route produces are sent; the others are empty."""

    openapi_ref = _SCHEMAS + "RouteResult"
    facts: List[Fact] = []
    comparisons: List[Comparison] = []
    timeseries: List[Series] = []
    statements: List[StatementTable] = []
    statement_fallback: bool = False
    passages: List[Passage] = []


class Claim(_Camel):
    openapi_ref = _SCHEMAS + "Claim"
    text: str
    metric: str
    direction: str
    pct: float
    fiscal_year: int
    quarter: Optional[int] = None


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
    signals: List[ConfidenceSignal]


class ContextMeta(_Camel):
    openapi_ref = _SCHEMAS + "ContextMeta"
    request_id: str
    index: str
    top_k: int
    facts_held: List[int]
    took_ms: int
    paths_served: List[str]
    degraded: bool


class ContextResponse(_Model):
    openapi_ref = _SCHEMAS + "ContextResponse"
    route: str
    classification: Classification
    result: RouteResult
    guardrails: List[str]
    contradictions: List[Contradiction]
    confidence: Confidence
    warnings: List[str]
    meta: ContextMeta


# ---------------------------------------------------------------- documents


class DocumentBody(_Camel):
    """A document to write as JSON: ``text`` (read as ``content_type`` says) or
    ``segments``, with a title, metadata and the financial fields."""

    openapi_ref = _SCHEMAS + "DocumentBody"
    text: Optional[str] = None
    content_type: Optional[str] = None
    segments: Optional[List[str]] = None
    title: Optional[str] = None
    metadata: Optional[Dict[str, Any]] = None
    document_type: Optional[str] = None
    ticker: Optional[str] = None
    year: Optional[int] = None
    quarter: Optional[str] = None
    filing_type: Optional[str] = None
    source_url: Optional[str] = None
    published_at: Optional[str] = None


class WriteResponse(_Camel):
    openapi_ref = _SCHEMAS + "WriteResponse"
    document_id: str
    index: str
    #: ``live`` (searchable now) or ``pending`` (on AWS, until the next build).
    status: str
    request_id: str
    created: Optional[bool] = None
    deleted: Optional[bool] = None
    chunks: Optional[int] = None
    segments: Optional[int] = None
    seq: Optional[int] = None


class DocumentSegment(_Camel):
    openapi_ref = _SCHEMAS + "DocumentSegment"
    text: str
    char_start: int
    char_end: int


class DocumentSummary(_Camel):
    openapi_ref = _SCHEMAS + "DocumentSummary"
    document_id: str
    title: str
    document_type: str
    metadata: Dict[str, Any]
    status: str
    ticker: Optional[str] = None
    year: Optional[int] = None
    quarter: Optional[str] = None
    filing_type: Optional[str] = None
    source_url: Optional[str] = None
    published_at: Optional[str] = None
    chunks: Optional[int] = None
    compacted: Optional[bool] = None


class Document(DocumentSummary):
    """A stored document: its text (segments joined by ``"\\n\\n"``), which every
    ``char_start``/``char_end`` of a result indexes."""

    openapi_ref = _SCHEMAS + "DocumentResponse"
    index: str
    text: str
    segments: List[DocumentSegment]
    request_id: str


class DocumentPage(_Camel):
    openapi_ref = _SCHEMAS + "DocumentPage"
    index: str
    documents: List[DocumentSummary]
    next_cursor: Optional[str] = None
    request_id: str


class CompactResponse(_Camel):
    openapi_ref = _SCHEMAS + "CompactResponse"
    index: str
    compacted: bool
    request_id: str
    #: documents, chunks, ``chunks_encoded``, seconds, version, writes.
    report: Optional[Dict[str, Any]] = None


# ---------------------------------------------------------------- GET /health


class Health(_Camel):
    openapi_ref = "#/paths/~1health/get/responses/200/content/application~1json/schema"
    status: str
    #: Chunks served per index.
    indexes: Dict[str, int]
    version: str
    degraded: Optional[bool] = None
    index_versions: Optional[Dict[str, str]] = None
    #: Per index, each retrieval path's state (``ready`` or ``building``).
    paths: Optional[Dict[str, Dict[str, str]]] = None


#: Every model, for the OpenAPI check.
MODELS: List[Type[_Model]] = [
    obj
    for name, obj in sorted(globals().items())
    if isinstance(obj, type) and issubclass(obj, _Model) and not name.startswith("_")
]
