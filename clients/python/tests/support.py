"""Test helpers: a recorder of the requests a client sends, and a reverse proxy in front of
the live server that answers the first requests with the faults it is given (a status with
headers, or a dropped connection) and forwards the rest unchanged: a deterministic 429 or a
broken connection, with the real server behind."""

from __future__ import annotations

import http.client
import json
import threading
import time
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

import httpx


class Fault:
    """An answer the proxy gives instead of forwarding."""

    def __init__(self, status: int = 0, headers: dict[str, str] | None = None, drop: bool = False) -> None:
        self.status, self.headers, self.drop = status, headers or {}, drop

    @classmethod
    def status_code(cls, status: int, **headers: str) -> Fault:
        return cls(status, {k.replace("_", "-"): v for k, v in headers.items()})

    @classmethod
    def dropped(cls) -> Fault:
        return cls(drop=True)


class FaultProxy:
    def __init__(self, upstream: str) -> None:
        self.upstream = urlsplit(upstream)
        self.faults: deque[Fault] = deque()
        #: (time received, method, path, status answered; 0 when dropped)
        self.seen: list[tuple[float, str, str, int]] = []
        self._lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def _handle(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with proxy._lock:
                    fault = proxy.faults.popleft() if proxy.faults else None
                now = time.monotonic()
                if fault is not None and fault.drop:
                    proxy.seen.append((now, self.command, self.path, 0))
                    self.close_connection = True
                    return
                if fault is not None:
                    payload = json.dumps(
                        {
                            "success": False,
                            "error": {
                                "code": "injected",
                                "message": f"injected {fault.status}",
                                "requestId": "req_fault",
                            },
                        }
                    ).encode()
                    status, headers = fault.status, {**fault.headers, "Content-Type": "application/json"}
                else:
                    status, headers, payload = proxy._forward(self.command, self.path, dict(self.headers), body)
                proxy.seen.append((now, self.command, self.path, status))
                self.send_response(status)
                for k, v in headers.items():
                    if k.lower() not in ("content-length", "transfer-encoding", "connection", "date", "server"):
                        self.send_header(k, v)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            do_GET = do_POST = do_PUT = do_DELETE = _handle

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_port}"

    def _forward(
        self, method: str, path: str, headers: dict[str, str], body: bytes
    ) -> tuple[int, dict[str, str], bytes]:
        conn = http.client.HTTPConnection(self.upstream.hostname or "127.0.0.1", self.upstream.port, timeout=60)
        try:
            headers = {k: v for k, v in headers.items() if k.lower() not in ("host", "connection")}
            conn.request(method, path, body=body, headers=headers)
            r = conn.getresponse()
            return r.status, dict(r.getheaders()), r.read()
        finally:
            conn.close()

    def __enter__(self) -> FaultProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()


class Recorder:
    """The requests a client sent and the statuses it got, from httpx's event hooks."""

    def __init__(self) -> None:
        self.sent: list[httpx.Request] = []
        self.statuses: list[int] = []

    def on_request(self, request: httpx.Request) -> None:
        self.sent.append(request)

    def on_response(self, response: httpx.Response) -> None:
        self.statuses.append(response.status_code)

    async def aon_request(self, request: httpx.Request) -> None:
        self.on_request(request)

    async def aon_response(self, response: httpx.Response) -> None:
        self.on_response(response)

    def http_client(self) -> httpx.Client:
        return httpx.Client(event_hooks={"request": [self.on_request], "response": [self.on_response]})

    def async_http_client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(event_hooks={"request": [self.aon_request], "response": [self.aon_response]})
