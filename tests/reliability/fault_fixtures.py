"""The fault matrix: one fixture per fault, and what the persona must make of it.

``python tests/reliability/fault_fixtures.py`` rewrites ``fixtures/faults/``; a test fails when the
checked-in files differ from what this module builds. Requests are built the way the persona of
``personas/probe.toml`` builds them (``fixture_parts.Conversation``), and every tool message holds
exactly what the persona sends for that call (computed with the persona's own tool runner), so
the mock only answers a persona that does the right thing.

Each :class:`Case` names the fault, the outcome (a typed error, or an answer with its
``stop_reason``: the fixture's ``expected``), how many requests must reach the upstream, and the
deadline within which the turn must end under :data:`SETTINGS`.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import helper_paths  # noqa: F401  (tests/mock on sys.path, also when run as a script)
from fault_tools import explode, hang
from fixture_parts import SEARCH_TOOL, Conversation, call, completion, fixture

from generic_framework.core.persona import CONTENT_FILTER_NOTICE, DEFAULT_FINAL_ANSWER_FALLBACK
from generic_framework.core.tooling import build_plans, run_call
from generic_framework.mock.fixture import Fixture
from generic_framework.mock.sse import completion_to_events
from generic_framework.tools import EXAMPLE_TOOLS, WebSearch
from generic_framework.wire.messages import ToolCall

HERE = Path(__file__).resolve().parent
FIXTURES = HERE / "fixtures" / "faults"
PERSONAS = HERE / "personas"
PERSONA = "probe"

TOOL_TIMEOUT = 0.3
LLM_TIMEOUT = 1.0
RETRIES = 2
SETTINGS: dict[str, Any] = {
    "llm_timeout": LLM_TIMEOUT,
    "llm_connect_timeout": LLM_TIMEOUT,
    "llm_pool_timeout": LLM_TIMEOUT,
    "llm_max_retries": RETRIES,
    "tool_timeout": TOOL_TIMEOUT,
    "max_tool_rounds": 2,
}
"""The settings every case runs with (environment names in lower case)."""

TOOLS = [explode, hang, EXAMPLE_TOOLS["calculate"]]
WEB_TOOLS = [SEARCH_TOOL, *(tool.to_wire() for tool in TOOLS)]
ATTEMPTS = RETRIES + 1
ANSWER = "All good: the answer arrived in the end."
SYSTEM_PROMPT = "You are Probe, a persona that exists to be driven into failures by tests."
"""The system prompt of ``personas/probe.toml`` (not compared by the mock; shown to readers)."""


@dataclass(frozen=True)
class Case:
    """One row of the fault matrix.

    Attributes:
        name: the fixture's name (and the test id).
        fault: the fault, in words (the table in docs/reliability.md).
        build: makes the fixture.
        requests: requests that must reach the upstream.
        deadline: seconds within which the turn must end.
        stream: run ``Persona.stream`` instead of ``respond``.
        real_waits: keep the retry waits (the Retry-After case); others run without them.
        refused: point the persona at a closed port instead of the mock.
        service: part of the subset run through the service process too.
    """

    name: str
    fault: str
    build: Callable[[str, str], Fixture] | None = field(repr=False)
    requests: int
    deadline: float = 2.0
    stream: bool = False
    real_waits: bool = False
    refused: bool = False
    service: bool = False

    @property
    def user_input(self) -> str:
        """The message of the case: unique, so each case matches only its own fixture."""
        return f"// fault case {self.name}"

    def fixture(self) -> Fixture | None:
        """The case's fixture (None when the case never reaches the mock)."""
        if self.build is None:
            return None
        made = self.build(self.name, self.user_input)
        for exchange in made.exchanges:
            messages = (exchange.request.body or {}).get("messages") or []
            if messages and messages[0].get("role") == "system":
                messages[0]["content"] = SYSTEM_PROMPT
        return made.model_copy(update={"description": self.fault})


# ------------------------------------------------------------------------------ builders


