"""The loaded fixtures, their progress, and the choice of which exchange answers a request.

Exchanges are prepared once (:mod:`generic_framework.mock.prepared`) and indexed by the key of
their recorded request, so answering a request is a dict lookup and a few comparisons.

Selection (``docs/design/0402-request-matching.md``): among the exchanges whose recorded
request has the incoming request's key, take the first of

1. an exchange that is its fixture's next one (the cursor);
2. the exchange its fixture served last (a client retrying after a timeout the mock cannot see);
3. the first exchange of a fixture (a client that abandoned it half-way starts again),

preferring one recorded in the same mode (stream or not), then a fixture already in progress,
then load order. A fixture whose last exchange was served rewinds to its first one, so a demo
can be repeated. Faults count attempts per exchange since the catalog was built or reset, so
"fail twice, then succeed" fails twice in all, not twice per pass.
"""

from __future__ import annotations

import difflib
import threading
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from generic_framework.mock.fixture import (
    Fault,
    Fixture,
    FixtureError,
    MatchOptions,
    StallStreamFault,
)
from generic_framework.mock.normalize import (
    ChatShape,
    RequestKey,
    chat_shape,
    common_prefix,
    common_suffix,
    describe_difference,
)
from generic_framework.mock.prepared import PreparedExchange, prepare, request_key, request_kind
from generic_framework.mock.validation import MockError, validate_chat

__all__ = [
    "NO_MATCH_CODE",
    "Catalog",
    "FixtureState",
    "Incoming",
    "LogEntry",
    "Selection",
]

NO_MATCH_CODE = "mock_no_match"
"""The business code of the mock's "no recorded answer" error (HTTP 400)."""

_LOG_LIMIT = 10_000
_UNMATCHED_LIMIT = 200


def _prepare_all(fixture: Fixture) -> list[PreparedExchange]:
    """Prepare a fixture's exchanges, refusing recorded requests the mock itself would reject."""
    prepared = []
    where = fixture.source or fixture.name
    for index, exchange in enumerate(fixture.exchanges):
        try:
            item = prepare(exchange, index, fixture.match)
        except (TypeError, AttributeError, KeyError, IndexError, ValueError) as exc:
            # The format types bodies and events only as JSON; a shape the mock cannot serve
            # (a message that is not an object, an event without choices) ends up here.
            raise FixtureError(
                f"fixture {where}: exchange {index} cannot be served: {type(exc).__name__}: {exc}"
            ) from None
        if item.kind == "chat":
            try:
                validate_chat(exchange.request.body)
            except MockError as error:
                raise FixtureError(
                    f"fixture {where}: exchange {index} records a request the mock rejects: "
                    f"{error.code} {error.message}"
                ) from None
        prepared.append(item)
    return prepared


@dataclass(slots=True)
class FixtureState:
    """A fixture's progress: the next exchange, attempts per exchange, completed passes."""

    fixture: Fixture
    order: int
    exchanges: list[PreparedExchange]
    cursor: int = 0
    last_served: int | None = None
    passes: int = 0
    attempts: list[int] = field(default_factory=list)
    served: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.attempts = [0] * len(self.exchanges)
        self.served = [0] * len(self.exchanges)

    def reset(self) -> None:
        """Back to the first exchange, with all counters cleared."""
        self.cursor, self.last_served, self.passes = 0, None, 0
        self.attempts = [0] * len(self.exchanges)
        self.served = [0] * len(self.exchanges)

    def advance(self, index: int) -> None:
        """Record that exchange ``index`` was answered; rewind after the last one."""
        self.served[index] += 1
        self.last_served = index
        self.cursor = index + 1
        if self.cursor == len(self.exchanges):
            self.cursor = 0
            self.passes += 1


