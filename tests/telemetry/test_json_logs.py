"""LOG_FORMAT=json: one JSON object per line, with the turn's id, persona and outcome."""

from __future__ import annotations

import io
import json
import logging
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from telemetry_support import settings

from generic_framework.core.persona import Persona
from generic_framework.redaction import register_secret
from generic_framework.runtime import Runtime
from generic_framework.store.users import ApiKey, Caller, User
from generic_framework.telemetry import Telemetry
from generic_framework.telemetry.logs import JsonFormatter, conversation_hash
from generic_framework.wire.errors import RateLimitError

SECRET = "f00dfeed" * 4 + ".JsonLogSecret123"


@pytest.fixture
def turn_lines() -> Iterator[io.StringIO]:
    """The ``generic_framework.turn`` logger's records, formatted as JSON lines."""
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(JsonFormatter())
    logger = logging.getLogger("generic_framework.turn")
    before = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    yield out
    logger.removeHandler(handler)
    logger.setLevel(before)


def lines(out: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.getvalue().splitlines()]


def answer(request: httpx.Request) -> httpx.Response:
    body = {
        "id": "2026010909abc", "request_id": "2026010909abc", "model": "glm-4.7",
        "choices": [{"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": "hi"}}],
        "usage": {"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15,
                  "prompt_tokens_details": {"cached_tokens": 4},
                  "completion_tokens_details": {"reasoning_tokens": 2}},
    }  # fmt: skip
    return httpx.Response(200, json=body)


def busy(request: httpx.Request) -> httpx.Response:
    body = {"error": {"code": "1302", "message": "busy"}}
    return httpx.Response(429, json=body, headers={"x-request-id": "zai-busy-1"})


async def respond(
    tmp_path: Path, handler: Any, conversation: str | None, caller: Caller | None = None
) -> None:
    telemetry = Telemetry.create(process_metrics=False)
    custom = settings(tmp_path, llm_max_retries=0)
    runtime = Runtime(custom, transport=httpx.MockTransport(handler), telemetry=telemetry)
    async with runtime:
        await Persona("greeter", "Greet.", runtime=runtime).respond(
            "hello", conversation_id=conversation, caller=caller
        )


async def test_a_turn_is_one_json_line_with_its_ids(
    tmp_path: Path, turn_lines: io.StringIO
) -> None:
    await respond(tmp_path, answer, "telegram-chat-991")
    (line,) = lines(turn_lines)
    assert line["logger"] == "generic_framework.turn" and line["level"] == "INFO"
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", line["time"])
    assert re.fullmatch(r"[0-9a-f]{16}", line["turn_id"])
    assert line["event"] == "turn"
    assert line["persona"] == "greeter"
    assert line["conversation"] == conversation_hash("telegram-chat-991")
    assert line["request_id"] == "2026010909abc"
    assert line["outcome"] == "completed"
    assert (line["prompt_tokens"], line["completion_tokens"]) == (12, 3)
    assert (line["cached_tokens"], line["reasoning_tokens"]) == (4, 2)
    assert line["rounds"] == 1 and line["duration_ms"] >= 0
    assert "telegram-chat-991" not in turn_lines.getvalue()
    assert line["turn_id"] in line["message"] and "outcome=completed" in line["message"]


async def test_the_line_has_a_hash_of_the_user_never_the_name_or_key(
    tmp_path: Path, turn_lines: io.StringIO
) -> None:
    user = User("u0123456789ab", "alice@example.org", "user")
    key = ApiKey("fedcba987654", user.id, "2026-11-26T00:00:00.000+00:00")
    await respond(tmp_path, answer, None, Caller(user, key, "key"))
    (line,) = lines(turn_lines)
    assert line["user"] == conversation_hash(user.id)
    for secret in (user.id, user.name, key.id):
        assert secret not in turn_lines.getvalue()


async def test_a_failed_turn_says_why(tmp_path: Path, turn_lines: io.StringIO) -> None:
    with pytest.raises(RateLimitError):
        await respond(tmp_path, busy, None)
    (line,) = lines(turn_lines)
    assert line["outcome"] == "error"
    assert line["error_type"] == "RateLimitError"
    assert line["request_id"] == "zai-busy-1"
    assert line["conversation"] is None


def test_the_formatter_redacts_and_keeps_extras() -> None:
    register_secret(SECRET)
    logger = logging.getLogger("test.json")
    try:
        raise ValueError(f"boom {SECRET}")
    except ValueError:
        record = logger.makeRecord(
            "test.json", logging.ERROR, __file__, 1, "key %s leaked", (SECRET,),
            sys.exc_info(), extra={"persona": "scout", "note": f"again {SECRET}", "n": 3},
        )  # fmt: skip
    text = JsonFormatter().format(record)
    assert "\n" not in text
    data = json.loads(text)
    assert data["message"] == "key *** leaked"
    assert data["persona"] == "scout" and data["n"] == 3
    assert data["note"] == "again ***"
    assert "ValueError: boom ***" in data["exception"]
    assert SECRET not in text and SECRET[:32] not in text
