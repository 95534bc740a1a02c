"""Prometheus metrics of one runtime: turns, tools, web searches, tokens and the upstream.

Every :class:`Metrics` has its own :class:`~prometheus_client.CollectorRegistry` (not the
process-wide default one), so two runtimes in one process, or two tests, never share or
re-register a metric; the service exposes its runtime's registry at ``GET /metrics``.

Label values are bounded: persona names and models come from the configuration, tools from the
persona's tool set (anything else the model names is ``unknown``), statuses are HTTP statuses or
one of a few failure words, and business codes are Z.AI's numeric codes (anything else is
``other``). No conversation id or free text ever becomes a label.

The recording methods are on the hot path of every turn and upstream call: each looks up a
cached child (one dict access) and increments it; nothing is formatted or allocated beyond the
key tuple. The gauges of calls in flight and queued cost nothing per call: they are read from
the clients' own counters when ``/metrics`` is scraped.
"""

from __future__ import annotations

import re
import weakref
from collections.abc import Callable, Hashable
from typing import Any, Protocol

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.exposition import choose_encoder
from prometheus_client.gc_collector import GCCollector
from prometheus_client.platform_collector import PlatformCollector
from prometheus_client.process_collector import ProcessCollector

__all__ = ["PREFIX", "Metrics", "SlotSource", "code_label"]

PREFIX = "generic_framework"
"""Every metric's name starts with this."""

# Turns take seconds to minutes: a web search alone can take a minute (docs/design/0003).
TURN_BUCKETS = (0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0, 120.0, 240.0)
FIRST_TEXT_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0)
UPSTREAM_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0, 120.0, 240.0)

_CODE = re.compile(r"\d{1,8}")


class SlotSource(Protocol):
    """What the in-flight and queued gauges read (a :class:`~generic_framework.wire.client.
    GLMClient`)."""

    @property
    def in_flight(self) -> int:
        """Upstream calls holding a concurrency slot now."""
        ...

    @property
    def queued(self) -> int:
        """Upstream calls waiting for a slot now."""
        ...


def code_label(code: str | None) -> str:
    """A Z.AI business code as a label value: digits as sent, ``""`` for none, else ``other``."""
    if not code:
        return ""
    return code if _CODE.fullmatch(code) else "other"


class _Family:
    """A labelled metric with its children cached by label values (one dict access per use)."""

    __slots__ = ("_children", "_metric")

    def __init__(self, metric: Any) -> None:
        self._metric = metric
        self._children: dict[Hashable, Any] = {}

    def child(self, *values: str) -> Any:
        found = self._children.get(values)
        if found is None:
            found = self._children[values] = self._metric.labels(*values)
        return found


# name (after PREFIX), kind, help, labels, buckets (histograms only)
_SPECS: tuple[tuple[str, str, str, tuple[str, ...], tuple[float, ...]], ...] = (
    ("turns", "counter", "User turns by persona and stop reason (error: the turn raised; "
     "cancelled: the caller went away).", ("persona", "stop_reason"), ()),
    ("turn_duration_seconds", "histogram", "Time from a turn's start (before its "
     "conversation's lock) to its reply or error.", ("persona",), TURN_BUCKETS),
    ("time_to_first_text_seconds", "histogram", "Streamed turns: time from the turn's start "
     "to its first text delta.", ("persona",), FIRST_TEXT_BUCKETS),
    ("rounds", "counter", "Model calls made by turns (one per round).", ("persona",), ()),
    ("tool_calls", "counter", "Tool calls by tool and outcome (ok, or error: the model was "
     "sent an error text).", ("persona", "tool", "outcome"), ()),
    ("web_searches", "counter", "Web searches seen by the client (builtin: model calls that "
     "returned web_search sources; client: Web Search API calls).", ("persona", "mode"), ()),
    ("tokens", "counter", "Tokens reported by Z.AI (prompt includes cached, completion "
     "includes reasoning).", ("persona", "model", "kind"), ()),
    ("upstream_requests", "counter", "HTTP exchanges with Z.AI by status (or timeout / "
     "connection_error) and business code.", ("endpoint", "status", "code"), ()),
    ("upstream_request_duration_seconds", "histogram", "One HTTP exchange with Z.AI, from "
     "its slot to the end of its body (streams: to the last event).", ("endpoint",),
     UPSTREAM_BUCKETS),
    ("upstream_retries", "counter", "Retries of upstream requests by the error that caused "
     "them.", ("endpoint", "reason"), ()),
)  # fmt: skip


