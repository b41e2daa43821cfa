"""The LlamaIndex retriever, through llama-index-core's own retrieve/aretrieve."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from llama_index.core.retrievers import BaseRetriever
from llama_index.core.schema import MetadataMode, NodeWithScore, TextNode

from sextant import AsyncSextant, BadRequestError, Sextant
from sextant.llama_index import SextantRetriever


def _assert_cited(nodes: list[NodeWithScore], document_text: Callable[[str], str]) -> None:
    assert nodes
    for n in nodes:
        node = n.node
        assert isinstance(node, TextNode) and node.ref_doc_id
        text = document_text(node.ref_doc_id)
        assert text[node.start_char_idx : node.end_char_idx] == node.text
        assert (node.metadata["char_start"], node.metadata["char_end"]) == (node.start_char_idx, node.end_char_idx)
        assert n.score == node.metadata["score"]


def test_retrieve(client: Sextant, document_text: Callable[[str], str]) -> None:
    retriever = SextantRetriever(client=client, top_k=3, filters={"tickers": ["ORCL"]})
    assert isinstance(retriever, BaseRetriever)
    nodes = retriever.retrieve("Oracle cloud services revenue growth")
    assert len(nodes) == 3
    _assert_cited(nodes, document_text)
    node = nodes[0].node
    assert isinstance(node, TextNode) and node.ref_doc_id
    assert node.metadata["ticker"] == "ORCL" and node.node_id.startswith(node.ref_doc_id + "#")
    # What a language model is shown: the text and where it comes from, not the ranks.
    shown = node.get_content(metadata_mode=MetadataMode.LLM)
    assert node.text in shown and f"title: {node.metadata['title']}" in shown
    assert "score" not in shown and "char_start" not in shown and "request_id" not in shown


def test_search(client: Sextant, document_text: Callable[[str], str]) -> None:
    retriever = SextantRetriever(client=client, endpoint="search", top_k=4, filters={"entity": "MA"})
    nodes = retriever.retrieve("cross-border travel")
    assert 1 <= len(nodes) <= 4
    _assert_cited(nodes, document_text)
    for n in nodes:
        assert n.node.node_id == n.node.metadata["unit_id"] and n.node.metadata["rrf_rank"] >= 1
        assert "rrf_rank" not in n.node.get_content(metadata_mode=MetadataMode.EMBED)


def test_the_servers_error_passes_through(client: Sextant) -> None:
    with pytest.raises(BadRequestError) as e:
        SextantRetriever(client=client, endpoint="search", filters={"published_before": "2024-13-01"}).retrieve("x")
    assert e.value.field == "published_before"


@pytest.mark.anyio
async def test_aretrieve(aclient: AsyncSextant, client: Sextant, document_text: Callable[[str], str]) -> None:
    nodes = await SextantRetriever(async_client=aclient, top_k=2, filters={"tickers": ["XOM"]}).aretrieve(
        "upstream production volumes"
    )
    assert len(nodes) == 2 and all(n.node.metadata["ticker"] == "XOM" for n in nodes)
    _assert_cited(nodes, document_text)
    nodes = await SextantRetriever(client=client, endpoint="search", top_k=2).aretrieve("Oracle cloud revenue")
    _assert_cited(nodes, document_text)
