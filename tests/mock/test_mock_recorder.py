"""The recorder: a fake upstream stands in for Z.AI; recordings are scrubbed and replayable."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from generic_framework.config import Settings
from generic_framework.mock import MockServer, load_fixture, load_fixtures
from generic_framework.mock.fixture import FixtureError
from generic_framework.mock.sse import completion_to_events, render_event
from generic_framework.recording.recorder import (
    REDACTED,
    RecordingTransport,
    build_fixture,
    find_secrets,
    record,
    scrub,
    write_fixture,
)
from generic_framework.recording.replay import replay_fixture

REPO = Path(__file__).resolve().parents[2]
KEY = "0123456789abcdef" * 2 + ".AbCdEfGhIjKlMnOp"  # fake, in Z.AI's key shape
ANSWER = {
    "id": "20260109abc",
    "request_id": "20260109abc",
    "created": 1767950000,
    "model": "glm-4.7",
    "choices": [
        {
            "index": 0,
            "finish_reason": "stop",
            "message": {"role": "assistant", "content": "Rain in Nanaimo today [ref_1]."},
        }
    ],
    "usage": {"prompt_tokens": 900, "completion_tokens": 20, "total_tokens": 920},
    "web_search": [
        {"refer": "ref_1", "title": "Forecast", "link": "https://weather.example.ca/nanaimo"}
    ],
}


def settings(**extra: Any) -> Settings:
    return Settings.defaults(
        api_key=KEY, personas_dir=REPO / "personas", llm_max_retries=0, **extra
    )


class Upstream:
    """A fake Z.AI that checks the key, leaks secrets in headers and answers as told."""

    def __init__(self, respond: Any) -> None:
        self.respond = respond
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        assert request.headers["authorization"] == f"Bearer {KEY}"
        self.requests.append(request)
        response: httpx.Response = self.respond(json.loads(request.content))
        response.headers["set-cookie"] = f"session={KEY}"
        response.headers["x-request-id"] = "req-1"
        return response


def gzipped_json(body: Any, status: int = 200) -> httpx.Response:
    return httpx.Response(
        status,
        content=gzip.compress(json.dumps(body).encode()),
        headers={"content-type": "application/json; charset=UTF-8", "content-encoding": "gzip"},
    )


async def test_a_recorded_web_question_is_scrubbed_and_replays(tmp_path: Path) -> None:
    upstream = Upstream(lambda body: gzipped_json(ANSWER))
    out = tmp_path / "nanaimo-weather.json"
    path = await record(
        settings(),
        "// what's the weather in Nanaimo?",
        out,
        transport=httpx.MockTransport(upstream),
    )
    assert path == out
    text = out.read_text()
    assert KEY not in text and "session=" not in text and "req-1" not in text
    fixture = load_fixture(out)
    assert fixture.name == "nanaimo-weather"
    assert fixture.persona == "scout"
    assert fixture.user_input == "// what's the weather in Nanaimo?"
    (exchange,) = fixture.exchanges
    assert exchange.request.path == "/api/paas/v4/chat/completions"
    assert exchange.request.body is not None
    assert exchange.request.body["messages"][-1]["content"] == "what's the weather in Nanaimo?"
    assert exchange.response.body == ANSWER  # decoded from gzip
    assert exchange.response.headers == {"Content-Type": "application/json; charset=UTF-8"}
    assert fixture.expected is not None
    assert fixture.expected.content == "Rain in Nanaimo today [1]."
    assert fixture.expected.citations == ["https://weather.example.ca/nanaimo"]
    async with MockServer([]) as server:
        result = await replay_fixture(fixture, server, settings=settings())
    assert result.ok, result.problems


async def test_a_streamed_turn_is_recorded_as_events(tmp_path: Path) -> None:
    frames = b"".join(render_event(event) for event in completion_to_events(ANSWER))
    upstream = Upstream(
        lambda body: httpx.Response(
            200, content=frames, headers={"content-type": "text/event-stream;charset=UTF-8"}
        )
    )
    out = tmp_path / "streamed.json"
    await record(settings(), "// weather?", out, stream=True,
                 transport=httpx.MockTransport(upstream))  # fmt: skip
    fixture = load_fixture(out)
    events = fixture.exchanges[0].response.events
    assert events is not None and events[-1] == "[DONE]"
    assert fixture.exchanges[0].request.body is not None
    assert fixture.exchanges[0].request.body["stream"] is True
    assert fixture.streams
    async with MockServer([]) as server:
        result = await replay_fixture(fixture, server, settings=settings())
    assert result.ok, result.problems


async def test_an_api_error_is_recorded_as_the_expected_outcome(tmp_path: Path) -> None:
    refusal = {"error": {"code": "1113", "message": "Your account is in arrears"}}
    upstream = Upstream(lambda body: httpx.Response(429, json=refusal))
    out = tmp_path / "broke.json"
    await record(settings(), "hello", out, transport=httpx.MockTransport(upstream))
    fixture = load_fixture(out)
    assert fixture.expected is not None and fixture.expected.error is not None
    assert (fixture.expected.error.type, fixture.expected.error.code) == (
        "InsufficientBalanceError",
        "1113",
    )
    assert fixture.exchanges[0].response.status == 429


async def test_recording_against_the_mock_reproduces_the_bundled_fixture(tmp_path: Path) -> None:
    (bundled,) = [f for f in load_fixtures() if f.name == "function_two_rounds"]
    out = tmp_path / "again.json"
    async with MockServer([bundled]) as server:
        config = Settings.defaults(api_key="mock-key", base_url=server.base_url,
                          personas_dir=REPO / "personas")  # fmt: skip
        await record(config, bundled.user_input, out)
    again = load_fixture(out)
    assert [e.response.body for e in again.exchanges] == [
        e.response.body for e in bundled.exchanges
    ]
    assert again.expected is not None and bundled.expected is not None
    assert again.expected.content == bundled.expected.content


async def test_the_transport_tees_a_stream_without_buffering_it() -> None:
    frames = [render_event(e) for e in completion_to_events(ANSWER)]

    async def chunks() -> Any:
        for frame in frames:
            yield frame

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=chunks(), headers={"content-type": "text/event-stream"})

    recorder = RecordingTransport(httpx.MockTransport(handler))
    received: list[bytes] = []
    async with httpx.AsyncClient(transport=recorder) as client:
        async with client.stream("POST", "https://upstream.test/chat/completions", json={}) as r:
            async for chunk in r.aiter_bytes():
                received.append(chunk)
                if len(received) == 1:  # passed on at once; recorded only at the end
                    assert "response" not in recorder.exchanges[0]
    assert len(received) == len(frames)
    assert b"".join(received) == b"".join(frames)
    assert recorder.exchanges[0]["response"]["events"][-1] == "[DONE]"


def test_scrub_removes_credentials_anywhere() -> None:
    dirty = {
        "user_id": "user-42",
        "messages": [{"role": "user", "content": f"my key is {KEY}, token Bearer abcdefghijkl"}],
        "nested": {"api_key": "x", "Authorization": "y", "list": ["sk-abcdefghijklmnopqrstu"]},
        "jwt": "eyJhbGciOiJIUzI1NiJ9.eyJhcGlfa2V5IjoieCJ9.c2lnbmF0dXJlX2hlcmU",
        "custom": "hunter2-secret-value",
        "safe": "Bearer <ZAI_API_KEY> is a placeholder",
    }
    clean = scrub(dirty, ["hunter2-secret-value"])
    assert "user_id" not in clean and "api_key" not in clean["nested"]
    assert "Authorization" not in clean["nested"]
    assert KEY not in json.dumps(clean)
    assert clean["nested"]["list"] == [REDACTED]
    assert clean["jwt"] == REDACTED
    assert clean["custom"] == REDACTED
    assert clean["safe"] == dirty["safe"]
    assert find_secrets(clean, ["hunter2-secret-value"]) == []
    assert set(find_secrets(dirty)) >= {"$.user_id", "$.messages[0].content", "$.jwt"}


def test_write_fixture_refuses_a_leak(tmp_path: Path) -> None:
    (bundled,) = [f for f in load_fixtures() if f.name == "plain_answer"]
    leaky = bundled.model_copy(update={"description": "made with Bearer abcdefghijklmnop"})
    with pytest.raises(FixtureError, match=r"secrets at: \$.description"):
        write_fixture(leaky, tmp_path / "leak.json")
    assert not (tmp_path / "leak.json").exists()


def test_build_fixture_needs_a_response() -> None:
    with pytest.raises(FixtureError, match="nothing was recorded"):
        build_fixture([{"request": {"path": "/x"}}], name="n", user_input="hi")


def _repository_fixtures() -> list[Path]:
    skip = {".venv", ".venv-ci", ".venv-bench", ".git", "node_modules"}
    found = []
    for path in REPO.rglob("*.json"):
        if skip.intersection(path.relative_to(REPO).parts):
            continue
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (ValueError, UnicodeDecodeError):
            continue
        if isinstance(data, dict) and "exchanges" in data:
            found.append(path)
    return found


def test_no_fixture_in_the_repository_holds_a_secret() -> None:
    fixtures = _repository_fixtures()
    assert len(fixtures) >= 15
    leaks = {
        str(path.relative_to(REPO)): find_secrets(json.loads(path.read_text(encoding="utf-8")))
        for path in fixtures
    }
    assert {path: found for path, found in leaks.items() if found} == {}


async def test_recording_with_an_unknown_persona_is_a_configuration_error(tmp_path: Path) -> None:
    from generic_framework.errors import ConfigError

    upstream = Upstream(lambda body: gzipped_json(ANSWER))
    with pytest.raises(ConfigError, match=r"unknown persona 'nobody'; available: .*scout"):
        await record(settings(), "hi", tmp_path / "x.json", persona="nobody",
                     transport=httpx.MockTransport(upstream))  # fmt: skip
    assert upstream.requests == []
    assert not (tmp_path / "x.json").exists()