def _tool_text(raw: dict[str, Any]) -> str:
    """What the probe persona sends back for ``raw`` (its own runner computes it)."""
    _, web_plan = build_plans(
        PERSONA, TOOLS, WebSearch(mode="builtin"), _no_search, tools_always=False
    )
    call_model = ToolCall.model_validate({k: v for k, v in raw.items() if k != "index"})
    done = asyncio.run(run_call(call_model, web_plan, time_limit=TOOL_TIMEOUT, persona=PERSONA))
    return done.result.content


def _no_search() -> Any:
    raise AssertionError("the probe persona searches server-side")


def _talk(user_input: str, stream: bool = False) -> Conversation:
    return Conversation(user_input, stream=stream, web_tools=WEB_TOOLS)


def _settings(**extra: Any) -> dict[str, Any]:
    return {**SETTINGS, **extra}


def _answered(
    name: str,
    user_input: str,
    faults: list[dict[str, Any]],
    *,
    stream: bool = False,
    description: str = "",
) -> Fixture:
    """One exchange with faults, then (if the client gets there) a plain answer."""
    talk = _talk(user_input, stream)
    talk.exchange(completion(name, ANSWER), faults=faults)
    return fixture(name, description, user_input, talk, _settings(), PERSONA,
                   content=ANSWER, stop_reason="completed", rounds=1)  # fmt: skip


def _failing(
    name: str,
    user_input: str,
    faults: list[dict[str, Any]],
    error: str,
    code: str | None = None,
    *,
    stream: bool = False,
) -> Fixture:
    """One exchange whose faults outlast every retry: the turn ends with ``error``."""
    talk = _talk(user_input, stream)
    talk.exchange(completion(name, ANSWER), faults=faults)
    expected = {"type": error, **({"code": code} if code else {})}
    return fixture(name, "", user_input, talk, _settings(), PERSONA, error=expected)


def _http(status: int, code: str, times: int | None = 1, retry_after: float | None = None) -> Any:
    fault: dict[str, Any] = {"kind": "http_error", "status": status, "code": code, "times": times}
    if retry_after is not None:
        fault["retry_after"] = retry_after
    fault["message"] = f"injected {status}/{code}"
    return fault


def _tool_round(
    name: str, user_input: str, calls: list[dict[str, Any]], *, exact: bool = False
) -> Fixture:
    """The model calls ``calls``; the persona answers each; the model then answers."""
    talk = _talk(user_input)
    first = completion(f"{name}-1", "", reasoning="Use the tools.", calls=calls)
    talk.exchange(first)
    talk.run_tools(first, [_tool_text(item) for item in calls])
    talk.exchange(completion(f"{name}-2", ANSWER))
    made = fixture(name, "", user_input, talk, _settings(), PERSONA,
                   content=ANSWER, stop_reason="completed", rounds=2)  # fmt: skip
    if exact:
        made = made.model_copy(update={"match": made.match.model_copy(update={"tools": "exact"})})
    return made


def _runaway(name: str, user_input: str, *, calls_when_forced: bool) -> Fixture:
    """A model that calls a tool every round, even (optionally) when no tools are offered."""
    talk = _talk(user_input)
    for number in (1, 2):
        step = completion(
            f"{name}-{number}",
            "",
            calls=[call(f"{name}-{number}", "calculate", {"expression": f"{number} + 1"}, 0)],
        )
        talk.exchange(step, note=f"tool round {number}")
        talk.run_tools(step, [_tool_text(c) for c in step["choices"][0]["message"]["tool_calls"]])
    if calls_when_forced:
        last = completion(
            f"{name}-3", "", calls=[call(f"{name}-3", "calculate", {"expression": "3 + 1"}, 0)]
        )
        content = DEFAULT_FINAL_ANSWER_FALLBACK
    else:
        last = completion(f"{name}-3", ANSWER)
        content = ANSWER
    talk.exchange(last, tools=False, forced=True, note="the cap is reached: no tools offered")
    made = fixture(name, "", user_input, talk, _settings(), PERSONA,
                   content=content, stop_reason="max_rounds", rounds=3)  # fmt: skip
    if calls_when_forced:
        made = made.model_copy(update={"match": made.match.model_copy(update={"tools": "exact"})})
    return made