@dataclass(slots=True)
class Incoming:
    """A parsed request: its kind, and a cache of its keys per option set."""

    kind: str
    method: str
    path: str
    body: Any
    stream: bool = False
    shape: ChatShape | None = None

    @property
    def tool_stream(self) -> bool:
        """A streamed chat request asking for ``tool_stream`` (function arguments in pieces)."""
        return self.stream and isinstance(self.body, dict) and self.body.get("tool_stream") is True

    def key(self, options: MatchOptions) -> RequestKey:
        """The request's key under ``options``."""
        if self.shape is not None:
            return self.shape.key(options)
        return request_key(self.kind, self.method, self.path, self.body, options)

    @classmethod
    def parse(cls, method: str, path: str, body: Any) -> Incoming:
        """Classify a request by path and normalise its body once."""
        kind = request_kind(path)
        shape = chat_shape(body) if kind == "chat" and isinstance(body, dict) else None
        return cls(kind, method, path, body, stream=bool(shape and shape.stream), shape=shape)


@dataclass(slots=True)
class Selection:
    """The exchange chosen for a request, and how to answer this attempt."""

    state: FixtureState
    exchange: PreparedExchange
    attempt: int
    failure: Fault | None
    delay: float


@dataclass(slots=True)
class LogEntry:
    """One answered request: which fixture and exchange, and what was done."""

    fixture: str
    exchange: int
    attempt: int
    outcome: str


Candidate = tuple[FixtureState, PreparedExchange]


