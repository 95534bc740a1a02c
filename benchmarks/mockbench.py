"""Scenario 6: the project's mock replaying a recorded exchange, JSON and SSE, on one core."""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path

from benchmarks.runner import (
    CLIENT_CPU,
    ROOT,
    has_module,
    log,
    run_loadgen,
    server_process,
    summary,
)
from benchmarks.scenarios import Config, Row

FIXTURE = ROOT / "generic_framework" / "mock" / "fixtures" / "plain_answer.json"


@contextlib.contextmanager
def _mock() -> Iterator[int]:
    cmd = [sys.executable, "-m", "benchmarks.mock_server", str(FIXTURE)]
    with server_process(cmd, "the mock") as (_, port):
        yield port


def _load(port: int, body: Path, duration: float) -> dict[str, object]:
    return run_loadgen(
        [f"--port={port}", f"--body={body}", f"--duration={duration}"], CLIENT_CPU, duration + 60
    )


def mock_rps(cfg: Config) -> list[Row]:
    """Requests per second of the mock replaying a one-exchange fixture."""
    if not has_module(sys.executable, "generic_framework.mock.server") or not FIXTURE.exists():
        return [Row("6", "mock", "generic_framework.mock", {}, "skipped: the mock is not there")]
    request = json.loads(FIXTURE.read_text(encoding="utf-8"))["exchanges"][0]["request"]["body"]
    with _mock() as port:
        return [_row(cfg, port, {**request, "stream": stream}) for stream in (False, True)]


def _row(cfg: Config, port: int, request: dict[str, object]) -> Row:
    """``cfg.reps`` windows of load with ``request``, JSON or streamed as it asks."""
    kind = "sse" if request["stream"] else "json"
    body = Path(cfg.results_dir) / f"mock-body-{kind}.json"
    body.write_text(json.dumps(request), encoding="utf-8")
    label = f"mock, {'SSE' if request['stream'] else 'JSON'}, plain answer"
    log(f"[6] {label}")
    duration = 0.5 if cfg.quick else 2.0
    runs = [_load(port, body, duration) for _ in range(cfg.reps)]
    good = [r for r in runs if r.get("ok") and set(dict(r["statuses"])) == {"200"}]  # type: ignore[call-overload]
    note = "" if len(good) == len(runs) else f"failed: {runs[0]}"[:300]
    metrics = {
        "rps": summary([float(r["rps"]) for r in good]),  # type: ignore[arg-type]
        "client_cpu_pct": summary([float(r["client_cpu_pct"]) for r in good]),  # type: ignore[arg-type]
    }
    return Row("6", f"mock_{kind}", label, metrics, note)
