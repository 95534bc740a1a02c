"""Recording real exchanges as fixtures, with secrets removed before anything reaches disk.

:class:`RecordingTransport` wraps the transport :class:`~generic_framework.wire.client.GLMClient`
sends through and keeps every exchange in memory: the parsed request body and the response as
JSON, or as its list of SSE events (streams are passed on chunk by chunk, never buffered).
:func:`build_fixture` turns the exchanges into a :class:`Fixture` with :func:`scrub` applied,
and :func:`write_fixture` refuses to write one in which :func:`find_secrets` still finds
something. :func:`record` is the ``generic-framework record`` command's work.

Removed: the ``Authorization`` and cookie headers (only ``Content-Type`` and ``Retry-After`` of a
response are kept, no request header at all), every ``user_id``, every field named like a
credential (``api_key``, ``token``, ``secret``, ``password``, ``cookie``...), and any string that
looks like a key (Z.AI ``<id>.<secret>`` keys, bearer tokens, ``sk-`` keys, JWTs) or equals the
configured key, wherever it appears.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import httpx

from generic_framework.config import Settings
from generic_framework.core.events import Done
from generic_framework.core.persona import Persona
from generic_framework.core.reply import Reply
from generic_framework.core.spec import PersonaSpec
from generic_framework.errors import ConfigError, GLMError
from generic_framework.mock.fixture import DEFAULT_PERSONA, Fixture, FixtureError
from generic_framework.mock.sse import parse_sse
from generic_framework.redaction import redact
from generic_framework.runtime import Runtime

__all__ = [
    "REDACTED",
    "RecordingTransport",
    "build_fixture",
    "find_secrets",
    "record",
    "scrub",
    "write_fixture",
]

REDACTED = "[REDACTED]"
SECRET_FIELDS = frozenset(
    {
        "user_id",
        "authorization",
        "proxy-authorization",
        "cookie",
        "set-cookie",
        "api_key",
        "apikey",
        "api-key",
        "x-api-key",
        "access_token",
        "refresh_token",
        "id_token",
        "token",
        "secret",
        "client_secret",
        "password",
    }
)
KEPT_HEADERS = frozenset({"content-type", "retry-after"})
_SECRET_STRINGS = (
    re.compile(r"[0-9a-fA-F]{32}\.[A-Za-z0-9]{16}"),  # Z.AI keys
    re.compile(r"(?i)\bbearer\s+(?!<)[A-Za-z0-9._~+/=-]{8,}"),
    re.compile(r"\bsk-[A-Za-z0-9_-]{16,}"),
    re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"),  # JWTs
)


# ------------------------------------------------------------------ scrubbing


def _scrub_text(text: str, secrets: tuple[str, ...]) -> str:
    for secret in secrets:
        if secret in text:
            text = text.replace(secret, REDACTED)
    for pattern in _SECRET_STRINGS:
        text = pattern.sub(REDACTED, text)
    return redact(text)


def scrub(value: Any, secrets: Iterable[str] = ()) -> Any:
    """A copy of a JSON value with credential fields dropped and key-like strings replaced.

    Args:
        value: any JSON value (dicts, lists, strings, numbers).
        secrets: literal values to remove wherever they appear (the configured API key).
    """
    known = tuple(secret for secret in secrets if secret and len(secret) >= 4)
    return _scrub(value, known)


def _scrub(value: Any, secrets: tuple[str, ...]) -> Any:
    if isinstance(value, dict):
        return {
            key: _scrub(item, secrets)
            for key, item in value.items()
            if str(key).lower() not in SECRET_FIELDS
        }
    if isinstance(value, list):
        return [_scrub(item, secrets) for item in value]
    if isinstance(value, str):
        return _scrub_text(value, secrets)
    return value


def find_secrets(value: Any, secrets: Iterable[str] = (), where: str = "$") -> list[str]:
    """Where a JSON value still holds something secret-looking (JSON-path-like strings)."""
    known = tuple(secret for secret in secrets if secret and len(secret) >= 4)
    found: list[str] = []
    if isinstance(value, dict):
        for key, item in value.items():
            if str(key).lower() in SECRET_FIELDS:
                found.append(f"{where}.{key}")
            found.extend(find_secrets(item, known, f"{where}.{key}"))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found.extend(find_secrets(item, known, f"{where}[{index}]"))
    elif isinstance(value, str) and _looks_secret(value, known):
        found.append(where)
    return found


def _looks_secret(text: str, known: tuple[str, ...]) -> bool:
    return any(secret in text for secret in known) or any(
        pattern.search(text) for pattern in _SECRET_STRINGS
    )


# ------------------------------------------------------------------ the transport


def _json_or_text(raw: bytes) -> Any:
    text = raw.decode("utf-8", errors="replace")
    try:
        return json.loads(text) if text.strip() else None
    except ValueError:
        return text


def _kept_headers(headers: httpx.Headers) -> dict[str, str]:
    return {name.title(): value for name, value in headers.items() if name.lower() in KEPT_HEADERS}


def _decoded_headers(headers: httpx.Headers) -> httpx.Headers:
    """The headers of a body we hand on already decoded: no encoding, no stale length."""
    return httpx.Headers(
        [
            (name, value)
            for name, value in headers.multi_items()
            if name.lower() not in {"content-encoding", "content-length", "transfer-encoding"}
        ]
    )


class _TeeStream(httpx.AsyncByteStream):
    """Passes a streamed body on chunk by chunk and hands what passed over at the end.

    The end is whichever comes first: the body is exhausted, or the reader closes the response
    early (a client stops reading at ``data: [DONE]``).
    """

    def __init__(self, response: httpx.Response, done: Callable[[bytes], None]) -> None:
        self._response = response
        self._done: Callable[[bytes], None] | None = done
        self._chunks: list[bytes] = []

    def _finish(self) -> None:
        if self._done is not None:
            done, self._done = self._done, None
            done(b"".join(self._chunks))

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self._response.aiter_bytes():
            self._chunks.append(chunk)
            yield chunk
        self._finish()

    async def aclose(self) -> None:
        self._finish()
        await self._response.aclose()


class RecordingTransport(httpx.AsyncBaseTransport):
    """An httpx transport that forwards every request and remembers each exchange.

    Args:
        transport: the transport that really sends (a fresh ``httpx.AsyncHTTPTransport`` when
            omitted); it is closed with this one.

    Attributes:
        exchanges: the exchanges so far, in fixture form but not yet scrubbed (they stay in
            memory; :func:`build_fixture` scrubs them).
    """

    def __init__(self, transport: httpx.AsyncBaseTransport | None = None) -> None:
        self._transport = transport or httpx.AsyncHTTPTransport()
        self.exchanges: list[dict[str, Any]] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        """Forward ``request``; record the exchange once its body has been read."""
        body = _json_or_text(await request.aread())
        entry: dict[str, Any] = {
            "request": {"method": request.method, "path": request.url.path, "body": body},
        }
        response = await self._transport.handle_async_request(request)
        status, headers = response.status_code, response.headers
        self.exchanges.append(entry)
        if "text/event-stream" in headers.get("content-type", ""):

            def done(raw: bytes) -> None:
                events = parse_sse(raw.decode("utf-8", errors="replace"))
                entry["response"] = {
                    "status": status,
                    "headers": _kept_headers(headers),
                    "events": events,
                }
                if not events or events[-1] != "[DONE]":
                    entry["note"] = "the stream ended before data: [DONE]"

            return httpx.Response(
                status,
                headers=_decoded_headers(headers),
                stream=_TeeStream(response, done),
                extensions=response.extensions,
            )
        try:
            raw = await response.aread()
        finally:
            await response.aclose()
        entry["response"] = {
            "status": status,
            "headers": _kept_headers(headers),
            "body": _json_or_text(raw),
        }
        return httpx.Response(
            status, headers=_decoded_headers(headers), content=raw, extensions=response.extensions
        )

    async def aclose(self) -> None:
        """Close the wrapped transport."""
        await self._transport.aclose()


# ------------------------------------------------------------------ fixtures


def _expected(reply: Reply | None, error: GLMError | None) -> dict[str, Any]:
    if error is not None:
        return {"error": {"type": type(error).__name__, "code": error.code}}
    if reply is None:
        return {}
    return {
        "content": reply.content,
        "stop_reason": reply.stop_reason,
        "rounds": len(reply.rounds),
        "citations": [citation.url for citation in reply.citations],
    }


def _fixture_name(text: str) -> str:
    name = re.sub(r"[^a-z0-9_.-]+", "_", text.lower()).strip("_.-")
    return name[:100] or "recording"


def build_fixture(
    exchanges: Iterable[dict[str, Any]],
    *,
    name: str,
    user_input: str,
    persona: str = DEFAULT_PERSONA,
    description: str = "",
    model: str = "glm-4.7",
    endpoint: str = "general",
    settings: dict[str, Any] | None = None,
    reply: Reply | None = None,
    error: GLMError | None = None,
    secrets: Iterable[str] = (),
) -> Fixture:
    """A scrubbed, validated fixture from recorded exchanges and the turn's outcome.

    Exchanges without a response (the connection failed before one arrived) are left out.

    Raises:
        FixtureError: nothing was recorded, or the result is not a valid fixture.
    """
    known = tuple(secrets)
    complete = [scrub(entry, known) for entry in exchanges if "response" in entry]
    if not complete:
        raise FixtureError("nothing was recorded: no request got a response")
    data = {
        "name": _fixture_name(name),
        "description": description,
        "model": model,
        "endpoint": endpoint,
        "persona": persona,
        "user_input": user_input,
        "settings": settings or {},
        # The reply was built from the unscrubbed answer; scrubbed, it is what a replay gives.
        "expected": scrub(_expected(reply, error), known),
        "exchanges": complete,
    }
    try:
        return Fixture.model_validate(data)
    except ValueError as exc:
        raise FixtureError(f"the recording is not a valid fixture: {exc}") from None


def write_fixture(fixture: Fixture, path: str | Path, *, secrets: Iterable[str] = ()) -> Path:
    """Write ``fixture`` as JSON, after checking that no secret is left in it.

    Raises:
        FixtureError: :func:`find_secrets` found something (the paths are named, not the values).
    """
    text = fixture.to_json()
    leaks = find_secrets(json.loads(text), secrets)
    if leaks:
        raise FixtureError(f"refusing to write a fixture with secrets at: {', '.join(leaks)}")
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".partial")
    partial.write_text(text, encoding="utf-8")
    partial.replace(target)
    return target


async def _run_turn(
    persona: Persona, message: str, stream: bool
) -> tuple[Reply | None, GLMError | None]:
    """The turn's reply, or the API error it ended with."""
    try:
        if not stream:
            return await persona.respond(message), None
        async for event in persona.stream(message):
            if isinstance(event, Done):
                return event.reply, None
    except GLMError as exc:
        return None, exc
    raise ConfigError("the stream ended without a reply")


