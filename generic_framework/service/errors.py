"""OpenAI-style error bodies, and the one mapping from the error tree to HTTP statuses.

Every error the service answers has the shape OpenAI clients parse::

    {"error": {"message": "...", "type": "...", "param": null, "code": "..."}}

Upstream failures (the language model service, i.e. Z.AI or the mock) map to gateway statuses:

========================================  ======  ===============================
error                                     status  ``code``
========================================  ======  ===============================
UpstreamBusyError (no slot in time)       503     ``upstream_busy``
RateLimitError (1302... after retries)    503     ``upstream_rate_limited``
QuotaExceededError                        503     ``upstream_quota_exceeded``
APITimeoutError                           504     ``upstream_timeout``
APIConnectionError                        502     ``upstream_unreachable``
AuthenticationError                       502     ``upstream_auth_failed``
InsufficientBalanceError                  502     ``upstream_account_unusable``
ContentFilterError                        502     ``content_filter``
anything else from upstream               502     ``upstream_error``
StoreUnavailableError (the database)      503     ``store_unavailable``
ConfigError                               500     ``configuration_error``
any other exception                       500     ``internal_error``
========================================  ======  ===============================

Messages come from :class:`~generic_framework.wire.errors.GLMError`, which are already
redacted, and go through :func:`~generic_framework.wire.errors.redact` once more; an unexpected
exception's text is logged, never sent.

Endpoints raise; :data:`EXCEPTION_HANDLERS` (installed by
:func:`~generic_framework.service.create_app`) is the one place that answers. A
:class:`ServiceError`, a :class:`~generic_framework.wire.errors.GLMError` or Starlette's
``HTTPException`` is answered and handled. Any other exception is a bug: Starlette answers it
with ``internal_error`` through the ``Exception`` handler, then raises it on to the server, which
logs it with its traceback.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from typing import Any

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.types import ExceptionHandler

from generic_framework.wire.errors import (
    APIConnectionError,
    APIError,
    APITimeoutError,
    AuthenticationError,
    ConfigError,
    ContentFilterError,
    GLMError,
    InsufficientBalanceError,
    QuotaExceededError,
    RateLimitError,
    StoreUnavailableError,
    UpstreamBusyError,
    redact,
)

__all__ = [
    "EXCEPTION_HANDLERS",
    "ServiceError",
    "error_body",
    "error_response",
    "exception_response",
    "internal_error",
    "map_exception",
]

logger = logging.getLogger("generic_framework.service")


class ServiceError(Exception):
    """A request the service refuses, with the status and OpenAI-style error it answers.

    Args:
        status: the HTTP status.
        message: what went wrong, for the caller (no secrets).
        type_: OpenAI's error ``type`` (``invalid_request_error``, ``authentication_error``...).
        code: a short machine-readable code.
        param: the request field at fault, if any.
        headers: extra response headers (``WWW-Authenticate``, ``Retry-After``).
    """

    def __init__(
        self,
        status: int,
        message: str,
        *,
        type_: str = "invalid_request_error",
        code: str | None = None,
        param: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type_
        self.code = code
        self.param = param
        self.headers = headers or {}

    def body(self) -> dict[str, Any]:
        """The JSON body of this error."""
        return error_body(self.message, type_=self.type, code=self.code, param=self.param)


def error_body(
    message: str, *, type_: str, code: str | None = None, param: str | None = None
) -> dict[str, Any]:
    """Build ``{"error": {"message", "type", "param", "code"}}`` with a redacted message."""
    return {"error": {"message": redact(message), "type": type_, "param": param, "code": code}}


def error_response(
    status: int,
    message: str,
    *,
    type_: str = "invalid_request_error",
    code: str | None = None,
    param: str | None = None,
    headers: dict[str, str] | None = None,
) -> JSONResponse:
    """A JSON error response in OpenAI's shape."""
    body = error_body(message, type_=type_, code=code, param=param)
    return JSONResponse(body, status_code=status, headers=headers)


_UPSTREAM: tuple[tuple[type[GLMError], int, str, str], ...] = (
    (UpstreamBusyError, 503, "upstream_busy", "too many calls to the language model at once"),
    (RateLimitError, 503, "upstream_rate_limited", "the language model service is busy"),
    (QuotaExceededError, 503, "upstream_quota_exceeded", "the API plan's quota is used up"),
    (APITimeoutError, 504, "upstream_timeout", "the language model service timed out"),
    (APIConnectionError, 502, "upstream_unreachable", "the language model service is unreachable"),
    (AuthenticationError, 502, "upstream_auth_failed", "the service's API key was refused"),
    (InsufficientBalanceError, 502, "upstream_account_unusable", "the API account is unusable"),
    (ContentFilterError, 502, "content_filter", "content moderation blocked the answer"),
    (APIError, 502, "upstream_error", "the language model service failed"),
    (StoreUnavailableError, 503, "store_unavailable", "the conversation database is unavailable"),
)


def map_exception(exc: BaseException) -> ServiceError:
    """Translate any exception raised while answering into the :class:`ServiceError` to send."""
    if isinstance(exc, ServiceError):
        return exc
    for cls, status, code, summary in _UPSTREAM:
        if isinstance(exc, cls):
            headers = {}
            retry_after = exc.retry_after
            if status == 503 and retry_after is not None and retry_after > 0:
                headers["Retry-After"] = str(math.ceil(retry_after))
            kind = "upstream_error" if isinstance(exc, APIError) else "server_error"
            return ServiceError(status, f"{summary}: {exc}", type_=kind, code=code, headers=headers)
    if isinstance(exc, ConfigError):
        logger.error("configuration error while answering: %s", exc)
        return ServiceError(500, str(exc), type_="server_error", code="configuration_error")
    logger.exception("unexpected error while answering", exc_info=exc)
    return internal_error()


def internal_error() -> ServiceError:
    """The 500 sent for an unexpected exception: its text stays in the log."""
    return ServiceError(
        500, "internal error (see the service log)", type_="server_error", code="internal_error"
    )


def exception_response(exc: BaseException) -> JSONResponse:
    """The JSON response for ``exc`` (see :func:`map_exception`)."""
    error = map_exception(exc)
    return JSONResponse(error.body(), status_code=error.status, headers=error.headers or None)


async def _answer(request: Request, exc: Exception) -> Response:
    """A :class:`ServiceError` or a :class:`GLMError`, mapped by :func:`map_exception`."""
    return exception_response(exc)


async def _answer_http(request: Request, exc: Exception) -> Response:
    """Starlette's own errors (an unknown route, a wrong method) in OpenAI's shape."""
    assert isinstance(exc, HTTPException)
    code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
    headers = dict(exc.headers) if exc.headers else None
    return error_response(exc.status_code, str(exc.detail), code=code, headers=headers)


async def _answer_unexpected(request: Request, exc: Exception) -> Response:
    """Any other exception: ``internal_error``; Starlette then raises it on to be logged."""
    error = internal_error()
    return JSONResponse(error.body(), status_code=error.status)


EXCEPTION_HANDLERS: Mapping[Any, ExceptionHandler] = {
    ServiceError: _answer,
    GLMError: _answer,
    HTTPException: _answer_http,
    Exception: _answer_unexpected,
}
"""The app's exception handlers: every error response of an endpoint comes from here."""
