"""Retries: 429 and 503 after the ``Retry-After`` the server sent (bounded by
``max_retries`` and ``max_retry_wait``), broken connections of idempotent requests, and
nothing else. The load shedding is the real server's; the 429s and dropped connections
come from a proxy in front of it (a real 429 needs a plan's minute to run out)."""

from __future__ import annotations

import asyncio
import email.utils
import itertools
import os
import socket
import threading
import time
from collections.abc import Iterator

import httpx
import pytest

from sextant import (
    APIConnectionError,
    AsyncSextant,
    InternalServerError,
    RateLimitError,
    ServiceUnavailableError,
    Sextant,
)

from support import Fault, FaultProxy, Recorder

QUERY = "Where is Mastercard headquartered?"


@pytest.fixture
def proxy() -> Iterator[FaultProxy]:
    with FaultProxy(os.environ["SEXTANT_BASE_URL"]) as p:
        yield p


def _gaps(proxy: FaultProxy) -> list[float]:
    times = [t for t, *_ in proxy.seen]
    return [b - a for a, b in itertools.pairwise(times)]


def test_a_429_is_retried_after_retry_after(proxy: FaultProxy) -> None:
    proxy.faults.append(Fault.status_code(429, Retry_After="1"))
    with Sextant(base_url=proxy.url) as client:
        r = client.retrieve(QUERY, top_k=1)
    assert r.chunks
    assert [s for *_, s in proxy.seen] == [429, 200]
    assert 1.0 <= _gaps(proxy)[0] < 3.0


def test_retry_after_as_an_http_date(proxy: FaultProxy) -> None:
    # A date to the second: 2.5 to 3.5 s from now.
    proxy.faults.append(Fault.status_code(503, Retry_After=email.utils.formatdate(time.time() + 3.5, usegmt=True)))
    with Sextant(base_url=proxy.url) as client:
        assert client.health().status == "ok"
    assert [s for *_, s in proxy.seen] == [503, 200]
    assert 2.0 <= _gaps(proxy)[0] < 5.0


def test_a_wait_longer_than_max_retry_wait_is_raised_at_once(proxy: FaultProxy) -> None:
    proxy.faults.append(Fault.status_code(429, Retry_After="120"))
    t = time.monotonic()
    with Sextant(base_url=proxy.url, max_retry_wait=10) as client:
        with pytest.raises(RateLimitError) as e:
            client.retrieve(QUERY)
    assert time.monotonic() - t < 1.0
    assert (e.value.status, e.value.retry_after, e.value.code) == (429, 120.0, "injected")
    assert len(proxy.seen) == 1


def test_max_retries_bounds_the_attempts(proxy: FaultProxy) -> None:
    proxy.faults.extend(Fault.status_code(503, Retry_After="0") for _ in range(4))
    with Sextant(base_url=proxy.url, max_retries=2) as client:
        with pytest.raises(ServiceUnavailableError) as e:
            client.retrieve(QUERY)
    assert e.value.retry_after == 0.0
    assert [s for *_, s in proxy.seen] == [503, 503, 503]
    with Sextant(base_url=proxy.url, max_retries=0) as client:
        with pytest.raises(ServiceUnavailableError):
            client.retrieve(QUERY)
    assert len(proxy.seen) == 4


def test_without_retry_after_the_wait_backs_off(proxy: FaultProxy) -> None:
    proxy.faults.extend([Fault.status_code(503), Fault.status_code(503)])
    with Sextant(base_url=proxy.url) as client:
        assert client.retrieve(QUERY, top_k=1).chunks
    first, second = _gaps(proxy)
    assert 0.375 <= first < 1.0 and 0.75 <= second < 2.0, "0.5 s, then 1 s, each ±25 %"


def test_other_errors_are_not_retried(proxy: FaultProxy) -> None:
    proxy.faults.extend([Fault.status_code(500), Fault.status_code(502)])
    with Sextant(base_url=proxy.url) as client:
        with pytest.raises(InternalServerError) as e:
            client.retrieve(QUERY)
        assert e.value.status == 500 and not isinstance(e.value, ServiceUnavailableError)
        with pytest.raises(InternalServerError):
            client.retrieve(QUERY)
    assert [s for *_, s in proxy.seen] == [500, 502]


