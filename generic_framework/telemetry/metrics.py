"""Prometheus metrics of one runtime: turns, tools, web searches, tokens and the upstream.

Every :class:`Metrics` has its own :class:`~prometheus_client.CollectorRegistry` (not the
process-wide default one), so two runtimes in one process, or two tests, never share or
re-register a metric; the service exposes its runtime's registry at ``GET /metrics``.

Label values are bounded: persona names and models come from the configuration, tools from the
persona's tool set (anything else the model names is ``unknown``), statuses are HTTP statuses or
one of a few failure words, and business codes are Z.AI's numeric codes (anything else is
``other``). No conversation id or free text ever becomes a label.

The recording methods are on the hot path of every turn and upstream call, so the counts are
kept here as plain numbers (a cached child per label values: one dict access and an addition
under a lock), and prometheus-client is imported only when the metrics are first read
(:meth:`Metrics.exposition`, :attr:`Metrics.registry`): a program that never serves
``/metrics`` (the CLI, a script using a Persona) never loads it, about 8 ms of start-up and
1.5 MB (docs/design/0704). What a scrape reads is what prometheus-client's own ``Counter`` and
``Histogram`` would show: ``_total`` and ``_created`` samples, cumulative ``le`` buckets, ``_sum``
and ``_count``. The gauges of calls in flight and queued cost nothing per call: they are read
from the clients' own counters when ``/metrics`` is scraped.
"""

from __future__ import annotations

import re
import threading
import time
import weakref
from bisect import bisect_left
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry
    from prometheus_client.metrics_core import Metric

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


class _Count:
    """One labelled counter's value."""

    __slots__ = ("_lock", "created", "value")

    def __init__(self, lock: threading.Lock) -> None:
        self._lock = lock
        self.value = 0.0
        self.created = time.time()

    def inc(self, amount: float = 1.0) -> None:
        if amount < 0:
            raise ValueError("counters can only be incremented by non-negative amounts")
        with self._lock:
            self.value += amount


class _Spread:
    """One labelled histogram's bucket counts (not cumulative: one per bucket, then +Inf)."""

    __slots__ = ("_bounds", "_lock", "counts", "created", "total")

    def __init__(self, lock: threading.Lock, bounds: tuple[float, ...]) -> None:
        self._lock = lock
        self._bounds = bounds
        self.counts = [0] * (len(bounds) + 1)
        self.total = 0.0
        self.created = time.time()

    def observe(self, amount: float) -> None:
        # A value equal to a bound falls in that bound's bucket (le: less than or equal).
        index = bisect_left(self._bounds, amount)
        with self._lock:
            self.counts[index] += 1
            self.total += amount


