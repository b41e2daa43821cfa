"""One exception hierarchy: everything the client raises is a :class:`SextantError`."""

from __future__ import annotations

import email.utils
import time
from typing import Any

import httpx

__all__ = [
    "SextantError",
    "APIConnectionError",
    "APITimeoutError",
    "APIResponseValidationError",
    "APIError",
    "BadRequestError",
    "AuthenticationError",
    "PermissionDeniedError",
    "NotFoundError",
    "RequestTooLargeError",
    "UnsupportedMediaTypeError",
    "RateLimitError",
    "InternalServerError",
    "ServiceUnavailableError",
]


class SextantError(Exception):
    """Base of every error this package raises."""


class APIConnectionError(SextantError):
    """The request got no answer: the connection failed or broke."""

    def __init__(self, message: str, *, request: httpx.Request) -> None:
        super().__init__(message)
        self.request = request


class APITimeoutError(APIConnectionError):
    """The request timed out."""


class APIResponseValidationError(SextantError):
    """A 2xx answer that is not the shape this client expects."""

    def __init__(self, message: str, *, response: httpx.Response, body: Any) -> None:
        super().__init__(message)
        self.response = response
        self.body = body
        self.status = response.status_code


class APIError(SextantError):
    """An error answer of the server, read from its envelope.

    ``/v1/*`` answers ``{"success": false, "error": {"code", "message", "field",
    "requestId"}}``; the knowledge-base route answers ``{"Code", "Message", "RequestId",
    "Success": false}`` (its ``field`` is ``None``).
    """

    status: int
    code: str | None
    message: str
    field: str | None
    request_id: str | None
    #: Seconds the server asked to wait (``Retry-After``), when it said.
    retry_after: float | None

    def __init__(self, response: httpx.Response, body: Any) -> None:
        self.response = response
        self.body = body
        self.status = response.status_code
        code = message = field = request_id = None
        if isinstance(body, dict):
            err = body.get("error")
            if isinstance(err, dict):
                code, message = err.get("code"), err.get("message")
                field, request_id = err.get("field"), err.get("requestId")
            elif "Code" in body:
                code, message, request_id = body.get("Code"), body.get("Message"), body.get("RequestId")
        elif isinstance(body, str) and body.strip():
            message = body.strip()
        self.code = code
        self.message = message or response.reason_phrase or f"HTTP {self.status}"
        self.field = field
        self.request_id = request_id or response.headers.get("x-request-id")
        self.retry_after = retry_after_seconds(response)
        text = f"{self.status} {self.code or response.reason_phrase}: {self.message}"
        if self.request_id:
            text += f" (request {self.request_id})"
        super().__init__(text)


class BadRequestError(APIError):
    """400: a field is missing, unknown, mistyped or out of range (see ``field``)."""


class AuthenticationError(APIError):
    """401: no, unknown or revoked API key."""


class PermissionDeniedError(APIError):
    """403: the key may not use this index, or lacks the scope (write, admin)."""


class NotFoundError(APIError):
    """404: no such index, document or route."""


class ConflictError(APIError):
    """409: the index exists with other options, or is not one the API created."""


class RequestTooLargeError(APIError):
    """413: the body is over the server's limit."""


class UnsupportedMediaTypeError(APIError):
    """415: a body the server does not read (a PDF, a latin-1 charset, ...)."""


class RateLimitError(APIError):
    """429: the key's plan allows no more requests now; ``retry_after`` says when."""


class InternalServerError(APIError):
    """5xx."""


class ServiceUnavailableError(InternalServerError):
    """503: the server is loading or at capacity; ``retry_after`` says when to come back."""


_BY_STATUS: dict[int, type[APIError]] = {
    400: BadRequestError,
    401: AuthenticationError,
    403: PermissionDeniedError,
    404: NotFoundError,
    409: ConflictError,
    413: RequestTooLargeError,
    415: UnsupportedMediaTypeError,
    429: RateLimitError,
    503: ServiceUnavailableError,
}


def error_for(response: httpx.Response, body: Any) -> APIError:
    """The exception of an error answer."""
    cls = _BY_STATUS.get(response.status_code)
    if cls is None:
        cls = InternalServerError if response.status_code >= 500 else APIError
    return cls(response, body)


def retry_after_seconds(response: httpx.Response) -> float | None:
    """``Retry-After`` in seconds: a number of seconds, or an HTTP date."""
    value = response.headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())
