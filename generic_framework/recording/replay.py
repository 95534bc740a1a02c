"""Replay fixtures through the real Persona against the in-process mock (the replay command).

For each fixture: serve only that fixture, run its ``user_input`` through the persona it names
(``stream()`` when the fixture was recorded streaming, ``respond()`` otherwise), then check that

1. every request matched a recorded one (no ``mock_no_match``);
2. the exchanges were reached in order, each of them;
3. the outcome equals :attr:`Fixture.expected`: the reply's content, stop reason, number of
   rounds and cited URLs, or the error class and code.

The persona comes from ``PERSONAS_DIR`` when a file there has the fixture's persona name;
otherwise it is rebuilt from the fixture (system prompt and example tools of the first request),
so fixtures replay without persona files.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TextIO

from pydantic import SecretStr

from generic_framework.config import Settings
from generic_framework.core.events import Done
from generic_framework.core.options import JsonSchemaFormat, TurnOptions
from generic_framework.core.persona import Persona
from generic_framework.core.reply import Reply
from generic_framework.errors import ConfigError, GLMError
from generic_framework.memory.tools import MEMORY_TOOL_NAMES
from generic_framework.mock.fixture import Fixture, bundled_fixtures_dir, load_fixtures
from generic_framework.mock.server import MockServer
from generic_framework.pictures import file_url
from generic_framework.runtime import Runtime
from generic_framework.tools import EXAMPLE_TOOLS, SEARCH_TOOL_NAME, FunctionTool, WebSearch
from generic_framework.tools.reader import READ_TOOL_NAME
from generic_framework.tools.web_search import WebSearchMode
from generic_framework.turns import Ask, OptionRefused
from generic_framework.wire.messages import AssistantMessage, FunctionToolSpec, ToolMessage

__all__ = [
    "ReplayResult",
    "default_replay_paths",
    "persona_for",
    "render_table",
    "replay_fixture",
    "replay_fixtures",
    "replay_main",
]

REPLAY_KEY = "replay-mock-key"
TURN_TIMEOUT = 120.0
USER_FIXTURES = Path("tests/fixtures")


@dataclass(slots=True)
class ReplayResult:
    """The outcome of replaying one fixture.

    Attributes:
        fixture: the fixture's name.
        path: the file it came from, if any.
        ok: True when every check passed.
        rounds: model calls the persona made.
        ms: wall time of the turn.
        persona: ``file`` (from PERSONAS_DIR) or ``fixture`` (rebuilt from the fixture).
        problems: what went wrong, one line each.
    """

    fixture: str
    path: str | None
    ok: bool
    rounds: int
    ms: float
    persona: str
    problems: list[str] = field(default_factory=list)


def default_replay_paths() -> list[Path]:
    """The bundled fixtures, and ``tests/fixtures`` when it exists in the working directory."""
    paths = [bundled_fixtures_dir()]
    if USER_FIXTURES.is_dir():
        paths.append(USER_FIXTURES)
    return paths


# ------------------------------------------------------------------ personas


def _chat_bodies(fixture: Fixture) -> Iterator[dict[str, Any]]:
    for exchange in fixture.exchanges:
        body = exchange.request.body
        if body and "messages" in body:
            yield body


def _offered(fixture: Fixture) -> list[dict[str, Any]]:
    for body in _chat_bodies(fixture):
        if body.get("tools"):
            return list(body["tools"])
    return []


def _system_prompt(fixture: Fixture) -> str:
    first = next(_chat_bodies(fixture), {})
    return str(
        next(
            (m.get("content", "") for m in first.get("messages", []) if m.get("role") == "system"),
            "",
        )
    )


def _client_tools(fixture: Fixture) -> set[str]:
    """The functions an OpenAI client offered and runs itself (none for a persona's turn)."""
    return {t["function"]["name"] for t in fixture.client.tools} if fixture.client else set()


def _tools_offered(fixture: Fixture) -> tuple[list[str], WebSearchMode]:
    """The function names offered, and the web-search mode the offer implies (``search_web``
    is ``mcp`` when the fixture records a call to an MCP endpoint, ``client`` otherwise)."""
    offered = _offered(fixture)
    names = [
        t["function"]["name"]
        for t in offered
        if t.get("type") == "function" and t["function"]["name"] not in _client_tools(fixture)
    ]
    mode: WebSearchMode = (
        "builtin" if any(t.get("type") == "web_search" for t in offered) else "off"
    )
    if SEARCH_TOOL_NAME in names:
        paths = (exchange.request.path for exchange in fixture.exchanges)
        mode = "mcp" if any(path.endswith("/mcp") for path in paths) else "client"
        names.remove(SEARCH_TOOL_NAME)
        if READ_TOOL_NAME in names:  # offered by those modes on // messages with a URL
            names.remove(READ_TOOL_NAME)
    return names, mode


def _rebuilt(fixture: Fixture, runtime: Runtime) -> Persona:
    """A persona equivalent to the one that recorded ``fixture``: its prompt and tools."""
    names, mode = _tools_offered(fixture)
    # remember and forget: a persona with memory, whose turn service offers them.
    memory = set(names) >= MEMORY_TOOL_NAMES
    names = [name for name in names if not memory or name not in MEMORY_TOOL_NAMES]
    unknown = [name for name in names if name not in EXAMPLE_TOOLS]
    if unknown:
        raise ConfigError(
            f"fixture {fixture.name!r} offers {', '.join(unknown)}, which are not example tools; "
            f"put a persona file named {fixture.persona!r} in PERSONAS_DIR to replay it"
        )
    tools: list[FunctionTool] = [EXAMPLE_TOOLS[name] for name in names]
    web = fixture.user_input.lstrip().startswith("//")
    return Persona(
        name=fixture.persona,
        system_prompt=_system_prompt(fixture),
        tools=tools,
        web_search=WebSearch(mode=mode),
        tools_always=bool(tools) and not web,
        memory={"enabled": memory},
        runtime=runtime,
    )


def persona_for(fixture: Fixture, runtime: Runtime) -> tuple[Persona, str]:
    """The persona to replay ``fixture`` with, and where it came from (``file``/``fixture``)."""
    if runtime.personas_dir.is_dir() and fixture.persona in runtime.specs():
        return runtime.persona(fixture.persona), "file"
    return _rebuilt(fixture, runtime), "fixture"


def _settings_for(fixture: Fixture, base: Settings, server: MockServer, scratch: Path) -> Settings:
    values = base.model_dump()
    values.update(fixture.settings)
    url = server.coding_base_url if fixture.endpoint == "coding" else server.base_url
    values.update(base_url=url, api_key=SecretStr(REPLAY_KEY))
    # What a replayed turn keeps (a persona's memory) goes to a scratch store, never the
    # configured database.
    values.update(data_dir=scratch, database_url=None)
    return Settings.defaults(**values)


# ------------------------------------------------------------------ running


def _client_options(fixture: Fixture, request: int) -> TurnOptions:
    """The OpenAI client's part of the turn (its tools, output format) for the fixture's
    ``request``-th chat request: its tool rounds are what that request carries after the
    question, as the service reads them from the client's messages."""
    assert fixture.client is not None
    client = fixture.client
    body = list(_chat_bodies(fixture))[request]
    messages = body.get("messages", [])
    question = max(i for i, m in enumerate(messages) if m.get("role") == "user")
    continuation = tuple(
        AssistantMessage.model_validate(m) if m.get("role") == "assistant" else
        ToolMessage.model_validate(m)
        for m in messages[question + 1 :]
    )  # fmt: skip
    output = client.response_format or {}
    schema = output.get("json_schema") if output.get("type") == "json_schema" else None
    return TurnOptions(
        json_object=output.get("type") == "json_object",
        json_schema=JsonSchemaFormat(schema["name"], schema["schema"]) if schema else None,
        client_tools=tuple(FunctionToolSpec.model_validate(tool) for tool in client.tools),
        tool_choice="auto" if client.tools else None,
        continuation=continuation,
    )


async def _run_client(persona: Persona, fixture: Fixture) -> Reply:
    """A turn of an OpenAI client: asked again with the tools' results while the model calls
    the client's tools and the fixture records the next request."""
    requests = len(list(_chat_bodies(fixture)))
    reply = await persona.respond(fixture.user_input, options=_client_options(fixture, 0))
    sent = 1
    while reply.tool_calls and sent < requests:
        options = _client_options(fixture, sent)
        reply = await persona.respond(fixture.user_input, options=options)
        sent += 1
    return reply


async def _run(
    persona: Persona, fixture: Fixture, runtime: Runtime, images: tuple[str, ...]
) -> Reply:
    if fixture.client is not None:
        return await _run_client(persona, fixture)
    # Through the turn service, as every edge runs a turn (a persona's memory is its part;
    # the pictures are checked and, for a model that cannot see, described there).
    ask = Ask(persona, fixture.user_input, None, images=images)
    turns = runtime.turns
    if not fixture.streams:
        return await turns.respond(ask)
    reply: Reply | None = None
    async for event in await turns.stream(ask):
        if isinstance(event, Done):
            reply = event.reply
    if reply is None:
        raise RuntimeError("the stream ended without a reply")
    return reply


def _picture_urls(fixture: Fixture) -> tuple[str, ...]:
    """The fixture's pictures as the ``data:`` URLs an edge sends.

    Raises:
        ConfigError: a picture file cannot be read.
    """
    urls = []
    for path in fixture.picture_paths():
        try:
            urls.append(file_url(path))
        except OSError as exc:
            raise ConfigError(f"cannot read the picture {path}: {exc.strerror}") from None
    return tuple(urls)


def _error_problems(fixture: Fixture, error: GLMError | None) -> list[str]:
    expected = fixture.expected.error if fixture.expected else None
    if expected is None:
        return [] if error is None else [f"the turn failed: {type(error).__name__}: {error}"]
    if error is None:
        return [f"expected {expected.type} but the turn succeeded"]
    names = {cls.__name__ for cls in type(error).__mro__}
    problems = []
    if expected.type not in names:
        problems.append(f"expected {expected.type}, got {type(error).__name__}: {error}")
    if expected.code is not None and error.code != expected.code:
        problems.append(f"expected error code {expected.code}, got {error.code}")
    return problems


def _reply_problems(fixture: Fixture, reply: Reply) -> list[str]:
    expected = fixture.expected
    if expected is None:
        return []
    problems = []
    if expected.content is not None and reply.content != expected.content:
        problems.append(f"content: expected {expected.content!r}, got {reply.content!r}")
    if expected.stop_reason is not None and reply.stop_reason != expected.stop_reason:
        problems.append(f"stop_reason: expected {expected.stop_reason}, got {reply.stop_reason}")
    if expected.rounds is not None and len(reply.rounds) != expected.rounds:
        problems.append(f"rounds: expected {expected.rounds}, got {len(reply.rounds)}")
    urls = [citation.url for citation in reply.citations]
    if expected.citations is not None and urls != expected.citations:
        problems.append(f"citations: expected {expected.citations}, got {urls}")
    return problems


def _exchange_problems(fixture: Fixture, server: MockServer) -> list[str]:
    catalog = server.app.catalog
    problems = [
        f"a request had no recorded answer: {entry['difference']}"
        for entry in catalog.report()["unmatched_requests"]
    ]
    reached: list[int] = []
    for entry in catalog.log:
        if not reached or reached[-1] != entry.exchange:
            reached.append(entry.exchange)
    wanted = list(range(len(fixture.exchanges)))
    if reached != wanted:
        problems.append(f"exchanges reached in the order {reached}, expected {wanted}")
    return problems


async def _replayed(
    fixture: Fixture, config: Settings, environ: Mapping[str, str] | None
) -> tuple[Reply | None, GLMError | None, str]:
    """Run the fixture's turn: its reply or the upstream error, and where the persona came
    from."""
    images = _picture_urls(fixture)
    async with Runtime(config, environ=environ) as runtime:
        persona, source = persona_for(fixture, runtime)
        try:
            return (
                await asyncio.wait_for(_run(persona, fixture, runtime, images), TURN_TIMEOUT),
                None,
                source,
            )
        except GLMError as exc:
            return None, exc, source
        except OptionRefused as exc:  # a fixture's picture the turn service refuses
            raise ConfigError(f"the fixture's turn was refused: {exc}") from None


async def replay_fixture(
    fixture: Fixture,
    server: MockServer,
    *,
    settings: Settings | None = None,
    environ: Mapping[str, str] | None = None,
) -> ReplayResult:
    """Replay one fixture on ``server`` (which then serves only that fixture).

    ``environ`` gives the ``${VAR}`` values of persona files' MCP servers.
    """
    server.set_fixtures([fixture])
    started = time.perf_counter()
    path = str(fixture.source) if fixture.source else None
    source = "fixture"
    try:
        with tempfile.TemporaryDirectory(prefix="gf-replay-") as scratch:
            config = _settings_for(fixture, settings or Settings.defaults(), server, Path(scratch))
            reply, error, source = await _replayed(fixture, config, environ)
    except (ConfigError, TimeoutError, RuntimeError) as exc:
        ms = (time.perf_counter() - started) * 1000
        return ReplayResult(fixture.name, path, False, 0, ms, source, [f"{exc}"])
    ms = (time.perf_counter() - started) * 1000
    problems = _exchange_problems(fixture, server) + _error_problems(fixture, error)
    if reply is not None:
        problems += _reply_problems(fixture, reply)
    rounds = len(reply.rounds) if reply is not None else server.report()["requests"]
    return ReplayResult(fixture.name, path, not problems, rounds, ms, source, problems)


async def replay_fixtures(
    fixtures: Sequence[Fixture],
    *,
    settings: Settings | None = None,
    environ: Mapping[str, str] | None = None,
) -> list[ReplayResult]:
    """Replay fixtures one after another on one in-process mock server."""
    async with MockServer([]) as server:
        return [
            await replay_fixture(f, server, settings=settings, environ=environ) for f in fixtures
        ]


# ------------------------------------------------------------------ output


def render_table(results: Sequence[ReplayResult]) -> str:
    """A plain-text table: fixture, rounds, result, milliseconds; then the problems."""
    rows = [("fixture", "rounds", "result", "ms")]
    rows += [(r.fixture, str(r.rounds), "ok" if r.ok else "FAIL", f"{r.ms:.0f}") for r in results]
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    lines = [
        f"{a:<{widths[0]}}  {b:>{widths[1]}}  {c:<{widths[2]}}  {d:>{widths[3]}}"
        for a, b, c, d in rows
    ]
    failed = [r for r in results if not r.ok]
    for result in failed:
        lines.append(f"\n{result.fixture} ({result.path or 'in memory'}):")
        lines.extend(f"  - {problem}" for problem in result.problems)
    lines.append(f"\n{len(results) - len(failed)} of {len(results)} fixtures replayed correctly")
    return "\n".join(lines)


@contextmanager
def _quiet_library() -> Iterator[None]:
    """Retry warnings are expected while replaying error fixtures; keep the table readable."""
    logger = logging.getLogger("generic_framework")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


def replay_main(
    paths: Sequence[str | Path],
    *,
    settings: Settings | None = None,
    as_json: bool = False,
    out: TextIO | None = None,
    environ: Mapping[str, str] | None = None,
) -> int:
    """The ``replay`` command: replay, print a table (or JSON), return the exit code.

    Args:
        paths: fixture files or directories; empty means :func:`default_replay_paths`.
        settings: base settings (the endpoint and key are replaced by the mock's).
        as_json: print ``{"ok": ..., "results": [...]}`` instead of the table.
        out: where to print; standard output by default.
        environ: ``${VAR}`` values for persona files' MCP servers (the CLI passes the
            environment).

    Returns:
        0 when every fixture replayed correctly, 1 otherwise (also when none was found).

    Raises:
        FixtureError: a fixture file is invalid.
    """
    stream = out or sys.stdout
    fixtures = load_fixtures(*(paths or default_replay_paths()))
    with _quiet_library():
        results = asyncio.run(replay_fixtures(fixtures, settings=settings, environ=environ))
    ok = bool(results) and all(result.ok for result in results)
    if as_json:
        payload = {"ok": ok, "results": [asdict(result) for result in results]}
        stream.write(json.dumps(payload, indent=2) + "\n")
    elif results:
        stream.write(render_table(results) + "\n")
    else:
        stream.write("no fixtures found\n")
    stream.flush()
    return 0 if ok else 1