class _Family:
    """A labelled metric with its children cached by label values (one dict access per use)."""

    __slots__ = ("_children", "_lock", "buckets", "kind", "labels", "name", "text")

    def __init__(
        self,
        name: str,
        kind: str,
        text: str,
        labels: tuple[str, ...],
        buckets: tuple[float, ...],
        lock: threading.Lock,
    ) -> None:
        self.name, self.kind, self.text = name, kind, text
        self.labels, self.buckets = labels, buckets
        self._lock = lock
        self._children: dict[tuple[str, ...], Any] = {}

    def child(self, *values: str) -> Any:
        found = self._children.get(values)
        if found is None:
            if len(values) != len(self.labels):
                raise ValueError(f"{self.name}: {len(self.labels)} label values expected")
            made = _Spread(self._lock, self.buckets) if self.buckets else _Count(self._lock)
            found = self._children.setdefault(values, made)
        return found

    def family(self) -> Metric:
        """The family as prometheus-client exposes it (imported on first read)."""
        from prometheus_client import metrics as client_metrics
        from prometheus_client.metrics_core import CounterMetricFamily, HistogramMetricFamily
        from prometheus_client.samples import Sample
        from prometheus_client.utils import floatToGoString

        # prometheus-client's own switch for the _created series (its environment variable
        # PROMETHEUS_DISABLE_CREATED_SERIES, or disable_created_metrics()); pinned by
        # tests/telemetry/test_metrics_lazy.py.
        created = bool(getattr(client_metrics, "_use_created", True))
        children = list(self._children.items())
        if self.kind == "counter":
            counter = CounterMetricFamily(self.name, self.text, labels=self.labels)
            for values, count in children:
                stamp = count.created if created else None
                counter.add_metric(list(values), count.value, created=stamp)
            return counter
        histogram = HistogramMetricFamily(self.name, self.text, labels=self.labels)
        bounds = [*(floatToGoString(b) for b in self.buckets), "+Inf"]  # type: ignore[no-untyped-call]
        for values, spread in children:
            with self._lock:
                counts, total = list(spread.counts), spread.total
            running, cumulative = 0, []
            for bound, count in zip(bounds, counts, strict=True):
                running += count
                cumulative.append((bound, float(running)))
            histogram.add_metric(list(values), cumulative, total)
            if created:
                labels = dict(zip(self.labels, values, strict=True))
                histogram.samples.append(Sample(f"{self.name}_created", labels, spread.created))
        return histogram


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
    ("web_searches", "counter", "Web searches of turns (builtin: model calls that returned "
     "web_search sources; client: search_web calls the Web Search API answered; mcp: "
     "search_web calls the Web Search MCP server answered).", ("persona", "mode"), ()),
    ("tokens", "counter", "Tokens reported by Z.AI (prompt includes cached, completion "
     "includes reasoning).", ("persona", "model", "kind"), ()),
    ("upstream_requests", "counter", "HTTP exchanges with Z.AI by status (or timeout / "
     "connection_error) and business code.", ("endpoint", "status", "code"), ()),
    ("upstream_request_duration_seconds", "histogram", "One HTTP exchange with Z.AI, from "
     "its slot to the end of its body (streams: to the last event).", ("endpoint",),
     UPSTREAM_BUCKETS),
    ("upstream_retries", "counter", "Retries of upstream requests by the error that caused "
     "them.", ("endpoint", "reason"), ()),
    ("context_overflows", "counter", "Model calls refused as too long for the context window "
     "(1261), by outcome (trimmed: sent again without the oldest history turns; failed: "
     "still too long, or no history to drop).", ("persona", "outcome"), ()),
    ("telegram_updates", "counter", "Telegram updates by outcome (received: every update "
     "taken in; answered: a turn or a command answered; refused: a stranger, a limit or a "
     "message that is not text; failed: no answer could be made or sent).", ("outcome",), ()),
    ("chat_updates", "counter", "Chat platform updates by platform and outcome (the outcomes "
     "of telegram_updates, for every platform).", ("platform", "outcome"), ()),
)  # fmt: skip


def _families(lock: threading.Lock) -> dict[str, _Family]:
    return {
        name: _Family(f"{PREFIX}_{name}", kind, text, labels, buckets, lock)
        for name, kind, text, labels, buckets in _SPECS
    }