def test_a_dropped_connection_is_retried_when_the_request_is_idempotent(proxy: FaultProxy, index: str) -> None:
    proxy.faults.append(Fault.dropped())
    with Sextant(base_url=proxy.url) as client:
        assert client.retrieve(QUERY, top_k=1).chunks
        assert [s for *_, s in proxy.seen] == [0, 200]
        # Compaction is not idempotent: a request that may have arrived is not sent again.
        proxy.faults.append(Fault.dropped())
        with pytest.raises(APIConnectionError):
            client.compact(index)
    assert [s for *_, s in proxy.seen] == [0, 200, 0]


def test_a_refused_connection_is_retried_then_raised(recorder: Recorder) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with Sextant(base_url=f"http://127.0.0.1:{port}", max_retries=2, http_client=recorder.http_client()) as client:
        with pytest.raises(APIConnectionError):
            client.compact("demo")  # never sent: safe to retry even though not idempotent
    assert len(recorder.sent) == 3


@pytest.mark.anyio
async def test_the_async_client_retries_after_retry_after(proxy: FaultProxy) -> None:
    proxy.faults.append(Fault.status_code(429, Retry_After="1"))
    async with AsyncSextant(base_url=proxy.url) as client:
        r = await client.search("cross-border volume growth", limit=2)
    assert r.results and [s for *_, s in proxy.seen] == [429, 200]
    assert _gaps(proxy)[0] >= 1.0


# The real server's load shedding: `sextant serve --max-in-flight N` answers a request
# beyond N in flight with a 503 and `Retry-After: 1`. The suite is told N.


@pytest.fixture
def max_in_flight() -> int:
    n = os.environ.get("SEXTANT_MAX_IN_FLIGHT")
    if not n:
        pytest.skip("SEXTANT_MAX_IN_FLIGHT (the server's --max-in-flight) not given")
    return int(n)


SLOW_QUESTION = "What did Exxon and Oracle say about margins in 2015, 2016 and 2017?"


def test_the_server_sheds_load_with_a_503_and_retry_after(max_in_flight: int) -> None:
    n = max_in_flight + 4

    def ask(barrier: threading.Barrier, outcomes: list[object]) -> None:
        with Sextant(max_retries=0) as client:
            barrier.wait()
            try:
                outcomes.append(client.context(SLOW_QUESTION))
            except ServiceUnavailableError as e:
                outcomes.append(e)

    for _ in range(5):
        barrier = threading.Barrier(n)
        outcomes: list[object] = []
        threads = [threading.Thread(target=ask, args=(barrier, outcomes)) for _ in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        shed = [o for o in outcomes if isinstance(o, ServiceUnavailableError)]
        if shed and len(shed) < n:
            break
    else:
        pytest.fail(f"{n} requests at once to a server taking {max_in_flight}: none shed in 5 tries")
    for e in shed:
        assert (e.status, e.code, e.retry_after) == (503, "unavailable", 1.0)
        assert "at capacity" in e.message


@pytest.mark.anyio
async def test_shed_requests_are_retried_after_retry_after(max_in_flight: int) -> None:
    n = max_in_flight + 3
    sends: dict[int, list[tuple[float, int]]] = {}

    async def on_response(response: httpx.Response) -> None:
        sends.setdefault(id(response.request), []).append((time.monotonic(), response.status_code))

    http_client = httpx.AsyncClient(event_hooks={"response": [on_response]})
    async with AsyncSextant(max_retries=n, http_client=http_client) as client:
        for _ in range(5):
            sends.clear()
            answers = await asyncio.gather(*(client.context(SLOW_QUESTION) for _ in range(n)))
            assert all(a.route == answers[0].route for a in answers)
            if any(s == 503 for seq in sends.values() for _, s in seq):
                break
        else:
            pytest.fail(f"{n} requests at once to a server taking {max_in_flight}: none shed in 5 tries")
    await http_client.aclose()
    for seq in sends.values():
        assert seq[-1][1] == 200 and all(s == 503 for _, s in seq[:-1])
        for (t0, _), (t1, _) in itertools.pairwise(seq):
            assert t1 - t0 >= 1.0, "not before the second the server asked for"