class Catalog:
    """All loaded fixtures, their progress, and a log of what was served.

    Thread-safe: selection and reset take a lock, so a test thread may reset or report while
    the server thread answers requests.
    """

    def __init__(self, fixtures: Sequence[Fixture]) -> None:
        self._lock = threading.Lock()
        self.states = [
            FixtureState(fixture, order, _prepare_all(fixture))
            for order, fixture in enumerate(fixtures)
        ]
        self._groups: dict[
            tuple[str, ...], tuple[MatchOptions, dict[RequestKey, list[Candidate]]]
        ] = {}
        for state in self.states:
            options = state.fixture.match
            _, index = self._groups.setdefault(options.signature, (options, {}))
            for exchange in state.exchanges:
                index.setdefault(exchange.key, []).append((state, exchange))
        self.models = frozenset(_recorded_models(fixtures))
        """Model ids (lower case) the fixtures record: served even when the table lacks them."""
        self.log: deque[LogEntry] = deque(maxlen=_LOG_LIMIT)
        self.unmatched: deque[dict[str, Any]] = deque(maxlen=_UNMATCHED_LIMIT)
        self.counts = {
            "requests": 0,
            "served": 0,
            "faults": 0,
            "injected": 0,
            "unmatched": 0,
            "rejected": 0,
            # API requests being answered now, and the most there ever were at once: how a
            # test sees that a client kept to its concurrency budget.
            "in_flight": 0,
            "max_in_flight": 0,
        }

    # ------------------------------------------------------------------ selection

    def _candidates(self, request: Incoming) -> list[Candidate]:
        found: list[Candidate] = []
        for options, index in self._groups.values():
            found.extend(index.get(request.key(options), ()))
        if request.shape is not None:
            # Under tools "exact" the offered names are part of the key already; a recorded
            # answer calling a function that was not offered is then a recorded mistake of the
            # model (an unknown tool), to be replayed as such (docs/design/0402).
            offered = request.shape.functions
            found = [
                c
                for c in found
                if c[0].fixture.match.tools == "exact" or c[1].required_functions <= offered
            ]
        return found

    @staticmethod
    def _best(tier: list[Candidate], stream: bool) -> Candidate | None:
        if not tier:
            return None
        return min(tier, key=lambda c: (c[1].stream != stream, c[0].cursor == 0, c[0].order))

    def select(self, request: Incoming) -> Selection:
        """Choose the exchange that answers ``request`` and advance its fixture.

        Raises:
            MockError: 400 with code :data:`NO_MATCH_CODE` when no fixture has a recorded
                answer; the message names the closest fixture and the first difference.
        """
        with self._lock:
            self.counts["requests"] += 1
            candidates = self._candidates(request)
            chosen = (
                self._best([c for c in candidates if c[0].cursor == c[1].index], request.stream)
                or self._best(
                    [c for c in candidates if c[0].last_served == c[1].index], request.stream
                )
                or self._best([c for c in candidates if c[1].index == 0], request.stream)
            )
            if chosen is None:
                raise self._no_match(request, candidates)
            return self._take(*chosen)

    def _take(self, state: FixtureState, exchange: PreparedExchange) -> Selection:
        if exchange.index not in (state.cursor, state.last_served):
            state.cursor = 0  # an abandoned pass starts over
        attempt = state.attempts[exchange.index]
        state.attempts[exchange.index] += 1
        failure = exchange.failure_for(attempt)
        if failure is None or isinstance(failure, StallStreamFault):
            state.advance(exchange.index)
            self.counts["served"] += 1
        else:
            self.counts["faults"] += 1
        outcome = "served" if failure is None else failure.kind
        self.log.append(LogEntry(state.fixture.name, exchange.index, attempt, outcome))
        return Selection(state, exchange, attempt, failure, exchange.delay_for(attempt))

    def enter(self) -> None:
        """An API request arrived: count it in flight (and raise the high-water mark)."""
        with self._lock:
            self.counts["in_flight"] += 1
            self.counts["max_in_flight"] = max(
                self.counts["max_in_flight"], self.counts["in_flight"]
            )

    def leave(self) -> None:
        """An API request was answered (or its client went away)."""
        with self._lock:
            self.counts["in_flight"] -= 1

    def note_rejected(self) -> None:
        """Count a request rejected by validation."""
        with self._lock:
            self.counts["requests"] += 1
            self.counts["rejected"] += 1

    def note_injected(self) -> None:
        """Count a request failed by the random failure rate (no exchange is used)."""
        with self._lock:
            self.counts["requests"] += 1
            self.counts["injected"] += 1

    # ------------------------------------------------------------------ diagnostics

    def _closest(self, request: Incoming) -> tuple[FixtureState, PreparedExchange, str] | None:
        best: tuple[tuple[int, ...], FixtureState, PreparedExchange, str] | None = None
        for state in self.states:
            options = state.fixture.match
            actual = request.key(options)
            for exchange in state.exchanges:
                if exchange.kind != request.kind:
                    continue
                prefix = suffix = 0
                if request.shape is not None:
                    positions = request.shape.keyed(options)[1]
                    prefix = common_prefix(exchange.key, actual)
                    suffix = common_suffix(exchange.key, actual)
                    text = describe_difference(exchange.key, actual, positions)
                    likeness = _likeness(exchange.key[1][prefix:], actual[1][prefix:])
                else:
                    text = f"expected {exchange.key[1:]!r}, got {actual[1:]!r}"
                    likeness = _likeness(exchange.key[1:], actual[1:])
                tools_equal = int(exchange.key[2:4] == actual[2:4])
                nearness = (prefix, suffix, likeness, tools_equal)
                score = (*nearness, int(state.cursor == exchange.index))
                if best is None or score > best[0]:
                    best = (score, state, exchange, text)
        return None if best is None else best[1:]

    def examples(self) -> list[dict[str, str]]:
        """The distinct user inputs of the loaded fixtures, with fixture, persona, endpoint and
        kind.

        Inputs that end in a normal answer come first (web queries with sources, other web
        queries, plain messages), the failure demonstrations last. ``kind`` is ``example`` (a
        question a person can ask), ``fault`` (a failure demonstration), ``client`` (a turn
        driven by an OpenAI client's own tools or output format, which a chat line cannot ask)
        or ``picture`` (a question asked with the fixture's pictures, which typed alone it is
        not).
        """
        seen: set[str] = set()
        result = []
        for state in sorted(self.states, key=_example_rank):
            text = state.fixture.user_input
            if text and text not in seen:
                seen.add(text)
                result.append(
                    {
                        "input": text,
                        "fixture": state.fixture.name,
                        "persona": state.fixture.persona,
                        "endpoint": state.fixture.endpoint,
                        "kind": _example_kind(state),
                    }
                )
        return result

    def questions(
        self, persona: str | None, endpoint: str | None, *, faults: bool = False
    ) -> list[str]:
        """The user inputs of :meth:`examples` a person can ask ``persona`` (``None``: any),
        best first; ``//`` questions only from ``endpoint`` (``general`` or ``coding``;
        ``None``: any), where ``WEB_SEARCH_MODE=auto`` searches as they were recorded.

        The failure demonstrations are left out unless ``faults`` (then they are all there is),
        and so are the turns of an OpenAI client's own tools or output format and the
        questions asked with a picture.
        """
        wanted = "fault" if faults else "example"
        return [
            e["input"]
            for e in self.examples()
            if e["kind"] == wanted
            and (persona is None or e["persona"] == persona)
            and (endpoint is None or e["endpoint"] == endpoint or not e["input"].startswith("//"))
        ]

    def _no_match(self, request: Incoming, candidates: list[Candidate]) -> MockError:
        self.counts["unmatched"] += 1
        closest = self._closest(request)
        if candidates:
            state, exchange = candidates[0]
            difference = (
                f"the request equals exchange {exchange.index} of {state.fixture.name!r}, but "
                f"that fixture expects exchange {state.cursor} next (requests out of order)"
            )
            closest = (state, exchange, difference)
        elif closest is not None and closest[1].key == request.key(closest[0].fixture.match):
            missing = ", ".join(sorted(closest[1].required_functions))
            closest = (
                closest[0],
                closest[1],
                f"the recorded answer calls {missing}, which this request does not offer",
            )
        examples = self.examples()
        extra: dict[str, Any] = {
            "closest_fixture": closest[0].fixture.name if closest else None,
            "closest_exchange": closest[1].index if closest else None,
            "difference": closest[2] if closest else "no fixtures are loaded",
            "examples": examples,
        }
        self.unmatched.append({"path": request.path, **extra, "examples": len(examples)})
        return MockError(400, NO_MATCH_CODE, _no_match_message(extra), extra=extra)

    # ------------------------------------------------------------------ report

    def reset(self) -> None:
        """Rewind every fixture and clear the counters and logs."""
        with self._lock:
            for state in self.states:
                state.reset()
            self.log.clear()
            self.unmatched.clear()
            for name in self.counts:
                if name != "in_flight":  # requests being answered are still in flight
                    self.counts[name] = 0
            self.counts["max_in_flight"] = self.counts["in_flight"]

    def report(self) -> dict[str, Any]:
        """Which fixtures were served, which never were, and the unmatched requests."""
        with self._lock:
            fixtures: list[dict[str, Any]] = [
                {
                    "name": state.fixture.name,
                    "exchanges": len(state.exchanges),
                    "served": list(state.served),
                    "completed": state.passes,
                    "next": state.cursor,
                }
                for state in self.states
            ]
            return {
                **self.counts,
                "fixtures": fixtures,
                "never_served": [s.fixture.name for s in self.states if not any(s.served)],
                "unmatched_requests": list(self.unmatched),
            }


