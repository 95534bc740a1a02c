"""Reading Z.AI's answers: a body into a wire model, an error status into the error tree.

Used by :class:`~generic_framework.wire.client.GLMClient` only; kept apart so the client reads
as the I/O and this module as the parsing (envelopes, truncated bodies, proxy pages, business
codes).
"""

from __future__ import annotations

import json
from typing import Any, TypeVar

import httpx
from pydantic import BaseModel, ValidationError

from generic_framework.redaction import redact
from generic_framework.wire.errors import (
    APIStatusError,
    ContentFilterError,
    ResponseValidationError,
    ServerError,
    error_for,
)
from generic_framework.wire.messages import ChatCompletion, ReaderResponse, WebSearchResponse
from generic_framework.wire.retry import parse_retry_after

__all__ = ["check_completion", "check_finish", "is_document", "parse_model", "status_error"]

_M = TypeVar("_M", bound=BaseModel)


def is_document(response: httpx.Response) -> bool:
    """True when a stream request was answered with a JSON or HTML document instead of SSE."""
    kind = response.headers.get("content-type", "").lower()
    return kind.startswith(("application/json", "text/html")) or "+json" in kind


def check_finish(finish_reason: str | None, request_id: str | None) -> None:
    if finish_reason == "sensitive":
        raise ContentFilterError(
            "the answer was blocked by content moderation", request_id=request_id
        )
    if finish_reason == "network_error":
        raise ServerError(
            "Z.AI reported an inference failure (network_error)", request_id=request_id
        )


def check_completion(completion: ChatCompletion) -> None:
    """:func:`check_finish` of a whole completion."""
    check_finish(completion.finish_reason, completion.id)


def parse_model(response: httpx.Response, model: type[_M]) -> _M:
    """Validate a 200 body; unwrap the ``{code, msg, success, data}`` envelope if present.

    The fast path validates the bytes directly. Every field of the models has a default, so an
    error object, an envelope or ``{}`` also validate; those fall to the slow path, which
    raises the error they carry, unwraps ``data``, or reports the body as invalid.
    """
    raw = response.content
    try:
        result: _M | None = model.model_validate_json(raw)
    except ValidationError:
        result = None
    if result is not None and not _wrapped(result) and _complete(result):
        return result
    try:
        payload = json.loads(raw)
    except ValueError as exc:
        raise _invalid(response, raw, "the response body is not JSON") from exc
    if isinstance(payload, dict):
        if payload.get("error"):
            raise status_error(response.status_code, response.headers, raw)
        if _is_envelope(payload):
            if payload.get("success") is not True:
                raise _envelope_error(payload, response.status_code, response.headers)
            payload = payload.get("data")
    try:
        result = model.model_validate(payload)
    except ValidationError as exc:
        raise _invalid(response, raw, f"the response is not a valid {model.__name__}") from exc
    if not _complete(result):
        raise _invalid(response, raw, f"the response is not a complete {model.__name__}")
    return result


def _wrapped(result: BaseModel) -> bool:
    extra = result.__pydantic_extra__
    return extra is not None and ("error" in extra or "success" in extra)


def _complete(result: BaseModel) -> bool:
    if isinstance(result, ChatCompletion):
        return bool(result.choices)
    if isinstance(result, WebSearchResponse):
        return "search_result" in result.model_fields_set
    if isinstance(result, ReaderResponse):
        return result.reader_result is not None
    return True


def _is_envelope(payload: dict[str, Any]) -> bool:
    return "success" in payload and ("msg" in payload or "data" in payload or "code" in payload)


def _invalid(response: httpx.Response, raw: bytes, message: str) -> ResponseValidationError:
    return ResponseValidationError(
        message,
        body=raw.decode("utf-8", errors="replace"),
        status_code=response.status_code,
        request_id=response.headers.get("x-request-id"),
    )


def status_error(status: int, headers: httpx.Headers, raw: bytes) -> APIStatusError:
    """Build the typed error for an HTTP error response (Z.AI body, envelope, or anything)."""
    try:
        payload = json.loads(raw) if raw.strip() else None
    except ValueError:
        payload = None
    code = None
    if isinstance(payload, dict):
        err = payload.get("error")
        if isinstance(err, dict):
            code, message = _code(err.get("code")), str(err.get("message") or f"HTTP {status}")
        elif isinstance(err, str) and err:
            message = err
        elif _is_envelope(payload) or "msg" in payload:
            return _envelope_error(payload, status, headers)
        else:
            message = _excerpt(status, raw)
    else:
        message = _excerpt(status, raw)
    return error_for(
        status,
        code,
        message,
        request_id=headers.get("x-request-id"),
        retry_after=parse_retry_after(headers),
    )


def _envelope_error(payload: dict[str, Any], status: int, headers: httpx.Headers) -> APIStatusError:
    """The error of a failed ``{code, msg, success}`` envelope, carrying its ``msg``.

    A three-digit ``code`` is an HTTP status in disguise; anything else is a business code.
    """
    code = _code(payload.get("code"))
    if code is not None and len(code) == 3 and code.isdigit() and int(code) >= 400:
        status, code = int(code), None
    message = str(payload.get("msg") or payload.get("message") or "the gateway reported a failure")
    return error_for(
        status,
        code,
        message,
        request_id=headers.get("x-request-id"),
        retry_after=parse_retry_after(headers),
    )


def _excerpt(status: int, raw: bytes) -> str:
    """A short, redacted view of a body that is not Z.AI's error JSON (redacted before cut)."""
    text = raw.decode("utf-8", errors="replace").strip()
    if not text:
        return f"HTTP {status} with an empty body"
    if "<html" in text[:500].lower():
        return f"HTTP {status} with an HTML page (a proxy or gateway error?)"
    return f"HTTP {status}: {redact(text, limit=300)}"


def _code(value: object) -> str | None:
    return None if value is None or value == "" else str(value)