class Metrics:
    """The runtime's metrics; :attr:`registry` holds them for prometheus-client.

    Args:
        registry: where to register; a new :class:`CollectorRegistry` on first use when
            omitted.
        process: also register the standard process, platform and GC collectors
            (``process_cpu_seconds_total``, ``python_info``...).
    """

    def __init__(self, registry: CollectorRegistry | None = None, *, process: bool = True) -> None:
        self._process = process
        self._registry: CollectorRegistry | None = None
        self._registry_guard = threading.Lock()
        self._clients: weakref.WeakSet[Any] = weakref.WeakSet()
        self._families = f = _families(threading.Lock())
        self._turns, self._turn_seconds = f["turns"], f["turn_duration_seconds"]
        self._first_text, self._rounds = f["time_to_first_text_seconds"], f["rounds"]
        self._tools, self._searches, self._tokens = f["tool_calls"], f["web_searches"], f["tokens"]
        self._requests = f["upstream_requests"]
        self._upstream_seconds = f["upstream_request_duration_seconds"]
        self._retries = f["upstream_retries"]
        self._overflows = f["context_overflows"]
        self._telegram, self._chat_updates = f["telegram_updates"], f["chat_updates"]
        self._reachable: float | None = None
        if registry is not None:
            self._registry = self._register(registry)

    @property
    def registry(self) -> CollectorRegistry:
        """This runtime's own prometheus-client registry (made, and prometheus-client
        imported, on first use): the metrics, the two gauges and, with ``process``, the
        standard collectors."""
        with self._registry_guard:
            if self._registry is None:
                self._registry = self._new_registry()
            return self._registry

    def _new_registry(self) -> CollectorRegistry:
        from prometheus_client import CollectorRegistry

        return self._register(CollectorRegistry(auto_describe=True))

    def _register(self, registry: CollectorRegistry) -> CollectorRegistry:
        from prometheus_client.gc_collector import GCCollector
        from prometheus_client.platform_collector import PlatformCollector
        from prometheus_client.process_collector import ProcessCollector

        registry.register(_Collector(self))
        if self._process:
            ProcessCollector(registry=registry)
            PlatformCollector(registry=registry)
            GCCollector(registry=registry)
        return registry

    def collect(self) -> Iterator[Metric]:
        """Every family, then the gauges of calls in flight and queued (read now)."""
        from prometheus_client.metrics_core import GaugeMetricFamily

        for family in self._families.values():
            yield family.family()
        clients = list(self._clients)
        for name, text in (
            ("in_flight", "Upstream calls holding a concurrency slot (LLM_MAX_CONCURRENCY)."),
            ("queued", "Upstream calls waiting for a slot."),
        ):
            value = float(sum(getattr(client, name) for client in clients))
            yield GaugeMetricFamily(f"{PREFIX}_upstream_{name}", text, value=value)
        if self._reachable is not None:
            text = "1 when the last readiness probe reached the upstream endpoint, else 0."
            yield GaugeMetricFamily(f"{PREFIX}_upstream_reachable", text, value=self._reachable)

    # ------------------------------------------------------------------ the upstream

    def upstream_reachable(self, ok: bool) -> None:
        """The last ``/readyz`` probe's verdict on the upstream (a gauge from then on)."""
        self._reachable = 1.0 if ok else 0.0

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

    def context_overflow(self, persona: str, outcome: str) -> None:
        """A model call was too long for the context window (``trimmed`` or ``failed``)."""
        self._overflows.child(persona, outcome).inc()

    def turn(self, persona: str, stop_reason: str, seconds: float, rounds: int) -> None:
        """A turn ended."""
        self._turns.child(persona, stop_reason).inc()
        self._turn_seconds.child(persona).observe(seconds)
        if rounds:
            self._rounds.child(persona).inc(rounds)

    def first_text(self, persona: str, seconds: float) -> None:
        """A streamed turn produced its first text."""
        self._first_text.child(persona).observe(seconds)

    def tool_call(self, persona: str, tool: str, ok: bool, count: int = 1) -> None:
        """``count`` tool calls ended (``tool`` already bounded by the caller)."""
        self._tools.child(persona, tool, "ok" if ok else "error").inc(count)

    def web_searches(self, persona: str, mode: str, count: int) -> None:
        """``count`` web searches of a turn, by ``mode`` (``builtin``, ``client`` or ``mcp``)."""
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

    # ------------------------------------------------------------------ chat platforms

    def chat_update(self, platform: str, outcome: str) -> None:
        """An update of ``platform`` was ``received``, ``answered``, ``refused`` or ``failed``
        (Telegram's are counted in ``telegram_updates`` too, the counter's earlier name)."""
        self._chat_updates.child(platform, outcome).inc()
        if platform == "telegram":
            self._telegram.child(outcome).inc()

    # ------------------------------------------------------------------ exposition

    def exposition(self, accept: str = "") -> tuple[bytes, str]:
        """Everything in :attr:`registry` and its ``Content-Type``, in the format ``accept``
        asks for: OpenMetrics when the scraper prefers it, else the Prometheus text format
        0.0.4 (prometheus-client's own negotiation)."""
        from prometheus_client.exposition import choose_encoder

        encoder, content_type = choose_encoder(accept)
        return encoder(self.registry), content_type


class _Collector:
    """Hands a registry the families of one :class:`Metrics` at each scrape."""

    def __init__(self, metrics: Metrics) -> None:
        self._metrics = weakref.ref(metrics)

    def collect(self) -> Iterator[Metric]:
        metrics = self._metrics()
        if metrics is not None:
            yield from metrics.collect()
