"""The fixture format: one JSON file per scenario, with metadata and ordered exchanges.

A fixture records what a client sent and what Z.AI answered, exchange by exchange, as parsed
JSON (a streamed answer as the list of its ``data:`` events). The mock server replays it; the
replay runner feeds :attr:`Fixture.user_input` to a persona and checks the outcome against
:attr:`Fixture.expected`. The JSON Schema in ``docs/design/fixture.schema.json`` is generated from
these models (``python -m generic_framework.mock.schema``).

Faults (:data:`Fault`) are injected per exchange: a delay, an HTTP error with a Z.AI body, a
dropped connection, a malformed body, a stream that stalls or breaks after N events. Each
failure fault applies to a number of attempts (``times``), so "fail twice, then succeed" is
``{"kind": "http_error", "code": "1302", "times": 2}``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from importlib import resources
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, model_validator

from generic_framework.errors import ConfigError

__all__ = [
    "DEFAULT_PERSONA",
    "FORMAT_VERSION",
    "BreakStreamFault",
    "ClientTurn",
    "DelayFault",
    "DropConnectionFault",
    "Exchange",
    "Expected",
    "ExpectedError",
    "Fault",
    "Fixture",
    "FixtureError",
    "HTTPErrorFault",
    "MalformedBodyFault",
    "MatchOptions",
    "RecordedRequest",
    "RecordedResponse",
    "StallStreamFault",
    "bundled_fixture_paths",
    "bundled_fixtures_dir",
    "check_unique",
    "load_fixture",
    "load_fixtures",
]

FORMAT_VERSION: Literal[1] = 1
DEFAULT_PERSONA = "scout"
PICTURE_NAME = r"^[A-Za-z0-9][A-Za-z0-9_.-]*\.(png|jpe?g)$"
"""A fixture's picture: a PNG or JPEG file name, no folder (it lies beside the fixture)."""


