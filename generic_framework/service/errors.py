"""OpenAI-style error bodies, and the one mapping from the error tree to HTTP statuses.

Every error the service answers has the shape OpenAI clients parse::

    {"error": {"message": "...", "type": "...", "param": null, "code": "..."}}

Upstream failures (the language model service, i.e. Z.AI or the mock) are answered so that an
OpenAI client does the right thing: a refusal that would come back the same (the content
filter, an invalid request, an unknown model) is a 4xx that clients do not retry, with Z.AI's
business code as ``code``; a rate limit is 429 and an overload 503, both with ``Retry-After``;
an outage is 502/503/504. ``x-should-retry: false`` tells OpenAI's clients not to retry a 429
or 5xx that would not change (a used-up quota, a wrong endpoint). ``code`` is the upstream
business code when there is one, else the name in the table (docs/design/0603 has the same
table):

====================================  ===  =====================  =========================  =====
error (Z.AI business codes)                ``type``               ``code`` without one       retry
====================================  ===  =====================  =========================  =====
ContentFilterError 1301               400  invalid_request_error  content_filter
ContextTooLongError 1261 (too long)   400  invalid_request_error  context_length_exceeded*   never
BadRequestError 1210-1215, 400        400  invalid_request_error  upstream_bad_request
BadRequestError 1220 (no permission)  403  permission_error       upstream_no_permission     never
NotFoundError 1211 (unknown model)    400  invalid_request_error  model_not_found
AuthenticationError 1000-1004, 401    403  permission_error       upstream_auth_failed       never
InsufficientBalanceError 1110-1121    403  permission_error       upstream_account_unusable  never
QuotaExceededError 1309, 1311         403  permission_error       upstream_plan              never
QuotaExceededError 1304, 1308, 1310   429  insufficient_quota     quota_exceeded             never
RateLimitError 1302, 1303, bare 429   429  rate_limit_error       rate_limited               wait
RateLimitError 1305, 1312 (overload)  503  server_error           upstream_overloaded        wait
UpstreamBusyError (no slot in time)   503  server_error           upstream_busy              wait
StoreUnavailableError (database)      503  server_error           store_unavailable          wait
NotFoundError 1221, 1222, 404         502  upstream_error         upstream_not_found         never
ServerError 5xx, 500, 1230, 1234      502  upstream_error         upstream_error
ResponseValidationError               502  upstream_error         upstream_invalid_response
OutputSchemaError (json_schema)       502  upstream_error         output_schema_mismatch
APIConnectionError                    502  upstream_error         upstream_unreachable
APITimeoutError                       504  upstream_error         upstream_timeout
ConfigError                           500  server_error           configuration_error        never
any other exception                   500  server_error           internal_error
====================================  ===  =====================  =========================  =====

``*`` OpenAI's own code, whatever the business code: clients (LangChain, LiteLLM, openai-agents)
recognise a context overflow by it. The turn has already sent the call once more without its
oldest history turns (core/overflow.py), so the same request would fail the same way.

The embedded mock's "no recorded answer" (offline mode, ``mock_no_match``) is answered 400
``invalid_request_error`` with code ``offline_not_recorded`` and a plain message saying that
offline mode only answers its recorded questions (never retried).

"wait": ``Retry-After`` in whole seconds, what the upstream (or the slot queue) asked for, else
1 (a 429 or 503 of another row carries it too when the upstream gave one). "never":
``x-should-retry: false``. Other 5xx are left to the client's own retry policy. The service's
own client already retried the transient failures (``LLM_MAX_RETRIES``) before any of these.

Messages come from :class:`~generic_framework.errors.GLMError`, which are already
redacted, and go through :func:`~generic_framework.redaction.redact` once more; an unexpected
exception's text is logged, never sent.

Endpoints raise; :data:`EXCEPTION_HANDLERS` (installed by
:func:`~generic_framework.service.create_app`) is the one place that answers. A
:class:`ServiceError`, a :class:`~generic_framework.errors.GLMError` or Starlette's
``HTTPException`` is answered and handled. Any other exception is a bug: Starlette answers it
with ``internal_error`` through the ``Exception`` handler, then raises it on to the server, which
logs it with its traceback.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.types import ExceptionHandler

from generic_framework.errors import (
    ConfigError,
    GLMError,
    OutputSchemaError,
    StoreUnavailableError,
)
from generic_framework.quotas import Refusal
from generic_framework.redaction import redact
from generic_framework.turns import OptionRefused, PersonaNotAllowed, TurnRefused
from generic_framework.wire.errors import (
    APIConnectionError,
    APIError,
    APITimeoutError,
    AuthenticationError,
    BadRequestError,
    ContentFilterError,
    ContextTooLongError,
    InsufficientBalanceError,
    NotFoundError,
    QuotaExceededError,
    RateLimitError,
    ResponseValidationError,
    ServerError,
    UpstreamBusyError,
)

__all__ = [
    "EXCEPTION_HANDLERS",
    "NOT_RECORDED_CODE",
    "NOT_RECORDED_MESSAGE",
    "ServiceError",
    "error_body",
    "error_response",
    "exception_response",
    "internal_error",
    "map_exception",
    "not_allowed",
    "refused",
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


@dataclass(frozen=True, slots=True)
class _Rule:
    """How one kind of upstream failure is answered (the table of the module docstring)."""

    cls: type[GLMError]
    status: int
    type: str
    code: str
    summary: str
    codes: frozenset[str] = frozenset()  # only these business codes; empty: any
    retry: Literal["client", "wait", "never"] = "client"
    own_code: bool = False  # ``code`` even when the error carries a business code


def _only(*codes: str) -> frozenset[str]:
    return frozenset(codes)


_INVALID, _PERMISSION, _UPSTREAM_TYPE = (
    "invalid_request_error",
    "permission_error",
    "upstream_error",
)
_RULES: tuple[_Rule, ...] = (
    _Rule(ContentFilterError, 400, _INVALID, "content_filter", "content moderation refused it"),
    _Rule(ContextTooLongError, 400, _INVALID, "context_length_exceeded",
          "the conversation is too long for the model's context window", retry="never",
          own_code=True),
    _Rule(BadRequestError, 403, _PERMISSION, "upstream_no_permission",
          "the API key may not use this", _only("1220"), "never"),
    _Rule(BadRequestError, 400, _INVALID, "upstream_bad_request",
          "the language model service refused the request"),
    _Rule(NotFoundError, 400, _INVALID, "model_not_found",
          "the persona's model does not exist", _only("1211")),
    _Rule(NotFoundError, 502, _UPSTREAM_TYPE, "upstream_not_found",
          "the language model API was not found (check OPENAI_BASE_URL)", retry="never"),
    _Rule(AuthenticationError, 403, _PERMISSION, "upstream_auth_failed",
          "the service's API key was refused", retry="never"),
    _Rule(InsufficientBalanceError, 403, _PERMISSION, "upstream_account_unusable",
          "the API account is unusable", retry="never"),
    _Rule(QuotaExceededError, 403, _PERMISSION, "upstream_plan",
          "the API plan does not allow this", _only("1309", "1311"), "never"),
    _Rule(QuotaExceededError, 429, "insufficient_quota", "quota_exceeded",
          "the API plan's quota is used up", retry="never"),
    _Rule(UpstreamBusyError, 503, "server_error", "upstream_busy",
          "too many calls to the language model at once", retry="wait"),
    _Rule(RateLimitError, 503, "server_error", "upstream_overloaded",
          "the language model is overloaded", _only("1305", "1312"), "wait"),
    _Rule(RateLimitError, 429, "rate_limit_error", "rate_limited",
          "the language model service is rate limiting", retry="wait"),
    _Rule(StoreUnavailableError, 503, "server_error", "store_unavailable",
          "the conversation database is unavailable", retry="wait"),
    _Rule(ServerError, 502, _UPSTREAM_TYPE, "upstream_error",
          "the language model service failed"),
    _Rule(ResponseValidationError, 502, _UPSTREAM_TYPE, "upstream_invalid_response",
          "the language model service sent an unreadable answer"),
    _Rule(OutputSchemaError, 502, _UPSTREAM_TYPE, "output_schema_mismatch",
          "the model did not answer in the requested format"),
    _Rule(APITimeoutError, 504, _UPSTREAM_TYPE, "upstream_timeout",
          "the language model service timed out"),
    _Rule(APIConnectionError, 502, _UPSTREAM_TYPE, "upstream_unreachable",
          "the language model service is unreachable"),
    _Rule(APIError, 502, _UPSTREAM_TYPE, "upstream_error", "the language model service failed"),
)  # fmt: skip


def _rule_for(exc: BaseException) -> _Rule | None:
    code = getattr(exc, "code", None)
    for rule in _RULES:
        if isinstance(exc, rule.cls) and (not rule.codes or code in rule.codes):
            return rule
    return None


def _retry_headers(rule: _Rule, exc: GLMError) -> dict[str, str]:
    headers = {}
    wait = exc.retry_after
    if rule.retry == "wait" or (wait is not None and wait > 0 and rule.status in (429, 503)):
        headers["Retry-After"] = str(max(1, math.ceil(wait or 0)))
    if rule.retry == "never":
        headers["x-should-retry"] = "false"
    return headers


NOT_RECORDED_CODE = "offline_not_recorded"
"""The ``code`` of a message the mock has no recorded answer for (offline mode)."""
NOT_RECORDED_MESSAGE = (
    "Offline mode only answers the questions recorded in its fixtures, and this message is not "
    "one of them. Ask one of the recorded questions (GET /v1/bot lists them for each persona), "
    "or set OPENAI_API_KEY for real answers."
)


def _not_recorded(exc: BaseException) -> ServiceError | None:
    """The mock's "no recorded answer" (offline mode) in plain words; the mock's matching
    diagnosis goes to the log, for whoever writes fixtures."""
    if not isinstance(exc, BadRequestError):
        return None
    from generic_framework.mock.catalog import NO_MATCH_CODE  # only on a refused request

    if exc.code != NO_MATCH_CODE:
        return None
    logger.info("no recorded answer: %s", exc)
    return ServiceError(
        400, NOT_RECORDED_MESSAGE, code=NOT_RECORDED_CODE, headers={"x-should-retry": "false"}
    )


def refused(refusal: Refusal) -> ServiceError:
    """The 429 of a turn a limit refused (:mod:`generic_framework.quotas`): ``type``
    ``rate_limit_error`` (requests per minute) or ``insufficient_quota`` (daily), ``code``
    naming the limit (``user_rpm``, ``key_daily_tokens``...), ``Retry-After`` = the seconds
    until the oldest counted request leaves the window, or until midnight UTC."""
    return ServiceError(
        429,
        refusal.message,
        type_="insufficient_quota" if refusal.daily else "rate_limit_error",
        code=f"{refusal.who}_{refusal.limit}",
        headers={"Retry-After": str(refusal.retry_after)},
    )


def not_allowed(persona: str, param: str | None = None) -> ServiceError:
    """The 403 of a persona the caller's key may not use."""
    return ServiceError(
        403,
        f"this API key may not use persona {persona!r}",
        type_="permission_error",
        param=param,
        code="persona_not_allowed",
    )