def _families(registry: CollectorRegistry) -> dict[str, _Family]:
    made: dict[str, _Family] = {}
    for name, kind, text, labels, buckets in _SPECS:
        if kind == "histogram":
            metric: Any = Histogram(
                f"{PREFIX}_{name}", text, labels, buckets=buckets, registry=registry
            )
        else:
            metric = Counter(f"{PREFIX}_{name}", text, labels, registry=registry)
        made[name] = _Family(metric)
    return made


class Metrics:
    """The runtime's metrics, registered in :attr:`registry`.

    Args:
        registry: where to register; a new :class:`CollectorRegistry` when omitted.
        process: also register the standard process, platform and GC collectors
            (``process_cpu_seconds_total``, ``python_info``...).
    """

    def __init__(self, registry: CollectorRegistry | None = None, *, process: bool = True) -> None:
        self.registry = registry if registry is not None else CollectorRegistry(auto_describe=True)
        self._clients: weakref.WeakSet[Any] = weakref.WeakSet()
        f = _families(self.registry)
        self._turns, self._turn_seconds = f["turns"], f["turn_duration_seconds"]
        self._first_text, self._rounds = f["time_to_first_text_seconds"], f["rounds"]
        self._tools, self._searches, self._tokens = f["tool_calls"], f["web_searches"], f["tokens"]
        self._requests = f["upstream_requests"]
        self._upstream_seconds = f["upstream_request_duration_seconds"]
        self._retries = f["upstream_retries"]
        in_flight = Gauge(
            f"{PREFIX}_upstream_in_flight",
            "Upstream calls holding a concurrency slot (LLM_MAX_CONCURRENCY).",
            registry=self.registry,
        )
        queued = Gauge(
            f"{PREFIX}_upstream_queued",
            "Upstream calls waiting for a slot.",
            registry=self.registry,
        )
        in_flight.set_function(self._sum("in_flight"))
        queued.set_function(self._sum("queued"))
        if process:
            ProcessCollector(registry=self.registry)
            PlatformCollector(registry=self.registry)
            GCCollector(registry=self.registry)

    def _sum(self, name: str) -> Callable[[], float]:
        return lambda: float(sum(getattr(client, name) for client in list(self._clients)))

    # ------------------------------------------------------------------ the upstream

    def watch(self, client: SlotSource) -> None:
        """Count ``client``'s calls in flight and queued in the gauges (held weakly)."""
        self._clients.add(client)

    def upstream_response(self, endpoint: str, status: str, code: str) -> None:
        """One HTTP exchange ended with ``status`` and business ``code`` (bounded here by
        :func:`code_label`)."""
        self._requests.child(endpoint, status, code_label(code) if code else "").inc()

    def upstream_duration(self, endpoint: str, seconds: float) -> None:
        """How long one exchange held its slot."""
        self._upstream_seconds.child(endpoint).observe(seconds)

    def upstream_retry(self, endpoint: str, reason: str) -> None:
        """A failed attempt is about to be retried; ``reason`` is the error's class name."""
        self._retries.child(endpoint, reason).inc()

    # ------------------------------------------------------------------ turns

    def turn(self, persona: str, stop_reason: str, seconds: float, rounds: int) -> None:
        """A turn ended."""
        self._turns.child(persona, stop_reason).inc()
        self._turn_seconds.child(persona).observe(seconds)
        if rounds:
            self._rounds.child(persona).inc(rounds)

    def first_text(self, persona: str, seconds: float) -> None:
        """A streamed turn produced its first text."""
        self._first_text.child(persona).observe(seconds)

    def tool_call(self, persona: str, tool: str, ok: bool) -> None:
        """One tool call ended (``tool`` already bounded by the caller)."""
        self._tools.child(persona, tool, "ok" if ok else "error").inc()

    def web_searches(self, persona: str, mode: str, count: int) -> None:
        """``count`` web searches of a turn, by ``mode`` (``builtin`` or ``client``)."""
        self._searches.child(persona, mode).inc(count)

    def tokens(
        self, persona: str, model: str, *, prompt: int, completion: int, cached: int, reasoning: int
    ) -> None:
        """A turn's token counts, by kind."""
        for kind, count in (
            ("prompt", prompt),
            ("completion", completion),
            ("cached", cached),
            ("reasoning", reasoning),
        ):
            if count:
                self._tokens.child(persona, model, kind).inc(count)

    # ------------------------------------------------------------------ exposition

    def exposition(self, accept: str = "") -> tuple[bytes, str]:
        """Everything in :attr:`registry` and its ``Content-Type``, in the format ``accept``
        asks for: OpenMetrics when the scraper prefers it, else the Prometheus text format
        0.0.4 (prometheus-client's own negotiation)."""
        encoder, content_type = choose_encoder(accept)
        return encoder(self.registry), content_type