class FixtureError(ConfigError):
    """A fixture file is missing, is not valid JSON, or does not follow the fixture format."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class MatchOptions(_Strict):
    """How strictly requests are compared with this fixture's recorded requests.

    Attributes:
        system: ``ignore`` (default) leaves system messages out of the comparison, because the
            persona's prompt changes more often than its behaviour; ``exact`` compares them.
        history: ``ignore`` (default) compares only the current turn (everything after the
            last assistant message without tool calls), so a conversation with earlier turns
            still finds the answer; ``exact`` compares every message.
        tools: ``presence`` (default) compares whether tools are offered and whether the
            built-in web_search is among them, and requires every function the recorded answer
            calls to be offered; ``exact`` compares the names of all offered functions instead.
        thinking: ``ignore`` (default) leaves ``thinking`` out; ``exact`` compares it (its
            ``type`` and ``clear_thinking``; absent is its own value), so recordings that differ
            only in thinking are each served to the request that asks for it.
        model: ``ignore`` (default) leaves ``model`` out; ``exact`` compares it
            (case-insensitively), for recordings of several models answering one question.
    """

    system: Literal["ignore", "exact"] = "ignore"
    history: Literal["ignore", "exact"] = "ignore"
    tools: Literal["presence", "exact"] = "presence"
    thinking: Literal["ignore", "exact"] = "ignore"
    model: Literal["ignore", "exact"] = "ignore"

    @property
    def signature(self) -> tuple[str, str, str, str, str]:
        """A hashable form, used to group fixtures that normalise requests the same way."""
        return (self.system, self.history, self.tools, self.thinking, self.model)


class RecordedRequest(_Strict):
    """What the client sent: method, path and parsed JSON body (secrets removed)."""

    method: Literal["GET", "POST"] = "POST"
    path: str = Field(pattern=r"^/", examples=["/api/paas/v4/chat/completions"])
    body: dict[str, Any] | None = None


class RecordedResponse(_Strict):
    """What Z.AI answered: a JSON ``body``, or the ``events`` of an SSE stream.

    ``events`` holds each ``data:`` payload parsed as JSON, and the literal string ``"[DONE]"``
    for the terminator.
    """

    status: int = Field(default=200, ge=100, le=599)
    headers: dict[str, str] = Field(default_factory=dict)
    body: Any = None
    events: list[dict[str, Any] | Literal["[DONE]"]] | None = None

    @model_validator(mode="after")
    def _one_payload(self) -> RecordedResponse:
        if (self.body is None) == (self.events is None):
            raise ValueError("a response has either a JSON 'body' or a list of SSE 'events'")
        return self


class _FailureFault(_Strict):
    times: int | None = Field(
        default=1, ge=1, description="attempts this fault applies to; null means every attempt"
    )


class DelayFault(_Strict):
    """Wait ``ms`` milliseconds before answering (every attempt unless ``times`` is set)."""

    kind: Literal["delay"] = "delay"
    ms: float = Field(ge=0)
    times: int | None = Field(default=None, ge=1)


class HTTPErrorFault(_FailureFault):
    """Answer with an HTTP error and a Z.AI error body instead of the recorded response."""

    kind: Literal["http_error"] = "http_error"
    status: int = Field(default=429, ge=400, le=599)
    code: str = "1302"
    message: str = (
        "High concurrency usage of this API, please reduce concurrency or contact customer "
        "service to increase limits"
    )
    retry_after: float | None = Field(default=None, ge=0)


class DropConnectionFault(_FailureFault):
    """Close the connection: before any byte, or after ``after_bytes`` bytes of the body.

    With ``after_bytes``, the response head promises the whole recorded body (its
    ``Content-Length``) and the connection closes part-way through it.
    """

    kind: Literal["drop_connection"] = "drop_connection"
    after_bytes: int = Field(default=0, ge=0)


class MalformedBodyFault(_FailureFault):
    """Answer with a body that is not the JSON the client expects.

    By default: status 200 and the recorded body cut short (for a stream, one truncated frame
    and ``[DONE]``). ``body`` gives the text instead (``""`` is an empty body). ``status`` and
    ``content_type`` send the text verbatim with that status and type, stream or not: a
    proxy's HTML error page is ``{"status": 502, "content_type": "text/html", "body": ...}``.
    """

    kind: Literal["malformed_body"] = "malformed_body"
    body: str | None = None
    status: int = Field(default=200, ge=100, le=599)
    content_type: str | None = None


class StallStreamFault(_FailureFault):
    """Send ``after_events`` events, then go silent for ``seconds`` before finishing the stream.

    A stall still serves the exchange; a client that gives up and retries gets it again.
    """

    kind: Literal["stall_stream"] = "stall_stream"
    after_events: int = Field(default=1, ge=0)
    seconds: float = Field(default=3600.0, gt=0)


class BreakStreamFault(_FailureFault):
    """Send ``after_events`` events, then drop the connection (no ``[DONE]``)."""

    kind: Literal["break_stream"] = "break_stream"
    after_events: int = Field(default=1, ge=0)


Fault = Annotated[
    DelayFault
    | HTTPErrorFault
    | DropConnectionFault
    | MalformedBodyFault
    | StallStreamFault
    | BreakStreamFault,
    Field(discriminator="kind"),
]


class Exchange(_Strict):
    """One request and its response, with optional faults and a human note."""

    request: RecordedRequest
    response: RecordedResponse
    faults: list[Fault] = Field(default_factory=list)
    note: str = ""


class ExpectedError(_Strict):
    """The error a replay must end with: the error class name and, optionally, the code."""

    type: str = Field(examples=["RateLimitError"])
    code: str | None = None


class Expected(_Strict):
    """What the persona's reply must look like after replaying the fixture.

    Every field left ``null`` is not checked. ``citations`` lists the cited URLs in order.
    """

    content: str | None = None
    stop_reason: Literal["completed", "max_rounds", "length", "content_filter"] | None = None
    rounds: int | None = Field(default=None, ge=0)
    citations: list[str] | None = None
    error: ExpectedError | None = None


class ClientTurn(_Strict):
    """What an OpenAI client added to the turn through the service (docs/design/0612).

    A fixture of a turn driven by a client's own tools or output format says so here, so the
    replay runner asks the persona the same way (``TurnOptions``), and the question stays out of
    the recorded-question lists offered to people (a chat line cannot offer a client's tool).

    Attributes:
        tools: the client's function tools, in OpenAI's shape (``{"type": "function",
            "function": {"name", "description", "parameters"}}``); the client runs them, and a
            later exchange's request carries their results.
        response_format: OpenAI's ``response_format`` (``json_object`` or ``json_schema``).
    """

    tools: list[dict[str, Any]] = Field(default_factory=list)
    response_format: dict[str, Any] | None = None


class Fixture(_Strict):
    """One scenario: metadata for people and the replay runner, then the ordered exchanges."""

    version: Literal[1] = FORMAT_VERSION
    name: str = Field(pattern=r"^[a-z0-9][a-z0-9_.-]*$", max_length=100)
    description: str = ""
    model: str = "glm-4.7"
    endpoint: Literal["general", "coding"] = "general"
    persona: str = DEFAULT_PERSONA
    user_input: str = Field(description="what the user typed, including a leading '//'")
    settings: dict[str, Any] = Field(
        default_factory=dict, description="Settings overrides the replay runner applies"
    )
    match: MatchOptions = Field(default_factory=MatchOptions)
    client: ClientTurn | None = Field(
        default=None, description="an OpenAI client's own tools or output format (0612)"
    )
    pictures: list[Annotated[str, Field(pattern=PICTURE_NAME)]] = Field(
        default_factory=list,
        description="picture files the user sent with user_input, in order, beside the fixture",
    )
    expected: Expected | None = None
    exchanges: list[Exchange] = Field(min_length=1)

    _source: Path | None = PrivateAttr(default=None)

    @property
    def source(self) -> Path | None:
        """The file the fixture was loaded from, if any."""
        return self._source

    @property
    def streams(self) -> bool:
        """True when the first chat request was a streaming one (replay uses Persona.stream)."""
        for exchange in self.exchanges:
            body = exchange.request.body or {}
            if "messages" in body:
                return bool(body.get("stream"))
        return False

    def picture_paths(self) -> list[Path]:
        """The files of :attr:`pictures`: in the fixture file's folder, or in the bundled
        fixtures' folder for a fixture built in memory."""
        folder = self.source.parent if self.source else bundled_fixtures_dir()
        return [folder / name for name in self.pictures]

    def to_json(self) -> str:
        """The fixture as indented JSON text, the way fixture files are written."""
        data = self.model_dump(mode="json", exclude_none=True)
        if not data["settings"]:
            del data["settings"]
        for written, exchange in zip(data["exchanges"], self.exchanges, strict=True):
            for fault_data, fault in zip(written["faults"], exchange.faults, strict=True):
                # "times": null means every attempt; left out, it would read back as the default.
                if fault.times is None and type(fault).model_fields["times"].default is not None:
                    fault_data["times"] = None
        if not data["pictures"]:
            del data["pictures"]
        for exchange in data["exchanges"]:
            for key in ("faults", "note"):
                if not exchange[key]:
                    del exchange[key]
        return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def bundled_fixtures_dir() -> Path:
    """The directory of the fixtures shipped inside the package."""
    return Path(str(resources.files("generic_framework.mock") / "fixtures"))


def bundled_fixture_paths() -> list[Path]:
    """The bundled fixture files, in name order."""
    return sorted(bundled_fixtures_dir().glob("*.json"))


def load_fixture(path: str | Path) -> Fixture:
    """Read and validate one fixture file.

    Raises:
        FixtureError: the file is unreadable, not JSON, or not a valid fixture; the message
            names the file and the first problem.
    """
    file = Path(path)
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except OSError as exc:
        raise FixtureError(f"cannot read fixture {file}: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise FixtureError(
            f"fixture {file} is not UTF-8 text: {exc.reason} at byte {exc.start}"
        ) from None
    except json.JSONDecodeError as exc:
        raise FixtureError(f"fixture {file} is not valid JSON: {exc}") from None
    except RecursionError:
        raise FixtureError(f"fixture {file} is nested too deeply to be a fixture") from None
    try:
        fixture = Fixture.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "(top level)"
        raise FixtureError(f"fixture {file}: {where}: {first['msg']}") from None
    fixture._source = file
    return fixture


def load_fixtures(*paths: str | Path) -> list[Fixture]:
    """Load fixtures from files and directories (``*.json``, recursively, in name order).

    With no path, the bundled fixtures are loaded.

    Raises:
        FixtureError: a path does not exist, a file is invalid, or two fixtures share a name.
    """
    files: list[Path] = []
    for path in paths or (bundled_fixtures_dir(),):
        target = Path(path)
        if target.is_dir():
            files.extend(sorted(target.rglob("*.json")))
        elif target.is_file():
            files.append(target)
        else:
            raise FixtureError(
                f"no fixture file or directory at {target}: give fixture .json files or "
                "folders of them"
            )
    return check_unique(load_fixture(file) for file in files)


def check_unique(fixtures: Iterable[Fixture]) -> list[Fixture]:
    """Return the fixtures as a list, refusing two with the same name."""
    seen: dict[str, Fixture] = {}
    for fixture in fixtures:
        if fixture.name in seen:
            first = seen[fixture.name].source or "(in memory)"
            raise FixtureError(
                f"two fixtures are named {fixture.name!r}: {first} and {fixture.source}"
            )
        seen[fixture.name] = fixture
    return list(seen.values())
