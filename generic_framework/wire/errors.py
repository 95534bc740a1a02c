"""The upstream's errors: :class:`APIError` and below (see :mod:`generic_framework.errors` for
the whole tree), and :func:`error_for`, the single mapping from (HTTP status, Z.AI business
code) to a class. Messages built from upstream bodies are redacted by the base class.
"""

from __future__ import annotations

from typing import Any

from generic_framework.errors import GLMError
from generic_framework.redaction import redact

__all__ = [
    "APIConnectionError",
    "APIError",
    "APIStatusError",
    "APITimeoutError",
    "AuthenticationError",
    "BadRequestError",
    "ContentFilterError",
    "ContextTooLongError",
    "InsufficientBalanceError",
    "NotFoundError",
    "QuotaExceededError",
    "RateLimitError",
    "ResponseValidationError",
    "ServerError",
    "UpstreamBusyError",
    "error_for",
]


class APIError(GLMError):
    """Something went wrong talking to Z.AI."""


class APIStatusError(APIError):
    """Z.AI answered with an error status or an error business code."""


class AuthenticationError(APIStatusError):
    """The API key is missing, invalid or expired (401/403, codes 1000-1004)."""


class InsufficientBalanceError(APIStatusError):
    """The account has no balance or is unusable (1113, 1110-1121). Retrying does not help."""


class QuotaExceededError(APIStatusError):
    """A daily, 5-hour, weekly or plan limit was reached (1304, 1308-1311, 1313)."""


class RateLimitError(APIStatusError):
    """Too many concurrent or frequent requests, or an overloaded model (1302/1303/1305/1312)."""

    retryable_default = True


class UpstreamBusyError(RateLimitError):
    """Every upstream slot (``LLM_MAX_CONCURRENCY``, across replicas with PostgreSQL) stayed
    taken, or a 1302 pause lasted, past ``LLM_QUEUE_TIMEOUT`` seconds.

    Raised before anything was sent, so nothing reached Z.AI. Not retried: the wait for a slot
    already was the retry. ``retry_after`` says when asking again makes sense.
    """

    retryable_default = False


class BadRequestError(APIStatusError):
    """The request was rejected as malformed (400, 1210-1215, 1261)."""


class ContextTooLongError(BadRequestError):
    """The prompt is longer than the model's context window (1261). Not retried as it is:
    the turn drops the oldest history turns and sends the call once more, then raises this."""


class ContentFilterError(APIStatusError):
    """Content moderation blocked the input or the output (1301, finish_reason ``sensitive``)."""


class NotFoundError(APIStatusError):
    """The model, API or resource does not exist (404, 1211, 1221, 1222)."""


class ServerError(APIStatusError):
    """Z.AI failed on its side (5xx, code 500, finish_reason ``network_error``)."""

    retryable_default = True


class APIConnectionError(APIError):
    """Z.AI could not be reached, or the connection broke before the answer was complete."""

    retryable_default = True


class APITimeoutError(APIConnectionError):
    """A connect, read or pool timeout expired (see LLM_TIMEOUT and friends)."""


class ResponseValidationError(APIError):
    """The response body was not the JSON we expected.

    ``body`` holds a truncated, redacted copy of what arrived, for debugging.
    """

    def __init__(self, message: str, *, body: str = "", **kwargs: Any) -> None:
        self.body = redact(body, limit=2000)
        super().__init__(message, **kwargs)


_RETRYABLE_CODES = frozenset({"1302", "1303", "1305", "1312", "500", "1234"})
_AUTH_CODES = frozenset({"1000", "1001", "1002", "1003", "1004"})
_QUOTA_CODES = frozenset({"1304", "1308", "1309", "1310", "1311", "1313"})
_NOT_FOUND_CODES = frozenset({"1211", "1221", "1222"})


def _class_for_code(code: str) -> type[APIStatusError] | None:
    if code in _AUTH_CODES:
        return AuthenticationError
    if code in _QUOTA_CODES:
        return QuotaExceededError
    if code in _NOT_FOUND_CODES:
        return NotFoundError
    if code in {"1302", "1303", "1305", "1312"}:
        return RateLimitError
    if code == "1301":
        return ContentFilterError
    if code == "1261":
        return ContextTooLongError
    if code in {"500", "1234", "1230"}:
        return ServerError
    if code.isdigit() and 1100 <= int(code) <= 1121:
        return InsufficientBalanceError
    if code.isdigit() and 1200 <= int(code) <= 1299:
        return BadRequestError
    return None


def _class_for_status(status: int) -> type[APIStatusError]:
    if status in (401, 403):
        return AuthenticationError
    if status == 404:
        return NotFoundError
    if status == 429:
        return RateLimitError
    if status >= 500:
        return ServerError
    return BadRequestError


def error_for(
    status: int | None,
    code: str | None,
    message: str,
    *,
    request_id: str | None = None,
    retry_after: float | None = None,
) -> APIStatusError:
    """Map an upstream failure to its error class: the business code decides, then the status.

    Z.AI sends 1113 (no balance) and 1302 (concurrency) both as HTTP 429, so the status alone
    cannot tell whether a retry helps (docs/protocol.md §7). Retryable: 1302, 1303, 1305, 1312, 500,
    1234, and, when the code is absent or unknown, HTTP 408/409 and 5xx; a 429 with no business
    code at all is treated as a retryable rate limit.
    """
    cls = _class_for_code(code) if code else None
    if cls is not None:
        retryable = code in _RETRYABLE_CODES
    else:
        # No code, or one this table does not know: the status decides. A 429 is retried only
        # when it names no code at all (a proxy's limit); an unknown code at 429 may be a quota.
        cls = _class_for_status(status or 400)
        retryable = status is not None and (
            status in (408, 409) or status >= 500 or (status == 429 and not code)
        )
    return cls(
        message,
        status_code=status,
        code=code,
        request_id=request_id,
        retryable=retryable,
        retry_after=retry_after,
    )