async def record(
    settings: Settings,
    message: str,
    out: str | Path,
    *,
    persona: str | None = None,
    stream: bool = False,
    description: str = "",
    transport: httpx.AsyncBaseTransport | None = None,
    environ: Mapping[str, str] | None = None,
    specs: Mapping[str, PersonaSpec] | None = None,
) -> Path:
    """Run one message through a persona against the configured endpoint; save it as a fixture.

    Returns the path written. No conversation (no history); an API error is recorded too.

    Args:
        settings: the endpoint, the key, and ``PERSONAS_DIR`` (unless ``specs``: already read).
        message: what the user says (``//`` for a web question).
        out: the fixture file to write; its stem becomes the fixture's name.
        persona: the persona's name (``scout``, else the first one found, by default).
        stream: record a streamed turn (``Persona.stream``) instead of ``respond``.
        description: the fixture's description.
        transport: the transport that really sends (tests pass a fake upstream here).
        environ: ``${VAR}`` values for the persona's MCP servers (the CLI passes the
            environment). MCP traffic uses the SDK's own HTTP client: it is not recorded.

    Raises:
        ConfigError: no such persona, or no personas at all.
        FixtureError: nothing was recorded, or a secret survived scrubbing.
    """
    recorder = RecordingTransport(transport)
    secret = settings.api_key.get_secret_value() if settings.api_key else ""
    async with Runtime(settings, transport=recorder, environ=environ, specs=specs) as runtime:
        chosen = runtime.persona(persona)
        reply, error = await _run_turn(chosen, message, stream)
    fixture = build_fixture(
        recorder.exchanges,
        name=Path(out).stem,
        user_input=message,
        persona=chosen.spec.name,
        description=description or f"Recorded from {chosen.spec.name}: {message}",
        model=chosen.spec.model,
        endpoint="coding" if settings.is_coding_endpoint else "general",
        settings={"max_tool_rounds": chosen.spec.max_tool_rounds},
        reply=reply,
        error=error,
        secrets=[secret],
    )
    return write_fixture(fixture, out, secrets=[secret])
