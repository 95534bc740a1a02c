"""One ``//`` turn in each web-search mode: the reply, the stored record, ``/metrics`` and the
turn's log line show the same numbers, because they all read the turn's one account.

The mock serves all three modes: the built-in tool (``web_search[]`` on the general endpoint),
``client`` (the Web Search API) and ``mcp`` (its Web Search MCP endpoint, the Coding Plan's
route, which ``auto`` picks on the coding endpoint).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
from telemetry_support import samples

from generic_framework.config import Settings
from generic_framework.mock import MockServer
from generic_framework.runtime import Runtime

pytestmark = pytest.mark.e2e

KEY = "ledger-test-key-0123456789"
REPO = Path(__file__).resolve().parents[2]
M = "generic_framework_"

# mode -> (the question a bundled fixture answers, coding endpoint, WEB_SEARCH_MODE)
TURNS = {
    "builtin": ("// what's the weather in Nanaimo?", False, "auto"),
    "client": ("// when is low tide in Nanaimo today?", False, "client"),
    "mcp": ("// did the council approve the tram line extension?", True, "auto"),
}


def one(
    found: dict[tuple[str, frozenset[tuple[str, str]]], float], name: str, **labels: str
) -> float:
    return found.get((name, frozenset(labels.items())), 0.0)


async def run_turn(
    mode: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> tuple[Any, Any, dict[tuple[str, frozenset[tuple[str, str]]], float], Any]:
    question, coding, setting = TURNS[mode]
    async with MockServer(api_keys={KEY}) as server:
        settings = Settings.defaults(
            api_key=KEY,
            base_url=server.coding_base_url if coding else server.base_url,
            web_search_mode=setting,
            personas_dir=REPO / "personas",
            data_dir=tmp_path,
            llm_max_retries=0,
        )
        async with Runtime(settings) as runtime:
            scout = runtime.persona("scout")
            assert scout.spec.web_search.mode == mode
            with caplog.at_level(logging.INFO, logger="generic_framework.turn"):
                reply = await scout.respond(question, conversation_id="c1")
            turns = await runtime.store.turns("c1")
            exposition, _ = runtime.telemetry.metrics.exposition()
        assert server.report()["unmatched"] == 0
    assert turns is not None and turns[0].record is not None
    (line,) = [r for r in caplog.records if r.name == "generic_framework.turn"]
    return reply, turns[0].record, samples(exposition.decode()), line


@pytest.mark.parametrize("mode", sorted(TURNS))
async def test_reply_record_metrics_and_log_agree(
    mode: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    reply, record, found, line = await run_turn(mode, tmp_path, caplog)

    # One web search, counted under its own mode and under no other.
    assert reply.web_searches == record.web_searches == line.web_searches == 1
    assert line.web_searches_by_mode == {mode: 1}
    for other in TURNS:
        counted = one(found, f"{M}web_searches_total", persona="scout", mode=other)
        assert counted == (1 if other == mode else 0), other

    # Tokens: the reply's usage is the record's, the log line's and the metrics'.
    usage = reply.usage
    tokens = {
        "prompt": usage.prompt_tokens,
        "completion": usage.completion_tokens,
        "cached": usage.cached_tokens,
        "reasoning": usage.reasoning_tokens,
    }
    assert tokens["prompt"] > 0 and tokens["completion"] > 0
    assert tokens == {
        "prompt": record.prompt_tokens,
        "completion": record.completion_tokens,
        "cached": record.cached_tokens,
        "reasoning": record.reasoning_tokens,
    }
    assert tokens == {
        "prompt": line.prompt_tokens,
        "completion": line.completion_tokens,
        "cached": line.cached_tokens,
        "reasoning": line.reasoning_tokens,
    }
    for kind, count in tokens.items():
        sample = one(found, f"{M}tokens_total", persona="scout", model="glm-4.7", kind=kind)
        assert sample == count, kind

    # Rounds and tool calls.
    rounds = len(reply.rounds)
    assert rounds == record.rounds == line.rounds == one(found, f"{M}rounds_total", persona="scout")
    calls = [result for r in reply.rounds for result in r.results]
    tool = calls[0].name if calls else None
    if mode == "builtin":
        assert rounds == 1 and tool is None  # the server searched inside the one call
    else:
        assert tool == "search_web" and calls[0].ok and rounds == 2
        labels = {"persona": "scout", "tool": "search_web", "outcome": "ok"}
        assert one(found, f"{M}tool_calls_total", **labels) == 1
    # The record times the turn from its conversation's lock, the log line from its arrival.
    assert record.duration_ms == pytest.approx(line.duration_ms - line.lock_wait_ms, abs=0.2)
    assert list(record.round_ms) == [round(r.duration_ms, 1) for r in reply.rounds]
