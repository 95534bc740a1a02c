"""The metrics keep their own counts and load prometheus-client only when read (docs/design/0704).

What a scrape shows must stay what prometheus-client's own ``Counter`` and ``Histogram`` show,
and the ``_created`` series follow prometheus-client's own switch, a module attribute that is
not part of its documented API: the version check below fails loudly when it changes.
"""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Iterator
from importlib import metadata

import pytest
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client import metrics as client_metrics
from telemetry_support import samples

from generic_framework.telemetry.metrics import UPSTREAM_BUCKETS, Metrics

PROMETHEUS_CLIENT_CHECKED = ("0.26.0",)
"""prometheus-client versions whose ``metrics._use_created`` switch was read."""


@pytest.fixture
def created_series_off() -> Iterator[None]:
    client_metrics.disable_created_metrics()
    try:
        yield
    finally:
        client_metrics.enable_created_metrics()


def test_the_created_switch_is_where_it_was_read() -> None:
    version = metadata.version("prometheus-client")
    assert version in PROMETHEUS_CLIENT_CHECKED, (
        f"prometheus-client {version}: check that metrics._use_created is still its switch for "
        "the _created series, then add the version to PROMETHEUS_CLIENT_CHECKED"
    )
    assert isinstance(client_metrics._use_created, bool)


def _reference(values: list[float]) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """What prometheus-client's own metrics expose for the same recordings."""
    registry = CollectorRegistry()
    count = Counter("generic_framework_upstream_retries", "r", ("endpoint", "reason"),
                    registry=registry)  # fmt: skip
    count.labels("chat", "RateLimitError").inc(2)
    spread = Histogram("generic_framework_upstream_request_duration_seconds", "d",
                       ("endpoint",), buckets=UPSTREAM_BUCKETS, registry=registry)  # fmt: skip
    for value in values:
        spread.labels("chat").observe(value)
    return samples(generate_latest(registry).decode())


def _ours(values: list[float]) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    metrics = Metrics(process=False)
    metrics.upstream_retry("chat", "RateLimitError")
    metrics.upstream_retry("chat", "RateLimitError")
    for value in values:
        metrics.upstream_duration("chat", value)
    return samples(metrics.exposition()[0].decode())


def _without_created(found: dict[tuple[str, frozenset[tuple[str, str]]], float]) -> set[object]:
    return {(k, v) for k, v in found.items() if not k[0].endswith("_created")}


def test_a_scrape_shows_what_prometheus_client_s_own_metrics_show() -> None:
    values = [0.0, 0.05, 0.07, 0.1, 1.0, 3.3, 240.0, 500.0]  # on bounds, between, beyond
    ours, reference = _ours(values), _reference(values)
    assert _without_created(reference) <= _without_created(ours)
    bucket = "generic_framework_upstream_request_duration_seconds_bucket"
    assert ours[(bucket, frozenset({("endpoint", "chat"), ("le", "0.05")}))] == 2
    assert ours[(bucket, frozenset({("endpoint", "chat"), ("le", "+Inf")}))] == len(values)
    created = {k[0] for k in ours if k[0].endswith("_created")}
    assert created == {k[0] for k in reference if k[0].endswith("_created")}
    assert len(created) == 2


def test_the_created_series_follow_prometheus_client_s_switch(created_series_off: None) -> None:
    values = [0.3]
    ours = _ours(values)
    assert not [k for k in ours if k[0].endswith("_created")]
    assert _without_created(ours) >= _without_created(_reference(values))


def test_counts_from_several_threads_are_all_kept() -> None:
    metrics = Metrics(process=False)

    def record() -> None:
        for _ in range(5000):
            metrics.tool_call("p", "t", True)
            metrics.upstream_duration("chat", 0.2)

    threads = [threading.Thread(target=record) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    found = samples(metrics.exposition()[0].decode())
    key = frozenset({("persona", "p"), ("tool", "t"), ("outcome", "ok")})
    assert found[("generic_framework_tool_calls_total", key)] == 20000
    count = "generic_framework_upstream_request_duration_seconds_count"
    assert found[(count, frozenset({("endpoint", "chat")}))] == 20000


def test_a_counter_refuses_to_go_down() -> None:
    metrics = Metrics(process=False)
    with pytest.raises(ValueError, match="non-negative"):
        metrics.web_searches("p", "builtin", -1)


def test_a_turn_without_a_scrape_never_imports_prometheus_client() -> None:
    code = (
        "import sys\n"
        "from generic_framework.telemetry import Telemetry\n"
        "metrics = Telemetry.create().metrics\n"
        "metrics.turn('p', 'completed', 0.1, 2)\n"
        "metrics.upstream_duration('chat', 0.1)\n"
        "assert 'prometheus_client' not in sys.modules, 'imported before the first read'\n"
        "body, _ = metrics.exposition()\n"
        "assert b'generic_framework_turns_total' in body and b'process_cpu' in body\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
