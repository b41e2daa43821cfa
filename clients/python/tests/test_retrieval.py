"""Retrieve, search, context and the knowledge-base route against the live server: every
citation's ``char_start:char_end`` slice of the document's text is the cited text."""

from __future__ import annotations

import datetime
from collections.abc import Callable

import pytest

from sextant import NotFoundError, Sextant
from sextant.types import RetrieveFilters


def test_retrieve_cites_the_document_text(client: Sextant, document_text: Callable[[str], str]) -> None:
    r = client.retrieve(
        "Where is Mastercard headquartered?", filters={"tickers": ["MA"]}, top_k=3, include_segments=True
    )
    assert len(r.chunks) == 3 and r.meta.total == 3 and r.meta.top_k == 3
    assert r.meta.request_id.startswith("req_")
    assert "Purchase, New York" in r.chunks[0].text
    for chunk in r.chunks:
        s = chunk.source
        assert s.ticker == "MA"
        text = document_text(s.document_id)
        assert text[s.char_start : s.char_end] == chunk.text
        assert chunk.evidence_text and chunk.evidence_text in chunk.text
        assert s.segments, "include_segments=True gives the chunk's segments"
        for seg in s.segments:
            assert text[seg.char_start : seg.char_end] == seg.content
    assert [c.score for c in r.chunks] == sorted((c.score for c in r.chunks), reverse=True)


def test_retrieve_filters_and_the_period_mismatch(client: Sextant) -> None:
    filters = RetrieveFilters(tickers=["XOM"], year=2030, quarter="Q4", source_types=["earnings_call"])
    r = client.retrieve("outlook for next quarter", filters=filters, top_k=2)
    assert r.chunks
    assert all(c.source.ticker == "XOM" and c.source.document_type == "earnings_call" for c in r.chunks)
    mismatch = r.meta.period_mismatch
    assert mismatch is not None and mismatch.requested == "Q4 2030"
    assert all(c.source.year is not None and c.source.year < 2030 for c in r.chunks)
    assert "Do not present them as Q4 2030" in mismatch.message


def test_search_units_cite_the_document_text(client: Sextant, document_text: Callable[[str], str]) -> None:
    r = client.search("cross-border transaction volume growth", entity="Mastercard", limit=5)
    assert r.results and len(r.results) <= 5 and r.meta.entities == ["MA"]
    for unit in r.results:
        p = unit.position
        assert unit.document.ticker == "MA"
        assert document_text(unit.document.document_id)[p.char_start : p.char_end] == unit.text
        assert unit.unit_id.startswith(unit.document.document_id + "#")
        assert unit.unit_id.endswith(f":{p.char_start}-{p.char_end}")
        assert unit.text in p.chunk_text
        assert unit.diagnostics.rrf_rank >= 1
        ranks = (unit.diagnostics.dense_rank, unit.diagnostics.sparse_rank, unit.diagnostics.bm25_rank)
        assert any(r is not None for r in ranks), "found by at least one path"
    assert set(r.meta.paths_served) == {"dense", "bm25", "splade"}


def test_search_takes_dates_and_lists(client: Sextant) -> None:
    r = client.search(
        "cloud revenue growth",
        entity=["ORCL", "MA"],
        theme="earnings_call",
        published_after=datetime.date(2016, 1, 1),
        limit=4,
        max_per_document=1,
    )
    assert len(r.results) >= 2
    ids = [u.document.document_id for u in r.results]
    assert len(ids) == len(set(ids)), "max_per_document=1"
    for unit in r.results:
        assert unit.document.document_type == "earnings_call" and unit.document.ticker in ("ORCL", "MA")
        assert unit.document.published_at is not None and unit.document.published_at >= "2016-01-01"


@pytest.mark.parametrize(
    ("question", "route", "part"),
    [
        ("What was Mastercard's net revenue in 2023?", "metric_lookup", "facts"),
        ("Mastercard revenue each year since 2021", "timeseries", "timeseries"),
        ("Show Oracle's balance sheet for 2024", "full_statement", "statements"),
        ("What did Exxon say about refining margins?", "narrative", "passages"),
        ("Why did Mastercard net income grow in 2023?", "hybrid", "passages"),
    ],
)
def test_context_routes(
    client: Sextant, document_text: Callable[[str], str], question: str, route: str, part: str
) -> None:
    c = client.context(question, top_k=3)
    assert c.route == route == c.classification.route
    assert getattr(c.result, part), f"{route} fills {part}"
    assert 0 <= c.confidence.score <= 100 and c.confidence.signals
    for fact in c.result.facts:
        assert fact.source.file and fact.concept.startswith("us-gaap:")
    for series in c.result.timeseries:
        years = [p.period.fiscal_year for p in series.points]
        assert years == sorted(years)
    for table in c.result.statements:
        assert "| Line item |" in table.markdown and table.lines
    for passage in c.result.passages:
        assert passage.text in document_text(passage.document_id)


def test_context_names_a_bad_ticker(client: Sextant) -> None:
    from sextant import BadRequestError

    with pytest.raises(BadRequestError) as e:
        client.context("revenue", tickers=["MA", "ZZZZ"])
    assert e.value.field == "tickers[1]" and "ZZZZ" in e.value.message


def test_knowledge_base_retrieve(client: Sextant, index: str, document_text: Callable[[str], str]) -> None:
    r = client.knowledge_base_retrieve(
        "cross-border volume growth",
        workspace_id="ws_demo",
        index_id=index,
        dense_similarity_top_k=20,
        rerank_top_n=3,
        search_filters=[{"ticker": "MA", "documentType": "earnings_call"}],
    )
    assert r.success and r.code == "Success" and r.status == "200"
    assert r.data is not None and len(r.data.nodes) == 3
    for node in r.data.nodes:
        m = node.metadata
        assert m["ticker"] == "MA" and m["documentType"] == "earnings_call"
        assert document_text(m["doc_id"])[m["charStart"] : m["charEnd"]] == node.text


def test_knowledge_base_rewrites_a_follow_up(client: Sextant, index: str) -> None:
    r = client.knowledge_base_retrieve(
        "and in 2023?",
        workspace_id="ws_demo",
        index_id=index,
        enable_rewrite=True,
        rerank_top_n=2,
        history=[{"Role": "user", "Content": "What were Mastercard's main risk factors in 2024?"}],
    )
    assert r.data is not None
    assert r.data.rewritten_query == "What were Mastercard's main risk factors in 2023?"


def test_knowledge_base_unknown_index(client: Sextant) -> None:
    with pytest.raises(NotFoundError) as e:
        client.knowledge_base_retrieve("x", workspace_id="ws", index_id="no-such-index")
    assert e.value.code == "Index.NotFound" and e.value.request_id and e.value.request_id.startswith("req_")
