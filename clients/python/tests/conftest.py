"""The suite runs against a live ``sextant serve``: ``SEXTANT_BASE_URL`` and
``SEXTANT_API_KEY`` (a key with admin scope on ``SEXTANT_TEST_INDEX``, default ``demo``:
the documents tests write and compact). ``tests/python_client.rs`` starts one on the demo
corpus (MA, XOM, ORCL) and runs this suite.
"""

from __future__ import annotations

import filecmp
import os
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest

import sextant
from sextant import AsyncSextant, Sextant

from support import Recorder


def pytest_configure(config: pytest.Config) -> None:
    missing = [v for v in ("SEXTANT_BASE_URL", "SEXTANT_API_KEY") if not os.environ.get(v)]
    if missing:
        raise pytest.UsageError(f"these tests need a live server: set {' and '.join(missing)}")
    # The venv (scripts/ci/client_venv.sh) installs the package; make sure it is this tree's.
    src = os.environ.get("SEXTANT_CLIENT_SRC")
    if src:
        installed = Path(sextant.__file__).parent
        ours = Path(src) / "sextant"
        names = sorted(p.name for p in ours.iterdir() if p.is_file() and p.suffix in (".py", ".typed"))
        _, mismatch, errors = filecmp.cmpfiles(ours, installed, names, shallow=False)
        if mismatch or errors:
            raise pytest.UsageError(
                f"{installed} is another build of sextant-client than {ours} ({mismatch + errors} differ): "
                "run scripts/ci/client_venv.sh"
            )


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="session")
def index() -> str:
    return os.environ.get("SEXTANT_TEST_INDEX", "demo")


@pytest.fixture(scope="session")
def client() -> Iterator[Sextant]:
    with Sextant() as c:
        yield c


@pytest.fixture
async def aclient() -> AsyncIterator[AsyncSextant]:
    async with AsyncSextant() as c:
        yield c


@pytest.fixture(scope="session")
def document_text(client: Sextant, index: str) -> Callable[[str], str]:
    """A document's text (what every ``char_start``/``char_end`` indexes), fetched once."""
    cache: dict[str, str] = {}

    def text(document_id: str) -> str:
        if document_id not in cache:
            cache[document_id] = client.get_document(index, document_id).text
        return cache[document_id]

    return text


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()
