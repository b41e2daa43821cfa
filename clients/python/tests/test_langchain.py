"""The LangChain retriever, through langchain-core's own Runnable API."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import RunnableLambda

from sextant import AsyncSextant, BadRequestError, Sextant
from sextant.langchain import SextantRetriever


def _assert_cited(docs: list[Document], document_text: Callable[[str], str]) -> None:
    assert docs
    for d in docs:
        m = d.metadata
        assert document_text(m["document_id"])[m["char_start"] : m["char_end"]] == d.page_content
        assert m["title"] and m["document_type"] and isinstance(m["score"], float)
        assert m["request_id"].startswith("req_") and d.id


def test_retrieve_endpoint(client: Sextant, document_text: Callable[[str], str]) -> None:
    retriever = SextantRetriever(client=client, top_k=4, filters={"tickers": ["MA"], "source_types": ["10-K"]})
    assert isinstance(retriever, BaseRetriever)
    docs = retriever.invoke("Where is Mastercard headquartered?")
    assert len(docs) == 4
    _assert_cited(docs, document_text)
    top = docs[0]
    assert "Purchase, New York" in top.page_content
    m = top.metadata
    assert (m["endpoint"], m["ticker"], m["document_type"], m["year"]) == ("retrieve", "MA", "10-K", 2024)
    assert m["chunk_id"] and top.id == f"{m['document_id']}#{m['chunk_id']}"
    assert m["evidence_text"] in top.page_content
    assert "quarter" not in m, "absent fields are left out, not None"


def test_search_endpoint_carries_each_path_rank(client: Sextant, document_text: Callable[[str], str]) -> None:
    retriever = SextantRetriever(
        client=client, endpoint="search", top_k=3, filters={"entity": "XOM", "theme": "earnings_call"}
    )
    docs = retriever.invoke("refining margins")
    assert 1 <= len(docs) <= 3
    _assert_cited(docs, document_text)
    for d in docs:
        m = d.metadata
        assert (m["endpoint"], m["ticker"], m["document_type"]) == ("search", "XOM", "earnings_call")
        assert d.id == m["unit_id"] and m["rrf_rank"] >= 1 and m["published_at"]
        assert any(k in m for k in ("dense_rank", "sparse_rank", "bm25_rank"))
    assert [d.metadata["rrf_rank"] for d in docs] == sorted(d.metadata["rrf_rank"] for d in docs)


def test_it_composes_and_batches(client: Sextant) -> None:
    retriever = SextantRetriever(client=client, top_k=2, filters={"tickers": ["ORCL"]})

    def titles_of(docs: list[Document]) -> list[str]:
        return [d.metadata["title"] for d in docs]

    titles = retriever | RunnableLambda(titles_of)
    found = titles.invoke("cloud infrastructure revenue", config={"tags": ["t"]})
    assert len(found) == 2 and all(t.startswith("Oracle") or "ORCL" in t for t in found)
    both = retriever.batch(["cloud license revenue", "share repurchases"])
    assert [len(b) for b in both] == [2, 2]


def test_the_servers_error_passes_through(client: Sextant) -> None:
    with pytest.raises(BadRequestError) as e:
        SextantRetriever(client=client, filters={"year": "last"}).invoke("revenue")
    assert e.value.field == "filters.year"


def test_settings_from_the_environment(document_text: Callable[[str], str]) -> None:
    docs = SextantRetriever(top_k=2).invoke("Mastercard cross-border volume")
    assert len(docs) == 2
    _assert_cited(docs, document_text)


@pytest.mark.anyio
async def test_ainvoke(aclient: AsyncSextant, client: Sextant, document_text: Callable[[str], str]) -> None:
    retriever = SextantRetriever(async_client=aclient, endpoint="search", top_k=3, filters={"entity": ["MA"]})
    docs = await retriever.ainvoke("cross-border volume growth")
    assert len(docs) == 3 and all(d.metadata["ticker"] == "MA" for d in docs)
    _assert_cited(docs, document_text)
    # Without an async client, one is made from the sync client's settings for the call.
    docs = await SextantRetriever(client=client, top_k=2).ainvoke("Oracle cloud revenue")
    assert len(docs) == 2
    _assert_cited(docs, document_text)
