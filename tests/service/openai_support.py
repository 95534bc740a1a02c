"""What the OpenAI-client tests share: the service over the mock, what reached the mock, and
fixtures built in code for the requests agent frameworks send.

The service runs in-process (httpx's ASGI transport) or on a loopback port (for clients that
open their own connections); the mock is a real HTTP server on loopback. The runtime's GLM
client sends through :class:`Upstream`, an ordinary HTTP transport that keeps a copy of each
chat request's JSON body, so a test sees exactly what Z.AI would have been sent.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx

from generic_framework.mock.fixture import Fixture

__all__ = [
    "CHAT_PATH",
    "Upstream",
    "answer_body",
    "calls_body",
    "fixture",
    "persona_file",
]

CHAT_PATH = "/api/paas/v4/chat/completions"
CALCULATE = {
    "type": "function",
    "function": {"name": "calculate", "parameters": {"type": "object", "properties": {}}},
}


class Upstream(httpx.AsyncHTTPTransport):
    """An HTTP transport that keeps the JSON body of every chat request it sends."""

    def __init__(self) -> None:
        super().__init__()
        self.bodies: list[dict[str, Any]] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/chat/completions"):
            self.bodies.append(json.loads(request.content))
        return await super().handle_async_request(request)


def answer_body(text: str, n: int = 0, **extra: Any) -> dict[str, Any]:
    """A non-streamed completion that answers ``text``."""
    return {
        "id": f"req-{n}",
        "created": 1767950000,
        "model": "glm-4.7",
        "object": "chat.completion",
        "choices": [
            {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}
        ],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
        **extra,
    }


def calls_body(calls: Sequence[tuple[str, str, dict[str, Any]]], n: int = 0) -> dict[str, Any]:
    """A completion calling ``(id, name, arguments)`` tools."""
    tool_calls = [
        {
            "id": call_id,
            "type": "function",
            "index": index,
            "function": {"name": name, "arguments": json.dumps(arguments)},
        }
        for index, (call_id, name, arguments) in enumerate(calls)
    ]
    body = answer_body("", n)
    body["choices"][0]["finish_reason"] = "tool_calls"
    body["choices"][0]["message"] = {"role": "assistant", "content": "", "tool_calls": tool_calls}
    return body


def fixture(
    name: str,
    exchanges: Sequence[tuple[list[dict[str, Any]], dict[str, Any]]],
    *,
    tools: list[dict[str, Any]] | None = None,
    history: str = "ignore",
) -> Fixture:
    """A fixture whose exchanges answer these ``(messages, response body)`` in order, to a
    request offering function ``tools`` (default: the persona's own ``calculate``)."""
    tools = tools or [CALCULATE]
    recorded = []
    for messages, body in exchanges:
        request = {"model": "glm-4.7", "messages": messages, "stream": False, "tools": tools}
        recorded.append(
            {
                "request": {"method": "POST", "path": CHAT_PATH, "body": request},
                "response": {"status": 200, "headers": {}, "body": body},
            }
        )
    first = next(m["content"] for m in exchanges[0][0] if m["role"] == "user")
    return Fixture.model_validate(
        {
            "name": name,
            "persona": "tutor",
            "user_input": first,
            "match": {"history": history},
            "exchanges": recorded,
        }
    )


def persona_file(folder: Path, name: str = "tutor", extra: str = "") -> Path:
    """A persona file in ``folder`` (created): built-in web search, one function tool of its
    own offered on every message, and ``extra`` TOML appended."""
    folder.mkdir(exist_ok=True)
    (folder / f"{name}.toml").write_text(
        'system_prompt = "You are Tutor."\n'
        'tools = ["calculate"]\n'
        "tools_always = true\n"
        f"{extra}\n"
        '[web_search]\nmode = "builtin"\n',
        encoding="utf-8",
    )
    return folder
