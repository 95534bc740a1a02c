"""A strict scripted fake of Z.AI for persona tests (imported by the tests of this folder).

:class:`Script` is an ``httpx`` transport handed to ``GLMClient(transport=...)``. It answers
each request with the next scripted response and records every request body. A request after
the script ran out fails at once; :meth:`Script.assert_done` (called for every script by the
``script`` fixture at teardown) fails when a scripted response was never used.

A scripted completion is a plain dict (see :func:`completion`). When the request asks for a
stream, the same dict is sent as SSE chunks cut the way Z.AI cuts them (reasoning, then content
in pieces, one chunk per tool call, a last chunk with finish_reason, usage and ``web_search``),
so one script drives both ``respond()`` and ``stream()``.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from generic_framework.config import Settings

BASE_URL = "http://zai.test/api/paas/v4"
_ids = itertools.count(1)

Scripted = dict[str, Any] | httpx.Response | Callable[[httpx.Request], httpx.Response]


def call(name: str, arguments: dict[str, Any] | str = "", *, id: str | None = None,
         type: str = "function") -> dict[str, Any]:  # fmt: skip
    """A tool call as Z.AI sends it (arguments as a JSON string)."""
    args = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {"id": id or f"call_{next(_ids)}", "type": type,
            "function": {"name": name, "arguments": args}}  # fmt: skip


def completion(
    content: str | None = "",
    *,
    tool_calls: list[dict[str, Any]] | None = None,
    finish_reason: str | None = None,
    reasoning: str | None = None,
    web_search: list[dict[str, Any]] | None = None,
    usage: tuple[int, int] = (10, 5),
    model: str = "glm-4.7",
) -> dict[str, Any]:
    """A non-streaming completion body."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if reasoning is not None:
        message["reasoning_content"] = reasoning
    if tool_calls:
        message["tool_calls"] = [dict(c, index=i) for i, c in enumerate(tool_calls)]
    body: dict[str, Any] = {
        "id": f"req-{next(_ids)}",
        "created": 1767350000,
        "model": model,
        "object": "chat.completion",
        "choices": [{"index": 0, "finish_reason": finish_reason
                     or ("tool_calls" if tool_calls else "stop"), "message": message}],
        "usage": {"prompt_tokens": usage[0], "completion_tokens": usage[1],
                  "total_tokens": usage[0] + usage[1]},
    }  # fmt: skip
    if web_search is not None:
        body["web_search"] = web_search
    return body


def source(n: int, *, link: str | None = None) -> dict[str, Any]:
    """One ``web_search[]`` item labelled ``ref_n``."""
    return {"title": f"Title {n}", "link": link if link is not None else f"https://ex.org/{n}",
            "content": f"Snippet {n}", "media": f"Site {n}", "icon": "", "refer": f"ref_{n}",
            "publish_date": "2026-01-0" + str(n % 9 + 1)}  # fmt: skip


def error(status: int, code: str, message: str = "error") -> httpx.Response:
    """A Z.AI error response."""
    return httpx.Response(status, json={"error": {"code": code, "message": message}})


def _sse(body: dict[str, Any]) -> bytes:
    choice = body["choices"][0]
    message = choice["message"]
    base = {"id": body["id"], "created": body["created"], "model": body["model"],
            "object": "chat.completion.chunk"}  # fmt: skip

    def chunk(delta: dict[str, Any], **extra: Any) -> str:
        payload = dict(base, choices=[dict({"index": 0, "delta": delta}, **extra.pop("c", {}))])
        payload.update(extra)
        return f"data: {json.dumps(payload)}\n\n"

    frames = []
    if message.get("reasoning_content"):
        frames.append(
            chunk({"role": "assistant", "reasoning_content": message["reasoning_content"]})
        )
    text = message.get("content") or ""
    for start in range(0, len(text), 7):
        frames.append(chunk({"role": "assistant", "content": text[start : start + 7]}))
    for tool_call in message.get("tool_calls") or []:
        frames.append(chunk({"tool_calls": [tool_call]}))
    last: dict[str, Any] = {"c": {"finish_reason": choice["finish_reason"]}, "usage": body["usage"]}
    if "web_search" in body:
        last["web_search"] = body["web_search"]
    frames.append(chunk({"role": "assistant", "content": ""}, **last))
    frames.append("data: [DONE]\n\n")
    return "".join(frames).encode()


class Script(httpx.AsyncBaseTransport):
    """Scripted responses, consumed in order; every request body is recorded."""

    def __init__(self, *responses: Scripted) -> None:
        self._responses = list(responses)
        self.requests: list[dict[str, Any]] = []
        self.paths: list[str] = []
        self.unexpected: list[str] = []

    def add(self, *responses: Scripted) -> None:
        """Script more responses."""
        self._responses.extend(responses)

    @property
    def remaining(self) -> int:
        return len(self._responses)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(await request.aread() or b"null")
        self.requests.append(body)
        self.paths.append(request.url.path)
        if not self._responses:
            self.unexpected.append(request.url.path)
            pytest.fail(f"unexpected extra request #{len(self.requests)} to {request.url.path}")
        scripted = self._responses.pop(0)
        if callable(scripted):
            return scripted(request)
        if isinstance(scripted, httpx.Response):
            return scripted
        if isinstance(body, dict) and body.get("stream"):
            return httpx.Response(
                200, content=_sse(scripted), headers={"content-type": "text/event-stream"}
            )
        return httpx.Response(200, json=scripted)

    def assert_done(self) -> None:
        """Fail when a scripted response was never requested, or an extra request came."""
        assert not self.unexpected, f"extra requests: {self.unexpected}"
        assert not self._responses, f"{len(self._responses)} scripted response(s) never used"

    def messages(self, index: int = -1) -> list[dict[str, Any]]:
        """The messages of a recorded request (the last by default)."""
        return list(self.requests[index]["messages"])


def make_settings(tmp_path: Any, **overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "api_key": "test-key-0123456789",
        "base_url": BASE_URL,
        "data_dir": tmp_path,
        "max_tool_rounds": 3,
        "llm_max_retries": 0,
        "tool_timeout": 5.0,
        "history_turns": 20,
        "web_search_mode": "builtin",
        "web_search_count": 5,
    }
    values.update(overrides)
    return Settings.defaults(**values)
