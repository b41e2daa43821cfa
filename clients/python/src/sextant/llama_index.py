"""A LlamaIndex retriever over Sextant (``pip install 'sextant-client[llama-index]'``).

>>> from sextant.llama_index import SextantRetriever
>>> retriever = SextantRetriever(endpoint="retrieve", top_k=5, filters={"tickers": ["MA"]})
>>> nodes = retriever.retrieve("Where is Mastercard headquartered?")
>>> nodes[0].node.ref_doc_id, nodes[0].node.start_char_idx, nodes[0].node.end_char_idx, nodes[0].score

Each :class:`~llama_index.core.schema.NodeWithScore` holds a
:class:`~llama_index.core.schema.TextNode` whose text is the cited text: the document's
characters ``start_char_idx:end_char_idx`` (also ``metadata["char_start"]``,
``metadata["char_end"]``), whose source relationship is the document, and whose metadata
is the LangChain retriever's (see :mod:`sextant.langchain`). Ranks, scores and offsets are
kept out of the text shown to a language model or an embedder.
"""

from __future__ import annotations

from typing import Any

from llama_index.core.callbacks import CallbackManager
from llama_index.core.retrievers import BaseRetriever
from llama_index.core.schema import NodeRelationship, NodeWithScore, QueryBundle, RelatedNodeInfo, TextNode

from . import _hits
from ._client import AsyncSextant, Sextant

__all__ = ["SextantRetriever"]


class SextantRetriever(BaseRetriever):
    """Nodes with citations from ``/v1/retrieve`` (chunks) or ``/v1/search`` (sentence
    units). ``filters`` and the clients are as in :class:`sextant.langchain.SextantRetriever`."""

    def __init__(
        self,
        *,
        client: Sextant | None = None,
        async_client: AsyncSextant | None = None,
        endpoint: _hits.Endpoint = "retrieve",
        top_k: int = 5,
        filters: dict[str, Any] | None = None,
        rerank: bool | None = None,
        callback_manager: CallbackManager | None = None,
        verbose: bool = False,
    ) -> None:
        self.client = client or Sextant()
        self.async_client = async_client
        self.endpoint = endpoint
        self.top_k = top_k
        self.filters = filters
        self.rerank = rerank
        super().__init__(callback_manager=callback_manager, verbose=verbose)

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        hits = _hits.fetch(self.client, self.endpoint, query_bundle.query_str, self.top_k, self.filters, self.rerank)
        return [_node(h) for h in hits]

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        query = query_bundle.query_str
        if self.async_client is not None:
            hits = await _hits.afetch(self.async_client, self.endpoint, query, self.top_k, self.filters, self.rerank)
        else:
            async with _hits.async_twin(self.client) as client:
                hits = await _hits.afetch(client, self.endpoint, query, self.top_k, self.filters, self.rerank)
        return [_node(h) for h in hits]


def _node(hit: _hits.Hit) -> NodeWithScore:
    hidden = [k for k in hit.metadata if k in _hits.DIAGNOSTIC_KEYS]
    node = TextNode(
        id_=hit.id,
        text=hit.text,
        metadata=hit.metadata,
        start_char_idx=hit.char_start,
        end_char_idx=hit.char_end,
        relationships={NodeRelationship.SOURCE: RelatedNodeInfo(node_id=hit.document_id)},
        excluded_llm_metadata_keys=hidden,
        excluded_embed_metadata_keys=hidden,
    )
    return NodeWithScore(node=node, score=hit.score)
