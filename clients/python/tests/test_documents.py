"""The document routes: put, get, search, list (paged), replace, delete, compact."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from sextant import BadRequestError, NotFoundError, Sextant

NOTE = """# Travel policy

Employees book economy class for flights under six hours.

Cross-border card spend on travel is reimbursed within 14 days of the receipt."""


@pytest.fixture
def document_id(client: Sextant, index: str) -> Iterator[str]:
    """A fresh id; the document is deleted afterwards if the test left it."""
    document_id = f"client-test-{uuid.uuid4().hex[:12]}"
    yield document_id
    try:
        client.delete_document(index, document_id)
    except NotFoundError:
        pass


def test_put_search_get_replace_delete(client: Sextant, index: str, document_id: str) -> None:
    w = client.put_document(
        index,
        document_id,
        text=NOTE,
        content_type="text/markdown",
        title="Travel policy",
        metadata={"department": "people-ops", "pages": 3, "reviewed": "2024-05-01"},
        published_at="2024-05-02",
    )
    assert (w.document_id, w.index, w.status, w.created) == (document_id, index, "live", True)
    assert w.chunks and w.chunks >= 1 and w.segments == 3

    doc = client.get_document(index, document_id)
    assert doc.title == "Travel policy" and doc.status == "live" and doc.published_at == "2024-05-02"
    assert doc.metadata == {"department": "people-ops", "pages": 3, "reviewed": "2024-05-01"}
    assert [s.text for s in doc.segments] == [
        "Travel policy",
        "Employees book economy class for flights under six hours.",
        "Cross-border card spend on travel is reimbursed within 14 days of the receipt.",
    ]
    assert doc.text == "\n\n".join(s.text for s in doc.segments)
    for s in doc.segments:
        assert doc.text[s.char_start : s.char_end] == s.text

    # Searchable at once, filtered by its own metadata, cited by offset.
    r = client.search("when is travel spend reimbursed", metadata={"department": "people-ops", "pages": {"gte": 2}})
    assert r.results and all(u.document.document_id == document_id for u in r.results)
    top = r.results[0]
    assert doc.text[top.position.char_start : top.position.char_end] == top.text
    assert "14 days" in top.text and top.document.metadata == doc.metadata
    chunks = client.retrieve("economy class flights", filters={"metadata": {"department": "people-ops"}}).chunks
    assert chunks and chunks[0].source.document_id == document_id
    assert doc.text[chunks[0].source.char_start : chunks[0].source.char_end] == chunks[0].text

    again = client.put_document(index, document_id, segments=["Only one segment now."], title="Travel policy v2")
    assert again.created is False and again.segments == 1
    assert client.get_document(index, document_id).text == "Only one segment now."

    gone = client.delete_document(index, document_id)
    assert gone.deleted is True and gone.document_id == document_id
    with pytest.raises(NotFoundError) as e:
        client.get_document(index, document_id)
    assert e.value.status == 404 and e.value.code == "not_found" and document_id in e.value.message
    with pytest.raises(NotFoundError):
        client.delete_document(index, document_id)


REPORT_PDF = Path(__file__).resolve().parents[3] / "tests" / "data" / "pdf" / "report.pdf"


def test_put_file_reads_a_pdf_and_cites_its_pages(client: Sextant, index: str, document_id: str) -> None:
    w = client.put_file(index, document_id, REPORT_PDF, metadata={"department": "turbine-ops"})
    assert (w.status, w.created) == ("live", True) and w.chunks and w.chunks >= 2
    doc = client.get_document(index, document_id)
    assert doc.title == "Quarterly operating review"
    pages = [s.page or 0 for s in doc.segments]
    assert pages[0] == 1 and pages[-1] == 3 and pages == sorted(pages)
    r = client.search("rare earth magnet suppliers", metadata={"department": "turbine-ops"})
    assert r.results and all(u.position.page is not None for u in r.results)
    top = r.results[0].position.page
    assert top is not None and top.first <= 3 <= top.last
    chunks = client.retrieve("rare earth magnet suppliers", filters={"metadata": {"department": ["turbine-ops"]}})
    assert 3 in (chunks.chunks[0].source.page_numbers or [])
    # Bytes need their type; an encrypted PDF is refused with the reason.
    with pytest.raises(ValueError, match="content_type"):
        client.put_file(index, document_id, REPORT_PDF.read_bytes())
    with pytest.raises(BadRequestError, match="encrypted"):
        client.put_file(
            index, document_id, (REPORT_PDF.parent / "encrypted.pdf").read_bytes(), content_type="application/pdf"
        )


def test_list_documents_pages_through_every_document(client: Sextant, index: str, document_id: str) -> None:
    client.put_document(index, document_id, text="A short note about listing.", title="Listing")
    first = client.list_documents(index, limit=5)
    assert first.index == index and len(first.documents) == 5 and first.next_cursor
    second = client.list_documents(index, limit=5, cursor=first.next_cursor)
    assert second.documents[0].document_id > first.documents[-1].document_id
    ids = [d.document_id for d in client.iter_documents(index, page_size=7)]
    assert ids == sorted(set(ids)), "in id order, each once"
    assert ids[:10] == [d.document_id for d in first.documents + second.documents]
    assert document_id in ids
    assert len(ids) == len([d.document_id for d in client.iter_documents(index, page_size=1000)])


def test_an_id_with_a_slash_stays_one_path_segment(client: Sextant, index: str, document_id: str) -> None:
    """The client encodes ids: one with folders (as a folder build names its files) is one
    path segment, written, read and deleted by it; one with an empty folder is refused, and
    the server says so."""
    from sextant import BadRequestError

    folder_id = f"handbook/{document_id}.md"
    client.put_document(index, folder_id, text="Folders in an id stay one path segment.")
    assert client.get_document(index, folder_id).document_id == folder_id
    client.delete_document(index, folder_id)
    with pytest.raises(BadRequestError) as e:
        client.put_document(index, "a//b", text="x")
    assert "a//b" in e.value.message


def test_put_documents_writes_a_batch_and_answers_for_each(client: Sextant, index: str) -> None:
    """A batch: models and mappings (Python or wire names) in one call, each answered in
    order; a refused document is its own result, not an exception, and the rest are
    searchable at once."""
    from sextant.types import DocumentBody

    tag = uuid.uuid4().hex[:8]
    ids = [f"batch-{tag}-{i}" for i in range(3)]
    try:
        r = client.put_documents(
            index,
            [
                DocumentBody(document_id=ids[0], text=NOTE, content_type="text/markdown", metadata={"batch": tag}),
                {"document_id": ids[1], "text": f"Offsite {tag} moves to Lisbon.", "metadata": {"batch": tag}},
                {"documentId": ids[2], "title": "No text"},
                {"documentId": f"batch-{tag}-typo", "text": "x", "titel": "misspelt"},
            ],
        )
        assert (r.index, r.written, r.failed) == (index, 2, 2)
        assert [x.document_id for x in r.results] == [*ids, f"batch-{tag}-typo"]
        assert [x.status for x in r.results[:2]] == ["live", "live"] and r.results[0].created is True
        assert r.results[2].error is not None and r.results[2].error.field == "text"
        assert r.results[3].error is not None and r.results[3].error.field == "titel"
        hits = client.search(f"offsite {tag} Lisbon", metadata={"batch": tag}).results
        assert hits and hits[0].document.document_id == ids[1]
    finally:
        for i in ids[:2]:
            client.delete_document(index, i)


def test_indexes_are_created_listed_searched_and_deleted(client: Sextant, index: str) -> None:
    """An index of the client's own: created with its options, listed, written, searched by
    name with both retrieval calls, and deleted with its documents."""
    from sextant import ConflictError

    name = f"client-{uuid.uuid4().hex[:8]}"
    created = client.create_index(name, chunk_tokens=64)
    try:
        assert (created.index, created.documents, created.writable) == (name, 0, True)
        assert created.settings is not None and created.settings.chunk_tokens == 64
        assert client.create_index(name, chunk_tokens=64).index == name, "the same again: nothing to do"
        with pytest.raises(ConflictError):
            client.create_index(index)
        assert name in [i.index for i in client.list_indexes().indexes]
        client.put_documents(name, [{"document_id": "garage", "text": "Visitors park on level two of the garage."}])
        assert client.get_index(name).documents == 1
        hits = client.search("where do visitors park", index=name).results
        assert [h.document.document_id for h in hits] == ["garage"]
        assert client.retrieve("visitor parking", index=name).chunks[0].source.document_id == "garage"
    finally:
        assert client.delete_index(name).deleted is True
    with pytest.raises(NotFoundError):
        client.get_index(name)


def test_compact_folds_the_writes_into_a_new_version(client: Sextant, index: str, document_id: str) -> None:
    client.put_document(index, document_id, text="Compaction keeps every vector it already has.")
    c = client.compact(index)
    assert c.compacted is True and c.index == index and c.request_id.startswith("req_")
    assert c.report is not None and c.report["chunks_encoded"] == 0
    assert client.get_document(index, document_id).compacted is True


def test_unknown_index(client: Sextant) -> None:
    with pytest.raises(NotFoundError) as e:
        client.list_documents("no-such-index")
    assert e.value.code == "not_found"
