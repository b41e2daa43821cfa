"""The asyncio client: the same calls, awaited, against the live server."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from sextant import AsyncSextant, BadRequestError, NotFoundError

pytestmark = pytest.mark.anyio


async def test_retrieve_and_search_cite_the_document_text(
    aclient: AsyncSextant, document_text: Callable[[str], str]
) -> None:
    r, s = await asyncio.gather(
        aclient.retrieve("share repurchase program", filters={"tickers": ["ORCL"]}, top_k=3),
        aclient.search("share repurchase program", entity="ORCL", limit=3),
    )
    assert len(r.chunks) == 3 and s.results
    for chunk in r.chunks:
        src = chunk.source
        assert src.ticker == "ORCL"
        assert document_text(src.document_id)[src.char_start : src.char_end] == chunk.text
    for unit in s.results:
        p = unit.position
        assert document_text(unit.document.document_id)[p.char_start : p.char_end] == unit.text


async def test_context_and_the_knowledge_base(aclient: AsyncSextant, index: str) -> None:
    c = await aclient.context("What was Mastercard's net revenue in 2023?", tickers=["MA"], years=[2023])
    assert c.route == "metric_lookup" and c.result.facts[0].period.fiscal_year == 2023
    kb = await aclient.knowledge_base_retrieve("refining margins", workspace_id="ws", index_id=index, rerank_top_n=2)
    assert kb.success and kb.data is not None and len(kb.data.nodes) == 2


async def test_documents_round_trip(aclient: AsyncSextant, index: str) -> None:
    document_id = f"client-async-{uuid.uuid4().hex[:12]}"
    w = await aclient.put_document(index, document_id, segments=["First part.", "Second part."], ticker="MA")
    assert w.created and w.status == "live"
    try:
        doc = await aclient.get_document(index, document_id)
        assert doc.text == "First part.\n\nSecond part." and doc.ticker == "MA"
        ids = [d.document_id async for d in aclient.iter_documents(index, page_size=9)]
        assert document_id in ids and ids == sorted(set(ids))
    finally:
        assert (await aclient.delete_document(index, document_id)).deleted
    with pytest.raises(NotFoundError):
        await aclient.get_document(index, document_id)


async def test_put_file(aclient: AsyncSextant, index: str) -> None:
    document_id = f"client-async-pdf-{uuid.uuid4().hex[:12]}"
    pdf = Path(__file__).resolve().parents[3] / "tests" / "data" / "pdf" / "report.pdf"
    w = await aclient.put_file(index, document_id, pdf, title="Turbines Q3")
    try:
        assert w.created and w.status == "live"
        doc = await aclient.get_document(index, document_id)
        assert doc.title == "Turbines Q3" and {s.page for s in doc.segments} == {1, 2, 3}
    finally:
        await aclient.delete_document(index, document_id)


async def test_put_documents(aclient: AsyncSextant, index: str) -> None:
    ids = [f"client-async-batch-{uuid.uuid4().hex[:12]}" for _ in range(2)]
    r = await aclient.put_documents(index, [{"document_id": i, "segments": [f"Batch part {i}."]} for i in ids])
    try:
        assert (r.written, r.failed) == (2, 0) and [x.document_id for x in r.results] == ids
        assert (await aclient.get_document(index, ids[1])).text == f"Batch part {ids[1]}."
    finally:
        for i in ids:
            await aclient.delete_document(index, i)


async def test_errors(aclient: AsyncSextant) -> None:
    with pytest.raises(BadRequestError) as e:
        await aclient.retrieve("revenue", filters={"quarter": "Q5"})
    assert e.value.field == "filters.quarter"
    assert (await aclient.health()).status == "ok"
