"""A LangChain retriever over Sextant (``pip install 'sextant-client[langchain]'``).

>>> from sextant.langchain import SextantRetriever
>>> retriever = SextantRetriever(endpoint="search", top_k=5, filters={"entity": "MA"})
>>> docs = retriever.invoke("cross-border volume growth")
>>> docs[0].metadata["document_id"], docs[0].metadata["char_start"], docs[0].metadata["char_end"]

Each :class:`~langchain_core.documents.Document`'s ``page_content`` is the cited text: the
document's characters ``metadata["char_start"]:metadata["char_end"]``. Its ``metadata`` says
where it comes from (``document_id``, ``title``, ``document_type``, ``ticker``, ``year``,
``quarter``, ``source_url``, the chunk or unit id, the document's own ``metadata``) and how
it ranked (``score``; for ``search`` its rank in each path: ``dense_rank``, ``sparse_rank``,
``bm25_rank``, ``rrf_rank``, ``rerank_rank``).
"""

from __future__ import annotations

from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun, CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from pydantic import ConfigDict, PrivateAttr

from . import _hits
from ._client import AsyncSextant, Sextant

__all__ = ["SextantRetriever"]


class SextantRetriever(BaseRetriever):
    """Documents with citations from ``/v1/retrieve`` (chunks) or ``/v1/search`` (sentence
    units).

    ``filters``: for ``retrieve``, the request's ``filters`` (``tickers``, ``year``,
    ``quarter``, ``source_types``, ``metadata``); for ``search``, its filter fields
    (``entity``, ``theme``, ``published_after``, ``published_before``, ``metadata``,
    ``max_per_document``, ``min_similarity``, ``recency_boost``).

    ``client`` defaults to ``Sextant()`` (``$SEXTANT_BASE_URL``, ``$SEXTANT_API_KEY``).
    Without an ``async_client``, each async call opens an :class:`AsyncSextant` configured
    as ``client`` and closes it; pass one to keep its connections.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    client: Sextant | None = None
    async_client: AsyncSextant | None = None
    endpoint: _hits.Endpoint = "retrieve"
    top_k: int = 5
    filters: dict[str, Any] | None = None
    rerank: bool | None = None

    _default_client: Sextant | None = PrivateAttr(default=None)

    def _sync_client(self) -> Sextant:
        if self.client is not None:
            return self.client
        if self._default_client is None:
            self._default_client = Sextant()
        return self._default_client

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        hits = _hits.fetch(self._sync_client(), self.endpoint, query, self.top_k, self.filters, self.rerank)
        return [_document(h) for h in hits]

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun
    ) -> list[Document]:
        if self.async_client is not None:
            hits = await _hits.afetch(self.async_client, self.endpoint, query, self.top_k, self.filters, self.rerank)
        else:
            async with _hits.async_twin(self._sync_client()) as client:
                hits = await _hits.afetch(client, self.endpoint, query, self.top_k, self.filters, self.rerank)
        return [_document(h) for h in hits]


def _document(hit: _hits.Hit) -> Document:
    return Document(id=hit.id, page_content=hit.text, metadata=hit.metadata)