def map_exception(exc: BaseException) -> ServiceError:
    """Translate any exception raised while answering into the :class:`ServiceError` to send."""
    if isinstance(exc, ServiceError):
        return exc
    if isinstance(exc, TurnRefused):
        return refused(exc.refusal)
    if isinstance(exc, PersonaNotAllowed):
        return not_allowed(exc.persona)
    if isinstance(exc, OptionRefused):
        return ServiceError(400, str(exc), param=exc.param, code=exc.code)
    unrecorded = _not_recorded(exc)
    if unrecorded is not None:
        return unrecorded
    rule = _rule_for(exc)
    if rule is not None:
        assert isinstance(exc, GLMError)
        return ServiceError(
            rule.status,
            f"{rule.summary}: {exc}",
            type_=rule.type,
            code=rule.code if rule.own_code else exc.code or rule.code,
            headers=_retry_headers(rule, exc),
        )
    if isinstance(exc, ConfigError):
        logger.error("configuration error while answering: %s", exc)
        return ServiceError(
            500,
            str(exc),
            type_="server_error",
            code="configuration_error",
            headers={"x-should-retry": "false"},
        )
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
    """A :class:`ServiceError`, a :class:`GLMError` or the turn service's refusal, mapped by
    :func:`map_exception`."""
    return exception_response(exc)


async def _answer_http(request: Request, exc: Exception) -> Response:
    """Starlette's own errors (an unknown route, a wrong method) in OpenAI's shape."""
    assert isinstance(exc, HTTPException)
    code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
    headers = dict(exc.headers) if exc.headers else None
    return error_response(exc.status_code, str(exc.detail), code=code, headers=headers)


async def _answer_unexpected(request: Request, exc: Exception) -> Response:
    """Any other exception: ``internal_error``; Starlette then raises it on to be logged."""
    return exception_response(internal_error())


EXCEPTION_HANDLERS: Mapping[Any, ExceptionHandler] = {
    ServiceError: _answer,
    GLMError: _answer,
    TurnRefused: _answer,
    PersonaNotAllowed: _answer,
    OptionRefused: _answer,
    HTTPException: _answer_http,
    Exception: _answer_unexpected,
}
"""The app's exception handlers: every error response of an endpoint comes from here."""
