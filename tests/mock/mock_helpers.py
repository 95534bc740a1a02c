"""Builders for small fixtures and requests used by the mock's tests."""

from __future__ import annotations

import json
from typing import Any

from generic_framework.mock.fixture import Fixture

CHAT = "/api/paas/v4/chat/completions"
AUTH = {"Authorization": "Bearer test-key"}
WEB_SEARCH_TOOL = {
    "type": "web_search",
    "web_search": {"enable": True, "search_engine": "search_pro_jina", "search_result": True},
}


def function_tool(name: str) -> dict[str, Any]:
    """A function tool spec with an empty parameter schema."""
    return {
        "type": "function",
        "function": {"name": name, "description": name, "parameters": {"type": "object"}},
    }


def system(text: str = "You are a test persona.") -> dict[str, Any]:
    return {"role": "system", "content": text}


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def assistant(
    content: str | None = None,
    calls: list[dict[str, Any]] | None = None,
    reasoning: str | None = None,
) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant"}
    if content is not None:
        message["content"] = content
    if reasoning is not None:
        message["reasoning_content"] = reasoning
    if calls is not None:
        message["tool_calls"] = calls
    return message


def tool_message(call_id: str, content: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": content}


def tool_call(call_id: str, name: str, arguments: dict[str, Any], index: int = 0) -> dict[str, Any]:
    return {
        "id": call_id,
        "index": index,
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments)},
    }


def chat(
    *messages: dict[str, Any], tools: list[dict[str, Any]] | None = None, **extra: Any
) -> dict[str, Any]:
    """A chat-completions body."""
    body: dict[str, Any] = {"model": "glm-4.7", "messages": list(messages), **extra}
    if tools is not None:
        body["tools"] = tools
    return body


def completion(
    content: str = "",
    *,
    calls: list[dict[str, Any]] | None = None,
    reasoning: str | None = None,
    web_search: list[dict[str, Any]] | None = None,
    ident: str = "20260101000000abc",
) -> dict[str, Any]:
    """A chat completion body."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if reasoning is not None:
        message["reasoning_content"] = reasoning
    if calls:
        message["tool_calls"] = calls
    body: dict[str, Any] = {
        "id": ident,
        "request_id": ident,
        "created": 1767950000,
        "model": "glm-4.7",
        "object": "chat.completion",
        "choices": [
            {"index": 0, "finish_reason": "tool_calls" if calls else "stop", "message": message}
        ],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }
    if web_search is not None:
        body["web_search"] = web_search
    return body


def error_body(code: str, message: str = "error") -> dict[str, Any]:
    return {"error": {"code": code, "message": message}}


def exchange(
    request: dict[str, Any] | None,
    body: Any = None,
    *,
    events: list[Any] | None = None,
    status: int = 200,
    faults: list[dict[str, Any]] | None = None,
    path: str = CHAT,
    method: str = "POST",
    headers: dict[str, str] | None = None,
) -> dict[str, Any]:
    """One exchange in fixture form."""
    response: dict[str, Any] = {"status": status, "headers": headers or {}}
    if events is not None:
        response["events"] = events
    else:
        response["body"] = body
    return {
        "request": {"method": method, "path": path, "body": request},
        "response": response,
        "faults": faults or [],
    }


def make_fixture(name: str, *exchanges: dict[str, Any], **meta: Any) -> Fixture:
    """A validated fixture; ``user_input`` defaults to the first user message."""
    if "user_input" not in meta:
        first = exchanges[0]["request"]["body"] or {}
        users = [m["content"] for m in first.get("messages", []) if m.get("role") == "user"]
        meta["user_input"] = users[0] if users else name
    return Fixture.model_validate({"name": name, "exchanges": list(exchanges), **meta})


def simple(name: str, question: str, answer: str, **meta: Any) -> Fixture:
    """A one-exchange fixture: ``question`` (no tools) answered by ``answer``."""
    return make_fixture(name, exchange(chat(system(), user(question)), completion(answer)), **meta)
