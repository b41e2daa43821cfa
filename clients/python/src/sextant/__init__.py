"""A Python client of Sextant, the hybrid retrieval API.

>>> from sextant import Sextant
>>> client = Sextant()  # $SEXTANT_BASE_URL, $SEXTANT_API_KEY
>>> client.retrieve("Where is Mastercard headquartered?", filters={"tickers": ["MA"]})

Retrievers for LangChain and LlamaIndex are in :mod:`sextant.langchain` and
:mod:`sextant.llama_index` (extras ``[langchain]`` and ``[llama-index]``).
"""

from . import types
from ._client import DEFAULT_BASE_URL, DEFAULT_MAX_RETRIES, DEFAULT_TIMEOUT, AsyncSextant, Sextant
from ._errors import (
    APIConnectionError,
    APIError,
    APIResponseValidationError,
    APITimeoutError,
    AuthenticationError,
    BadRequestError,
    ConflictError,
    InternalServerError,
    NotFoundError,
    PermissionDeniedError,
    RateLimitError,
    RequestTooLargeError,
    ServiceUnavailableError,
    SextantError,
    UnsupportedMediaTypeError,
)
from ._version import __version__

__all__ = [
    "Sextant",
    "AsyncSextant",
    "types",
    "DEFAULT_BASE_URL",
    "DEFAULT_MAX_RETRIES",
    "DEFAULT_TIMEOUT",
    "SextantError",
    "APIConnectionError",
    "APITimeoutError",
    "APIResponseValidationError",
    "APIError",
    "BadRequestError",
    "AuthenticationError",
    "PermissionDeniedError",
    "NotFoundError",
    "ConflictError",
    "RequestTooLargeError",
    "UnsupportedMediaTypeError",
    "RateLimitError",
    "InternalServerError",
    "ServiceUnavailableError",
    "__version__",
]