def _recorded_models(fixtures: Sequence[Fixture]) -> set[str]:
    models = set()
    for fixture in fixtures:
        models.add(fixture.model.strip().lower())
        for exchange in fixture.exchanges:
            body = exchange.request.body or {}
            if isinstance(body.get("model"), str):
                models.add(body["model"].strip().lower())
    return models


def _likeness(expected: Any, actual: Any) -> int:
    """How alike two key parts read, 0-100 (only used to name the closest fixture)."""
    return round(100 * difflib.SequenceMatcher(None, repr(expected), repr(actual)).ratio())


def _example_kind(state: FixtureState) -> str:
    if state.fixture.client is not None:
        return "client"
    if state.fixture.pictures:
        return "picture"
    return "fault" if _example_rank(state)[0] == 3 else "example"


def _example_rank(state: FixtureState) -> tuple[int, int]:
    expected = state.fixture.expected
    failing = any(e.faults or e.response.status >= 400 for e in state.fixture.exchanges)
    if failing or (
        expected is not None
        and (expected.error is not None or expected.stop_reason not in (None, "completed"))
    ):
        return (3, state.order)
    if not state.fixture.user_input.lstrip().startswith("//"):
        return (2, state.order)
    return (0 if expected is not None and expected.citations else 1, state.order)


def _no_match_message(extra: dict[str, Any]) -> str:
    lines = ["No recorded answer matches this request."]
    if extra["closest_fixture"] is not None:
        lines.append(
            f"Closest fixture: {extra['closest_fixture']!r} "
            f"(exchange {extra['closest_exchange']}); first difference: {extra['difference']}."
        )
    else:
        lines.append(f"({extra['difference']}.)")
    if extra["examples"]:
        inputs = "; ".join(repr(example["input"]) for example in extra["examples"])
        lines.append(f"Recorded inputs: {inputs}")
    return " ".join(lines)