def _error_frame(name: str, user_input: str) -> Fixture:
    """A stream that carries two chunks, then an error frame instead of the rest."""
    talk = _talk(user_input, stream=True)
    talk.exchange(completion(name, ANSWER))
    events = [e for e in completion_to_events(completion(name, ANSWER)) if e != "[DONE]"][:2]
    error = {"error": {"code": "500", "message": "Internal error while generating"}}
    talk.exchanges[-1]["response"]["events"] = [*events, error]
    return fixture(name, "", user_input, talk, _settings(), PERSONA,
                   error={"type": "ServerError", "code": "500"})  # fmt: skip


def _content_filter(name: str, user_input: str) -> Fixture:
    talk = _talk(user_input)
    talk.exchange(completion(name, ANSWER), faults=[_http(400, "1301")])
    notice = CONTENT_FILTER_NOTICE
    return fixture(name, "", user_input, talk, _settings(), PERSONA,
                   content=notice, stop_reason="content_filter", rounds=0)  # fmt: skip


PROXY_PAGE = (
    "<html><head><title>502 Bad Gateway</title></head>"
    "<body><center><h1>502 Bad Gateway</h1></center><hr><center>nginx</center></body></html>"
)


def _cases() -> list[Case]:
    def answered(*faults: dict[str, Any], stream: bool = False) -> Callable[[str, str], Fixture]:
        return lambda n, u: _answered(n, u, list(faults), stream=stream)

    def failing(
        error: str, code: str | None, *faults: dict[str, Any], stream: bool = False
    ) -> Callable[[str, str], Fixture]:
        return lambda n, u: _failing(n, u, list(faults), error, code, stream=stream)

    explode_call = call("explode", "explode", {"reason": "test"}, 0)
    hang_call = call("hang", "hang", {"seconds": 30}, 0)
    unknown_call = call("teleport", "teleport", {"to": "Mars"}, 0)
    bad_json_call = {**call("badjson", "explode", {}, 0)}
    bad_json_call["function"] = {"name": "explode", "arguments": '{"reason": "unterminated'}
    never = None
    # fmt: off
    return [
        Case("rate_limit_1302", "429 / 1302, no Retry-After, twice",
             answered(_http(429, "1302", 2)), 3, service=True),
        Case("rate_limit_1302_retry_after", "429 / 1302 with Retry-After: 0.25, twice",
             answered(_http(429, "1302", 2, retry_after=0.25)), 3, real_waits=True),
        Case("rate_limit_1302_persistent", "429 / 1302 on every attempt",
             failing("RateLimitError", "1302", _http(429, "1302", never, 0.1)), ATTEMPTS,
             service=True),
        Case("rate_limit_1302_stream", "429 / 1302 once, on a streamed turn",
             answered(_http(429, "1302"), stream=True), 2, stream=True),
        Case("frequency_1303", "429 / 1303 once", answered(_http(429, "1303")), 2),
        Case("overloaded_1305", "503 / 1305 on every attempt",
             failing("RateLimitError", "1305", _http(503, "1305", never)), ATTEMPTS),
        Case("model_overloaded_1312", "429 / 1312 once", answered(_http(429, "1312")), 2),
        Case("no_balance_1113", "429 / 1113 (no balance)",
             failing("InsufficientBalanceError", "1113", _http(429, "1113")), 1, service=True),
        Case("bad_key_401", "401 / 1002 (key refused)",
             failing("AuthenticationError", "1002", _http(401, "1002")), 1),
        Case("illegal_messages_1214", "400 / 1214 (messages illegal)",
             failing("BadRequestError", "1214", _http(400, "1214")), 1),
        Case("prompt_too_long_1261", "400 / 1261 (prompt too long)",
             failing("ContextTooLongError", "1261", _http(400, "1261")), 1),
        Case("unsafe_content_1301", "400 / 1301 (content filter)", _content_filter, 1,
             service=True),
        Case("server_error_500", "500 / 500 on every attempt",
             failing("ServerError", "500", _http(500, "500", never)), ATTEMPTS),
        Case("unavailable_503", "503 with a plain-text body, once",
             answered({"kind": "malformed_body", "status": 503, "content_type": "text/plain",
                       "body": "Service Unavailable"}), 2),
        Case("connection_refused", "connection refused (nothing listens)",
             None, ATTEMPTS, refused=True),
        Case("dropped_before_response", "connection closed before any byte, every attempt",
             failing("APIConnectionError", None, {"kind": "drop_connection", "times": never}),
             ATTEMPTS),
        Case("dropped_mid_body", "connection closed after 40 bytes of the body, once",
             answered({"kind": "drop_connection", "after_bytes": 40}), 2),
        Case("read_timeout", "no body within LLM_TIMEOUT (1 s), every attempt",
             failing("APITimeoutError", None, {"kind": "stall_stream", "seconds": 30,
                                                "times": never}),
             ATTEMPTS, deadline=ATTEMPTS * LLM_TIMEOUT + 2, service=True),
        Case("malformed_json", "200 with the JSON body cut in half",
             failing("ResponseValidationError", None, {"kind": "malformed_body"}), 1),
        Case("empty_body", "200 with an empty body",
             failing("ResponseValidationError", None, {"kind": "malformed_body", "body": ""}), 1),
        Case("proxy_html_page", "502 with a proxy's HTML page, every attempt",
             failing("ServerError", None, {"kind": "malformed_body", "status": 502,
                                           "content_type": "text/html", "body": PROXY_PAGE,
                                           "times": never}),
             ATTEMPTS, service=True),
        Case("stream_broken_midway", "stream dropped after 2 events",
             failing("APIConnectionError", None, {"kind": "break_stream", "after_events": 2},
                     stream=True), 1, stream=True, service=True),
        Case("stream_broken_at_start", "stream dropped before its first event, once",
             answered({"kind": "break_stream", "after_events": 0}, stream=True), 2,
             stream=True),
        Case("stream_stalled", "stream silent after 2 events (LLM_TIMEOUT 1 s)",
             failing("APITimeoutError", None, {"kind": "stall_stream", "after_events": 2,
                                                "seconds": 30}, stream=True),
             1, deadline=LLM_TIMEOUT + 2, stream=True),
        Case("stream_error_frame", "an error frame after 2 chunks of a stream", _error_frame, 1,
             stream=True),
        Case("tool_raises", "a tool raises", lambda n, u: _tool_round(n, u, [explode_call]), 2,
             service=True),
        Case("tool_hangs", "a tool hangs past TOOL_TIMEOUT (0.3 s)",
             lambda n, u: _tool_round(n, u, [hang_call]), 2, deadline=TOOL_TIMEOUT + 2),
        Case("unknown_tool", "the model calls a tool that does not exist",
             lambda n, u: _tool_round(n, u, [unknown_call], exact=True), 2),
        Case("bad_json_arguments", "the model sends arguments that are not JSON",
             lambda n, u: _tool_round(n, u, [bad_json_call]), 2),
        Case("runaway_tools", "the model calls a tool every round (cap 2)",
             lambda n, u: _runaway(n, u, calls_when_forced=False), 3, service=True),
        Case("runaway_tools_when_forced", "... and still calls one when no tools are offered",
             lambda n, u: _runaway(n, u, calls_when_forced=True), 3),
    ]
    # fmt: on


CASES = _cases()


def build_all() -> dict[str, str]:
    """File name -> JSON text of every fault fixture."""
    built = {case.name: case.fixture() for case in CASES}
    return {f"{name}.json": made.to_json() for name, made in built.items() if made is not None}


def main(target: Path = FIXTURES) -> None:
    target.mkdir(parents=True, exist_ok=True)
    for name, text in build_all().items():
        (target / name).write_text(text, encoding="utf-8")
        print(f"wrote {target / name}")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else FIXTURES)
