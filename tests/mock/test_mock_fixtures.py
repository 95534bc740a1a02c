"""The fixture format: schema, loading, the bundled set, SSE conversion, normalisation."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import pytest
from mock_helpers import chat, completion, exchange, make_fixture, simple, user
from pydantic import ValidationError

from generic_framework.errors import ConfigError
from generic_framework.mock import (
    MockServer,
    bundled_examples,
    bundled_fixture_paths,
    create_app,
    load_fixtures,
)
from generic_framework.mock.fixture import FixtureError, RecordedResponse, load_fixture
from generic_framework.mock.normalize import canonical_text, chat_shape, turn_start
from generic_framework.mock.schema import fixture_schema_text
from generic_framework.mock.server import serve_forever
from generic_framework.mock.sse import completion_to_events, events_to_completion, parse_sse

REPO = Path(__file__).resolve().parents[2]
SCHEMA = REPO / "docs" / "design" / "fixture.schema.json"


def test_the_checked_in_schema_is_the_generated_one() -> None:
    assert SCHEMA.read_text(encoding="utf-8") == fixture_schema_text(), (
        "regenerate: python -m generic_framework.mock.schema > docs/design/fixture.schema.json"
    )


def test_the_bundled_set() -> None:
    fixtures = load_fixtures()
    assert len(fixtures) == len(bundled_fixture_paths()) >= 15
    for fixture in fixtures:
        assert fixture.source is not None
        assert fixture.source.name == f"{fixture.name}.json"
        expected = "scout-client" if fixture.name.endswith("client_mode") else "scout"
        for prefix in ("helper", "keeper"):
            if fixture.name.startswith(prefix + "_"):
                expected = prefix
        assert fixture.persona == expected
        assert fixture.description and fixture.user_input and fixture.expected
    names = {f.name for f in fixtures}
    assert {"web_search_nanaimo", "web_search_nanaimo_stream", "rate_limited_then_ok"} <= names
    create_app(fixtures)  # every recorded request passes the mock's own validation


def test_the_streamed_nanaimo_demo_puts_sources_on_the_last_chunk_only() -> None:
    (fixture,) = [f for f in load_fixtures() if f.name == "web_search_nanaimo_stream"]
    events = fixture.exchanges[0].response.events
    assert events is not None and events[-1] == "[DONE]"
    chunks = [e for e in events if isinstance(e, dict)]
    assert [("web_search" in c) for c in chunks] == [False] * (len(chunks) - 1) + [True]
    assert fixture.streams


def test_examples_put_the_main_demo_first() -> None:
    examples = bundled_examples()
    assert examples[0] == "// what's the weather in Nanaimo?"
    assert len(examples) == len(set(examples))
    assert examples[-1] == "What is the capital of Canada?"
    # scout cannot ask the client-mode question (its search runs server-side)
    assert "// when is low tide in Nanaimo today?" not in examples
    assert "// when is low tide in Nanaimo today?" in bundled_examples(persona=None)


FAULT_DEMOS = {
    "Write a haiku about the sea.",  # 1113: the account balance is empty
    "Tell me a short story about a lighthouse keeper.",  # the stream breaks
    "Repeat the phrase the moderation filter blocks.",  # 1301
    "Suggest a name for a grey cat.",  # 1302 twice, then the answer
    "// calculate pi to ever more digits",  # stopped by the cap on rounds
}


def test_fault_demos_and_client_turns_stay_out_of_the_question_lists() -> None:
    everyone = bundled_examples(persona=None, endpoint=None)
    assert not FAULT_DEMOS & set(everyone)
    # a chat line cannot offer a client's own tool or output format
    assert "What is the weather in Nanaimo?" not in everyone
    assert "Describe the weather in Nanaimo." not in everyone
    # nor the question asked with a bundled picture, which typed alone is not recorded
    assert "what is in this picture?" not in everyone
    # the failure demonstrations stay reachable for those who look for them
    assert set(bundled_examples(persona=None, endpoint=None, faults=True)) == FAULT_DEMOS
    assert "// weather in Nanaimo today" in bundled_examples()


def write(path: Path, data: Any) -> Path:
    path.write_text(data if isinstance(data, str) else json.dumps(data), encoding="utf-8")
    return path


def test_load_errors_name_the_file_and_the_problem(tmp_path: Path) -> None:
    with pytest.raises(FixtureError, match="no fixture file or directory"):
        load_fixtures(tmp_path / "missing")
    with pytest.raises(FixtureError, match=r"broken\.json is not valid JSON"):
        load_fixture(write(tmp_path / "broken.json", "{"))
    invalid = simple("x", "hi", "ho").model_dump(mode="json")
    invalid["exchanges"][0]["response"]["status"] = 99
    with pytest.raises(FixtureError, match=r"invalid\.json: exchanges\.0\.response\.status"):
        load_fixture(write(tmp_path / "invalid.json", invalid))
    with pytest.raises(FixtureError, match=r"fixture .*nope\.json: user_input: Field required"):
        load_fixture(write(tmp_path / "nope.json", {"name": "n", "exchanges": []}))


def test_two_fixtures_with_one_name_are_refused(tmp_path: Path) -> None:
    write(tmp_path / "a.json", simple("same", "hi", "a").model_dump(mode="json"))
    write(tmp_path / "b.json", simple("same", "ho", "b").model_dump(mode="json"))
    with pytest.raises(FixtureError, match="two fixtures are named 'same'"):
        load_fixtures(tmp_path)


def test_a_fixture_whose_request_the_mock_would_reject_is_refused() -> None:
    bad = make_fixture("bad", exchange(chat(user("hi"), temperature=2), completion("x")))
    with pytest.raises(FixtureError, match="exchange 0 records a request the mock rejects: 1210"):
        create_app([bad])


def test_a_response_has_a_body_or_events_not_both() -> None:
    with pytest.raises(ValidationError, match="either a JSON 'body' or a list of SSE 'events'"):
        RecordedResponse(body={}, events=["[DONE]"])
    with pytest.raises(ValidationError):
        RecordedResponse()


def test_fixture_json_round_trips(tmp_path: Path) -> None:
    original = simple("trip", "hi", "ho", description="d", settings={"max_tool_rounds": 2})
    again = load_fixture(write(tmp_path / "trip.json", original.to_json()))
    assert again.model_dump() == original.model_dump()
    assert "faults" not in original.to_json()  # empty lists are left out of the file


# ------------------------------------------------------------------ SSE


def test_completion_and_events_convert_both_ways() -> None:
    calls = [
        {"id": "c1", "index": 0, "type": "function",
         "function": {"name": "f", "arguments": "{\"a\":1}"}},
        {"id": "c2", "index": 1, "type": "function", "function": {"name": "g", "arguments": "{}"}},
    ]  # fmt: skip
    body = completion("Some words  to split into chunks.", calls=calls, reasoning="think hard")
    body["web_search"] = [{"refer": "ref_1"}]
    events = completion_to_events(body)
    back = events_to_completion(events)
    message = back["choices"][0]["message"]
    assert message["content"] == "Some words  to split into chunks."
    assert message["reasoning_content"] == "think hard"
    assert message["tool_calls"] == [{**c, "index": i} for i, c in enumerate(calls)]
    assert back["choices"][0]["finish_reason"] == "tool_calls"
    assert (back["usage"], back["web_search"]) == (body["usage"], body["web_search"])


def test_fragmented_tool_calls_are_assembled_by_index() -> None:
    events: list[Any] = [
        {"id": "x", "choices": [{"delta": {"tool_calls": [
            {"index": 0, "id": "c1", "type": "function", "function": {"name": "f", "arguments": ""}}
        ]}}]},
        {"id": "x", "choices": [{"delta": {"tool_calls": [
            {"index": 0, "function": {"arguments": "{\"ci"}}]}}]},
        {"id": "x", "choices": [{"delta": {"tool_calls": [
            {"index": 0, "function": {"arguments": "ty\":1}"}}]}, "finish_reason": "tool_calls"}]},
        "[DONE]",
    ]  # fmt: skip
    (call,) = events_to_completion(events)["choices"][0]["message"]["tool_calls"]
    assert call["function"] == {"name": "f", "arguments": '{"city":1}'}
    assert call["id"] == "c1"


def test_parse_sse_skips_comments_and_joins_lines() -> None:
    text = ': a comment\r\ndata: {"a": 1}\r\n\r\ndata: line one\ndata: line two\n\ndata: [DONE]\n\n'
    assert parse_sse(text) == [{"a": 1}, "line one\nline two", "[DONE]"]


# ------------------------------------------------------------------ normalisation


def test_canonical_text() -> None:
    assert canonical_text(' {"b": 1, "a": [1, 2]} ') == '{"a":[1,2],"b":1}'
    assert canonical_text("{not json") == "{not json"
    assert canonical_text(None) == ""
    assert canonical_text({"x": 1}) == '{"x":1}'


def test_the_turn_starts_after_the_last_answered_turn() -> None:
    answered = {"role": "assistant", "content": "done"}
    calling = {"role": "assistant", "tool_calls": [{"id": "1"}]}
    messages: list[Any] = [{"role": "system"}, user("a"), answered, user("b"), calling, user("c")]
    assert turn_start(messages) == 3
    assert turn_start(messages[:2]) == 0
    assert chat_shape({"messages": messages, "stream": True}).stream


def test_serve_forever_reports_and_runs_uvicorn(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: dict[str, Any] = {}

    def fake_run(self: Any, sockets: Any = None) -> None:
        port = sockets[0].getsockname()[1]
        seen.update(host=self.config.host, port=port, app=self.config.app)

    monkeypatch.setattr("uvicorn.Server.run", fake_run)
    lines: list[str] = []
    serve_forever([], host="127.0.0.1", port=0, latency_ms=5, echo=lines.append)
    assert seen["host"] == "127.0.0.1" and seen["port"] > 0  # bound before uvicorn runs
    assert len(seen["app"].fixtures) == len(bundled_fixture_paths())
    assert seen["app"].latency == 0.005
    # The port the system chose for --port 0, not 0.
    assert lines[1] == f"  general endpoint: http://127.0.0.1:{seen['port']}/api/paas/v4"


def test_serve_forever_refuses_a_taken_port_before_serving() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        lines: list[str] = []
        with pytest.raises(ConfigError, match=rf"cannot listen on 127\.0\.0\.1:{port} .*in use"):
            serve_forever([], host="127.0.0.1", port=port, echo=lines.append)
    assert lines == []


def test_the_server_stops_and_can_be_restarted() -> None:
    server = MockServer([simple("x", "hi", "ho")])
    with server:
        first = server.port
    with pytest.raises(RuntimeError, match="not running"):
        _ = server.url
    with server:
        assert server.port > 0
    assert first > 0
